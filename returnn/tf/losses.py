"""Losses (``"loss": "ce" | "mse" | "ctc"`` on an output layer).

Every loss returns sums, not averages (:class:`LossValues`); the engine divides by ``norm``
(and ``error_sum`` by ``error_norm``), possibly after summing over several batches or workers.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple, Type

import tensorflow as tf

from returnn.errors import NetworkError, known_list
from returnn.tf.layers.output import LayerOutput


@dataclass
class LossValues:
    """Summed loss/error of one batch and what to divide them by."""

    loss_sum: tf.Tensor
    norm: tf.Tensor
    error_sum: Optional[tf.Tensor] = None
    error_norm: Optional[tf.Tensor] = None


class Loss:
    """Base class. ``loss_opts`` are checked against ``known_opts``."""

    loss_class = ""
    known_opts: Tuple[str, ...] = ()

    def __init__(self, layer_name: str, loss_opts: Optional[Dict[str, Any]], target_key: str):
        self.layer_name = layer_name
        self.target_key = target_key
        self.opts = dict(loss_opts or {})
        unknown = set(self.opts) - set(self.known_opts)
        if unknown:
            raise NetworkError("layer %r: unknown loss_opts %s for loss %r (known: %s)"
                               % (layer_name, known_list(unknown), self.loss_class, known_list(self.known_opts) or "none"))

    def compute(self, output: LayerOutput, target: LayerOutput) -> LossValues:
        """Loss of ``output`` against ``target`` for one batch."""
        return self.compute_btf(self._layout(output, "output"), self._layout(target, "target"))

    def _layout(self, x: LayerOutput, what: str) -> LayerOutput:
        """``x`` as (B, T, F) / (B, T) / (B, F) / (B,): losses work on that layout."""
        x = x.copy_as_batch_time_feature()
        allowed = 1 + x.data.have_time_axis() + (x.data.feature_dim_axis is not None)
        if x.data.batch_dim_axis != 0 or x.data.batch_ndim != allowed:
            raise NetworkError("layer %r: loss %r needs (batch, time, feature) %s, got %s"
                               % (self.layer_name, self.loss_class, what, x.data.short_repr()))
        return x

    def compute_btf(self, output: LayerOutput, target: LayerOutput) -> LossValues:
        """:meth:`compute` on batch-major, time-second, feature-last values."""
        raise NotImplementedError


def _frame_mask(target: LayerOutput) -> Optional[tf.Tensor]:
    """(B, T) float mask of real target frames, or None without time axis."""
    if not target.data.have_time_axis() or target.seq_len is None:
        return None
    return tf.cast(target.mask(), tf.float32)


def _masked_sum(values: tf.Tensor, mask: Optional[tf.Tensor]) -> tf.Tensor:
    """Sum of per-frame ``values`` (B, T) or (B,) over real frames (garbage on padding is ignored)."""
    if mask is None:
        return tf.reduce_sum(values)
    return tf.reduce_sum(tf.where(mask > 0, values, tf.zeros_like(values)))


def _frame_count(target: LayerOutput, mask: Optional[tf.Tensor]) -> tf.Tensor:
    if mask is None:
        return tf.cast(tf.shape(target.tensor)[0], tf.float32)
    return tf.reduce_sum(mask)


def _log_probs(output: LayerOutput, eps: float = 1e-7) -> tf.Tensor:
    """Log-probabilities of ``output``: log_softmax of the logits if present, else log(clip(p))."""
    if output.logits is not None:
        return tf.nn.log_softmax(output.logits, axis=-1)
    return tf.math.log(tf.clip_by_value(output.tensor, eps, 1.0))


class CrossEntropyLoss(Loss):
    """Cross entropy vs sparse class targets (or dense soft targets); frame error via argmax.

    ``loss_opts``: ``label_smoothing`` (the target distribution becomes
    ``(1 - ls) * onehot + ls / num_classes``).
    """

    loss_class = "ce"
    # "use_fused" selects a TF kernel in RETURNN; ours is always the stable fused form.
    known_opts = ("label_smoothing", "use_fused")

    def compute_btf(self, output: LayerOutput, target: LayerOutput) -> LossValues:
        mask = _frame_mask(target)
        num_classes = output.data.dim
        smoothing = float(self.opts.get("label_smoothing", 0.0) or 0.0)
        if target.data.sparse:
            labels = target.tensor if mask is None else tf.where(mask > 0, target.tensor, 0)
            if output.logits is not None and not smoothing:
                frame_loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=output.logits)
            else:
                log_p = _log_probs(output)
                frame_loss = -tf.reduce_sum(tf.one_hot(labels, num_classes) * log_p, axis=-1)
                if smoothing:
                    uniform = -tf.reduce_mean(log_p, axis=-1)
                    frame_loss = (1.0 - smoothing) * frame_loss + smoothing * uniform
        else:
            probs = target.tensor
            if smoothing:
                probs = (1.0 - smoothing) * probs + smoothing / num_classes
            frame_loss = -tf.reduce_sum(probs * _log_probs(output), axis=-1)
            labels = tf.argmax(target.tensor, axis=-1, output_type=tf.int32)
        scores = output.logits if output.logits is not None else output.tensor
        wrong = tf.cast(tf.not_equal(tf.argmax(scores, axis=-1, output_type=tf.int32), labels), tf.float32)
        frames = _frame_count(target, mask)
        return LossValues(_masked_sum(frame_loss, mask), frames, _masked_sum(wrong, mask), frames)


class MeanSquaredErrorLoss(Loss):
    """Sum over features of the squared difference, summed over real frames; norm = frames.
    Sparse targets are compared as one-hot vectors."""

    loss_class = "mse"

    def compute_btf(self, output: LayerOutput, target: LayerOutput) -> LossValues:
        mask = _frame_mask(target)
        tgt = target.tensor
        if target.data.sparse:
            labels = tgt if mask is None else tf.where(mask > 0, tgt, 0)
            tgt = tf.one_hot(labels, output.data.dim)
        frame_loss = tf.reduce_sum(tf.square(output.tensor - tgt), axis=-1)
        return LossValues(_masked_sum(frame_loss, mask), _frame_count(target, mask))


class CtcLoss(Loss):
    """Connectionist temporal classification.

    The output has ``num_labels + 1`` classes; the blank is the LAST index. Uses ``output.logits``
    when present, else ``log(output.tensor)`` (the output is taken to be probabilities).
    ``loss_sum`` is the sum of the per-sequence negative log-likelihoods; ``norm`` is the number
    of real OUTPUT frames (sum of the output lengths), as for frame-wise losses. The error is the
    label error rate of greedy (best-path) decoding: ``error_sum`` = sum of the edit distances,
    ``error_norm`` = total number of target labels.
    """

    loss_class = "ctc"

    def compute_btf(self, output: LayerOutput, target: LayerOutput) -> LossValues:
        if not target.data.sparse or not output.data.have_time_axis() or not target.data.have_time_axis():
            raise NetworkError("layer %r: ctc loss needs a time axis on the output and sparse targets with time"
                               % self.layer_name)
        num_classes = output.data.dim
        blank = num_classes - 1
        logits = output.logits if output.logits is not None else _log_probs(output)
        label_mask = target.mask()
        labels = tf.where(label_mask, target.tensor, 0)
        loss = tf.nn.ctc_loss(labels=labels, logits=logits, label_length=target.seq_len,
                              logit_length=output.seq_len, logits_time_major=False, blank_index=blank)
        norm = tf.cast(tf.reduce_sum(output.seq_len), tf.float32)
        decoded, _ = tf.nn.ctc_greedy_decoder(tf.transpose(logits, [1, 0, 2]), output.seq_len,
                                              merge_repeated=True, blank_index=blank)
        indices = tf.where(label_mask)
        truth = tf.SparseTensor(indices, tf.cast(tf.gather_nd(labels, indices), tf.int64),
                                tf.cast(tf.shape(labels), tf.int64))
        dist = tf.edit_distance(tf.cast(decoded[0], tf.int64), truth, normalize=False)
        error_norm = tf.cast(tf.reduce_sum(target.seq_len), tf.float32)
        return LossValues(tf.reduce_sum(loss), norm, tf.reduce_sum(dist), error_norm)


LOSS_CLASSES: Dict[str, Type[Loss]] = {cls.loss_class: cls for cls in (CrossEntropyLoss, MeanSquaredErrorLoss, CtcLoss)}


def get_loss_class(name: str, layer_name: str) -> Type[Loss]:
    """Registry lookup; an unknown loss is a :class:`NetworkError` naming the layer."""
    if name not in LOSS_CLASSES:
        raise NetworkError("layer %r: unknown loss %r (known: %s)" % (layer_name, name, known_list(LOSS_CLASSES)))
    return LOSS_CLASSES[name]
