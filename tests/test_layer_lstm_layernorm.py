"""rec unit layernormvariantslstm (RETURNN's LayerNormVariantsLSTM) against a numpy reference for
its layer-norm variants, both directions, NaN in padded frames; dropout only in training; bad
unit_opts as one line."""
import numpy as np
import pytest
import tensorflow as tf

from data_utils import lo, make_layer as make, rebind, spec
from helpers import outputs
from returnn.errors import NetworkError
from returnn.tf.layers import RunContext

LENS = np.array([5, 3, 1], np.int32)


def run(layer, values, train=False):
    """``layer`` on ``values`` re-bound to the templates it was built with."""
    values = [rebind(x, data) for x, data in zip(values, layer.sources)]
    return layer(values, RunContext(train, tf.constant([1, 2], tf.int64)))


def sigmoid(v):
    return 1 / (1 + np.exp(-v))


def np_ln(v, gamma, beta, eps=1e-12):
    mean, var = v.mean(-1, keepdims=True), v.var(-1, keepdims=True)
    y = (v - mean) / np.sqrt(var + eps) * gamma
    return y if beta is None else y + beta


def np_ln_lstm(x, cell, opts):
    """One sequence (T, n_in) through the unit, parameters read from ``cell``."""
    o = dict(cell.o)
    norms = {k: [None if v is None else v.numpy() for v in vs] for k, vs in cell.norms.items()}
    w, w_re = cell.W.numpy(), cell.W_re.numpy()
    n = w_re.shape[0]
    h, c, ys = np.zeros(n), np.zeros(n), []
    for t in range(len(x)):
        below = x[t] @ w + (cell.b.numpy() if cell.b is not None else 0)
        if o["global_norm"]:
            below = np_ln(below, *norms["input_below"])
        state = h @ w_re
        if o["global_norm"]:
            state = np_ln(state, *norms["state_below"])
        z = below + state
        if o["global_norm_joined"]:
            z = np_ln(z, *norms["lstm_in"])
        i, j, f, g = np.split(z, 4)
        if o["per_gate_norm"]:
            i, j, f, g = (np_ln(v, *norms[k]) for k, v in zip(("i_gate", "j_gate", "f_gate", "o_gate"), (i, j, f, g)))
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(j)
        c_out = c
        if o["cell_norm"]:
            c = np_ln(c, *norms["new_c"])
            if o["cell_norm_in_output"]:
                c_out = c
        h = sigmoid(g) * np.tanh(c_out)
        if o["hidden_norm"]:
            h = np_ln(h, *norms["new_h"])
        ys.append(h)
    return np.array(ys)


VARIANTS = [
    {},  # the paper's layer norm (RETURNN's defaults)
    {"global_norm": False, "per_gate_norm": True, "cell_norm_in_output": False, "forget_bias": 1.0},  # RNMT+
    {"global_norm": False, "global_norm_joined": True, "hidden_norm": True, "norm_gain": 0.5, "norm_shift": 0.1},
    {"global_norm": False, "cell_norm": False, "with_concat": True, "forget_bias": 0.5},
]


@pytest.mark.parametrize("direction", [1, -1])
@pytest.mark.parametrize("unit_opts", VARIANTS)
def test_matches_numpy(unit_opts, direction):
    x = np.random.RandomState(1).randn(3, 5, 4).astype(np.float32)
    dirty = x.copy()
    for b, n in enumerate(LENS):
        dirty[b, n:] = np.nan
    layer = make("rec", {"unit": "LayerNormVariantsLSTM", "n_out": 3, "unit_opts": unit_opts,
                         "direction": direction}, [spec(4)])
    for var in layer.trainable_variables:  # non-trivial gains and shifts
        if "gamma" in var.name or "beta" in var.name or "bias" in var.name:
            var.assign(var + np.random.RandomState(2).uniform(-0.3, 0.3, var.shape).astype(np.float32))
    out = run(layer, [lo(dirty, LENS)]).tensor.numpy()
    for b, n in enumerate(LENS):
        seq = x[b, :n] if direction == 1 else x[b, :n][::-1]
        ref = np_ln_lstm(seq, layer.cell, unit_opts)
        np.testing.assert_allclose(out[b, :n], ref if direction == 1 else ref[::-1], rtol=1e-4, atol=1e-5)
        np.testing.assert_array_equal(out[b, n:], 0.0)


def test_forget_bias_initialisation_follows_returnn():
    layer = make("rec", {"unit": "layernormvariantslstm", "n_out": 2, "unit_opts": {"forget_bias": 1.5}}, [spec(3)])
    np.testing.assert_allclose(layer.cell.norms["input_below"][1].numpy(), 1.5)  # beta of the input norm
    assert layer.cell.norms["state_below"][1] is None and layer.cell.b is None
    plain = make("rec", {"unit": "layernormvariantslstm", "n_out": 2, "unit_opts": {
        "global_norm": False, "cell_norm": False, "forget_bias": 1.5}}, [spec(3)])
    np.testing.assert_allclose(plain.cell.b.numpy(), [0, 0, 0, 0, 1.5, 1.5, 0, 0])


def test_dropout_only_in_training():
    """(A sparse input is refused, as RETURNN's TF cell asserts a dense one: test_build_checks_returnn.)"""
    idx = np.array([[1, 0, 2, 2, 1], [0, 1, 2, 0, 0], [2, 0, 0, 0, 0]], np.int32)
    layer = make("rec", {"unit": "layernormvariantslstm", "n_out": 4,
                         "unit_opts": {"dropout": 0.5, "dropout_h": 0.3}}, [spec(3)])
    value = lo(np.eye(3, dtype=np.float32)[idx], LENS)
    a, b = run(layer, [value]).tensor.numpy(), run(layer, [value]).tensor.numpy()
    np.testing.assert_array_equal(a, b)
    train = run(layer, [value], train=True).tensor.numpy()
    assert np.isfinite(train).all() and not np.allclose(train, a)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(run(layer, [value], train=True).tensor)
    grads = tape.gradient(loss, layer.trainable_variables)
    assert all(g is not None and np.isfinite(tf.convert_to_tensor(g).numpy()).all() for g in grads)


@pytest.mark.parametrize("unit_opts,message", [
    ({"bogus": 1}, "unknown unit_opts bogus"),
    ({"global_norm": True, "global_norm_joined": True}, "exclude each other"),
    ({"global_norm": False, "per_gate_norm": True, "global_norm_joined": True}, "per_gate_norm excludes"),
])
def test_bad_unit_opts_name_the_layer(unit_opts, message):
    with pytest.raises(NetworkError, match="'lay'.*" + message):
        make("rec", {"unit": "layernormvariantslstm", "n_out": 2, "unit_opts": unit_opts}, [spec(3)])


def test_all_parameters_of_the_unit_are_trained_and_saved():
    """The unit's norm parameters belong to the network's trainable variables (so the optimizer
    updates them and checkpoints hold them), not only W and W_re."""
    from returnn.tensor import Data
    from returnn.tf.network import TFNetwork
    net = TFNetwork(outputs({"l": {"class": "rec", "unit": "layernormvariantslstm", "n_out": 4, "from": "data",
                           "unit_opts": {"hidden_norm": True}}}), {"data": Data("data", shape=(None, 3))})
    names = sorted(v.name.split(":")[0].split("/")[-1] for v in net.trainable_variables)
    assert names == sorted(["W_ff", "W_re", "gamma_input_below", "beta_input_below", "gamma_state_below",
                            "gamma_new_c", "beta_new_c", "gamma_new_h", "beta_new_h"])
    ckpt = tf.train.Checkpoint(network=net)
    path = ckpt.save("/tmp/lnlstm-track-test/ckpt")
    stored = {n for n, _ in tf.train.list_variables(path)}
    assert sum("/l/cell/norms/new_h/" in n for n in stored) == 2  # gamma and beta of LN_h
