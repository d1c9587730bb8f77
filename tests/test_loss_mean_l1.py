"""RETURNN's ``mean_l1`` loss (Tacotron2 configs) against numpy: per real frame the mean over the
features of |output - target|, summed; norm = real frames; dense targets only."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from data_utils import spec, value
from returnn.errors import NetworkError
from returnn.tf.losses import get_loss_class


def _values(out, tgt, lens):
    o = value(tf.constant(out), tf.constant(lens, tf.int32), spec(out.shape[-1]))
    t = value(tf.constant(tgt), tf.constant(lens, tf.int32), spec(tgt.shape[-1]))
    vals = get_loss_class("mean_l1", "output")("output", {}, "classes").compute(o, t, train=True)
    return {k: (None if v is None else float(v.numpy())) for k, v in vars(vals).items()}


@pytest.mark.parametrize("lens", [[4, 2], [3, 0], [0, 0]])
def test_mean_l1_against_numpy(lens):
    rng = np.random.RandomState(1)
    out = rng.randn(2, 4, 3).astype(np.float32)
    tgt = rng.randn(2, 4, 3).astype(np.float32)
    out[1, lens[1]:] = 1e6  # padded frames hold garbage
    vals = _values(out, tgt, lens)
    mask = np.arange(4)[None, :] < np.array(lens)[:, None]
    ref = (np.abs(out - tgt).mean(-1) * mask).sum()
    np.testing.assert_allclose(vals["loss_sum"], ref, rtol=1e-5)
    assert vals["norm"] == sum(lens)
    wrong = ((out.argmax(-1) != tgt.argmax(-1)) * mask).sum()
    assert vals["error_sum"] == wrong


def test_mean_l1_needs_a_dense_target():
    loss = get_loss_class("mean_l1", "output")("output", {}, "classes")
    with pytest.raises(NetworkError, match="'output': loss 'mean_l1' needs a dense target"):
        loss.check_templates(spec(3), spec(3, sparse=True), "classes")
