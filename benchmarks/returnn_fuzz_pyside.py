"""The harness of the differential checks of RETURNN's plain-Python parts (pretrain schedules, learning-rate
control, the Data API, text datasets): each check's script runs its cases in either engine's Python (``--run``,
``returnn`` on the path: this repository's package or the real RETURNN's, run from outside it) and compares
the results with one verdict per case (AGREE, BOTH-FAIL, DIFFER, LAX: a result here where RETURNN fails, GAP:
RETURNN's result refused here)."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from typing import Any, Callable, Dict, List, Optional, Sequence

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RETURNN_PYTHON = os.path.join(REPO, ".bench-venv-returnn", "bin", "python")

Result = Dict[str, Any]


def arguments(doc: str, n: int, argv: Optional[List[str]] = None) -> argparse.Namespace:
    """The common options: ``--seed``, ``--n``, ``--returnn-python``, ``--show`` (verdicts to print)."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--n", type=int, default=n)
    parser.add_argument("--returnn-python", default=RETURNN_PYTHON)
    parser.add_argument("--show", nargs="*", default=["DIFFER", "LAX", "GAP"])
    parser.add_argument("--run", nargs="+", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def start(doc: str, n: int, run_cases: Callable[..., None], argv: Optional[List[str]] = None):
    """The options (:func:`arguments`), or None when this process only ran cases (``--run``, in either engine)
    or the real RETURNN is missing (one line said so)."""
    args = arguments(doc, n, argv)
    if args.run:
        run_cases(*args.run)
        return None
    return args if have_returnn(args.returnn_python) else None


def have_returnn(python: str) -> bool:
    """Whether the real RETURNN's Python is there (else one line saying so)."""
    if os.path.exists(python):
        return True
    print("the real RETURNN is needed: %s is missing (see tests/returnn_goldens/make_goldens.py)" % python)
    return False


def run_engine(script: str, python: str, args: Sequence[str], ours: bool) -> None:
    """``script --run ARGS`` in ``python``: this repository's package first on the path (``ours``), else none
    of it (RETURNN's from its venv, run from the temp directory)."""
    env = dict(os.environ, DISABLE_CUDA="1", TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO if ours else "")
    subprocess.run([python, os.path.abspath(script), "--run"] + list(args), check=True, env=env,
                   cwd=REPO if ours else tempfile.gettempdir(), stdout=subprocess.DEVNULL)


def both_engines(script: str, returnn_python: str, cases: List[Dict[str, Any]], tmp: str,
                 extra: Callable[[str], List[str]] = lambda name: []):
    """The cases in RETURNN and here: (RETURNN's results, ours) by case name; ``extra(name)`` adds arguments
    after the cases and output files."""
    cases_file = os.path.join(tmp, "cases.json")
    with open(cases_file, "w") as f:
        json.dump(cases, f)
    results = []
    for python, name, ours in ((returnn_python, "returnn", False), (sys.executable, "ours", True)):
        out = os.path.join(tmp, name + ".json")
        run_engine(script, python, [cases_file, out] + extra(name), ours)
        with open(out) as f:
            results.append(json.load(f))
    return results[0], results[1]


def error_verdict(ours: Result, theirs: Result) -> Optional[str]:
    """The verdict when either failed (an ``error`` entry), else None."""
    if "error" in ours and "error" in theirs:
        return "BOTH-FAIL"
    if "error" in ours:
        return "GAP"
    if "error" in theirs:
        return "LAX"
    return None


def report(kind: str, seed: int, cases: List[Dict[str, Any]], ours: Dict[str, Result], theirs: Dict[str, Result],
           verdict: Callable[[Result, Result], str], show: Sequence[str],
           describe: Callable[[Dict[str, Any], Result, Result], str]) -> Dict[str, int]:
    """Prints the cases of the ``show`` verdicts (``describe``: their lines after the verdict and name) and the
    counts; returns the counts."""
    counts: Dict[str, int] = {}
    for case in cases:
        name = case["name"]
        v = verdict(ours[name], theirs[name])
        counts[v] = counts.get(v, 0) + 1
        if v in show:
            print("%-9s %s %s" % (v, name, describe(case, ours[name], theirs[name])))
    print("%s seed %i: %s" % (kind, seed, ", ".join("%s %i" % kv for kv in sorted(counts.items()))))
    return counts


def short(value: Any, n: int = 500) -> str:
    """``value`` as JSON, cut to ``n`` characters."""
    return json.dumps(value)[:n]
