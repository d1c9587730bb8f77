"""TensorBoard scalars (rank 0): train cost/error per step, scores, learning rate and computing time
per epoch with the epoch as x axis. ``tf_log_dir`` is one run directory per training (default:
``tf-log`` next to the model); a resumed training appends to it.

Scalars are written with TensorFlow's own summary op and TensorBoard's scalar plugin tag, so they are
written even where the ``tensorboard`` package is not installed. Any failure to write (disk, a
broken install) is one warning and turns summaries off; it never ends a training.
"""
from __future__ import annotations

import os
import time
from typing import Dict, List, Optional, Tuple

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import summary_pb2

from returnn.log import log

_SCALAR_METADATA = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"))


def _scalar(tag: str, value: float, step: int) -> None:
    """One scalar as TensorBoard's scalar plugin writes it (without importing tensorboard)."""
    tf.summary.write(tag, tf.constant(value, tf.float32), step=step, metadata=_SCALAR_METADATA)


class SummaryLogger:
    """Writes scalars when enabled; every method is a no-op otherwise."""

    def __init__(self, log_dir: Optional[str], step_interval: int = 10, flush_seconds: float = 30.0):
        self.log_dir = log_dir
        self.step_interval = max(1, int(step_interval))
        self.flush_seconds = float(flush_seconds)
        self.writer = None
        if log_dir:
            self._guarded(lambda: setattr(self, "writer", tf.summary.create_file_writer(log_dir)))
        # Per-step scalars are buffered: eager summary ops inside the loop cost ~0.4% of a small step.
        self._pending: List[Tuple[int, str, float]] = []
        self._last_flush = time.monotonic()

    def _guarded(self, write) -> None:
        """Runs ``write``; a failure is one warning and disables summaries for the rest of the run."""
        try:
            write()
        except Exception as exc:  # noqa: BLE001 - summaries are optional: never end a training for them
            print("TensorBoard summaries to %s are off: %s: %s" % (self.log_dir, type(exc).__name__, exc),
                  file=log.warn)
            self.writer = None
            self._pending = []

    @staticmethod
    def directory(config) -> Optional[str]:
        """``tf_log_dir``, by default ``tf-log`` next to the model in training; None when off."""
        if config.has("tf_log_dir") and config.typed_value("tf_log_dir") in (None, "None"):
            return None  # tf_log_dir = None (``++tf_log_dir None`` on the command line) switches summaries off
        log_dir = config.value("tf_log_dir")
        if not log_dir:
            model = config.value("model")
            if not model or config.value("task") != "train":
                return None
            log_dir = os.path.join(os.path.dirname(os.path.abspath(model)), "tf-log")
        return log_dir

    @classmethod
    def from_config(cls, config, is_chief: bool) -> "SummaryLogger":
        if not is_chief:
            return cls(None)
        return cls(cls.directory(config), config.int("tf_log_step_interval"))

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
            self._guarded(self._write_pending)
        self._pending = []
        self._last_flush = time.monotonic()

    def _write_pending(self) -> None:
        with self.writer.as_default():
            for step, tag, value in self._pending:
                _scalar(tag, value, step)
        self.writer.flush()

    def epoch(self, epoch: int, learning_rate: float, train: Dict[str, float], evals: Dict[str, Dict[str, float]],
              computing_fraction: float) -> None:
        if self.writer is None:
            return
        self.flush_steps()
        values = {"epoch/learning_rate": learning_rate, "epoch/computing_time": 100.0 * computing_fraction}
        values.update(("epoch/train_%s" % key, value) for key, value in train.items())
        for name, scores in evals.items():
            values.update(("epoch/%s_%s" % (name, key), value) for key, value in scores.items())
        self._guarded(lambda: self._write_epoch(epoch, values))

    def _write_epoch(self, epoch: int, values: Dict[str, float]) -> None:
        with self.writer.as_default():
            for tag, value in values.items():
                _scalar(tag, float(value), epoch)
        self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.flush_steps()
            if self.writer is not None:
                self._guarded(self.writer.close)
            self.writer = None
