"""Scores and timing of an epoch, and the log lines in RETURNN's format."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np

from returnn.util.basic import hms
from returnn.util.progress import bar, remaining_seconds


class ScoreAccumulator:
    """Sums ``[loss_sum, norm, error_sum, error_norm]`` per loss layer over steps (and ranks)."""

    def __init__(self, loss_names: List[str]):
        self.loss_names = list(loss_names)
        self.totals = np.zeros((len(loss_names), 4), dtype=np.float64)

    def add(self, stats: np.ndarray) -> None:
        self.totals += stats

    def reduce(self, backend) -> None:
        """Sums the totals over ranks (call on all ranks)."""
        self.totals = backend.allreduce_host(self.totals.reshape(-1), "sum").reshape(self.totals.shape)

    def scores(self) -> Dict[str, float]:
        """Per-frame score and error: ``{"score": .., "error": ..}`` for one loss layer, else
        ``score_<layer>`` / ``error_<layer>`` per layer."""
        out: Dict[str, float] = {}
        single = len(self.loss_names) == 1
        for name, (loss, norm, err, err_norm) in zip(self.loss_names, self.totals):
            suffix = "" if single else "_" + name
            if norm > 0:  # losses without cost (edit_distance, as_is as_error) report only their error
                out["score" + suffix] = loss / norm
            if err_norm > 0:
                out["error" + suffix] = err / err_norm
        return out


def with_exp_scores(scores: Dict[str, float], loss_names: List[str]) -> Dict[str, float]:
    """``calculate_exp_loss``: each ``score...`` also as ``score...:exp`` = exp(score) (perplexity
    of a cross-entropy score), as RETURNN adds ``cost:<layer>:exp``. RETURNN names a score after its
    layer once it has more than one value, so a single loss's ``score`` becomes ``score_<layer>``
    (with ``score_<layer>:exp``); its ``error`` keeps the plain name."""
    out = {}
    for key, value in scores.items():
        if key.startswith("score"):
            if key == "score" and len(loss_names) == 1:
                key = "score_" + loss_names[0]
            out[key] = value
            out[key + ":exp"] = float(np.exp(min(value, 700.0))) if np.isfinite(value) else float(value)
        else:
            out[key] = value
    return out


def step_costs(loss_names: List[str], stats: np.ndarray) -> str:
    """'cost:output 1.15, error:output 0.79' for one step."""
    parts = []
    for name, (loss, norm, err, err_norm) in zip(loss_names, stats):
        if norm > 0:
            parts.append("cost:%s %s" % (name, _fmt(loss / norm)))
        if err_norm > 0:
            parts.append("error:%s %s" % (name, _fmt(err / err_norm)))
    return ", ".join(parts)


def format_scores(scores: Dict[str, float], with_colon: bool) -> str:
    """RETURNN's ``score: 0.32 error: 0.14`` (epoch line) or ``score 0.21 error 0.13`` (dev part); with
    several losses each group lists its values by layer, as RETURNN's ``format_score``:
    ``score: aux 0.5 output 0.3 error: aux 0.2 output 0.1`` (``calculate_exp_loss``'s value as ``exp``)."""
    if not scores:  # e.g. a dataset of only empty sequences: no frame to score
        return "no frames to score"
    sep = ": " if with_colon else " "
    parts = []
    for kind in ("score", "error"):
        group = {k[len(kind) + 1:]: v for k, v in scores.items() if k.startswith(kind + "_")}
        if kind in scores:
            group[""] = scores[kind]
        if not group:
            continue
        if len(group) == 1:
            text = _fmt(next(iter(group.values())))
        else:  # RETURNN sorts by its keys (cost:<layer>[:exp]) and shows the part after the last ':'
            text = " ".join("%s %s" % (label.split(":")[-1], _fmt(group[label])) for label in sorted(group))
        parts.append("%s%s%s" % (kind, sep, text))
    return " ".join(parts)


def _fmt(value: float) -> str:
    return ("%.6g" % value) if np.isfinite(value) else str(float(value))


@dataclass
class EpochTimer:
    """Where an epoch's wall time went. ``computing`` = time in the compiled step + parameter sync."""

    start: float = field(default_factory=time.perf_counter)
    step: float = 0.0
    sync: float = 0.0
    data_wait: float = 0.0
    end: Optional[float] = None

    def stop(self) -> None:
        self.end = time.perf_counter()

    @property
    def elapsed(self) -> float:
        return (self.end or time.perf_counter()) - self.start

    @property
    def computing_fraction(self) -> float:
        return (self.step + self.sync) / self.elapsed if self.elapsed > 0 else 0.0

    def as_array(self) -> np.ndarray:
        """[elapsed, step, sync, data_wait] for gathering over ranks."""
        return np.array([self.elapsed, self.step, self.sync, self.data_wait], dtype=np.float64)


def finished_line(name: str, epoch: int, steps: int, timer: EpochTimer) -> str:
    """``train epoch 1, finished after 100 steps, 0:00:03 elapsed (97.8% computing time)``."""
    return "%s epoch %i, finished after %i steps, %s elapsed (%.1f%% computing time)" % (
        name, epoch, steps, hms(timer.elapsed), 100.0 * timer.computing_fraction)


def breakdown_line(rank: Optional[int], figures: np.ndarray, comm_in_step: bool) -> str:
    """Split of an epoch's wall time: step, sync, data wait and the rest; per rank, or for the one
    process of a single-process run (``rank`` None: no rank, no parameter sync)."""
    elapsed, step, sync, wait = (float(v) for v in figures)
    other = max(0.0, elapsed - step - sync - wait)
    pct = (lambda v: 100.0 * v / elapsed if elapsed > 0 else 0.0)
    if rank is None:
        return "step %.1f%%, data wait %.1f%%, other %.1f%%" % (pct(step), pct(wait), pct(other))
    note = " (gradient allreduce is inside the step)" if comm_in_step else ""
    return ("  rank %i: step %.1f%%, param sync %.1f%%, data wait %.1f%%, other %.1f%%%s"
            % (rank, pct(step), pct(sync), pct(wait), pct(other), note))


def progress_line(name: str, epoch: int, step: int, costs: str, batch_info: str, sec_per_step: float,
                  elapsed: float, fraction: float) -> str:
    """The per-step line (log_verbosity 5)."""
    return ("%s epoch %i, step %i, %s, %s, %.3f sec/step, elapsed %s, exp. remaining %s, complete %.2f%%"
            % (name, epoch, step, costs, batch_info, sec_per_step, hms(elapsed),
               hms(remaining_seconds(elapsed, fraction)), 100.0 * fraction))


def progress_bar(name: str, epoch: int, fraction: float, elapsed: float, width: int = 30) -> str:
    """A one-line progress bar with ETA (log_verbosity 4 on a terminal)."""
    return "%s epoch %i %s %5.1f%% elapsed %s ETA %s" % (
        name, epoch, bar(fraction, width), 100.0 * fraction, hms(elapsed), hms(remaining_seconds(elapsed, fraction)))
