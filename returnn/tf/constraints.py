"""RETURNN's per-layer constraints: terms added to the training objective besides the losses.

- ``L2``: ``L2 * sum(p ** 2)`` over the layer's parameters (:meth:`TFNetwork.l2_loss`);
- ``spatial_smoothing``: ``s * sum over real frames of E(frame)``, where E views the frame's
  feature vector (dim D) as an h x w image (w the largest divisor of D up to sqrt(D), both >= 3),
  pads it circularly by one and sums the squared responses of the 3x3 high-pass filter
  (centre 1, neighbours -1/8) (Microsoft's "Achieving human parity", as RETURNN);
- ``darc1``: ``d * max over features of sum over real frames |x|`` (DARC1, arXiv 1710.05468), on
  the layer's values before its activation (softmax layers: the logits).
"""
from __future__ import annotations

import math
from typing import Optional, Tuple

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tf.layers.output import LayerOutput

_FILTER = [[-0.125, -0.125, -0.125], [-0.125, 1.0, -0.125], [-0.125, -0.125, -0.125]]


def smoothing_grid(layer_desc: str, dim: Optional[int]) -> Tuple[int, int]:
    """(h, w) of the image a feature vector of ``dim`` is viewed as; NetworkError if too small."""
    if not dim:
        raise NetworkError("%s: 'spatial_smoothing' needs a static feature dim" % layer_desc)
    w = int(math.sqrt(dim))
    while dim % w:
        w -= 1
    h = dim // w
    if w < 3 or h < 3:
        raise NetworkError("%s: 'spatial_smoothing' needs a feature dim that is an h x w grid with h, w >= 3, "
                           "got %i" % (layer_desc, dim))
    return h, w


def _real_frames(out: LayerOutput) -> Tuple[tf.Tensor, Optional[tf.Tensor]]:
    """The value as (B, T, D) (or (B, D)) and its (B, T) mask of real frames (None without time)."""
    out = out.copy_as_batch_time_feature()
    mask = out.sequence_mask() if out.data.have_time_axis() and out.seq_len is not None else None
    return out.tensor, mask


def spatial_smoothing_energy(layer_desc: str, out: LayerOutput) -> tf.Tensor:
    """Sum over real frames of the smoothing energy of ``out`` (see the module docstring)."""
    x, mask = _real_frames(out)
    h, w = smoothing_grid(layer_desc, out.data.dim)
    img = tf.reshape(x, [-1, h, w, 1])
    img = tf.concat([img[:, :, -1:], img, img[:, :, :1]], axis=2)  # circular padding, width then height
    img = tf.concat([img[:, -1:], img, img[:, :1]], axis=1)
    response = tf.nn.conv2d(img, tf.reshape(tf.constant(_FILTER, x.dtype), [3, 3, 1, 1]), 1, "VALID")
    energy = tf.reshape(tf.reduce_sum(tf.square(response), axis=[1, 2, 3]), tf.shape(x)[:-1])
    if mask is not None:
        energy = tf.where(mask, energy, tf.zeros_like(energy))
    return tf.reduce_sum(energy)


def darc1(out: LayerOutput) -> tf.Tensor:
    """``max_d sum_frames |x_d|`` over the real frames of the layer's pre-activation values."""
    value = out if out.logits is None else out.with_tensor(out.logits)
    x, mask = _real_frames(value)
    x = tf.abs(x)
    if mask is not None:
        x = tf.where(mask[..., None], x, tf.zeros_like(x))
    return tf.reduce_max(tf.reduce_sum(tf.reshape(x, [-1, tf.shape(x)[-1]]), axis=0))
