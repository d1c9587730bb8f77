"""RETURNN's losses on a search in training (:mod:`returnn.tf.layers.beam_values`): ``search_score``
(SearchScoreLoss), ``expected_loss`` (ExpectedLoss, minimum Bayes risk over the beam) and ``bleu``
(BleuLoss, an error only). Registered in :data:`returnn.tf.losses.LOSS_CLASSES`.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data
from returnn.tf import losses
from returnn.tf.layers.beam_values import beam_of
from returnn.tf.layers.options import Option
from returnn.tf.layers.output import LayerOutput
from returnn.tf.losses import Loss, LossValues


def _norm(output: LayerOutput) -> tf.Tensor:
    """RETURNN's loss norm without target: the output's frames (sum of its lengths) when it has a
    time axis, else its batch rows."""
    data = output.data
    if data.have_time_axis() and data.batch_dim_axis is not None and output.seq_len is not None:
        return tf.cast(tf.reduce_sum(output.seq_len), tf.float32)
    if data.batch_dim_axis is not None:
        return tf.cast(tf.shape(output.tensor)[data.batch_dim_axis], tf.float32)
    return tf.constant(1.0)


class SearchScoreLoss(Loss):
    """RETURNN's ``search_score``: minus the scores of the hypotheses the layer holds (a ``decide``:
    the chosen one per sequence; a searched rec layer: all of its beam), summed; norm as RETURNN's
    without target (the layer's frames, or its rows). No error. The layer must come from a search
    in training (RETURNN: "no search?")."""

    loss_class = "search_score"
    need_target = False
    framewise = False

    def check_templates(self, output: Data, target: Optional[Data], target_name: Optional[str]) -> None:
        """No target."""

    def compute(self, output: LayerOutput, target: Optional[LayerOutput], train: bool = False) -> LossValues:
        beam = beam_of(output)
        if beam is None:
            raise NetworkError("layer %r: loss 'search_score' needs the scores of a search (a decide or a rec layer "
                               "searching in training), its output has none" % self.layer_name)
        return LossValues(-tf.reduce_sum(tf.cast(beam.scores, tf.float32)), _norm(output))


def _target_frames(target: LayerOutput) -> tf.Tensor:
    """RETURNN's norm with a target of a time axis: its frames."""
    return tf.cast(tf.reduce_sum(target.seq_len), tf.float32)


class BleuLoss(Loss):
    """RETURNN's ``bleu``: no loss (not differentiable); the error is minus the BLEU of each output
    sequence against its target (:mod:`returnn.util.bleu`, sentence level), summed, over the target
    frames. Sparse output and target of the same classes."""

    loss_class = "bleu"
    framewise = False

    def check_templates(self, output: Data, target: Optional[Data], target_name: Optional[str]) -> None:
        if target is None or not (output.sparse and target.sparse) or output.dim != target.dim:
            raise NetworkError("layer %r: loss 'bleu' needs sparse output labels of the target's classes and sparse "
                               "targets (RETURNN asserts it), got output %s, target %r %s"
                               % (self.layer_name, output.short_repr(), target_name,
                                  None if target is None else target.short_repr()))

    def per_sequence(self, output: LayerOutput, target: LayerOutput) -> tf.Tensor:
        """The error of each sequence: minus its BLEU (B,)."""
        from returnn.util.bleu import sentence_bleu
        bleu = tf.numpy_function(sentence_bleu, [output.tensor, output.seq_len, target.tensor, target.seq_len],
                                 tf.float32, stateful=False)
        return -tf.reshape(bleu, [-1])

    def compute_btf(self, output: LayerOutput, target: LayerOutput, train: bool = False) -> LossValues:
        if output.seq_len is None or target.seq_len is None:
            raise NetworkError("layer %r: loss 'bleu' needs output and target with a time axis" % self.layer_name)
        return LossValues(tf.constant(0.0), tf.constant(0.0), tf.reduce_sum(self.per_sequence(output, target)),
                          _target_frames(target))


class ExpectedLoss(Loss):
    """RETURNN's ``expected_loss`` (minimum Bayes risk): another loss's error (``loss_kind``
    "error") of each hypothesis of the layer's beam, weighted by the hypotheses' probabilities
    (softmax of their scores over the beam, ``norm_scores``; its log-normalizer without gradient,
    ``norm_scores_stop_gradient``), the beam's mean error subtracted first without gradient
    (``subtract_average_loss``), summed over the beam and divided by its size
    (``divide_beam_size``), summed over the sequences; norm: the target frames of all hypotheses. The
    gradient reaches the parameters through the scores. The inner loss: ``bleu`` or ``edit_distance``
    (sequence errors)."""

    loss_class = "expected_loss"
    framewise = False
    options = (
        Option("loss", None, "the inner loss, a dict with 'class' (bleu, edit_distance) and its loss_opts"),
        Option("loss_kind", None, "'error' (required): the inner loss's error per hypothesis (RETURNN's 'value' is "
                                  "refused: neither inner loss has one)", only=(None, "error")),
        Option("norm_scores", True, "weights: the hypotheses' scores softmax-normalized over the beam (else exp)"),
        Option("norm_scores_stop_gradient", True, "no gradient through that normalizer"),
        Option("divide_beam_size", True, "divide the weighted sum by the beam size"),
        Option("subtract_average_loss", True, "subtract the beam's mean error (without gradient) first"),
        Option("loss_correction_grad_only", False, "with that: the subtracted mean added back without gradient"),
    )

    def __init__(self, layer_name: str, loss_opts: Optional[Dict[str, Any]], target_key: str):
        super().__init__(layer_name, loss_opts, target_key)
        inner = self.opts.get("loss")
        if not isinstance(inner, dict) or inner.get("class") not in ("bleu", "edit_distance"):
            raise NetworkError("layer %r: loss 'expected_loss' needs loss_opts 'loss' as a dict with class 'bleu' or "
                               "'edit_distance' here, got %r" % (layer_name, inner))
        inner_opts = {k: v for k, v in inner.items() if k != "class"}
        self.inner = losses.LOSS_CLASSES[inner["class"]](layer_name, inner_opts, target_key)
        if self.opts.get("loss_kind") is None:
            raise NetworkError("layer %r: loss 'expected_loss' needs loss_opts 'loss_kind' ('error')" % layer_name)

    def check_templates(self, output: Data, target: Optional[Data], target_name: Optional[str]) -> None:
        self.inner.check_templates(output, target, target_name)

    def _errors(self, output: LayerOutput, target: LayerOutput) -> tf.Tensor:
        """The inner loss's error of each hypothesis (N,)."""
        if isinstance(self.inner, BleuLoss):
            return self.inner.per_sequence(output, target)
        from returnn.tf.losses_ctc import _to_sparse
        if self.inner.opts.get("ctc_decode") or self.inner.label_map:
            raise NetworkError("layer %r: expected_loss over edit_distance with ctc_decode or label_map is not "
                               "supported here" % self.layer_name)
        return tf.edit_distance(_to_sparse(output.tensor, output.sequence_mask()),
                                _to_sparse(target.tensor, target.sequence_mask()), normalize=False)

    def compute(self, output: LayerOutput, target: Optional[LayerOutput], train: bool = False) -> LossValues:
        beam = beam_of(output)
        if beam is None or beam.decided:
            raise NetworkError("layer %r: loss 'expected_loss' needs all hypotheses of a search (a rec layer "
                               "searching in training), RETURNN: 'no search choices'" % self.layer_name)
        out, tgt = self._layout(output, "output"), self._layout(target, "target")
        if out.seq_len is None or tgt.seq_len is None:
            raise NetworkError("layer %r: loss 'expected_loss' needs output and target with a time axis"
                               % self.layer_name)
        scores = tf.cast(beam.scores, tf.float32)  # (B, K)
        errors = tf.reshape(tf.cast(self._errors(out, tgt), tf.float32), tf.shape(scores))
        if self.opts.get("norm_scores", True):
            shift = tf.reduce_logsumexp(scores, axis=1, keepdims=True)
            if self.opts.get("norm_scores_stop_gradient", True):
                shift = tf.stop_gradient(shift)
            weights = tf.exp(scores - shift)
        else:
            weights = tf.exp(scores)
        corrected = errors
        if self.opts.get("subtract_average_loss", True):
            corrected = errors - tf.stop_gradient(tf.reduce_mean(errors, axis=1, keepdims=True))
        weighted = tf.reduce_sum(corrected * weights, axis=1)
        if self.opts.get("loss_correction_grad_only", False) and self.opts.get("subtract_average_loss", True):
            weighted += tf.stop_gradient(tf.reduce_sum((errors - corrected) * weights, axis=1))
        if self.opts.get("divide_beam_size", True):
            weighted /= tf.cast(tf.shape(scores)[1], tf.float32)
        return LossValues(tf.reduce_sum(weighted), _target_frames(tgt))


for _cls in (SearchScoreLoss, BleuLoss, ExpectedLoss):
    losses.LOSS_CLASSES[_cls.loss_class] = _cls
