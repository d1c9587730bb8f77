"""Logging with RETURNN's verbosity levels and one log file per rank.

Use it like RETURNN: ``print("epoch summary", file=log.v3)``. Level 3 holds epoch summaries,
4 progress, 5 per-step lines. ``log.warn`` / ``log.error`` always reach the console.

Under several ranks, rank 0 writes the console and the main log file(s); rank R of N writes
``<base>.horovod-R-N<ext>`` and prints only warnings and errors to the console, prefixed
``[rank R]``.
"""
from __future__ import annotations

import io
import os
import sys
import threading
from typing import List, Optional, Sequence, TextIO

from returnn.util.safe_files import check_no_foreign_link, open_append


def rank_log_filename(filename: str, rank: int, size: int) -> str:
    """'logs/train.log' for rank 1 of 2 -> 'logs/train.horovod-1-2.log'."""
    if size <= 1 or rank == 0:
        return filename
    base, ext = os.path.splitext(filename)
    return "%s.horovod-%i-%i%s" % (base, rank, size, ext)


class _Stream(io.TextIOBase):
    """A write-only text stream for one verbosity level (or warnings/errors)."""

    def __init__(self, owner: "Log", level: int, prefix: str = ""):
        super().__init__()
        self._owner = owner
        self._level = level
        self._prefix = prefix
        self._buffer = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        with self._owner.lock:
            self._buffer += text
            while "\n" in self._buffer:
                line, self._buffer = self._buffer.split("\n", 1)
                self._owner.emit_line(self._level, self._prefix + line)
        return len(text)

    def flush(self) -> None:
        with self._owner.lock:
            if self._buffer:
                line, self._buffer = self._buffer, ""
                self._owner.emit_line(self._level, self._prefix + line)
            self._owner.flush_all()


WARN_LEVEL = -1
ERROR_LEVEL = -2


class Log:
    """Process-wide log: verbosity filter, console, log files."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.verbosity = 3
        self.rank = 0
        self.size = 1
        self.console: TextIO = sys.stdout
        self.files: List[TextIO] = []
        self.filenames: List[str] = []
        self.progress_active = False
        self.v0, self.v1, self.v2, self.v3, self.v4, self.v5 = (_Stream(self, i) for i in range(6))
        self.warn = _Stream(self, WARN_LEVEL, "WARNING: ")
        self.error = _Stream(self, ERROR_LEVEL, "ERROR: ")

    def initialize(self, logs: Sequence[str] = (), verbosity: int = 3, rank: int = 0, size: int = 1,
                   console: Optional[TextIO] = None) -> None:
        """(Re)configures the log. ``logs`` are file paths; directories are created."""
        with self.lock:
            self.close_files()
            self.verbosity = int(verbosity)
            self.rank, self.size = int(rank), int(size)
            self.console = console or sys.stdout
            for name in logs:
                if not name:
                    continue
                path = rank_log_filename(name, self.rank, self.size)
                directory = os.path.dirname(os.path.abspath(path))
                check_no_foreign_link(directory)  # not into a directory through another user's link
                os.makedirs(directory, exist_ok=True)
                self.files.append(open_append(path))  # never through a symbolic link (safe_files)
                self.filenames.append(path)

    def v(self, level: int) -> _Stream:
        """Stream of the given verbosity level."""
        return (self.v0, self.v1, self.v2, self.v3, self.v4, self.v5)[max(0, min(level, 5))]

    def emit_line(self, level: int, line: str) -> None:
        """Writes one finished line to the console and files, following level and rank rules."""
        is_problem = level < 0
        if not is_problem and level > self.verbosity:
            return
        failed = None
        for f in list(self.files):
            try:
                f.write(line + "\n")
            except OSError as exc:  # a full disk, a quota: the file is dropped, the run ends naming it
                failed = failed or (self._drop(f), exc)
        if failed is not None:
            from returnn.errors import output_write_error
            raise output_write_error(failed[0], failed[1], "log file")
        if self.rank == 0:
            out = sys.stderr if level == ERROR_LEVEL else self.console
            self.clear_progress()
            out.write(line + "\n")
        elif is_problem:
            sys.stderr.write("[rank %i] %s\n" % (self.rank, line))

    def clear_progress(self) -> None:
        """Erases an on-screen progress bar before a normal line is printed."""
        if self.progress_active:
            self.console.write("\r\033[K")
            self.progress_active = False

    def write_progress(self, text: str) -> None:
        """Shows ``text`` as a single updating line on the console (rank 0, terminal only)."""
        with self.lock:
            if self.rank != 0:
                return
            self.console.write("\r\033[K" + text)
            self.console.flush()
            self.progress_active = True

    def console_is_terminal(self) -> bool:
        """Whether the console is an interactive terminal."""
        from returnn.util.launcher_env import launched
        if self.size > 1 or launched():
            return False  # MPI launchers give ranks a pty even when the job's output goes to a file
        try:
            return self.rank == 0 and self.console.isatty()
        except (AttributeError, ValueError):
            return False

    def _drop(self, f) -> str:
        """Stops writing the log file ``f`` (after a write failed); returns its name."""
        i = self.files.index(f)
        name = self.filenames[i] if i < len(self.filenames) else getattr(f, "name", "?")
        del self.files[i]
        if i < len(self.filenames):
            del self.filenames[i]
        try:
            f.close()
        except OSError:
            pass
        return name

    def flush_all(self) -> None:
        """Flushes console and files (a log file that cannot be written any more is dropped: its
        error was raised when its line was written)."""
        for f in list(self.files):
            try:
                f.flush()
            except OSError:
                self._drop(f)
        try:
            self.console.flush()
        except ValueError:
            pass

    def close_files(self) -> None:
        """Closes the log files."""
        for f in self.files:
            try:
                f.close()
            except OSError:
                pass
        self.files, self.filenames = [], []


log = Log()
