"""Resume continues exactly or says why it cannot: an interrupted state records its position in the
epoch's global batch order, the order itself and the rank count; checkpoints carry the
learning-rate control's state, so a lost learning-rate file does not restart the schedule."""
from __future__ import annotations

import io
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import tensorflow as tf

from helpers import PYTHON, REPO, assert_one_line_error, describe, run_rnn, write_config
from returnn.errors import ConfigError
from returnn.learning_rate_control import LearningRateControl
from returnn.learning_rate_file import read_learning_rate_file
from returnn.tf.resume import map_resume_position, reconcile_learning_rates

CONFIG = '''#!rnn.py
task = "train"
train = {"class": "Task12AXDataset", "num_seqs": 400}
num_inputs = 9
num_outputs = 2
batch_size = 400
max_seqs = 2
network = {"hidden": {"class": "linear", "activation": "tanh", "n_out": 8, "from": "data"},
           "output": {"class": "softmax", "loss": "ce", "from": "hidden"}}
adam = True
learning_rate = 0.5
learning_rate_control = "newbob"
newbob_relative_error_threshold = -1e9
num_epochs = 3
tf_session_opts = {"intra_op_parallelism_threads": 1, "inter_op_parallelism_threads": 1}
use_horovod = True
'''
# Interruption tests send the signal once epoch 2 has started: its epochs must last seconds, not ms.
LONG_CONFIG = CONFIG.replace('"num_seqs": 400', '"num_seqs": 4000')
FINISHED_RE = r"train epoch (\d+), finished after (\d+) steps"


def _stored(prefix: str):
    reader = tf.train.load_checkpoint(prefix)
    state = json.loads(reader.get_tensor("_engine/run_state").decode())
    return state, int(reader.get_tensor("_engine/epoch_step"))


# ---------------------------------------------------------------- units

def test_map_resume_position():
    state = {"ranks": 2, "distribution": "shard", "order": "abc", "batches": 100}
    assert map_resume_position(state, 40, 2, True, "abc", 100, "m") == 40
    assert map_resume_position(state, 40, 3, True, "abc", 100, "m") == 40  # re-mapped, with a warning
    assert map_resume_position(state, 40, 1, False, "abc", 100, "m") == 40
    assert map_resume_position(state, 0, 2, True, "xyz", 90, "m") == 0
    with pytest.raises(ConfigError, match=r"checkpoint m was saved 40 batches into an epoch whose batch order "
                                          r"differs.*\(90 of 100 batches now\).*start_epoch"):
        map_resume_position(state, 40, 2, True, "xyz", 90, "m")
    own = dict(state, distribution="own_order")
    assert map_resume_position(own, 40, 2, False, "abc", 100, "m") == 40
    with pytest.raises(ConfigError, match="each with its own batch order"):
        map_resume_position(own, 40, 4, False, "abc", 100, "m")
    assert map_resume_position({}, 20, 2, True, "abc", 100, "m") == 40  # old checkpoints counted steps per rank


@pytest.fixture
def console():
    """The log's console output as a StringIO."""
    from returnn.log import log
    buf = io.StringIO()
    log.initialize(console=buf)
    yield buf
    log.initialize()


def _take(buf: io.StringIO) -> str:
    text = buf.getvalue()
    buf.seek(0)
    buf.truncate()
    return text


def test_reconcile_learning_rates(tmp_path, console):
    saved = LearningRateControl("newbob", 0.5)
    for epoch, score in ((1, 2.0), (2, 1.5)):
        saved.set_epoch_error(epoch, {"dev_score": score})
    from returnn.learning_rate_file import format_learning_rate_file
    stored = {"learning_rates": format_learning_rate_file(saved.epochs)}
    path = tmp_path / "lr.data"
    missing = LearningRateControl("newbob", 0.5, filename=str(path))
    reconcile_learning_rates(missing, stored, 2, "model.002")
    assert sorted(missing.epochs) == [1, 2] and missing.epochs[2].error == {"dev_score": 1.5}
    assert "learning-rate file %s is missing" % path in _take(console)
    missing.epochs[2].error["dev_score"] = 1.25
    missing.save()
    edited = LearningRateControl("newbob", 0.5, filename=str(path))
    reconcile_learning_rates(edited, stored, 2, "model.002")
    assert edited.epochs[2].error == {"dev_score": 1.25}  # the file wins
    assert "disagrees with checkpoint model.002 on epoch(s) 2" in _take(console)
    reconcile_learning_rates(edited, {}, 2, "model.002")  # old checkpoint: nothing to compare
    assert _take(console) == ""


# ---------------------------------------------------------------- single process

def _interrupt(tmp_path: Path, config: Path, model: Path) -> int:
    """Trains until epoch 2 runs, sends SIGTERM; returns the stopped epoch."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
    out = tmp_path / "first.out"
    with open(out, "w") as f:
        proc = subprocess.Popen([PYTHON, "rnn.py", str(config), "++model", str(model), "++learning_rate_file",
                                 str(model) + ".lr.data", "++use_horovod", "0"], cwd=str(REPO), env=env,
                                stdout=f, stderr=subprocess.STDOUT)
    deadline = time.time() + 300
    while "start epoch 2 with" not in out.read_text() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=300) == 128 + signal.SIGTERM, out.read_text()
    m = re.search(r"stop requested \(signal\) in epoch (\d+) after step (\d+)", out.read_text())
    assert m, out.read_text()
    return int(m.group(1))


def test_interrupted_state_refuses_other_batching_and_resumes_with_same(tmp_path):
    config = write_config(tmp_path / "c.config", LONG_CONFIG)
    model = tmp_path / "model"
    epoch = _interrupt(tmp_path, config, model)
    state, position = _stored(str(model) + ".interrupted")
    assert state["ranks"] == 1 and position > 0 and state["batches"] > position
    base = [config, "++model", model, "++learning_rate_file", str(model) + ".lr.data", "++use_horovod", "0"]
    proc = run_rnn(base + ["++max_seqs", "3"], timeout=300)
    assert_one_line_error(proc, "checkpoint %s.interrupted was saved %i batches into an epoch whose batch order "
                          "differs" % (model, position))
    proc = run_rnn(base, timeout=300)
    assert proc.returncode == 0, describe(proc)
    steps = {int(e): int(n) for e, n in re.findall(FINISHED_RE, proc.stdout)}
    assert steps[epoch] == state["batches"] - position, describe(proc)
    # RETURNN has no mid-epoch state: it trains the interrupted epoch again whole, so its learning-rate file
    # is that of an uninterrupted run (scores of all the epoch's batches, its steps, its first global step)
    whole = tmp_path / "whole"
    proc = run_rnn([config, "++model", whole, "++learning_rate_file", str(whole) + ".lr.data", "++use_horovod", "0"],
                   timeout=300)
    assert proc.returncode == 0, describe(proc)
    ours, ref = (read_learning_rate_file(str(m) + ".lr.data") for m in (model, whole))
    assert sorted(ours) == sorted(ref) == [1, 2, 3]
    for e in ref:
        assert ours[e].learning_rate == ref[e].learning_rate
        assert ours[e].error.keys() == ref[e].error.keys()
        for key, value in ref[e].error.items():
            assert ours[e].error[key] == pytest.approx(value, rel=1e-6), (e, key)
        for key in ("global_train_step", "epoch_num_train_steps", "effective_learning_rate"):
            assert ours[e].meta[key] == ref[e].meta[key], (e, key)


def test_interrupted_epoch_with_reinit_network_each_epoch_resumes_as_uninterrupted(tmp_path):
    """reinit_network_each_epoch restarts Adam at each epoch's start, not where an interrupted epoch resumes:
    the resumed run's scores are an uninterrupted run's (RETURNN trains the epoch again whole)."""
    config = write_config(tmp_path / "c.config", LONG_CONFIG + "reinit_network_each_epoch = True\n")
    model, whole = tmp_path / "model", tmp_path / "whole"
    _interrupt(tmp_path, config, model)
    for m in (model, whole):
        proc = run_rnn([config, "++model", m, "++learning_rate_file", str(m) + ".lr.data", "++use_horovod", "0"],
                       timeout=300)
        assert proc.returncode == 0, describe(proc)
    ours, ref = (read_learning_rate_file(str(m) + ".lr.data") for m in (model, whole))
    assert sorted(ours) == sorted(ref) == [1, 2, 3]
    for e in ref:
        for key, value in ref[e].error.items():
            assert ours[e].error[key] == pytest.approx(value, rel=1e-6), (e, key)


def test_lost_learning_rate_file_does_not_restart_schedule(tmp_path):
    config = write_config(tmp_path / "c.config", CONFIG.replace('"num_seqs": 400', '"num_seqs": 40'))
    model = tmp_path / "model"
    lr_file = tmp_path / "model.lr.data"
    base = [config, "++model", model, "++learning_rate_file", lr_file, "++use_horovod", "0"]
    first = run_rnn(base, timeout=300)
    assert first.returncode == 0, describe(first)
    assert "start epoch 3 with learning rate 0.25 " in first.stdout  # newbob decays every epoch from 3 on
    os.remove(lr_file)
    resumed = run_rnn(base + ["++num_epochs", "4"], timeout=300)
    assert resumed.returncode == 0, describe(resumed)
    assert "start epoch 4 with learning rate 0.125 " in resumed.stdout, describe(resumed)
    assert "WARNING: learning-rate file %s is missing; using the learning rates and scores of epochs 1-3 stored in " \
           "%s.003" % (lr_file, model) in resumed.stdout + resumed.stderr


# ---------------------------------------------------------------- two ranks, then one

@pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs OpenMPI's mpirun")
def test_interrupted_on_two_ranks_resumes_on_one_without_repeating_batches(tmp_path):
    config = write_config(tmp_path / "c.config", LONG_CONFIG)
    model = tmp_path / "model"
    log = tmp_path / "run.log"
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", TF_CPP_MIN_LOG_LEVEL="2")
    cmd = ["mpirun", "-np", "2", "--oversubscribe", "--bind-to", "none", "--mca", "btl", "tcp,self", PYTHON,
           str(REPO / "rnn.py"), str(config), "++model", str(model), "++learning_rate_file", str(model) + ".lr.data",
           "++log", str(log), "++distributed_backend", "mpi", "++horovod_stall_timeout", "60"]
    proc = subprocess.Popen(cmd, cwd=str(REPO), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.time() + 300
        while not (log.exists() and "start epoch 2 with" in log.read_text()):
            assert proc.poll() is None and time.time() < deadline, proc.communicate()[0]
            time.sleep(0.05)
        time.sleep(0.1)
        proc.send_signal(signal.SIGUSR1)  # mpirun forwards it to both ranks
        out = proc.communicate(timeout=300)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
    m = re.search(r"stop requested \(signal\) in epoch (\d+) after step (\d+)", log.read_text())
    assert m, out + log.read_text()
    epoch, steps = int(m.group(1)), int(m.group(2))
    state, position = _stored(str(model) + ".interrupted")
    assert state["ranks"] == 2 and position == 2 * steps, state
    resumed = run_rnn([config, "++model", model, "++learning_rate_file", str(model) + ".lr.data",
                       "++use_horovod", "0"], timeout=300)
    assert resumed.returncode == 0, describe(resumed)
    text = resumed.stdout + resumed.stderr
    assert "continuing the interrupted epoch after batch %i of %i of its batch order on 1 ranks (it was " \
           "interrupted on 2 ranks)" % (position, state["batches"]) in text, describe(resumed)
    finished = {int(e): int(n) for e, n in re.findall(FINISHED_RE, resumed.stdout)}
    assert finished[epoch] == state["batches"] - position, describe(resumed)
