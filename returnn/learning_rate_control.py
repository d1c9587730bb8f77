"""Per-epoch learning rate: constant, newbob (relative), newbob_abs, newbob_multi_epoch.

Newbob decays the rate (``newbob_learning_rate_decay``, not below ``min_learning_rate``) when the
error measure of the last epoch did not improve enough over the one before: relative change
``(new - old) / |new|`` (``/ |old|`` with ``newbob_relative_error_div_by_old``) above
``newbob_relative_error_threshold``, or absolute change ``new - old`` above ``newbob_error_threshold``
(``newbob_abs``). ``newbob_multi_epoch`` averages the relative changes over the last
``newbob_multi_num_epochs`` epochs (fewer at the start) and decides every
``newbob_multi_update_interval`` epochs (default: ``newbob_multi_num_epochs``). As in RETURNN.
When newbob decides not to decay, ``learning_rate_growth`` (``newbob_learning_rate_growth``,
default 1) multiplies the rate (``newbob_multi_epoch``: when the mean relative change is below
``newbob_relative_error_grow_threshold``, default ``newbob_relative_error_threshold``).
``learning_rate_control_min_num_epochs_per_new_lr`` = N keeps a new rate (and the first one) for at
least N epochs before the control may change it again. Which score it looks at: :meth:`LearningRateControl.error_key`.

The learning-rate file (``returnn/learning_rate_file.py``: RETURNN's format, parsed without
evaluating it) holds, per epoch, the learning rate used and the scores measured. It is written
atomically and reloaded on resume.
"""
from __future__ import annotations

import math
import os
from typing import Any, Dict, List, Optional, Union

from returnn.config import Config
from returnn.errors import ConfigError, output_write_error
from returnn.learning_rate_file import EpochData, format_learning_rate_file, read_learning_rate_file
from returnn.util.basic import atomic_write_text

__all__ = ["EpochData", "LearningRateControl", "format_learning_rate_file", "read_learning_rate_file"]

KNOWN_CONTROLS = ("constant", "newbob", "newbob_rel", "newbob_relative", "newbob_abs", "newbob_multi_epoch")


def _first_set(*values):
    """The first value that is not None."""
    return next((v for v in values if v is not None), None)


class LearningRateControl:
    """Chooses each epoch's learning rate from the scores of earlier epochs."""

    def __init__(self, kind: str = "constant", default_learning_rate: float = 1.0,
                 learning_rates: Union[None, List[float], Dict[int, float]] = None, filename: Optional[str] = None,
                 min_learning_rate: float = 0.0, decay: Any = 0.5, relative_error_threshold: float = -0.01,
                 error_threshold: float = -0.01, multi_num_epochs: int = 5, multi_update_interval: Optional[int] = None,
                 error_measure: Union[None, str, List[str]] = None, relative_error_div_by_old: bool = False,
                 relative_error_relative_lr: bool = False, min_num_epochs_per_new_lr: int = 0, growth: Any = 1.0,
                 relative_error_grow_threshold: Optional[float] = None):
        if kind not in KNOWN_CONTROLS:
            raise ConfigError("config key 'learning_rate_control': unknown %r (known: %s)" % (kind, ", ".join(KNOWN_CONTROLS)))
        self.kind = kind
        self.default_learning_rate = float(default_learning_rate)
        # RETURNN's learning_rates: a list (epochs 1, 2, ...) or {epoch: rate}; a listed epoch takes its rate
        # unless the learning-rate file has one for it
        if isinstance(learning_rates, dict):
            self.learning_rates = {int(e): float(v) for e, v in learning_rates.items()}
        else:
            self.learning_rates = {i: float(v) for i, v in enumerate(learning_rates or [], 1)}
        self.filename = filename
        self.min_learning_rate = float(min_learning_rate)
        # a factor, or RETURNN's function lr -> new lr
        self.decay = decay if callable(decay) else float(decay)
        # RETURNN's learning_rate_growth: applied when newbob does not decay (multi-epoch: below the grow threshold)
        self.growth = growth if callable(growth) else float(growth)
        self.relative_error_grow_threshold = float(_first_set(relative_error_grow_threshold, relative_error_threshold))
        self.relative_error_threshold = float(relative_error_threshold)
        self.error_threshold = float(error_threshold)
        self.multi_num_epochs = max(1, int(multi_num_epochs))
        self.multi_update_interval = max(1, int(multi_update_interval if multi_update_interval is not None
                                                else self.multi_num_epochs))
        self.error_measure = error_measure
        self.relative_error_div_by_old = bool(relative_error_div_by_old)
        self.relative_error_relative_lr = bool(relative_error_relative_lr)
        self.min_num_epochs_per_new_lr = int(min_num_epochs_per_new_lr or 0)
        self.epochs: Dict[int, EpochData] = {}
        if filename and os.path.exists(filename):
            self.epochs = read_learning_rate_file(filename)
        # RETURNN: every listed epoch is in the file from the first save on (its rate, no scores yet);
        # one the file has a rate for keeps that
        for epoch, rate in sorted(self.learning_rates.items()):
            self.set_default_learning_rate_for_epoch(epoch, rate)

    @classmethod
    def from_config(cls, config: Config) -> "LearningRateControl":
        """Reads RETURNN's option names."""
        learning_rate = config.float("learning_rate")
        return cls(
            kind=config.value("learning_rate_control"),
            default_learning_rate=learning_rate,
            learning_rates=config.typed_value("learning_rates"),
            filename=config.value("learning_rate_file"),
            min_learning_rate=config.float("min_learning_rate"),
            decay=_decay_from_config(config),
            relative_error_threshold=config.float("newbob_relative_error_threshold"),
            error_threshold=config.float("newbob_error_threshold"),
            multi_num_epochs=config.int("newbob_multi_num_epochs"),
            multi_update_interval=_first_set(config.int("newbob_multi_update_interval"),
                                             config.int("newbob_multi_num_epochs")),
            error_measure=config.typed_value("learning_rate_control_error_measure"),
            relative_error_div_by_old=config.bool("newbob_relative_error_div_by_old"),
            relative_error_relative_lr=config.bool("learning_rate_control_relative_error_relative_lr"),
            min_num_epochs_per_new_lr=config.int("learning_rate_control_min_num_epochs_per_new_lr"),
            growth=_growth_from_config(config),
            relative_error_grow_threshold=config.float("newbob_relative_error_grow_threshold"),
        )

    # ---- per-epoch learning rate
    def get_learning_rate_for_epoch(self, epoch: int) -> float:
        """The rate for ``epoch`` (remembered, so a resumed run uses the same one)."""
        if epoch in self.epochs:
            return self.epochs[epoch].learning_rate
        lr = self._calc_learning_rate(epoch)
        self.epochs[epoch] = EpochData(lr)
        return lr

    def set_default_learning_rate_for_epoch(self, epoch: int, learning_rate: float) -> float:
        """Fixes the rate of ``epoch`` unless it has one already (e.g. from the file of a resumed
        run); returns the rate in effect. Pretraining uses it for its constant rate."""
        if epoch not in self.epochs or not self.epochs[epoch].learning_rate:
            if epoch in self.epochs:
                self.epochs[epoch].learning_rate = float(learning_rate)
            else:
                self.epochs[epoch] = EpochData(float(learning_rate))
        return self.epochs[epoch].learning_rate

    def _calc_learning_rate(self, epoch: int) -> float:
        if epoch in self.learning_rates:
            return self.learning_rates[epoch]
        held = self._held_learning_rate(epoch)
        if held is not None:
            return held
        if epoch <= 1:
            return self.default_learning_rate
        last_lr = self.get_learning_rate_for_epoch(epoch - 1) if epoch - 1 >= 1 else self.default_learning_rate
        if self.kind == "constant":  # RETURNN: the rate of the epoch before (a listed or #config one stays)
            return last_lr
        decision = self._decision(epoch)
        if decision == "decay":
            new_lr = self.decay(last_lr) if callable(self.decay) else last_lr * self.decay
            return max(float(new_lr), self.min_learning_rate)
        if decision == "grow":  # RETURNN: no lower or upper bound on a grown rate
            return float(self.growth(last_lr)) if callable(self.growth) else last_lr * self.growth
        return last_lr

    def _held_learning_rate(self, epoch: int) -> Optional[float]:
        """With ``min_num_epochs_per_new_lr`` = N: the last rate, while it has been used for fewer
        than N of the (up to N) epochs before ``epoch``."""
        n = self.min_num_epochs_per_new_lr
        if n <= 1:
            return None
        last = [self.epochs[e].learning_rate for e in sorted(e for e in self.epochs if e < epoch)[-n:]]
        if len(set(last)) >= 2 or 0 < len(last) < n:
            return last[-1]
        return None

    def _decision(self, epoch: int) -> Optional[str]:
        """Newbob's decision for ``epoch`` from the errors of the epochs before it: "decay", "grow"
        (RETURNN: whenever it does not decay; newbob_multi_epoch: when the mean relative error is
        below the grow threshold) or None (no decision: too few scores)."""
        if self.kind == "newbob_multi_epoch":
            if (epoch - 1) % self.multi_update_interval != 0:
                return None
            # The last N+1 epochs give N relative changes; at the start, use those there are.
            epochs = list(range(max(1, epoch - self.multi_num_epochs - 1), epoch))
            if len(epochs) < 2:
                return None
            rels = [self._relative_change(a, b) for a, b in zip(epochs[:-1], epochs[1:])]
            if any(r is None for r in rels):
                return None
            mean = sum(rels) / len(rels)
            if self.relative_error_threshold < mean < self.relative_error_grow_threshold:  # RETURNN asserts
                raise ConfigError("epoch %i: newbob_multi_epoch's mean relative error %g is above "
                                  "newbob_relative_error_threshold %g (decay) and below "
                                  "newbob_relative_error_grow_threshold %g (grow); RETURNN fails on both (assert)"
                                  % (epoch, mean, self.relative_error_threshold, self.relative_error_grow_threshold))
            if mean > self.relative_error_threshold:
                return "decay"
            return "grow" if mean < self.relative_error_grow_threshold else None
        if epoch < 3:
            return None
        if self.kind == "newbob_abs":
            old, new = self._error(epoch - 2), self._error(epoch - 1)
            if old is None or new is None or self.error_key(epoch - 2) != self.error_key(epoch - 1):
                return None
            return "decay" if (new - old) > self.error_threshold else "grow"
        rel = self._relative_change(epoch - 2, epoch - 1)
        if rel is None:
            return None
        return "decay" if rel > self.relative_error_threshold else "grow"

    def last_best_epoch(self, last_epoch: int, first_epoch: int = 1, only_last_epochs: Optional[int] = None,
                        filter_score: float = float("inf"), only_last_n: int = -1,
                        min_score_dist: float = 0.0) -> Optional[int]:
        """RETURNN's ``get_last_best_epoch``: among the epochs ``first_epoch .. last_epoch`` with a
        score of the same error key as the newest one, at most ``filter_score``, the last
        ``only_last_n`` of them, better than the newest by more than ``min_score_dist``: the best
        (the earliest of equals); None if none."""
        if only_last_epochs:
            first_epoch = max(first_epoch, last_epoch - only_last_epochs + 1)
        if first_epoch > last_epoch:
            return None
        values = [(self.error_key(e), self._error(e), e) for e in range(first_epoch, last_epoch + 1)]
        values = [(k, v, e) for k, v, e in values if v is not None]
        if not values:
            return None
        last_key, latest = values[-1][0], values[-1][1]
        scored = [(v, e) for k, v, e in values if k == last_key and v <= filter_score]
        if not scored:
            return None
        if only_last_n >= 1:
            scored = scored[-only_last_n:]
        scored = [(v, e) for v, e in scored if v + min_score_dist < latest]
        return min(scored)[1] if scored else None

    def epoch_error(self, epoch: int) -> Optional[float]:
        """The score the control looks at for ``epoch`` (None without scores)."""
        return self._error(epoch)

    def _relative_change(self, old_epoch: int, new_epoch: int) -> Optional[float]:
        """Relative change of the error measure from ``old_epoch`` to ``new_epoch`` (negative = better)."""
        old, new = self._error(old_epoch), self._error(new_epoch)
        if old is None or new is None or self.error_key(old_epoch) != self.error_key(new_epoch):
            return None
        denom = abs(old) if self.relative_error_div_by_old else abs(new)
        rel = (new - old) / denom if denom else 0.0
        if self.relative_error_relative_lr:  # a smaller rate is expected to improve less
            lr = self.epochs[new_epoch].learning_rate
            if lr > 0 and self.default_learning_rate > 0:
                rel /= lr / self.default_learning_rate
        return rel

    def error_key(self, epoch: int) -> Optional[str]:
        """The score the control looks at, RETURNN's ``get_error_key``: each of
        ``learning_rate_control_error_measure`` (or it with ``_output``), else ``dev_score`` or
        ``dev_score_output``, the sub-layer score of ``output`` (``dev_score_output/output``, or one starting with
        ``dev_score_output/output_``), another ``dev_score_output/`` one, any ``dev_`` value (by name),
        ``train_score`` or ``train_score_output``, and finally the alphabetically first key. A measure
        ``name:exp`` is the score RETURNN records with ``calculate_exp_loss`` (absent: the next candidate)."""
        data = self.epochs.get(epoch)
        if data is None or not data.error:
            return None
        errors = data.error
        if len(errors) == 1 and "old_format_score" in errors:
            return "old_format_score"
        preferred = []
        for measure in self._measures():
            preferred += [measure, measure + "_output"]
        for key in preferred + ["dev_score", "dev_score_output"]:
            if key in errors:
                return key
        keys = sorted(errors)
        for test in (lambda k: k == "dev_score_output/output" or k.startswith("dev_score_output/output_"),
                     lambda k: k.startswith("dev_score_output/"), lambda k: k.startswith("dev_")):
            found = [k for k in keys if test(k)]
            if found:
                return found[0]
        for key in ("train_score", "train_score_output"):
            if key in errors:
                return key
        return keys[0]

    def _measures(self) -> List[str]:
        """The error measures (a list: RETURNN tries them in order)."""
        return list(self.error_measure) if isinstance(self.error_measure, (list, tuple)) else \
            [self.error_measure] if self.error_measure else []

    def _error(self, epoch: int) -> Optional[float]:
        key = self.error_key(epoch)
        return self.epochs[epoch].error[key] if key else None

    # ---- scores and the file
    def set_epoch_error(self, epoch: int, errors: Dict[str, float]) -> None:
        """Records scores of ``epoch`` (merged with earlier ones of the same epoch). A non-finite
        score is recorded as it is (RETURNN's learning-rate file holds ``float('nan')``) and used
        by RETURNN's formulas, and the log says what that means: a comparison with nan is false,
        so a nan score never lowers the rate; ``cleanup_old_models`` ranks it worst (see
        docs/reliability.md)."""
        if epoch not in self.epochs:
            self.get_learning_rate_for_epoch(epoch)
        self.epochs[epoch].error.update({k: float(v) for k, v in errors.items()})
        bad = ["%s %s" % (k, float(v)) for k, v in sorted(errors.items()) if not math.isfinite(float(v))]
        if bad:
            from returnn.log import log
            print("learning-rate control: epoch %i has non-finite scores (%s): kept and used as RETURNN does (a "
                  "comparison with nan is false, so nan never lowers the learning rate); cleanup_old_models ranks "
                  "them worst" % (epoch, ", ".join(bad)), file=log.v2)

    def set_epoch_meta(self, epoch: int, meta: Dict[str, Any]) -> None:
        """Records RETURNN's extra information of ``epoch`` (written as ``':meta:name'`` entries of its
        ``error`` dict): the global step at its start, the effective learning rate, its number of
        train steps and their wall time in seconds."""
        if epoch not in self.epochs:
            self.get_learning_rate_for_epoch(epoch)
        self.epochs[epoch].meta.update(meta)

    def save(self) -> None:
        """Writes the learning-rate file atomically (call on rank 0 only)."""
        if self.filename:
            try:
                atomic_write_text(self.filename, format_learning_rate_file(self.epochs))
            except OSError as exc:  # a full disk: one line; the file of the epoch before is intact
                from returnn.util.safe_files import UnsafePathError
                if isinstance(exc, UnsafePathError):
                    raise
                raise output_write_error(self.filename, exc, "learning-rate file") from None

    def last_epoch_with_error(self) -> int:
        """Newest epoch that has scores, or 0."""
        done = [e for e, d in self.epochs.items() if d.error]
        return max(done) if done else 0


def _growth_from_config(config: Config) -> Any:
    """``learning_rate_growth`` (RETURNN reads it first), else ``newbob_learning_rate_growth``: a
    factor or a function lr -> new lr."""
    for key in ("learning_rate_growth", "newbob_learning_rate_growth"):
        value = config.typed_value(key)
        if callable(value):
            return value
        if value is not None:
            return config.float(key)
    return 1.0


def _decay_from_config(config: Config) -> Any:
    """``learning_rate_decay`` (RETURNN reads it first), else ``newbob_learning_rate_decay``: a
    factor or a function lr -> new lr."""
    for key in ("learning_rate_decay", "newbob_learning_rate_decay"):
        value = config.typed_value(key)
        if callable(value):
            return value
        if value is not None:
            return config.float(key)
    return config.float("newbob_learning_rate_decay")


def parse_learning_rates_string(config: Config) -> None:
    """``learning_rates`` given as a string (RETURNN's JSON configs, e.g. its mdlstm demo:
    ``"learning_rates": "{1: 0.0005, 25: 0.0003}"``): RETURNN evaluates it and requires a dict; here
    it is read as a Python literal (never evaluated) and must be a dict."""
    value = config.typed_dict.get("learning_rates")
    if not isinstance(value, str):
        return
    import ast
    try:
        parsed = ast.literal_eval(value.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        parsed = None
    if not isinstance(parsed, dict):
        raise ConfigError("config key 'learning_rates': a string must be a dict literal {epoch: rate, ...} "
                          "(RETURNN evaluates it and requires a dict), got %r" % value[:80])
    config.set("learning_rates", parsed)
