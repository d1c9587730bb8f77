"""What the user sees while an epoch runs: per-step lines at log_verbosity 5; at 4 a single
updating progress bar on a terminal, or a plain line every ``progress_interval`` seconds."""
from __future__ import annotations

import time
from typing import Dict, List

import numpy as np

from returnn.log import log
from returnn.tf.reporting import progress_bar, progress_line, step_costs
from returnn.util.progress import remaining_seconds
from returnn.util.basic import hms


class ProgressReporter:
    """Called after every step (outside the timed step) and at epoch end."""

    def __init__(self, interval: float = 10.0):
        self.interval = float(interval)
        self.name, self.epoch, self.total = "train", 0, 0
        self.start = self.last_shown = time.perf_counter()
        self.last_step_time = self.start

    @classmethod
    def from_config(cls, config) -> "ProgressReporter":
        return cls(config.float("progress_interval"))

    def start_epoch(self, name: str, epoch: int, total_steps: int) -> None:
        self.name, self.epoch, self.total = name, epoch, max(1, total_steps)
        self.start = self.last_shown = self.last_step_time = time.perf_counter()

    def step(self, step: int, stats: np.ndarray, batch: Dict[str, np.ndarray], loss_names: List[str]) -> None:
        """``step`` counts from 1 (steps done so far)."""
        if log.verbosity < 4:
            return
        now = time.perf_counter()
        elapsed = now - self.start
        fraction = step / self.total
        if log.verbosity >= 5:
            sizes = ", ".join("max_size:%s %i" % (k, v.shape[1]) for k, v in sorted(batch.items())
                              if not k.endswith(":seq_len") and v.ndim >= 2)
            any_len = next(v for k, v in batch.items() if k.endswith(":seq_len"))
            info = "%s, num_seqs %i" % (sizes, len(any_len))
            print(progress_line(self.name, self.epoch, step - 1, step_costs(loss_names, stats), info,
                                now - self.last_step_time, elapsed, fraction), file=log.v5)
        elif log.console_is_terminal():
            if now - self.last_shown >= 0.2 or step == self.total:
                log.write_progress(progress_bar(self.name, self.epoch, fraction, elapsed))
                self.last_shown = now
        elif now - self.last_shown >= self.interval:
            print("%s epoch %i, step %i of %i, %.2f%% complete, elapsed %s, exp. remaining %s"
                  % (self.name, self.epoch, step, self.total, 100.0 * fraction, hms(elapsed),
                     hms(remaining_seconds(elapsed, fraction))), file=log.v4)
            self.last_shown = now
        self.last_step_time = time.perf_counter()

    def end_epoch(self) -> None:
        with log.lock:
            log.clear_progress()
