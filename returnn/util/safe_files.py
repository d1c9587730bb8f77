"""Creating the files the engine writes without ever writing through a symbolic link.

Experiment directories are shared: whoever can write there can plant ``model.lock -> ~/.bashrc``
or ``lr.data.tmp-1234 -> /some/file`` under a name the engine is about to write. Every file the
engine creates or appends to therefore goes through this module:

* new files (temporary files, lock files) are created with ``O_CREAT | O_EXCL | O_NOFOLLOW``: an
  existing name, a symbolic link (even a dangling one) included, is never opened for writing;
* files opened for appending (log files) and the lock file, which is reopened when it exists, are
  opened with ``O_NOFOLLOW`` and must be regular files with a single link (a hard link to another
  file is refused too);
* a finished file replaces its final name with ``rename`` (``os.replace``), which replaces a
  symbolic link at that name instead of writing to its target;
* directories for temporary files are created with ``mkdir`` (which does not follow a link either)
  and mode 0700, so nobody else can place names inside them.

A refused name is an :class:`UnsafePathError` (an ``OSError`` naming the path and the reason).
See ``docs/security.md``.
"""
from __future__ import annotations

import errno
import os
import shutil
import stat
from typing import Optional

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class UnsafePathError(OSError):
    """A path the engine would write through a symbolic link, a hard link or into a non-file."""

    def __init__(self, path: str, reason: str):
        super().__init__(errno.ELOOP if "symbolic link" in reason else errno.EEXIST, reason, path)
        self.path, self.reason = path, reason

    def __str__(self) -> str:
        return "%s %s" % (self.path, self.reason)


def _link_reason(path: str) -> str:
    try:
        target = os.readlink(path)
    except OSError:
        return "is a symbolic link: the engine never writes through symbolic links (remove it)"
    return "is a symbolic link (to %s): the engine never writes through symbolic links (remove it)" % target


def foreign_link(path: str) -> Optional[str]:
    """Why writing below ``path`` (a directory, existing or to be created) would follow another
    user's symbolic link, or None. Each existing component of ``path`` is looked at as the kernel
    resolves it (the targets of links too): a symbolic link owned by a user other than this
    process's (or root) is what someone with write access to a shared directory plants to send the
    engine's files (checkpoints, logs) into a directory of their choosing -- the rule of Linux's
    ``fs.protected_symlinks``, applied to every directory, not only sticky ones."""
    from collections import deque
    euid = os.geteuid() if hasattr(os, "geteuid") else None
    if euid is None:
        return None
    parts = deque(os.path.join(os.getcwd(), os.fspath(path)).split("/"))
    current, hops = "/", 0
    while parts:
        part = parts.popleft()
        if part in ("", "."):
            continue
        if part == "..":
            current = os.path.dirname(current)
            continue
        candidate = os.path.join(current, part)
        try:
            st = os.lstat(candidate)
        except OSError:
            return None  # the rest does not exist yet: the engine creates it (mkdir does not follow links)
        if not stat.S_ISLNK(st.st_mode):
            current = candidate
            continue
        try:
            target = os.readlink(candidate)
        except OSError:
            return None
        if st.st_uid not in (euid, 0):
            return ("path component %s is a symbolic link (to %s) owned by another user (%s): the engine never "
                    "writes through another user's link (remove it, or name the real directory)"
                    % (candidate, target, _user(st.st_uid)))
        hops += 1
        if hops > 40:
            return None  # a loop: the kernel says ELOOP when the directory is used
        parts.extendleft(reversed(target.split("/")))
        if target.startswith("/"):
            current = "/"
    return None


def _user(uid: int) -> str:
    try:
        import pwd
        return "%s, uid %i" % (pwd.getpwuid(uid).pw_name, uid)
    except (ImportError, KeyError):
        return "uid %i" % uid


def check_no_foreign_link(directory: str) -> None:
    """Raises :class:`UnsafePathError` when writing below ``directory`` would follow another
    user's symbolic link (:func:`foreign_link`)."""
    reason = foreign_link(directory)
    if reason:
        raise ForeignLinkError(directory, reason)


class ForeignLinkError(UnsafePathError):
    """A directory reached through another user's symbolic link; the reason names the link."""

    def __str__(self) -> str:
        return self.reason


def check_replaceable(path: str) -> None:
    """Raises :class:`UnsafePathError` when ``path`` exists as something a finished output must not
    replace by ``rename``: a device (as root, an output named ``/dev/null`` would replace the device
    node), a FIFO, a socket or a directory. A regular file or a symbolic link (replaced, its target
    untouched) is fine."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return
    if stat.S_ISREG(mode) or stat.S_ISLNK(mode):
        return
    kind = "a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else \
        "a socket" if stat.S_ISSOCK(mode) else "a device"
    raise UnsafePathError(path, "is %s, not a regular file: the engine never replaces it with an output" % kind)


def check_regular(fd: int, path: str) -> None:
    """Raises :class:`UnsafePathError` unless ``fd`` (opened from ``path``) is a regular file with
    one link."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise UnsafePathError(path, "is not a regular file")
    if st.st_nlink > 1:
        raise UnsafePathError(path, "has %i hard links: the engine never writes to a file linked elsewhere "
                                    "(remove it)" % st.st_nlink)


def open_nofollow(path: str, flags: int, mode: int = 0o644) -> int:
    """``os.open`` with ``O_NOFOLLOW``: a symbolic link at ``path`` is an :class:`UnsafePathError`.
    Without ``O_EXCL``, an existing file must be a regular file with one link (a FIFO or device is
    refused without blocking on it)."""
    exclusive = bool(flags & os.O_EXCL)
    try:
        fd = os.open(path, flags | _NOFOLLOW | _CLOEXEC | (0 if exclusive else os.O_NONBLOCK), mode)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EEXIST, errno.ENXIO) and os.path.islink(path):
            raise UnsafePathError(path, _link_reason(path)) from None
        if exc.errno == errno.ENXIO:  # a FIFO without reader
            raise UnsafePathError(path, "is not a regular file") from None
        raise
    if not exclusive:
        try:
            check_regular(fd, path)
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
    return fd


def create_new(path: str, mode: int = 0o644) -> int:
    """Creates ``path`` as a new file for writing (``O_EXCL | O_NOFOLLOW``): never an existing
    file, never through a link. Returns the descriptor."""
    return open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)


def remove_name(path: str) -> None:
    """Removes whatever is at ``path`` itself (a file, a symbolic link -- not its target -- or a
    directory tree that is no link); a missing name is fine."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path)
    else:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass


def create_fresh(path: str, mode: int = 0o644) -> int:
    """Creates ``path`` as a new file, removing a leftover of an earlier writer at that name first
    (a file or a link is removed, never followed). For temporary names like ``<file>.tmp-<pid>``."""
    remove_name(path)
    return create_new(path, mode)


def make_private_dir(path: str) -> str:
    """Creates ``path`` as a new directory of mode 0700 (an old one at that name, a leftover of
    an earlier writer, is removed first; a link there is removed, not followed). Returns ``path``."""
    remove_name(path)
    os.mkdir(path, 0o700)
    return path


def open_append(path: str, encoding: str = "utf8", buffering: int = 1):
    """A text file opened for appending (created if missing), never through a symbolic link and
    never a file with other hard links (log files)."""
    fd = open_nofollow(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    return os.fdopen(fd, "a", buffering=buffering, encoding=encoding)


def write_new_file(path: str, data: bytes, mode: int = 0o644) -> None:
    """Writes ``data`` to the new file ``path`` (see :func:`create_fresh`) and fsyncs it."""
    fd = create_fresh(path, mode)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: str, data: bytes, tmp: Optional[str] = None) -> None:
    """Writes ``path`` via the temporary file ``tmp`` (default ``<path>.tmp-<pid>``): created new
    (never through a link), fsynced, renamed over ``path`` (a link at ``path`` is replaced, its
    target untouched); the directory is fsynced."""
    directory = os.path.dirname(os.path.abspath(path))
    check_no_foreign_link(directory)
    check_replaceable(path)
    os.makedirs(directory, exist_ok=True)
    tmp = tmp or "%s.tmp-%i" % (path, os.getpid())
    try:
        write_new_file(tmp, data)
    except OSError as exc:  # e.g. a full disk: no half-written temporary file is left behind
        if not isinstance(exc, UnsafePathError):
            remove_name(tmp)
        raise
    try:
        os.replace(tmp, path)
    except BaseException:
        remove_name(tmp)
        raise
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
