"""concat_attention and gauss_window_attention (RETURNN's older attention layers) against numpy, in a
rec loop and over whole query sequences, with padded encoder frames holding garbage."""
import math

import numpy as np
import tensorflow as tf

from returnn.tensor import Data
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork
from returnn.tf.returnn_params import returnn_param_shapes

LENS = [5, 3, 1]


def _run(net_dict):
    rng = np.random.RandomState(0)
    x = rng.randn(3, 5, 2).astype("float32")
    for b, n in enumerate(LENS):
        x[b, n:] = 1e3
    net = TFNetwork(net_dict, {"data": Data("data", shape=(None, 2)), "pos": Data("pos", shape=(None, 1))})
    pos = (rng.rand(3, 5, 1) * 6 - 1).astype("float32")
    batch = {"data": tf.constant(x), "data:seq_len": tf.constant(LENS), "pos": tf.constant(pos),
             "pos:seq_len": tf.constant(LENS)}
    return net, net.forward(batch, RunContext(False)), x, pos


def test_concat_attention_over_query_frames():
    net, out, x, _ = _run({"q": {"class": "linear", "from": "data", "n_out": 2, "activation": "tanh"},
                           "output": {"class": "concat_attention", "from": "q", "base": "data", "base_ctx": "data"}})
    assert returnn_param_shapes(net)["output/v"] == (2,)
    q, v = out["q"].tensor.numpy(), net.layers["output"].v.numpy()
    y = out["output"].tensor.numpy()
    for b, n in enumerate(LENS):
        for t in range(n):
            e = (np.tanh(x[b, :n] + q[b, t]) * v).sum(-1)
            w = np.exp(e - e.max())
            np.testing.assert_allclose(y[b, t], (w / w.sum()) @ x[b, :n], rtol=1e-5, atol=1e-6)


def test_gauss_window_attention_in_loop():
    net, out, x, pos = _run({"output": {"class": "rec", "from": "data:pos", "unit": {
        "att": {"class": "gauss_window_attention", "from": "data:source", "base": "base:data", "window_size": 4,
                "std": 1.5, "inner_size": 2, "inner_size_step": 0.5},
        "output": {"class": "copy", "from": "att"}}}})
    y = out["output"].tensor.numpy()
    assert y.shape == (3, 5, 2, 2)
    for b, n in enumerate(LENS):
        for step in range(n):
            t = pos[b, step, 0]
            idx = int(np.round(t)) - 2 + np.arange(4)
            cidx = np.clip(idx, 0, 4)
            cidx = np.maximum(np.where(cidx < n, cidx, n - 1), 0)
            for i in range(2):
                c = t + i * 0.5 - 1.0
                w = np.exp(-(c - idx) ** 2 / (2 * 1.5 ** 2)) / (1.5 * math.sqrt(2 * math.pi))
                np.testing.assert_allclose(y[b, step, i], w @ x[b, cidx], rtol=1e-5, atol=1e-6)
