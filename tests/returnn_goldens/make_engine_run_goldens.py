"""Golden whole training runs of the real RETURNN (PyPI ``returnn``, TF backend): the configs of
``engine_run_cases.py`` on their tiny HDF data, 2-3 epochs each. ``tests/test_returnn_engine_runs.py``
trains this engine on the same config and data from the same initial parameters and compares.

Regenerate (from a directory OUTSIDE the repository, so that ``import returnn`` is the PyPI package;
``DISABLE_CUDA=1`` makes RETURNN compile its native LSTM op for the CPU)::

    cd /tmp && DISABLE_CUDA=1 /work/main/.bench-venv-returnn/bin/python \\
        /work/main/tests/returnn_goldens/make_engine_run_goldens.py [--only CASE ...]

Writes per case ``tests/data/returnn_engine_runs/<case>.json``: the case's config body, RETURNN's
version, its steps per epoch (``train epoch N, finished after S steps``) and its learning-rate file
(per epoch the learning rate and the train/dev scores and errors); and ``<case>.npz``: the
parameters RETURNN started from (``init:NAME``, its ``model.000`` of ``save_epoch1_initial_model``)
and those after the last epoch (``final:NAME``).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from typing import Dict

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import engine_run_cases as cases  # noqa: E402


def record(case: str, data: Dict[str, str], out_dir: str) -> None:
    """Runs ``case`` in RETURNN (``python -m returnn`` of this interpreter) and writes its golden files
    into ``out_dir``."""
    workdir = tempfile.mkdtemp(prefix="engine_run_%s_" % case)
    try:
        env = dict(os.environ, DISABLE_CUDA="1", TF_CPP_MIN_LOG_LEVEL="2")
        run = cases.run_training([sys.executable, "-m", "returnn"], case, data, workdir, env)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if not run["version"]:
        raise RuntimeError("not the real RETURNN (no banner):\n" + run["log"][-3000:])
    epochs = cases.num_epochs(case)
    assert sorted(run["steps_per_epoch"]) == [str(e) for e in range(1, epochs + 1)], run["steps_per_epoch"]
    # (a pretrain network grows: its later layers are not in the initial model)
    assert set(run["init"]) <= set(run["final"]), (sorted(run["init"]), sorted(run["final"]))
    for entry in run["lr_file"].values():  # the wall time is not reproducible: only that it is there
        entry["error"] = {k: None if k.startswith(":meta:") and k not in cases.META_KEYS else v
                          for k, v in entry["error"].items()}
    meta = {"case": case, "config": cases.CASES[case][2], "train_opts": cases.CASES[case][1],
            "returnn_version": run["version"],
            "steps_per_epoch": run["steps_per_epoch"], "lr_file": run["lr_file"], "checkpoints": run["checkpoints"]}
    with open(os.path.join(out_dir, case + ".json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
        f.write("\n")
    arrays = {"init:" + k: v for k, v in run["init"].items()}
    arrays.update({"final:" + k: v for k, v in run["final"].items()})
    np.savez_compressed(os.path.join(out_dir, case + ".npz"), **arrays)
    print("%s: steps %s, learning rates %s" % (case, run["steps_per_epoch"],
                                               {k: v["learning_rate"] for k, v in run["lr_file"].items()}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", default=None, help="cases to (re)make (default: all)")
    parser.add_argument("--out", default=cases.GOLDEN_DIR)
    args = parser.parse_args()
    import returnn
    ours = os.path.join(os.path.dirname(os.path.dirname(HERE)), "returnn")
    if os.path.realpath(returnn.__file__).startswith(ours):
        sys.exit("run from outside the repository: this imports the repository's returnn, not RETURNN")
    os.makedirs(args.out, exist_ok=True)
    data_dir = tempfile.mkdtemp(prefix="engine_run_data_")
    try:
        data = cases.write_data(data_dir)
        for case in args.only or list(cases.CASES):
            record(case, data, args.out)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
