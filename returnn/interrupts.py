"""Graceful stop on SIGTERM/SIGUSR1 (what SGE and SLURM send before a time limit); the watchdog
that ends the process when it makes no progress (a dead or stalled peer rank) is
:class:`returnn.util.watchdog.Watchdog`."""
from __future__ import annotations

import signal
import threading
from typing import Optional

from returnn.errors import StopSignal, TrainingInterrupted

STOP_SIGNALS = tuple(s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGUSR1", None)) if s)


class _SignalHandlers:
    """Installs ``_handle`` for the stop signals and puts the previous handlers back."""

    def __init__(self) -> None:
        self._previous = {}

    def install(self) -> None:
        """Installs the handlers (main thread only)."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in STOP_SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)

    def uninstall(self) -> None:
        """Restores the handlers that were there before :meth:`install`."""
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}

    def _handle(self, signum, frame) -> None:
        raise NotImplementedError


class StopRequest(_SignalHandlers):
    """Remembers that a stop signal arrived; the training loop polls it after each step."""

    def __init__(self) -> None:
        super().__init__()
        self.signum: Optional[int] = None

    def _handle(self, signum, frame) -> None:  # noqa: ARG002
        if self.signum is None:
            self.signum = signum

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
        raise StopSignal(signum)
