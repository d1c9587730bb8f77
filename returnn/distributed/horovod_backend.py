"""Collectives through Horovod (MPI, NCCL on GPUs)."""
from __future__ import annotations

import os
from typing import Any, List, Mapping, Sequence

import numpy as np
import tensorflow as tf

from returnn.distributed.backend import Backend, fuse, pin_gpu_to_local_rank, prepare_mpi_environment


class HorovodBackend(Backend):
    """``horovod.tensorflow``: init once, pin the GPU of the local rank, sum with allreduce."""

    name = "horovod"

    def __init__(self, env: Mapping[str, Any], stall_timeout: float):
        """``env``: Horovod environment variables to set (``HOROVOD_TIMELINE`` etc.; bools as 0/1);
        ``stall_timeout``: seconds after which our watchdog ends a stalled rank."""
        for name, value in env.items():
            os.environ[name] = str(int(value) if isinstance(value, bool) else value)
        # Horovod's background thread negotiates every cycle. With MPI yielding when idle (see
        # prepare_mpi_environment) 1-2 ms cycles scale best here (2 ranks, 2 cores: grad 1.8x at
        # 1-2 ms, 1.7x at 5 ms, 1.6x at 10 ms); without yielding short cycles starve the step.
        os.environ.setdefault("HOROVOD_CYCLE_TIME", "2")
        # Horovod's own stall check warns well before our watchdog ends the run.
        os.environ.setdefault("HOROVOD_STALL_CHECK_TIME_SECONDS", str(max(5, int(stall_timeout / 2))))
        prepare_mpi_environment()
        import horovod.tensorflow as hvd
        self.hvd = hvd
        self._mpi = _mpi4py_world()
        if self._mpi is not None:  # MPI initialised (and finalised at exit) by mpi4py, shared with Horovod
            hvd.init(comm=self._mpi.COMM_WORLD)
        else:
            hvd.init()
        self.rank, self.size = hvd.rank(), hvd.size()
        self.local_rank, self.local_size = hvd.local_rank(), hvd.local_size()
        pin_gpu_to_local_rank(self.local_rank)

    def title(self) -> str:
        return "Horovod"

    def allreduce_sum_graph(self, tensors: Sequence[tf.Tensor]) -> List[tf.Tensor]:
        if self.size == 1:
            return list(tensors)
        flat, unfuse = fuse(tensors)
        return unfuse(self.hvd.allreduce(flat, op=self.hvd.Sum))

    def allreduce_host(self, values: np.ndarray, op: str = "sum") -> np.ndarray:
        values = np.asarray(values, dtype=np.float64)
        if self.size == 1:
            return values
        hvd_op = {"sum": self.hvd.Sum, "min": self.hvd.Min, "max": self.hvd.Max}[op]
        return self.hvd.allreduce(tf.constant(values), op=hvd_op).numpy()

    def broadcast_variables(self, variables: Sequence[tf.Variable], root_rank: int = 0) -> None:
        if self.size > 1 and variables:
            self.hvd.broadcast_variables(list(variables), root_rank=root_rank)

    def p2p_comm(self):
        """A duplicate of MPI's world through mpi4py (which initialised MPI for Horovod), or None."""
        return self._mpi.COMM_WORLD.Dup() if self._mpi is not None and self.size > 1 else None

    def barrier(self) -> None:
        if self.size > 1:
            self.allreduce_host(np.zeros(1))

    def abort(self, exit_code: int = 1) -> None:
        try:
            from mpi4py import MPI
            MPI.COMM_WORLD.Abort(exit_code)
        except Exception:  # pragma: no cover - mpi4py missing
            pass
        os._exit(exit_code)

    def shutdown(self) -> None:
        self.hvd.shutdown()


def _mpi4py_world():
    """mpi4py's MPI module when MPI is to be used (started by an MPI launcher), else None. Horovod
    is then initialised on mpi4py's world, so both share one MPI that mpi4py finalises at exit
    after Horovod shut down (Horovod's documented way to use mpi4py next to it)."""
    if not any(k in os.environ for k in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK")):
        return None
    try:
        from mpi4py import MPI
    except ImportError:
        return None
    return MPI
