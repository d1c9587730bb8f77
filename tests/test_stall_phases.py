"""A rank that stalls outside the training steps, under real ``mpirun -np 2`` with both backends:
before MPI/Horovod initialisation, while opening its data, while tracing, in evaluation, while
rank 0 writes a checkpoint, and after the last epoch. The whole job must end (mpirun returns)
within about ``horovod_stall_timeout`` plus a grace, with one line naming the stalled rank and
the phase. A slow checkpoint write is no stall.

The stalls are config hooks (configs are code): on the stalling rank, a dataset that sleeps when
it is opened, evaluated or closed, or a wrapped engine function that sleeps.
"""
from __future__ import annotations

import os
import re
import time

import pytest

from helpers import BACKENDS
from test_distributed_faults import MpiRun, pid_alive, runs  # noqa: F401 - runs is a fixture

STALL = 6  # ++horovod_stall_timeout here
GRACE = 45  # start-up of two TF processes on a busy 2-core machine plus the engine's grace

HOOKS = '''
import returnn.tf.steps, returnn.tf.checkpoint, returnn.learning_rate_control, returnn.datasets.generating as _gen
_phase, _stall_rank, _sleep = %(phase)r, %(rank)r, %(sleep)r

def _stall(where):
    if _rank == _stall_rank and where == _phase:
        time.sleep(_sleep)

@register_dataset
class StallDataset(_gen.Task12AXDataset):
    def __init__(self, **kwargs):
        _stall("data" if kwargs.get("name") != "dev" else "")
        super().__init__(**kwargs)

    def init_seq_order(self, epoch=1):
        if self.name == "dev":
            _stall("eval")
        super().init_seq_order(epoch)

    def close(self):
        if self.name == "train":
            _stall("after")
        super().close()

def _wrap(cls, name, where):
    orig = getattr(cls, name)
    def wrapped(*args, **kwargs):
        _stall(where)
        return orig(*args, **kwargs)
    setattr(cls, name, wrapped)

_wrap(returnn.tf.steps.StepFunctions, "trace", "trace")
_wrap(returnn.tf.checkpoint.CheckpointManager, "save", "save")
_wrap(returnn.learning_rate_control.LearningRateControl, "set_epoch_error", "save_peer")
_stall("startup")
train = {"class": "StallDataset", "num_seqs": 40}
dev = {"class": "StallDataset", "num_seqs": 10}
'''


def stall_run(tmp_path, backend: str, phase: str, rank: str, sleep: float, num_epochs: int = 2) -> MpiRun:
    run = MpiRun(tmp_path, phase, backend, num_epochs=num_epochs, stall_timeout=STALL)
    run.config.write_text(run.config.read_text() + HOOKS % {"phase": phase, "rank": rank, "sleep": sleep})
    return run


# (phase hook, stalling rank, what the line must say)
CASES = [
    ("startup", "1", r"rank 0 of 2: .*did not join .*start-up"),
    ("data", "1", r"rank 1 of 2 .*did not finish data set-up"),
    ("trace", "1", r"rank 1 of 2 .*did not finish tracing"),
    ("eval", "1", r"rank 1 of 2 .*did not finish evaluation of 'dev' in epoch 1"),
    ("save", "0", r"rank 0 of 2 .*did not finish saving the checkpoint of epoch 1"),
    ("save_peer", "1", r"rank 1 of 2 .*did not finish saving the checkpoint of epoch 1"),
    ("after", "1", r"rank 1 of 2 .*did not finish the end of the run"),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("phase,rank,line", CASES, ids=[c[0] for c in CASES])
def test_stalled_rank_ends_job_with_line_naming_rank_and_phase(tmp_path, runs, backend, phase, rank, line):
    limit = STALL * (4 if phase == "save" else 1)  # a checkpoint write may take 4 stall timeouts
    run = stall_run(tmp_path, backend, phase, rank, sleep=600).start()
    runs.append(run)
    t0 = time.monotonic()
    code = run.wait(timeout=limit + GRACE + 60)
    took = time.monotonic() - t0
    out = run.output() + run.rank_log(0) + run.rank_log(1)
    assert code != 0, run.describe()
    assert took < limit + GRACE, "mpirun returned only after %.0f s\n%s" % (took, run.describe())
    named = [ln for ln in out.splitlines() if re.search(line, ln)]
    assert named, "no line matching %r\n%s" % (line, run.describe())
    assert "horovod_stall_timeout" in named[0]
    assert "Traceback" not in out, run.describe()
    for pid in run.pids.values():
        assert not pid_alive(pid), "a rank still runs after mpirun returned"


@pytest.mark.parametrize("backend", BACKENDS)
def test_slow_checkpoint_write_is_no_stall(tmp_path, runs, backend):
    """Rank 0 takes 1.5 stall timeouts to write each checkpoint: the run finishes normally."""
    run = stall_run(tmp_path, backend, "save", "0", sleep=STALL * 1.5).start()
    runs.append(run)
    assert run.wait(timeout=240) == 0, run.describe()
    assert "Finished training in epoch 2." in run.rank_log(1), run.describe()


@pytest.mark.parametrize("backend", BACKENDS)
def test_rank_blocked_opening_its_data_file_ends_job(tmp_path, runs, backend):
    """Rank 1's sequence list is a FIFO nobody writes: opening it blocks, as on a stuck file system."""
    fifo = tmp_path / "stuck-seq-list.txt"
    os.mkfifo(fifo)
    run = MpiRun(tmp_path, "fifo", backend, num_epochs=2, stall_timeout=STALL)
    run.config.write_text(run.config.read_text() + "if _rank == '1':\n    train['seq_list_filter_file'] = %r\n"
                          % str(fifo))
    run.start()
    runs.append(run)
    try:
        t0 = time.monotonic()
        code = run.wait(timeout=STALL + GRACE + 60)
        took = time.monotonic() - t0
    finally:  # let whatever still waits on the FIFO go
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
    out = run.output() + run.rank_log(0)
    assert code != 0 and took < STALL + GRACE, run.describe()
    assert re.search(r"ERROR: rank 1 of 2 on \S+ did not finish data set-up within 6 s of rank 0 \(horovod_stall_timeout\)",
                     out), run.describe()
