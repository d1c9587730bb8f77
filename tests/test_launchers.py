"""The launch scripts in demos/: --dry-run output with fake SGE/SLURM environments, and one real mpirun."""
from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from typing import Dict, List, Optional

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMOS = os.path.join(ROOT, "demos")
SCRIPTS = ["launch-mpirun.sh", "launch-sge.qsub", "launch-slurm.sbatch", "launch-horovodrun.sh"]
AS_ROOT = ["--allow-run-as-root"] if os.geteuid() == 0 else []
CORES = len(os.sched_getaffinity(0))
HOROVOD_EXPORTS = ["-bind-to", "none", "-map-by", "slot", "-x", "NCCL_DEBUG=INFO", "-x", "PATH"]
MCA = ["-mca", "pml", "ob1", "-mca", "btl", "^openib"]
# Without PYTHON the scripts use the repository's .venv (absolute path), else python3.
_VENV_PY = os.path.join(ROOT, ".venv", "bin", "python")
PY = _VENV_PY if os.path.exists(_VENV_PY) else "python3"
# Added when several hosts take part: mpirun gives up on a silent node after about 120 s.
KEEPALIVE_120 = " -mca oob_tcp_keepalive_time 60 -mca oob_tcp_keepalive_intvl 20 -mca oob_tcp_keepalive_probes 3"


def run_script(name: str, args: List[str], env: Optional[Dict[str, str]] = None,
               check: bool = True) -> subprocess.CompletedProcess:
    """Runs a launch script from the repository root with a minimal environment plus ``env``."""
    full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp")}
    full_env.update(env or {})
    proc = subprocess.run(["bash", os.path.join(DEMOS, name)] + args, cwd=ROOT, env=full_env,
                          capture_output=True, text=True, timeout=60)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def dry_run(name: str, args: List[str], env: Optional[Dict[str, str]] = None) -> List[str]:
    """The command a script would run, split into words; checks it is exactly one line."""
    out = run_script(name, ["--dry-run"] + args, env).stdout
    assert out.count("\n") == 1, out
    return shlex.split(out)


@pytest.mark.parametrize("name", SCRIPTS)
def test_syntax_help_and_executable(name):
    path = os.path.join(DEMOS, name)
    assert os.access(path, os.X_OK)
    subprocess.run(["bash", "-n", path], check=True, timeout=30)
    assert "CONFIG" in run_script(name, ["--help"]).stdout


@pytest.mark.parametrize("name", SCRIPTS)
def test_missing_config_or_bad_option_fails(name):
    env = {"NSLOTS": "2", "SLURM_NTASKS": "2"}
    assert run_script(name, ["--dry-run"], env, check=False).returncode == 2
    assert run_script(name, ["--bogus", "c.config"], env, check=False).returncode == 2


def test_mpirun_exact_command():
    out = run_script("launch-mpirun.sh", ["--dry-run", "-n", "2", "demos/x.config", "++num_epochs", "3"]).stdout
    expected = ["mpirun -np 2 -bind-to none -map-by slot -x NCCL_DEBUG=INFO -x PATH -mca pml ob1 -mca btl ^openib"]
    expected += AS_ROOT + (["--oversubscribe"] if 2 > CORES else [])
    expected += [PY + " rnn.py demos/x.config ++use_horovod 1 ++num_epochs 3\n"]
    assert out == " ".join(expected)


def test_mpirun_oversubscribe_exports_and_quoting():
    env = {"LD_LIBRARY_PATH": "/opt/cuda/lib64", "PYTHON": "/venv/bin/python", "NCCL_DEBUG": "WARN",
           "MPI_EXPORT": "HOROVOD_TIMELINE", "MPIRUN_ARGS": "--tag-output"}
    words = dry_run("launch-mpirun.sh", ["--np", str(CORES + 1), "my config", "++learning_rate", "0.1",
                                         "++model", "it's"], env)
    assert words == (["mpirun", "-np", str(CORES + 1), "-bind-to", "none", "-map-by", "slot",
                      "-x", "NCCL_DEBUG=WARN", "-x", "LD_LIBRARY_PATH", "-x", "PATH", "-x", "HOROVOD_TIMELINE"]
                     + MCA + AS_ROOT + ["--oversubscribe", "--tag-output", "/venv/bin/python", "rnn.py", "my config",
                                        "++use_horovod", "1", "++learning_rate", "0.1", "++model", "it's"])


def test_mpirun_np_env_hosts_and_single_rank():
    words = dry_run("launch-mpirun.sh", ["c.config"], {"NP": "1", "MPI_BTL": "tcp,self"})
    assert words == (["mpirun", "-np", "1"] + HOROVOD_EXPORTS + ["-mca", "pml", "ob1", "-mca", "btl", "tcp,self"]
                     + AS_ROOT + [PY, "rnn.py", "c.config", "++use_horovod", "1"])
    words = dry_run("launch-mpirun.sh", ["-n", "64", "-H", "a:32,b:32", "c.config"])
    assert words[:5] == ["mpirun", "-np", "64", "-H", "a:32,b:32"]
    assert "--oversubscribe" not in words  # the host list says where the slots are
    # without -n, a host list gives the number of ranks (the sum of its slots; a bare host is one slot)
    assert dry_run("launch-mpirun.sh", ["-H", "a:3,b:2,c", "c.config"])[:3] == ["mpirun", "-np", "6"]
    assert run_script("launch-mpirun.sh", ["--dry-run", "-H", "a:x", "c"], check=False).returncode == 2
    assert run_script("launch-mpirun.sh", ["--dry-run", "-n", "zero", "c"], check=False).returncode == 2


def test_network_interface_and_keepalive_options(pe_hostfile):
    """MPI_IFACE picks the network for MPI's data and control traffic (and NCCL's when it is a name);
    with several hosts mpirun gets TCP keepalive on its control connections (MPI_KEEPALIVE seconds)."""
    words = dry_run("launch-mpirun.sh", ["-H", "a:1,b:1", "c.config"], {"MPI_IFACE": "eth1", "MPI_KEEPALIVE": "30"})
    assert " ".join(words).count(" -mca ") == 7
    assert ("-mca btl_tcp_if_include eth1 -mca oob_tcp_if_include eth1 -x NCCL_SOCKET_IFNAME=eth1"
            " -mca oob_tcp_keepalive_time 15 -mca oob_tcp_keepalive_intvl 5 -mca oob_tcp_keepalive_probes 3"
            in " ".join(words))
    words = dry_run("launch-sge.qsub", ["c.config"], {"PE_HOSTFILE": pe_hostfile, "NSLOTS": "8",
                                                      "MPI_IFACE": "10.1.0.0/16", "MPI_KEEPALIVE": "0"})
    assert "-mca btl_tcp_if_include 10.1.0.0/16 -mca oob_tcp_if_include 10.1.0.0/16 " in " ".join(words)
    assert not any("NCCL_SOCKET_IFNAME" in w or "keepalive" in w for w in words)  # a subnet is no NCCL name
    for name in ("launch-mpirun.sh", "launch-sge.qsub"):
        for var in ("MPI_KEEPALIVE", "MPI_TEARDOWN_GRACE"):
            proc = run_script(name, ["-H", "a:1,b:1", "c.config"] if name == "launch-mpirun.sh" else ["c.config"],
                              {var: "soon", "PE_HOSTFILE": pe_hostfile, "NSLOTS": "8", "MPIRUN": "true"},
                              check=False)
            assert proc.returncode == 2 and var in proc.stderr, (name, var, proc.stderr)


def test_teardown_watchdog_ends_mpirun_that_outlives_its_ranks(tmp_path):
    """A stand-in mpirun whose one local "rank" (a child with OMPI_COMM_WORLD_RANK) ends at once while
    mpirun itself would wait 60 s (as for a lost node's daemon): the script ends it after the grace."""
    fake = tmp_path / "mpirun"
    fake.write_text("#!/bin/bash\nOMPI_COMM_WORLD_RANK=0 sleep 1 &\nwait $!\nexec sleep 60\n")
    fake.chmod(0o755)
    start = time.monotonic()
    proc = run_script("launch-mpirun.sh", ["-n", "1", "c.config"], {"MPIRUN": str(fake), "MPI_TEARDOWN_GRACE": "2"},
                      check=False)
    took = time.monotonic() - start
    assert proc.returncode != 0 and took < 20, (proc.returncode, took, proc.stderr)
    assert "mpirun still runs 2 s after the last rank on" in proc.stderr
    # a normal end is not delayed, and mpirun's exit status is the script's
    fake.write_text("#!/bin/bash\nOMPI_COMM_WORLD_RANK=0 sleep 1 &\nwait $!\nexit 3\n")
    start = time.monotonic()
    proc = run_script("launch-mpirun.sh", ["-n", "1", "c.config"], {"MPIRUN": str(fake)}, check=False)
    assert proc.returncode == 3 and time.monotonic() - start < 10 and "still runs" not in proc.stderr


def test_signal_to_the_scripts_process_group_reaches_mpirun_once(tmp_path):
    """SGE and terminals signal the whole process group: mpirun (own group) gets it once, via the
    script's trap (twice would make mpirun abort at once instead of letting the ranks save)."""
    fake = tmp_path / "mpirun"
    fake.write_text("#!/bin/bash\nn=0\ntrap 'n=$((n+1))' USR1\nOMPI_COMM_WORLD_RANK=0 sleep 5 &\n"
                    "while ! wait $!; do :; done\necho $n > %s\n" % (tmp_path / "count"))
    fake.chmod(0o755)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "MPIRUN": str(fake)}
    proc = subprocess.Popen(["bash", os.path.join(DEMOS, "launch-mpirun.sh"), "-n", "1", "c.config"], cwd=ROOT,
                            env=env, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 20
    while not any("OMPI_COMM_WORLD_RANK=0" in _environ(p) for p in _children_of_children(proc.pid)):
        assert time.monotonic() < deadline, "the fake mpirun's rank never started"
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGUSR1)
    proc.communicate(timeout=30)
    assert proc.returncode == 0 and (tmp_path / "count").read_text().strip() == "1"


def _environ(pid: str) -> str:
    try:
        with open("/proc/%s/environ" % pid, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _children_of_children(pid: int) -> List[str]:
    out = subprocess.run(["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True).stdout.split()
    parent = dict(zip(out[0::2], out[1::2]))
    kids = {p for p, pp in parent.items() if pp == str(pid)}
    return [p for p, pp in parent.items() if pp in kids]


def test_rnn_path_outside_repo(tmp_path):
    proc = subprocess.run(["bash", os.path.join(DEMOS, "launch-mpirun.sh"), "--dry-run", "-n", "1", "c"],
                          cwd=str(tmp_path), capture_output=True, text=True, timeout=60, check=True)
    assert os.path.join(ROOT, "rnn.py") in shlex.split(proc.stdout)
    words = dry_run("launch-horovodrun.sh", ["-n", "1", "c"], {"RNN": "/opt/returnn/rnn.py"})
    assert words[-4:] == ["/opt/returnn/rnn.py", "c", "++use_horovod", "1"]


@pytest.fixture
def pe_hostfile(tmp_path):
    path = tmp_path / "pe_hostfile"
    path.write_text("nodeA 4 all.q@nodeA UNDEFINED\nnodeB 4 all.q@nodeB UNDEFINED\n")
    return str(path)


def test_sge_host_list_from_pe_hostfile(pe_hostfile):
    env = {"PE_HOSTFILE": pe_hostfile, "NSLOTS": "8"}
    out = run_script("launch-sge.qsub", ["--dry-run", "demos/x.config", "++batch_size", "5000"], env).stdout
    expected = ["mpirun -np 8 -H nodeA:4,nodeB:4 -bind-to none -map-by slot -x NCCL_DEBUG=INFO -x PATH"
                " -mca pml ob1 -mca btl ^openib" + KEEPALIVE_120] + AS_ROOT
    expected += [PY + " rnn.py demos/x.config ++use_horovod 1 ++batch_size 5000\n"]
    assert out == " ".join(expected)
    # DRY_RUN=1 in the environment works like --dry-run (qsub passes no options to the script)
    env["DRY_RUN"] = "1"
    assert run_script("launch-sge.qsub", ["demos/x.config", "++batch_size", "5000"], env).stdout == out


def test_sge_hostfile_mode_merged_hosts_and_np(tmp_path):
    pe = tmp_path / "pe"
    pe.write_text("nodeA 2 a.q@nodeA UNDEFINED\nnodeB 4 all.q@nodeB UNDEFINED\nnodeA 2 b.q@nodeA UNDEFINED")
    env = {"PE_HOSTFILE": str(pe), "NSLOTS": "8", "TMPDIR": str(tmp_path), "JOB_ID": "42", "PYTHON": "py"}
    words = dry_run("launch-sge.qsub", ["--hostfile", "c.config"], env)
    hostfile = str(tmp_path / "mpi-hosts.42")
    assert words[:5] == ["mpirun", "-np", "8", "-hostfile", hostfile]
    assert words[-5:] == ["py", "rnn.py", "c.config", "++use_horovod", "1"]
    assert not os.path.exists(hostfile)  # a dry run writes nothing; it shows the content on stderr
    proc = run_script("launch-sge.qsub", ["--hostfile", "--dry-run", "c.config"], env)
    assert proc.stderr == "launch-sge: dry run: %s would hold:\nnodeA slots=4\nnodeB slots=4\n" % hostfile
    fake_mpirun = tmp_path / "fake-mpirun"
    fake_mpirun.write_text("#!/bin/sh\necho ran \"$@\"\n")
    fake_mpirun.chmod(0o755)
    run_script("launch-sge.qsub", ["--hostfile", "c.config"], dict(env, MPIRUN=str(fake_mpirun)))
    with open(hostfile) as f:
        assert f.read() == "nodeA slots=4\nnodeB slots=4\n"
    words = dry_run("launch-sge.qsub", ["-n", "6", "c.config"], env)
    assert words[:5] == ["mpirun", "-np", "6", "-H", "nodeA:4,nodeB:4"]


def test_sge_without_slots_fails_and_without_pe_hostfile_runs_locally():
    proc = run_script("launch-sge.qsub", ["c.config"], check=False)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "not inside a Grid Engine parallel-environment job" in proc.stderr and "-n N" in proc.stderr
    words = dry_run("launch-sge.qsub", ["c.config"], {"NSLOTS": "2"})
    assert words[:3] == ["mpirun", "-np", "2"] and "-H" not in words


def test_sge_dry_run_outside_a_job_shows_the_scripts_own_request():
    """Outside a parallel environment the dry run prints what the job would run: the slots of the
    script's '#$ -pe mpi 4' line, on this host (one note on stderr saying so), exit 0."""
    proc = run_script("launch-sge.qsub", ["--dry-run", "c.config"])
    words = shlex.split(proc.stdout)
    assert words[:3] == ["mpirun", "-np", "4"] and "-H" not in words, proc.stdout
    assert ("--oversubscribe" in words) == (CORES < 4)
    assert proc.stderr.count("\n") == 1 and "dry run outside a Grid Engine job" in proc.stderr, proc.stderr
    assert "running on this host only" not in proc.stderr


def test_sge_directives():
    with open(os.path.join(DEMOS, "launch-sge.qsub")) as f:
        text = f.read()
    for line in ("#$ -pe mpi ", "#$ -l h_vmem=", "#$ -cwd\n", "#$ -j y\n"):
        assert line in text
    assert "gpu=1" in text and "h_rt=" in text


SLURM_ENV = {"SLURM_NTASKS": "4", "SLURM_JOB_NODELIST": "node[01-02]", "SLURM_NTASKS_PER_NODE": "2"}


def test_slurm_exact_command():
    out = run_script("launch-slurm.sbatch", ["--dry-run", "demos/x.config", "++num_epochs", "2"], SLURM_ENV).stdout
    assert out == ("srun --mpi=pmix --kill-on-bad-exit=1 --ntasks=4 --ntasks-per-node=2 '--nodelist=node[01-02]'"
                   " %s rnn.py demos/x.config ++use_horovod 1 ++num_epochs 2\n" % PY)


def test_slurm_overrides_and_errors():
    env = dict(SLURM_ENV, SRUN_MPI="pmi2", PYTHON="/venv/bin/python", SRUN_ARGS="--cpu-bind=none")
    words = dry_run("launch-slurm.sbatch", ["-n", "2", "c.config", "++a", "b"], env)
    assert words == ["srun", "--mpi=pmi2", "--kill-on-bad-exit=1", "--ntasks=2", "--ntasks-per-node=2",
                     "--nodelist=node[01-02]", "--cpu-bind=none", "/venv/bin/python", "rnn.py", "c.config",
                     "++use_horovod", "1", "++a", "b"]
    words = dry_run("launch-slurm.sbatch", ["-n", "3", "c.config"], {"SRUN_MPI": "none"})
    assert words == ["srun", "--kill-on-bad-exit=1", "--ntasks=3", PY, "rnn.py", "c.config",
                     "++use_horovod", "1"]
    proc = run_script("launch-slurm.sbatch", ["c.config"], check=False)
    assert proc.returncode == 2 and "SLURM_NTASKS" in proc.stderr
    # a dry run outside an allocation: what the script's own #SBATCH lines ask for
    proc = run_script("launch-slurm.sbatch", ["--dry-run", "c.config"])
    assert shlex.split(proc.stdout) == ["srun", "--mpi=pmix", "--kill-on-bad-exit=1", "--ntasks=4",
                                        "--ntasks-per-node=1", PY, "rnn.py", "c.config", "++use_horovod", "1"]
    assert proc.stderr.count("\n") == 1 and "dry run outside a SLURM allocation" in proc.stderr
    with open(os.path.join(DEMOS, "launch-slurm.sbatch")) as f:
        text = f.read()
    assert "#SBATCH --ntasks=" in text and "#SBATCH --gres=gpu:1" in text


def test_horovodrun_commands():
    out = run_script("launch-horovodrun.sh", ["--dry-run", "-n", "2", "c.config", "++x", "1"]).stdout
    assert out == "horovodrun -np 2 -H localhost:2 %s rnn.py c.config ++use_horovod 1 ++x 1\n" % PY
    words = dry_run("launch-horovodrun.sh", ["-H", "server1:4,server2:4", "c.config"],
                    {"HOROVODRUN_ARGS": "--verbose"})
    assert words == ["horovodrun", "-np", "8", "-H", "server1:4,server2:4", "--verbose", PY, "rnn.py",
                     "c.config", "++use_horovod", "1"]
    words = dry_run("launch-horovodrun.sh", ["-n", "3", "--hostfile", "hosts.txt", "c.config"])
    assert words[:5] == ["horovodrun", "-np", "3", "--hostfile", "hosts.txt"]


def test_mpirun_script_really_launches(tmp_path):
    """Without --dry-run the script execs mpirun: two ranks of a stand-in for rnn.py report their argv."""
    fake_rnn = tmp_path / "fake_rnn.py"
    fake_rnn.write_text("import os, sys\nprint('rank', os.environ['OMPI_COMM_WORLD_RANK'], sys.argv[1:])\n")
    env = {"PYTHON": sys.executable, "RNN": str(fake_rnn), "MPI_BTL": "tcp,self",
           "MPIRUN_ARGS": "--oversubscribe"}
    proc = run_script("launch-mpirun.sh", ["-n", "2", "c.config", "++x", "1"], env)
    lines = sorted(line for line in proc.stdout.splitlines() if line.startswith("rank"))
    assert lines == ["rank %i ['c.config', '++use_horovod', '1', '++x', '1']" % r for r in (0, 1)]
