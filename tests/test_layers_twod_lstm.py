"""twod_lstm (RETURNN's 2D LSTM, CUDA-only there) against a numpy loop over the grid: every pooling,
source lengths (cells past them 0), parameter names, and one grid row per step inside a rec loop
giving the same numbers as the whole grid."""
import numpy as np
import pytest
import tensorflow as tf

from returnn.tensor import Data
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork
from returnn.tf.returnn_params import returnn_param_shapes

SRC_LENS, TRG_LENS = [4, 2, 0], [3, 3, 2]
N = 3


def _sig(x):
    return 1 / (1 + np.exp(-x))


def reference(src, s_len, trg, w, vh, vv, w_att, pooling):
    """numpy: src (S, Fs), trg (T, Ft) of one sequence -> (T, n)."""
    n_t, n_s, n = trg.shape[0], src.shape[0], vh.shape[0]
    h = np.zeros((n_t, n_s, n))
    c = np.zeros((n_t, n_s, n))
    for y in range(n_t):
        for x in range(n_s):
            if x >= s_len:
                continue
            pre = np.concatenate([src[x], trg[y]]) @ w
            if x > 0:
                pre = pre + h[y, x - 1] @ vh
            if y > 0:
                pre = pre + h[y - 1, x] @ vv
            i, f, lam, o, z = np.split(pre, 5)
            c_up = c[y - 1, x] if y > 0 else 0.0
            c_left = c[y, x - 1] if x > 0 else 0.0
            c[y, x] = _sig(i) * np.tanh(z) + _sig(f) * _sig(lam) * c_up + _sig(f) * (1 - _sig(lam)) * c_left
            h[y, x] = _sig(o) * np.tanh(c[y, x])
    if pooling == "last":
        return h[:, s_len - 1] if s_len else np.zeros((n_t, n))
    if pooling == "max":
        return h.max(axis=1)
    if pooling == "average":
        return h[:, :s_len].mean(axis=1)
    energies = np.einsum("tf,fn,tsn->ts", trg, w_att, h)
    weights = np.exp(energies - energies.max(1, keepdims=True))
    weights /= weights.sum(1, keepdims=True)
    return np.einsum("ts,tsn->tn", weights, h)


def _data(seed=0):
    rng = np.random.RandomState(seed)
    src = rng.randn(3, 4, 2).astype("float32")
    trg = rng.randn(3, 3, 3).astype("float32")
    for b, n in enumerate(SRC_LENS):
        src[b, n:] = 1e3
    return src, trg


def _batch(src, trg):
    return {"data": tf.constant(src), "data:seq_len": tf.constant(SRC_LENS), "classes": tf.constant(trg),
            "classes:seq_len": tf.constant(TRG_LENS)}


EXTERN = {"data": Data("data", shape=(None, 2)), "classes": Data("classes", shape=(None, 3))}


@pytest.mark.parametrize("pooling", ["last", "max", "average", "weighted"])
def test_twod_lstm_against_numpy(pooling):
    net = TFNetwork({"output": {"class": "twod_lstm", "from": ["data", "data:classes"], "n_out": N,
                                "pooling": pooling}}, EXTERN)
    shapes = {"output/rec-twod/W_re": (5, 5 * N), "output/rec-twod/Vh_re": (N, 5 * N),
              "output/rec-twod/Vv_re": (N, 5 * N)}
    if pooling == "weighted":
        shapes["output/rec-twod/W_att"] = (3, N)
    assert returnn_param_shapes(net) == shapes
    layer = net.layers["output"]
    src, trg = _data()
    out = net.forward(_batch(src, trg), RunContext(False))["output"]
    assert out.seq_len.numpy().tolist() == TRG_LENS and out.tensor.shape == (3, 3, N)
    w_att = layer.W_att.numpy() if layer.W_att is not None else None
    for b in range(3):
        if pooling == "average" and SRC_LENS[b] == 0:
            continue
        ref = reference(src[b], SRC_LENS[b], trg[b], layer.W_re.numpy(), layer.Vh_re.numpy(), layer.Vv_re.numpy(),
                        w_att, pooling)
        np.testing.assert_allclose(out.tensor.numpy()[b, :TRG_LENS[b]], ref[:TRG_LENS[b]], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("pooling", ["last", "weighted"])
def test_twod_lstm_rows_in_rec_loop_equal_whole_grid(pooling):
    whole = TFNetwork({"output": {"class": "twod_lstm", "from": ["data", "data:classes"], "n_out": N,
                                  "pooling": pooling}}, EXTERN)
    looped = TFNetwork({"output": {"class": "rec", "from": "data:classes", "optimize_move_layers_out": False, "unit": {
        "twod": {"class": "twod_lstm", "from": ["base:data", "data:source"], "n_out": N, "pooling": pooling},
        "output": {"class": "copy", "from": "twod"}}}}, EXTERN)
    sub = looped.layers["output"].sub_layers()["twod"]
    assert sub.step_mode
    for a, b in zip(whole.layers["output"].variables, sub.variables):
        b.assign(a)
    src, trg = _data(1)
    y_whole = whole.forward(_batch(src, trg), RunContext(False))["output"].tensor.numpy()
    # traced, as the engine runs steps (the loop state's source length is unknown there until step 0)
    y_loop = tf.function(lambda: looped.forward(_batch(src, trg), RunContext(False))["output/twod"].tensor)().numpy()
    for b, n in enumerate(TRG_LENS):
        np.testing.assert_allclose(y_loop[b, :n], y_whole[b, :n], rtol=1e-5, atol=1e-6)
