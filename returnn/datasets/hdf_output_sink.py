"""The temporary files HDF writers write through (see :mod:`returnn.datasets.hdf_write`): named after
host and process (``.<name>.tmp-<host>-<pid>-<random>``), created new and never through a link, a failed
write recorded instead of crashing libhdf5; leftovers of dead writers and of this process removed."""
from __future__ import annotations

import io
import os
import re
import socket
import uuid
from typing import List, Optional


def temp_name(filename: str) -> str:
    """``.<name>.tmp-<host>-<pid>-<random>`` next to ``filename``: hidden, and saying which process
    on which host writes it, so a later writer can remove it once that process is gone."""
    directory, base = os.path.split(os.path.abspath(filename))
    return os.path.join(directory, ".%s.tmp-%s-%i-%s" % (base, _host(), os.getpid(), uuid.uuid4().hex[:8]))


_TMP_RE = re.compile(r"^\.(?P<base>.+)\.tmp-(?:(?P<host>.+)-)?(?P<pid>\d+)-[0-9a-f]{8}$")


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", socket.gethostname()) or "localhost"


def remove_stale_hdf_temp_files(directory: str) -> List[str]:
    """Removes the temporary files of HDF writers (:class:`SimpleHDFWriter`, :func:`dump_dataset_to_hdf`,
    i.e. forward outputs, hdf_dump layers and tools/hdf_dump.py) in ``directory`` whose process is
    gone: written by this host (or by an older version that did not name the host) under a PID
    that no longer runs here. A killed writer's full-size leftover is thus removed by the next
    writer into the same directory. Returns the removed paths."""
    from returnn.util.run_lock import pid_alive
    removed = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    host = _host()
    for name in names:
        m = _TMP_RE.match(name)
        if not m or (m.group("host") is not None and m.group("host") != host) or pid_alive(int(m.group("pid"))):
            continue
        path = os.path.join(directory, name)
        try:
            if os.path.isfile(path) and not os.path.islink(path):
                os.remove(path)
                removed.append(path)
        except OSError:
            pass  # not ours to remove after all (permissions): it never counts as an output
    return removed


_UNFINISHED: set = set()  # temporary files this process created and has not yet renamed or removed


def mark_finished(path: str) -> None:
    """``path`` (a temporary file of this process) was renamed into place: no leftover any more."""
    _UNFINISHED.discard(path)


def discard_unfinished_outputs() -> List[str]:
    """Removes the temporary files of this process's writers that were neither renamed into place
    nor removed: a stop signal (an exception raised at any bytecode) can land between a file's
    creation and the ``try`` that drops it, or inside the cleanup itself. Called once when the
    process ends (``rnn.py``'s exit path). Returns the removed paths."""
    return [path for path in sorted(_UNFINISHED) if drop_unfinished(path)]


def drop_unfinished(path: str) -> bool:
    """Removes ``path`` if this process created it and has not renamed it (a file, never a link);
    from then on it is no leftover of this process. Whether a file was removed."""
    removed = False
    if path in _UNFINISHED:
        try:
            if os.path.isfile(path) and not os.path.islink(path):
                os.remove(path)
                removed = True
        except OSError:
            pass
    _UNFINISHED.discard(path)
    return removed


class OutputSink(io.RawIOBase):
    """The file h5py writes an output through (h5py's file-object driver), created new and never
    through a link. libhdf5 is not robust against a write that fails (a full disk, a quota): it
    crashes the process when the file is closed afterwards. So a failed write is recorded in
    :attr:`error` and then ignored (the bytes are dropped); the writers check :attr:`error` after
    every batch and at the end, drop the file and raise one line naming the output. The cost is a
    Python call per libhdf5 I/O request, measured at about 10% of writing 160 MB."""

    def __init__(self, path: str):
        super().__init__()
        from returnn.util.safe_files import check_no_foreign_link, open_nofollow
        self.path = path
        self.error: Optional[OSError] = None
        check_no_foreign_link(os.path.dirname(os.path.abspath(path)))  # not through another user's link
        _UNFINISHED.add(path)  # before it exists: a signal right after the creation still finds it
        # a new file (O_EXCL), never through a link (O_NOFOLLOW); read and written by libhdf5
        try:
            fd = open_nofollow(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        except OSError:
            _UNFINISHED.discard(path)  # not created by us (e.g. it existed): never ours to remove
            raise
        self._f = os.fdopen(fd, "r+b", buffering=0)

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        return self._f.readinto(buffer)

    def write(self, data) -> int:
        if self.error is None:
            try:
                return self._f.write(data)
            except OSError as exc:
                self.error = exc
        return len(data)

    def seek(self, pos: int, whence: int = 0) -> int:
        return self._f.seek(pos, whence)

    def tell(self) -> int:
        return self._f.tell()

    def truncate(self, size: Optional[int] = None) -> int:
        try:
            return self._f.truncate(size)
        except OSError as exc:
            self.error = self.error or exc
            return self.tell() if size is None else size

    def flush(self) -> None:
        pass

    def fsync(self) -> None:
        """Makes the written bytes durable (a failure, e.g. a delayed full disk, is recorded)."""
        if self.error is None:
            try:
                os.fsync(self._f.fileno())
            except OSError as exc:
                self.error = exc

    def close(self) -> None:
        if not self.closed:
            try:
                self._f.close()
            except OSError as exc:
                self.error = self.error or exc
        super().close()
