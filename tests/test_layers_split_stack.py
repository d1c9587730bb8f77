"""split (parts as NAME/i), stack, norm and math_norm against numpy, padded frames holding NaN."""
import numpy as np
import pytest
import tensorflow as tf

from helpers import outputs
from returnn.errors import NetworkError
from returnn.tensor import Data
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork

LENS = [4, 2]


def _run(net_dict, dim=6):
    rng = np.random.RandomState(0)
    x = rng.randn(2, 4, dim).astype("float32")
    for b, n in enumerate(LENS):
        x[b, n:] = np.nan
    net = TFNetwork(outputs(net_dict), {"data": Data("data", shape=(None, dim))})
    return net, net.forward({"data": tf.constant(x), "data:seq_len": tf.constant(LENS)}, RunContext(False)), x


def test_split_parts_are_sub_layers():
    net, out, x = _run({"s": {"class": "split", "from": "data", "size_splits": [2, 4]},
                        "a": {"class": "copy", "from": "s/0"}, "b": {"class": "linear", "activation": None,
                                                                     "n_out": 3, "from": "s/1"},
                        "e": {"class": "split", "from": "data", "num_splits": 3}})
    assert out["a"].data.dim == 2 and out["e/2"].data.dim == 2
    for b, n in enumerate(LENS):
        np.testing.assert_array_equal(out["a"].tensor.numpy()[b, :n], x[b, :n, :2])
        np.testing.assert_array_equal(out["s/1"].tensor.numpy()[b, :n], x[b, :n, 2:])
        np.testing.assert_array_equal(out["e/1"].tensor.numpy()[b, :n], x[b, :n, 2:4])
        np.testing.assert_array_equal(out["s"].tensor.numpy()[b, :n], x[b, :n])


def test_stack_on_a_new_axis():
    _, out, x = _run({"neg": {"class": "eval", "from": "data", "eval": "-source(0)"},
                      "st": {"class": "stack", "from": ["data", "neg"]}})
    y = out["st"].tensor.numpy()
    assert y.shape == (2, 4, 2, 6) and out["st"].data.dim == 6
    for b, n in enumerate(LENS):
        np.testing.assert_array_equal(y[b, :n, 0], x[b, :n])
        np.testing.assert_array_equal(y[b, :n, 1], -x[b, :n])


def test_norm_over_time_includes_padded_frames_as_returnn():
    """RETURNN's norm takes reduce_mean over the axes, padded frames included (zeros from the
    dataset here): the statistics over T depend on the batch's longest sequence, as in RETURNN."""
    net, out, x = _run({"n": {"class": "norm", "from": "data", "axes": "TF", "epsilon": 1e-6},
                        "f": {"class": "norm", "from": "data", "axes": "F"}})
    net.layers["n"].scale.assign(np.arange(1, 7, dtype="float32"))
    net.layers["n"].bias.assign(np.full(6, 0.5, "float32"))
    x = np.nan_to_num(x, nan=0.0)
    batch = {"data": tf.constant(x), "data:seq_len": tf.constant(LENS)}
    out = net.forward(batch, RunContext(False))
    for b, n in enumerate(LENS):
        padded = x[b]  # all 4 frames
        ref = (padded - padded.mean()) / np.sqrt(padded.var() + 1e-6) * np.arange(1, 7) + 0.5
        np.testing.assert_allclose(out["n"].tensor.numpy()[b, :n], ref[:n], rtol=1e-4, atol=1e-5)
        real = x[b, :n]
        ref = (real - real.mean(-1, keepdims=True)) / np.sqrt(real.var(-1, keepdims=True) + 1e-6)
        np.testing.assert_allclose(out["f"].tensor.numpy()[b, :n], ref, rtol=1e-4, atol=1e-5)


def test_math_norm():
    _, out, x = _run({"l2": {"class": "math_norm", "from": "data", "p": 2, "axes": "F"},
                      "l1t": {"class": "math_norm", "from": "data", "p": 1, "axes": "T"}})
    for b, n in enumerate(LENS):
        np.testing.assert_allclose(out["l2"].tensor.numpy()[b, :n], np.linalg.norm(x[b, :n], axis=-1), rtol=1e-5)
        np.testing.assert_allclose(out["l1t"].tensor.numpy()[b], np.abs(x[b, :n]).sum(0), rtol=1e-5)


@pytest.mark.parametrize("layer, message", [
    ({"class": "split", "from": "data", "num_splits": 4}, "does not split into 4 parts"),
    ({"class": "split", "from": "data"}, "give 'num_splits'"),
    ({"class": "norm", "from": "data"}, "needs 'axes'"),
    ({"class": "math_norm", "from": "data", "axes": "F"}, "'p' must be a positive number"),
    # RETURNN sets its float |x| ** p on a complex copy: 'dtype does not match' (chain seed 396 #0)
    ({"class": "math_norm", "from": "c", "axes": "F", "p": 2}, "a complex input is refused"),
])
def test_bad_options_are_one_line(layer, message):
    with pytest.raises(NetworkError, match=message):
        TFNetwork(outputs({"c": {"class": "stft", "from": "data:w", "frame_shift": 2, "frame_size": 4},
                           "output": layer}), {"data": Data("data", shape=(None, 6)), "w": Data("w", shape=(None, 1))})
