"""Losses (``"loss": "ce" | "mse" | "ctc" | "as_is" | "edit_distance" | "sampling_loss" | "search_score" | ...``).

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
from typing import Any, Dict, Iterator, List, Optional, Tuple, Type

import tensorflow as tf

from returnn.errors import DataError, NetworkError, known_list
from returnn.tensor import Data
from returnn.tf.layers.options import Option
from returnn.tf.layers.output import LayerOutput
from returnn.tf.layers.packed import PackedFrames
from returnn.tf.util.data_check import checked as data_checked, failed_check


@dataclass
class LossValues:
    """Summed loss/error of one batch and what to divide them by."""

    loss_sum: tf.Tensor
    norm: tf.Tensor  # 0: the loss reports no cost (RETURNN's edit_distance, as_is with as_error)
    error_sum: Optional[tf.Tensor] = None
    error_norm: Optional[tf.Tensor] = None


ALIGNMENT_MARK = "framewise loss needs output and target of equal length"
# loss_opts of every loss (RETURNN's Loss base class); each loss adds its own (``Loss.options``).
# As for layers (returnn/tf/layers/options.py): an option is read by the loss, or accepted only at
# the values in ``only`` (others refused in one line), or a documented no-op (``noop``: why).
COMMON_OPTIONS: Tuple[Option, ...] = (
    Option("use_normalized_loss", False, "False: the training objective is the loss summed over the batch's "
                                         "frames; True: divided by RETURNN's norm (the target frames or "
                                         "labels, e.g. CTC's target labels)"),
    Option("use_flatten_frames", True, "RETURNN: compute on the real frames flattened",
           noop="a layout RETURNN computes in: the per-frame values and their sums are the same"),
    Option("scale", 1.0, "factor of the loss in the training objective (0: not in it); the reported score is "
                         "unscaled (RETURNN's; the layer's loss_scale sets it too)"),
)


class Loss:
    """Base class. ``loss_opts`` are checked against :meth:`declared` (:data:`COMMON_OPTIONS` and each
    class's ``options``). A ``framewise`` loss compares output and target frame by frame: their
    lengths must agree per sequence (checked in the step, reported by :func:`alignment_error`)."""

    loss_class = ""
    options: Tuple[Option, ...] = ()
    need_target = True  # False: compute() gets target None and the network reads no target data
    framewise = True
    frame_local = False  # each frame's loss depends on that frame only: computed on the real frames

    def __init__(self, layer_name: str, loss_opts: Optional[Dict[str, Any]], target_key: str):
        self.layer_name = layer_name
        self.target_key = target_key
        self.opts = dict(loss_opts or {})
        known = self.declared()
        unknown = set(self.opts) - set(known)
        if unknown:
            raise NetworkError("layer %r: unknown loss_opts %s for loss %r (known: %s)"
                               % (layer_name, known_list(unknown), self.loss_class, known_list(known)))
        for name, value in self.opts.items():
            refuse_value(layer_name, "loss %r loss_opts" % self.loss_class, known[name], value)
        self.normalized = self.opts.get("use_normalized_loss", False)
        if not isinstance(self.normalized, bool):
            raise NetworkError("layer %r: loss_opts use_normalized_loss must be True or False, got %r"
                               % (layer_name, self.normalized))
        self.scale = self.opts.get("scale", 1.0)
        if isinstance(self.scale, bool) or not isinstance(self.scale, (int, float)):
            raise NetworkError("layer %r: loss_opts scale must be a number, got %r" % (layer_name, self.scale))

    @classmethod
    def declared(cls) -> Dict[str, Option]:
        """All loss_opts of this loss: the common ones, then each class's own (base classes first)."""
        out = {o.name: o for o in COMMON_OPTIONS}
        for klass in reversed(cls.__mro__):
            out.update({o.name: o for o in klass.__dict__.get("options", ())})
        return out

    def expected_output_dim(self, target_dim: Optional[int]) -> Optional[int]:
        """The output dim a target of ``target_dim`` classes/features needs (RETURNN's
        ``get_auto_output_layer_dim``); None: not checked."""
        return target_dim

    def check_templates(self, output: Data, target: Optional[Data], target_name: Optional[str]) -> None:
        """RETURNN's checks of a loss when the network is built (its ``Loss._check_init``): as many
        axes on both sides (a sparse target counts its class axis), the output dim the target
        needs, a time axis on both sides or on none. One NetworkError naming layer and target."""
        where = "layer %r: loss %r" % (self.layer_name, self.loss_class)
        if target is None:
            return
        def dense_ndim(d: Data) -> int:
            return d.batch_ndim - (d.batch_dim_axis is not None) + (1 if d.sparse else 0)
        if dense_ndim(output) != dense_ndim(target):
            raise NetworkError("%s: output %s and target %r %s do not have the same number of axes (RETURNN: "
                               "dimensions mismatch)" % (where, output.short_repr(), target_name, target.short_repr()))
        if output.have_time_axis() != target.have_time_axis():
            raise NetworkError("%s: output %s %s a time axis but target %r %s" % (
                where, output.short_repr(), "has" if output.have_time_axis() else "has no", target_name,
                target.short_repr()))
        expected = self.expected_output_dim(target.dim)
        if expected is not None and output.dim != expected:
            raise NetworkError("%s: the output dim is %s but target %r (dim %s) needs %s (n_out?)"
                               % (where, output.dim, target_name, target.dim, expected))

    def objective(self, values: LossValues) -> tf.Tensor:
        """This loss's term of the training objective: RETURNN's ``loss_sum`` over all real frames of all
        sequences of the batch (with ``use_normalized_loss`` over ``norm``, the batch's per-frame
        average), times ``scale`` (0: no term, RETURNN leaves the loss out)."""
        if not self.scale:
            return tf.constant(0.0)
        value = values.loss_sum / tf.maximum(values.norm, 1.0) if self.normalized else values.loss_sum
        return value * float(self.scale) if self.scale != 1 else value

    def compute(self, output: LayerOutput, target: Optional[LayerOutput], train: bool = False) -> LossValues:
        """Loss of ``output`` against ``target`` for one batch (``train``: in a training step; some
        of RETURNN's errors are computed otherwise in evaluation)."""
        output = self._layout(output, "output")
        target = None if target is None else int32_labels(self._layout(target, "target"))
        output, target = self.checked(output, target)
        both_in_time = target is not None and output.data.have_time_axis() and target.data.have_time_axis()
        if self.framewise and both_in_time:
            output = _covering_extents(output, target, "layer %r: loss %r" % (self.layer_name, self.loss_class))
        if self.frame_local and output.packed is not None and target is not None and target.data.have_time_axis():
            output, target = _packed_views(output, target)
        elif self.framewise and output.packed is None and both_in_time:
            output = _padded_like(output, target)
        return self.compute_btf(output, target, train)

    def checked(self, output: LayerOutput, target: Optional[LayerOutput]) -> Tuple[LayerOutput, Optional[LayerOutput]]:
        """A framewise loss: output and target after the check that their lengths agree per sequence."""
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
        return output, target

    def _layout(self, x: LayerOutput, what: str) -> LayerOutput:
        """``x`` as (B, T, F) / (B, T) / (B, F) / (B,): losses work on that layout."""
        x = x.copy_as_batch_time_feature()
        allowed = 1 + x.data.have_time_axis() + (x.data.feature_dim_axis is not None)
        if x.data.batch_dim_axis != 0 or x.data.batch_ndim != allowed:
            raise NetworkError("layer %r: loss %r needs (batch, time, feature) %s, got %s"
                               % (self.layer_name, self.loss_class, what, x.data.short_repr()))
        return x

    def compute_btf(self, output: LayerOutput, target: LayerOutput, train: bool = False) -> LossValues:
        """:meth:`compute` on batch-major, time-second, feature-last values."""
        raise NotImplementedError


def refuse_value(layer_name: str, where: str, opt: Option, value: Any) -> None:
    """One line refusing a value an option with ``only`` does not accept."""
    if not opt.accepts(value):
        raise NetworkError("layer %r: %s %s = %r is not supported here (only %s): %s" % (
            layer_name, where, opt.name, value, " or ".join(map(repr, opt.only or ())), opt.doc))


def _after_check(x: LayerOutput) -> LayerOutput:
    """``x`` through identities (also its logits and packed rows) that run after the length check."""
    def ident(t: Optional[tf.Tensor]) -> Optional[tf.Tensor]:
        return None if t is None else tf.identity(t)
    rows = x.packed
    packed = None if rows is None else PackedFrames(ident(rows.values), rows.index, rows.outer, ident(rows.logits))
    return x.with_tensor(ident(x.tensor), logits=ident(x.logits), packed=packed)


@tf.autograph.experimental.do_not_convert  # (plain TF ops: the newest TF's autograph cache called one
# converted helper in place of another in the compiled step, see network.py)
def _covering_extents(output: LayerOutput, target: LayerOutput, where: str) -> LayerOutput:
    """``output`` after the check that RETURNN's two flattenings of a framewise loss (each side masked by the
    sizes up to its own value's extent) keep the same frames: the extents are equal, or both cover the sizes.
    A value shorter than its sizes (reinterpret_data's size_base of a longer base) beside a longer one makes
    RETURNN fail: one line here. The packed rows are checked too (they come from the values)."""
    rows = output.packed  # its padded extent without computing the padded tensor
    n_out = tf.cast(rows.outer[1], tf.int32) if rows is not None else tf.shape(output.tensor)[1]
    n_target = tf.shape(target.tensor)[1]
    longest = tf.reduce_max(target.seq_len) if target.seq_len is not None else n_target
    ok = tf.logical_or(tf.equal(n_out, n_target), longest <= tf.minimum(n_out, n_target))
    text = ("%s: a sequence of %%s frames, the output's values only %%s frames, the target's %%s (reinterpret_data's "
            "size_base longer than the values?); RETURNN fails here too" % where)
    def check(t: Optional[tf.Tensor]) -> Optional[tf.Tensor]:
        return None if t is None else data_checked(t, ok, text, longest, n_out, n_target)
    if rows is not None:
        return output.with_tensor(output.tensor, logits=output.logits, packed=PackedFrames(
            check(rows.values), rows.index, rows.outer, check(rows.logits), rows.fill))
    return output.with_tensor(check(output.tensor), logits=check(output.logits))


@tf.autograph.experimental.do_not_convert
def _padded_like(output: LayerOutput, target: LayerOutput) -> LayerOutput:
    """``output`` (B, T, ...) cut or zero-padded on T to the target's padded length: a framewise loss's two
    sides have the same lengths (checked), but one may carry more padding (reinterpret_data's size_base keeps
    an upsampled axis's extra frames, as RETURNN). Only padding changes; equal lengths pass through."""
    length = tf.shape(target.tensor)[1]
    def fit(t: Optional[tf.Tensor]) -> Optional[tf.Tensor]:
        if t is None or (t.shape[1] is not None and t.shape[1] == target.tensor.shape[1]):
            return t
        pad = tf.scatter_nd([[1, 1]], [tf.maximum(length - tf.shape(t)[1], 0)], [len(t.shape), 2])
        size = tf.tensor_scatter_nd_update(-tf.ones([len(t.shape)], tf.int32), [[1]], [length])
        return tf.slice(tf.pad(t, pad), tf.zeros([len(t.shape)], tf.int32), size)
    return output.with_tensor(fit(output.tensor), logits=fit(output.logits))


@tf.autograph.experimental.do_not_convert
def _packed_views(output: LayerOutput, target: LayerOutput) -> Tuple[LayerOutput, LayerOutput]:
    """Output (B, T, F) and target (B, T[, F]) of equal lengths as their real frames, (N, F) and
    (N[, F]): each frame a batch entry without time axis, no padding to mask."""
    rows = output.packed
    out = LayerOutput(rows.values, output.data.copy_template_excluding_axis(1), {}, rows.logits)
    tgt = LayerOutput(rows.gather(target.tensor), target.data.copy_template_excluding_axis(1), {})
    return out, tgt


def int32_labels(target: LayerOutput) -> LayerOutput:
    """Sparse labels of another integer dtype (``uint8`` class indices of an enwik8 corpus) as int32,
    as RETURNN's losses read them (its ``to_int32_64``); int32/int64 labels stay as they are."""
    if not target.data.sparse or target.data.dtype in ("int32", "int64"):
        return target
    return target.with_tensor(tf.cast(target.tensor, tf.int32), target.data.copy(dtype="int32"))


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


def safe_log(p: tf.Tensor, eps: float = 1e-20, fake_grad: bool = True) -> tf.Tensor:
    """RETURNN's ``safe_log``: ``log(max(p, eps))`` (:func:`returnn.tf.util.basic.safe_log`)."""
    from returnn.tf.util.basic import safe_log as _safe_log
    return _safe_log(p, eps, use_fake_grad=fake_grad)


class CrossEntropyLoss(Loss):
    """Cross entropy vs sparse class targets (or dense soft targets); frame error via argmax.

    ``loss_opts`` (RETURNN's): ``label_smoothing`` ls (sparse targets: soft target ``1 - ls`` on
    the label and ``ls / (V - 1)`` on the others, minus the constant best value, as RETURNN),
    ``focal_loss_factor`` g (frame loss times ``(1 - p_label) ** g``), ``input_type`` ("prob":
    the output is a softmax, its logits are used when known; "logits": the output is logits),
    ``fake_upper_bound`` (loss values clipped, gradient unchanged), ``use_fused`` (default: the fused
    softmax cross entropy on the logits when known; False, or no logits: ``-safe_log(p_label)`` as
    RETURNN, ``safe_log_opts`` ``eps`` (1e-20) and ``use_fake_grad`` (True)).
    """

    loss_class = "ce"
    frame_local = True
    options = (
        Option("label_smoothing", 0.0, "sparse targets: 1 - ls on the label, ls / (V - 1) on the others"),
        Option("label_smoothing_gaussian", False, "with label_smoothing: the soft targets are the density of a "
                                                  "normal distribution around the label (scale 1 - ls) at each "
                                                  "class index (not normalized, as RETURNN's)"),
        Option("focal_loss_factor", 0.0, "frame loss times (1 - p_label) ** factor"),
        Option("input_type", "prob", "'prob' (the output is a softmax) or 'logits'"),
        Option("fake_upper_bound", None, "loss values clipped to it, the gradient unchanged"),
        Option("use_fused", True, "the fused softmax cross entropy on the logits (False: -safe_log(p))"),
        Option("safe_log_opts", None, "RETURNN's safe_log options without fused loss: eps (1e-20), use_fake_grad"),
        Option("debug_dump", False, "RETURNN: print the targets and their probabilities",
               noop="a debug print of RETURNN's; the loss is the same"),
    )

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
        self.use_fused = bool(self.opts.get("use_fused", True))
        log_opts = dict(self.opts.get("safe_log_opts") or {})
        unknown = sorted(set(log_opts) - {"eps", "use_fake_grad"})
        if unknown:
            raise NetworkError("layer %r: loss_opts safe_log_opts: unknown %s (known: eps, use_fake_grad)"
                               % (layer_name, ", ".join(map(repr, unknown))))
        self.log_eps = float(log_opts.get("eps", 1e-20))
        self.fake_grad = bool(log_opts.get("use_fake_grad", True))

    def _number(self, key: str) -> float:
        value = self.opts.get(key) or 0.0
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise NetworkError("layer %r: loss_opts %s must be a number >= 0, got %r" % (self.layer_name, key, value))
        return float(value)

    def _logits(self, output: LayerOutput) -> Optional[tf.Tensor]:
        """The scores before the softmax, when known (RETURNN's output_before_softmax)."""
        return output.tensor if self.input_type == "logits" else output.logits

    def _log_probs(self, output: LayerOutput) -> tf.Tensor:
        """Fused (logits known): log_softmax; else RETURNN's ``safe_log`` of the probabilities."""
        logits = self._logits(output)
        if logits is not None and self.use_fused:
            return tf.nn.log_softmax(logits, axis=-1)
        probs = tf.nn.softmax(logits, axis=-1) if logits is not None else output.tensor
        return safe_log(probs, self.log_eps, self.fake_grad)

    def compute_btf(self, output: LayerOutput, target: LayerOutput, train: bool = False) -> LossValues:
        mask = _frame_mask(target)
        frame_loss, wrong = self.frame_values(output, target, mask)
        frames = _frame_count(target, mask)
        return LossValues(_masked_sum(frame_loss, mask), frames, _masked_sum(wrong, mask), frames)

    def frame_values(self, output: LayerOutput, target: LayerOutput, mask: Optional[tf.Tensor] = None
                     ) -> Tuple[tf.Tensor, tf.Tensor]:
        """Per frame: the loss and the frame error (1.0 where the argmax is not the label); the
        ``loss`` layer reads them as they are (RETURNN's LossLayer)."""
        num_classes = output.data.dim
        if target.data.sparse:
            labels = target.tensor if mask is None else tf.where(mask > 0, target.tensor, 0)
            if self.smoothing:
                if not (self._logits(output) is not None and self.use_fused) and (
                        self.input_type != "prob" or output.logits is not None):
                    raise NetworkError("layer %r: loss 'ce' with label_smoothing and use_fused False on %s fails in "
                                       "RETURNN (%s)" % (self.layer_name, "logits" if self.input_type != "prob" else
                                                         "a softmax", "NotImplementedError" if self.input_type != "prob"
                                                         else "it reads the probabilities it does not keep"))
                log_p = self._log_probs(output)
                confidence, low = 1.0 - self.smoothing, self.smoothing / max(num_classes - 1, 1)
                if self.opts.get("label_smoothing_gaussian"):  # RETURNN's Normal(label, confidence).prob(k)
                    dist = (tf.range(num_classes, dtype=tf.float32) - tf.cast(labels, tf.float32)[..., None]) / confidence
                    soft = tf.exp(-0.5 * tf.square(dist)) / (confidence * math.sqrt(2.0 * math.pi))
                else:
                    soft = tf.one_hot(labels, num_classes, on_value=confidence, off_value=low)
                best = -(confidence * math.log(confidence) + (num_classes - 1) * low * math.log(low + 1e-20))
                if self._logits(output) is not None and self.use_fused:  # RETURNN's fused op: its gradient is
                    # softmax - soft targets (for gaussian targets, which do not sum to 1, not the loss's derivative)
                    frame_loss = tf.nn.softmax_cross_entropy_with_logits(labels=soft, logits=self._logits(output)) - best
                else:
                    frame_loss = -tf.reduce_sum(soft * log_p, axis=-1) - best
                label_log_p = tf.gather(log_p, labels, batch_dims=len(labels.shape)) if self.focal else None
            elif self._logits(output) is not None and self.use_fused:  # fused, as RETURNN
                frame_loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=self._logits(output))
                label_log_p = -frame_loss
            else:
                label_log_p = tf.gather(self._log_probs(output), labels, batch_dims=len(labels.shape))
                frame_loss = -label_log_p
            if self.focal:
                frame_loss *= (1.0 - tf.exp(label_log_p)) ** self.focal
        else:
            if self.smoothing or self.focal:
                raise NetworkError("layer %r: label_smoothing/focal_loss_factor need sparse targets" % self.layer_name)
            if self._logits(output) is not None and self.use_fused:  # RETURNN's fused op (and its gradient,
                # softmax - target, which assumes targets summing to 1)
                frame_loss = tf.nn.softmax_cross_entropy_with_logits(
                    labels=tf.cast(target.tensor, tf.float32), logits=self._logits(output))
            else:
                frame_loss = -tf.reduce_sum(target.tensor * self._log_probs(output), axis=-1)
            labels = tf.argmax(target.tensor, axis=-1, output_type=tf.int32)
        if self.upper_bound is not None:
            frame_loss = frame_loss - tf.stop_gradient(frame_loss - tf.minimum(frame_loss, self.upper_bound))
        scores = output.logits if output.logits is not None else output.tensor
        wrong = tf.cast(tf.not_equal(tf.argmax(scores, axis=-1, output_type=tf.int32), labels), tf.float32)
        return frame_loss, wrong


class MeanSquaredErrorLoss(Loss):
    """RETURNN's ``mse``: per frame the MEAN over the features of the squared difference between the
    output (its values: probabilities for a softmax) and the target (sparse targets as one-hot
    vectors), summed over the real frames; norm = target frames. The error is RETURNN's default frame
    error: argmax of the output against the target label (argmax of a dense target)."""

    loss_class = "mse"
    frame_local = True

    def compute_btf(self, output: LayerOutput, target: LayerOutput, train: bool = False) -> LossValues:
        mask = _frame_mask(target)
        tgt = target.tensor
        if target.data.sparse:
            labels = tgt if mask is None else tf.where(mask > 0, tgt, 0)
            tgt = tf.one_hot(labels, output.data.dim)
        else:
            labels = tf.argmax(tgt, axis=-1, output_type=tf.int32)
        diff = tf.square(output.tensor - tf.cast(tgt, output.tensor.dtype))
        has_features = output.data.feature_dim_axis is not None
        frame_loss = tf.reduce_mean(diff, axis=-1) if has_features else diff
        frames = _frame_count(target, mask)
        if not has_features:
            return LossValues(_masked_sum(frame_loss, mask), frames)
        wrong = tf.cast(tf.not_equal(tf.argmax(output.tensor, axis=-1, output_type=tf.int32), labels), tf.float32)
        return LossValues(_masked_sum(frame_loss, mask), frames, _masked_sum(wrong, mask), frames)


class AsIsLoss(Loss):
    """The output itself is the loss (summed over real frames and features; norm = frames);
    ``as_error``: report it as the error instead, with no loss."""

    loss_class = "as_is"
    options = (Option("as_error", False, "report the output as the error, with no loss"),)
    need_target = False

    def check_templates(self, output: Data, target: Optional[Data], target_name: Optional[str]) -> None:
        """No target: nothing to compare."""

    def _layout(self, x: LayerOutput, what: str) -> LayerOutput:
        """RETURNN sums the output over all but the batch and time axes: with more axes than one feature
        axis (e.g. attention weights over the encoder frames per decoder step) they are summed here first,
        their padded positions as 0."""
        x = x.copy_as_batch_time_feature()
        data = x.data
        keep = [a for a in (data.batch_dim_axis, data.time_dim_axis) if a is not None]
        extra = [a for a in range(data.batch_ndim) if a not in keep]
        if len(extra) <= 1:
            return super()._layout(x, what)
        values = tf.reduce_sum(x.masked(0), axis=extra)
        for axis in sorted(extra, reverse=True):
            data = data.copy_template_excluding_axis(axis)
        return super()._layout(x.with_tensor(values, data), what)

    def compute_btf(self, output: LayerOutput, target: Optional[LayerOutput], train: bool = False) -> LossValues:
        mask = _frame_mask(output)
        values = tf.cast(output.tensor, tf.float32)
        if output.data.feature_dim_axis is not None:
            values = tf.reduce_sum(values, axis=-1)
        total, frames = _masked_sum(values, mask), _frame_count(output, mask)
        if self.opts.get("as_error"):  # RETURNN: no cost, only the error
            return LossValues(tf.constant(0.0), tf.constant(0.0), total, frames)
        return LossValues(total, frames)


LOSS_CLASSES: Dict[str, Type[Loss]] = {cls.loss_class: cls for cls in (
    CrossEntropyLoss, MeanSquaredErrorLoss, AsIsLoss)}
# RETURNN's ctc and edit_distance (returnn/tf/losses_ctc.py), sampling_loss (returnn/tf/sampling.py),
# mean_l1 and bin_ce (returnn/tf/losses_tts.py), generic_ce and triplet_loss (returnn/tf/losses_extra.py): they
# register themselves here
from returnn.tf import losses_ctc as _losses_ctc  # noqa: E402,F401
from returnn.tf import losses_tts as _losses_tts  # noqa: E402,F401
from returnn.tf import losses_search as _losses_search  # noqa: E402,F401  (search_score)
from returnn.tf import sampling as _sampling  # noqa: E402,F401
from returnn.tf import losses_extra as _losses_extra  # noqa: E402,F401  (generic_ce, triplet_loss)


# RETURNN's other loss classes (its returnn/tf/layers/basic.py), with why they are not here
NOT_HERE_LOSSES: Dict[str, str] = {
    "sprint": "it needs RASR (Sprint) to compute the loss and its error signal",
    "fast_bw": "it needs RASR (Sprint) to build the alignment automata; train with a 'ctc' loss or with alignments "
               "dumped to HDF (tools/hdf_dump.py) as frame-wise targets instead",
    "via_layer": "its value and gradient come from another layer's output loss, which only RETURNN's fast_bw layer "
                 "gives (RASR)",
    "deep_clustering": "RETURNN's own implementation fails on TensorFlow 2 when the network is built (its while_loop's "
                       "shape invariant: 'enters the loop with shape (), but the specified shape invariant is (?,)'): "
                       "no RETURNN config of this TensorFlow can use it",
}


def loss_table() -> List[str]:
    """Markdown rows (docs/compat.md): every RETURNN loss class and its status here."""
    rows = ["| RETURNN loss | here | notes |", "|---|---|---|"]
    for name in sorted(set(LOSS_CLASSES) | set(NOT_HERE_LOSSES)):
        cls = LOSS_CLASSES.get(name)
        note = NOT_HERE_LOSSES.get(name) or " ".join((cls.__doc__ or "").strip().split("\n\n")[0].split())
        rows.append("| `%s` | %s | %s |" % (name, "no" if cls is None else "yes", note.replace("|", "\\|")))
    return rows


def __getattr__(name: str) -> Any:
    """``SamplingLoss`` lives in returnn/tf/sampling.py, ``CtcLoss`` and ``EditDistanceLoss`` in
    returnn/tf/losses_ctc.py (imported by this module, or importing it)."""
    if name == "SamplingLoss":
        return _sampling.SamplingLoss
    if name in ("CtcLoss", "EditDistanceLoss"):
        return getattr(_losses_ctc, name)
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


def lookup_loss_class(name: Any) -> Optional[Type[Loss]]:
    """The loss class of ``name``: a config's class registered as RETURNN registers them (its
    ``_LossClassDict``, see returnn/tf/config_loss.py) first, else the engine's; None if unknown."""
    from returnn.tf.config_loss import config_loss_class
    return config_loss_class(name) or (LOSS_CLASSES.get(name) if isinstance(name, str) else None)


def get_loss_class(name: str, layer_name: str) -> Type[Loss]:
    """Registry lookup; an unknown loss is a :class:`NetworkError` naming the layer."""
    cls = lookup_loss_class(name)
    if cls is None:
        from returnn.tf.config_loss import _LossClassDict, unregistered_hint
        if name in NOT_HERE_LOSSES:
            raise NetworkError("layer %r: loss %r is not available here: %s" % (layer_name, name, NOT_HERE_LOSSES[name]))
        raise NetworkError("layer %r: unknown loss %r (known: %s)%s" % (
            layer_name, name, known_list(set(LOSS_CLASSES) | set(_LossClassDict)), unregistered_hint(name)))
    return cls


def alignment_error(exc: Exception, dataset, batch) -> Optional[DataError]:
    """The DataError naming the sequence, when ``exc`` is the step's alignment check failing on
    ``batch`` (a BatchSlices of ``dataset``), or naming the batch's sequences when it is another data
    check (:mod:`returnn.tf.util.data_check`); else None."""
    text = str(getattr(exc, "message", None) or exc)
    m = re.search(re.escape(ALIGNMENT_MARK) + r"\|(.*?)\|(.*?)\|.*?\[seq\] \[(\d+)\] \[lengths\] \[(\d+)\] \[(\d+)\]",
                  text, re.S)
    if m is None:
        check = failed_check(exc)
        if check is None:
            return None
        tags = [dataset.get_tag(entry[0]) for entry in batch.entries()]
        return DataError("dataset %s: a batch of sequences %s: %s" % (
            dataset.name, ", ".join(map(repr, tags[:5])) + (", ..." if len(tags) > 5 else ""), check))
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
