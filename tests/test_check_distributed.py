"""tools/check-distributed.py under mpirun (2 ranks, 1 rank, one rank without Horovod) and its analysis."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import Dict, List, Optional

from returnn.distributed import check
from returnn.distributed.check import analyze, format_table, launcher_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join(ROOT, "tools", "check-distributed.py")
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--mca", "btl", "tcp,self"]
# Small payload, few repetitions: the point is correctness, not a benchmark. The watchdog (--timeout)
# and the subprocess timeout turn a hang into a failure.
TOOL_ARGS = ["--size-mb", "1", "--repeats", "2", "--timeout", "120"]


def _env(extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMPI_", "PMI", "SLURM_")) or k.startswith("OMPI_ALLOW_RUN_AS_ROOT")}
    env.update({"TF_CPP_MIN_LOG_LEVEL": "2", "OMP_NUM_THREADS": "1"})
    env.update(extra or {})
    return env


def _run(cmd: List[str], extra_env: Optional[Dict[str, str]] = None) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, env=_env(extra_env), capture_output=True, text=True, timeout=300)


def _table_rows(stdout: str) -> Dict[int, List[str]]:
    """Per-rank rows of rank 0's table, split into columns."""
    rows = {}
    for line in stdout.splitlines():
        cols = line.split()
        if len(cols) >= 12 and cols[0].isdigit() and re.fullmatch(r"\d+/\d+", cols[3]):
            rows[int(cols[0])] = cols
    return rows


def test_two_ranks_ok():
    proc = _run(MPIRUN + ["-np", "2", sys.executable, TOOL] + TOOL_ARGS)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    for rank in (0, 1):
        assert re.search(r"^\[rank %i/2\] host=\S+ pid=\d+ mpi local=%i/2 hvd=%i/2 local=%i/2 .* ok$"
                         % (rank, rank, rank, rank), out, re.M), out
    rows = _table_rows(out)
    assert sorted(rows) == [0, 1]
    for rank, cols in rows.items():
        # columns: rank host pid mpi_r/n mpi_local hvd_r/n hvd_local agree gpus iface p2p_MB/s mpi_MB/s hvd_MB/s
        # result (no other host: no interface between hosts, no point-to-point figure)
        assert cols[3] == cols[5] == "%i/2" % rank and cols[4] == cols[6] and cols[7] == "yes"
        assert cols[9] == cols[10] == "-"
        assert cols[13] == "ok" and float(cols[12]) > 0
    assert "Horovod: mpi=True" in out
    assert re.search(r"^OK: 2 rank\(s\) on 1 host\(s\)", out, re.M), out
    assert "PROBLEM" not in out


def test_one_rank_ok():
    proc = _run(MPIRUN + ["-np", "1", sys.executable, TOOL] + TOOL_ARGS)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^\[rank 0/1\] .* hvd=0/1 local=0/1 ", proc.stdout, re.M)
    assert re.search(r"^OK: 1 rank\(s\)", proc.stdout, re.M)


def test_horovod_missing_on_one_rank_fails_without_hanging(tmp_path):
    fake = tmp_path / "fake" / "horovod"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('horovod hidden for the test')\n")
    cmd = (MPIRUN + ["-np", "1", sys.executable, TOOL] + TOOL_ARGS
           + [":", "-np", "1", "env", "PYTHONPATH=%s" % fake.parent, sys.executable, TOOL] + TOOL_ARGS)
    proc = _run(cmd)
    assert proc.returncode != 0
    assert "PROBLEM: rank 1 on" in proc.stdout and "Horovod missing: ImportError: horovod hidden" in proc.stdout
    assert not re.search(r"^OK:", proc.stdout, re.M)


def test_singleton_under_a_multi_task_launcher_is_a_problem():
    """Size 1 although the launcher announced 3 tasks: not one MPI job."""
    proc = _run([sys.executable, TOOL] + TOOL_ARGS, {"SLURM_NTASKS": "3", "SLURM_PROCID": "0"})
    assert proc.returncode == 1
    assert "MPI size is 1 but SLURM_NTASKS=3" in proc.stdout


def test_launcher_env():
    assert launcher_env({"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "2", "SLURM_NTASKS": "8"}) == (
        4, 2, "OMPI_COMM_WORLD_SIZE")
    assert launcher_env({"PMI_SIZE": "2", "PMI_RANK": "1"}) == (2, 1, "PMI_SIZE")
    assert launcher_env({"SLURM_NTASKS": "8"}) == (None, None, "")  # sbatch script, not an srun task
    assert launcher_env({"SLURM_NTASKS": "8", "SLURM_PROCID": "5"}) == (8, 5, "SLURM_NTASKS")
    assert launcher_env({}) == (None, None, "")


def _info(rank: int, size: int = 2, **overrides) -> Dict:
    info = {"host": "node%i" % (rank // 2), "pid": 100 + rank, "python": "3.11.0", "mpi_rank": rank,
            "mpi_size": size, "mpi_local_rank": rank % 2, "mpi_local_size": min(size, 2),
            "mpi_library": "Open MPI", "launcher_var": "OMPI_COMM_WORLD_SIZE", "launcher_size": size,
            "launcher_rank": rank, "errors": [], "gpus": [], "mpi_allreduce_ok": True, "mpi_allreduce_mbps": 10.0,
            "hvd_rank": rank, "hvd_size": size, "hvd_local_rank": rank % 2, "hvd_local_size": min(size, 2),
            "hvd_built": {"mpi": True, "gloo": False, "nccl": False}, "hvd_allreduce_ok": True,
            "hvd_allreduce_mbps": 5.0, "hvd_broadcast_ok": True}
    info.update(overrides)
    return info


def test_analyze_finds_problems():
    assert analyze([_info(0), _info(1)]) == ([], [])
    problems, _ = analyze([_info(0), _info(1, hvd_rank=0, hvd_allreduce_ok=False)])
    assert any("MPI and Horovod disagree" in p for p in problems)
    assert any("Horovod allreduce gave a wrong result" in p for p in problems)
    assert not any("duplicate" in p for p in problems)
    problems, _ = analyze([_info(0), _info(0)])
    assert problems == ["duplicate MPI ranks [0, 0] (processes did not join one MPI job)"]
    problems, _ = analyze([_info(0), _info(1)], expect_size=4)
    assert len(problems) == 2 and "expected 4" in problems[0]
    problems, _ = analyze([_info(0, launcher_rank=1)])
    assert problems == ["rank 0 on node0: MPI rank 0 differs from the launcher's rank 1 (OMPI_COMM_WORLD_SIZE)"]
    problems, _ = analyze([_info(0, size=1, launcher_size=4, mpi_local_size=1, hvd_size=1, hvd_local_size=1)])
    assert len(problems) == 1 and "MPI size is 1 but OMPI_COMM_WORLD_SIZE=4" in problems[0]
    problems, _ = analyze([_info(0), _info(1)], require_gpu=True)
    assert len(problems) == 2 and "no GPU" in problems[0]
    info = {k: v for k, v in _info(1).items() if not k.startswith("hvd_")}
    info["hvd_error"] = "ImportError: no module named horovod"
    problems, _ = analyze([_info(0), info])
    assert problems == ["rank 1 on node0: Horovod missing: ImportError: no module named horovod"]
    assert "no horovod" in format_table([_info(0), info])


def test_analyze_warnings():
    gpu = ["/physical_device:GPU:0"]
    _, warnings = analyze([_info(0, gpus=gpu), _info(1, gpus=gpu, hvd_version="0.28.1"),
                           _info(2, size=3, host="node0")])
    assert any("ranks share 1 GPU" in w for w in warnings)
    assert any("without NCCL" in w for w in warnings)
    assert "node0: 3 ranks on this host name but MPI local size [2]" in warnings
    _, warnings = analyze([_info(0, tf_version="2.15.1"), _info(1, tf_version="2.14.0")])
    assert warnings == ["ranks differ in tf_version: 2.14.0, 2.15.1"]


def test_interface_facts_and_warnings(tmp_path, monkeypatch):
    net = check.check_net
    sys_net = tmp_path / "net"
    for name, flags, state, rx, tx in (("lo", "0x9", "unknown", 5, 5), ("eth0", "0x1003", "up", 100, 200),
                                       ("ib0", "0x1003", "up", 7, 0), ("eth1", "0x1002", "down", 0, 0)):
        (sys_net / name / "statistics").mkdir(parents=True)
        (sys_net / name / "flags").write_text(flags + "\n")
        (sys_net / name / "operstate").write_text(state + "\n")
        (sys_net / name / "statistics" / "rx_bytes").write_text("%i\n" % rx)
        (sys_net / name / "statistics" / "tx_bytes").write_text("%i\n" % tx)
    monkeypatch.setattr(net, "SYS_NET", str(sys_net))
    monkeypatch.setattr(net, "ipv4_address", lambda name: None if name == "ib0" else "10.0.0.1")
    assert net.interfaces() == ["eth0"]  # up and with an address, loopback left out
    before = net.byte_counters()
    assert before == {"lo": 10, "eth0": 300, "ib0": 7, "eth1": 0}
    after = dict(before, eth0=300 + 5000, ib0=7 + 40, lo=10 ** 9)
    assert net.busiest(before, after, min_bytes=1000) == ("eth0", 5000)  # loopback does not count
    assert net.busiest(before, after, min_bytes=10 ** 6) == ("-", 5000)
    assert net.remote_peers(["a", "a", "b", "c"], 1) == [2, 3]
    assert net._decode(net._encode("nodeA.cluster")) == "nodeA.cluster"
    infos = [_info(0, host="a", mpi_local_size=1), _info(1, host="b", mpi_local_size=1)]
    infos[0].update(ifaces=["eth0", "ib0"], if_include=None)
    infos[1].update(ifaces=["eth0", "ib0"], if_include="eth0")
    _, warnings = analyze(infos)
    assert warnings == ["a: MPI may use any of eth0, ib0 (no btl_tcp_if_include); if the job hangs or is slow, name "
                        "the interface that connects the nodes with MPI_IFACE"]
    monkeypatch.setenv("OMPI_MCA_btl_tcp_if_include", "ib0")
    line = net.unreachable_line(0, "a", "rank 1 on b", 30, ["eth0", "ib0"])
    assert line == ("PROBLEM: rank 0 on a cannot exchange data with rank 1 on b (no answer within 30 s): node or "
                    "network down, a firewall, or the wrong interface; MPI is told to use ib0 (btl_tcp_if_include): "
                    "does it connect the nodes?")


def test_watchdog_aborts_a_stuck_rank():
    code = ("import sys, time; sys.path.insert(0, %r)\n"
            "from returnn.distributed.check import Watchdog\n"
            "w = Watchdog('rank 0', 0.2); w.stage('stuck'); time.sleep(600)\n" % ROOT)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3
    assert "stuck in stage 'stuck'" in proc.stderr


def test_via_rnn_entry_point():
    """``rnn.py --check-distributed [options]`` hands its command line to the check."""
    proc = _run([sys.executable, os.path.join(ROOT, "rnn.py"), "--check-distributed"] + TOOL_ARGS)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^OK: 1 rank\(s\)", proc.stdout, re.M)


def test_one_launcher_table_for_all_readers():
    from returnn.util.launcher_env import launched, launcher_local, launcher_rank, launcher_world_size
    ompi = {"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
            "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}
    assert (launcher_world_size(ompi), launcher_rank(ompi), launcher_local(ompi), launched(ompi)) == (4, 3, (1, 2), True)
    srun = {"SLURM_STEP_NUM_TASKS": "2", "SLURM_NTASKS": "8", "SLURM_PROCID": "1", "SLURM_LOCALID": "1",
            "SLURM_NTASKS_PER_NODE": "2"}
    assert (launcher_world_size(srun), launcher_rank(srun), launcher_local(srun)) == (2, 1, (1, 2))
    sbatch = {"SLURM_NTASKS": "8"}
    assert (launcher_world_size(sbatch), launcher_rank(sbatch), launcher_local(sbatch), launched(sbatch)) == \
        (1, None, (0, 1), False)
    assert launched({"SLURM_STEP_ID": "0"}) and not launched({})


def test_launcher_table_does_not_import_tensorflow():
    """The exit path reads the launcher table; importing it must not pull in TensorFlow (newest TF
    prints its start-up lines then, after a one-line error)."""
    code = ("import sys; sys.path.insert(0, %r)\n"
            "from returnn.util.launcher_env import launched; launched()\n"
            "import returnn.log\n"
            "print(sorted(m for m in ('tensorflow', 'returnn.distributed') if m in sys.modules))" % ROOT)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stdout + proc.stderr
