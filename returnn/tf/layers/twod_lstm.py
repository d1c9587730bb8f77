"""``twod_lstm``: RETURNN's TwoDLSTMLayer (2D LSTM over source x target positions) with TensorFlow ops.

RETURNN's layer runs a CUDA-only kernel; this computes the same recurrence anywhere. ``from``: the
source ``(B, S, Fs)`` and the target ``(B, T, Ft)`` (inside a rec loop one target frame ``(B, Ft)``:
then one grid row per step). Every cell ``(t, s)`` gets the input ``[source_s; target_t] W_re``, the
output of its left neighbour ``(t, s-1)`` times ``Vh_re`` and of its upper neighbour ``(t-1, s)``
times ``Vv_re``; the 5 gate blocks in RETURNN's layout (input i, forget f, lambda l, output o,
cell input z)::

    c = sig(i) tanh(z) + sig(f) sig(l) c_up + sig(f) (1 - sig(l)) c_left,   h = sig(o) tanh(c)

with zeros outside the grid (and in the first row: the previous row of the loop in a rec loop).
Cells past a sequence's source length are 0 (their state too), as RETURNN's ``valid`` mask. The output
per target position pools the row over the source: ``last`` (at the last source position; 0 for an
empty source), ``max`` (over all positions, the empty ones 0), ``average`` (over the real ones),
``weighted`` (softmax over all positions of ``target W_att h``). Output ``(B, T, n_out)`` with the
target's time axis. Parameters as RETURNN names them: ``rec-twod/W_re`` (Fs + Ft, 5 n),
``rec-twod/Vh_re``, ``rec-twod/Vv_re`` (n, 5 n) and for ``weighted`` ``rec-twod/W_att`` (Ft, n); all
initialised by ``recurrent_weights_init``, else ``forward_weights_init``, else xavier (RETURNN's scope
initializer). Wavefront order here: all cells of one anti-diagonal at once (T + S - 1 steps).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.helpers import check_sources, new_feature_dim
from returnn.tf.layers.options import Option, one_of
from returnn.tf.util.tensor_array import stacked

POOLINGS = ("last", "max", "average", "weighted")


def _cell(pre: tf.Tensor, c_up: tf.Tensor, c_left: tf.Tensor, valid: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
    """RETURNN's 2D LSTM cell on pre-activations (..., 5 n) -> (h, c), zero where not ``valid``."""
    i, f, lam, o, z = tf.split(pre, 5, axis=-1)
    f, lam = tf.sigmoid(f), tf.sigmoid(lam)
    c = tf.sigmoid(i) * tf.tanh(z) + f * lam * c_up + f * (1.0 - lam) * c_left
    c = c * valid
    return tf.sigmoid(o) * tf.tanh(c) * valid, c


@register_layer
class TwoDLSTMLayer(Layer):
    """See the module docstring."""

    layer_class = "twod_lstm"
    options = (
        Option("pooling", "last", "how a row becomes the output: 'last', 'max', 'average' or 'weighted'"),
        Option("unit_opts", None, "RETURNN: options of the native cell (it takes none besides pooling)", only=(None, {})),
        Option("forward_weights_init", None, "init of the parameters when recurrent_weights_init is not set"),
        Option("recurrent_weights_init", None, "init of all parameters (RETURNN's cell uses it for each)"),
        Option("bias_init", None, "RETURNN: init of a bias", noop="RETURNN's 2D LSTM has no bias parameter"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources, 2, 2)
        src, trg = sources
        self.pooling = one_of(self.desc, "pooling", self.opt("pooling"), POOLINGS)
        if src.sparse or trg.sparse or src.feature_dim_axis is None or trg.feature_dim_axis is None:
            raise NetworkError("%s: both sources must be dense with a feature axis" % self.desc)
        if src.time_dim_axis is None or src.batch_dim_axis is None or src.batch_ndim != 3:
            raise NetworkError("%s: the first source must be (batch, time, feature), got %s" % (self.desc,
                                                                                               src.short_repr()))
        self.step_mode = trg.time_dim_axis is None
        if trg.batch_ndim != (2 if self.step_mode else 3):
            raise NetworkError("%s: the second source must be (batch, time, feature) or one frame, got %s"
                               % (self.desc, trg.short_repr()))
        n = self.require_n_out()
        init = self.opt("recurrent_weights_init") or self.opt("forward_weights_init") or "glorot_uniform"
        self.n = n
        self.W_re = self.weight("rec-twod/W_re", [src.dim + trg.dim, 5 * n], init)
        self.Vh_re = self.weight("rec-twod/Vh_re", [n, 5 * n], init)
        self.Vv_re = self.weight("rec-twod/Vv_re", [n, 5 * n], init)
        self.W_att = self.weight("rec-twod/W_att", [trg.dim, n], init) if self.pooling == "weighted" else None
        feat = self.out_feature_dim() if self.opts.get("out_dim") is not None else new_feature_dim(name, n)
        dims = [d for i, d in enumerate(trg.dims) if i != trg.feature_dim_axis] + [feat]
        self.output = Data(name, dims=dims, feature_dim_axis=len(dims) - 1)

    # ---- pieces
    def _inputs(self, src: LayerOutput, trg: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """Source part (S, B, 5n), target part (T, B, 5n) of the input projection, source mask (S, B)."""
        src = src.copy_as_batch_time_feature()
        n_src = self.sources[0].dim
        x_src = tf.einsum("bsf,fg->sbg", src.tensor, self.W_re[:n_src])
        x_trg = tf.einsum("tbf,fg->tbg", trg, self.W_re[n_src:])
        mask = tf.transpose(src.sequence_mask())
        return x_src, x_trg, mask

    def _pool(self, rows: tf.Tensor, mask: tf.Tensor, trg: tf.Tensor) -> tf.Tensor:
        """Rows (T, S, B, n) -> (T, B, n)."""
        if self.pooling == "max":
            return tf.reduce_max(rows, axis=1)
        m = tf.cast(mask, rows.dtype)[None, :, :, None]  # (1, S, B, 1)
        if self.pooling == "average":
            return tf.reduce_sum(rows * m, axis=1) / tf.reduce_sum(m, axis=1)
        if self.pooling == "weighted":
            energies = tf.einsum("tbf,fn,tsbn->tsb", trg, self.W_att, rows)
            return tf.reduce_sum(tf.nn.softmax(energies, axis=1)[..., None] * rows, axis=1)
        last = tf.one_hot(tf.reduce_sum(tf.cast(mask, tf.int32), axis=0) - 1, tf.shape(rows)[1], axis=0)  # (S, B)
        return tf.reduce_sum(rows * last[None, :, :, None], axis=1)

    # ---- whole sequences
    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        if self.step_mode:
            raise NetworkError("%s: on one target frame it runs only inside a rec loop" % self.desc)
        src, trg = sources[0], sources[1].copy_as_batch_time_feature()
        trg_tm = tf.transpose(trg.tensor, [1, 0, 2])
        x_src, x_trg, mask = self._inputs(src, trg_tm)
        rows = self._grid(x_src, x_trg, mask)  # (T, S, B, n)
        y = tf.transpose(self._pool(rows, mask, trg_tm), [1, 0, 2])
        return self.make_output(y, [sources[1]])

    def _grid(self, x_src: tf.Tensor, x_trg: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
        """All cells, one anti-diagonal per step; returns the outputs (T, S, B, n)."""
        n_s, n_t, n_b = tf.shape(x_src)[0], tf.shape(x_trg)[0], tf.shape(x_src)[1]
        ys = tf.range(n_t)
        zeros = tf.zeros(tf.stack([n_t, n_b, self.n]))
        n_d = tf.maximum(n_t + n_s - 1, 0)  # 0 when a side has no frame (all sequences empty)
        diags = tf.TensorArray(tf.float32, size=n_d, element_shape=tf.TensorShape([None, None, self.n]))

        def body(d, h_prev, c_prev, diags):
            xs = d - ys  # cell (y, x = d - y) of each row y
            inside = (xs >= 0) & (xs < n_s)
            xc = tf.clip_by_value(xs, 0, tf.maximum(n_s - 1, 0))
            valid = tf.cast(tf.gather(mask, xc) & inside[:, None], tf.float32)[..., None]  # (T, B, 1)
            h_up = tf.concat([tf.zeros_like(h_prev[:1]), h_prev[:-1]], 0)  # (y - 1, x) was at index y - 1
            c_up = tf.concat([tf.zeros_like(c_prev[:1]), c_prev[:-1]], 0)
            pre = tf.gather(x_src, xc) + x_trg + tf.einsum("tbn,ng->tbg", h_prev, self.Vh_re) + \
                tf.einsum("tbn,ng->tbg", h_up, self.Vv_re)
            h, c = _cell(pre, c_up, c_prev, valid)
            return d + 1, h, c, diags.write(d, h)

        _, _, _, diags = tf.while_loop(lambda d, *_: d < n_t + n_s - 1, body, [tf.constant(0), zeros, zeros, diags])
        diag = stacked(diags, [0, n_t, n_b, self.n])  # (D, T, B, n): out[y, x] = diag[x + y, y]
        grid_y, grid_x = tf.meshgrid(ys, tf.range(n_s), indexing="ij")
        return tf.gather_nd(diag, tf.stack([grid_x + grid_y, grid_y], axis=-1))

    # ---- one row per step in a rec loop: the state is the previous row (outputs, cells) over the source
    def initial_state(self, batch: tf.Tensor, n_time: Any = None, values: Sequence[LayerOutput] = (),
                      ctx: Optional[RunContext] = None) -> Tuple[tf.Tensor, tf.Tensor]:
        """Rows of length 0: step 0 widens them to the source length (zeros). Their static length is
        unknown in a traced step (as the engine runs it), so the loop lets it change."""
        empty = tf.compat.v1.placeholder_with_default(tf.zeros(tf.stack([batch, 0, self.n])), [None, None, self.n])
        return empty, empty

    def step(self, sources: List[LayerOutput], state: Tuple[tf.Tensor, tf.Tensor], ctx: RunContext, t: Any = None
             ) -> Tuple[LayerOutput, Tuple[tf.Tensor, tf.Tensor]]:
        src, trg = sources[0], sources[1]
        trg_tm = trg.tensor[None]  # (1, B, Ft)
        x_src, x_trg, mask = self._inputs(src, trg_tm)
        n_s, n_b = tf.shape(x_src)[0], tf.shape(x_src)[1]
        zeros = tf.zeros(tf.stack([n_b, n_s, self.n]))
        h_up, c_up = (tf.cond(tf.shape(s)[1] > 0, lambda s=s: s, lambda: zeros) for s in state)
        pre = x_src + x_trg + tf.einsum("bsn,ng->sbg", h_up, self.Vv_re)  # (S, B, 5n)
        valid = tf.cast(mask, tf.float32)[..., None]

        def scan(carry, elems):
            h_left, c_left = carry
            p, cu, v = elems
            h, c = _cell(p + tf.matmul(h_left, self.Vh_re), cu, c_left, v)
            return h, c

        h0 = tf.zeros(tf.stack([n_b, self.n]))
        hs, cs = tf.scan(scan, (pre, tf.transpose(c_up, [1, 0, 2]), valid), initializer=(h0, h0))  # (S, B, n)
        y = self._pool(hs[None], mask, trg_tm)[0]
        return self.make_output(y, [trg]), (tf.transpose(hs, [1, 0, 2]), tf.transpose(cs, [1, 0, 2]))
