"""RETURNN's ``LayerNormVariantsLSTM`` unit: an LSTM with layer normalization at selectable
places and variational dropout, run as a ``tf.while_loop`` over time (used by the ``rec`` layer).

Per frame (gate order input ``i``, cell-candidate ``j``, forget ``f``, output ``o``)::

    below = LN_in(x W_ff)  if global_norm else x W_ff + b_ff        (once for all frames)
    z = below + (LN_re(h' W_re) if global_norm else h' W_re)        h' = h_{t-1} * mask_h
    z = LN_joined(z)                                                 if global_norm_joined
    i, j, f, o = split(z);  each LN_gate(.)                          if per_gate_norm
    c_t = sigmoid(f) * c_{t-1} + sigmoid(i) * tanh(j) * mask_j
    c_t = LN_c(c_t)                                                  if cell_norm
    h_t = sigmoid(o) * tanh(c_t if cell_norm_in_output else c before LN_c)
    h_t = LN_h(h_t)                                                  if hidden_norm

``LN(v) = (v - mean) / sqrt(var + variance_epsilon) * gamma + beta`` over the feature axis, with
``gamma`` initialised to ``norm_gain`` and ``beta`` to ``norm_shift`` (plus ``forget_bias`` for
the norms RETURNN adds it to: input, joined and forget-gate norms; ``LN_re`` has no beta). The
dropout masks (``dropout`` on ``tanh(j)``, ``dropout_h`` on ``h_{t-1}``) are drawn once per
sequence (training only). Padded frames keep the state and output 0.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import tensorflow as tf

from returnn.errors import NetworkError, known_list
from returnn.tf.layers.helpers import dropout as inverted_dropout, normalize
from returnn.tf.util.tensor_array import stacked

DEFAULTS: Dict[str, Any] = {
    "norm_gain": 1.0, "norm_shift": 0.0, "forget_bias": 0.0, "dropout": 0.0, "dropout_h": 0.0,
    "with_concat": False, "global_norm": True, "global_norm_joined": False, "per_gate_norm": False,
    "cell_norm": True, "cell_norm_in_output": True, "hidden_norm": False, "variance_epsilon": 1e-12,
}


class LayerNormLstm(tf.Module):
    """Parameters (created through the owning layer's ``weight``) and the loop of the unit. A
    ``tf.Module``: the layer holding it tracks its variables (training, checkpoints)."""

    def __init__(self, layer, n_in: int, n_out: int, unit_opts: Dict[str, Any]):
        super().__init__(name="cell")
        unknown = set(unit_opts) - set(DEFAULTS)
        if unknown:
            raise NetworkError("%s: unknown unit_opts %s for layernormvariantslstm (known: %s)"
                               % (layer.desc, known_list(unknown), known_list(DEFAULTS)))
        o = dict(DEFAULTS, **unit_opts)
        if o["global_norm"] and o["global_norm_joined"]:
            raise NetworkError("%s: unit_opts global_norm and global_norm_joined exclude each other" % layer.desc)
        if o["per_gate_norm"] and (o["global_norm"] or o["global_norm_joined"]):
            raise NetworkError("%s: unit_opts per_gate_norm excludes global_norm and global_norm_joined" % layer.desc)
        self.o, self.n = o, n_out
        self._weight = layer.weight  # used while building only
        fb = float(o["forget_bias"]) if o["forget_bias"] > 0 else 0.0
        self.ff_with_bias = not (o["global_norm"] or o["global_norm_joined"] or o["per_gate_norm"])
        if o["with_concat"]:
            # one matrix over [x, h]; as two blocks here (same function, the rows split at n_in)
            self.ff_with_bias = not (o["per_gate_norm"] or o["global_norm_joined"])
            if o["global_norm"]:
                raise NetworkError("%s: unit_opts with_concat and global_norm exclude each other" % layer.desc)
        self.W = layer.weight("W_ff", [n_in, 4 * n_out], init_option="forward_weights_init")
        self.W_re = layer.weight("W_re", [n_out, 4 * n_out], init_option="recurrent_weights_init")
        self.b = None
        if self.ff_with_bias:
            self.b = layer.weight("b_ff_re" if o["with_concat"] else "b_ff", [4 * n_out], [0.0] * 2 * n_out + [fb] * n_out + [0.0] * n_out)
        self.norms: Dict[str, List[Optional[tf.Variable]]] = {}  # tracked by tf.Module (dict of lists)
        if o["global_norm"]:
            self._norm("input_below", 4 * n_out, fb)
            self._norm("state_below", 4 * n_out, None)
        if o["global_norm_joined"]:
            self._norm("lstm_in", 4 * n_out, fb)
        if o["per_gate_norm"]:
            for gate in ("i_gate", "j_gate", "o_gate"):
                self._norm(gate, n_out, 0.0)
            self._norm("f_gate", n_out, fb)
        if o["cell_norm"]:
            self._norm("new_c", n_out, 0.0)
        if o["hidden_norm"]:
            self._norm("new_h", n_out, 0.0)
        del self._weight

    def _norm(self, name: str, size: int, beta_extra: Optional[float]) -> None:
        gain, shift = float(self.o["norm_gain"]), float(self.o["norm_shift"])
        gamma = self._weight("gamma_" + name, [size], [gain] * size)
        beta = None if beta_extra is None else \
            self._weight("beta_" + name, [size], [shift + beta_extra] * size)
        self.norms[name] = [gamma, beta]

    def ln(self, name: str, v: tf.Tensor) -> tf.Tensor:
        gamma, beta = self.norms[name]
        y = normalize(v, -1, float(self.o["variance_epsilon"])) * gamma
        return y + beta if beta is not None else y

    def _mask(self, rate: float, batch: tf.Tensor, seed: Optional[tf.Tensor]) -> Optional[tf.Tensor]:
        if not rate or seed is None:
            return None
        return inverted_dropout(tf.ones([batch, self.n]), rate, seed)

    def prepare(self, below: tf.Tensor) -> tf.Tensor:
        """The input part of the gates from ``x W`` (any leading axes): bias and ``LN_in``."""
        if self.b is not None:
            below += self.b
        if self.o["global_norm"]:
            below = self.ln("input_below", below)
        return below

    def masks(self, batch: tf.Tensor, seed: Optional[tf.Tensor]):
        """The dropout masks (on tanh(j), on h) for ``batch`` sequences; None outside training."""
        return (self._mask(float(self.o["dropout"]), batch, None if seed is None else seed + [0, 11]),
                self._mask(float(self.o["dropout_h"]), batch, None if seed is None else seed + [0, 13]))

    def step(self, below_t: tf.Tensor, h: tf.Tensor, c: tf.Tensor, masks=(None, None)):
        """One frame: ``below_t`` from :meth:`prepare` (B, 4 n_out) and the state -> new ``(h, c)``."""
        o = self.o
        mask_j, mask_h = masks
        h_in = h * mask_h if mask_h is not None else h
        state = tf.matmul(h_in, self.W_re)
        if o["global_norm"]:
            state = self.ln("state_below", state)
        z = below_t + state
        if o["global_norm_joined"]:
            z = self.ln("lstm_in", z)
        i, j, f, g_out = tf.split(z, 4, axis=-1)
        if o["per_gate_norm"]:
            i, j, f, g_out = (self.ln(k, v) for k, v in zip(("i_gate", "j_gate", "f_gate", "o_gate"),
                                                            (i, j, f, g_out)))
        cand = tf.tanh(j)
        if mask_j is not None:
            cand = cand * mask_j
        c_new = tf.sigmoid(f) * c + tf.sigmoid(i) * cand
        c_out = c_new
        if o["cell_norm"]:
            c_new = self.ln("new_c", c_new)
            if o["cell_norm_in_output"]:
                c_out = c_new
        h_new = tf.sigmoid(g_out) * tf.tanh(c_out)
        if o["hidden_norm"]:
            h_new = self.ln("new_h", h_new)
        return h_new, c_new

    def run(self, below: tf.Tensor, seq_len: tf.Tensor, seed: Optional[tf.Tensor],
            initial: Optional[Tuple[tf.Tensor, tf.Tensor]] = None) -> Tuple[tf.Tensor, Tuple]:
        """``below``: the input times ``W`` (B, T, 4 n_out); ``seed``: None outside training;
        ``initial``: the state ``(h, c)`` each sequence starts from (None: zeros). Returns the output
        (B, T, n_out) and the final state ``(c, h)`` (RETURNN's LSTM state order)."""
        n, x = self.n, below
        below = self.prepare(below)
        batch, n_time = tf.shape(x)[0], tf.shape(x)[1]
        masks = self.masks(batch, seed)
        xs = tf.TensorArray(x.dtype, size=n_time).unstack(tf.transpose(below, [1, 0, 2]))
        valid = tf.TensorArray(tf.bool, size=n_time).unstack(tf.transpose(tf.sequence_mask(seq_len, n_time)))
        out = tf.TensorArray(x.dtype, size=n_time, element_shape=tf.TensorShape([None, n]))
        zeros = tf.zeros([batch, n], x.dtype)
        h0, c0 = initial if initial is not None else (zeros, zeros)

        def body(t, h, c, out_ta):
            h_new, c_new = self.step(xs.read(t), h, c, masks)
            m = valid.read(t)[:, None]
            out_ta = out_ta.write(t, tf.where(m, h_new, tf.zeros_like(h_new)))
            return t + 1, tf.where(m, h_new, h), tf.where(m, c_new, c), out_ta

        _, h, c, out = tf.while_loop(lambda t, *_: t < n_time, body, [tf.constant(0), h0, c0, out])
        y = tf.ensure_shape(tf.transpose(stacked(out, [0, batch, n]), [1, 0, 2]), [None, None, n])
        return y, (c, h)  # the output and each sequence's state (c, h) after its last frame
