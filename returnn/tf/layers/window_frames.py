"""The frames of RETURNN's valid window of stride 1 (``windowed_nd``), a batch shorter than the window included.

RETURNN tiles the input ``window`` times, appends ``window`` zero frames and reshapes that into ``window`` rows of
``n + 1`` frames (``n``: the padded length), then keeps the first ``n - window + 1`` frames. When the batch has
fewer than ``window - 1`` frames that count is negative and the slice keeps all but as many frames from the end:
``2 n - window + 2`` frames (none below zero), made of the input's frames wrapped around and zeros. Their lengths
are 0, but a layer reading padding (e.g. shift_axis, which moves the first padded frame into the sequence) sees
them; here the same frames are made, so such a layer reads what it reads in RETURNN.
"""
from __future__ import annotations

import tensorflow as tf


def valid_frames(tensor: tf.Tensor, size: int, axis: int) -> tf.Tensor:
    """``(..., n, ...)`` -> ``(..., frames, size, ...)`` as RETURNN's valid window of stride 1 (see module doc)."""
    full = tf.signal.frame(tensor, size, 1, axis=axis)
    n = tf.shape(tensor)[axis]

    def short() -> tf.Tensor:
        count = tf.maximum(2 * n - size + 2, 0)
        flat = tf.range(size)[None, :] * (n + 1) + tf.range(count)[:, None]  # (frames, size): row i, frame t
        # a flat frame of the tiled input is the input frame (f mod n); beyond the tiles a zero frame (index n)
        index = tf.where(flat < size * n, flat % tf.maximum(n, 1), n)
        pads = [[0, 0]] * tensor.shape.rank
        pads[axis] = [0, 1]
        return tf.gather(tf.pad(tensor, pads), index, axis=axis)

    if size <= 2:  # a batch shorter than size - 1 (n = 0, size 2) keeps no frame in RETURNN either
        return full
    return tf.cond(n >= size - 1, lambda: full, short)
