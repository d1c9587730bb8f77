"""RETURNN's scoring rules of a searched rec loop beyond top-k of the summed scores
(:mod:`.search` runs the loop and calls these).

- A choice with ``search: False`` in a network built for search is its target, and adds its
  score of the target label to every hypothesis (RETURNN's ``add_to_beam_scores``: the
  hypotheses' scores times its ``base_beam_score_scale``, plus the target's log-probability times
  its ``prob_scale``; a hypothesis that ended adds 0 for label 0). RETURNN asserts that such a
  choice has no ``length_normalization``, ``random_sample_scale`` or ``custom_score_combine``. With
  ``add_to_beam_scores`` False it adds nothing (and its ``from`` is not built); True: also where only
  the loop searches (a choice with ``search: True`` in a training network). A choice with ``search: False``
  and ``scheduled_sampling`` adds its score of the label it sampled (its target where ``gold_mixin_prob`` says).
- ``random_sample_scale`` (s > 0): Gumbel noise ``s * -log(-log(u))``, ``u`` uniform in [0, 1) per
  candidate, is added to the combined scores before top-k (sampling; with ``base_beam_score_scale``
  0 and beam 1 a sample of the label distribution). It stays in the hypotheses' scores, as in RETURNN.
- ``cheating`` (RETURNN's ``beam_search`` with gold targets): the reference hypothesis is the last
  of the beam: after top-k the last entry is replaced by the reference label continuing the last
  hypothesis (the only one in the first step), with its score. ``True`` keeps duplicates (the
  reference may also be among the first ``k - 1``); ``"exclusive"`` masks the reference candidate
  before top-k, so it is kept once. Past the reference's end its label is 0 (an ended hypothesis'
  only continuation).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Mapping

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tf.layers.output import LayerOutput
from returnn.tf.layers.rec_net.deps import Ref, choice_adds_scores, fed_target, samples_in_training


@dataclass
class FedChoice:
    """A choice fed its target in search: its name, the layer of its scores, its options."""

    name: str
    scores_from: str
    input_type: str
    prob_scale: float
    base_scale: float


def fed_choices(rec, choice: str) -> List[FedChoice]:
    """The choices of ``rec``'s loop that are their target and add their scores (in a network built for
    search, RETURNN's default of its ``add_to_beam_scores``, else where that option is True)."""
    from returnn.tf.network import layer_sources
    out = []
    for n in rec.plan.in_loop:
        opts = rec.unit[n]
        # (a choice sampling its label, scheduled_sampling, adds its score of that label as RETURNN's does)
        if n == choice or not isinstance(opts, Mapping) or not (fed_target(opts, True) or samples_in_training(
                opts, True)) or not choice_adds_scores(opts, bool(getattr(rec, "net_search", False))):
            continue
        if opts.get("input_type") == "regression" and samples_in_training(opts, True):
            continue  # RETURNN adds no scores of a regression
        where = "%s, sub-layer %r" % (rec.desc, n)
        for key, default in (("length_normalization", True), ("random_sample_scale", 0.0),
                             ("custom_score_combine", None)):
            if opts.get(key, default) not in (None, False, 0, 0.0):
                raise NetworkError("%s: a choice fed its target in search adds its scores to the hypotheses; RETURNN "
                                   "asserts that it has no %s (got %r)" % (where, key, opts.get(key, default)))
        srcs = layer_sources(n, opts)
        if len(srcs) != 1 or opts.get("input_type", "prob") not in ("prob", "log_prob"):
            raise NetworkError("%s: a choice fed its target in search takes one source of label scores (input_type "
                               "prob or log_prob) here" % where)
        if not _depends_on(rec, srcs, choice):
            raise NetworkError("%s: its scores %r do not depend on the searched choice %r in the same step; how "
                               "RETURNN adds them to the beam then is not supported here" % (where, srcs[0], choice))
        out.append(FedChoice(n, srcs[0], opts.get("input_type", "prob"), float(opts.get("prob_scale", 1.0)),
                             float(opts.get("base_beam_score_scale", 1.0))))
    return out


def _depends_on(rec, names: List[str], target: str) -> bool:
    """Whether in-loop layers ``names`` read ``target`` in the same step (directly or through others)."""
    seen, todo = set(), list(names)
    while todo:
        n = todo.pop()
        if n == target:
            return True
        if n in seen or n not in rec.sub_sources:
            continue
        seen.add(n)
        todo += [r.name for r in map(Ref.parse, rec.sub_sources[n]) if r.kind == "self"]
    return False


def log_scores(src: LayerOutput, input_type: str) -> tf.Tensor:
    """A choice's source as log-probabilities (RETURNN's ``ChoiceLayer._get_scores``): as they are
    (``log_prob``), the log-softmax of a softmax layer's logits, else RETURNN's ``safe_log``,
    ``log(max(p, 1e-20))`` (also of a log_softmax layer's values, every entry <= 0, which its
    ``get_log_output`` does not undo: a choice reading those as ``prob`` sees ties)."""
    x = tf.cast(src.tensor, tf.float32)
    if input_type == "log_prob":
        return x
    safe = tf.math.log(tf.maximum(x, 1e-20))
    if src.logits is not None:  # softmax or log_softmax (basic.LOGIT_ACTIVATIONS): a softmax row sums to 1 > 0
        return tf.where(tf.reduce_all(x <= 0, axis=-1, keepdims=True), safe,
                        tf.nn.log_softmax(tf.cast(src.logits, tf.float32)))
    return safe


def add_fed_scores(fed: FedChoice, scores: tf.Tensor, src: LayerOutput, label: tf.Tensor, ended: tf.Tensor,
                   batch: tf.Tensor, k: int, neg_inf: float) -> tf.Tensor:
    """The hypotheses' scores (B, K) after choice ``fed`` took ``label`` (B * K,), with its scores ``src``
    (B * K, V); ``ended`` (B * K,): the hypotheses that ended before this step."""
    logp = log_scores(src, fed.input_type)
    frozen = tf.concat([tf.zeros_like(logp[:, :1]), tf.fill(tf.shape(logp[:, 1:]), neg_inf)], 1)
    logp = tf.where(ended[:, None], frozen, logp)
    picked = tf.gather(logp, tf.cast(tf.reshape(label, [-1, 1]), tf.int32), batch_dims=1)[:, 0]
    base = scores
    if fed.base_scale != 1.0:
        base = tf.where(scores > neg_inf / 2, scores * fed.base_scale, scores)
    return base + tf.reshape(picked, [batch, k]) * fed.prob_scale


def cheating_targets(unit: Mapping[str, object]) -> List[str]:
    """The data keys the cheating choices of a searched unit read (their targets)."""
    out = []
    for opts in unit.values():
        if isinstance(opts, Mapping) and opts.get("class") == "choice" and opts.get("cheating"):
            targets = opts.get("target")
            out += [t for t in (targets if isinstance(targets, (list, tuple)) else [targets]) if isinstance(t, str)]
    return out


def check_cheating(where: str, opts: Mapping[str, object]) -> None:
    """RETURNN's limits of ``cheating`` (one source, a target to cheat with); ``random_sample_scale`` a number."""
    scale = opts.get("random_sample_scale")
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float)) or scale < 0):
        raise NetworkError("%s: random_sample_scale must be a number >= 0, got %r" % (where, scale))
    if not opts.get("cheating"):
        return
    targets = opts.get("target")
    if not isinstance(targets, str):
        raise NetworkError("%s: cheating needs one 'target' (the reference labels), got %r (RETURNN: cheating is not "
                           "implemented for several sources)" % (where, targets))


def reference_frame(value: LayerOutput, t: tf.Tensor) -> tf.Tensor:
    """Frame ``t`` of the reference labels (rows: the hypotheses), 0 past their end."""
    x = value.copy_as_batch_time_feature()
    labels = x.masked(0)
    labels = tf.pad(labels, [[0, 0], [0, 1]] + [[0, 0]] * (len(labels.shape) - 2))  # one frame of 0 after the end
    return tf.gather(labels, tf.minimum(t, tf.shape(labels)[1] - 1), axis=1)


def gumbel_noise(total: tf.Tensor, scale: float, seed: tf.Tensor) -> tf.Tensor:
    """``total`` plus RETURNN's sampling noise ``scale * -log(-log(u))``, ``u ~ U[0, 1)``."""
    u = tf.random.stateless_uniform(tf.shape(total), seed, dtype=total.dtype)
    return total + scale * -tf.math.log(-tf.math.log(u))


def top_k_cheating(total: tf.Tensor, k: int, reference: tf.Tensor, t: tf.Tensor, exclusive: bool):
    """RETURNN's ``beam_search`` with ``cheating_gold_targets``: top-k of ``total`` (B, K, V) with the
    last entry replaced by the reference label (``reference`` (B * K,), the same for all rows of a
    sequence) continuing hypothesis K - 1 (0 in the first step). Returns (scores, flat indices)
    (B, k) as ``tf.math.top_k``."""
    n_batch, n_labels = tf.shape(total)[0], tf.shape(total)[2]
    gold = tf.clip_by_value(tf.cast(tf.reshape(reference, [n_batch, -1])[:, 0], tf.int32), 0, n_labels - 1)  # (B,)
    src = tf.where(t > 0, k - 1, 0)
    flat = tf.reshape(total, [n_batch, -1])
    gold_index = src * n_labels + gold  # (B,)
    gold_score = tf.gather(flat, gold_index[:, None], batch_dims=1)[:, 0]
    if exclusive:
        hit = tf.equal(tf.range(tf.shape(flat)[1])[None, :], gold_index[:, None])
        flat = tf.where(hit, tf.constant(float("-inf"), flat.dtype), flat)
    scores, best = tf.math.top_k(flat, k)
    scores = tf.concat([scores[:, :k - 1], gold_score[:, None]], 1)
    best = tf.concat([best[:, :k - 1], gold_index[:, None]], 1)
    return scores, best
