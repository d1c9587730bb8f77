"""TensorBoard scalars written by a real training run, read back with TensorFlow's summary iterator."""
from __future__ import annotations

import glob
import os
import subprocess
import sys

import numpy as np
import tensorflow as tf

from helpers import PYTHON, REPO, child_env



def read_scalars(log_dir: str):
    """tag -> list of (step, value) from all event files in ``log_dir``."""
    scalars = {}
    for path in sorted(glob.glob(os.path.join(log_dir, "events.out.tfevents.*"))):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                scalars.setdefault(value.tag, []).append((event.step, float(tf.make_ndarray(value.tensor))))
    return scalars


def train(tmp_path, num_epochs: int):
    cmd = [PYTHON, "rnn.py", "demos/demo-tf-lstm.12ax.config", "++model", str(tmp_path / "model"),
           "++learning_rate_file", str(tmp_path / "lr.data"), "++num_epochs", str(num_epochs),
           "++train", "{'class': 'Task12AXDataset', 'num_seqs': 100}",
           "++dev", "{'class': 'Task12AXDataset', 'num_seqs': 20, 'fixed_random_seed': 1}",
           "++tf_log_step_interval", "2", "++log_verbosity", "3"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300,
                          env=child_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_tensorboard_scalars(tmp_path):
    train(tmp_path, 2)
    log_dir = tmp_path / "tf-log"  # default: next to the model
    assert log_dir.is_dir()
    scalars = read_scalars(str(log_dir))
    for tag in ("epoch/learning_rate", "epoch/computing_time", "epoch/train_score", "epoch/train_error",
                "epoch/dev_score", "epoch/dev_error"):
        assert [step for step, _ in scalars[tag]] == [1, 2], tag  # epoch as the x axis
    assert scalars["epoch/learning_rate"][0][1] == np.float32(0.01)
    assert all(0 < v <= 100 for _, v in scalars["epoch/computing_time"])
    steps = [step for step, _ in scalars["train/cost:output"]]
    assert steps == list(range(2, 21, 2))  # every 2nd of 2 x 10 global steps
    assert "train/error:output" in scalars
    # the logged train score equals the one in the learning-rate file
    from returnn.learning_rate_control import read_learning_rate_file
    epochs = read_learning_rate_file(str(tmp_path / "lr.data"))
    assert scalars["epoch/train_score"][1][1] == np.float32(epochs[2].error["train_score"])
    # one run directory per training: resuming appends to the same directory, no sub-directories
    train(tmp_path, 3)
    assert [p for p in os.listdir(log_dir) if os.path.isdir(log_dir / p)] == []
    assert [step for step, _ in read_scalars(str(log_dir))["epoch/dev_score"]] == [1, 2, 3]


def test_scalars_written_without_the_tensorboard_package(tmp_path):
    """TensorFlow without the tensorboard package (the newest TF does not depend on it): training
    finishes, and the scalars are still written (TensorBoard installed elsewhere can show them)."""
    code = ("import sys; sys.modules['tensorboard'] = None\n"
            "from returnn.__main__ import main\n"
            "sys.exit(main(sys.argv[1:]))\n")
    cmd = [sys.executable, "-c", code, "demos/demo-tf-lstm.12ax.config", "++model", str(tmp_path / "model"),
           "++learning_rate_file", str(tmp_path / "lr.data"), "++num_epochs", "1",
           "++train", "{'class': 'Task12AXDataset', 'num_seqs': 40}",
           "++dev", "{'class': 'Task12AXDataset', 'num_seqs': 10, 'fixed_random_seed': 1}",
           "++tf_log_step_interval", "1", "++log_verbosity", "3"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "WARNING" not in proc.stdout
    scalars = read_scalars(str(tmp_path / "tf-log"))
    assert [step for step, _ in scalars["epoch/dev_score"]] == [1]
    assert len(scalars["train/cost:output"]) == 4  # 40 seqs, max_seqs 10


def test_summary_failure_is_one_warning_never_a_crash(tmp_path, capsys, monkeypatch):
    from returnn.log import log
    from returnn.tf import summaries
    monkeypatch.setattr(log, "console", sys.stdout)
    logger = summaries.SummaryLogger(str(tmp_path / "tb"), step_interval=1)

    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(summaries, "_scalar", broken)
    stats = np.array([[2.0, 4.0, 1.0, 4.0]])
    logger.train_step(1, stats, ["output"])
    logger.epoch(1, 0.1, {"score": 0.5}, {"dev": {"score": 0.4}}, 0.9)  # flushes: fails, warns once
    logger.epoch(2, 0.1, {"score": 0.5}, {}, 0.9)
    logger.close()
    out = capsys.readouterr().out
    assert out.count("WARNING: TensorBoard summaries to %s are off: RuntimeError: disk full" % (tmp_path / "tb")) == 1
    assert logger.writer is None


def test_tensorboard_command_starts():
    """`.venv/bin/tensorboard` (TensorBoard 2.15 imports pkg_resources: setup keeps setuptools < 81)."""
    exe = os.path.join(os.path.dirname(sys.executable), "tensorboard")
    if not os.path.exists(exe):
        import pytest
        pytest.skip("no tensorboard command in this environment")
    proc = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_tf_log_dir_none_on_the_command_line_switches_summaries_off(tmp_path):
    from returnn.config import load_config_from_args
    from returnn.tf.summaries import SummaryLogger
    model = str(tmp_path / "model")
    config = load_config_from_args(["demos/demo-tf-lstm.12ax.config", "++model", model, "++tf_log_dir", "None"])
    assert SummaryLogger.directory(config) is None  # not a directory named 'None'
    config = load_config_from_args(["demos/demo-tf-lstm.12ax.config", "++model", model])
    assert SummaryLogger.directory(config) == str(tmp_path / "tf-log")
