"""Whether a checkpoint fits the network of the config, said per layer and parameter.

Before restoring, the parameters stored in a checkpoint (RETURNN's names, ``layer/W``) are
compared with the network's (:mod:`returnn.tf.returnn_params`): a layer renamed, removed or
added, and a parameter whose shape changed are named with the checkpoint. Names that are no
parameters (``global_step``, optimizer slots ``<param>/Adam``, this engine's ``_engine/...``) are
left out. ``load_ignore_missing_vars`` (RETURNN's key): parameters of the network that the
checkpoint lacks keep their initialisation, and checkpoint layers the network lacks are left
out, with a warning; shapes must still agree.

The ``legacy_*`` functions do the same for the TensorFlow object checkpoints of earlier versions of
this engine (``network/layers/<layer>/<param>``).
"""
from __future__ import annotations

import re
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import tensorflow as tf


_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"
_PREFIX = "network/"


def _escape(name: str) -> str:
    """A name as TensorFlow's object checkpoints write it in a key ('.' -> '..', '/' -> '.S')."""
    return name.replace(".", "..").replace("/", ".S")


def _unescape(name: str) -> str:
    out, i = [], 0
    while i < len(name):
        if name[i] == "." and i + 1 < len(name):
            out.append("/" if name[i + 1] == "S" else name[i + 1])
            i += 2
        else:
            out.append(name[i])
            i += 1
    return "".join(out)


def network_variables(network: tf.Module) -> List[Tuple[str, str, str, tf.Variable]]:
    """(checkpoint key, layer, parameter, variable) of every variable of ``network``."""
    out = []
    for path, var in network._flatten(predicate=lambda v: isinstance(v, tf.Variable), with_path=True):
        parts = [str(p) for p in path]
        if len(parts) > 1 and parts[0] == "layers":
            layer, param = parts[1], "/".join(parts[2:])
        else:
            layer, param = parts[0], "/".join(parts[1:])
        out.append((_PREFIX + "/".join(_escape(p) for p in parts) + _SUFFIX, layer, param, var))
    return out


def network_params(network: tf.Module) -> Dict[str, Tuple[str, str, tuple]]:
    """Checkpoint key -> (layer, parameter, shape) of every variable of ``network``."""
    return {key: (layer, param, tuple(var.shape)) for key, layer, param, var in network_variables(network)}


def checkpoint_params(shapes: Mapping[str, Sequence[int]]) -> Dict[str, Tuple[str, str, tuple]]:
    """Checkpoint key -> (layer, parameter, shape) of the network parameters stored in a checkpoint
    (``shapes``: its variable-to-shape map; optimizer slots and other objects left out)."""
    out = {}
    for key, shape in shapes.items():
        if not (key.startswith(_PREFIX) and key.endswith(_SUFFIX)) or ".OPTIMIZER_SLOT" in key:
            continue
        parts = [_unescape(p) for p in key[len(_PREFIX):-len(_SUFFIX)].split("/")]
        if len(parts) > 1 and parts[0] == "layers":
            layer, param = parts[1], "/".join(parts[2:])
        else:
            layer, param = parts[0], "/".join(parts[1:])
        out[key] = (layer, param, tuple(int(d) for d in shape))
    return out


def _by_layer(entries) -> Dict[str, List[str]]:
    layers: Dict[str, List[str]] = {}
    for layer, param, _ in entries:
        layers.setdefault(layer, []).append(param)
    return layers


def _describe(layers: Dict[str, List[str]]) -> str:
    return ", ".join("'%s' (%s)" % (layer, ", ".join(sorted(params))) for layer, params in sorted(layers.items()))


def legacy_misfit(shapes: Mapping[str, Sequence[int]], network: tf.Module) -> Optional[str]:
    """What does not fit between the parameters stored in a checkpoint (``shapes``: its
    variable-to-shape map) and ``network``, said by layer and parameter; None if all fits."""
    have = network_params(network)
    stored = checkpoint_params(shapes)
    for key, (layer, param, shape) in sorted(have.items()):
        if key in stored and stored[key][2] != shape:
            return ("layer '%s' parameter '%s' has shape %s in the checkpoint but %s in the network (changed n_out, "
                    "input or layer options?)" % (layer, param, stored[key][2], shape))
    missing = _by_layer(v for k, v in have.items() if k not in stored)
    extra = _by_layer(v for k, v in stored.items() if k not in have)
    # a parameter of a layer that exists on both sides is a changed layer, not a renamed one
    new_layers = {l: p for l, p in missing.items() if l not in _by_layer(stored.values())}
    gone_layers = {l: p for l, p in extra.items() if l not in _by_layer(have.values())}
    return _mismatch_text(missing, extra, new_layers, gone_layers)


def legacy_removed_layers(shapes: Mapping[str, Sequence[int]], network: tf.Module) -> List[str]:
    """Layers with parameters in the checkpoint that the network does not have at all (TensorFlow's
    restore ignores such values silently)."""
    have = {layer for layer, _, _ in network_params(network).values()} | set(getattr(network, "layers", None) or ())
    return sorted({layer for layer, _, _ in checkpoint_params(shapes).values()} - have)


# ---- RETURNN-named checkpoints
_SLOT_SUFFIX = re.compile(r"/(Adam(_1)?|Momentum|RMSProp(_[12])?|Adagrad|Adadelta(_1)?|_engine_[^/]*)$")
NOT_PARAMS = ("global_step", "beta1_power", "beta2_power",
              "global_random_generator/random_generator/StateVar")  # RETURNN's generator (param_noise.py)


def stored_params(shapes: Mapping[str, Sequence[int]]) -> Dict[str, Tuple[int, ...]]:
    """The network parameters among a checkpoint's names (its variable-to-shape map)."""
    return {k: tuple(int(d) for d in v) for k, v in shapes.items()
            if k not in NOT_PARAMS and not k.startswith("_") and not _SLOT_SUFFIX.search(k)}


def _split(name: str, params) -> Tuple[str, str]:
    """(layer, parameter) of a RETURNN name: by the network's parameter of that name, else the
    first scope is the layer."""
    if name in params:
        layer = params[name].layer
        return layer, name[len(name) - len(params[name].param.name):] if params[name].param.name else name
    layer, _, param = name.partition("/")
    return layer, param


def named_misfit(shapes: Mapping[str, Sequence[int]], params: Mapping[str, "NetParam"]) -> Optional[str]:
    """What does not fit between the parameters stored in a checkpoint (``shapes``) and the
    network's (``params``: :func:`returnn.tf.returnn_params.network_params`); None if all fits."""
    stored = stored_params(shapes)
    for name, p in params.items():
        if name in stored and stored[name] != p.shape:
            layer, param = _split(name, params)
            return ("layer '%s' parameter '%s' has shape %s in the checkpoint but %s in the network (changed n_out, "
                    "input or layer options?)" % (layer, param, stored[name], p.shape))
    missing = _by_layer((*_split(n, params), None) for n, p in params.items()
                        if n not in stored and p.param.saveable and p.param.critical)
    extra = _by_layer((*_split(n, params), None) for n in stored if n not in params)
    have_layers = {_split(n, params)[0] for n in params}
    stored_layers = {_split(n, params)[0] for n in stored}
    new_layers = {l: p for l, p in missing.items() if l not in stored_layers}
    gone_layers = {l: p for l, p in extra.items() if l not in have_layers}
    return _mismatch_text(missing, extra, new_layers, gone_layers)


def named_removed_layers(shapes: Mapping[str, Sequence[int]], params: Mapping[str, "NetParam"],
                         layer_names) -> List[str]:
    """Layers with parameters in the checkpoint that the network does not have at all (neither
    built nor in its dict)."""
    have = {_split(n, params)[0] for n in params} | set(layer_names)
    return sorted({_split(n, params)[0] for n in stored_params(shapes) if n not in params} - have)


def _mismatch_text(missing: Dict[str, List[str]], extra: Dict[str, List[str]], new_layers: Dict[str, List[str]],
                   gone_layers: Dict[str, List[str]]) -> Optional[str]:
    """The line for parameters (by layer) the checkpoint lacks (``missing``) and has in excess
    (``extra``); ``new_layers`` / ``gone_layers``: those of them whose whole layer is new / gone.
    None when nothing differs."""
    parts = []
    if missing:
        parts.append("the checkpoint lacks %s %s of the network" % ("layer" if new_layers == missing else "parameters of layer",
                                                                     _describe(missing)))
    if extra:
        parts.append("the network lacks %s %s of the checkpoint" % ("layer" if gone_layers == extra else "parameters of layer",
                                                                    _describe(extra)))
    if not parts:
        return None
    return "; ".join(parts) + (" (renamed?)" if new_layers and gone_layers else (" (removed?)" if gone_layers else ""))
