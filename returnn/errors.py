"""The three ways a run ends early, each a family with its exit code.

- :class:`ReturnnError`: bad input from the user (config, data, network, launcher set-up). The CLI
  prints one line naming the file, key or layer and exits with 2.
- :class:`RuntimeFailure`: the input was fine but the run failed (e.g. a non-finite score). One
  line, exit 1.
- :class:`Stopped`: a stop signal (SIGTERM/SIGUSR1) ended the run; exit 128 + signal number, the
  shell's convention. The newest checkpoint on disk is the state the same command resumes from.
"""
from __future__ import annotations


class ReturnnError(Exception):
    """Bad input from the user (config, data, network). Printed as one line, exit code 2."""

    exit_code = 2


class ConfigError(ReturnnError):
    """Problem with a config file or a config value."""


class DataError(ReturnnError):
    """Problem with a dataset or data file (the message names the file or key)."""


class NetworkError(ReturnnError):
    """Problem with the network dict (the message names the layer)."""


class DistributedError(ReturnnError):
    """Problem with the distributed setup (Horovod/MPI)."""


class RuntimeFailure(Exception):
    """The run failed although its input was accepted. Printed as one line, exit code 1.
    ``all_ranks``: raised on every rank at the same step (else the other ranks are ended)."""

    exit_code = 1
    all_ranks = True


class NonFiniteScoreError(RuntimeFailure):
    """Training produced inf/nan; the last good checkpoint is kept."""


class OutputWriteError(RuntimeFailure):
    """An output could not be written (disk full, quota, I/O error): one line naming the file;
    what was written before (older checkpoints, the last learning-rate file) is intact and the
    half-written temporary file is removed. Raised on the rank that writes: the other ranks are
    ended (``all_ranks`` False)."""

    all_ranks = False


def output_write_error(path: str, exc: BaseException, what: str = "file") -> OutputWriteError:
    """The one-line error for ``exc`` raised while writing ``path`` (an OSError, h5py's or
    TensorFlow's error): ``cannot write checkpoint /x/model.003: No space left on device``."""
    import errno
    import os
    code = getattr(exc, "errno", None)
    reason = os.strerror(code) if isinstance(code, int) and code > 0 else ""
    if not reason:
        text = str(getattr(exc, "message", None) or exc)
        for code in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS):
            if os.strerror(code) in text or "errno = %i" % code in text:
                reason = os.strerror(code)
                break
        else:
            reason = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return OutputWriteError("cannot write %s %s: %s" % (what, path, reason))


class Stopped(BaseException):
    """A stop signal ended the run; exit code 128 + signal number.

    A BaseException, so that no ``except Exception`` on the way swallows it."""

    def __init__(self, signum: int, message: str):
        super().__init__(message)
        self.signum = int(signum)

    @property
    def exit_code(self) -> int:
        """128 + signal number, the shell's convention for death by signal."""
        return 128 + self.signum


class StopSignal(Stopped):
    """A stop signal that arrived before the training loop took over the handlers. Nothing new has
    been trained yet, so the newest checkpoint on disk already is the state to resume from."""

    def __init__(self, signum: int):
        super().__init__(signum, "stopped by signal %i" % int(signum))


class TrainingInterrupted(Stopped):
    """A stop signal arrived during training; all ranks stopped at the same step and rank 0 saved a
    resumable checkpoint."""

    def __init__(self, signum: int):
        super().__init__(signum, "interrupted")


def known_list(names) -> str:
    """Formats a collection of names for error messages: 'a, b, c'."""
    return ", ".join(sorted(names))


def first_line(exc: BaseException, limit: int = 300) -> str:
    """The first line of an error's text (at most ``limit`` characters), or its type's name: for one-line errors."""
    text = str(exc).strip().splitlines()
    return text[0][:limit] if text else type(exc).__name__
