"""RETURNN's sampled losses (``sampling_loss`` without ``use_full_softmax``): sampled softmax and NCE.

RETURNN (its ``SamplingBasedLoss``) computes, per frame, TensorFlow's ``sampled_softmax_loss`` (or
its own NCE: ``nce_loss`` with ``nce_log_norm_term`` subtracted from the logits) from the layer's
input (after dropout) and its parameters ``W`` as (classes, input dim) (``use_transposed_weights``)
and ``b``, with candidates drawn by TensorFlow's candidate samplers (``unique``: without
replacement) from the target classes' range, ``num_splits`` draws per batch. The samplers here are
TensorFlow's algorithms (draw with replacement until ``num_sampled`` distinct classes, in the order
drawn; expected counts from the number of draws, ``-expm1(tries * log1p(-p))``), made stateless:
the draws come from the step's seed (:meth:`RunContext.layer_seed`), so a step is repeatable and a
resumed run draws what the uninterrupted one would. ``learned_unigram`` keeps TensorFlow's op state:
per split a weight per class, 1 at the start, each target frame adding 1 to its class after the
draws of its step (training and evaluation steps alike, as RETURNN's one graph); like the op's, the
counts are not saved, so a resumed run learns them anew.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data
from returnn.tf import losses
from returnn.tf.layers.options import Option
from returnn.tf.layers.output import LayerOutput

SAMPLERS = ("log_uniform", "uniform", "learned_unigram", "fixed_unigram")


@dataclass
class SamplingInputs:
    """What a linear/softmax layer with a sampled loss gives its loss: the input after dropout,
    as (B, T, D) with ``seq_len`` (or (B, D)), or as the real frames' rows (N, D) with their
    ``rows`` (a PackedFrames, to take the targets of the same frames); the step's ``seed``."""

    values: tf.Tensor
    seq_len: Optional[tf.Tensor]
    rows: Any
    seed: tf.Tensor


class Sampler:
    """A candidate distribution over ``range_max`` classes: ``draw`` (stateless, with replacement)
    and ``prob`` of class ids."""

    def __init__(self, kind: str, range_max: int, args: Dict[str, Any], where: str, splits: int = 1):
        self.kind, self.range_max = kind, int(range_max)
        args = dict(args or {})
        self.weights: Optional[tf.Tensor] = None
        self.counts: List[tf.Variable] = []
        if kind not in SAMPLERS:
            raise NetworkError("%s: sampler must be one of %s, got %r" % (where, ", ".join(map(repr, SAMPLERS)), kind))
        allowed = {"fixed_unigram": ("unigrams", "distortion", "num_reserved_ids")}.get(kind, ())
        unknown = sorted(set(args) - set(allowed))
        if unknown:
            raise NetworkError("%s: sampler_args %s of sampler %r are not supported here (supported: %s)"
                               % (where, ", ".join(map(repr, unknown)), kind, ", ".join(allowed) or "none"))
        if kind == "fixed_unigram":
            unigrams = args.get("unigrams")
            if not isinstance(unigrams, (list, tuple)) or not unigrams:
                raise NetworkError("%s: sampler 'fixed_unigram' needs sampler_args unigrams (a list of counts; vocab_file "
                                   "is not supported here)" % where)
            reserved = int(args.get("num_reserved_ids", 0))
            w = [0.0] * reserved + [float(u) ** float(args.get("distortion", 1.0)) for u in unigrams]
            if len(w) != self.range_max:
                raise NetworkError("%s: fixed_unigram: num_reserved_ids + len(unigrams) = %i, but the target has %i "
                                   "classes" % (where, len(w), self.range_max))
            total = sum(w)
            self.weights = tf.constant([x / total for x in w], tf.float64)
            self.cdf = tf.math.cumsum(self.weights)
        if kind == "learned_unigram":  # TF's op state: a weight per class, 1 at the start (per split: per op)
            with tf.init_scope():  # transient, as the op's state: no parameter, never saved
                self.counts = [tf.Variable(tf.ones([self.range_max], tf.int64), trainable=False,
                                           name="learned_unigram_counts_%i" % i) for i in range(splits)]

    def at_split(self, split: int) -> "Sampler":
        """The distribution the draws of ``split`` use: for ``learned_unigram`` the counts of that
        split's targets so far (read once, before :meth:`update`), else this sampler."""
        if not self.counts:
            return self
        view = Sampler.__new__(Sampler)
        view.kind, view.range_max, view.counts = self.kind, self.range_max, []
        counts = tf.cast(self.counts[split].read_value(), tf.float64)
        view.weights = counts / tf.reduce_sum(counts)
        view.cdf = tf.math.cumsum(view.weights)
        return view

    def update(self, split: int, labels: tf.Tensor) -> None:
        """``learned_unigram``: each target of the split adds 1 to its class's weight after the
        draws (TF's order), as long as the total stays below 2**31 (TF's int32 weights)."""
        if not self.counts:
            return
        var = self.counts[split]
        labels = tf.reshape(tf.cast(labels, tf.int32), [-1])
        room = tf.cast(2 ** 31 - 1 - tf.reduce_sum(var), tf.int32)
        labels = labels[:tf.maximum(tf.minimum(tf.size(labels), room), 0)]
        var.assign_add(tf.math.bincount(labels, minlength=self.range_max, maxlength=self.range_max, dtype=tf.int64))

    def draw(self, seed: tf.Tensor, n: int) -> tf.Tensor:
        """``n`` classes (int64) drawn with replacement."""
        u = tf.random.stateless_uniform([n], seed, dtype=tf.float64)
        if self.kind == "uniform":
            return tf.minimum(tf.cast(u * self.range_max, tf.int64), self.range_max - 1)
        if self.kind == "log_uniform":  # TF: floor(exp(u * log(range + 1))) - 1, modulo range
            value = tf.cast(tf.exp(u * math.log1p(self.range_max)), tf.int64) - 1
            return tf.math.floormod(tf.maximum(value, 0), self.range_max)
        return tf.minimum(tf.searchsorted(self.cdf, u, side="right", out_type=tf.int64), self.range_max - 1)

    def prob(self, ids: tf.Tensor) -> tf.Tensor:
        ids = tf.cast(ids, tf.int64)
        if self.kind == "uniform":
            return tf.fill(tf.shape(ids), tf.constant(1.0 / self.range_max, tf.float64))
        if self.kind == "log_uniform":
            x = tf.cast(ids, tf.float64)
            return tf.math.log((x + 2.0) / (x + 1.0)) / math.log1p(self.range_max)
        return tf.gather(self.weights, ids)


def unique_candidates(sampler: Sampler, true_classes: tf.Tensor, num_sampled: int, seed: tf.Tensor
                      ) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """TensorFlow's ``*_candidate_sampler(unique=True)``: (sampled (S,) int64, true expected counts
    (N, 1), sampled expected counts (S,)), drawn from ``seed`` (shape (2,) int64)."""
    if num_sampled > sampler.range_max:
        raise ValueError("num_sampled %i > %i classes" % (num_sampled, sampler.range_max))
    chunk = max(2 * num_sampled, 64)

    def body(i, count, tries, seen, out):
        d = sampler.draw(seed + tf.stack([tf.constant(0, tf.int64), tf.cast(i, tf.int64) + 1]), chunk)
        uniq, idx = tf.unique(d)
        first = tf.math.unsorted_segment_min(tf.range(chunk), idx, tf.size(uniq))
        new = tf.logical_not(tf.gather(seen, uniq))
        vals, pos = tf.boolean_mask(uniq, new), tf.boolean_mask(first, new)
        take = tf.minimum(num_sampled - count, tf.size(vals))
        done = tf.equal(take, num_sampled - count) & (take > 0)
        used = tf.where(done, tf.gather(tf.concat([pos, [0]], 0), tf.maximum(take - 1, 0)) + 1, chunk)  # [0]: none new
        vals = vals[:take]
        out = tf.tensor_scatter_nd_update(out, (count + tf.range(take))[:, None], vals)
        seen = tf.tensor_scatter_nd_update(seen, vals[:, None], tf.ones_like(vals, tf.bool))
        return i + 1, count + take, tries + tf.cast(used, tf.int64), seen, out

    _, _, tries, _, sampled = tf.while_loop(
        lambda i, count, *_: count < num_sampled, body,
        (tf.constant(0), tf.constant(0), tf.constant(0, tf.int64), tf.zeros([sampler.range_max], tf.bool),
         tf.zeros([num_sampled], tf.int64)))

    def expected(p: tf.Tensor) -> tf.Tensor:  # TF's ExpectedCountHelper
        n = tf.cast(tries, tf.float64)
        out = tf.where(tf.equal(tries, num_sampled), p * num_sampled, -tf.math.expm1(n * tf.math.log1p(-p)))
        return tf.cast(out, tf.float32)
    sampled = tf.stop_gradient(sampled)
    return sampled, tf.stop_gradient(expected(sampler.prob(true_classes))), tf.stop_gradient(expected(sampler.prob(sampled)))


def sampled_frame_losses(inputs: tf.Tensor, labels: tf.Tensor, weights: tf.Tensor, biases: tf.Tensor,
                         sampler: Sampler, seed: tf.Tensor, num_sampled: int, num_splits: int, nce: bool,
                         remove_accidental_hits: bool, nce_log_norm_term: float) -> tf.Tensor:
    """Per frame (N,): RETURNN's sampled softmax or NCE loss of ``inputs`` (N, D) against ``labels``
    (N,), the frames split into ``num_splits`` parts with their own candidates."""
    labels = tf.reshape(tf.cast(labels, tf.int64), [-1, 1])
    n = tf.shape(labels)[0]
    part = n // num_splits
    out = []
    for split in range(num_splits):
        if num_splits > 1:
            end = n if split == num_splits - 1 else (split + 1) * part
            lab, x = labels[split * part:end], inputs[split * part:end]
        else:
            lab, x = labels, inputs
        values = unique_candidates(sampler.at_split(split), lab, num_sampled,
                                   seed + tf.constant([split * 7919, 0], tf.int64))
        if nce:
            from tensorflow.python.ops import nn_impl
            logits, targets = nn_impl._compute_sampled_logits(
                weights=weights, biases=biases, labels=lab, inputs=x, num_sampled=num_sampled,
                num_classes=sampler.range_max, num_true=1, sampled_values=values, subtract_log_q=True,
                remove_accidental_hits=remove_accidental_hits, partition_strategy="div")
            logits -= nce_log_norm_term
            loss = tf.reduce_sum(tf.nn.sigmoid_cross_entropy_with_logits(labels=targets, logits=logits), axis=1)
        else:
            loss = tf.nn.sampled_softmax_loss(weights=weights, biases=biases, labels=lab, inputs=x,
                                              num_sampled=num_sampled, num_classes=sampler.range_max, num_true=1,
                                              sampled_values=values, remove_accidental_hits=remove_accidental_hits)
        out.append(loss)
        sampler.update(split, lab)
    return out[0] if len(out) == 1 else tf.concat(out, axis=0)


def int_option(where: str, name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise NetworkError("%s: loss_opts %s must be an int >= 1, got %r" % (where, name, value))
    return value


def check_layer(where: str, layer: Any, target_dim: Optional[int]) -> None:
    """RETURNN's requirements of the layer of a sampled loss: a linear/softmax layer (one dense
    source, feature axis last) with a bias and ``W`` of shape (classes, input dim)."""
    from returnn.tf.layers.basic import LinearLayer
    if not isinstance(layer, LinearLayer):
        raise NetworkError("%s: the sampled loss needs a linear or softmax layer (RETURNN asserts it), got %s"
                           % (where, type(layer).layer_class))
    if not layer.flat:
        raise NetworkError("%s: the sampled loss needs one dense source with its feature axis last here" % where)
    if layer.bias is None:
        raise NetworkError("%s: the sampled loss needs the layer's bias 'b' (with_bias False)" % where)
    if target_dim is not None and int(layer.W.shape[0]) != target_dim:
        raise NetworkError("%s: the sampled loss needs W of shape (classes, input dim) (RETURNN: 'Expect weight matrix "
                           "of shape [num_classes, dim]'): set use_transposed_weights True" % where)
    if layer.grad_filter:
        raise NetworkError("%s: the sampled loss with grad_filter is not supported here" % where)


def flat_inputs(s: SamplingInputs, target: Any) -> Tuple[tf.Tensor, tf.Tensor]:
    """The real frames' inputs (N, D) and target labels (N,), in the same order."""
    if s.rows is not None:
        return s.values, s.rows.gather(target.tensor)
    if s.seq_len is None:
        return s.values, target.tensor
    mask = tf.sequence_mask(s.seq_len, maxlen=tf.shape(s.values)[1])
    return tf.boolean_mask(s.values, mask), tf.boolean_mask(target.tensor, mask[:, :tf.shape(target.tensor)[1]])


def frame_errors(output: Any, target: Any) -> Tuple[tf.Tensor, tf.Tensor]:
    """RETURNN's default error of a loss: frames whose argmax of the full output differs from the
    target; (wrong frames, frames)."""
    scores = output.logits if output.logits is not None else output.tensor
    label = tf.argmax(scores, axis=-1, output_type=tf.int32)
    wrong = tf.cast(tf.not_equal(label, tf.cast(target.tensor, tf.int32)), tf.float32)
    if target.data.have_time_axis() and target.seq_len is not None:
        mask = tf.cast(target.sequence_mask(), tf.float32)
        return tf.reduce_sum(wrong * mask), tf.reduce_sum(mask)
    return tf.reduce_sum(wrong), tf.cast(tf.shape(wrong)[0], tf.float32)


class SamplingLoss(losses.CrossEntropyLoss):
    """RETURNN's ``sampling_loss`` (sampled softmax for large vocabularies, e.g. word LMs), on a
    linear/softmax layer. ``use_full_softmax``: the exact cross entropy of the full softmax. Else
    (RETURNN's default), in training and evaluation alike as RETURNN: per frame TensorFlow's sampled
    softmax loss (``nce_loss``: RETURNN's NCE) from the layer's input after dropout and its ``W`` as
    (classes, input dim) (``use_transposed_weights``) and ``b``, candidates drawn statelessly from the
    step's seed (returnn/tf/sampling.py); the error is RETURNN's default frame error of the full
    output's argmax. Parameters and their names are the layer's own."""

    loss_class = "sampling_loss"
    options = (
        Option("use_full_softmax", False, "True: the full softmax cross entropy; False (RETURNN's default): the "
                                          "sampled estimate (training and evaluation)"),
        Option("num_sampled", 128, "classes sampled (distinct, TensorFlow's unique sampling) per split"),
        Option("num_splits", 1, "the frames split into this many parts, each with its own candidates"),
        Option("sampler", "log_uniform", "candidate sampler: log_uniform, uniform, learned_unigram (the targets' "
                                         "counts so far, from 1 each), fixed_unigram"),
        Option("sampler_args", None, "options of the sampler (fixed_unigram: unigrams, distortion, num_reserved_ids)"),
        Option("remove_accidental_hits", None, "sampled classes equal to the target left out (None: not with nce_loss)"),
        Option("nce_loss", False, "noise-contrastive estimation instead of the sampled softmax"),
        Option("nce_log_norm_term", 0.0, "NCE: subtracted from the logits (the log of a constant normalisation)"),
    )

    @classmethod
    def declared(cls) -> Dict[str, Option]:
        """RETURNN's SamplingBasedLoss takes none of ``ce``'s own options (label_smoothing & co.)."""
        out = {o.name: o for o in losses.COMMON_OPTIONS}
        out.update({o.name: o for o in cls.options})
        return out

    def __init__(self, layer_name: str, loss_opts: Optional[Dict[str, Any]], target_key: str):
        super().__init__(layer_name, loss_opts, target_key)
        where = "layer %r: loss 'sampling_loss'" % layer_name
        self.where = where
        self.full = self.opts.get("use_full_softmax", False)
        for key in ("use_full_softmax", "nce_loss"):
            if not isinstance(self.opts.get(key, False), bool):
                raise NetworkError("%s: loss_opts %s must be True or False, got %r" % (where, key, self.opts[key]))
        self.num_sampled = int_option(where, "num_sampled", self.opts.get("num_sampled", 128))
        self.num_splits = int_option(where, "num_splits", self.opts.get("num_splits", 1))
        self.nce = self.opts.get("nce_loss", False)
        hits = self.opts.get("remove_accidental_hits")
        if hits is not None and not isinstance(hits, bool):
            raise NetworkError("%s: loss_opts remove_accidental_hits must be None, True or False, got %r" % (where, hits))
        self.remove_hits = (not self.nce) if hits is None else hits
        term = self.opts.get("nce_log_norm_term", 0.0)
        if isinstance(term, bool) or not isinstance(term, (int, float)):
            raise NetworkError("%s: loss_opts nce_log_norm_term must be a number, got %r" % (where, term))
        self.nce_term = float(term)
        self.sampler_kind = self.opts.get("sampler", "log_uniform")
        self.sampler_args = self.opts.get("sampler_args") or {}
        if not isinstance(self.sampler_args, dict):
            raise NetworkError("%s: loss_opts sampler_args must be a dict, got %r" % (where, self.sampler_args))
        self.layer = None
        self.sampler = None

    def bind_layer(self, layer: Any) -> None:
        """Sampling reads the layer's input and parameters: the layer gives its input to the loss."""
        self.layer = layer
        if not self.full:
            check_layer(self.where, layer, None)
            layer.sampled_loss = True

    def check_templates(self, output: Data, target: Optional[Data], target_name: Optional[str]) -> None:
        super().check_templates(output, target, target_name)
        if self.full or target is None:
            return
        if not target.sparse:
            raise NetworkError("%s: the sampled loss needs sparse targets (RETURNN asserts it), got target %r %s"
                               % (self.where, target_name, target.short_repr()))
        if self.num_sampled > target.dim:
            raise NetworkError("%s: loss_opts num_sampled %i is more than the %i target classes"
                               % (self.where, self.num_sampled, target.dim))
        if self.layer is not None:
            check_layer(self.where, self.layer, target.dim)
        if self.sampler is None or self.sampler.range_max != target.dim:  # one sampler (learned counts) per loss
            self.sampler = Sampler(self.sampler_kind, target.dim, self.sampler_args, self.where, self.num_splits)

    def compute(self, output: LayerOutput, target: Optional[LayerOutput], train: bool = False) -> losses.LossValues:
        if self.full:
            return super().compute(output, target, train)
        inputs = getattr(output, "sampling_inputs", None)
        if inputs is None or self.layer is None:
            raise NetworkError("%s: the sampled loss of a layer computed step by step in a rec loop (its input "
                               "depends on the previous step's output) is not supported here" % self.where)
        output, target = self.checked(self._layout(output, "output"), losses.int32_labels(self._layout(target, "target")))
        if self.sampler is None:
            self.sampler = Sampler(self.sampler_kind, target.data.dim, self.sampler_args, self.where, self.num_splits)
        x, labels = flat_inputs(inputs, target)
        frame_loss = sampled_frame_losses(
            x, labels, self.layer.W, self.layer.bias, self.sampler, inputs.seed, self.num_sampled, self.num_splits,
            self.nce, self.remove_hits, self.nce_term)
        wrong, frames = frame_errors(output, target)
        return losses.LossValues(tf.reduce_sum(frame_loss), tf.cast(tf.shape(labels)[0], tf.float32), wrong, frames)


losses.LOSS_CLASSES[SamplingLoss.loss_class] = SamplingLoss
