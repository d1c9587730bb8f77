"""Optimizers as small tf.Modules: slots are created eagerly in ``__init__``, the update runs
inside the compiled step, and everything is tracked by the checkpoint.

``optimizer = {"class": "adam", ...}`` or the old ``adam = True`` form. Epsilon defaults to
RETURNN's 1e-16 (``optimizer_epsilon`` or the dict's ``epsilon`` override it).
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence

import tensorflow as tf

from returnn.config import Config
from returnn.errors import ConfigError, known_list

DEFAULT_EPSILON = 1e-16


class Optimizer(tf.Module):
    """Base: one learning-rate variable, an update counter, per-variable slots."""

    slot_names: Sequence[str] = ()

    def __init__(self, variables: Sequence[tf.Variable], learning_rate: float = 1e-3,
                 epsilon: float = DEFAULT_EPSILON, name: str = "optimizer"):
        super().__init__(name=name)
        self.learning_rate = tf.Variable(float(learning_rate), trainable=False, dtype=tf.float32, name="learning_rate")
        self.iterations = tf.Variable(0, trainable=False, dtype=tf.int64, name="iterations")
        self.epsilon = float(epsilon)
        self.slots: Dict[str, List[tf.Variable]] = {
            s: [tf.Variable(tf.zeros_like(v), trainable=False, name="%s_%i" % (s, i)) for i, v in enumerate(variables)]
            for s in self.slot_names}

    def apply(self, grads: Sequence[tf.Tensor], variables: Sequence[tf.Variable]) -> None:
        """Applies one update (inside a tf.function)."""
        self.iterations.assign_add(1)
        step = tf.cast(self.iterations, tf.float32)
        lr = self.learning_rate
        for i, (g, v) in enumerate(zip(grads, variables)):
            self._update(i, g, v, lr, step)

    def _update(self, i: int, g: tf.Tensor, v: tf.Variable, lr: tf.Tensor, step: tf.Tensor) -> None:
        raise NotImplementedError

    def slot(self, name: str, i: int) -> tf.Variable:
        return self.slots[name][i]


class SGD(Optimizer):
    def _update(self, i, g, v, lr, step):
        v.assign_sub(lr * g)


class Momentum(Optimizer):
    slot_names = ("momentum",)

    def __init__(self, variables, momentum: float = 0.9, nesterov: bool = False, **kwargs):
        super().__init__(variables, **kwargs)
        self.mu, self.nesterov = float(momentum), bool(nesterov)

    def _update(self, i, g, v, lr, step):
        m = self.slot("momentum", i)
        m.assign(self.mu * m + g)
        v.assign_sub(lr * ((g + self.mu * m) if self.nesterov else m))


class Adam(Optimizer):
    slot_names = ("m", "v")

    def __init__(self, variables, beta1: float = 0.9, beta2: float = 0.999, **kwargs):
        super().__init__(variables, **kwargs)
        self.beta1, self.beta2 = float(beta1), float(beta2)

    def _update(self, i, g, v, lr, step):
        m, s = self.slot("m", i), self.slot("v", i)
        m.assign(self.beta1 * m + (1.0 - self.beta1) * g)
        s.assign(self.beta2 * s + (1.0 - self.beta2) * tf.square(g))
        m_hat = m / (1.0 - tf.pow(self.beta1, step))
        s_hat = s / (1.0 - tf.pow(self.beta2, step))
        v.assign_sub(lr * m_hat / (tf.sqrt(s_hat) + self.epsilon))


class Nadam(Adam):
    """Adam with Nesterov momentum (Dozat 2016, without the momentum schedule)."""

    def _update(self, i, g, v, lr, step):
        m, s = self.slot("m", i), self.slot("v", i)
        m.assign(self.beta1 * m + (1.0 - self.beta1) * g)
        s.assign(self.beta2 * s + (1.0 - self.beta2) * tf.square(g))
        m_hat = (self.beta1 * m / (1.0 - tf.pow(self.beta1, step + 1.0))
                 + (1.0 - self.beta1) * g / (1.0 - tf.pow(self.beta1, step)))
        s_hat = s / (1.0 - tf.pow(self.beta2, step))
        v.assign_sub(lr * m_hat / (tf.sqrt(s_hat) + self.epsilon))


class RMSProp(Optimizer):
    slot_names = ("ms",)

    def __init__(self, variables, decay: float = 0.9, **kwargs):
        super().__init__(variables, **kwargs)
        self.rho = float(decay)

    def _update(self, i, g, v, lr, step):
        ms = self.slot("ms", i)
        ms.assign(self.rho * ms + (1.0 - self.rho) * tf.square(g))
        v.assign_sub(lr * g / (tf.sqrt(ms) + self.epsilon))


class Adadelta(Optimizer):
    slot_names = ("accum_grad", "accum_update")

    def __init__(self, variables, rho: float = 0.95, **kwargs):
        kwargs.setdefault("epsilon", 1e-6)
        super().__init__(variables, **kwargs)
        self.rho = float(rho)

    def _update(self, i, g, v, lr, step):
        ag, au = self.slot("accum_grad", i), self.slot("accum_update", i)
        ag.assign(self.rho * ag + (1.0 - self.rho) * tf.square(g))
        update = tf.sqrt(au + self.epsilon) / tf.sqrt(ag + self.epsilon) * g
        au.assign(self.rho * au + (1.0 - self.rho) * tf.square(update))
        v.assign_sub(lr * update)


OPTIMIZERS = {"sgd": SGD, "gradientdescent": SGD, "momentum": Momentum, "adam": Adam, "nadam": Nadam,
              "rmsprop": RMSProp, "adadelta": Adadelta}
_OLD_FLAGS = ("adam", "nadam", "rmsprop", "adadelta", "momentum")


def optimizer_options(config: Config) -> Dict[str, Any]:
    """The ``optimizer`` dict, built from the old ``adam = True`` style flags when absent."""
    opts = config.typed_value("optimizer")
    if isinstance(opts, str):
        opts = {"class": opts}
    if opts is None:
        opts = {"class": "sgd"}
        for flag in _OLD_FLAGS:
            if config.bool(flag, False):
                opts = {"class": flag}
                break
        if opts["class"] == "momentum" and config.has("momentum"):
            opts["momentum"] = config.float("momentum")
    if not isinstance(opts, dict) or "class" not in opts:
        raise ConfigError("config key 'optimizer': expected a dict with 'class', got %r" % (opts,))
    return dict(opts)


def create_optimizer(config: Config, variables: Sequence[tf.Variable]) -> Optimizer:
    """Builds the optimizer the config asks for."""
    opts = optimizer_options(config)
    name = str(opts.pop("class")).lower().replace("optimizer", "")
    if name not in OPTIMIZERS:
        raise ConfigError("config key 'optimizer': unknown class %r (known: %s)" % (name, known_list(OPTIMIZERS)))
    opts.pop("learning_rate", None)
    if "epsilon" not in opts and name != "adadelta":
        opts["epsilon"] = config.float("optimizer_epsilon", DEFAULT_EPSILON)
    for key in ("beta_1", "beta_2"):
        if key in opts:
            opts[key.replace("_", "")] = opts.pop(key)
    try:
        return OPTIMIZERS[name](variables, learning_rate=config.float("learning_rate", 1e-3), **opts)
    except TypeError as exc:
        raise ConfigError("config key 'optimizer' (%s): bad option: %s" % (name, exc))
