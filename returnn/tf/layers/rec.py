"""Recurrent layer ``rec``: one fast LSTM implementation behind all of RETURNN's LSTM unit names.

LSTM definition (per frame ``t``, ``z = x_t W + h_{t-1} W_re + bias``, split into four blocks of
size ``n_out`` in the gate order **(input, cell-candidate, forget, output)**)::

    i, g, f, o = split(z)
    c_t = sigmoid(f + forget_bias) * c_{t-1} + sigmoid(i) * tanh(g)
    h_t = sigmoid(o) * tanh(c_t)

``forget_bias`` is a constant (not a variable), default 1.0, settable by
``"unit_opts": {"forget_bias": ...}``. The initial state is zero.

The input projection ``x W`` is one big matmul over all frames (sparse inputs are an embedding
lookup); only the recurrent matmul is inside the time loop (``tf.while_loop``, works with unknown
T). On padded frames (t >= seq_len) the state is carried over unchanged and the output is 0.
``direction: -1`` runs over each sequence reversed within its own length.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence

import tensorflow as tf

from returnn.errors import NetworkError, known_list
from returnn.tf.layers.base import Layer, LayerOutput, OutputSpec, RunContext, register_layer
from returnn.tf.layers.basic import check_sources, dropout_sources, first_seq_len, project_sources

LSTM_UNITS = ("lstm", "nativelstm", "nativelstm2", "standardlstm", "basiclstm", "lstmblock")
UNIT_OPTS = ("forget_bias",)


def lstm_scan(x_proj: tf.Tensor, seq_len: tf.Tensor, w_re: tf.Tensor, forget_bias: float) -> tf.Tensor:
    """Runs the LSTM recurrence.

    :param x_proj: (B, T, 4H) input projection incl. bias, gate order (i, g, f, o)
    :param seq_len: (B,) int32
    :param w_re: (H, 4H) recurrent weights
    :param forget_bias: constant added to the forget gate pre-activation
    :return: (B, T, H) outputs, 0 on padded frames
    """
    n_hidden = w_re.shape[0]
    batch = tf.shape(x_proj)[0]
    n_time = tf.shape(x_proj)[1]
    xs = tf.TensorArray(x_proj.dtype, size=n_time, element_shape=tf.TensorShape([None, 4 * n_hidden]))
    xs = xs.unstack(tf.transpose(x_proj, [1, 0, 2]))
    masks = tf.TensorArray(tf.bool, size=n_time, element_shape=tf.TensorShape([None]))
    masks = masks.unstack(tf.transpose(tf.sequence_mask(seq_len, maxlen=n_time)))
    out = tf.TensorArray(x_proj.dtype, size=n_time, element_shape=tf.TensorShape([None, n_hidden]))
    zeros = tf.zeros([batch, n_hidden], dtype=x_proj.dtype)

    def body(t, h, c, out_ta):
        z = xs.read(t) + tf.matmul(h, w_re)
        i, g, f, o = tf.split(z, 4, axis=-1)
        c_new = tf.sigmoid(f + forget_bias) * c + tf.sigmoid(i) * tf.tanh(g)
        h_new = tf.sigmoid(o) * tf.tanh(c_new)
        m = masks.read(t)[:, None]
        out_ta = out_ta.write(t, tf.where(m, h_new, tf.zeros_like(h_new)))
        return t + 1, tf.where(m, h_new, h), tf.where(m, c_new, c), out_ta

    _, _, _, out = tf.while_loop(lambda t, *_: t < n_time, body, [tf.constant(0), zeros, zeros, out])
    y = tf.transpose(out.stack(), [1, 0, 2])
    return tf.ensure_shape(y, [None, None, n_hidden])


@register_layer
class RecLayer(Layer):
    """``{"class": "rec", "unit": "nativelstm2", "n_out": H, "direction": 1 or -1}``."""

    layer_class = "rec"
    # "unroll" and "max_seq_len" are RETURNN implementation hints; accepted, nothing to do here.
    extra_options = frozenset({"unit", "direction", "unit_opts", "unroll", "max_seq_len"})

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[OutputSpec], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(name, self.layer_class, sources)
        unit = opts.get("unit", "lstm")
        if not isinstance(unit, str) or unit.lower() not in LSTM_UNITS:
            raise NetworkError("layer %r (rec): unknown unit %r (known: %s)" % (name, unit, known_list(LSTM_UNITS)))
        self.unit = unit.lower()
        self.direction = opts.get("direction", 1)
        if self.direction not in (1, -1):
            raise NetworkError("layer %r (rec): direction must be 1 or -1, got %r" % (name, self.direction))
        unit_opts = dict(opts.get("unit_opts") or {})
        unknown = set(unit_opts) - set(UNIT_OPTS)
        if unknown:
            raise NetworkError("layer %r (rec): unknown unit_opts %s (known: %s)"
                               % (name, known_list(unknown), known_list(UNIT_OPTS)))
        self.forget_bias = float(unit_opts.get("forget_bias", 1.0))
        if not all(s.has_time for s in sources):
            raise NetworkError("layer %r (rec): all sources need a time axis" % name)
        n_out = self.require_n_out()
        n_in = sum(s.dim for s in sources)
        self.W = self.weight("W", [n_in, 4 * n_out])
        self.W_re = self.weight("W_re", [n_out, 4 * n_out])
        self.bias = self.weight("bias", [4 * n_out], "zeros")
        self.out_spec = OutputSpec(dim=n_out, sparse=False, has_time=True)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        sources = dropout_sources(self, sources, ctx)
        seq_len = first_seq_len(sources)
        x = project_sources(sources, self.W) + self.bias
        if self.direction == -1:
            x = tf.reverse_sequence(x, seq_len, seq_axis=1, batch_axis=0)
        y = lstm_scan(x, seq_len, self.W_re, self.forget_bias)
        if self.direction == -1:
            y = tf.reverse_sequence(y, seq_len, seq_axis=1, batch_axis=0)
        return LayerOutput(y, seq_len, self.out_spec)
