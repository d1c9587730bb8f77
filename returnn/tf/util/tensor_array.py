"""Stacking a TensorArray that may be empty.

A loop over time runs no step when every sequence of the batch is empty (T = 0). TensorFlow then
refuses to stack the (empty) TensorArray in a compiled step when its element shape is not fully
known ("Tried to stack elements of an empty list with non-fully-defined element_shape"), and gives
shape ``(0,)`` eagerly. :func:`stacked` gives zeros of the shape the caller knows instead."""
from __future__ import annotations

from typing import Sequence

import tensorflow as tf


def stacked(ta: tf.TensorArray, empty_shape: Sequence) -> tf.Tensor:
    """``ta.stack()``, or zeros of ``empty_shape`` (``[0, ...]``: the element shape after a 0) when
    ``ta`` holds no element."""
    out = tf.cond(ta.size() > 0, ta.stack, lambda: tf.zeros(tf.stack([tf.cast(d, tf.int32) for d in empty_shape]),
                                                            ta.dtype))
    if out.shape.rank is None:  # the two branches' shapes merged to an unknown rank: it is that of empty_shape
        out.set_shape([None] * len(empty_shape))
    return out


def stacked_padded(ta: tf.TensorArray, empty_shape: Sequence) -> tf.Tensor:
    """Like :func:`stacked` for elements whose shapes differ from step to step (a dim made in a loop step,
    e.g. a slice_nd of a per-step size): each element zero-padded at the end of each axis to the largest."""
    rank = len(empty_shape) - 1

    def pad_all() -> tf.Tensor:
        steps = tf.range(ta.size())
        shapes = tf.map_fn(lambda i: tf.shape(ta.read(i), out_type=tf.int32), steps,
                           fn_output_signature=tf.TensorSpec([rank], tf.int32))
        biggest = tf.reduce_max(shapes, axis=0)

        def pad(i: tf.Tensor) -> tf.Tensor:
            x = ta.read(i)
            return tf.pad(x, tf.stack([tf.zeros([rank], tf.int32), biggest - tf.shape(x, out_type=tf.int32)], 1))
        return tf.map_fn(pad, steps, fn_output_signature=tf.TensorSpec([None] * rank, ta.dtype))

    out = tf.cond(ta.size() > 0, pad_all, lambda: tf.zeros(tf.stack([tf.cast(d, tf.int32) for d in empty_shape]),
                                                           ta.dtype))
    out.set_shape([None] * len(empty_shape))
    return out
