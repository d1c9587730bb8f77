"""Finding the Python environment: ``rnn.py`` and the tools started by a bare ``python3`` that lacks
the packages re-run themselves under the repository's ``.venv`` (made by ``make setup``), or say in
one line what to do. Standard library only: this runs before anything else is importable."""
from __future__ import annotations

import importlib.util
import os
import sys
from typing import List, Sequence

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REEXEC_GUARD = "RETURNN_VENV_REEXEC"
"""Set in the environment of the re-run process (so it never loops); setting it also turns re-running off."""


def repo_venv_python() -> str:
    """Path of the repository's ``.venv/bin/python`` (it may not exist)."""
    return os.path.join(REPO_ROOT, ".venv", "bin", "python")


def _running_in(venv_dir: str) -> bool:
    return os.path.realpath(sys.prefix) == os.path.realpath(venv_dir)


def missing_packages(names: Sequence[str]) -> List[str]:
    """Those of ``names`` that cannot be imported by the running interpreter."""
    return [name for name in names if importlib.util.find_spec(name) is None]


def prefer_venv(names: Sequence[str]) -> None:
    """Re-executes the current command under the repository's ``.venv`` when one of ``names`` is missing
    here and that venv exists and is not the running one (once: :data:`REEXEC_GUARD`). Returns otherwise,
    so the caller can still report what is missing (``rnn.py --version``, ``tools/check-distributed.py``).
    Call it before MPI or TensorFlow is initialised: the process image is replaced (same pid, same
    environment, so a launcher's rank variables stay)."""
    if not missing_packages(names):
        return
    venv_python = repo_venv_python()
    venv_dir = os.path.dirname(os.path.dirname(venv_python))
    if not os.path.exists(venv_python) or _running_in(venv_dir) or os.environ.get(REEXEC_GUARD):
        return
    os.environ[REEXEC_GUARD] = "1"
    argv0 = sys.argv[0]
    if os.path.basename(argv0) == "__main__.py" and os.path.basename(os.path.dirname(argv0)) == "returnn":
        cmd = [venv_python, "-m", "returnn"]  # started as python -m returnn
    else:
        cmd = [venv_python, argv0]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(venv_python, cmd + sys.argv[1:])


def ensure_packages(names: Sequence[str], prog: str) -> None:
    """Returns when all of ``names`` are importable. Otherwise re-executes the current command under the
    repository's ``.venv`` when that exists and is not the running one; else exits 2 with one line."""
    prefer_venv(names)
    missing = missing_packages(names)
    if not missing:
        return
    sys.stderr.write("%s: %s not installed for %s; run 'make setup' in %s (creates .venv) and start it with "
                     ".venv/bin/python, or activate an environment that has %s\n"
                     % (prog, ", ".join(missing), sys.executable, REPO_ROOT, "them" if len(missing) > 1 else "it"))
    sys.stderr.flush()
    sys.exit(2)
