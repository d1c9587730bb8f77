"""Indexing layers and parameters as layer outputs.

- ``gather``: ``from`` indexed on ``axis`` by ``position`` (an int, or a layer of integer indices);
  with a batch axis on both, each sequence uses its own indices. The indexed axis is replaced by
  the position's axes (without its batch axis). Padded index positions gather too (as RETURNN);
  an index outside the axis gives zeros (RETURNN on GPU; on CPU TensorFlow fails there).
- ``gather_nd`` (RETURNN's old layer): ``position`` (B, ...) indexes the time axis of ``from``
  (B, T, ...) per sequence; the same as ``gather`` on ``"T"``.
- ``variable``: a trainable parameter of ``shape`` (``init``, ``dtype``); ``add_batch_axis``
  repeats it per sequence (first axis), ``add_time_axis`` adds a time axis of size 1 after it.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Sequence

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim, DimTypes
from returnn.tensor.dim import batch_dim
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.helpers import check_sources
from returnn.tf.layers.options import Option
from returnn.tf.layers.params import Param


def _batch_first(data: Data) -> List[int]:
    """The permutation moving the batch axis of ``data`` first."""
    return [data.batch_dim_axis] + [i for i in range(data.batch_ndim) if i != data.batch_dim_axis]


@register_layer
class GatherLayer(Layer):
    """See the module docstring."""

    layer_class = "gather"
    ref_options = ("position",)
    options = (
        Option("position", None, "index: an int, or a layer of integer indices"),
        Option("axis", None, "axis of 'from' to index (RETURNN axis description)"),
    )
    default_axis = None

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        self.pos_layer = isinstance(opts.get("position"), str)
        own = list(sources[:-1] if self.pos_layer else sources)
        super().__init__(name, opts, own, seed)
        check_sources(self, own, 1, 1)
        data = own[0]
        self.data_perm = self.pos_perm = None
        if self.pos_layer and data.batch_dim_axis not in (None, 0) and sources[-1].batch_dim_axis is not None:
            self.data_perm = _batch_first(data)  # RETURNN takes both batch-major
            data = data.copy_transpose(self.data_perm)
        axis_opt = self.opt("axis") if self.opt("axis") is not None else self.default_axis
        if axis_opt is None:
            raise NetworkError("%s: needs 'axis'" % self.desc)
        self.ax = self.axis(data, axis_opt, "axis")
        if data.dims[self.ax].is_batch_dim():
            raise NetworkError("%s: cannot gather on the batch axis" % self.desc)
        dims = list(data.dims)
        self.batched = False
        if not self.pos_layer:
            if isinstance(self.opt("position"), bool) or not isinstance(self.opt("position"), int):
                raise NetworkError("%s: 'position' must be an int or a layer name, got %r"
                                   % (self.desc, self.opt("position")))
            size = data.dims[self.ax].dimension
            if self.opt("position") < 0 or (size is not None and self.opt("position") >= size):
                # RETURNN's tf.gather: an index error on CPU (zeros on GPU), no counting from the end
                raise NetworkError("%s: position %i is outside the axis %r (0 .. %s)" % (
                    self.desc, self.opt("position"), data.dims[self.ax].description,
                    "its length - 1" if size is None else size - 1))
            del dims[self.ax]
        else:
            pos = sources[-1]
            if not (pos.sparse or pos.dtype.startswith("int")):
                raise NetworkError("%s: position %r must hold integer indices, got %s"
                                   % (self.desc, pos.name, pos.short_repr()))
            self.batched = pos.batch_dim_axis is not None and data.batch_dim_axis is not None
            if self.batched and pos.batch_dim_axis != 0:
                self.pos_perm = _batch_first(pos)
                pos = pos.copy_transpose(self.pos_perm)
            pos_dims = [d for d in pos.dims if not (self.batched and d.is_batch_dim())]
            dims = dims[:self.ax] + pos_dims + dims[self.ax + 1:]
        feat = data.feature_dim_axis
        kwargs = {}
        if feat is not None and feat != self.ax:  # the feature axis stays the feature axis
            kwargs["feature_dim_axis"] = [i for i, d in enumerate(dims) if d is data.dims[feat]][-1]
        self.output = Data(name, dims=dims, dtype=data.dtype, sparse_dim=data.sparse_dim, **kwargs)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = sources[0]
        tensor = x.tensor if self.data_perm is None else tf.transpose(x.tensor, self.data_perm)
        n = tf.shape(tensor)[self.ax]
        if not self.pos_layer:
            index = tf.minimum(tf.constant(int(self.opt("position"))), n - 1)
            return self.make_output(tf.gather(tensor, index, axis=self.ax), [x])
        pos = sources[-1]
        # RETURNN gathers at every entry of position, its padded ones too (their frames are read later, e.g. by a
        # reverse cumsum); an index outside the axis gives zeros (TensorFlow's gather on GPU; an error on CPU)
        index = tf.cast(pos.tensor, tf.int32)
        if self.pos_perm is not None:
            index = tf.transpose(index, self.pos_perm)
        index = tf.where((index >= 0) & (index < n), index, n)  # n: the zero frame appended below
        pads = [[0, 0]] * len(tensor.shape)
        pads[self.ax] = [0, 1]
        out = tf.gather(tf.pad(tensor, pads), index, axis=self.ax, batch_dims=1 if self.batched else 0)
        return self.make_output(out, sources)


@register_layer
class GatherNdLayer(GatherLayer):
    """See the module docstring."""

    layer_class = "gather_nd"
    default_axis = "T"


@register_layer
class VariableLayer(Layer):
    """See the module docstring."""

    layer_class = "variable"
    default_from = ()
    options = (
        Option("shape", None, "shape of the parameter (list of ints)"),
        Option("dtype", "float32", "its dtype"),
        Option("init", 0.0, "initial value (RETURNN init spec)"),
        Option("add_batch_axis", False, "repeat the parameter over the batch (first axis)"),
        Option("add_time_axis", False, "add a time axis of size 1 after the batch axis"),
        Option("init_by_layer", None, "not supported"),
        Option("param_name", None, "RETURNN's name of the parameter in the layer's scope (default: the layer's name)"),
        Option("saveable", True, "False: the parameter is not stored in checkpoints (starts from init when loaded)"),
        Option("non_critical_for_restore", False, "True: a checkpoint without the parameter is no error"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources, 0, 0)
        shape = self.opt("shape")
        if not isinstance(shape, (list, tuple)) or not all(isinstance(n, int) and n > 0 for n in shape):
            raise NetworkError("%s: 'shape' must be a list of positive ints, got %r" % (self.desc, shape))
        if self.opt("init_by_layer") is not None:
            raise NetworkError("%s: option 'init_by_layer' is not supported" % self.desc)
        param_name = self.opt("param_name") or name.rsplit("/", 1)[-1]
        if not isinstance(param_name, str):
            raise NetworkError("%s: 'param_name' must be a str, got %r" % (self.desc, param_name))
        self.var = self.weight(param_name, list(shape), self.opt("init"))
        if self.opt("dtype") != "float32":
            raise NetworkError("%s: only float32 variables are supported, got %r" % (self.desc, self.opt("dtype")))
        dims = [Dim(n, kind=DimTypes.Feature if i == len(shape) - 1 else DimTypes.Spatial,
                    description="%s:var%i" % (name, i), auto_generated=True) for i, n in enumerate(shape)]
        self.with_batch = bool(self.opt("add_batch_axis"))
        self.with_time = bool(self.opt("add_time_axis"))
        if self.with_time:
            dims = [Dim(1, kind=DimTypes.Spatial, description="%s:time" % name)] + dims
        if self.with_batch:
            dims = [batch_dim] + dims
        self.output = Data(name, dims=dims, time_dim_axis=(1 if self.with_batch else 0) if self.with_time else None)

    def returnn_params(self) -> List[Param]:
        return [dataclasses.replace(p, saveable=bool(self.opt("saveable")), critical=not self.opt("non_critical_for_restore"))
                for p in super().returnn_params()]

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        value = tf.convert_to_tensor(self.var)
        if self.with_time:
            value = value[None]
        if self.with_batch:
            if ctx.batch_size is None:
                raise NetworkError("%s: add_batch_axis needs the batch size (run it inside a network)" % self.desc)
            value = tf.broadcast_to(value[None], tf.concat([[ctx.batch_size], tf.shape(value)], 0))
        return self.make_output(value)
