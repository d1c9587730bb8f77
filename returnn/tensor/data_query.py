"""More of RETURNN's ``Data``/``Tensor`` lookups for config code, mixed into :class:`~returnn.tensor.data.Data`
(as RETURNN's ``_tensor_extra``):

- axes: ``get_axes_by_tag_name``, ``get_axis_by_tag_name``, ``get_axes_with_size``, ``get_spatial_axes``,
  ``get_feature_batch_axes``, ``get_feature_axes``, ``get_special_axes_dict`` (``SpecialAxesNames``),
  ``get_description_from_axis``, ``find_matching_dims``, ``find_matching_dim_map``, ``remaining_dims``;
- shapes: ``get_batch_shape``, ``get_bc_spatial_batch_shape``, ``get_bc_shape``, ``shape_dense``,
  ``batch_shape_dense``, ``ndim_dense``, ``batch_ndim_dense``, ``dim_tags_sparse``, ``dims_set``,
  ``dim_tags_set_implicit(_only)``, ``time_dim_axis_or_unspecified``,
  ``get_batch_shape_dim_tags``, ``get_batch_dim_tag``, ``get_static_batch_dim``, ``get_dyn_size_tags``,
  ``get_placeholder_kwargs``, ``get_dim`` and ``get_dynamic_batch_shape`` (with a value);
- predicates: ``is_batch_feature_major``, ``is_time_axis_dynamic``, ``is_axis_dynamic``, ``has_dynamic_size``;
  ``verify_out_shape`` (a layer's ``out_shape`` check);
- text: ``get_description``, ``get_batch_axes_short_description`` (RETURNN's format, this engine's dim names);
- ``Data.get_common_data(sources)``: the template all sources broadcast to (the layout combining layers use).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from returnn.tensor.not_specified import NotSpecified


class DataQuery:
    """The methods listed in the module docstring (``self`` is a ``Data``)."""

    SpecialAxesNames = ("time_dim_axis", "feature_dim_axis")

    # ---- axes
    def get_axes_by_tag_name(self, name: str, spatial_only: bool = False) -> List[int]:
        """Axes whose dim description (or its base's) contains ``name`` (case-insensitive)."""
        key = name.lower()
        found = [i for i, d in enumerate(self.dims)
                 if key in d.description.lower() or key in d.get_same_base().description.lower()]
        if spatial_only:
            spatial = self.get_spatial_batch_axes()
            found = [i for i in found if i in spatial or self.dims[i].is_spatial_dim()]
        return found

    def get_axis_by_tag_name(self, name: str, spatial_only: bool = False) -> int:
        found = self.get_axes_by_tag_name(name, spatial_only)
        if len(found) != 1:
            raise ValueError("%s: %s %stag named %r" % (self.short_repr(), "no" if not found else "more than one",
                                                       "spatial " if spatial_only else "", name))
        return found[0]

    def get_axes_with_size(self) -> List[int]:
        """Axes (counted without batch) of dynamic size."""
        return [i for i, size in enumerate(self.shape) if size is None]

    def get_spatial_axes(self) -> List[int]:
        """:meth:`get_spatial_batch_axes` counted without batch."""
        return [self.get_batch_axis_excluding_batch(a) for a in self.get_spatial_batch_axes()]

    def get_feature_batch_axes(self) -> List[int]:
        return [] if self.feature_dim_axis is None else [self.feature_dim_axis]

    def get_feature_axes(self) -> List[int]:
        return [self.get_batch_axis_excluding_batch(a) for a in self.get_feature_batch_axes()]

    def get_special_axes_dict(self, counted_with_batch_dim: bool = True, only_available: bool = False
                              ) -> Dict[str, Optional[int]]:
        """``{"time_dim_axis": ..., "feature_dim_axis": ...}``; ``only_available``: without the None ones and
        without a feature axis found by the default rule."""
        from returnn.tensor.data import NotSpecified
        out = {k: getattr(self, k) for k in self.SpecialAxesNames}
        if not counted_with_batch_dim:
            out = {k: None if v is None else self.get_batch_axis_excluding_batch(v) for k, v in out.items()}
        if only_available:
            out = {k: v for k, v in out.items() if v is not None}
            if self._feature_dim_axis is NotSpecified:
                out.pop("feature_dim_axis", None)
        return out

    def get_description_from_axis(self, axis: int) -> Any:
        """A description ``get_axis_from_description`` maps back to ``axis``: "B", the dim itself when unique,
        "T" or "F", else "stag-single:-I:NAME"."""
        if not 0 <= axis < self.batch_ndim:
            raise ValueError("get_description_from_axis: %s has no axis %r" % (self.short_repr(), axis))
        if axis == self.batch_dim_axis:
            return "B"
        dim = self.dims[axis]
        same = [i for i, d in enumerate(self.dims) if d == dim]
        if dim.is_dynamic() and len(same) == 1:
            return dim
        if axis == self.time_dim_axis:
            return "T"
        if axis == self.feature_dim_axis:
            return "F"
        if len(same) == 1:
            return dim
        matching = self.get_axes_by_tag_name(dim.description, spatial_only=True)
        return "stag-single:%i:%s" % (matching.index(axis) - len(matching), dim.description)

    def find_matching_dims(self, dim_tag: Any, is_equal_opts: Optional[Dict[str, Any]]) -> List[int]:
        return [i for i, d in enumerate(self.dims) if d.is_equal(dim_tag, **(is_equal_opts or {}))]

    def find_matching_dim_map(self, other: Any, other_axes: Sequence[int],
                              is_equal_opts: Optional[Dict[str, Any]] = None) -> Dict[int, int]:
        """Each of ``other``'s ``other_axes`` mapped to an own axis (each own axis once): by plain equality first,
        then ``is_equal_opts`` (default: same-size spatial and feature dims match), then broadcasting, then one
        unknown dynamic axis (RETURNN's rounds); of several matches the dim itself, else the highest
        match_priority, else the first."""
        if is_equal_opts is None:
            is_equal_opts = dict(allow_same_feature_dim=True, allow_same_spatial_dim=True,
                                 treat_feature_as_spatial=True)
        mapping: Dict[int, int] = {}
        for other_axis in other_axes:
            tag = other.dims[other_axis]
            opts: Dict[str, Any] = {}
            matching: List[int] = []
            for step in ({}, is_equal_opts, "broadcast_matches", "unknown_spatial_matches"):
                if isinstance(step, dict):
                    opts = dict(step)
                elif step in opts:
                    continue
                else:
                    opts[step] = True
                matching = [a for a in self.find_matching_dims(tag, opts) if a not in mapping.values()]
                if step == "unknown_spatial_matches" and len(matching) > 1:
                    raise ValueError("find_matching_dim_map: axis %i of %s matches several axes of %s"
                                     % (other_axis, other.short_repr(), self.short_repr()))
                if matching:
                    break
            if not matching:
                raise ValueError("find_matching_dim_map: axis %i (%s) of %s not in %s" % (
                    other_axis, tag.short_repr(), other.short_repr(), self.short_repr()))
            top = max(d.match_priority for d in self.dims)
            mapping[other_axis] = max(matching, key=lambda a: top + 1 if self.dims[a] is tag
                                      else self.dims[a].match_priority)
        return mapping

    def remaining_dims(self, remove: Any = None) -> List[Any]:
        """The dims without ``remove`` (one Dim or several)."""
        from returnn.tensor.dim import Dim
        dims = list(self.dims)
        for r in ([remove] if isinstance(remove, Dim) else list(remove or ())):
            dims.remove(r)
        return dims

    # ---- shapes
    def get_batch_shape(self, batch_dim: Any) -> tuple:
        """:attr:`shape` with ``batch_dim`` at the batch axis."""
        b = self.batch_dim_axis
        return self.shape if b is None else self.shape[:b] + (batch_dim,) + self.shape[b:]

    def get_bc_spatial_batch_shape(self) -> tuple:
        """1 on the batch and spatial axes, else the size (a shape that broadcasts over them)."""
        axes = self.get_spatial_batch_axes() + ([self.batch_dim_axis] if self.batch_dim_axis is not None else [])
        return tuple(1 if i in axes else size for i, size in enumerate(self.batch_shape))

    def get_bc_shape(self, opts: Optional[Dict[Any, Any]] = None) -> tuple:
        """As :meth:`get_bc_spatial_batch_shape`, with ``opts`` ``{axes: 1 or "x" (broadcast), -1 or None (not)}``
        deciding for the axes named ("*": the default of all)."""
        default = dict(enumerate(self.get_bc_spatial_batch_shape()))
        chosen: Dict[int, Any] = {}
        for key, value in (opts or {}).items():
            if value not in (-1, 1, "x", None):
                raise ValueError("get_bc_shape: invalid value %r in %r (1, 'x', -1 or None)" % (value, opts))
            value = 1 if value == "x" else (None if value == -1 else value)
            for axis in self.get_axes_from_description(key):
                if axis in chosen:
                    raise ValueError("get_bc_shape: axis %i set twice in %r" % (axis, opts))
                (chosen if key != "*" else default)[axis] = self.batch_shape[axis] if value is None else value
        return tuple(chosen.get(i, default[i]) for i in range(self.batch_ndim))

    @property
    def shape_dense(self) -> tuple:
        return self.shape + (self.dim,) if self.sparse else self.shape

    @property
    def batch_shape_dense(self) -> tuple:
        return self.batch_shape + (self.dim,) if self.sparse else self.batch_shape

    @property
    def ndim_dense(self) -> int:
        return self.ndim + bool(self.sparse)

    @property
    def batch_ndim_dense(self) -> int:
        return self.batch_ndim + bool(self.sparse)

    @property
    def dim_tags_sparse(self) -> tuple:
        """The dims without the feature axis."""
        if self.sparse or self.feature_dim_axis is None:
            return self.dims
        return self.dims[:self.feature_dim_axis] + self.dims[self.feature_dim_axis + 1:]

    @property
    def dims_set(self) -> set:
        return set(self.dims)

    @property
    def dim_tags_set_implicit_only(self) -> set:
        """Dims the data has without an axis: its sparse dim, the batch its axes' lengths vary over."""
        from returnn.tensor.dim import batch_dim
        out = set()
        if self.sparse_dim is not None and self.sparse_dim not in self.dims:
            out.add(self.sparse_dim)
        if self.batch_dim_axis is None and any(d.is_dynamic() for d in self.dims):
            out.add(batch_dim)
        return out

    @property
    def dim_tags_set_implicit(self) -> set:
        return set(self.dims) | self.dim_tags_set_implicit_only

    def get_batch_shape_dim_tags(self) -> tuple:
        return self.dims

    def get_batch_dim_tag(self) -> Any:
        if self.batch_dim_axis is None:
            raise ValueError("get_batch_dim_tag: %s has no batch axis" % self.short_repr())
        return self.dims[self.batch_dim_axis]

    def get_static_batch_dim(self) -> Optional[int]:
        return None if self.batch_dim_axis is None else self.dims[self.batch_dim_axis].dimension

    def get_dyn_size_tags(self) -> List[Any]:
        return [d for d in self.dims if d.is_dynamic()]

    def get_placeholder_kwargs(self, with_batch: bool = True) -> Dict[str, Any]:
        return dict(name=self.name, dtype=self.dtype, shape=self.batch_shape if with_batch else self.shape)

    def get_dim(self, axis: int) -> Any:
        """The static size of ``axis``, else the value's (a scalar tensor)."""
        if self.batch_shape[axis] is not None:
            return self.batch_shape[axis]
        if self.placeholder is None:
            raise ValueError("get_dim: axis %i of %s has no static size and there is no value" % (
                axis, self.short_repr()))
        import tensorflow as tf
        return tf.shape(self.placeholder)[axis]

    def get_dynamic_batch_shape(self) -> List[Any]:
        return [self.get_dim(i) for i in range(self.batch_ndim)]

    # ---- predicates
    @property
    def is_batch_feature_major(self) -> Any:
        """RETURNN's property (calling it works too, as ``is_batch_major``)."""
        from returnn.tensor.data_compat import _Flag
        return _Flag(self.batch_dim_axis == 0 and self.feature_dim_axis == 1)

    @property
    def time_dim_axis_or_unspecified(self) -> Any:
        return self._time_dim_axis

    def is_time_axis_dynamic(self) -> bool:
        if self.time_dim_axis is None:
            raise ValueError("is_time_axis_dynamic: %s has no time axis" % self.short_repr())
        return self.dims[self.time_dim_axis].is_dynamic()

    def is_axis_dynamic(self, axis: int) -> bool:
        return axis != self.batch_dim_axis and self.batch_shape[axis] is None

    def has_dynamic_size(self, axis: int) -> bool:
        """Whether ``axis`` has per-sequence sizes (see ``copy_as_batch_spatial_major``)."""
        return self._has_sizes(axis)

    def verify_out_shape(self, out_shape: Any, allow_missing_implicit_dims: bool = False) -> None:
        """RETURNN's check of a layer's ``out_shape`` (a set of dims and marked dims, see
        :mod:`returnn.tensor.marked_dim`): a ValueError naming what does not hold."""
        from returnn.tensor.marked_dim import out_shape_problems
        if not out_shape and not self.dims and not self.dim_tags_set_implicit_only:
            return
        if out_shape and not isinstance(out_shape, (set, frozenset)):
            raise TypeError("%s verify_out_shape: expects a set, got %s" % (self.short_repr(), type(out_shape)))
        problems = out_shape_problems(self, out_shape or ())
        if allow_missing_implicit_dims:  # (RETURNN: the implicit dims may be left out then)
            implicit = [d.short_repr() for d in self.dim_tags_set_implicit_only]
            problems = [p for p in problems if not (p.startswith("missing in") and all(
                x in implicit for x in p.split(": ", 1)[1].split(", ")))]
        if problems:
            raise ValueError("%s verify_out_shape: %s" % (self.short_repr(), "; ".join(problems)))

    @property
    def version(self) -> int:
        """RETURNN's Data version of the TF backend (1: with time_dim_axis)."""
        return 1

    size_dtype = "int32"

    def sanity_check(self, ignore_placeholder: bool = False, assume_complete: bool = True) -> None:
        """RETURNN's check: the special axes valid, and a value of this rank with the static sizes."""
        for key in self.SpecialAxesNames:
            axis = getattr(self, key)
            if axis is not None and (not 0 <= axis < self.batch_ndim or axis == self.batch_dim_axis):
                raise ValueError("%s sanity_check: invalid %s %r" % (self.short_repr(), key, axis))
        if ignore_placeholder or self.placeholder is None:
            return
        shape = self.placeholder.shape
        if shape.rank is not None and (shape.rank != self.batch_ndim or any(
                d.dimension is not None and s is not None and s != d.dimension for d, s in zip(self.dims, shape))):
            raise ValueError("%s sanity_check: the value's shape %s does not match" % (self.short_repr(), shape))

    # ---- text
    def get_batch_axes_short_description(self, special_axes: bool = True) -> List[str]:
        """Per axis RETURNN's short text: ``B``, ``T|'time'[B]``, ``F|F'feature'(40)``."""
        out = []
        for i, d in enumerate(self.dims):
            parts = ["B"] if d.is_batch_dim() else []
            if special_axes and i == self.time_dim_axis:
                parts.append("T")
            if special_axes and i == self.feature_dim_axis:
                parts.append("F")
            if not d.is_batch_dim():
                kind = {"feature": "F"}.get(d.kind or "", "")
                size = "(%i)" % d.dimension if d.dimension is not None else "[%s]" % (
                    "B" if self.batch_dim_axis is not None or self.placeholder is None else "?")
                parts.append("%s%r%s" % (kind, d.get_same_base().description, size))
            out.append("|".join(parts) or "?")
        return out

    def get_description(self, with_name: bool = True, with_placeholder: bool = False,
                        catch_exceptions: bool = False) -> str:
        """``Tensor{'name', [B,T|'time'[B],F|F'feature'(40)], dtype='int32', sparse_dim=...}`` (RETURNN's)."""
        args = [repr(self.name) if self.name else "<undefined>"] if with_name else []
        args.append("[%s]" % ",".join(self.get_batch_axes_short_description()))
        keys = ["dtype", "sparse_dim"] if self.sparse else (["dtype"] if self.dtype != "float32" else [])
        if with_placeholder:
            keys.append("placeholder")
        if not self.available_for_inference:
            keys.append("available_for_inference")
        args += ["%s=%r" % (k, getattr(self, k)) for k in keys]
        return "Tensor{%s}" % ", ".join(args)

    # ---- several templates
    @classmethod
    def get_common_data(cls, sources: Sequence[Any], ignore_feature_dim: bool = False,
                        allow_broadcast_all_sources: Any = NotSpecified, name: Optional[str] = None) -> Any:
        """The template all ``sources`` broadcast to, as RETURNN: a template of the first source with the most
        axes; each distinct dim of all sources (``Dim.get_all_dimension_tags`` with RETURNN's options: a feature
        counts as spatial, static dims of one size match, dims derived from one match, before behavior_version 11
        a size-1 engine-made dim broadcasts) looked up in it: a match is replaced by that dim where they differ,
        a dim without a match is added where RETURNN adds a new dim. None without sources. Where every source
        has fewer axes than the result (all need broadcasting), ``allow_broadcast_all_sources`` decides as in RETURNN:
        True allows it, False (or None) fails, NotSpecified fails from behavior_version 4 on."""
        from returnn.tensor.dim_compare import all_dimension_tags, existing_tag_from_collection
        from returnn.util.basic import BehaviorVersion
        if not sources:
            return None
        if len(sources) == 1:
            return sources[0].copy_template(name=name)
        common = max(sources, key=lambda s: s.batch_ndim).copy_template(name=name)
        opts: Dict[str, Any] = dict(ignore_feature_dim=ignore_feature_dim, treat_feature_as_spatial=True,
                                    allow_same_spatial_dim=True, undefined_matches=True, derived_matches=True)
        if BehaviorVersion.get() < 11:
            opts["broadcast_matches"] = True
        for tag in all_dimension_tags(sources, opts)[0]:
            found = existing_tag_from_collection(tag, common.dims, opts)
            if found is None:
                common = common._copy_add_dim_returnn(tag, common.get_default_new_axis_for_dim_tag(tag))
            elif found is not tag and found != tag:
                axis = next(i for i, d in enumerate(common.dims) if d is found)
                common = common.copy_template_replace_dim_tag(axis, tag)
        common.placeholder = None
        if all(s.batch_ndim < common.batch_ndim for s in sources):
            message = "All inputs %s require broadcasting to %s. This must be explicitly allowed, e.g. by specifying " \
                      "out_shape." % (", ".join(s.short_repr() for s in sources), common.short_repr())
            if allow_broadcast_all_sources is NotSpecified or getattr(allow_broadcast_all_sources, "__name__", None) \
                    == "NotSpecified":  # (this one, or returnn.util.basic's)
                BehaviorVersion.require(False, message, version=4)
            elif not allow_broadcast_all_sources:
                raise ValueError(message)
        return common
