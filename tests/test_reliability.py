"""Crash safety of training: ``kill -9`` at random moments followed by the same command, graceful
stop on SIGTERM/SIGUSR1, non-finite loss, and the checkpoint discovery rules behind them.

Every subprocess runs with a timeout, so a hang fails the test instead of blocking the suite.
"""
from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

import numpy as np
import pytest
import tensorflow as tf

from helpers import PYTHON, REPO, child_env

from returnn.learning_rate_control import read_learning_rate_file
from returnn.tf.checkpoint import (CheckpointManager, epoch_prefix, list_epoch_checkpoints,
                                   remove_stale_temp_files)

RUN_TIMEOUT = 240  # seconds for one whole training run
WAIT_TIMEOUT = 120  # seconds to wait for a log line or file before giving up

# 12AX with a small LSTM. "wide0"/"wide1" feed no loss: they only make each checkpoint ~6 MB, so
# that a checkpoint write takes long enough for a kill to land inside it.
CONFIG = '''#!rnn.py
task = "train"
train = {"class": "Task12AXDataset", "num_seqs": %(num_seqs)i}
dev = {"class": "Task12AXDataset", "num_seqs": 20, "fixed_random_seed": 1}
num_inputs = 9
num_outputs = 2
batch_size = 5000
max_seqs = 10
network = {
    "fw0": {"class": "rec", "unit": "nativelstm2", "n_out": 20},
    "output": {"class": "softmax", "loss": "ce", "from": ["fw0"]},
    "wide0": {"class": "linear", "n_out": 512, "from": ["fw0"]},
    "wide1": {"class": "linear", "n_out": 1024, "from": ["wide0"]},
}
adam = True
learning_rate = 0.01
learning_rate_control = "newbob"
newbob_relative_error_threshold = -0.1
num_epochs = %(num_epochs)i
tf_session_opts = {"intra_op_parallelism_threads": 1, "inter_op_parallelism_threads": 1}
log_verbosity = 4
'''
STEPS_PER_EPOCH = 20  # 200 sequences, max_seqs 10, never limited by batch_size
# the signal test needs epochs long enough (a few seconds) that the signal surely lands inside one
LONG_STEPS_PER_EPOCH = 200


def _config(num_epochs: int, steps_per_epoch: int = STEPS_PER_EPOCH) -> str:
    """CONFIG with ``num_epochs`` epochs of ``steps_per_epoch`` steps (10 sequences each)."""
    return CONFIG % {"num_epochs": num_epochs, "num_seqs": 10 * steps_per_epoch}

# A dataset whose construction writes a marker file, then waits (up to 60 s): a run held in its start-up.
SLOW_START_DATASET = '''
import time
from returnn.datasets.base import register_dataset
from returnn.datasets.generating import Task12AXDataset

@register_dataset
class SlowStartDataset(Task12AXDataset):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        open(%(marker)r, "w").close()
        time.sleep(60)
'''

# Epoch 1 is normal, from epoch 2 on every input frame is NaN.
NAN_CONFIG = '''#!rnn.py
import numpy as np
from returnn.datasets.base import register_dataset
from returnn.datasets.generating import DummyDataset

@register_dataset
class NanFromEpoch2Dataset(DummyDataset):
    def _corpus_load(self, corpus_indices):
        seqs = super()._corpus_load(corpus_indices)
        if self.epoch is not None and self.epoch >= 2:
            seqs = [dict(s, data=np.full_like(s["data"], np.nan)) for s in seqs]
        return seqs

task = "train"
train = {"class": "NanFromEpoch2Dataset", "input_dim": 5, "output_dim": 3, "num_seqs": 40, "seq_len": 8}
num_inputs = 5
num_outputs = 3
batch_size = 100
network = {"output": {"class": "softmax", "loss": "ce", "from": "data"}}
learning_rate = 0.01
num_epochs = 4
tf_session_opts = {"intra_op_parallelism_threads": 1, "inter_op_parallelism_threads": 1}
'''


# ---------------------------------------------------------------- helpers

class Run:
    """One ``rnn.py`` process with stdout/stderr going to files that the test can poll."""

    def __init__(self, args: List[str], out_dir: Path, name: str):
        self.stdout_path = out_dir / ("%s.stdout" % name)
        self.stderr_path = out_dir / ("%s.stderr" % name)
        with open(self.stdout_path, "w") as out, open(self.stderr_path, "w") as err:
            self.proc = subprocess.Popen([PYTHON, str(REPO / "rnn.py")] + [str(a) for a in args], cwd=str(REPO),
                                         env=child_env({"PYTHONUNBUFFERED": "1"}), stdout=out, stderr=err)

    @property
    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def wait_until(self, predicate: Callable[[], bool], timeout: float = WAIT_TIMEOUT, interval: float = 0.002) -> bool:
        """Polls ``predicate`` until it holds (True) or the process ended / the time is up (False)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return True
            if self.proc.poll() is not None:
                return predicate()
            time.sleep(interval)
        return False

    def wait(self, timeout: float = RUN_TIMEOUT) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)
            pytest.fail("rnn.py did not end within %i s\n%s" % (timeout, self.describe()))

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def describe(self) -> str:
        return "exit code %s\n--- stdout\n%s\n--- stderr\n%s" % (self.proc.returncode, self.stdout[-3000:],
                                                                 self.stderr[-3000:])


def _train_args(config: Path, model: Path, *extra: str) -> List[str]:
    return [str(config), "++model", str(model), "++learning_rate_file", str(model) + ".lr.data"] + list(extra)


def _complete_epochs(model: Path) -> List[int]:
    """Epochs whose checkpoint has its index (the completion mark) and data: checked here
    independently of the engine's own discovery code."""
    out = []
    for path in model.parent.glob(model.name + ".*.index"):
        m = re.fullmatch(re.escape(model.name) + r"\.(\d{3})\.index", path.name)
        if m and Path(str(path)[:-len(".index")] + ".data-00000-of-00001").exists():
            out.append(int(m.group(1)))
    return sorted(out)


def _temp_leftovers(model: Path) -> List[str]:
    return sorted(p.name for p in model.parent.iterdir() if ".tmp-" in p.name)


def _start_epoch(stdout: str) -> Optional[int]:
    m = re.search(r"^start training at epoch (\d+)$", stdout, re.M)
    if m:
        return int(m.group(1))
    m = re.search(r"is already trained \(num_epochs = \d+, checkpoint of epoch (\d+) found\)", stdout)
    return int(m.group(1)) + 1 if m else None


def _read_ckpt(prefix: str) -> Dict[str, int]:
    """Epoch and global step stored in a checkpoint (fails if it cannot be read)."""
    reader = tf.train.load_checkpoint(prefix)
    return {"epoch": int(reader.get_tensor("_engine/epoch")), "step": int(reader.get_tensor("global_step"))}


# ---------------------------------------------------------------- kill -9 and resume

def test_kill9_at_random_points_then_resume_finishes_all_epochs(tmp_path):
    """SIGKILL at 10 seeded random points (during start-up, during training steps, and inside
    checkpoint writes: the moment the ``.tmp-`` files of the target epoch's checkpoint appear),
    rerunning the same command each time: every run starts right after the newest complete epoch,
    the last run ends with ``Finished training in epoch N.``, and all N checkpoints are complete,
    loadable and hold exactly N epochs' worth of steps."""
    num_epochs = 10
    rng = random.Random(4711)
    config = tmp_path / "kill.config"
    config.write_text(_config(num_epochs))
    model = tmp_path / "out" / "model"
    args = _train_args(config, model)
    plan = ["ckpt"] * 4 + ["step"] * 4 + ["startup"] * 2
    rng.shuffle(plan)
    # Delays after the first temp file shows up: two kills at once (inside TF's write, whatever the
    # disk speed), two anywhere in the write (TF write ~10-30 ms here, then fsync and renames).
    ckpt_delays = [0.0, 0.0, rng.uniform(0.0, 0.04), rng.uniform(0.0, 0.04)]
    rng.shuffle(ckpt_delays)
    kills_inside_write = 0
    history = []  # (kind, target epoch, complete epochs after the kill, temp leftovers), for messages
    for i, kind in enumerate(plan):
        expected_start = (_complete_epochs(model) or [0])[-1] + 1
        assert expected_start <= num_epochs, "more progress than one epoch per killed run?"
        target = min(expected_start + rng.randint(0, 1), num_epochs)
        run = Run(args, tmp_path, "run%02d" % i)
        if kind == "startup":  # a random moment of start-up, before the first step (start-up is fast now)
            run.wait_until(lambda: "start training at epoch" in run.stdout, timeout=rng.uniform(0.5, 6.0))
        elif kind == "step":
            line = "start epoch %i with" % target
            assert run.wait_until(lambda: line in run.stdout), "no %r\n%s" % (line, run.describe())
            time.sleep(rng.uniform(0.0, 0.8))
        else:
            tmp_name = "%s.%03d.tmp-" % (model.name, target)
            assert run.wait_until(lambda: model.parent.exists() and any(
                n.startswith(tmp_name) for n in os.listdir(model.parent)), interval=0.0005), \
                "checkpoint of epoch %i never written\n%s" % (target, run.describe())
            time.sleep(ckpt_delays.pop())
        assert run.proc.poll() is None, "run %i (%s) ended before the kill\n%s" % (i, kind, run.describe())
        run.kill(signal.SIGKILL)
        assert run.wait(60) == -signal.SIGKILL
        leftovers = _temp_leftovers(model) if model.parent.exists() else []
        if kind == "ckpt" and any(n.startswith("%s.%03d.tmp-" % (model.name, target)) for n in leftovers):
            kills_inside_write += 1
        history.append((kind, target, _complete_epochs(model), leftovers))
        print("kill %i: %s, target epoch %i, complete after kill: %s, leftovers: %s" % ((i,) + history[-1]))
        started = _start_epoch(run.stdout)
        if started is not None:
            assert started == expected_start, "run %i resumed at %i, expected %i\n%s" % (
                i, started, expected_start, run.describe())
        for epoch in _complete_epochs(model):  # nothing that looks complete is broken
            assert _read_ckpt(str(model) + ".%03d" % epoch)["epoch"] == epoch
    assert kills_inside_write >= 2, "kills did not land inside checkpoint writes: %s" % history

    expected_start = (_complete_epochs(model) or [0])[-1] + 1
    final = Run(args, tmp_path, "final")
    assert final.wait() == 0, final.describe()
    assert _start_epoch(final.stdout) == expected_start, final.describe()
    assert "Finished training in epoch %i." % num_epochs in final.stdout
    assert _complete_epochs(model) == list(range(1, num_epochs + 1))
    for epoch in range(1, num_epochs + 1):
        state = _read_ckpt(str(model) + ".%03d" % epoch)
        # Each epoch trained exactly once on top of the previous checkpoint: no lost or doubled steps.
        assert state == {"epoch": epoch, "step": epoch * STEPS_PER_EPOCH}, (epoch, state)
    assert _temp_leftovers(model) == [], "leftovers of killed writers were not cleaned up"
    assert not Path(str(model) + ".interrupted.index").exists()
    epochs = read_learning_rate_file(str(model) + ".lr.data")
    assert sorted(epochs) == list(range(1, num_epochs + 1))
    for epoch, data in epochs.items():
        assert "train_score" in data.error and np.isfinite(data.error["train_score"]), (epoch, data.error)
        assert "dev_score" in data.error, (epoch, data.error)
        # RETURNN's resumed runs read the global step of the checkpoint they continue from
        assert data.meta["global_train_step"] == (epoch - 1) * STEPS_PER_EPOCH, (epoch, data.meta)


# ---------------------------------------------------------------- SIGTERM / SIGUSR1

@pytest.mark.parametrize("signame", ["SIGTERM", "SIGUSR1"])
def test_stop_signal_saves_interrupted_checkpoint_and_resumes(tmp_path, signame):
    """A stop signal mid-training: the current step finishes, ``<model>.interrupted`` is saved,
    the exit code is 128 + signum; the same command resumes from it and finishes."""
    signum = int(getattr(signal, signame))
    config = tmp_path / "sig.config"
    config.write_text(_config(3, LONG_STEPS_PER_EPOCH))
    model = tmp_path / "out" / "model"
    args = _train_args(config, model)
    run = Run(args, tmp_path, "first")
    assert run.wait_until(lambda: "start epoch 2 with" in run.stdout), run.describe()
    time.sleep(0.5)  # into epoch 2, far from its end (an epoch takes seconds)
    run.kill(signum)
    assert run.wait() == 128 + signum, run.describe()
    m = re.search(r"stop requested \(signal\) in epoch (\d+) after step (\d+); saved (\S+);", run.stdout)
    assert m, run.describe()
    stopped_epoch = int(m.group(1))
    assert m.group(3) == str(model) + ".interrupted"
    state = _read_ckpt(str(model) + ".interrupted")
    assert state["epoch"] == stopped_epoch - 1  # epochs complete before the interrupted one
    assert state["step"] == (stopped_epoch - 1) * LONG_STEPS_PER_EPOCH + int(m.group(2))
    steps_done = int(m.group(2))
    assert "Traceback" not in run.stderr

    resumed = Run(args, tmp_path, "second")
    assert resumed.wait() == 0, resumed.describe()
    assert _start_epoch(resumed.stdout) == stopped_epoch, resumed.describe()
    assert "loaded checkpoint %s.interrupted" % model in resumed.stdout
    assert "continuing epoch %i after the first %i batches of its batch order" % (stopped_epoch, steps_done) \
        in resumed.stdout
    assert "Finished training in epoch 3." in resumed.stdout
    # no batch is trained twice: the final step count is that of an uninterrupted run
    assert _read_ckpt(str(model) + ".003")["step"] == 3 * LONG_STEPS_PER_EPOCH
    assert _complete_epochs(model) == [1, 2, 3]
    assert not Path(str(model) + ".interrupted.index").exists(), "stale interrupted state kept"
    epochs = read_learning_rate_file(str(model) + ".lr.data")
    assert sorted(epochs) == [1, 2, 3]
    # RETURNN (no mid-epoch state) trains the interrupted epoch again whole: its ':meta:' entries are those
    # of an uninterrupted epoch (Engine.global_train_step at the epoch's start, all its steps); so here
    for epoch, data in epochs.items():
        assert (data.meta["global_train_step"], data.meta["epoch_num_train_steps"]) == \
            ((epoch - 1) * LONG_STEPS_PER_EPOCH, LONG_STEPS_PER_EPOCH), (epoch, data.meta)


def _catches(pid: int, signum: int) -> bool:
    """Whether process ``pid`` has a handler installed for ``signum`` (Linux /proc)."""
    try:
        status = Path("/proc/%i/status" % pid).read_text()
    except OSError:
        return False
    m = re.search(r"^SigCgt:\s*([0-9a-f]+)$", status, re.M)
    return bool(m) and bool(int(m.group(1), 16) & (1 << (signum - 1)))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/PID/status")
def test_stop_signal_during_startup_exits_at_once_without_traceback(tmp_path):
    """SIGTERM while the run is still starting (TensorFlow import, data, network): nothing has been
    trained, so it exits at once with 128 + signum and one explanatory line, writing nothing."""
    # the dev dataset's construction (start-up) says it is there, then waits: the signal surely lands in start-up
    # (polling the handler alone raced the start-up on a loaded machine, and the signal reached the training loop)
    marker = tmp_path / "in-startup"
    config = tmp_path / "sig.config"
    config.write_text(_config(3).replace('dev = {"class": "Task12AXDataset"', 'dev = {"class": "SlowStartDataset"')
                      + SLOW_START_DATASET % {"marker": str(marker)})
    model = tmp_path / "out" / "model"
    run = Run(_train_args(config, model), tmp_path, "startup")
    assert run.wait_until(lambda: marker.exists() and _catches(run.proc.pid, signal.SIGTERM), timeout=60,
                          interval=0.01), run.describe()
    run.kill(signal.SIGTERM)
    assert run.wait(60) == 128 + signal.SIGTERM, run.describe()
    assert "stopped by SIGTERM outside the training loop" in run.stderr
    assert "Traceback" not in run.stderr
    assert _complete_epochs(model) == [] and not Path(str(model) + ".interrupted.index").exists()


# ---------------------------------------------------------------- non-finite loss

def test_nonfinite_loss_stops_and_keeps_last_good_checkpoint(tmp_path):
    """NaN loss in epoch 2 (from NaN input data): the fixed message naming the sequence whose data
    is not finite, exit code 2 (bad data), epoch 1's checkpoint kept and intact, no checkpoint
    (epoch or interrupted) written from the broken state. (A model that diverges on finite data:
    exit code 1, tests/test_reliability_data.py.)"""
    config = tmp_path / "nan.config"
    config.write_text(NAN_CONFIG)
    model = tmp_path / "out" / "model"
    run = Run(_train_args(config, model), tmp_path, "nan")
    assert run.wait() == 2, run.describe()
    assert "Model seems broken, got inf or nan score. Cause: non-finite input data: dataset train " \
           "(NanFromEpoch2Dataset): sequence 'seq-" in run.stderr
    assert "Traceback" not in run.stderr
    assert _complete_epochs(model) == [1]
    assert not list(model.parent.glob(model.name + ".interrupted*"))
    reader = tf.train.load_checkpoint(str(model) + ".001")
    for key in reader.get_variable_to_shape_map():
        value = reader.get_tensor(key)
        if isinstance(value, np.ndarray) and value.dtype.kind == "f":
            assert np.all(np.isfinite(value)), key
    epochs = read_learning_rate_file(str(model) + ".lr.data")
    assert np.isfinite(epochs[1].error["train_score"])
    assert not epochs.get(2) or not epochs[2].error, "scores of the broken epoch were recorded"


# ---------------------------------------------------------------- checkpoint discovery (in-process)

def _manager(model: Path, value: float, layers: Optional[dict] = None) -> CheckpointManager:
    """A manager of a network (default: one layer) whose parameters all hold ``value``."""
    from returnn.tensor import Data
    from returnn.tf.network import TFNetwork
    net = TFNetwork(layers or {"l": {"class": "linear", "n_out": 2, "from": "data", "is_output_layer": True}},
                    {"data": Data("data", shape=(None, 2))})
    for var in net.variables:
        var.assign(np.full(var.shape, value, np.float32))
    return CheckpointManager(str(model), network=net)


def test_resume_point_ignores_incomplete_and_temporary_but_refuses_damaged_checkpoints(tmp_path):
    from returnn.errors import DataError
    model = tmp_path / "model"
    mgr = _manager(model, 1.0)
    for epoch in (1, 2, 3, 4):
        mgr.save(epoch)
    assert mgr.find_resume_point() == (epoch_prefix(str(model), 4), 4)
    # A kill between the data rename and the index rename: data without index is not a checkpoint.
    os.remove(epoch_prefix(str(model), 4) + ".index")
    # A kill in the middle of a write under a temporary name.
    Path(epoch_prefix(str(model), 5) + ".tmp-12345.index").write_bytes(b"partial")
    Path(epoch_prefix(str(model), 5) + ".tmp-12345.data-00000-of-00001").write_bytes(b"")
    assert list_epoch_checkpoints(str(model)) == [1, 2, 3]
    assert mgr.find_resume_point() == (epoch_prefix(str(model), 3), 3)
    # An index that cannot be read, or an index without its data (disk damage, never a crash):
    # an error naming the checkpoint, not a silent fall-back to an older one.
    Path(epoch_prefix(str(model), 3) + ".index").write_bytes(b"garbage")
    with pytest.raises(DataError, match=re.escape(epoch_prefix(str(model), 3)) + " cannot be read.*start_epoch"):
        mgr.find_resume_point()
    os.remove(epoch_prefix(str(model), 3) + ".index")
    os.remove(epoch_prefix(str(model), 2) + ".data-00000-of-00001")
    with pytest.raises(DataError, match=re.escape(epoch_prefix(str(model), 2)) + " is damaged: .*data-00000"):
        mgr.find_resume_point()
    # The deliberate fall-back: start_epoch N continues after <model>.N-1.
    assert mgr.find_resume_point(start_epoch=2) == (epoch_prefix(str(model), 1), 1)
    assert mgr.find_resume_point(start_epoch=1) is None
    fresh = _manager(model, 0.0)
    assert fresh.restore(epoch_prefix(str(model), 1)) == 1
    assert all(np.all(v.numpy() == 1.0) for v in fresh.network.variables)


def test_interrupted_state_used_only_when_newer_than_epoch_checkpoints(tmp_path):
    model = tmp_path / "model"
    mgr = _manager(model, 1.0)
    mgr.save(1)
    mgr.save_interrupted(1, 5)  # stopped after 5 steps of epoch 2
    assert mgr.find_resume_point() == (str(model) + ".interrupted", 1)
    fresh = _manager(model, 0.0)
    assert fresh.restore(str(model) + ".interrupted") == 1
    assert fresh.epoch_step == 5
    mgr.save(2)  # epoch 2 done, but killed before the interrupted state was removed
    assert mgr.find_resume_point() == (epoch_prefix(str(model), 2), 2)
    mgr.remove_interrupted()
    assert not list(tmp_path.glob("model.interrupted*"))


def test_overwriting_a_checkpoint_never_pairs_old_and_new_files(tmp_path):
    model = tmp_path / "model"
    _manager(model, 1.0).save(1)
    _manager(model, 2.0).save(1)  # e.g. an epoch retrained after a kill
    fresh = _manager(model, 0.0)
    assert fresh.restore(epoch_prefix(str(model), 1)) == 1
    assert all(np.all(v.numpy() == 2.0) for v in fresh.network.variables)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.001.data-00000-of-00001", "model.001.index",
                                                          "model.001.meta"]


def test_stale_temp_files_of_dead_writers_are_removed(tmp_path):
    model = tmp_path / "model"
    lr_file = tmp_path / "lr.data"
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=60)
    dead, alive = child.pid, os.getpid()
    stale = ["model.003.tmp-%i.index" % dead, "model.003.tmp-%i.data-00000-of-00001" % dead,
             "model.interrupted.tmp-%i.index" % dead, "lr.data.tmp-%i" % dead]
    kept = ["model.003.tmp-%i.index" % alive, "lr.data.tmp-%i" % alive, "model.003.index", "model.lr.tmp-x"]
    for name in stale + kept:
        (tmp_path / name).write_text("x")
    (tmp_path / ("model.004.tmp-%i_temp" % dead)).mkdir()
    (tmp_path / ("model.004.tmp-%i_temp" % dead) / "part-00000-of-00001.index").write_text("x")
    removed = remove_stale_temp_files(str(model), [str(lr_file)])
    assert sorted(os.path.basename(p) for p in removed) == sorted(stale + ["model.004.tmp-%i_temp" % dead])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(kept)


def test_restore_of_unfitting_or_corrupt_checkpoint_is_one_line_error(tmp_path):
    """A checkpoint from a different network, or with damaged data, is a ReturnnError naming it
    (one line from the CLI), not a TF traceback."""
    from returnn.errors import ConfigError, DataError
    model = tmp_path / "model"
    _manager(model, 1.0).save(1)
    prefix = epoch_prefix(str(model), 1)
    wider = _manager(model, 0.0, {"l": {"class": "linear", "n_out": 5, "from": "data", "is_output_layer": True}})
    with pytest.raises(ConfigError, match=re.escape(prefix) + " does not fit the network"):
        wider.restore(prefix)
    extra = _manager(model, 0.0, {"l": {"class": "linear", "n_out": 2, "from": "data", "is_output_layer": True},
                                  "u": {"class": "linear", "n_out": 1, "from": "data", "is_output_layer": True}})
    with pytest.raises(ConfigError, match=re.escape(prefix)):
        extra.restore(prefix)
    data = Path(prefix + ".data-00000-of-00001")
    data.write_bytes(data.read_bytes()[:8])
    with pytest.raises(DataError, match=re.escape(prefix) + " cannot be read"):
        _manager(model, 0.0).restore(prefix)
