"""A matrix product whose weight gradient takes the faster of its two equal formulations.

``x @ w`` (x: (N, K), w: (K, M)) has the weight gradient ``x^T dy`` (K, M). TensorFlow computes it
as one ``MatMul`` with ``transpose_a``; on CPU (Eigen and oneDNN alike) that product is about twice
as slow when its result is narrow (M well below K) than ``(dy^T x)^T``, which has the wide side as
columns, and the other way round when M is the larger side (measured at N = 5000: K=512, M=50:
7.0 vs 3.2 ms; K=64, M=512: 3.9 vs 7.5 ms). An output layer (hidden size -> classes) is the
narrow case. Values are identical; only the order of the summation differs.
"""
from __future__ import annotations

import tensorflow as tf


def _weight_grad(x: tf.Tensor, dy: tf.Tensor) -> tf.Tensor:
    k, m = x.shape[-1], dy.shape[-1]
    if k is not None and m is not None and m < k:
        return tf.transpose(tf.matmul(dy, x, transpose_a=True))
    return tf.matmul(x, dy, transpose_a=True)


@tf.custom_gradient
def matmul_2d(x: tf.Tensor, w: tf.Tensor):
    """``tf.matmul(x, w)`` for 2-D ``x`` (N, K) and ``w`` (K, M), with the faster weight gradient."""
    def grad(dy):
        return tf.matmul(dy, w, transpose_b=True), _weight_grad(x, dy)
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
