#!/usr/bin/env python3
"""Checks an MPI + Horovod set-up; run it under the launcher, e.g. ``mpirun -np 2 python3 tools/check-distributed.py``.

See ``returnn/distributed/check.py`` (``--help``) and docs/running.md.
"""
import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load_check():
    """Loads returnn/distributed/check.py by path: the check only needs the standard library up front
    and must still report (instead of crash) when TensorFlow or the engine's package cannot be imported."""
    spec = importlib.util.spec_from_file_location("returnn_distributed_check",
                                                  os.path.join(ROOT, "returnn", "distributed", "check.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _prefer_venv() -> None:
    """A ``python3`` without mpi4py or TensorFlow (``mpirun -np 2 python3 tools/check-distributed.py``)
    re-runs under the repository's ``.venv``, as rnn.py and the other tools do; without one, the check
    runs here and reports what is missing."""
    spec = importlib.util.spec_from_file_location("returnn_util_environment",
                                                  os.path.join(ROOT, "returnn", "util", "environment.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.prefer_venv(("mpi4py", "tensorflow"))


if __name__ == "__main__":
    _prefer_venv()
    sys.exit(_load_check().main())
