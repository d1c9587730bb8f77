"""compare and switch against numpy, with broadcasting and constants, and in a network."""
import numpy as np
import pytest
import tensorflow as tf

from data_utils import btf, make_layer as make, run_layer as run
from helpers import outputs
from returnn.errors import NetworkError
from returnn.tensor import Data, FeatureDim, SpatialDim, batch_dim
from returnn.tf.layers import LayerOutput, RunContext
from returnn.tf.network import TFNetwork

LENS = np.array([3, 2], np.int32)


def test_compare_chain_value_and_broadcast():
    a, va, x = btf(2, LENS)
    b, vb, y = btf(2, LENS, seed=1, time=a.time_dim)
    less = make("compare", {"kind": "<", "value": 0.5}, [a, b])
    assert less.output.dtype == "bool" and less.output.dims == a.dims
    got = run(less, [va, vb]).tensor.numpy()
    for i, n in enumerate(LENS):  # padded frames hold garbage
        np.testing.assert_array_equal(got[i, :n], ((x < y) & (y < 0.5))[i, :n])
    vec = Data("v", dims=[batch_dim, a.feature_dim])
    v = np.array([[0.0, 1.0], [2.0, -1.0]], np.float32)
    eq = make("compare", {"kind": "greater_equal"}, [vec, a])
    assert eq.output.dims == a.dims
    got = run(eq, [LayerOutput(tf.constant(v), vec), va]).tensor.numpy()
    for i, n in enumerate(LENS):
        np.testing.assert_array_equal(got[i, :n], (v[:, None, :] >= x)[i, :n])
    time = SpatialDim("t")
    labels = Data("l", dims=[batch_dim, time], sparse_dim=FeatureDim("c", 5))
    lab = np.array([[1, 4, 0], [4, 4, 0]], np.int32)
    end = make("compare", {"value": 4}, [labels])
    assert end.output.dtype == "bool" and end.output.sparse_dim is None
    np.testing.assert_array_equal(run(end, [LayerOutput(tf.constant(lab), labels, {time: tf.constant(LENS)})])
                                  .tensor.numpy(), lab == 4)
    with pytest.raises(NetworkError, match="'lay'.*kind"):
        make("compare", {"kind": "almost", "value": 1}, [a])
    with pytest.raises(NetworkError, match="'lay'.*two sources"):
        make("compare", {}, [a])


def test_switch_in_a_network():
    net = TFNetwork(outputs({
        "mask": {"class": "compare", "from": "data", "kind": "greater", "value": 0.0},
        "relu": {"class": "switch", "condition": "mask", "true_from": "data", "false_from": 0.0},
        "neg": {"class": "switch", "condition": "mask", "true_from": -1.0, "false_from": "data"},
        "output": {"class": "copy", "from": "relu"},
    }), {"data": Data("data", shape=(None, 3))})
    x = np.random.RandomState(0).randn(2, 4, 3).astype(np.float32)
    out = net.forward({"data": tf.constant(x), "data:seq_len": tf.constant([4, 2])}, RunContext(False))
    np.testing.assert_allclose(out["relu"].tensor.numpy(), np.maximum(x, 0))
    np.testing.assert_allclose(out["neg"].tensor.numpy(), np.where(x > 0, -1.0, x))


def test_switch_errors_name_the_layer():
    with pytest.raises(NetworkError, match="'sw'.*condition 'data' must be bool"):
        TFNetwork(outputs({"sw": {"class": "switch", "condition": "data", "true_from": 1.0, "false_from": "data"},
                   "output": {"class": "copy", "from": "sw"}}), {"data": Data("data", shape=(None, 3))})
    with pytest.raises(NetworkError, match="'sw'.*not 'from'"):
        TFNetwork(outputs({"sw": {"class": "switch", "from": "data", "condition": True, "true_from": 1.0, "false_from": 2.0},
                   "output": {"class": "copy", "from": "sw"}}), {"data": Data("data", shape=(None, 3))})


def test_switch_between_two_constants():
    """RETURNN's test_SwitchLayer_sanity_check: no layer in true_from/false_from; the output has the
    condition's axes and the dtype of the constant true_from (RETURNN's template_from_constant)."""
    net = TFNetwork(outputs({
        "mask": {"class": "compare", "from": "data", "kind": "greater", "value": 0.0},
        "f": {"class": "switch", "condition": "mask", "true_from": 2.5, "false_from": -1.0},
        "i": {"class": "switch", "condition": "mask", "true_from": 3, "false_from": 0},
        "output": {"class": "copy", "from": "f"},
    }), {"data": Data("data", shape=(None, 3))})
    assert net.layers["f"].output.dims == net.layers["mask"].output.dims and net.layers["f"].output.dtype == "float32"
    assert net.layers["i"].output.dtype == "int32"
    x = np.random.RandomState(0).randn(2, 4, 3).astype(np.float32)
    out = net.forward({"data": tf.constant(x), "data:seq_len": tf.constant([4, 2])}, RunContext(False))
    np.testing.assert_array_equal(out["f"].tensor.numpy(), np.where(x > 0, 2.5, -1.0))
    np.testing.assert_array_equal(out["i"].tensor.numpy(), np.where(x > 0, 3, 0))


@pytest.mark.parametrize("true_from, false_from, message", [
    (3, 0.5, "false_from 0.5 cannot be a constant of the output's dtype int32"),  # TypeError in tf.constant
    ("data", "i", "false_from has dtype int32, the output float32"),  # copy_compatible_to asserts the dtype
    ("mask", 0, "false_from 0 cannot be a constant of the output's dtype bool"),
    ("const1", 0.0, "false_from 0.0 cannot be a constant of the output's dtype int32"),  # returnn_fuzz mutate s185
])
def test_switch_values_of_another_dtype_refused_as_returnn(true_from, false_from, message):
    """Checked with RETURNN 1.20261022: it converts a constant with tf.constant(value, output dtype) and asserts
    a layer's dtype is the output's (true_from's, else false_from's); a float layer with an int constant and an
    int layer with a bool constant build (as here)."""
    net = {"mask": {"class": "compare", "from": "data", "kind": "greater", "value": 0.0},
           "i": {"class": "cast", "from": "data", "dtype": "int32"}, "const1": {"class": "constant", "value": 1},
           "output": {"class": "switch", "condition": "mask", "true_from": true_from, "false_from": false_from}}
    with pytest.raises(NetworkError, match="'output' \\(switch\\): " + message):
        TFNetwork(net, {"data": Data("data", shape=(None, 3))})
    for true_from, false_from in (("data", 0), ("i", True)):
        TFNetwork(dict(net, output=dict(net["output"], true_from=true_from, false_from=false_from)),
                  {"data": Data("data", shape=(None, 3))})
