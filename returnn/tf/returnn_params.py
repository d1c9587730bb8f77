"""The parameters of a network under RETURNN's names and layouts (``output/W``, ``lstm/rec/W_re``,
``dec/rec/s/rec/lstm_cell/kernel``, ``sub/x/b``): what checkpoints store, ``preload_from_files``,
``load`` and parameter copies between networks read by, and what RETURNN itself reads.

Scopes as RETURNN makes them: a layer's parameters live in its name's scope (its ``name_scope``
option may change that), a subnetwork's layer ``sub/x`` in ``sub/x/``, a rec unit's sub-layer
``s`` of layer ``dec`` in ``dec/rec/s/``; inside that scope each layer names its own
(:meth:`returnn.tf.layers.base.Layer.returnn_params`). A variable shared by ``reuse_params`` is
listed once, under the layer that made it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterator, List, Mapping, Optional, Tuple

import numpy as np
import tensorflow as tf

from returnn.errors import ConfigError, NetworkError
from returnn.tf.layers.params import Param, is_own_name_scope, layer_scope


@dataclass(frozen=True)
class NetParam:
    """A network parameter: RETURNN's full ``name``, the ``layer`` (this network's name) that made it."""

    name: str
    layer: str
    param: Param

    @property
    def shape(self) -> Tuple[int, ...]:
        return self.param.shape

    def value(self) -> np.ndarray:
        """The value in RETURNN's layout."""
        return self.param.to_returnn([v.numpy() for v in self.param.variables])

    def convert(self, slots: List[tf.Variable]) -> np.ndarray:
        """Values of per-variable ``slots`` (an optimizer's, same shapes as the variables) in
        RETURNN's layout of this parameter."""
        return self.param.to_returnn([s.numpy() for s in slots])

    def assign(self, value: np.ndarray, variables: Optional[List[tf.Variable]] = None) -> None:
        """Sets the variables (or ``variables``, e.g. optimizer slots of them) from RETURNN's layout."""
        for var, part in zip(variables or self.param.variables, self.param.from_returnn(np.asarray(value))):
            var.assign(part.astype(var.dtype.as_numpy_dtype, copy=False))


def _layer_entries(network) -> Iterator[Tuple[str, str, object]]:
    """(our layer name, RETURNN scope, layer) of every layer, rec-unit sub-layers included."""
    for name, layer in network.layers.items():
        scope, _ = layer_scope(name, layer.opts.get("name_scope"))
        yield name, scope, layer
        yield from _sub_entries(layer, scope)


def _sub_entries(layer, scope: str) -> Iterator[Tuple[str, str, object]]:
    subs = layer.sub_layers() if hasattr(layer, "sub_layers") else {}
    for sub, sub_layer in subs.items():
        rel, absolute = layer_scope(sub, sub_layer.opts.get("name_scope"))
        # a rec unit's sub-layers live in "<rec>/rec/" (directly in its scope when it has a name_scope); a class
        # may say otherwise (cond: directly in its scope)
        inner = "" if _rec_scope_dropped(layer) else getattr(layer, "sub_param_scope", "rec")
        sub_scope = rel if absolute else "/".join(p for p in (scope, inner, rel) if p)
        yield sub_layer.layer_name, sub_scope, sub_layer
        yield from _sub_entries(sub_layer, sub_scope)


_REC_SCOPE = "rec/"


def _rec_scope_dropped(layer) -> bool:
    """RETURNN's rec and rnn_cell layers put their variables (a unit's sub-layers too) under "rec/" in
    their scope, unless the layer has a ``name_scope`` (any, "" too): then directly in that scope."""
    return layer.layer_class in ("rec", "rnn_cell") and is_own_name_scope(layer.opts.get("name_scope"))


def _param_name(layer, name: str) -> str:
    """A parameter's name in its layer's scope (see :func:`_rec_scope_dropped`)."""
    if name.startswith(_REC_SCOPE) and _rec_scope_dropped(layer):
        return name[len(_REC_SCOPE):]
    return name


def network_params(network) -> Dict[str, NetParam]:
    """RETURNN name -> :class:`NetParam` of every parameter of ``network``, in construction order.
    Every variable of the network has exactly one name (else a NetworkError naming the layer)."""
    out: Dict[str, NetParam] = {}
    covered: Dict[int, str] = {}
    for name, scope, layer in _layer_entries(network):
        for param in layer.all_returnn_params():
            full = "/".join(p for p in (scope, _param_name(layer, param.name)) if p)
            if full in out:
                raise NetworkError("layer %r: its parameter %r has the same RETURNN name as one of layer %r "
                                   "(name_scope?)" % (name, full, out[full].layer))
            out[full] = NetParam(full, name, param)
            for var in param.variables:
                covered[id(var)] = full
    for layer_name, layer in _all_layers(network):
        for var in layer.variables:
            if id(var) not in covered:
                raise NetworkError("layer %r: internal error: variable %r has no RETURNN parameter name"
                                   % (layer_name, var.name))
    return out


def _all_layers(network) -> Iterator[Tuple[str, object]]:
    for name, _, layer in _layer_entries(network):
        yield name, layer


def returnn_param_shapes(network, saveable_only: bool = False) -> Dict[str, Tuple[int, ...]]:
    """RETURNN name -> RETURNN's shape of every parameter of ``network`` (``saveable_only``: of those a
    checkpoint stores, RETURNN's get_saveable_params_list)."""
    return {name: p.shape for name, p in network_params(network).items() if p.param.saveable or not saveable_only}


def returnn_param_values(network, saveable_only: bool = True) -> Dict[str, np.ndarray]:
    """RETURNN name -> value in RETURNN's layout (the parameters a checkpoint stores)."""
    return {name: p.value() for name, p in network_params(network).items() if p.param.saveable or not saveable_only}


def set_returnn_param_values(network, values: Mapping[str, np.ndarray], ignore_missing: bool = False,
                             where: str = "the given values") -> List[str]:
    """Sets the parameters of ``network`` from ``values`` (RETURNN names and layouts, e.g. read
    from a RETURNN checkpoint). A shape that differs, or a missing parameter (unless
    ``ignore_missing`` or it is not critical), is a ConfigError naming it and ``where``; nothing is
    assigned then. Returns the names of the parameters that kept their values."""
    params = network_params(network)
    missing = [n for n, p in params.items() if p.param.saveable and n not in values]
    for name, p in params.items():
        if name in values and tuple(np.shape(values[name])) != p.shape:
            raise ConfigError("%s: parameter %r has shape %s there but %s in the network (layer %r: changed n_out, "
                              "input or layer options?)" % (where, name, tuple(np.shape(values[name])), p.shape, p.layer))
    critical = [n for n in missing if params[n].param.critical]
    if critical and not ignore_missing:
        raise ConfigError("%s: no value for parameter(s) %s" % (where, _names(critical)))
    for name, p in params.items():
        if p.param.saveable and name in values:
            p.assign(values[name])
    return missing


def _names(names: List[str], limit: int = 6) -> str:
    shown = ", ".join(repr(n) for n in names[:limit])
    return shown + (" and %i more" % (len(names) - limit) if len(names) > limit else "")


def check_rec_params_in_root_scope(network) -> None:
    """RETURNN's rec (and rnn_cell) layer collects its parameters as the variables under its scope's name plus "/":
    in the root scope (``name_scope`` "" at the top level, or "/"; also a masked_computation's unit, which takes the
    masked layer's name_scope) that prefix is "/", which no variable has, so the layer keeps none: RETURNN never
    trains them (nor saves a cell unit's). Refused in one line instead of training what RETURNN leaves fixed."""
    for name, scope, layer in _layer_entries(network):
        if scope or getattr(layer, "layer_class", None) not in ("rec", "rnn_cell"):
            continue
        if list(layer.all_returnn_params()) or any(
                list(sub.all_returnn_params()) for _, _, sub in _sub_entries(layer, scope)):
            raise NetworkError("%s: its parameters are in the root scope (name_scope '' or '/'), where RETURNN's %s "
                               "layer finds none of them (it looks under '/'), so RETURNN neither trains nor saves "
                               "them; give the layer a non-empty name_scope" % (layer.desc, layer.layer_class))
