"""Faults in multi-rank training under real ``mpirun -np 2`` (TCP only, one TF thread per rank):
a rank killed with SIGKILL, a rank that hangs, a Python exception on one rank, and a stop signal
forwarded by mpirun. No rank may keep waiting for a dead peer.

The ranks' PIDs come from the per-rank logs (``... initialized. Hostname H, pid P, rank R / size N``).
Every mpirun gets a timeout; whatever is left of it is killed by PID afterwards.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Optional

import pytest

from helpers import BACKENDS, MPIRUN_AS_ROOT, PYTHON, REPO, child_env  # BACKENDS: Horovod only where installed
STALL_TIMEOUT = 20  # ++horovod_stall_timeout for the runs here
HANG_STALL_TIMEOUT = 10  # shorter for the hang test, which has to sit it out
MPIRUN_TIMEOUT = 180

pytestmark = pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs OpenMPI's mpirun")

CONFIG = '''#!rnn.py
import os, time
import numpy as np
from returnn.datasets.base import register_dataset
from returnn.datasets.generating import RandomDataset, Task12AXDataset

_rank = os.environ.get("OMPI_COMM_WORLD_RANK", "0")

@register_dataset
class FailOnRank1Dataset(Task12AXDataset):
    """Loads normally, except on rank 1 from epoch 2 on, where reading raises."""

    def _corpus_load(self, corpus_indices):
        if _rank == "1" and self.epoch is not None and self.epoch >= 2:
            with open(config.value("raise_time_file"), "w") as f:
                f.write(repr(time.time()))
            raise RuntimeError("injected failure on rank 1 in epoch %%i" %% self.epoch)
        return super()._corpus_load(corpus_indices)

@register_dataset
class NanOnRank1Dataset(RandomDataset):
    """Dense random input (dim 9, 2 classes); on rank 1 from epoch 2 on, every frame is NaN."""

    def __init__(self, **kwargs):
        super().__init__(input_dim=9, output_dim=2, seq_len=(5, 20), **kwargs)

    def _corpus_load(self, corpus_indices):
        seqs = super()._corpus_load(corpus_indices)
        if _rank == "1" and self.epoch is not None and self.epoch >= 2:
            seqs = [dict(s, data=np.full_like(s["data"], np.nan)) for s in seqs]
        return seqs

task = "train"
train = {"class": "%(dataset)s", "num_seqs": 200}
num_inputs = 9
num_outputs = 2
batch_size = 5000
max_seqs = 10
network = {
    "hidden": {"class": "linear", "activation": "tanh", "n_out": 16, "from": "data"},
    "output": {"class": "softmax", "loss": "ce", "from": "hidden"},
}
adam = True
learning_rate = 0.01
num_epochs = %(num_epochs)i
use_horovod = True
tf_session_opts = {"intra_op_parallelism_threads": 1, "inter_op_parallelism_threads": 1}
log_verbosity = 4
'''

_INIT_RE = re.compile(r"initialized\. Hostname \S+, pid (\d+), rank (\d+) / size (\d+)")


class MpiRun:
    """``mpirun -np 2 rnn.py CONFIG ++...`` in the background, with per-rank log files."""

    def __init__(self, tmp_path: Path, name: str, backend: str, dataset: str = "Task12AXDataset",
                 num_epochs: int = 1000, extra: Optional[List[str]] = None, stall_timeout: int = STALL_TIMEOUT):
        self.dir = tmp_path
        self.config = tmp_path / ("%s.config" % name)
        self.config.write_text(CONFIG % {"dataset": dataset, "num_epochs": num_epochs})
        self.log = tmp_path / ("%s.log" % name)
        self.model = tmp_path / name / "model"
        self.raise_time_file = tmp_path / ("%s.raise_time" % name)
        self.args = [str(self.config), "++distributed_backend", backend, "++horovod_stall_timeout", str(stall_timeout),
                     "++model", str(self.model), "++learning_rate_file", str(self.model) + ".lr.data",
                     "++log", str(self.log), "++raise_time_file", str(self.raise_time_file)] + list(extra or [])
        self.name = name
        self.proc: Optional[subprocess.Popen] = None
        self.pids: Dict[int, int] = {}

    def start(self, run_name: str = "") -> "MpiRun":
        env = child_env(dict(MPIRUN_AS_ROOT, PYTHONUNBUFFERED="1"))
        cmd = ["mpirun", "-np", "2", "--oversubscribe", "--bind-to", "none", "--mca", "btl", "tcp,self",
               PYTHON, str(REPO / "rnn.py")] + self.args
        tag = self.name + run_name
        self.out_path, self.err_path = self.dir / (tag + ".mpirun.out"), self.dir / (tag + ".mpirun.err")
        for path in self.rank_logs():
            if path.exists():
                path.unlink()
        self.pids = {}
        with open(self.out_path, "w") as out, open(self.err_path, "w") as err:
            self.proc = subprocess.Popen(cmd, cwd=str(REPO), env=env, stdout=out, stderr=err)
        return self

    def rank_logs(self) -> List[Path]:
        return [self.log, self.dir / ("%s.horovod-1-2.log" % self.name)]

    def rank_log(self, rank: int) -> str:
        path = self.rank_logs()[rank]
        return path.read_text(errors="replace") if path.exists() else ""

    def output(self) -> str:
        return self.out_path.read_text(errors="replace") + self.err_path.read_text(errors="replace")

    def wait_for_line(self, rank: int, text: str, timeout: float = 120) -> None:
        """Waits until rank ``rank``'s log has ``text``; also collects the ranks' PIDs."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.rank_log(rank):
                self._collect_pids()
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        pytest.fail("rank %i never logged %r\n%s" % (rank, text, self.describe()))

    def _collect_pids(self) -> None:
        for rank in (0, 1):
            m = _INIT_RE.search(self.rank_log(rank))
            if m:
                assert int(m.group(2)) == rank and int(m.group(3)) == 2, m.group(0)
                self.pids[rank] = int(m.group(1))

    def wait(self, timeout: float = MPIRUN_TIMEOUT) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.cleanup()
            pytest.fail("mpirun did not end within %i s\n%s" % (timeout, self.describe()))

    def cleanup(self) -> None:
        """Kills (by PID) whatever this run left alive."""
        for pid in self.pids.values():
            if pid_alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)

    def describe(self) -> str:
        code = self.proc.returncode if self.proc else None
        return "mpirun exit code %s\n--- mpirun output\n%s\n--- rank 0 log\n%s\n--- rank 1 log\n%s" % (
            code, self.output()[-3000:], self.rank_log(0)[-2000:], self.rank_log(1)[-2000:])


def pids_end(pids, timeout: float = 10.0) -> bool:
    """Whether all ``pids`` have ended within ``timeout`` s (mpirun may return while the kernel
    is still tearing down a rank that MPI_Abort killed)."""
    deadline = time.time() + timeout
    while any(pid_alive(p) for p in pids):
        if time.time() > deadline:
            return False
        time.sleep(0.05)
    return True


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie counts as ended)."""
    try:
        with open("/proc/%i/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(pid: int, timeout: float) -> Optional[float]:
    """Seconds until ``pid`` ended, or None if it still runs after ``timeout``."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if not pid_alive(pid):
            return time.monotonic() - t0
        time.sleep(0.05)
    return None


@pytest.fixture
def runs():
    started: List[MpiRun] = []
    yield started
    for run in started:
        run.cleanup()


@pytest.mark.parametrize("backend", BACKENDS)
def test_sigkill_of_rank1_ends_rank0_within_stall_timeout(tmp_path, runs, backend):
    run = MpiRun(tmp_path, "kill", backend).start()
    runs.append(run)
    run.wait_for_line(0, "start epoch 2 with")
    run.wait_for_line(1, "start epoch 2 with")
    os.kill(run.pids[1], signal.SIGKILL)
    gone = wait_gone(run.pids[0], STALL_TIMEOUT)
    assert gone is not None, "rank 0 still runs %i s after rank 1 died\n%s" % (STALL_TIMEOUT, run.describe())
    assert run.wait() != 0, run.describe()


@pytest.mark.parametrize("backend", BACKENDS)
def test_hanging_rank1_ends_rank0_after_stall_timeout(tmp_path, runs, backend):
    """A rank that stops making progress without dying (SIGSTOP): mpirun notices nothing, so
    rank 0's watchdog ends the run after horovod_stall_timeout with a line saying why."""
    run = MpiRun(tmp_path, "hang", backend, stall_timeout=HANG_STALL_TIMEOUT).start()
    runs.append(run)
    run.wait_for_line(0, "start epoch 2 with")
    run.wait_for_line(1, "start epoch 2 with")
    os.kill(run.pids[1], signal.SIGSTOP)
    try:
        gone = wait_gone(run.pids[0], HANG_STALL_TIMEOUT + 30)
        assert gone is not None, "rank 0 never gave up on the stopped rank 1\n%s" % run.describe()
    finally:
        if pid_alive(run.pids[1]):
            os.kill(run.pids[1], signal.SIGKILL)
    assert run.wait() != 0, run.describe()
    assert "horovod_stall_timeout" in run.output(), run.describe()
    # Stopped inside the steps: the heartbeat watchdog names what rank 0 was doing; stopped at the
    # epoch's end (short epochs): the meeting point after it names rank 1 as late.
    assert re.search(r"a peer rank probably died or stalls \(this rank was in (the training steps of epoch |"
                     r"evaluation of )|rank 1 of 2 on \S+ did not finish ", run.output()), run.describe()


@pytest.mark.parametrize("backend", BACKENDS)
def test_exception_on_rank1_ends_both_ranks_within_seconds(tmp_path, runs, backend):
    """A Python exception on rank 1 only (its dataset raises in epoch 2): rank 1 reports it and
    aborts the job, so both ranks end within seconds, not after the stall timeout."""
    stall_timeout = 60  # the job must end by the abort, long before the watchdog would act
    run = MpiRun(tmp_path, "exc", backend, dataset="FailOnRank1Dataset", stall_timeout=stall_timeout).start()
    runs.append(run)
    run.wait_for_line(0, "start epoch 1 with")
    code = run.wait()
    ended = time.time()
    assert code != 0, run.describe()
    assert run.raise_time_file.exists(), run.describe()
    delay = ended - float(run.raise_time_file.read_text())
    assert delay < stall_timeout / 2, "the job took %.1f s to end after the exception\n%s" % (delay, run.describe())
    assert "gives up" not in run.output(), "ended by the watchdog, not by the abort"
    assert "[rank 1] ERROR: ProducerError: RuntimeError: injected failure on rank 1 in epoch 2" in run.output()
    assert pids_end([run.pids[0], run.pids[1]]), "a rank still runs after the job ended"
    assert (Path(str(run.model) + ".001.index")).exists(), "epoch 1's checkpoint is missing"


def test_sigusr1_to_mpirun_saves_interrupted_state_and_resumes(tmp_path, runs):
    """SGE sends SIGUSR1 to the job; mpirun forwards it to every rank. All ranks stop at the
    same step, rank 0 saves ``<model>.interrupted``, every rank exits with 128 + SIGUSR1, and the
    same mpirun command resumes from it."""
    # max_seqs 2: 100 short steps per epoch, so the signal surely lands inside epoch 2's loop
    run = MpiRun(tmp_path, "usr1", "horovod", num_epochs=3, extra=["++max_seqs", "2"]).start()
    runs.append(run)
    run.wait_for_line(0, "start epoch 2 with")
    run.wait_for_line(1, "start epoch 2 with")
    time.sleep(0.05)
    run.proc.send_signal(signal.SIGUSR1)
    assert run.wait() == 128 + signal.SIGUSR1, run.describe()
    m = re.search(r"stop requested \(signal\) in epoch (\d+) after step (\d+); saved (\S+);", run.rank_log(0))
    assert m and m.group(3) == str(run.model) + ".interrupted", run.describe()
    assert Path(str(run.model) + ".interrupted.index").exists()
    stopped_epoch = int(m.group(1))

    run.start("-resume")
    assert run.wait() == 0, run.describe()
    log0 = run.rank_log(0)
    assert "start training at epoch %i" % stopped_epoch in log0, run.describe()
    assert "Finished training in epoch 3." in log0
    assert "Finished training in epoch 3." in run.rank_log(1)
    assert all(Path("%s.%03d.index" % (run.model, e)).exists() for e in (1, 2, 3))
    assert not Path(str(run.model) + ".interrupted.index").exists()


@pytest.mark.parametrize("backend,reduce_type", [("horovod", "grad"), ("mpi", "param")])
def test_nonfinite_loss_on_one_rank_stops_all_ranks(tmp_path, runs, backend, reduce_type):
    """NaN loss on rank 1 only (its input data is NaN): the flag is reduced across ranks (with the
    gradients, or at the parameter sync), so both ranks stop at the same step with the message,
    which names rank 1's sequence on both ranks, and exit code 2 (bad data); rank 0 keeps epoch 1's
    checkpoint without writing a broken one."""
    run = MpiRun(tmp_path, "nan", backend, dataset="NanOnRank1Dataset", num_epochs=3,
                 extra=["++horovod_reduce_type", reduce_type]).start()
    runs.append(run)
    code = run.wait()
    assert code == 2, run.describe()
    for rank in (0, 1):
        assert "Model seems broken, got inf or nan score. Cause: " in run.rank_log(rank), run.describe()
        assert "non-finite input data: dataset train (NanOnRank1Dataset): sequence 'seq-" in run.rank_log(rank)
    assert Path(str(run.model) + ".001.index").exists(), run.describe()
    assert not list(run.model.parent.glob(run.model.name + ".002*"))
    assert not list(run.model.parent.glob(run.model.name + ".interrupted*"))
