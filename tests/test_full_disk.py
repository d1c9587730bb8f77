"""A full disk and the leftovers of killed writers (issue 28).

A full disk while writing a checkpoint, the learning-rate file, the log, a forward output or
tools/hdf_dump.py's output is one line naming the file (exit 1, a runtime failure:
returnn/errors.py), what was written before stays intact, no half-written temporary file stays,
and the same command resumes once there is space again. The full disk is a real one: a small
tmpfs mounted for the test (needs root; skipped with the reason otherwise), filled from inside the
run (a config function) at the start of epoch 2.

Leftovers: a killed tools/hdf_dump.py (SIGKILL) leaves its hidden full-size temporary file; the
next HDF writer into that directory removes it (its process is gone). SIGTERM ends hdf_dump with
its temporary file removed.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator, List

import h5py
import numpy as np
import pytest

from helpers import MPIRUN_AS_ROOT, PYTHON, REPO, child_env, describe, nonempty_lines, run_rnn, write_config
from returnn.learning_rate_control import read_learning_rate_file


def _mount_problem() -> str:
    if os.geteuid() != 0:
        return "needs root to mount a small tmpfs (a real full file system)"
    if shutil.which("mount") is None:
        return "needs mount(8)"
    return ""


@contextlib.contextmanager
def small_fs(path: Path, size: str = "1m") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``path`` for the test's duration."""
    problem = _mount_problem()
    if problem:
        pytest.skip(problem)
    path.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%s,mode=0755" % size, "tmpfs", str(path)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip("cannot mount a tmpfs here: %s" % proc.stderr.strip())
    try:
        yield path
    finally:
        if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], capture_output=True)


FILL = '''
def _fill(directory):
    """Fills the file system of ``directory`` to the last byte (a filler file)."""
    fd = os.open(os.path.join(directory, "filler"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    for size in (1 << 20, 1 << 16, 1 << 12, 1):
        try:
            while True:
                os.write(fd, b"\\0" * size)
        except OSError:
            pass
    os.close(fd)
'''

CONFIG = '''#!rnn.py
import os
''' + FILL + '''

_FULL = %(full)r
_network = {"hidden": {"class": "linear", "activation": "tanh", "n_out": 8, "from": "data"},
            "output": {"class": "softmax", "loss": "ce", "from": "hidden"}}


def get_network(epoch, **_):
    if epoch == 2 and not os.path.exists(os.path.join(_FULL, "filler")):
        _fill(_FULL)  # the disk fills up during epoch 2
    return _network


task = "train"
train = {"class": "Task12AXDataset", "num_seqs": 200, "fixed_random_seed": 1}
dev = {"class": "Task12AXDataset", "num_seqs": 10, "fixed_random_seed": 2}
num_inputs = 9
num_outputs = 2
batch_size = 100
max_seqs = 2
learning_rate = 0.01
num_epochs = 3
log_verbosity = 5
tf_session_opts = {"intra_op_parallelism_threads": 1, "inter_op_parallelism_threads": 1}
'''


def _run(tmp_path: Path, full: Path, on_full: str, mpi: bool = False):
    """Trains with the output ``on_full`` (model, learning_rate_file or log) on the small file
    system ``full``, the others in ``tmp_path``."""
    config = write_config(tmp_path / "train.config", CONFIG % {"full": str(full)})
    paths = {"model": tmp_path / "model", "learning_rate_file": tmp_path / "lr.data", "log": tmp_path / "train.log",
             "tf_log_dir": tmp_path / "tf-log"}
    paths[on_full] = full / paths[on_full].name
    args = [config] + [a for key, path in paths.items() for a in ("++" + key, path)]
    if not mpi:
        return run_rnn(args, timeout=300), paths
    cmd = ["mpirun", "-np", "2", "--oversubscribe", "--bind-to", "none", "--mca", "btl", "tcp,self", PYTHON,
           str(REPO / "rnn.py")] + [str(a) for a in args] + ["++use_horovod", "1", "++distributed_backend", "mpi",
                                                             "++horovod_stall_timeout", "60"]
    return subprocess.run(cmd, cwd=str(REPO), env=child_env(MPIRUN_AS_ROOT), capture_output=True, text=True,
                          timeout=300), paths


def _one_line(proc, text: str) -> str:
    lines = [ln for ln in nonempty_lines(proc.stderr) if ln.startswith("ERROR: ")]
    assert proc.returncode == 1 and lines and text in lines[0], describe(proc)
    assert "Traceback" not in proc.stderr + proc.stdout, describe(proc)
    return lines[0]


def _temp_leftovers(*dirs: Path) -> List[str]:
    return sorted(str(p) for d in dirs for p in d.iterdir() if ".tmp-" in p.name)


def _resume_after_freeing(tmp_path: Path, full: Path, paths) -> None:
    os.remove(full / "filler")
    (full / "filler").mkdir()  # the config fills only once
    proc = run_rnn([tmp_path / "train.config"] + [a for key, path in paths.items() for a in ("++" + key, path)],
                   timeout=300)
    assert proc.returncode == 0 and "start training at epoch 2" in proc.stdout, describe(proc)
    assert Path(str(paths["model"]) + ".003.index").exists()


def test_full_disk_while_writing_a_checkpoint(tmp_path):
    with small_fs(tmp_path / "full") as full:
        proc, paths = _run(tmp_path, full, "model")
        line = _one_line(proc, "cannot write checkpoint %s.002: No space left on device" % paths["model"])
        assert len(nonempty_lines(proc.stderr)) == 1, line
        assert Path(str(paths["model"]) + ".001.index").exists() and not list(full.glob("model.002*"))
        assert _temp_leftovers(full) == []
        _resume_after_freeing(tmp_path, full, paths)


def test_full_disk_while_writing_the_learning_rate_file(tmp_path):
    with small_fs(tmp_path / "full") as full:
        proc, paths = _run(tmp_path, full, "learning_rate_file")
        line = _one_line(proc, "cannot write learning-rate file %s: No space left on device" % paths["learning_rate_file"])
        assert len(nonempty_lines(proc.stderr)) == 1, line
        epochs = read_learning_rate_file(str(paths["learning_rate_file"]))  # the one of epoch 1, intact
        assert sorted(e for e, d in epochs.items() if d.error) == [1]
        assert not list(tmp_path.glob("model.002*")), "a checkpoint without its learning-rate entry"
        assert _temp_leftovers(full) == []
        _resume_after_freeing(tmp_path, full, paths)


def test_full_disk_while_writing_the_log(tmp_path):
    with small_fs(tmp_path / "full") as full:
        proc, paths = _run(tmp_path, full, "log")
        line = _one_line(proc, "cannot write log file %s: No space left on device" % paths["log"])
        assert len(nonempty_lines(proc.stderr)) == 1, line
        assert (tmp_path / "model.001.index").exists() and not list(tmp_path.glob("model.002*"))
        assert "start epoch 2" in paths["log"].read_text()
        _resume_after_freeing(tmp_path, full, paths)


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs OpenMPI's mpirun")
def test_full_disk_on_rank_0_ends_both_ranks_with_the_line(tmp_path):
    with small_fs(tmp_path / "full") as full:
        t0 = time.monotonic()
        proc, paths = _run(tmp_path, full, "model", mpi=True)
        assert proc.returncode == 1, describe(proc)
        assert "cannot write checkpoint %s.002: No space left on device" % paths["model"] in proc.stderr, describe(proc)
        assert "Traceback" not in proc.stderr + proc.stdout
        assert time.monotonic() - t0 < 120, "the other rank waited for the stall timeout"
        assert Path(str(paths["model"]) + ".001.index").exists() and _temp_leftovers(full) == []


# ---- forward output and tools/hdf_dump.py on a full disk
FORWARD = '''#!rnn.py
task = "forward"
eval = {"class": "DummyDataset", "input_dim": 9, "output_dim": 2, "num_seqs": 2000, "seq_len": 20}
num_inputs = 9
num_outputs = 2
network = {"output": {"class": "softmax", "from": "data", "n_out": 2, "is_output_layer": True}}
allow_random_model_init = True
batch_size = 5000
forward_batch_size = 5000
'''


def _fill_now(directory: Path, leave: int = 0) -> None:
    namespace = {"os": os}
    exec(FILL, namespace)  # noqa: S102 - the test's own code
    namespace["_fill"](str(directory))
    if leave:
        filler = directory / "filler"
        os.truncate(filler, max(0, filler.stat().st_size - leave))


def test_full_disk_while_writing_a_forward_output(tmp_path):
    config = write_config(tmp_path / "fwd.config", FORWARD)
    with small_fs(tmp_path / "full", "256k") as full:
        _fill_now(full, leave=64 << 10)
        out = full / "out.hdf"
        proc = run_rnn([config, "++model", tmp_path / "model", "++output_file", out], timeout=300)
        _one_line(proc, "cannot write output file %s: No space left on device" % out)
        assert not out.exists() and _temp_leftovers(full) == []


def _hdf_dump(*args, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([PYTHON, "tools/hdf_dump.py"] + [str(a) for a in args], cwd=str(REPO), env=child_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


BIG = "{'class': 'DummyDataset', 'input_dim': 100, 'output_dim': 5, 'num_seqs': %i, 'seq_len': 1000}"


def test_full_disk_while_hdf_dump_writes(tmp_path):
    with small_fs(tmp_path / "full", "256k") as full:
        _fill_now(full, leave=64 << 10)
        out = full / "dump.hdf"
        proc = _hdf_dump(BIG % 200, out)
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 1, err
        assert nonempty_lines(err)[-1] == "hdf_dump: error: cannot write output file %s: No space left on device" % out
        assert not out.exists() and _temp_leftovers(full) == []


def _wait_for_temp(directory: Path, proc: subprocess.Popen, timeout: float = 120) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        temps = [p for p in directory.iterdir() if p.name.startswith(".") and ".tmp-" in p.name]
        if temps and temps[0].stat().st_size > 0:
            return temps[0]
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    pytest.fail("hdf_dump wrote no temporary file: %s" % (proc.communicate()[1],))


def test_killed_hdf_dump_leftover_is_removed_by_the_next_writer(tmp_path):
    """SIGKILL leaves the hidden temporary file (named with host and PID); the next dump into the
    same directory (another output name) removes it, but not the file of a live writer, nor of
    another host."""
    proc = _hdf_dump(BIG % 1000, tmp_path / "big.hdf")
    temp = _wait_for_temp(tmp_path, proc)
    assert ".tmp-%s-%i-" % (socket.gethostname(), proc.pid) in temp.name
    proc.kill()
    proc.communicate(timeout=60)
    assert temp.exists() and not (tmp_path / "big.hdf").exists()
    live = tmp_path / (".x.hdf.tmp-%s-%i-0123abcd" % (socket.gethostname(), os.getpid()))
    other_host = tmp_path / (".x.hdf.tmp-elsewhere-%i-0123abcd" % proc.pid)
    live.write_bytes(b"live")
    other_host.write_bytes(b"other")
    small = _hdf_dump(BIG % 5, tmp_path / "small.hdf")
    _, err = small.communicate(timeout=120)
    assert small.returncode == 0, err
    assert not temp.exists() and live.exists() and other_host.exists()


def test_sigterm_ends_hdf_dump_without_leftovers(tmp_path):
    proc = _hdf_dump(BIG % 1000, tmp_path / "big.hdf")
    _wait_for_temp(tmp_path, proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "hdf_dump: interrupted (SIGTERM); nothing written to %s" % (tmp_path / "big.hdf") in err
    assert "Traceback" not in err
    assert _temp_leftovers(tmp_path) == [] and not (tmp_path / "big.hdf").exists()


def test_search_output_leftover_of_a_dead_search_is_removed(tmp_path):
    from returnn.tf.search_task import write_hypotheses
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    out = tmp_path / "hyps.py"
    leftover = Path("%s.tmp-%i" % (out, int(dead.stdout)))
    leftover.write_text("{'half': ")
    write_hypotheses(str(out), [("seq-\udcff", "a b")], "py")
    assert not leftover.exists()
    assert out.read_bytes() == b"{\n'seq-\\udcff': 'a b',\n}\n"


def test_hdf_writer_refuses_nothing_it_should_keep(tmp_path):
    """The HDF writers' stale-file removal keeps other files with similar names."""
    from returnn.datasets.hdf_write import SimpleHDFWriter
    keep = [tmp_path / ".notes.tmp", tmp_path / "x.hdf.tmp-1-0123abcd", tmp_path / ".x.hdf.tmp-1-0123abcz"]
    for path in keep:
        path.write_text("keep")
    with SimpleHDFWriter(str(tmp_path / "x.hdf"), dim=1) as writer:
        writer.insert_batch(np.zeros((1, 1, 1), np.float32), [1], ["a"])
    assert all(p.exists() for p in keep)
    with h5py.File(tmp_path / "x.hdf", "r") as f:
        assert len(f["seqTags"]) == 1


def test_full_disk_when_the_lock_file_is_written_at_start(tmp_path):
    """The model's directory is full before the run starts: the lock file (pid, host, time) cannot be
    written. One line naming it, exit 1, no empty lock file left (was: a traceback and an empty
    model.lock)."""
    from helpers import TINY_12AX
    with small_fs(tmp_path / "full", "64k") as full:
        fd = os.open(full / "filler", os.O_WRONLY | os.O_CREAT)
        for size in (4096, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
        os.close(fd)
        config = write_config(tmp_path / "tiny.config", TINY_12AX)
        proc = run_rnn([config, "++model", full / "model", "++learning_rate_file", tmp_path / "lr.data", "++log",
                        tmp_path / "train.log", "++tf_log_dir", tmp_path / "tf-log"], timeout=300)
        _one_line(proc, "cannot write lock file %s: No space left on device" % (full / "model.lock"))
        assert sorted(p.name for p in full.iterdir()) == ["filler"]


def test_full_disk_while_the_plot_tool_writes(tmp_path):
    from returnn.learning_rate_control import LearningRateControl
    lr_file = tmp_path / "lr.data"
    control = LearningRateControl(default_learning_rate=0.5, filename=str(lr_file))
    control.set_epoch_error(1, {"train_score": 1.0})
    control.save()
    with small_fs(tmp_path / "full", "64k") as full:
        fd = os.open(full / "filler", os.O_WRONLY | os.O_CREAT)
        for size in (4096, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
        os.close(fd)
        proc = subprocess.run([PYTHON, "tools/plot-learning-curves.py", str(lr_file), "-o", str(full / "lr.png")],
                              cwd=str(REPO), env=child_env(), capture_output=True, text=True, timeout=120)
        assert proc.returncode == 1, describe(proc)
        assert nonempty_lines(proc.stderr) == ["error: cannot write output file %s: No space left on device"
                                               % (full / "lr.png")], describe(proc)
        assert sorted(p.name for p in full.iterdir()) == ["filler"]
