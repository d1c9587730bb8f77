"""What the config asks of distributed training, and the process's place in it.

``DistributedContext`` reads the ``horovod_*`` options once and holds the backend (Horovod, or MPI
via mpi4py), so the engine asks one object: am I rank 0, how do I reduce, when do I sync.
"""
from __future__ import annotations

import contextlib
from typing import Any, Dict, Optional

from returnn.config import Config
from returnn.errors import ConfigError, DistributedError
from returnn.distributed.agreement import check_same_on_all_ranks, compared_config_items, network_items
from returnn.distributed.backend import Backend, LocalBackend
from returnn.util.launcher_env import launcher_rank, launcher_world_size
from returnn.distributed.rendezvous import Rendezvous, StartupGuard, report_and_abort
from returnn.util.watchdog import Watchdog

REDUCE_TYPES = ("grad", "param")
DATASET_DISTRIBUTIONS = ("shard", "random_seed_offset")
BACKENDS = ("horovod", "mpi")
# Config keys handed to Horovod as its environment variables (read by hvd.init()).
HOROVOD_ENV_KEYS = {
    "horovod_timeline": "HOROVOD_TIMELINE",
    "horovod_cycle_time": "HOROVOD_CYCLE_TIME",
    "horovod_fusion_threshold": "HOROVOD_FUSION_THRESHOLD",
    "horovod_autotune": "HOROVOD_AUTOTUNE",
}

class DistributedContext:
    """The distributed options of a run plus the backend that carries them out."""

    def __init__(self, backend: Backend, reduce_type: str = "grad", param_sync_step: int = 1,
                 param_sync_time_diff: Optional[float] = None, scale_lr: bool = False,
                 dataset_distribution: str = "shard", stall_timeout: float = 300.0):
        self.backend = backend
        self.reduce_type = reduce_type
        self.param_sync_step = max(1, int(param_sync_step))
        self.param_sync_time_diff = param_sync_time_diff
        self.scale_lr = scale_lr
        self.dataset_distribution = dataset_distribution
        self.stall_timeout = float(stall_timeout)
        self.watchdog: Optional[Watchdog] = None  # the training loop's, paused while ranks meet
        self.rendezvous: Optional[Rendezvous] = None
        if self.size > 1 and self.stall_timeout > 0:
            comm = backend.p2p_comm()
            if comm is not None:
                self.rendezvous = Rendezvous(comm, self.stall_timeout, report_and_abort(backend, _log_error))

    @property
    def rank(self) -> int:
        return self.backend.rank

    @property
    def size(self) -> int:
        return self.backend.size

    @property
    def is_chief(self) -> bool:
        """Rank 0 writes checkpoints, the learning-rate file and the main log."""
        return self.backend.rank == 0

    @property
    def enabled(self) -> bool:
        return self.backend.size > 1 or self.backend.name != "local"

    def learning_rate_factor(self) -> float:
        """``horovod_scale_lr``: the rate multiplied by the number of ranks, as RETURNN does
        (``lr * hvd.size()``, whether the gradients are summed or averaged: ``horovod_avg_grad``)."""
        return float(self.size) if self.scale_lr else 1.0

    def dataset_seed_offset(self) -> int:
        """``random_seed_offset`` distribution: each rank shuffles with its own seed."""
        if self.dataset_distribution == "random_seed_offset":
            return self.rank * 1013
        return 0

    @property
    def shards_batches(self) -> bool:
        """``shard`` distribution over several ranks: training batch i goes to rank i mod size."""
        return self.size > 1 and self.dataset_distribution == "shard"

    @property
    def reduces_gradients(self) -> bool:
        """``grad`` reduce over several ranks: gradients (and step flags) are summed in every step."""
        return self.size > 1 and self.reduce_type == "grad"

    @property
    def syncs_params(self) -> bool:
        """``param`` reduce over several ranks: each rank steps alone; parameters are averaged at syncs."""
        return self.size > 1 and self.reduce_type == "param"

    @property
    def has_stall_watchdog(self) -> bool:
        """Several ranks wait for each other, so a dead peer must end this rank (``horovod_stall_timeout``)."""
        return self.size > 1 and self.stall_timeout > 0

    @contextlib.contextmanager
    def watchdog_paused(self):
        """For work of this rank alone that may take long (rank 0 writing a checkpoint): the
        others watch it at the next :meth:`meet`, so this rank's watchdog does not."""
        watchdog = self.watchdog
        if watchdog is None or not watchdog.armed:
            yield
            return
        watchdog.disarm()
        try:
            yield
        finally:
            watchdog.arm()

    def meet(self, phase: str, factor: float = 1.0) -> None:
        """All ranks finished ``phase`` (a barrier). A rank that is ``horovod_stall_timeout`` s late
        (``factor`` times that for rank 0, where it alone does slow work such as writing the
        checkpoint) ends the job with one line naming it and the phase (see :mod:`rendezvous`)."""
        if self.size <= 1:
            return
        with self.watchdog_paused():
            if self.rendezvous is not None:
                self.rendezvous.meet(phase, factor)
            else:  # no point-to-point messages (Horovod without MPI): a plain barrier
                self.backend.barrier()

    def check_network_agrees(self, net_dict: Dict[str, Any], data: Dict[str, Any], params: Dict[str, Any],
                             epoch: int) -> None:
        """All ranks built the same network (net dict, data description, parameter shapes) for
        ``epoch``; else every rank raises the same one-line error (see :mod:`agreement`)."""
        if self.size <= 1:
            return
        self.meet("building the network of epoch %i" % epoch)
        check_same_on_all_ranks(self.backend, network_items(net_dict, data, params),
                                "the network of epoch %i" % epoch)

    def shutdown(self) -> None:
        """The end of a run: all ranks meet, then the backend shuts down."""
        if not self.enabled:
            return
        self.meet("the end of the run")
        if self.rendezvous is not None:
            self.rendezvous.close()
            self.rendezvous = None
        self.backend.shutdown()

    @classmethod
    def from_config(cls, config: Config) -> "DistributedContext":
        """Reads the options and initialises the backend when ``use_horovod`` is set."""
        reduce_type = config.value("horovod_reduce_type")
        if reduce_type not in REDUCE_TYPES:
            raise ConfigError("config key 'horovod_reduce_type': unknown %r (known: %s)"
                              % (reduce_type, ", ".join(REDUCE_TYPES)))
        distribution = config.value("horovod_dataset_distribution")
        if distribution not in DATASET_DISTRIBUTIONS:
            raise ConfigError("config key 'horovod_dataset_distribution': unknown %r (known: %s)"
                              % (distribution, ", ".join(DATASET_DISTRIBUTIONS)))
        stall_timeout = config.float("horovod_stall_timeout")
        kwargs = dict(reduce_type=reduce_type, param_sync_step=config.int("horovod_param_sync_step"),
                      param_sync_time_diff=config.float("horovod_param_sync_time_diff"),
                      scale_lr=config.bool("horovod_scale_lr"), dataset_distribution=distribution,
                      stall_timeout=stall_timeout)
        if not config.bool("use_horovod"):
            if launcher_world_size() > 1:
                raise DistributedError(
                    "started by a parallel launcher with %i processes but use_horovod is off; "
                    "add '++use_horovod 1' (otherwise every process would train alone)" % launcher_world_size())
            return cls(LocalBackend(), **kwargs)
        choice = config.value("distributed_backend")
        if choice is not None and choice not in BACKENDS:
            raise ConfigError("config key 'distributed_backend': unknown %r (known: %s)"
                              % (choice, ", ".join(BACKENDS)))
        horovod_env = {env: config.typed_value(key) for key, env in HOROVOD_ENV_KEYS.items()
                       if config.typed_value(key) is not None}
        with StartupGuard(stall_timeout, launcher_rank(), launcher_world_size()):
            backend = create_backend(choice, horovod_env, stall_timeout)
        # before anything else the ranks do together (the rendezvous communicator, the data): a rank with
        # another horovod_stall_timeout or reduce type would not even meet the others the same way
        check_same_on_all_ranks(backend, compared_config_items(config), "the config")
        return cls(backend, **kwargs)


def _log_error(message: str) -> None:
    from returnn.log import log
    print(message, file=log.error)
    log.flush_all()


def create_backend(choice: Optional[str], horovod_env: Dict[str, Any], stall_timeout: float) -> Backend:
    """``choice`` (``distributed_backend``): Horovod if importable (or asked for), else MPI through
    mpi4py; checks the world size. ``horovod_env`` and ``stall_timeout`` go to Horovod."""
    if choice in (None, "horovod"):
        try:
            import horovod.tensorflow  # noqa: F401
            have_horovod = True
        except ImportError as exc:
            if choice == "horovod":
                raise DistributedError("distributed_backend 'horovod' asked for, but Horovod cannot be imported: %s" % exc)
            have_horovod = False
        if have_horovod:
            from returnn.distributed.horovod_backend import HorovodBackend
            backend: Backend = HorovodBackend(horovod_env, stall_timeout)
        else:
            from returnn.distributed.mpi_backend import MpiBackend
            backend = MpiBackend(reason="Horovod is not installed")
    else:
        from returnn.distributed.mpi_backend import MpiBackend
        backend = MpiBackend(reason="distributed_backend = 'mpi'")
    expected = launcher_world_size()
    if expected > 1 and backend.size == 1:
        raise DistributedError(
            "the launcher started %i processes but %s reports size 1: %s was probably built without MPI, "
            "or the processes were not started by a matching mpirun" % (expected, backend.name, backend.name))
    return backend
