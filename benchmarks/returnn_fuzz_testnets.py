"""RETURNN's own test nets as cases of the differential check (:mod:`returnn_fuzz`, ``--kind testnets``):
the literal network dicts of RETURNN's TF tests (tests/data/returnn_test_nets.json, which
benchmarks/returnn_test_nets.py builds and compares by parameters) run in both engines with the same
parameters and inputs, and the layer ``output`` compared by value on the real frames.

Each net keeps its test's extern data (``num_inputs``/``num_outputs`` turned into ``extern_data``,
dim tags as golden_dims markers so shared axes stay shared), its config keys and the behavior version
RETURNN's tests run it with. Nets are built for training as their tests build them (RETURNN then
builds the layers of losses too, as this engine's network does; a choice reads its target), except
those with dropout, zoneout or weight noise (random masks differ between the engines): forward mode. Nets without ``output`` compare their last output or loss layer, else their last layer (:func:`compared_layer`). Nets RETURNN built only in search mode and nets whose
extern data the golden inputs cannot feed (no batch axis, two dynamic axes) are left out (counted).
``--start``/``--n`` select a slice of the usable nets; ``--seed`` is unused.
"""
from __future__ import annotations

import ast
import json
import os
import re
from typing import Any, Dict, List, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(REPO, "tests", "data", "returnn_test_nets.json")
NET_MARKER = "$dim"  # tests/returnn_nets/extract.py's marker
GOLDEN_MARKER = "__dim__"  # tests/returnn_goldens/golden_dims.py's


def _markers(value: Any) -> Any:
    """The test nets' dim markers as golden_dims markers (one Dim per marker name; batch as batch)."""
    if isinstance(value, dict) and NET_MARKER in value:
        if value["kind"] == "batch":
            return {GOLDEN_MARKER: "batch"}
        kind = value["kind"] if value["kind"] in ("spatial", "feature") else "unspecified"
        return {GOLDEN_MARKER: "t_" + re.sub(r"\W", "_", str(value[NET_MARKER])), "dimension": value["dimension"],
                "kind": kind}
    if isinstance(value, dict):
        return {k: _markers(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_markers(v) for v in value)
    return value


def _extern(spec: Dict[str, Any], default: Dict[str, Any]) -> Dict[str, Any]:
    """``extern_data`` of a test's extern spec (``extern_data`` or old ``num_inputs``/``num_outputs``)."""
    if "extern_data" in spec:
        return _markers(spec["extern_data"])
    if "num_outputs" not in spec:
        return dict(default)
    out: Dict[str, Any] = {}
    if spec.get("num_inputs") is not None:
        out["data"] = {"dim": spec["num_inputs"]}
    outputs = spec["num_outputs"]
    if isinstance(outputs, int):
        outputs = {"classes": [outputs, 1]}
    for key, value in outputs.items():
        dim, ndim = (value, 1) if isinstance(value, int) else value[:2]
        if key == "data" and "data" in out:
            continue
        out[key] = {"dim": dim, "sparse": ndim == 1} if ndim in (1, 2) else {"dim": dim, "shape": (None,) * (ndim - 1) + (dim,)}
    return out


def tuples_kept(value: Any) -> Any:
    """Tuples kept tuples through JSON (golden_dims' ``__tuple__``): RETURNN tells some apart (axes); so are
    dicts with keys that are not strings (``__dict__``: ``label_map``'s int keys)."""
    if isinstance(value, tuple):
        return {"__tuple__": [tuples_kept(v) for v in value]}
    if isinstance(value, dict) and not all(isinstance(k, str) for k in value):
        return {"__dict__": [[k, tuples_kept(v)] for k, v in value.items()]}
    if isinstance(value, dict):
        return {k: tuples_kept(v) for k, v in value.items()}
    if isinstance(value, list):
        return [tuples_kept(v) for v in value]
    return value


def compared_layer(net: Dict[str, Any]) -> Any:
    """The layer compared: ``output``, else the last layer that is an output or has a loss, else the net's
    last layer (RETURNN's tests without ``output`` fetch such a layer; the case marks it ``is_output_layer``,
    as RETURNN builds only outputs, losses and what they read), None for an empty net."""
    if "output" in net:
        return "output"
    layers = [name for name, opts in net.items() if isinstance(opts, dict)]
    marked = [name for name in layers if net[name].get("is_output_layer") or net[name].get("loss")]
    return (marked or layers or [None])[-1]


def all_cases() -> Tuple[List[Dict[str, Any]], Dict[str, int]]:
    """(usable cases, {reason: count} of the nets left out)."""
    with open(DATA) as f:
        data = json.load(f)
    cases: List[Dict[str, Any]] = []
    skipped: Dict[str, int] = {}
    for entry in data["nets"]:
        reason = None
        run = entry["returnn"]
        net = ast.literal_eval(entry["net"])
        if not run["built"]:
            reason = "RETURNN does not build it"
        elif run["mode"] != "train":
            reason = "RETURNN builds it in search mode only"
        elif compared_layer(net) is None:
            reason = "no layer to compare"
        if reason is None:
            extern = _extern(ast.literal_eval(entry["extern"]), data["default_extern_data"])
            config = dict(ast.literal_eval(entry["config"]))
            config = {k: v for k, v in config.items() if isinstance(v, (int, float, str, bool, type(None)))}
            config["behavior_version"] = entry["behavior_version"]
            try:
                compared = compared_layer(net)
                if compared != "output":  # RETURNN builds only outputs, losses and what they read
                    net[compared] = dict(net[compared], is_output_layer=True)
                case = dict(name="testnet_" + re.sub(r"\W", "_", entry["id"]), family="testnets",
                            network=tuples_kept(_markers(net)), extern=extern, config=config, output=compared,
                            lens={key: [7, 4, 1] for key in extern}, notes=entry["file"], search=False,
                            train=not any(noise in entry["net"] + entry["config"] for noise in (
                                "dropout", "zoneout", "param_variational_noise")))
                json.dumps(case)
            except (TypeError, ValueError):
                reason = "not JSON (functions or objects in the net)"
        if reason is not None:
            skipped[reason] = skipped.get(reason, 0) + 1
            continue
        cases.append(case)
    names = [c["name"] for c in cases]
    for i, c in enumerate(cases):  # ids repeat when a test holds several nets
        if names.count(c["name"]) > 1:
            c["name"] += "_%i" % i
    return cases, skipped


def draw(start: int, n: int) -> List[Dict[str, Any]]:
    """The usable cases ``start .. start + n - 1`` (prints what was left out once)."""
    cases, skipped = all_cases()
    if skipped:
        print("testnets: %i usable of %i; left out: %s" % (
            len(cases), len(cases) + sum(skipped.values()),
            ", ".join("%s %i" % kv for kv in sorted(skipped.items(), key=lambda kv: -kv[1]))), flush=True)
    return cases[start:start + n]


_NOISE_KEY = re.compile(r"(dropout|zoneout_factor_\w+|param_variational_noise)$")
# the configs' SpecAugment: an eval calling the config function ``transform`` (random time/feature masks in training)
_SPECAUG_EVAL = re.compile(r"^self\.network\.get_config\(\)\.typed_value\('transform'\)\(source\(0(, as_data=True)?\), "
                           r"network=self\.network(, clip=(True|False))?\)$")


def without_noise(value: Any) -> Any:
    """``value`` (a net dict or config) with every dropout, zoneout and weight-noise rate set to 0: the
    published nets are compared built for training (as both engines then build the layers of their
    losses), and random masks differ between the engines. So is SpecAugment (an eval calling the config's
    ``transform``, a function the JSON does not hold): ``source(0)``, clipped to [-3, 3] with ``clip=True``
    (what those configs' ``transform`` does outside training)."""
    match = _SPECAUG_EVAL.match(str(value.get("eval"))) if isinstance(value, dict) and value.get("class") == "eval" else None
    if match:
        return dict(without_noise({k: v for k, v in value.items() if k != "eval"}),
                    eval="tf.clip_by_value(source(0), -3.0, 3.0)" if match.group(3) == "True" else "source(0)")
    if isinstance(value, dict):
        return {k: (0.0 if isinstance(k, str) and _NOISE_KEY.search(k) and isinstance(v, (int, float))
                    and not isinstance(v, bool) else without_noise(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [without_noise(v) for v in value]
    return value


def without_checkpoint_loads(value: Any) -> Any:
    """``value`` (a net dict) without ``load_on_init`` (a subnetwork's checkpoint at the config's site): the
    harness sets every parameter itself, so the values compared do not depend on it, and RETURNN's side
    would fail reading a file that exists only there (this engine applies it when its training starts,
    not when the net is built: a missing file is ``published_configs.py``'s FILE)."""
    if isinstance(value, dict):
        return {k: without_checkpoint_loads(v) for k, v in value.items() if k != "load_on_init"}
    if isinstance(value, list):
        return [without_checkpoint_loads(v) for v in value]
    return value


def _published_lens(dumped: Dict[str, Any]) -> Dict[str, List[int]]:
    """{data key: lengths}: [23, 15, 9], but the probe list's ``lengths`` (published_configs_synth): a fixed
    length (one speaker label per sequence) or ``"/N"`` (the input length divided by N, rounded up)."""
    base = [23, 15, 9]
    lens = {}
    for key in dumped["extern"]:
        spec = dumped.get("lengths", {}).get(key)
        lens[key] = (base if spec is None else [-(-n // int(spec[1:])) for n in base] if isinstance(spec, str)
                     else [int(spec)] * len(base))
    return lens


def published_cases(cases_dir: str, start: int, n: int) -> List[Dict[str, Any]]:
    """Cases of published configs' networks (``benchmarks/published_configs.py --dump-nets DIR``):
    each config's ``network`` dict with its data (shape, dim, sparse, dtype) and plain config values,
    run like the test nets (``output`` compared; built for training with the dropout and noise rates
    set to 0 (:func:`without_noise`); weights
    scaled by 1/sqrt(fan-in): with make_goldens' N(0, 0.5) a 512-unit LSTM stack is chaotic, float
    rounding grows to O(1) over 20 frames in either engine); configs
    without a network dict or whose net is not JSON (functions, Dims) are counted and left out."""
    cases: List[Dict[str, Any]] = []
    skipped: Dict[str, int] = {}
    for fn in sorted(os.listdir(cases_dir)):
        with open(os.path.join(cases_dir, fn)) as f:
            dumped = json.load(f)
        reason = dumped.get("skip") or (None if "output" in dumped["network"] else "no layer 'output'")
        if reason:
            reason = reason.split(":")[0]
            skipped[reason] = skipped.get(reason, 0) + 1
            continue
        cases.append(dict(name="published_%03d_%s" % (len(cases), re.sub(r"\W", "_", fn[:-5])[-60:]), family="published",
                          network=without_noise(without_checkpoint_loads(dumped["network"])), extern={k: v for k, v in dumped["extern"].items()},
                          config=without_noise(dumped["config"]), output="output", notes=fn, search=False,
                          lens=_published_lens(dumped), param_scale="fan_in", train=True))
    print("published: %i usable of %i; left out: %s" % (
        len(cases), len(cases) + sum(skipped.values()),
        ", ".join("%s %i" % kv for kv in sorted(skipped.items(), key=lambda kv: -kv[1])) or "none"), flush=True)
    return cases[start:start + n]
