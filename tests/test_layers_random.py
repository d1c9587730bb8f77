"""random, rand_int, random_state_init: shapes, ranges and moments, reproducible given the step seed,
new numbers per step (and per rec-loop step), static and explicit-state streams fixed, RETURNN's
state parameter."""
import numpy as np
import pytest
import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, batch_dim
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork
from returnn.tf.returnn_params import returnn_param_shapes

LENS = [5, 3]


DATA = Data("data", shape=(None, 3))
TIME, FEAT = DATA.dims[1], DATA.dims[2]


def _net(net_dict):
    return TFNetwork(net_dict, {"data": DATA})


def _run(net, step, train=True):
    batch = {"data": tf.zeros((2, 5, 3)), "data:seq_len": tf.constant(LENS)}
    return net.forward(batch, RunContext(train, tf.constant([7, step], tf.int64)))


def test_random_per_step_reproducible_and_state_parameter():
    net = _net({"x": {"class": "random", "shape": [2000], "distribution": "normal", "mean": 1.0, "stddev": 2.0,
                      "is_output_layer": True, "seed": 3}})
    assert returnn_param_shapes(net) == {"x/random_generator/StateVar": (3,)}
    state = net.layers["x"].state_var
    assert state.dtype == tf.int64 and not state.trainable
    np.testing.assert_array_equal(state.numpy(), [3, 0, 0])  # RETURNN's create_rng_state(3, philox)
    a, a2, b = (_run(net, s)["x"].tensor.numpy() for s in (1, 1, 2))
    np.testing.assert_array_equal(a, a2)
    assert not np.array_equal(a, b)
    assert abs(a.mean() - 1.0) < 0.2 and abs(a.std() - 2.0) < 0.2


def test_random_static_explicit_state_and_distributions():
    net = _net({
        "rs": {"class": "random_state_init", "seed": 5},
        "static": {"class": "random", "shape": [1000], "distribution": "uniform", "minval": -1.0, "maxval": 3.0,
                   "static": True, "is_output_layer": True},
        "explicit": {"class": "random", "shape": [1000], "distribution": "truncated_normal", "explicit_state": "rs",
                     "is_output_layer": True},
        "bound": {"class": "random", "shape": [1000], "distribution": "uniform", "bound": 0.5, "is_output_layer": True},
        "ms": {"class": "random", "shape": [4000], "distribution": "uniform", "mean": 2.0, "stddev": 1.0,
               "is_output_layer": True},
    })
    assert returnn_param_shapes(net) == {"bound/random_generator/StateVar": (3,), "ms/random_generator/StateVar": (3,)}
    o1, o2 = _run(net, 1), _run(net, 2)
    np.testing.assert_array_equal(o1["rs"].tensor.numpy(), [5, 0, 0])
    for key in ("static", "explicit"):
        np.testing.assert_array_equal(o1[key].tensor.numpy(), o2[key].tensor.numpy())
    s = o1["static"].tensor.numpy()
    assert s.min() >= -1.0 and s.max() < 3.0
    assert np.abs(o1["explicit"].tensor.numpy()).max() <= 2.0
    assert np.abs(o1["bound"].tensor.numpy()).max() <= 0.5
    ms = o1["ms"].tensor.numpy()
    assert abs(ms.mean() - 2.0) < 0.1 and abs(ms.std() - 1.0) < 0.1 and ms.max() <= 2.0 + 3 ** 0.5


def test_random_dims_from_shape_deps_and_scalar_layers():
    time, feat = TIME, FEAT
    net = _net({"std": {"class": "constant", "value": 0.0},
                "output": {"class": "random", "shape": [batch_dim, time, feat], "shape_deps": ["data"],
                           "distribution": "normal", "stddev": "std"}})
    out = _run(net, 1)["output"]
    assert out.tensor.shape == (2, 5, 3) and out.seq_len.numpy().tolist() == LENS
    assert np.all(out.tensor.numpy() == 0.0)
    with pytest.raises(NetworkError, match="shape_deps"):
        _net({"output": {"class": "random", "shape": [batch_dim, time], "distribution": "normal"}})
    with pytest.raises(NetworkError, match="not valid"):
        _net({"output": {"class": "random", "shape": [3], "distribution": "normal", "bound": 1.0}})
    with pytest.raises(NetworkError, match="not supported"):
        _net({"output": {"class": "random", "shape": [3], "distribution": "normal", "algorithm": "threefry"}})


def test_rand_int_range_and_steps():
    time = TIME
    net = _net({"output": {"class": "rand_int", "shape": [batch_dim, time, 4], "from": "data", "minval": 3,
                           "maxval": 10}})
    a, b = _run(net, 1)["output"], _run(net, 2)["output"]
    assert a.data.dtype == "int32" and a.tensor.shape == (2, 5, 4)
    assert a.tensor.numpy().min() >= 3 and a.tensor.numpy().max() < 10
    assert not np.array_equal(a.tensor.numpy(), b.tensor.numpy())


def test_random_in_rec_loop_new_numbers_per_step():
    feat = FEAT
    net = _net({"output": {"class": "rec", "from": "data", "unit": {
        "rnd": {"class": "random", "shape": [batch_dim, feat], "distribution": "normal"},
        "output": {"class": "combine", "kind": "add", "from": ["data:source", "rnd"]}}}})
    assert "rnd" in net.layers["output"].plan.in_loop
    y = _run(net, 1)["output"].tensor.numpy()
    assert not np.allclose(y[:, 0], y[:, 1])
