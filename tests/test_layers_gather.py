"""gather, gather_nd, variable and constant with_batch_dim against numpy."""
import numpy as np
import pytest
import tensorflow as tf

from data_utils import make_layer as make, run_layer as run
from helpers import outputs
from returnn.errors import NetworkError
from returnn.tensor import Data, FeatureDim, SpatialDim, batch_dim
from returnn.tf.layers import LayerOutput, RunContext
from returnn.tf.network import TFNetwork


def _src():
    time = SpatialDim("t")
    data = Data("x", dims=[batch_dim, time, FeatureDim("f", 3)])
    x = np.arange(2 * 4 * 3, dtype="float32").reshape(2, 4, 3)
    return data, LayerOutput(tf.constant(x), data, {time: tf.constant([4, 2])}), x


def test_gather_int_and_per_sequence_positions():
    data, val, x = _src()
    layer = make("gather", {"position": 1, "axis": "T"}, [data])
    assert layer.output.batch_shape == (None, 3) and layer.output.feature_dim_axis == 1
    np.testing.assert_array_equal(run(layer, [val]).tensor.numpy(), x[:, 1])
    layer = make("gather", {"position": 2, "axis": "F"}, [data])
    np.testing.assert_array_equal(run(layer, [val]).tensor.numpy(), x[:, :, 2])
    # positions (B, T') per sequence, padded positions hold garbage
    ptime = SpatialDim("p")
    pos_d = Data("p", dims=[batch_dim, ptime], sparse_dim=FeatureDim("idx", 4))
    pos = LayerOutput(tf.constant([[3, 0, 1], [1, 99, 99]]), pos_d, {ptime: tf.constant([3, 1])})
    for cls, opts in (("gather", {"position": "p", "axis": "T"}), ("gather_nd", {"position": "p"})):
        layer = make(cls, opts, [data, pos_d])
        assert layer.output.dims[1] is ptime and layer.output.dim == 3
        out = run(layer, [val, pos]).tensor.numpy()
        np.testing.assert_array_equal(out[0], x[0, [3, 0, 1]])
        np.testing.assert_array_equal(out[1, 0], x[1, 1])
    with pytest.raises(NetworkError, match="'lay'.*integer indices"):
        make("gather", {"position": "p", "axis": "T"}, [data, data])


def test_variable_and_constant_with_batch_dim_in_a_network():
    extern = {"data": Data("data", shape=(None, 3)), "classes": Data("classes", dim=2, sparse=True)}
    net = TFNetwork(outputs({
        "v": {"class": "variable", "shape": [3], "init": 0.5, "add_batch_axis": True},
        "vt": {"class": "variable", "shape": [2, 3], "init": "glorot_uniform"},
        "c": {"class": "constant", "value": np.array([1.0, 2.0], "float32"), "with_batch_dim": True},
        "plus": {"class": "combine", "kind": "add", "from": ["data", "v"]},
        "output": {"class": "softmax", "loss": "ce", "from": "plus"}}), extern)
    assert net.layers["v"].output.batch_shape == (None, 3) and net.layers["c"].output.batch_shape == (None, 2)
    x = np.ones((2, 4, 3), "float32")
    batch = {"data": tf.constant(x), "data:seq_len": tf.constant([4, 3]),
             "classes": tf.zeros([2, 4], tf.int32), "classes:seq_len": tf.constant([4, 3])}
    with tf.GradientTape() as tape:
        outs = net.forward(batch, RunContext(True))
        loss = net.compute_losses(outs, batch)["output"].loss_sum
    np.testing.assert_allclose(outs["plus"].tensor.numpy(), x + 0.5)
    np.testing.assert_allclose(outs["c"].tensor.numpy(), [[1, 2], [1, 2]])
    assert outs["vt"].tensor.shape == (2, 3)
    var = net.layers["v"].var
    assert var.trainable and tape.gradient(loss, var) is not None
