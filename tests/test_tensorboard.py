"""TensorBoard scalars written by a real training run, read back with TensorFlow's summary iterator."""
from __future__ import annotations

import glob
import os
import subprocess

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
