"""Frame-wise layers on the real frames only: the padding of a (batch, time, feature) value is left out.

A batch of sequences of different lengths is padded to its longest one; in the benchmark configs
15-20 % of the frames are padding. A frame-wise layer (``linear``/``softmax``: one product per
frame) and a frame-wise loss need not see them. :class:`PackedFrames` holds the real frames of a
(B, T, F) value as rows (N, F) and where each row belongs (``index``: its position in the
flattened (B*T) layout). A layer that computes packed rows also gives its padded (B, T, F) tensor
for layers that need that layout (its padded frames hold what the layer computes from a zero
frame, e.g. softmax(bias), as without packing); in a traced step function, a padded
tensor no layer reads is never computed, so a chain of frame-wise layers runs packed from its
first input to its loss. The rows of one chain share one ``index``: packed values of different
chains are only combined through their padded tensors.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import tensorflow as tf

from returnn.tensor import Data


@dataclass
class PackedFrames:
    """The real frames of a (B, T, F) value: ``values`` (N, F); row i is frame ``index[i]`` of the
    flattened (B*T) layout, ``outer`` = [B, T] (int64); ``logits`` (N, F) when the value is a
    softmax of them. The padded tensor's shape is never read from it: that would compute it."""

    values: tf.Tensor
    index: tf.Tensor
    outer: tf.Tensor
    logits: Optional[tf.Tensor] = None
    fill: Optional[tf.Tensor] = None  # (1, F): the value of every padded frame, where it is one row (else None)

    def like(self, values: tf.Tensor, logits: Optional[tf.Tensor] = None) -> "PackedFrames":
        """Other rows of the same frames."""
        return PackedFrames(values, self.index, self.outer, logits)

    def unpack(self, rows: tf.Tensor, static_outer: tf.TensorShape, fill: tf.Tensor) -> tf.Tensor:
        """The (B, T, F') tensor of ``rows`` (N, F') of these frames; ``fill`` (1, F') on the padding."""
        n_out = rows.shape[-1]
        shape = tf.stack([self.outer[0] * self.outer[1], n_out])
        flat = tf.tensor_scatter_nd_update(tf.broadcast_to(fill, shape), self.index[:, None], rows)
        out = tf.reshape(flat, tf.concat([tf.cast(self.outer, tf.int32), [n_out]], 0))
        out.set_shape(static_outer.concatenate([n_out]))
        return out

    def gather(self, tensor: tf.Tensor) -> tf.Tensor:
        """These frames of a (B, T', ...) tensor with the same lengths (maybe other padding T')
        as rows (N, ...), e.g. the targets of a packed output."""
        shape = tf.shape(tensor)
        rows = self.index // self.outer[1] * tf.cast(shape[1], self.index.dtype) + self.index % self.outer[1]
        return tf.gather(tf.reshape(tensor, tf.concat([[-1], shape[2:]], 0)), rows)

    def flat_mask(self, mask: tf.Tensor) -> tf.Tensor:
        """A (B, T, F) factor (static size 1 where it broadcasts) for the rows: (1, F) when it is
        shared by all frames, else its rows."""
        if mask.shape[0] == 1 and mask.shape[1] == 1:
            return tf.reshape(mask, [1, -1])
        full = tf.broadcast_to(mask, tf.concat([tf.cast(self.outer, tf.int32), tf.shape(mask)[2:]], 0))
        return self.gather(full)


def packable(data: Data) -> bool:
    """True for dense (batch, time, feature) values whose only dynamic axis is time."""
    if data.sparse or data.batch_ndim != 3 or (data.batch_dim_axis, data.time_dim_axis, data.feature_dim_axis) != (0, 1, 2):
        return False
    return data.get_dynamic_axes() == [1] and data.dims[2].dimension is not None


def has_frame_sizes(x) -> bool:
    """Whether the time sizes of a :class:`LayerOutput` are per sequence ((B,), not one scalar)."""
    if x.packed is not None:
        return True
    seq_len = x.seq_len
    return seq_len is not None and seq_len.shape.rank == 1


def frame_index(seq_len: tf.Tensor, max_len: tf.Tensor) -> tf.Tensor:
    """Positions (N,) int64 of the real frames in the flattened (B*T) layout, sequence by sequence."""
    mask = tf.sequence_mask(seq_len, maxlen=max_len)
    return tf.where(tf.reshape(mask, [-1]))[:, 0]


@tf.custom_gradient
def gather_rows(x2d: tf.Tensor, index: tf.Tensor):
    """``x2d[index]``; the gradient scatters back (the positions are distinct, so no sums)."""
    def grad(dy):
        return tf.scatter_nd(index[:, None], dy, tf.shape(x2d, out_type=index.dtype)), None
    return tf.gather(x2d, index), grad


def pack(x) -> PackedFrames:
    """The real frames of a packable :class:`LayerOutput` ``x``: its own rows if it has them,
    else gathered from its tensor."""
    if x.packed is not None:
        return x.packed
    tensor = x.tensor
    outer = tf.shape(tensor, out_type=tf.int64)[:2]
    index = frame_index(x.seq_len, outer[1])
    rows = gather_rows(tf.reshape(tensor, [-1, x.data.dims[2].dimension]), index)  # static F (packable)
    return PackedFrames(rows, index, outer)
