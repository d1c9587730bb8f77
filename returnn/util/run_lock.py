"""An exclusive lock on a model prefix, so two trainings never write one set of checkpoints.

``<model>.lock`` is held with ``flock`` for the whole run (rank 0): the kernel releases it on any
exit, ``kill -9`` included, and NFS maps it to its own locks. The file names its holder
(``pid host start-time``) for the message a second run prints. Where the file system cannot lock
(``ENOLCK``, ``EOPNOTSUPP``), the file's existence is the lock: a holder on this host whose process
is gone is a stale lock from a crash and is taken over; a holder on another host cannot be checked
and is reported (delete the file if that run is gone). See ``docs/reliability.md``.

The lock file is never opened through a symbolic link and must be a regular file with one link
(:mod:`returnn.util.safe_files`): a ``model.lock`` planted as a link to another file is refused
with one line, and that file is left as it is (``docs/security.md``).
"""
from __future__ import annotations

import errno
import os
import socket
import time
from typing import Optional, Tuple

from returnn.errors import ConfigError
from returnn.util.safe_files import UnsafePathError, open_nofollow

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

LOCK_SUFFIX = ".lock"
_NO_LOCKING = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)


def process_start_time(pid: int) -> Optional[str]:
    """The start time of process ``pid`` in clock ticks since boot (Linux), to tell a reused PID."""
    try:
        with open("/proc/%i/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def pid_alive(pid: int, start_time: Optional[str] = None) -> bool:
    """Whether process ``pid`` runs on this host (and, if given, is the one started at ``start_time``)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. EPERM: exists, owned by someone else
        pass
    if start_time is not None:
        current = process_start_time(pid)
        return current is None or current == start_time
    return True


class ModelLock:
    """``with ModelLock(model):`` or :meth:`acquire` / :meth:`release`."""

    def __init__(self, model: str, use_flock: bool = True):
        self.path = model + LOCK_SUFFIX
        self.use_flock = use_flock and fcntl is not None
        self._fd: Optional[int] = None

    def acquire(self) -> None:
        """Takes the lock or raises a one-line ConfigError naming the holder."""
        for _ in range(20):  # retried when the file changed between open and lock
            done = self._try_flock() if self.use_flock else self._try_exclusive_create()
            if done:
                return
            time.sleep(0.05)
        raise ConfigError("config key 'model': cannot lock %s (it keeps changing)" % self.path)

    def _try_flock(self) -> bool:
        try:
            fd = open_nofollow(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise self._open_error(exc)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise self._held_error(holder) from None
        except OSError as exc:
            os.close(fd)
            if exc.errno not in _NO_LOCKING:
                raise
            self.use_flock = False  # this file system cannot lock: the file's existence is the lock
            return False
        if not _same_file(fd, self.path):  # a finishing run removed it meanwhile: lock the new one
            os.close(fd)
            return False
        self._record(fd)
        return True

    def _try_exclusive_create(self) -> bool:
        try:
            fd = open_nofollow(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        except UnsafePathError as exc:
            raise self._open_error(exc)
        except FileExistsError:
            try:
                rfd = open_nofollow(self.path, os.O_RDONLY)
            except UnsafePathError as exc:
                raise self._open_error(exc)
            except OSError:
                return False  # removed meanwhile: try again
            try:
                holder = _parse_holder(os.pread(rfd, 4096, 0))
            finally:
                os.close(rfd)
            if holder is None and not _older_than(self.path, 10.0):  # being written right now
                return False
            if holder is not None and not self._stale(holder):
                raise self._held_error(holder) from None
            try:
                os.remove(self.path)  # a crashed run's lock
            except FileNotFoundError:
                pass
            return False
        except OSError as exc:
            raise self._open_error(exc)
        self._record(fd)
        return True

    def _record(self, fd: int) -> None:
        """Writes this run into the lock file it holds; a write that fails (a full disk) removes the
        file and is one line naming it (exit 1), not a traceback with an empty lock file left."""
        try:
            _write_holder(fd)
        except OSError as exc:
            from returnn.errors import output_write_error
            try:
                if _same_file(fd, self.path):
                    os.remove(self.path)
            except OSError:
                pass
            os.close(fd)
            raise output_write_error(self.path, exc, "lock file") from None
        self._fd = fd

    def _open_error(self, exc: OSError) -> ConfigError:
        if isinstance(exc, UnsafePathError):
            return ConfigError("config key 'model': lock file %s; nothing was written" % exc)
        return ConfigError("config key 'model': cannot create lock file %s: %s" % (self.path, exc.strerror or exc))

    def _stale(self, holder: Tuple[int, str, Optional[str], str]) -> bool:
        pid, host, start, _ = holder
        return host == socket.gethostname() and not pid_alive(pid, start)

    def _held_error(self, holder: Optional[Tuple[int, str, Optional[str], str]]) -> ConfigError:
        who = ("pid %i on host %s since %s" % (holder[0], holder[1], holder[3])) if holder else "another process"
        hint = "" if self.use_flock else "; if that run is gone (its host crashed), delete the lock file"
        return ConfigError("config key 'model': %s is in use by another training run (%s; lock file %s)%s"
                           % (self.path[:-len(LOCK_SUFFIX)], who, self.path, hint))

    def release(self) -> None:
        """Removes the lock file and lets go (also done by the kernel at any exit)."""
        if self._fd is None:
            return
        try:
            if _same_file(self._fd, self.path):
                os.remove(self.path)
        except OSError:
            pass
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> "ModelLock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _older_than(path: str, seconds: float) -> bool:
    try:
        return time.time() - os.stat(path).st_mtime > seconds
    except OSError:
        return False


def _same_file(fd: int, path: str) -> bool:
    try:
        a, b = os.fstat(fd), os.lstat(path)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _read_holder(fd: int) -> Optional[Tuple[int, str, Optional[str], str]]:
    try:
        return _parse_holder(os.pread(fd, 4096, 0))
    except OSError:
        return None


def _parse_holder(raw: bytes) -> Optional[Tuple[int, str, Optional[str], str]]:
    """(pid, host, process start time or None, since) from the lock file, or None if empty/garbled."""
    fields = dict(line.split("=", 1) for line in raw.decode("utf-8", "replace").splitlines() if "=" in line)
    try:
        return int(fields["pid"]), fields["host"], fields.get("start") or None, fields.get("since", "?")
    except (KeyError, ValueError):
        return None


def _write_holder(fd: int) -> None:
    text = "pid=%i\nhost=%s\nstart=%s\nsince=%s\n" % (os.getpid(), socket.gethostname(),
                                                      process_start_time(os.getpid()) or "",
                                                      time.strftime("%Y-%m-%d %H:%M:%S"))
    os.ftruncate(fd, 0)
    os.pwrite(fd, text.encode("utf-8"), 0)
    os.fsync(fd)
