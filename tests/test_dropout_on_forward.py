"""RETURNN's ``dropout_on_forward``: the layer's input dropout applies also outside training
(evaluation, forward, search; Tacotron2's pre-net), with a new mask per call; without it the input
passes unchanged there."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from data_utils import lo, make_layer as make, rebind, spec
from returnn.tf.layers import RunContext


def _run(layer, srcs, train=False, seed=(1, 2)):
    srcs = [rebind(x, data) for x, data in zip(srcs, layer.sources)]
    return layer(srcs, RunContext(train, tf.constant(seed, tf.int64)))


@pytest.mark.parametrize("lens", [[30, 20, 10, 5], [30, 0, 10, 0]])
def test_dropout_on_forward_masks_outside_training(lens):
    x = np.ones([4, 30, 16], np.float32)
    lens = np.array(lens, np.int32)
    layer = make("dropout", {"dropout": 0.5, "dropout_on_forward": True, "dropout_noise_shape": {"*": None}},
                 [spec(16)])
    outs = [_run(layer, [lo(x, lens)]).tensor.numpy() for _ in range(2)]
    for out in outs:
        assert set(np.unique(out)) == {0.0, 2.0}
        assert 0.3 < (out == 0).mean() < 0.7
    assert not np.array_equal(outs[0], outs[1])  # a new mask per call
    plain = make("dropout", {"dropout": 0.5, "dropout_noise_shape": {"*": None}}, [spec(16)])
    np.testing.assert_array_equal(_run(plain, [lo(x, lens)]).tensor.numpy(), x)
    # in training the step's seed decides, as without the option
    a = _run(layer, [lo(x, lens)], train=True, seed=(3, 4)).tensor.numpy()
    b = _run(plain, [lo(x, lens)], train=True, seed=(3, 4)).tensor.numpy()
    np.testing.assert_array_equal(a, b)


def test_dropout_on_forward_on_a_linear_input():
    """The mask (shared over batch and time by default) applies to the linear layer's input: the
    output is x * mask @ W + b with a mask of 0 or 1 / keep per input feature."""
    x = np.random.RandomState(0).randn(2, 5, 6).astype(np.float32)
    lens = np.array([5, 3], np.int32)
    layer = make("linear", {"n_out": 3, "activation": None, "dropout": 0.5, "dropout_on_forward": True}, [spec(6)])
    out = _run(layer, [lo(x, lens)]).tensor.numpy()
    w, b = layer.W.numpy(), layer.bias.numpy()
    candidates = [x * np.array(m, np.float32) * 2 @ w + b for m in np.ndindex(*([2] * 6))]
    assert any(np.allclose(out[0, :5], c[0, :5], atol=1e-5) and np.allclose(out[1, :3], c[1, :3], atol=1e-5)
               for c in candidates)
    assert not np.allclose(out[0, :5], (x @ w + b)[0, :5], atol=1e-5)
