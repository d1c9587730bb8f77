"""More of RETURNN's ``Data``/``Tensor`` layout copies for config code, mixed into
:class:`~returnn.tensor.data.Data` (as RETURNN's ``_tensor_extra``): ``copy_swap_axes``, ``copy_with_feature_last``,
``copy_as_time_batch_major``, ``copy_as_batch_spatial_major``, ``copy_split_feature_dim``, ``copy_template_dense``,
``copy_template_replace_dim``; with a value: ``copy_masked`` (padded frames set), ``num_elements``. A value
(``placeholder``) is transformed along, as RETURNN does.

RETURNN asserts its preconditions (a feature axis, a batch and a time axis, ...); here they fail with a
ValueError naming the method.
"""
from __future__ import annotations

from typing import Any, Optional


def _check(ok: bool, data: Any, method: str, what: str) -> None:
    if not ok:
        raise ValueError("%s: %s %s" % (method, data.short_repr(), what))


def _axis(data: Any, axis: int, method: str) -> int:
    """A negative axis counted from the end; out of range fails (RETURNN's asserts)."""
    _check(isinstance(axis, int) and -data.batch_ndim <= axis < data.batch_ndim, data, method,
           "has no axis %r" % (axis,))
    return axis % data.batch_ndim


class DataLayout:
    """The methods listed in the module docstring (``self`` is a ``Data``)."""

    def copy_swap_axes(self, axis1: int, axis2: int):
        """``axis1`` and ``axis2`` (counted with batch) swapped, the other axes where they are."""
        axis1, axis2 = _axis(self, axis1, "copy_swap_axes"), _axis(self, axis2, "copy_swap_axes")
        if axis1 == axis2:
            return self.copy()
        perm = list(range(self.batch_ndim))
        perm[axis1], perm[axis2] = axis2, axis1
        return self.copy_transpose(perm)

    def _copy_add_dim_returnn(self, dim: Any, axis: int, unbroadcast: bool = True, keep_explicit: bool = True):
        """``dim`` inserted before ``axis`` with RETURNN's special axes (its ``copy_add_dim_by_tag``): the time axis
        (when there is one) and an explicitly set feature axis shifted and kept explicitly; one explicitly None
        stays None (``keep_explicit``) unless ``dim`` could be it (a spatial dim: time, a feature dim: feature);
        the rest by the default rules on the new dims (``copy_add_batch_dim``: ``keep_explicit`` False). A value
        gets an axis of size 1 (repeated to a static ``dim`` with ``unbroadcast``)."""
        from returnn.tensor.data import NotSpecified
        if axis < 0:
            axis += self.batch_ndim + 1
        _check(0 <= axis <= self.batch_ndim, self, "adding an axis", "has no position %r for it" % (axis,))
        time, feat = self.time_dim_axis, self._feature_dim_axis
        new_time = NotSpecified if time is None else time + (time >= axis)
        if time is None and keep_explicit and self._time_dim_axis is None and not dim.is_spatial_dim():
            new_time = None
        new_feat = feat + (feat >= axis) if isinstance(feat, int) else NotSpecified
        if feat is None and keep_explicit and not dim.is_feature_dim():
            new_feat = None
        out = self.copy(dims=self.dims[:axis] + (dim,) + self.dims[axis:], time_dim_axis=new_time,
                        feature_dim_axis=new_feat)
        value = None
        if self.placeholder is not None:
            import tensorflow as tf
            value = tf.expand_dims(self.placeholder, axis)
            if unbroadcast and dim.dimension not in (None, 1):
                value = tf.repeat(value, dim.dimension, axis=axis)
        return self._derived(out, value)

    def copy_with_feature_last(self):
        """The feature axis moved to the end."""
        _check(self.feature_dim_axis is not None, self, "copy_with_feature_last", "has no feature axis")
        return self.copy_with_feature_dim_axis(-1)

    def copy_as_time_batch_major(self):
        """Time axis first, batch axis second."""
        _check(self.have_batch_axis() and self.have_time_axis(), self, "copy_as_time_batch_major",
               "needs a batch and a time axis")
        data = self.copy_as_bt_or_tb_major()
        return data.copy_move_axis(0, 1) if data.time_dim_axis == 1 else data

    def _has_sizes(self, axis: int) -> bool:
        """Whether ``axis`` has per-sequence sizes (RETURNN: its dim's ``dyn_size`` is set): a dynamic axis of a
        value, or of a template while a network is built (RETURNN's dims carry their sizes then)."""
        from returnn.tensor import dim as dim_module
        d = self.dims[axis]
        if not d.is_dynamic():
            return False
        return self._size_of(d) is not None or bool(dim_module._BUILDING[0])

    def copy_as_batch_spatial_major(self):
        """Batch first, then the axes with sizes (in order), the others, the feature axis last; the feature
        axis unmarked when the default rule finds it there."""
        from returnn.tensor.data import NotSpecified
        data = self.copy_as_batch_major()
        if data.feature_dim_axis is not None:
            data = data.copy_with_feature_last()
        with_sizes = [data.dims[i] for i in range(data.batch_ndim) if i != data.batch_dim_axis and data._has_sizes(i)]
        for i, dim in enumerate(with_sizes):
            axis = next(a for a, d in enumerate(data.dims) if d is dim)
            data = data.copy_move_axis(axis, i + 1)
        if data.feature_dim_axis is not None and data._feature_dim_axis is not NotSpecified:
            plain = data.copy(feature_dim_axis=NotSpecified)
            if plain.feature_dim_axis == data.feature_dim_axis:
                data = data._derived(plain, data.placeholder)
        return data

    def copy_split_feature_dim(self, new_feature_dim: int):
        """The feature axis of size ``n * new_feature_dim`` split into a spatial axis of size ``n`` and a feature
        axis of size ``new_feature_dim`` (in that order); a value is reshaped."""
        from returnn.tensor.data import NotSpecified
        from returnn.tensor.dim import Dim, DimTypes
        method = "copy_split_feature_dim"
        _check(not self.sparse, self, method, "is sparse")
        _check(self.feature_dim_axis is not None, self, method, "has no feature axis")
        _check(self.dim is not None and self.dim % new_feature_dim == 0, self, method,
               "has a feature size that is no multiple of %r" % (new_feature_dim,))
        axis, rem = self.feature_dim_axis, self.dim // new_feature_dim
        split = Dim(rem, kind=DimTypes.Spatial, description="feature_split_rem_%i" % rem, auto_generated=True)
        new = Dim(new_feature_dim, kind=self.dims[axis].kind, description="feature_split_new_%i" % new_feature_dim,
                  auto_generated=True)
        time = self.time_dim_axis
        # (RETURNN: the time axis kept explicitly, the feature axis by the default rule)
        out = self.copy(dims=self.dims[:axis] + (split, new) + self.dims[axis + 1:],
                        time_dim_axis=NotSpecified if time is None else time + (time > axis))
        value = None
        if self.placeholder is not None:
            import tensorflow as tf
            shape = tf.shape(self.placeholder)
            value = tf.reshape(self.placeholder, tf.concat([shape[:axis], [rem, new_feature_dim], shape[axis + 1:]], 0))
        return self._derived(out, value)

    def copy_template_dense(self, name: Optional[str] = None, dtype: Optional[str] = None):
        """A template without value; sparse data as its dense one-hot form (the class dim a new last feature axis,
        float32)."""
        out = self.copy_template(name=name)
        if out.sparse:
            time = out.time_dim_axis
            out = out.copy(dims=out.dims + (out.sparse_dim,), sparse_dim=None, dtype="float32", time_dim_axis=time)
        return out.copy(dtype=dtype) if dtype else out

    def copy_template_replace_dim(self, axis: int, new_dim: Optional[int], new_size: Any = None):
        """A template with ``axis`` replaced by a new dim of size ``new_dim`` (None: dynamic, its lengths
        ``new_size``) of the same kind."""
        from returnn.tensor.dim import Dim
        old = self.dims[axis]
        if old.is_batch_dim():
            _check(new_dim is None, self, "copy_template_replace_dim", "has no static size for its batch axis")
            return self.copy_template()
        tag = Dim(new_dim, kind=old.kind, description="%s_replaced" % (old.description or "unnamed"),
                  auto_generated=True)
        out = self.copy_template_replace_dim_tag(axis, tag)
        out.placeholder = None
        if new_size is not None:
            out.dyn_sizes[tag] = new_size
        return out

    def copy_masked(self, mask_value: Any, *, dims: Any = None, allow_int: Any = None):
        """The value with its padded frames (of ``dims``, default all dynamic axes over the batch) set to
        ``mask_value``."""
        _check(self.placeholder is not None, self, "copy_masked", "has no value")
        import tensorflow as tf
        axes = range(self.batch_ndim) if dims is None else [self.get_axis_from_description(d) for d in dims]
        mask = None
        for axis in axes:
            if not self.dims[axis].is_dynamic() or self.batch_dim_axis is None:
                continue  # (RETURNN: static axes, and sizes over a batch the value lacks, need no mask)
            _check(self._size_of(self.dims[axis]) is not None, self, "copy_masked",
                   "has no sizes for axis %i" % axis)
            m = self.get_sequence_mask_broadcast(axis)
            mask = m if mask is None else tf.logical_and(mask, m)
        if mask is None:
            return self.copy()
        value = tf.where(mask, self.placeholder, tf.cast(mask_value, self.placeholder.dtype))
        return self._derived(self.copy(), value)

    def num_elements(self) -> Any:
        """The number of elements without padding (RETURNN's, masked): the static product, else over the batch
        the product of each sequence's lengths times the static sizes (a scalar tensor)."""
        static, dynamic = 1, []
        for axis, d in enumerate(self.dims):
            if d.dimension is not None:
                static *= d.dimension
            elif axis != self.batch_dim_axis:
                dynamic.append(d)
        if self.batch_dim_axis is None and not dynamic:
            return static
        _check(self.placeholder is not None, self, "num_elements", "has dynamic axes and no value")
        import tensorflow as tf
        if self.batch_dim_axis is None:  # (lengths over a batch the value lacks: its padded shape)
            return tf.size(self.placeholder)
        per_seq = tf.fill(tf.shape(self.placeholder)[self.batch_dim_axis:self.batch_dim_axis + 1], 1)
        for d in dynamic:
            _check(self._size_of(d) is not None, self, "num_elements", "has no sizes for %s" % d.short_repr())
            per_seq = per_seq * tf.cast(self._size_of(d), tf.int32)
        return tf.reduce_sum(per_seq) * static
