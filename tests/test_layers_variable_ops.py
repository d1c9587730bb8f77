"""variable_read / variable_assign: writes inside a step change what later reads of the same step
and the next steps see (in network order), assign and add, reads through assigns, errors."""
import numpy as np
import pytest
import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork


def _net(extra):
    net_dict = {"v": {"class": "variable", "shape": [3], "init": 1.0},
                "x": {"class": "reduce", "mode": "sum", "axes": "BT", "from": "data"}}
    net_dict.update(extra)
    return TFNetwork(net_dict, {"data": Data("data", shape=(None, 3))})


def _run(net, step=0):
    x = np.ones((2, 4, 3), "float32")
    return net.forward({"data": tf.constant(x), "data:seq_len": tf.constant([4, 2])},
                       RunContext(True, tf.constant([0, step], tf.int64)))


def test_assign_then_read_in_one_step_and_add_over_steps():
    net = _net({"a": {"class": "variable_assign", "var": "v", "value": "x"},
                "r": {"class": "variable_read", "var": "a", "is_output_layer": True},
                "acc": {"class": "variable_assign", "var": "r", "value": "x", "op": "add", "is_output_layer": True},
                "r2": {"class": "variable_read", "var": "acc", "is_output_layer": True}})
    out = _run(net)
    np.testing.assert_array_equal(out["r"].tensor.numpy(), [6.0, 6.0, 6.0])  # 6 real frames of ones
    np.testing.assert_array_equal(out["r2"].tensor.numpy(), [12.0, 12.0, 12.0])
    assert out["acc"].tensor.numpy() == 0 and out["acc"].data.dtype == "int32"
    np.testing.assert_array_equal(net.layers["v"].var.numpy(), [12.0, 12.0, 12.0])  # the parameter itself


def test_control_dependencies_and_errors():
    net = _net({"a": {"class": "variable_assign", "var": "v", "value": "x"},
                "r": {"class": "variable_read", "var": "v", "control_dependencies": ["a"], "is_output_layer": True}})
    np.testing.assert_array_equal(_run(net)["r"].tensor.numpy(), [6.0, 6.0, 6.0])
    with pytest.raises(NetworkError, match="variable layer"):
        _net({"output": {"class": "variable_read", "var": "x"}})
    with pytest.raises(NetworkError, match="shape"):
        _net({"y": {"class": "reduce", "mode": "sum", "axes": "T", "from": "data"},
              "output": {"class": "variable_assign", "var": "v", "value": "y"}})


@pytest.mark.parametrize("version", [0, 12])
def test_a_variable_of_shape_one_broadcasts_into_any_axis_before_behavior_version_11(version):
    """RETURNN's get_common_data (broadcast_matches before behavior_version 11): a scale variable of
    shape [1] times a (B, T, F) value is (B, T, F) (published scale-learning configs); from 11 on the
    size-1 axis is an axis of its own, which every source would need broadcasting to: refused."""
    from returnn.config import Config, get_global_config, set_global_config
    old = get_global_config(auto_create=True)
    set_global_config(Config({"behavior_version": version}))
    try:
        def build():
            return TFNetwork({"s": {"class": "variable", "shape": [1], "add_batch_axis": False, "init": 2.0},
                              "o": {"class": "eval", "from": ["data", "s"], "eval": "source(0) * source(1)",
                                    "is_output_layer": True}},
                             {"data": Data("data", shape=(None, 3))})
        if version >= 11:
            with pytest.raises(NetworkError, match="'o'.*every source needs broadcasting.*s:var0"):
                build()
            return
        net = build()
    finally:
        set_global_config(old)
    assert net.layers["o"].output.dims == net.extern_data["data"].dims
    x = np.random.RandomState(0).randn(2, 4, 3).astype("float32")
    y = net.forward({"data": tf.constant(x), "data:seq_len": tf.constant([4, 2])}, RunContext(False))["o"]
    np.testing.assert_allclose(y.tensor.numpy(), 2 * x, rtol=1e-6)
