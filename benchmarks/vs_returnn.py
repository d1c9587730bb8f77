#!/usr/bin/env python3
"""This engine against the real RETURNN (PyPI) on the same configs, side by side.

Usage: python benchmarks/vs_returnn.py [--configs lstm blstm ff conv] [--runs 3] [--returnn-venv PATH]

Once, it creates a virtualenv (default ``<repo>/.bench-venv-returnn``, gitignored) with
``returnn``, ``tensorflow-cpu==2.15.1``, ``numpy<2`` and ``h5py`` from PyPI; it is not part of
``make setup`` or the tests. It writes the synthetic HDF files the configs read (cached under
``--workdir``), then runs every config of ``benchmarks/configs/`` through both engines alternately
(who goes first alternates too), each run in a fresh directory outside the repository (so
``python -m returnn`` imports the installed RETURNN, not this package). RETURNN's native LSTM ops
need CUDA, so for RETURNN the LSTM unit is rewritten to ``--returnn-unit`` (``standardlstm``).
Both engines load byte-compiled modules, as in users' runs: pip compiled the installed RETURNN,
this package is compiled once before the runs (``PYTHONDONTWRITEBYTECODE`` is dropped).

Per config it prints: median whole-run wall time of each engine (process start to exit), the
ratio ours/RETURNN (target <= 0.8), steps per epoch of each, median step time (the ``sec/step``
of the log_verbosity-5 lines, first step of each epoch excluded) and the final train score/error.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from typing import Dict, List, Optional, Tuple

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG_DIR = os.path.join(REPO, "benchmarks", "configs")
sys.path.insert(0, REPO)
RETURNN_REQUIREMENTS = ["returnn", "tensorflow-cpu==2.15.1", "numpy<2", "h5py", "dm-tree"]

# name -> (num_seqs, min_len, max_len, num_classes, seed); features are 40-dim. The name holds
# the sizes, so a changed definition never reuses a stale cached file.
DATASETS = {
    "feat40-c50-n500": (500, 50, 200, 50, 1),
    "feat40-c500-n60": (60, 50, 200, 500, 2),
    "feat40-c50-n2000": (2000, 50, 200, 50, 3),
}
FEATURE_DIM = 40


def ensure_returnn_venv(path: str) -> str:
    """The Python of a virtualenv with RETURNN installed; creates it on first use."""
    python = os.path.join(path, "bin", "python")
    probe = [python, "-c", "import returnn, tensorflow, h5py, tree"]
    if os.path.exists(python) and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    print("installing RETURNN into %s (once) ..." % path, flush=True)
    base = getattr(sys, "_base_executable", None) or sys.executable
    subprocess.run([base, "-m", "venv", path], check=True)
    subprocess.run([python, "-m", "pip", "install", "-q"] + RETURNN_REQUIREMENTS, check=True)
    subprocess.run(probe, check=True)
    return python


def write_datasets(data_dir: str) -> None:
    """Synthetic, learnable frame classification data: the class of frame t is the argmax of a
    fixed random projection of frames t and t-2 (so a model needs a little context)."""
    from returnn.datasets.hdf_write import SimpleHDFWriter
    os.makedirs(data_dir, exist_ok=True)
    for name, (num_seqs, min_len, max_len, num_classes, seed) in DATASETS.items():
        path = os.path.join(data_dir, name + ".hdf")
        if os.path.exists(path):
            continue
        rng = np.random.RandomState(seed)
        proj = rng.randn(2, FEATURE_DIM, num_classes).astype(np.float32)
        with SimpleHDFWriter(path, dim=FEATURE_DIM, extra_type={"classes": (num_classes, 1, "int32")}) as writer:
            for i in range(num_seqs):
                n = int(rng.randint(min_len, max_len + 1))
                x = rng.randn(n, FEATURE_DIM).astype(np.float32)
                prev = np.concatenate([np.zeros((2, FEATURE_DIM), np.float32), x[:-2]])
                y = np.argmax(x @ proj[0] + prev @ proj[1], axis=-1).astype(np.int32)
                writer.insert_batch(x[None], [n], ["seq-%i" % i], extra={"classes": y[None]})


def returnn_config_text(text: str, unit: str) -> str:
    """The config for RETURNN: every LSTM ``unit`` replaced by ``unit`` (CPU-only TF)."""
    return re.sub(r'("unit"\s*:\s*)"[A-Za-z0-9_]+"', r'\g<1>"%s"' % unit, text)


class RunResult:
    """Figures parsed from one run's log."""

    def __init__(self, wall: float, log_text: str, returncode: int):
        self.wall = wall
        self.returncode = returncode
        self.log_text = log_text
        self.steps = [int(s) for s in re.findall(r"train epoch \d+, finished after (\d+) steps", log_text)]
        step_times: List[float] = []
        for line in log_text.splitlines():
            m = re.search(r"train epoch \d+, step (\d+),.*?([\d.]+) sec/step", line)
            if m and int(m.group(1)) > 0:
                step_times.append(float(m.group(2)))
        self.step_time = float(np.median(step_times)) if step_times else float("nan")
        scores = re.findall(r"epoch +\d+ score: ([-\d.eE+naif]+) error: ([-\d.eE+naif]+)", log_text)
        self.score = tuple(float(v) for v in scores[-1]) if scores else (float("nan"), float("nan"))


def compile_package() -> None:
    """Byte-compiles this package once, as pip does for the installed RETURNN, so neither engine
    compiles its modules from source in the timed runs (``__pycache__`` is gitignored)."""
    import compileall
    compileall.compile_dir(os.path.join(REPO, "returnn"), quiet=1)


def run_once(cmd: List[str], run_dir: str, data_dir: str) -> RunResult:
    """Runs ``cmd`` in a fresh ``run_dir`` that sees the data as ``bench-data/``."""
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(run_dir)
    os.symlink(data_dir, os.path.join(run_dir, "bench-data"))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # both read compiled modules, as users' runs do (see compile_package)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=run_dir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.perf_counter() - t0
    with open(os.path.join(run_dir, "run.log"), "w") as f:
        f.write(proc.stdout)
    return RunResult(wall, proc.stdout, proc.returncode)


def bench_config(name: str, args: argparse.Namespace, returnn_python: str, data_dir: str
                 ) -> Tuple[List[RunResult], List[RunResult]]:
    src = os.path.join(CONFIG_DIR, name + ".config")
    with open(src) as f:
        text = f.read()
    cfg_dir = os.path.join(args.workdir, "configs")
    os.makedirs(cfg_dir, exist_ok=True)
    ours_cfg, theirs_cfg = os.path.join(cfg_dir, name + ".ours.config"), os.path.join(cfg_dir, name + ".returnn.config")
    with open(ours_cfg, "w") as f:
        f.write(text)
    with open(theirs_cfg, "w") as f:
        f.write(returnn_config_text(text, args.returnn_unit))
    cmds = {"ours": [sys.executable, os.path.join(REPO, "rnn.py"), ours_cfg],
            "returnn": [returnn_python, "-m", "returnn", theirs_cfg]}
    results: Dict[str, List[RunResult]] = {"ours": [], "returnn": []}
    for i in range(args.runs):
        order = ["ours", "returnn"] if i % 2 == 0 else ["returnn", "ours"]
        for engine in order:
            res = run_once(cmds[engine], os.path.join(args.workdir, "runs", "%s-%s-%i" % (name, engine, i)), data_dir)
            if res.returncode != 0:
                tail = "\n".join(res.log_text.splitlines()[-15:])
                sys.exit("%s on %s failed (exit %i):\n%s" % (engine, name, res.returncode, tail))
            print("  %-6s %-8s run %i: %6.2f s, %s steps, step %.1f ms, score %.4f error %.4f"
                  % (name, engine, i, res.wall, res.steps, 1e3 * res.step_time, res.score[0], res.score[1]), flush=True)
            results[engine].append(res)
    return results["ours"], results["returnn"]


def summary_row(name: str, ours: List[RunResult], theirs: List[RunResult]) -> str:
    med = lambda rs, f: float(np.median([f(r) for r in rs]))  # noqa: E731
    wall_o, wall_r = med(ours, lambda r: r.wall), med(theirs, lambda r: r.wall)
    steps = lambda rs: "/".join(str(s) for s in sorted(set(rs[0].steps)))  # noqa: E731
    return ("%-6s %8.2f %8.2f %7.3fx %10s %10s %8.1f %8.1f  %.3f/%.3f  %.3f/%.3f"
            % (name, wall_o, wall_r, wall_o / wall_r, steps(ours), steps(theirs),
               1e3 * med(ours, lambda r: r.step_time), 1e3 * med(theirs, lambda r: r.step_time),
               ours[-1].score[0], theirs[-1].score[0], ours[-1].score[1], theirs[-1].score[1]))


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--configs", nargs="+", default=["lstm", "blstm", "ff", "conv"])
    parser.add_argument("--runs", type=int, default=3, help="alternating runs per engine (median reported)")
    parser.add_argument("--returnn-venv", default=os.path.join(REPO, ".bench-venv-returnn"))
    parser.add_argument("--returnn-unit", default="standardlstm", help="LSTM unit RETURNN runs on CPU")
    parser.add_argument("--workdir", default="/tmp/returnn-vs-bench", help="data and run directories (not in the repo)")
    args = parser.parse_args(argv)
    returnn_python = ensure_returnn_venv(os.path.abspath(args.returnn_venv))
    data_dir = os.path.join(os.path.abspath(args.workdir), "data")
    write_datasets(data_dir)
    compile_package()
    rows = []
    for name in args.configs:
        ours, theirs = bench_config(name, args, returnn_python, data_dir)
        rows.append(summary_row(name, ours, theirs))
    print("\nmedian of %i alternating runs each; ratio = ours / RETURNN wall time (target <= 0.8x)" % args.runs)
    print("%-6s %8s %8s %8s %10s %10s %8s %8s  %-13s  %s" % ("config", "ours s", "RETURNN", "ratio", "steps/ep", "RETURNN",
                                                          "step ms", "RETURNN", "score o/R", "error o/R"))
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
