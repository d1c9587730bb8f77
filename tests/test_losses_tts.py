"""RETURNN's ``mean_l1`` and ``bin_ce`` losses (Tacotron2 configs) against numpy: mean_l1 per real
frame the mean over the features of |output - target|, summed, norm = real frames, dense targets
only; bin_ce the sigmoid cross entropy of logits summed over features / dim, pos_weight; as_is on
an output with more axes (attention weights per decoder step) sums them without their padding."""
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


# ---- bin_ce (the Tacotron2 stop token)
def _bin_ce(out, tgt, lens, **opts):
    o = value(tf.constant(out), tf.constant(lens, tf.int32), spec(out.shape[-1]))
    t = value(tf.constant(tgt), tf.constant(lens, tf.int32), spec(tgt.shape[-1]))
    vals = get_loss_class("bin_ce", "output")("output", opts, "classes").compute(o, t, train=True)
    return {k: (None if v is None else float(v.numpy())) for k, v in vars(vals).items()}


@pytest.mark.parametrize("lens,pos_weight", [([4, 2], None), ([3, 0], 2.5), ([0, 0], None)])
def test_bin_ce_against_numpy(lens, pos_weight):
    rng = np.random.RandomState(2)
    out = rng.randn(2, 4, 3).astype(np.float32)
    tgt = (rng.rand(2, 4, 3) > 0.5).astype(np.float32)
    out[1, lens[1]:] = 1e6
    vals = _bin_ce(out, tgt, lens, **({} if pos_weight is None else {"pos_weight": pos_weight}))
    mask = np.arange(4)[None, :] < np.array(lens)[:, None]
    p = 1 / (1 + np.exp(-out.astype(np.float64)))
    w = 1.0 if pos_weight is None else pos_weight
    with np.errstate(divide="ignore", invalid="ignore"):  # padded frames: garbage, masked out
        ce = -(w * tgt * np.log(p) + (1 - tgt) * np.log(1 - p))
    ce = np.where(mask[..., None], ce, 0)
    np.testing.assert_allclose(vals["loss_sum"], ce.sum() / 3, rtol=1e-5)
    wrong = np.where(mask[..., None], (out > 0) != (tgt > 0.5), 0).sum() / 3
    np.testing.assert_allclose(vals["error_sum"], wrong, rtol=1e-6)
    assert vals["norm"] == sum(lens)


def test_bin_ce_needs_as_many_axes():
    loss = get_loss_class("bin_ce", "output")("output", {}, "classes")
    with pytest.raises(NetworkError, match="'bin_ce': output .* do not have the same number of axes"):
        loss.check_templates(spec(1), spec(1, sparse=True), "classes")


# ---- as_is on an output with an axis besides time and feature (Tacotron2's attention entropy)
@pytest.mark.parametrize("dec_lens,enc_lens", [([3, 2], [4, 1]), ([2, 0], [4, 0])])
def test_as_is_sums_the_extra_axes_without_padding(dec_lens, enc_lens):
    from returnn.tensor import Data, FeatureDim, SpatialDim, batch_dim
    from returnn.tf.layers.output import LayerOutput
    dec, enc = SpatialDim("dec"), SpatialDim("enc")
    data = Data("entropy", dims=[batch_dim, dec, enc, FeatureDim("f", 1)])
    x = np.random.RandomState(3).rand(2, 3, 4, 1).astype(np.float32)
    out = LayerOutput(tf.constant(x), data, {dec: tf.constant(dec_lens), enc: tf.constant(enc_lens)})
    vals = get_loss_class("as_is", "entropy")("entropy", {}, "classes").compute(out, None, train=True)
    ref = sum(x[b, :dec_lens[b], :enc_lens[b]].sum() for b in range(2))
    np.testing.assert_allclose(float(vals.loss_sum.numpy()), ref, rtol=1e-5)
    assert float(vals.norm.numpy()) == sum(dec_lens)
