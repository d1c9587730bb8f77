"""RETURNN's ``initial_state`` / ``initial_output`` forms of recurrent units and rec sub-layers
(values against numpy, ``keep_over_epoch`` over training steps, RETURNN's parameter names, refusals);
the goldens from the real RETURNN (tests/returnn_goldens/cases_construction.py) check the rest."""
from __future__ import annotations

import re

import numpy as np
import pytest
import tensorflow as tf

from returnn.errors import NetworkError
from returnn.extern_data import data_from_opts
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork
from returnn.tf.returnn_params import returnn_param_shapes
from returnn.tensor import Data


def _extern(dim=3, classes=4):
    return {"data": data_from_opts("data", {"dim": dim}), "classes": data_from_opts("classes", {"dim": classes,
                                                                                                 "sparse": True})}


def _batch(x, lens):
    return {"data": tf.constant(x), "data:seq_len": tf.constant(lens, tf.int32)}


def _sig(v):
    return 1.0 / (1.0 + np.exp(-v))


def _np_lstm(x, w, w_re, b, h, c, forget_bias=0.0):
    """(T, F) frames from (h, c): outputs and the final state; gates (i, g, f, o)."""
    n = w_re.shape[0]
    out = []
    for xt in x:
        z = xt @ w + h @ w_re + b
        c = _sig(z[2 * n:3 * n] + forget_bias) * c + _sig(z[:n]) * np.tanh(z[n:2 * n])
        h = _sig(z[3 * n:]) * np.tanh(c)
        out.append(h)
    return np.array(out).reshape(len(x), n), h, c


def _train_ctx(epoch, step=0):
    return RunContext(True, tf.constant([epoch, step], tf.int64))


def test_var_initial_state_is_trainable_and_named_as_returnn():
    net = TFNetwork({"output": {"class": "rec", "unit": "nativelstm2", "n_out": 4, "initial_state": "var",
                               "from": "data", "loss": "mse", "target": "feat"}},
                    dict(_extern(), feat=data_from_opts("feat", {"dim": 4})))
    layer = net.layers["output"]
    shapes = returnn_param_shapes(net)
    assert shapes["output/rec/initial_c"] == (4,) and shapes["output/rec/initial_h"] == (4,)
    h0, c0 = np.random.RandomState(0).randn(2, 4).astype(np.float32)
    layer.state.entries["h"][1].assign(h0)
    layer.state.entries["c"][1].assign(c0)
    x = np.random.RandomState(1).randn(2, 5, 3).astype(np.float32)
    lens = [5, 2]
    with tf.GradientTape() as tape:
        y = net.forward(_batch(x, lens), RunContext(False))["output"].tensor
        loss = tf.reduce_sum(y)
    grads = tape.gradient(loss, [layer.state.entries["h"][1], layer.state.entries["c"][1]])
    assert all(g is not None and np.abs(g.numpy()).sum() > 0 for g in grads)
    assert {v.name for v in net.trainable_variables} >= {layer.state.entries["h"][1].name}
    w, w_re, b = layer.W.numpy(), layer.W_re.numpy(), layer.bias.numpy()
    for s, n in enumerate(lens):
        ref, _, _ = _np_lstm(x[s, :n], w, w_re, b, h0, c0)
        np.testing.assert_allclose(y.numpy()[s, :n], ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("unit", ["nativelstm2", "layernormvariantslstm"])
def test_keep_over_epoch_carries_the_state_within_an_epoch_only(unit):
    """RETURNN's test_state_keep_over_epoch: two chunks in one epoch give the whole sequence's output;
    a new epoch starts at zeros; evaluation steps neither read nor write the kept state."""
    net = TFNetwork({"output": {"class": "rec", "unit": unit, "n_out": 4, "initial_state": "keep_over_epoch",
                               "from": "data"}}, _extern())
    x = np.random.RandomState(2).randn(3, 6, 3).astype(np.float32)
    step = tf.function(lambda b, ctx_epoch: net.forward(b, RunContext(True, tf.stack([ctx_epoch, 0])))["output"].tensor)
    full = net.forward(_batch(x, [6, 6, 6]), RunContext(False))["output"].tensor.numpy()
    first = step(_batch(x[:, :3], [3, 3, 3]), tf.constant(1, tf.int64)).numpy()
    evaluated = net.forward(_batch(x[:, 3:], [3, 3, 3]), RunContext(False))["output"].tensor.numpy()
    second = step(_batch(x[:, 3:], [3, 3, 3]), tf.constant(1, tf.int64)).numpy()
    np.testing.assert_allclose(np.concatenate([first, second], 1), full, rtol=1e-4, atol=1e-5)
    assert not np.allclose(evaluated, second)  # evaluation: from zeros (and the kept state is left as it was)
    again = step(_batch(x[:, 3:], [3, 3, 3]), tf.constant(2, tf.int64)).numpy()  # a new epoch: zeros
    np.testing.assert_allclose(again, evaluated, rtol=1e-4, atol=1e-5)
    if unit == "nativelstm2":
        assert returnn_param_shapes(net) == {"output/rec/W": (3, 16), "output/rec/W_re": (4, 16), "output/rec/b": (16,)}


def test_keep_over_epoch_with_another_batch_size_keeps_the_first_entries():
    net = TFNetwork({"output": {"class": "rec", "unit": "gru", "n_out": 4, "initial_state": "keep_over_epoch",
                               "from": "data"}}, _extern())
    x = np.random.RandomState(3).randn(3, 4, 3).astype(np.float32)
    ctx = _train_ctx(1)
    full = net.forward(_batch(x, [4, 4, 4]), RunContext(False))["output"].tensor.numpy()
    net.forward(_batch(x[:, :2], [2, 1, 2]), ctx)  # the second entry's state is kept after its 1 frame
    y = net.forward(_batch(x[:2, 2:], [2, 2]), ctx)["output"].tensor.numpy()  # 2 entries now
    np.testing.assert_allclose(y[0], full[0, 2:], rtol=1e-4, atol=1e-5)
    assert not np.allclose(y[1], full[1, 2:])
    y3 = net.forward(_batch(x[:, :2], [2, 2, 2]), ctx)["output"].tensor.numpy()  # 3 again: a new one from zeros
    np.testing.assert_allclose(y3[2], full[2, :2], rtol=1e-4, atol=1e-5)


def test_layer_initial_states_per_key_in_a_loop_and_moved_out():
    """{"c": layer, "h": layer} of an LSTM cell in a rec loop (prev: read: in the loop) equals numpy."""
    net = TFNetwork({
        "init_c": {"class": "reduce", "mode": "mean", "axis": "T", "from": "data"},
        "init_h": {"class": "reduce", "mode": "max", "axis": "T", "from": "data"},
        "output": {"class": "rec", "from": "data", "unit": {
            "s": {"class": "rnn_cell", "unit": "LSTMBlock", "n_out": 3, "from": ["data:source", "prev:output"],
                  "initial_state": {"c": "base:init_c", "h": "base:init_h"}},
            "output": {"class": "linear", "activation": "tanh", "n_out": 2, "from": ["s", "prev:s"]}}}}, _extern())
    rec = net.layers["output"]
    assert rec.plan.in_loop == ["s", "output"]
    x = np.random.RandomState(4).randn(2, 4, 3).astype(np.float32)
    y = net.forward(_batch(x, [4, 4]), RunContext(False))["output"].tensor.numpy()
    cell, out = rec.layers["s"], rec.layers["output"]
    w, w_re, b = cell.W.numpy(), cell.W_re.numpy(), cell.bias.numpy()
    w_in, w_s = cell.W.numpy()[:3], cell.W.numpy()[3:]
    wo, bo = out.W.numpy(), out.bias.numpy()
    for s in range(2):
        h, c, o = x[s].max(0), x[s].mean(0), np.zeros(2)
        for t in range(4):
            h_prev = h
            z = x[s, t] @ w_in + o @ w_s + h @ w_re + b
            c = _sig(z[6:9] + 1.0) * c + _sig(z[:3]) * np.tanh(z[3:6])
            h = _sig(z[9:]) * np.tanh(c)
            o = np.tanh(np.concatenate([h, h_prev]) @ wo + bo)
            np.testing.assert_allclose(y[s, t], o, rtol=1e-4, atol=1e-5)
    del w


def test_moved_out_cell_with_var_state_has_both_returnn_variable_sets():
    """RETURNN: a cell computed over the sequence starts from rec/initial_*, while prev: of it at the
    first step comes from the loop's initial_* (two variable sets, both in checkpoints)."""
    net = TFNetwork({"output": {"class": "rec", "from": "data", "unit": {
        "s": {"class": "rnn_cell", "unit": "GRU", "n_out": 3, "initial_state": "var", "from": ["data:source"]},
        "output": {"class": "copy", "from": ["s", "prev:s"]}}}}, _extern())
    shapes = returnn_param_shapes(net)
    assert shapes["output/rec/s/rec/initial_var"] == (3,) and shapes["output/rec/s/initial_var"] == (3,)
    cell = net.layers["output"].layers["s"]
    cell.prev_state.entries["var"][1].assign([1.0, 2.0, 3.0])
    y = net.forward(_batch(np.zeros([1, 2, 3], np.float32), [2]), RunContext(False))["output"].tensor.numpy()
    np.testing.assert_allclose(y[0, 0, 3:], [1.0, 2.0, 3.0])


@pytest.mark.parametrize("opts,message", [
    ({"unit": "nativelstm2", "initial_state": "init"}, "give each state its value"),
    ({"unit": "nativelstm2", "initial_state": {"c": "var"}}, "must give the states"),
    ({"unit": "nativelstm", "initial_state": "var"}, r"NativeLstm \(v1\)"),
    ({"unit": "nativelstm2", "initial_state": "placeholder"}, "not supported"),
    ({"unit": "nativelstm2", "initial_state": 0.5}, "invalid value"),
    ({"unit": "gru", "initial_state": {"c": "var", "h": "var"}}, "one state here"),
])
def test_invalid_initial_states_are_refused(opts, message):
    net = {"init": {"class": "reduce", "mode": "mean", "axis": "T", "from": "data"},
           "output": dict({"class": "rec", "n_out": 3, "from": "data"}, **opts)}
    with pytest.raises(NetworkError, match=message):
        TFNetwork(net, _extern())


def test_keep_over_epoch_in_a_loop_and_initial_output_with_state_are_refused():
    with pytest.raises(NetworkError, match="keep_over_epoch' inside a rec loop"):
        TFNetwork({"output": {"class": "rec", "from": "data", "unit": {
            "output": {"class": "rnn_cell", "unit": "GRU", "n_out": 3, "initial_state": "keep_over_epoch",
                       "from": ["data:source", "prev:output"]}}}}, _extern())
    with pytest.raises(NetworkError, match="set initial_state only"):
        TFNetwork({"output": {"class": "rec", "from": "data", "unit": {
            "output": {"class": "rnn_cell", "unit": "GRU", "n_out": 3, "initial_state": "ones", "initial_output": 1,
                       "from": ["data:source", "prev:output"]}}}}, _extern())
    with pytest.raises(NetworkError, match="keep_over_epoch is an initial_state"):
        net = TFNetwork({"output": {"class": "rec", "from": "data", "unit": {
            "output": {"class": "linear", "n_out": 3, "initial_output": "keep_over_epoch",
                       "from": ["data:source", "prev:output"]}}}}, _extern())
        net.forward(_batch(np.zeros([1, 2, 3], np.float32), [2]), RunContext(False))


@pytest.mark.parametrize("net", [
    {"output": {"class": "rnn_cell", "unit": "LSTMBlock", "n_out": 3, "initial_state": "keep_over_epoch",
                "from": "data"}},
    {"output": {"class": "rec", "from": "data", "unit": {  # moved out of the loop (it reads no prev:)
        "cell": {"class": "rnn_cell", "unit": "GRU", "n_out": 3, "initial_state": "keep_over_epoch",
                 "from": "data:source"},
        "output": {"class": "copy", "from": "cell"}}}}])
def test_keep_over_epoch_of_an_rnn_cell_over_whole_sequences_is_refused(net):
    """RETURNN's RnnCellLayer gets its kept state without a rec layer there: 'assert rec_layer is not None'
    (1.20261022, and since the option exists; returnn_fuzz mutate --train seed 94). A rec layer keeps it."""
    with pytest.raises(NetworkError, match="keep_over_epoch' of an rnn_cell over whole sequences"):
        TFNetwork(net, _extern())


def test_initial_output_forms():
    """True is 1 (RETURNN's number rule), "var" a trainable (F,) vector init_<name>_var, "apply(0)"
    the layer on zero inputs (here: tanh of the bias)."""
    net = TFNetwork({"output": {"class": "rec", "from": "data", "unit": {
        "one": {"class": "combine", "kind": "mul", "from": ["prev:one", "prev:one"], "initial_output": True,
                "out_type": {"dim": 3}},
        "v": {"class": "linear", "activation": None, "n_out": 3, "from": "prev:v", "initial_output": "var"},
        "a": {"class": "linear", "activation": "tanh", "n_out": 3, "from": ["prev:a", "data:source"],
              "initial_output": "apply(0)"},
        "output": {"class": "copy", "from": ["prev:one", "prev:v", "prev:a"]}}}}, _extern())
    rec = net.layers["output"]
    assert returnn_param_shapes(net)["output/rec/v/init_v_var"] == (3,)
    rec.layers["v"].initial_output_var.assign([1.0, -1.0, 2.0])
    out = net.forward(_batch(np.zeros([2, 2, 3], np.float32), [2, 2]), RunContext(False))["output"]
    # (one and v read nothing with a batch axis: batch-less (T, F) as in RETURNN, so the output's layout
    # follows its first source: (T, B, F))
    y = np.moveaxis(out.tensor.numpy(), out.data.batch_dim_axis, 0)
    np.testing.assert_allclose(y[:, 0, :3], 1.0)
    np.testing.assert_allclose(y[:, 0, 3:6], [[1.0, -1.0, 2.0]] * 2)
    np.testing.assert_allclose(y[:, 0, 6:], [np.tanh(rec.layers["a"].bias.numpy())] * 2, rtol=1e-6)


def test_peepholes_are_tensorflows_lstm_cell_and_only_there():
    net = TFNetwork({"output": {"class": "rec", "unit": "standardlstm", "n_out": 3, "from": "data",
                               "unit_opts": {"use_peepholes": True}}}, _extern())
    assert {"output/rec/lstm_cell/w_i_diag", "output/rec/lstm_cell/w_f_diag",
            "output/rec/lstm_cell/w_o_diag"} <= set(returnn_param_shapes(net))
    with pytest.raises(NetworkError, match="no unit_opts .*use_peepholes"):
        TFNetwork({"output": {"class": "rec", "unit": "nativelstm2", "n_out": 3, "from": "data",
                              "unit_opts": {"use_peepholes": True}}}, _extern())


def test_initial_state_from_a_recurrent_layer_is_its_last_hidden_state():
    """RETURNN's get_last_hidden_state(key="*") of the layer initial_state names: a GRU decoder
    starting from a GRU encoder's final state equals it starting from get_last_hidden_state."""
    layers = {"enc": {"class": "rec", "unit": "gru", "n_out": 3, "from": "data"},
              "last": {"class": "get_last_hidden_state", "from": "enc", "n_out": 3}}
    x = np.random.RandomState(6).randn(2, 4, 3).astype(np.float32)
    outs = []
    for init in ("enc", "last"):
        net = TFNetwork(dict(layers, output={"class": "rec", "unit": "gru", "n_out": 3, "from": "data",
                                             "initial_state": init}), _extern())
        outs.append(net.forward(_batch(x, [4, 3]), RunContext(False))["output"].tensor.numpy())
        assert net.layers["output"].state.refs == [init]
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-6)
    assert not np.allclose(outs[0][:, 0], 0.0)


def test_rec_units_not_here_say_why_and_unknown_units_list_every_unit():
    """blocksparse and the 2-D LSTM cell are refused with their reason (docs/compat.md's unit table
    says the same); a typo lists every unit name, cells such as gru and rhn included."""
    extern = {"data": Data("data", shape=(None, 4))}
    for unit, why in (("BlocksparseLSTM", "OpenAI's blocksparse"), ("twodnativelstm", "use {'class': 'twod_lstm'}")):
        with pytest.raises(NetworkError, match=r"unit %r is not available here: .*%s" % (unit, re.escape(why))):
            TFNetwork({"output": {"class": "rec", "unit": unit, "n_out": 3, "from": "data"}}, extern)
    with pytest.raises(NetworkError, match=r"unknown unit 'lstn' \(known: .*\bgru\b.*\brhn\b"):
        TFNetwork({"output": {"class": "rec", "unit": "lstn", "n_out": 3, "from": "data"}}, extern)


# ---- RETURNN's explicit 'state' (LayerBase option): the state a step continues from, given by layers
def _state_net(state, feedback=("source(0) * 0.5", "source(0) - 0.25 * source(1)")):
    return TFNetwork({"output": {"class": "rec", "from": "data", "unit": {
        "_s": {"class": "rnn_cell", "unit": "LSTMBlock", "n_out": 4, "from": "data:source", "state": state},
        "_s_c": {"class": "get_last_hidden_state", "from": "_s", "key": "c", "n_out": 4},
        "_s_h": {"class": "get_last_hidden_state", "from": "_s", "key": "h", "n_out": 4},
        "s_c": {"class": "eval", "from": "_s_c", "eval": feedback[0]},
        "s_h": {"class": "eval", "from": ["_s_h", "_s_c"], "eval": feedback[1]},
        "output": {"class": "copy", "from": "_s"}}}}, _extern())


def test_explicit_state_of_an_lstm_cell_in_a_loop():
    """i6's masked decoders: rnn_cell with state LSTMStateTuple('prev:s_c', 'prev:s_h'): each step continues from
    those layers' values (c halved, h minus c/4 here), in RETURNN's (c, h) order; a dict by key is the same."""
    x = np.random.RandomState(3).randn(2, 5, 3).astype("float32")
    lens = [5, 3]
    outs = []
    import collections  # (TF's LSTMStateTuple(c, h) is such a namedtuple; TF 2.16+ may lack tf.compat.v1.nn.rnn_cell)
    state_tuple = collections.namedtuple("LSTMStateTuple", ["c", "h"])
    for state in (state_tuple("prev:s_c", "prev:s_h"), {"h": "prev:s_h", "c": "prev:s_c"},
                  ["prev:s_c", "prev:s_h"]):
        net = _state_net(state)
        cell = net.layers["output"].layers["_s"]
        for v in cell.trainable_variables:
            v.assign(tf.random.stateless_normal(v.shape, [1, len(v.name)]) * 0.5)
        outs.append(net.forward(_batch(x, lens), RunContext(False))["output"].tensor.numpy())
        w, w_re, b, fb = cell.W.numpy(), cell.W_re.numpy(), cell.bias.numpy(), cell.forget_bias
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-6)
    np.testing.assert_allclose(outs[2], outs[0], rtol=1e-6)
    for seq, n in enumerate(lens):
        h, c = np.zeros(4, "float32"), np.zeros(4, "float32")
        for t in range(n):
            y, h_new, c_new = _np_lstm(x[seq, t:t + 1], w, w_re, b, h, c, forget_bias=fb)
            np.testing.assert_allclose(outs[0][seq, t], y[0], rtol=1e-4, atol=1e-5)
            c, h = c_new * 0.5, h_new - 0.25 * c_new


def test_explicit_state_refusals():
    with pytest.raises(NetworkError, match="option 'state': RETURNN's state is a structure of layer names"):
        _state_net({"c": None, "h": "prev:s_h"})
    with pytest.raises(NetworkError, match="'state' .RETURNN's explicit state of a step. is supported in a rec loop"):
        TFNetwork({"output": {"class": "rnn_cell", "unit": "LSTMBlock", "n_out": 4, "from": "data",
                              "state": {"c": "data", "h": "data"}}}, _extern(dim=4))
    with pytest.raises(NetworkError, match="'state' is RETURNN's state of one step .its single_step_dim.: the input"):
        TFNetwork({"r": {"class": "reduce", "mode": "mean", "axis": "T", "from": "data"},
                   "output": {"class": "rec", "unit": "lstm", "n_out": 3, "from": "data",
                              "state": {"c": "r", "h": "r"}}}, _extern())
