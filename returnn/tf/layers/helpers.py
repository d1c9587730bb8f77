"""Helpers shared by layer modules: source checks, dropout, the common layout of several
sources (broadcasting by dim tags), feature concatenation and the linear map of sources.

The common layout follows RETURNN: axes are matched by dim equality; an unmatched static axis is
matched to the unique unused axis of the same kind and size (e.g. two feature axes of equal size),
else, when both were made by the engine (``auto_generated``: a variable's shape, extern data
without dim tags), to the first unused axis of that size whatever its kind (RETURNN's
``get_common_data``: ``treat_feature_as_spatial``, first match); before behavior_version 11 an
engine-made axis of size 1 (a variable of shape [1]) broadcasts into the first free axis of any
size (RETURNN's ``broadcast_matches``); from behavior_version 16 (RETURNN's simple dim equality) a dim the
user made (``Dim.user_made``: a config's, extern data's dim_tags) matches no other; anything else is a new axis that
the others broadcast over: two different dynamic axes (e.g. the time axes of two data keys) are two
axes. When every source would need broadcasting (none has all axes of the result), RETURNN refuses from behavior_version 4 on (:func:`check_broadcast`).
"""
from __future__ import annotations

import contextlib

from typing import Any, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim, DimTypes
from returnn.tensor.data import NotSpecified
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


def _match(common: List[Dim], used: set, dim: Dim, own: Sequence[Dim], strict: bool) -> Optional[int]:
    for i, c in enumerate(common):
        if i not in used and c == dim:
            return i
    if strict or any(dim == c for c in common):
        return None  # already placed for this source: a repeated dim gets its own axis
    if dim.dimension is None:  # two different dynamic axes (e.g. time axes of different lengths) never match
        return _into_broadcast_axis(common, used, dim, own)
    free = [i for i, c in enumerate(common) if i not in used and c.dimension == dim.dimension
            and not c.is_batch_dim() and not any(c == d for d in own)]
    from returnn.tf.layers.norm import behavior_version
    if behavior_version() >= 16:  # RETURNN's simple dim equality: a dim the user made matches only itself
        free = [i for i in free if not (_user_made(dim) or _user_made(common[i]))]
    candidates = [i for i in free if common[i].kind == dim.kind]
    if len(candidates) == 1:
        return candidates[0]
    # RETURNN's get_common_data: static axes both made by the engine (auto_generated: a variable's
    # shape, extern data without dim tags) match whatever their kind, the first one first
    generated = [i for i in free if dim.auto_generated and common[i].auto_generated]
    if generated and not dim.is_batch_dim():
        return generated[0]
    if free and not dim.is_batch_dim() and behavior_version() < 16:
        # RETURNN before behavior_version 16 (no simple dim equality): get_common_data's is_equal treats a
        # feature axis as spatial and lets static axes of one size match (allow_same_spatial_dim), user-made too
        return free[0]
    if dim.dimension == 1 and dim.auto_generated and not dim.is_batch_dim():
        # RETURNN before behavior_version 11 (broadcast_matches): an engine-made size-1 axis (a variable
        # of shape [1]) broadcasts into the first free axis of any size instead of adding one
        from returnn.tf.layers.norm import behavior_version
        if behavior_version() < 11:
            bcast = [i for i, c in enumerate(common) if i not in used and not c.is_batch_dim()
                     and not any(c == d for d in own)]
            return bcast[0] if bcast else None
    return _into_broadcast_axis(common, used, dim, own)


def _into_broadcast_axis(common: List[Dim], used: set, dim: Dim, own: Sequence[Dim]) -> Optional[int]:
    """The other direction of RETURNN's broadcast_matches (before behavior_version 11): an engine-made size-1
    axis already in the union (a variable's dummy time axis in the source with the most axes) takes ``dim``
    (e.g. data's time axis); :func:`common_dims` then puts ``dim`` there."""
    from returnn.tf.layers.norm import behavior_version
    if dim.is_batch_dim() or dim.dimension == 1 or behavior_version() >= 11:
        return None
    ones = [i for i, c in enumerate(common) if i not in used and c.dimension == 1 and c.auto_generated
            and not c.is_batch_dim() and not any(c == d for d in own)]
    return ones[0] if ones else None


def _user_made(dim: Dim) -> bool:
    return dim.user_made or dim.get_same_base().user_made


def common_dims(dims_lists: Sequence[Sequence[Dim]], strict: bool = False, layer=None
                ) -> Tuple[List[Dim], List[List[int]]]:
    """The union of several dim lists (first list's order first) and, per list, the position of
    each of its dims in the union (see module docstring for how dims are matched; ``strict``:
    by dim equality only). With ``layer``: :func:`check_broadcast` for it."""
    common: List[Dim] = []
    maps: List[List[int]] = []
    for dims in dims_lists:
        used: set = set()
        positions = []
        for dim in dims:
            pos = _match(common, used, dim, dims, strict)
            if pos is None:
                common.append(dim)
                pos = len(common) - 1
            elif common[pos].dimension == 1 and dim.dimension != 1 and common[pos].auto_generated:
                common[pos] = dim  # a broadcast size-1 axis takes the larger dim (_into_broadcast_axis)
            used.add(pos)
            positions.append(pos)
        maps.append(positions)
    if layer is not None:
        check_broadcast(layer, dims_lists, common, maps)
    return common, maps


def merge_added_axes(layer, dims: List[Dim], maps: List[List[int]], added: Sequence[Dim]
                     ) -> Tuple[List[Dim], List[List[int]]]:
    """RETURNN's get_common_data adds the axes the first largest source lacks (``added``, in that order) one by
    one, each looked up among the common axes so far, those just added too: a static engine-made axis of the size
    of one added before it (e.g. a variable of shape [1, 1]: its two axes) takes that one's place in ``dims``. Of
    size 1 the source axis it replaces broadcasts away (its map entry -1: squeezed, see
    :func:`~returnn.tf.layers.output.align_tensor`); of another size RETURNN then fails (two source axes on
    one), refused here."""
    from returnn.tf.layers.norm import behavior_version
    _check_added_on_taken_base_axis(layer, dims, maps, added)
    kept: List[Dim] = []
    for d in added:
        prev = next((e for e in kept if d.dimension is not None and e.dimension == d.dimension
                     and not d.is_batch_dim() and not e.is_batch_dim()
                     and (behavior_version() < 16 or not (_user_made(d) or _user_made(e)))), None)
        if prev is None:
            kept.append(d)
            continue
        if d.dimension != 1:
            raise NetworkError("%s: the axes %r and %r (both of size %i, new to the first largest source) are one "
                               "axis to RETURNN's get_common_data, which then fails to map the sources onto it"
                               % (layer.desc, prev.description, d.description, d.dimension))
        j = next(k for k, e in enumerate(dims) if e is prev)
        i = next(k for k, e in enumerate(dims) if e is d)
        kept[kept.index(prev)] = d
        dims = [d if k == j else e for k, e in enumerate(dims) if k != i]
        maps = [[-1 if p == j else (j if p == i else p) - (p > i and p != j) - (p == i and j > i)
                 for p in m] for m in maps]
    return dims, maps


def _check_added_on_taken_base_axis(layer, dims: List[Dim], maps: List[List[int]], added: Sequence[Dim]) -> None:
    """RETURNN's get_common_data looks each axis new to the first largest source up among the common axes again,
    without the per-source exclusion of its first pass: a static axis (not of size 1) that RETURNN's loose equality
    takes for an axis of the first largest source (same size; user-made ones only before behavior_version 16) replaces
    it there. When its own source maps another of its axes onto that axis (e.g. a constant of shape (5, 5) beside
    (B, T, 5) data, both 5s matching the data's features), the source then has two axes on one and RETURNN fails
    ("cannot match the axes"): refused alike."""
    from returnn.tf.layers.norm import behavior_version
    added_ids = {id(d) for d in added}
    for m in maps:
        mine = [dims[p] for p in m if p >= 0]
        for d in mine:
            if id(d) not in added_ids or d.dimension in (None, 1) or d.is_batch_dim():
                continue
            for e in mine:
                if id(e) in added_ids or e.is_batch_dim() or e.dimension != d.dimension:
                    continue
                if behavior_version() >= 16 and (_user_made(d) or _user_made(e)):
                    continue
                raise NetworkError("%s: the axis %r of one source (size %i, new to the first largest source) is the "
                                   "axis %r to RETURNN's get_common_data, onto which that source's other axis of this "
                                   "size is mapped too: RETURNN then fails to map it (two axes on one)"
                                   % (layer.desc, d.description, d.dimension, e.description))


def returnn_common_order(base: Data, dims: List[Dim], maps: List[List[int]]) -> Tuple[List[Dim], List[List[int]]]:
    """RETURNN's ``get_common_data`` layout: ``dims`` (from :func:`common_dims` with the base source's
    dims first, the others' new dims appended) with each new dim inserted where RETURNN puts it
    (:meth:`Data.get_default_new_axis_for_dim_tag`, one after the other: a second time axis after the
    first, not after the features); ``maps`` follow."""
    n = base.batch_ndim
    if len(dims) == n:
        return dims, maps
    cur = Data("common", dims=dims[:n], sparse_dim=base.sparse_dim, dtype=base.dtype,
               time_dim_axis=base._time_dim_axis, feature_dim_axis=base._feature_dim_axis)
    order = list(range(n))
    for j in range(n, len(dims)):
        axis = cur.get_default_new_axis_for_dim_tag(dims[j])
        cur = cur.copy_add_dim_by_tag(dims[j], axis=axis)
        order.insert(axis, j)
    new_pos = {old: new for new, old in enumerate(order)}
    return [dims[o] for o in order], [[new_pos[p] if p >= 0 else p for p in m] for m in maps]


def returnn_dim_objects(sources: Sequence[Data], dims: List[Dim]) -> List[Dim]:
    """``dims`` (the common layout of ``sources``) with each axis the Dim RETURNN's ``get_common_data`` puts there,
    where its template has the same axes: of two static axes of one size that it takes for one, it keeps the later
    source's (a config's ``f`` where the first largest source has a variable's axis of that size). Where its
    template differs otherwise (RETURNN fails on it, or keeps a size-1 axis a larger one broadcasts into), ``dims``."""
    try:
        theirs = Data.get_common_data(list(sources)).dims
    except Exception:  # (refused as RETURNN does, or not, by the layer's own checks)
        return dims
    if len(theirs) != len(dims):
        return dims
    out = []
    for a, b in zip(dims, theirs):
        if a is b or a.is_batch_dim() or b.is_batch_dim() or a.dimension is None or b.dimension is None:
            if a is not b and not (a.is_batch_dim() and b.is_batch_dim()) and a != b:
                return dims
            out.append(a)
        elif a.dimension != b.dimension:
            return dims
        else:
            out.append(b)
    return out


_LOOP_AXES: List[Dim] = []  # time axes of rec loops whose sub-layers are being built over whole sequences


@contextlib.contextmanager
def loop_axis(dim: Dim) -> Iterator[None]:
    """While a rec unit builds a sub-layer over the whole sequence (moved out of its loop): that
    loop's time axis is no broadcasting the sub-layer asks for (in the loop it has no such axis)."""
    _LOOP_AXES.append(dim)
    try:
        yield
    finally:
        _LOOP_AXES.pop()


def moved_out_loop_dims() -> List[Dim]:
    """While a rec unit builds a sub-layer moved out of its loop (:func:`loop_axis`): the loop's time
    axis; elsewhere none."""
    return [_LOOP_AXES[-1]] if _LOOP_AXES else []


def check_broadcast(layer, dims_lists: Sequence[Sequence[Dim]], common: List[Dim], maps: List[List[int]]) -> None:
    """RETURNN (behavior_version >= 4): when several sources all need broadcasting to their common
    layout (none has all its axes, e.g. [B,T1,F] + [B,T2,F]), the layer is refused unless it
    states its output shape (``out_shape``, an ``out_type`` with a shape) or allows it
    (``allow_broadcast_all_sources`` True; False refuses it whatever the behavior_version). A rec
    loop's own time axis does not count (a layer moved out of the loop sees it, the same layer in
    the loop does not)."""
    _check_derived_axes(layer, dims_lists, common)
    _check_batch_contents(layer, dims_lists)
    allow = layer.opts.get("allow_broadcast_all_sources")
    loop = [i for i, d in enumerate(common) if any(d == a for a in _LOOP_AXES)]
    if allow is True or len(dims_lists) < 2 or any(len(set(m) | set(loop)) == len(common) for m in maps):
        return
    if allow is None:
        out_type = layer.opts.get("out_type")
        if layer.opts.get("out_shape") or (isinstance(out_type, dict) and ({"shape", "dim_tags"} & set(out_type))):
            return
        from returnn.tf.layers.norm import behavior_version
        if behavior_version() < 4:
            return
    def axes(dims) -> str:
        return "[%s]" % ", ".join(d.short_repr() if hasattr(d, "short_repr") else str(d) for d in dims)
    raise NetworkError("%s: every source needs broadcasting to the common axes %s (sources: %s); RETURNN refuses "
                       "this from behavior_version 4 unless allow_broadcast_all_sources (different time axes?)"
                       % (layer.desc, axes(common), ", ".join(axes(dims) for dims in dims_lists)))

def _batch_contents(dim: Dim) -> Any:
    """What a batch axis holds: None for the plain batch, else what flatten_batch/merge_dims put in it."""
    packed = getattr(dim, "packed", None)
    return None if packed is None else (packed.dim, packed.outer, packed.batch_major, packed.real_only)


def _check_batch_contents(layer, dims_lists: Sequence[Sequence[Dim]]) -> None:
    """Sources whose batch axes hold different things (e.g. a ``merge_dims`` of batch and time, and
    the plain batch): RETURNN extends the smaller batch to the other (its BatchInfo); not here."""
    contents = {_batch_contents(d) for dims in dims_lists for d in dims if d.is_batch_dim()}
    if len(contents) > 1:
        raise NetworkError("%s: the sources' batch axes hold different axes (%s): combining a batch with an axis "
                           "merged into it (flatten_batch, merge_dims of the batch) and one without is not supported"
                           % (layer.desc, ", ".join(sorted("the plain batch" if c is None else "%s merged in"
                                                           % c[0].description for c in contents))))


def _derived_root(dim: Dim) -> Dim:
    """RETURNN's ``get_same_derived_base(same_dim=True)``: a cut or pooled time axis leads to the time axis; a conv's
    dim declared the same as the input's axis (a stride cancelling an upsampling) stops the walk there."""
    return dim.get_same_derived_base(same_dim=True)


def _check_derived_axes(layer, dims_lists: Sequence[Sequence[Dim]], common: List[Dim]) -> None:
    """RETURNN's get_common_data takes two different dynamic axes derived from the same one
    (``derived_matches``: a time axis and its pooled or split version) as one axis, then fails to
    map the sources onto it; here that is a one-line error, not an outer product of both axes."""
    dyn = [d for d in common if d.dimension is None and not d.is_batch_dim() and not any(d == a for a in _LOOP_AXES)]
    for i, a in enumerate(dyn):
        for b in dyn[i + 1:]:
            if _derived_root(a) is _derived_root(b) and not any(
                    any(a == d for d in dims) and any(b == d for d in dims) for dims in dims_lists):
                raise NetworkError("%s: the sources' axes %r and %r both derive from %r but differ in length; RETURNN "
                                   "takes them as one axis and fails to match the sources"
                                   % (layer.desc, a.description, b.description, _derived_root(a).description))


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
    rest, feats, in_dims = [], [], []
    for src in sources:
        if src.dim is None:
            raise NetworkError("%s: source %r has no feature axis (%s)" % (layer.desc, src.name, src.short_repr()))
        feat = src.feature_dim_axis
        feats.append(feat)
        in_dims.append(src.dim)
        rest.append([d for i, d in enumerate(src.dims) if i != feat])
    for i, own in enumerate(rest):  # RETURNN's common template (ignore_feature_dim) drops feature-kind axes:
        for d in own:  # one that only some sources have fails its tf.concat
            if d.kind == DimTypes.Feature and len(sources) > 1 and any(d not in other for other in rest):
                raise NetworkError("%s: source %r has the feature-kind axis %r besides its feature axis, another "
                                   "source has not: RETURNN's concatenation fails on that" % (
                                       layer.desc, sources[i].name, d.description))
    dims, maps = common_dims(rest, layer=layer)
    first = sources[0]
    time_dim = None
    if first._time_dim_axis is not NotSpecified and first.time_dim_axis is not None \
            and first.time_dim_axis != first.feature_dim_axis:
        time_dim = dims[maps[0][[i for i in range(first.batch_ndim) if i != feats[0]].index(first.time_dim_axis)]]
    return FeaturePlan(dims, maps, feats, in_dims, time_dim)


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
    return data.copy_add_dim_by_tag(data.sparse_dim, -1).copy(sparse_dim=None, dtype="float32")


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
