"""Graceful stop on SIGTERM/SIGUSR1 (what SGE and SLURM send before a time limit) and on SIGINT
(Ctrl-C): in the training loop all three save the interrupted state (``<model>.interrupted``) after
the current step, so the same command continues where the run stopped, whatever ``save_interval``
is; a second Ctrl-C stops at once (:class:`StopRequest`). What a re-run will do is said truthfully
(:func:`resume_hint`). The watchdog that ends the process when it makes no progress (a dead or
stalled peer rank) is :class:`returnn.util.watchdog.Watchdog`."""
from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any, List, Optional

from returnn.errors import StopSignal, TrainingInterrupted

STOP_SIGNALS = tuple(s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGUSR1", None),
                                 getattr(signal, "SIGINT", None)) if s)


def signal_name(signum: Optional[int]) -> str:
    """``SIGINT (Ctrl-C)``, ``SIGTERM``, ... for a message."""
    if signum is None:
        return "a signal"
    try:
        name = signal.Signals(signum).name
    except ValueError:
        return "signal %i" % signum
    return name + (" (Ctrl-C)" if signum == getattr(signal, "SIGINT", None) else "")


def resume_hint(config: Any) -> str:
    """What running the same training command again does, from the checkpoints on disk now: continue
    after the newest complete epoch (or from the interrupted state), or start from epoch 1 (or from the
    initial model) because there is no checkpoint yet. Never raises."""
    model = config.value("model") if config is not None else None
    if not model:
        return "the same command starts training again"
    try:
        start = config.value("start_epoch")
        if start not in (None, "auto") and config.value("load"):  # RETURNN: a new training from 'load'
            return "the same command starts again at epoch 1 from %s (load with start_epoch)" % config.value("load")
        if start not in (None, "auto"):
            return "the same command starts again at epoch %s (start_epoch)" % start
        from returnn.tf.checkpoint import CheckpointManager
        manager = CheckpointManager(model)
        point = manager.find_resume_point()
    except Exception:  # noqa: BLE001 - a damaged checkpoint is reported by the next run itself
        return "the same command resumes from the newest complete checkpoint of %s" % model
    if point is None:
        initial = config.value("import_model_train_epoch1") or config.value("load")
        if initial:
            return "no checkpoint of %s exists yet: the same command starts again from %s" % (model, initial)
        return "no checkpoint of %s exists yet: the same command starts again from epoch 1" % model
    prefix, epoch = point
    if prefix == manager.interrupted_prefix:
        return "the same command continues epoch %i from %s (saved mid-epoch)" % (epoch + 1, prefix)
    return "the same command continues after epoch %i (%s)" % (epoch, prefix)


def rerun_hint(config: Any) -> str:
    """What running the same command again does after it was stopped, for any task: training
    continues from the checkpoints on disk (:func:`resume_hint`); forward, search and eval wrote
    nothing (their outputs are renamed into place only when complete) and run again from the
    start. Never raises."""
    try:
        task = config.value("task") if config is not None else None
        if task == "train":
            return resume_hint(config)
        output = {"forward": "output_file", "search": "search_output_file"}.get(task or "")
        written = config.value(output) if output else None
        what = {"forward": "the forward pass", "search": "the search", "eval": "the evaluation"}.get(task or "",
                                                                                                  "the task")
        if written:
            return "%s was not written (an output appears only when complete); the same command runs %s again " \
                   "from the start" % (written, what)
        return "the same command runs %s again from the start" % what
    except Exception:  # noqa: BLE001 - only for the message
        return "the same command runs the task again"


_PENDING: List[BaseException] = []  # the exception a stop signal raised, kept for re-raising


def raise_for_signal(exc: BaseException) -> None:
    """Raises ``exc`` (a stop signal handler's exception) and remembers it: C code that runs Python
    (numpy, h5py) can clear an exception raised inside it, and then the signal would be lost and
    the task go on and write its output. :func:`raise_if_stop_pending` raises it again."""
    if not _PENDING:
        _PENDING.append(exc)
    raise exc


def raise_if_stop_pending() -> None:
    """Raises the exception of a stop signal that arrived in this process (see
    :func:`raise_for_signal`), if any. Called where an output is about to be put into place and
    after each forward batch, so a signal swallowed on the way still stops the task."""
    if _PENDING:
        raise _PENDING[0]


def pending_stop_signal() -> Optional[int]:
    """The number of a stop signal that arrived (its exception raised, maybe lost), else None."""
    return getattr(_PENDING[0], "signum", None) if _PENDING else None


def redeliver_dropped_signals() -> None:
    """A handler's exception raised while Python runs a weakref callback or ``__del__`` (h5py and
    TensorFlow objects have both) is printed as "Exception ignored" and dropped, so the signal
    would be lost and the process go on (seen: a SIGTERM'd ``hdf_dump`` finished and exited 0).
    From this call on, such a dropped exception that carries a ``signum`` is not printed and its
    signal is sent again a moment later, from a thread, so the handler runs at another point.
    Installed once per process."""
    previous = sys.unraisablehook
    if getattr(previous, "redelivers_signals", False):
        return

    def hook(unraisable) -> None:
        signum = getattr(unraisable.exc_value, "signum", None)
        if signum is None:
            previous(unraisable)
            return
        timer = threading.Timer(0.05, os.kill, (os.getpid(), signum))
        timer.daemon = True
        timer.start()
    hook.redelivers_signals = True  # type: ignore[attr-defined]
    sys.unraisablehook = hook


class _SignalHandlers:
    """Installs ``_handle`` for the stop signals and puts the previous handlers back."""

    def __init__(self) -> None:
        self._previous = {}

    def install(self) -> None:
        """Installs the handlers (main thread only)."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in STOP_SIGNALS:
            if sig == getattr(signal, "SIGINT", None) and signal.getsignal(sig) is signal.SIG_IGN:
                continue  # started with SIGINT ignored (nohup, a background job): keep it so
            self._previous[sig] = signal.signal(sig, self._handle)
        redeliver_dropped_signals()

    def uninstall(self) -> None:
        """Restores the handlers that were there before :meth:`install`."""
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}

    def _handle(self, signum, frame) -> None:
        raise NotImplementedError


class StopRequest(_SignalHandlers):
    """Remembers that a stop signal arrived; the training loop polls it after each step. A second
    Ctrl-C (SIGINT after any stop signal) does not wait for the step: KeyboardInterrupt at once."""

    def __init__(self) -> None:
        super().__init__()
        self.signum: Optional[int] = None

    def install(self) -> None:
        """Installs the handlers; a stop signal that arrived before (and was lost on the way, see
        :func:`raise_for_signal`) counts as requested."""
        super().install()
        if self.signum is None:
            self.signum = pending_stop_signal()

    def _handle(self, signum, frame) -> None:  # noqa: ARG002
        if self.signum is None:
            self.signum = signum
        elif signum == getattr(signal, "SIGINT", None):
            raise KeyboardInterrupt

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def interrupted(self) -> TrainingInterrupted:
        """The exception that ends the run after all ranks agreed to stop (a rank that got no
        signal itself stops as if by SIGTERM)."""
        return TrainingInterrupted(int(self.signum or signal.SIGTERM))


class EarlyStop(_SignalHandlers):
    """Handlers for the start-up phase of training (config, data, network, tracing): a stop
    signal raises :class:`StopSignal` at once instead of killing the process without a word.

    The engine's :class:`StopRequest` replaces these handlers for the training loop and puts them
    back afterwards."""

    def _handle(self, signum, frame) -> None:  # noqa: ARG002
        raise_for_signal(StopSignal(signum))
