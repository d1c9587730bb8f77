"""Multi-node jobs for real on one machine: network namespaces as nodes (tests/netns.py).

Every job starts on ``nodeA`` (as a batch script would on the first node of its allocation) and
reaches ``nodeB`` through the namespace launch agent in place of ssh. Each node also has a decoy
interface (same address on every node, like docker0), so the runs only work when MPI is told to
use the nodes' link: ``MPI_IFACE=mnet0`` (the launch scripts turn it into ``-mca btl_tcp_if_include``
and ``-mca oob_tcp_if_include``). Ranks run ``tests/mpi_probe.py`` (rnn.py plus a record of the
parameters after every step). Slow (about 30-60 s per job): marked ``multinode``.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import pytest

import netns
from helpers import PYTHON, REPO
from test_distributed import CONFIG  # DummyDataset, 40 sequences of 10 frames, 5 per batch

REASON = None if shutil.which("mpirun") else "needs OpenMPI's mpirun"
REASON = REASON or netns.unavailable_reason()
pytestmark = [pytest.mark.multinode, pytest.mark.skipif(REASON is not None, reason="simulated nodes: %s" % REASON)]

PROBE = REPO / "tests" / "mpi_probe.py"
JOB_TIMEOUT = 240
_BANNER = re.compile(r"Horovod initialized\. Hostname (\S+), pid (\d+), rank (\d+) / size (\d+), "
                     r"local rank (\d+) / local size (\d+)\.")


@pytest.fixture
def cluster():
    """Two nodes; removed (processes killed, namespaces deleted) however the test ends."""
    nodes = netns.Cluster(2)
    try:
        yield nodes
    finally:
        nodes.destroy()


class Job:
    """One training job's files under ``tmp_path`` and the environment its launcher gets on nodeA."""

    def __init__(self, cluster: netns.Cluster, tmp_path: Path, name: str, num_seqs: int = 40):
        self.cluster, self.dir, self.name = cluster, tmp_path, name
        self.config = tmp_path / (name + ".config")
        self.config.write_text(CONFIG)
        self.num_seqs = num_seqs
        self.model = tmp_path / name / "model"
        self.log = tmp_path / (name + ".log")
        self.probe_out = str(tmp_path / name)
        table = cluster.write_node_table(tmp_path / "nodes.txt")
        # What a login shell on the first node would have, plus the job's settings.
        self.env: Dict[str, str] = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/root"),
            "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "TF_CPP_MIN_LOG_LEVEL": "2",
            "PYTHONUNBUFFERED": "1", "MPI_PROBE_OUT": self.probe_out, "PYTHON": PYTHON, "RNN": str(PROBE),
            "MPI_BTL": "tcp,self", "MPI_IFACE": netns.LINK,
            "MPI_EXPORT": "TF_CPP_MIN_LOG_LEVEL MPI_PROBE_OUT PYTHONUNBUFFERED",
        }
        self.env.update(cluster.launch_env(table))

    def args(self, *extra: str) -> List[str]:
        train = "{'class': 'DummyDataset', 'input_dim': 5, 'output_dim': 3, 'num_seqs': %i, 'seq_len': 10}"
        return [str(self.config), "++model", str(self.model), "++log", str(self.log), "++num_epochs", "2",
                "++learning_rate_file", str(self.model) + ".lr.data", "++train", train % self.num_seqs] + list(extra)

    def run(self, cmd: Sequence[str], env: Optional[Dict[str, str]] = None) -> subprocess.CompletedProcess:
        full = dict(self.env, **(env or {}))
        return self.cluster["nodeA"].run(cmd, env=full, cwd=str(REPO), timeout=JOB_TIMEOUT)

    def events(self, size: int) -> List[dict]:
        out = []
        for rank in range(size):
            path = Path("%s.rank%i.json" % (self.probe_out, rank))
            assert path.exists(), "rank %i wrote no record" % rank
            out.append(json.loads(path.read_text()))
        return out

    def rank_log(self, rank: int, size: int) -> str:
        path = self.log if rank == 0 else self.dir / ("%s.horovod-%i-%i.log" % (self.name, rank, size))
        return path.read_text(errors="replace") if path.exists() else ""

    def banners(self, size: int) -> List[tuple]:
        """(host, rank, local rank, local size) of every rank, from the per-rank logs."""
        out = []
        for rank in range(size):
            m = _BANNER.search(self.rank_log(rank, size))
            assert m, "rank %i logged no start-up banner:\n%s" % (rank, self.rank_log(rank, size)[-2000:])
            assert (int(m.group(3)), int(m.group(4))) == (rank, size)
            out.append((m.group(1), rank, int(m.group(5)), int(m.group(6))))
        return out


def describe(proc: subprocess.CompletedProcess) -> str:
    return "exit %s\n--- stdout\n%s\n--- stderr\n%s" % (proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:])


def check_job(job: Job, proc: subprocess.CompletedProcess, per_node: int, reduce_type: str,
              link_bytes: Dict[str, int], steps_per_rank: int) -> None:
    """What every two-node run must show (see the module docstring)."""
    size = 2 * per_node
    assert proc.returncode == 0, describe(proc)
    # rank banners: both host names, ranks placed node by node, local ranks counted per node
    expected = [("nodeA" if r < per_node else "nodeB", r, r % per_node, per_node) for r in range(size)]
    assert job.banners(size) == expected
    events = job.events(size)
    steps = [ev["steps"] for ev in events]
    assert all(len(s) == steps_per_rank for s in steps), [len(s) for s in steps]
    if reduce_type == "grad":  # parameters identical on every rank after every step, and changing
        assert all(s == steps[0] for s in steps)
        assert len(set(steps[0])) == len(steps[0])
    else:  # each rank trains alone between syncs; every sync makes them identical
        assert any(len({s[i] for s in steps}) > 1 for i in range(steps_per_rank)), "never differed"
        syncs = [ev["syncs"] for ev in events]
        assert syncs[0] and all(s == syncs[0] for s in syncs), syncs
        assert syncs[0][-1][0] == steps_per_rank
    # only rank 0 wrote the model
    assert events[0]["checkpoint_writes"] == ["model.001", "model.002"]
    assert all(ev["checkpoint_writes"] == [] for ev in events[1:])
    assert (job.model.parent / "model.002.index").exists()
    # the traffic went over the nodes' link, none over the decoy
    for node in job.cluster.nodes:
        assert node.link_bytes() - link_bytes[node.hostname] > 50_000, node.hostname
        assert node.link_bytes(netns.DECOY) - link_bytes[node.hostname + "/decoy"] < 20_000, node.hostname


def byte_counts(cluster: netns.Cluster) -> Dict[str, int]:
    out = {}
    for node in cluster.nodes:
        out[node.hostname] = node.link_bytes()
        out[node.hostname + "/decoy"] = node.link_bytes(netns.DECOY)
    return out


def test_plain_mpirun_two_nodes_grad(cluster, tmp_path):
    """``mpirun -H nodeA:1,nodeB:1`` as a user would type it, with the interface options."""
    job = Job(cluster, tmp_path, "plain")
    before = byte_counts(cluster)
    cmd = ["mpirun", "-np", "2", "-H", "nodeA:1,nodeB:1", "--bind-to", "none", "-x", "PATH",
           "-x", "MPI_PROBE_OUT", "-x", "TF_CPP_MIN_LOG_LEVEL", "-mca", "pml", "ob1", "-mca", "btl", "tcp,self",
           "-mca", "btl_tcp_if_include", netns.LINK, "-mca", "oob_tcp_if_include", netns.LINK,
           PYTHON, str(PROBE)] + job.args("++use_horovod", "1")
    proc = job.run(cmd)
    check_job(job, proc, per_node=1, reduce_type="grad", link_bytes=before, steps_per_rank=8)


def test_sge_script_two_by_two_param(cluster, tmp_path):
    """demos/launch-sge.qsub run as Grid Engine would on the master node, with a PE_HOSTFILE:
    4 ranks, parameters averaged every 3 steps."""
    pe = tmp_path / "pe_hostfile"
    pe.write_text("nodeA 2 all.q@nodeA UNDEFINED\nnodeB 2 all.q@nodeB UNDEFINED\n")
    job = Job(cluster, tmp_path, "sge", num_seqs=80)
    before = byte_counts(cluster)
    proc = job.run(["bash", "demos/launch-sge.qsub"] + job.args("++horovod_reduce_type", "param",
                                                                "++horovod_param_sync_step", "3"),
                   env={"PE_HOSTFILE": str(pe), "NSLOTS": "4", "JOB_ID": "17", "TMPDIR": str(tmp_path)})
    check_job(job, proc, per_node=2, reduce_type="param", link_bytes=before, steps_per_rank=8)
    assert "launch-sge: job 17 on nodeA: mpirun -np 4 -H nodeA:2,nodeB:2" in proc.stderr


def test_slurm_script_with_fake_srun_grad(cluster, tmp_path):
    """demos/launch-slurm.sbatch in an allocation of nodeA and nodeB, srun replaced (tests/fake_srun.py)."""
    srun = tmp_path / "srun"
    srun.write_text("#!/bin/sh\nexec %s %s \"$@\"\n" % (PYTHON, REPO / "tests" / "fake_srun.py"))
    srun.chmod(0o755)
    job = Job(cluster, tmp_path, "slurm")
    before = byte_counts(cluster)
    proc = job.run(["bash", "demos/launch-slurm.sbatch"] + job.args(),
                   env={"SRUN": str(srun), "SLURM_NTASKS": "2", "SLURM_NTASKS_PER_NODE": "1",
                        "SLURM_JOB_NODELIST": "nodeA,nodeB", "SLURM_SUBMIT_DIR": str(REPO),
                        "FAKE_SRUN_MPIRUN_ARGS": "-mca btl tcp,self -mca btl_tcp_if_include %s" % netns.LINK})
    check_job(job, proc, per_node=1, reduce_type="grad", link_bytes=before, steps_per_rank=8)


# The lost-node runs: epoch 1 is saved, then node B's link goes down a second into epoch 2.
FAULT_SEQS = 3000  # 300 steps per rank and epoch: several seconds, so the link goes down mid-epoch
TEARDOWN = {  # how the job must end: launcher settings, stall timeout, bound on the time to the end
    # Open MPI's default keepalive (about 480 s): rank 0's watchdog gives up after the stall timeout,
    # mpirun then waits for node B's daemon, and the launch script ends it after the grace period
    # (and SIGKILLs it 10 s after SIGTERM, if need be).
    "watchdog": ({"MPI_KEEPALIVE": "0", "MPI_TEARDOWN_GRACE": "10"}, 15, 15 + 10 + 10 + 15),
    # keepalive well below the stall timeout: mpirun itself notices the silent node and ends the job
    "keepalive": ({"MPI_KEEPALIVE": "10", "MPI_TEARDOWN_GRACE": "60"}, 60, 10 + 15),
}


def wait_for(predicate, timeout: float, what: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    pytest.fail("never saw %s (launcher exit %s)" % (what, proc.poll()))


@pytest.mark.parametrize("mechanism", sorted(TEARDOWN))
def test_lost_node_ends_the_job_and_rerun_resumes(cluster, tmp_path, mechanism):
    settings, stall, bound = TEARDOWN[mechanism]
    job = Job(cluster, tmp_path, "lost", num_seqs=FAULT_SEQS)
    cmd = ["bash", "demos/launch-mpirun.sh", "-H", "nodeA:1,nodeB:1"] + job.args(
        "++horovod_stall_timeout", str(stall))
    out, err = tmp_path / "launch.out", tmp_path / "launch.err"
    with open(out, "w") as fo, open(err, "w") as fe:
        proc = cluster["nodeA"].popen(cmd, env=dict(job.env, **settings), cwd=str(REPO), stdout=fo, stderr=fe)
    try:
        wait_for(lambda: "start epoch 2 " in job.rank_log(0, 2), JOB_TIMEOUT, "epoch 2 start", proc)
        time.sleep(1.0)
        assert proc.poll() is None
        cluster["nodeB"].set_link(False)
        down = time.monotonic()
        try:
            code = proc.wait(timeout=bound + 60)
        except subprocess.TimeoutExpired:
            pytest.fail("the job still runs %i s after node B was lost" % (bound + 60))
        took = time.monotonic() - down
    finally:
        if proc.poll() is None:
            proc.kill()
    output = out.read_text(errors="replace") + err.read_text(errors="replace")
    print("\n%s: the job ended %.1f s after node B's link went down (stall timeout %i s, exit %i)"
          % (mechanism, took, stall, code))
    assert code != 0, output[-3000:]
    assert took < bound, "ended %.1f s after the link went down (bound %i s)\n%s" % (took, bound, output[-3000:])
    if mechanism == "watchdog":
        assert "rank 0 of 2 on nodeA gives up: no answer from nodeB (rank 1)" in output, output[-3000:]
        assert "mpirun still runs 10 s after the last rank on nodeA ended" in output, output[-3000:]
    else:
        assert re.search(r"Remote daemon: \S+ on node nodeB", output), output[-3000:]
        return
    # node B comes back (its leftovers gone, as after a reboot); the same command resumes after epoch 1
    cluster["nodeB"].kill_all()
    cluster["nodeB"].set_link(True)
    proc = job.run(cmd, env=dict(job.env, **settings))
    assert proc.returncode == 0, describe(proc)
    assert "start training at epoch 2" in job.rank_log(0, 2)
    assert job.events(2)[0]["checkpoint_writes"] == ["model.002"]


def run_check(job: Job, *mca: str) -> subprocess.CompletedProcess:
    cmd = ["mpirun", "-np", "2", "-H", "nodeA:1,nodeB:1", "--bind-to", "none", "-x", "PATH", "-x", "TF_CPP_MIN_LOG_LEVEL",
           "-mca", "pml", "ob1", "-mca", "btl", "tcp,self"] + list(mca) + [
        PYTHON, str(REPO / "tools" / "check-distributed.py"), "--size-mb", "1", "--repeats", "2",
        "--reach-timeout", "10", "--timeout", "120"]
    return job.run(cmd)


def test_check_distributed_two_nodes(cluster, tmp_path):
    """tools/check-distributed.py across the nodes: per-node facts with the interface that carried the
    traffic; and, when MPI is free to stripe large messages over the decoy too, a PROBLEM line
    naming the host that could not be reached instead of a hang."""
    job = Job(cluster, tmp_path, "check")
    proc = run_check(job, "-mca", "btl_tcp_if_include", netns.LINK, "-mca", "oob_tcp_if_include", netns.LINK)
    assert proc.returncode == 0, describe(proc)
    out = proc.stdout
    for rank, host in enumerate(("nodeA", "nodeB")):
        line = re.search(r"^\[rank %i/2\] host=%s pid=\d+ mpi local=0/1 hvd=%i/2 local=0/1 gpus=0 "
                         r"to other hosts via (\S+) ([\d.]+) MB/s hvd allreduce ([\d.]+) MB/s ok$" % (rank, host, rank),
                         out, re.M)
        assert line, out
        assert line.group(1) == netns.LINK and float(line.group(2)) > 0 and float(line.group(3)) > 0
    assert re.search(r"^OK: 2 rank\(s\) on 2 host\(s\)", out, re.M), out
    assert "WARNING" not in out  # the interface was named
    proc = run_check(job)
    assert proc.returncode != 0
    text = proc.stdout + proc.stderr
    # Depending on which connection Open MPI tries first, the host names (first contact) or the 1 MB
    # exchange do not get through. The first rank to give up names its node and the rank it lost
    # (mpirun then ends the other), well before the check's own watchdog (--timeout 120).
    assert re.search(r"^PROBLEM: rank (0 on nodeA|1 on nodeB) cannot exchange data with rank (1 on nodeB|0 on nodeA"
                     r"|1|0) \(no answer within 10 s\).* MPI may use any of dock0, mnet0 here", text, re.M), text
    assert "stuck in stage" not in text
