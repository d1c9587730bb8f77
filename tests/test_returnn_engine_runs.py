"""Whole training runs against the real RETURNN's: the numbers users read.

For each config of ``tests/returnn_goldens/engine_run_cases.py`` (tiny HDF data, 2-3 epochs) the
real RETURNN's run is stored (``make_engine_run_goldens.py``: its initial and final parameters,
steps per epoch and learning-rate file). Here ``rnn.py`` trains the same config on the same data,
starting from RETURNN's initial parameters (``import_model_train_epoch1``), and must give the same
steps per epoch (exactly), the same learning rates, train/dev scores and errors and step counts per
epoch in its learning-rate file (rtol 1e-4) and the same final parameters (atol 1e-4). No RETURNN
needed (``benchmarks/vs_returnn_numbers.py`` runs both side by side).
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
def data(tmp_path_factory) -> Dict[str, str]:
    return cases.write_data(str(tmp_path_factory.mktemp("data")))


@pytest.mark.parametrize("case", list(cases.CASES))
def test_same_numbers_as_returnn(case, data, tmp_path):
    ref = golden(case)
    assert ref["config"] == cases.CASES[case][2] and ref["train_opts"] == cases.CASES[case][1], \
        "golden of %s is stale: rerun make_engine_run_goldens.py --only %s" % (case, case)
    ours = cases.run_ours([PYTHON, str(REPO / "rnn.py")], case, data, str(tmp_path), child_env(), ref["init"])
    problems, _ = cases.compare(ref, ours)
    assert not problems, "%s differs from RETURNN:\n  %s" % (case, "\n  ".join(problems))
