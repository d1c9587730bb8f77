"""Linear alignments as RETURNN's TFUtil makes them for transducer configs (``targetb_linear`` eval layers):
``get_linear_alignment_out_to_in_indices`` and ``get_rnnt_linear_aligned_output``."""
from __future__ import annotations

from typing import Tuple

import tensorflow as tf


def get_linear_alignment_out_to_in_indices(input_lens, output_lens, pad_value: int = 0) -> tf.Tensor:
    """(B, max output_len) input positions, spread evenly: output frame t of a sequence maps to
    round((t + 1) * (in_len + 1) / (out_len + 1)) - 1, kept within [0, in_len - 1]; ``pad_value`` past
    out_len. E.g. in 7, out 3: [1, 3, 5]; in 2, out 4: [0, 0, 1, 1]."""
    input_lens = tf.convert_to_tensor(input_lens)
    output_lens = tf.convert_to_tensor(output_lens)
    steps = tf.range(tf.reduce_max(output_lens))[None, :]  # (1, T)
    ratio = tf.maximum(tf.cast(input_lens + 1, tf.float32), 0.0) / tf.maximum(tf.cast(output_lens + 1, tf.float32), 1.0)
    pos = tf.cast(tf.round(tf.cast(steps + 1, tf.float32) * ratio[:, None]), tf.int32) - 1  # (B, T)
    pos = tf.clip_by_value(pos, 0, tf.broadcast_to((input_lens - 1)[:, None], tf.shape(pos)))
    return tf.where(steps < output_lens[:, None], pos, pad_value)


def get_rnnt_linear_aligned_output(input_lens, targets, target_lens, blank_label_idx: int, pad_value: int = 0,
                                   targets_consume_time: bool = False) -> Tuple[tf.Tensor, tf.Tensor]:
    """The targets (B, S) spread linearly over in_len + target_len frames (RNN-T: a label takes no frame;
    in_len frames with ``targets_consume_time``, RNA) with ``blank_label_idx`` in between: in 4, [a, b, c] ->
    [B, a, B, b, B, c, B]; in 0 -> [a, b, c]. Returns (B, max len) labels (``pad_value`` past each length)
    and the lengths (B,)."""
    input_lens = tf.convert_to_tensor(input_lens)
    targets = tf.convert_to_tensor(targets)
    target_lens = tf.convert_to_tensor(target_lens)
    out_lens = input_lens if targets_consume_time else input_lens + target_lens
    n_out = tf.reduce_max(out_lens)
    batch = tf.shape(out_lens)[0]
    n_targets = tf.shape(targets)[1]
    # the output frame (1-based; 0: none, past the output) of each target label
    frame = get_linear_alignment_out_to_in_indices(tf.maximum(out_lens, target_lens), target_lens, pad_value=-1) + 1
    frame = tf.where(frame > out_lens[:, None], 0, frame)
    rows = tf.broadcast_to(tf.range(batch)[:, None], tf.shape(frame))
    # per output frame (0 is a scratch column): which label, 1-based into the targets; 0 is the blank
    label_of = tf.scatter_nd(tf.stack([rows, frame], axis=-1),
                             tf.broadcast_to(tf.range(n_targets)[None, :] + 1, tf.shape(frame)),
                             [batch, n_out + 1])[:, 1:]
    values = tf.concat([tf.fill([batch, 1], tf.cast(blank_label_idx, targets.dtype)), targets], axis=1)
    out = tf.gather(values, label_of, batch_dims=1)
    out = tf.where(tf.range(n_out)[None, :] < out_lens[:, None], out, tf.cast(pad_value, out.dtype))
    return out, out_lens
