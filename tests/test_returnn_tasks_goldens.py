"""Tasks forward, search and eval of RETURNN-trained checkpoints against the real RETURNN's output
files, without RETURNN: ``benchmarks/vs_returnn_tasks.py --goldens`` trained a FF net, an LSTM and the
encoder-decoder ``encdec`` in RETURNN, ran each task variant there and stored its checkpoints and outputs
in ``tests/data/returnn_tasks`` (``index.json``: RETURNN's exit status and files per variant). Here
this engine runs the same config on the same checkpoint: where RETURNN wrote files, ours must equal
them (HDF datasets and attributes, text byte for byte or as values within 1e-5); where RETURNN
failed, ours must fail in one line (exit 2). Variants in ``vs_returnn_tasks.REFUSED_HERE`` are what
this engine refuses although RETURNN runs them (one line each)."""
from __future__ import annotations

import json
import os
import shutil
import sys

import pytest

from helpers import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import vs_returnn_tasks as tasks  # noqa: E402

GOLDEN = REPO / "tests" / "data" / "returnn_tasks"
with open(GOLDEN / "index.json") as _f:
    INDEX = json.load(_f)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("returnn_tasks")
    paths = tasks.cases.write_data(str(root))
    tasks.write_search_data(str(root))
    return root, paths


@pytest.mark.parametrize("name", sorted(INDEX))
def test_task_output_as_returnn(name, data):
    root, paths = data
    model, lines, _files, pre = tasks.VARIANTS[name]
    workdir = root / name
    shutil.copytree(GOLDEN / "models" / model, workdir)
    for fn in pre:
        (workdir / fn).write_text("existing\n")
    config = tasks.task_config(model, paths, str(workdir), lines)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    code, log_text = tasks.run([sys.executable, str(REPO / "rnn.py"), config], str(workdir), env)
    ref = INDEX[name]
    if ref["returncode"] or name in tasks.REFUSED_HERE:
        errors = [ln for ln in log_text.splitlines() if ln.startswith("ERROR: ")]
        assert code == 2 and len(errors) == 1, "RETURNN: %s; ours (exit %i):\n%s" % (ref["error"], code,
                                                                                    log_text[-3000:])
        return
    assert code == 0, log_text[-3000:]
    for fn in ref["files"]:
        diff = tasks.compare_file(str(GOLDEN / name / fn), str(workdir / fn))
        assert diff is None, "%s: %s" % (fn, diff)
