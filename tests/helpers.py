"""Shared helpers for the end-to-end tests: where the repository and its Python are, the environment
of a child process, write a config, run ``rnn.py`` as a subprocess."""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import pytest

REPO = Path(__file__).resolve().parents[1]
HAVE_HOROVOD = importlib.util.find_spec("horovod") is not None
# Distributed backends to test: Horovod where installed (not in the newest-TF environment), mpi4py always.
BACKENDS = [pytest.param("horovod", marks=pytest.mark.skipif(
    not HAVE_HOROVOD, reason="Horovod is not installed (newest-TF environment: mpi4py backend)")), "mpi"]
PYTHON = sys.executable  # the environment running the tests (.venv, or the newest-TF venv of make test-latest-tf)
LAUNCHER_PREFIXES = ("OMPI_", "PMI_", "PMIX_", "SLURM_")
MPIRUN_AS_ROOT = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def child_env(extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """This process's environment for a child: TensorFlow quiet, ``PYTHONWARNINGS`` dropped, and
    without the variables of an outer launcher (a child never looks like a rank of some other
    job); then ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCHER_PREFIXES) and k != "PYTHONWARNINGS"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env.update(extra or {})
    return env


def write_config(path: Path, text: str) -> Path:
    """Writes ``text`` (dedented by the caller) to ``path``; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def run_rnn(args: Sequence[str], module: bool = False, env: Optional[Dict[str, str]] = None,
            timeout: float = 600) -> subprocess.CompletedProcess:
    """Runs ``python rnn.py ARGS`` (or ``python -m returnn ARGS``) in the repo; captures output."""
    cmd: List[str] = [PYTHON] + (["-m", "returnn"] if module else ["rnn.py"]) + [str(a) for a in args]
    return subprocess.run(cmd, cwd=str(REPO), env=child_env(env), capture_output=True, text=True, timeout=timeout)


def train_args(config: Path, tmp_path: Path, *extra: str, model_name: str = "model") -> List[str]:
    """``config ++model ... ++learning_rate_file ... ++log ...`` under ``tmp_path``."""
    return [str(config), "++model", str(tmp_path / model_name), "++learning_rate_file",
            str(tmp_path / (model_name + ".lr.data")), "++log", str(tmp_path / (model_name + ".log"))] + list(extra)


def nonempty_lines(text: str) -> List[str]:
    return [line for line in text.splitlines() if line.strip()]


def describe(proc: subprocess.CompletedProcess) -> str:
    """Output of a finished run, for assertion messages."""
    return "exit code %s\n--- stdout\n%s\n--- stderr\n%s" % (proc.returncode, proc.stdout[-4000:], proc.stderr[-4000:])


def lines_matching(pattern: str, text: str) -> List[re.Match]:
    """All full-line matches of ``pattern`` in ``text``."""
    rx = re.compile(pattern)
    return [m for m in (rx.fullmatch(line.strip()) for line in text.splitlines()) if m]


# A tiny 12AX setup: feed-forward net (fast to trace), few sequences.
def config_12ax(network: str, num_epochs: int = 2, head: str = "", num_seqs: int = 40) -> str:
    """A small 12AX training config (Task12AXDataset train and dev, adam) around ``network``, the
    text of a layer dict; ``head``: config code before it (imports, functions)."""
    return ("#!rnn.py\n%s\ntask = \"train\"\ntrain = {\"class\": \"Task12AXDataset\", \"num_seqs\": %i}\n"
            "dev = {\"class\": \"Task12AXDataset\", \"num_seqs\": 10, \"fixed_random_seed\": 2}\n"
            "num_inputs = 9\nnum_outputs = 2\nbatch_size = 400\nmax_seqs = 10\nnetwork = %s\n"
            "adam = True\nlearning_rate = 0.01\nnum_epochs = %i\n" % (head, num_seqs, network.strip(), num_epochs))


TINY_12AX = '''#!rnn.py
task = "train"
train = {"class": "Task12AXDataset", "num_seqs": 40}
dev = {"class": "Task12AXDataset", "num_seqs": 10, "fixed_random_seed": 1}
batching = "random"
batch_size = 400
max_seqs = 8
network = {
    "hidden": {"class": "linear", "activation": "tanh", "n_out": 8, "from": ["data"]},
    "output": {"class": "softmax", "loss": "ce", "from": ["hidden"], "dropout": 0.3},
}
adam = True
learning_rate = 0.01
num_epochs = 2
tf_session_opts = {"intra_op_parallelism_threads": 1, "inter_op_parallelism_threads": 1}
log_verbosity = 3
'''


def assert_one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> str:
    """Exit code 2, exactly one non-empty stderr line ``ERROR: ...`` holding all ``needles``, no
    traceback; returns the line."""
    lines = nonempty_lines(proc.stderr)
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("ERROR: "), describe(proc)
    assert "Traceback" not in proc.stderr + proc.stdout, describe(proc)
    for needle in needles:
        assert needle in lines[0], "%r not in %r" % (needle, lines[0])
    return lines[0]


def outputs(layers: dict, *rec_sub_layers: str) -> dict:
    """``layers`` with every top-level layer marked ``is_output_layer`` (and the sub-layers
    ``"rec/sub"`` of rec units), so a test may read them all: RETURNN (and this engine) builds
    only output, loss and is_output_layer layers and what they need."""
    out = {name: dict(opts, is_output_layer=True) for name, opts in layers.items()}
    for ref in rec_sub_layers:
        rec, sub = ref.split("/", 1)
        unit = dict(out[rec]["unit"])
        unit[sub] = dict(unit[sub], is_output_layer=True)
        out[rec] = dict(out[rec], unit=unit)
    return out
