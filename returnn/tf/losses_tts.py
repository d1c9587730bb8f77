"""RETURNN's losses of its TTS configs (Tacotron2): ``mean_l1`` (MeanL1Loss), ``l1`` (L1Loss) and
``bin_ce`` (BinaryCrossEntropyLoss, the stop token). Registered in
:data:`returnn.tf.losses.LOSS_CLASSES`."""
from __future__ import annotations

from typing import Optional

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data
from returnn.tf import losses
from returnn.tf.layers.options import Option
from returnn.tf.layers.output import LayerOutput
from returnn.tf.losses import Loss, LossValues, _frame_count, _frame_mask, _masked_sum


class MeanL1Loss(Loss):
    """RETURNN's ``mean_l1``: as ``mse`` with the absolute difference, per frame the mean over the
    features of ``|output - target|``, summed over the real frames; norm = target frames. Dense
    targets only (RETURNN asserts it); the error is the frame error of ``mse``."""

    loss_class = "mean_l1"
    frame_local = True

    def check_templates(self, output: Data, target: Optional[Data], target_name: Optional[str]) -> None:
        if target is not None and target.sparse:
            raise NetworkError("layer %r: loss %r needs a dense target (RETURNN: sparse targets are not "
                               "supported), target %r is %s" % (self.layer_name, self.loss_class, target_name,
                                                                target.short_repr()))
        super().check_templates(output, target, target_name)

    reduce_features = staticmethod(tf.reduce_mean)  # per frame over the features (l1: the sum)

    def compute_btf(self, output: LayerOutput, target: LayerOutput, train: bool = False) -> LossValues:
        mask = _frame_mask(target)
        diff = tf.abs(output.tensor - tf.cast(target.tensor, output.tensor.dtype))
        has_features = output.data.feature_dim_axis is not None
        frame_loss = self.reduce_features(diff, axis=-1) if has_features else diff
        frames = _frame_count(target, mask)
        if not has_features:
            return LossValues(_masked_sum(frame_loss, mask), frames)
        labels = tf.argmax(target.tensor, axis=-1, output_type=tf.int32)
        wrong = tf.cast(tf.not_equal(tf.argmax(output.tensor, axis=-1, output_type=tf.int32), labels), tf.float32)
        return LossValues(_masked_sum(frame_loss, mask), frames, _masked_sum(wrong, mask), frames)


class L1Loss(MeanL1Loss):
    """RETURNN's ``l1``: ``|target - output|`` summed over the features and the real frames (not the
    mean over the features as ``mean_l1``); norm and error as ``mean_l1``."""

    loss_class = "l1"
    reduce_features = staticmethod(tf.reduce_sum)


class BinaryCrossEntropyLoss(Loss):
    """RETURNN's ``bin_ce``: the output holds logits; per frame the sigmoid cross entropy with the
    target (dense, 0..1), summed over the features and divided by the output dim (``pos_weight``:
    TensorFlow's weighted form), summed over the real frames; norm = target frames. Error: per frame
    the fraction of features where ``logit > 0`` differs from ``target > 0.5``."""

    loss_class = "bin_ce"
    frame_local = True
    options = (Option("pos_weight", None, "weight of the positive labels (tf.nn.weighted_cross_entropy_with_logits)"),)

    def check_templates(self, output: Data, target: Optional[Data], target_name: Optional[str]) -> None:
        """RETURNN's check: as many axes on both sides (batch included)."""
        if target is not None and target.batch_ndim != output.batch_ndim:
            raise NetworkError("layer %r: loss 'bin_ce': output %s and target %r %s do not have the same number of "
                               "axes (RETURNN: number of dimensions mismatch)"
                               % (self.layer_name, output.short_repr(), target_name, target.short_repr()))

    def compute_btf(self, output: LayerOutput, target: LayerOutput, train: bool = False) -> LossValues:
        mask = _frame_mask(target)
        logits = output.tensor
        labels = tf.cast(target.tensor, logits.dtype)
        pos_weight = self.opts.get("pos_weight")
        if pos_weight is None:
            ce = tf.nn.sigmoid_cross_entropy_with_logits(logits=logits, labels=labels)
        else:
            ce = tf.nn.weighted_cross_entropy_with_logits(logits=logits, labels=labels, pos_weight=float(pos_weight))
        wrong = tf.cast(tf.not_equal(logits > 0.0, labels > 0.5), logits.dtype)
        scale = 1.0 / float(output.data.dim or 1)
        has_features = output.data.feature_dim_axis is not None
        if has_features:
            ce, wrong = tf.reduce_sum(ce, axis=-1), tf.reduce_sum(wrong, axis=-1)
        frames = _frame_count(target, mask)
        return LossValues(_masked_sum(ce, mask) * scale, frames, _masked_sum(wrong, mask) * scale, frames)


for _cls in (MeanL1Loss, L1Loss, BinaryCrossEntropyLoss):
    losses.LOSS_CLASSES[_cls.loss_class] = _cls
