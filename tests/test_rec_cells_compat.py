"""Recurrent options of published configs: ZoneoutLSTM cells (numpy reference in evaluation,
zoned-out units in training), rec_weight_dropout of NativeLSTM2, Theano-era 'sampling'."""
import numpy as np
import pytest
import tensorflow as tf

from helpers import outputs
from returnn.errors import NetworkError
from returnn.tensor import Data
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork

LENS = [4, 2]


def _batch():
    x = np.random.RandomState(0).randn(2, 4, 3).astype("float32")
    x[1, 2:] = np.nan
    return {"data": tf.constant(x), "data:seq_len": tf.constant(LENS)}, x


def _sig(v):
    return 1 / (1 + np.exp(-v))


def _zoneout_ref(x, w, w_re, b, zc, zh, use_out, n):
    h, c, outs = np.zeros(n), np.zeros(n), []
    for t in range(len(x)):
        z = x[t] @ w + h @ w_re + b
        i, g, f, o = np.split(z, 4)
        c_new = _sig(f + 1.0) * c + _sig(i) * np.tanh(g)
        h_new = _sig(o) * np.tanh(c_new)
        c, h_prev = zc * c + (1 - zc) * c_new, h
        h = zh * h_prev + (1 - zh) * h_new
        outs.append(h if use_out else h_new)
    return np.array(outs)


@pytest.mark.parametrize("in_loop", [False, True])
def test_zoneout_lstm_in_evaluation_matches_numpy(in_loop):
    cell = {"class": "rnn_cell", "unit": "zoneoutlstm", "n_out": 5,
            "unit_opts": {"zoneout_factor_cell": 0.15, "zoneout_factor_output": 0.05, "use_zoneout_output": True}}
    if in_loop:
        net = TFNetwork(outputs({"r": {"class": "rec", "from": "data", "unit": {
            "s": dict(cell, **{"from": ["data:source"]}),
            "output": {"class": "combine", "kind": "add", "from": ["s", "prev:s"]}}}}), {"data": Data("data", shape=(None, 3))})
        layer = net.layers["r"].layers["s"]
        key = "r/s"
    else:
        net = TFNetwork(outputs({"s": dict(cell, **{"from": "data"})}), {"data": Data("data", shape=(None, 3))})
        layer, key = net.layers["s"], "s"
    batch, x = _batch()
    out = net.forward(batch, RunContext(False))[key].tensor.numpy()
    for b, n in enumerate(LENS):
        ref = _zoneout_ref(x[b, :n], layer.W.numpy(), layer.W_re.numpy(), layer.bias.numpy(), 0.15, 0.05, True, 5)
        np.testing.assert_allclose(out[b, :n], ref, rtol=1e-4, atol=1e-5)


def test_zoneout_lstm_in_training_keeps_or_updates_each_unit():
    net = TFNetwork(outputs({"s": {"class": "rnn_cell", "unit": "ZoneoutLSTM", "n_out": 64, "from": "data",
                           "unit_opts": {"zoneout_factor_cell": 0.5, "zoneout_factor_output": 0.5,
                                         "use_zoneout_output": True}}}), {"data": Data("data", shape=(None, 3))})
    batch, _ = _batch()
    y = net.forward(batch, RunContext(True, tf.constant([1, 2], tf.int64)))["s"].tensor.numpy()
    kept = np.isclose(y[0, 1:], y[0, :-1])  # the output h kept its previous value
    assert 0.3 < kept.mean() < 0.7  # about half of the units with factor 0.5
    y2 = net.forward(batch, RunContext(False))["s"].tensor.numpy()
    assert not np.isclose(y2[0, 1:], y2[0, :-1]).any()


def test_rec_weight_dropout_only_in_training():
    net_dict = {"l": {"class": "rec", "unit": "nativelstm2", "n_out": 8, "from": "data",
                      "unit_opts": {"rec_weight_dropout": 0.5}}}
    ref_dict = {"l": {"class": "rec", "unit": "nativelstm2", "n_out": 8, "from": "data"}}
    extern = {"data": Data("data", shape=(None, 3))}
    net, ref = TFNetwork(outputs(net_dict), extern), TFNetwork(outputs(ref_dict), extern)
    for a, b in zip(net.layers["l"].trainable_variables, ref.layers["l"].trainable_variables):
        b.assign(a)
    batch, _ = _batch()
    evaluated = net.forward(batch, RunContext(False))["l"].tensor.numpy()
    np.testing.assert_allclose(evaluated, ref.forward(batch, RunContext(False))["l"].tensor.numpy(), rtol=1e-6)
    seed = tf.constant([3, 4], tf.int64)
    trained = net.forward(batch, RunContext(True, seed))["l"].tensor.numpy()
    assert not np.allclose(trained[0, 1:], evaluated[0, 1:])  # from the 2nd frame on W_re matters
    np.testing.assert_allclose(trained[0, 0], evaluated[0, 0], rtol=1e-6)  # frame 0: h = 0, W_re unused
    np.testing.assert_array_equal(trained, net.forward(batch, RunContext(True, seed))["l"].tensor.numpy())
    with pytest.raises(NetworkError, match="sampling"):
        TFNetwork(outputs({"l": {"class": "rec", "unit": "lstmp", "n_out": 8, "from": "data", "sampling": 2}}), extern)
    TFNetwork(outputs({"l": {"class": "rec", "unit": "lstmp", "n_out": 8, "from": "data", "sampling": 1}}), extern)


def test_rec_weight_dropout_of_a_rec_layer_in_a_loop():
    """RETURNN's NativeLstm2 inside a rec loop (the transducer configs' decoder LSTM 's' in search, or
    not moved out): unit_opts rec_weight_dropout drops W_re out at each step call (a new mask per
    step, training only); in evaluation the values are the plain LSTM's (numpy)."""
    def loop(unit_opts):
        return TFNetwork(outputs({"r": {"class": "rec", "from": "data", "unit": {
            "s": {"class": "rec", "unit": "nativelstm2", "n_out": 6, "from": ["data:source", "prev:output"],
                  "unit_opts": unit_opts},  # prev:output keeps it in the loop
            "output": {"class": "combine", "kind": "add", "from": ["s", "prev:s"]}}}}),
            {"data": Data("data", shape=(None, 3))})
    net, ref = loop({"rec_weight_dropout": 0.5}), loop({})
    layer = net.layers["r"].layers["s"]
    for a, b in zip(layer.trainable_variables, ref.layers["r"].layers["s"].trainable_variables):
        b.assign(a)
    batch, x = _batch()
    evaluated = net.forward(batch, RunContext(False))["r/s"].tensor.numpy()
    np.testing.assert_allclose(evaluated, ref.forward(batch, RunContext(False))["r/s"].tensor.numpy(), rtol=1e-6)
    w, w_re, bias = layer.W.numpy(), layer.W_re.numpy(), layer.bias.numpy()
    assert w.shape == (3 + 6, 24)
    h, c, prev_out = np.zeros(6), np.zeros(6), np.zeros(6)
    for t in range(LENS[0]):  # numpy LSTM (RETURNN's gate order i, g, f, o; forget bias 0)
        i, g, f, o = np.split(np.concatenate([x[0, t], prev_out]) @ w + h @ w_re + bias, 4)
        c = _sig(f) * c + _sig(i) * np.tanh(g)
        h, prev_out = _sig(o) * np.tanh(c), _sig(o) * np.tanh(c) + h
        np.testing.assert_allclose(evaluated[0, t], h, rtol=1e-4, atol=1e-5)
    seed = tf.constant([3, 4], tf.int64)
    trained = net.forward(batch, RunContext(True, seed))["r/s"].tensor.numpy()
    untouched = ref.forward(batch, RunContext(True, seed))["r/s"].tensor.numpy()
    np.testing.assert_allclose(trained[0, 0], untouched[0, 0], rtol=1e-6)  # step 0: h = 0, W_re unused
    assert not np.allclose(trained[0, 1:4], untouched[0, 1:4])
    with pytest.raises(NetworkError, match="rec_weight_dropout"):
        TFNetwork(outputs({"c": {"class": "rnn_cell", "unit": "lstmblock", "n_out": 4, "from": "data",
                                 "unit_opts": {"rec_weight_dropout": 0.5}}}), {"data": Data("data", shape=(None, 3))})


def test_json_config_with_comments(tmp_path):
    from returnn.config import Config
    path = tmp_path / "old.config"
    path.write_text('{\n// data\n"task": "train", /* a\nblock */ "num_epochs": 3,\n"model": "net//model" // end\n}\n')
    config = Config()
    config.load_file(str(path))
    assert config.value("model") == "net//model" and config.int("num_epochs") == 3
    path.write_text('{\n// c\n"task": "train",,\n}\n')
    from returnn.errors import ConfigError
    with pytest.raises(ConfigError, match=r"old.config:3: JSON syntax error"):
        Config().load_file(str(path))


def test_layer_norm_lstm_cell_in_a_loop_equals_the_rec_layer():
    """rnn_cell with unit layernormvariantslstm, step by step in a rec loop, gives the rec layer's
    whole-sequence values with the same parameters."""
    opts = {"unit": "layernormvariantslstm", "n_out": 4,
            "unit_opts": {"global_norm": False, "per_gate_norm": True, "hidden_norm": True, "forget_bias": 1.0}}
    net = TFNetwork(outputs({
        "ref": dict(opts, **{"class": "rec", "from": "data"}),
        "loop": {"class": "rec", "from": "data", "unit": {
            "s": dict(opts, **{"class": "rnn_cell", "from": ["data:source"]}),
            "output": {"class": "combine", "kind": "add", "from": ["s", "prev:s"]}}}}),
        {"data": Data("data", shape=(None, 3))})
    cell, ref = net.layers["loop"].layers["s"], net.layers["ref"]
    assert len(cell.trainable_variables) == len(ref.trainable_variables)
    for a, b in zip(sorted(cell.trainable_variables, key=lambda v: v.name),
                    sorted(ref.trainable_variables, key=lambda v: v.name)):
        a.assign(b)
    batch, _ = _batch()
    out = net.forward(batch, RunContext(False))
    for b, n in enumerate(LENS):
        np.testing.assert_allclose(out["loop/s"].tensor.numpy()[b, :n], out["ref"].tensor.numpy()[b, :n],
                                   rtol=1e-5, atol=1e-6)


def test_unrolled_tensorflow_lstm_cell_with_max_seq_len():
    """RETURNN's demo-tf-maxgradnorm-lstm: BasicLSTM with unroll and max_seq_len (its TensorFlow cell
    unrolled to that length): the input must fit; native LSTM units refuse max_seq_len as RETURNN does."""
    import pytest
    from returnn.errors import NetworkError
    from returnn.extern_data import data_from_opts
    from returnn.tf.layers import RunContext
    from returnn.tf.network import TFNetwork
    ext = {"data": data_from_opts("data", {"dim": 2})}
    net = TFNetwork({"output": {"class": "rec", "unit": "BasicLSTM", "unroll": True, "max_seq_len": 3, "n_out": 4,
                                "from": "data"}}, ext)

    def run(t):
        return net.forward({"data": tf.zeros([1, t, 2]), "data:seq_len": tf.constant([t])}, RunContext(False))

    assert run(3)["output"].tensor.shape == (1, 3, 4)
    with pytest.raises(tf.errors.InvalidArgumentError, match="max_seq_len >= seq_len"):
        run(4)
    with pytest.raises(NetworkError, match="needs 'unroll'"):
        TFNetwork({"output": {"class": "rec", "unit": "nativelstm2", "unroll": True, "max_seq_len": 3, "n_out": 4,
                              "from": "data"}}, ext)
