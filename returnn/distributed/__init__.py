"""Distributed training: rank/size, the reducer backend (Horovod or mpi4py), reduce policy."""
from returnn.distributed.context import DistributedContext
from returnn.util.launcher_env import launcher_world_size

__all__ = ["DistributedContext", "launcher_world_size"]
