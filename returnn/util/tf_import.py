"""Importing TensorFlow without its start-up log noise.

TensorFlow >= 2.16 logs through absl, and messages logged while it is imported (e.g. "oneDNN custom
operations are on") ignore ``TF_CPP_MIN_LOG_LEVEL`` and come with "WARNING: All log messages before
absl::InitializeLog() is called are written to STDERR". Here the import's stderr is captured at the
file-descriptor level and replayed through the same level filter TensorFlow applies later, so a
one-line error stays one line; anything else the import writes is passed on unchanged.
"""
from __future__ import annotations

import os
import re
import sys
import tempfile
from importlib import metadata
from typing import List

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


def import_tensorflow_quietly() -> None:
    """Imports TensorFlow (once), applying ``TF_CPP_MIN_LOG_LEVEL`` to what the import logs."""
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
            import tensorflow  # noqa: F401
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            kept = filter_import_messages(capture.read().decode("utf-8", "replace"), min_level)
            if kept:
                sys.stderr.write("\n".join(kept) + "\n")
                sys.stderr.flush()
