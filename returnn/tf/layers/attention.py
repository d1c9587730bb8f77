"""Attention over an encoder's time axis, as used inside rec loops (one query per step) and over
whole sequences (one query per frame).

- ``softmax_over_spatial``: softmax of energies over a dynamic axis (default: the input's time
  axis, i.e. the encoder time of per-step energies ``(B, T_enc, 1)`` and of whole-sequence
  energies ``(B, T_enc, T_dec)``), padded positions get weight 0 (``use_time_mask`` None or True;
  False, as RETURNN: padded positions' energies take part as they are);
  ``energy_factor`` scales the energies first; ``window_start`` (an int or a layer of shape (B,))
  with ``window_size`` keeps only positions ``start <= t < start + size`` (local attention);
  ``start`` (a layer of shape (B,)) masks the positions before it (RETURNN's hard-attention decoders).
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
from returnn.tensor.dim import batch_dim
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.helpers import check_sources
from returnn.tf.layers.options import Option
from returnn.tf.layers.output import align_tensor


def _attention_axis(layer: Layer, data: Data, axis: Any) -> int:
    """``axis``, else the input's time axis (with several dynamic axes the first, which is the encoder's in
    energies built from the encoder, e.g. (B, T_enc, T_dec) over whole sequences); none is refused, as RETURNN
    asserts (e.g. after a merge_dims of the time axis into the features, whose dynamic axis is no time axis)."""
    if axis is not None:
        return layer.axis(data, axis, "axis")
    if data.time_dim_axis is None:
        raise NetworkError("%s: input %s has no time axis to attend over (RETURNN asserts one without 'axis')"
                           % (layer.desc, data.short_repr()))
    return data.time_dim_axis


def masked_energy(x: LayerOutput, axis: int, use_mask: bool = True) -> tf.Tensor:
    """The energies with the padded positions of ``axis`` at -inf (``use_mask`` and a dynamic axis)."""
    energy = x.tensor
    if use_mask and x.data.dims[axis].is_dynamic():
        energy = tf.where(x.broadcast_mask(axis), energy, tf.constant(float("-inf"), energy.dtype))
    return energy


def masked_softmax(x: LayerOutput, axis: int, use_mask: bool = True) -> tf.Tensor:
    """Softmax over ``axis`` with padded positions of that axis excluded (weight 0); without
    ``use_mask`` over all positions of the padded tensor."""
    weights = tf.nn.softmax(masked_energy(x, axis, use_mask), axis=axis)
    return tf.where(tf.math.is_nan(weights), tf.zeros_like(weights), weights)  # an empty sequence: all 0


@register_layer
class SoftmaxOverSpatialLayer(Layer):
    """See the module docstring."""

    layer_class = "softmax_over_spatial"
    no_int_axes = ("axis",)  # RETURNN: allow_int=False
    ref_options = ("window_start", "start")
    options = (
        Option("axis", None, "axis to normalize over (default: see module docstring)"),
        Option("energy_factor", None, "factor of the energies before the softmax (0 or None: none, as RETURNN)"),
        Option("use_time_mask", None, "padded positions get weight 0 (None: when the axis is dynamic; False: "
                                        "their energies take part as they are, as RETURNN)"),
        Option("log_space", False, "output log-weights"),
        Option("window_start", None, "first position of the window: an int or a layer (B,)"),
        Option("window_size", None, "window length (with window_start; without it no effect, as RETURNN)"),
        Option("start", None, "a layer (B,): positions before it get weight 0 (RETURNN's; needs use_time_mask)"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        self.start_layer = isinstance(opts.get("window_start"), str)
        self.from_layer = isinstance(opts.get("start"), str)  # 'start': after window_start among the sources
        n_own = len(sources) - self.start_layer - self.from_layer
        own = list(sources[:n_own])
        super().__init__(name, opts, own, seed)
        check_sources(self, own, 1, 1)
        # RETURNN resolves and applies 'start' only when it is truthy: 0 (or False) is no start
        if self.opts.get("start") not in (None, 0) and not self.from_layer:
            raise NetworkError("%s: 'start' must name a layer of one position per sequence, got %r"
                               % (self.desc, self.opts.get("start")))
        if self.from_layer and self.opt("use_time_mask") is False:
            raise NetworkError("%s: 'start' needs use_time_mask (RETURNN's rule)" % self.desc)
        if self.from_layer and (sources[-1].batch_ndim - (sources[-1].feature_dim_axis is not None and
                                                          sources[-1].dim == 1)) != 1:
            raise NetworkError("%s: start %r must be one position per sequence (B,), got %s"
                               % (self.desc, opts["start"], sources[-1].short_repr()))
        if self.opt("window_start") is not None and self.opt("window_size") is None:
            raise NetworkError("%s: window_start needs window_size (RETURNN: 'set window_size explicitly')" % self.desc)
        self.use_mask = self.opt("use_time_mask") is not False
        if not self.use_mask and self.opt("window_start") is not None:
            raise NetworkError("%s: a window needs use_time_mask (RETURNN's rule)" % self.desc)
        if self.start_layer and (sources[n_own].batch_ndim - (sources[n_own].feature_dim_axis is not None and
                                                              sources[n_own].dim == 1)) != 1:
            raise NetworkError("%s: window_start %r must be one position per sequence (B,), got %s"
                               % (self.desc, opts["window_start"], sources[n_own].short_repr()))
        self.ax = _attention_axis(self, own[0], self.opt("axis"))
        if self.opt("use_time_mask") and not own[0].dims[self.ax].is_dynamic():
            raise NetworkError("%s: use_time_mask True on the static axis %r is refused (RETURNN asserts a dynamic "
                               "axis)" % (self.desc, own[0].dims[self.ax].description))
        # RETURNN's effective use_time_mask: given, else whether the axis is dynamic
        masked = self.opt("use_time_mask") or (self.opt("use_time_mask") is None and own[0].dims[self.ax].is_dynamic())
        if self.opt("window_size") is not None and self.opt("window_start") is None and not masked:
            # RETURNN: window_size alone has no effect, but asserts the (effective) use_time_mask
            raise NetworkError("%s: window_size needs use_time_mask (RETURNN's rule)" % self.desc)
        factor = self.opt("energy_factor")
        if factor and factor < 0 and masked:
            # RETURNN scales after masking: -inf * factor = +inf at padded frames, the real frames of a padded
            # sequence get weight 0 (its bug); refused rather than computed otherwise
            raise NetworkError("%s: a negative energy_factor %r with the time mask is refused (RETURNN scales the masked "
                               "energies: padded frames become +inf)" % (self.desc, factor))
        if (self.opt("window_start") is not None or self.from_layer) and own[0].batch_dim_axis != 0:
            raise NetworkError("%s: a window or start needs batch-major energies" % self.desc)
        # as RETURNN (copy_move_axis(axis, -1)): the normalised axis is the output's last one
        n = own[0].batch_ndim
        self.out_perm = None if self.ax == n - 1 else [i for i in range(n) if i != self.ax] + [self.ax]
        self.output = own[0].copy(name) if self.out_perm is None else own[0].copy(name).copy_transpose(self.out_perm)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = sources[0]
        if self.opt("energy_factor"):  # RETURNN scales only by a truthy factor: 0 (or 0.0) scales nothing
            x = x.with_tensor(x.tensor * float(self.opt("energy_factor")))
        n_own = len(sources) - self.start_layer - self.from_layer
        pos = tf.range(tf.shape(x.tensor)[self.ax])
        if self.opt("window_start") is not None:
            start = sources[n_own].tensor if self.start_layer else tf.fill([tf.shape(x.tensor)[0]], self.opt("window_start"))
            start = tf.cast(tf.reshape(start, [-1]), tf.int32)  # (B,)
            inside = (pos[None, :] >= start[:, None]) & (pos[None, :] < start[:, None] + int(self.opt("window_size")))
            inside = align_tensor(inside, [0, self.ax], x.data.batch_ndim)
            x = x.with_tensor(tf.where(inside, x.tensor, tf.constant(float("-inf"), x.tensor.dtype)))
        if self.from_layer:  # RETURNN's start: positions t < start masked out
            start = tf.cast(tf.reshape(sources[-1].tensor, [-1]), tf.int32)  # (B,)
            inside = align_tensor(pos[None, :] >= start[:, None], [0, self.ax], x.data.batch_ndim)
            x = x.with_tensor(tf.where(inside, x.tensor, tf.constant(float("-inf"), x.tensor.dtype)))
        if self.opt("log_space"):  # RETURNN's log_softmax of the masked energies (-inf at masked positions)
            w = tf.nn.log_softmax(masked_energy(x, self.ax, self.use_mask), axis=self.ax)
        else:
            w = masked_softmax(x, self.ax, self.use_mask)
        if self.out_perm is not None:
            w = tf.transpose(w, self.out_perm)
        return self.make_output(w, sources)


@register_layer
class GenericAttentionLayer(Layer):
    """See the module docstring. Multi-head: base ``(B, T, H, D)`` with weights ``(B, T, H)``;
    the axes of the base other than batch, time and feature are matched in the weights (same dim,
    else the same static size) and kept; other weight axes (e.g. a decoder time) are kept too."""

    layer_class = "generic_attention"
    ref_options = ("weights", "base")
    default_from = ()
    options = (
        Option("weights", None, "layer of attention weights over the base's time axis"),
        Option("base", None, "layer of values (B, T_enc, ..., F)"),
        Option("auto_squeeze", True, "drop size-1 axes of the weights (e.g. the feature axis of an energy)"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        if not isinstance(opts.get("weights"), str) or not isinstance(opts.get("base"), str):
            raise NetworkError("%s: needs 'weights' and 'base' (layer names)" % self.desc)
        weights, base = sources[-2], sources[-1]
        where = "%s: base %s, weights %s" % (self.desc, base.short_repr(), weights.short_repr())
        if base.time_dim_axis is None or base.batch_dim_axis is None or base.feature_dim_axis is None or base.sparse:
            raise NetworkError("%s: the base needs batch, time and feature axes" % where)
        time = base.dims[base.time_dim_axis]
        letters = iter("acdeghijklmnopqrsuvwxyz")
        base_l: List[str] = []
        for i, d in enumerate(base.dims):
            base_l.append("b" if d.is_batch_dim() else "t" if i == base.time_dim_axis else
                          "f" if i == base.feature_dim_axis else next(letters))
        w_l: List[Optional[str]] = [None] * weights.batch_ndim
        for i, d in enumerate(weights.dims):
            if d.is_batch_dim():
                w_l[i] = "b"
            elif d == time:
                w_l[i] = "t"
        if "b" not in w_l or "t" not in w_l:
            raise NetworkError("%s: the weights need the batch axis and the base's time axis" % where)
        for j in reversed(range(base.batch_ndim)):  # shared axes, e.g. heads
            d = base.dims[j]
            if base_l[j] in "btf":
                continue
            same = [i for i, w in enumerate(weights.dims) if w_l[i] is None and w == d]
            if not same:  # RETURNN pairs by size, the base's last axis with the weights' last one of that size
                same = [i for i, w in enumerate(weights.dims) if w_l[i] is None and w.dimension == d.dimension][-1:]
            if len(same) != 1:
                raise NetworkError("%s: base axis %r not found in the weights" % (where, d.description))
            w_l[same[0]] = base_l[j]
        self.squeeze = []
        for i, d in enumerate(weights.dims):
            if w_l[i] is None:
                if d.dimension == 1 and self.opt("auto_squeeze"):
                    self.squeeze.append(i)
                    w_l[i] = ""
                else:
                    w_l[i] = next(letters)
        keep_w = [(i, w_l[i]) for i in range(weights.batch_ndim) if w_l[i] not in ("b", "t", "") and w_l[i] not in base_l]
        shared = [(j, base_l[j]) for j in range(base.batch_ndim) if base_l[j] not in "btf"]
        out_l = ["b"] + [x for _, x in keep_w] + [x for _, x in shared] + ["f"]
        self.equation = "%s,%s->%s" % ("".join(w_l), "".join(base_l), "".join(out_l))
        dims = [batch_dim] + [weights.dims[i] for i, _ in keep_w] + [base.dims[j] for j, _ in shared] + [base.feature_dim]
        self.check_n_out(base.dim)
        self.output = Data(name, dims=dims, feature_dim_axis=len(dims) - 1)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        weights, base = sources[-2], sources[-1]
        w = weights.masked(0.0)
        if self.squeeze:
            w = tf.squeeze(w, self.squeeze)
        out = tf.einsum(self.equation, w, base.masked(0.0))
        return self.make_output(out, [weights, base])


@register_layer
class DotAttentionLayer(Layer):
    """See the module docstring."""

    layer_class = "dot_attention"
    ref_options = ("base", "base_ctx")
    options = (
        Option("base", None, "values (B, T_enc, F_v)"),
        Option("base_ctx", None, "keys (B, T_enc, F) with F the query's feature size"),
        Option("energy_factor", None, "factor of the energies before the softmax (0 or None: none, as RETURNN)"),
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
        if self.opt("energy_factor"):  # RETURNN: 0 scales nothing (a truthiness test)
            energy *= float(self.opt("energy_factor"))
        mask = tf.sequence_mask(k.seq_len, maxlen=tf.shape(energy)[-1])[:, None, :]
        weights = tf.nn.softmax(tf.where(mask, energy, tf.constant(float("-inf"), energy.dtype)), axis=-1)
        weights = tf.where(tf.math.is_nan(weights), tf.zeros_like(weights), weights)
        out = tf.matmul(weights, base.copy_as_batch_time_feature().masked(0.0))  # (B, Tq, F_v)
        if query.data.batch_ndim == 2:
            out = out[:, 0]
        return self.make_output(out, [query])
