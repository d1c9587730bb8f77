"""Collectives over MPI through mpi4py, for machines where Horovod cannot be built.

In-graph reductions call mpi4py from a ``tf.numpy_function`` on one fused buffer, so the step
function has the same shape as with Horovod.
"""
from __future__ import annotations

from typing import List, Sequence

import numpy as np
import tensorflow as tf

from returnn.distributed.backend import Backend, fuse, pin_gpu_to_local_rank, prepare_mpi_environment
from returnn.errors import DistributedError


class MpiBackend(Backend):
    """mpi4py's COMM_WORLD; local rank from a shared-memory split."""

    name = "mpi"

    def __init__(self, reason: str = ""):
        prepare_mpi_environment()
        try:
            from mpi4py import MPI
        except ImportError as exc:
            raise DistributedError("use_horovod needs Horovod or mpi4py, and neither can be imported: %s" % exc)
        self.MPI = MPI
        self.comm = MPI.COMM_WORLD.Dup()
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        local = self.comm.Split_type(MPI.COMM_TYPE_SHARED)
        self.local_rank, self.local_size = local.Get_rank(), local.Get_size()
        local.Free()
        self.reason = reason
        pin_gpu_to_local_rank(self.local_rank)

    def title(self) -> str:
        return "MPI (mpi4py backend%s)" % ((", " + self.reason) if self.reason else "")

    def _allreduce_sum_numpy(self, flat: np.ndarray) -> np.ndarray:
        out = np.empty_like(flat)
        self.comm.Allreduce(np.ascontiguousarray(flat), out, op=self.MPI.SUM)
        return out

    def allreduce_sum_graph(self, tensors: Sequence[tf.Tensor]) -> List[tf.Tensor]:
        if self.size == 1:
            return list(tensors)
        flat, unfuse = fuse(tensors)
        reduced = tf.numpy_function(self._allreduce_sum_numpy, [flat], tf.float32, stateful=True)
        reduced.set_shape(flat.shape)
        return unfuse(reduced)

    def allreduce_host(self, values: np.ndarray, op: str = "sum") -> np.ndarray:
        values = np.ascontiguousarray(values, dtype=np.float64)
        if self.size == 1:
            return values
        out = np.empty_like(values)
        mpi_op = {"sum": self.MPI.SUM, "min": self.MPI.MIN, "max": self.MPI.MAX}[op]
        self.comm.Allreduce(values, out, op=mpi_op)
        return out

    def broadcast_variables(self, variables: Sequence[tf.Variable], root_rank: int = 0) -> None:
        if self.size == 1:
            return
        for var in variables:
            value = np.array(var.numpy(), copy=True, order="C").reshape(-1)
            self.comm.Bcast(value, root=root_rank)
            var.assign(value.reshape(var.shape))

    def p2p_comm(self):
        return self.comm.Dup()

    def barrier(self) -> None:
        self.comm.Barrier()

    def abort(self, exit_code: int = 1) -> None:
        self.MPI.COMM_WORLD.Abort(exit_code)

    def shutdown(self) -> None:
        self.comm.Barrier()
