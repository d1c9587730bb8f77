#!/usr/bin/env python3
"""Checkpoints of published configs' networks moving between the real RETURNN and this engine, both ways.

Usage: .venv/bin/python benchmarks/published_checkpoints.py [--cases-dir DIR] [--only SUBSTR ...]
                                                           [--work DIR] [--no-reverse] [--json OUT] [--chunk N]

The nets are those ``benchmarks/published_configs.py --dump-nets DIR`` writes (the configs of
tests/data/published_configs.json whose ``network`` is a JSON dict; without ``--cases-dir`` the dump runs
first, ~1 minute), taken as ``returnn_fuzz.py --kind published`` takes them (dropout and noise rates 0,
SpecAugment as in evaluation, lengths [23, 15, 9]). Per net:

1. names: RETURNN builds it for training and lists what its checkpoint holds (saveable parameters,
   names and shapes); this engine builds it for training too (``returnn_param_shapes``, saveable only);
2. RETURNN -> here: RETURNN saves its initialized parameters (its saver) and computes the output layer
   as its forward task builds the net (neither train nor eval flag; where RETURNN cannot, e.g. an LM's
   softmax that needs its target, as its eval task: eval flag) on a random batch (zero-padded,
   one full-length and two shorter sequences); here the same net, built likewise, loads that checkpoint
   (``CheckpointManager.restore``, as ``load`` does) and computes the output: equal within 1e-4 on the
   real positions (sizes equal);
3. here -> RETURNN (not with ``--no-reverse``): this engine's initialized parameters (its checkpoint
   writer) loaded by RETURNN's loader give RETURNN the output this engine computes from them.

RETURNN's side is :mod:`published_checkpoints_returnn` (one process per ``--chunk`` nets: their checkpoints,
up to GBs for an LM, are on disk only until the chunk is compared). Nets RETURNN cannot build or run are
skipped (listed with RETURNN's error). Printed: a line per net that is not fully agreeing (the first
differing parameter, or where the outputs differ), then the table: nets tried, JSON nets, built in
RETURNN, built in both, names agree, outputs agree (each way). ~25 minutes for the 101 JSON nets on 2 cores.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Optional

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
for _p in (HERE, os.path.join(REPO, "tests"), REPO):
    if _p not in sys.path:
        sys.path.insert(0, _p)
from returnn_side import run_returnn_script  # noqa: E402
from returnn_test_nets import param_diff  # noqa: E402

RETURNN_SIDE = os.path.join(HERE, "published_checkpoints_returnn.py")
TOL = 1e-4


def _line(exc: BaseException) -> str:
    return "%s: %s" % (type(exc).__name__, " ".join(str(exc).split())[:240])


def _meta(c: Dict[str, Any], train: bool, out_dims: str = "") -> Dict[str, Any]:
    return {"extern_data": c["extern"], "network": c["network"], "config": c["config"], "train_flag": train,
            "output_layer": c["output"], "out_dims": out_dims}


def build(meta: Dict[str, Any], evaluate: bool):
    """This engine's network of the case (``test_returnn_goldens.build_network``'s) with RETURNN's flags:
    train as ``meta["train_flag"]``, eval ``evaluate``."""
    import copy
    from test_returnn_goldens import golden_dims
    from returnn.config import Config
    from returnn.extern_data import extern_data_from_config
    from returnn.tensor import Dim, batch_dim
    from returnn.tf.network import TFNetwork
    kinds = {"spatial": Dim.Types.Spatial, "feature": Dim.Types.Feature, "unspecified": Dim.Types.Unspecified}
    resolve = golden_dims.make_resolver(lambda name, n, kind: Dim(n, kind=kinds[kind], description=name), batch_dim,
                                        meta["extern_data"], meta["network"])
    extern = extern_data_from_config(Config({"extern_data": resolve(copy.deepcopy(meta["extern_data"]))}))
    return TFNetwork(resolve(copy.deepcopy(meta["network"])), extern, eval_flag=evaluate,
                     train_flag=bool(meta["train_flag"]))


def ours_side(c: Dict[str, Any]) -> Dict[str, Any]:
    """This engine's training net of ``c``: its checkpoint's parameters ({name: shape}) and its initialized
    parameters written to ``DIR/ours.001``; or the error."""
    import tensorflow as tf
    from test_returnn_goldens import case_config
    from returnn.tf.checkpoint import CheckpointManager
    from returnn.tf.returnn_params import returnn_param_shapes
    meta = _meta(c, True)
    try:
        with case_config(meta):
            net = build(meta, evaluate=True)
            shapes = {k: list(v) for k, v in returnn_param_shapes(net, saveable_only=True).items()}
            step = tf.Variable(0, dtype=tf.int64)  # as the engine's: RETURNN's loader requires 'global_step'
            CheckpointManager(os.path.join(c["dir"], "ours"), network=net, global_step=step).save(1)
    except Exception as exc:  # noqa: BLE001 - a failure is a result
        return {"error": _line(exc)}
    return {"params": shapes}


def _compare(value: np.ndarray, sizes: Dict[int, Any], gold: np.ndarray, arrays: Dict[str, np.ndarray]
             ) -> Optional[str]:
    """None when ``value`` (ours, RETURNN's axis order) equals ``gold`` on the real positions, else where not."""
    from test_returnn_goldens import real_mask
    gold_sizes = {int(k.split(":")[1]): v for k, v in arrays.items() if k.startswith("out_size:")}
    if value.ndim != gold.ndim:
        return "rank: RETURNN %s, ours %s" % (gold.shape, value.shape)
    for axis, size in gold_sizes.items():
        if sizes.get(axis) is None or not np.array_equal(np.asarray(sizes[axis]), size):
            return "sizes of axis %i: RETURNN %s, ours %s" % (axis, size.tolist(), sizes.get(axis))
        # at most the tensors' lengths: RETURNN's output may be shorter than its sizes say (a 'reinterpret_data'
        # giving a sliced sequence its input's sizes)
        n = min(int(size.max(initial=0)), value.shape[axis], gold.shape[axis])
        value, gold = value.take(range(n), axis=axis), gold.take(range(n), axis=axis)
    if value.shape != gold.shape:
        return "shape: RETURNN %s, ours %s" % (gold.shape, value.shape)
    mask = real_mask(gold.shape, {axis: np.minimum(size, gold.shape[axis]) for axis, size in gold_sizes.items()})
    a, b = value[mask].astype(np.float64), gold[mask].astype(np.float64)
    bad = ~np.isclose(a, b, rtol=TOL, atol=TOL, equal_nan=True)
    if not bad.any():
        return None
    i = int(np.argmax(bad))
    return "%i of %i values differ, first: RETURNN %.6g, ours %.6g (max |diff| %.3g)" % (
        bad.sum(), bad.size, b[i], a[i], np.nanmax(np.abs(a - b)))


def forward_ours(c: Dict[str, Any], arrays: Dict[str, np.ndarray], reverse: bool) -> Dict[str, Optional[str]]:
    """Here: the forward net of ``c`` loads RETURNN's checkpoint (and, ``reverse``, our own) and computes the
    output; {"to_ours": mismatch or None, "to_returnn": ...}."""
    from test_returnn_goldens import case_config, run_ours
    from returnn.tf.checkpoint import CheckpointManager
    meta = _meta(c, False, str(arrays["out_dims"]))
    res: Dict[str, Optional[str]] = {}
    with case_config(meta):
        def restored_output(checkpoint: str, expected: np.ndarray) -> Optional[str]:
            """The net with ``checkpoint`` loaded computes ``expected`` (None), else the mismatch."""
            manager.restore(os.path.join(c["dir"], checkpoint), params_only=True)
            value, sizes, _ = run_ours(net, meta, arrays)
            return _compare(value, sizes, expected, arrays)

        try:
            net = build(meta, evaluate=bool(arrays.get("eval_flag", False)))
            manager = CheckpointManager(os.path.join(c["dir"], "unused"), network=net)
            res["to_ours"] = restored_output("returnn", arrays["out"])
        except Exception as exc:  # noqa: BLE001
            res["to_ours"] = "here: " + _line(exc)
            return res
        if reverse:
            if "ours_error" in arrays:
                res["to_returnn"] = "RETURNN's loader: " + str(arrays["ours_error"])
            elif "ours_out" in arrays:
                try:
                    res["to_returnn"] = restored_output("ours.001", arrays["ours_out"])
                except Exception as exc:  # noqa: BLE001
                    res["to_returnn"] = "here: " + _line(exc)
    return res


def _drop_checkpoints(directory: str) -> None:
    """The case's checkpoint files (an LM's are GBs; the results stay)."""
    for name in os.listdir(directory):
        if name.startswith(("returnn.", "ours.")) and name != "returnn.npz":
            os.remove(os.path.join(directory, name))


def run_returnn(cases: List[Dict[str, Any]], work: str, python: str) -> None:
    """RETURNN's side for all ``cases`` (a process that dies on one goes on with the next)."""
    todo = [c for c in cases if not os.path.exists(os.path.join(c["dir"], "returnn.npz"))]
    while todo:
        spec = os.path.join(work, "spec.json")
        with open(spec, "w") as f:
            json.dump({"cases": todo}, f)
        proc = run_returnn_script(python, [RETURNN_SIDE, spec])
        left = [c for c in todo if not os.path.exists(os.path.join(c["dir"], "returnn.npz"))]
        if left and proc.returncode:
            lines = [l for l in proc.stderr.splitlines() if l.strip()]
            np.savez(os.path.join(left[0]["dir"], "returnn.npz"),
                     error=np.array("process died: %s" % (lines[-1][:200] if lines else "rc %i" % proc.returncode)))
            left = left[1:]
        elif left:
            sys.exit("RETURNN's side did not report on %s:\n%s" % (left[0]["name"], proc.stderr[-2000:]))
        todo = left


def compare_case(c: Dict[str, Any], counts: Dict[str, int], reverse: bool) -> Dict[str, Any]:
    """The result of one case (both sides done), counted into ``counts``; prints what does not agree."""
    with np.load(os.path.join(c["dir"], "returnn.npz")) as z:
        arrays = {k: z[k] for k in z.files}
    res: Dict[str, Any] = {"name": c["name"], "config": c["notes"]}
    if "error" in arrays:
        res["returnn_error"] = str(arrays["error"])
        print("RETURNN-FAILS %s: %s" % (c["name"], res["returnn_error"]), flush=True)
        return res
    counts["returnn_builds"] += 1
    if "error" in c["ours"]:
        res["ours_error"] = c["ours"]["error"]
        print("OURS-FAILS    %s: %s" % (c["name"], res["ours_error"]), flush=True)
        return res
    counts["both_build"] += 1
    diff = param_diff(sorted(c["ours"]["params"].items()), sorted(json.loads(str(arrays["params"])).items()))
    if diff:
        res["names"] = diff
        print("NAMES         %s: %i differ, first %s" % (c["name"], len(diff), diff[0]), flush=True)
        return res
    counts["names_agree"] += 1
    res.update(forward_ours(c, arrays, reverse))
    gc.collect()
    for key, label in (("to_ours", "RETURNN->here"), ("to_returnn", "here->RETURNN")):
        if key in res and res[key] is None:
            counts["returnn_to_ours" if key == "to_ours" else "ours_to_returnn"] += 1
        elif key in res:
            print("OUTPUT        %s: %s: %s" % (c["name"], label, res[key]), flush=True)
    return res


def main(argv: Optional[List[str]] = None) -> int:
    import returnn_fuzz_testnets
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases-dir", help="published_configs.py --dump-nets output (default: dump now)")
    parser.add_argument("--only", nargs="*", default=None, help="substrings of the case names")
    parser.add_argument("--work", default=None, help="keep checkpoints and results here (default: a temporary dir)")
    parser.add_argument("--returnn-python", default=os.path.join(REPO, ".bench-venv-returnn", "bin", "python"))
    parser.add_argument("--no-reverse", action="store_true", help="only RETURNN's checkpoints loaded here")
    parser.add_argument("--json", default=None, help="write the per-net results here")
    parser.add_argument("--chunk", type=int, default=8, help="nets per RETURNN process (their checkpoints on disk)")
    args = parser.parse_args(argv)
    work = os.path.abspath(args.work or tempfile.mkdtemp(prefix="published-ckpt-"))
    os.makedirs(work, exist_ok=True)
    cases_dir = args.cases_dir
    if not cases_dir:
        cases_dir = os.path.join(work, "nets")
        subprocess.run([sys.executable, os.path.join(HERE, "published_configs.py"), "--dump-nets", cases_dir,
                        "--timeout", "300"], check=True, stdout=subprocess.DEVNULL)
    cases = returnn_fuzz_testnets.published_cases(cases_dir, 0, 10 ** 6)
    tried = len(os.listdir(cases_dir))
    if args.only:
        cases = [c for c in cases if any(s in c["name"] for s in args.only)]
        tried = len(cases)
    counts = dict(tried=tried, json_nets=len(cases), returnn_builds=0, both_build=0, names_agree=0,
                  returnn_to_ours=0, ours_to_returnn=0)
    results = []
    for start in range(0, len(cases), args.chunk):  # checkpoints of a chunk at a time (an LM's are GBs)
        chunk = cases[start:start + args.chunk]
        for c in chunk:
            c["dir"] = os.path.join(work, c["name"])
            shutil.rmtree(c["dir"], ignore_errors=True)  # RETURNN's results of an earlier run: not of these checkpoints
            os.makedirs(c["dir"])
            c["ours"] = ours_side(c)
            gc.collect()
        run_returnn([{k: v for k, v in c.items() if k != "ours"} for c in chunk], work, args.returnn_python)
        for c in chunk:
            results.append(compare_case(c, counts, not args.no_reverse))
            _drop_checkpoints(c["dir"])
    print("nets tried %(tried)i (JSON nets %(json_nets)i), built in RETURNN %(returnn_builds)i, built in both "
          "%(both_build)i, names agree %(names_agree)i, outputs agree RETURNN->here %(returnn_to_ours)i, "
          "here->RETURNN %(ours_to_returnn)i" % counts)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"counts": counts, "nets": results}, f, indent=1)
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
