"""subnetwork layers: flattened names, data/base:/data:KEY inside, several sources, nesting, the
subnetwork layer's own loss, values against numpy, and a config trained through rnn.py."""
import numpy as np
import pytest
import tensorflow as tf

from helpers import assert_one_line_error, config_12ax, describe, run_rnn, train_args, write_config
from returnn.errors import NetworkError
from returnn.tensor import Data
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork
from returnn.tf.subnetwork import expand_subnetworks

NET = {
    "pre": {"class": "linear", "activation": None, "n_out": 3, "from": "data"},
    "block": {"class": "subnetwork", "from": ["data", "pre"], "subnetwork": {
        "ff": {"class": "linear", "activation": "relu", "n_out": 4},
        "res": {"class": "combine", "kind": "add", "from": ["ff", "base:skip"]},
        "inner": {"class": "subnetwork", "from": "res", "subnetwork": {
            "output": {"class": "activation", "activation": "tanh", "from": "data"}}},
        "output": {"class": "copy", "from": "inner"},
    }, "loss": "mse", "target": "feat"},
    "skip": {"class": "linear", "activation": None, "n_out": 4, "from": "pre"},
    "output": {"class": "softmax", "loss": "ce", "from": "block/ff", "n_out": 2},
}


def test_flattened_names_and_references():
    flat = expand_subnetworks(NET)
    assert flat["block/data"] == {"class": "copy", "from": ["data", "pre"]}
    assert flat["block/ff"]["from"] == ["block/data"]
    assert flat["block/res"]["from"] == ["block/ff", "skip"]
    assert flat["block/inner/output"]["from"] == ["block/res"] and flat["block/inner"]["from"] == ["block/inner/output"]
    assert flat["block"] == {"class": "copy", "from": ["block/output"], "loss": "mse", "target": "feat"}
    assert expand_subnetworks({"a": {"class": "copy"}}) == {"a": {"class": "copy"}}


def test_values_and_losses():
    net = TFNetwork(NET, {"data": Data("data", shape=(None, 5)), "feat": Data("feat", shape=(None, 4)),
                          "classes": Data("classes", shape=(None,), sparse=True, dim=2)})
    assert sorted(info.layer for info in net.losses) == ["block", "output"]
    x = np.random.RandomState(0).randn(2, 3, 5).astype(np.float32)
    out = net.forward({"data": tf.constant(x), "data:seq_len": tf.constant([3, 2])}, RunContext(False),
                      only=["block"])
    lay = net.layers
    pre = x @ lay["pre"].W.numpy() + lay["pre"].bias.numpy()
    ff = np.maximum(np.concatenate([x, pre], -1) @ lay["block/ff"].W.numpy() + lay["block/ff"].bias.numpy(), 0)
    skip = pre @ lay["skip"].W.numpy() + lay["skip"].bias.numpy()
    got, ref = out["block"].tensor.numpy(), np.tanh(ff + skip)
    for i, n in enumerate([3, 2]):  # real frames (padded ones are zeroed by the projections)
        np.testing.assert_allclose(got[i, :n], ref[i, :n], rtol=1e-5, atol=1e-5)


def test_bad_subnetwork_names_the_layer():
    with pytest.raises(NetworkError, match="'block' \\(subnetwork\\).*'output' layer"):
        TFNetwork({"block": {"class": "subnetwork", "subnetwork": {"x": {"class": "copy"}}},
                   "output": {"class": "copy", "from": "block"}}, {"data": Data("data", shape=(None, 5))})
    with pytest.raises(NetworkError, match="'block/output'.*unknown layer 'block/nope'"):
        TFNetwork({"block": {"class": "subnetwork", "subnetwork": {"output": {"class": "copy", "from": "nope"}}},
                   "output": {"class": "copy", "from": "block"}}, {"data": Data("data", shape=(None, 5))})


NETWORK = '''{
    "block": {"class": "subnetwork", "from": "data", "subnetwork": {
        "ff": {"class": "linear", "activation": "relu", "n_out": 8},
        "output": {"class": "linear", "activation": "tanh", "n_out": 8, "from": "ff"}}},
    "output": {"class": "softmax", "loss": "ce", "from": "block"},
}'''
CONFIG = config_12ax(network=NETWORK, num_epochs=2)


def test_config_with_subnetwork_trains_and_resumes(tmp_path):
    config = write_config(tmp_path / "sub.config", CONFIG)
    proc = run_rnn(train_args(config, tmp_path), timeout=300)
    assert proc.returncode == 0 and "epoch 2 score" in proc.stdout, describe(proc)
    proc = run_rnn(train_args(config, tmp_path, "++num_epochs", "3"), timeout=300)
    assert proc.returncode == 0 and "epoch 3 score" in proc.stdout, describe(proc)
    bad = write_config(tmp_path / "bad.config", CONFIG.replace('"from": "ff"', '"from": "fff"'))
    assert_one_line_error(run_rnn(train_args(bad, tmp_path / "b"), timeout=300),
                          "layer 'block/output': 'from' names unknown layer 'block/fff'")



def test_rec_loop_in_a_cond_branch_in_a_subnetwork_reads_outer_data():
    """returnn_common's specaugment_v2: a subnetwork holds a cond whose branch runs a rec loop that reads
    the top-level data (base: from the unit, the branch and the subnetwork); its unit's base: references
    are mapped one level more than the branch's."""
    loop = {"class": "rec", "from": "base:base:data:data", "unit": {
        "s": {"class": "combine", "kind": "add", "from": ["prev:s", "data:source"]},
        "total": {"class": "reduce", "from": "base:base:base:data:data", "mode": "sum", "axis": "T"},
        "output": {"class": "combine", "kind": "add", "from": ["s", "total"]}}}
    net = TFNetwork({
        "sub": {"class": "subnetwork", "from": [], "subnetwork": {
            "c": {"class": "constant", "value": True, "dtype": "bool"},
            "output": {"class": "cond", "from": [], "condition": "c",
                       "true_layer": {"class": "subnetwork", "from": [], "subnetwork": {"output": loop}},
                       "false_layer": {"class": "copy", "from": "base:data:data"}}}},
        "output": {"class": "copy", "from": "sub"}}, {"data": Data("data", shape=(None, 3))})
    x = np.random.RandomState(0).randn(2, 4, 3).astype("float32")
    y = net.forward({"data": tf.constant(x), "data:seq_len": tf.constant([4, 4])}, RunContext(False))["output"]
    np.testing.assert_allclose(y.tensor.numpy(), np.cumsum(x, axis=1) + x.sum(axis=1, keepdims=True), rtol=1e-5)
