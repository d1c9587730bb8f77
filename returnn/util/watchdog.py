"""A stall watchdog thread: ends the process when the watched work makes no progress.

Standard library only: the engine uses it (through :mod:`returnn.interrupts` and the distributed
context) and ``tools/check-distributed.py`` loads it by path, before anything else is importable.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from typing import Callable, Optional


class Watchdog:
    """Ends the process (``on_stall``, default: the message on stderr and exit 1) when
    :meth:`beat` is not called for ``timeout`` seconds while armed (0: never)."""

    def __init__(self, timeout: float, describe: Callable[[], str] = lambda: "",
                 on_stall: Optional[Callable[[str], None]] = None, timeout_name: str = "horovod_stall_timeout"):
        self.timeout = float(timeout)
        self.describe = describe
        self.on_stall = on_stall or _default_on_stall
        self.timeout_name = timeout_name
        self.current_stage = ""
        self._last = time.monotonic()
        self._armed = False
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def start(self) -> None:
        if self.timeout <= 0 or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="stall-watchdog", daemon=True)
        self._thread.start()

    def stage(self, name: str) -> None:
        """Starts watching stage ``name``: the clock restarts (and the thread starts) now."""
        self.current_stage = name
        self.start()
        self.arm()

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
                self.on_stall("no progress for %.0f s (%s); %s"
                              % (time.monotonic() - self._last, self.timeout_name, self.describe()))
                return


def _default_on_stall(message: str) -> None:
    sys.stderr.write("ERROR: %s\n" % message)
    sys.stderr.flush()
    os._exit(1)
