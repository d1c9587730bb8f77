"""Random time-frequency warping as RETURNN's TFUtil offers it to configs (SpecAugment-style ``random_warp``
in their data-augmentation functions): a smooth random flow field (:func:`create_random_warp_flow_2d`) and
the image resampled along it with bilinear interpolation (:func:`dense_image_warp`), of variable size."""
from __future__ import annotations

from typing import Sequence, Tuple, Union

import numpy as np
import tensorflow as tf

Pair = Union[float, Tuple[float, float], Sequence[float]]


def _pair(value: Pair) -> Tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value, value)


def interpolate_bilinear(grid: tf.Tensor, query_points: tf.Tensor, name: str = "interpolate_bilinear",
                         indexing: str = "ij") -> tf.Tensor:
    """Values of ``grid`` (B, H, W, C) at ``query_points`` (B, N, 2) (row, column with ``ij``; x, y with ``xy``),
    bilinear between the four neighbours; points outside use the border cells (H and W at least 2)."""
    if indexing not in ("ij", "xy"):
        raise ValueError("interpolate_bilinear: indexing 'ij' or 'xy', got %r" % (indexing,))
    with tf.name_scope(name):
        grid = tf.convert_to_tensor(grid)
        query_points = tf.convert_to_tensor(query_points)
        batch, height, width, channels = (tf.shape(grid)[i] for i in range(4))
        checks = [tf.debugging.assert_greater_equal(height, 2, message="interpolate_bilinear: grid height < 2"),
                  tf.debugging.assert_greater_equal(width, 2, message="interpolate_bilinear: grid width < 2")]
        with tf.control_dependencies(checks):
            points = tf.unstack(query_points, axis=2)
        lows, fracs = [], []
        for axis, size in zip((0, 1) if indexing == "ij" else (1, 0), (height, width)):
            q = points[axis]
            low = tf.clip_by_value(tf.floor(q), 0.0, tf.cast(size - 2, q.dtype))
            lows.append(tf.cast(low, tf.int32))
            fracs.append(tf.clip_by_value(tf.cast(q - low, grid.dtype), 0.0, 1.0)[:, :, None])
        flat = tf.reshape(grid, [batch * height * width, channels])
        offsets = (tf.range(batch) * height * width)[:, None]
        n = tf.shape(query_points)[1]

        def at(row: tf.Tensor, col: tf.Tensor) -> tf.Tensor:
            return tf.reshape(tf.gather(flat, offsets + row * width + col), [batch, n, channels])

        top = at(lows[0], lows[1]) + fracs[1] * (at(lows[0], lows[1] + 1) - at(lows[0], lows[1]))
        bottom = at(lows[0] + 1, lows[1]) + fracs[1] * (at(lows[0] + 1, lows[1] + 1) - at(lows[0] + 1, lows[1]))
        return top + fracs[0] * (bottom - top)


def dense_image_warp(image: tf.Tensor, flow: tf.Tensor, name: str = "dense_image_warp") -> tf.Tensor:
    """``image`` (B, H, W, C) where pixel (i, j) takes the value at (i, j) - ``flow[b, i, j]`` (B, H, W, 2)."""
    with tf.name_scope(name):
        batch, height, width, channels = (tf.shape(image)[i] for i in range(4))
        rows, cols = tf.meshgrid(tf.range(height), tf.range(width), indexing="ij")
        grid = tf.cast(tf.stack([rows, cols], axis=2), flow.dtype)[None]
        points = tf.reshape(grid - flow, [batch, height * width, 2])
        return tf.reshape(interpolate_bilinear(image, points), [batch, height, width, channels])


def gaussian_kernel_2d(size: Union[int, Tuple[int, int]], std: Pair) -> tf.Tensor:
    """(2 size_x + 1, 2 size_y + 1) weights of a normal density over the offsets, summing to 1."""
    (size_x, size_y), (std_x, std_y) = _pair(size), _pair(std)

    def density(n: int, s: float) -> tf.Tensor:
        x = tf.range(-n, n + 1, dtype=tf.float32)
        return tf.exp(-0.5 * tf.square(x / s)) / (s * np.sqrt(2.0 * np.pi))

    values = density(size_x, std_x)[:, None] * density(size_y, std_y)[None, :]
    return values / tf.reduce_sum(values)


def gaussian_blur_2d(image: tf.Tensor, kernel_size=None, kernel_std: Pair = None) -> tf.Tensor:
    """Each channel of ``image`` (B, H, W, C) blurred with :func:`gaussian_kernel_2d` ('same' padding);
    kernel size 2 std + 1 (std 1) unless given."""
    kernel_std = 1.0 if kernel_std is None else kernel_std
    if kernel_size is None:
        kernel_size = tuple(int(s * 2 + 1) for s in _pair(kernel_std)) if isinstance(kernel_std, (tuple, list)) \
            else int(kernel_std * 2 + 1)
    shape = [tf.shape(image)[i] for i in range(4)]
    x = tf.reshape(tf.transpose(image, [0, 3, 1, 2]), [shape[0] * shape[3], shape[1], shape[2], 1])
    kernel = gaussian_kernel_2d(kernel_size, kernel_std)[:, :, None, None]
    x = tf.nn.conv2d(x, kernel, strides=[1, 1, 1, 1], padding="SAME")
    return tf.transpose(tf.reshape(x, [shape[0], shape[3], shape[1], shape[2]]), [0, 2, 3, 1])


def create_random_warp_flow_2d(shape, std: Pair = None, scale: Pair = 10.0, blur_std: Pair = 2.0) -> tf.Tensor:
    """A random flow (B, H, W, 2) for :func:`dense_image_warp` of an image of ``shape`` (B, H, W): normal noise
    (``std`` per direction) on a grid ``scale`` times coarser, blurred (``blur_std``), resized up bilinearly."""
    std, scale, blur_std = _pair(std), _pair(scale), _pair(blur_std)
    small = [shape[0], shape[1] // int(scale[0]), shape[2] // int(scale[1])]
    flow = tf.stack([tf.random.normal(small, stddev=std[0]), tf.random.normal(small, stddev=std[1])], axis=-1)
    flow = gaussian_blur_2d(flow, kernel_std=blur_std)
    return tf.raw_ops.ResizeBilinear(images=flow, size=tf.stack([shape[1], shape[2]]), align_corners=False,
                                     half_pixel_centers=False)
