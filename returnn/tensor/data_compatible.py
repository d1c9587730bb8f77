"""RETURNN's ``Data.copy_compatible_to`` for config code (eval functions bring a source into the layout of another
template: ``logits.copy_compatible_to(Data("logits", dim_tags=[...]), check_dtype=False)``), mixed into
:class:`~returnn.tensor.data.Data` with the ``copy_add_dim_by_tag`` it uses (RETURNN's: without ``unbroadcast``
the template gets a size-1 stand-in dim, a sparse template a spatial copy of a feature dim).

Each axis of the source is matched to one of the target (``find_matching_dim_map``: equal dims first, then same-size
static dims of any kind but batch, then broadcasting, then one dynamic dim); the source's axes are swapped into the
target's order and the target's other dims added (as broadcast axes of size 1, or repeated with ``unbroadcast``);
the time and feature axes become the target's. A value is transposed and expanded along.

``copy_compatible_to_dims(dims)`` / ``copy_compatible_to_dims_raw(dims)``: the simpler form by dim equality
(``get_out_permutation_to_dims``; of several equal axes the one of the highest match_priority), missing dims as
size-1 axes (``..._bc_dim1``) or repeated; the time and feature axes stay on their dims.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence


class DataCompatible:
    """The methods listed in the module docstring (``self`` is a ``Data``)."""

    def _unbroadcast_size(self, dim: Any) -> Any:
        """How many times a new axis ``dim`` is repeated in a value: its static size, else the maximum of its
        sizes (known to this template)."""
        if dim.dimension is not None:
            return dim.dimension
        sizes = self._size_of(dim)
        if sizes is None:
            raise ValueError("%s: the sizes of %s are unknown here; cannot unbroadcast a value to it"
                             % (self.short_repr(), dim.short_repr()))
        import tensorflow as tf
        return tf.reduce_max(sizes)

    def copy_add_dim_by_tag_returnn(self, dim: Any, unbroadcast: bool = False, axis: Optional[int] = None):
        """RETURNN's ``copy_add_dim_by_tag`` (see the module docstring)."""
        from returnn.tensor.dim import Dim, DimTypes
        if axis is None:
            axis = self.get_default_new_axis_for_dim_tag(dim)
        if dim.is_batch_dim():
            if not unbroadcast:
                dim = dim if dim.dimension == 1 else Dim(1, kind=DimTypes.Batch, description="batch-broadcast",
                                                         auto_generated=True)
            return self.copy_add_batch_dim(axis, dim_tag=dim)
        if self.sparse and dim.is_feature_dim():
            dim = dim.copy(kind=DimTypes.Spatial)
        if not unbroadcast and dim.dimension != 1:
            dim = Dim(1, kind=dim.kind, description="%s_dummy_dim1" % (dim.description or "unnamed"),
                      auto_generated=True)
        out = self._copy_add_dim_returnn(dim, axis, unbroadcast=False)
        if out.placeholder is not None and dim.dimension != 1:
            import tensorflow as tf
            n = out.batch_ndim
            axis = axis % n if axis < 0 else axis
            reps = [1] * n
            reps[axis] = self._unbroadcast_size(dim)
            out.placeholder = tf.tile(out.placeholder, tf.stack(reps) if not all(isinstance(r, int) for r in reps)
                                      else reps)
        return out

    def copy_compatible_to(self, data: Any, add_dims: bool = True, unbroadcast: bool = False,
                           except_feature: bool = False, except_axis: Any = None, check_sparse: bool = True,
                           check_dtype: bool = True):
        """This data in the layout of ``data`` (see the module docstring)."""
        from returnn.tensor.data import NotSpecified
        if check_sparse and self.sparse != data.sparse:
            raise ValueError("copy_compatible_to: %s and %s differ in sparse (check_sparse=False allows it)"
                             % (self.short_repr(), data.short_repr()))
        if check_dtype and self.dtype != data.dtype:
            raise ValueError("copy_compatible_to: dtype %s of %s is not %s of %s (check_dtype=False allows it)"
                             % (self.dtype, self.short_repr(), data.dtype, data.short_repr()))
        feat = self._feature_dim_axis if data.sparse_dim is None else NotSpecified
        v = self._derived(self.copy(sparse_dim=data.sparse_dim, dtype=self.dtype, feature_dim_axis=feat),
                          self.placeholder)
        if v.batch_dim_axis is not None and data.batch_dim_axis is None:
            raise ValueError("copy_compatible_to: %s has a batch axis, %s has not" % (self.short_repr(),
                                                                                     data.short_repr()))
        if data.batch_ndim < v.batch_ndim:
            raise ValueError("copy_compatible_to: %s has more axes than %s" % (self.short_repr(), data.short_repr()))
        opts = dict(allow_same_feature_dim=True, allow_same_spatial_dim=True, treat_feature_as_spatial=True,
                    ignore_feature_dim=True)
        mapped: Dict[int, int] = data.find_matching_dim_map(v, list(range(v.batch_ndim)), opts)  # v axis -> target
        except_int = data.get_axis_from_description(except_axis) if except_axis is not None else None
        for target in range(data.batch_ndim):
            new_axis = min(target, v.batch_ndim)
            if target not in mapped.values():
                if not add_dims:
                    raise ValueError("copy_compatible_to: axis %i (%s) of %s is not in %s (add_dims=False)" % (
                        target, data.dims[target].short_repr(), data.short_repr(), self.short_repr()))
                unb = unbroadcast and not (except_feature and data.feature_dim_axis == target) \
                    and except_int != target
                v = v.copy_add_dim_by_tag_returnn(data.dims[target], unbroadcast=unb, axis=new_axis)
                mapped = {a + (a >= new_axis): t for a, t in mapped.items()}
                mapped[new_axis] = target
            else:
                source = next(a for a, t in mapped.items() if t == target)
                if source != target:
                    v = v.copy_swap_axes(source, new_axis)
                    mapped[source], mapped[new_axis] = mapped[new_axis], mapped[source]
        for key in ("time_dim_axis", "feature_dim_axis"):
            if getattr(v, key) != getattr(data, key):
                v = v._derived(v.copy(**{key: NotSpecified}), v.placeholder)
                if getattr(v, key) != getattr(data, key):
                    v = v._derived(v.copy(**{key: getattr(data, key)}), v.placeholder)
        if self.sparse:
            v = v._derived(v.copy(feature_dim_axis=NotSpecified, sparse_dim=self.sparse_dim, dtype=self.dtype),
                           v.placeholder)
        return v

    def get_out_permutation_to_dims(self, dims: Sequence[Any]) -> List[int]:
        """For each of ``dims`` (a superset of this data's) the axis here that is it, or -1."""
        perm: List[int] = []
        taken: set = set()
        for dim in dims:
            cands: List[int] = []
            for j, d in enumerate(self.dims):
                if j in taken:
                    continue
                if d is dim:
                    cands = [j]
                    break
                if d == dim:
                    cands.append(j)
            if len(cands) > 1:
                top = max(self.dims[j].match_priority for j in cands)
                cands = [j for j in cands if self.dims[j].match_priority == top]
                if len(cands) > 1:
                    raise ValueError("%s: dim %s is ambiguous in %s" % (self.short_repr(), dim.short_repr(), dims))
            perm.append(cands[0] if cands else -1)
            taken.update(cands[:1])
        if len(taken) != self.batch_ndim:
            raise ValueError("%s: not all its dims are in %s" % (self.short_repr(), list(dims)))
        return perm

    def _raw_to_dims(self, dims: Sequence[Any], perm: List[int], unbroadcast: bool) -> Any:
        import tensorflow as tf
        value = tf.transpose(self.placeholder, [p for p in perm if p >= 0])
        shape = tf.shape(self.placeholder)
        value = tf.reshape(value, tf.stack([shape[p] if p >= 0 else 1 for p in perm]))
        if unbroadcast and -1 in perm:
            value = tf.tile(value, tf.stack([self._unbroadcast_size(dims[i]) if p < 0 else 1
                                             for i, p in enumerate(perm)]))
        return value

    def copy_compatible_to_dims(self, dims: Sequence[Any], *, add_dims: bool = True, unbroadcast: bool = False):
        """This data with its axes in the order of ``dims`` and the missing ones added (see the module docstring)."""
        from returnn.tensor.data import NotSpecified
        from returnn.tensor.dim import Dim
        perm = self.get_out_permutation_to_dims(dims)
        if perm == list(range(self.batch_ndim)):
            return self.copy()
        if not add_dims and -1 in perm:
            raise ValueError("%s: copy_compatible_to_dims(add_dims=False): %s missing" % (
                self.short_repr(), dims[perm.index(-1)].short_repr()))
        out_dims = [dims[i] if p >= 0 or unbroadcast else
                    Dim(1, kind=dims[i].kind, description="%s_bc_dim1" % (dims[i].description or "unnamed"),
                        auto_generated=True) for i, p in enumerate(perm)]
        res = self.copy(dims=out_dims, time_dim_axis=NotSpecified, feature_dim_axis=NotSpecified)
        for key in ("time_dim_axis", "feature_dim_axis"):
            old = getattr(self, key)
            want = None if old is None else perm.index(old)
            if getattr(res, key) != want:
                res = res.copy(**{key: want})
        value = None if self.placeholder is None else self._raw_to_dims(dims, perm, unbroadcast)
        return self._derived(res, value)

    def copy_compatible_to_dims_raw(self, dims: Sequence[Any], *, add_dims: bool = True,
                                    unbroadcast: bool = False) -> Any:
        """The value of :meth:`copy_compatible_to_dims`."""
        if self.placeholder is None:
            raise ValueError("copy_compatible_to_dims_raw: %s has no value" % self.short_repr())
        return self.copy_compatible_to_dims(dims, add_dims=add_dims, unbroadcast=unbroadcast).placeholder
