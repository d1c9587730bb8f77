"""Which network each epoch trains, and how parameters move from one network to the next.

The net dict of an epoch comes from ``pretrain`` (:mod:`returnn.pretrain`), from the config's
``get_network(epoch=...)`` function, or is the fixed ``network``. Keys starting with ``#`` are not
layers: ``#config`` overrides config keys for that epoch (``batch_size``, ``learning_rate``, ...),
``#copy_param_mode`` says how parameters are carried over, ``#repetition`` is pretrain's.

When the dict changes, the engine builds a new network and copies every parameter of the old one
whose layer and attribute path match (``"lstm0/kernel"``) and whose shape is the same. Other
parameters keep their fresh initialisation, with RETURNN's ``copy_param_mode``: ``"subset"`` copies
the overlapping leading block of a parameter whose shape grew or shrank, ``"reset"`` copies nothing;
in pretrain epochs output layers are not copied when ``copy_output_layer`` is off.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

import numpy as np
import tensorflow as tf

from returnn.errors import ConfigError
from returnn.pretrain import Pretrain, pretrain_from_config

NetDict = Dict[str, Any]
META_PREFIX = "#"


def split_net_dict(net_dict: NetDict) -> Tuple[NetDict, NetDict]:
    """(layers, meta entries like ``#config``)."""
    layers = {k: v for k, v in net_dict.items() if not str(k).startswith(META_PREFIX)}
    meta = {k: v for k, v in net_dict.items() if str(k).startswith(META_PREFIX)}
    return layers, meta


class NetworkSchedule:
    """The net dict of each epoch."""

    def __init__(self, network: Optional[NetDict], pretrain: Optional[Pretrain] = None,
                 get_network: Optional[Callable[..., NetDict]] = None):
        if network is None and get_network is None:
            raise ConfigError("config has no 'network' (the layer dict) and no 'get_network'")
        if get_network is not None and not callable(get_network):
            raise ConfigError("config key 'get_network': expected a function get_network(epoch, **kwargs)")
        self.network = network
        self.pretrain = pretrain
        self.get_network = get_network

    @classmethod
    def from_config(cls, config) -> "NetworkSchedule":
        return cls(config.typed_value("network"), pretrain_from_config(config), config.typed_value("get_network"))

    @property
    def changes_per_epoch(self) -> bool:
        """Whether the network may differ between epochs."""
        return self.pretrain is not None or self.get_network is not None

    @property
    def pretrain_epochs(self) -> int:
        return self.pretrain.get_train_num_epochs() if self.pretrain else 0

    def is_pretrain_epoch(self, epoch: int) -> bool:
        return self.pretrain is not None and epoch <= self.pretrain_epochs

    def net_dict_for_epoch(self, epoch: int) -> NetDict:
        """The full dict (layers and ``#`` entries) the network of ``epoch`` is built from."""
        if self.is_pretrain_epoch(epoch):
            net = self.pretrain.get_network_json_for_epoch(epoch)
        elif self.get_network is not None:
            # in a graph of its own, as RETURNN runs config code in graph mode (code that makes ops and runs
            # them in a tf.compat.v1.Session, e.g. debug prints of jotix16's training pipeline)
            with tf.Graph().as_default():
                net = self.get_network(epoch=epoch)
            if not isinstance(net, dict) or not net:
                raise ConfigError("config function 'get_network' returned %r for epoch %i, expected a net dict"
                                  % (type(net).__name__, epoch))
        elif self.pretrain is not None:
            net = self.pretrain.get_final_network_json()
        else:
            net = self.network
        if not isinstance(net, dict):
            raise ConfigError("config key 'network': expected a dict of layers, got %r" % type(net).__name__)
        return net

    def copy_param_mode(self, meta: NetDict, epoch: int) -> Optional[str]:
        """``#copy_param_mode`` of the dict, else pretrain's mode in pretrain epochs."""
        if "#copy_param_mode" in meta:
            return meta["#copy_param_mode"]
        return self.pretrain.copy_param_mode if self.is_pretrain_epoch(epoch) else None

    def copy_output_layers(self, epoch: int) -> bool:
        return not self.is_pretrain_epoch(epoch) or bool(self.pretrain.copy_output_layer)


# ---- parameters by name
def named_params(layers: Dict[str, tf.Module]) -> Dict[str, tf.Variable]:
    """``{"layer/attr.path": variable}`` for every variable of every layer."""
    out: Dict[str, tf.Variable] = {}
    for name, layer in layers.items():
        for path, var in layer._flatten(with_path=True, predicate=lambda v: isinstance(v, tf.Variable)):  # noqa
            out["%s/%s" % (name, ".".join(str(p) for p in path))] = var
    return out


def _leading_block(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """``new`` with its leading block overlapping ``old`` replaced by ``old``'s values."""
    region = tuple(slice(0, min(a, b)) for a, b in zip(old.shape, new.shape))
    out = new.copy()
    out[region] = old[region]
    return out


def carry_params(old_layers: Dict[str, tf.Module], new_layers: Dict[str, tf.Module], mode: Optional[str] = None,
                 skip_layers: Iterable[str] = ()) -> Dict[str, List[str]]:
    """Copies parameters from the old network's layers into the new one's, matched by name.

    Returns ``{"copied": [...], "partial": [...], "fresh": [...]}`` (parameter names)."""
    if mode not in (None, "ifpossible", "subset", "reset"):
        raise ConfigError("'#copy_param_mode' %r unknown (known: ifpossible, subset, reset)" % (mode,))
    old = named_params(old_layers)
    skip = set(skip_layers)
    report: Dict[str, List[str]] = {"copied": [], "partial": [], "fresh": []}
    # a variable shared by layers (an extra net's, reuse_params) is carried once, by its first name the old has
    by_var: Dict[int, List[str]] = {}
    new = named_params(new_layers)
    for name, var in new.items():
        by_var.setdefault(id(var), []).append(name)
    for names in by_var.values():
        name = next((n for n in names if n in old), names[0])
        var = new[name]
        source = old.get(name)
        if source is None or mode == "reset" or name.split("/", 1)[0] in skip:
            report["fresh"].append(name)
        elif tuple(source.shape) == tuple(var.shape):
            var.assign(source)
            report["copied"].append(name)
        elif mode == "subset" and source.shape.rank == var.shape.rank:
            var.assign(_leading_block(source.numpy(), var.numpy()))
            report["partial"].append(name)
        else:
            report["fresh"].append(name)
    return report


# ---- #config
class ConfigOverlay:
    """Applies an epoch's ``#config`` to the config and puts back what a later epoch no longer overrides."""

    def __init__(self, config):
        self.config = config
        self.originals: Dict[str, Any] = {}
        self._missing = object()

    def original(self, key: str) -> Any:
        """The config's own value of ``key`` (None when unset), whatever ``#config`` holds now."""
        value = self.originals.get(key, self.config.typed_dict.get(key))
        return None if value is self._missing else value

    def apply(self, overrides: Optional[Dict[str, Any]]) -> Dict[str, Tuple[Any, Any]]:
        """Sets ``overrides`` (except ``learning_rate``, which the engine applies to the epoch);
        returns ``{key: (old, new)}`` of the keys whose value changed."""
        overrides = {k: v for k, v in dict(overrides or {}).items() if k != "learning_rate"}
        changes: Dict[str, Tuple[Any, Any]] = {}
        for key in sorted(set(self.originals) | set(overrides)):
            current = self.config.typed_dict.get(key, self._missing)
            if key in overrides:
                self.originals.setdefault(key, current)
                target = overrides[key]
            else:
                target = self.originals.pop(key)
            if target is self._missing:
                self.config.typed_dict.pop(key, None)
            else:
                self.config.typed_dict[key] = target
            if current is not target and current != target:
                changes[key] = (None if current is self._missing else current,
                                None if target is self._missing else target)
        return changes
