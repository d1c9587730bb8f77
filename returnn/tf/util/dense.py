"""A matrix product whose gradients take the faster of their equal formulations.

``x @ w`` (x: (N, K), w: (K, M)) has the weight gradient ``x^T dy`` (K, M). TensorFlow computes it
as one ``MatMul`` with ``transpose_a``; on CPU (Eigen and oneDNN alike) that product is about twice
as slow when its result is narrow (M well below K) than ``(dy^T x)^T``, which has the wide side as
columns, and the other way round when M is the larger side (measured at N = 5000: K=512, M=50:
7.0 vs 3.2 ms; K=64, M=512: 3.9 vs 7.5 ms). An output layer (hidden size -> classes) is the
narrow case. Values are identical; only the order of the summation differs.

The input gradient ``dy w^T`` (N, K) is a ``MatMul`` with ``transpose_b``. With oneDNN (TensorFlow's
default on x86) that form is 15-30 % slower than the same product as an ``Einsum`` once both sides
of ``w`` are 128 or wider (N = 5000, K = M = 512: 16.8 vs 14.0 ms; the 3 x 512 feed-forward step
92.8 -> 85.5 ms), and 5-15 % faster on narrower weights; with Eigen both are the same. So
:func:`_input_grad` takes the einsum for wide weights only.
"""
from __future__ import annotations

import tensorflow as tf


def _weight_grad(x: tf.Tensor, dy: tf.Tensor) -> tf.Tensor:
    k, m = x.shape[-1], dy.shape[-1]
    if k is not None and m is not None and m < k:
        return tf.transpose(tf.matmul(dy, x, transpose_a=True))
    return tf.matmul(x, dy, transpose_a=True)


# Both sides of w at least this wide: the input gradient is taken as an einsum (module docstring).
EINSUM_MIN_WIDTH = 128


def _input_grad(dy: tf.Tensor, w: tf.Tensor) -> tf.Tensor:
    k, m = w.shape[0], w.shape[1]
    if k is not None and m is not None and min(k, m) >= EINSUM_MIN_WIDTH:
        return tf.einsum("nm,km->nk", dy, w)
    return tf.matmul(dy, w, transpose_b=True)


@tf.custom_gradient
def matmul_2d(x: tf.Tensor, w: tf.Tensor):
    """``tf.matmul(x, w)`` for 2-D ``x`` (N, K) and ``w`` (K, M), with the faster gradient forms."""
    def grad(dy):
        return _input_grad(dy, w), _weight_grad(x, dy)
    return tf.matmul(x, w), grad


def dense_dot(x: tf.Tensor, w: tf.Tensor) -> tf.Tensor:
    """``x`` (..., K) times ``w`` (K, M) -> (..., M), through :func:`matmul_2d`."""
    w = tf.convert_to_tensor(w)
    if x.shape.rank == 2:
        return matmul_2d(x, w)
    y = matmul_2d(tf.reshape(x, [-1, tf.shape(x)[-1]]), w)
    y = tf.reshape(y, tf.concat([tf.shape(x)[:-1], tf.shape(w)[-1:]], 0))
    y.set_shape(x.shape[:-1].concatenate(w.shape[-1:]))
    return y
