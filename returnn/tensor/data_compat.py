"""RETURNN's ``Data``/``Tensor`` API for config code, mixed into :class:`~returnn.tensor.data.Data`.

Config code (custom layer classes, ``out_type`` functions, eval strings with ``as_data=True``)
calls RETURNN's methods; the templates here answer them:

- layout copies: ``copy_as_batch_major``, ``copy_as_time_major``, ``copy_as_batch_feature_major``,
  ``copy_as_bt_or_tb_major``, ``copy_with_batch_dim_axis``, ``copy_with_time_dim_axis``,
  ``copy_with_feature_dim_axis`` (moves the feature axis, as RETURNN; :meth:`copy_with_feature_axis_at`
  marks one instead), ``copy_add_batch_dim``, ``copy_add_spatial_dim``, ``copy_add_feature_dim``,
  ``copy_squeeze_axes``, ``copy_template`` (no value), ``copy_template_excluding_time_dim``,
  ``copy_template_excluding_spatial_dim``, ``copy_template_adding_time_dim``,
  ``copy_template_new_dim_tags``, ``copy_extend_with_beam`` (no beams here: itself);
- axes: ``get_time_dim_tag``, ``get_dim_tag``, ``get_size_dim_tag``, ``get_batch_axis``,
  ``get_batch_axis_excluding_batch``, ``time_dim_axis_excluding_batch``, ``is_batch_major``,
  ``is_time_major``, ``feature_dim_or_sparse_dim``, ``have_dim_tag``, ``get_axes``, ``get_kwargs``;
- values, when the template carries one (``placeholder``, set by the engine for config code; the
  layout copies above transform it with the template): ``placeholder``, ``size_placeholder``
  (``{axis without batch: lengths}``), ``get_sequence_lengths``, ``get_dynamic_size``,
  ``get_sequence_mask``, ``get_sequence_mask_broadcast``, ``get_placeholder_as_batch_major``,
  ``get_placeholder_as_time_major``. Sizes are kept per Dim (``dyn_sizes``), so every copy has them.

TensorFlow is imported only when a value is transformed; templates stay pure Python.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from returnn.tensor.not_specified import NotSpecified


def _tf():
    import tensorflow as tf
    return tf


class SizesOf:
    """The lengths of a dynamic Dim in a template without value: what RETURNN's
    ``get_sequence_lengths()`` / ``size_placeholder`` give config code while the network is built
    (there a tensor tied to its dim tag). Given back in ``Data(size_placeholder={axis: ...})`` (an
    ``out_type`` function's usual form), that axis is this Dim. It holds no numbers."""

    def __init__(self, dim: Any):
        self.dim = dim

    def __repr__(self) -> str:
        return "SizesOf(%s)" % self.dim.short_repr()

    def _no_value(self, *_args: Any, **_kwargs: Any) -> Any:
        raise ValueError("the lengths of %s have no value while the network is built (only Data(size_placeholder="
                         "{axis: lengths}) takes them then)" % self.dim.short_repr())

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __floordiv__ = __truediv__ = _no_value
    __array__ = __index__ = __int__ = __float__ = __bool__ = _no_value


class _SizePlaceholder(dict):
    """RETURNN's ``size_placeholder`` view: ``data.size_placeholder[axis] = lengths`` sets them on ``data``."""

    def __init__(self, data: Any):
        super().__init__()
        self._data = data

    def __setitem__(self, axis_wo_b: int, sizes: Any) -> None:
        self._data.set_dynamic_size(self._data.get_batch_axis(axis_wo_b), sizes)
        super().__setitem__(axis_wo_b, sizes)

    def __delitem__(self, axis_wo_b: int) -> None:
        raise ValueError("%s: cannot delete items from size_placeholder (as RETURNN)" % self._data.short_repr())


class _Flag:
    """A bool that can also be called (``data.is_time_major`` is RETURNN's property; code written
    against a method form calls it)."""

    __slots__ = ("value",)

    def __init__(self, value: bool):
        self.value = bool(value)

    def __bool__(self) -> bool:
        return self.value

    def __call__(self) -> bool:
        return self.value

    def __eq__(self, other: Any) -> bool:
        return self.value == (bool(other) if isinstance(other, _Flag) else other)

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return repr(self.value)


class DataCompat:
    """The methods listed in the module docstring (``self`` is a ``Data``)."""

    placeholder: Any = None
    # RETURNN marks a template built from not yet known sources in a rec unit's first construction pass
    # ``undefined``; this engine builds every template from known ones (config layer classes test it)
    undefined = False

    # ---- values
    @property
    def dyn_sizes(self) -> Dict[Any, Any]:
        """Per-sequence sizes by Dim (the dynamic axes of a template with a value)."""
        return self.__dict__.setdefault("_dyn_sizes", {})

    def with_value(self, placeholder: Any, sizes: Optional[Dict[Any, Any]] = None):
        """A copy carrying ``placeholder`` and the sizes ``{Dim: lengths}`` (what the engine gives
        config code)."""
        out = self.copy()
        out.placeholder = placeholder
        out.__dict__["_dyn_sizes"] = dict(sizes or {})
        return out

    def _derived(self, template, placeholder: Any):
        template.placeholder = placeholder
        template.__dict__["_dyn_sizes"] = dict(self.dyn_sizes)
        return template

    @property
    def size_placeholder(self) -> Dict[int, Any]:
        """RETURNN's ``{axis counted without batch: lengths}`` of the dynamic axes with known sizes; assigning an
        item sets that axis' sizes (:meth:`set_dynamic_size`)."""
        out = _SizePlaceholder(self)
        for i, d in enumerate(self.dims):
            if d.is_batch_dim():
                continue
            size = self._size_of(d)
            if size is None and d.dimension is None and self.placeholder is None:
                size = SizesOf(d)  # a template while the network is built
            if size is not None:
                dict.__setitem__(out, self.get_batch_axis_excluding_batch(i), size)
        return out

    @size_placeholder.setter
    def size_placeholder(self, value: Optional[Dict[int, Any]]) -> None:
        for axis_wo_b, size in (value or {}).items():
            self.set_dynamic_size(self.get_batch_axis(axis_wo_b), size)

    def set_dynamic_size(self, axis: int, sizes: Any) -> None:
        """The lengths (B,) of ``axis`` (counted with batch); the lengths of another template's Dim
        (:class:`SizesOf`) make the axis that Dim. In an eval function, ``self.output.set_dynamic_size(axis,
        lengths)`` gives the lengths of a dynamic dim its ``out_type`` made."""
        if isinstance(sizes, SizesOf):
            dims = list(self.dims)
            dims[axis] = sizes.dim
            self.dims = tuple(dims)
            return
        if not self.dims[axis].is_dynamic():
            raise ValueError("set_dynamic_size: axis %i of %s is not dynamic" % (axis, self.short_repr()))
        self.dyn_sizes[self.dims[axis]] = sizes

    def _size_of(self, dim) -> Any:
        for d, size in self.dyn_sizes.items():
            if d == dim:
                return size
        if getattr(dim, "derived_from_op", None) is not None:
            from returnn.tensor.dim_math import dyn_size_of
            try:
                return dyn_size_of(dim, lambda d: self._size_of_or_fail(d))
            except KeyError:
                return None
        return None

    def _size_of_or_fail(self, dim) -> Any:
        for d, size in self.dyn_sizes.items():
            if d == dim:
                return size
        raise KeyError(dim)

    def get_dynamic_size(self, axis: Any) -> Any:
        """Lengths (B,) of ``axis`` (a description, counted with batch)."""
        dim = self.dims[self.get_axis_from_description(axis)]
        size = self._size_of(dim)
        if size is None:
            if dim.dimension is not None:
                return dim.dimension
            if self.placeholder is None:  # a template while the network is built: the Dim's lengths
                return SizesOf(dim)
            raise ValueError("%s: no sizes known for axis %r (%s)" % (self.short_repr(), axis, dim.short_repr()))
        return size

    def get_sequence_lengths(self) -> Any:
        """Lengths (B,) of the time axis."""
        if self.time_dim_axis is None:
            raise ValueError("%s has no time axis" % self.short_repr())
        return self.get_dynamic_size(self.time_dim_axis)

    def get_sequence_mask(self) -> Any:
        """(B, T) (batch-major) or (T, B) bool mask of the real frames of the time axis."""
        tf = _tf()
        maxlen = tf.shape(self.placeholder)[self.time_dim_axis] if self.placeholder is not None else None
        mask = tf.sequence_mask(self.get_sequence_lengths(), maxlen=maxlen)
        return mask if self.batch_dim_axis is None or self.batch_dim_axis < self.time_dim_axis else tf.transpose(mask)

    def get_sequence_mask_broadcast(self, axis: Any = None) -> Any:
        """The mask of ``axis`` (default time) shaped to broadcast against the value."""
        tf = _tf()
        axis = self.time_dim_axis if axis is None else self.get_axis_from_description(axis)
        mask = tf.sequence_mask(self.get_dynamic_size(axis), maxlen=tf.shape(self.placeholder)[axis])  # (B, T)
        b = self.batch_dim_axis
        if b is not None and b > axis:
            mask = tf.transpose(mask)
        for i in range(self.batch_ndim):
            if i not in (b, axis):
                mask = tf.expand_dims(mask, i)
        return mask

    def time_dimension(self) -> Any:
        """The time axis' size in this value (a scalar tensor)."""
        return _tf().shape(self.placeholder)[self.time_dim_axis]

    def get_batch_dim(self) -> Any:
        return _tf().shape(self.placeholder)[self.batch_dim_axis]

    def get_placeholder_as_batch_major(self) -> Any:
        return self.copy_as_batch_major().placeholder

    def get_placeholder_as_time_major(self) -> Any:
        return self.copy_as_time_major().placeholder

    # ---- axes
    def get_batch_axis(self, axis_wo_b: int) -> int:
        """Axis counted with batch of ``axis_wo_b`` (counted without). As RETURNN, a negative one is given back
        as it is (counted from the end, it names the same axis when the batch axis is not after it)."""
        b = self.batch_dim_axis
        return axis_wo_b if b is None or axis_wo_b < b else axis_wo_b + 1

    def get_batch_axis_excluding_batch(self, axis: int) -> Optional[int]:
        """``axis`` (counted with batch; negative from the end) counted without batch, None for the batch axis.
        As RETURNN, a positive one past the end is not checked (counted on from the batch axis)."""
        b = self.batch_dim_axis
        if axis < 0:
            if axis + self.batch_ndim < 0:
                raise ValueError("get_batch_axis_excluding_batch: %s has no axis %i" % (self.short_repr(), axis))
            axis += self.batch_ndim
        if b is None or axis < b:
            return axis
        return None if axis == b else axis - 1

    @property
    def time_dim_axis_excluding_batch(self) -> Optional[int]:
        return None if self.time_dim_axis is None else self.get_batch_axis_excluding_batch(self.time_dim_axis)

    @property
    def feature_dim_axis_or_unspecified(self) -> Any:
        from returnn.tensor.data import NotSpecified
        return self._feature_dim_axis if self._feature_dim_axis is not NotSpecified else NotSpecified

    @property
    def feature_dim_or_sparse_dim(self) -> Any:
        return self.sparse_dim if self.sparse_dim is not None else self.feature_dim

    def get_time_dim_tag(self) -> Any:
        if self.time_dim_axis is None:
            raise ValueError("%s has no time axis" % self.short_repr())
        return self.dims[self.time_dim_axis]

    def get_dim_tag(self, axis: int) -> Any:
        return self.dims[axis]

    def get_size_dim_tag(self, number: int) -> Any:
        """The ``number``-th dynamic axis' dim."""
        return self.dims[self.get_dynamic_axes()[number]]

    def have_dim_tag(self, tag: Any, include_implicit: bool = True, unique: bool = False) -> bool:
        count = sum(1 for d in self.dims if d == tag)
        return count == 1 if unique else count >= 1

    @property
    def is_batch_major(self) -> "_Flag":
        """RETURNN's property (``data.is_batch_major``); calling it works too."""
        return _Flag(self.batch_dim_axis == 0)

    @property
    def is_time_major(self) -> "_Flag":
        """RETURNN's property (``data.is_time_major``); calling it works too."""
        return _Flag(self.time_dim_axis == 0)

    def get_axes(self, exclude_time: bool = False, exclude_batch: bool = False,
                 exclude_feature: bool = False) -> List[int]:
        return [i for i in range(self.batch_ndim)
                if not (exclude_time and i == self.time_dim_axis) and not (exclude_batch and i == self.batch_dim_axis)
                and not (exclude_feature and i == self.feature_dim_axis)]

    def get_kwargs(self, include_special_axes: bool = True) -> Dict[str, Any]:
        out = {"name": self.name, "dims": self.dims, "dtype": self.dtype}
        if self.sparse_dim is not None:
            out["sparse_dim"] = self.sparse_dim
        if include_special_axes:
            out["time_dim_axis"] = self.time_dim_axis
            out["feature_dim_axis"] = self.feature_dim_axis_or_unspecified
        return out

    # ---- layout copies (the value follows)
    def _transposed(self, perm: Sequence[int]):
        return self.copy_transpose(perm)  # the value follows (Data.copy_transpose)

    def _moved(self, old: Optional[int], new: int, what: str = "axis"):
        if old is None:
            raise ValueError("%s has no %s" % (self.short_repr(), what))
        return self.copy_move_axis(old, new)

    def copy_as_batch_major(self):
        return self.copy_with_batch_dim_axis(0)

    def copy_as_time_major(self):
        return self._moved(self.time_dim_axis, 0, "time axis")

    def copy_with_batch_dim_axis(self, batch_dim_axis: int):
        return self._moved(self.batch_dim_axis, batch_dim_axis, "batch axis")

    def copy_with_time_dim_axis(self, time_dim_axis: int):
        return self._moved(self.time_dim_axis, time_dim_axis, "time axis")

    def copy_with_feature_dim_axis(self, feature_dim_axis: int):
        """RETURNN's: the feature axis moved to ``feature_dim_axis``."""
        if self.feature_dim_axis is None:
            raise ValueError("%s has no feature axis" % self.short_repr())
        return self._moved(self.feature_dim_axis, feature_dim_axis)

    def copy_with_feature_axis_at(self, axis: Optional[int]):
        """Marks ``axis`` as the feature axis (None: no feature axis); the layout stays."""
        return self._derived(self.copy(feature_dim_axis=axis), self.placeholder)

    def copy_as_batch_feature_major(self):
        """Batch first, feature second (RETURNN needs both)."""
        if self.batch_dim_axis is None or self.feature_dim_axis is None:
            raise ValueError("copy_as_batch_feature_major: %s needs a batch and a feature axis" % self.short_repr())
        out = self.copy_as_batch_major()
        return out._moved(out.feature_dim_axis, 1)

    def copy_as_bt_or_tb_major(self):
        """Batch-time or time-batch major (RETURNN's: the batch or the time axis first, whichever already is or
        comes first, the other second)."""
        if not (self.have_batch_axis() and self.have_time_axis()):
            raise ValueError("copy_as_bt_or_tb_major: %s needs a batch and a time axis" % self.short_repr())
        if self.batch_dim_axis == 0:
            return self.copy_with_time_dim_axis(1)
        if self.time_dim_axis == 0:
            return self.copy_with_batch_dim_axis(1)
        first = self.copy_as_time_major() if self.batch_dim_axis > self.time_dim_axis else self.copy_as_batch_major()
        return first.copy_as_bt_or_tb_major()

    def copy_add_batch_dim(self, batch_dim_axis: int = 0, batch: Any = None, dim_tag: Any = None):
        """A batch axis at ``batch_dim_axis`` (negative: from the end); a value gets one of size 1 (broadcasting)."""
        from returnn.tensor.dim import batch_dim
        if self.batch_dim_axis is not None:
            raise ValueError("copy_add_batch_dim: %s already has a batch axis" % self.short_repr())
        return self._copy_add_dim_returnn(dim_tag or batch_dim, batch_dim_axis, unbroadcast=False, keep_explicit=False)

    def copy_add_spatial_dim(self, spatial_dim_axis: Optional[int] = None, dim: Optional[int] = 1,
                             auto_time_dim_axis: bool = True):
        """A new spatial axis of size ``dim`` at ``spatial_dim_axis`` (default: where RETURNN puts a new spatial
        dim, :meth:`get_default_new_axis_for_dim_tag`); without a time axis (``auto_time_dim_axis``) it is the
        time axis. A value gets the new axis repeated to ``dim``."""
        from returnn.tensor.dim import Dim, DimTypes
        if dim is None and self.placeholder is not None:
            raise ValueError("copy_add_spatial_dim: a value gets no new axis of dynamic size (dim=None)")
        new = Dim(dim, kind=DimTypes.Spatial, description="added_spatial")  # (RETURNN: not auto_generated)
        if spatial_dim_axis is None:
            spatial_dim_axis = self.get_default_new_axis_for_dim_tag(new)
        out = self._copy_add_dim_returnn(new, spatial_dim_axis)
        if auto_time_dim_axis and self.time_dim_axis is None:
            if spatial_dim_axis < 0:  # RETURNN sets it as given and asserts it in range
                raise ValueError("copy_add_spatial_dim: %s has no time axis and spatial_dim_axis %i is negative "
                                 "(RETURNN takes it as the time axis and fails)" % (self.short_repr(), spatial_dim_axis))
            out = out._derived(out.copy(time_dim_axis=spatial_dim_axis), out.placeholder)
        return out

    def copy_add_feature_dim(self, axis: Optional[int] = None):
        """A new feature axis of size 1 (default: after the feature axis, else last); on sparse data a spatial
        axis instead (:meth:`copy_add_spatial_dim`), as RETURNN."""
        from returnn.tensor.data import NotSpecified
        from returnn.tensor.dim import Dim, DimTypes
        if self.sparse:
            return self.copy_add_spatial_dim(spatial_dim_axis=axis)
        new = Dim(1, kind=DimTypes.Feature, description="feature1")
        if axis is None:
            axis = self.get_default_new_axis_for_dim_tag(new)
        out = self._copy_add_dim_returnn(new, axis)
        out = out._derived(out.copy(feature_dim_axis=NotSpecified), out.placeholder)
        axis %= out.batch_ndim
        if out.feature_dim_axis != axis:
            out = out._derived(out.copy(feature_dim_axis=axis), out.placeholder)
        return out

    def copy_squeeze_axes(self, axes: Sequence[int]):
        out = self
        for axis in sorted((a % self.batch_ndim for a in axes), reverse=True):
            if out.dims[axis].dimension != 1:
                raise ValueError("copy_squeeze_axes: axis %i of %s is not of size 1" % (axis, self.short_repr()))
            template = out.copy_template_excluding_axis(axis)
            value = None if out.placeholder is None else _tf().squeeze(out.placeholder, axis)
            out = out._derived(template, value)
        return out

    def copy_extend_with_beam(self, beam: Any):
        """No beams on templates here: the same template."""
        return self

    def copy_template(self, name: Optional[str] = None, dtype: Optional[str] = None):
        """The template without its value."""
        out = self.copy(name, **({"dtype": dtype} if dtype else {}))
        out.placeholder = None
        return out

    def copy_template_excluding_time_dim(self, name: Optional[str] = None):
        if self.time_dim_axis is None:
            raise ValueError("copy_template_excluding_time_dim: %s has no time axis" % self.short_repr())
        return self.copy_template_excluding_axis(self.time_dim_axis, name)

    def copy_template_excluding_spatial_dim(self, spatial_axis_num: int, name: Optional[str] = None):
        return self.copy_template_excluding_axis(self.get_spatial_batch_axes()[spatial_axis_num], name)

    def copy_template_adding_time_dim(self, name: Optional[str] = None, time_dim_axis: int = 0):
        """RETURNN's: a new dynamic axis ``unknown_time`` at ``time_dim_axis`` (negative: from the end), the time
        axis; the feature axis (when there is one) shifted and set explicitly."""
        from returnn.tensor.dim import Dim, DimTypes
        n = self.batch_ndim
        axis = time_dim_axis + n + 1 if time_dim_axis < 0 else time_dim_axis
        if not 0 <= axis <= n:
            raise ValueError("copy_template_adding_time_dim: %s has no position %r for a new axis"
                             % (self.short_repr(), time_dim_axis))
        time = Dim(None, kind=DimTypes.Spatial, description="unknown_time", auto_generated=True)
        feat = self.feature_dim_axis
        dims = tuple(self.dims[:axis]) + (time,) + tuple(self.dims[axis:])
        return self.copy_template().copy(name, dims=dims, time_dim_axis=axis,
                                         feature_dim_axis=NotSpecified if feat is None else feat + (feat >= axis))

    def copy_template_new_dim_tags(self, new_dim_tags: Sequence[Any], name: Optional[str] = None,
                                   keep_special_axes: bool = False):
        """RETURNN's: ``new_dim_tags`` (as many as here with ``keep_special_axes``), the special axes by the default
        rules; with ``keep_special_axes`` the explicitly set ones kept as positions."""
        if keep_special_axes:
            if len(new_dim_tags) != self.batch_ndim:
                raise ValueError("copy_template_new_dim_tags: %i dims for %s (keep_special_axes)"
                                 % (len(new_dim_tags), self.short_repr()))
            return self.copy(name, dims=tuple(new_dim_tags), time_dim_axis=self._time_dim_axis,
                             feature_dim_axis=self._feature_dim_axis)
        return self.copy(name, dims=tuple(new_dim_tags), time_dim_axis=NotSpecified, feature_dim_axis=NotSpecified)
