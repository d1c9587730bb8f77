"""Weight initialisers from RETURNN's init specs (``forward_weights_init``, ``bias_init``, ...),
computed in numpy from the layer's seeded RNG (so initialisation stays reproducible and eager).

A spec is a number (constant), a name (``"glorot_uniform"``, ``"zeros"``, ``"orthogonal"``, also
with the ``_initializer`` suffix) or a call as RETURNN writes it, e.g.
``"random_normal_initializer(stddev=0.1)"`` or
``"variance_scaling_initializer(mode='fan_in', distribution='uniform', scale=0.78)"``; arguments
may use ``math`` (``stddev=1/math.sqrt(512)``), or a dict naming a TensorFlow initializer class
with its arguments (``{"class": "VarianceScaling", "mode": "fan_in", "scale": 0.78}``). Configs are trusted code, so call specs are
evaluated like RETURNN does, but only against the initialisers below and ``math``.
Fans follow TensorFlow: ``fan_in = shape[-2] * receptive``, ``fan_out = shape[-1] * receptive``.
"""
from __future__ import annotations

import math
import re
from typing import Any, Callable, Dict, Sequence, Tuple

import numpy as np

Init = Callable[[Sequence[int], np.random.RandomState], np.ndarray]


def _fans(shape: Sequence[int]) -> Tuple[float, float]:
    if len(shape) < 1:
        return 1.0, 1.0
    if len(shape) == 1:
        return float(shape[0]), float(shape[0])
    receptive = float(np.prod(shape[:-2])) if len(shape) > 2 else 1.0
    return shape[-2] * receptive, shape[-1] * receptive


def _truncated(rng: np.random.RandomState, shape: Sequence[int], std: float, mean: float = 0.0) -> np.ndarray:
    """Normal values redrawn until within two standard deviations (as TF)."""
    out = rng.normal(0.0, 1.0, size=shape)
    bad = np.abs(out) > 2.0
    while bad.any():
        out[bad] = rng.normal(0.0, 1.0, size=int(bad.sum()))
        bad = np.abs(out) > 2.0
    return mean + std * out


def constant(value: Any = 0.0, **_ignored: Any) -> Init:
    return lambda shape, rng: np.broadcast_to(np.asarray(value, np.float32), shape).copy()


def random_normal(mean: float = 0.0, stddev: float = 1.0, **_ignored: Any) -> Init:
    return lambda shape, rng: rng.normal(mean, stddev, size=shape)


def random_uniform(minval: float = 0.0, maxval: float = 1.0, **_ignored: Any) -> Init:
    return lambda shape, rng: rng.uniform(minval, maxval, size=shape)


def truncated_normal(mean: float = 0.0, stddev: float = 1.0, **_ignored: Any) -> Init:
    return lambda shape, rng: _truncated(rng, shape, stddev, mean)


def variance_scaling(scale: float = 1.0, mode: str = "fan_in", distribution: str = "truncated_normal",
                     **_ignored: Any) -> Init:
    """TensorFlow's VarianceScaling: variance ``scale / n`` with n = fan_in, fan_out or their mean."""
    if mode not in ("fan_in", "fan_out", "fan_avg"):
        raise ValueError("variance_scaling: mode must be fan_in, fan_out or fan_avg, got %r" % (mode,))

    def init(shape: Sequence[int], rng: np.random.RandomState) -> np.ndarray:
        fan_in, fan_out = _fans(shape)
        n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2.0}[mode]
        var = scale / max(1.0, n)
        if distribution in ("uniform",):
            limit = math.sqrt(3.0 * var)
            return rng.uniform(-limit, limit, size=shape)
        if distribution in ("normal", "truncated_normal"):
            return _truncated(rng, shape, math.sqrt(var) / 0.87962566103423978)
        if distribution == "untruncated_normal":
            return rng.normal(0.0, math.sqrt(var), size=shape)
        raise ValueError("variance_scaling: unknown distribution %r" % (distribution,))
    return init


def orthogonal(gain: float = 1.0, **_ignored: Any) -> Init:
    def init(shape: Sequence[int], rng: np.random.RandomState) -> np.ndarray:
        rows = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
        cols = int(shape[-1])
        a = rng.normal(0.0, 1.0, size=(max(rows, cols), min(rows, cols)))
        q, r = np.linalg.qr(a)
        q *= np.sign(np.diag(r))
        q = q if rows >= cols else q.T
        return gain * q[:rows, :cols].reshape(shape)
    return init


INITIALIZERS: Dict[str, Callable[..., Init]] = {
    "zeros": lambda **kw: constant(0.0), "ones": lambda **kw: constant(1.0), "constant": constant,
    "random_normal": random_normal, "random_uniform": random_uniform, "truncated_normal": truncated_normal,
    "variance_scaling": variance_scaling, "orthogonal": orthogonal,
    "glorot_uniform": lambda **kw: variance_scaling(1.0, "fan_avg", "uniform"),
    "glorot_normal": lambda **kw: variance_scaling(1.0, "fan_avg", "truncated_normal"),
    "xavier": lambda **kw: variance_scaling(1.0, "fan_avg", "uniform"),
    "he_uniform": lambda **kw: variance_scaling(2.0, "fan_in", "uniform"),
    "he_normal": lambda **kw: variance_scaling(2.0, "fan_in", "truncated_normal"),
    "lecun_uniform": lambda **kw: variance_scaling(1.0, "fan_in", "uniform"),
    "lecun_normal": lambda **kw: variance_scaling(1.0, "fan_in", "truncated_normal"),
}


# names that are TensorFlow ops in RETURNN's get_initializer namespace (tf.constant, tf.zeros, ...): called in an
# init string ("constant(0.05)") they give a tensor or a TypeError there, never an initializer
TF_OP_NAMES = ("constant", "zeros", "ones", "random_normal", "random_uniform", "truncated_normal")


def _tf_op_called(name: str) -> Callable[..., Init]:
    def refuse(*_args: Any, **_kwargs: Any) -> Init:
        raise ValueError("%s(...) is TensorFlow's op tf.%s in RETURNN's initializer namespace, not an initializer "
                         "(RETURNN fails on it); write %s_initializer(...)" % (name, name, name))
    return refuse


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def get_init(spec: Any) -> Init:
    """The initialiser of a RETURNN init spec; ``ValueError`` with the known names otherwise."""
    if isinstance(spec, (int, float)) and not isinstance(spec, bool):
        return constant(float(spec))
    if isinstance(spec, (list, tuple, np.ndarray)):
        return constant(np.asarray(spec, np.float32))
    if isinstance(spec, dict):  # {"class": "VarianceScaling", "scale": ..., ...}: a TF initializer class
        kwargs = dict(spec)
        cls = str(kwargs.pop("class", ""))
        name = re.sub(r"(?<!^)(?=[A-Z])", "_", cls).lower().replace("_initializer", "")
        if name not in INITIALIZERS:
            raise ValueError("invalid initializer %r (known classes: %s)"
                             % (spec, ", ".join(sorted(_camel(k) for k in INITIALIZERS))))
        try:
            return INITIALIZERS[name](**kwargs)
        except TypeError as exc:
            raise ValueError("invalid initializer %r (%s)" % (spec, exc)) from None
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError("invalid initializer %r" % (spec,))
    name = spec.strip()
    if name.endswith("_initializer"):
        name = name[:-len("_initializer")]
    if name in INITIALIZERS:
        return INITIALIZERS[name]()
    namespace: Dict[str, Any] = {"math": math, "__builtins__": {}}
    for key, factory in INITIALIZERS.items():
        namespace[key] = namespace[key + "_initializer"] = factory
    for key in TF_OP_NAMES:  # RETURNN's eval namespace has TensorFlow's ops under these names: it fails on a call
        namespace[key] = _tf_op_called(key)
    try:
        value = eval(spec, namespace)  # noqa: S307 - config code is trusted; only initialisers in scope
    except Exception as exc:  # noqa: BLE001 - any failure is a bad spec
        raise ValueError("invalid initializer %r (%s; known: %s)" % (spec, exc, ", ".join(sorted(INITIALIZERS))))
    return value if callable(value) else get_init(value)


def initial_value(spec: Any, shape: Sequence[int], rng: np.random.RandomState) -> np.ndarray:
    """float32 array of ``shape`` from ``spec``."""
    return np.asarray(get_init(spec)(list(shape), rng), np.float32).reshape(shape)
