"""One training per model prefix: ``<model>.lock`` is held for the run, released at any exit, taken
over after a crash, and a second run is one line naming the holder, exit 2."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from helpers import PYTHON, REPO, TINY_12AX, assert_one_line_error, describe, run_rnn, train_args, write_config
from returnn.errors import ConfigError
from returnn.util.run_lock import ModelLock, process_start_time


@pytest.mark.parametrize("use_flock", [True, False])
def test_second_lock_names_holder_and_release_frees(tmp_path, use_flock):
    model = str(tmp_path / "model")
    first = ModelLock(model, use_flock=use_flock)
    first.acquire()
    with pytest.raises(ConfigError, match=r"model .* in use by another training run \(pid %i on host %s since "
                       % (os.getpid(), socket.gethostname())):
        ModelLock(model, use_flock=use_flock).acquire()
    first.release()
    assert not os.path.exists(model + ".lock")
    with ModelLock(model, use_flock=use_flock):
        assert os.path.exists(model + ".lock")
    assert not os.path.exists(model + ".lock")


@pytest.mark.parametrize("use_flock", [True, False])
def test_lock_of_killed_process_is_taken_over(tmp_path, use_flock):
    model = str(tmp_path / "model")
    code = ("import sys, time; sys.path.insert(0, %r); from returnn.util.run_lock import ModelLock; "
            "ModelLock(%r, use_flock=%r).acquire(); print('locked', flush=True); time.sleep(600)"
            % (str(REPO), model, use_flock))
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "locked"
        with pytest.raises(ConfigError, match="pid %i" % child.pid):
            ModelLock(model, use_flock=use_flock).acquire()
    finally:
        child.kill()
        child.wait(timeout=60)
    assert os.path.exists(model + ".lock")  # kill -9 leaves the file behind ...
    with ModelLock(model, use_flock=use_flock):  # ... but not the lock
        pass


def test_without_flock_other_host_or_reused_pid(tmp_path):
    model = str(tmp_path / "model")
    lock_file = tmp_path / "model.lock"
    lock_file.write_text("pid=%i\nhost=elsewhere-node\nstart=\nsince=yesterday\n" % os.getpid())
    with pytest.raises(ConfigError, match="pid %i on host elsewhere-node since yesterday.*delete the lock file"
                       % os.getpid()):
        ModelLock(model, use_flock=False).acquire()
    # Same host, a live PID, but another process started then: the PID was reused after a crash.
    parent = os.getppid()
    lock_file.write_text("pid=%i\nhost=%s\nstart=1\nsince=x\n" % (parent, socket.gethostname()))
    if process_start_time(parent) not in (None, "1"):
        ModelLock(model, use_flock=False).acquire()
    # Garbled and old: a crash between creating and writing it.
    lock_file.write_text("garbage")
    os.utime(lock_file, (time.time() - 60, time.time() - 60))
    ModelLock(model, use_flock=False).acquire()


def test_second_training_on_same_model_is_one_line_error(tmp_path):
    config = write_config(tmp_path / "tiny.config", TINY_12AX.replace("num_epochs = 2", "num_epochs = 500"))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    first = subprocess.Popen([PYTHON, "rnn.py"] + [str(a) for a in train_args(config, tmp_path)], cwd=str(REPO),
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 300
        while not (tmp_path / "model.001.index").exists():  # training runs
            assert first.poll() is None and time.time() < deadline, first.communicate()
            time.sleep(0.5)
        second = run_rnn(train_args(config, tmp_path, model_name="model"), timeout=300)
        line = assert_one_line_error(second, "config key 'model': %s is in use by another training run" %
                                     (tmp_path / "model"), "pid %i on host %s" % (first.pid, socket.gethostname()))
        assert "lock file %s" % (tmp_path / "model.lock") in line
        assert first.poll() is None  # the first run was not disturbed
    finally:
        first.send_signal(signal.SIGTERM)
        out, err = first.communicate(timeout=300)
    assert first.returncode == 128 + signal.SIGTERM, (out, err)
    assert not (tmp_path / "model.lock").exists()  # released at exit
    resumed = run_rnn(train_args(config, tmp_path, "++num_epochs", "1", "++start_epoch", "1"), timeout=300)
    assert resumed.returncode == 0, describe(resumed)
