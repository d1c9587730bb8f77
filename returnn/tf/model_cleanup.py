"""``cleanup_old_models``: delete epoch checkpoints nobody needs, with RETURNN's keep policy.

Kept: the last ``keep_last_n`` epochs (default 2, at least 1: the newest is never deleted), for
every score in the learning-rate file the ``keep_best_n`` best epochs (default 4, at least 1: the
best is never deleted), and the epochs of ``keep`` (default: a sparse pattern over the run, e.g.
every 4th epoch plus 5, 10, 20, ... for runs up to 10 epochs; see :func:`default_keep_pattern`).
Nothing is deleted while there are no more checkpoints than ``max(keep_last_n, keep_best_n)``.
``cleanup_old_models = True`` uses the defaults; a dict sets any of the three options.
"""
from __future__ import annotations

import itertools
import math
import os
from typing import Any, Dict, Iterable, List, Mapping, Set

from returnn.errors import ConfigError
from returnn.tf.checkpoint import checkpoint_files, existing_epoch_prefix, list_epoch_checkpoints
from returnn.util.basic import fsync_dir

OPTIONS = ("keep_last_n", "keep_best_n", "keep")


def cleanup_options(value: Any) -> Dict[str, Any]:
    """The options of the config value (True or a dict); unknown options are an error naming them."""
    if value is True or value in (1, "1", "true", "True"):
        return {}
    if isinstance(value, (list, tuple)) and value:  # RETURNN: a true value that is no dict -> the defaults
        from returnn.log import log
        print("WARNING: config key 'cleanup_old_models' is %s, not a dict (a trailing comma?); like RETURNN, the "
              "default keep policy applies" % type(value).__name__, file=log.v2)
        return {}
    if not isinstance(value, dict):
        raise ConfigError("config key 'cleanup_old_models': expected True or a dict, got %r" % (value,))
    unknown = sorted(set(value) - set(OPTIONS))
    if unknown:
        raise ConfigError("config key 'cleanup_old_models': unknown option(s) %s (known: %s)"
                          % (", ".join(unknown), ", ".join(OPTIONS)))
    return dict(value)


def _next_power_of_two(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def default_keep_pattern(last_epoch: int) -> Set[int]:
    """Every ``k``-th epoch and ``d * 2**i``, with (k, d) growing with the length of the run."""
    if last_epoch <= 10:
        every, doubles_of = 4, 5
    elif last_epoch <= 50:
        every, doubles_of = 20, 5
    elif last_epoch <= 100:
        every, doubles_of = 40, 10
    else:
        every, doubles_of = 80 * _next_power_of_two(1 + last_epoch // 240), 20
    keep = set(range(every, last_epoch + 1, every))
    for i in itertools.count():
        if doubles_of * 2 ** i > last_epoch:
            break
        keep.add(doubles_of * 2 ** i)
    return keep


def epochs_to_keep(epochs: List[int], scores: Mapping[int, Mapping[str, float]], keep_last_n: int = 2,
                   keep_best_n: int = 4, keep: Iterable[int] = None) -> Set[int]:
    """Which of ``epochs`` (those with a checkpoint) to keep, given each epoch's scores."""
    epochs = sorted(epochs)
    keep_last_n, keep_best_n = max(1, int(keep_last_n)), max(1, int(keep_best_n))
    if not epochs or max(keep_last_n, keep_best_n) >= len(epochs):
        return set(epochs)
    kept = set(default_keep_pattern(epochs[-1]) if keep is None else keep)
    kept.update(epochs[-keep_last_n:])
    keys = sorted({k for e in epochs for k in scores.get(e, {})})
    for key in keys:
        # a non-finite score (nan, +-inf: a broken epoch) ranks after every finite one; sorting
        # with nan in it would be arbitrary (RETURNN's sort), and -inf would look best
        values = [_rank_value(scores[e][key]) for e in epochs if key in scores.get(e, {})]
        if min(values) == max(values):
            continue  # says nothing about which epoch is better
        worst = max(values)
        ranked = sorted((_rank_value(scores.get(e, {}).get(key, worst)), e) for e in epochs)
        kept.update(e for _, e in ranked[:keep_best_n])
    return kept & set(epochs)


def _rank_value(value: float) -> float:
    """A score for ranking epochs: non-finite ones (nan, inf, -inf) are the worst."""
    value = float(value)
    return value if math.isfinite(value) else math.inf


def remove_checkpoint(prefix: str) -> None:
    """Deletes a checkpoint, its ``.index`` first (so a half-deleted one counts as incomplete)."""
    files = checkpoint_files(prefix)
    for path in sorted(files, key=lambda p: not p.endswith(".index")):
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
    fsync_dir(os.path.dirname(os.path.abspath(prefix)))


def cleanup_old_models(model: str, options: Dict[str, Any], scores: Mapping[int, Mapping[str, float]]) -> List[int]:
    """Deletes the epoch checkpoints of ``model`` the policy does not keep; returns their epochs."""
    epochs = list_epoch_checkpoints(model)
    kept = epochs_to_keep(epochs, scores, options.get("keep_last_n", 2), options.get("keep_best_n", 4),
                          options.get("keep"))
    removed = [e for e in epochs if e not in kept]
    for epoch in removed:
        remove_checkpoint(existing_epoch_prefix(model, epoch))  # <model>.NNN or <model>.pretrain.NNN
    return removed
