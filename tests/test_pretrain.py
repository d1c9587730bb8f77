"""Pretrain schedules (RETURNN's construction algorithms), parameter carrying by name, #config."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import tensorflow as tf

from returnn.config import Config
from returnn.errors import ConfigError
from returnn.pretrain import Pretrain, WrapEpochValue, pretrain_from_config
from returnn.tf.network_schedule import ConfigOverlay, NetworkSchedule, carry_params, named_params, split_net_dict

NET = {
    "hidden_0": {"class": "linear", "n_out": 7, "activation": "relu"},
    "hidden_1": {"class": "linear", "n_out": 8, "activation": "relu", "from": ["hidden_0"]},
    "output": {"class": "softmax", "loss": "ce", "from": ["hidden_1"]},
}


def blstm(layers):
    net = {}
    for i in range(layers):
        src = ["lstm%i_fw" % (i - 1), "lstm%i_bw" % (i - 1)] if i else ["data"]
        for d in ("fw", "bw"):
            net["lstm%i_%s" % (i, d)] = {"class": "rec", "unit": "lstm", "n_out": 5, "from": src,
                                         "direction": 1 if d == "fw" else -1}
    net["output"] = {"class": "softmax", "loss": "ce", "from": ["lstm%i_fw" % (layers - 1), "lstm%i_bw" % (layers - 1)]}
    return net


def pretrain_of(network, pretrain="default", **keys):
    return pretrain_from_config(Config(dict(network=network, pretrain=pretrain, **keys)))


def test_from_output_default_like_returnn():
    p = pretrain_of(NET)
    assert p.get_train_num_epochs() == 2
    one, two, three = (p.get_network_json_for_epoch(e) for e in (1, 2, 3))
    assert sorted(one) == ["hidden_0", "output"] and one["output"]["from"] == ["hidden_0"]
    assert two == three == NET
    b = pretrain_of(blstm(3))
    assert b.get_train_num_epochs() == 3
    assert sorted(b.get_network_json_for_epoch(1)) == ["lstm0_bw", "lstm0_fw", "output"]
    assert b.get_network_json_for_epoch(2)["output"]["from"] == ["lstm1_bw", "lstm1_fw"]


def test_repetitions_int_list_dict_and_hash_key():
    assert pretrain_of(NET, {"repetitions": 2}).get_train_num_epochs() == 4
    p = pretrain_of(blstm(3), {"repetitions": [1, 3]})  # the last entry repeats for later steps
    assert p.repetitions == [1, 3, 3] and p.get_train_num_epochs() == 7
    p = pretrain_of(blstm(3), {"repetitions": {"default": 2, 0: 3}})
    assert p.repetitions == [3, 2, 2]
    assert sorted(p.get_network_json_for_epoch(3)) == ["lstm0_bw", "lstm0_fw", "output"]
    assert sorted(p.get_network_json_for_epoch(4)) == ["lstm0_bw", "lstm0_fw", "lstm1_bw", "lstm1_fw", "output"]
    assert pretrain_of(blstm(3), {"repetitions": {"default": 0, "final": 6}}).repetitions == [0, 0, 6]
    assert pretrain_of(NET, pretrain_repetitions=3).get_train_num_epochs() == 6


def test_wrap_epoch_value_resolved_per_epoch():
    net = dict(NET, hidden_0=dict(NET["hidden_0"], dropout=WrapEpochValue(lambda epoch: 0.1 * epoch)),
               output=dict(NET["output"], loss_opts={"scales": [WrapEpochValue(lambda epoch: epoch)]}))
    p = pretrain_of(net, {"repetitions": 2})
    drops = [p.get_network_json_for_epoch(e)["hidden_0"]["dropout"] for e in range(1, 6)]
    np.testing.assert_allclose(drops, [0.1, 0.2, 0.3, 0.4, 0.4])
    assert p.get_network_json_for_epoch(3)["output"]["loss_opts"]["scales"] == [3]
    assert isinstance(net["hidden_0"]["dropout"], WrapEpochValue)  # the config's dict is untouched


def test_custom_construction_algo_and_config_keys():
    def grow(idx, net_dict):
        if idx >= 2:
            return None
        net_dict["#config"] = {"batch_size": 100 * (idx + 1)}
        net_dict["hidden_1"]["n_out"] = 2 + idx
        return net_dict

    p = pretrain_of(NET, {"construction_algo": grow, "repetitions": [1, 2]})
    assert p.repetitions == [1, 2, 2] and p.get_train_num_epochs() == 5  # the final net repeats too
    assert [p.get_network_json_for_epoch(e)["hidden_1"]["n_out"] for e in range(1, 7)] == [2, 3, 3, 8, 8, 8]
    assert p.get_network_json_for_epoch(2)["#config"] == {"batch_size": 200}


def test_from_input_and_no_modifications():
    p = pretrain_of(NET, {"construction_algo": "from_input"})
    assert p.get_train_num_epochs() == 2
    first = p.get_network_json_for_epoch(1)
    assert sorted(first) == ["hidden_0", "output"] and first["output"]["from"] == ["hidden_0"]
    assert pretrain_of(NET, {"construction_algo": "no_network_modifications"}).get_train_num_epochs() == 1


def test_pretrain_config_errors_and_off():
    assert pretrain_of(NET, pretrain=None) is None and pretrain_of(NET, pretrain="") is None
    with pytest.raises(ConfigError, match="construction_algo"):
        pretrain_of(NET, {"construction_algo": "sideways"})
    with pytest.raises(ConfigError, match="pretrain"):
        pretrain_of(NET, "layerwise")
    with pytest.raises(ConfigError, match="copy_param_mode"):
        pretrain_of(NET, {"copy_param_mode": "bogus"})


class Layer(tf.Module):
    def __init__(self, shape, value):
        super().__init__()
        self.W = tf.Variable(np.full(shape, value, np.float32))
        self.b = tf.Variable(np.full(shape[-1:], value, np.float32))


def test_carry_params_by_name_shape_and_mode():
    old = {"h0": Layer((3, 4), 1.0), "h1": Layer((4, 4), 2.0), "out": Layer((4, 2), 3.0)}
    new = {"h0": Layer((3, 4), 0.0), "h1": Layer((4, 6), 0.0), "out": Layer((6, 2), 0.0), "h2": Layer((2, 2), 0.0)}
    report = carry_params(old, new, None)
    assert sorted(report["copied"]) == ["h0/W", "h0/b", "out/b"]
    np.testing.assert_array_equal(new["h0"].W.numpy(), 1.0)
    assert np.all(new["h1"].W.numpy() == 0.0) and np.all(new["out"].W.numpy() == 0.0)
    report = carry_params(old, new, "subset")
    assert sorted(report["partial"]) == ["h1/W", "h1/b", "out/W"]
    w = new["h1"].W.numpy()
    assert np.all(w[:, :4] == 2.0) and np.all(w[:, 4:] == 0.0)
    assert np.all(new["out"].W.numpy()[:4] == 3.0) and np.all(new["out"].W.numpy()[4:] == 0.0)
    fresh = {"h0": Layer((3, 4), 0.0)}
    assert carry_params(old, fresh, "reset")["copied"] == [] and np.all(fresh["h0"].W.numpy() == 0.0)
    skipped = {"out": Layer((4, 2), 0.0)}
    assert carry_params(old, skipped, None, skip_layers=["out"])["fresh"] == ["out/W", "out/b"]
    assert sorted(named_params(old)) == ["h0/W", "h0/b", "h1/W", "h1/b", "out/W", "out/b"]


def test_schedule_meta_keys_and_get_network():
    def get_network(epoch, **_):
        return {"#copy_param_mode": "subset", "out": {"class": "softmax", "n_out": epoch}}

    schedule = NetworkSchedule.from_config(Config({"get_network": get_network}))
    assert schedule.changes_per_epoch and not schedule.is_pretrain_epoch(1)
    layers, meta = split_net_dict(schedule.net_dict_for_epoch(3))
    assert layers == {"out": {"class": "softmax", "n_out": 3}} and schedule.copy_param_mode(meta, 3) == "subset"
    with pytest.raises(ConfigError, match="get_network"):
        NetworkSchedule.from_config(Config({"get_network": lambda epoch: None})).net_dict_for_epoch(1)


def test_get_network_runs_in_graph_mode_as_in_returnn():
    """RETURNN runs config code in graph mode: a get_network that makes an op and runs it in a
    tf.compat.v1.Session (jotix16's training pipeline prints the epoch that way) works; the engine's
    eager mode is back afterwards."""
    import tensorflow as tf
    seen = []

    def get_network(epoch, **_):
        op = tf.constant(epoch) * 2
        with tf.compat.v1.Session() as session:
            seen.append(int(session.run(op)))
        return {"out": {"class": "softmax", "n_out": 2}}

    NetworkSchedule.from_config(Config({"get_network": get_network})).net_dict_for_epoch(4)
    assert seen == [8] and tf.executing_eagerly()


def test_config_overlay_sets_and_restores():
    config = Config({"batch_size": 1000, "max_seqs": 10})
    overlay = ConfigOverlay(config)
    assert overlay.apply({"batch_size": 200, "chunking": "50:25", "learning_rate": 0.1}) == {
        "batch_size": (1000, 200), "chunking": (None, "50:25")}
    assert config.typed_value("batch_size") == 200 and not config.has("learning_rate")
    assert overlay.apply({"batch_size": 200}) == {"chunking": ("50:25", None)}
    assert overlay.apply({}) == {"batch_size": (200, 1000)}
    assert config.typed_dict == {"batch_size": 1000, "max_seqs": 10}


@pytest.mark.parametrize("output_from, hidden_from", [("hidden_1", ["hidden_0"]), (["hidden_1"], "hidden_0"),
                                                      (None, ["hidden_0"])])
def test_from_output_needs_listed_sources_as_returnn(output_from, hidden_from):
    """RETURNN's from_output construction iterates an output layer's ``from`` and that of the layers it
    removes: a string is iterated by character (AssertionError on 'h'), a missing ``from`` of an
    output is a KeyError (checked against RETURNN 1.20261022). Here: one line naming the layer."""
    net = copy.deepcopy(NET)
    net["hidden_1"]["from"] = hidden_from
    if output_from is None:
        del net["output"]["from"]
    else:
        net["output"]["from"] = output_from
    bad = "hidden_1" if isinstance(hidden_from, str) else "output"
    with pytest.raises(ConfigError, match="pretrain: (output )?layer %r has" % bad):
        pretrain_of(net)
    assert pretrain_of(NET).get_train_num_epochs() == 2  # lists: fine


def test_from_input_needs_listed_sources_as_returnn():
    """RETURNN's from_input construction also iterates each kept layer's ``from``: a string (e.g.
    "data") fails there with KeyError 'd' (RETURNN 1.20261022, returnn_fuzz_engine seed 5). Here: one
    line naming the layer; lists build the steps as before."""
    net = copy.deepcopy(NET)
    net["hidden_0"]["from"] = "data"
    with pytest.raises(ConfigError, match="pretrain: layer 'hidden_0' has \"from\": 'data', a string.*from_input"):
        pretrain_of(net, {"construction_algo": "from_input"})
    assert pretrain_of(NET, {"construction_algo": "from_input"}).get_train_num_epochs() >= 2


@pytest.mark.parametrize("reps", [{"default": 2, "final": 1, 0: 3}, {"default": 1, "first": 2}, {5: 2}])
def test_repetitions_dict_refused_where_returnn_fails(reps):
    """RETURNN sorts the dict's items (an int and 'final' do not compare: TypeError) and indexes the steps'
    list with each key (another string, or an index past the steps: an error); found by
    benchmarks/returnn_fuzz_pretrain.py (LAX)."""
    with pytest.raises(ConfigError, match="repetitions"):
        pretrain_of(blstm(3), {"repetitions": reps})


def test_pretrain_keys_read_as_returnn_reads_them():
    """pretrain_repetitions as a string is a list of ints; pretrain_construction_algo is read as a string,
    so a function there fails in RETURNN (it is taken in the pretrain dict only)."""
    assert pretrain_of(blstm(3), pretrain_repetitions="1,2").repetitions == [1, 2, 2]
    assert pretrain_of(blstm(3), pretrain_construction_algo="from_input").construction_algo == "from_input"
    with pytest.raises(ConfigError, match="pretrain_construction_algo"):
        pretrain_of(blstm(3), pretrain_construction_algo=lambda idx, net_dict: None)


def test_constructions_refuse_data_key_sources_as_returnn_fails():
    """from_output shrinks toward input_layers only (a 'data:classes' source of an output: RETURNN asserts);
    from_input follows layers and 'data' only (KeyError on 'data:classes')."""
    net = {"a": {"class": "linear", "n_out": 3, "from": ["data"]},
           "b": {"class": "linear", "n_out": 3, "from": ["a", "data:classes"]},
           "output": {"class": "softmax", "loss": "ce", "from": ["b"]}}
    with pytest.raises(ConfigError, match="from_input.*KeyError"):
        pretrain_of(net, {"construction_algo": "from_input"})
    net2 = dict(net, b={"class": "linear", "n_out": 3, "from": ["a"]},
                output={"class": "softmax", "loss": "ce", "from": ["b", "data:classes"]})
    with pytest.raises(ConfigError, match="from_output"):
        pretrain_of(net2)
    one_char = {"v": {"class": "linear", "n_out": 3, "from": ["data"]},
                "output": {"class": "softmax", "loss": "ce", "from": "v"}}
    with pytest.raises(ConfigError, match="from_output"):  # RETURNN sums the outputs' 'from' lists
        pretrain_of(one_char)


def test_from_input_starts_from_data_not_input_layers():
    """RETURNN's from_input reads 'data' itself, not input_layers (only from_output reads those)."""
    net = blstm(2)
    plain = pretrain_of(net, {"construction_algo": "from_input"})
    other = pretrain_of(net, {"construction_algo": "from_input", "input_layers": ["data", "lstm0_fw"]})
    assert other.get_train_num_epochs() == plain.get_train_num_epochs()
    for e in range(1, plain.get_train_num_epochs() + 1):
        assert other.get_network_json_for_epoch(e) == plain.get_network_json_for_epoch(e)


def test_from_input_string_from_reads_what_it_contains():
    """RETURNN's from_input tests a string 'from' by containment: 'data:classes' reads 'data', so the layer
    joins the first step, whose rewiring then fails (KeyError 'd' there); refused here in one line."""
    net = {"l0": {"class": "linear", "n_out": 3, "from": ["data"]},
           "l2": {"class": "linear", "n_out": 3, "from": "data:classes"},
           "output": {"class": "softmax", "loss": "ce", "from": ["l0"]}}
    with pytest.raises(ConfigError, match="from_input"):
        pretrain_of(net, {"construction_algo": "from_input"})
    # a string 'from' of a layer the first step skips, followed when rewiring the output (KeyError 'l' there)
    net = {"l0": {"class": "constant", "from": [], "trainable": False},
           "l1": {"class": "combine", "kind": "add", "from": ["l0", "data"]},
           "l3": {"class": "copy", "from": "l0"},
           "output": {"class": "softmax", "loss": "ce", "from": ["l1", "l3"]}}
    with pytest.raises(ConfigError, match="'l3'.*from_input"):
        pretrain_of(net, {"construction_algo": "from_input"})
