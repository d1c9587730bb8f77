"""Start-up checks of distributed training that need no second process."""
from __future__ import annotations

import subprocess

import pytest

from returnn.distributed.backend import LocalBackend
from returnn.distributed.context import DistributedContext
from helpers import PYTHON, REPO, child_env

DEMO = "demos/demo-tf-lstm.12ax.config"


def run(args, **env):
    return subprocess.run([PYTHON, "rnn.py", DEMO] + args, cwd=REPO, env=child_env(env), capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("backend", ["horovod", "mpi"])
def test_launcher_says_two_ranks_but_backend_sees_one(tmp_path, backend):
    # What happens when Horovod/mpi4py were built against another MPI than the launcher's:
    # the launcher announces 2 processes, the backend initialises a singleton world of size 1.
    proc = run(["++use_horovod", "1", "++distributed_backend", backend, "++model", str(tmp_path / "model")],
               OMPI_COMM_WORLD_SIZE="2", OMPI_COMM_WORLD_RANK="0")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and "2 processes" in lines[0] and "size 1" in lines[0], proc.stderr


def test_parallel_launch_without_use_horovod_is_an_error(tmp_path):
    proc = run(["++model", str(tmp_path / "model")], OMPI_COMM_WORLD_SIZE="2", OMPI_COMM_WORLD_RANK="1")
    assert proc.returncode == 2
    assert "use_horovod" in proc.stderr and "2 processes" in proc.stderr


def test_horovod_single_process_logs_init_line(tmp_path):
    proc = run(["++use_horovod", "1", "++num_epochs", "1", "++model", str(tmp_path / "model"),
                "++train", "{'class': 'Task12AXDataset', 'num_seqs': 20}", "++dev", "None"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Horovod initialized. Hostname" in proc.stdout
    assert "rank 0 / size 1, local rank 0 / local size 1." in proc.stdout


def test_unknown_backend_and_distribution_are_one_line_errors(tmp_path):
    for key, value in (("distributed_backend", "nccl"), ("horovod_dataset_distribution", "round_robin")):
        proc = run(["++use_horovod", "1", "++" + key, value, "++model", str(tmp_path / "model")])
        assert proc.returncode == 2
        lines = [l for l in proc.stderr.splitlines() if l.strip()]
        assert len(lines) == 1 and key in lines[0] and value in lines[0], proc.stderr


class _FakeBackend(LocalBackend):
    def __init__(self, size):
        self.size = size


@pytest.mark.parametrize("size,reduce_type,distribution,expected", [
    (1, "grad", "shard", (False, False, False, False)),
    (1, "param", "shard", (False, False, False, False)),
    (2, "grad", "shard", (True, False, True, True)),
    (2, "param", "random_seed_offset", (False, True, False, True)),
])
def test_context_policy(size, reduce_type, distribution, expected):
    dist = DistributedContext(_FakeBackend(size), reduce_type=reduce_type, dataset_distribution=distribution)
    assert (dist.reduces_gradients, dist.syncs_params, dist.shards_batches, dist.has_stall_watchdog) == expected
    assert not DistributedContext(_FakeBackend(2), stall_timeout=0).has_stall_watchdog


def test_stall_line_names_the_other_hosts_and_host_table():
    from returnn.distributed.backend import LocalBackend, rank_hosts, stall_text
    import socket

    assert rank_hosts(LocalBackend()) == [socket.gethostname()]
    assert stall_text(1, ["vm", "vm"]) == "rank 1 of 2 on vm gives up: a peer rank probably died or stalls"
    assert stall_text(0, ["nodeA", "nodeB"]) == (
        "rank 0 of 2 on nodeA gives up: no answer from nodeB (rank 1): node or network lost, or a peer rank died or "
        "stalls")
    assert "no answer from nodeB (ranks 2-3,5), nodeC (rank 4):" in stall_text(
        1, ["nodeA", "nodeA", "nodeB", "nodeB", "nodeC", "nodeB"])


def test_watchdog_pauses_while_this_rank_works_alone_and_rearms_after():
    """Rank 0's own checkpoint write does not fire its watchdog (the other ranks time it at the
    next meeting point); afterwards the watchdog is armed again and fires on a stall."""
    import time
    from returnn.distributed.backend import LocalBackend
    from returnn.distributed.context import DistributedContext
    from returnn.util.watchdog import Watchdog

    fired = []
    dist = DistributedContext(LocalBackend(), stall_timeout=0.4)
    dist.watchdog = watchdog = Watchdog(0.4, describe=lambda: "x", on_stall=fired.append)
    watchdog.start()
    watchdog.arm()
    try:
        with dist.watchdog_paused():
            time.sleep(0.9)
        assert not fired and watchdog.armed
        time.sleep(1.5)
        assert len(fired) == 1
    finally:
        watchdog.stop()
