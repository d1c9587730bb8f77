"""RETURNN's layers on the search beam: ``choice_get_beam_scores``, ``choice_get_src_beams``,
``decide_keep_beam``, ``split_batch_beam``.

Here the beam exists only inside a searched rec loop (:mod:`returnn.tf.layers.rec_net.search`:
``B * K`` rows per step, the rec layer's value is the best hypothesis). Inside that loop:

- ``choice_get_beam_scores`` (``from`` a ``choice``): the accumulated score of each of the ``B * K``
  hypotheses after this step's choice, float32 ``(B * K,)``;
- ``choice_get_src_beams``: the hypothesis (0..K-1) each one continues, int32 ``(B * K,)``;

``choice_get_beam_scores`` of a searched rec layer in training (its value has all hypotheses,
:mod:`returnn.tf.layers.beam_values`): the scores of its final beam, ``(B * K,)``. Both need a searched choice
as source (RETURNN: "the source has no search choices"): without search
(teacher forcing) they are an error when the step runs. ``decide_keep_beam``: its input unchanged
(RETURNN marks the beam as decided without resolving it). ``split_batch_beam``: ``(B * K, ...)`` ->
``(B, K, ...)`` with ``beam_dim`` (a Dim of size K) as the new axis after the batch axis; here
``beam_dim`` must be given (RETURNN takes K from the source's beam, which templates here do not carry);
dynamic axes keep the sizes of each sequence's first hypothesis.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.beam_values import beam_of
from returnn.tf.layers.helpers import check_sources
from returnn.tf.layers.options import Option

# names of the per-step beam values the beam search attaches to a choice's value (sub_outputs)
BEAM_SCORES, SRC_BEAMS = "beam_scores", "src_beams"


class _ChoiceBeamLayer(Layer):
    """A value of the searched choice's beam, (B * K,)."""

    default_from = ()
    key = ""
    dtype = "float32"

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources, 1, 1)
        src = sources[0]
        if src.batch_dim_axis is None:
            raise NetworkError("%s: the source must be a choice with a batch axis, got %s" % (self.desc, src.short_repr()))
        self.output = Data(name, dims=[src.dims[src.batch_dim_axis]], dtype=self.dtype)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        value = sources[0].sub_outputs.get(self.key)
        beam = beam_of(sources[0])
        if value is None and self.key == BEAM_SCORES and beam is not None and not beam.decided:
            # a searched rec layer's value in training (beam_values.py): its final beam's scores, (B * K,)
            return LayerOutput(tf.reshape(beam.scores, [-1]), self.output)
        if value is None:
            raise NetworkError("%s: the source has no search choices (it must be a choice inside a searched rec "
                               "loop)" % self.desc)
        return LayerOutput(tf.cast(tf.reshape(value.tensor, [-1]), self.dtype), self.output)


@register_layer
class ChoiceGetBeamScoresLayer(_ChoiceBeamLayer):
    """See the module docstring."""

    layer_class = "choice_get_beam_scores"
    key = BEAM_SCORES


@register_layer
class ChoiceGetSrcBeamsLayer(_ChoiceBeamLayer):
    """See the module docstring."""

    layer_class = "choice_get_src_beams"
    key = SRC_BEAMS
    dtype = "int32"


@register_layer
class DecideKeepBeamLayer(Layer):
    """See the module docstring."""

    layer_class = "decide_keep_beam"
    default_from = ()

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources, 1, 1)
        self.output = sources[0].copy(name)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        out = sources[0].with_tensor(sources[0].tensor, self.output)
        out.sub_outputs = dict(sources[0].sub_outputs)  # the beam values stay with it
        return out


@register_layer
class SplitBatchBeamLayer(Layer):
    """See the module docstring."""

    layer_class = "split_batch_beam"
    options = (Option("beam_dim", None, "Dim of the beam axis (its size is the beam size; required here)"),)

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources, 1, 1)
        src = sources[0]
        beam = self.opt("beam_dim")
        if not isinstance(beam, Dim) or beam.dimension is None:
            raise NetworkError("%s: needs 'beam_dim', a Dim of the beam size (RETURNN takes it from the source's "
                               "beam, which is not known here before the search runs)" % self.desc)
        if src.batch_dim_axis is None:
            raise NetworkError("%s: the source needs a batch axis, got %s" % (self.desc, src.short_repr()))
        self.perm = [src.batch_dim_axis] + [a for a in range(src.batch_ndim) if a != src.batch_dim_axis]
        dims = [src.dims[a] for a in self.perm]
        self.output = Data(name, dims=dims[:1] + [beam] + dims[1:], dtype=src.dtype, sparse_dim=src.sparse_dim)
        self.k = beam.dimension

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = tf.transpose(sources[0].tensor, self.perm)
        shape = tf.shape(x)
        y = tf.reshape(x, tf.concat([[shape[0] // self.k, self.k], shape[1:]], 0))
        sizes = {d: (tf.reshape(s, [-1, self.k])[:, 0] if len(s.shape) == 1 else s) for d, s in sources[0].sizes.items()}
        return LayerOutput(y, self.output, sizes)
