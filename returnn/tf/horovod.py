"""``TFHorovod.get_ctx(config)`` as configs call it (``hvd = TFHorovod.get_ctx(config=config)``).

Returns None without ``use_horovod``; otherwise a small view of the job: rank and size as the
launcher announced them (the config runs before MPI is initialised) and the ``horovod_*`` options.
"""
from __future__ import annotations

from typing import Optional

from returnn.util.launcher_env import launcher_local, launcher_rank, launcher_world_size


class HorovodContext:
    """Rank, size and reduce options of a ``use_horovod`` run."""

    def __init__(self, config):
        self.config = config

    def rank(self) -> int:
        rank = launcher_rank()
        return rank if rank is not None else 0

    def size(self) -> int:
        return launcher_world_size()

    def local_rank(self) -> int:
        return launcher_local()[0]

    def local_size(self) -> int:
        return launcher_local()[1]

    def get_reduce_type(self) -> str:
        return self.config.value("horovod_reduce_type")

    def is_reduce_type_grad(self) -> bool:
        return self.get_reduce_type() == "grad"

    def is_reduce_type_param(self) -> bool:
        return self.get_reduce_type() == "param"

    def get_dataset_distribution_type(self) -> str:
        return self.config.value("horovod_dataset_distribution")

    def is_dataset_distribution_shard(self) -> bool:
        return self.get_dataset_distribution_type() == "shard"

    def is_dataset_distribution_random_seed_offset(self) -> bool:
        return self.get_dataset_distribution_type() == "random_seed_offset"


def get_ctx(config=None) -> Optional[HorovodContext]:
    """None unless the config sets ``use_horovod``."""
    if config is None:
        from returnn.config import get_global_config
        config = get_global_config()
    if not config.bool("use_horovod"):
        return None
    return HorovodContext(config)
