"""First hour, part 2: messages that tell the truth. The set-up script names an interpreter that
cannot run; ``python3 rnn.py --version`` and ``mpirun ... python3 tools/check-distributed.py`` (a
``python3`` without TensorFlow) re-run under the repository's .venv, and without one still report."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from helpers import MPIRUN_AS_ROOT, REPO, child_env

VENV_PY = REPO / ".venv" / "bin" / "python"


def _python_without_tensorflow() -> str:
    base = os.path.join(sys.base_prefix, "bin", "python3")
    probe = subprocess.run([base, "-c", "import importlib.util as u; print(u.find_spec('tensorflow') is None "
                                        "and u.find_spec('mpi4py') is None)"], capture_output=True, text=True)
    if probe.stdout.strip() != "True":
        pytest.skip("the base interpreter has TensorFlow or mpi4py")
    return base


def _env_without_reexec_guard(**extra) -> dict:
    env = {k: v for k, v in child_env().items() if k != "RETURNN_VENV_REEXEC"}
    env.update(extra)
    return env


# ---------------------------------------------------------------- 6. make setup: an interpreter that cannot run

@pytest.mark.parametrize("kind", ["shim", "no-version"])
def test_setup_names_an_interpreter_that_does_not_run(tmp_path, kind):
    """A pyenv shim of a version that is not selected exists as a command but exits 127: one line
    saying the interpreter does not run (with its own complaint), exit 1, nothing installed."""
    shims = tmp_path / ".pyenv" / "shims"
    shims.mkdir(parents=True)
    fake = shims / "python3.99"
    if kind == "shim":
        fake.write_text("#!/bin/sh\necho 'pyenv: python3.99: command not found' >&2\nexit 127\n")
    else:
        fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    env = dict(os.environ, PATH="%s:%s" % (shims, os.environ["PATH"]), PYTHON="python3.99",
               VENV=str(tmp_path / "venv"))
    proc = subprocess.run(["bash", str(REPO / "tools" / "setup_env.sh")], cwd=str(REPO), env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and proc.stdout == "", (proc.stdout, proc.stderr)
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("[setup] error: 'python3.99' (%s) does not run as Python" % fake)
    if kind == "shim":
        assert "exit 127: pyenv: python3.99: command not found" in proc.stderr and "pyenv shim" in proc.stderr
    else:
        assert "it printed no version" in proc.stderr
    assert not (tmp_path / "venv").exists()


# ---------------------------------------------------------------- 2. python3 without TensorFlow

@pytest.mark.skipif(not VENV_PY.exists(), reason="needs the repository's .venv")
def test_version_reruns_under_the_venv():
    python = _python_without_tensorflow()
    probe = subprocess.run([str(VENV_PY), "-c", "import tensorflow as tf; print(tf.__version__)"],
                           capture_output=True, text=True, env=child_env(), timeout=120)
    tf_version = probe.stdout.strip().splitlines()[-1]
    for args in (["rnn.py", "--version"], ["-m", "returnn", "--version"]):
        proc = subprocess.run([python] + args, cwd=str(REPO), env=_env_without_reexec_guard(),
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert ", TensorFlow %s," % tf_version in proc.stdout and proc.stdout.count("\n") == 1, proc.stdout
    # no venv to go to (the guard says it was tried): the truth about this interpreter
    proc = subprocess.run([python, "rnn.py", "--version"], cwd=str(REPO),
                          env=_env_without_reexec_guard(RETURNN_VENV_REEXEC="1"), capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0 and "TensorFlow not installed" in proc.stdout, proc.stderr


@pytest.mark.skipif(not VENV_PY.exists(), reason="needs the repository's .venv")
def test_check_distributed_under_mpirun_with_python3_reruns_under_the_venv():
    """The documented form `mpirun -np 2 python3 tools/check-distributed.py` with a python3 that has
    neither mpi4py nor TensorFlow: each rank re-runs under .venv (before MPI starts) and the check passes."""
    python = _python_without_tensorflow()
    env = _env_without_reexec_guard(**MPIRUN_AS_ROOT)
    proc = subprocess.run(["mpirun", "-np", "2", "--oversubscribe", "-mca", "btl", "self,tcp", python,
                           "tools/check-distributed.py", "--size-mb", "0.1", "--repeats", "1"],
                          cwd=str(REPO), env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OK: 2 rank(s)" in proc.stdout, proc.stdout


def test_check_distributed_without_packages_reports_instead_of_crashing():
    """Really missing packages (no venv to go to): one PROBLEM line naming what is missing, exit 1, no traceback."""
    python = _python_without_tensorflow()
    proc = subprocess.run([python, "tools/check-distributed.py"], cwd=str(REPO),
                          env=_env_without_reexec_guard(RETURNN_VENV_REEXEC="1"), capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "PROBLEM: rank" in proc.stdout and "mpi4py" in proc.stdout, proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr
