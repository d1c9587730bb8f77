"""The network of configs from before layer dicts: ``hidden_size`` and friends (RETURNN's old
``LayerNetworkDescription``), and ``network`` given as a JSON string (old line-format configs).

``hidden_size 500,500`` with ``hidden_type`` (per layer, the last repeated; default ``forward``),
``hidden_name`` (``_`` or missing: ``hidden_<i>``), ``activation`` (per layer, the last repeated),
``dropout`` (per layer plus one for the output, the last repeated), ``L2_reg``, ``loss`` (default
``ce``), ``forward_weights_init``, ``bias_init``, ``bidirectional``: a chain of layers from
``data`` and a softmax ``output``. Recurrent ``hidden_type`` with ``bidirectional`` (a forward
and a backward chain, as RETURNN built them) is not supported: an error names the key.
"""
from __future__ import annotations

import json
from typing import Any, Dict, List

from returnn.errors import ConfigError

RECURRENT_TYPES = ("rec", "lstm", "lstmp", "blstm")


def _per_layer(values: List[Any], n: int, fill: Any) -> List[Any]:
    """``values`` extended to ``n`` entries with ``fill`` (or the last value when ``fill`` is None)."""
    values = list(values)
    while len(values) < n:
        values.append(values[-1] if fill is None else fill)
    return values


def network_from_hidden_keys(config) -> Dict[str, Dict[str, Any]]:
    """The layer dict RETURNN's ``LayerNetworkDescription`` built from ``hidden_size`` etc."""
    sizes = config.int_list("hidden_size")
    if not sizes:
        raise ConfigError("config key 'hidden_size': no hidden layers given")
    n = len(sizes)
    types_ = config.list("hidden_type") or ["forward"]
    if len(types_) > n:
        raise ConfigError("config key 'hidden_type': %i types for %i hidden layers" % (len(types_), n))
    types_ = _per_layer(types_, n, types_[0] if len(types_) == 1 else "forward")
    names = _per_layer(config.list("hidden_name") or [], n, "_") if config.list("hidden_name") else ["_"] * n
    names = ["hidden_%i" % i if name == "_" else name for i, name in enumerate(names)]
    activations = config.list("activation")
    if not activations:
        raise ConfigError("config key 'activation': needed with 'hidden_size' (e.g. 'tanh')")
    activations = _per_layer(activations, n, None)
    dropout = [float(d) for d in _per_layer(config.list("dropout") or [0.0], n + 1, None)]
    bidirectional = config.bool("bidirectional")
    if bidirectional and any(t.lower() in RECURRENT_TYPES for t in types_):
        raise ConfigError("config key 'bidirectional': bidirectional recurrent 'hidden_type' is not supported; "
                          "give a 'network' dict")
    common: Dict[str, Any] = {}
    if config.float("L2_reg"):
        common["L2"] = config.float("L2_reg")
    for key in ("forward_weights_init", "bias_init"):
        if config.typed_value(key) is not None:
            common[key] = config.typed_value(key)
    net: Dict[str, Dict[str, Any]] = {}
    source = "data"
    for i in range(n):
        layer = dict(common, **{"class": types_[i], "n_out": sizes[i], "activation": activations[i], "from": [source]})
        if dropout[i]:
            layer["dropout"] = dropout[i]
        net[names[i]] = layer
        source = names[i]
    output = dict(common, **{"class": "softmax", "loss": config.value("loss"), "from": [source]})
    if dropout[n]:
        output["dropout"] = dropout[n]
    net["output"] = output
    return net


def apply_old_network_keys(config) -> None:
    """Sets ``network`` from the old keys when the config has no layer dict: a JSON string in
    ``network`` (``{"network": {...}}`` or the dict itself), or ``hidden_size`` with ``num_inputs``."""
    network = config.typed_value("network")
    if isinstance(network, str):
        try:
            value = json.loads(network)
        except ValueError:
            return  # not JSON: the config value checks report it
        if isinstance(value, dict) and isinstance(value.get("network"), dict):
            value = value["network"]
        config.set("network", value)
    elif isinstance(network, dict) and isinstance(network.get("network"), dict) \
            and "class" not in network["network"]:  # {"network": {layers}} (RETURNN's JSON network files)
        config.set("network", network["network"])
    elif network is None and config.typed_value("get_network") is None and config.has("hidden_size") \
            and config.has("num_inputs"):
        config.set("network", network_from_hidden_keys(config))
