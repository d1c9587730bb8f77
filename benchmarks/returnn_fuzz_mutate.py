"""Option mutations for the differential check (:mod:`returnn_fuzz`, ``--kind mutate``): a net both engines
already build and agree on (a RETURNN golden case of tests/returnn_goldens or one of RETURNN's test nets) with
one option of one layer changed. The options and their defaults come from RETURNN's own layer classes (the
``__init__`` signatures along each class's hierarchy, read once in RETURNN's venv); the new value is
drawn from the option's default (a flipped bool, a nearby number) and from the values the corpus uses for an
option of that name, or the option is dropped. The layer's context (its inputs, dims, the rest of the net)
is one both engines handle, so what differs is the option's effect: an option accepted and ignored, or
computed differently, shows up as DIFFER; a missing build check as LAX.

Every draw is reproducible from (seed, index); the case names carry them.
"""
from __future__ import annotations

import copy
import json
import os
import random
import sys
from typing import Any, Dict, Iterator, List, Optional, Tuple

from returnn_side import run_returnn_script

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIPPED = {"name", "network", "output", "sources", "from", "class", "_name", "_network", "_target_layers",
           "_src_common_search_choices", "encapsulate", "custom_param_importer", "debug_print_layer_output",
           "collocate_with", "control_dependencies_on_output", "param_device", "trainable", "updater_opts",
           "spatial_smoothing", "L2", "darc1", "grad_filter", "register_as_extern_data", "only_on_search",
           "search", "subnetwork", "unit",
           "saveable"}  # (a saveable False variable keeps its random init on each side: mutate seed 250 #44)
NOISE = ("dropout", "zoneout", "noise", "random", "seed", "scheduled_sampling")  # (draws of the label too)
MISSING = {"__missing__": True}  # the mutation drops the option
_SIGNATURES_SCRIPT = r"""
import inspect, json, sys
from returnn.tf.layers import basic
from returnn.tf.layers.base import LayerBase
basic._init_layer_class_dict()
def plain(v):
    try:
        json.dumps(v)
        return True
    except (TypeError, ValueError):
        return False
out = {}
for name, cls in sorted(basic._LayerClassDict.items()):
    params = {}
    for klass in reversed(cls.__mro__):
        if "__init__" not in vars(klass):
            continue
        for p in inspect.signature(vars(klass)["__init__"]).parameters.values():
            if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL) or p.name == "self":
                continue
            d = p.default
            params[p.name] = {"default": "<required>" if d is p.empty else (d if plain(d) else "<obj>"),
                              "base": issubclass(LayerBase, klass)}
    out[name] = params
json.dump(out, open(sys.argv[1], "w"))
"""


def returnn_signatures(python: str, cache_dir: str) -> Dict[str, Dict[str, Dict[str, Any]]]:
    """{layer class: {option: {"default": value, "base": declared by LayerBase}}} of the RETURNN at ``python``."""
    path = os.path.join(cache_dir, "returnn_layer_signatures.json")
    if not os.path.exists(path):
        script = os.path.join(cache_dir, "signatures.py")
        with open(script, "w") as f:
            f.write(_SIGNATURES_SCRIPT)
        run_returnn_script(python, [script, path], check=True)
    with open(path) as f:
        return json.load(f)


def base_cases() -> List[Dict[str, Any]]:
    """The nets mutated: the golden cases (not search) and RETURNN's usable test nets."""
    sys.path.insert(0, os.path.join(REPO, "tests", "returnn_goldens"))
    import make_goldens  # noqa: E402  (registers the cases of cases_*.py)
    import returnn_fuzz_testnets
    make_goldens._load_more_cases()
    cases = [dict(c) for c in make_goldens.CASES.values() if not c.get("search")]
    cases += returnn_fuzz_testnets.all_cases()[0]
    return cases


def _layers(net: Dict[str, Any], path: Tuple[str, ...] = ()) -> Iterator[Tuple[Tuple[str, ...], Dict[str, Any]]]:
    """(path of keys, layer dict) of every layer, also inside rec units and subnetworks."""
    for name, layer in net.items():
        if not isinstance(layer, dict) or not isinstance(layer.get("class"), str):
            continue
        yield path + (name,), layer
        for key in ("unit", "subnetwork"):
            if isinstance(layer.get(key), dict):
                yield from _layers(layer[key], path + (name, key))


def value_pool(cases: List[Dict[str, Any]]) -> Dict[str, List[Any]]:
    """{option name: the distinct values the corpus sets it to} (without dim markers: they belong to their net)."""
    pool: Dict[str, Dict[str, Any]] = {}
    for c in cases:
        for _, layer in _layers(c["network"]):
            for key, value in layer.items():
                text = json.dumps(value, sort_keys=True)
                if "__dim__" not in text:
                    pool.setdefault(key, {})[text] = value
    return {k: list(v.values()) for k, v in pool.items()}


def _nearby(default: Any) -> List[Any]:
    """Values near an option's default."""
    if isinstance(default, bool):
        return [not default]
    if isinstance(default, int):
        return [v for v in (default - 1, default + 1, 0, 2, -1) if v != default]
    if isinstance(default, float):
        return [v for v in (0.0, default * 0.5, default * 2 + 0.5, 1.0, -0.5) if v != default]
    return []


def mutate(rng: random.Random, layer: Dict[str, Any], sig: Dict[str, Dict[str, Any]],
           pool: Dict[str, List[Any]], train: bool) -> Optional[Tuple[str, Any]]:
    """(option, new value or MISSING) for ``layer``, None if nothing is left to draw."""
    names = [k for k in sig if k not in SKIPPED and not (train and any(s in k for s in NOISE))]
    own = [k for k in names if not sig[k]["base"]]
    for _ in range(20):
        key = rng.choice(own if own and rng.random() < 0.75 else names or own or [None])
        if key is None:
            return None
        current = layer.get(key, sig[key]["default"])
        default = sig[key]["default"]
        choices = _nearby(current if current not in ("<obj>", "<required>") else None)
        choices += [v for v in pool.get(key, []) if v != current]
        if key in layer and default not in ("<required>",):
            choices.append(MISSING)
        if "dropout" in key:  # a rate outside [0, 1) is refused here on purpose (RETURNN fails on it in training)
            choices = [v for v in choices if v is MISSING or (isinstance(v, (int, float)) and 0 <= v < 1)]
        if choices:
            return key, rng.choice(choices)
    return None


def _markers(obj: Any) -> Iterator[Dict[str, Any]]:
    """Every dim marker dict in ``obj``."""
    if isinstance(obj, dict):
        if "__dim__" in obj:
            yield obj
        for value in obj.values():
            yield from _markers(value)
    elif isinstance(obj, list):
        for value in obj:
            yield from _markers(value)


def _redeclare_dims(old: Any, net: Dict[str, Any], extern: Any) -> None:
    """A Dim declared in a replaced or dropped option value (``old``) and still referenced elsewhere is declared
    at its first reference instead (else the case names a Dim that it never declares)."""
    declared = {m["__dim__"]: m for m in _markers(old) if len(m) > 1}
    left = list(_markers(extern)) + list(_markers(net))
    for name, spec in declared.items():
        refs = [m for m in left if m["__dim__"] == name]
        if refs and all(len(m) == 1 for m in refs):
            refs[0].update(copy.deepcopy(spec))


def _samples_labels(net: Dict[str, Any]) -> bool:
    """Whether a choice of ``net`` samples its labels (``scheduled_sampling`` without ``gold_mixin_prob`` 1): the
    base agrees only through a near one-hot distribution, which a mutation upstream undoes; each engine then draws
    from its own random stream (mutate seed 275 #11's DIFFER: the scale 1000 before the scores replaced)."""
    for _, layer in _layers(net):
        sampling = layer.get("scheduled_sampling") if layer["class"] == "choice" else None
        if sampling and not (isinstance(sampling, dict) and sampling.get("gold_mixin_prob") == 1.0):
            return True
    return False


def draw(seed: int, index: int, cases: List[Dict[str, Any]], sigs: Dict[str, Dict[str, Dict[str, Any]]],
         pool: Dict[str, List[Any]]) -> Dict[str, Any]:
    """The mutated case (seed, index)."""
    rng = random.Random("%i/%i/mutate" % (seed, index))
    for _ in range(50):
        base = rng.choice(cases)
        if _samples_labels(base["network"]):
            continue
        layers = [(p, layer) for p, layer in _layers(base["network"]) if layer["class"] in sigs]
        if not layers:
            continue
        path, _ = rng.choice(layers)
        net = copy.deepcopy(base["network"])
        layer = net
        for key in path:
            layer = layer[key]
        change = mutate(rng, layer, sigs[layer["class"]], pool, bool(base.get("train")))
        if change is None:
            continue
        key, value = change
        old = layer.get(key)
        if value is MISSING:
            del layer[key]
        else:
            layer[key] = copy.deepcopy(value)
        _redeclare_dims(old, net, base.get("extern"))
        what = "%s.%s=%s" % ("/".join(p for p in path if p not in ("unit", "subnetwork")), key,
                             "<dropped>" if value is MISSING else json.dumps(value)[:60])
        return dict(base, name="mutate_s%i_%i" % (seed, index), family="%s: %s" % (base["name"], what),
                    network=net, lens=copy.deepcopy(base["lens"]), config=copy.deepcopy(base.get("config") or {}))
    raise RuntimeError("no mutation drawn for seed %i index %i" % (seed, index))


def draw_cases(seed: int, start: int, n: int, python: str, cache_dir: str) -> List[Dict[str, Any]]:
    """The cases ``start .. start + n - 1`` of ``seed``."""
    sigs = returnn_signatures(python, cache_dir)
    cases = base_cases()
    pool = value_pool(cases)
    return [draw(seed, i, cases, sigs, pool) for i in range(start, start + n)]
