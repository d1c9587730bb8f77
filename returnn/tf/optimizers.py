"""Optimizers as small tf.Modules: slots are created eagerly in ``__init__``, the update runs
inside the compiled step, and everything is tracked by the checkpoint.

``optimizer = {"class": "adam", ...}`` or the old ``adam = True`` form, each computing what RETURNN's
TensorFlow v1 optimizer of that name computes (goldens from the real RETURNN in
``tests/data/returnn_optimizers.json``). Epsilon (Adam, Nadam, RMSProp, Adadelta) defaults to
RETURNN's ``optimizer_epsilon`` 1e-16 (the dict's ``epsilon`` overrides it); Adam's betas to TF's
0.9 and 0.999. The rarer classes RETURNN knows (TF's proximal optimizers, RETURNN's own custom ones)
and the class names it fails on are in ``returnn/tf/optimizers_extra.py``.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from returnn.config import Config
from returnn.errors import ConfigError, known_list

DEFAULT_EPSILON = 1e-16


class Optimizer(tf.Module):
    """Base: one learning-rate variable, an update counter, per-variable slots.

    ``apply`` computes the step's scalar coefficients once (:meth:`_coefficients`), then updates
    each variable (:meth:`_update`), where possible with one fused TensorFlow kernel
    (``ResourceApply*``: one pass over the variable and its slots instead of one per operation).
    """

    slot_names: Sequence[str] = ()
    # slot -> the suffix TensorFlow's v1 optimizer (RETURNN's) gives its slot variable in a checkpoint
    # ("<param>/Adam"); slots without one are stored as "<param>/_engine_<class>_<slot>"
    returnn_slot_names: Dict[str, str] = {}

    def __init__(self, variables: Sequence[tf.Variable], learning_rate: float = 1e-3,
                 epsilon: float = DEFAULT_EPSILON, name: str = "optimizer"):
        super().__init__(name=name)
        self.var_index = {id(v): i for i, v in enumerate(variables)}  # a variable's slot index
        self.learning_rate = tf.Variable(float(learning_rate), trainable=False, dtype=tf.float32, name="learning_rate")
        self.iterations = tf.Variable(0, trainable=False, dtype=tf.int64, name="iterations")
        self.epsilon = float(epsilon)
        self.slots: Dict[str, List[tf.Variable]] = {
            s: [tf.Variable(tf.zeros_like(v), trainable=False, name="%s_%i" % (s, i)) for i, v in enumerate(variables)]
            for s in self.slot_names}

    def apply(self, grads: Sequence[tf.Tensor], variables: Sequence[tf.Variable],
              learning_rate: Optional[tf.Tensor] = None) -> None:
        """Applies one update (inside a tf.function). A gradient given as ``tf.IndexedSlices``
        (an embedding's rows, duplicates summed) updates as TF's v1 optimizer updates a sparse one
        (:meth:`_update_sparse`). ``learning_rate``: this step's rate instead of the variable's
        (``dynamic_learning_rate``)."""
        self.iterations.assign_add(1)
        lr = tf.convert_to_tensor(self.learning_rate) if learning_rate is None else tf.cast(learning_rate, tf.float32)
        coeffs = self._coefficients(lr, tf.cast(self.iterations, tf.float32))
        for g, v in zip(grads, variables):
            i = self.var_index[id(v)]  # its slots (the variables given may be a subset: those with a gradient)
            if isinstance(g, tf.IndexedSlices):
                self._update_sparse(i, g, v, {k: tf.cast(c, v.dtype) for k, c in coeffs.items()})
                continue
            self._update(i, g, v, {k: tf.cast(c, v.dtype) for k, c in coeffs.items()})

    def _coefficients(self, lr: tf.Tensor, step: tf.Tensor) -> Dict[str, tf.Tensor]:
        """Scalars of this step shared by all variables (``step`` counts from 1)."""
        return {"lr": lr}

    def _update(self, i: int, g: tf.Tensor, v: tf.Variable, coeffs: Dict[str, tf.Tensor]) -> None:
        raise NotImplementedError

    # RETURNN's TF v1 optimizers update the rows of a sparse gradient only (their _apply_sparse);
    # where that gives what the dense update gives (SGD, Adam, Adagrad: a row without gradient does
    # not move), the dense kernel runs; Momentum, RMSProp, Adadelta and Nadam override this
    sparse_differs = False

    def _update_sparse(self, i: int, g: tf.IndexedSlices, v: tf.Variable, coeffs: Dict[str, tf.Tensor]) -> None:
        """``g``: unique row indices (TF's optimizers sum duplicates first: see
        :func:`returnn.tf.gradients.deduplicate`)."""
        self._update(i, tf.convert_to_tensor(g), v, coeffs)

    def slot_initial_value(self, slot: str) -> float:
        """The value ``slot`` starts with (and :meth:`reset_state` sets again)."""
        return 0.0

    def reset_state(self) -> None:
        """RETURNN's ``Updater.init_optimizer_vars``: every slot back to its initial value and the
        update count to 0 (Adam's bias correction starts again), as RETURNN does for
        ``reset_updater_vars_mod_step`` and ``use_last_best_model``."""
        for name, slot_vars in self.slots.items():
            for s in slot_vars:
                s.assign(tf.fill(tf.shape(s), tf.constant(self.slot_initial_value(name), s.dtype)))
        self.iterations.assign(0)

    def slot(self, name: str, i: int) -> tf.Variable:
        return self.slots[name][i]

    def slot_checkpoint_name(self, slot: str) -> str:
        """The suffix of ``slot``'s entries in a checkpoint (``<param>/<suffix>``)."""
        return self.returnn_slot_names.get(slot, "_engine_%s_%s" % (type(self).__name__, slot))

    def extra_checkpoint_values(self) -> Dict[str, Any]:
        """Values TensorFlow's v1 optimizer keeps besides slots (Adam's ``beta1_power``), by name."""
        return {}

    def iterations_from_checkpoint(self, values: Dict[str, Any]) -> Optional[int]:
        """The update count that those values (of a checkpoint without this engine's own) stand for."""
        return None


class SGD(Optimizer):
    def _update(self, i, g, v, coeffs):
        tf.raw_ops.ResourceApplyGradientDescent(var=v.handle, alpha=coeffs["lr"], delta=g)


class Momentum(Optimizer):
    """TensorFlow's v1 ``MomentumOptimizer`` (RETURNN's): ``m = mu * m + g``; ``v -= lr * m``
    (``use_nesterov``: ``v -= lr * (g + mu * m)``; ``nesterov`` is accepted as the same option)."""

    slot_names = ("momentum",)
    returnn_slot_names = {"momentum": "Momentum"}

    def __init__(self, variables, momentum: float = 0.9, use_nesterov: bool = False, nesterov: bool = False,
                 **kwargs):
        super().__init__(variables, **kwargs)
        self.mu, self.nesterov = float(momentum), bool(use_nesterov or nesterov)

    def _update(self, i, g, v, coeffs):
        tf.raw_ops.ResourceApplyMomentum(var=v.handle, accum=self.slot("momentum", i).handle, lr=coeffs["lr"], grad=g,
                                         momentum=tf.constant(self.mu, v.dtype), use_nesterov=self.nesterov)

    sparse_differs = True  # the momentum of rows without gradient is neither decayed nor applied

    def _update_sparse(self, i, g, v, coeffs):
        tf.raw_ops.ResourceSparseApplyMomentum(
            var=v.handle, accum=self.slot("momentum", i).handle, lr=coeffs["lr"], grad=g.values, indices=g.indices,
            momentum=tf.constant(self.mu, v.dtype), use_nesterov=self.nesterov)


class Adam(Optimizer):
    """TensorFlow's v1 ``AdamOptimizer``, which RETURNN uses: ``m = b1 * m + (1 - b1) * g``,
    ``s = b2 * s + (1 - b2) * g^2``; ``v -= lr_t * m / (sqrt(s) + eps)`` with
    ``lr_t = lr * sqrt(1 - b2^t) / (1 - b1^t)``. Epsilon is added to ``sqrt(s)`` AFTER the bias
    correction (Kingma & Ba's "epsilon hat"), not to ``sqrt(s_hat)``: with RETURNN's default 1e-16 the
    two hardly differ, with a larger epsilon (1e-3, 0.1) they do.

    Runs as TF's fused kernel (``ResourceApplyAdam``, the kernel TF's v1 Adam runs), given
    ``beta1_power = b1^t``, ``beta2_power = b2^t`` and the raw epsilon.
    """

    slot_names = ("m", "v")
    returnn_slot_names = {"m": "Adam", "v": "Adam_1"}
    use_nesterov = False

    def __init__(self, variables, beta1: float = 0.9, beta2: float = 0.999, **kwargs):
        super().__init__(variables, **kwargs)
        self.beta1, self.beta2 = float(beta1), float(beta2)

    def extra_checkpoint_values(self) -> Dict[str, Any]:
        """TensorFlow's v1 Adam keeps ``beta1^(t+1)`` and ``beta2^(t+1)`` after t updates."""
        t = int(self.iterations.numpy()) + 1
        return {"beta1_power": np.float32(self.beta1 ** t), "beta2_power": np.float32(self.beta2 ** t)}

    def iterations_from_checkpoint(self, values: Dict[str, Any]) -> Optional[int]:
        """The update count that a v1 Adam's ``beta1_power`` in ``values`` stands for, if any."""
        power = values.get("beta1_power")
        if power is None or not 0.0 < self.beta1 < 1.0 or not 0.0 < float(power) <= self.beta1:
            return None
        return max(0, int(round(np.log(float(power)) / np.log(self.beta1))) - 1)

    def _coefficients(self, lr, step):
        return {"lr": lr, "b1_power": tf.pow(self.beta1, step), "b2_power": tf.pow(self.beta2, step)}

    def _update(self, i, g, v, coeffs):
        tf.raw_ops.ResourceApplyAdam(
            var=v.handle, m=self.slot("m", i).handle, v=self.slot("v", i).handle,
            beta1_power=coeffs["b1_power"], beta2_power=coeffs["b2_power"], lr=coeffs["lr"],
            beta1=tf.constant(self.beta1, v.dtype), beta2=tf.constant(self.beta2, v.dtype),
            epsilon=tf.constant(self.epsilon, v.dtype), grad=g, use_nesterov=self.use_nesterov)


class Nadam(Adam):
    """RETURNN's ``NadamOptimizer`` (``optimizer = "nadam"``; a copy of TF 1's
    ``tf.contrib.opt.NadamOptimizer``, which the old ``nadam = True`` used): TF's v1 Adam with the
    fused kernel's Nesterov form, ``v -= lr_t * (b1 * m + (1 - b1) * g) / (sqrt(s) + eps)`` (``m``,
    ``s``, ``lr_t`` as :class:`Adam`; no momentum schedule, unlike Dozat's paper and Keras' Nadam).
    On TF 2 RETURNN maps the old ``nadam = True`` to Keras' Nadam, which its wrapper fails to
    drive with TF 2.15; here it is this same optimizer."""

    use_nesterov = True
    sparse_differs = True  # RETURNN's NadamOptimizer moves only the rows of a sparse gradient

    def _update_sparse(self, i, g, v, coeffs):
        """RETURNN's ``NadamOptimizer._apply_sparse_shared``: ``m`` and ``s`` of every row decay, the
        gradient rows are added, and only those rows of the variable move."""
        b1, b2 = tf.constant(self.beta1, v.dtype), tf.constant(self.beta2, v.dtype)
        lr = coeffs["lr"] * tf.sqrt(1 - coeffs["b2_power"]) / (1 - coeffs["b1_power"])
        m, s = self.slot("m", i), self.slot("v", i)
        m_scaled = g.values * (1 - b1)
        m.assign(m * b1)
        m.scatter_add(tf.IndexedSlices(m_scaled, g.indices))
        m_bar = m_scaled + b1 * tf.gather(m, g.indices)
        s.assign(s * b2)
        s.scatter_add(tf.IndexedSlices(g.values * g.values * (1 - b2), g.indices))
        eps = tf.constant(self.epsilon, v.dtype)
        v.scatter_add(tf.IndexedSlices(-lr * m_bar / (tf.sqrt(tf.gather(s, g.indices)) + eps), g.indices))


class RMSProp(Optimizer):
    """RMSProp as RETURNN runs it (TensorFlow's v1 ``RMSPropOptimizer``): ``ms`` starts at ones,
    ``ms = rho * ms + (1 - rho) * g^2``, ``mom = momentum * mom + lr * g / sqrt(ms + eps)``,
    ``v -= mom``; ``centered`` also tracks ``mg`` (mean gradient) and uses ``ms - mg^2``. One fused
    kernel per variable."""

    slot_names = ("ms", "momentum")
    returnn_slot_names = {"ms": "RMSProp", "momentum": "RMSProp_1", "mg": "RMSProp_2"}

    def __init__(self, variables, decay: float = 0.9, momentum: float = 0.0, centered: bool = False, **kwargs):
        super().__init__(variables, **kwargs)
        self.rho, self.momentum, self.centered = float(decay), float(momentum), bool(centered)
        for ms in self.slots["ms"]:
            ms.assign(tf.ones_like(ms))
        if self.centered:
            self.slots["mg"] = [tf.Variable(tf.zeros_like(v), trainable=False, name="mg_%i" % i)
                                for i, v in enumerate(variables)]

    def _update(self, i, g, v, coeffs):
        args = dict(var=v.handle, ms=self.slot("ms", i).handle, mom=self.slot("momentum", i).handle, lr=coeffs["lr"],
                    rho=tf.constant(self.rho, v.dtype), momentum=tf.constant(self.momentum, v.dtype),
                    epsilon=tf.constant(self.epsilon, v.dtype), grad=g)
        if self.centered:
            tf.raw_ops.ResourceApplyCenteredRMSProp(mg=self.slot("mg", i).handle, **args)
        else:
            tf.raw_ops.ResourceApplyRMSProp(**args)

    sparse_differs = True  # rows without gradient: ms not decayed, momentum not applied

    def slot_initial_value(self, slot):
        return 1.0 if slot == "ms" else 0.0

    def _update_sparse(self, i, g, v, coeffs):
        args = dict(var=v.handle, ms=self.slot("ms", i).handle, mom=self.slot("momentum", i).handle, lr=coeffs["lr"],
                    rho=tf.constant(self.rho, v.dtype), momentum=tf.constant(self.momentum, v.dtype),
                    epsilon=tf.constant(self.epsilon, v.dtype), grad=g.values, indices=g.indices)
        if self.centered:
            tf.raw_ops.ResourceSparseApplyCenteredRMSProp(mg=self.slot("mg", i).handle, **args)
        else:
            tf.raw_ops.ResourceSparseApplyRMSProp(**args)


class Adagrad(Optimizer):
    """Adagrad as RETURNN runs it (TensorFlow's v1 ``AdagradOptimizer``): the accumulator starts at
    ``initial_accumulator_value``; ``acc += g^2``, ``v -= lr * g / sqrt(acc)``."""

    slot_names = ("accumulator",)
    returnn_slot_names = {"accumulator": "Adagrad"}

    def __init__(self, variables, initial_accumulator_value: float = 0.1, **kwargs):
        super().__init__(variables, **kwargs)
        self.initial_accumulator_value = float(initial_accumulator_value)
        for acc in self.slots["accumulator"]:
            acc.assign(tf.fill(tf.shape(acc), tf.cast(initial_accumulator_value, acc.dtype)))

    def _update(self, i, g, v, coeffs):
        tf.raw_ops.ResourceApplyAdagrad(var=v.handle, accum=self.slot("accumulator", i).handle, lr=coeffs["lr"],
                                        grad=g)

    def slot_initial_value(self, slot):
        return self.initial_accumulator_value


class Adadelta(Optimizer):
    """TensorFlow's v1 ``AdadeltaOptimizer`` (Zeiler's Adadelta, TF's fused kernel); RETURNN gives it
    ``optimizer_epsilon`` (default 1e-16) unless the dict sets ``epsilon``."""

    slot_names = ("accum_grad", "accum_update")
    returnn_slot_names = {"accum_grad": "Adadelta", "accum_update": "Adadelta_1"}

    def __init__(self, variables, rho: float = 0.95, **kwargs):
        super().__init__(variables, **kwargs)
        self.rho = float(rho)

    def _update(self, i, g, v, coeffs):
        tf.raw_ops.ResourceApplyAdadelta(
            var=v.handle, accum=self.slot("accum_grad", i).handle, accum_update=self.slot("accum_update", i).handle,
            lr=coeffs["lr"], rho=tf.constant(self.rho, v.dtype), epsilon=tf.constant(self.epsilon, v.dtype), grad=g)

    sparse_differs = True  # rows without gradient: accumulators not decayed

    def _update_sparse(self, i, g, v, coeffs):
        tf.raw_ops.ResourceSparseApplyAdadelta(
            var=v.handle, accum=self.slot("accum_grad", i).handle, accum_update=self.slot("accum_update", i).handle,
            lr=coeffs["lr"], rho=tf.constant(self.rho, v.dtype), epsilon=tf.constant(self.epsilon, v.dtype),
            grad=g.values, indices=g.indices)


class Ftrl(Optimizer):
    """TensorFlow's v1 ``FtrlOptimizer`` (RETURNN's class ``ftrl``; TF's fused kernels): accumulator from
    ``initial_accumulator_value``, linear term from 0; with ``l2_shrinkage_regularization_strength`` the
    V2 kernel; ``beta`` adds ``beta / (2 * lr)`` to the l2 strength, as TF's; ``accum_name`` and
    ``linear_name`` are accepted (slot names: no effect). Like TF's, it takes no epsilon (RETURNN passes none)."""

    slot_names = ("accum", "linear")
    returnn_slot_names = {"accum": "Ftrl", "linear": "Ftrl_1"}

    def __init__(self, variables, learning_rate_power: float = -0.5, initial_accumulator_value: float = 0.1,
                 l1_regularization_strength: float = 0.0, l2_regularization_strength: float = 0.0,
                 l2_shrinkage_regularization_strength: float = 0.0, beta: Optional[float] = None,
                 accum_name: Optional[str] = None, linear_name: Optional[str] = None, **kwargs):
        del accum_name, linear_name  # TF's graph names of the slots (RETURNN saves no slots): no effect
        super().__init__(variables, **kwargs)
        if learning_rate_power > 0 or initial_accumulator_value <= 0 or min(
                l1_regularization_strength, l2_regularization_strength, l2_shrinkage_regularization_strength) < 0:
            raise ConfigError("config key 'optimizer' (ftrl): learning_rate_power must be <= 0, "
                              "initial_accumulator_value > 0 and the regularization strengths >= 0 (TensorFlow's)")
        self.power, self.initial_accumulator_value = float(learning_rate_power), float(initial_accumulator_value)
        self.l1, self.l2 = float(l1_regularization_strength), float(l2_regularization_strength)
        self.shrinkage = float(l2_shrinkage_regularization_strength)
        self.beta = float(beta or 0.0)
        for acc in self.slots["accum"]:
            acc.assign(tf.fill(tf.shape(acc), tf.cast(initial_accumulator_value, acc.dtype)))

    def _args(self, i, v, coeffs):
        c = lambda x: tf.constant(x, v.dtype)  # noqa: E731
        l2 = c(self.l2)
        if self.beta:  # TF's adjusted l2 strength
            l2 = l2 + self.beta / (2.0 * tf.maximum(coeffs["lr"], c(1e-36)))
        return dict(var=v.handle, accum=self.slot("accum", i).handle, linear=self.slot("linear", i).handle,
                    lr=coeffs["lr"], l1=c(self.l1), l2=l2, lr_power=c(self.power))

    def _apply(self, i, v, coeffs, **grad):
        """TF's fused kernel: sparse with ``indices``; the V2 kernel with shrinkage."""
        args = dict(self._args(i, v, coeffs), **grad)
        if self.shrinkage:
            args["l2_shrinkage"] = tf.constant(self.shrinkage, v.dtype)
        sparse = "indices" in grad
        op = {(False, False): tf.raw_ops.ResourceApplyFtrl, (False, True): tf.raw_ops.ResourceApplyFtrlV2,
              (True, False): tf.raw_ops.ResourceSparseApplyFtrl, (True, True): tf.raw_ops.ResourceSparseApplyFtrlV2}
        op[(sparse, bool(self.shrinkage))](**args)

    def _update(self, i, g, v, coeffs):
        self._apply(i, v, coeffs, grad=g)

    sparse_differs = True  # rows without gradient keep their accumulators

    def _update_sparse(self, i, g, v, coeffs):
        self._apply(i, v, coeffs, grad=g.values, indices=g.indices)

    def slot_initial_value(self, slot):
        return self.initial_accumulator_value if slot == "accum" else 0.0


# (returnn/tf/optimizers_extra.py adds the rarer classes: TF's proximal ones, RETURNN's custom ones)
OPTIMIZERS = {"sgd": SGD, "gradientdescent": SGD, "momentum": Momentum, "adam": Adam, "nadam": Nadam,
              "rmsprop": RMSProp, "adadelta": Adadelta, "adagrad": Adagrad, "ftrl": Ftrl}
_OLD_FLAGS = ("adam", "nadam", "adadelta", "adagrad", "rmsprop", "momentum")  # RETURNN's order of precedence
_TAKES_MOMENTUM = ("momentum", "rmsprop")  # classes that get the config's 'momentum' (RETURNN's rule)


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
        rmsprop = config.typed_value("rmsprop")
        if opts["class"] == "rmsprop" and isinstance(rmsprop, float):  # a number is the decay (RETURNN)
            opts["decay"] = rmsprop
        if opts["class"] in ("adam", "nadam", "adadelta", "adagrad") and config.float("momentum"):
            raise ConfigError("config keys %r and 'momentum': RETURNN refuses momentum with the old %s = True "
                              "(set 'optimizer' instead)" % (opts["class"], opts["class"]))
        if opts["class"] != "sgd" and (config.int("behavior_version") or 0) >= 2:
            raise ConfigError("config key %r: RETURNN refuses the old optimizer flags from behavior_version 2 on "
                              "(\"Please define an optimizer specifically via the 'optimizer=...' parameter\"): set "
                              "optimizer = {'class': %r}" % (opts["class"], opts["class"]))
    if not isinstance(opts, dict) or "class" not in opts:
        raise ConfigError("config key 'optimizer': expected a dict with 'class', got %r" % (opts,))
    return dict(opts)


def create_optimizer(config: Config, variables: Sequence[tf.Variable]) -> Optimizer:
    """Builds the optimizer the config asks for; with layers' own (``updater_opts``) or a
    ``learning_rate_multiplier``, several behind one interface (returnn/tf/updater_opts.py)."""
    from returnn.tf.updater_opts import create_layer_optimizers
    opts = optimizer_options(config)
    multi = create_layer_optimizers(config, variables, opts, lambda o, vs: _create(config, vs, o))
    return multi if multi is not None else _create(config, variables, opts)


def _create(config: Config, variables: Sequence[tf.Variable], opts: Dict[str, Any]) -> Optimizer:
    opts = dict(opts)
    name = str(opts.pop("class")).lower()
    if name.endswith("optimizer"):  # RETURNN registers "adamoptimizer" as "adam" (not "neuraloptimizer1")
        name = name[:-len("optimizer")]
    if name in optimizers_extra.RETURNN_FAILS:
        raise ConfigError("config key 'optimizer': class %r fails in RETURNN 1.20261022 with TensorFlow 2.15: %s"
                          % (name, optimizers_extra.RETURNN_FAILS[name]))
    if name not in OPTIMIZERS:
        raise ConfigError("config key 'optimizer': unknown class %r (known: %s)" % (name, known_list(OPTIMIZERS)))
    if "learning_rate" in opts:  # RETURNN asserts: "learning_rate will be set implicitly"
        raise ConfigError("config key 'optimizer': no 'learning_rate' in the dict; the config's learning_rate (and "
                          "'learning_rate_multiplier' here) set it, as in RETURNN")
    learning_rate = config.float("learning_rate") * float(opts.pop("learning_rate_multiplier", 1.0))
    opts.pop("use_locking", None)  # every class here takes it in RETURNN (TF's variable locking): the same update
    scope = opts.pop("name", None)  # the class's TF name scope in RETURNN: no effect here, but TF checks it
    if scope is not None and not (isinstance(scope, str) and re.fullmatch(r"[A-Za-z0-9_.\\/>-]*", scope)):
        raise ConfigError("config key 'optimizer' (%s): name %r is not a valid TensorFlow scope name (letters, "
                          "digits and _.\\/>-), which RETURNN fails on" % (name, scope))
    no_epsilon = ("adagrad", "ftrl") + optimizers_extra.NO_EPSILON  # TF's/RETURNN's classes without one
    if name in no_epsilon and "epsilon" in opts:  # RETURNN: a TypeError
        raise ConfigError("config key 'optimizer' (%s): the class RETURNN runs has no 'epsilon'" % name)
    if "epsilon" not in opts and name not in no_epsilon:  # RETURNN: every class whose __init__ takes one
        opts["epsilon"] = config.float("optimizer_epsilon")
    if name in _TAKES_MOMENTUM and "momentum" not in opts and config.float("momentum"):
        opts["momentum"] = config.float("momentum")
    if name == "sgd" and config.float("momentum"):  # RETURNN gives Keras' SGD the config's momentum
        raise ConfigError("config key 'momentum' with optimizer class 'sgd': RETURNN runs Keras' SGD with that "
                          "momentum, which is not implemented here; use optimizer = {'class': 'momentum'}")
    try:
        return OPTIMIZERS[name](variables, learning_rate=learning_rate, **opts)
    except TypeError as exc:
        raise ConfigError("config key 'optimizer' (%s): bad option: %s" % (name, exc))


from returnn.tf import optimizers_extra  # noqa: E402  (adds its classes to OPTIMIZERS)
