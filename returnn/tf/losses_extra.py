"""RETURNN's ``generic_ce`` (:class:`GenericCELoss`) and ``triplet_loss`` (:class:`TripletLoss`).
Registered in :data:`returnn.tf.losses.LOSS_CLASSES`."""
from __future__ import annotations

from typing import Any, Dict, Optional

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data
from returnn.tf import losses
from returnn.tf.layers.options import Option
from returnn.tf.layers.output import LayerOutput
from returnn.tf.losses import Loss, LossValues, _frame_count, _frame_mask, _masked_sum, int32_labels

NOT_ELEMENTWISE = ("softmax", "log_softmax")
# layers whose output RETURNN keeps with its activation's input (output_before_activation; none: the identity)
WITH_ACTIVATION = ("linear", "softmax", "activation", "conv", "transposed_conv", "combine")


class GenericCELoss(Loss):
    """RETURNN's ``generic_ce``: the cross entropy of an element-wise activation's output ``y`` normalized
    per frame (``p = y / sum(y)``): ``-log(clip(p_label, 1e-20, 1e20))`` summed over the real frames;
    norm = target frames; error: the frame error (argmax of ``y``). The gradient is RETURNN's error
    signal ``d log(y) / d x * (p - onehot(label))`` w.r.t. the activation's input ``x``, whatever scales
    the loss (``scale``, ``use_normalized_loss`` change the objective's value, not its gradient). Needs a
    linear, activation, conv, transposed_conv or combine layer (those RETURNN keeps the activation's input
    of) with an element-wise ``activation`` (or none: the identity) and sparse targets."""

    loss_class = "generic_ce"
    frame_local = True

    def __init__(self, layer_name: str, loss_opts: Optional[Dict[str, Any]], target_key: str):
        super().__init__(layer_name, loss_opts, target_key)
        if self.opts.get("use_flatten_frames", True) is not True:
            raise NetworkError("layer %r: loss 'generic_ce' with use_flatten_frames False is not supported: "
                               "RETURNN's fails (its loss op, built before the loss knows its output, reads the "
                               "output's time axis: AttributeError)" % layer_name)

    def bind_layer(self, layer: Any) -> None:
        """RETURNN's loss needs the layer's activation and its input (``output_before_activation``)."""
        kind = type(layer).layer_class
        if kind not in WITH_ACTIVATION:
            raise NetworkError("layer %r: loss 'generic_ce' needs a layer with an activation (%s) here, got a %r "
                               "layer" % (self.layer_name, ", ".join(WITH_ACTIVATION), kind))
        name = str(getattr(layer, "activation_name", layer.opts.get("activation")))
        if any(part in NOT_ELEMENTWISE for part in name.split(":")[0].split("|")):
            raise NetworkError("layer %r: loss 'generic_ce' needs an element-wise activation, got %r (RETURNN's "
                               "error signal assumes one; use 'ce' on a softmax)" % (self.layer_name, name))

    def check_templates(self, output: Data, target: Optional[Data], target_name: Optional[str]) -> None:
        if target is not None and not target.sparse:
            raise NetworkError("layer %r: loss 'generic_ce' needs sparse targets (RETURNN asserts it), target %r is %s"
                               % (self.layer_name, target_name, target.short_repr()))
        super().check_templates(output, target, target_name)

    def compute_btf(self, output: LayerOutput, target: LayerOutput, train: bool = False) -> LossValues:
        mask = _frame_mask(target)
        labels = target.tensor if mask is None else tf.where(mask > 0, target.tensor, 0)
        onehot = tf.one_hot(labels, output.data.dim, dtype=output.tensor.dtype)

        @tf.custom_gradient
        def frame_loss(y: tf.Tensor):
            probs = y / tf.reduce_sum(y, axis=-1, keepdims=True)
            value = -tf.math.log(tf.clip_by_value(tf.reduce_sum(probs * onehot, axis=-1), 1e-20, 1e20))

            def grad(_upstream: tf.Tensor) -> tf.Tensor:  # RETURNN's signal, whatever scales the loss
                signal = (probs - onehot) / y  # w.r.t. y: the activation's derivative makes it d log(y)/dx * ...
                return signal if mask is None else tf.where(mask[..., None] > 0, signal, 0.0)
            return value, grad

        frames = _frame_count(target, mask)
        wrong = tf.cast(tf.not_equal(tf.argmax(output.tensor, axis=-1, output_type=labels.dtype), labels), tf.float32)
        return LossValues(_masked_sum(frame_loss(output.tensor), mask), frames, _masked_sum(wrong, mask), frames)


class TripletLoss(Loss):
    """RETURNN's ``triplet_loss``: the output holds three (``multi_view_training``: six) embeddings per
    frame or sequence (anchor, same, different), the sparse target (B, 3) their classes. Over all
    pairs of the 3N (cosine-)normalized embeddings, with ``d = 1 - cosine similarity``:
    ``0.5 * sum(d)`` over the pairs RETURNN counts as the same class (equal labels, or the second's
    label is 0) plus ``0.5 * sum(max(margin - d, 0))`` over the others (multi view: of two such
    sets). norm = 9 B (18 B multi view), B the batch size; no error."""

    loss_class = "triplet_loss"
    options = (Option("margin", None, "how much closer the same class should be than a different one (required)"),
               Option("multi_view_training", False, "six embeddings per frame: acoustic and orthographic views"))

    def __init__(self, layer_name: str, loss_opts: Optional[Dict[str, Any]], target_key: str):
        super().__init__(layer_name, loss_opts, target_key)
        margin = self.opts.get("margin")
        if isinstance(margin, bool) or not isinstance(margin, (int, float)):
            raise NetworkError("layer %r: loss 'triplet_loss' needs loss_opts margin (a number), got %r"
                               % (layer_name, margin))
        self.margin = float(margin)
        self.views = 2 if self.opts.get("multi_view_training") else 1

    def expected_output_dim(self, target_dim: Optional[int]) -> Optional[int]:
        return None  # RETURNN checks only that the embeddings split evenly

    def check_templates(self, output: Data, target: Optional[Data], target_name: Optional[str]) -> None:
        """RETURNN's own check (its ``_check_init``): sparse target, the output dim a multiple of 3 (6)."""
        if target is None:
            return
        parts = 3 * self.views
        extra = [a for a in range(target.batch_ndim) if a not in (target.batch_dim_axis, target.time_dim_axis)]
        if not target.sparse or len(extra) != 1 or target.batch_shape[extra[0]] != 3:
            raise NetworkError("layer %r: loss 'triplet_loss' needs a sparse target of three classes per frame or "
                               "sequence (batch[, time], 3), target %r is %s"
                               % (self.layer_name, target_name, target.short_repr()))
        if output.dim is None or output.dim % parts or output.have_time_axis() != target.have_time_axis():
            raise NetworkError("layer %r: loss 'triplet_loss' needs an output dim divisible by %i and a time axis "
                               "where the target has one, got output %s, target %r %s" % (
                                   self.layer_name, parts, output.short_repr(), target_name, target.short_repr()))
        if output.have_time_axis() and not self.opts.get("use_flatten_frames", True):
            raise NetworkError("layer %r: loss 'triplet_loss' with a time axis and use_flatten_frames False is not "
                               "supported here (RETURNN takes the padded frames in)" % self.layer_name)

    def compute(self, output: LayerOutput, target: Optional[LayerOutput], train: bool = False) -> LossValues:
        output = output.copy_as_batch_time_feature()
        target = int32_labels(target.copy_as_batch_time_feature())
        output, target = self.checked(output, target)
        batch = tf.cast(tf.shape(output.tensor)[0], tf.float32)
        out, labels = output.tensor, target.tensor
        if output.data.have_time_axis():  # the real frames, flattened
            out = tf.boolean_mask(out, output.sequence_mask())
            labels = tf.boolean_mask(labels, target.sequence_mask())
        labels = tf.reshape(labels, [-1, 3])
        out = tf.reshape(out, [-1, out.shape[-1]])
        all_labels = tf.concat([labels[:, 0], labels[:, 1], labels[:, 2]], axis=0)
        parts = tf.split(out, 3 * self.views, axis=1)
        if self.views == 1:
            value = self._pairs(tf.concat(parts, axis=0), all_labels)
        else:  # RETURNN's two sets of the acoustic (0..2) and orthographic (3..5) embeddings
            value = (self._pairs(tf.concat([parts[0], parts[4], parts[5]], axis=0), all_labels)
                     + self._pairs(tf.concat([parts[1], parts[4], parts[2]], axis=0), all_labels))
        return LossValues(value, 9.0 * self.views * batch)

    def _pairs(self, embeds: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
        """The loss over all pairs of ``embeds`` (3N, E) with classes ``labels`` (3N,)."""
        unit = tf.nn.l2_normalize(embeds, axis=1, epsilon=1e-15)
        dist = 1.0 - tf.matmul(unit, unit, transpose_b=True)
        row, col = labels[:, None], labels[None, :]
        same = tf.equal(col * col, row * col)  # RETURNN's test: equal labels, or the column's label is 0
        same_loss = 0.5 * tf.reduce_sum(tf.where(same, dist, 0.0))
        diff_loss = 0.5 * tf.reduce_sum(tf.where(same, 0.0, tf.maximum(self.margin - dist, 0.0)))
        return same_loss + diff_loss


for _cls in (GenericCELoss, TripletLoss):
    losses.LOSS_CLASSES[_cls.loss_class] = _cls
