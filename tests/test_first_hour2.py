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


# ---------------------------------------------------------------- 3. --help-keys finds keys by meaning

def _help_keys(pattern: str) -> str:
    from returnn.config_keys.docs import help_keys_text
    return help_keys_text(pattern)


def _listed(text: str) -> set:
    return {line.split()[0] for line in text.splitlines() if line.startswith("  ")}


@pytest.mark.parametrize("pattern, expected", [
    ("lr", {"learning_rate", "learning_rates", "learning_rate_control", "min_learning_rate", "horovod_scale_lr"}),
    ("learning rate", {"learning_rate", "learning_rate_file"}),
    ("seq", {"max_seqs", "max_seq_length", "batching"}),
    ("dim", {"num_inputs", "num_outputs", "extern_data"}),
    ("num", {"num_epochs", "num_inputs", "max_seqs"}),
    ("bs", {"batch_size", "eval_batch_size"}),
    ("epochs", {"num_epochs", "load_epoch", "start_epoch"}),
    ("checkpoint", {"model", "load", "save_interval", "cleanup_old_models"}),
    ("truncation", {"truncation"}),  # a RETURNN key this engine does not read
    ("debug_print", {"debug_print_layer_output_template"}),
    ("horovod_*", {"horovod_reduce_type", "horovod_scale_lr"}),
])
def test_help_keys_searches_names_abbreviations_and_descriptions(pattern, expected):
    listed = _listed(_help_keys(pattern))
    assert expected <= listed, (pattern, sorted(expected - listed))


def test_help_keys_without_match_and_command_line():
    assert _help_keys("zzqx") == "no config key matches 'zzqx'"
    assert "L2_reg" not in _listed(_help_keys("lr"))  # initials only of word parts: L2_reg is no "lr"
    from helpers import run_rnn
    proc = run_rnn(["--help-keys", "lr"])
    assert proc.returncode == 0 and "  learning_rate " in proc.stdout, proc.stderr


# ---------------------------------------------------------------- 4. RETURNN's keys, and what is no typo

def test_every_returnn_key_is_known():
    """Every key RETURNN's source reads (and its Theano-era demo keys) is declared here or listed with
    what this engine does about it: never 'the config's own variable?', never a typo."""
    from returnn import config_keys
    from returnn.config_keys.returnn_keys import RETURNN_OLD_KEYS, RETURNN_SOURCE_KEYS
    assert len(RETURNN_SOURCE_KEYS) > 250
    assert not [k for k in sorted(RETURNN_SOURCE_KEYS | RETURNN_OLD_KEYS) if not config_keys.is_known(k)]
    for name in ("truncation", "debug_print_layer_output_template", "learning_rate", "param_variational_noise"):
        assert config_keys.is_known(name)


@pytest.mark.skipif(not os.path.isdir(os.environ.get("RETURNN_SRC", "/tmp/rsrc/returnn")),
                    reason="RETURNN's source not here (RETURNN_SRC=.../returnn)")
def test_returnn_source_keys_are_the_keys_returnn_reads():
    src = os.environ.get("RETURNN_SRC", "/tmp/rsrc/returnn")
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "returnn-config-keys.py"), src, "--check"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_config_own_functions_classes_modules_and_underscore_names_are_no_typos():
    import types
    from returnn.config_keys.check import unknown_keys

    def pretrain_construct(idx, net_dict):  # a config's own function, close to pretrain_construction_algo
        return net_dict

    class Pretrain_construct:
        pass

    entries = {"pretrain_construct": pretrain_construct, "Pretrain_construct": Pretrain_construct,
               "learning_rat": 0.1, "_learning_rat": 0.1, "netwrok": {"output": {}}, "demo_name": "x",
               "num_epoch": 2, "learning_rates_module": types.ModuleType("x"), "truncation": -1,
               "debug_print_layer_output_template": True, "truncaton": 5, "my_helper": object()}
    warnings, own = unknown_keys(entries, ["num_epoch"])
    assert warnings == [
        "config key 'learning_rat' is unknown; did you mean learning_rate? (rnn.py --help-keys lists all keys)",
        "config key 'netwrok' is unknown; did you mean network? (rnn.py --help-keys lists all keys)",
        "++num_epoch (command line) is unknown; did you mean num_epochs? (rnn.py --help-keys lists all keys)",
        "config key 'truncaton' is unknown; did you mean truncation? (rnn.py --help-keys lists all keys)"]
    assert own == ["demo_name"]


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO / "demos").glob("*.config")))
def test_the_projects_demos_set_only_known_keys(name):
    from returnn.config import load_config_from_args
    from returnn.config_keys.check import unknown_keys
    config = load_config_from_args([str(REPO / "demos" / name)])
    assert unknown_keys(config.typed_dict, config.cmdline_keys) == ([], [])
