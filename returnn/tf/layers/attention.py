"""Attention over an encoder's time axis, as used inside rec loops (one query per step) and over
whole sequences (one query per frame).

- ``softmax_over_spatial``: softmax of energies over a dynamic axis (default: the input's time
  axis; with several dynamic axes the last one, e.g. the encoder time of per-step energies
  ``(B, T_enc, 1)`` broadcast from a decoder frame), padded positions get weight 0;
  ``energy_factor`` scales the energies first.
- ``generic_attention``: ``sum_t weights[..., t] * base[t, :]`` over the base's time axis; a
  size-1 feature axis of the weights (from a ``linear`` with ``n_out: 1``) is dropped.
- ``dot_attention`` (RETURNN's old layer): query ``from`` (``(B, F)`` per step or ``(B, T, F)``),
  keys ``base_ctx`` and values ``base`` ``(B, T_enc, .)``: ``softmax_t(q . k_t) `` (masked), then the
  weighted sum of the values.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.helpers import check_sources
from returnn.tf.layers.options import Option


def _attention_axis(layer: Layer, data: Data, axis: Any) -> int:
    if axis is not None:
        return layer.axis(data, axis, "axis")
    dyn = [i for i in data.get_dynamic_axes() if not data.dims[i].is_batch_dim()]
    if not dyn:
        raise NetworkError("%s: input %s has no dynamic axis to attend over" % (layer.desc, data.short_repr()))
    return dyn[-1] if len(dyn) > 1 else dyn[0]


def masked_softmax(x: LayerOutput, axis: int) -> tf.Tensor:
    """Softmax over ``axis`` with padded positions of that axis excluded (weight 0)."""
    energy = x.tensor
    if x.data.dims[axis].is_dynamic():
        energy = tf.where(x.broadcast_mask(axis), energy, tf.constant(float("-inf"), energy.dtype))
    weights = tf.nn.softmax(energy, axis=axis)
    return tf.where(tf.math.is_nan(weights), tf.zeros_like(weights), weights)  # an empty sequence: all 0


@register_layer
class SoftmaxOverSpatialLayer(Layer):
    """See the module docstring."""

    layer_class = "softmax_over_spatial"
    options = (
        Option("axis", None, "axis to normalize over (default: see module docstring)"),
        Option("energy_factor", None, "factor of the energies before the softmax"),
        Option("use_time_mask", True, "padded positions get weight 0 (always)"),
        Option("log_space", False, "output log-weights"),
        Option("window_start", None, "not supported"),
        Option("window_size", None, "not supported"),
        Option("start", None, "not supported"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources, 1, 1)
        for key in ("window_start", "window_size", "start"):
            if self.opts.get(key) is not None:
                raise NetworkError("%s: option %r is not supported" % (self.desc, key))
        self.ax = _attention_axis(self, sources[0], self.opt("axis"))
        self.output = sources[0].copy(name)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = sources[0]
        if self.opt("energy_factor") is not None:
            x = x.with_tensor(x.tensor * float(self.opt("energy_factor")))
        w = masked_softmax(x, self.ax)
        if self.opt("log_space"):
            w = tf.math.log(tf.maximum(w, 1e-30))
        return self.make_output(w, sources)


def _weighted_sum(weights: tf.Tensor, w_axis: int, values: LayerOutput, v_axis: int) -> tf.Tensor:
    """``sum_t weights[..., t, ...] * values[b, t, f]``: weights (B, ..., T at w_axis) batch first,
    values (B, T, F) with T at v_axis; returns weights' other axes + F."""
    v = values.masked(0.0)
    v = tf.transpose(v, [0, v_axis] + [a for a in range(len(v.shape)) if a not in (0, v_axis)])  # (B, T, F)
    w_rest = [a for a in range(len(weights.shape)) if a != w_axis]
    w = tf.transpose(weights, w_rest + [w_axis])  # (B, ..., T)
    shape = tf.shape(w)
    w_flat = tf.reshape(w, [shape[0], -1, shape[-1]])  # (B, N, T)
    out = tf.matmul(w_flat, v)  # (B, N, F)
    return tf.reshape(out, tf.concat([shape[:-1], tf.shape(v)[-1:]], 0))


@register_layer
class GenericAttentionLayer(Layer):
    """See the module docstring."""

    layer_class = "generic_attention"
    ref_options = ("weights", "base")
    default_from = ()
    options = (
        Option("weights", None, "layer of attention weights over the base's time axis"),
        Option("base", None, "layer of values (B, T_enc, F)"),
        Option("auto_squeeze", True, "drop a size-1 feature axis of the weights"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        if not isinstance(opts.get("weights"), str) or not isinstance(opts.get("base"), str):
            raise NetworkError("%s: needs 'weights' and 'base' (layer names)" % self.desc)
        weights, base = sources[-2], sources[-1]
        self.v_axis = base.time_dim_axis
        if self.v_axis is None or base.batch_dim_axis != 0 or base.batch_ndim != 3 or base.sparse:
            raise NetworkError("%s: base must be (batch, time, feature), got %s" % (self.desc, base.short_repr()))
        time = base.dims[self.v_axis]
        w_axes = [i for i, d in enumerate(weights.dims) if d == time]
        if len(w_axes) != 1 or weights.batch_dim_axis != 0:
            raise NetworkError("%s: weights %s must be batch-first and have the base's time axis %r"
                               % (self.desc, weights.short_repr(), time.description))
        self.w_axis = w_axes[0]
        w_dims = [d for i, d in enumerate(weights.dims) if i != self.w_axis]
        self.squeeze_axis: Optional[int] = None
        if len(w_dims) > 1 and w_dims[-1].dimension == 1 and not w_dims[-1].is_batch_dim():
            self.squeeze_axis = len(w_dims) - 1
            w_dims = w_dims[:-1]
        self.check_n_out(base.dim)
        self.output = Data(name, dims=w_dims + [base.feature_dim])

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        weights, base = sources[-2], sources[-1]
        out = _weighted_sum(weights.masked(0.0), self.w_axis, base, self.v_axis)
        if self.squeeze_axis is not None:
            out = tf.squeeze(out, self.squeeze_axis)
        return self.make_output(out, [weights, base])


@register_layer
class DotAttentionLayer(Layer):
    """See the module docstring."""

    layer_class = "dot_attention"
    ref_options = ("base", "base_ctx")
    options = (
        Option("base", None, "values (B, T_enc, F_v)"),
        Option("base_ctx", None, "keys (B, T_enc, F) with F the query's feature size"),
        Option("energy_factor", None, "factor of the energies before the softmax"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        refs = [k for k in ("base", "base_ctx") if isinstance(opts.get(k), str)]
        if len(refs) != 2:
            raise NetworkError("layer %r (dot_attention): needs 'base' and 'base_ctx' (layer names)" % name)
        super().__init__(name, opts, sources[:-2], seed)
        check_sources(self, sources[:-2], 1, 1)
        query, base, keys = sources[0], sources[-2], sources[-1]
        for what, d in (("base", base), ("base_ctx", keys)):
            if d.time_dim_axis is None or d.batch_dim_axis != 0 or d.batch_ndim != 3 or d.sparse:
                raise NetworkError("%s: %s must be (batch, time, feature), got %s" % (self.desc, what, d.short_repr()))
        if query.sparse or query.dim != keys.dim:
            raise NetworkError("%s: query %s and keys %s need the same feature size"
                               % (self.desc, query.short_repr(), keys.short_repr()))
        if query.batch_dim_axis != 0 or query.feature_dim_axis != query.batch_ndim - 1 or query.batch_ndim > 3:
            raise NetworkError("%s: query must be (batch, feature) or (batch, time, feature), got %s"
                               % (self.desc, query.short_repr()))
        self.check_n_out(base.dim)
        self.output = Data(name, dims=list(query.dims[:-1]) + [base.feature_dim])

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        query, base, keys = sources[0], sources[-2], sources[-1]
        k = keys.copy_as_batch_time_feature()
        q = query.tensor if query.data.batch_ndim == 3 else query.tensor[:, None]  # (B, Tq, F)
        energy = tf.matmul(q, k.masked(0.0), transpose_b=True)  # (B, Tq, T_enc)
        if self.opt("energy_factor") is not None:
            energy *= float(self.opt("energy_factor"))
        mask = tf.sequence_mask(k.seq_len, maxlen=tf.shape(energy)[-1])[:, None, :]
        weights = tf.nn.softmax(tf.where(mask, energy, tf.constant(float("-inf"), energy.dtype)), axis=-1)
        weights = tf.where(tf.math.is_nan(weights), tf.zeros_like(weights), weights)
        out = tf.matmul(weights, base.copy_as_batch_time_feature().masked(0.0))  # (B, Tq, F_v)
        if query.data.batch_ndim == 2:
            out = out[:, 0]
        return self.make_output(out, [query])
