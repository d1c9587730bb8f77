"""RETURNN's older attention layers (one query per rec step, over an encoder ``base``).

- ``concat_attention`` (additive / Bahdanau): query ``from`` ``(B, F)`` (or ``(B, T_q, F)``), keys
  ``base_ctx`` ``(B, T, F)``, values ``base`` ``(B, T, F_v)``: energies ``sum_f v_f tanh(k_tf + q_f)``
  with the parameter ``v`` (F,), softmax over the real frames of ``base_ctx``, weighted sum of the
  values. A sequence without frames gets 0 (RETURNN: NaN).
- ``gauss_window_attention``: the query is a position ``t`` (float, ``(B,)`` or ``(B, 1)``); the
  ``window_size`` frames from ``round(t) - window_size // 2`` (indices clipped into the sequence:
  below 0 -> 0, past its end -> its last frame) are weighted by the normal density
  ``N(index; t, std)`` and summed: ``(B, F_v)``; with ``inner_size`` k the density is taken at
  ``t + i * inner_size_step - k / 2`` for i < k: ``(B, k, F_v)``.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Sequence

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim, DimTypes
from returnn.tf.layers import param_noise
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.helpers import check_sources
from returnn.tf.layers.options import Option, positive_int


def _check_base(layer: Layer, what: str, d: Data) -> None:
    if d.time_dim_axis is None or d.batch_dim_axis is None or d.batch_ndim != 3 or d.sparse:
        raise NetworkError("%s: %s must be (batch, time, feature), got %s" % (layer.desc, what, d.short_repr()))


@register_layer
class ConcatAttentionLayer(Layer):
    """See the module docstring."""

    layer_class = "concat_attention"
    ref_options = ("base", "base_ctx")
    options = (
        Option("base", None, "values (B, T_enc, F_v)"),
        Option("base_ctx", None, "keys (B, T_enc, F) with F the query's feature size"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        if not all(isinstance(opts.get(k), str) for k in self.ref_options):
            raise NetworkError("layer %r (concat_attention): needs 'base' and 'base_ctx' (layer names)" % name)
        super().__init__(name, opts, sources[:-2], seed)
        check_sources(self, sources[:-2], 1, 1)
        query, base, keys = sources[0], sources[-2], sources[-1]
        _check_base(self, "base", base)
        _check_base(self, "base_ctx", keys)
        if query.sparse or query.dim != keys.dim or query.batch_dim_axis != 0 or \
                query.feature_dim_axis != query.batch_ndim - 1 or query.batch_ndim > 3:
            raise NetworkError("%s: query (batch[, time], feature) with the keys' feature size %s, got %s"
                               % (self.desc, keys.dim, query.short_repr()))
        self.check_n_out(base.dim)
        self.v = param_noise.exempt(self.weight("v", [keys.dim], "glorot_uniform"))  # RETURNN: outside var_creation_scope
        self.output = Data(name, dims=list(query.dims[:-1]) + [base.feature_dim])

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        query, base, keys = sources[0], sources[-2], sources[-1]
        k = keys.copy_as_batch_time_feature()
        q = query.tensor if query.data.batch_ndim == 3 else query.tensor[:, None]  # (B, Tq, F)
        energy = tf.reduce_sum(tf.tanh(k.masked(0.0)[:, None] + q[:, :, None]) * self.v, axis=-1)  # (B, Tq, T)
        mask = tf.sequence_mask(k.seq_len, maxlen=tf.shape(energy)[-1])[:, None, :]
        weights = tf.nn.softmax(tf.where(mask, energy, tf.constant(float("-inf"), energy.dtype)), axis=-1)
        weights = tf.where(tf.math.is_nan(weights), tf.zeros_like(weights), weights)
        out = tf.matmul(weights, base.copy_as_batch_time_feature().masked(0.0))
        return self.make_output(out if query.data.batch_ndim == 3 else out[:, 0], [query])


@register_layer
class GaussWindowAttentionLayer(Layer):
    """See the module docstring."""

    layer_class = "gauss_window_attention"
    ref_options = ("base",)
    options = (
        Option("base", None, "values (B, T_enc, F_v)"),
        Option("window_size", None, "frames of the window"),
        Option("std", 1.0, "standard deviation of the Gaussian"),
        Option("inner_size", None, "positions around t (an extra output axis of that size)"),
        Option("inner_size_step", 0.5, "distance of those positions"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        if not isinstance(opts.get("base"), str):
            raise NetworkError("layer %r (gauss_window_attention): needs 'base' (a layer name)" % name)
        super().__init__(name, opts, sources[:-1], seed)
        check_sources(self, sources[:-1], 1, 1)
        pos, base = sources[0], sources[-1]
        _check_base(self, "base", base)
        rest = [d for i, d in enumerate(pos.dims) if i != pos.batch_dim_axis and d.dimension != 1]
        if pos.batch_dim_axis != 0 or pos.sparse or len(rest) > 1 or (rest and pos.time_dim_axis is None) or \
                pos.batch_ndim - 1 - len(rest) > 1:
            raise NetworkError("%s: the input is the position t, (batch[, time][, 1]), got %s"
                               % (self.desc, pos.short_repr()))
        self.window = positive_int(self.desc, "window_size", self.opt("window_size"))
        inner = self.opt("inner_size")
        self.inner = None if not inner else positive_int(self.desc, "inner_size", inner)
        self.check_n_out(base.dim)
        dims = [pos.dims[0]] + rest  # a query per step, or per frame of a whole query sequence
        if self.inner:
            dims.append(Dim(self.inner, kind=DimTypes.Spatial, description="%s:inner" % name))
        self.output = Data(name, dims=dims + [base.feature_dim], feature_dim_axis=len(dims))

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        pos, base = sources[0], sources[-1].copy_as_batch_time_feature()
        n_b = tf.shape(pos.tensor)[0]
        t = tf.reshape(tf.cast(pos.tensor, tf.float32), [n_b, -1])  # (B, Tq): one query per step, or per frame
        idx = tf.cast(tf.round(t), tf.int32)[..., None] - self.window // 2 + tf.range(self.window)  # (B, Tq, W)
        seq_len = base.seq_len[:, None, None]
        cidx = tf.clip_by_value(idx, 0, tf.shape(base.tensor)[1] - 1)
        cidx = tf.maximum(tf.where(cidx < seq_len, cidx, seq_len - 1), 0)
        frames = tf.gather(base.tensor, cidx, batch_dims=1)  # (B, Tq, W, F)
        std = float(self.opt("std"))
        centre = t[:, :, None, None]  # (B, Tq, 1, inner)
        if self.inner:
            centre = centre + tf.constant([i * float(self.opt("inner_size_step")) - self.inner / 2.0
                                           for i in range(self.inner)])
        dens = tf.exp(-(centre - tf.cast(idx, tf.float32)[..., None]) ** 2 / (2 * std ** 2)) / (std * math.sqrt(2 * math.pi))
        out = tf.einsum("bqwi,bqwf->bqif", dens, frames)  # (B, Tq, inner, F)
        if not self.inner:
            out = out[:, :, 0]
        if self.output.batch_ndim == (3 if self.inner else 2):  # one query per step
            out = out[:, 0]
        return self.make_output(out, [pos])
