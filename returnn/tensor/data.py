"""The static description of a tensor (RETURNN's ``Data``/``Tensor`` template).

A :class:`Data` is an ordered tuple of :class:`Dim` (one per axis, the batch axis included),
a dtype, an optional ``sparse_dim`` (the class count of integer class indices) and the special
axes RETURNN addresses by name:

- batch axis: the axis whose dim is the batch dim;
- time axis: given explicitly, else the first dynamic spatial axis, else the first dynamic axis;
- feature axis: given explicitly, else (dense only) among the axes that are neither batch nor
  time the last static one, else the last one.

Templates hold no tensors; the run-time value (tensor + per-sequence sizes of the dynamic axes)
is ``returnn.tf.layers.output.LayerOutput``. Axis descriptions ("T", "F", "s:0", ...) are
resolved by :mod:`returnn.tensor.axes`.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from returnn.tensor.data_compat import DataCompat
from returnn.tensor.data_compatible import DataCompatible
from returnn.tensor.data_layout import DataLayout
from returnn.tensor.data_query import DataQuery
from returnn.tensor.dim import Dim, DimTypes, batch_dim


# RETURNN Data options that change nothing here (batch info, beams, version, creation flags)
_RETURNN_NOOP_OPTS = ("batch", "beam", "version", "control_flow_ctx", "auto_create_placeholders",
                      "dim_tags_sparse", "feature_dim", "shape_sparse")


from returnn.tensor.not_specified import NotSpecified  # noqa: E402  (config code imports it from here)


class Data(DataCompat, DataLayout, DataQuery, DataCompatible):
    """Static description of a tensor: dims, dtype, sparse_dim, special axes.

    Construct from ``dims`` (RETURNN's ``dim_tags``), or the old way from ``shape`` (without the
    batch axis, None for dynamic axes), ``dim``, ``sparse``, ``batch_dim_axis``, ``time_dim_axis``.
    """

    def __init__(self, name: str, dims: Optional[Sequence[Dim]] = None, dtype: Optional[str] = None,
                 sparse_dim: Optional[Dim] = None, *, time_dim_axis: Any = NotSpecified,
                 feature_dim_axis: Any = NotSpecified, available_for_inference: bool = True,
                 shape: Optional[Sequence[Optional[int]]] = None, dim: Any = NotSpecified, sparse: bool = False,
                 batch_dim_axis: Optional[int] = 0, dim_tags: Optional[Sequence[Dim]] = None,
                 placeholder: Any = None, size_placeholder: Optional[Dict[int, Any]] = None, vocab: Any = None,
                 same_dim_tags_as: Optional[Dict[Any, Dim]] = None, **returnn_opts: Any):
        unknown = sorted(set(returnn_opts) - set(_RETURNN_NOOP_OPTS))
        if unknown:
            raise TypeError("Data: option(s) %s are not supported here" % ", ".join(unknown))
        self.name = name
        if dims is None:
            dims = dim_tags
        if sparse and sparse_dim is None:
            if dim is NotSpecified:
                raise ValueError("data %r: sparse needs 'dim' (the number of classes)" % name)
            # "dim": None with "sparse": True (RETURNN): class indices whose number is not known
            sparse_dim = Dim(dim, kind=DimTypes.Feature, description="%s:sparse-dim" % name, auto_generated=True)
        if dims is None:
            dims, time_dim_axis = dims_from_shape(name, shape, dim, sparse_dim is not None, batch_dim_axis,
                                                  time_dim_axis, feature_dim_axis, set(size_placeholder or ()))
            if sparse_dim is None and feature_dim_axis is not NotSpecified and dim is not NotSpecified:
                # RETURNN checks 'dim' against an explicit feature axis only (None: no feature axis, no dim)
                size = None if feature_dim_axis is None else dims[feature_dim_axis].dimension
                if size != dim:
                    raise ValueError("data %r: dim %r does not match the size %r of the feature axis %r"
                                     % (name, dim, size, feature_dim_axis))
            if sparse_dim is None:
                dim = NotSpecified
        self.dims: Tuple[Dim, ...] = tuple(dims)
        if same_dim_tags_as:  # RETURNN's {axis description: Dim}: that axis is this Dim
            from returnn.tensor.axes import resolve_axis
            new = list(self.dims)
            for axis, tag in same_dim_tags_as.items():
                new[resolve_axis(_AxesOnly(self.dims), axis)] = tag
            self.dims = tuple(new)
        for d in self.dims:
            if not isinstance(d, Dim):
                raise TypeError("data %r: dims must be Dim objects, got %r" % (name, d))
        self.sparse_dim = sparse_dim
        self.dtype = str(dtype or ("int32" if sparse_dim is not None else "float32"))
        self._time_dim_axis = self._valid_axis_or_marker(time_dim_axis)
        self._feature_dim_axis = self._valid_axis_or_marker(feature_dim_axis)
        for key, axis in (("time_dim_axis", self._time_dim_axis), ("feature_dim_axis", self._feature_dim_axis)):
            if isinstance(axis, int) and axis == self.batch_dim_axis:  # (RETURNN's sanity check)
                raise ValueError("data %r: %s %i is the batch axis" % (name, key, axis))
        if self.sparse_dim is not None and isinstance(self._feature_dim_axis, int):
            raise ValueError("data %r: sparse data (class indices) has no feature axis (got feature_dim_axis %i)"
                             % (name, self._feature_dim_axis))
        self.available_for_inference = available_for_inference
        if dim is not NotSpecified and dim is not None and self.dim != dim:
            raise ValueError("data %r: dim %r does not match the dims %s" % (name, dim, self.short_repr()))
        self.vocab = vocab
        if placeholder is not None:
            self.placeholder = placeholder
        if size_placeholder:
            self.size_placeholder = size_placeholder

    def _valid_axis_or_marker(self, axis: Any) -> Any:
        if axis is NotSpecified or axis is None:
            return axis
        if isinstance(axis, bool) or not isinstance(axis, int) or not -len(self.dims) <= axis < len(self.dims):
            raise ValueError("data %r: invalid axis %r for %i axes" % (self.name, axis, len(self.dims)))
        return axis % len(self.dims)

    # ---- special axes (counted with the batch axis, like RETURNN)
    @property
    def batch_dim_axis(self) -> Optional[int]:
        for i, d in enumerate(self.dims):
            if d.is_batch_dim():
                return i
        return None

    @property
    def time_dim_axis(self) -> Optional[int]:
        if self._time_dim_axis is not NotSpecified:
            return self._time_dim_axis
        dyn = [i for i, d in enumerate(self.dims) if d.is_dynamic()]
        spatial = [i for i in dyn if self.dims[i].is_spatial_dim()]
        return (spatial or dyn or [None])[0]

    @property
    def feature_dim_axis(self) -> Optional[int]:
        if self._feature_dim_axis is not NotSpecified:
            return self._feature_dim_axis
        if self.sparse_dim is not None:
            return None
        axes = [i for i in range(len(self.dims)) if i not in (self.batch_dim_axis, self.time_dim_axis)]
        static = [i for i in axes if self.dims[i].is_static()]
        return (static or axes or [None])[-1]

    def have_batch_axis(self) -> bool:
        return self.batch_dim_axis is not None

    def have_time_axis(self) -> bool:
        return self.time_dim_axis is not None

    def have_feature_axis(self) -> bool:
        return self.feature_dim_axis is not None

    @property
    def dim_tags(self) -> Tuple[Dim, ...]:
        """RETURNN's name for :attr:`dims`."""
        return self.dims

    @property
    def sparse(self) -> bool:
        return self.sparse_dim is not None

    @property
    def feature_dim(self) -> Optional[Dim]:
        """The feature axis' dim (None if there is none)."""
        axis = self.feature_dim_axis
        return None if axis is None else self.dims[axis]

    @property
    def time_dim(self) -> Optional[Dim]:
        axis = self.time_dim_axis
        return None if axis is None else self.dims[axis]

    @property
    def dim(self) -> Optional[int]:
        """Number of classes when sparse, else the feature axis' size (None without one)."""
        if self.sparse_dim is not None:
            return self.sparse_dim.dimension
        feat = self.feature_dim
        return None if feat is None else feat.dimension

    @property
    def batch_shape(self) -> Tuple[Optional[int], ...]:
        return tuple(d.dimension for d in self.dims)

    @property
    def shape(self) -> Tuple[Optional[int], ...]:
        """Shape without the batch axis (None for dynamic axes)."""
        return tuple(d.dimension for d in self.dims if not d.is_batch_dim())

    @property
    def batch_ndim(self) -> int:
        return len(self.dims)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def get_spatial_batch_axes(self) -> List[int]:
        """Axes that are neither batch nor feature (the time axis and dynamic axes always count)."""
        return [i for i, d in enumerate(self.dims) if not d.is_batch_dim()
                and (i != self.feature_dim_axis or i == self.time_dim_axis or d.dimension is None)]

    def get_dynamic_axes(self) -> List[int]:
        return [i for i, d in enumerate(self.dims) if d.is_dynamic()]

    def get_static_axes(self) -> List[int]:
        return [i for i, d in enumerate(self.dims) if d.is_static()]

    # ---- axis descriptions
    def get_axes_from_description(self, axes: Any, allow_int: Any = NotSpecified) -> List[int]:
        """Axes (counted with batch) for RETURNN's descriptions; see :mod:`returnn.tensor.axes`. With
        ``allow_int=False`` an int axis is refused, as RETURNN (config code passes it)."""
        from returnn.tensor.axes import resolve_axes
        _check_int_axes(self, axes, allow_int)
        return resolve_axes(self, axes)

    def get_axis_from_description(self, axis: Any, allow_int: Any = NotSpecified) -> int:
        from returnn.tensor.axes import resolve_axis
        _check_int_axes(self, axis, allow_int)
        return resolve_axis(self, axis)

    def get_dim_tag_from_description(self, axis: Any) -> Dim:
        return self.dims[self.get_axis_from_description(axis)]

    def has_axis(self, axis: Any) -> bool:
        from returnn.tensor.axes import AxisError
        try:
            return bool(self.get_axes_from_description(axis))
        except AxisError:
            return False

    # ---- derived templates
    def copy(self, name: Optional[str] = None, **changes: Any) -> "Data":
        """A copy with some of ``dims``, ``dtype``, ``sparse_dim``, ``time_dim_axis``,
        ``feature_dim_axis``, ``available_for_inference`` replaced. New ``dims`` reset the
        special axes to their defaults unless given too."""
        kwargs: Dict[str, Any] = dict(
            dims=self.dims, dtype=self.dtype, sparse_dim=self.sparse_dim, time_dim_axis=self._time_dim_axis,
            feature_dim_axis=self._feature_dim_axis, available_for_inference=self.available_for_inference)
        if "dims" in changes:
            kwargs["time_dim_axis"] = kwargs["feature_dim_axis"] = NotSpecified
        if "sparse_dim" in changes and "dtype" not in changes and self.sparse != (changes["sparse_dim"] is not None):
            kwargs["dtype"] = None
        kwargs.update(changes)
        out = Data(name or self.name, **kwargs)
        if "dims" not in changes and self.placeholder is not None:  # same axes: the value stays (RETURNN's copy)
            out.placeholder = self.placeholder
        if self.__dict__.get("_dyn_sizes"):
            out.__dict__["_dyn_sizes"] = dict(self.dyn_sizes)
        return out

    def copy_transpose(self, perm: Sequence[Any]) -> "Data":
        """Axes reordered: new axis ``i`` is old axis ``perm[i]`` (an int or a Dim); time and feature
        stay on their dims; a value is transposed along."""
        perm = [self.get_axis_from_description(p) if isinstance(p, Dim) else int(p) % self.batch_ndim for p in perm]
        inv = {old: new for new, old in enumerate(perm)}
        out = self._with_dims([self.dims[i] for i in perm], inv)
        if self.placeholder is not None:
            import tensorflow as tf
            out.placeholder = self.placeholder if perm == list(range(self.batch_ndim)) else \
                tf.transpose(self.placeholder, perm)
        return out

    def copy_move_axis(self, old_axis: int, new_axis: int) -> "Data":
        """``old_axis`` moved to ``new_axis`` (negative: from the end; out of range fails, as RETURNN)."""
        for axis in (old_axis, new_axis):
            if not isinstance(axis, int) or not -self.batch_ndim <= axis < self.batch_ndim:
                raise ValueError("copy_move_axis: %s has no axis %r" % (self.short_repr(), axis))
        if old_axis % self.batch_ndim == new_axis % self.batch_ndim:
            return self.copy()  # (RETURNN: a copy, special axes as they were set)
        perm = [i for i in range(self.batch_ndim) if i != old_axis % self.batch_ndim]
        perm.insert(new_axis % self.batch_ndim, old_axis % self.batch_ndim)
        return self.copy_transpose(perm)

    def copy_template_excluding_axis(self, axis: int, name: Optional[str] = None) -> "Data":
        """Without ``axis`` (negative: from the end), as RETURNN: the time axis (when there is one) and an
        explicitly set feature axis kept explicitly where they are not the one removed, else the default rule
        picks anew."""
        if not -self.batch_ndim <= axis < self.batch_ndim:
            raise ValueError("copy_template_excluding_axis: %s has no axis %r" % (self.short_repr(), axis))
        axis %= self.batch_ndim
        keep = {k: a - (a > axis) if isinstance(a, int) and a != axis else NotSpecified
                for k, a in (("time_dim_axis", self.time_dim_axis), ("feature_dim_axis", self._feature_dim_axis))}
        return self.copy(name, dims=[d for i, d in enumerate(self.dims) if i != axis], **keep)

    def copy_template_replace_dim_tag(self, axis: int, new_dim: Dim, name: Optional[str] = None) -> "Data":
        """``axis`` replaced by ``new_dim``, as RETURNN: explicit time/feature axes stay (dropped where
        ``new_dim`` is the batch dim; the feature axis becomes None where its feature dim makes way for
        a non-feature dim), default ones follow the default rule on the new dims (a time axis sliced to
        a static size is no time axis any more)."""
        axis %= self.batch_ndim
        dims = list(self.dims)
        dims[axis] = new_dim
        time, feature = self._time_dim_axis, self._feature_dim_axis
        if new_dim.is_batch_dim():
            time = NotSpecified if self.time_dim_axis == axis else time
            feature = NotSpecified if self.feature_dim_axis == axis else feature
        if (feature is not NotSpecified and self.feature_dim_axis == axis and self.dims[axis].is_feature_dim()
                and not new_dim.is_feature_dim()):
            feature = None
        return self.copy(name, dims=dims, time_dim_axis=time, feature_dim_axis=feature)

    def get_default_new_axis_for_dim_tag(self, dim: Dim) -> int:
        """Where RETURNN puts a new axis ``dim`` (its rule of the same name, also for the common layout of
        several sources): batch first; a feature dim (of dense data) after the feature axis, else last;
        a dynamic dim after the last dynamic axis; a spatial dim after the last spatial axis, else
        before the feature axis; else last."""
        if dim.is_batch_dim():
            return 0
        if dim.is_feature_dim() and not self.sparse:
            return self.feature_dim_axis + 1 if self.feature_dim_axis is not None else self.batch_ndim
        if dim.is_dynamic() and self.get_dynamic_axes():
            return self.get_dynamic_axes()[-1] + 1
        if dim.is_spatial_dim():
            spatial = self.get_spatial_batch_axes()  # (with a dynamic feature axis or one that is the time axis)
            if spatial:
                return spatial[-1] + 1
            if self.feature_dim_axis is not None:
                return self.feature_dim_axis
        return self.batch_ndim

    def copy_insert_dim(self, dim: Dim, axis: Optional[int] = None, unbroadcast: bool = False) -> "Data":
        """A new axis ``dim`` inserted before ``axis`` (negative: counted from the end, -1 = last; default:
        :meth:`get_default_new_axis_for_dim_tag`), the special axes staying on their dims (this engine's layers;
        config code gets RETURNN's :meth:`copy_add_dim_by_tag`). A value gets a new axis of size 1 (repeated to
        ``dim`` with ``unbroadcast``)."""
        if axis is None:
            axis = self.get_default_new_axis_for_dim_tag(dim)
        if axis < 0:
            axis += self.batch_ndim + 1
        dims = list(self.dims)
        dims.insert(axis, dim)
        out = self._with_dims(dims, {i: i + (i >= axis) for i in range(self.batch_ndim)})
        if self.placeholder is not None:
            import tensorflow as tf
            value = tf.expand_dims(self.placeholder, axis)
            if unbroadcast and dim.dimension is not None and dim.dimension != 1:
                value = tf.repeat(value, dim.dimension, axis=axis)
            out.placeholder = value
        return out

    def copy_add_dim_by_tag(self, dim_tag: Dim, unbroadcast: bool = False, axis: Optional[int] = None) -> "Data":
        """RETURNN's ``copy_add_dim_by_tag``: without ``unbroadcast`` a size-1 stand-in of ``dim_tag`` (the batch
        dim: a broadcast batch axis), with it ``dim_tag`` itself (a value repeated along it); at ``axis`` (default:
        :meth:`get_default_new_axis_for_dim_tag`); the time axis and an explicitly set feature axis follow, the
        others by the default rules (:meth:`copy_add_dim_by_tag_returnn`)."""
        return self.copy_add_dim_by_tag_returnn(dim_tag, unbroadcast=bool(unbroadcast), axis=axis)

    def _with_dims(self, dims: Sequence[Dim], mapping: Dict[int, int]) -> "Data":
        """New dims; the time and feature axes follow ``mapping`` (old -> new axis) and are kept
        explicit only where the default rule would pick another axis."""
        out = self.copy(dims=dims)
        for key, old in (("time_dim_axis", self.time_dim_axis), ("feature_dim_axis", self.feature_dim_axis)):
            explicit = getattr(self, "_" + key) is not NotSpecified
            new = mapping.get(old, NotSpecified) if old is not None else (None if explicit else NotSpecified)
            if new is not NotSpecified and new != getattr(out, key):
                out = out.copy(**{key: new})
        return out

    # ---- comparison and printing
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Data):
            return NotImplemented
        return (self.dims == other.dims and self.dtype == other.dtype and self.sparse_dim == other.sparse_dim
                and self.time_dim_axis == other.time_dim_axis and self.feature_dim_axis == other.feature_dim_axis)

    __hash__ = None  # type: ignore  # mutable-ish template; compare, do not hash

    def short_repr(self) -> str:
        """``[B,T|'time'(?),F|'feature'(40)]`` style."""
        parts = []
        for i, d in enumerate(self.dims):
            mark = "B" if d.is_batch_dim() else ("T|" if i == self.time_dim_axis else
                                                  "F|" if i == self.feature_dim_axis else "")
            parts.append(mark if d.is_batch_dim() else "%s%r(%s)" % (mark, d.description,
                                                                     "?" if d.dimension is None else d.dimension))
        sparse = ", sparse_dim=%s" % self.sparse_dim.short_repr() if self.sparse_dim is not None else ""
        return "[%s]%s" % (",".join(parts), sparse)

    def __repr__(self) -> str:
        return "Data{%r, %s, %s}" % (self.name, self.short_repr(), self.dtype)


def _check_int_axes(data: "Data", axes: Any, allow_int: Any) -> None:
    """RETURNN: ``allow_int=False`` refuses an int axis (in a list too)."""
    if allow_int is False and any(isinstance(a, int) and not isinstance(a, bool)
                                  for a in (axes if isinstance(axes, (list, tuple)) else [axes])):
        from returnn.tensor.axes import AxisError
        raise AxisError("%s: axis %r given as int with allow_int=False (RETURNN: 'Do not specify axis as int but as "
                        "str or Dim instead')" % (data.short_repr(), axes))


class _AxesOnly:
    """Enough of a Data to resolve axis descriptions while the Data itself is being built."""

    def __init__(self, dims: Sequence[Dim]):
        self._tmp = Data("_", dims=dims)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tmp, name)


def dims_from_shape(name: str, shape: Optional[Sequence[Optional[int]]], dim: Any, sparse: bool,
                    batch_dim_axis: Optional[int], time_dim_axis: Any, feature_dim_axis: Any,
                    sized_axes: Any = ()) -> Tuple[List[Dim], Any]:
    """RETURNN's old-style description -> dims (new dims, described like RETURNN's extern data).

    Default shape: ``(None,)`` sparse, else ``(None, dim)``. Returns the dims and the explicit
    time axis to keep (NotSpecified when the default rule finds the same axis).
    """
    if shape is None:
        if time_dim_axis is None:
            shape = () if sparse else (dim,)
        else:
            shape = (None,) if sparse else (None, dim)
    shape = tuple(shape)
    n = len(shape) + (batch_dim_axis is not None)
    if batch_dim_axis is not None and not 0 <= batch_dim_axis < n:
        raise ValueError("data %r: batch_dim_axis %r out of range" % (name, batch_dim_axis))
    batch_shape: List[Any] = list(shape)
    if batch_dim_axis is not None:
        batch_shape.insert(batch_dim_axis, "B")
    if time_dim_axis is NotSpecified:
        dyn = [i for i, s in enumerate(batch_shape) if s is None]
        time_axis = dyn[0] if dyn and batch_dim_axis is not None else None
    else:
        if time_dim_axis is not None and time_dim_axis >= n:
            raise ValueError("data %r: time_dim_axis %r out of range for %i axes" % (name, time_dim_axis, n))
        time_axis = time_dim_axis % n if time_dim_axis is not None else None
    if feature_dim_axis is NotSpecified and not sparse:
        rest = [i for i in range(n) if i not in (batch_dim_axis, time_axis)]
        static = [i for i in rest if batch_shape[i] is not None]
        feature_axis = (static or rest or [None])[-1]
    elif isinstance(feature_dim_axis, int):
        feature_axis = feature_dim_axis % n
    else:
        feature_axis = None
    dims: List[Dim] = []
    n_spatial = 0
    for i, size in enumerate(batch_shape):
        if size == "B":
            dims.append(batch_dim)
        elif i == feature_axis and i != time_axis and (i - (batch_dim_axis is not None and i > batch_dim_axis)
                                                        not in sized_axes):
            # (RETURNN: also a dynamic feature axis without given sizes is a feature dim)
            dims.append(Dim(size, kind=DimTypes.Feature, description="feature:%s" % name, auto_generated=True))
        else:
            what = "time" if i == time_axis else "spatial%i" % n_spatial
            n_spatial += 1
            desc = "%s:var:extern_data:%s" % (what, name) if size is None else "%s:static%i:%s" % (what, size, name)
            dims.append(Dim(size, kind=DimTypes.Spatial, description=desc, auto_generated=True))
    # not given: RETURNN keeps it unspecified, so its property finds the first dynamic axis of the dims (also
    # without a batch axis, where the shape's own default above names no time axis)
    return dims, NotSpecified if time_dim_axis is NotSpecified else time_axis
