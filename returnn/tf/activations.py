"""Activation functions by name, as used in the ``activation`` option of layers.

RETURNN's forms (its ``get_activation_function``):

- a name: the table below, else a function of ``tf.nn``, ``tf``, ``tf.math`` or ``tf.compat.v1``
  of that name (``"erf"``, ``"log1p"``, ``"sign"``, ...), and RETURNN's ``safe_log``, ``safe_exp``,
  ``gelu2``, ``gelu3``; ``"neg"`` is ``negative``;
- ``"a+b"``, ``"a-b"``, ``"a*b"``, ``"a/b"``: both sides applied to x and combined (``"tanh+sigmoid"``
  is ``tanh(x) + sigmoid(x)``); a side may be a number (``"2*sigmoid"``, ``"1-sigmoid"``); ``+`` binds
  loosest, then ``-``, ``*``, ``/`` (RETURNN splits at the first of these it finds, in that order, and
  only where it occurs once: ``"1+2+sigmoid"`` is refused, as RETURNN fails on it);
- with ``(``: a Python expression in ``x`` (and ``tf``), e.g. ``"tf.nn.relu(x) ** 2"`` (config code).

``opts`` (the activation layer's option, RETURNN's ``act_func_opts``): keyword arguments of the one
function a plain name resolves to, ``fn(x, **opts)`` (e.g. ``safe_log`` with ``{"eps": 1e-10}``);
checked against its signature when the layer is built (:func:`get_activation_with_opts`).

``None``, ``""``, ``"none"`` and ``"identity"`` mean no activation. Names RETURNN does not know
are refused, as RETURNN refuses them when it builds the layer: ``"linear"`` (no TensorFlow function
of that name), chains such as ``"relu|tanh"``.
"""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Dict, Optional

import tensorflow as tf

from returnn.errors import NetworkError, known_list

ActivationFn = Callable[[tf.Tensor], tf.Tensor]


def _identity(x: tf.Tensor) -> tf.Tensor:
    return x


ACTIVATIONS: Dict[str, ActivationFn] = {
    "identity": _identity,
    "relu": tf.nn.relu,
    "relu6": tf.nn.relu6,
    "leaky_relu": tf.nn.leaky_relu,
    "elu": tf.nn.elu,
    "selu": tf.nn.selu,
    "gelu": lambda x: tf.nn.gelu(x, approximate=False),
    "swish": tf.nn.silu,
    "silu": tf.nn.silu,
    "tanh": tf.tanh,
    "sigmoid": tf.sigmoid,
    "log_sigmoid": tf.math.log_sigmoid,
    "softmax": lambda x: tf.nn.softmax(x, axis=-1),
    "log_softmax": lambda x: tf.nn.log_softmax(x, axis=-1),
    "softplus": tf.nn.softplus,
    "softsign": tf.nn.softsign,
    "abs": tf.abs,
    "square": tf.square,
    "sqrt": tf.sqrt,
    "exp": tf.exp,
    "log": tf.math.log,
    "sin": tf.sin,
    "cos": tf.cos,
    "negative": tf.negative,
    "reciprocal": tf.math.reciprocal,
}


def _safe_log(x: tf.Tensor) -> tf.Tensor:
    from returnn.tf.util.basic import safe_log
    return safe_log(x)


def _safe_exp(x: tf.Tensor) -> tf.Tensor:
    from returnn.tf.util.basic import safe_exp
    return safe_exp(x)


# RETURNN's own functions (TFUtil) found by name after TensorFlow's
RETURNN_EXTRA: Dict[str, ActivationFn] = {
    "safe_log": _safe_log,
    "safe_exp": _safe_exp,
    "gelu2": lambda x: x * tf.sigmoid(1.702 * x),
    "gelu3": lambda x: tf.nn.gelu(x, approximate=False),
}
_ALIASES = {"neg": "negative", "none": "identity"}
_BIN_OPS = {"+": tf.add, "-": tf.subtract, "*": tf.multiply, "/": tf.divide}


def _number(text: str) -> Optional[float]:
    try:
        return float(text)
    except ValueError:
        return None


def _by_name(name: str, layer_name: str) -> ActivationFn:
    name = _ALIASES.get(name, name)
    if name in ACTIVATIONS:
        return ACTIVATIONS[name]
    for namespace in (tf.nn, tf, tf.math, tf.compat.v1):
        fn = getattr(namespace, name, None)
        if callable(fn) and not isinstance(fn, type) and not name.startswith("_"):
            return fn
    if name in RETURNN_EXTRA:
        return RETURNN_EXTRA[name]
    raise NetworkError("layer %r: unknown activation %r, as RETURNN (known: %s, or a function of tf.nn / tf / "
                       "tf.math; None or 'identity' for none)" % (layer_name, name, known_list(ACTIVATIONS)))


def _one(spec: str, layer_name: str) -> ActivationFn:
    """One activation in RETURNN's grammar (see the module docstring)."""
    spec = spec.strip()
    if not spec or spec in ("identity", "none"):
        return _identity
    if "(" in spec:
        try:
            return eval("lambda x: %s" % spec, {"tf": tf})  # config code, as RETURNN evaluates it
        except SyntaxError as exc:
            raise NetworkError("layer %r: activation %r: %s" % (layer_name, spec, exc.msg)) from None
    for op in "+-*/":
        if op in spec:
            if spec.count(op) > 1:  # RETURNN: a, b = s.split(op, 2) fails
                raise NetworkError("layer %r: activation %r: RETURNN takes one %r only" % (layer_name, spec, op))
            left, right = spec.split(op, 1)
            parts = []
            for side in (left, right):
                value = _number(side.strip())
                parts.append((lambda x, v=value: tf.cast(v, x.dtype)) if value is not None else _one(side, layer_name))
            a, b = parts
            return lambda x, a=a, b=b, fn=_BIN_OPS[op]: fn(a(x), b(x))
    return _by_name(spec, layer_name)


def get_activation(name: Optional[str], layer_name: str = "?") -> ActivationFn:
    """Returns the function for ``name`` (RETURNN's forms, see the module docstring). Raises
    :class:`NetworkError` naming the layer for an activation RETURNN does not know."""
    if name is None:
        return _identity
    if callable(name):
        return name
    return _one(str(name), layer_name)


def get_activation_with_opts(name: Optional[str], opts: Optional[Dict[str, Any]], layer_name: str = "?"
                             ) -> ActivationFn:
    """:func:`get_activation`, with ``opts`` passed as keyword arguments, as RETURNN's
    ``OutputWithActivation`` calls ``act_func(x, **opts)``: only for a plain function name (RETURNN's
    lookup: ``tf.nn``, ``tf``, ``tf.math``, ``tf.compat.v1``, then its own ``safe_log`` & co.); softmax
    takes none (RETURNN asserts that). Unknown keywords fail here, in one line."""
    if not opts:
        return get_activation(name, layer_name)
    if not isinstance(opts, dict):
        raise NetworkError("layer %r: activation 'opts' must be a dict, got %r" % (layer_name, opts))
    spec = _ALIASES.get(str(name).strip(), str(name).strip())
    if not name or "softmax" in spec or any(c in spec for c in "|(+-*/") or spec == "identity":
        raise NetworkError("layer %r: activation 'opts' %r need one plain activation function name, got %r"
                           % (layer_name, sorted(opts), name))
    if spec in ("safe_log", "safe_exp"):  # RETURNN's own, with their eps (& co.) arguments
        from returnn.tf.util import basic
        fn = getattr(basic, spec)
    else:
        fn = _by_name(spec, layer_name)  # this engine's lambdas (gelu, ...) take no keywords: refused below
    try:
        inspect.signature(fn).bind(None, **opts)
    except (TypeError, ValueError) as exc:
        raise NetworkError("layer %r: activation %r: 'opts' %r do not fit its arguments (%s)"
                           % (layer_name, name, opts, exc)) from None
    return functools.partial(fn, **opts)
