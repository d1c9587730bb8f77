"""Launch scripts: options anywhere on the line, dry runs that start and write nothing, and the
Python found without an activated venv (or one line saying what to do); rnn.py and the tools re-run
themselves under the repository's .venv when started by a python3 without TensorFlow."""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO, write_config

DEMOS = REPO / "demos"
VENV_PY = REPO / ".venv" / "bin" / "python"


def _fake(tmp_path: Path, name: str) -> Path:
    """An executable that records that it ran (for 'nothing was started' checks)."""
    marker = tmp_path / ("%s.ran" % name)
    path = tmp_path / name
    path.write_text("#!/bin/sh\necho \"$@\" > %s\n" % shlex.quote(str(marker)))
    path.chmod(0o755)
    return path


def _run(script: str, args, env=None, cwd=REPO) -> subprocess.CompletedProcess:
    full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp")}
    full_env.update(env or {})
    return subprocess.run(["bash", str(DEMOS / script)] + [str(a) for a in args], cwd=str(cwd), env=full_env,
                          capture_output=True, text=True, timeout=120)


LAUNCHERS = {  # script -> (launcher env var, extra env)
    "launch-mpirun.sh": ("MPIRUN", {}),
    "launch-horovodrun.sh": ("HOROVODRUN", {}),
    "launch-slurm.sbatch": ("SRUN", {"SLURM_NTASKS": "2"}),
    "launch-sge.qsub": ("MPIRUN", {"NSLOTS": "2"}),
}


@pytest.mark.parametrize("script", sorted(LAUNCHERS))
def test_options_anywhere_and_dry_run_starts_nothing(script, tmp_path):
    var, extra = LAUNCHERS[script]
    fake = _fake(tmp_path, "launcher")
    env = dict(extra, **{var: str(fake), "PYTHON": "py"})
    lines = set()
    for args in (["--dry-run", "-n", "2", "c.config", "++num_epochs", "1"],
                 ["c.config", "++num_epochs", "1", "--dry-run", "-n", "2"],
                 ["-n", "2", "c.config", "--dry-run", "++num_epochs", "1"],
                 ["c.config", "-n=2", "++num_epochs=1", "--dry-run"]):
        proc = _run(script, args, env)
        assert proc.returncode == 0, (args, proc.stderr)
        assert not (tmp_path / "launcher.ran").exists(), "a dry run started %s" % var
        line = proc.stdout.replace("++num_epochs=1", "++num_epochs 1")
        words = shlex.split(line)
        assert words[0] == str(fake) and "--dry-run" not in words, proc.stdout
        assert words[words.index("py") + 2:] == ["c.config", "++use_horovod", "1", "++num_epochs", "1"]
        lines.add(line)
    assert len(lines) == 1, lines  # the same command wherever the options are
    proc = _run(script, ["c.config", "--frobnicate"], env)
    assert proc.returncode == 2 and "unknown option --frobnicate" in proc.stderr
    assert not (tmp_path / "launcher.ran").exists()


def test_slurm_dry_run_after_config_runs_no_srun(tmp_path):
    """The issue's case: `launch-slurm.sbatch CONFIG --dry-run` ran srun."""
    fake = _fake(tmp_path, "srun")
    proc = _run("launch-slurm.sbatch", ["demos/demo-tf-lstm.12ax.config", "--dry-run"],
                {"SRUN": str(fake), "SLURM_NTASKS": "4"})
    assert proc.returncode == 0 and proc.stdout.startswith(str(fake) + " ")
    assert not (tmp_path / "srun.ran").exists()


@pytest.mark.parametrize("order", ["before", "after"])
def test_horovod_demo_dry_run_writes_nothing(order, tmp_path):
    demo_dir = tmp_path / "demo"
    fake = _fake(tmp_path, "mpirun")
    args = ["--dry-run", "-n", "2", "++num_epochs", "1"]
    if order == "after":
        args = ["++num_epochs", "1", "-n", "2", "--dry-run"]
    proc = _run("run-horovod-demo.sh", args, {"RETURNN_DEMO_DIR": str(demo_dir), "MPIRUN": str(fake)})
    assert proc.returncode == 0, proc.stderr
    assert not demo_dir.exists() and not (tmp_path / "mpirun.ran").exists()
    lines = proc.stdout.splitlines()
    assert len(lines) == 3 and all("tools/hdf_dump.py" in line for line in lines[:2])
    assert str(demo_dir / "12ax.train.hdf") in lines[0]
    words = shlex.split(lines[2])
    assert words[:3] == [str(fake), "-np", "2"] and words[-2:] == ["++num_epochs", "1"]


def test_hdf_demo_dry_run_writes_nothing(tmp_path):
    demo_dir = tmp_path / "demo"
    proc = _run("run-hdf-demo.sh", ["++num_epochs", "1", "--dry-run"], {"RETURNN_DEMO_DIR": str(demo_dir)})
    assert proc.returncode == 0, proc.stderr
    assert not demo_dir.exists()
    assert shlex.split(proc.stdout.splitlines()[-1])[1:] == ["rnn.py", "demos/demo-tf-lstm.12ax-hdf.config",
                                                             "++num_epochs", "1"]
    assert _run("run-hdf-demo.sh", ["--bogus"]).returncode == 2


def test_hdf_demo_trains_from_the_files_it_dumps(tmp_path):
    """The second half of `make demo`, for real on small files (the script keeps existing ones): the
    config's data description must match what tools/hdf_dump.py writes (12AX: one-hot frames, dense).
    It said [9, 1] (sparse) and `make demo` failed with 'config num_inputs says sparse'."""
    demo_dir = tmp_path / "demo"
    demo_dir.mkdir()
    for name, seed in (("train", 11), ("dev", 12)):
        dump = subprocess.run([sys.executable, "tools/hdf_dump.py", "{'class': 'Task12AXDataset', 'num_seqs': 20, "
                               "'fixed_random_seed': %i}" % seed, str(demo_dir / ("12ax.%s.hdf" % name))],
                              cwd=str(REPO), capture_output=True, text=True, timeout=120)
        assert dump.returncode == 0, dump.stderr
    proc = _run("run-hdf-demo.sh", ["++num_epochs", "1"], {"RETURNN_DEMO_DIR": str(demo_dir),
                                                           "PYTHON": sys.executable})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert (demo_dir / "model.001.index").exists()


@pytest.mark.skipif(not VENV_PY.exists(), reason="needs the repository's .venv")
def test_launcher_finds_the_repository_venv(tmp_path):
    """No PYTHON, no activated venv, started from elsewhere: the ranks get the repository's .venv."""
    env = {"PATH": "/usr/bin:/bin"}
    proc = _run("launch-mpirun.sh", ["-n", "1", "c.config", "--dry-run"], env, cwd=tmp_path)
    words = shlex.split(proc.stdout)
    assert words[words.index(str(REPO / "rnn.py")) - 1] == str(VENV_PY)


def test_launcher_without_any_tensorflow_says_what_to_do(tmp_path):
    """A copy of the repository without .venv, and a python3 without TensorFlow."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "python3").write_text("#!/bin/sh\nexit 1\n")
    (fake_bin / "python3").chmod(0o755)
    repo = tmp_path / "repo"
    (repo / "demos").mkdir(parents=True)
    for name in ("launch-mpirun.sh", "launch-common.sh"):
        (repo / "demos" / name).write_text((DEMOS / name).read_text())
    (repo / "rnn.py").write_text("")
    fake = _fake(tmp_path, "mpirun")
    env = {"PATH": "%s:/usr/bin:/bin" % fake_bin, "MPIRUN": str(fake)}
    proc = subprocess.run(["bash", str(repo / "demos" / "launch-mpirun.sh"), "-n", "1", "c.config"], cwd=str(repo),
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and not (tmp_path / "mpirun.ran").exists()
    assert proc.stderr.count("\n") == 1 and "run 'make setup'" in proc.stderr and "PYTHON=" in proc.stderr
    proc = subprocess.run(["bash", str(repo / "demos" / "launch-mpirun.sh"), "-n", "1", "c.config", "--dry-run"],
                          cwd=str(repo), env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "warning" in proc.stderr and " python3 " in proc.stdout


def _python_without_tensorflow() -> str:
    base = os.path.join(sys.base_prefix, "bin", "python3")
    probe = subprocess.run([base, "-c", "import importlib.util as u; print(u.find_spec('tensorflow') is None)"],
                           capture_output=True, text=True)
    if probe.stdout.strip() != "True":
        pytest.skip("the base interpreter has TensorFlow")
    return base


@pytest.mark.skipif(not VENV_PY.exists(), reason="needs the repository's .venv")
def test_rnn_py_reruns_under_the_venv(tmp_path):
    python = _python_without_tensorflow()
    cfg = write_config(tmp_path / "c.config", "import sys\nprint('PREFIX', sys.prefix)\ntask = 'forward'\n")
    env = {k: v for k, v in os.environ.items() if k != "RETURNN_VENV_REEXEC"}
    proc = subprocess.run([python, str(REPO / "rnn.py"), str(cfg)], cwd=str(tmp_path), env=env,
                          capture_output=True, text=True, timeout=300)
    assert "PREFIX %s" % (REPO / ".venv") in proc.stdout, proc.stderr
    assert proc.returncode == 2 and "needs an 'eval' dataset" in proc.stderr
    # without a venv to go to: one line saying what to do
    proc = subprocess.run([python, str(REPO / "tools" / "inspect-checkpoint.py"), "x"], cwd=str(tmp_path),
                          env=dict(env, RETURNN_VENV_REEXEC="1"), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "tensorflow" in proc.stderr and "run 'make setup'" in proc.stderr
