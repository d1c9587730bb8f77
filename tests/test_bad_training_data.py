"""Training data that cannot be trained on is one line, exit 2: an empty epoch, fewer batches than
ranks (real mpirun), and a sequence whose input and target lengths differ under a framewise loss."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from helpers import PYTHON, REPO, TINY_12AX, assert_one_line_error, describe, run_rnn, train_args, write_config

STATIC = '''#!rnn.py
import numpy as np
_rng = np.random.RandomState(0)
_lengths = [(6, 6), (7, 7), %(bad)s, (5, 5)]
train = {"class": "StaticDataset", "input_dim": 3, "output_dim": 4, "tags": ["s0", "s1", "odd-one", "s3"],
         "data": [{"data": _rng.randn(n, 3).astype("float32"), "classes": _rng.randint(0, 4, size=m).astype("int32")}
                  for n, m in _lengths]}
num_inputs = 3
num_outputs = 4
batch_size = 100
max_seqs = %(max_seqs)i
network = {"hidden": {"class": "linear", "activation": "tanh", "n_out": 5, "from": "data"},
           "output": {"class": "softmax", "loss": "%(loss)s", "from": "hidden"}}
learning_rate = 0.01
num_epochs = 1
tf_session_opts = {"intra_op_parallelism_threads": 1, "inter_op_parallelism_threads": 1}
'''


@pytest.mark.parametrize("bad, max_seqs", [("(8, 6)", 1), ("(6, 8)", 1), ("(7, 6)", 4)],
                         ids=["target-shorter-alone", "target-longer-alone", "padded-lengths-agree"])
def test_misaligned_sequence_under_framewise_loss_is_named(tmp_path, bad, max_seqs):
    config = write_config(tmp_path / "c.config", STATIC % {"bad": bad, "max_seqs": max_seqs, "loss": "ce"})
    proc = run_rnn(train_args(config, tmp_path), timeout=300)
    n, m = eval(bad)  # noqa: S307 - the test's own literal
    assert_one_line_error(proc, "dataset train: sequence 'odd-one' (index 2): layer 'output' has a framewise loss",
                          "target 'classes' differ (output length %i, target length %i)" % (n, m))
    assert not (tmp_path / "model.001.index").exists()


def test_misaligned_lengths_are_fine_for_ctc(tmp_path):
    """Label sequences shorter than their inputs (with room for a blank between repeated labels: else
    CTC has no valid path, the loss is inf, and training stops as RETURNN's does)."""
    text = STATIC.replace("(6, 6), (7, 7), %(bad)s, (5, 5)", "(6, 3), (7, 3), %(bad)s, (5, 2)")
    config = write_config(tmp_path / "c.config", text % {"bad": "(8, 3)", "max_seqs": 4, "loss": "ctc"})
    proc = run_rnn(train_args(config, tmp_path), timeout=300)
    assert proc.returncode == 0, describe(proc)


def test_empty_training_data_is_one_line(tmp_path):
    config = write_config(tmp_path / "c.config", TINY_12AX.replace('"num_seqs": 40', '"num_seqs": 0'))
    proc = run_rnn(train_args(config, tmp_path), timeout=300)
    assert_one_line_error(proc, "train dataset 'train' has no sequences in epoch 1")
    assert not (tmp_path / "model.001.index").exists()



def test_training_data_of_only_empty_sequences_says_so(tmp_path):
    """Sequences of length 0 train (tests/test_zero_length.py); when all of them are empty there is
    no frame to train on, and the line says that (it said "no sequences ... num_seqs 0")."""
    text = STATIC % {"bad": "(0, 0)", "max_seqs": 4, "loss": "ce"}
    config = write_config(tmp_path / "c.config", text.replace("_lengths = [(6, 6), (7, 7), (0, 0), (5, 5)]",
                                                              "_lengths = [(0, 0)] * 4"))
    proc = run_rnn(train_args(config, tmp_path), timeout=300)
    assert_one_line_error(proc, "train dataset 'train' has 4 sequences in epoch 1, all of length 0: there is no frame "
                                "to train on")
    assert not (tmp_path / "model.001.index").exists()

@pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs OpenMPI's mpirun")
def test_fewer_batches_than_ranks_is_one_line(tmp_path):
    config = write_config(tmp_path / "c.config", TINY_12AX.replace('"num_seqs": 40', '"num_seqs": 3')
                          .replace("max_seqs = 8", "max_seqs = 10") + "use_horovod = True\n")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", TF_CPP_MIN_LOG_LEVEL="2")
    cmd = ["mpirun", "-np", "2", "--oversubscribe", "--bind-to", "none", "--mca", "btl", "tcp,self", PYTHON,
           str(REPO / "rnn.py")] + [str(a) for a in train_args(config, tmp_path)] + \
        ["++distributed_backend", "mpi", "++horovod_stall_timeout", "60"]
    proc = subprocess.run(cmd, cwd=str(REPO), env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, describe(proc)
    assert "train dataset 'train' has 1 batch(es) in epoch 1, fewer than the 2 ranks" in proc.stderr, describe(proc)
    assert "Traceback" not in proc.stderr + proc.stdout
    assert not (tmp_path / "model.001.index").exists()
