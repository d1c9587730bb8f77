"""What launchers (mpirun, MPICH/Intel MPI hydra, PMIx, SLURM srun) announce in the environment:
world size, rank, local rank and local size. The one table all readers use (the engine's
distributed context, TFHorovod.get_ctx for configs, the log's terminal check, the exit path and
tools/check-distributed.py). Standard library only, imported without the distributed package (the exit path must not import
TensorFlow), and loaded by path by check.py."""
from __future__ import annotations

import os
from typing import Mapping, NamedTuple, Optional, Tuple


class Launcher(NamedTuple):
    """Variable names one launcher sets (None: it sets none for that)."""

    size: str
    rank: str
    local_rank: Optional[str]
    local_size: Optional[str]
    what: str


# most specific first
LAUNCHERS: Tuple[Launcher, ...] = (
    Launcher("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
             "OMPI_COMM_WORLD_LOCAL_SIZE", "Open MPI mpirun / horovodrun"),
    Launcher("PMI_SIZE", "PMI_RANK", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "MPICH / Intel MPI (hydra), srun --mpi=pmi2"),
    Launcher("PMIX_SIZE", "PMIX_RANK", None, None, "PMIx"),
    Launcher("SLURM_STEP_NUM_TASKS", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "srun"),
    Launcher("SLURM_NTASKS", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "sbatch allocation"),
)


def _int(env: Mapping[str, str], name: Optional[str]) -> Optional[int]:
    value = env.get(name, "") if name else ""
    return int(value) if value.isdigit() else None


def find_launcher(env: Optional[Mapping[str, str]] = None) -> Optional[Launcher]:
    """The launcher that started this process, or None (a SLURM allocation without srun: None)."""
    env = os.environ if env is None else env
    for launcher in LAUNCHERS:
        if _int(env, launcher.size) is None:
            continue
        if launcher.size.startswith("SLURM") and launcher.rank not in env:
            continue  # an sbatch script itself, not a task started by srun
        return launcher
    return None


def launcher_env(env: Optional[Mapping[str, str]] = None) -> Tuple[Optional[int], Optional[int], str]:
    """(size, rank, size variable) the launcher announced, or (None, None, "")."""
    env = os.environ if env is None else env
    launcher = find_launcher(env)
    if launcher is None:
        return None, None, ""
    return _int(env, launcher.size), _int(env, launcher.rank), launcher.size


def launcher_world_size(env: Optional[Mapping[str, str]] = None) -> int:
    """World size the launcher announced, or 1."""
    return launcher_env(env)[0] or 1


def launcher_rank(env: Optional[Mapping[str, str]] = None) -> Optional[int]:
    """This process's rank as the launcher announced it, or None."""
    return launcher_env(env)[1]


def launcher_local(env: Optional[Mapping[str, str]] = None) -> Tuple[int, int]:
    """(local rank, local size) the launcher announced, or (0, 1)."""
    env = os.environ if env is None else env
    launcher = find_launcher(env)
    if launcher is None:
        return 0, 1
    rank, size = _int(env, launcher.local_rank), _int(env, launcher.local_size)
    return (rank if rank is not None else 0), (size if size is not None else 1)


def launched(env: Optional[Mapping[str, str]] = None) -> bool:
    """Whether a launcher started this process (also a one-task srun step)."""
    env = os.environ if env is None else env
    return find_launcher(env) is not None or "SLURM_STEP_ID" in env
