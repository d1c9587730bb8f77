"""Meeting points between the phases of a multi-rank run, which name a rank that does not arrive.

A collective (allreduce, broadcast, barrier) waits forever for a rank that stalls, and cannot say
which rank is missing. At the end of each phase outside the training steps (data set-up,
building the network, restoring, tracing, evaluation, checkpoint writing, the end of the run),
the ranks therefore meet through non-blocking point-to-point messages on their own communicator:

* every rank tells rank 0 that it arrived; rank 0 tells every rank that it arrived;
* rank 0 waits ``timeout`` s (``horovod_stall_timeout``) from its own arrival for the others.
  Missing ranks are named in one line (``rank 1 of 2 on HOST did not finish data set-up within
  6 s of rank 0 (horovod_stall_timeout) ...``) and the job is aborted;
* the other ranks wait ``timeout * factor`` s for rank 0's arrival (``factor`` > 1 where rank 0
  alone does slow work, e.g. writing the checkpoint), then for its "all arrived", which rank 0
  sends or aborts within its own ``timeout``.

A rank that is merely slower than the others by less than the timeout is no stall; ranks that are
all slow together (a big data set every rank loads) never wait for each other at all.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from typing import Callable, List, Optional

import numpy as np

_ARRIVED, _ALL_HERE = 17, 18  # message tags
_POLL = 0.005  # seconds between tests of the pending messages
# Seconds a rank other than 0 waits beyond the timeout for rank 0's verdict (rank 0 reports first).
VERDICT_GRACE = 5.0


class Rendezvous:
    """Meeting points over ``comm`` (an mpi4py communicator of its own, created by every rank at the
    same time). ``abort(message)`` reports and ends the whole job."""

    def __init__(self, comm, timeout: float, abort: Callable[[str], None]):
        self.comm = comm
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.timeout = float(timeout)
        self.abort = abort
        self.hosts: List[str] = comm.allgather(socket.gethostname())
        self.count = 0  # meetings so far; carried in every message, so diverging ranks are seen

    def who(self, rank: int) -> str:
        return "rank %i of %i on %s" % (rank, self.size, self.hosts[rank])

    def meet(self, phase: str, factor: float = 1.0) -> None:
        """Returns when every rank finished ``phase``; otherwise ends the job naming who did not."""
        self.count += 1
        if self.size <= 1 or self.timeout <= 0:
            return
        if self.rank == 0:
            self._meet_as_root(phase)
        else:
            self._meet_as_peer(phase, factor)

    def close(self) -> None:
        """Frees the communicator (before MPI/Horovod shut down; all ranks together)."""
        if self.comm is not None:
            self.comm.Free()
            self.comm = None

    def _message(self) -> np.ndarray:
        return np.array([self.count], dtype=np.int64)

    def _meet_as_root(self, phase: str) -> None:
        sends = [self.comm.Isend(self._message(), dest=r, tag=_ARRIVED) for r in range(1, self.size)]
        bufs = {r: np.zeros(1, dtype=np.int64) for r in range(1, self.size)}
        recvs = {r: self.comm.Irecv(bufs[r], source=r, tag=_ARRIVED) for r in range(1, self.size)}
        deadline = time.monotonic() + self.timeout
        pending = dict(recvs)
        while pending:
            pending = {r: req for r, req in pending.items() if not req.Test()}
            if pending and time.monotonic() > deadline:
                missing = sorted(pending)
                self.abort("%s did not finish %s within %.0f s of rank 0 (horovod_stall_timeout): %s; ending the job"
                           % (", ".join(self.who(r) for r in missing), phase, self.timeout,
                              "it stalls or died" if len(missing) == 1 else "they stall or died"))
                return
            if pending:
                time.sleep(_POLL)
        self._check_count(bufs, phase)
        for req in sends:
            req.Wait()
        sends = [self.comm.Isend(self._message(), dest=r, tag=_ALL_HERE) for r in range(1, self.size)]
        for req in sends:
            req.Wait()

    def _meet_as_peer(self, phase: str, factor: float) -> None:
        send = self.comm.Isend(self._message(), dest=0, tag=_ARRIVED)
        root = np.zeros(1, dtype=np.int64)
        self._wait(self.comm.Irecv(root, source=0, tag=_ARRIVED), self.timeout * max(1.0, factor),
                   "%s did not finish %s within %.0f s of %s (horovod_stall_timeout): it stalls or died; "
                   "ending the job" % (self.who(0), phase, self.timeout * max(1.0, factor), self.who(self.rank)))
        self._check_count({0: root}, phase)
        verdict = np.zeros(1, dtype=np.int64)
        self._wait(self.comm.Irecv(verdict, source=0, tag=_ALL_HERE), self.timeout + VERDICT_GRACE,
                   "%s: rank 0 did not confirm the end of %s within %.0f s (horovod_stall_timeout): another "
                   "rank stalls or died; ending the job" % (self.who(self.rank), phase, self.timeout + VERDICT_GRACE))
        send.Wait()

    def _wait(self, request, seconds: float, message: str) -> None:
        deadline = time.monotonic() + seconds
        while not request.Test():
            if time.monotonic() > deadline:
                self.abort(message)
                return
            time.sleep(_POLL)

    def _check_count(self, bufs, phase: str) -> None:
        for r, buf in bufs.items():
            if int(buf[0]) != self.count:
                self.abort("ranks out of step at %s: %s is at meeting point %i, %s at %i (a bug: please report)"
                           % (phase, self.who(self.rank), self.count, self.who(r), int(buf[0])))


# The watcher of StartupGuard: a separate process, because the rank itself is stuck inside C code
# (MPI_Init, called while importing mpi4py, holds the GIL, so no Python thread of the rank runs).
_WATCHER = """
import os, select, signal, sys
pid, timeout, message = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
ready, _, _ = select.select([0], [], [], timeout)
if not ready:
    os.write(2, message.encode() + b"\\n")
    os.kill(pid, signal.SIGKILL)
"""


class StartupGuard:
    """Ends this process when MPI/Horovod initialisation (which waits for every rank of the job)
    does not finish within ``timeout`` s: another rank stalls before it (config, imports) or died.
    The launcher then ends the rest of the job. A small watcher process keeps the time; leaving
    the ``with`` block (or the end of this process) closes its stdin, which ends it."""

    def __init__(self, timeout: float, rank: Optional[int], size: int):
        self.timeout, self.rank, self.size = float(timeout), rank, size
        self._watcher: Optional[subprocess.Popen] = None

    def __enter__(self) -> "StartupGuard":
        if self.timeout > 0 and self.size > 1:
            message = ("ERROR: rank %s of %i: the other ranks did not join within %.0f s at start-up "
                       "(MPI/Horovod initialisation; horovod_stall_timeout): a rank stalls before it "
                       "(loading the config or data, imports) or died; ending the job"
                       % ("?" if self.rank is None else self.rank, self.size, self.timeout))
            try:
                self._watcher = subprocess.Popen(
                    [sys.executable, "-I", "-S", "-c", _WATCHER, str(os.getpid()), str(self.timeout), message],
                    stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, close_fds=True)
            except OSError:  # no watcher: start-up is then unguarded, as before
                self._watcher = None
        return self

    def __exit__(self, *exc) -> None:
        if self._watcher is not None:
            self._watcher.stdin.close()
            self._watcher.wait()


def report_and_abort(backend, log_error: Optional[Callable[[str], None]] = None) -> Callable[[str], None]:
    """The ``abort`` of a :class:`Rendezvous`: one line ``ERROR: ...`` on stderr (and in the log),
    then the backend's abort, which ends every rank (mpirun returns)."""

    def abort(message: str) -> None:
        if log_error is not None:
            try:
                log_error(message)
            except Exception:  # noqa: BLE001 - the report on stderr is what counts
                pass
        sys.stderr.write("ERROR: %s\n" % message)
        sys.stderr.flush()
        backend.abort(1)

    return abort
