"""The steps of one training epoch: the compiled step on each prefetched batch, scores summed,
control flags acted on, and the parameter syncs of ``horovod_reduce_type = "param"``.

This loop runs between two compiled steps, on a CPU whose caches the step has just used, so it
is kept short: no context managers, no numpy work on the flags unless a flag is set, stats
summed in place (measured with ``benchmarks/engine_overhead.py``: 1.05x -> 1.03x
of a bare loop on the 12AX demo's 2.4 ms steps).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterable, List, Sequence

import numpy as np
import tensorflow as tf

from returnn.distributed.context import DistributedContext
from returnn.errors import NonFiniteScoreError
from returnn.tf.losses import alignment_error
from returnn.tf.reporting import EpochTimer, ScoreAccumulator
from returnn.tf.steps import FLAG_NAMES, NUM_FLAGS, StepFunctions

STOP = FLAG_NAMES.index("stop")
NONFINITE = FLAG_NAMES.index("nonfinite")
NO_FLAGS = np.zeros(NUM_FLAGS, np.float32)


class ParamSyncSchedule:
    """When ``horovod_reduce_type = "param"`` averages parameters: every ``horovod_param_sync_step``
    steps, or, with ``horovod_param_sync_time_diff``, when any rank's clock says so (agreed by a
    small collective each step), and always after the epoch's last step."""

    def __init__(self, dist: DistributedContext, num_steps: int):
        self.dist = dist
        self.num_steps = num_steps
        self.last_sync = time.monotonic()

    def due(self, step: int, timer: EpochTimer) -> bool:
        if step == self.num_steps:
            return True
        if self.dist.param_sync_time_diff is None:
            return step % self.dist.param_sync_step == 0
        late = 1.0 if time.monotonic() - self.last_sync >= self.dist.param_sync_time_diff else 0.0
        t0 = time.perf_counter()
        agreed = self.dist.backend.allreduce_host(np.array([late]), "max")[0] > 0
        timer.sync += time.perf_counter() - t0
        return agreed

    def synced(self) -> None:
        self.last_sync = time.monotonic()


def step_seeds(epoch: int, first_step: int, num_steps: int) -> List[tf.Tensor]:
    """The seed ``[epoch, global step]`` of each step of an epoch, made in one op: under a
    microsecond per step, against 8-25 us for a ``tf.constant`` per step."""
    if num_steps <= 0:
        return []
    seeds = np.stack([np.full(num_steps, epoch), np.arange(first_step, first_step + num_steps)], axis=1)
    return tf.unstack(tf.constant(seeds, tf.int64))


@dataclass
class EpochSteps:
    """What the steps of an epoch did: ``stopped`` when all ranks agreed on a stop request after
    ``steps`` steps (the caller saves the interrupted state)."""

    scores: ScoreAccumulator
    timer: EpochTimer
    steps: int
    stopped: bool = False


def run_train_steps(steps: StepFunctions, batches: Iterable, slices: Sequence, dataset, dist: DistributedContext,
                    stop_requested: Callable[[], bool], on_step: Callable[[int, np.ndarray, dict], None],
                    stop_on_nonfinite: bool, reset_updater_every: int = 0) -> EpochSteps:
    """Runs ``steps.train_step`` on each ``(batch, seed)`` of ``batches`` (one per entry of
    ``slices``, which name the sequences for error messages). ``on_step(step, stats, batch)``
    follows each step (heartbeat, progress, summaries); ``step`` counts from 1.
    ``reset_updater_every`` N: the optimizer's state is reset before steps 0, N, 2N, ... of the
    epoch (RETURNN's ``reset_updater_vars_mod_step``)."""
    acc = ScoreAccumulator(steps.train_loss_labels)
    param_sync = ParamSyncSchedule(dist, len(slices)) if dist.syncs_params else None
    zero_flags = tf.zeros([NUM_FLAGS], tf.float32)  # converted once: the usual value
    pending = np.zeros(NUM_FLAGS, np.float32)  # this rank's flags not yet agreed on
    pending_set = False  # whether any of them is set
    totals, train_step, split_stats, clock = acc.totals, steps.train_step, steps.split_stats, time.perf_counter
    timer = EpochTimer()
    step_time, step = 0.0, 0
    synced = 0  # steps before the last parameter sync: their flags are agreed on
    for batch, seed in batches:  # seed = [epoch, global step]: one batch per step
        if stop_requested():
            pending[STOP] = 1.0
            pending_set = True
        if reset_updater_every and step % reset_updater_every == 0:
            steps.reset_updater()
        t0 = clock()
        try:
            out = train_step(batch, seed, pending if pending_set else zero_flags).numpy()
        except tf.errors.InvalidArgumentError as exc:  # the alignment check: name the sequence
            error = alignment_error(exc, dataset, slices[step])
            if error is None:
                raise
            raise error from None
        step_time += clock() - t0
        step += 1
        stats, flags = split_stats(out)
        totals += stats
        if param_sync is not None:  # flags are agreed on only at syncs
            pending = np.maximum(pending, flags)
            pending_set = bool(pending.any())
            flags = NO_FLAGS
            if param_sync.due(step, timer):
                t0 = clock()
                flags = steps.sync_params(pending).numpy()
                timer.sync += clock() - t0
                param_sync.synced()
                pending = np.zeros(NUM_FLAGS, np.float32)
                pending_set = False
                synced, last_synced = step, synced
        on_step(step, stats, batch)
        if flags[NONFINITE] > 0 and stop_on_nonfinite:
            error = NonFiniteScoreError("Model seems broken, got inf or nan score.")
            # the steps (0-based) whose batches may hold the cause: this one, or all since the last sync
            error.steps = list(range(last_synced if param_sync is not None else step - 1, step))
            raise error
        if flags[STOP] > 0:
            timer.step = step_time
            return EpochSteps(acc, timer, step, stopped=True)
    timer.step = step_time
    timer.stop()
    return EpochSteps(acc, timer, step)

