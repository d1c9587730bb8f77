"""Layers with a trainable weight per position of some axes (RETURNN semantics):

- ``weighted_sum``: a weighted sum over ``axes`` (1 to 3) with a trainable kernel ``W`` of
  ``size`` (default: the axes' static sizes, initialised to ``1 / prod(size)``): a convolution with
  one input and one output channel. Without ``size`` the axes are summed away (``keep_dims``
  False, ``padding`` "valid"); with ``size`` the axes stay (``keep_dims`` True by default) with
  ``padding`` "same" (sizes kept) or "valid" (static axes only: each shrinks by ``size - 1``).
  Padded positions are summed as they are where a layer before computed them (``computed_padding``, as
  RETURNN), else as zeros (RETURNN's datasets feed zeros there).
- ``elemwise_prod``: the input times a trainable ``W`` over ``axes`` (static, initialised to 1;
  ``size`` only double-checks their sizes), broadcast along the other axes.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence

import numpy as np
import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.helpers import check_sources, concat_inputs, concat_output
from returnn.tf.layers.options import Option, one_of


class _WeightedBase(Layer):
    """One (feature-concatenated) dense input."""

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources)
        self.input, self.plan = concat_output(self, sources)
        if self.input.sparse:
            raise NetworkError("%s: sparse input is not supported" % self.desc)

    def inputs(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        return concat_inputs(self, self.input, self.plan, sources, ctx)


@register_layer
class WeightedSumLayer(_WeightedBase):
    """See the module docstring."""

    layer_class = "weighted_sum"
    options = (
        Option("axes", None, "the axes to sum over (1 to 3)"),
        Option("padding", None, "'valid' or 'same' (needed with 'size')"),
        Option("size", None, "kernel size per axis (default: the axes' static sizes, summed away)"),
        Option("keep_dims", None, "keep the axes (default: True with 'size', else False)"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        data = self.input
        axes = sorted(self.axes(data, self.opt("axes"), "axes"))
        if not 1 <= len(axes) <= 3 or any(data.dims[a].is_batch_dim() for a in axes):
            raise NetworkError("%s: 'axes' must be 1 to 3 non-batch axes, got %r" % (self.desc, self.opt("axes")))
        size, keep, padding = self.opt("size"), self.opt("keep_dims"), self.opt("padding")
        if size is None:
            if any(data.dims[a].dimension is None for a in axes):
                raise NetworkError("%s: without 'size' the axes must be static, got %s"
                                   % (self.desc, [data.dims[a] for a in axes]))
            size = [data.dims[a].dimension for a in axes]
            keep = False if keep is None else bool(keep)
            padding = "valid" if padding is None else padding
        else:
            if not isinstance(size, (list, tuple)) or len(size) != len(axes) or \
                    not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in size):
                raise NetworkError("%s: 'size' must be one int >= 1 per axis, got %r" % (self.desc, size))
            keep = True if keep is None else bool(keep)
            if padding is None:
                raise NetworkError("%s: with 'size' give 'padding' ('valid' or 'same')" % self.desc)
        self.padding = one_of(self.desc, "padding", str(padding).lower(), ("valid", "same"))
        self.size, self.keep, self.sum_axes = list(size), keep, axes
        res = []
        for a, n in zip(axes, size):
            d = data.dims[a]
            if d.dimension is None:  # RETURNN gives it a new dim without sizes ('dynamic dim ... undefined')
                raise NetworkError("%s: the dynamic axis %r is refused (RETURNN's weighted_sum makes it a new dim "
                                   "without sizes and fails to build); sum over static axes, or use conv" % (self.desc, d))
            else:
                res.append(d.dimension - (n - 1 if self.padding == "valid" else 0))
                if res[-1] < 1:
                    raise NetworkError("%s: axis %r of size %i is smaller than the kernel %i" % (self.desc, d, d.dimension, n))
        self.w = self.weight("W", self.size, 1.0 / float(np.prod(self.size)))
        self.other = [a for a in range(data.batch_ndim) if a not in axes]
        if keep:
            dims = list(data.dims)
            self.new = {}
            for i, a in enumerate(axes):
                dims[a] = Dim(res[i], kind=data.dims[a].kind, description="%s:weighted-sum:%i" % (name, i))
                self.new[dims[a]] = data.dims[a]
            self.output = data.copy(name, dims=dims, time_dim_axis=data.time_dim_axis,
                                    feature_dim_axis=data.feature_dim_axis)
        else:
            if any(r != 1 for r in res):
                raise NetworkError("%s: keep_dims False needs the kernel to cover the axes (result sizes %s)"
                                   % (self.desc, res))
            self.new = {}
            out = data.copy(name)
            for a in reversed(axes):
                out = out.copy_template_excluding_axis(a)
            self.output = out

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = self.inputs(sources, ctx)
        value = x.as_read()  # RETURNN sums the padded tensor as it is
        n_other, n_ax = len(self.other), len(self.sum_axes)
        value = tf.transpose(value, self.other + self.sum_axes)
        shape = tf.shape(value)
        flat = tf.reshape(value, tf.concat([[-1], shape[n_other:], [1]], 0))  # (N, axes..., 1)
        kernel = tf.reshape(self.w, self.size + [1, 1])
        y = tf.nn.convolution(flat, kernel, padding=self.padding.upper())  # (N, axes'..., 1)
        if self.keep:
            y = tf.reshape(y, tf.concat([shape[:n_other], tf.shape(y)[1:1 + n_ax]], 0))
            y = tf.transpose(y, list(np.argsort(self.other + self.sum_axes)))
        else:
            y = tf.reshape(y, shape[:n_other])
        sizes = {new: x.sizes[old] for new, old in self.new.items() if new.is_dynamic()}
        return self.make_output(y, sources, sizes)


@register_layer
class ElemwiseProdLayer(_WeightedBase):
    """See the module docstring."""

    layer_class = "elemwise_prod"
    options = (
        Option("axes", None, "the (static) axes the weight spans, e.g. 'spatial' or 'F'"),
        Option("size", None, "their sizes, only checked"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        data = self.input
        axes = sorted(self.axes(data, self.opt("axes"), "axes"))
        if any(data.dims[a].dimension is None or data.dims[a].is_batch_dim() for a in axes):  # none: a scalar W
            raise NetworkError("%s: 'axes' must be static axes, got %s" % (self.desc, [data.dims[a] for a in axes]))
        shape = [data.dims[a].dimension for a in axes]
        size = self.opt("size")
        if size is not None and tuple(size) != tuple(shape):
            raise NetworkError("%s: 'size' %r does not match the axes' sizes %r" % (self.desc, size, shape))
        self.w = self.weight("W", shape, 1.0)
        self.full_shape = [data.dims[a].dimension if a in axes else 1 for a in range(data.batch_ndim)]
        self.output = data.copy(name)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = self.inputs(sources, ctx)
        return self.make_output(x.tensor * tf.reshape(self.w, self.full_shape), sources)


@register_layer
class BatchSoftmaxLayer(_WeightedBase):
    """RETURNN's batch_softmax: per sequence one softmax over all its real frames and features
    (time and feature axes jointly); padded frames get 0 (a sequence of length 0: all 0)."""

    layer_class = "batch_softmax"

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        data = self.input
        if data.batch_dim_axis is None or data.time_dim_axis is None:
            raise NetworkError("%s: the input needs a batch and a time axis, got %s" % (self.desc, data.short_repr()))
        self.perm = [data.batch_dim_axis] + [a for a in range(data.batch_ndim) if a != data.batch_dim_axis]
        self.output = data.copy_transpose(self.perm).copy(name)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = self.inputs(sources, ctx)
        mask = x.full_mask()
        value = x.tensor if mask is None else tf.where(mask, x.tensor, tf.constant(float("-inf"), x.tensor.dtype))
        value = tf.transpose(value, self.perm)
        shape = tf.shape(value)
        flat = tf.reshape(value, [shape[0], -1])
        top = tf.reduce_max(flat, axis=1, keepdims=True)
        top = tf.where(tf.math.is_finite(top), top, tf.zeros_like(top))
        e = tf.exp(flat - top)
        y = e / tf.maximum(tf.reduce_sum(e, axis=1, keepdims=True), 1e-30)
        return self.make_output(tf.reshape(y, shape), sources)
