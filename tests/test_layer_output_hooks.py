"""RETURNN's base-layer options on a layer's finished output (returnn/tf/layers/output_hooks.py):
``control_dependencies_on_output`` (a config's checks, as in returnn-experiments'
2021-latent-monotonic-attention configs) and ``debug_print_layer_output`` (option and config keys)."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from returnn.config import Config, set_global_config
from returnn.errors import NetworkError
from returnn.extern_data import data_from_opts
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork
from returnn.tf.returnn_params import returnn_param_values

X = np.random.RandomState(2).randn(2, 3, 4).astype(np.float32)
LENS = np.array([3, 2], np.int32)


def _extern():
    return {"data": data_from_opts("data", {"dim": 4}), "classes": data_from_opts("classes", {"dim": 5, "sparse": True})}


def _feed():
    return {"data": tf.constant(X), "data:seq_len": tf.constant(LENS)}


def _net(opts, search=False, train=True):
    layer = dict({"class": "linear", "from": "data", "n_out": 2, "activation": None, "is_output_layer": True}, **opts)
    return TFNetwork({"output": layer}, _extern(), search=search, train_flag=train)


def test_control_dependencies_see_the_layer_and_run_before_its_output_is_read():
    seen = []
    counter = tf.Variable(0, dtype=tf.int32)

    def checks(layer):
        seen.append((layer.name, layer.output.placeholder, layer.search_choices, layer.network.train_flag,
                     [s.name for s in layer.sources]))
        return [counter.assign_add(1)]

    net = _net({"control_dependencies_on_output": checks})

    @tf.function
    def run():
        return net.forward(_feed(), RunContext(True), only=["output"])["output"].tensor

    value = run().numpy()
    assert counter.numpy() == 1
    name, placeholder, choices, train, sources = seen[0]
    assert name == "output" and choices is None and train is True and sources == ["data"]
    assert placeholder.shape.rank == 3  # the layer's value (B, T, 2) in the traced step
    params = returnn_param_values(net)
    for b, n in enumerate(LENS):  # unchanged, on the real frames
        np.testing.assert_allclose(value[b, :n], X[b, :n] @ params["output/W"] + params["output/b"], rtol=1e-5)


def test_control_dependencies_failing_check_stops_the_step():
    def checks(layer):
        return [tf.debugging.assert_less(layer.output.placeholder, -1e9, message="values too large")]

    net = _net({"control_dependencies_on_output": checks})

    @tf.function
    def run():
        return net.forward(_feed(), RunContext(True), only=["output"])["output"].tensor

    with pytest.raises(tf.errors.InvalidArgumentError, match="values too large"):
        run()


def test_control_dependencies_refusals_are_one_line():
    with pytest.raises(NetworkError, match="'control_dependencies_on_output' must be a function"):
        _net({"control_dependencies_on_output": ["x"]})

    def reaches_search(layer):
        return list(layer.search_choices.beam_scores)

    # in a search this engine has no RETURNN SearchChoices: the function's own error, naming the layer
    net = _net({"control_dependencies_on_output": reaches_search}, search=True, train=False)
    with pytest.raises(NetworkError, match=r"layer 'output'.*reaches_search failed: AttributeError"):
        net.forward(_feed(), RunContext(False), only=["output"])
    net = _net({"control_dependencies_on_output": lambda layer: ["not an op"]})
    with pytest.raises(NetworkError, match="must return TF ops or tensors"):
        net.forward(_feed(), RunContext(True), only=["output"])


def test_debug_print_layer_output_option_and_config_key(capfd):
    _net({"debug_print_layer_output": True}).forward(_feed(), RunContext(False), only=["output"])
    printed = capfd.readouterr().out
    assert printed.startswith("output [[[")  # the name, then the values
    _net({}).forward(_feed(), RunContext(False), only=["output"])
    assert capfd.readouterr().out == ""
    config = Config()
    config.set("debug_print_layer_output", {"summarize": 1})
    config.set("debug_print_layer_output_shape", True)
    set_global_config(config)
    _net({}).forward(_feed(), RunContext(False), only=["output"])
    printed = capfd.readouterr().out
    assert "output shape: " in printed and "[2 3 2]" in printed  # name, template, shape
    assert "..." in printed  # summarize 1: one value per dimension's start and end
    # the option overrides the config key
    _net({"debug_print_layer_output": False}).forward(_feed(), RunContext(False), only=["output"])
    assert "output [[[" not in capfd.readouterr().out
    with pytest.raises(NetworkError, match=r"debug_print_layer_output \(option\): unknown print option\(s\) 'first_n'"):
        _net({"debug_print_layer_output": {"first_n": 2}})


@pytest.mark.parametrize("opts", [{"debug_print_layer_output": True}, {"control_dependencies_on_output": lambda l: []},
                                  {"control_dependencies_on_output": lambda l: [tf.constant(1)]}, {"batch_norm": True}])
def test_a_rec_layer_keeps_its_sub_layers_values(opts, capfd):
    """The hooks (and the batch_norm option) act on the rec layer's output only: its sub-layers stay readable
    ('rec/sub', the unit's losses; jotix16's dot_fusion sets debug_print_layer_output_shape and reads its
    full-sum loss sub-layer)."""
    unit = {"h": {"class": "linear", "from": ["data:source", "prev:h"], "n_out": 2, "activation": "tanh"},
            "output": {"class": "copy", "from": "h"}}
    net = TFNetwork({"output": dict({"class": "rec", "from": "data", "unit": unit}, **opts),
                     "h": {"class": "copy", "from": "output/h", "is_output_layer": True}}, _extern(), train_flag=False)
    out = net.forward(_feed(), RunContext(False), only=["h"])
    capfd.readouterr()
    assert "output/h" in out and out["h"].tensor.shape[-1] == 2
