"""Edit distance rows step by step, with TensorFlow ops: RETURNN's native ops ``NextEditDistanceRowOp``
and ``NextEditDistanceReduceOp`` (returnn/native_op.py), used by its ``edit_distance_table`` and
``optimal_completions`` layers (optimal completion distillation).

A row ``(B, T_b + 1)`` holds, for a hypothesis ``a`` built label by label, the Levenshtein distance of
its prefix so far against each prefix ``b[:j]`` of the reference (insertion, deletion and substitution
cost 1). The next row for label ``a_t`` at position ``a_n`` (the prefix length before it):

- ``next[0] = a_n + 1``;
- ``next[j] = min(last[j] + 1, next[j - 1] + 1, last[j - 1] + (a_t != b[j - 1]))`` for ``1 <= j <= b_len``,
  computed without a loop over ``j``: with ``c[j] = min(last[j] + 1, last[j - 1] + sub)`` (and
  ``c[0] = next[0]``), ``next[j] = j + min_{i <= j} (c[i] - i)`` (a prefix minimum, by doubling);
- positions after ``b_len`` (padded reference frames) repeat ``next[b_len]``, as RETURNN's op writes them;
- a hypothesis that ended (``a_ended``) keeps its row (positions up to ``b_len``; after it ``last[b_len]``).

The optimal completion of each label ``v`` (RETURNN's reduce with ``optimal_completion``) is the
minimum of the row the label would give, over ``0 .. b_len``; it needs no row per label:
``min(a_n + 1, min_{j <= b_len} last[j] + 1, min_{j < b_len, b[j] == v} last[j])`` (the middle term
only when ``b_len > 0``). An ended
hypothesis, or ``v`` equal to ``blank_idx``, gives the minimum of the last row over ``0 .. b_len``.
All values are int32; nothing here has a gradient.
"""
from __future__ import annotations

from typing import Optional

import tensorflow as tf

BIG = 2 ** 30  # larger than any distance (a stand-in for +inf in int32 minima)


def _prefix_min(x: tf.Tensor) -> tf.Tensor:
    """Running minimum along the last axis (int32, (B, N)), by log2(N) shifted minima."""
    n = tf.shape(x)[-1]
    shift = tf.constant(1)

    def body(shift, x):
        shifted = tf.concat([tf.fill(tf.stack([tf.shape(x)[0], tf.minimum(shift, n)]), BIG), x[:, :-shift]], 1)
        shifted = shifted[:, :n]
        return shift * 2, tf.minimum(x, shifted)

    _, x = tf.while_loop(lambda shift, x: shift < n, body, [shift, x],
                         shape_invariants=[shift.shape, tf.TensorShape([None, None])])
    return x


def _valid(b_len: tf.Tensor, width: tf.Tensor) -> tf.Tensor:
    """(B, width) bool: position j <= b_len."""
    return tf.range(width)[None, :] <= b_len[:, None]


def _fill_after_len(row: tf.Tensor, b_len: tf.Tensor) -> tf.Tensor:
    """Positions after ``b_len`` set to the value at ``b_len`` (RETURNN's op repeats the last entry)."""
    at_len = tf.gather(row, b_len, axis=1, batch_dims=1)
    return tf.where(_valid(b_len, tf.shape(row)[1]), row, at_len[:, None])


def next_edit_distance_row(last_row: tf.Tensor, a: tf.Tensor, a_n: tf.Tensor, a_ended: tf.Tensor,
                           b: tf.Tensor, b_len: tf.Tensor) -> tf.Tensor:
    """RETURNN's ``next_edit_distance_row``: ``last_row`` (B, T_b + 1), the next label ``a`` (B,), its
    position ``a_n`` (scalar or (B,)), ``a_ended`` (B,) bool, reference ``b`` (B, T_b) with lengths
    ``b_len`` (B,); returns the next row (B, T_b + 1), int32."""
    last_row = tf.cast(last_row, tf.int32)
    a, b, b_len = tf.cast(a, tf.int32), tf.cast(b, tf.int32), tf.cast(b_len, tf.int32)
    a_n = tf.broadcast_to(tf.cast(a_n, tf.int32), tf.shape(a))
    width = tf.shape(last_row)[1]
    sub = tf.cast(tf.not_equal(a[:, None], b), tf.int32)  # (B, T_b)
    cand = tf.minimum(last_row[:, 1:] + 1, last_row[:, :-1] + sub)  # c[j], j = 1 .. T_b
    cand = tf.concat([(a_n + 1)[:, None], cand], 1)  # (B, T_b + 1)
    pos = tf.range(width)[None, :]
    row = _prefix_min(cand - pos) + pos
    row = tf.where(tf.cast(a_ended, tf.bool)[:, None], last_row, row)
    return _fill_after_len(row, b_len)


def optimal_completion_distances(last_row: tf.Tensor, n_labels: int, a_n: tf.Tensor, a_ended: tf.Tensor,
                                 b: tf.Tensor, b_len: tf.Tensor, blank_idx: Optional[int] = None) -> tf.Tensor:
    """RETURNN's ``next_edit_distance_reduce`` with ``optimal_completion`` for the successors
    ``range(n_labels)``: (B, n_labels) int32, per label the least distance of the row it would give
    (see the module docstring)."""
    last_row = tf.cast(last_row, tf.int32)
    b, b_len = tf.cast(b, tf.int32), tf.cast(b_len, tf.int32)
    batch = tf.shape(last_row)[0]
    a_n = tf.broadcast_to(tf.cast(a_n, tf.int32), tf.stack([batch]))
    t_b = tf.shape(b)[1]
    valid = _valid(b_len, tf.shape(last_row)[1])
    row_min = tf.reduce_min(tf.where(valid, last_row, BIG), axis=1)  # (B,) over 0 .. b_len
    # per label v: the least last[j] over the reference positions j < b_len with b[j] == v
    in_ref = tf.range(t_b)[None, :] < b_len[:, None]
    labels_ok = tf.logical_and(in_ref, tf.logical_and(b >= 0, b < n_labels))
    seg = tf.where(labels_ok, b + tf.range(batch)[:, None] * n_labels, batch * n_labels)  # invalid: a spare segment
    matched = tf.math.unsorted_segment_min(tf.reshape(last_row[:, :-1], [-1]), tf.reshape(seg, [-1]),
                                           batch * n_labels + 1)[:-1]
    matched = tf.minimum(tf.reshape(matched, tf.stack([batch, n_labels])), BIG)  # empty segments: int32 max
    # last[j] + 1 over 0 .. b_len reaches the new row only through a reference position (b_len > 0)
    plus_one = tf.where(b_len > 0, row_min + 1, BIG)
    out = tf.minimum(tf.minimum(a_n + 1, plus_one)[:, None], matched)
    keep = tf.cast(a_ended, tf.bool)[:, None]
    if blank_idx is not None:
        keep = tf.logical_or(keep, tf.equal(tf.range(n_labels), blank_idx)[None, :])
    return tf.where(keep, row_min[:, None], out)


def initial_row(batch: tf.Tensor, t_b: tf.Tensor) -> tf.Tensor:
    """RETURNN's initial state of the table: ``range(T_b + 1)`` for every sequence (padded positions
    too: RETURNN's start row ignores the reference lengths)."""
    return tf.tile(tf.range(t_b + 1)[None, :], tf.stack([batch, 1]))
