"""random, rand_int, random_state_init: shapes, ranges and moments, reproducible given the step seed,
new numbers per step (and per rec-loop step), static and explicit-state streams fixed, RETURNN's
state parameter."""
import numpy as np
import pytest
import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim, DimTypes, batch_dim
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


def test_random_in_rec_loop_moved_out_with_the_loop_axis():
    """RETURNN moves a random layer out of a loop without an "end" layer, the loop's axis first in
    its shape (one time-major draw, new numbers per frame); with "end" it stays in the loop."""
    feat = FEAT
    net = _net({"output": {"class": "rec", "from": "data", "unit": {
        "rnd": {"class": "random", "shape": [batch_dim, feat], "distribution": "normal"},
        "output": {"class": "combine", "kind": "add", "from": ["data:source", "rnd"]}}}})
    assert "rnd" in net.layers["output"].plan.out_of_loop
    y = _run(net, 1)["output"].tensor.numpy()
    assert y.shape == (2, 5, 3) and not np.allclose(y[:, 0], y[:, 1])
    from returnn.tf.layers.rec_net.deps import analyse_unit
    plan = analyse_unit({"rnd": {"class": "random", "shape": [batch_dim, feat], "distribution": "normal"},
                         "end": {"class": "compare", "from": "rnd", "value": 0.0, "kind": "greater"},
                         "output": {"class": "copy", "from": "rnd"}}, "r", step_only=["end"])
    assert "rnd" in plan.in_loop


STATE = Dim(3, kind=DimTypes.Feature, description="random_PHILOX_state")


def _state_net(unit_or_layer):
    return _net({"rs": {"class": "random_state_init", "seed": 5, "out_dim": STATE},
                 "var": {"class": "variable", "shape": [STATE], "dtype": "int64", "init_by_layer": "rs",
                         "trainable": False, "param_name": "param"}, **unit_or_layer})


def _generator():
    return tf.random.Generator.from_state(tf.random.create_rng_state(5, "philox"), alg="philox")


def test_random_explicit_state_variable_auto_update_as_tf_generator():
    """returnn_common's nn.random: an int64 variable initialised by random_state_init, read and advanced
    by each draw (auto_update_state): RETURNN's numbers are TensorFlow's Generator's on that state."""
    net = _state_net({"output": {"class": "random", "shape": [batch_dim, TIME, FEAT], "distribution": "normal",
                                 "mean": 1.0, "stddev": 2.0, "explicit_state": "var", "auto_update_state": True,
                                 "shape_deps": ["data"]},
                      "u": {"class": "random", "shape": [4], "distribution": "uniform", "minval": -1.0, "maxval": 3.0,
                            "explicit_state": "rs", "is_output_layer": True}})
    var = net.layers["var"].var
    assert var.dtype == tf.int64 and not var.trainable
    assert returnn_param_shapes(net) == {"var/param": (3,)}
    gen = _generator()
    for _ in range(2):  # the variable advances: the second run draws the generator's next numbers
        out = _run(net, 1)
        np.testing.assert_allclose(out["output"].tensor.numpy(), gen.normal([2, 5, 3], 1.0, 2.0).numpy(), rtol=1e-6)
        np.testing.assert_array_equal(var.numpy(), gen.state.numpy())
        np.testing.assert_allclose(out["u"].tensor.numpy(), _generator().uniform([4], -1.0, 3.0).numpy(), rtol=1e-6)
    with pytest.raises(NetworkError, match="auto_update_state needs explicit_state to be a variable"):
        _state_net({"output": {"class": "random", "shape": [3], "distribution": "normal", "explicit_state": "rs",
                               "auto_update_state": True}})
    with pytest.raises(NetworkError, match="'dtype' must be one of"):
        _net({"output": {"class": "variable", "shape": [3], "dtype": "float16"}})


def test_random_explicit_state_in_rec_loop_one_time_major_draw():
    """returnn_common's test_random_in_loop: moved out of the loop, RETURNN draws (T, B, F) at once."""
    net = _state_net({"output": {"class": "rec", "from": [], "axis": TIME, "unit": {
        "u": {"class": "rec_unstack", "from": "base:data", "axis": TIME},
        "rnd": {"class": "random", "shape": [batch_dim, FEAT], "distribution": "normal", "explicit_state": "base:var",
                "auto_update_state": True, "shape_deps": ["base:data"]},
        "output": {"class": "combine", "kind": "add", "from": ["u", "rnd"]}}}})
    y = _run(net, 1)["output"].tensor.numpy()
    np.testing.assert_allclose(y, _generator().normal([5, 2, 3]).numpy().transpose(1, 0, 2), rtol=1e-6)


def test_random_shape_with_dim_math_of_a_shape_deps_axis():
    """returnn_common's cond_dim: a random shape with time * 2 (dim math), shape_deps having time: its
    extent and sizes from time's (RETURNN's get_dim_value / dyn_size_ext)."""
    time2 = TIME * 2
    net = _net({"output": {"class": "random", "shape": [batch_dim, time2, FEAT], "distribution": "normal",
                           "shape_deps": ["data"], "static": True}})
    out = _run(net, 1)["output"]
    assert out.tensor.shape == (2, 10, 3)
    assert out.sizes[time2].numpy().tolist() == [2 * n for n in LENS]
