"""The collective operations the engine needs, behind one interface.

Implementations: :class:`LocalBackend` (one process), ``HorovodBackend`` and ``MpiBackend``
(mpi4py, for machines where Horovod cannot be built). In-graph reductions go through
:meth:`Backend.allreduce_sum_graph`, so the compiled step is the same code for every backend.
"""
from __future__ import annotations

import os
import socket
from typing import List, Sequence

import numpy as np
import tensorflow as tf


class Backend:
    """Collectives over all ranks."""

    name = "local"
    rank = 0
    size = 1
    local_rank = 0
    local_size = 1

    def allreduce_sum_graph(self, tensors: Sequence[tf.Tensor]) -> List[tf.Tensor]:
        """Sums float32 tensors over ranks; callable inside a tf.function. One fused collective."""
        return list(tensors)

    def allreduce_host(self, values: np.ndarray, op: str = "sum") -> np.ndarray:
        """Reduces a small float64 array over ranks on the host (op: sum, min, max)."""
        return np.asarray(values, dtype=np.float64)

    def broadcast_variables(self, variables: Sequence[tf.Variable], root_rank: int = 0) -> None:
        """Sets every rank's variables to those of ``root_rank``."""

    def barrier(self) -> None:
        """Waits for all ranks."""

    def p2p_comm(self):
        """An mpi4py communicator of its own for point-to-point messages between the ranks
        (:mod:`returnn.distributed.rendezvous`), or None. Called by every rank at the same time."""
        return None

    def abort(self, exit_code: int = 1) -> None:
        """Ends all ranks (used after an error so no rank waits for the failed one)."""
        os._exit(exit_code)

    def shutdown(self) -> None:
        """Clean shutdown at the end of a run."""

    def describe(self) -> str:
        """The start-up line, e.g. 'Horovod initialized. Hostname H, pid P, rank R / size N, ...'."""
        return ("%s initialized. Hostname %s, pid %i, rank %i / size %i, local rank %i / local size %i."
                % (self.title(), socket.gethostname(), os.getpid(), self.rank, self.size, self.local_rank,
                   self.local_size))

    def title(self) -> str:
        return "Local"


class LocalBackend(Backend):
    """A single process: every collective is the identity."""


def fuse(tensors: Sequence[tf.Tensor]):
    """Flattens float tensors into one float32 vector; returns it and a function undoing it."""
    shapes = [tf.shape(t) for t in tensors]
    sizes = [tf.size(t) for t in tensors]
    dtypes = [t.dtype for t in tensors]
    flat = tf.concat([tf.reshape(tf.cast(t, tf.float32), [-1]) for t in tensors], axis=0)

    def unfuse(vector: tf.Tensor) -> List[tf.Tensor]:
        parts = tf.split(vector, sizes)
        return [tf.cast(tf.reshape(p, s), d) for p, s, d in zip(parts, shapes, dtypes)]

    return flat, unfuse


_HOST_WIDTH = 64  # bytes of a host name exchanged by rank_hosts


def rank_hosts(backend: Backend) -> List[str]:
    """The host name of every rank, by rank (one host allreduce; every rank must call it)."""
    table = np.zeros((backend.size, _HOST_WIDTH))
    name = socket.gethostname().encode("utf-8", "replace")[:_HOST_WIDTH]
    table[backend.rank, :len(name)] = list(name)
    table = backend.allreduce_host(table.reshape(-1), "sum").reshape(backend.size, _HOST_WIDTH)
    return [bytes(int(c) for c in row if c).decode("utf-8", "replace") for row in table]


def stall_text(rank: int, hosts: Sequence[str]) -> str:
    """What a rank that gives up waiting says: who it is and, in a multi-node job, the other
    nodes it depended on (a lost node or link stalls every rank without killing any)."""
    others: dict = {}
    for r, host in enumerate(hosts):
        if host != hosts[rank]:
            others.setdefault(host, []).append(r)
    text = "rank %i of %i on %s gives up: " % (rank, len(hosts), hosts[rank])
    if not others:
        return text + "a peer rank probably died or stalls"
    lost = ", ".join("%s (rank%s %s)" % (h, "s" if len(r) > 1 else "", _ranges(r)) for h, r in others.items())
    return text + "no answer from %s: node or network lost, or a peer rank died or stalls" % lost


def _ranges(ranks: Sequence[int]) -> str:
    """[2, 3, 5] -> '2-3,5'."""
    parts, start = [], None
    for i, r in enumerate(ranks):
        if start is None:
            start = r
        if i + 1 == len(ranks) or ranks[i + 1] != r + 1:
            parts.append(str(start) if start == r else "%i-%i" % (start, r))
            start = None
    return ",".join(parts)


def prepare_mpi_environment() -> None:
    """Settings that must be in the environment before MPI initialises (user settings win).

    Open MPI busy-polls inside blocking calls by default; Horovod's background thread is in such
    calls every cycle, so it takes a whole core from the training step. Yielding when idle costs
    a little latency and gives that core back (measured on 2 cores, 2 ranks: grad speed-up 1.29x
    -> 1.87x, param 1.63x -> 1.83x).
    """
    os.environ.setdefault("OMPI_MCA_mpi_yield_when_idle", "1")


def pin_gpu_to_local_rank(local_rank: int) -> None:
    """One GPU per local rank (no-op on machines without GPUs). Must run before TF uses a device."""
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return
    gpu = gpus[local_rank % len(gpus)]
    tf.config.set_visible_devices([gpu], "GPU")
    try:
        tf.config.experimental.set_memory_growth(gpu, True)
    except (ValueError, RuntimeError):
        pass
