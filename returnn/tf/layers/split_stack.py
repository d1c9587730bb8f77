"""Layers that split, stack and normalise over chosen axes (RETURNN semantics): split, stack,
norm, math_norm.

- ``split``: one static axis (default F) cut into parts (``num_splits`` equal ones, ``size_splits``
  or ``out_dims``); the layer's own output is its input, part ``i`` is ``"NAME/i"``.
- ``stack``: the sources (broadcast to their common dims by dim tags) stacked on a new static axis
  of size ``len(from)``, placed at ``axis`` (default: last, before the feature axis when there is one).
- ``norm``: ``(x - mean) / sqrt(var + epsilon)`` with mean and variance over ``axes`` (every
  position, padded frames included, as RETURNN: no masking), times ``scale`` and plus ``bias`` parameters shaped ``param_shape`` (default F).
- ``math_norm``: ``sum(|x| ** p) ** (1 / p)`` over ``axes`` (padded frames excluded), as ``reduce``.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim, DimTypes
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.common_layout import source_maps
from returnn.tf.layers.helpers import check_dense, check_sources
from returnn.tf.layers.options import Option, positive_int
from returnn.tf.layers.output import align_tensor
from returnn.tf.layers.reduce import ReduceLayer


@register_layer
class SplitLayer(Layer):
    """See the module docstring."""

    layer_class = "split"
    no_int_axes = ("axis",)  # RETURNN: allow_int=False
    options = (
        Option("axis", None, "static axis to split (default F)"),
        Option("num_splits", None, "number of equal parts"),
        Option("size_splits", None, "list of part sizes"),
        Option("out_dims", None, "list of Dims of the parts"),
    )

    @classmethod
    def has_sub_output(cls, opts: Dict[str, Any], sub: str) -> bool:
        return sub.isdigit()

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources, 1, 1)
        data = sources[0]
        self.ax = self.axis(data, self.opt("axis") if self.opt("axis") is not None else "F", "axis")
        total = data.dims[self.ax].dimension
        if total is None:
            raise NetworkError("%s: axis %r must be static" % (self.desc, self.opt("axis")))
        out_dims = self.opt("out_dims")
        if out_dims:
            if not all(isinstance(d, Dim) and d.dimension for d in out_dims):
                raise NetworkError("%s: 'out_dims' must be static Dims" % self.desc)
            sizes = [d.dimension for d in out_dims]
        elif self.opt("size_splits"):
            sizes = [positive_int(self.desc, "size_splits", s) for s in self.opt("size_splits")]
        elif self.opt("num_splits"):
            n = positive_int(self.desc, "num_splits", self.opt("num_splits"))
            if total % n:
                raise NetworkError("%s: axis of size %i does not split into %i parts" % (self.desc, total, n))
            sizes = [total // n] * n
        else:
            raise NetworkError("%s: give 'num_splits', 'size_splits' or 'out_dims'" % self.desc)
        if sum(sizes) != total:
            raise NetworkError("%s: parts %r do not add up to the axis size %i" % (self.desc, sizes, total))
        self.sizes = sizes
        old = data.dims[self.ax]
        dims = out_dims or [Dim(s, kind=old.kind, description="%s:split%i" % (name, i)) for i, s in enumerate(sizes)]
        self.parts = [data.copy_template_replace_dim_tag(self.ax, d).copy("%s/%i" % (name, i))
                      for i, d in enumerate(dims)]
        self.output = data.copy(name)

    def sub_template(self, sub: str) -> Data:
        if not sub.isdigit() or int(sub) >= len(self.parts):
            raise NetworkError("%s: no part %r (it has %i)" % (self.desc, sub, len(self.parts)))
        return self.parts[int(sub)]

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = sources[0]
        out = self.make_output(x.tensor, sources)
        pieces = tf.split(x.tensor, self.sizes, axis=self.ax)
        out.sub_outputs = {str(i): LayerOutput(p, self.parts[i], x.sizes) for i, p in enumerate(pieces)}
        return out


@register_layer
class StackLayer(Layer):
    """See the module docstring."""

    layer_class = "stack"
    options = (
        Option("axis", None, "position of the new axis in the output"),
        Option("out_spatial_dim", None, "Dim of the new axis"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources, 1)
        if len({s.dtype for s in sources}) > 1:
            raise NetworkError("%s: sources must have one dtype, got %s" % (self.desc, [s.dtype for s in sources]))
        common, self.maps = stack_layout(self, sources)
        new = self.opt("out_spatial_dim")
        if new is not None and (not isinstance(new, Dim) or new.dimension != len(sources)):
            raise NetworkError("%s: 'out_spatial_dim' must be a Dim of size %i" % (self.desc, len(sources)))
        self.new = new or Dim(len(sources), kind=DimTypes.Spatial, description="%s:stack" % name, auto_generated=True)
        n = common.batch_ndim
        axis = self.opt("axis")
        if axis is None:  # RETURNN: where a new spatial axis goes in the common template
            axis = common.get_default_new_axis_for_dim_tag(Dim(1, kind=DimTypes.Spatial, description="dummy"))
        elif isinstance(axis, bool) or not isinstance(axis, int) or not -n - 1 <= axis <= n:
            raise NetworkError("%s: 'axis' must be an int position, got %r" % (self.desc, axis))
        self.pos = axis % (n + 1)
        self.n_common = n
        self.output = common.copy_template(name).copy_add_dim_by_tag_returnn(self.new, unbroadcast=True, axis=self.pos)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        xs = [align_tensor(s.tensor, m, self.n_common) for s, m in zip(sources, self.maps)]
        shape = tf.shape(xs[0])
        for x in xs[1:]:
            shape = tf.broadcast_dynamic_shape(shape, tf.shape(x))
        y = tf.stack([tf.broadcast_to(x, shape) for x in xs], axis=self.pos)
        return self.make_output(y, sources)


def _moments(x: LayerOutput, axes: List[int]):
    """Mean and biased variance over ``axes`` (kept as size 1) of every position, padded ones
    included, as RETURNN's norm computes them (``reduce_mean``, no masking): over a time axis the
    statistics depend on the batch's padding, as in RETURNN."""
    mean = tf.reduce_mean(x.tensor, axis=axes, keepdims=True)
    return mean, tf.reduce_mean(tf.square(x.tensor - mean), axis=axes, keepdims=True)


@register_layer
class NormLayer(Layer):
    """See the module docstring."""

    layer_class = "norm"
    options = (
        Option("axes", None, "axes of the statistics, e.g. 'F', 'TF', 'except_batch'"),
        Option("axis", None, "same as 'axes'"),
        Option("param_shape", "F", "static axes of the scale and bias parameters"),
        Option("scale", True, "learn a scale (initialised to 1)"),
        Option("bias", True, "learn a bias (initialised to 0)"),
        Option("epsilon", 1e-6, "added to the variance"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_dense(self, sources)
        check_sources(self, sources, 1, 1)
        data = sources[0]
        if "axes" in opts and "axis" in opts:  # RETURNN's NormLayer asserts axes is not given with axis
            raise NetworkError("%s: give 'axes' or 'axis', not both (RETURNN asserts)" % self.desc)
        axes = opts.get("axes", opts.get("axis"))
        if axes is None:
            raise NetworkError("%s: needs 'axes'" % self.desc)
        self.norm_axes = sorted(self.axes(data, axes, "axes"))
        self.param_axes: List[int] = []
        self.scale: Optional[tf.Variable] = None
        self.bias: Optional[tf.Variable] = None
        if self.opt("scale") or self.opt("bias"):
            spec = self.opt("param_shape")
            specs = list(spec) if isinstance(spec, (list, tuple)) else [spec]
            self.param_axes = [self.axis(data, s, "param_shape") for s in specs]
            shape = [data.dims[a].dimension for a in self.param_axes]
            if any(n is None for n in shape) or len(set(self.param_axes)) != len(self.param_axes):
                raise NetworkError("%s: 'param_shape' must name distinct static axes, got %r" % (self.desc, spec))
            if self.opt("scale"):
                self.scale = self.weight("scale", shape, "ones")
            if self.opt("bias"):
                self.bias = self.weight("bias", shape, "zeros")
        self.output = data.copy(name)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = self.apply_dropout(sources[0], ctx)
        mean, var = _moments(x, self.norm_axes)
        y = (x.tensor - mean) * tf.math.rsqrt(var + float(self.opt("epsilon")))
        n = x.data.batch_ndim
        if self.scale is not None:
            y = y * align_tensor(self.scale, self.param_axes, n)
        if self.bias is not None:
            y = y + align_tensor(self.bias, self.param_axes, n)
        return self.make_output(y, sources)


@register_layer
class MathNormLayer(ReduceLayer):
    """See the module docstring (``reduce`` with mode sum over ``|x| ** p``, then ``** (1 / p)``)."""

    layer_class = "math_norm"
    options = (Option("p", None, "the norm's power, e.g. 2"),)

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        if opts.get("mode", "sum") != "sum":
            raise NetworkError("layer %r (math_norm): has no 'mode'" % name)
        if any(s.dtype.startswith("complex") for s in sources):  # RETURNN: its float |x| ** p set on a complex copy
            raise NetworkError("layer %r (math_norm): a complex input is refused, as RETURNN fails on it (its |x| ** p "
                               "is float, set on a copy of the complex input: 'dtype does not match'); take the "
                               "magnitude first (e.g. an eval with tf.abs)" % name)
        super().__init__(name, dict(opts, mode="sum"), sources, seed)
        p = self.opt("p")
        if not isinstance(p, (int, float)) or isinstance(p, bool) or p <= 0:
            raise NetworkError("%s: 'p' must be a positive number, got %r" % (self.desc, p))
        self.p = float(p)

    def _reduce(self, x: tf.Tensor, mask) -> tf.Tensor:
        return super()._reduce(tf.pow(tf.abs(x), self.p), mask) ** (1.0 / self.p)


def stack_layout(layer, sources: Sequence[Data]):
    """RETURNN's stack template: ``Data.get_common_data`` of the sources (all needing broadcasting refused from
    behavior_version 4, as RETURNN), each source's axes where its ``copy_compatible_to`` puts them; refused in
    one line where RETURNN fails: a source it cannot map, or an axis of one size mapped onto one of another
    (a size-1 axis is not repeated: RETURNN's tf.stack fails on the shapes)."""
    try:
        common = Data.get_common_data(list(sources), name=layer.layer_name)
    except ValueError as exc:
        raise NetworkError("%s: %s" % (layer.desc, exc)) from None
    maps = source_maps(layer, sources, common)
    for i, (source, m) in enumerate(zip(sources, maps)):
        for a, t in enumerate(m):
            mine, theirs = source.dims[a].dimension, common.dims[t].dimension
            if mine != theirs and (mine is not None and theirs is not None) and not common.dims[t].is_batch_dim():
                raise NetworkError("%s: source %i's axis %r (size %s) is the common axis %r (size %s) to RETURNN, "
                                   "whose tf.stack then fails on the shapes" % (
                                       layer.desc, i, source.dims[a].description, mine, common.dims[t].description,
                                       theirs))
    return common, maps

