"""Axes folded into the batch axis and back (RETURNN semantics):

- ``flatten_batch``: ``axis`` (default T) merged into the batch axis. A dynamic axis keeps only its
  real frames: ``(B, T, ...)`` -> ``(sum(lengths), ...)``, in the order (sequence, frame) or, with
  ``batch_major`` False, (frame, sequence); a static axis is merged whole (``B * n``).
- ``unflatten_batch``: the inverse; the packed axis comes back after the batch axis (batch-major)
  or before it (time-major), padded positions hold zeros.
- ``split_batch_time``: ``(B * T, ...)`` (e.g. ``merge_dims`` of B and T, padding included) ->
  ``(B, T, ...)`` with the batch and time extents of ``base`` (default ``data``) and its time axis.
- ``merge_dims`` of the batch axis and one other (:class:`BatchMerge`, used by shape.py): all
  positions of that axis, padding included, as rows of the batch axis.

The new batch axis is a batch :class:`Dim` of its own (equal to every batch dim, as all batch dims
are) that records what it holds (:class:`PackedBatch`): the axis merged into it, its order, and the
batch dim before. The merged axis' per-sequence sizes ride along in the value's ``sizes``; sizes of
other dynamic axes are repeated per packed row.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim, DimTypes
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.helpers import check_sources, concat_inputs, concat_output, relaid
from returnn.tf.layers.options import Option


class PackedBatch:
    """What a folded batch axis holds: ``dim`` merged into ``outer`` (the batch dim before);
    ``real_only``: only the real frames of a dynamic ``dim`` (else all of its positions);
    ``batch_major``: rows ordered (sequence, position), else (position, sequence)."""

    def __init__(self, dim: Dim, outer: Dim, batch_major: bool, real_only: bool):
        self.dim, self.outer, self.batch_major, self.real_only = dim, outer, batch_major, real_only


def packed_batch_dim(name: str, dim: Dim, outer: Dim, batch_major: bool, real_only: bool) -> Dim:
    """A new batch dim holding ``dim`` merged into ``outer``."""
    new = Dim(None, kind=DimTypes.Batch, description="batch:%s(%s)" % (name, dim.description))
    new.packed = PackedBatch(dim, outer, batch_major, real_only)
    return new


def batch_index_of_rows(lens: tf.Tensor, n_batch: tf.Tensor, extent: tf.Tensor, batch_major: bool) -> tf.Tensor:
    """For each real frame in packed order, its sequence index (``(N,)`` int32)."""
    mask = tf.sequence_mask(lens, maxlen=extent)  # (B, T)
    seq = tf.broadcast_to(tf.range(n_batch)[:, None], tf.shape(mask))
    if not batch_major:
        mask, seq = tf.transpose(mask), tf.transpose(seq)
    return tf.boolean_mask(seq, mask)


class _OneInput(Layer):
    """One (feature-concatenated) input, batch axis required."""

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources)
        self.input, self.plan = concat_output(self, sources)
        if self.input.batch_dim_axis is None:
            raise NetworkError("%s: the input needs a batch axis, got %s" % (self.desc, self.input.short_repr()))

    def inputs(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        return concat_inputs(self, self.input, self.plan, sources, ctx)


@register_layer
class FlattenBatchLayer(_OneInput):
    """See the module docstring."""

    layer_class = "flatten_batch"
    no_int_axes = ("axis",)  # RETURNN: allow_int=False
    options = (
        Option("axis", "T", "the axis merged into the batch axis"),
        Option("batch_major", True, "rows in (sequence, frame) order; False: (frame, sequence)"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        data = self.input
        self.ax = self.axis(data, self.opt("axis"), "axis")
        self.dim = data.dims[self.ax]
        if self.dim.is_batch_dim():
            raise NetworkError("%s: 'axis' must not be the batch axis" % self.desc)
        self.batch_major = bool(self.opt("batch_major"))
        self.real_only = self.dim.is_dynamic()
        batch = data.dims[data.batch_dim_axis]
        self.new_batch = packed_batch_dim(name, self.dim, batch, self.batch_major, self.real_only)
        rest = [a for a in range(data.batch_ndim) if a not in (data.batch_dim_axis, self.ax)]
        self.perm = [data.batch_dim_axis, self.ax] if self.batch_major else [self.ax, data.batch_dim_axis]
        self.perm += rest
        self.output = relaid(name, data, [self.new_batch] + [data.dims[a] for a in rest])
        self.repeated = [data.dims[a] for a in rest if data.dims[a].is_dynamic()]  # sizes per packed row

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = self.inputs(sources, ctx)
        tensor = tf.transpose(x.tensor, self.perm)  # (B, T, ...) or (T, B, ...)
        shape = tf.shape(tensor)
        n_batch = shape[1 - int(self.batch_major)]
        extent = shape[int(self.batch_major)]
        if self.real_only:
            lens = x.sizes[self.dim]
            mask = tf.sequence_mask(lens, maxlen=extent)
            out = tf.boolean_mask(tensor, mask if self.batch_major else tf.transpose(mask))
        else:
            lens = tf.fill([n_batch], tf.constant(self.dim.dimension, tf.int32))
            out = tf.reshape(tensor, tf.concat([[-1], shape[2:]], 0))
        sizes = {self.dim: lens}
        if self.repeated:
            rows = batch_index_of_rows(lens, n_batch, extent, self.batch_major)
            for dim in self.repeated:
                size = x.sizes[dim]
                sizes[dim] = tf.gather(size, rows) if len(size.shape) else size
        return self.make_output(out, sources, sizes)


@register_layer
class UnflattenBatchLayer(_OneInput):
    """See the module docstring."""

    layer_class = "unflatten_batch"

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        data = self.input
        batch = data.dims[data.batch_dim_axis]
        self.packed: Optional[PackedBatch] = getattr(batch, "packed", None)
        if self.packed is None:
            raise NetworkError("%s: the input's batch axis holds no flattened axis (flatten_batch), got %s"
                               % (self.desc, data.short_repr()))
        rest = [a for a in range(data.batch_ndim) if a != data.batch_dim_axis]
        self.perm = [data.batch_dim_axis] + rest
        pair = [self.packed.outer, self.packed.dim] if self.packed.batch_major else [self.packed.dim, self.packed.outer]
        special = {}
        if self.packed.dim.is_dynamic() and data.time_dim_axis is None:  # the unpacked axis is the time axis
            special["time_dim_axis"] = pair.index(self.packed.dim)
        self.output = relaid(name, data, pair + [data.dims[a] for a in rest], **special)
        self.repeated = [data.dims[a] for a in rest if data.dims[a].is_dynamic()]

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = self.inputs(sources, ctx)
        tensor = tf.transpose(x.tensor, self.perm)  # (N, ...)
        lens = x.sizes.get(self.packed.dim)
        if lens is None:
            raise NetworkError("%s: the sizes of the flattened axis %r did not reach this layer"
                               % (self.desc, self.packed.dim.description))
        if self.packed.real_only:
            extent = tf.reduce_max(tf.concat([lens, [0]], 0))
        else:  # every position of the axis was merged (its padded extent: rows / sequences)
            extent = tf.shape(tensor)[0] // tf.maximum(tf.shape(lens)[0], 1)
        mask = tf.sequence_mask(lens, maxlen=extent)  # (B, T)
        if not self.packed.batch_major:
            mask = tf.transpose(mask)
        rest_shape = tf.shape(tensor)[1:]
        sizes = {}
        if self.repeated:
            # rows of each sequence carry the same sizes: take them from its first row (0 for empty sequences)
            has_rows = lens > 0
            first_row = tf.cumsum(lens if self.packed.batch_major else tf.cast(has_rows, tf.int32), exclusive=True)
            for dim in self.repeated:
                size = x.sizes[dim]
                if len(size.shape):
                    picked = tf.gather(size, tf.minimum(first_row, tf.maximum(tf.shape(size)[0] - 1, 0)))
                    size = tf.where(has_rows, picked, 0)
                sizes[dim] = size
        if self.packed.real_only:
            index = tf.cast(tf.where(mask), tf.int32)
            out = tf.scatter_nd(index, tensor, tf.concat([tf.shape(mask), rest_shape], 0))
        else:
            out = tf.reshape(tensor, tf.concat([tf.shape(mask), rest_shape], 0))
        return self.make_output(out, sources, sizes)


@register_layer
class SplitBatchTimeLayer(_OneInput):
    """See the module docstring."""

    layer_class = "split_batch_time"
    options = (Option("base", "data", "layer (or data) whose batch and time extents and time axis are restored"),)

    @classmethod
    def outer_sources(cls, name: str, opts: Dict[str, Any], default_target: str = "classes", search: bool = False
                      ) -> List[str]:
        """``from``, then ``base`` (also when not given: its default)."""
        src = opts.get("from", "data")
        base = opts.get("base", "data")
        if not isinstance(base, str):
            raise NetworkError("layer %r (split_batch_time): 'base' must be a layer name, got %r" % (name, base))
        return ([src] if isinstance(src, str) else list(src)) + [base]

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42, **_network_kwargs):
        opts = {k: v for k, v in opts.items() if k != "from"}
        super().__init__(name, opts, sources[:-1], seed)
        base = sources[-1]
        if base.time_dim_axis is None or base.batch_dim_axis is None:
            raise NetworkError("%s: base %r needs a batch and a time axis, got %s"
                               % (self.desc, self.opt("base"), base.short_repr()))
        self.base = base
        data = self.input
        rest = [a for a in range(data.batch_ndim) if a != data.batch_dim_axis]
        self.perm = [data.batch_dim_axis] + rest
        packed = getattr(data.dims[data.batch_dim_axis], "packed", None)
        batch = packed.outer if packed is not None else base.dims[base.batch_dim_axis]
        self.output = relaid(name, data, [batch, base.time_dim] + [data.dims[a] for a in rest], time_dim_axis=1)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = self.inputs(sources[:-1], ctx)
        base = sources[-1]
        shape = tf.shape(base.tensor)
        tensor = tf.transpose(x.tensor, self.perm)
        out = tf.reshape(tensor, tf.concat([[shape[base.data.batch_dim_axis], shape[base.data.time_dim_axis]],
                                            tf.shape(tensor)[1:]], 0))
        sizes = {}
        if self.base.time_dim.is_dynamic():
            sizes[self.base.time_dim] = base.sizes[self.base.time_dim]
        return self.make_output(out, sources[:-1], sizes)


class BatchMerge:
    """``merge_dims`` of the batch axis and one other axis (RETURNN's ``axes: ["B", "T"]``): all
    positions of that axis, padding included, become rows of the batch axis, in the order of the
    merged axes (batch first: (sequence, position)); the packed batch dim records it, so
    ``split_batch_time`` and ``unflatten_batch`` undo it."""

    def __init__(self, layer: Layer, data: Data, axes: List[int]):
        if len(axes) != 2:
            raise NetworkError("%s: merging the batch axis with more than one other axis is not supported, got %s"
                               % (layer.desc, [data.dims[a].short_repr() for a in axes]))
        other = [a for a in axes if a != data.batch_dim_axis][0]
        self.batch_major = axes[0] == data.batch_dim_axis
        self.dim = data.dims[other]
        self.new = packed_batch_dim(layer.layer_name, self.dim, data.dims[data.batch_dim_axis], self.batch_major,
                                    real_only=False)
        self.rest = [a for a in range(data.batch_ndim) if a not in axes]
        self.perm = list(axes) + self.rest
        self.output = relaid(layer.layer_name, data, [self.new] + [data.dims[a] for a in self.rest])
        self.repeated = [data.dims[a] for a in self.rest if data.dims[a].is_dynamic()]

    def forward(self, layer: Layer, x: LayerOutput, sources: List[LayerOutput]) -> LayerOutput:
        tensor = tf.transpose(x.tensor, self.perm)
        shape = tf.shape(tensor)
        out = tf.reshape(tensor, tf.concat([[-1], shape[2:]], 0))
        n_batch, extent = (shape[0], shape[1]) if self.batch_major else (shape[1], shape[0])
        sizes = {self.dim: x.sizes[self.dim] if self.dim.is_dynamic() else tf.fill([n_batch], extent)}
        for dim in self.repeated:  # per row: the sizes of its sequence
            size = x.sizes[dim]
            if len(size.shape):
                size = tf.repeat(size, extent) if self.batch_major else tf.tile(size, [extent])
            sizes[dim] = size
        return layer.make_output(out, sources, sizes)
