"""RETURNN's ``reuse_params`` map entries ``{"layer_output": LAYER, "shape": DIMS}``: the parameter
*is* that layer's output, in RETURNN's layout of the parameter (returnn_common's ``nn.Parameter``:
a ``variable`` layer whose output is its variable).

The map is keyed by RETURNN's parameter names in the layer's scope (``W``, ``W_re``, ``b`` of a
native LSTM; ``lstm_cell/kernel`` = [W; W_re] of TensorFlow's cells; ``batch_norm/v2_mean``). This
engine keeps some parameters in another layout (:mod:`returnn.tf.layers.rec_params`: LSTM gates in
another order, the kernel of a cell as two matrices): :func:`returnn_view` says, for one of this
engine's parameters, which RETURNN parameter holds it and how to get it from there. The layer then
reads the variable itself (the same variable: trained, updated and checkpointed as the
``variable`` layer's) where the layouts agree, else a tensor computed from it in every step.

Only ``variable`` layers (without batch or time axes) are taken as ``layer_output`` here; the
others (a computed parameter, e.g. weight normalisation) are refused in one line.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Sequence, Tuple

import tensorflow as tf

from returnn.errors import NetworkError

Convert = Optional[Callable[[tf.Tensor], tf.Tensor]]  # RETURNN's layout -> this engine's (None: the same)


def _swap_gates(x: tf.Tensor) -> tf.Tensor:
    """The last axis as 4 gate blocks, blocks 0 and 1 exchanged (RETURNN's native LSTM <-> ours)."""
    n = int(x.shape[-1]) // 4
    return tf.concat([x[..., n:2 * n], x[..., :n], x[..., 2 * n:]], axis=-1)


def _rows(first: bool, n: int, then: Convert = None) -> Callable[[tf.Tensor], tf.Tensor]:
    """The first (or last) ``n`` rows of a stacked kernel [W; W_re], then ``then``."""
    def conv(x: tf.Tensor) -> tf.Tensor:
        part = x[:n] if first else x[int(x.shape[0]) - n:]
        return then(part) if then is not None else part
    return conv


def returnn_view(layer: Any, name: str, shape: Sequence[int]) -> Optional[Tuple[str, Convert]]:
    """(RETURNN's parameter name in the layer's scope, conversion) for this engine's parameter
    ``name`` of ``layer`` (shape ``shape``); None when not known here."""
    from returnn.tf.layers.base import Layer
    from returnn.tf.layers.rec_params import unit_layout
    if type(layer).returnn_params is Layer.returnn_params:  # its parameters as they are in RETURNN
        return name, None
    if name.startswith("batch_norm/") and name.count("/") == 1:  # param_version 2: (F,) as here
        return "batch_norm/v2_" + name[len("batch_norm/"):], None
    unit = getattr(layer, "unit", None)
    if not isinstance(unit, str) or name not in ("W", "W_re", "b"):
        return None
    layout = unit_layout(unit, bool(getattr(layer, "in_rnn_cell", False)))
    if layout == "native":
        return name, _swap_gates
    if layout == "native_lowmem":
        return ("b", _swap_gates) if name == "b" else ("W", _rows(name == "W", int(shape[0]), _swap_gates))
    if layout in ("lstm_cell", "basic_lstm_cell", "basic_rnn_cell"):
        if name == "b":
            return layout + "/bias", None
        return layout + "/kernel", _rows(name == "W", int(shape[0]))
    return None


def layer_output_param(where: str, layer_name: str, dims: Any, shape: Sequence[int], convert: Convert,
                       resolve: Callable[[str, Any], Any], computed: Callable[..., Any]) -> Any:
    """The parameter of shape ``shape`` from the ``variable`` layer ``layer_name`` (its axes in the
    order of ``dims``, the entry's ``shape``, when given): its variable, or a computed tensor."""
    target = resolve(where, layer_name)
    var = getattr(target, "var", None) if getattr(target, "layer_class", None) == "variable" else None
    if not isinstance(var, tf.Variable) or target.output.batch_dim_axis is not None or \
            target.output.time_dim_axis is not None:
        raise NetworkError("%s: 'reuse_params' 'layer_output' %r: only a variable layer (without batch or time "
                           "axes) is supported here as a parameter" % (where, layer_name))
    perm = None
    if dims is not None:
        have = list(target.output.dims)
        if not isinstance(dims, (list, tuple)) or len(dims) != len(have) or \
                any(sum(1 for h in have if h == d) != 1 for d in dims):
            raise NetworkError("%s: 'reuse_params' 'layer_output' %r: 'shape' %r does not match its axes %s"
                               % (where, layer_name, dims, target.output.short_repr()))
        perm = [[i for i, h in enumerate(have) if h == d][0] for d in dims]
        if perm == list(range(len(perm))):
            perm = None
    if perm is None and convert is None:
        if tuple(var.shape) != tuple(shape):
            raise NetworkError("%s: 'reuse_params' 'layer_output' %r has shape %s, the parameter needs %s"
                               % (where, layer_name, tuple(var.shape), tuple(shape)))
        return var

    def value() -> tf.Tensor:
        x = tf.convert_to_tensor(var)
        x = tf.transpose(x, perm) if perm is not None else x
        return convert(x) if convert is not None else x
    out = value()
    if tuple(out.shape) != tuple(shape):
        raise NetworkError("%s: 'reuse_params' 'layer_output' %r gives the parameter the shape %s, it needs %s"
                           % (where, layer_name, tuple(out.shape), tuple(shape)))
    return computed(value, shape, var.dtype)


def map_entry(entries: Mapping[str, Any], layer: Any, name: str, shape: Sequence[int]) -> Tuple[Optional[str], Convert]:
    """The key of the ``map`` entry (with ``layer_output``) that holds this engine's parameter
    ``name``, and its conversion; (None, None) when no such entry."""
    if not any(getattr(e, "layer_output", None) for e in entries.values()):
        return None, None
    view = returnn_view(layer, name, shape)
    if view is not None and view[0] in entries and getattr(entries[view[0]], "layer_output", None):
        return view
    return None, None
