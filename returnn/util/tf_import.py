"""Importing TensorFlow without its start-up log noise, and without the garbage collector's cost.

TensorFlow >= 2.16 logs through absl, and messages logged while it is imported (e.g. "oneDNN custom
operations are on") ignore ``TF_CPP_MIN_LOG_LEVEL`` and come with "WARNING: All log messages before
absl::InitializeLog() is called are written to STDERR". Here the import's stderr is captured at the
file-descriptor level and replayed through the same level filter TensorFlow applies later, so a
one-line error stays one line; anything else the import writes is passed on unchanged.

Importing TensorFlow creates about a million Python objects; Python's cyclic garbage collector
walks all of them in each full collection it triggers along the way (four of them, 230 ms of a
1.7 s import, measured with TF 2.15, plus 80 ms of younger collections) and again in every later
full collection, while the import leaves almost no cyclic garbage (14 objects). So
:func:`import_tensorflow` imports with the collector paused and then moves everything imported
to the permanent generation (``gc.freeze``), which later collections skip.
"""
from __future__ import annotations

import gc
import os
import re
import sys
import tempfile
from contextlib import contextmanager
from importlib import metadata
from typing import Iterator, List

_ABSL_BANNER = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
_ABSL_LINE = re.compile(r"^([IWEF])\d{4} \d\d:\d\d:\d+\.\d+ +\d+ \S+:\d+\] ")
_LEVELS = {"I": 0, "W": 1, "E": 2, "F": 3}


def _uses_absl_logging() -> bool:
    for name in ("tensorflow", "tensorflow-cpu", "tf-nightly"):
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        major, minor = (int(x) for x in re.findall(r"\d+", version)[:2])
        return (major, minor) >= (2, 16)
    return False


def filter_import_messages(text: str, min_level: int) -> List[str]:
    """Lines of ``text`` to show: absl's banner and log lines below ``min_level`` (with their
    continuation lines) are dropped."""
    kept: List[str] = []
    dropping = False
    for line in text.splitlines():
        if line == _ABSL_BANNER:
            continue
        m = _ABSL_LINE.match(line)
        if m:
            dropping = _LEVELS[m.group(1)] < min_level
        if not dropping:
            kept.append(line)
    return kept


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The garbage collector off inside; what was imported is frozen after (module docstring)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def import_tensorflow_quietly() -> None:
    """Imports TensorFlow now if its import logs through absl (TF >= 2.16), applying
    ``TF_CPP_MIN_LOG_LEVEL`` to what the import logs; older versions are left to
    :func:`import_tensorflow` (so their import can overlap other start-up work)."""
    if "tensorflow" in sys.modules or not _uses_absl_logging():
        return
    try:
        min_level = int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0"))
    except ValueError:
        min_level = 0
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            with _collector_paused():
                import tensorflow  # noqa: F401
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            kept = filter_import_messages(capture.read().decode("utf-8", "replace"), min_level)
            if kept:
                sys.stderr.write("\n".join(kept) + "\n")
                sys.stderr.flush()


def import_tensorflow() -> None:
    """Imports TensorFlow once: quietly (:func:`import_tensorflow_quietly`) and with the garbage
    collector paused, its objects frozen afterwards (module docstring)."""
    if "tensorflow" in sys.modules:
        return
    import_tensorflow_quietly()
    with _collector_paused():
        import tensorflow  # noqa: F401
