"""Per-layer ``updater_opts`` (returnn/tf/updater_opts.py): training steps against the real RETURNN
(tests/data/returnn_updater_opts.json, from tests/returnn_goldens/make_updater_opts_goldens.py:
several optimizers, learning_rate_multiplier, accumulation and clipping per layer), gradient noise,
checkpoints of several optimizers, refused keys."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from returnn.config import Config, get_global_config, set_global_config
from returnn.distributed.backend import LocalBackend
from returnn.distributed.context import DistributedContext
from returnn.errors import ConfigError, NetworkError
from returnn.extern_data import extern_data_from_config
from returnn.tf.network import TFNetwork
from returnn.tf.optimizers import create_optimizer
from returnn.tf.returnn_params import network_params, set_returnn_param_values
from returnn.tf.steps import StepFunctions
from returnn.tf.updater_opts import LayerUpdates, MultiOptimizer

GOLDEN = json.loads((Path(__file__).resolve().parent / "data" / "returnn_updater_opts.json").read_text())


def _build(config_dict, net_dict, extern=None):
    config = Config(dict(copy.deepcopy(config_dict), extern_data=copy.deepcopy(extern or GOLDEN["extern_data"])))
    old = get_global_config()
    set_global_config(config)
    try:
        network = TFNetwork(copy.deepcopy(net_dict), extern_data_from_config(config), seed=3)
    finally:
        set_global_config(old)
    optimizer = create_optimizer(config, network.trainable_variables)
    steps = StepFunctions(network, optimizer, DistributedContext(LocalBackend()), config.float("gradient_clip"),
                          config.float("gradient_clip_global_norm"), config.float("gradient_clip_norm"),
                          config.float("gradient_noise"), accum_grad_multiple_step=config.int("accum_grad_multiple_step"))
    optimizer.learning_rate.assign(config.float("learning_rate"))  # as the engine sets it each epoch
    return network, optimizer, steps


def _batch(b):
    lens = tf.constant(b["lens"], tf.int32)
    return {"data": tf.constant(np.array(b["data"], np.float32)), "data:seq_len": lens,
            "classes": tf.constant(np.array(b["classes"], np.int32)), "classes:seq_len": lens}


def _params(network):
    return {name: p.value() for name, p in network_params(network).items()}


@pytest.mark.parametrize("case", sorted(GOLDEN["cases"]))
def test_training_steps_as_returnn(case):
    c = GOLDEN["cases"][case]
    network, optimizer, steps = _build(c["config"], c["network"])
    set_returnn_param_values(network, {k: np.array(v, np.float32) for k, v in GOLDEN["params"].items()})
    for step, b in enumerate(GOLDEN["batches"]):
        steps.train_step(_batch(b), np.array([1, step], np.int64), tf.zeros([3]))
    ours = _params(network)
    for name, want in c["params"].items():
        np.testing.assert_allclose(ours[name], np.array(want), rtol=2e-5, atol=2e-6, err_msg="%s: %s" % (case, name))


def test_optimizers_per_layer_and_group():
    c = GOLDEN["cases"]["multiple_optimizers_and_opts"]
    network, optimizer, steps = _build(c["config"], c["network"])
    assert isinstance(optimizer, MultiOptimizer) and len(optimizer.subs) == c["optimizers"] == 3
    names = [type(sub).__name__ for sub in optimizer.subs]
    assert names == ["SGD", "Adam", "Adagrad"]  # the config's (default SGD) first
    assert isinstance(steps.layer_updates, LayerUpdates)
    optimizer.learning_rate.assign(0.2)
    assert [float(sub.learning_rate.numpy()) for sub in optimizer.subs] == pytest.approx([0.2, 0.2, 0.6])
    assert float(optimizer.learning_rate.numpy()) == pytest.approx(0.2)
    plain = _build({"learning_rate": 0.1}, {"output": {"class": "softmax", "loss": "ce", "from": "data"}})
    assert not isinstance(plain[1], MultiOptimizer) and plain[2].layer_updates is None


def test_gradient_noise_per_layer_is_seeded_and_only_on_that_layer():
    net = {"layer1": {"class": "linear", "activation": "tanh", "n_out": 5, "from": "data",
                      "updater_opts": {"gradient_noise": 0.1}},
           "output": {"class": "softmax", "loss": "ce", "from": "layer1"}}
    batch = _batch(GOLDEN["batches"][0])
    runs = []
    for noise_net in (net, dict(net, layer1=dict(net["layer1"], updater_opts={}))):
        for seed in ((1, 0), (1, 0), (1, 1)):
            network, _, steps = _build({"learning_rate": 0.1}, noise_net)
            set_returnn_param_values(network, {k: np.array(v, np.float32) for k, v in GOLDEN["params"].items()
                                               if not k.startswith("layer2")})
            steps.train_step(batch, np.array(seed, np.int64), tf.zeros([3]))
            runs.append(_params(network))
    noisy, clean = runs[:3], runs[3:]
    np.testing.assert_array_equal(noisy[0]["layer1/W"], noisy[1]["layer1/W"])  # same seed, same noise
    assert not np.allclose(noisy[0]["layer1/W"], noisy[2]["layer1/W"])  # another step, other noise
    assert not np.allclose(noisy[0]["layer1/W"], clean[0]["layer1/W"], atol=1e-4)
    np.testing.assert_allclose(noisy[0]["output/W"], clean[0]["output/W"], rtol=1e-6)  # not on other layers


def test_checkpoint_of_several_optimizers_round_trips(tmp_path):
    from returnn.tf.checkpoint import CheckpointManager
    c = GOLDEN["cases"]["multiple_optimizers_and_opts"]
    network, optimizer, steps = _build(c["config"], c["network"])
    for step, b in enumerate(GOLDEN["batches"][:3]):
        steps.train_step(_batch(b), np.array([1, step], np.int64), tf.zeros([3]))
    manager = CheckpointManager(str(tmp_path / "model"))
    manager.set_objects(network=network, optimizer=optimizer)
    values = manager.values(1, 0, None)
    assert "layer1/W/Adam" in values and "layer1/W/Adam_1" in values and "layer2/W/Adagrad" in values
    assert "output/W/Adam" not in values and "_engine/optimizer/1/iterations" in values
    assert int(values["_engine/optimizer/1/iterations"]) == 1  # layer1's Adam: every 2nd step
    path = manager.save(1)
    network2, optimizer2, _ = _build(c["config"], c["network"])
    manager2 = CheckpointManager(str(tmp_path / "model"))
    manager2.set_objects(network=network2, optimizer=optimizer2)
    manager2.restore(path)
    for sub, sub2 in zip(optimizer.subs, optimizer2.subs):
        assert int(sub.iterations.numpy()) == int(sub2.iterations.numpy())
        for slot, slot_vars in sub.slots.items():
            for a, b in zip(slot_vars, sub2.slots[slot]):
                np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("opts,msg", [
    ({"maximize_grad_norm": 1.0}, "updater_opts maximize_grad_norm not implemented per layer"),
    ({"tags": ["a"]}, "updater_opts tags not implemented per layer"),
    ({"bogus": 1}, "unknown updater_opts bogus"),
    ({"optimizer": {"class": "adam", "learning_rate": 0.1}}, "no 'learning_rate'"),
    ({"accum_grad_multiple_step": -1}, "accum_grad_multiple_step must be an int >= 0"),
    ({"gradient_clip": "x"}, "gradient_clip must be a number >= 0"),
    ([1], "updater_opts must be a dict"),
])
def test_refused_updater_opts_are_one_line(opts, msg):
    with pytest.raises(NetworkError, match="layer 'l1' .*" + msg) as info:
        _build({"learning_rate": 0.1}, {"l1": {"class": "linear", "n_out": 3, "from": "data", "updater_opts": opts},
                                        "output": {"class": "softmax", "loss": "ce", "from": "l1"}})
    assert "\n" not in str(info.value)


def test_unknown_optimizer_class_in_updater_opts_names_the_parameter():
    with pytest.raises(ConfigError, match="updater_opts of the layer of parameter .*unknown class 'bogus'"):
        _build({"learning_rate": 0.1}, {"l1": {"class": "linear", "n_out": 3, "from": "data",
                                               "updater_opts": {"optimizer": {"class": "bogus"}}},
                                        "output": {"class": "softmax", "loss": "ce", "from": "l1"}})
