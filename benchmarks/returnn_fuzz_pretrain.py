#!/usr/bin/env python3
"""Differential check of pretraining schedules against the real RETURNN (issue 27: the same model as
RETURNN in every epoch). RETURNN's ``returnn.pretrain`` is plain Python: given a config (``network``,
``pretrain``, ``pretrain_*`` keys) it makes the network dict of each pretrain epoch. Both engines run the same
random cases and give, per case, the number of pretrain epochs and the network dict of every epoch up to one
past them (or their error's first line); the dicts must be equal.

A case: a random network (a graph of layers over ``data`` with branches, layers without ``from``, empty
``from``, ``data:`` sources, non-trainable layers, extra output layers, sub-networks, values of
``WrapEpochValue``), or a golden case's network (tests/returnn_goldens), and random pretrain options
(``construction_algo`` from_output / from_input / no_network_modifications / one of the config functions
below, ``repetitions`` as int, list or dict, ``output_layers``, ``input_layers``, ``copy_param_mode``) as the
``pretrain`` dict or as ``pretrain_*`` keys.

Verdicts: AGREE, BOTH-FAIL, DIFFER (other epochs or other dicts), LAX (built here, RETURNN fails), GAP
(RETURNN builds, refused here; ``greedy`` is refused here on purpose).

Usage: .venv/bin/python benchmarks/returnn_fuzz_pretrain.py [--seed S] [--n N] [--show DIFFER LAX GAP]
"""
from __future__ import annotations

import json
import os
import random
import sys
import tempfile
from typing import Any, Dict, List, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import returnn_fuzz_pyside as pyside  # noqa: E402

REPO = pyside.REPO
WRAP = "__wrap_epoch__"  # marker of a WrapEpochValue: the lambda's source

# config functions a case may name as its construction_algo (the forms published configs use)
FUNCTIONS = {
    "drop_tail": """
def algo(idx, net_dict):
    names = sorted(k for k in net_dict if k.startswith("l"))
    if idx >= len(names):
        return None
    for name in names[len(names) - idx - 1:][1:]:
        del net_dict[name]
    last = names[len(names) - idx - 1]
    net_dict["output"]["from"] = [last]
    return net_dict
""",
    "config_and_reps": """
def algo(idx, net_dict):
    if idx >= 3:
        return None
    net_dict["#config"] = {"learning_rate": 0.1 * (idx + 1)}
    net_dict["#repetition"] = idx + 1
    net_dict["#copy_param_mode"] = "subset"
    return net_dict
""",
    "none_first": """
def algo(idx, net_dict):
    return None
""",
}
ALGOS = ["from_output", "from_input", "no_network_modifications"] + ["fn:" + k for k in FUNCTIONS]


def _random_net(rng: random.Random) -> Dict[str, Any]:
    n = rng.randint(1, 7)
    names: List[str] = []
    net: Dict[str, Any] = {}
    for i in range(n):
        name = "l%i" % i
        cls = rng.choice(["linear", "linear", "copy", "combine", "rec", "dropout", "constant"])
        layer: Dict[str, Any] = {"class": cls}
        pool = names + ["data"] + (["data:classes"] if rng.random() < 0.2 else [])
        form = rng.random()
        srcs = rng.sample(pool, min(len(pool), rng.randint(1, 3)))
        if cls == "constant" or form < 0.08:
            layer["from"] = []
        elif form < 0.2:
            pass  # RETURNN's default: data
        elif form < 0.3:
            layer["from"] = srcs[0]  # a string: RETURNN's pretrain fails on most
        else:
            layer["from"] = srcs
        if cls in ("linear", "rec"):
            layer["n_out"] = rng.choice([3, 4])
        if cls == "rec":
            layer["unit"] = rng.choice(["lstm", {"out": {"class": "linear", "from": ["data:source", "prev:out"],
                                                         "n_out": 3}, "output": {"class": "copy", "from": "out"}}])
        if cls == "combine":
            layer["kind"] = "add"
        if rng.random() < 0.15:
            layer["trainable"] = False
        if rng.random() < 0.1:
            layer["is_output_layer"] = True
        if rng.random() < 0.1:
            layer["dropout"] = {WRAP: rng.choice(["lambda epoch: 0.1 * epoch", "lambda epoch: None"])}
        net[name] = layer
        names.append(name)
    out_src = rng.sample(names, min(len(names), rng.randint(1, 2)))
    net["output"] = {"class": "softmax", "loss": "ce", "from": out_src if rng.random() < 0.9 else out_src[0]}
    if rng.random() < 0.1:
        net["output"]["target"] = "classes"
    if rng.random() < 0.15:  # a second output with a loss
        net["aux"] = {"class": "softmax", "loss": "ce", "from": rng.choice(names)}
    return net


def _golden_nets() -> List[Dict[str, Any]]:
    sys.path.insert(0, os.path.join(REPO, "tests", "returnn_goldens"))
    import make_goldens
    make_goldens._load_more_cases()
    return [c["network"] for c in make_goldens.CASES.values()]


def _options(rng: random.Random, net: Dict[str, Any]) -> Dict[str, Any]:
    """The config keys of a case besides ``network``."""
    opts: Dict[str, Any] = {}
    if rng.random() < 0.7:
        opts["construction_algo"] = rng.choice(ALGOS)
    r = rng.random()
    if r < 0.25:
        opts["repetitions"] = rng.randint(1, 3)
    elif r < 0.45:
        opts["repetitions"] = [rng.randint(1, 3) for _ in range(rng.randint(1, 3))]
    elif r < 0.6:
        opts["repetitions"] = {"default": rng.randint(1, 2), "final": rng.randint(1, 3)}
        if rng.random() < 0.2:  # with 'final': RETURNN fails (its sorted keys do not compare)
            opts["repetitions"][0] = 2
        elif rng.random() < 0.5:
            opts["repetitions"] = {"default": rng.randint(0, 2), rng.choice([0, 1, -1]): rng.randint(1, 3)}
    if rng.random() < 0.15:
        others = [k for k in net if k != "output"]
        opts["output_layers"] = ["output"] + rng.sample(others, min(len(others), 1))
    if rng.random() < 0.1:
        opts["input_layers"] = ["data"] + [rng.choice(list(net))]
    if rng.random() < 0.2:
        opts["copy_param_mode"] = rng.choice(["ifpossible", "subset", "reset"])
    if rng.random() < 0.1:
        opts["copy_output_layer"] = rng.choice([True, False, "ifpossible"])
    if not opts and rng.random() < 0.5:
        return {"pretrain": rng.choice(["default", True])}
    if rng.random() < 0.3:  # as RETURNN's pretrain_* keys beside pretrain = "default"
        keys: Dict[str, Any] = {"pretrain": "default"}
        for k, v in opts.items():
            if k in ("repetitions", "copy_output_layer") or (k == "construction_algo" and (
                    not v.startswith("fn:") or rng.random() < 0.1)):  # a function there fails in RETURNN
                keys["pretrain_" + k] = v
        return keys
    return {"pretrain": opts}


def draw(seed: int, n: int) -> List[Dict[str, Any]]:
    rng = random.Random(seed)
    goldens = _golden_nets()
    cases = []
    for i in range(n):
        net = _random_net(rng) if rng.random() < 0.7 else json.loads(json.dumps(rng.choice(goldens)))
        cases.append({"name": "pretrain_%i_%i" % (seed, i), "network": net, "config": _options(rng, net)})
    return cases


def _unwrap(value: Any, wrap_cls) -> Any:
    if isinstance(value, dict):
        if set(value) == {WRAP}:
            return wrap_cls(eval(value[WRAP]))
        return {k: _unwrap(v, wrap_cls) for k, v in value.items()}
    if isinstance(value, list):
        return [_unwrap(v, wrap_cls) for v in value]
    return value


def _int_keys(value: Any) -> Any:
    """The repetitions dict's step indices as ints again (JSON made them strings)."""
    if isinstance(value, dict):
        return {int(k) if isinstance(k, str) and k.lstrip("-").isdigit() else k: _int_keys(v) for k, v in value.items()}
    return value


def _plain(value: Any) -> Any:
    """A net dict as JSON (tuples as lists, other objects by their repr)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def run_cases(cases_file: str, out_file: str) -> None:
    """Runs in either engine's Python (``returnn`` on the path): each case's schedule."""
    from returnn.config import Config
    from returnn.pretrain import WrapEpochValue, pretrain_from_config
    with open(cases_file) as f:
        cases = json.load(f)
    results = {}
    for case in cases:
        try:
            config = Config()
            config.set("network", _unwrap(case["network"], WrapEpochValue))
            for key, value in case["config"].items():
                if key in ("pretrain", "pretrain_construction_algo"):
                    algo = value.get("construction_algo") if isinstance(value, dict) else value
                    if isinstance(algo, str) and algo.startswith("fn:"):
                        scope: Dict[str, Any] = {}
                        exec(FUNCTIONS[algo[3:]], scope)
                        value = dict(value, construction_algo=scope["algo"]) if isinstance(value, dict) else scope["algo"]
                if key in ("pretrain", "pretrain_repetitions"):
                    value = _int_keys(value)
                config.set(key, value)
            pretrain = pretrain_from_config(config)
            n = pretrain.get_train_num_epochs()
            nets = [_plain(pretrain.get_network_json_for_epoch(e)) for e in range(1, n + 2)]
            results[case["name"]] = {"epochs": n, "nets": nets}
        except Exception as exc:  # noqa: BLE001 -- an engine's refusal is a verdict
            results[case["name"]] = {"error": ("%s: %s" % (type(exc).__name__, exc)).splitlines()[0][:300]}
    with open(out_file, "w") as f:
        json.dump(results, f)


def verdict(ours: Dict[str, Any], theirs: Dict[str, Any]) -> str:
    return pyside.error_verdict(ours, theirs) or ("AGREE" if ours == theirs else "DIFFER")


def _first_difference(ours: Dict[str, Any], theirs: Dict[str, Any]) -> str:
    if ours.get("epochs") != theirs.get("epochs"):
        return "epochs %s here, %s in RETURNN" % (ours.get("epochs"), theirs.get("epochs"))
    for e, (a, b) in enumerate(zip(ours["nets"], theirs["nets"]), 1):
        if a != b:
            keys = sorted(set(a) | set(b))
            diff = [k for k in keys if a.get(k) != b.get(k)]
            return "epoch %i: %s here %s, RETURNN %s" % (e, diff, {k: a.get(k) for k in diff[:3]},
                                                          {k: b.get(k) for k in diff[:3]})
    return "?"


def _describe(case: Dict[str, Any], ours: Dict[str, Any], theirs: Dict[str, Any]) -> str:
    detail = _first_difference(ours, theirs) if verdict(ours, theirs) == "DIFFER" else \
        (ours.get("error") or "") + " | RETURNN: " + (theirs.get("error") or "")
    return "%s\n          %s\n          %s" % (json.dumps(case["config"]), pyside.short(case["network"], 600), detail)


def main(argv: Optional[List[str]] = None) -> int:
    args = pyside.start(__doc__, 200, run_cases, argv)
    if args is None:
        return 0 if "--run" in (argv or sys.argv) else 2
    cases = draw(args.seed, args.n)
    with tempfile.TemporaryDirectory(prefix="fuzz_pretrain_") as tmp:
        theirs, ours = pyside.both_engines(__file__, args.returnn_python, cases, tmp)
    pyside.report("pretrain", args.seed, cases, ours, theirs, verdict, args.show, _describe)
    return 0


if __name__ == "__main__":
    sys.exit(main())
