"""Helpers shared by layer modules: source checks, dropout, feature concatenation and the linear map of
sources. The common layout of several sources is :mod:`returnn.tf.layers.common_layout` (its names are
importable from here too).
"""
from __future__ import annotations

from typing import Any, List, NamedTuple, Optional, Sequence, Tuple

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim, DimTypes
from returnn.tensor.data import NotSpecified
from returnn.tf.layers.common_layout import (  # noqa: F401 (importable from here)
    _LOOP_AXES, _user_made, check_broadcast, common_dims, loop_axis, merge_added_axes, moved_out_loop_dims,
    returnn_common_order, returnn_dim_objects,
)
from returnn.tf.layers.output import LayerOutput, align_tensor
from returnn.tf.util.dense import dense_dot


def check_sources(layer, sources: Sequence[Data], n_min: int = 1, n_max: Optional[int] = None) -> None:
    """Raises unless ``n_min <= len(sources) <= n_max``."""
    if len(sources) < n_min:
        raise NetworkError("%s: needs at least %i source(s) in 'from'" % (layer.desc, n_min))
    if n_max is not None and len(sources) > n_max:
        raise NetworkError("%s: takes at most %i source(s) in 'from', got %i" % (layer.desc, n_max, len(sources)))


def check_dense(layer, sources: Sequence[Data]) -> None:
    """Raises if a source is sparse (class indices)."""
    check_sources(layer, sources)
    if any(s.sparse for s in sources):
        raise NetworkError("%s: sparse input not supported" % layer.desc)


def dropout(tensor: tf.Tensor, drop: float, seed: tf.Tensor, broadcast_axes: Sequence[int] = ()) -> tf.Tensor:
    """Inverted dropout: zeroes a ``drop`` fraction, scales the rest by ``1 / (1 - drop)``; the
    mask is shared along ``broadcast_axes`` (drawn with size 1 there, so a mask shared by all
    frames costs one random number per feature)."""
    shape = tf.shape(tensor)
    if broadcast_axes:
        shape = tf.tensor_scatter_nd_update(shape, [[a] for a in broadcast_axes], [1] * len(broadcast_axes))
    return tensor * dropout_scale(shape, drop, seed, tensor.dtype)


def dropout_scale(shape: Any, drop: float, seed: tf.Tensor, dtype: tf.DType = tf.float32) -> tf.Tensor:
    """The factors of inverted dropout, of ``shape``: 0 for a ``drop`` fraction, else ``1 / (1 - drop)``."""
    keep = 1.0 - drop
    noise = tf.random.stateless_uniform(shape, seed=seed)
    return tf.cast(noise < keep, dtype) * (1.0 / keep)


_NOISE_VALUES = {None: False, -1: False, 1: True, "x": True}  # RETURNN's spellings: own noise / shared


def noise_broadcast_axes(layer, data: Data) -> List[int]:
    """The axes along which a layer's input dropout mask is shared, as RETURNN decides it: by
    default every axis except the feature axis (one mask per step and feature, shared by all
    sequences and frames, RETURNN's behaviour since 2017). ``dropout_noise_shape`` overrides it:
    ``{"*": None}`` gives every axis its own noise (``"*": 1`` shares along all), an axis
    description sets that axis; None (or -1) is own noise, 1 (or "x") a shared value."""
    if layer.opts.get("dropout_axis") is not None:
        varying = dropout_axes(layer, data)
        return [a for a in range(data.batch_ndim) if a not in varying]
    shared = {a: a != data.feature_dim_axis for a in range(data.batch_ndim)}
    spec = layer.opts.get("dropout_noise_shape")
    if spec and not isinstance(spec, dict):
        raise NetworkError("%s: dropout_noise_shape must be a dict {axis: None or 1}, got %r" % (layer.desc, spec))
    explicit = {}
    for key, value in (spec or {}).items():
        if not isinstance(value, (int, str, type(None))) or value not in _NOISE_VALUES:
            raise NetworkError("%s: dropout_noise_shape values must be None or 1, got %r" % (layer.desc, value))
        if key == "*":
            shared = {a: _NOISE_VALUES[value] for a in shared}
        elif data.has_axis(key):
            for a in layer.axes(data, key, "dropout_noise_shape"):
                explicit[a] = _NOISE_VALUES[value]
    return [a for a in range(data.batch_ndim) if explicit.get(a, shared[a])]


def dropout_axes(layer, data: Data) -> List[int]:
    """The axes of ``data`` that RETURNN's ``dropout_axis`` names (the mask varies along them and is
    shared along all others); not together with ``dropout_noise_shape``, no int axes (RETURNN's rules)."""
    spec = layer.opts.get("dropout_axis")
    if layer.opts.get("dropout_noise_shape"):
        raise NetworkError("%s: give either dropout_axis %r or dropout_noise_shape %r, not both (RETURNN)"
                           % (layer.desc, spec, layer.opts.get("dropout_noise_shape")))
    for item in spec if isinstance(spec, (list, tuple)) else [spec]:
        if isinstance(item, int):
            raise NetworkError("%s: dropout_axis takes axis descriptions or Dims, not the int %r (RETURNN)"
                               % (layer.desc, item))
    return layer.axes(data, spec, "dropout_axis")


def dropout_sources(layer, sources: List[LayerOutput], ctx) -> List[LayerOutput]:
    """The layer's input dropout on each dense source (each with its own seed)."""
    return [layer.apply_dropout(src, ctx, salt=i) for i, src in enumerate(sources)]


def dense_value(x: LayerOutput) -> LayerOutput:
    """A sparse value as one-hot floats (feature axis last), a dense one unchanged."""
    if not x.data.sparse:
        return x
    return x.with_tensor(tf.one_hot(x.masked(0), x.data.dim, dtype=tf.float32), dense_template(x.data))


class FeaturePlan(NamedTuple):
    """How sources map into a common layout whose last axis is a (new) feature axis."""

    dims: List[Dim]  # the common dims without the feature axis
    maps: List[List[int]]  # per source: positions of its non-feature axes in ``dims``
    feature_axes: List[Optional[int]]  # per source: its feature axis (None when sparse)
    in_dims: List[int]  # per source: its feature size (class count when sparse)
    # the first source's time axis where set explicitly (reinterpret_data set_axes 't'): RETURNN's templates made by
    # copy_template keep it, so it stays the output's time axis (else the default rule picks)
    time_dim: Optional[Dim] = None


def feature_plan(layer, sources: Sequence[Data]) -> FeaturePlan:
    """Plan for concatenating / projecting ``sources`` on their feature axes (labels only alone: RETURNN)."""
    check_sources(layer, sources)
    refuse_sparse_concat(layer, sources)
    feats = []
    for src in sources:
        if src.dim is None:
            raise NetworkError("%s: source %r has no feature axis (%s)" % (layer.desc, src.name, src.short_repr()))
        feats.append(src.feature_dim_axis)
    planned = _returnn_plan(layer, sources, feats) if len(sources) > 1 else None
    if planned is not None:
        dims, maps, feats = planned
    else:
        dims, maps = common_dims([[d for i, d in enumerate(s.dims) if i != f] for s, f in zip(sources, feats)],
                                 layer=layer)
    in_dims = [s.dim if f == s.feature_dim_axis else s.dims[f].dimension for s, f in zip(sources, feats)]
    first = sources[0]
    time_dim = None
    if first._time_dim_axis is not NotSpecified and first.time_dim_axis is not None \
            and first.time_dim_axis != feats[0]:
        time_dim = dims[maps[0][[i for i in range(first.batch_ndim) if i != feats[0]].index(first.time_dim_axis)]]
    return FeaturePlan(dims, maps, feats, in_dims, time_dim)


def _returnn_plan(layer, sources: Sequence[Data], feats: List[int]
                  ) -> Optional[Tuple[List[Dim], List[List[int]], List[int]]]:
    """The common non-feature dims of several sources, each source's map into them and the axis it is concatenated
    on, from RETURNN's ``concat_sources`` template (refused where RETURNN fails:
    ``concat_check.check_returnn_concat``): RETURNN concatenates the axis its ``copy_compatible_to`` puts on the
    template's feature axis. None where this engine finds no map, or a source has no axis there (its size-1 feature
    axis broadcast elsewhere, a size-1 stand-in on the feature axis: the same values as this engine's own layout,
    ``common_layout.common_dims``, used then)."""
    from returnn.tf.layers.common_layout import check_source_dims
    from returnn.tf.layers.concat_check import check_returnn_concat
    out, full = check_returnn_concat(layer, sources)
    f = out.feature_dim_axis
    if any(m is None or f not in m for m in full):
        return None  # (e.g. a source's size-1 feature axis that RETURNN maps elsewhere: the same values either way)
    feats = [m.index(f) for m in full]
    for src, m, feat in zip(sources, full, feats):
        if src.dims[feat].dimension is None:
            raise NetworkError("%s: RETURNN's concatenation of its sources puts the axis %r of source %r on the "
                               "feature axis of its template %s" % (layer.desc, src.dims[feat].description, src.name,
                                                                    out.short_repr()))
    dims = [d for j, d in enumerate(out.dims) if j != f]
    maps = [[t - (t > f) for a, t in enumerate(m) if a != feat] for m, feat in zip(full, feats)]
    check_source_dims(layer, [[d for i, d in enumerate(s.dims) if i != feat] for s, feat in zip(sources, feats)], dims)
    return dims, maps, feats


def plan_output(name: str, plan: FeaturePlan, feature: Dim, sparse_dim: Optional[Dim] = None) -> Data:
    """The template ``plan.dims + [feature]``."""
    time = NotSpecified if plan.time_dim is None else plan.dims.index(plan.time_dim)
    return Data(name, dims=plan.dims + [feature], sparse_dim=sparse_dim,
                feature_dim_axis=len(plan.dims) if sparse_dim is None else None, time_dim_axis=time)


def feature_last(tensor: tf.Tensor, feature_axis: Optional[int]) -> tf.Tensor:
    """``tensor`` with ``feature_axis`` moved to the end (unchanged when None or already last)."""
    ndim = len(tensor.shape)
    if feature_axis is None or feature_axis == ndim - 1:
        return tensor
    return tf.transpose(tensor, [a for a in range(ndim) if a != feature_axis] + [feature_axis])


def _aligned(plan: FeaturePlan, i: int, tensor: tf.Tensor) -> tf.Tensor:
    """``tensor`` (source ``i``'s non-feature axes in order, feature last) in the common layout."""
    n = len(plan.dims)
    return align_tensor(tensor, list(plan.maps[i]) + [n], n + 1)


def concat_features(plan: FeaturePlan, sources: Sequence[LayerOutput]) -> tf.Tensor:
    """Dense sources concatenated on the feature axis in the common layout (broadcast as needed)."""
    parts = [_aligned(plan, i, feature_last(x.tensor, plan.feature_axes[i])) for i, x in enumerate(sources)]
    if len(parts) == 1:
        return parts[0]
    shape = []
    for pos in range(len(plan.dims)):
        size = None
        for i, x in enumerate(sources):
            if pos in plan.maps[i]:
                size = tf.shape(parts[i])[pos]
                break
        shape.append(size)
    if not shape:  # (only feature axes: e.g. two variables' values)
        return tf.concat(parts, -1)
    return tf.concat([tf.broadcast_to(p, tf.concat([tf.stack(shape), tf.shape(p)[-1:]], 0)) for p in parts], -1)


def project_sources(plan: FeaturePlan, sources: Sequence[LayerOutput], w: tf.Tensor,
                    order: Optional[Sequence[int]] = None) -> tf.Tensor:
    """The linear map of the feature-concatenation of ``sources`` by ``w`` (rows in source order),
    without building the concatenation: the sum of each source's projection, broadcast. A sparse
    source selects rows (= one-hot times ``w``; a label outside its dim a zero row). Padded positions
    are zeroed (index 0 when sparse) first, so garbage cannot reach the result or the weight gradient,
    except where they hold what a layer computes there (``computed_padding``: e.g. an activation's exp(0),
    a norm's shift), which are projected as they are, as RETURNN (a conv after it reads them at a
    sequence's end); extern data's count as zero frames.

    ``order``: the result's non-feature axes as positions of ``plan.dims`` (default: plan order),
    e.g. ``[1, 0]`` for a time-major result of (batch, time) sources. Each source is transposed
    before it is projected, where it is the smaller tensor when the projection widens it."""
    offset = 0
    total = None
    for i, src in enumerate(sources):
        # all of w: gathered from w itself (RETURNN's embedding_lookup), so a parameter's gradient stays
        # sparse rows (tf.IndexedSlices) for the optimizer (returnn/tf/gradients.py); a slice of it would be dense
        whole = offset == 0 and w.shape[0] is not None and plan.in_dims[i] == w.shape[0]
        rows = w if whole else w[offset:offset + plan.in_dims[i]]
        offset += plan.in_dims[i]
        # dense: padded positions zeroed, unless they hold what the layer before computes there (as RETURNN)
        dense = src.as_read()
        value = src.masked(0) if src.data.sparse else feature_last(dense, plan.feature_axes[i])
        positions = list(plan.maps[i])
        if order is not None:
            positions = [list(order).index(m) for m in positions]
            axes = sorted(range(len(positions)), key=lambda a: positions[a])
            if axes != list(range(len(axes))):
                value = tf.transpose(value, axes + ([] if src.data.sparse else [len(axes)]))
            positions = sorted(positions)
        if src.data.sparse:  # a label outside the sparse dim selects a zero row, as TF's gather on GPU (where
            # RETURNN ran the published configs) gives: RNN-T configs embed a BOS = blank index one past the classes
            inside = tf.logical_and(value >= 0, value < plan.in_dims[i])
            part = tf.gather(rows, tf.where(inside, value, tf.zeros_like(value)))
            part = part * tf.cast(inside, part.dtype)[..., None]
        else:
            part = dense_dot(value, rows)
        n = len(plan.dims)
        part = align_tensor(part, positions + [n], n + 1)
        total = part if total is None else total + part
    return total


def dense_template(data: Data) -> Data:
    """The template of :func:`dense_value`: a sparse one as one-hot floats, feature axis last."""
    if not data.sparse:
        return data
    return data.copy_insert_dim(data.sparse_dim, -1).copy(sparse_dim=None, dtype="float32")


def refuse_sparse_concat(layer, sources: Sequence[Data]) -> None:
    """RETURNN's concat_sources asserts that no source is sparse when there are several ("sparse concat not
    supported", since 2018): labels beside other sources fail there in every layer that concatenates its
    sources (copy, reduce, rec, rnn_cell, self_attention, window, ...; RETURNN 1.20261022's linear and softmax
    build an output without a value and fail when run, checked)."""
    sparse = [s.name for s in sources if s.sparse]
    if sparse and len(sources) > 1:
        raise NetworkError("%s: sources %s are sparse (labels) beside other sources, and RETURNN concatenates no "
                           "sparse source ('sparse concat not supported'); embed them first (e.g. a linear layer)"
                           % (layer.desc, sparse))


def concat_output(layer, sources: Sequence[Data]) -> Tuple[Data, Optional[FeaturePlan]]:
    """Template of the feature-concatenation of ``sources`` (one source: itself) and the plan to
    build it (None for one source). Labels beside other sources are refused (RETURNN)."""
    check_sources(layer, sources)
    refuse_sparse_concat(layer, sources)
    if len(sources) == 1:
        return sources[0].copy(layer.layer_name), None
    plan = feature_plan(layer, [dense_template(s) for s in sources])
    return plan_output(layer.layer_name, plan, new_feature_dim(layer.layer_name, sum(plan.in_dims))), plan


def concat_inputs(layer, data: Data, plan: Optional[FeaturePlan], sources: List[LayerOutput], ctx) -> LayerOutput:
    """The layer's input dropout, then the concatenation planned by :func:`concat_output`."""
    sources = dropout_sources(layer, sources, ctx)
    if plan is None:
        return sources[0]
    # padded positions as each source is read there (computed by a layer, zero frames of data), as RETURNN's concat
    sources = [s.with_tensor(s.as_read()) for s in map(dense_value, sources)]
    sizes = {dim: size for src in sources for dim, size in src.sizes.items()}
    out = LayerOutput(concat_features(plan, sources), data, sizes)
    out.computed_padding = True
    return out


def explicit_feature_positions(src: Optional[Data], dims: Sequence[Dim]) -> List[int]:
    """The positions among ``dims`` of ``src``'s feature dim where ``src`` sets its feature axis explicitly
    (RETURNN's gather template keeps such a feature axis; else its default rule picks one), else []."""
    if src is None or src._feature_dim_axis is NotSpecified or src.feature_dim_axis is None:
        return []
    return [i for i, d in enumerate(dims) if d is src.dims[src.feature_dim_axis]]


def new_feature_dim(layer_name: str, size: int) -> Dim:
    """A fresh feature dim for a layer's output."""
    return Dim(size, kind=DimTypes.Feature, description="%s:feature-dense" % layer_name, auto_generated=True)


def normalize(x: tf.Tensor, axis: int, epsilon: float) -> tf.Tensor:
    """``(x - mean) / sqrt(var + epsilon)`` over ``axis``. The variance is taken from the centred
    values by hand, not by tf.nn.moments: TF 2.15's grappler remapper fuses the moments pattern
    into a oneDNN layer norm and the process died (protobuf CHECK, signal 11) evaluating RETURNN's
    transformer LM configs."""
    centred = x - tf.reduce_mean(x, axis=axis, keepdims=True)
    var = tf.reduce_mean(centred * centred, axis=axis, keepdims=True)
    return centred * tf.math.rsqrt(var + epsilon)


def relaid(name: str, data: Data, dims: Sequence[Dim], **special) -> Data:
    """A template of ``dims`` with ``data``'s dtype and sparse dim whose time and feature axes stay
    on the dims they were on in ``data`` (found by identity; the default rule where they are gone),
    unless ``special`` gives ``time_dim_axis`` / ``feature_dim_axis``."""
    out = Data(name, dims=dims, dtype=data.dtype, sparse_dim=data.sparse_dim)
    for key in ("time_dim_axis", "feature_dim_axis"):
        old = getattr(data, key)
        if key not in special and old is not None:
            hit = [i for i, d in enumerate(dims) if d is data.dims[old]]
            if hit:
                special[key] = hit[0]
    return out.copy(**{k: v for k, v in special.items() if v != getattr(out, k)})


def last_axis_bias(layer, data: Data):
    """RETURNN's ``with_bias`` of ``combine``/``eval``: a parameter ``b`` (zeros) of the output's dim,
    added on the last axis of the result before the activation; refused where that axis is not the
    feature axis (RETURNN would add it to another axis, or fail)."""
    if data.dim is None or data.sparse or data.feature_dim_axis != data.batch_ndim - 1:
        raise NetworkError("%s: with_bias needs a dense output with a static feature dim on its last axis, got %s"
                           % (layer.desc, data.short_repr()))
    return layer.weight("b", [data.dim], 0.0)
