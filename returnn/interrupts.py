"""Graceful stop on SIGTERM/SIGUSR1 (what SGE and SLURM send before a time limit) and a watchdog
that ends the process when it makes no progress (a dead or stalled peer rank)."""
from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Callable, Optional

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


class Watchdog:
    """Ends the process (``on_stall``, default exit 1) when :meth:`beat` is not called for
    ``timeout`` seconds while armed."""

    def __init__(self, timeout: float, describe: Callable[[], str] = lambda: "",
                 on_stall: Optional[Callable[[str], None]] = None):
        self.timeout = float(timeout)
        self.describe = describe
        self.on_stall = on_stall or _default_on_stall
        self._last = time.monotonic()
        self._armed = False
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def start(self) -> None:
        if self.timeout <= 0 or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="stall-watchdog", daemon=True)
        self._thread.start()

    def arm(self) -> None:
        self.beat()
        self._armed = True

    def disarm(self) -> None:
        self._armed = False

    @property
    def armed(self) -> bool:
        return self._armed

    def beat(self) -> None:
        self._last = time.monotonic()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _run(self) -> None:
        interval = min(1.0, self.timeout / 4)
        while not self._stop.wait(interval):
            if self._armed and time.monotonic() - self._last > self.timeout:
                self.on_stall("no progress for %.0f s (horovod_stall_timeout); %s"
                              % (time.monotonic() - self._last, self.describe()))
                return


def _default_on_stall(message: str) -> None:
    sys.stderr.write("ERROR: %s\n" % message)
    sys.stderr.flush()
    os._exit(1)
