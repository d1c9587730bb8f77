"""One way to run a script with the real RETURNN's Python (its side venv, see
tests/returnn_goldens/make_goldens.py) for the differential checks (returnn_fuzz*.py): from a directory
outside the repository (so ``import returnn`` is RETURNN's, not this package), without this repository on
``PYTHONPATH``, with CUDA off (RETURNN's native ops compile for the CPU) and TensorFlow's logging quiet."""
from __future__ import annotations

import os
import subprocess
import tempfile
from typing import List, Optional


def run_returnn_script(python: str, args: List[str], timeout: Optional[float] = None,
                       check: bool = False) -> subprocess.CompletedProcess:
    """``python args...`` as the module docstring says; output captured as text."""
    env = dict(os.environ, DISABLE_CUDA="1", TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    env.pop("PYTHONPATH", None)
    return subprocess.run([python] + list(args), cwd=tempfile.gettempdir(), env=env, capture_output=True, text=True,
                          timeout=timeout, check=check)
