"""What a checkpoint records so that a resumed run continues exactly, and the checks on resume.

Every checkpoint stores a small run state (JSON, ``CheckpointManager.run_state``):

* ``ranks``, ``distribution`` (``shard``: one global batch order cut among the ranks;
  ``own_order``: each rank orders the data with its own seed), ``order`` (a digest of the epoch's
  batch order) and ``batches`` (its length) — an interrupted state's position counts batches of
  that order, so it is only meaningful for the same order;
* ``learning_rates``: the learning-rate control's epochs in the learning-rate file's format, so the
  schedule survives a lost or replaced learning-rate file;
* ``epoch_steps`` and ``epoch_scores`` (an interrupted state's): the steps and the score sums (per loss,
  over ranks) of the interrupted epoch trained so far, so the learning-rate file's entry of that epoch
  (scores, ``:meta:`` entries) is that of the whole epoch, as RETURNN's, which trains it again whole.
"""
from __future__ import annotations

import hashlib
import math
import os
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from returnn.errors import ConfigError
from returnn.learning_rate_control import LearningRateControl
from returnn.learning_rate_file import EpochData, format_learning_rate_file, parse_learning_rate_text
from returnn.log import log


def order_digest(slices: Sequence[Any]) -> str:
    """A digest of an epoch's batch order (sequence indices and frame ranges of every batch)."""
    h = hashlib.sha1()
    for batch in slices:
        h.update(repr(batch.entries()).encode("ascii"))
        h.update(b";")
    return h.hexdigest()[:16]


def make_run_state(ranks: int, shards: bool, order: Optional[str], batches: int,
                   lr_control: LearningRateControl) -> Dict[str, Any]:
    """The run state to store with a checkpoint."""
    return {"ranks": ranks, "distribution": "shard" if shards or ranks == 1 else "own_order", "order": order,
            "batches": batches, "learning_rates": format_learning_rate_file(lr_control.epochs)}


def stored_steps(stored: Dict[str, Any], position: int) -> int:
    """Steps of an interrupted epoch trained before ``position`` (its batches), for a state saved before
    ``epoch_steps`` was recorded: one global batch per rank and step when the ranks shared one order."""
    ranks = int(stored.get("ranks", 1)) if stored.get("distribution", "shard") == "shard" else 1
    return position // max(1, ranks)


def empty_epoch_message(name: str, epoch: int, batches: int, ranks: int, dataset: Any = None) -> str:
    """Why an epoch cannot be trained: no batches at all (also when ``dataset``'s sequences of the
    epoch are all of length 0), or fewer than ranks."""
    lengths = np.asarray(dataset.seq_lengths_in_order()) if dataset is not None and not batches else np.zeros(0)
    all_empty_seqs = int(lengths.shape[0]) if lengths.size and not lengths.any() else 0
    if not batches and all_empty_seqs:
        return ("train dataset %r has %i sequences in epoch %i, all of length 0: there is no frame to train on"
                % (name, all_empty_seqs, epoch))
    if not batches:
        return ("train dataset %r has no sequences in epoch %i (num_seqs 0, partition_epoch larger than the data, "
                "or every sequence longer than max_seq_length)" % (name, epoch))
    return ("train dataset %r has %i batch(es) in epoch %i, fewer than the %i ranks: every rank needs at least one "
            "(use fewer ranks, a smaller batch_size or max_seqs, or more data)" % (name, batches, epoch, ranks))


def map_resume_position(stored: Dict[str, Any], position: int, ranks: int, shards: bool, order: str,
                        batches: int, prefix: str) -> int:
    """Where in this run's global batch order the interrupted epoch continues: ``position`` when
    the order is the same. Another rank count is re-mapped (the remaining batches are cut among
    the new ranks) with a warning; another order is a ConfigError naming the checkpoint."""
    if position <= 0:
        return 0
    if not stored:  # written before the run state existed: position counted steps per rank
        return position * (ranks if shards else 1)
    if stored.get("order") != order or stored.get("batches") != batches:
        raise ConfigError(
            "checkpoint %s was saved %i batches into an epoch whose batch order differs from this run's "
            "(%s of %s batches now): batch_size, max_seqs, chunking, max_seq_length, seq_ordering or the "
            "training data changed. Run with the original options to finish that epoch, or with ++start_epoch N "
            "to train epoch N again from its start" % (prefix, position, batches, stored.get("batches")))
    old_ranks, distribution = int(stored.get("ranks", ranks)), stored.get("distribution", "shard")
    if old_ranks != ranks:
        if distribution != "shard" or not (shards or ranks == 1):
            raise ConfigError(
                "checkpoint %s was saved mid-epoch by %i ranks, each with its own batch order "
                "(horovod_dataset_distribution); it continues only on %i ranks (or use ++start_epoch N)"
                % (prefix, old_ranks, old_ranks))
        print("continuing the interrupted epoch after batch %i of %i of its batch order on %i ranks "
              "(it was interrupted on %i ranks)" % (position, batches, ranks, old_ranks), file=log.warn)
    return position


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def _differing_epochs(a: Dict[int, EpochData], b: Dict[int, EpochData], upto: int) -> List[int]:
    out = []
    for epoch in range(1, upto + 1):
        x, y = a.get(epoch), b.get(epoch)
        if x is None or y is None:
            if x is not y:
                out.append(epoch)
            continue
        if not _same(x.learning_rate, y.learning_rate) or sorted(x.error) != sorted(y.error) or \
                not all(_same(x.error[k], y.error[k]) for k in x.error):
            out.append(epoch)
    return out


def reconcile_learning_rates(control: LearningRateControl, stored: Dict[str, Any], completed: int,
                             prefix: str) -> None:
    """Checks the learning-rate file against the state stored in checkpoint ``prefix``: a missing
    file (or none configured) takes the stored state; a file that disagrees on the completed epochs
    wins, with a warning naming the epochs."""
    text = stored.get("learning_rates")
    if not isinstance(text, str):
        return  # a checkpoint written before the run state existed
    saved = parse_learning_rate_text(text, "%s (stored learning-rate state)" % prefix)
    if not control.filename:
        control.epochs = saved
        return
    if not os.path.exists(control.filename):
        if saved:
            print("learning-rate file %s is missing; using the learning rates and scores of epochs %s stored in %s"
                  % (control.filename, _ranges(sorted(saved)), prefix), file=log.warn)
        control.epochs = saved
        return
    differ = _differing_epochs(control.epochs, saved, completed)
    if differ:
        print("learning-rate file %s disagrees with checkpoint %s on epoch(s) %s (rates or scores); using the file"
              % (control.filename, prefix, _ranges(differ)), file=log.warn)


def _ranges(epochs: List[int]) -> str:
    """[1, 2, 3, 5] -> '1-3, 5'."""
    groups: List[List[int]] = []
    for e in epochs:
        if groups and groups[-1][1] == e - 1:
            groups[-1][1] = e
        else:
            groups.append([e, e])
    return ", ".join(str(a) if a == b else "%i-%i" % (a, b) for a, b in groups)
