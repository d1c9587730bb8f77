"""reuse_params map entries with 'layer_output' (returnn_common's nn.LSTM / nn.BatchNorm: parameters
are variable layers, in RETURNN's layout): the same numbers as the layer with its own parameters
holding those values (LSTM gate order and a cell's stacked kernel converted), one variable per
parameter (the variable layer's), refusals in one line."""
import numpy as np
import pytest
import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim, DimTypes
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork
from returnn.tf.returnn_params import returnn_param_shapes, returnn_param_values, set_returnn_param_values

IN = Dim(3, kind=DimTypes.Feature, description="in")
OUT = Dim(4, kind=DimTypes.Feature, description="out")
G4 = Dim(16, kind=DimTypes.Feature, description="4*out")
IN_OUT = Dim(7, kind=DimTypes.Feature, description="in+out")
_X = Data("x", shape=(None, 3))
DATA = Data("data", dims=[_X.dims[0], _X.dims[1], IN])


def _run(net):
    x = np.random.RandomState(3).randn(2, 5, 3).astype("float32")
    return net.forward({"data": tf.constant(x), "data:seq_len": tf.constant([5, 3])},
                       RunContext(False))["output"].tensor.numpy()


def _params(specs, map_):
    net = {name: {"class": "variable", "shape": shape, "param_name": "param", "init": 0.0}
           for name, shape in specs.items()}
    return net, {"map": {k: {"layer_output": v, "shape": specs[v]} for k, v in map_.items()}}


@pytest.mark.parametrize("unit,specs,map_", [
    ("nativelstm2", {"p_W": [IN, G4], "p_W_re": [OUT, G4], "p_b": [G4]}, {"W": "p_W", "W_re": "p_W_re", "b": "p_b"}),
    ("zoneoutlstm", {"p_kernel": [IN_OUT, G4], "p_bias": [G4]}, {"lstm_cell/kernel": "p_kernel",
                                                                  "lstm_cell/bias": "p_bias"}),
])
def test_lstm_params_from_variable_layers_in_returnn_layout(unit, specs, map_):
    unit_opts = {"zoneout_factor_cell": 0.0, "zoneout_factor_output": 0.0} if unit == "zoneoutlstm" else {}
    rec = {"class": "rec", "from": "data", "unit": unit, "out_dim": OUT, **({"unit_opts": unit_opts} if unit_opts else {})}
    own = TFNetwork({"output": rec}, {"data": DATA})
    values = {k: np.random.RandomState(len(k)).randn(*v.shape).astype("float32")
              for k, v in returnn_param_values(own).items()}
    set_returnn_param_values(own, values)
    layers, reuse = _params(specs, map_)
    shared = TFNetwork(dict(layers, output=dict(rec, reuse_params=reuse)), {"data": DATA})
    assert set(returnn_param_shapes(shared)) == {"%s/param" % k for k in specs}  # only the variable layers'
    set_returnn_param_values(shared, {"%s/param" % v: values["output/rec/" + k] for k, v in map_.items()})
    np.testing.assert_allclose(_run(shared), _run(own), rtol=1e-5, atol=1e-6)


def test_batch_norm_statistics_are_the_variable_layers():
    names = {"mean": "running_mean", "variance": "running_variance", "gamma": "gamma", "beta": "beta"}
    layers, reuse = _params({v: [IN] for v in names.values()}, {"batch_norm/v2_" + k: v for k, v in names.items()})
    net = TFNetwork(dict(layers, output={"class": "batch_norm", "from": "data", "masked_time": False,
                                         "param_version": 2, "reuse_params": reuse}), {"data": DATA})
    bn = net.layers["output"].bn
    assert net.layers["running_mean"].var is bn.moving_mean and net.layers["gamma"].var is bn.gamma
    assert set(returnn_param_shapes(net)) == {"%s/param" % v for v in names.values()}
    x = np.random.RandomState(3).randn(2, 5, 3).astype("float32")
    net.forward({"data": tf.constant(x), "data:seq_len": tf.constant([5, 5])}, RunContext(True))
    np.testing.assert_allclose(net.layers["running_mean"].var.numpy(), bn.momentum * x.mean(axis=(0, 1)), rtol=1e-4)


def test_layer_output_refusals():
    with pytest.raises(NetworkError, match="only a variable layer"):
        TFNetwork({"c": {"class": "linear", "from": "data", "out_dim": G4, "activation": None},
                   "output": {"class": "rec", "from": "data", "unit": "nativelstm2", "out_dim": OUT,
                              "reuse_params": {"map": {"b": {"layer_output": "c"}}, "auto_create_missing": True}}},
                  {"data": DATA})
    with pytest.raises(NetworkError, match="does not match its axes"):
        layers, reuse = _params({"p_b": [G4]}, {"b": "p_b"})
        reuse["map"]["b"]["shape"] = [OUT]
        reuse["auto_create_missing"] = True
        TFNetwork(dict(layers, output={"class": "rec", "from": "data", "unit": "nativelstm2", "out_dim": OUT,
                                       "reuse_params": reuse}), {"data": DATA})
