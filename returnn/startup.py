"""What ``rnn.py`` prints before any work: ``--help``, ``--version`` and the start-up banner."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from importlib import metadata
from typing import List, Optional, Tuple

import returnn
from returnn.cmdline_flags import flag_help_lines

USAGE = "usage: rnn.py CONFIG [CONFIG2 ...] [++key value ...]"

HELP = USAGE + """
       rnn.py --help-keys [PATTERN] | --version | --check-distributed

Trains, evaluates or forwards a network as a RETURNN config describes (task = train | eval | forward).
Re-running the same training command resumes from the newest checkpoint.

arguments:
  CONFIG                 a Python config (RETURNN style: module-level variables) or a JSON file;
                         later files override earlier ones
  ++key value            set a config key after loading (or ++key=value); typed like the key:
                         ++num_epochs 3, ++learning_rate 1e-3, ++use_horovod true, ++model out/net

options:
  -h, --help             show this help
  --help-keys [PATTERN]  list config keys with type, default and meaning (PATTERN: substring or glob)
  -V, --version          versions of this engine, Python, TensorFlow, Horovod / mpi4py
  --check-distributed    check ranks, GPUs and allreduce of an MPI job (run it under mpirun)
  --config FILE          one more config file
RETURNN's old options set one key each, as ++key value does (--task search, -x search, --task=search):
%s

common keys: task, train, dev, network, num_epochs, batch_size, max_seqs, learning_rate, optimizer,
  learning_rate_control, model, log, log_verbosity (0-5), use_horovod

examples:
  rnn.py demos/demo-tf-lstm.12ax.config ++num_epochs 2 ++model /tmp/run/model
  mpirun -np 2 .venv/bin/python rnn.py CONFIG ++use_horovod 1
  demos/launch-mpirun.sh -n 4 CONFIG --dry-run     (prints the mpirun line it would run)

exit codes: 0 done, 1 runtime failure, 2 bad input (one line naming the file, key or layer),
  128+N after signal N (a resumable state was saved), 130 Ctrl-C.
docs: README.md, docs/running.md, docs/config-keys.md""" % flag_help_lines()


def _dist_version(*names: str) -> Optional[str]:
    """Installed version of the first distribution of ``names`` that is installed."""
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def engine_version() -> str:
    """``0.1.0`` plus the git commit when running from a checkout."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(returnn.__file__)))
    commit = ""
    if os.path.exists(os.path.join(root, ".git")):
        try:
            out = subprocess.run(["git", "-C", root, "log", "-1", "--format=%h %cd", "--date=short"],
                                 capture_output=True, text=True, timeout=5)
            commit = out.stdout.strip() if out.returncode == 0 else ""
        except (OSError, subprocess.SubprocessError):
            commit = ""
    return returnn.__version__ + (" (git %s)" % commit if commit else "")


def versions_line() -> str:
    """One line: this engine, Python, TensorFlow, Horovod and mpi4py versions (nothing imported). A
    ``python3`` without TensorFlow re-runs the command under the repository's ``.venv`` first (as a
    training command does), so ``python3 rnn.py --version`` reports the versions a run would use."""
    from returnn.util.environment import prefer_venv
    prefer_venv(("tensorflow",))
    tf_version = _dist_version("tensorflow", "tensorflow-cpu", "tensorflow-macos", "tf-nightly")
    hvd = _dist_version("horovod")
    mpi = _dist_version("mpi4py")
    return "returnn %s, Python %s, TensorFlow %s, Horovod %s, mpi4py %s" % (
        engine_version(), sys.version.split()[0], tf_version or "not installed", hvd or "not installed",
        mpi or "not installed")


def banner_lines(argv: List[str]) -> List[Tuple[int, str]]:
    """RETURNN's start-up lines, with their log levels: (level, text)."""
    import tensorflow as tf
    lines = [(3, "RETURNN starting up, version %s, date/time %s, pid %i, cwd %s, Python %s"
              % (engine_version(), time.strftime("%Y-%m-%d-%H-%M-%S (UTC%z)"), os.getpid(), os.getcwd(),
                 sys.executable)),
             (4, "RETURNN command line options: %s" % (argv,)),
             (4, "Hostname: %s" % socket.gethostname()),
             (3, "TensorFlow: %s (%s)" % (tf.__version__, os.path.dirname(tf.__file__))),
             (3, "Distributed: Horovod %s, mpi4py %s" % (_dist_version("horovod") or "not installed",
                                                         _dist_version("mpi4py") or "not installed"))]
    devices = []
    for dev in tf.config.list_physical_devices():
        name = dev.name.replace("/physical_device:", "")
        if dev.device_type == "GPU":
            details = tf.config.experimental.get_device_details(dev) or {}
            name += " (%s)" % details.get("device_name", "GPU")
        devices.append(name)
    lines.append((2, "Local devices available to TensorFlow: %s" % ", ".join(devices)))
    return lines
