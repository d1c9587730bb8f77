"""Layers whose values come from options or shapes, not from input values: constant, range,
length, positional_encoding (RETURNN semantics)."""
from __future__ import annotations

import math
from typing import Any, Dict, List, Sequence

import numpy as np
import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim, DimTypes
from returnn.tensor.dim import batch_dim
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.helpers import check_sources
from returnn.tf.layers.output import align_tensor
from returnn.tf.layers.options import Option
from returnn.tf.layers.random_layers import RefsLayer, _check_dynamic, _shape_dims, _shape_value


def _dtype(layer: Layer, value: Any, default: str) -> tf.DType:
    try:
        return tf.as_dtype(value or default)
    except TypeError:
        raise NetworkError("%s: unknown dtype %r" % (layer.desc, value)) from None


@register_layer
class ConstantLayer(RefsLayer):
    """A constant ``value`` (a number or a numpy array), without batch axis (it broadcasts in combine),
    or with ``with_batch_dim`` repeated over the batch. ``shape`` (RETURNN's: ints or Dims) checks a list
    value's shape, fills it with a scalar value, and gives the axes those Dims; a scalar value also fills
    the batch and dynamic Dims, their sizes from the layers of ``shape_deps`` (RETURNN's, as returnn_common's
    ``zeros``/``ones_like`` write it). ``sparse_dim``: the value holds class indices of that Dim."""

    layer_class = "constant"
    default_from = ()
    ref_options = ("shape_deps",)
    options = (
        Option("value", 0.0, "the value: a number or a numpy array (a list is refused, as RETURNN)"),
        Option("dtype", None, "dtype (default: from the value)"),
        Option("with_batch_dim", False, "add a batch axis (first): the value repeated per sequence"),
        Option("shape", None, "ints or Dims: the value's shape (a scalar is filled to it), the Dims its axes"),
        Option("shape_deps", (), "layers that have the batch and dynamic axes of 'shape'"),
        Option("sparse_dim", None, "Dim: the values are class indices of it"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42, **_outer: Any):
        super().__init__(name, opts, sources, seed)
        if isinstance(self.opt("value"), (list, tuple)):  # RETURNN's template_from_constant: a TypeError
            raise NetworkError("%s: 'value' as a list is refused, as RETURNN does: give a number or a numpy array "
                               "(numpy.array(...))" % self.desc)
        value = np.asarray(self.opt("value"))
        if value.dtype == object or value.dtype.kind not in "biuf":
            raise NetworkError("%s: 'value' must be a number or a nested list of numbers" % self.desc)
        default = "int32" if value.dtype.kind in "biu" else "float32"
        self.dtype = _dtype(self, self.opt("dtype"), default)
        if type(self.opt("value")) is float and (self.dtype.is_integer or self.dtype.is_bool):
            raise NetworkError("%s: a float value %r with dtype %r is refused, as RETURNN's tf.constant does (give an "
                               "int value, or a numpy array, which is cast)" % (self.desc, self.opt("value"),
                                                                              self.dtype.name))
        shape = self.opt("shape")
        given: List[Any] = [None] * value.ndim
        self.fill = None
        if isinstance(shape, (list, tuple)) and any(isinstance(d, Dim) and d.dimension is None for d in shape):
            if value.ndim != 0:  # RETURNN: a value of another shape fails in tf.fill / broadcasting
                raise NetworkError("%s: a 'shape' with batch or dynamic Dims needs a scalar value" % self.desc)
            self.fill = _shape_dims(self, shape, False)
            _check_dynamic(self, self.fill, sources, "'shape_deps'")
            self.value = value.astype(self.dtype.as_numpy_dtype)
            self.with_batch = False
            self.output = Data(name, dims=self.fill, dtype=self.dtype.name, sparse_dim=self._sparse_dim())
            return
        if shape is not None:
            given = list(shape) if isinstance(shape, (list, tuple)) else [shape]
            sizes = [d.dimension if isinstance(d, Dim) else d for d in given]
            if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in sizes):
                raise NetworkError("%s: 'shape' must be ints >= 0 or Dims, got %r" % (self.desc, shape))
            if value.ndim == 0:
                value = np.full(sizes, value)
            elif tuple(sizes) != value.shape:
                raise NetworkError("%s: shape %r does not match the value's shape %r" % (self.desc, shape, value.shape))
        self.value = value.astype(self.dtype.as_numpy_dtype)
        # RETURNN's Data.template_from_constant: engine-made static dims (auto_generated: they match other
        # engine-made dims of their size), spatial but the last, a feature dim
        dims = [g if isinstance(g, Dim) else Dim(
            n, kind=DimTypes.Spatial if i < value.ndim - 1 else DimTypes.Feature,
            description="%s_const:static:%i" % (name, i), auto_generated=True)
            for i, (n, g) in enumerate(zip(value.shape, given))]
        self.with_batch = bool(self.opt("with_batch_dim"))
        if self.with_batch:
            dims = [batch_dim] + dims
        self.output = Data(name, dims=dims, dtype=self.dtype.name, sparse_dim=self._sparse_dim())

    def _sparse_dim(self) -> Any:
        sparse_dim = self.opt("sparse_dim")
        if sparse_dim is not None and (not isinstance(sparse_dim, Dim) or not self.dtype.is_integer):
            raise NetworkError("%s: 'sparse_dim' must be a Dim, with an int value, got %r" % (self.desc, sparse_dim))
        return sparse_dim

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        if self.fill is not None:
            shape = _shape_value(self, self.fill, sources, ctx)
            shape_t = tf.stack([tf.cast(n, tf.int32) for n in shape])
            return self.make_output(tf.fill(shape_t, tf.constant(self.value)), sources)
        value = tf.constant(self.value)
        if self.with_batch:
            if ctx.batch_size is None:
                raise NetworkError("%s: with_batch_dim needs the batch size (run it inside a network)" % self.desc)
            value = tf.broadcast_to(value[None], tf.concat([[ctx.batch_size], tf.shape(value)], 0))
        return self.make_output(value, sources)


@register_layer
class RangeLayer(Layer):
    """``range(start, limit, delta)`` as a new static axis (no batch axis)."""

    layer_class = "range"
    default_from = ()
    options = (
        Option("limit", None, "end (exclusive)"),
        Option("start", 0, "first value"),
        Option("delta", 1, "step"),
        Option("dtype", None, "dtype (default int32 for int arguments, else float32)"),
        Option("sparse", False, "values are class indices with limit classes"),
        Option("out_spatial_dim", None, "Dim of the new axis"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources, 0, 0)
        start, limit, delta = self.opt("start"), self.opt("limit"), self.opt("delta")
        if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in (start, limit, delta)) or delta == 0:
            raise NetworkError("%s: start, limit, delta must be numbers (delta != 0), got %r"
                               % (self.desc, (start, limit, delta)))
        if (delta > 0 and start > limit) or (delta < 0 and start < limit):  # TensorFlow's range (in RETURNN) fails
            raise NetworkError("%s: start %r never reaches limit %r by delta %r (RETURNN: TensorFlow's range fails)"
                               % (self.desc, start, limit, delta))
        all_int = all(isinstance(v, int) for v in (start, limit, delta))
        self.dtype = _dtype(self, self.opt("dtype"), "int32" if all_int else "float32")
        self.values = np.arange(start, limit, delta).astype(self.dtype.as_numpy_dtype)
        dim = self.opt("out_spatial_dim")
        if not isinstance(dim, Dim):
            dim = Dim(len(self.values), kind=DimTypes.Spatial, description="%s:range" % name)
        elif dim.dimension != len(self.values):
            raise NetworkError("%s: out_spatial_dim has size %r, the range %i" % (self.desc, dim.dimension,
                                                                                  len(self.values)))
        sparse_dim = Dim(int(limit), kind=DimTypes.Feature, description="%s:classes" % name) \
            if self.opt("sparse") else None
        self.output = Data(name, dims=[dim], dtype=self.dtype.name, sparse_dim=sparse_dim)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        return self.make_output(tf.constant(self.values), sources)


@register_layer
class LengthLayer(Layer):
    """The size of ``axis`` (default T; a description, a Dim of a source, or ``"sparse_dim"``), as
    RETURNN: a dynamic axis gives its sizes (``(B,)``, or a scalar for an axis whose size does not
    vary per sequence, e.g. ``boolean_mask``'s; with a behavior_version as today's RETURNN: int32 and
    dense whatever ``dtype`` and ``sparse`` say), the batch axis and a static axis a scalar.
    ``add_time_axis`` (RETURNN: "should not be used") gives ``(B, 1)`` with the sizes on a time axis
    of size 1."""

    layer_class = "length"
    no_int_axes = ("axis",)  # RETURNN: allow_int=False
    options = (
        Option("axis", "T", "axis description, Dim, or 'sparse_dim'"),
        Option("dtype", "int32", "dtype of the lengths (with a behavior_version, a dynamic axis' sizes stay int32, "
                                  "as today's RETURNN's)"),
        Option("sparse", False, "the lengths are class indices over the measured axis (RETURNN: its dim tag; with a "
                                  "behavior_version, a dynamic axis' sizes stay dense, as today's RETURNN's)"),
        Option("add_time_axis", False, "the sizes (B,) as (B, 1) with a time axis of size 1"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        axis = self.opt("axis")
        check_sources(self, sources, 1, None if isinstance(axis, Dim) else 1)
        self.src = 0
        self.math = False  # the sizes computed from the source's by the axis' dim math
        if isinstance(axis, Dim):
            found = [i for i, s in enumerate(sources) if any(d == axis for d in s.dims) or s.sparse_dim == axis]
            # RETURNN reads any dim's sizes: a dim-math dim (``time.ceildiv_right(4)``) of a source's axes too
            from returnn.tensor.dim_math import dynamic_leaves
            leaves = dynamic_leaves(axis) if axis.derived_from_op is not None else []
            self.math = not found and bool(leaves)
            found = found or [i for i, s in enumerate(sources) if leaves and all(any(d == x for x in s.dims)
                                                                                 for d in leaves)]
            if not found:
                raise NetworkError("%s: no source has the axis %r" % (self.desc, axis))
            self.src = found[0]
            data = sources[self.src]
            self.dim = next((d for d in data.dims if d == axis), axis)
        elif axis == "sparse_dim":
            data = sources[0]
            if data.sparse_dim is None:
                raise NetworkError("%s: axis 'sparse_dim' needs sparse input, got %s" % (self.desc, data.short_repr()))
            self.dim = data.sparse_dim
        else:
            data = sources[0]
            self.dim = data.dims[self.axis(data, axis, "axis")]
        self.dtype = _dtype(self, self.opt("dtype"), "int32")
        if self.dim.is_batch_dim() and self.dtype.name != "int32":  # RETURNN: the batch size tensor, int32 as it is
            raise NetworkError("%s: dtype %r of the batch axis' length is refused (RETURNN's value is the int32 batch "
                               "size, which its %s template check refuses); cast it" % (self.desc, self.dtype.name,
                                                                                         self.dtype.name))
        sparse_dim = self.dim if self.opt("sparse") else None
        self.per_seq = self.dim.is_dynamic() and not getattr(self.dim, "scalar_sizes", False)
        self.add_time = bool(self.opt("add_time_axis"))
        from returnn.tf.layers.norm import behavior_version
        if self.dim.is_dynamic() and not self.add_time and behavior_version() >= 1:
            # today's RETURNN: the output is the dim's size data itself, int32 and dense whatever dtype and sparse
            # say; without a behavior_version both are taken, as the RETURNN of the 2019 configs that use them
            self.dtype, sparse_dim = tf.int32, None
        if self.add_time and not self.per_seq:
            raise NetworkError("%s: add_time_axis needs an axis with sizes per sequence, got %r" % (self.desc, self.dim))
        if self.add_time:
            # (RETURNN: Data(shape=[1]) makes it an engine-made dim, which broadcasts against another axis)
            one = Dim(1, kind=DimTypes.Spatial, description="%s:time" % name, auto_generated=True)
            self.output = Data(name, dims=[batch_dim, one], dtype=self.dtype.name, time_dim_axis=1,
                               feature_dim_axis=None, sparse_dim=sparse_dim)
        else:
            dims = [batch_dim] if self.per_seq else []
            self.output = Data(name, dims=dims, dtype=self.dtype.name, feature_dim_axis=None, sparse_dim=sparse_dim)
            if self.per_seq:  # RETURNN's output is the dim's own size tensor: range_from_length finds the dim
                self.output.length_of_dim = self.dim

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = sources[self.src]
        if self.math:
            from returnn.tensor.dim_math import dyn_size_of
            sizes = dyn_size_of(self.dim, lambda d: x.sizes[d])
        elif self.dim.is_dynamic():
            if self.dim not in x.sizes:
                raise NetworkError("%s: the sizes of %r did not reach this layer" % (self.desc, self.dim))
            sizes = x.sizes[self.dim]
        elif self.dim.is_batch_dim():
            sizes = tf.shape(x.tensor)[x.data.batch_dim_axis]
        else:
            sizes = tf.constant(self.dim.dimension)
        sizes = tf.cast(sizes, self.dtype)
        if self.add_time:
            sizes = sizes[:, None]
        return self.make_output(sizes, sources)


def check_encoding_channels(where: str, channels: int) -> None:
    """RETURNN's get_positional_encoding divides by (channels // 2 - 1): 2 or 3 channels fail there."""
    if channels // 2 == 1:
        raise NetworkError("%s: a sinusoidal positional encoding of %i channels (RETURNN divides by channels // 2 - 1 "
                           "= 0: ZeroDivisionError)" % (where, channels))


def positional_encoding(positions: tf.Tensor, channels: int, min_timescale: float = 1.0,
                        max_timescale: float = 1.0e4) -> tf.Tensor:
    """Tensor2Tensor's sinusoids: ``positions.shape + [channels]``; the first half sin, the second
    cos, over timescales from min to max in geometric steps (a zero channel pads an odd count)."""
    num = channels // 2
    increment = math.log(max_timescale / min_timescale) / max(num - 1, 1)
    inv = min_timescale * tf.exp(tf.range(num, dtype=tf.float32) * -increment)
    scaled = tf.cast(positions, tf.float32)[..., None] * inv
    signal = tf.concat([tf.sin(scaled), tf.cos(scaled)], axis=-1)
    if channels % 2:
        signal = tf.pad(signal, [[0, 0]] * (len(signal.shape) - 1) + [[0, 1]])
    return signal


@register_layer
class PositionalEncodingLayer(Layer):
    """Sinusoidal encoding of the positions on the time axis (or ``axis``): ``(B, T, n_out)``, or
    added to the input with ``add_to_input``; other axes of the input (e.g. ``(B, T, S, F)``) get
    the same encoding (RETURNN's broadcast/tile); ``constant`` >= 0 uses that position everywhere; ``offset`` (a
    layer of ints over some of the output's axes but the feature axis, e.g. (B,), (B, T) or a scalar) is added to
    the positions."""

    layer_class = "positional_encoding"
    no_int_axes = ("axis",)  # RETURNN: allow_int=False
    ref_options = ("offset",)
    options = (
        Option("add_to_input", False, "output input + encoding"),
        Option("constant", -1, "if >= 0: this position for all frames"),
        Option("offset", None, "layer with position offsets over some of the axes but the feature axis, e.g. (B,) or (B, T)"),
        Option("axis", "T", "the axis of the positions"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        self.has_offset = isinstance(opts.get("offset"), str)
        own = list(sources[:-1] if self.has_offset else sources)
        super().__init__(name, opts, own, seed)
        check_sources(self, own, 1, 1)
        data = own[0]
        # one step inside a rec loop: (batch, feature), the position is the step index
        self.step_mode = data.batch_dim_axis == 0 and data.batch_ndim == 2 and data.feature_dim_axis == 1
        if self.step_mode and opts.get("axis") in ("b", "B", "batch"):  # RETURNN: positions along the batch axis
            self.step_mode = False
        if not self.step_mode:  # RETURNN: any axes, the feature axis last; positions along 'axis' (the batch axis
            self.ax = self.axis(data, self.opt("axis"), "axis")  # too), the others broadcast (e.g. (B, T, S, F))
            if data.batch_dim_axis is None or data.feature_dim_axis != data.batch_ndim - 1 or \
                    self.ax == data.feature_dim_axis:
                raise NetworkError("%s: input must have a batch axis and the feature axis last, the positions on "
                                   "another axis (or one step (batch, feature) in a rec loop), got %s"
                                   % (self.desc, data.short_repr()))
        if self.opt("add_to_input"):
            self.check_n_out(data.dim)
            self.channels = data.dim
            self.output = data.copy(name)
        else:
            self.channels = self.require_n_out()
            self.output = Data(name, dims=list(data.dims[:-1]) + [self.out_feature_dim()])
        if self.has_offset:
            self.offset_map = self._offset_axes(sources[-1], data)
        self.constant = int(self.opt("constant"))
        check_encoding_channels(self.desc, self.channels)

    def _offset_axes(self, offset: Data, data: Data) -> List[int]:
        """Per axis of ``offset`` its position among the output's axes without the feature axis (-1: a static
        size-1 axis that is squeezed, see align_tensor), as RETURNN's copy_compatible_to onto them: any subset of those axes, a
        scalar too (e.g. the length of a static axis)."""
        targets = list(data.dims[:1] if self.step_mode else data.dims[:-1])
        where: List[int] = []
        for d in offset.dims:
            match = [j for j, t in enumerate(targets) if t == d and j not in where]
            if match:
                where.append(match[0])
            elif d.dimension == 1:  # RETURNN broadcasts it (length's add_time_axis: (B, 1))
                where.append(-1)
            else:
                where = []
                break
        if offset.dtype[:3] not in ("int", "uin") or len(where) != offset.batch_ndim:
            raise NetworkError("%s: offset must be integers over axes of the input other than its feature axis, "
                               "got %s" % (self.desc, offset.short_repr()))
        if offset.sparse:  # RETURNN's copy_compatible_to checks sparse against the dense output (asserts)
            raise NetworkError("%s: offset must be dense, got the sparse %s" % (self.desc, offset.short_repr()))
        return where

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = sources[0]
        shape = tf.shape(x.tensor)
        if self.step_mode:
            if ctx.step is None and self.constant < 0:
                raise NetworkError("%s: a one-step input needs a rec loop (the step index is the position)" % self.desc)
            position = self.constant if self.constant >= 0 else tf.cast(ctx.step, tf.int32)
            positions = tf.fill(shape[:1], position)
            if self.has_offset:
                positions += align_tensor(tf.cast(sources[-1].tensor, tf.int32), self.offset_map, 1)
        else:  # all axes but the feature axis (last)
            n = len(x.data.dims) - 1
            if self.constant >= 0:
                positions = tf.fill(shape[:-1], self.constant)
            else:
                positions = tf.broadcast_to(tf.reshape(tf.range(shape[self.ax]), [-1 if i == self.ax else 1
                                                                                   for i in range(n)]), shape[:-1])
            if self.has_offset:
                positions += align_tensor(tf.cast(sources[-1].tensor, tf.int32), self.offset_map, n)
        signal = positional_encoding(positions, self.channels)
        if self.opt("add_to_input"):
            signal = signal + x.tensor
        return self.make_output(signal, sources[:1])
