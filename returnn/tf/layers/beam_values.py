"""The search beam on values outside a searched rec loop (RETURNN's ``Data.beam`` with its
``SearchChoices``), for search inside a training network (``search_train_network_layers``,
``extra.search:``, a choice with ``search: True``).

There a searched rec layer's value holds all ``K`` final hypotheses of each sequence, ``B * K``
rows (sequence-major: row ``b * K + k``), and carries a :class:`Beam`: ``K`` and the hypotheses'
scores ``(B, K)`` (RETURNN's ``beam_scores``, best first). Templates know nothing of the beam.
When a layer runs (:meth:`Layer.__call__`), sources without the beam are repeated ``K`` times on
their batch axis to meet a beamed one (RETURNN's ``copy_extend_with_beam``), and the output
carries the beam on; so do loss targets (:func:`tile_like`). ``decide`` picks each sequence's
best hypothesis (``K`` = 1 after it, its score kept for the ``search_score`` loss). In the search
task the rec layer gives the best hypothesis itself (no beam on values).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tf.layers.output import LayerOutput


@dataclass
class Beam:
    """``k`` hypotheses per sequence and their scores ``(B, k)``; ``owner``: the layer that searched.
    A beam of 1 (``beam_size`` 1, or ``decided``) never repeats other values."""

    k: int
    scores: tf.Tensor
    owner: str
    decided: bool = False  # a decide's: each sequence's chosen hypothesis (RETURNN: no beam any more)


def beam_of(value: Optional[LayerOutput]) -> Optional[Beam]:
    """The beam a value carries (None: none)."""
    return getattr(value, "beam", None)


def common_beam(where: str, values: Sequence[Optional[LayerOutput]]) -> Optional[Beam]:
    """The beam (``k`` > 1) of the beamed ``values``; an error when two searches meet."""
    beams = [b for b in map(beam_of, values) if b is not None and b.k > 1]
    for b in beams[1:]:
        if b.owner != beams[0].owner:
            raise NetworkError("%s: its sources come from two different searches (%r, %r); RETURNN would need "
                               "a 'decide' on one of them" % (where, beams[0].owner, b.owner))
    return beams[0] if beams else None


def repeat_batch(value: LayerOutput, k: int) -> LayerOutput:
    """``value`` with each sequence repeated ``k`` times on the batch axis (also its sizes)."""
    ax = value.data.batch_dim_axis
    if ax is None or k == 1:
        return value
    sizes = {d: (tf.repeat(s, k, axis=0) if len(s.shape) == 1 else s) for d, s in value.sizes.items()}
    logits = None if value.logits is None else tf.repeat(value.logits, k, axis=ax)
    out = LayerOutput(tf.repeat(value.tensor, k, axis=ax), value.data, sizes, logits)
    out.computed_padding = value.computed_padding  # a layer's padded frames stay what it computed there
    return out


def tiled(values: Sequence[LayerOutput], beam: Beam) -> List[LayerOutput]:
    """``values`` with those not on ``beam`` repeated on it."""
    out = []
    for v in values:
        own = beam_of(v)
        if v is not None and (own is None or own.k == 1):
            v = repeat_batch(v, beam.k)
        out.append(v)
    return out


def tile_like(target: Optional[LayerOutput], output: LayerOutput) -> Optional[LayerOutput]:
    """A loss target on the beam of ``output`` (RETURNN's loss: the target extended with the beam)."""
    beam = beam_of(output)
    if target is None or beam is None or beam.k == 1 or beam_of(target) is not None:
        return target
    return repeat_batch(target, beam.k)


def with_beam(value: LayerOutput, beam: Optional[Beam]) -> LayerOutput:
    """``value`` marked as carrying ``beam`` (also its sub-outputs); returned for chaining."""
    if beam is not None and beam_of(value) is None:
        value.beam = beam
        for sub in value.sub_outputs.values():
            if beam_of(sub) is None:
                sub.beam = beam
    return value


def decide(where: str, value: LayerOutput, template, length_normalization: bool = False) -> LayerOutput:
    """RETURNN's ``DecideLayer``: each sequence's best hypothesis of a beamed ``value`` (by its score,
    divided by its length with ``length_normalization``), its padded axes cut to the longest kept
    length; without a beam the value as is. The result carries a beam of 1 with the kept scores."""
    beam = beam_of(value)
    if beam is None or beam.decided:
        return value.with_tensor(value.tensor, template)
    data = value.data
    if data.batch_dim_axis is None:
        raise NetworkError("%s: a beamed source without batch axis %s" % (where, data.short_repr()))
    scores = beam.scores
    n_batch = tf.shape(scores)[0]
    if length_normalization:
        lens = value.seq_len if value.seq_len is not None else tf.ones([n_batch * beam.k], tf.int32)
        scores = scores / tf.cast(tf.reshape(lens, [n_batch, beam.k]), scores.dtype)
    best = tf.argmax(scores, axis=1, output_type=tf.int32)  # (B,)
    rows = tf.range(n_batch) * beam.k + best
    tensor = tf.gather(value.tensor, rows, axis=data.batch_dim_axis)
    logits = None if value.logits is None else tf.gather(value.logits, rows, axis=data.batch_dim_axis)
    sizes = {d: tf.gather(s, rows) if len(s.shape) == 1 else s for d, s in value.sizes.items()}
    for axis in data.get_dynamic_axes():  # RETURNN: cut to the longest kept hypothesis
        size = sizes.get(data.dims[axis])
        if size is not None and len(size.shape) == 1:
            cut = [slice(None)] * data.batch_ndim
            cut[axis] = slice(None, tf.reduce_max(tf.concat([size, [0]], 0)))
            tensor = tensor[tuple(cut)]
            logits = None if logits is None else logits[tuple(cut)]
    out = LayerOutput(tensor, template, sizes, logits)
    out.beam = Beam(1, tf.gather(scores, best, batch_dims=1)[:, None], beam.owner, decided=True)
    return out
