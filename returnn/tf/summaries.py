"""TensorBoard scalars (rank 0): train cost/error per step, scores, learning rate and computing time
per epoch with the epoch as x axis. ``tf_log_dir`` is one run directory per training (default:
``tf-log`` next to the model); a resumed training appends to it."""
from __future__ import annotations

import os
import time
from typing import Dict, List, Optional, Tuple

import numpy as np
import tensorflow as tf


class SummaryLogger:
    """Writes scalars when enabled; every method is a no-op otherwise."""

    def __init__(self, log_dir: Optional[str], step_interval: int = 10, flush_seconds: float = 30.0):
        self.log_dir = log_dir
        self.step_interval = max(1, int(step_interval))
        self.flush_seconds = float(flush_seconds)
        self.writer = tf.summary.create_file_writer(log_dir) if log_dir else None
        # Per-step scalars are buffered: eager summary ops inside the loop cost ~0.4% of a small step.
        self._pending: List[Tuple[int, str, float]] = []
        self._last_flush = time.monotonic()

    @classmethod
    def from_config(cls, config, is_chief: bool) -> "SummaryLogger":
        if not is_chief or config.typed_value("tf_log_dir", "") is None:
            return cls(None)
        log_dir = config.value("tf_log_dir", None)
        if not log_dir:
            model = config.value("model", None)
            if not model or config.value("task", "train") != "train":
                return cls(None)
            log_dir = os.path.join(os.path.dirname(os.path.abspath(model)), "tf-log")
        return cls(log_dir, config.int("tf_log_step_interval", 10))

    def train_step(self, global_step: int, stats: np.ndarray, loss_names: List[str]) -> None:
        if self.writer is None or global_step % self.step_interval:
            return
        for name, (loss, norm, err, err_norm) in zip(loss_names, stats):
            if norm > 0:
                self._pending.append((global_step, "train/cost:%s" % name, float(loss / norm)))
            if err_norm > 0:
                self._pending.append((global_step, "train/error:%s" % name, float(err / err_norm)))
        if time.monotonic() - self._last_flush > self.flush_seconds:
            self.flush_steps()

    def flush_steps(self) -> None:
        """Writes the buffered per-step scalars."""
        if self.writer is not None and self._pending:
            with self.writer.as_default():
                for step, tag, value in self._pending:
                    tf.summary.scalar(tag, value, step=step)
            self.writer.flush()
        self._pending = []
        self._last_flush = time.monotonic()

    def epoch(self, epoch: int, learning_rate: float, train: Dict[str, float], evals: Dict[str, Dict[str, float]],
              computing_fraction: float) -> None:
        if self.writer is None:
            return
        self.flush_steps()
        with self.writer.as_default(step=epoch):
            tf.summary.scalar("epoch/learning_rate", learning_rate)
            tf.summary.scalar("epoch/computing_time", 100.0 * computing_fraction)
            for key, value in train.items():
                tf.summary.scalar("epoch/train_%s" % key, value)
            for name, scores in evals.items():
                for key, value in scores.items():
                    tf.summary.scalar("epoch/%s_%s" % (name, key), value)
        self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.flush_steps()
            self.writer.close()
            self.writer = None
