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
