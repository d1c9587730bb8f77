#!/usr/bin/env python3
"""The numbers a training run prints, this engine against the real RETURNN (PyPI), side by side.

Usage: python benchmarks/vs_returnn_numbers.py [--cases ff_newbob ctc ...] [--returnn-venv PATH]

The configs and data are those of ``tests/returnn_goldens/engine_run_cases.py`` (tiny HDF data,
2-3 epochs). Per case RETURNN trains first (``python -m returnn`` of its venv, default
``<repo>/.bench-venv-returnn``, in a directory outside the repository, ``DISABLE_CUDA=1``) and writes
its initial parameters (``save_epoch1_initial_model``); then this engine's ``rnn.py`` trains from
those (``import_model_train_epoch1``). Printed per case: steps per epoch ours/RETURNN, train and dev
score per epoch ours/RETURNN, the learning rates, the max |final parameter difference| and AGREE or
DIFFER (the tolerances of ``tests/test_returnn_engine_runs.py``, which compares against stored
goldens of the same runs without needing RETURNN).
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from typing import List, Optional

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "tests", "returnn_goldens"))
import engine_run_cases as cases  # noqa: E402


def per_epoch(run: dict, key: str) -> str:
    """``key``'s values of the learning-rate file, one per epoch."""
    return " ".join("%.5f" % e["error"][key] if key in e["error"] else "-"
                    for _, e in sorted(run["lr_file"].items(), key=lambda kv: int(kv[0])))


def report(case: str, ref: dict, ours: dict) -> bool:
    """Prints the comparison of ``case``; whether it agrees."""
    problems, max_diff = cases.compare(ref, ours)
    def by_epoch(run: dict, key: str) -> list:
        return [v for _, v in sorted(run[key].items(), key=lambda kv: int(kv[0]))]

    def steps(run: dict) -> str:
        return " ".join(str(v) for v in by_epoch(run, "steps_per_epoch"))

    def rates(run: dict) -> str:
        return " ".join("%g" % e["learning_rate"] for e in by_epoch(run, "lr_file"))

    print("== %s: %s" % (case, "AGREE" if not problems else "DIFFER (%i)" % len(problems)))
    print("  steps/epoch    ours %-24s RETURNN %s" % (steps(ours), steps(ref)))
    print("  learning rate  ours %-24s RETURNN %s" % (rates(ours), rates(ref)))
    keys = sorted(k for k in ref["lr_file"]["1"]["error"] if not k.startswith(":meta:"))
    for key in keys:
        print("  %-14s ours %s\n  %-14s RETN %s" % (key, per_epoch(ours, key), "", per_epoch(ref, key)))
    print("  max |param diff| %.3g" % max_diff)
    for line in problems[:10]:
        print("  ! " + line)
    return not problems


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", nargs="+", default=list(cases.CASES), choices=list(cases.CASES))
    parser.add_argument("--returnn-venv", default=os.path.join(REPO, ".bench-venv-returnn"))
    args = parser.parse_args(argv)
    returnn_python = os.path.join(args.returnn_venv, "bin", "python")
    if not os.path.exists(returnn_python):
        sys.exit("no RETURNN venv at %s (benchmarks/vs_returnn.py creates one)" % args.returnn_venv)
    root = tempfile.mkdtemp(prefix="vs_returnn_numbers_")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(DISABLE_CUDA="1", TF_CPP_MIN_LOG_LEVEL="2")
    agree = 0
    try:
        data = cases.write_data(root)
        for case in args.cases:
            theirs_dir, ours_dir = os.path.join(root, case + "_returnn"), os.path.join(root, case + "_ours")
            os.makedirs(theirs_dir)
            os.makedirs(ours_dir)
            ref = cases.run_training([returnn_python, "-m", "returnn"], case, data, theirs_dir, env)
            if not ref["version"]:
                sys.exit("%s did not run the real RETURNN (no banner)" % returnn_python)
            ours = cases.run_ours([sys.executable, os.path.join(REPO, "rnn.py")], case, data, ours_dir, env,
                                  ref["init"])
            agree += report(case, ref, ours)
            sys.stdout.flush()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("%i of %i cases AGREE" % (agree, len(args.cases)))
    return 0 if agree == len(args.cases) else 1


if __name__ == "__main__":
    sys.exit(main())
