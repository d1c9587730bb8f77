"""Axes merged into the batch axis, RETURNN's ``copy_merge_into_batch`` around a layer that works on
``(batch, time, feature)`` only.

RETURNN's ``rec`` layer with a cell unit (``lstm``, ``nativelstm2``, ...) over an input with more
axes, e.g. ``(B, T, S, F)``, merges every axis but time and feature into the batch axis
(``(T, B*S, F)``: each ``(b, s)`` is a sequence of its own, of ``b``'s length, with the same
parameters), runs the recurrence and splits the batch again: the output has the input's axes with
the feature axis replaced. Here the output is batch-major, ``(B, T, S..., F')`` (the extra axes in
their input order, as RETURNN keeps them behind the batch axis).

:class:`MergedAxes` does this for the sources of a layer: templates without the extra axes (their
batch axis standing for the merged one) to build the layer on, values merged before the layer's
computation, and its ``(B*S..., T, F')`` result split again.
"""
from __future__ import annotations

from typing import List, Optional, Sequence

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim
from returnn.tf.layers.output import LayerOutput


def _index(data: Data, dim: Dim) -> Optional[int]:
    for i, d in enumerate(data.dims):
        if d == dim:
            return i
    return None


class MergedAxes:
    """The extra axes of ``sources`` (neither batch, nor the time axis, nor a feature axis) and how
    each source is merged; :attr:`extra` is empty when there are none (then nothing changes)."""

    def __init__(self, where: str, sources: Sequence[Data]):
        self.where = where
        self.extra: List[Dim] = []
        time = next((s.time_dim for s in sources if s.time_dim is not None), None)
        for src in sources:
            for i, d in enumerate(src.dims):
                if d.is_batch_dim() or d == time or i == src.feature_dim_axis or any(d == e for e in self.extra):
                    continue
                self.extra.append(d)
        if not self.extra:
            return
        if any(not s.have_batch_axis() for s in sources):
            raise NetworkError("%s: an input with more axes than (batch, time, feature) needs a batch axis, got %s"
                               % (where, [s.short_repr() for s in sources]))
        for src in sources:
            missing = [e for e in self.extra if _index(src, e) is None]
            if missing:
                raise NetworkError("%s: the sources' extra axes (merged into the batch, as RETURNN does) must be the "
                                   "same in each source; %s lacks %s" % (where, src.short_repr(), missing))
        self.templates = [self._inner(s) for s in sources]

    def _perm(self, data: Data) -> List[int]:
        """Batch axis, the extra axes (in :attr:`extra` order), then the others in their order."""
        extra = [_index(data, e) for e in self.extra]
        rest = [i for i in range(data.batch_ndim) if i != data.batch_dim_axis and i not in extra]
        return [data.batch_dim_axis] + extra + rest

    def _inner(self, data: Data) -> Data:
        moved = data.copy_transpose(self._perm(data))
        for _ in self.extra:
            moved = moved.copy_template_excluding_axis(1)
        return moved

    def merge(self, value: LayerOutput, i: int) -> LayerOutput:
        """Source ``i``'s value with its extra axes merged into the batch axis (batch-major, ``b``
        outer), its sizes repeated for each merged entry."""
        tensor = tf.transpose(value.tensor, self._perm(value.data))
        shape = tf.shape(tensor)
        n_extra = len(self.extra)
        count = tf.reduce_prod(shape[1:1 + n_extra])
        tensor = tf.reshape(tensor, tf.concat([[shape[0] * count], shape[1 + n_extra:]], 0))
        sizes = {d: tf.repeat(s, count, axis=0) for d, s in value.sizes.items()
                 if len(s.shape) == 1 and not any(d == e for e in self.extra)}
        return LayerOutput(tensor, self.templates[i], sizes, None)

    def output_template(self, inner: Data, name: str) -> Data:
        """The layer's output: the inner (batch, time, feature) output with the extra axes after time."""
        if inner.batch_dim_axis != 0 or inner.batch_ndim != 3 or inner.feature_dim_axis != 2:
            raise NetworkError("%s: internal error: expected a (batch, time, feature) inner output, got %s"
                               % (self.where, inner.short_repr()))
        dims = list(inner.dims[:2]) + list(self.extra) + [inner.dims[2]]
        return Data(name, dims=dims, dtype=inner.dtype, feature_dim_axis=len(dims) - 1)

    def split(self, y: tf.Tensor, first: LayerOutput) -> tf.Tensor:
        """The inner result ``(B*S..., T, F')`` as ``(B, T, S..., F')``; ``first``: a source's value
        before merging (the extra axes' sizes)."""
        data = first.data
        extra_sizes = [tf.shape(first.tensor)[_index(data, e)] for e in self.extra]
        batch = tf.shape(first.tensor)[data.batch_dim_axis]
        ys = tf.shape(y)
        y = tf.reshape(y, tf.concat([[batch], tf.stack(extra_sizes), ys[1:]], 0))
        n = len(self.extra)
        return tf.transpose(y, [0, n + 1] + list(range(1, n + 1)) + [n + 2])
