"""A layer's parameters as RETURNN names and lays them out (checkpoints that move both ways).

RETURNN (TF1 variable scopes) names a parameter ``<layer>/<name>``: ``output/W``, ``output/b``,
``lstm/rec/W_re``, ``bn/batch_norm/v2_mean``. A layer here says, per RETURNN parameter, which of
its variables hold it and how: most are the same array under another name (our ``bias`` is
RETURNN's ``b``); some are a different layout of the same numbers (RETURNN's native LSTM orders
the gates (cell-in, input, forget, output), ours (input, cell-in, forget, output); TensorFlow's LSTM
cells keep input and recurrent weights in one ``kernel``).

:class:`Param` is that statement; the conversions are exact permutations, reshapes and
concatenations, so values round-trip bit for bit. Optimizer slots (Adam's moments, ...) have
the shape of their variable and convert the same way.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, List, Sequence, Tuple

import numpy as np
import tensorflow as tf

Arrays = List[np.ndarray]


def _single(values: Arrays) -> np.ndarray:
    return values[0]


def _unsingle(value: np.ndarray) -> Arrays:
    return [value]


@dataclass(frozen=True)
class Param:
    """One RETURNN parameter: ``name`` within the layer's scope (``"W"``, ``"rec/W_re"``), the
    variables here that hold it, RETURNN's ``shape``, and the two conversions
    (``to_returnn(values of variables) -> array``, ``from_returnn(array) -> values of variables``).
    Layouts here are exact (permutations, reshapes, concatenations): values round-trip bit for bit."""

    name: str
    variables: Tuple[tf.Variable, ...]
    shape: Tuple[int, ...]
    to_returnn: Callable[[Arrays], np.ndarray] = _single
    from_returnn: Callable[[np.ndarray], Arrays] = _unsingle
    saveable: bool = True  # False: never written to a checkpoint nor read from one (RETURNN's saveable)
    critical: bool = True  # False: a checkpoint without it is fine (RETURNN's non_critical_for_restore)


def same(name: str, var: tf.Variable) -> Param:
    """``var`` is RETURNN's parameter ``name`` as it is."""
    return Param(name, (var,), tuple(var.shape))


def reshaped(name: str, var: tf.Variable, shape: Sequence[int]) -> Param:
    """``var`` holds RETURNN's ``name`` of ``shape`` with the same numbers in the same order
    (e.g. batch-norm statistics that RETURNN keeps as (1, 1, F))."""
    ours = tuple(var.shape)
    return Param(name, (var,), tuple(shape), lambda v: v[0].reshape(shape), lambda a: [a.reshape(ours)])


def _swap_first_blocks(a: np.ndarray) -> np.ndarray:
    """The last axis as 4 blocks: blocks 0 and 1 exchanged (its own inverse)."""
    n = a.shape[-1] // 4
    return np.concatenate([a[..., n:2 * n], a[..., :n], a[..., 2 * n:]], axis=-1)


def native_lstm_gates(name: str, var: tf.Variable) -> Param:
    """A native-LSTM parameter (``W``, ``W_re``, ``b``): RETURNN's gate order (cell-in, input,
    forget, output), ours (input, cell-in, forget, output)."""
    return Param(name, (var,), tuple(var.shape), lambda v: _swap_first_blocks(v[0]),
                 lambda a: [_swap_first_blocks(a)])


def stacked_rows(name: str, variables: Sequence[tf.Variable], swap_gates: bool = False) -> Param:
    """RETURNN's ``name`` is the variables stacked along the first axis (a TensorFlow cell's
    ``kernel`` = [input weights; recurrent weights]); ``swap_gates`` as :func:`native_lstm_gates`."""
    variables = tuple(variables)
    rows = [int(v.shape[0]) for v in variables]
    shape = (sum(rows),) + tuple(variables[0].shape[1:])
    conv = _swap_first_blocks if swap_gates else (lambda a: a)

    def to_returnn(values: Arrays) -> np.ndarray:
        return conv(np.concatenate(values, axis=0))

    def from_returnn(value: np.ndarray) -> Arrays:
        value = conv(value)
        return list(np.split(value, np.cumsum(rows)[:-1], axis=0))
    return Param(name, variables, shape, to_returnn, from_returnn)


def valid_scope_name(name: str) -> str:
    """A layer name as RETURNN makes it a TensorFlow scope name (its ``get_valid_scope_name_from_str``:
    non-ASCII dropped, ``:(){}&+-*'" ,`` -> ``__``, a leading ``_-\\/`` -> ``.<ord>.``)."""
    name = "".join(c for c in name if ord(c) < 128)
    name = "".join("__" if c in ":(){}&+-*'\" ," else c for c in name)
    if name[:1] and name[:1] in "_-\\/":
        name = ".%i.%s" % (ord(name[0]), name[1:])
    return name


class EngineScope(str):
    """A ``name_scope`` this engine sets on a layer to place its parameters where RETURNN does:
    ``own``: RETURNN's layer had a name_scope of its own (else this stands in for RETURNN's default
    scope, e.g. a masked_computation's unit in the masked layer's scope, a layer of an extra net
    sharing its main layer's parameters; a rec or rnn_cell layer then keeps its ``rec/`` subscope);
    ``net_relative``: the scope is relative to the layer's network (``"/x"``: absolute), not to the
    subnetwork prefix of its flattened name (a subnetwork's own name_scope moves its layers)."""

    def __new__(cls, value: str, own: bool = False, net_relative: bool = False) -> "EngineScope":
        obj = super().__new__(cls, value)
        obj.own, obj.net_relative = own, net_relative
        return obj

    def __reduce__(self):
        return EngineScope, (str(self), self.own, self.net_relative)


def is_own_name_scope(name_scope: Any) -> bool:
    """Whether the layer has a ``name_scope`` of its own (RETURNN's ``name_scope is not None``)."""
    return name_scope is not None and (not isinstance(name_scope, EngineScope) or name_scope.own)


def moved_by_subnetwork(sub_name: str, sub_scope: Any, inner_name: str, inner_scope: Any) -> Any:
    """The name_scope of layer ``inner_name`` of subnetwork ``sub_name`` (flattened to
    ``sub_name/inner_name``) when the subnetwork has the name_scope ``sub_scope``: RETURNN places
    the subnetwork's layers in the subnetwork's scope, so they move along with it."""
    if sub_scope is None:
        return inner_scope
    rel, absolute = layer_scope(inner_name, inner_scope)
    if absolute:
        return inner_scope
    base, base_absolute = layer_scope(sub_name, sub_scope)
    full = "/".join(p for p in (base, rel) if p)
    return EngineScope(("/" if base_absolute else "") + full, own=is_own_name_scope(inner_scope), net_relative=True)


def layer_scope(name: str, name_scope: Any = None) -> Tuple[str, bool]:
    """RETURNN's variable scope of layer ``name`` (``"sub/x"``: layer ``x`` of subnetwork ``sub``)
    relative to its network, and whether it is absolute; ``name_scope`` is the layer option
    (None: the layer's own name; ``""``: its network's scope; ``"/x"``: absolute ``x``)."""
    parts = [valid_scope_name(p) for p in name.split("/")]
    prefix = parts[:-1]
    if isinstance(name_scope, EngineScope) and name_scope.net_relative:
        return (name_scope[1:], True) if name_scope.startswith("/") else (str(name_scope), False)
    if name_scope is None:
        return "/".join(parts), False
    if name_scope.startswith("/"):
        return name_scope[1:], True
    return "/".join(prefix + ([name_scope] if name_scope else [])), False
