"""What the network builds, as RETURNN does: only ``output``, loss, ``is_output_layer`` and
data-registering layers and what they need (in subnetworks and rec units too); ``reuse_params``
shares variables (one parameter, both layers' gradients); a train task without a loss is an error."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from helpers import TINY_12AX, assert_one_line_error, run_rnn, train_args, write_config
from returnn.errors import NetworkError
from returnn.extern_data import data_from_opts
from returnn.tf.layers.base import RunContext
from returnn.tf.network import TFNetwork
from returnn.tf.returnn_params import returnn_param_shapes


def _extern(in_dim=3, sparse_in=False, n_classes=4):
    return {"data": data_from_opts("data", {"dim": in_dim, "sparse": sparse_in}),
            "classes": data_from_opts("classes", {"dim": n_classes, "sparse": True})}


def _batch(n_in=3, sparse_in=False, n_classes=4, lengths=(5, 3)):
    rng = np.random.RandomState(0)
    b, t = len(lengths), max(lengths)
    x = rng.randint(0, n_in, (b, t)).astype(np.int32) if sparse_in else rng.randn(b, t, n_in).astype(np.float32)
    y = rng.randint(0, n_classes, (b, t)).astype(np.int32)
    lens = tf.constant(lengths, tf.int32)
    return {"data": tf.constant(x), "data:seq_len": lens, "classes": tf.constant(y), "classes:seq_len": lens}


def test_only_needed_layers_are_built_and_get_parameters():
    net = TFNetwork({
        "used": {"class": "linear", "n_out": 5, "from": "data", "L2": 0.1},
        "unused": {"class": "linear", "n_out": 6, "from": "data", "L2": 0.1},  # nothing needs it
        "unused2": {"class": "linear", "n_out": 6, "from": "unused"},
        "shown": {"class": "linear", "n_out": 2, "from": "data", "is_output_layer": True},
        "output": {"class": "softmax", "loss": "ce", "from": "used"},
    }, _extern())
    assert sorted(net.layers) == ["output", "shown", "used"]
    assert sorted(returnn_param_shapes(net)) == ["output/W", "output/b", "shown/W", "shown/b", "used/W", "used/b"]
    l2 = float(net.l2_loss())  # the unused layer's L2 does not enter the loss
    expected = 0.1 * sum(float(np.sum(v.numpy() ** 2)) for v in net.layers["used"].trainable_variables)
    assert l2 == pytest.approx(expected, rel=1e-6)


def test_subnetwork_builds_its_own_output_and_loss_layers_only():
    net = TFNetwork({"output": {"class": "subnetwork", "from": "data", "loss": "ce", "subnetwork": {
        "ff1": {"class": "linear", "n_out": 4, "from": "data"},  # unused inside the built subnetwork
        "ff2": {"class": "linear", "n_out": 4, "from": "data"},
        "aux": {"class": "softmax", "from": "ff2", "loss": "ce", "target": "classes"},
        "output": {"class": "softmax", "from": "data", "n_out": 4}}},
        "other": {"class": "subnetwork", "from": "data", "subnetwork": {  # not needed: none of it is built
            "x": {"class": "softmax", "from": "data", "loss": "ce", "target": "classes"},
            "output": {"class": "copy", "from": "x"}}},
    }, _extern())
    assert sorted(net.layers) == ["output", "output/aux", "output/ff2", "output/output"]


def test_rec_unit_builds_output_loss_layers_and_end_only_in_search():
    unit = {"emb": {"class": "linear", "from": "prev:output", "n_out": 3, "activation": None},
            "s": {"class": "rnn_cell", "unit": "LSTMBlock", "from": "emb", "n_out": 5},
            "prob": {"class": "softmax", "from": "s", "loss": "ce", "target": "classes"},
            "stop": {"class": "linear", "from": "s", "n_out": 1, "activation": "sigmoid"},  # only 'end' reads it
            "end": {"class": "compare", "from": "stop", "value": 0.5, "kind": "greater"},
            "output": {"class": "choice", "from": "prob", "target": "classes", "beam_size": 2, "initial_output": 0}}
    train = TFNetwork({"output": {"class": "rec", "from": [], "target": "classes", "unit": unit}}, _extern(3, True))
    assert sorted(train.layers["output"].sub_layers()) == ["emb", "output", "prob", "s"]
    # a network that does not evaluate (task forward): RETURNN builds no unit layer for its loss's sake
    forward = TFNetwork({"output": {"class": "rec", "from": [], "target": "classes", "unit": unit}}, _extern(3, True),
                        train_flag=False, eval_flag=False)
    assert sorted(forward.layers["output"].sub_layers()) == ["output"]
    assert not any(n.startswith("output/rec/stop") for n in returnn_param_shapes(train))
    search = TFNetwork({"output": {"class": "rec", "from": [], "target": "classes", "unit": unit, "max_seq_len": 5}},
                       _extern(3, True), search=True)
    assert {"end", "stop"} <= set(search.layers["output"].sub_layers())


def test_a_net_without_output_loss_or_output_layer_builds_nothing():
    net = TFNetwork({"a": {"class": "linear", "n_out": 3, "from": "data"}}, _extern())
    assert net.layers == {} and net.output_layer_name is None  # as RETURNN: nothing needs layer a
    with pytest.raises(NetworkError, match="task 'forward': the network has no output layer"):
        net.require_output_layer("forward")


def test_train_without_loss_is_an_error(tmp_path):
    config = TINY_12AX.replace('"loss": "ce", ', '"n_out": 2, ')
    assert config != TINY_12AX
    proc = run_rnn(train_args(write_config(tmp_path / "c.config", config), tmp_path))
    assert_one_line_error(proc, "no loss to train", "no loss defined?")


def test_only_on_eval_layer_is_not_in_forward_and_its_loss_not_in_training(tmp_path):
    layers = {"output": {"class": "softmax", "loss": "ce", "from": "data"},
              "check": {"class": "softmax", "loss": "ce", "from": "data", "only_on_eval": True}}
    assert "check" not in TFNetwork(layers, _extern(), eval_flag=False, train_flag=False).layers
    assert [i.layer for i in TFNetwork(layers, _extern()).losses if i.only_on_eval] == ["check"]
    config = TINY_12AX.replace('"output": {', '"check": {"class": "softmax", "loss": "ce", "from": ["hidden"], '
                                             '"only_on_eval": True},\n    "output": {')
    proc = run_rnn(train_args(write_config(tmp_path / "c.config", config), tmp_path, "++num_epochs", "1"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    epoch_line = next(line for line in proc.stdout.splitlines() if line.startswith("epoch 1 "))
    train_part, dev_part = epoch_line.split(" dev: ")
    assert "check" not in train_part and dev_part.startswith("score check "), epoch_line  # RETURNN's format_score
    dev = dev_part.split()
    assert dev[dev.index("check") + 1] != dev[dev.index("output") + 1], epoch_line  # two losses


def test_reuse_params_shares_one_variable_and_its_gradients():
    net = TFNetwork({
        "a": {"class": "linear", "n_out": 4, "from": "data", "activation": "tanh"},
        "b": {"class": "linear", "n_out": 4, "from": "a", "activation": None, "reuse_params": "a"},  # a's W, b
        "c": {"class": "linear", "n_out": 4, "from": "a", "reuse_params": {"map": {"W": "a", "b": None}}},
        "output": {"class": "softmax", "loss": "ce", "from": ["b", "c"]},
    }, _extern(in_dim=4))
    assert sorted(returnn_param_shapes(net)) == ["a/W", "a/b", "c/b", "output/W", "output/b"]
    a, b, c = (net.layers[n] for n in "abc")
    assert b.W is a.W and b.bias is a.bias and c.W is a.W and c.bias is not a.bias
    batch = _batch(n_in=4)
    with tf.GradientTape() as tape:
        out = net.forward(batch, RunContext(False))
        loss = tf.reduce_sum(out["output"].tensor[:, :, 0])
    grad = tape.gradient(loss, a.W)
    x = batch["data"].numpy()
    h = np.tanh(x @ a.W.numpy() + a.bias.numpy())
    real = np.arange(5)[None, :] < np.array([5, 3])[:, None]
    np.testing.assert_allclose(out["b"].tensor.numpy()[real], (h @ a.W.numpy() + a.bias.numpy())[real], rtol=1e-5,
                               atol=1e-5)
    # the gradient through a, b and c (all uses of the one W), checked by a finite difference
    eps, i, j = 1e-2, 1, 2

    def total(w):
        a.W.assign(w)
        return float(tf.reduce_sum(net.forward(batch, RunContext(False))["output"].tensor[:, :, 0]))
    w0 = a.W.numpy().copy()
    w1, w2 = w0.copy(), w0.copy()
    w1[i, j] += eps
    w2[i, j] -= eps
    numeric = (total(w1) - total(w2)) / (2 * eps)
    a.W.assign(w0)
    assert float(grad[i, j]) == pytest.approx(numeric, rel=2e-2, abs=1e-4)


def test_reuse_params_custom_function_ties_output_weights_to_the_embedding():
    net = TFNetwork({
        "emb": {"class": "linear", "n_out": 6, "from": "data", "with_bias": False, "activation": None},
        "output": {"class": "softmax", "from": "emb", "loss": "ce", "reuse_params": {"map": {
            "W": {"reuse_layer": "emb", "custom": lambda reuse_layer, **_: tf.transpose(reuse_layer.params["W"])},
            "b": None}}},
    }, _extern(in_dim=4, sparse_in=True, n_classes=4))
    assert sorted(returnn_param_shapes(net)) == ["emb/W", "output/b"]
    emb = net.layers["emb"]
    batch = _batch(n_in=4, sparse_in=True)
    emb.W.assign(emb.W + 1.0)  # the tied weights follow the variable's current value
    out = net.forward(batch, RunContext(False))["output"].tensor.numpy()
    w = emb.W.numpy()
    logits = w[batch["data"].numpy()] @ w.T + net.layers["output"].bias.numpy()
    ref = np.exp(logits - logits.max(-1, keepdims=True))
    np.testing.assert_allclose(out[0], (ref / ref.sum(-1, keepdims=True))[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("spec,needle", [
    ("nope", "layer 'output' (linear): 'reuse_params' names layer 'nope', which is not built before it"),
    ({"map": {"W": "a"}}, "'map' has no entry for parameter 'b'"),
    ({"reuse_layer": "a", "map": {"W": {"layer_output": "a"}}}, "'layer_output'"),
    ("wide", "parameter 'W' of layer 'wide' has shape (3, 5), this layer needs (3, 4)"),
])
def test_bad_reuse_params_are_one_line(spec, needle):
    with pytest.raises(NetworkError) as info:
        TFNetwork({"a": {"class": "linear", "n_out": 4, "from": "data"},
                   "wide": {"class": "linear", "n_out": 5, "from": "data"},
                   "output": {"class": "linear", "n_out": 4, "from": "data", "reuse_params": spec,
                              "is_output_layer": True},
                   "o2": {"class": "copy", "from": ["a", "wide"], "is_output_layer": True}}, _extern())
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_extra_deps_are_built_and_run_with_the_layer():
    net = TFNetwork({"side": {"class": "linear", "n_out": 2, "from": "data"},  # needed only as an extra dep
                     "output": {"class": "copy", "from": "data", "extra_deps": "side", "is_output_layer": True}},
                    _extern())
    assert sorted(net.layers) == ["output", "side"]
    outs = net.forward(_batch(), RunContext(False), only=["output"])
    assert "side" in outs


def test_out_shape_is_checked_on_every_layer():
    from returnn.tensor import batch_dim
    ext = _extern()
    time, feat = ext["data"].time_dim, ext["data"].feature_dim
    net = TFNetwork({"output": {"class": "copy", "from": "data", "out_shape": {batch_dim, time, feat},
                                "is_output_layer": True}}, ext)
    assert "output" in net.layers
    with pytest.raises(NetworkError, match="does not have the dims of 'out_shape'"):
        TFNetwork({"output": {"class": "reduce", "mode": "max", "axis": "T", "from": "data",
                              "out_shape": {batch_dim, time, feat}, "is_output_layer": True}}, ext)
    # {} (Python's empty dict literal; RETURNN iterates it as an empty set): a scalar, no dims
    net = TFNetwork({"output": {"class": "constant", "value": 1.0, "out_shape": {}, "is_output_layer": True}}, ext)
    assert net.layers["output"].output.batch_ndim == 0
    with pytest.raises(NetworkError, match="does not have the dims of 'out_shape'"):
        TFNetwork({"output": {"class": "copy", "from": "data", "out_shape": {}, "is_output_layer": True}}, ext)


@pytest.mark.parametrize("layer,needle", [
    ({"class": "softmax", "n_out": 7, "loss": "ce", "from": "data"}, "the output dim is 7 but target 'classes' (dim 4) "
                                                                     "needs 4"),
    ({"class": "linear", "n_out": 4, "loss": "mse", "target": "data", "from": "data"}, "target 'data' (dim 3) needs 3"),
    ({"class": "softmax", "n_out": 4, "loss": "ctc", "from": "data"}, "needs 5"),  # + blank
    ({"class": "reduce", "mode": "max", "axis": "T", "loss": "ce", "n_out": 3, "from": "data"},
     "do not have the same number of axes"),
    ({"class": "softmax", "n_out": 4, "loss": "edit_distance", "from": "data"}, "needs sparse output labels"),
])
def test_loss_output_and_target_are_checked_when_the_losses_are_set_up(layer, needle):
    """RETURNN's Loss._check_init where RETURNN runs it, when the objective is built (not by
    construct_from_dict): axes, time axis and the output dim the target needs."""
    net = TFNetwork({"output": layer}, _extern())  # builds, as in RETURNN (forward and search use it)
    with pytest.raises(NetworkError) as info:
        net.check_losses()
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_target_dim_is_checked_at_construction_without_n_out():
    """RETURNN's transform_config_dict takes n_out from the target (and asserts it) when the network is
    built, before any loss check: a reduce over T of dim 3 with a dim-4 target."""
    with pytest.raises(NetworkError, match="target's dim 4 .* does not match the output dim 3"):
        TFNetwork({"output": {"class": "reduce", "mode": "max", "axis": "T", "loss": "ce", "from": "data"}}, _extern())


def test_train_refuses_a_loss_that_does_not_fit_its_target_before_any_step(tmp_path):
    """The check runs when the task sets its losses up: train (and eval) refuse in one line
    before the first step and write no checkpoint."""
    config = TINY_12AX.replace('"output": {"class": "softmax", "loss": "ce", ',
                               '"output": {"class": "softmax", "loss": "ce", "n_out": 7, ')
    assert config != TINY_12AX
    proc = run_rnn(train_args(write_config(tmp_path / "c.config", config), tmp_path))
    assert_one_line_error(proc, "layer 'output': loss 'ce'", "the output dim is 7", "target 'classes'")
    assert "train epoch" not in proc.stdout and not list(tmp_path.glob("**/model.001*"))
