#!/usr/bin/env python3
"""Differential check against the real RETURNN on random small networks (issue 27's adversarial
pass): :mod:`returnn_fuzz_cases` draws the networks, the real RETURNN (a side venv, see
tests/returnn_goldens/make_goldens.py) builds and runs each with fixed parameters and inputs
(padded with garbage), and this engine does the same. Per case one verdict:

- ``AGREE``     both build; the same output dims' sizes and values on the real positions (1e-5)
- ``DIFFER``    both build, the outputs differ: a silent divergence, the worst kind of bug
- ``GAP``       RETURNN builds it, this engine refuses (or fails)
- ``LAX``       RETURNN refuses it, this engine builds it (a missing build-time check, or RETURNN's bug)
- ``CRASH``     this engine fails with a traceback-worthy error (not one of its one-line errors)
- ``BOTH-FAIL`` neither builds it (fine)
- ``NONFINITE`` both build it and give an inf or nan on a real frame (e.g. sqrt of a negative value): not
                compared further (the goldens refuse such an output)
- ``RBUG``      RETURNN fails by a bug of its own this engine does not copy (named in the detail; search kind:
                returnn_fuzz_search.RETURNN_BUG), this engine builds it

Usage::

    .venv/bin/python benchmarks/returnn_fuzz.py [--seed S] [--n N] [--kind chain|rec|search|loss|testnets|batches|dims] [--returnn-python PY]
                                                [--keep DIR] [--only-verdicts DIFFER GAP ...]
                                                [--behavior-versions V [V ...]]

Prints one line per case that is not AGREE/BOTH-FAIL (with both sides' first error line) and the
counts. The RETURNN venv defaults to ``.bench-venv-returnn`` in the repository.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import sys
import tempfile
from collections import Counter
from typing import Any, Dict, Optional, Tuple

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "tests"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import returnn_fuzz_cases  # noqa: E402
import returnn_fuzz_rec  # noqa: E402
import returnn_fuzz_loss  # noqa: E402
import returnn_fuzz_search  # noqa: E402
import returnn_fuzz_testnets  # noqa: E402
from returnn_side import run_returnn_script  # noqa: E402  (benchmarks/ is on sys.path)

MAKE_GOLDENS = os.path.join(REPO, "tests", "returnn_goldens", "make_goldens.py")


def run_returnn(cases, out_dir: str, python: str, trace: bool = False) -> Dict[str, str]:
    """Runs the cases in RETURNN (writing ``<case>.npz`` into ``out_dir``); returns {case: error line}
    of those RETURNN fails on. ``trace``: prints RETURNN's traceback of the first failing case."""
    path = os.path.join(out_dir, "cases.json")
    with open(path, "w") as f:
        json.dump(cases, f)
    proc = run_returnn_script(python, [MAKE_GOLDENS, "--cases-json", path, "--out", out_dir]
                              + ([] if trace else ["--keep-going"]))
    if trace and proc.returncode:
        print("RETURNN's traceback:\n" + proc.stderr[-6000:])
        return {c["name"]: "see the traceback" for c in cases
                if not os.path.exists(os.path.join(out_dir, c["name"] + ".npz"))}
    failed = dict(re.findall(r"^FAILED (\S+): (.*)$", proc.stdout, re.M))
    written = {c["name"] for c in cases if os.path.exists(os.path.join(out_dir, c["name"] + ".npz"))}
    missing = [c for c in cases if c["name"] not in written and c["name"] not in failed]
    if missing and proc.returncode and not trace:  # the process died (a crash or out of memory) on the first one
        died = _last_line(proc.stderr)
        print("returnn_fuzz: RETURNN's process died on %s (%s); going on with the rest" % (missing[0]["name"], died),
              flush=True)
        failed[missing[0]["name"]] = "RETURNN's process died: " + died
        failed.update(run_returnn(missing[1:], out_dir, python, trace) if missing[1:] else {})
        return failed
    if missing:
        sys.exit("returnn_fuzz: RETURNN did not report on %s; its stderr ends:\n%s"
                 % ([c["name"] for c in missing][:5], proc.stderr[-3000:]))
    return failed


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith(("WARNING", "Instructions", "Call "))]
    return lines[-1][:200] if lines else "no output"


def _ours_builds(c, nonfinite: bool = False) -> Optional[str]:
    """This engine builds and runs case ``c`` on random inputs: None, else the error line (``nonfinite``: the
    output must also have an inf or nan on a real frame, else "finite here")."""
    import tensorflow as tf
    from test_returnn_goldens import build_network, case_config
    from returnn.tf.layers import RunContext
    meta = {"extern_data": c["extern"], "network": c["network"], "config": c["config"], "train_flag": bool(c.get("train"))}
    with case_config(meta):
        net = build_network(meta)
        if c.get("train"):  # a net built to train evaluates: RETURNN checks its losses' targets then (Loss._check_init)
            net.check_losses()
        batch = {}
        rng = np.random.RandomState(0)
        for key, data in net.extern_data.items():
            lens = np.array(c["lens"].get(key, [7, 4, 1]), np.int32)
            shape = [3]
            if data.time_dim_axis is not None:
                shape.append(int(lens.max()))
            shape += [d.dimension for i, d in enumerate(data.dims)
                      if i not in (data.batch_dim_axis, data.time_dim_axis)]
            batch[key] = tf.cast(rng.randint(0, data.dim, shape) if data.sparse else rng.normal(size=shape),
                                 data.dtype)  # as RETURNN's feed converts (int data, bool masks)
            batch[key + ":seq_len"] = tf.constant(lens)
        name = c.get("output", "output")
        from returnn.tf.net_sources import base_layer_name
        if base_layer_name(name, net.layers) not in net.layers:  # e.g. an only_on_eval output where the network
            from returnn.errors import NetworkError  # does not evaluate (RETURNN builds no such layer either)
            raise NetworkError("layer %r is not built in this network" % name)
        out = net.forward(batch, RunContext(bool(c.get("train"))), only=[name])[name]
        if nonfinite and not _nonfinite_on_real_frames(out):
            return "finite here"
    return None


def _nonfinite_on_real_frames(out) -> bool:
    """Whether a float output has an inf or nan where all its dynamic axes are within the sizes."""
    import tensorflow as tf
    x = out.tensor
    if not x.dtype.is_floating:
        return False
    bad = tf.logical_not(tf.math.is_finite(x))
    for axis, dim in enumerate(out.data.dims):
        if dim.is_dynamic() and not dim.is_batch_dim():
            bad = tf.logical_and(bad, out.broadcast_mask(axis))
    return bool(tf.reduce_any(bad).numpy())


def _first_line(exc: BaseException) -> str:
    return "%s: %s" % (type(exc).__name__, (str(exc).strip().splitlines() or [""])[0][:240])


def failure_verdict(exc: BaseException, returnn_error: Optional[str]) -> Tuple[str, str]:
    """(verdict, detail) when this engine fails on a case: its one-line refusal (a ReturnnError) is GAP or
    BOTH-FAIL, anything else a CRASH unless RETURNN fails too."""
    from returnn.errors import ReturnnError
    if isinstance(exc, ReturnnError):
        return ("BOTH-FAIL" if returnn_error is not None else "GAP"), _first_line(exc) + (
            "" if returnn_error is None else " | RETURNN: " + returnn_error)
    if returnn_error is not None:
        return "BOTH-FAIL", "ours " + _first_line(exc) + " | RETURNN: " + returnn_error
    return "CRASH", _first_line(exc)


def verdict(c, out_dir: str, returnn_error: Optional[str]) -> Tuple[str, str]:
    """(verdict, detail) of one case (see the module doc)."""
    from test_returnn_goldens import ATOL, RTOL, real_outputs
    try:
        if returnn_error is not None:
            if "non-finite output on real frames" in returnn_error:  # the goldens' rule, not an error of RETURNN's
                finite = _ours_builds(c, nonfinite=True)
                return ("LAX", "RETURNN: " + returnn_error) if finite else ("NONFINITE", "both")
            _ours_builds(c)
            return "LAX", "RETURNN: " + returnn_error
        meta, ours, gold, where = real_outputs(os.path.join(out_dir, c["name"] + ".npz"))
    except AssertionError as exc:  # names, shapes or sizes differ from RETURNN's
        return "DIFFER", _first_line(exc)
    except Exception as exc:  # noqa: BLE001 - a crash of ours is the finding
        return failure_verdict(exc, returnn_error)
    if gold.dtype.kind in "iub":
        same = ours.shape == gold.shape and bool(np.all(ours == gold))
    else:
        same = ours.shape == gold.shape and np.allclose(ours, gold, rtol=RTOL, atol=ATOL, equal_nan=True)
    if same:
        return "AGREE", ""
    diff = np.max(np.abs(ours.astype(np.float64) - gold.astype(np.float64))) if ours.shape == gold.shape else None
    return "DIFFER", "%s: max |diff| %s" % (where, diff)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--start", type=int, default=0, help="first index (default 0)")
    parser.add_argument("--kind", choices=["chain", "rec", "search", "loss", "testnets", "published", "configs",
                                           "mutate", "batches", "dims"],
                        default="chain",
                        help="chains of plain layers (returnn_fuzz_cases), rec loops (returnn_fuzz_rec), "
                             "searched decoders (returnn_fuzz_search), losses and their gradients "
                             "(returnn_fuzz_loss), RETURNN's own test nets (returnn_fuzz_testnets; "
                             "--start/--n slice them, --seed unused), published configs' nets (--cases-dir) or published "
                             "configs whose net is not JSON, loaded as configs (--cases-dir; returnn_fuzz_configs), agreeing "
                             "nets with one option of one layer changed (returnn_fuzz_mutate), sequence orders and "
                             "batches (returnn_fuzz_batches), chains that cut, pad or stretch the time axis on "
                             "sequences of 0 and 1 frames (returnn_fuzz_dims)")
    parser.add_argument("--cases-dir", help="--kind published: the JSON cases benchmarks/published_configs.py "
                                            "--dump-nets wrote")
    parser.add_argument("--returnn-python", default=os.path.join(REPO, ".bench-venv-returnn", "bin", "python"))
    parser.add_argument("--keep", help="keep RETURNN's outputs (.npz) in this directory")
    parser.add_argument("--train", action="store_true",
                        help="build the nets for training (batch statistics; draws with dropout are left out)")
    parser.add_argument("--trace", action="store_true", help="print RETURNN's traceback of the first case it fails on")
    parser.add_argument("--show", nargs="*", default=["DIFFER", "GAP", "LAX", "CRASH"], help="verdicts to list")
    parser.add_argument("--only", nargs="+", metavar="SUBSTR", help="only the drawn cases whose name holds one of these")
    parser.add_argument("--static-time", action="store_true",
                        help="chain/rec: dense (T, F) inputs become a static time axis of 6 frames (extern data "
                             "shape (6, F), every sequence full length)")
    parser.add_argument("--behavior-versions", type=int, nargs="+", metavar="V",
                        help="draw each case's behavior_version from these (by the case's seed and index)")
    args = parser.parse_args()
    if not os.path.exists(args.returnn_python):
        sys.exit("returnn_fuzz: no RETURNN venv at %s (see tests/returnn_goldens/make_goldens.py)" % args.returnn_python)
    if args.kind == "configs":  # each config in a process of its own per engine (returnn_fuzz_configs)
        import returnn_fuzz_configs
        counts = returnn_fuzz_configs.run(args.cases_dir, args.returnn_python, args.keep, args.show,
                                          getattr(args, "only", None))
        return 1 if counts.get("DIFFER") or counts.get("CRASH") else 0
    if args.kind == "batches":  # orders and batches per epoch, no networks (returnn_fuzz_batches)
        import returnn_fuzz_batches
        counts = returnn_fuzz_batches.run(args.seed, args.start, args.n, args.returnn_python, args.keep, args.show,
                                          args.only)
        return 1 if counts.get("DIFFER") or counts.get("CRASH") else 0
    if args.kind == "rec":
        cases = [returnn_fuzz_rec.draw(args.seed, i, chain_layer=returnn_fuzz_cases.chain_layer)
                 for i in range(args.start, args.start + args.n)]
    elif args.kind == "loss":
        cases = [returnn_fuzz_loss.draw(args.seed, i) for i in range(args.start, args.start + args.n)]
    elif args.kind == "search":
        cases = [returnn_fuzz_search.draw(args.seed, i) for i in range(args.start, args.start + args.n)]
    elif args.kind == "testnets":
        cases = returnn_fuzz_testnets.draw(args.start, args.n)
    elif args.kind == "mutate":
        import returnn_fuzz_mutate  # the signatures of RETURNN's layers are cached in its venv
        cases = returnn_fuzz_mutate.draw_cases(args.seed, args.start, args.n, args.returnn_python,
                                               os.path.dirname(os.path.dirname(args.returnn_python)))
    elif args.kind == "published":
        cases = returnn_fuzz_testnets.published_cases(args.cases_dir, args.start, args.n)
    elif args.kind == "dims":
        import returnn_fuzz_dims
        cases = [returnn_fuzz_dims.draw(args.seed, i) for i in range(args.start, args.start + args.n)]
    else:
        cases = [returnn_fuzz_cases.draw(args.seed, i, args.train) for i in range(args.start, args.start + args.n)]
    if args.behavior_versions:
        for i, c in zip(range(args.start, args.start + args.n), cases):
            version = random.Random("%i/%i/behavior_version" % (args.seed, i)).choice(args.behavior_versions)
            c["config"] = dict(c.get("config") or {}, behavior_version=version)
    if args.static_time:
        cases = [c for c in (static_time_case(c) for c in cases) if c is not None]
    if args.only:
        cases = [c for c in cases if any(s in c["name"] for s in args.only)]
    if args.train:  # random masks differ between the engines: no dropout (or zoneout) in training-mode draws
        cases = [dict(c, train=True) for c in cases if "dropout" not in json.dumps(c["network"])
                 and not re.search(r'"zoneout_factor_\w+": (?!0\.0\b)', json.dumps(c["network"]))]
    out_dir = args.keep or tempfile.mkdtemp(prefix="returnn_fuzz_")
    os.makedirs(out_dir, exist_ok=True)
    try:
        return _judge_all(args, cases, out_dir)
    finally:
        if not args.keep:  # RETURNN's outputs and parameters (GBs for the published LMs)
            shutil.rmtree(out_dir, ignore_errors=True)


STATIC_FRAMES = 6


def static_time_case(c: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """``c`` with its dense ``(T, F)`` extern data of a static time axis of :data:`STATIC_FRAMES` frames (RETURNN's
    fixed-length data: no sequence lengths, every sequence full), or None when it has no such input."""
    extern, out = c.get("extern") or {}, {}
    for key, value in extern.items():
        dim = value.get("dim")
        plain = set(value) <= {"dim", "available_for_inference"} or value.get("shape") in ((None, dim), [None, dim])
        if value.get("sparse") or dim is None or not plain:
            return None
        out[key] = dict({k: v for k, v in value.items() if k != "dim"}, shape=[STATIC_FRAMES, dim], time_dim_axis=1)
    if not out:
        return None
    lens = {key: [STATIC_FRAMES] * len(v) for key, v in (c.get("lens") or {}).items()}
    return dict(c, name=c["name"] + "_static", extern=out, lens=lens,
                notes=(c.get("notes") or "") + " (static time axis of %i frames)" % STATIC_FRAMES)


def _judge_all(args: argparse.Namespace, cases, out_dir: str) -> int:
    """Runs ``cases`` in RETURNN (into ``out_dir``), then here; prints the verdicts; the exit code."""
    failed = (returnn_fuzz_loss.run_returnn if args.kind == "loss" else run_returnn)(
        cases, out_dir, args.returnn_python, args.trace)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    counts: Counter = Counter()
    for c in cases:
        judge = returnn_fuzz_loss.verdict if args.kind == "loss" else (
            returnn_fuzz_search.verdict if c.get("search") else verdict)
        kind, detail = judge(c, out_dir, failed.get(c["name"]))
        counts[kind] += 1
        if kind in args.show:
            version = " behavior_version %s" % c["config"]["behavior_version"] if "behavior_version" in (
                c.get("config") or {}) else ""
            print("%-9s %s %s%s\n          net %s | %s" % (kind, c["name"], c["family"], version,
                                                         json.dumps(c["network"]), detail), flush=True)
    print("\n%i cases (seed %i, %i..%i): %s" % (len(cases), args.seed, args.start, args.start + args.n - 1,
                                                ", ".join("%s %i" % kv for kv in sorted(counts.items()))))
    return 1 if counts["DIFFER"] or counts["CRASH"] else 0


if __name__ == "__main__":
    sys.exit(main())
