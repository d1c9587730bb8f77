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
from returnn.tf.layers.base import Layer, LayerOutput, OutputSpec, RunContext, concat_sources, \
    register_layer
from returnn.tf.layers.basic import dense_source_spec


@register_layer
class LayerNormLayer(Layer):
    """Normalises each frame over the feature axis: ``(x - mean) / sqrt(var + epsilon) * gamma + beta``."""

    layer_class = "layer_norm"
    extra_options = frozenset({"epsilon"})

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[OutputSpec], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        spec = dense_source_spec(self, sources)
        self.epsilon = float(opts.get("epsilon", 1e-6))
        self.gamma = self.weight("gamma", [spec.dim], "ones")
        self.beta = self.weight("beta", [spec.dim], "zeros")
        self.out_spec = spec

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = self.apply_dropout(concat_sources(sources, self.layer_name), ctx)
        mean, var = tf.nn.moments(x.tensor, axes=[-1], keepdims=True)
        y = (x.tensor - mean) * tf.math.rsqrt(var + self.epsilon) * self.gamma + self.beta
        return LayerOutput(y, x.seq_len, self.out_spec)


@register_layer
class BatchNormLayer(Layer):
    """Batch normalisation over batch and (real) time frames, per feature.

    Options: ``momentum`` (weight of the current batch, default 0.1), ``epsilon`` (1e-3),
    ``use_shift`` (beta, default True), ``use_std`` (gamma, default True).
    """

    layer_class = "batch_norm"
    extra_options = frozenset({"momentum", "epsilon", "use_shift", "use_std"})

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[OutputSpec], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        spec = dense_source_spec(self, sources)
        self.momentum = float(opts.get("momentum", 0.1))
        if not 0.0 <= self.momentum <= 1.0:
            raise NetworkError("layer %r (batch_norm): momentum must be in [0, 1], got %r" % (name, self.momentum))
        self.epsilon = float(opts.get("epsilon", 1e-3))
        self.gamma = self.weight("gamma", [spec.dim], "ones") if opts.get("use_std", True) else None
        self.beta = self.weight("beta", [spec.dim], "zeros") if opts.get("use_shift", True) else None
        self.moving_mean = tf.Variable(np.zeros([spec.dim], np.float32), name="moving_mean", trainable=False)
        self.moving_variance = tf.Variable(np.ones([spec.dim], np.float32), name="moving_variance", trainable=False)
        self.out_spec = spec

    def batch_moments(self, x: LayerOutput):
        """Mean and biased variance, shape (D,), over all real frames of ``x``."""
        tensor = x.tensor
        if x.spec.has_time:
            mask = x.mask()[:, :, None]
            count = tf.reduce_sum(tf.cast(mask, tf.float32))
        else:
            mask = tf.ones_like(tensor[:, :1], dtype=tf.bool)
            count = tf.cast(tf.shape(tensor)[0], tf.float32)
        axes = list(range(len(tensor.shape) - 1))
        count = tf.maximum(count, 1.0)
        mean = tf.reduce_sum(tf.where(mask, tensor, 0.0), axis=axes) / count
        var = tf.reduce_sum(tf.where(mask, tf.square(tensor - mean), 0.0), axis=axes) / count
        return mean, var

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = self.apply_dropout(concat_sources(sources, self.layer_name), ctx)
        if ctx.train:
            mean, var = self.batch_moments(x)
            m = self.momentum
            self.moving_mean.assign((1.0 - m) * self.moving_mean + m * tf.stop_gradient(mean))
            self.moving_variance.assign((1.0 - m) * self.moving_variance + m * tf.stop_gradient(var))
        else:
            mean, var = self.moving_mean, self.moving_variance
        y = (x.tensor - mean) * tf.math.rsqrt(var + self.epsilon)
        if self.gamma is not None:
            y = y * self.gamma
        if self.beta is not None:
            y = y + self.beta
        return LayerOutput(y, x.seq_len, self.out_spec)
