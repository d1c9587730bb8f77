"""RETURNN's ``Dim`` comparison API for config code (``dim.is_equal(other, **opts)``, ``Dim.get_all_dimension_tags``,
``Dim.get_existing_tag_from_collection``, ``get_same_derived_base``, ...), as RETURNN's ``_dim_extra``.

``Dim.__eq__`` here is identity extended by ``declare_same_as`` (see :mod:`returnn.tensor.dim`); RETURNN's
``is_equal`` is looser: with its options, dims of one kind and size match (``allow_same_spatial_dim``, ...), and
two dims both made by the engine (auto_generated) with one description are equal (RETURNN makes a dim again
when it builds a template twice). From behavior_version 16 (RETURNN's simple dim equality) a dim the user made
matches only itself (or a size-1 broadcast dim with ``broadcast_matches``).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

IS_EQUAL_OPTS = ("ignore_feature_dim", "allow_same_feature_dim", "allow_same_spatial_dim", "treat_feature_as_spatial",
                 "broadcast_matches", "unknown_spatial_matches", "undefined_matches", "derived_matches",
                 "allow_old_behavior")


def _simple_equality() -> bool:
    from returnn.util.basic import BehaviorVersion
    try:
        return BehaviorVersion.get() >= 16
    except (TypeError, ValueError):
        return False


def _no_sizes(dim) -> bool:
    """RETURNN's ``dim.dyn_size is None``: a static dim, or a dynamic one outside a network build (sizes travel
    with the values here; RETURNN's dims of a network carry theirs, a standalone template's have none)."""
    from returnn.tensor import dim as dim_module
    return dim.dimension is not None or not dim_module._BUILDING[0]


def same_derived_base(dim, same_dim: bool = False):
    """Through ``same_as`` and ``derived_from`` to the first dim (RETURNN's ``get_same_derived_base``); with
    ``same_dim`` the last one on the way of ``dim``'s size."""
    last_same_size, base, seen = dim, dim, set()
    while base.same_as is not None or base.derived_from is not None:
        if id(base) in seen:
            raise ValueError("%s: a cycle of same_as/derived_from" % dim.short_repr())
        seen.add(id(base))
        if base.same_as is not None:
            base = base.same_as
            continue
        base = base.derived_from
        if base.dimension == dim.dimension:
            last_same_size = base
    return last_same_size if same_dim else base


def derived_bases_set(dim) -> Set[Any]:
    """``dim``'s base and all dims it is derived from (dim math inputs, ``derived_from``), as bases."""
    out: Dict[int, Any] = {}
    queue = [dim]
    while queue:
        base = queue.pop(-1).get_same_base()
        if id(base) in out:
            continue
        out[id(base)] = base
        if base.derived_from_op is not None:
            queue.extend(x for x in base.derived_from_op[1] if not isinstance(x, int))
        elif base.derived_from is not None:
            queue.append(base.derived_from)
    return set(out.values())


def is_equal(self, other, *, ignore_feature_dim: bool = False, allow_same_feature_dim: bool = False,
             allow_same_spatial_dim: Optional[bool] = None, treat_feature_as_spatial: bool = False,
             broadcast_matches: bool = False, unknown_spatial_matches: bool = False, undefined_matches: bool = False,
             derived_matches: bool = False, allow_old_behavior: bool = False) -> bool:
    """RETURNN's ``Dim.is_equal`` (see the module docstring)."""
    from returnn.tensor.dim import Dim, DimTypes
    if self is other:
        return True
    if not isinstance(other, Dim):
        return False
    if allow_same_spatial_dim is None:
        allow_same_spatial_dim = allow_same_feature_dim
    if derived_matches:
        if same_derived_base(self, True) is same_derived_base(other, True):
            return True
    elif self.get_same_base() is other.get_same_base():
        return True
    kind, other_kind = self.kind, other.kind
    if kind == other_kind == DimTypes.Feature and ignore_feature_dim:
        return True
    if treat_feature_as_spatial:  # RETURNN: every kind but batch counts as spatial then
        kind = DimTypes.Spatial if kind in (DimTypes.Feature, DimTypes.Unspecified) else kind
        other_kind = DimTypes.Spatial if other_kind in (DimTypes.Feature, DimTypes.Unspecified) else other_kind
    bcast = broadcast_matches and ((self.dimension == 1 and self.auto_generated)
                                   or (other.dimension == 1 and other.auto_generated))
    if self.dimension != other.dimension and not bcast:
        return False
    if kind != other_kind:
        return False
    if kind == DimTypes.Batch:
        return True
    if _simple_equality() and not allow_old_behavior and not (self.auto_generated and other.auto_generated) \
            and not bcast:
        return False
    if kind == DimTypes.Feature and allow_same_feature_dim:
        return True
    if kind == DimTypes.Spatial:
        if allow_same_spatial_dim:
            if self.dimension is not None:
                return True
            if broadcast_matches and (self.dimension == 1 or other.dimension == 1):
                return True
        if unknown_spatial_matches and (_no_sizes(self) or _no_sizes(other)):
            return True
    return bool(self.auto_generated and other.auto_generated and self.description == other.description)


def existing_tag_from_collection(other, tags: Sequence[Any], is_equal_opts: Optional[Dict[str, Any]] = None):
    """The first of ``tags`` equal to ``other``: by plain ``is_equal`` first, then without ``broadcast_matches``,
    then with all ``is_equal_opts`` (RETURNN's rounds); None if none is."""
    opts = dict(is_equal_opts or {})
    rounds: List[Dict[str, Any]] = [{}]
    if opts:
        if "broadcast_matches" in opts:
            rounds.append({k: v for k, v in opts.items() if k != "broadcast_matches"})
        rounds.append(opts)
    for round_opts in rounds:
        for tag in tags:
            if is_equal(tag, other, **round_opts):
                return tag
    return None


def all_dimension_tags(data_list: Sequence[Any], is_equal_opts: Optional[Dict[str, Any]] = None,
                       unique_separate_axes: bool = True) -> Tuple[List[Any], Dict[Any, List[Any]]]:
    """RETURNN's ``Dim.get_all_dimension_tags``: the distinct dims of the templates (``is_equal_opts`` decide which
    are the same) and per template (a dict by identity, as RETURNN's ``DictRefKeys``) the dim each axis is."""
    tags: List[Any] = []
    per_data = _RefDict()
    for data in data_list:
        per_data[data] = []
        candidates = list(tags) if unique_separate_axes else tags
        for tag in data.dims:
            existing = existing_tag_from_collection(tag, candidates, is_equal_opts)
            if existing is not None and unique_separate_axes:
                candidates.remove(existing)
            if existing is None:
                tags.append(tag)
            per_data[data].append(tag if existing is None else existing)
    return tags, per_data


def uniq_collection(tags: Sequence[Any], is_equal_opts: Optional[Dict[str, Any]] = None) -> List[Any]:
    """``tags`` without repeats (equal by ``is_equal_opts``), the first of each kept."""
    out: List[Any] = []
    for tag in tags:
        if existing_tag_from_collection(tag, out, is_equal_opts) is None:
            out.append(tag)
    return out


class _RefDict(dict):
    """A dict keyed by object identity (RETURNN's ``DictRefKeys``: templates are not hashable)."""

    def __init__(self):
        super().__init__()
        self._keys: Dict[int, Any] = {}

    def __setitem__(self, key: Any, value: Any) -> None:
        self._keys[id(key)] = key
        super().__setitem__(id(key), value)

    def __getitem__(self, key: Any) -> Any:
        return super().__getitem__(id(key))

    def __contains__(self, key: Any) -> bool:
        return super().__contains__(id(key))

    def items(self):  # type: ignore[override]
        return [(self._keys[k], v) for k, v in super().items()]

    def keys(self):  # type: ignore[override]
        return [self._keys[k] for k in super().keys()]

    def __iter__(self):
        return iter(self.keys())
