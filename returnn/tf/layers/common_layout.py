"""The common layout of several sources (broadcasting by dim tags), as RETURNN's ``get_common_data`` (combine,
compare, eval, switch, stack, the linear map of several sources, ...): :func:`common_dims` (the union of their
dims and where each source's axes go), :func:`returnn_common_order` (new axes where RETURNN puts them),
:func:`merge_added_axes`, :func:`returnn_dim_objects` (RETURNN's template's Dims), :func:`check_broadcast`.
Combine and compare then take RETURNN's template itself where it maps the sources otherwise (:func:`layer_layout`,
:func:`returnn_layout`: its ``get_common_data`` and ``copy_compatible_to``), and refuse where RETURNN cannot map one.

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

from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from returnn.errors import NetworkError, first_line
from returnn.tensor import Data, Dim
from returnn.tensor.not_specified import NotSpecified


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
        cur = cur.copy_insert_dim(dims[j], axis=axis)
        order.insert(axis, j)
    new_pos = {old: new for new, old in enumerate(order)}
    return [dims[o] for o in order], [[new_pos[p] if p >= 0 else p for p in m] for m in maps]


_COPY_OPTS = dict(allow_same_feature_dim=True, allow_same_spatial_dim=True, treat_feature_as_spatial=True,
                 ignore_feature_dim=True)


def returnn_layout(layer, sources: Sequence[Data], values: bool = True) -> Optional[Tuple[Data, List[List[int]]]]:
    """RETURNN's template of a combine or compare layer (``Data.get_common_data`` of its sources) and per source
    where its axes go (the ``find_matching_dim_map`` of RETURNN's ``copy_compatible_to``); None where
    ``get_common_data`` fails (the layer's own checks refuse it, or not) or the layer states its output (``out_type``,
    ``out_shape``). Refused in one line where RETURNN then fails: ``copy_compatible_to`` cannot map a source, or
    (before behavior_version 11) the template keeps an engine-made size-1 axis that a source's larger axis maps
    onto (its value has the larger size there: "Mismatching shape"); not ``values`` (eval, whose code makes the value
    from the sources: its result is checked against the template instead): only where it cannot map a source."""
    if {"out_type", "out_shape"} & {k for k, v in layer.opts.items() if v is not None}:
        return None
    try:
        common = Data.get_common_data(list(sources), allow_broadcast_all_sources=True)  # (check_broadcast's)
    except Exception:  # (refused as RETURNN does, or not, by the layer's own checks)
        return None
    maps = source_maps(layer, sources, common)
    if values:
        for source, m in zip(sources, maps):
            _check_mapped(layer, source, m, common)
    return common, maps


def _check_mapped(layer, source: Data, m: List[int], common: Data) -> None:
    """Refused in one line where RETURNN fails on the value of ``source`` brought into ``common`` by the map ``m``."""
    for a, t in enumerate(m):
        c, mine = common.dims[t], source.dims[a].dimension
        if c.dimension not in (None, 1) and mine not in (None, 1, c.dimension) and not c.is_batch_dim():
            raise NetworkError("%s: RETURNN's copy_compatible_to puts a source's axis %r (size %s) on the common "
                               "axis %r (size %s, both feature dims), and then fails on the value ('Dimensions "
                               "must be equal')" % (layer.desc, source.dims[a].description, mine, c.description,
                                                    c.dimension))
        if c.dimension == 1 and not c.is_batch_dim() and mine != 1:
            raise NetworkError("%s: RETURNN's common template keeps the size-1 axis %r where a source's axis %r "
                               "broadcasts into it, and then fails on the value's shape ('Mismatching shape'); "
                               "squeeze the size-1 axis first or set behavior_version >= 11"
                               % (layer.desc, c.description, source.dims[a].description))


def returnn_map(template: Data, source: Data) -> List[int]:
    """Per axis of ``source``, the axis of ``template`` RETURNN's ``copy_compatible_to`` puts it on (its
    ``find_matching_dim_map``); ValueError where it finds none."""
    found = template.find_matching_dim_map(source, list(range(source.batch_ndim)), _COPY_OPTS)
    return [found[a] for a in range(source.batch_ndim)]


def _source_map(layer, i: int, source: Data, common: Data) -> List[int]:
    """Where RETURNN's ``copy_compatible_to`` puts the axes of source ``i`` in ``common``; refused where it fails."""
    try:
        source.copy_compatible_to(common, check_sparse=False, check_dtype=False)
        return returnn_map(common, source)
    except ValueError:
        raise NetworkError("%s: RETURNN cannot bring source %i %s into its common template %s (its "
                           "copy_compatible_to fails on the axes); reorder or squeeze the sources' axes first"
                           % (layer.desc, i, source.short_repr(), common.short_repr())) from None


def source_maps(layer, sources: Sequence[Data], common: Data) -> List[List[int]]:
    """Per source, where RETURNN's ``copy_compatible_to`` puts its axes in ``common`` (its ``find_matching_dim_map``);
    refused in one line where it cannot map one (RETURNN fails there when the network is built)."""
    return [_source_map(layer, i, source, common) for i, source in enumerate(sources)]


def unconvertible_sources(layer, sources: Sequence[Data]) -> Dict[int, str]:
    """The eval layer's sources that RETURNN's ``source(i)`` (``auto_convert``: ``copy_compatible_to`` its template,
    ``get_common_data`` of the sources) cannot bring into the template, each with the one-line reason (RETURNN fails
    when the code reads such a source with auto_convert)."""
    try:
        common = Data.get_common_data(list(sources), allow_broadcast_all_sources=True)
    except Exception:  # (RETURNN's template fails: the layer's own checks refuse it)
        return {}
    return mapped_onto(layer, sources, common)[2]


def mapped_onto(layer, sources: Sequence[Data], template: Data) -> Tuple[List[List[int]], int, Dict[int, str]]:
    """Per source, where RETURNN's ``copy_compatible_to`` puts its axes in ``template`` (empty where it cannot), the
    template's number of axes, and the sources it cannot bring in, each with the one-line reason (an eval's source(i):
    what its code makes of them is checked against the template as its result)."""
    maps: List[List[int]] = []
    errors: Dict[int, str] = {}
    for i, source in enumerate(sources):
        try:
            m = _source_map(layer, i, source, template)
        except NetworkError as exc:
            errors[i], m = str(exc), []
        maps.append(m)
    return maps, template.batch_ndim, errors


def layer_layout(layer, sources: Sequence[Data], dims: Optional[List[Dim]], maps: Optional[List[List[int]]],
                 strict: bool = True) -> Tuple[List[Dim], List[List[int]], Optional[Data]]:
    """The common layout of a combine or compare layer: ``dims`` and ``maps`` (this engine's, per source in
    ``sources``' order; None where its own rules refused) with RETURNN's Dims (:func:`returnn_dim_objects`)
    where RETURNN's template (:func:`returnn_layout`) puts each source's axes at the same places; else RETURNN's
    template's dims and maps (e.g. an engine-made size-1 axis that RETURNN lets a time axis broadcast into). The
    third value is RETURNN's template (for its feature and time axes), None without one: then ``dims`` and
    ``maps``. Not ``strict`` (eval: RETURNN brings a source into the template only where the code reads it with
    auto_convert, and checks the code's result against the template): where RETURNN cannot map a source, ``dims``
    and ``maps`` too; no checks of the sources' values in the template (:func:`returnn_layout`'s ``values``)."""
    try:
        theirs = returnn_layout(layer, sources, values=strict)
    except NetworkError:
        if not strict and dims is not None:
            return dims, maps, None
        if dims is not None:  # this engine's more specific refusal of the layout first (e.g. derived axes)
            check_broadcast(layer, [s.dims for s in sources], dims, [[p for p in m if p >= 0] for m in maps])
        raise
    if theirs is None:
        if dims is None:
            raise ValueError("layer_layout: no layout")
        return dims, maps, None
    common, tmaps = theirs
    if dims is not None and len(dims) == len(common.dims) and maps == tmaps:
        dims = returnn_dim_objects(dims, common.dims)
        if [d.dimension for d in dims] == [d.dimension for d in common.dims]:
            return dims, maps, common
        if strict:
            return dims, maps, None
        # (eval: RETURNN's template keeps e.g. a size-1 axis a source's larger axis maps onto; its result is checked)
    return list(common.dims), tmaps, common


def returnn_dim_objects(dims: List[Dim], theirs: Sequence[Dim]) -> List[Dim]:
    """``dims`` (this engine's common layout) with each axis the Dim RETURNN's template (its ``get_common_data``,
    dims ``theirs``) puts there, where the template has the same axes: of two static axes of one size that it
    takes for one, it keeps the later source's (a config's ``f`` where the first largest source has a variable's
    axis of that size). Where the template differs otherwise, ``dims``."""
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
    check_source_dims(layer, dims_lists, common)
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

def check_source_dims(layer, dims_lists: Sequence[Sequence[Dim]], common: List[Dim]) -> None:
    """This engine's checks of several sources' dims in their common layout ``common`` (derived axes, batch
    contents), made before the broadcast checks."""
    _check_derived_axes(layer, dims_lists, common)
    _check_batch_contents(layer, dims_lists)


def check_stated_broadcast(layer, sources: Sequence[Data], common: List[Dim]) -> None:
    """:func:`check_broadcast` for a layer that states its output's dims (an eval's ``out_type`` with ``dims``):
    RETURNN's CombineLayer still builds ``get_common_data`` of its sources, so whether every source needs
    broadcasting is decided on RETURNN's common template (not this engine's ``common`` layout); allowed for an
    ``out_type`` with ``shape`` or ``dim_tags`` (not ``dims``), ``out_shape``, or moved out of a rec loop."""
    dims_lists = [s.dims for s in sources]
    check_source_dims(layer, dims_lists, common)
    allow = layer.opts.get("allow_broadcast_all_sources")
    if allow is None:
        out_type = layer.opts.get("out_type") or {}
        allow = True if layer.opts.get("out_shape") or {"shape", "dim_tags"} & set(out_type) or _LOOP_AXES \
            else NotSpecified
    try:
        Data.get_common_data(list(sources), allow_broadcast_all_sources=allow)
    except Exception as exc:  # noqa: BLE001  (RETURNN's error, in one line)
        raise NetworkError("%s: %s" % (layer.desc, first_line(exc))) from None


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
