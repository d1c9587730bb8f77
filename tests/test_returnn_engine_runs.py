"""Whole training runs against the real RETURNN's: the numbers users read.

For each config of ``tests/returnn_goldens/engine_run_cases.py`` (tiny HDF data, 2-3 epochs) the
real RETURNN's run is stored (``make_engine_run_goldens.py``: its initial and final parameters,
steps per epoch and learning-rate file). Here ``rnn.py`` trains the same config on the same data,
starting from RETURNN's initial parameters (``import_model_train_epoch1``), and must give the same
steps per epoch (exactly), the same learning rates, train/dev scores and errors and step counts per
epoch in its learning-rate file (rtol 1e-4) and the same final parameters (atol 1e-4). No RETURNN
needed (``benchmarks/vs_returnn_numbers.py`` runs both side by side, each run its own ``rnn.py``
process). Here all runs share one process (``rnn.py``'s ``main`` per config), for speed.
"""
from __future__ import annotations

import json
import os
import sys
from typing import Dict

import numpy as np
import pytest

from helpers import PYTHON, REPO, child_env

sys.path.insert(0, str(REPO / "tests" / "returnn_goldens"))
import engine_run_cases as cases  # noqa: E402


def golden(case: str) -> dict:
    """RETURNN's run of ``case`` as :func:`engine_run_cases.run_training` returns it."""
    with open(os.path.join(cases.GOLDEN_DIR, case + ".json")) as f:
        run = json.load(f)
    with np.load(os.path.join(cases.GOLDEN_DIR, case + ".npz")) as npz:
        for which in ("init", "final"):
            run[which] = {k.split(":", 1)[1]: npz[k] for k in npz.files if k.startswith(which + ":")}
    return run


@pytest.fixture(scope="module")
def ours(tmp_path_factory) -> Dict[str, dict]:
    """This engine's runs of all cases (one process for all: TensorFlow starts once)."""
    root = tmp_path_factory.mktemp("runs")
    data = cases.write_data(str(root))
    inits = {case: golden(case)["init"] for case in cases.CASES}
    return cases.run_ours_in_one_process(PYTHON, list(cases.CASES), data, str(root), child_env(), inits)


@pytest.mark.parametrize("case", list(cases.CASES))
def test_same_numbers_as_returnn(case, ours):
    ref = golden(case)
    assert ref["config"] == cases.CASES[case][2] and ref["train_opts"] == cases.CASES[case][1], \
        "golden of %s is stale: rerun make_engine_run_goldens.py --only %s" % (case, case)
    run = ours[case]
    assert "error" not in run, "%s failed here: %s" % (case, run.get("error"))
    problems, _ = cases.compare(ref, run)
    assert not problems, "%s differs from RETURNN:\n  %s" % (case, "\n  ".join(problems))
