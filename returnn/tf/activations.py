"""Activation functions by name, as used in the ``activation`` option of layers.

Names follow RETURNN's configs. ``"a|b"`` chains activations left to right, i.e. ``b(a(x))``.
``None``, ``""``, ``"identity"`` and ``"linear"`` mean no activation.
"""
from __future__ import annotations

from typing import Callable, Dict, Optional

import tensorflow as tf

from returnn.errors import NetworkError, known_list

ActivationFn = Callable[[tf.Tensor], tf.Tensor]


def _identity(x: tf.Tensor) -> tf.Tensor:
    return x


ACTIVATIONS: Dict[str, ActivationFn] = {
    "identity": _identity,
    "linear": _identity,
    "relu": tf.nn.relu,
    "relu6": tf.nn.relu6,
    "leaky_relu": tf.nn.leaky_relu,
    "elu": tf.nn.elu,
    "selu": tf.nn.selu,
    "gelu": lambda x: tf.nn.gelu(x, approximate=False),
    "gelu_tanh": lambda x: tf.nn.gelu(x, approximate=True),
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


def get_activation(name: Optional[str], layer_name: str = "?") -> ActivationFn:
    """Returns the function for ``name`` (possibly an ``"a|b"`` chain; a part may carry a factor,
    ``"2*sigmoid"``, as RETURNN allows).

    Raises :class:`NetworkError` naming the layer for an unknown activation.
    """
    if name is None:
        return _identity
    if callable(name):
        return name
    parts = [p.strip() for p in str(name).split("|") if p.strip()]
    fns = []
    for part in parts:
        factor = None
        if "*" in part:
            head, _, rest = part.partition("*")
            try:
                factor, part = float(head), rest.strip()
            except ValueError:
                pass
        if part not in ACTIVATIONS:
            raise NetworkError("layer %r: unknown activation %r (known: %s)" % (layer_name, part, known_list(ACTIVATIONS)))
        fn = ACTIVATIONS[part]
        fns.append(fn if factor is None else (lambda x, fn=fn, factor=factor: factor * fn(x)))
    if not fns:
        return _identity
    if len(fns) == 1:
        return fns[0]

    def chained(x: tf.Tensor) -> tf.Tensor:
        for fn in fns:
            x = fn(x)
        return x

    return chained

