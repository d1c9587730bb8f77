"""Losses (``"loss": "ce" | "mse" | "ctc" | "as_is" | "edit_distance" | "sampling_loss"`` on a layer).

Every loss returns sums, not averages (:class:`LossValues`); the reported scores divide by ``norm``
(and ``error_sum`` by ``error_norm``), possibly after summing over several batches or workers.
What training minimises is :meth:`Loss.objective`: the sum itself, as in RETURNN, so that a layer's
``L2`` weighs against the loss summed over the batch's frames, not against a per-frame average.
"""
from __future__ import annotations

import contextlib
import math
import re
from dataclasses import dataclass
from typing import Any, Dict, Iterator, Optional, Tuple, Type

import tensorflow as tf

from returnn.errors import DataError, NetworkError, known_list
from returnn.tf.layers.output import LayerOutput
from returnn.tf.layers.packed import PackedFrames


@dataclass
class LossValues:
    """Summed loss/error of one batch and what to divide them by."""

    loss_sum: tf.Tensor
    norm: tf.Tensor
    error_sum: Optional[tf.Tensor] = None
    error_norm: Optional[tf.Tensor] = None


ALIGNMENT_MARK = "framewise loss needs output and target of equal length"
# loss_opts of every loss (RETURNN's Loss base class): use_normalized_loss (default False: the
# training objective is the loss summed over the batch's frames; True: divided by their number)
COMMON_OPTS: Tuple[str, ...] = ("use_normalized_loss",)


class Loss:
    """Base class. ``loss_opts`` are checked against ``known_opts`` and :data:`COMMON_OPTS`. A
    ``framewise`` loss compares output and target frame by frame: their lengths must agree per
    sequence (checked in the step, reported by :func:`alignment_error`)."""

    loss_class = ""
    known_opts: Tuple[str, ...] = ()
    need_target = True  # False: compute() gets target None and the network reads no target data
    framewise = True
    frame_local = False  # each frame's loss depends on that frame only: computed on the real frames

    def __init__(self, layer_name: str, loss_opts: Optional[Dict[str, Any]], target_key: str):
        self.layer_name = layer_name
        self.target_key = target_key
        self.opts = dict(loss_opts or {})
        known = self.known_opts + COMMON_OPTS
        unknown = set(self.opts) - set(known)
        if unknown:
            raise NetworkError("layer %r: unknown loss_opts %s for loss %r (known: %s)"
                               % (layer_name, known_list(unknown), self.loss_class, known_list(known)))
        self.normalized = self.opts.get("use_normalized_loss", False)
        if not isinstance(self.normalized, bool):
            raise NetworkError("layer %r: loss_opts use_normalized_loss must be True or False, got %r"
                               % (layer_name, self.normalized))

    def objective(self, values: LossValues) -> tf.Tensor:
        """This loss's term of the training objective (before the layer's ``loss_scale``): RETURNN's
        ``loss_sum`` over all real frames of all sequences of the batch, or with ``use_normalized_loss``
        that sum over ``norm`` (the batch's per-frame average)."""
        if self.normalized:
            return values.loss_sum / tf.maximum(values.norm, 1.0)
        return values.loss_sum

    def compute(self, output: LayerOutput, target: Optional[LayerOutput]) -> LossValues:
        """Loss of ``output`` against ``target`` for one batch."""
        output = self._layout(output, "output")
        target = None if target is None else self._layout(target, "target")
        if self.framewise and target is not None and output.data.have_time_axis() and target.data.have_time_axis() \
                and output.seq_len is not None and target.seq_len is not None:
            differ = tf.not_equal(output.seq_len, target.seq_len)
            first = tf.argmax(tf.cast(differ, tf.int32))
            check = tf.debugging.Assert(tf.logical_not(tf.reduce_any(differ)), [
                "%s|%s|%s|" % (ALIGNMENT_MARK, self.layer_name, self.target_key), "seq", first, "lengths",
                tf.gather(output.seq_len, first), tf.gather(target.seq_len, first)])
            with tf.control_dependencies([check]):  # before any op that combines the two
                output = _after_check(output)
                target = target.with_tensor(tf.identity(target.tensor))
        if self.frame_local and output.packed is not None and target is not None and target.data.have_time_axis():
            output, target = _packed_views(output, target)
        return self.compute_btf(output, target)

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


def _after_check(x: LayerOutput) -> LayerOutput:
    """``x`` through identities (also its logits and packed rows) that run after the length check."""
    def ident(t: Optional[tf.Tensor]) -> Optional[tf.Tensor]:
        return None if t is None else tf.identity(t)
    rows = x.packed
    packed = None if rows is None else PackedFrames(ident(rows.values), rows.index, rows.outer, ident(rows.logits))
    return x.with_tensor(ident(x.tensor), logits=ident(x.logits), packed=packed)


def _packed_views(output: LayerOutput, target: LayerOutput) -> Tuple[LayerOutput, LayerOutput]:
    """Output (B, T, F) and target (B, T[, F]) of equal lengths as their real frames, (N, F) and
    (N[, F]): each frame a batch entry without time axis, no padding to mask."""
    rows = output.packed
    out = LayerOutput(rows.values, output.data.copy_template_excluding_axis(1), {}, rows.logits)
    tgt = LayerOutput(rows.gather(target.tensor), target.data.copy_template_excluding_axis(1), {})
    return out, tgt


def _frame_mask(target: LayerOutput) -> Optional[tf.Tensor]:
    """(B, T) float mask of real target frames, or None without time axis."""
    if not target.data.have_time_axis() or target.seq_len is None:
        return None
    return tf.cast(target.sequence_mask(), tf.float32)


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

    ``loss_opts`` (RETURNN's): ``label_smoothing`` ls (sparse targets: soft target ``1 - ls`` on
    the label and ``ls / (V - 1)`` on the others, minus the constant best value, as RETURNN),
    ``focal_loss_factor`` g (frame loss times ``(1 - p_label) ** g``), ``input_type`` ("prob":
    the output is a softmax, its logits are used when known; "logits": the output is logits),
    ``fake_upper_bound`` (loss values clipped, gradient unchanged). ``use_fused``,
    ``safe_log_opts`` and ``debug_dump`` only tune speed/debugging in RETURNN and are accepted.
    """

    loss_class = "ce"
    frame_local = True
    known_opts = ("label_smoothing", "focal_loss_factor", "input_type", "fake_upper_bound", "use_fused",
                  "safe_log_opts", "debug_dump")

    def __init__(self, layer_name: str, loss_opts: Optional[Dict[str, Any]], target_key: str):
        super().__init__(layer_name, loss_opts, target_key)
        self.smoothing = self._number("label_smoothing")
        self.focal = self._number("focal_loss_factor")
        self.input_type = self.opts.get("input_type", "prob")
        if self.input_type not in ("prob", "logits"):
            raise NetworkError("layer %r: loss_opts input_type must be 'prob' or 'logits', got %r"
                               % (layer_name, self.input_type))
        bound = self.opts.get("fake_upper_bound")
        self.upper_bound = None if bound is None else self._number("fake_upper_bound")

    def _number(self, key: str) -> float:
        value = self.opts.get(key) or 0.0
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise NetworkError("layer %r: loss_opts %s must be a number >= 0, got %r" % (self.layer_name, key, value))
        return float(value)

    def _log_probs(self, output: LayerOutput) -> tf.Tensor:
        if self.input_type == "logits":
            return tf.nn.log_softmax(output.tensor, axis=-1)
        return _log_probs(output)

    def compute_btf(self, output: LayerOutput, target: LayerOutput) -> LossValues:
        mask = _frame_mask(target)
        num_classes = output.data.dim
        if target.data.sparse:
            labels = target.tensor if mask is None else tf.where(mask > 0, target.tensor, 0)
            if self.smoothing:
                log_p = self._log_probs(output)
                confidence, low = 1.0 - self.smoothing, self.smoothing / max(num_classes - 1, 1)
                soft = tf.one_hot(labels, num_classes, on_value=confidence, off_value=low)
                best = -(confidence * math.log(confidence) + (num_classes - 1) * low * math.log(low + 1e-20))
                frame_loss = -tf.reduce_sum(soft * log_p, axis=-1) - best
                label_log_p = tf.gather(log_p, labels, batch_dims=len(labels.shape)) if self.focal else None
            elif output.logits is not None and self.input_type == "prob":  # fused, as RETURNN
                frame_loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=output.logits)
                label_log_p = -frame_loss
            else:
                label_log_p = tf.gather(self._log_probs(output), labels, batch_dims=len(labels.shape))
                frame_loss = -label_log_p
            if self.focal:
                frame_loss *= (1.0 - tf.exp(label_log_p)) ** self.focal
        else:
            if self.smoothing or self.focal:
                raise NetworkError("layer %r: label_smoothing/focal_loss_factor need sparse targets" % self.layer_name)
            frame_loss = -tf.reduce_sum(target.tensor * self._log_probs(output), axis=-1)
            labels = tf.argmax(target.tensor, axis=-1, output_type=tf.int32)
        if self.upper_bound is not None:
            frame_loss = frame_loss - tf.stop_gradient(frame_loss - tf.minimum(frame_loss, self.upper_bound))
        scores = output.logits if output.logits is not None else output.tensor
        wrong = tf.cast(tf.not_equal(tf.argmax(scores, axis=-1, output_type=tf.int32), labels), tf.float32)
        frames = _frame_count(target, mask)
        return LossValues(_masked_sum(frame_loss, mask), frames, _masked_sum(wrong, mask), frames)


class MeanSquaredErrorLoss(Loss):
    """Sum over features of the squared difference, summed over real frames; norm = frames.
    Sparse targets are compared as one-hot vectors."""

    loss_class = "mse"
    frame_local = True

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

    ``loss_opts``: ``ctc_opts`` with ``ignore_longer_outputs_than_inputs`` (sequences whose target
    is longer than the output count 0 instead of an infinite loss; RETURNN's option of TF's CTC
    op), ``logits_normalize`` / ``grad_wrt_softmax_in`` of RETURNN's native CTC (the loss is the
    same: normalizing log-probabilities again changes nothing, and autodiff gives the gradient the
    native op computes in closed form); ``beam_width`` (RETURNN decodes with it for the error; accepted, the error here is always
    from greedy decoding); ``output_in_log_space`` (the output holds log-probabilities);
    ``use_native``, ``focal_loss_factor`` 0 accepted.
    """

    loss_class = "ctc"
    framewise = False
    known_opts = ("ctc_opts", "beam_width", "use_native", "focal_loss_factor", "output_in_log_space")
    known_ctc_opts = ("ignore_longer_outputs_than_inputs", "preprocess_collapse_repeated", "ctc_merge_repeated",
                      "logits_normalize", "grad_wrt_softmax_in")

    def __init__(self, layer_name: str, loss_opts: Optional[Dict[str, Any]], target_key: str):
        super().__init__(layer_name, loss_opts, target_key)
        ctc_opts = dict(self.opts.get("ctc_opts") or {})
        unknown = set(ctc_opts) - set(self.known_ctc_opts)
        if unknown:
            raise NetworkError("layer %r: unknown ctc_opts %s (known: %s)"
                               % (layer_name, known_list(unknown), known_list(self.known_ctc_opts)))
        for key, default in (("preprocess_collapse_repeated", False), ("ctc_merge_repeated", True)):
            if ctc_opts.get(key, default) != default:
                raise NetworkError("layer %r: ctc_opts %s=%r is not supported (only %r)"
                                   % (layer_name, key, ctc_opts[key], default))
        if self.opts.get("focal_loss_factor"):
            raise NetworkError("layer %r: ctc focal_loss_factor is not supported" % layer_name)
        self.ignore_longer = bool(ctc_opts.get("ignore_longer_outputs_than_inputs", False))

    def compute_btf(self, output: LayerOutput, target: LayerOutput) -> LossValues:
        if not target.data.sparse or not output.data.have_time_axis() or not target.data.have_time_axis():
            raise NetworkError("layer %r: ctc loss needs a time axis on the output and sparse targets with time"
                               % self.layer_name)
        num_classes = output.data.dim
        blank = num_classes - 1
        if self.opts.get("output_in_log_space"):  # the output holds log-probabilities already
            logits = output.tensor
        else:
            logits = output.logits if output.logits is not None else _log_probs(output)
        label_mask = target.sequence_mask()
        labels = tf.where(label_mask, target.tensor, 0)
        loss = tf.nn.ctc_loss(labels=labels, logits=logits, label_length=target.seq_len,
                              logit_length=output.seq_len, logits_time_major=False, blank_index=blank)
        if self.ignore_longer:
            loss = tf.where(target.seq_len > output.seq_len, tf.zeros_like(loss), loss)
        norm = tf.cast(tf.reduce_sum(output.seq_len), tf.float32)
        decoded, _ = tf.nn.ctc_greedy_decoder(tf.transpose(logits, [1, 0, 2]), output.seq_len,
                                              merge_repeated=True, blank_index=blank)
        dist = tf.edit_distance(tf.cast(decoded[0], tf.int64), _to_sparse(labels, label_mask), normalize=False)
        error_norm = tf.cast(tf.reduce_sum(target.seq_len), tf.float32)
        return LossValues(tf.reduce_sum(loss), norm, tf.reduce_sum(dist), error_norm)


class SamplingLoss(CrossEntropyLoss):
    """RETURNN's ``sampling_loss`` (sampled softmax for large vocabularies, e.g. word LMs), computed
    here as the exact cross entropy of the full softmax: what the sampled loss estimates, and what
    RETURNN itself reports with ``use_full_softmax``. It costs the full output matmul per frame.
    The sampling options are accepted; ``nce_loss`` (a different objective) also trains the exact cross
    entropy, with a warning."""

    loss_class = "sampling_loss"
    known_opts = CrossEntropyLoss.known_opts + ("num_sampled", "use_full_softmax", "nce_loss", "num_splits",
                                                "sampler", "nce_log_norm_term")

    def __init__(self, layer_name: str, loss_opts: Optional[Dict[str, Any]], target_key: str):
        super().__init__(layer_name, loss_opts, target_key)
        if self.opts.get("nce_loss"):
            from returnn.log import log
            print("WARNING: layer %r: sampling_loss with nce_loss trains the exact softmax cross entropy here "
                  "(noise-contrastive estimation is not implemented; the model is normalised by its softmax, not "
                  "self-normalised)" % layer_name, file=log.warn)


class AsIsLoss(Loss):
    """The output itself is the loss (summed over real frames and features; norm = frames);
    ``as_error``: report it as the error instead, with no loss."""

    loss_class = "as_is"
    known_opts = ("as_error",)
    need_target = False

    def compute_btf(self, output: LayerOutput, target: Optional[LayerOutput]) -> LossValues:
        mask = _frame_mask(output)
        values = tf.cast(output.tensor, tf.float32)
        if output.data.feature_dim_axis is not None:
            values = tf.reduce_sum(values, axis=-1)
        total, frames = _masked_sum(values, mask), _frame_count(output, mask)
        if self.opts.get("as_error"):
            return LossValues(tf.constant(0.0), frames, total, frames)
        return LossValues(total, frames)


class EditDistanceLoss(Loss):
    """Evaluation only (no loss): label error rate = edit distance between the output labels
    (sparse output, or argmax of a dense one) and the target, over the target length."""

    loss_class = "edit_distance"
    framewise = False
    known_opts = ("debug_print", "label_map", "ctc_decode", "output_in_log_space")

    def compute_btf(self, output: LayerOutput, target: LayerOutput) -> LossValues:
        if not target.data.sparse or not target.data.have_time_axis() or not output.data.have_time_axis():
            raise NetworkError("layer %r: edit_distance needs sparse targets and outputs with a time axis"
                               % self.layer_name)
        if self.opts.get("label_map") or self.opts.get("ctc_decode"):
            raise NetworkError("layer %r: edit_distance loss_opts label_map/ctc_decode are not supported"
                               % self.layer_name)
        hyp = output.tensor if output.data.sparse else tf.argmax(output.tensor, axis=-1, output_type=tf.int32)
        dist = tf.edit_distance(_to_sparse(hyp, output.sequence_mask()), _to_sparse(target.tensor, target.sequence_mask()),
                                normalize=False)
        return LossValues(tf.constant(0.0), tf.constant(1.0), tf.reduce_sum(dist),
                          tf.cast(tf.reduce_sum(target.seq_len), tf.float32))


def _to_sparse(labels: tf.Tensor, mask: tf.Tensor) -> tf.SparseTensor:
    """(B, T) labels on real frames as a SparseTensor (for tf.edit_distance)."""
    indices = tf.where(mask)
    return tf.SparseTensor(indices, tf.cast(tf.gather_nd(labels, indices), tf.int64), tf.cast(tf.shape(labels), tf.int64))


LOSS_CLASSES: Dict[str, Type[Loss]] = {cls.loss_class: cls for cls in (
    CrossEntropyLoss, MeanSquaredErrorLoss, CtcLoss, AsIsLoss, EditDistanceLoss, SamplingLoss)}


def get_loss_class(name: str, layer_name: str) -> Type[Loss]:
    """Registry lookup; an unknown loss is a :class:`NetworkError` naming the layer."""
    if name not in LOSS_CLASSES:
        raise NetworkError("layer %r: unknown loss %r (known: %s)" % (layer_name, name, known_list(LOSS_CLASSES)))
    return LOSS_CLASSES[name]


def alignment_error(exc: Exception, dataset, batch) -> Optional[DataError]:
    """The DataError naming the sequence, when ``exc`` is the step's alignment check failing on
    ``batch`` (a BatchSlices of ``dataset``); else None."""
    text = str(getattr(exc, "message", None) or exc)
    m = re.search(re.escape(ALIGNMENT_MARK) + r"\|(.*?)\|(.*?)\|.*?\[seq\] \[(\d+)\] \[lengths\] \[(\d+)\] \[(\d+)\]",
                  text, re.S)
    if m is None:
        return None
    layer, target, index, out_len, target_len = m.groups()
    entries = batch.entries()
    seq_idx = entries[int(index)][0] if int(index) < len(entries) else None
    name = ("sequence %r (index %i)" % (dataset.get_tag(seq_idx), seq_idx)) if seq_idx is not None else "a sequence"
    return DataError("dataset %s: %s: layer %r has a framewise loss, but the lengths of its output and of target "
                     "%r differ (output length %s, target length %s); the data must be aligned frame by frame"
                     % (dataset.name, name, layer, target, out_len, target_len))


@contextlib.contextmanager
def reporting_misalignment(dataset, batch) -> Iterator[None]:
    """Around a step on ``batch``: the alignment check failing becomes the DataError naming the sequence."""
    try:
        yield
    except tf.errors.InvalidArgumentError as exc:
        error = alignment_error(exc, dataset, batch)
        if error is None:
            raise
        raise error from None
