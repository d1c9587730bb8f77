"""Helpers that RETURNN configs import (``from returnn.util.basic import ...``)."""
from __future__ import annotations

import getpass
import os
import socket


def get_login_username() -> str:
    """The login name of the current user (works without a controlling terminal)."""
    try:
        return getpass.getuser()
    except Exception:  # pragma: no cover - unusual environments
        return str(os.getuid())


def hms(seconds: float) -> str:
    """Formats seconds as H:MM:SS, like RETURNN's log lines (hours keep counting past 24)."""
    total = max(0, int(round(seconds)))
    return "%i:%02i:%02i" % (total // 3600, total // 60 % 60, total % 60)


def get_hostname() -> str:
    """Short host name."""
    return socket.gethostname()


def human_bytes(n: float) -> str:
    """1536 -> '1.5KB'."""
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return ("%.1f%s" % (n, unit)) if unit != "B" else ("%i%s" % (n, unit))
        n /= 1024.0
    return "%.1fTB" % n


def parse_size(value) -> int:
    """Parses RETURNN-style sizes: 0, "0", "10G", "512M", "1k", -1 -> bytes (-1 = unlimited)."""
    if isinstance(value, (int, float)):
        return int(value)
    s = str(value).strip().upper()
    if not s:
        return 0
    factors = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3, "T": 1024 ** 4}
    if s[-1] == "B" and len(s) > 1 and s[-2] in factors:
        s = s[:-1]
    if s[-1] in factors:
        return int(float(s[:-1]) * factors[s[-1]])
    return int(float(s))


def atomic_write_text(path: str, text: str) -> None:
    """Writes a text file via a temporary file + fsync + rename, so readers never see half a file."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    tmp = "%s.tmp-%i" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(directory)


def fsync_dir(directory: str) -> None:
    """fsyncs a directory so a rename in it is durable."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
