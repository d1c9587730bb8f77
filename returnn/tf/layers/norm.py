"""Normalisation layers: ``layer_norm`` and ``batch_norm``.

``batch_norm`` moving statistics (non-trainable variables ``moving_mean``/``moving_variance``,
initialised to 0 and 1) are updated in training only, with PyTorch-style momentum, i.e.
``momentum`` is the weight of the current batch::

    moving = (1 - momentum) * moving + momentum * batch_stat      (default momentum = 0.1)

Batch statistics are the mean and the biased variance over all real frames of the batch (padded
frames are excluded). In evaluation the moving statistics are used.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence

import numpy as np
import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.helpers import check_dense, concat_inputs, concat_output
from returnn.tf.layers.options import Option


class _FeatureNorm(Layer):
    """Common part: dense (concatenated) input, output of the same shape, per-feature params."""

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_dense(self, sources)
        self.output, self.plan = concat_output(self, sources)
        if self.output.feature_dim_axis is None:
            raise NetworkError("%s: input needs a feature axis, got %s" % (self.desc, self.output.short_repr()))
        self.n_feat = self.output.dim
        self.check_n_out(self.n_feat)

    def inputs(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        return concat_inputs(self, self.output, self.plan, sources, ctx)

    def per_feature(self, v: tf.Tensor) -> tf.Tensor:
        """A (D,) vector shaped to broadcast on the output's feature axis."""
        shape = [1] * self.output.batch_ndim
        shape[self.output.feature_dim_axis] = -1
        return tf.reshape(v, shape)


@register_layer
class LayerNormLayer(_FeatureNorm):
    """Normalises each position over the feature axis: ``(x - mean) / sqrt(var + epsilon) * gamma + beta``."""

    layer_class = "layer_norm"
    options = (Option("epsilon", 1e-6, "added to the variance"),)

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        self.epsilon = float(self.opt("epsilon"))
        self.gamma = self.weight("gamma", [self.n_feat], "ones", l2=False)
        self.beta = self.weight("beta", [self.n_feat], "zeros", l2=False)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = self.inputs(sources, ctx)
        axis = self.output.feature_dim_axis
        mean, var = tf.nn.moments(x.tensor, axes=[axis], keepdims=True)
        y = (x.tensor - mean) * tf.math.rsqrt(var + self.epsilon) * self.per_feature(self.gamma) \
            + self.per_feature(self.beta)
        return self.make_output(y, sources)


@register_layer
class BatchNormLayer(_FeatureNorm):
    """Batch normalisation per feature over all other axes (real positions only)."""

    layer_class = "batch_norm"
    options = (
        Option("momentum", 0.1, "weight of the current batch in the moving statistics"),
        Option("epsilon", 1e-3, "added to the variance"),
        Option("use_shift", True, "learn a shift beta"),
        Option("use_std", True, "learn a scale gamma"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        self.momentum = float(self.opt("momentum"))
        if not 0.0 <= self.momentum <= 1.0:
            raise NetworkError("%s: momentum must be in [0, 1], got %r" % (self.desc, self.momentum))
        self.epsilon = float(self.opt("epsilon"))
        dim = self.n_feat
        self.gamma = self.weight("gamma", [dim], "ones", l2=False) if self.opt("use_std") else None
        self.beta = self.weight("beta", [dim], "zeros", l2=False) if self.opt("use_shift") else None
        self.moving_mean = tf.Variable(np.zeros([dim], np.float32), name="moving_mean", trainable=False)
        self.moving_variance = tf.Variable(np.ones([dim], np.float32), name="moving_variance", trainable=False)

    def batch_moments(self, x: LayerOutput):
        """Mean and biased variance, shape (D,), over all real positions of ``x``."""
        axes = [a for a in range(x.data.batch_ndim) if a != x.data.feature_dim_axis]
        mask = x.full_mask()
        if mask is None:
            mask = tf.ones([1] * x.data.batch_ndim, tf.bool)
        weight = tf.where(mask, tf.ones_like(x.tensor), 0.0)
        count = tf.maximum(tf.reduce_sum(weight, axis=axes), 1.0)
        mean = tf.reduce_sum(weight * tf.where(mask, x.tensor, 0.0), axis=axes) / count
        centered = tf.where(mask, x.tensor - self.per_feature(mean), 0.0)
        var = tf.reduce_sum(tf.square(centered), axis=axes) / count
        return mean, var

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = self.inputs(sources, ctx)
        if ctx.train:
            mean, var = self.batch_moments(x)
            m = self.momentum
            self.moving_mean.assign((1.0 - m) * self.moving_mean + m * tf.stop_gradient(mean))
            self.moving_variance.assign((1.0 - m) * self.moving_variance + m * tf.stop_gradient(var))
        else:
            mean, var = self.moving_mean, self.moving_variance
        y = (x.tensor - self.per_feature(mean)) * tf.math.rsqrt(self.per_feature(var) + self.epsilon)
        if self.gamma is not None:
            y = y * self.per_feature(self.gamma)
        if self.beta is not None:
            y = y + self.per_feature(self.beta)
        return self.make_output(y, sources)
