"""``cond`` (RETURNN's CondLayer): only the chosen branch runs, parameters in the cond layer's scope,
sub-layers of both branches readable as ``cond/x``, the false branch put in the true branch's layout."""
import numpy as np
import pytest
import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork
from returnn.tf.returnn_params import returnn_param_shapes

LENS = [7, 6, 5]


def _scalar(expr):
    return {"class": "eval", "from": [], "eval": expr,
            "out_type": {"batch_dim_axis": None, "shape": (), "dtype": "bool"}}


def _batch(x):
    lens = tf.constant(LENS)
    return {"data": tf.constant(x), "data:seq_len": lens, "classes": tf.zeros((3, 7), tf.int32),
            "classes:seq_len": lens}


def _extern():
    return {"data": Data("data", shape=(None, 11)), "classes": Data("classes", dim=13, sparse=True)}


TRAIN_NET = {  # RETURNN's test_CondLayer_subnetwork_train
    "src": {"class": "linear", "activation": "tanh", "n_out": 10, "from": "data"},
    "cond": {"class": "cond", "from": [],
             "condition": _scalar("tf.equal(self.network.global_train_step % 2, 0)"),
             "true_layer": {"class": "subnetwork", "from": "src", "subnetwork": {
                 "lin": {"class": "linear", "activation": "tanh", "n_out": 10, "from": "data"},
                 "res": {"class": "combine", "kind": "add", "from": ["data", "lin"]},
                 "output": {"class": "print", "from": "res", "extra_print_args": ["true_layer"], "summarize": 1}}},
             "false_layer": {"class": "copy", "from": "src"}},
    "output": {"class": "softmax", "from": "cond", "loss": "ce", "target": "classes"},
}


def test_cond_branch_by_step_and_parameter_names():
    net = TFNetwork(TRAIN_NET, _extern())
    assert returnn_param_shapes(net) == {"src/W": (11, 10), "src/b": (10,), "cond/lin/W": (10, 10),
                                         "cond/lin/b": (10,), "output/W": (10, 13), "output/b": (13,)}
    assert set(net.layers["cond"].params) == {"lin/W", "lin/b"}
    x = np.random.RandomState(1).randn(3, 7, 11).astype("float32")
    lin = net.layers["cond"].sub_layers()["lin"]
    w, b = lin.own_params["W"].numpy(), lin.own_params["b"].numpy()
    for step in (0, 1, 2):
        out = net.forward(_batch(x), RunContext(True, tf.constant([0, step], tf.int64)))
        src, y = out["src"].tensor.numpy(), out["cond"].tensor.numpy()
        ref = src + np.tanh(src @ w + b) if step % 2 == 0 else src
        for i, n in enumerate(LENS):
            np.testing.assert_allclose(y[i, :n], ref[i, :n], rtol=1e-5, atol=1e-5)


def test_cond_gradient_only_through_taken_branch():
    net = TFNetwork(TRAIN_NET, _extern())
    x = np.random.RandomState(2).randn(3, 7, 11).astype("float32")
    var = net.layers["cond"].params["lin/W"]
    for step, expect in ((0, True), (1, False)):
        with tf.GradientTape() as tape:
            out = net.forward(_batch(x), RunContext(True, tf.constant([0, step], tf.int64)))
            loss = tf.reduce_sum(out["output"].tensor ** 2)
        grad = tape.gradient(loss, var)
        assert (grad is not None and np.abs(tf.convert_to_tensor(grad).numpy()).sum() > 0) == expect


@pytest.mark.parametrize("flag, expected", [(True, 6), (False, 35)])
def test_cond_sub_outputs_of_both_branches(flag, expected):
    def branch(a, b):
        return {"class": "subnetwork", "from": [], "subnetwork": {
            "a": {"class": "constant", "value": a, "is_output_layer": True},
            "b": {"class": "constant", "value": b, "is_output_layer": True},
            "output": {"class": "copy", "from": "a"}}}
    net_dict = {"c": _scalar("tf.constant(%r)" % flag),
                "cond": {"class": "cond", "from": [], "condition": "c", "true_layer": branch(2, 3),
                         "false_layer": branch(5, 7)},
                "output": {"class": "combine", "kind": "mul", "from": ["cond/a", "cond/b"]}}
    net = TFNetwork(net_dict, _extern())
    out = net.forward(_batch(np.zeros((3, 7, 11), "float32")), RunContext(False))
    assert int(out["output"].tensor.numpy()) == expected


def test_cond_false_branch_in_true_layout_and_sizes():
    """True branch keeps the time axis, false branch pools it away and back: sizes of the taken one."""
    net_dict = {
        "c": _scalar("tf.constant(False)"),
        "cond": {"class": "cond", "from": [], "condition": "c",
                 "true_layer": {"class": "copy", "from": "data"},
                 "false_layer": {"class": "pool", "mode": "max", "pool_size": [2], "padding": "same",
                                 "from": "data"}},
        "output": {"class": "copy", "from": "cond"}}
    net = TFNetwork(net_dict, _extern())
    x = np.random.RandomState(3).randn(3, 7, 11).astype("float32")
    out = net.forward(_batch(x), RunContext(False))["output"]
    assert out.seq_len.numpy().tolist() == [4, 3, 3]
    assert out.tensor.shape[1] == 4


def test_cond_refuses_non_scalar_condition_and_branch_losses():
    with pytest.raises(NetworkError, match="scalar bool"):
        TFNetwork({"cond": {"class": "cond", "condition": {"class": "compare", "from": "data", "value": 0.0},
                            "true_layer": {"class": "copy", "from": "data"},
                            "false_layer": {"class": "copy", "from": "data"}},
                   "output": {"class": "copy", "from": "cond"}}, _extern())
    with pytest.raises(NetworkError, match="loss"):
        TFNetwork({"cond": {"class": "cond", "condition": _scalar("tf.constant(True)"),
                            "true_layer": {"class": "softmax", "from": "data", "n_out": 13, "loss": "ce"},
                            "false_layer": {"class": "softmax", "from": "data", "n_out": 13}},
                   "output": {"class": "copy", "from": "cond"}}, _extern())


@pytest.mark.parametrize("scope", [None, "/shared_ff"])
def test_both_branches_share_the_parameters_of_one_scope(scope):
    """RETURNN builds both branches under the cond's name with AUTO_REUSE: layers of the same scope in
    the two branches (same name, or the same absolute name_scope: i6's stochastic-depth conformer, a
    train and an eval branch of one feed-forward block) are one set of parameters."""
    lin = {"class": "linear", "activation": None, "n_out": 10, "from": "data"}
    if scope:
        lin["name_scope"] = scope
    net = TFNetwork({
        "cond": {"class": "cond", "from": [], "condition": {"class": "train_flag"},
                 "true_layer": {"class": "subnetwork", "from": "data", "subnetwork": {
                     "ff": dict(lin), "output": {"class": "eval", "from": "ff", "eval": "2.0 * source(0)"}}},
                 "false_layer": {"class": "subnetwork", "from": "data", "subnetwork": {
                     "ff": dict(lin), "output": {"class": "copy", "from": "ff"}}}},
        "output": {"class": "copy", "from": "cond"}}, _extern())
    name = "shared_ff" if scope else "cond/ff"
    assert returnn_param_shapes(net) == {name + "/W": (11, 10), name + "/b": (10,)}
    x = np.random.RandomState(2).randn(3, 7, 11).astype("float32")
    train = net.forward(_batch(x), RunContext(True))["cond"].tensor.numpy()
    evaluation = net.forward(_batch(x), RunContext(False))["cond"].tensor.numpy()
    for i, n in enumerate(LENS):
        np.testing.assert_allclose(train[i, :n], 2.0 * evaluation[i, :n], rtol=1e-5, atol=1e-5)


def test_a_cond_nested_in_a_branch_shares_with_the_other_branch():
    """Stochastic depth (i6's conformer): the train branch is a cond (skip or not) around a block whose
    layers have absolute name_scopes, the eval branch the same block: one set of parameters."""
    ln = {"class": "layer_norm", "from": "data", "name_scope": "/ln_scope"}
    lin = {"class": "linear", "activation": None, "n_out": 5, "from": "ln", "name_scope": "/lin_scope"}
    block = {"class": "subnetwork", "from": "data", "subnetwork": {"ln": ln, "lin": lin,
                                                                 "output": {"class": "copy", "from": "lin"}}}
    net = TFNetwork({
        "cond": {"class": "cond", "from": [], "condition": {"class": "train_flag"},
                 "true_layer": {"class": "cond", "from": [], "condition": _scalar("tf.constant(True)"),
                                "true_layer": dict(block), "false_layer": dict(block)},
                 "false_layer": dict(block)},
        "output": {"class": "copy", "from": "cond"}}, _extern())
    assert returnn_param_shapes(net) == {"ln_scope/scale": (11,), "ln_scope/bias": (11,), "lin_scope/W": (11, 5),
                                         "lin_scope/b": (5,)}
    x = np.random.RandomState(3).randn(3, 7, 11).astype("float32")
    train = net.forward(_batch(x), RunContext(True))["cond"].tensor.numpy()
    evaluation = net.forward(_batch(x), RunContext(False))["cond"].tensor.numpy()
    for i, n in enumerate(LENS):
        np.testing.assert_allclose(train[i, :n], evaluation[i, :n], rtol=1e-5, atol=1e-5)
