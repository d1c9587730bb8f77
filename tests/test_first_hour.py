"""Small things a new user meets in the first hour: choosing the dataset of a config in the tools,
early errors for an incomplete forward config, the resume hint after Ctrl-C."""
from __future__ import annotations

import subprocess

import h5py

from helpers import PYTHON, REPO, TINY_12AX, describe, nonempty_lines, run_rnn, train_args, write_config

CONFIG = '''#!rnn.py
train = {"class": "Task12AXDataset", "num_seqs": 7}
dev = {"class": "Task12AXDataset", "num_seqs": 3, "fixed_random_seed": 1}
eval_datasets = {"devtrain": {"class": "Task12AXDataset", "num_seqs": 2, "fixed_random_seed": 2}}
'''


def _tool(*args):
    return subprocess.run([PYTHON] + [str(a) for a in args], cwd=str(REPO), capture_output=True, text=True,
                          timeout=300)


def _num_seqs(path) -> int:
    with h5py.File(path, "r") as f:
        return len(f["seqLengths"])


def test_hdf_dump_chooses_the_dataset_of_a_config(tmp_path):
    cfg = write_config(tmp_path / "c.config", CONFIG)
    for name, expected in ((None, 7), ("dev", 3), ("devtrain", 2)):
        out = tmp_path / ("%s.hdf" % name)
        proc = _tool("tools/hdf_dump.py", cfg, out, *(["--dataset", name] if name else []))
        assert proc.returncode == 0, proc.stderr
        assert _num_seqs(out) == expected
    proc = _tool("tools/hdf_dump.py", cfg, tmp_path / "x.hdf", "--dataset", "eval")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "has no 'eval' dataset (it has: train, dev, devtrain; choose one with --dataset NAME)" in proc.stderr
    proc = _tool("tools/dump-dataset.py", cfg, "--dataset", "dev", "--stats")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("dataset dev, epoch 1: sequences 0..2 of 3\n"), proc.stdout


def test_forward_without_eval_data_fails_before_loading(tmp_path):
    """RETURNN's TF task forward forwards the 'eval' dataset alone ('no eval data provided'); without
    output_file it writes dump-fwd-epoch-N.hdf."""
    cfg = write_config(tmp_path / "c.config", CONFIG + "task = 'forward'\nmodel = %r\n" % str(tmp_path / "nothing"))
    proc = run_rnn([cfg])
    assert proc.returncode == 2, describe(proc)
    assert proc.stderr.strip() == ("ERROR: task 'forward' needs an 'eval' dataset (RETURNN forwards it alone: "
                                   "'no eval data provided')")


def test_rec_sub_network_unit_error_shows_the_users_dict():
    import pytest
    from returnn.config import Config
    from returnn.errors import NetworkError
    from returnn.extern_data import extern_data_from_config
    from returnn.tf.network import TFNetwork
    specs = extern_data_from_config(Config({"num_inputs": 9, "num_outputs": 2}))
    unit = {"h": {"class": "linear", "from": ["data:source", "prev:h"], "n_out": 8},
            "output": {"class": "copy", "from": "h"}}
    net = {"rec": {"class": "rec", "from": "data", "unit": unit},
           "output": {"class": "softmax", "loss": "ce", "from": "rec"}}
    assert set(TFNetwork(net, specs).layers["rec"].layers) == {"h", "output"}  # sub-networks build
    unit["h"] = {"class": "linear", "from": ["data:source", "prev:h"], "n_out": 8, "activaton": "tanh"}
    with pytest.raises(NetworkError) as info:
        TFNetwork(net, specs)
    assert str(info.value) == ("layer 'rec/h' (linear): unknown option(s) 'activaton' (did you mean 'activation'?)")
    net["rec"]["unit"] = ["lstm"]
    with pytest.raises(NetworkError, match=r"unknown unit \['lstm'\] \(known"):
        TFNetwork(net, specs)


def test_log_verbosity_levels_and_already_trained(tmp_path):
    """Level 1 shows the epoch score lines (RETURNN's level) and nothing else; a second run of a
    finished training says it is already trained."""
    cfg = write_config(tmp_path / "tiny.config", TINY_12AX)
    proc = run_rnn(train_args(cfg, tmp_path, "++log_verbosity", "1"))
    assert proc.returncode == 0, describe(proc)
    lines = nonempty_lines(proc.stdout)
    assert [line.split(" score:")[0] for line in lines] == ["epoch 1", "epoch 2"], proc.stdout
    assert all(" dev: score " in line for line in lines)
    proc = run_rnn(train_args(cfg, tmp_path, "++log_verbosity", "2"))
    assert proc.returncode == 0, describe(proc)
    lines = nonempty_lines(proc.stdout)
    assert lines[0].startswith("Local devices available to TensorFlow: ")
    assert lines[1:] == ["model %s is already trained (num_epochs = 2, checkpoint of epoch 2 found); nothing to do: "
                         "a larger num_epochs trains on" % (tmp_path / "model")]


def test_ctrl_c_says_that_rerunning_resumes(tmp_path):
    import signal
    import time
    cfg = write_config(tmp_path / "tiny.config", TINY_12AX.replace("num_epochs = 2", "num_epochs = 500"))
    out_path, err_path = tmp_path / "out", tmp_path / "err"
    with open(out_path, "w") as out, open(err_path, "w") as err:
        # a test run started in the background (nohup, &) has SIGINT ignored, and children inherit
        # that: give the child the default handling, as in a terminal
        proc = subprocess.Popen([PYTHON, "rnn.py"] + [str(a) for a in train_args(cfg, tmp_path)], cwd=str(REPO),
                                stdout=out, stderr=err, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 300
        while "start epoch 2 with" not in out_path.read_text() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(120) == 130, out_path.read_text() + err_path.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
    # Ctrl-C saves the interrupted state as SIGTERM does (issue 28), so "run again" is true
    assert "stop requested (signal) in epoch " in out_path.read_text()  # acted on at the next step
    assert "run the same command again to continue from there" in out_path.read_text()
    assert (tmp_path / "model.interrupted.index").exists()


def _setup_choice(tmp_path, version: str, **env):
    """The line tools/setup_env.sh prints for an interpreter reporting ``version`` (nothing installed)."""
    import os
    fake = tmp_path / ("python" + version)
    fake.write_text("#!/bin/sh\necho %s\n" % version)
    fake.chmod(0o755)
    full_env = dict(os.environ, PYTHON=str(fake), SETUP_DECIDE_ONLY="1", VENV=str(tmp_path / "venv"), **env)
    return subprocess.run(["bash", str(REPO / "tools" / "setup_env.sh")], env=full_env, capture_output=True,
                          text=True, timeout=60)


def test_setup_picks_tensorflow_by_python_version(tmp_path):
    proc = _setup_choice(tmp_path, "3.11")
    assert proc.returncode == 0 and proc.stdout.startswith("[setup] TensorFlow 2.15.1 + Horovod 0.28.1 (chosen for "
                                                           "Python 3.11;"), proc.stdout + proc.stderr
    proc = _setup_choice(tmp_path, "3.12")
    assert proc.returncode == 0 and proc.stdout.startswith("[setup] newest TensorFlow + mpi4py backend, no Horovod "
                                                           "(chosen for Python 3.12;"), proc.stdout + proc.stderr
    assert "no wheels for Python >= 3.12" in proc.stdout and proc.stdout.count("\n") == 1
    proc = _setup_choice(tmp_path, "3.11", TF_STACK="latest")
    assert proc.returncode == 0 and "(TF_STACK=latest;" in proc.stdout
    proc = _setup_choice(tmp_path, "3.13", TF_STACK="horovod")
    assert proc.returncode == 1 and "needs Python <= 3.11" in proc.stderr
    assert not (tmp_path / "venv").exists()


def test_tensorflow_import_noise_follows_tf_cpp_min_log_level():
    """Newest TF logs through absl while it is imported, ignoring TF_CPP_MIN_LOG_LEVEL; the engine
    filters what the import wrote with that level (so a one-line error stays one line)."""
    from returnn.util.tf_import import filter_import_messages
    text = ("WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
            "I0000 00:00:1795341079.538590   32252 port.cc:153] oneDNN custom operations are on.\n"
            "I0000 00:00:1795341079.580190   32252 cpu_feature_guard.cc:227] This TensorFlow binary is optimized\n"
            "To enable the following instructions: AVX2 FMA, rebuild TensorFlow.\n"
            "W0000 00:00:1795341079.6   32252 gpu.cc:1] Cannot dlopen some GPU libraries.\n"
            "E0000 00:00:1795341079.7   32252 cuda.cc:2] failed call to cuInit\n"
            "something else\n")
    assert filter_import_messages(text, 2) == ["E0000 00:00:1795341079.7   32252 cuda.cc:2] failed call to cuInit",
                                               "something else"]
    assert len(filter_import_messages(text, 1)) == 3
    assert len(filter_import_messages(text, 0)) == 6
