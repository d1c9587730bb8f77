"""Layers that change the shape but not the values: split_dims, merge_dims, expand_dims,
squeeze, cast, swap_axes, reinterpret_data (RETURNN semantics; axes by RETURNN's descriptions).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim, DimTypes
from returnn.tensor.data import NotSpecified
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.helpers import check_sources, concat_inputs, concat_output
from returnn.tf.layers.options import Option, positive_int


def batch_axis_perm(layer: Layer, data: Data, enforce: Any) -> Optional[List[int]]:
    """RETURNN's ``enforce_batch_dim_axis``: the permutation that moves the batch axis of ``data`` to
    ``enforce`` (None: nothing to move)."""
    if enforce is None or data.batch_dim_axis is None:
        return None
    n = data.batch_ndim
    if isinstance(enforce, bool) or not isinstance(enforce, int) or not -n <= enforce < n:
        raise NetworkError("%s: 'enforce_batch_dim_axis' must be an axis index of %s, got %r"
                           % (layer.desc, data.short_repr(), enforce))
    if data.batch_dim_axis == enforce % n:
        return None
    perm = [i for i in range(n) if i != data.batch_dim_axis]
    perm.insert(enforce % n, data.batch_dim_axis)
    return perm


class _ShapeLayer(Layer):
    """One (feature-concatenated) input; ``self.input`` is its template."""

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources)
        self.input, self.plan = concat_output(self, sources)

    def inputs(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        return concat_inputs(self, self.input, self.plan, sources, ctx)


@register_layer
class SplitDimsLayer(_ShapeLayer):
    """Splits ``axis`` into ``dims`` (ints, one may be -1; or Dims). A dynamic axis is padded
    with ``pad_value`` to a multiple of the static part; the remaining dynamic dim gets sizes
    ``ceil(L / prod(static))``. The time/feature axis moves to the remaining / last new dim.
    The batch axis splits into int dims with one -1 (the batch), see :meth:`_init_batch_split`."""

    layer_class = "split_dims"
    options = (
        Option("axis", None, "axis description of the axis to split, e.g. 'F' or 'T'"),
        Option("dims", None, "new sizes (one may be -1) or Dim objects"),
        Option("pad_to_multiples", None, "pad a dynamic axis to a multiple (default: iff dynamic)"),
        Option("pad_value", 0, "value of padded positions"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        data = self.input
        self.ax = self.axis(data, self.opt("axis"), "axis")
        old = data.dims[self.ax]
        self.batch_split = old.is_batch_dim()
        if self.batch_split:
            self._init_batch_split(name, data)
            return
        dims = self.opt("dims")
        if not isinstance(dims, (list, tuple)) or not dims:
            raise NetworkError("%s: 'dims' must be a non-empty list, got %r" % (self.desc, dims))
        given = [d for d in dims if isinstance(d, Dim)]
        sizes = [(-1 if d.dimension is None else d.dimension) if isinstance(d, Dim) else d for d in dims]
        if any(isinstance(s, bool) or not isinstance(s, int) or (s < 1 and s != -1) for s in sizes) \
                or sizes.count(-1) > 1 or (given and len(given) != len(dims)):
            raise NetworkError("%s: 'dims' must be ints >= 1 with at most one -1 (or all Dims), got %r"
                               % (self.desc, dims))
        static = int(np.prod([s for s in sizes if s != -1]))
        self.rem = sizes.index(-1) if -1 in sizes else None
        pad = self.opt("pad_to_multiples")
        self.pad = old.is_dynamic() if pad is None else bool(pad)
        if old.is_static():
            total = old.dimension + ((-old.dimension) % static if self.pad else 0)
            if self.rem is None and static != old.dimension or total % static:
                raise NetworkError("%s: cannot split axis of size %i into %r" % (self.desc, old.dimension, dims))
            if self.rem is not None:
                sizes[self.rem] = total // static
        elif self.rem is None:
            raise NetworkError("%s: dynamic axis %r needs a -1 (or dynamic Dim) in 'dims'" % (self.desc, self.opt("axis")))
        kind = old.kind if old.kind != DimTypes.Unspecified else DimTypes.Spatial
        if given:
            new = list(given)
        else:
            # as RETURNN: the remainder axis is new per layer ("NAME_split_dimsI_rem"), derived from the old axis
            new = [Dim(None if s == -1 else s, kind=kind, description="%s_split_dims%i%s" % (
                name, i, "_rem" if i == self.rem else ""), derived_from=old if i == self.rem else None)
                   for i, s in enumerate(sizes)]
            if self.rem is not None and static == 1:
                new[self.rem] = old  # nothing split off: keep the dim and its sizes
            elif self.rem is not None and self.pad and old.is_dynamic():
                new[self.rem].untied_sizes = True  # RETURNN sets them as a bare tensor (see Dim.untied_sizes)
        self.new = new
        self.static = static
        self.out_dims = list(data.dims[:self.ax]) + new + list(data.dims[self.ax + 1:])
        out = data.copy(name, dims=self.out_dims)
        special = {}
        if data.time_dim_axis == self.ax:
            special["time_dim_axis"] = self.ax + (self.rem if self.rem is not None else 0)
        elif data.time_dim_axis is not None:
            special["time_dim_axis"] = data.time_dim_axis + (len(new) - 1 if data.time_dim_axis > self.ax else 0)
        if data.feature_dim_axis == self.ax:
            feats = [i for i, d in enumerate(new) if d.kind == DimTypes.Feature] or list(range(len(new)))
            special["feature_dim_axis"] = self.ax + feats[-1]
        elif data.feature_dim_axis is not None:
            special["feature_dim_axis"] = data.feature_dim_axis + (len(new) - 1 if data.feature_dim_axis > self.ax else 0)
        self.output = out.copy(**{k: v for k, v in special.items() if v != getattr(out, k)})

    def _init_batch_split(self, name: str, data: Data) -> None:
        """RETURNN's split of the batch axis into int ``dims`` with one -1: a plain reshape, the -1 axis is the
        batch axis (of the split batch) and the others static axes, e.g. ``(-1, K)`` takes the ``K``
        hypotheses of a search's ``B * K`` rows apart (row ``b * K + k``): ``(B, K)``, without beam."""
        dims = self.opt("dims")
        if not isinstance(dims, (list, tuple)) or any(isinstance(d, bool) or not isinstance(d, int) for d in dims) \
                or list(dims).count(-1) != 1 or any(d < 1 and d != -1 for d in dims):
            raise NetworkError("%s: splitting the batch axis: only int 'dims' with one -1 (the batch) are supported "
                               "here, got %r" % (self.desc, dims))
        if data.get_dynamic_axes():
            raise NetworkError("%s: splitting the batch axis of %s with dynamic axes (sizes per sequence) is not "
                               "supported here" % (self.desc, data.short_repr()))
        self.removes_beam = True
        self.rem = list(dims).index(-1)
        # RETURNN pads the batch (a dynamic dim: pad_to_multiples by default) to a multiple of the static dims
        pad = self.opt("pad_to_multiples")
        self.batch_pad = int(np.prod([d for d in dims if d != -1])) if pad is None or pad else 1
        self.new = [data.dims[self.ax] if i == self.rem else
                    Dim(d, kind=DimTypes.Spatial, description="%s_split_dims%i" % (name, i)) for i, d in enumerate(dims)]
        out_dims = list(data.dims[:self.ax]) + self.new + list(data.dims[self.ax + 1:])
        feature = data.feature_dim_axis
        if feature is not None:
            feature += len(dims) - 1 if feature > self.ax else 0
        self.output = Data(name, dims=out_dims, dtype=data.dtype, sparse_dim=data.sparse_dim, time_dim_axis=None)
        if feature is not None and self.output.feature_dim_axis != feature:
            self.output = self.output.copy(feature_dim_axis=feature)

    def _forward_batch_split(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        from returnn.tf.layers.beam_values import beam_of
        from returnn.tf.layers.norm import behavior_version
        beam = beam_of(sources[0])
        if beam is not None and beam.k > 1 and behavior_version() >= 1:
            raise NetworkError("%s: splitting the batch axis of a search's hypotheses (a beam) is refused from "
                               "behavior version 1: today's RETURNN asserts on it (its output batch has no beam); "
                               "the RETURNN of 2021 reshaped it as here" % self.desc)
        x = self.inputs(sources, ctx)
        tensor = x.tensor
        if self.batch_pad > 1:
            pads = [[0, 0]] * self.input.batch_ndim
            pads[self.ax] = [0, (-tf.shape(tensor)[self.ax]) % self.batch_pad]
            tensor = tf.pad(tensor, pads, constant_values=tf.cast(self.opt("pad_value"), tensor.dtype))
        shape = tf.shape(tensor)
        new_shape = [-1 if i == self.rem else d.dimension for i, d in enumerate(self.new)]
        tensor = tf.reshape(tensor, tf.concat([shape[:self.ax], new_shape, shape[self.ax + 1:]], 0))
        return self.make_output(tensor, sources)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        if self.batch_split:
            return self._forward_batch_split(sources, ctx)
        x = self.inputs(sources, ctx)
        tensor = x.tensor
        old = self.input.dims[self.ax]
        sizes = {}
        if self.pad:
            length = tf.shape(tensor)[self.ax]
            pads = [[0, 0]] * self.input.batch_ndim
            pads[self.ax] = [0, (-length) % self.static]
            tensor = tf.pad(tensor, pads, constant_values=tf.cast(self.opt("pad_value"), tensor.dtype))
        shape = tf.shape(tensor)
        new_shape = [d.dimension if d.dimension is not None else -1 for d in self.new]
        tensor = tf.reshape(tensor, tf.concat([shape[:self.ax], new_shape, shape[self.ax + 1:]], 0))
        if self.rem is not None and self.new[self.rem].is_dynamic() and self.new[self.rem] is not old:
            sizes[self.new[self.rem]] = -(-x.sizes[old] // self.static)
        return self.make_output(tensor, sources, sizes)


@register_layer
class MergeDimsLayer(_ShapeLayer):
    """Merges ``axes`` into one (row-major in the merged order). The result sits where the
    feature axis was if it is merged (and is then the feature axis), else at the first merged
    axis. A merged dynamic axis gets sizes ``prod`` of the merged sizes (real positions come
    first when the dynamic axis is the first merged one). The batch axis and one other merge into
    the batch axis (padding included; see batch_fold.BatchMerge)."""

    layer_class = "merge_dims"
    options = (
        Option("axes", None, "axis descriptions to merge, e.g. 'except_time', ['s:0', 'F']"),
        Option("keep_order", None, "merge in the order given in 'axes' (else in the input's axis order); "
                                   "None: True from behavior version 6, as RETURNN (which then requires it)"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        data = self.input
        axes_opt = self.opt("axes")
        from returnn.tf.layers.norm import behavior_version
        if self.keep_order():
            if not isinstance(axes_opt, (list, tuple)):
                raise NetworkError("%s: 'axes' %r must be a list, to have a well defined order (keep_order; the "
                                   "default from behavior version 6)" % (self.desc, axes_opt))
            axes = []
            for item in axes_opt:
                found = self.axes(data, item, "axes")
                if len(found) > 1:
                    raise NetworkError("%s: 'axes' entry %r matches %i axes; with keep_order each must be one axis"
                                       % (self.desc, item, len(found)))
                axes += found
        else:  # in the input's order, the batch axis first (RETURNN: so that split_batch_time can undo it)
            axes = sorted(self.axes(data, axes_opt, "axes"), key=lambda a: (a != data.batch_dim_axis, a))
        if not axes:  # RETURNN's merge target is min() of the merged axes: it fails on none
            raise NetworkError("%s: 'axes' %r match no axis of %s (RETURNN fails on nothing to merge)"
                               % (self.desc, axes_opt, data.short_repr()))
        self.batch_merge = None
        if data.batch_dim_axis in axes:  # into the batch axis (RETURNN: padding included)
            from returnn.tf.layers.batch_fold import BatchMerge
            self.batch_merge = BatchMerge(self, data, axes)
            self.output = self.batch_merge.output
            return
        self.merge = axes
        if len(axes) <= 1:
            self.output = data.copy(name)
            self.target = None
            return
        merged = [data.dims[a] for a in axes]
        is_feat = data.feature_dim_axis in axes
        size = None if any(d.is_dynamic() for d in merged) else int(np.prod([d.dimension for d in merged]))
        from returnn.tensor.dim_math import returnn_product_description  # (searched by 'stag:' descriptions)
        self.new = Dim(size, kind=DimTypes.Feature if is_feat else DimTypes.Spatial,
                       description=returnn_product_description(merged))
        out_dim = self.opt("out_dim")
        if out_dim is not None:  # RETURNN: the merged dim is declared the same as out_dim
            if not isinstance(out_dim, Dim):
                raise NetworkError("%s: 'out_dim' must be a Dim, got %r" % (self.desc, out_dim))
            try:
                self.new.declare_same_as(out_dim)
            except ValueError as exc:
                raise NetworkError("%s: 'out_dim': %s" % (self.desc, exc)) from None
        self.target = data.feature_dim_axis - sum(a < data.feature_dim_axis for a in axes) if is_feat else min(axes)
        rest = [i for i in range(data.batch_ndim) if i not in axes]
        self.perm = rest[:self.target] + axes + rest[self.target:]
        dims = [data.dims[i] for i in rest]
        dims.insert(self.target, self.new)
        self.output = data.copy(name, dims=dims)
        if is_feat and self.output.feature_dim_axis != self.target:
            self.output = self.output.copy(feature_dim_axis=self.target)
        # RETURNN (by 2021): time merged into the feature axis is no time axis; RETURNN of 2019 kept it as the
        # merged axis, and so do configs without a behavior_version (docs/compat.md, "Old config forms")
        if is_feat and data.time_dim_axis in axes and data.time_dim_axis != data.feature_dim_axis \
                and behavior_version() >= 1:
            self.output = self.output.copy(time_dim_axis=None)

    def keep_order(self) -> bool:
        """Whether ``axes`` merge in the order given (else in the input's axis order)."""
        from returnn.tf.layers.norm import behavior_version
        keep_order = self.opt("keep_order")
        if keep_order is None:
            return behavior_version() >= 6
        if not keep_order and behavior_version() >= 6:
            raise NetworkError("%s: keep_order False is not allowed from behavior version 6 (RETURNN)" % self.desc)
        return bool(keep_order)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = self.inputs(sources, ctx)
        if self.batch_merge is not None:
            return self.batch_merge.forward(self, x, sources)
        if self.target is None:
            return self.make_output(x.tensor, sources)
        tensor = tf.transpose(x.tensor, self.perm)
        shape = tf.shape(tensor)
        n = len(self.merge)
        tensor = tf.reshape(tensor, tf.concat([shape[:self.target], [-1], shape[self.target + n:]], 0))
        sizes = {}
        if self.new.is_dynamic():
            size = None
            for a in self.merge:
                d = self.input.dims[a]
                part = x.sizes[d] if d.is_dynamic() else tf.constant(d.dimension, tf.int32)
                size = part if size is None else size * part
            sizes[self.new] = size
        return self.make_output(tensor, sources, sizes)


@register_layer
class ExpandDimsLayer(_ShapeLayer):
    """Adds an axis of size ``dim``: ``axis`` "F" adds a feature axis after the feature axis,
    "T"/"spatial" a spatial axis before the feature axis (it becomes the time axis if there is
    none), an int inserts at that position (counted with batch)."""

    layer_class = "expand_dims"
    options = (
        Option("axis", None, "'F', 'T', 'spatial' or an int position"),
        Option("dim", 1, "size of the new axis (int or Dim)"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        data = self.input
        axis, dim = self.opt("axis"), self.opt("dim")
        key = axis.lower() if isinstance(axis, str) else axis
        if key in ("f", "feature"):
            if data.sparse:
                raise NetworkError("%s: 'axis' %r on sparse data (class indices) is refused, as RETURNN asserts dense "
                                   "data there" % (self.desc, axis))
            pos = data.batch_ndim if data.feature_dim_axis is None else data.feature_dim_axis + 1
        elif key in ("t", "time", "spatial"):
            pos = data.batch_ndim if data.sparse or data.feature_dim_axis is None else data.batch_ndim - 1
        elif isinstance(key, int) and not isinstance(key, bool) and -data.batch_ndim - 1 <= key <= data.batch_ndim:
            pos = key % (data.batch_ndim + 1)
        else:
            raise NetworkError("%s: 'axis' must be 'F', 'T', 'spatial' or an int position, got %r" % (self.desc, axis))
        if isinstance(dim, Dim):
            new = dim
        else:
            kind = DimTypes.Feature if key in ("f", "feature") else DimTypes.Spatial
            new = Dim(positive_int(self.desc, "dim", dim), kind=kind, description="%s_expand_dims" % name)
        self.new, self.pos = new, pos
        out = data.copy_insert_dim(new, pos).copy(name)
        if new.is_feature_dim() and not out.sparse:
            out = out.copy_with_feature_axis_at(pos)
        if key in ("t", "time", "spatial") and out.time_dim_axis is None and pos not in (
                out.batch_dim_axis, out.feature_dim_axis):
            out = out.copy(time_dim_axis=pos)
        self.output = out
        if new.is_dynamic():
            raise NetworkError("%s: 'dim' must be static" % self.desc)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = self.inputs(sources, ctx)
        tensor = tf.expand_dims(x.tensor, self.pos)
        if self.new.dimension != 1:
            reps = [1] * self.output.batch_ndim
            reps[self.pos] = self.new.dimension
            tensor = tf.tile(tensor, reps)
        return self.make_output(tensor, sources)


@register_layer
class SqueezeLayer(_ShapeLayer):
    """Removes the axes of ``axis`` (descriptions) that have static size 1; a single dynamic axis
    named alone is removed too and must have size 1 in every batch (checked when it runs). With
    ``enforce_batch_dim_axis`` (RETURNN's) the batch axis moves there first: integer axes count in
    that layout, and the output keeps it."""

    layer_class = "squeeze"
    keeps_source_data_name = True  # RETURNN's get_common_data of one source
    options = (
        Option("axis", None, "axis description(s) of size-1 axes to remove"),
        Option("allow_no_op", False, "no error when no axis matches"),
        Option("enforce_batch_dim_axis", None, "move the batch axis to this position first"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        data = self.input
        self.perm = batch_axis_perm(self, data, self.opt("enforce_batch_dim_axis"))
        if self.perm is not None:
            data = self.input = data.copy_transpose(self.perm)
        named = sorted(self.axes(data, self.opt("axis"), "axis"))
        axes = [a for a in named if data.dims[a].dimension == 1]
        # a dynamic axis named on its own (e.g. 'T' of per-sequence labels of one frame): size 1 at run time
        self.dynamic = [a for a in named if data.dims[a].is_dynamic() and a != data.batch_dim_axis] \
            if len(named) == 1 and not axes else []
        axes += self.dynamic
        if not axes and named and not self.opt("allow_no_op"):  # (an axis description naming no axis, e.g. 'F'
            # of sparse data: RETURNN squeezes nothing)
            raise NetworkError("%s: no axis of size 1 matches %r in %s" % (self.desc, self.opt("axis"),
                                                                         data.short_repr()))
        if data.batch_dim_axis in axes:
            raise NetworkError("%s: cannot squeeze the batch axis" % self.desc)
        self.squeeze_axes = axes
        out = data.copy(name)
        for a in reversed(axes):
            out = out.copy_template_excluding_axis(a)
        self.output = out

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = self.inputs(sources, ctx)
        if self.perm is not None:
            x = LayerOutput(tf.transpose(x.tensor, self.perm), self.input, x.sizes)
        checks = [tf.debugging.assert_equal(tf.shape(x.tensor)[a], 1, message="%s: axis %r must have size 1"
                                            % (self.desc, self.opt("axis"))) for a in self.dynamic]
        with tf.control_dependencies(checks):
            tensor = tf.squeeze(x.tensor, self.squeeze_axes) if self.squeeze_axes else x.tensor
        return self.make_output(tensor, sources)


@register_layer
class CastLayer(_ShapeLayer):
    """Casts to ``dtype``; casting to float makes sparse data dense values without feature axis
    (as in RETURNN)."""

    layer_class = "cast"
    options = (Option("dtype", None, "target dtype, e.g. 'float32', 'int32'"),)

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        dtype = self.opt("dtype")
        try:
            self.dtype = tf.as_dtype(dtype)
        except TypeError:
            raise NetworkError("%s: unknown dtype %r" % (self.desc, dtype)) from None
        sparse_dim = self.input.sparse_dim if self.dtype.is_integer else None
        self.output = self.input.copy(name, dtype=self.dtype.name, sparse_dim=sparse_dim)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = self.inputs(sources, ctx)
        return self.make_output(tf.cast(x.tensor, self.dtype), sources)


@register_layer
class SwapAxesLayer(_ShapeLayer):
    """Swaps ``axis1`` and ``axis2``; time and feature axes stay on their dims."""

    layer_class = "swap_axes"
    options = (
        Option("axis1", None, "axis description"),
        Option("axis2", None, "axis description"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        a, b = self.axis(self.input, self.opt("axis1"), "axis1"), self.axis(self.input, self.opt("axis2"), "axis2")
        if a == b:
            raise NetworkError("%s: axis1 %r and axis2 %r are the same axis (RETURNN refuses the no-op swap)"
                               % (self.desc, self.opt("axis1"), self.opt("axis2")))
        self.perm = list(range(self.input.batch_ndim))
        self.perm[a], self.perm[b] = b, a
        out = self.input.copy_transpose(self.perm)
        if self.input.feature_dim_axis_or_unspecified is NotSpecified:
            # RETURNN moves the time axis along but leaves an unspecified feature axis to the default rule on
            # the new layout (the last static axis but batch and time: e.g. (B, F, S, T) has S)
            out = out.copy(feature_dim_axis=NotSpecified, time_dim_axis=out.time_dim_axis)
        self.output = out.copy(name)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        return self.make_output(tf.transpose(self.inputs(sources, ctx).tensor, self.perm), sources)


def _set_sparse_dim(layer: Layer, data: Data, value: Any, increase: Any) -> Optional[Dim]:
    dim = data.sparse_dim
    if value is not None:
        dim = value if isinstance(value, Dim) else Dim(positive_int(layer.desc, "set_sparse_dim", value),
                                                       kind=DimTypes.Feature, description="%s:sparse" % layer.layer_name)
    if increase:
        if dim is None:
            raise NetworkError("%s: increase_sparse_dim needs sparse data" % layer.desc)
        dim = Dim(dim.dimension + int(increase), kind=DimTypes.Feature, description="%s:sparse" % layer.layer_name)
    return dim


@register_layer
class ReinterpretDataLayer(_ShapeLayer):
    """Same values, new description: ``set_axes`` ({"T"/"F": axis}), ``set_dim_tags`` ({axis:
    Dim}; a dynamic axis keeps its sizes), ``set_sparse``, ``set_sparse_dim``,
    ``increase_sparse_dim``, ``enforce_batch_major``/``enforce_time_major``, ``size_base`` (a layer
    whose time axis, with its sizes, replaces ours; the values are cut or zero-padded to its extent)."""

    layer_class = "reinterpret_data"
    ref_options = ("size_base",)
    options = (
        Option("set_axes", None, "dict 'T'/'F' -> axis description (or None)"),
        Option("set_dim_tags", None, "dict axis description -> Dim"),
        Option("set_sparse", None, "True: the values are class indices; False: dense"),
        Option("set_sparse_dim", None, "number of classes (int or Dim)"),
        Option("increase_sparse_dim", 0, "add this to the number of classes"),
        Option("enforce_batch_major", False, "transpose to batch-major"),
        Option("enforce_time_major", False, "transpose to time-major"),
        Option("size_base", None, "layer whose time axis (and sizes) replaces this one's"),
        Option("switch_axes", None, "not supported; use set_axes"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        self.has_base = isinstance(opts.get("size_base"), str)
        self.base = sources[-1] if self.has_base else None
        super().__init__(name, opts, sources[:-1] if self.has_base else sources, seed)
        if self.opt("switch_axes") is not None:
            raise NetworkError("%s: 'switch_axes' is not supported; use 'set_axes'" % self.desc)
        if self.opt("enforce_batch_major") and self.opt("enforce_time_major"):
            raise NetworkError("%s: 'enforce_batch_major' and 'enforce_time_major' exclude each other (RETURNN asserts "
                               "it)" % self.desc)
        data = self.input.copy(name)
        for key, axis, what in (("enforce_batch_major", data.batch_dim_axis, "batch"),
                                ("enforce_time_major", data.time_dim_axis, "time")):
            if self.opt(key) and axis is None:  # RETURNN's copy_as_batch_major / copy_as_time_major assert it
                raise NetworkError("%s: '%s' needs a %s axis, the input has none (%s)"
                                   % (self.desc, key, what, data.short_repr()))
        self.perm = list(range(data.batch_ndim))
        if self.opt("enforce_time_major") and data.time_dim_axis is not None:
            self.perm = [data.time_dim_axis] + [a for a in self.perm if a != data.time_dim_axis]
        if self.opt("enforce_batch_major") and data.batch_dim_axis is not None:
            self.perm = [data.batch_dim_axis] + [a for a in self.perm if a != data.batch_dim_axis]
        data = data.copy_transpose(self.perm)
        renamed: List[Tuple[Dim, Dim]] = []  # (new, old); a tuple: tf.Module wraps a dict attribute, and its
        for axis, dim in dict(self.opt("set_dim_tags") or {}).items():  # tracking sorts the keys (Dims do not sort)
            if not isinstance(dim, Dim):
                raise NetworkError("%s: set_dim_tags[%r] must be a Dim, got %r" % (self.desc, axis, dim))
            a = self.axis(data, axis, "set_dim_tags")
            renamed.append((dim, data.dims[a]))
            data = data.copy_template_replace_dim_tag(a, dim)
        if self.base is not None:
            if self.base.time_dim is None or data.time_dim_axis is None:
                raise NetworkError("%s: size_base and input both need a time axis" % self.desc)
            renamed.append((self.base.time_dim, data.time_dim))
            data = data.copy_template_replace_dim_tag(data.time_dim_axis, self.base.time_dim)
        special = {}
        for key, value in dict(self.opt("set_axes") or {}).items():
            attr = {"t": "time_dim_axis", "time": "time_dim_axis", "f": "feature_dim_axis",
                    "feature": "feature_dim_axis"}.get(str(key).lower())
            if attr is None:
                raise NetworkError("%s: set_axes keys must be 'T' or 'F', got %r" % (self.desc, key))
            special[attr] = None if value is None else self.axis(data, value, "set_axes")
        data = data.copy(**special)
        self.renamed = tuple(renamed)
        sparse = self.opt("set_sparse")
        sparse_dim = _set_sparse_dim(self, data, self.opt("set_sparse_dim"), self.opt("increase_sparse_dim"))
        if sparse is False:
            sparse_dim = None
        elif sparse and sparse_dim is None:
            if data.dim is None:
                raise NetworkError("%s: set_sparse needs set_sparse_dim" % self.desc)
            sparse_dim = Dim(data.dim, kind=DimTypes.Feature, description="%s:sparse" % name)
        if sparse_dim is not data.sparse_dim:
            data = data.copy(sparse_dim=sparse_dim, dtype=data.dtype if sparse_dim is None else "int32")
        self.output = data

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        own = sources[:-1] if self.has_base else sources
        x = self.inputs(own, ctx)
        tensor = tf.transpose(x.tensor, self.perm) if self.perm != sorted(self.perm) else x.tensor
        sizes = dict(x.sizes)
        for new, old in self.renamed:
            if old in x.sizes:
                sizes[new] = x.sizes[old]
                over = getattr(old, "sizes_over", None)  # sizes per position of other axes (slice_nd's per frame)
                if over is not None and getattr(new, "sizes_over", None) is None:
                    new.sizes_over = over
        if self.has_base:
            base = sources[-1]
            new_sizes = sizes[self.base.time_dim] = base.sizes[self.base.time_dim]
            # RETURNN takes the base's sizes and keeps the values as they are: frames past the base's longest
            # sequence stay (an upsampled axis a few frames longer), a layer reading them sees them; values shorter
            # than the sizes stay too (its masks cut at the values' extent; a framewise loss checks, Loss.compute)
        return self.make_output(tensor, own, sizes)

