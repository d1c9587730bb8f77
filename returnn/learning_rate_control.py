"""Per-epoch learning rate: constant, newbob (relative), newbob_abs, newbob_multi_epoch.

The learning-rate file holds, per epoch, the learning rate used and the scores measured, in
RETURNN's format (a Python dict literal of ``EpochData(learningRate=..., error={...})``), so files
move between the two projects. It is written atomically and reloaded on resume.
"""
from __future__ import annotations

import ast
import os
from typing import Dict, List, Optional

from returnn.config import Config
from returnn.errors import ConfigError
from returnn.util.basic import atomic_write_text


class EpochData:
    """Learning rate and scores of one epoch."""

    def __init__(self, learningRate: float, error: Optional[Dict[str, float]] = None):  # noqa: N803 (file format)
        self.learning_rate = float(learningRate)
        if isinstance(error, (int, float)):  # very old files: one score
            error = {"old_format_score": float(error)}
        self.error: Dict[str, float] = dict(error or {})

    def __repr__(self) -> str:
        items = "".join("%r: %r,\n" % (k, float(v)) for k, v in sorted(self.error.items()))
        return "EpochData(learningRate=%r, error={\n%s})" % (self.learning_rate, items)


def format_learning_rate_file(epochs: Dict[int, EpochData]) -> str:
    """The file text for ``epochs``."""
    return "{\n" + "".join("%i: %r,\n" % (ep, epochs[ep]) for ep in sorted(epochs)) + "}\n"


def read_learning_rate_file(filename: str) -> Dict[int, EpochData]:
    """Parses a learning-rate file (ours or RETURNN's)."""
    with open(filename, encoding="utf8") as f:
        text = f.read()
    try:
        tree = ast.parse(text, filename, mode="eval")
    except SyntaxError as exc:
        raise ConfigError("%s:%s: cannot parse learning-rate file: %s" % (filename, exc.lineno, exc.msg))
    try:
        value = eval(compile(tree, filename, "eval"), {"__builtins__": {}},  # noqa: S307 (own file format)
                     {"EpochData": EpochData, "nan": float("nan"), "inf": float("inf")})
    except Exception as exc:
        raise ConfigError("%s: bad learning-rate file: %s" % (filename, exc))
    if not isinstance(value, dict):
        raise ConfigError("%s: learning-rate file must hold a dict" % filename)
    return {int(k): v for k, v in value.items()}


KNOWN_CONTROLS = ("constant", "newbob", "newbob_rel", "newbob_relative", "newbob_abs", "newbob_multi_epoch")


class LearningRateControl:
    """Chooses each epoch's learning rate from the scores of earlier epochs."""

    def __init__(self, kind: str = "constant", default_learning_rate: float = 1.0,
                 learning_rates: Optional[List[float]] = None, filename: Optional[str] = None,
                 min_learning_rate: float = 0.0, decay: float = 0.5, relative_error_threshold: float = -0.01,
                 error_threshold: float = -0.01, multi_num_epochs: int = 5, multi_update_interval: int = 1,
                 error_measure: Optional[str] = None, relative_error_div_by_old: bool = True):
        if kind not in KNOWN_CONTROLS:
            raise ConfigError("config key 'learning_rate_control': unknown %r (known: %s)" % (kind, ", ".join(KNOWN_CONTROLS)))
        self.kind = kind
        self.default_learning_rate = float(default_learning_rate)
        self.learning_rates = [float(v) for v in (learning_rates or [])]
        self.filename = filename
        self.min_learning_rate = float(min_learning_rate)
        self.decay = float(decay)
        self.relative_error_threshold = float(relative_error_threshold)
        self.error_threshold = float(error_threshold)
        self.multi_num_epochs = max(1, int(multi_num_epochs))
        self.multi_update_interval = max(1, int(multi_update_interval))
        self.error_measure = error_measure
        self.relative_error_div_by_old = relative_error_div_by_old
        self.epochs: Dict[int, EpochData] = {}
        if filename and os.path.exists(filename):
            self.epochs = read_learning_rate_file(filename)

    @classmethod
    def from_config(cls, config: Config) -> "LearningRateControl":
        """Reads RETURNN's option names."""
        learning_rate = config.float("learning_rate", 1.0)
        return cls(
            kind=config.value("learning_rate_control", "constant"),
            default_learning_rate=learning_rate,
            learning_rates=config.typed_value("learning_rates"),
            filename=config.value("learning_rate_file", None),
            min_learning_rate=config.float("min_learning_rate", 0.0),
            decay=config.float("newbob_learning_rate_decay", 0.5),
            relative_error_threshold=config.float("newbob_relative_error_threshold", -0.01),
            error_threshold=config.float("newbob_error_threshold", -0.01),
            multi_num_epochs=config.int("newbob_multi_num_epochs", 5),
            multi_update_interval=config.int("newbob_multi_update_interval", 1),
            error_measure=config.value("learning_rate_control_error_measure", None),
            relative_error_div_by_old=config.bool("newbob_relative_error_div_by_old", True),
        )

    # ---- per-epoch learning rate
    def get_learning_rate_for_epoch(self, epoch: int) -> float:
        """The rate for ``epoch`` (remembered, so a resumed run uses the same one)."""
        if epoch in self.epochs:
            return self.epochs[epoch].learning_rate
        lr = self._calc_learning_rate(epoch)
        self.epochs[epoch] = EpochData(lr)
        return lr

    def _calc_learning_rate(self, epoch: int) -> float:
        if self.learning_rates and epoch <= len(self.learning_rates):
            return self.learning_rates[epoch - 1]
        if epoch <= 1:
            return self.default_learning_rate
        last_lr = self.get_learning_rate_for_epoch(epoch - 1) if epoch - 1 >= 1 else self.default_learning_rate
        if self.kind == "constant":
            return last_lr if self.learning_rates else self.default_learning_rate
        if self._should_decay(epoch):
            return max(last_lr * self.decay, self.min_learning_rate)
        return last_lr

    def _should_decay(self, epoch: int) -> bool:
        """Newbob decision for ``epoch`` from the errors of the epochs before it."""
        if self.kind == "newbob_multi_epoch":
            if (epoch - 1) % self.multi_update_interval != 0:
                return False
            rels = [self._relative_improvement(e) for e in range(epoch - self.multi_num_epochs, epoch)]
            if any(r is None for r in rels):
                return False
            return sum(rels) / len(rels) > self.relative_error_threshold
        old, new = self._error(epoch - 2), self._error(epoch - 1)
        if old is None or new is None:
            return False
        if self.kind == "newbob_abs":
            return (new - old) > self.error_threshold
        return self._relative(old, new) > self.relative_error_threshold

    def _relative_improvement(self, epoch: int) -> Optional[float]:
        old, new = self._error(epoch - 1), self._error(epoch)
        if old is None or new is None:
            return None
        return self._relative(old, new)

    def _relative(self, old: float, new: float) -> float:
        denom = abs(old) if self.relative_error_div_by_old else abs(new)
        return (new - old) / denom if denom else 0.0

    def error_key(self, epoch: int) -> Optional[str]:
        """The score the control looks at: ``learning_rate_control_error_measure`` or the first
        dev score, else the train score."""
        data = self.epochs.get(epoch)
        if data is None or not data.error:
            return None
        if self.error_measure:
            return self.error_measure if self.error_measure in data.error else None
        for prefix in ("dev_score", "train_score"):
            keys = sorted(k for k in data.error if k.startswith(prefix))
            if keys:
                return keys[0]
        return sorted(data.error)[0]

    def _error(self, epoch: int) -> Optional[float]:
        key = self.error_key(epoch)
        return self.epochs[epoch].error[key] if key else None

    # ---- scores and the file
    def set_epoch_error(self, epoch: int, errors: Dict[str, float]) -> None:
        """Records scores of ``epoch`` (merged with earlier ones of the same epoch)."""
        if epoch not in self.epochs:
            self.get_learning_rate_for_epoch(epoch)
        self.epochs[epoch].error.update({k: float(v) for k, v in errors.items()})

    def save(self) -> None:
        """Writes the learning-rate file atomically (call on rank 0 only)."""
        if self.filename:
            atomic_write_text(self.filename, format_learning_rate_file(self.epochs))

    def last_epoch_with_error(self) -> int:
        """Newest epoch that has scores, or 0."""
        done = [e for e, d in self.epochs.items() if d.error]
        return max(done) if done else 0
