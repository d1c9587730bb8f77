#!/usr/bin/env python3
"""Differential check of learning-rate control against the real RETURNN (issue 27: the numbers a run
prints and the rates it trains with are RETURNN's). RETURNN's ``returnn.learning_rate_control`` is plain
Python: from the config keys (``learning_rate_control`` and its ``newbob_*`` / ``learning_rate_*`` options,
``learning_rates``, ``min_learning_rate``) it gives each epoch's rate from the scores of the epochs before.

Each case: a random config and random per-epoch scores in the forms RETURNN's engine records them (its
nested ``{"dev_score": {"cost:output": ..., "cost:ctc": ...}}`` flattened as RETURNN flattens them: one loss
``dev_score``, several ``dev_score_output``, ``dev_score_ctc``; ``:exp`` variants; ``dev_error``; epochs
without dev scores; a loss that appears later; equal scores; nan). Both engines run the epochs (rate, then
scores), then give the rate of the epoch after, and RETURNN's ``get_last_best_epoch`` for random filters;
the rates must agree to 1e-9 (relative), the best epochs and score keys exactly. Then each engine continues
from the learning-rate file the other wrote (RETURNN's format both ways) and must give the same rate after,
best epochs and keys.

Verdicts: AGREE, BOTH-FAIL, DIFFER, LAX (runs here, RETURNN fails), GAP (RETURNN runs, refused here).

Usage: .venv/bin/python benchmarks/returnn_fuzz_lr.py [--seed S] [--n N] [--show DIFFER LAX GAP]
"""
from __future__ import annotations

import json
import math
import os
import random
import sys
import tempfile
from typing import Any, Dict, List, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import returnn_fuzz_pyside as pyside  # noqa: E402
LAMBDA = "__lambda__"
KINDS = ["constant", "newbob", "newbob_rel", "newbob_relative", "newbob_abs", "newbob_multi_epoch"]
MEASURES = [None, "dev_score", "dev_error", "dev_score_output", "dev_score_output:exp", "dev_score_ctc",
            "train_score", ["dev_error", "dev_score"], ["dev_score_output:exp", "dev_score"], "dev_error_output"]


def _config(rng: random.Random) -> Dict[str, Any]:
    c: Dict[str, Any] = {"learning_rate_control": rng.choice(KINDS), "learning_rate": rng.choice([1.0, 0.1, 0.0008])}
    maybe = {
        "newbob_learning_rate_decay": lambda: rng.choice([0.5, 0.7, 0.9, {LAMBDA: "lambda lr: lr * 0.3"}]),
        "learning_rate_decay": lambda: rng.choice([0.8, 0.6]),
        "newbob_relative_error_threshold": lambda: rng.choice([-0.01, 0.0, -0.05, 0.02]),
        "newbob_error_threshold": lambda: rng.choice([-0.01, 0.0, -0.1]),
        "newbob_multi_num_epochs": lambda: rng.randint(1, 6),
        "newbob_multi_update_interval": lambda: rng.randint(1, 4),
        "newbob_relative_error_grow_threshold": lambda: rng.choice([-0.2, -0.05, 0.0]),
        "newbob_learning_rate_growth": lambda: rng.choice([1.0, 1.1, 1.5]),
        "min_learning_rate": lambda: rng.choice([0.0, 1e-5, 0.05]),
        "learning_rate_control_error_measure": lambda: rng.choice(MEASURES),
        "learning_rate_control_relative_error_relative_lr": lambda: rng.choice([True, False]),
        "learning_rate_control_min_num_epochs_per_new_lr": lambda: rng.randint(0, 4),
        "newbob_relative_error_div_by_old": lambda: rng.choice([True, False]),
        "learning_rates": lambda: rng.choice([[0.1, 0.2, 0.3], [0.05] * 5, {"__int_keys__": [[1, 0.3], [4, 0.6]]}]),
    }
    for key in rng.sample(sorted(maybe), rng.randint(0, 6)):
        value = maybe[key]()
        if value is not None:
            c[key] = value
    return c


def _scores(rng: random.Random, n: int) -> List[Dict[str, float]]:
    losses = rng.choice([["output"], ["output"], ["output", "ctc"], ["ctc", "output"], ["output/output", "output/ce"]])
    late = rng.random() < 0.15  # a second loss from a later epoch on
    with_exp = rng.random() < 0.3  # calculate_exp_loss: each cost also as cost:...:exp
    level = {name: rng.uniform(0.5, 5.0) for name in losses + ["late"]}
    epochs = []
    for e in range(n):
        names = losses + (["late"] if late and e >= n // 2 else [])
        for name in names:
            if rng.random() < 0.2:
                continue  # the same score as the epoch before
            level[name] *= 1.0 + rng.gauss(-0.02, 0.04)
        nested: Dict[str, Dict[str, float]] = {"train_score": {"cost:" + k: level[k] * 0.9 for k in names}}
        if rng.random() < 0.85:
            nested["dev_score"] = {"cost:" + k: level[k] for k in names}
            nested["dev_error"] = {"error:" + k: level[k] / 10 for k in names}
        for key in ("train_score", "dev_score"):
            if with_exp and key in nested:
                nested[key].update({"%s:exp" % k: math.exp(min(v, 50.0)) for k, v in list(nested[key].items())})
        if rng.random() < 0.03:
            nested["dev_score"] = {"cost:output": float("nan")}
        epochs.append(_flatten(nested))
    return epochs


def _flatten(nested: Dict[str, Dict[str, float]]) -> Dict[str, float]:
    """RETURNN's set_epoch_error flattening of its engine's nested scores (one entry: the key itself)."""
    flat: Dict[str, float] = {}
    for key, values in nested.items():
        plain = {k: v for k, v in values.items() if not k.endswith(":exp")}
        if len(values) == 1 or len(plain) == 1 and len(values) == 2:
            flat[key] = list(plain.values())[0]
            if len(values) == 2:
                flat[key + ":exp"] = [v for k, v in values.items() if k.endswith(":exp")][0]
            continue
        for k, v in values.items():
            flat[key + "_" + k[k.index(":") + 1:]] = v
    return flat


def draw(seed: int, n: int) -> List[Dict[str, Any]]:
    rng = random.Random(seed)
    cases = []
    for i in range(n):
        epochs = rng.randint(2, 16)
        best = [dict(first_epoch=rng.randint(1, 3), only_last_epochs=rng.choice([None, 2, 5]),
                     filter_score=rng.choice([float("inf"), 3.0]), only_last_n=rng.choice([-1, 1, 3]),
                     min_score_dist=rng.choice([0.0, 0.01])) for _ in range(2)]
        cases.append({"name": "lr_%i_%i" % (seed, i), "config": _config(rng), "scores": _scores(rng, epochs),
                      "best": best})
    return cases


def _value(v: Any) -> Any:
    if isinstance(v, dict) and LAMBDA in v:
        return eval(v[LAMBDA])
    if isinstance(v, dict) and "__int_keys__" in v:
        return {int(k): x for k, x in v["__int_keys__"]}
    return v


def run_cases(cases_file: str, out_file: str, files: str, read_from: Optional[str] = None) -> None:
    """Runs in either engine's Python (``returnn`` on the path). Without ``read_from``: the epochs, the
    learning-rate file written to ``files`` after the last scores. With it: the control loaded from the
    other engine's file there (a copy in ``files``) gives the rest (the rate after, best epochs, keys)."""
    import shutil
    from returnn.config import Config
    try:
        from returnn.learning_rate_control import load_learning_rate_control_from_config as make
        best_name = "get_last_best_epoch"
    except ImportError:
        from returnn.learning_rate_control import LearningRateControl
        make, best_name = LearningRateControl.from_config, "last_best_epoch"
    with open(cases_file) as f:
        cases = json.load(f)
    results = {}
    for case in cases:
        try:
            filename = os.path.join(files, case["name"] + ".txt")
            if read_from:
                shutil.copy(os.path.join(read_from, case["name"] + ".txt"), filename)
            config = Config()
            for key, value in case["config"].items():
                config.set(key, _value(value))
            config.set("learning_rate_file", filename)
            control = make(config)
            rates = []
            if not read_from:
                for epoch, scores in enumerate(case["scores"], 1):
                    rates.append(control.get_learning_rate_for_epoch(epoch))
                    control.set_epoch_error(epoch, dict(scores))
                control.save()
            last = len(case["scores"])
            rates.append(control.get_learning_rate_for_epoch(last + 1))
            best = [getattr(control, best_name)(last, **b) for b in case["best"]]
            key_of = getattr(control, "get_error_key", None) or control.error_key
            results[case["name"]] = {"rates": rates, "best": best, "keys": [key_of(e) for e in range(1, last + 1)]}
        except Exception as exc:  # noqa: BLE001 -- an engine's refusal is a verdict
            results[case["name"]] = {"error": ("%s: %s" % (type(exc).__name__, exc)).splitlines()[0][:300]}
    with open(out_file, "w") as f:
        json.dump(results, f)


def _engine(python: str, tmp: str, out: str, ours: bool, read_from: Optional[str] = None) -> Dict[str, Any]:
    """One engine's results; its learning-rate files in ``<tmp>/<out>_files`` (continuing from the other
    engine's, ``read_from``, when given)."""
    files = os.path.join(tmp, out + "_files")
    os.makedirs(files)
    args = [os.path.join(tmp, "cases.json"), os.path.join(tmp, out + ".json"), files] + (
        [os.path.join(tmp, read_from + "_files")] if read_from else [])
    pyside.run_engine(__file__, python, args, ours)
    with open(os.path.join(tmp, out + ".json")) as f:
        return json.load(f)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1e-30)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def verdict(ours: Dict[str, Any], theirs: Dict[str, Any]) -> str:
    failed = pyside.error_verdict(ours, theirs)
    if failed:
        return failed
    same = _same(ours["rates"], theirs["rates"]) and ours["best"] == theirs["best"] and ours["keys"] == theirs["keys"]
    return "AGREE" if same and "file" not in ours else "DIFFER"  # file: a run continued from the other's file


def _describe(case: Dict[str, Any], ours: Dict[str, Any], theirs: Dict[str, Any]) -> str:
    return "%s\n          scores %s\n          here    %s\n          RETURNN %s" % (
        json.dumps(case["config"]), pyside.short(case["scores"][:3], 400), pyside.short(ours, 400),
        pyside.short(theirs, 400))


def main(argv: Optional[List[str]] = None) -> int:
    args = pyside.start(__doc__, 300, run_cases, argv)
    if args is None:
        return 0 if "--run" in (argv or sys.argv) else 2
    cases = draw(args.seed, args.n)
    with tempfile.TemporaryDirectory(prefix="fuzz_lr_") as tmp:
        with open(os.path.join(tmp, "cases.json"), "w") as f:
            json.dump(cases, f)
        theirs = _engine(args.returnn_python, tmp, "returnn", ours=False)
        ours = _engine(sys.executable, tmp, "ours", ours=True)
        # the learning-rate files both ways: each engine continues from the other's file
        ours_read = _engine(sys.executable, tmp, "ours_reads", ours=True, read_from="returnn")
        theirs_read = _engine(args.returnn_python, tmp, "returnn_reads", ours=False, read_from="ours")
    continued = 0
    for name, res in list(ours.items()):  # a continued run must give what the run itself gave
        for read, other in ((ours_read[name], theirs[name]), (theirs_read[name], ours[name])):
            if "error" not in res and "error" not in other:
                continued += 1
                if "error" in read or not _same(read["rates"], other["rates"][-1:]) or read["best"] != other["best"] \
                        or read["keys"] != other["keys"]:
                    ours[name] = dict(res, file=read)
    print("runs continued from the other engine's learning-rate file: %i" % continued)
    pyside.report("lr", args.seed, cases, ours, theirs, verdict, args.show, _describe)
    return 0


if __name__ == "__main__":
    sys.exit(main())
