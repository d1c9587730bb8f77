"""RETURNN's losses on a search in training (:mod:`returnn.tf.layers.beam_values`): ``search_score``
(SearchScoreLoss). Registered in :data:`returnn.tf.losses.LOSS_CLASSES`.
"""
from __future__ import annotations

from typing import Optional

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data
from returnn.tf import losses
from returnn.tf.layers.beam_values import beam_of
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


for _cls in (SearchScoreLoss,):
    losses.LOSS_CLASSES[_cls.loss_class] = _cls
