"""The less common optimizer classes RETURNN's TF engine knows (its ``get_optimizer_class``): TensorFlow's
v1 proximal optimizers and RETURNN's own ``BaseCustomOptimizer`` classes, each computing what RETURNN
runs (engine-run goldens ``opt_*`` in ``tests/data/returnn_engine_runs``), and the class names RETURNN
1.20261022 registers but fails on with TensorFlow 2.15 (:data:`RETURNN_FAILS`: refused in one line).

RETURNN passes ``optimizer_epsilon`` only to classes whose ``__init__`` takes an epsilon (here
``customadam`` and ``gradvariancescaled``, see :data:`NO_EPSILON`) and the config's ``momentum`` to none
of them. RETURNN's custom classes update a sparse (embedding) gradient occurrence by occurrence,
without summing duplicate rows first; that is not implemented here, except for
``customgradientdescent``, where it is plain gradient descent: the others refuse a sparse gradient.
"""
from __future__ import annotations

from typing import Dict

import tensorflow as tf

from returnn.errors import ConfigError
from returnn.tf.optimizers import OPTIMIZERS, SGD, Adam, Optimizer

# class names RETURNN 1.20261022 accepts but fails on with TensorFlow 2.15 (checked with a real run each)
_KERAS = ("a Keras optimizer, which RETURNN's _KerasOptimizerWrapper cannot drive with TensorFlow 2.15 "
          "(AttributeError: no '_name', with a 'name' option no '_create_all_weights')")
RETURNN_FAILS: Dict[str, str] = {
    "amsgrad": "RETURNN's AMSGradOptimizer makes its slots for its var_list argument, which RETURNN never "
               "passes (KeyError at the first update)",
    "adagradda": "TensorFlow's AdagradDAOptimizer needs a global_step argument, which RETURNN does not pass "
                 "(TypeError)",
    "basecustom": "RETURNN's abstract BaseCustomOptimizer (NotImplementedError at the first update)",
    "syncreplicas": "TensorFlow's SyncReplicasOptimizer wraps another optimizer and takes no learning_rate "
                    "(TypeError)",
    "adamax": _KERAS, "adafactor": _KERAS, "adamw": _KERAS, "lion": _KERAS, "nadamkeras": _KERAS,
}
NO_EPSILON = ("proximaladagrad", "proximalgradientdescent", "customgradientdescent", "normalizedsgd",
              "neuraloptimizer1")


class _RefuseSparse:
    """RETURNN's ``BaseCustomOptimizer`` applies a sparse gradient per occurrence (duplicate rows not
    summed): refused here."""

    sparse_differs = True  # so that the sparse gradient reaches _update_sparse

    def _update_sparse(self, i, g, v, coeffs):
        raise ConfigError(
            "config key 'optimizer' (%s): parameter %r gets a sparse gradient (an embedding's rows); RETURNN's "
            "custom optimizers update each occurrence of a row without summing duplicates, which is not "
            "implemented here" % (type(self).__name__.lower(), v.name.split(":")[0]))


class ProximalGradientDescent(Optimizer):
    """TensorFlow's v1 ``ProximalGradientDescentOptimizer`` (FOBOS): ``v -= lr * g``, then the l1
    soft-threshold and the l2 shrinkage (its fused kernels; no slots, no epsilon)."""

    def __init__(self, variables, l1_regularization_strength: float = 0.0, l2_regularization_strength: float = 0.0,
                 **kwargs):
        super().__init__(variables, **kwargs)
        self.l1, self.l2 = float(l1_regularization_strength), float(l2_regularization_strength)

    def _update(self, i, g, v, coeffs):
        tf.raw_ops.ResourceApplyProximalGradientDescent(
            var=v.handle, alpha=coeffs["lr"], l1=tf.constant(self.l1, v.dtype), l2=tf.constant(self.l2, v.dtype),
            delta=g)

    sparse_differs = True  # rows without gradient are not shrunk

    def _update_sparse(self, i, g, v, coeffs):
        tf.raw_ops.ResourceSparseApplyProximalGradientDescent(
            var=v.handle, alpha=coeffs["lr"], l1=tf.constant(self.l1, v.dtype), l2=tf.constant(self.l2, v.dtype),
            grad=g.values, indices=g.indices)


class ProximalAdagrad(ProximalGradientDescent):
    """TensorFlow's v1 ``ProximalAdagradOptimizer``: Adagrad's accumulator (from
    ``initial_accumulator_value``, > 0) and step, then the proximal l1/l2 step (its fused kernels)."""

    slot_names = ("accumulator",)
    returnn_slot_names = {"accumulator": "ProximalAdagrad"}

    def __init__(self, variables, initial_accumulator_value: float = 0.1, **kwargs):
        if initial_accumulator_value <= 0:  # TensorFlow's ValueError
            raise ConfigError("config key 'optimizer' (proximaladagrad): initial_accumulator_value must be "
                              "positive (TensorFlow's)")
        super().__init__(variables, **kwargs)
        self.initial_accumulator_value = float(initial_accumulator_value)
        for acc in self.slots["accumulator"]:
            acc.assign(tf.fill(tf.shape(acc), tf.cast(initial_accumulator_value, acc.dtype)))

    def _update(self, i, g, v, coeffs):
        tf.raw_ops.ResourceApplyProximalAdagrad(
            var=v.handle, accum=self.slot("accumulator", i).handle, lr=coeffs["lr"],
            l1=tf.constant(self.l1, v.dtype), l2=tf.constant(self.l2, v.dtype), grad=g)

    def _update_sparse(self, i, g, v, coeffs):
        tf.raw_ops.ResourceSparseApplyProximalAdagrad(
            var=v.handle, accum=self.slot("accumulator", i).handle, lr=coeffs["lr"],
            l1=tf.constant(self.l1, v.dtype), l2=tf.constant(self.l2, v.dtype), grad=g.values, indices=g.indices)

    def slot_initial_value(self, slot):
        return self.initial_accumulator_value


class CustomGradientDescent(SGD):
    """RETURNN's ``CustomGradientDescentOptimizer``: ``v -= lr * g``; a sparse gradient's occurrences
    are scatter-added, which is the update of the summed rows (the dense kernel runs)."""


class NormalizedSGD(_RefuseSparse, SGD):
    """RETURNN's ``NormalizedSGD``: ``v -= lr * g / ||g||`` (``tf.nn.l2_normalize`` over the whole
    gradient of the parameter, its norm at least 1e-6)."""

    def _update(self, i, g, v, coeffs):
        super()._update(i, tf.nn.l2_normalize(g, None), v, coeffs)


class CustomAdam(_RefuseSparse, Adam):
    """RETURNN's ``CustomAdamOptimizer``, TF's v1 Adam written out: ``m = b1 * m + (1 - b1) * g``,
    ``s = b2 * s + (1 - b2) * g^2``, ``v -= lr * sqrt(1 - b2^t) / (1 - b1^t) * (m / (sqrt(s) + eps))``;
    RETURNN passes it ``optimizer_epsilon`` (1e-16) unless the dict sets ``epsilon``."""

    returnn_slot_names = {"m": "CustomAdamOptimizer", "v": "CustomAdamOptimizer_1"}

    def _update(self, i, g, v, coeffs):
        b1, b2 = tf.constant(self.beta1, v.dtype), tf.constant(self.beta2, v.dtype)
        lr = coeffs["lr"] * (tf.sqrt(1.0 - coeffs["b2_power"]) / (1.0 - coeffs["b1_power"]))
        m = self.slot("m", i)
        s = self.slot("v", i)
        m.assign(b1 * m + (1.0 - b1) * g)
        s.assign(b2 * s + (1.0 - b2) * (g * g))
        v.assign_sub(lr * (m / (tf.sqrt(s) + tf.constant(self.epsilon, v.dtype))))


class GradVarianceScaled(_RefuseSparse, Optimizer):
    """RETURNN's ``GradVarianceScaledOptimizer``: ``m = b1 * m + (1 - b1) * g``, ``d = (g - m)^2``,
    ``s = b2 * s + (1 - b2) * d``; ``v -= lr * g * min(s / (d + eps), 1)`` (epsilon: RETURNN's
    ``optimizer_epsilon`` unless the dict sets one)."""

    slot_names = ("m", "v")
    returnn_slot_names = {"m": "GradVarianceScaledOptimizer", "v": "GradVarianceScaledOptimizer_1"}

    def __init__(self, variables, beta1: float = 0.9, beta2: float = 0.999, **kwargs):
        super().__init__(variables, **kwargs)
        self.beta1, self.beta2 = float(beta1), float(beta2)

    def _update(self, i, g, v, coeffs):
        b1, b2 = tf.constant(self.beta1, v.dtype), tf.constant(self.beta2, v.dtype)
        m, s = self.slot("m", i), self.slot("v", i)
        m.assign(m * b1 + g * (1 - b1))
        variance = tf.math.squared_difference(g, m)
        s.assign(s * b2 + variance * (1 - b2))
        factor = s / (variance + tf.constant(self.epsilon, v.dtype))
        v.assign_sub(coeffs["lr"] * g * tf.minimum(factor, 1.0))


class NeuralOptimizer1(_RefuseSparse, Optimizer):
    """RETURNN's ``NeuralOptimizer1`` (Bello et al. 2017): ``m = b1 * m + (1 - b1) * g``;
    ``v -= lr * g * (1 if sign(m) == sign(g) else decrease_factor)``. No epsilon."""

    slot_names = ("m",)
    returnn_slot_names = {"m": "NeuralOptimizer1"}

    def __init__(self, variables, beta1: float = 0.9, decrease_factor: float = 0.1, **kwargs):
        super().__init__(variables, **kwargs)
        self.beta1, self.decrease_factor = float(beta1), float(decrease_factor)

    def _update(self, i, g, v, coeffs):
        b1 = tf.constant(self.beta1, v.dtype)
        m = self.slot("m", i)
        m.assign(m * b1 + g * (1 - b1))
        ones = tf.ones_like(g)
        factor = tf.where(tf.equal(tf.sign(m), tf.sign(g)), ones, ones * self.decrease_factor)
        v.assign_sub(coeffs["lr"] * g * factor)


OPTIMIZERS.update({"proximalgradientdescent": ProximalGradientDescent, "proximaladagrad": ProximalAdagrad,
                   "customgradientdescent": CustomGradientDescent, "normalizedsgd": NormalizedSGD,
                   "customadam": CustomAdam, "gradvariancescaled": GradVarianceScaled,
                   "neuraloptimizer1": NeuralOptimizer1})
