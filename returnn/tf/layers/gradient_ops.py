"""Layers about gradients (RETURNN semantics where they can exist here):

- ``gradient``: the gradient of the scalar layer ``y`` with respect to the layer ``x`` (shaped
  like ``x``; zeros where ``y`` does not depend on it). It is taken on the graph of the compiled
  step (``tf.gradients``), so it runs only inside a traced function (train, eval, forward steps),
  not in eager calls.
- ``synthetic_gradient`` and ``tikhonov_regularization`` are refused: RETURNN's versions add a
  "meta loss" computed from the gradient during back-propagation (its ``MetaLosses``), which its
  updater minimises with a second update in the same step. This engine's train step has no
  gradient-time losses, so their effect on training cannot be reproduced here.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.helpers import check_sources
from returnn.tf.layers.options import Option

META_LOSS_REASON = ("RETURNN adds a loss computed from the gradient during back-propagation (MetaLosses) and its "
                    "updater minimises it in a second update of the same step; this engine's train step has no "
                    "gradient-time losses, so training would differ")


@register_layer
class GradientLayer(Layer):
    """See the module docstring."""

    layer_class = "gradient"
    default_from = ()
    ref_options = ("y", "x")
    options = (
        Option("y", None, "layer of the scalar to differentiate"),
        Option("x", None, "layer to differentiate with respect to"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        for key in ("y", "x"):
            if not isinstance(opts.get(key), str):
                raise NetworkError("layer %r (gradient): %r must be a layer name, got %r" % (name, key, opts.get(key)))
        super().__init__(name, opts, sources[:-2], seed)
        check_sources(self, sources[:-2], 0, 0)
        y, x = sources[-2], sources[-1]
        if y.batch_ndim != 0:
            raise NetworkError("%s: y must be a scalar, got %s" % (self.desc, y.short_repr()))
        if not x.dtype.startswith("float"):
            raise NetworkError("%s: x must be a float tensor, got %s" % (self.desc, x.short_repr()))
        self.output = x.copy(name)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        y, x = sources[-2], sources[-1]
        if tf.executing_eagerly():
            raise NetworkError("%s: the gradient is taken on the step's graph; it runs inside a compiled step only"
                               % self.desc)
        grad = tf.gradients(ys=y.tensor, xs=x.tensor)[0]
        if grad is None:
            grad = tf.zeros_like(x.tensor)
        return self.make_output(tf.convert_to_tensor(grad), [x])


class _MetaLossLayer(Layer):
    """A RETURNN layer whose training effect is a gradient-time meta loss: refused."""

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        raise NetworkError("layer %r: layer class %r is not available here: %s" % (name, self.layer_class, META_LOSS_REASON))


@register_layer
class SyntheticGradientLayer(_MetaLossLayer):
    """Refused (see the module docstring)."""

    layer_class = "synthetic_gradient"


@register_layer
class TikhonovRegularizationLayer(_MetaLossLayer):
    """Refused (see the module docstring)."""

    layer_class = "tikhonov_regularization"
