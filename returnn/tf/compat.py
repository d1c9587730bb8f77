"""TensorFlow 1 names for config code, on TensorFlow 2.

RETURNN configs written for TF1 call ``tf.log``, ``tf.random_uniform``, ``tf.to_float``,
``tf.Print``, ``tf.reduce_sum(x, keep_dims=True)``, ... through ``import tensorflow as tf``.
:func:`tf_with_v1_names` is a view of the ``tensorflow`` module for such code:

- a name TF2 has is TF2's own object (so configs written for TF2 keep TF2's semantics, e.g. the
  broadcasting ``tf.where``);
- a name only ``tf.compat.v1`` has (``log``, ``to_float``, ``random_uniform``, ``Print``,
  ``nn.softmax_cross_entropy_with_logits_v2``, ...) comes from there, in submodules too;
- a TF2 function called with keyword arguments only its TF1 namesake accepts (``keep_dims``,
  ``reduction_indices``, ``squeeze_dims``, ``keep_prob``, ...) runs as the TF1 function;
- ``tf.where(cond, x, y)`` with a vector ``cond`` and ``x`` of higher rank selects whole rows,
  as TF1 did, unless ``cond``'s static size says it matches ``x``'s last axis (TF2's broadcast).

Config files get this view when they ``import tensorflow`` (see :mod:`returnn.config_env`); the
eval layer can hand it to its strings as ``tf``. RETURNN's ``returnn.tf.compat`` names ``v1`` and
``v2`` are here too (``from returnn.tf.compat import v1 as tf`` is common in configs).
"""
from __future__ import annotations

import functools
import inspect
import types
from typing import Any, Callable, Dict, Optional

import tensorflow as tf

v1 = tf.compat.v1
v2 = tf.compat.v2
have_tf2 = True  # RETURNN configs test this flag

_MISSING = object()
_NOT_PROXIED = frozenset(["compat"])  # tf.compat.v1 / v2 stay the real modules


class TF1FallbackModule(types.ModuleType):
    """A TF2 module whose missing names are looked up in its ``tf.compat.v1`` counterpart."""

    def __init__(self, primary: types.ModuleType, fallback: Optional[types.ModuleType], name: str):
        super().__init__(name)
        self.__dict__["_tf1_primary"] = primary
        self.__dict__["_tf1_fallback"] = fallback

    def __getattr__(self, name: str) -> Any:  # only called for names not cached yet
        primary, fallback = self.__dict__["_tf1_primary"], self.__dict__["_tf1_fallback"]
        value = getattr(primary, name, _MISSING)
        old = getattr(fallback, name, _MISSING) if fallback is not None else _MISSING
        if value is _MISSING:
            if old is _MISSING:
                raise AttributeError("module %r has no attribute %r (neither in TensorFlow 2 nor in tf.compat.v1)"
                                     % (self.__name__, name))
            value = _wrap(old, None, "%s.%s" % (self.__name__, name))
        else:
            value = _wrap(value, None if old is _MISSING else old, "%s.%s" % (self.__name__, name))
        if not name.startswith("__"):
            self.__dict__[name] = value
        return value

    def __dir__(self):
        names = set(dir(self.__dict__["_tf1_primary"]))
        if self.__dict__["_tf1_fallback"] is not None:
            names.update(dir(self.__dict__["_tf1_fallback"]))
        return sorted(names)

    def __repr__(self) -> str:
        return "<module %r (TensorFlow 2 with tf.compat.v1 names)>" % self.__name__


def _where(condition, x=None, y=None, name=None):
    """TF2's ``where``; a rank-1 condition with higher-rank values selects rows (TF1's rule)."""
    if x is not None and y is not None:
        condition = tf.convert_to_tensor(condition)
        x = tf.convert_to_tensor(x)
        n, first, last = (condition.shape[0] if condition.shape.rank == 1 else None,
                          x.shape[0] if x.shape.rank else None, x.shape[-1] if x.shape.rank else None)
        rows = n is None or n == first or first is None
        if condition.shape.rank == 1 and x.shape.rank is not None and x.shape.rank > 1 and rows \
                and not (n is not None and n == last and n != first):
            condition = tf.reshape(condition, tf.concat([tf.shape(condition), tf.ones([x.shape.rank - 1], tf.int32)], 0))
    return tf.where(condition, x, y, name=name)


# Names whose TF1 and TF2 meanings differ in a way the arguments tell apart.
_SEMANTIC_SHIMS: Dict[str, Callable] = {"tensorflow.where": _where}


def _wrap(value: Any, old: Any, qualname: str) -> Any:
    """``value`` as config code sees it: submodules proxied, functions with a TF1 keyword fallback."""
    if qualname in _SEMANTIC_SHIMS:
        return _SEMANTIC_SHIMS[qualname]
    if isinstance(value, types.ModuleType):
        if qualname.rsplit(".", 1)[-1] in _NOT_PROXIED:
            return value
        return TF1FallbackModule(value, old if isinstance(old, types.ModuleType) else None, qualname)
    if old is None or old is value or isinstance(value, type) or not inspect.isroutine(value) \
            or not inspect.isroutine(old):
        return value
    return _keyword_fallback(value, old)


def _parameters(func: Callable) -> Optional[Dict[str, inspect.Parameter]]:
    try:
        return dict(inspect.signature(func).parameters)
    except (TypeError, ValueError):
        return None


def _accepts(params: Optional[Dict[str, inspect.Parameter]], kwargs: Dict[str, Any]) -> bool:
    if params is None or any(p.kind == p.VAR_KEYWORD for p in params.values()):
        return True
    return all(k in params for k in kwargs)


def _keyword_fallback(new: Callable, old: Callable) -> Callable:
    """Calls ``new``, or ``old`` when only ``old`` accepts the keyword arguments given."""
    signatures: Dict[str, Any] = {}

    @functools.wraps(new)
    def call(*args, **kwargs):
        if kwargs:
            if not signatures:
                signatures["new"], signatures["old"] = _parameters(new), _parameters(old)
            if not _accepts(signatures["new"], kwargs) and _accepts(signatures["old"], kwargs):
                return old(*args, **kwargs)
        return new(*args, **kwargs)

    return call


_tf_view: Optional[TF1FallbackModule] = None


def tf_with_v1_names() -> TF1FallbackModule:
    """The ``tensorflow`` module as config code sees it (one shared instance)."""
    global _tf_view
    if _tf_view is None:
        _tf_view = TF1FallbackModule(tf, v1, "tensorflow")
    return _tf_view
