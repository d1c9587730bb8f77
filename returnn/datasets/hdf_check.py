"""Checks an HDF file in a separate process before the reader opens it in this one.

A damaged file can make the HDF5 library itself crash (segfault) or loop forever, e.g. on a
corrupt global heap behind variable-length strings; no Python code in the same process can turn
that into an error message. So, before :class:`~returnn.datasets.hdf_file.HDFFile` opens a file
here, a helper process opens it the same way (structure, ``seqLengths``, labels, all tags, the
first and last frames of each key). A crash or a hang there becomes one :class:`DataError` naming
the file; a file that passes is then read here with the same operations.

The helper (``python -m returnn.datasets.hdf_check``) is started once per process (fork + exec, so
it starts clean even from a multi-threaded process) and checks one file per request; after a crash
or a hang it is replaced by a new one. ``RETURNN_HDF_CHECK_TIMEOUT`` sets the seconds one check
may take (default 300); ``0`` turns the check off.
"""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
from typing import Any, Dict, Optional

from returnn.errors import DataError, ReturnnError

DEFAULT_TIMEOUT = 300.0
STARTUP_TIMEOUT = 120.0  # the helper imports h5py and numpy
_lock = threading.Lock()
_helper: Optional[subprocess.Popen] = None
_ready = False  # the helper said "ready" (it may have been started early, see prestart())


def check_timeout() -> float:
    """Seconds one file check may take (``RETURNN_HDF_CHECK_TIMEOUT``); 0 = no check."""
    text = os.environ.get("RETURNN_HDF_CHECK_TIMEOUT", "")
    try:
        return max(0.0, float(text)) if text.strip() else DEFAULT_TIMEOUT
    except ValueError:
        return DEFAULT_TIMEOUT


def check_hdf_file(path: str) -> None:
    """Raises a DataError naming ``path`` if reading its structure fails, crashes or hangs."""
    timeout = check_timeout()
    if timeout <= 0:
        return
    result = _ask_helper(os.path.abspath(path), timeout)
    if result is None:
        return  # no helper process available: the reader's own checks still apply
    status = result.get("status")
    if status == "error":
        raise DataError(result.get("message") or "HDFDataset: %s: unreadable file" % path)
    if status == "crash":
        raise DataError("HDFDataset: %s: the HDF5 library crashed reading this file (%s; corrupt file?)"
                        % (path, result.get("how")))
    if status == "hang":
        raise DataError("HDFDataset: %s: reading the file's structure did not finish within %.0f s (corrupt file "
                        "or stuck file system?; RETURNN_HDF_CHECK_TIMEOUT)" % (path, timeout))


def prestart() -> None:
    """Starts the helper without waiting for it: it imports h5py while this process starts up
    (e.g. imports TensorFlow), so the first check does not wait for that."""
    global _helper, _ready
    if check_timeout() <= 0:
        return
    with _lock:
        if _helper is None:
            _helper, _ready = _spawn_helper(), False


def _ask_helper(path: str, timeout: float) -> Optional[Dict[str, Any]]:
    """Has the helper process check ``path``; None when no helper can be started."""
    global _helper, _ready
    with _lock:
        if _helper is not None and not _ready:
            _ready = _wait_ready(_helper)
            if not _ready:
                _helper = None
        if _helper is None or _helper.poll() is not None:
            _helper = _spawn_helper()
            _ready = _helper is not None and _wait_ready(_helper)
            if not _ready:
                _helper = None
                return None
        helper = _helper
        try:
            helper.stdin.write(path + "\n")
            helper.stdin.flush()
            line = _read_line(helper, timeout)
        except (OSError, ValueError):
            line = ""
        if line:
            return json.loads(line)
        # No answer: the helper crashed on this file or is stuck in it.
        hung = line is None
        _stop_helper()
        if hung:
            return {"status": "hang"}
        code = helper.returncode
        how = ("signal %s" % signal.Signals(-code).name if code is not None and -code in signal.valid_signals()
               else "exit code %s" % code)
        return {"status": "crash", "how": how}


def _spawn_helper() -> Optional[subprocess.Popen]:
    """Starts the helper process (None if that fails)."""
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    try:
        return subprocess.Popen([sys.executable, "-m", "returnn.datasets.hdf_check"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    except OSError:
        return None


def _wait_ready(proc: subprocess.Popen) -> bool:
    """Waits until the helper has imported h5py; a helper that does not get there is ended."""
    if _read_line(proc, STARTUP_TIMEOUT) == "ready\n":
        return True
    proc.kill()
    proc.wait()
    return False


def _stop_helper() -> None:
    global _helper, _ready
    if _helper is not None:
        try:
            _helper.kill()
            _helper.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass
    _helper = None
    _ready = False


def _read_line(proc: subprocess.Popen, timeout: float) -> Optional[str]:
    """One line from the helper; None on timeout, "" when it ended."""
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    return proc.stdout.readline() if ready else None


# ---- helper process side

def check_here(path: str) -> Dict[str, Any]:
    """What the reader does with a file when it opens it and reads its tags, plus the first and
    last sequence; returns ``{"status": "ok"}`` or ``{"status": "error", "message": ...}``."""
    from returnn.datasets.hdf_file import HDFFile
    try:
        f = HDFFile(path)
        try:
            if f.num_seqs:
                f.tag(0)
                f.read_seqs(0, 0)
                f.read_seqs(f.num_seqs - 1, f.num_seqs - 1)
        finally:
            f.close()
    except ReturnnError as exc:
        return {"status": "error", "message": str(exc)}
    except Exception as exc:  # noqa: BLE001 - reported as one line
        text = str(exc).strip().splitlines()
        return {"status": "error", "message": "HDFDataset: %s: unreadable file: %s"
                % (path, text[0] if text else type(exc).__name__)}
    return {"status": "ok"}


def serve() -> None:
    """Helper main loop: one file name per stdin line, one JSON answer per stdout line."""
    import returnn.datasets.hdf_file  # noqa: F401
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    for line in sys.stdin:
        path = line.rstrip("\n")
        if path:
            sys.stdout.write(json.dumps(check_here(path)) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    serve()
