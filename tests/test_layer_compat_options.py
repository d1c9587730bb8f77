"""Options and forms of published configs: a prior as the mean over batch and time, older
batch_norm options, RETURNN's placement/dependency options, a rec loop without choice in search."""
import numpy as np
import pytest
import tensorflow as tf

from helpers import outputs
from returnn.errors import NetworkError
from returnn.tensor import Data
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork


def _batch():
    x = np.random.RandomState(0).randn(2, 4, 3).astype("float32")
    x[1, 2:] = np.nan  # padding
    return {"data": tf.constant(x), "data:seq_len": tf.constant([4, 2])}, x


def test_reduce_over_batch_and_time_is_a_prior_over_real_frames():
    net = TFNetwork(outputs({"prior": {"class": "reduce", "mode": "mean", "axes": "bt", "from": "data"},
                     "sum": {"class": "reduce", "mode": "sum", "axes": ["B", "T"], "from": "data"}}),
                    {"data": Data("data", shape=(None, 3))})
    batch, x = _batch()
    out = net.forward(batch, RunContext(False))
    real = np.concatenate([x[0], x[1, :2]])
    assert out["prior"].data.batch_dim_axis is None and out["prior"].tensor.shape == (3,)
    np.testing.assert_allclose(out["prior"].tensor.numpy(), real.mean(0), rtol=1e-5)
    np.testing.assert_allclose(out["sum"].tensor.numpy(), real.sum(0), rtol=1e-5)
    with pytest.raises(NetworkError, match="needs every dynamic axis reduced"):
        TFNetwork(outputs({"bad": {"class": "reduce", "mode": "mean", "axes": "B", "from": "data"}}),
                  {"data": Data("data", shape=(None, 3))})


def test_older_batch_norm_options_and_accepted_placement_options():
    net = TFNetwork(outputs({"bn": {"class": "batch_norm", "from": "data", "axes": ["f"], "fused": True},
                     "c": {"class": "constant", "value": 1.0, "collocate_with": "data"},
                     "cp": {"class": "copy", "from": "data", "extra_deps": "bn"}}),
                    {"data": Data("data", shape=(None, 3))})
    batch, x = _batch()
    out = net.forward(batch, RunContext(False))
    np.testing.assert_array_equal(out["cp"].tensor.numpy()[0], x[0])
    with pytest.raises(NetworkError, match="only the feature axis"):
        TFNetwork(outputs({"bn": {"class": "batch_norm", "from": "data", "axes": ["t"]}}), {"data": Data("data", shape=(None, 3))})


def test_rec_unit_without_choice_runs_as_a_loop_in_search():
    """A language model's rec layer (no choice) inside a network built for search: the plain loop."""
    unit = {"output": {"class": "linear", "activation": "tanh", "n_out": 3, "from": ["prev:output", "data:source"]}}
    extern = {"data": Data("data", shape=(None, 3))}
    batch, _ = _batch()
    train = TFNetwork(outputs({"lm": {"class": "rec", "from": "data", "unit": unit}}), extern, seed=5)
    search = TFNetwork(outputs({"lm": {"class": "rec", "from": "data", "unit": unit}}), extern, seed=5, search=True)
    a = train.forward(batch, RunContext(False))["lm"].tensor.numpy()
    b = search.forward(batch, RunContext(False))["lm"].tensor.numpy()
    np.testing.assert_allclose(a[0], b[0], rtol=1e-6)
    np.testing.assert_allclose(a[1, :2], b[1, :2], rtol=1e-6)


def test_combine_broadcasts_a_size_one_feature_axis():
    net = TFNetwork(outputs({"one": {"class": "reduce", "mode": "sum", "axes": "F", "keep_dims": True, "from": "data"},
                     "sum": {"class": "combine", "kind": "add", "from": ["data", "one"]}}),
                    {"data": Data("data", shape=(None, 3))})
    batch, x = _batch()
    out = net.forward(batch, RunContext(False))
    assert out["one"].data.dim == 1 and out["sum"].data.dim == 3
    np.testing.assert_allclose(out["sum"].tensor.numpy()[0], x[0] + x[0].sum(-1, keepdims=True), rtol=1e-5)


def test_only_on_search_layers_exist_only_in_search_networks():
    net_dict = {"output": {"class": "softmax", "from": "data", "n_out": 4},
                "decision": {"class": "decide", "from": "output", "only_on_search": True}}
    extern = {"data": Data("data", shape=(None, 3))}
    assert "decision" not in TFNetwork(outputs(net_dict), extern).layers
    assert "decision" in TFNetwork(outputs(net_dict), extern, search=True).layers


def test_positional_encoding_inside_a_loop_uses_the_step_index():
    from returnn.tf.layers.generated import positional_encoding
    unit = {"emb": {"class": "linear", "activation": "tanh", "n_out": 4, "from": ["prev:output", "data:source"]},
            "pos": {"class": "positional_encoding", "add_to_input": True, "from": "emb"},
            "output": {"class": "linear", "activation": "tanh", "n_out": 4, "from": "pos"}}
    net = TFNetwork(outputs({"loop": {"class": "rec", "from": "data", "unit": unit}}), {"data": Data("data", shape=(None, 3))})
    assert "pos" in net.layers["loop"].plan.in_loop
    batch, _ = _batch()
    out = net.forward(batch, RunContext(False))
    emb, pos = out["loop/emb"].tensor.numpy(), out["loop/pos"].tensor.numpy()
    signal = positional_encoding(tf.range(4)[None, :], 4).numpy()[0]  # (T, 4)
    np.testing.assert_allclose(pos[0], emb[0] + signal, rtol=1e-5, atol=1e-6)


def test_squeeze_a_dynamic_axis_of_one_frame_and_other_old_forms(tmp_path):
    net = TFNetwork(outputs({"label": {"class": "squeeze", "axis": "T", "from": "data:speaker"},
                     "bn": {"class": "batch_norm", "from": "data", "fused_bn": True},
                     "l": {"class": "rec", "unit": "nativelstm2", "n_out": 2, "from": "data", "initial_state": "zeros"}}),
                    {"data": Data("data", shape=(None, 3)), "speaker": Data("speaker", dim=5, sparse=True)})
    assert net.layers["label"].output.batch_ndim == 1
    batch, _ = _batch()
    batch.update({"speaker": tf.constant([[3], [1]]), "speaker:seq_len": tf.constant([1, 1])})
    assert net.forward(batch, RunContext(False))["label"].tensor.numpy().tolist() == [3, 1]
    batch.update({"speaker": tf.constant([[3, 2], [1, 0]]), "speaker:seq_len": tf.constant([2, 2])})
    with pytest.raises(tf.errors.InvalidArgumentError, match="must have size 1"):
        net.forward(batch, RunContext(False))
    # keep_over_epoch carries the state over training steps (tests/test_initial_state.py)
    TFNetwork(outputs({"l": {"class": "rec", "unit": "nativelstm2", "n_out": 2, "from": "data",
                             "initial_state": "keep_over_epoch"}}), {"data": Data("data", shape=(None, 3))})


def test_extern_data_entries_in_the_num_outputs_form():
    from returnn.config import Config
    from returnn.extern_data import extern_data_from_config
    config = Config()
    config.typed_dict.update({"extern_data": {"data": (80, 2), "classes": [10, 1], "x": {"dim": 3}}})
    specs = extern_data_from_config(config)
    assert specs["data"].dim == 80 and not specs["data"].sparse
    assert specs["classes"].sparse and specs["classes"].dim == 10 and specs["x"].dim == 3


def test_layers_and_losses_that_need_rasr_are_one_line_naming_the_layer():
    extern = {"data": Data("data", shape=(None, 3)), "classes": Data("classes", shape=(None,), sparse=True, dim=4)}
    # a class older RETURNN had (its demo-tf-neural-transducer.12ax): one line saying so, not the list of known classes
    with pytest.raises(NetworkError, match=r"layer 'output': layer class 'neural_transducer' is not available here: "
                                           r"RETURNN removed it in Sep 2021"):
        TFNetwork(outputs({"output": {"class": "neural_transducer", "loss": "neural_transducer", "n_out": 3,
                                      "from": "data"}}), extern)
    with pytest.raises(NetworkError, match=r"layer 'bw': layer class 'fast_bw' is not available here: .*RASR"):
        TFNetwork(outputs({"bw": {"class": "fast_bw", "from": "data"}}), extern)
    with pytest.raises(NetworkError, match=r"layer 'bw': layer class 'fast_bw' with align_target 'staircase' is not "
                                           r"available here: .*no RASR is needed"):
        TFNetwork(outputs({"bw": {"class": "fast_bw", "from": "data", "align_target": "staircase"}}), extern)
    for loss in ("fast_bw", "sprint"):  # RETURNN's full-sum losses, with their sprint_opts
        net = {"output": {"class": "softmax", "n_out": 4, "from": "data", "loss": loss, "sprint_opts": {"x": 1}}}
        with pytest.raises(NetworkError, match=r"layer 'output': loss %r is not available here: .*RASR" % loss):
            TFNetwork(outputs(net), extern)
    # RETURNN's via_layer loss is the fast_bw layer's own loss (its only source): one line naming both
    net = {"output": {"class": "copy", "from": "data", "loss": "via_layer",
                      "loss_opts": {"error_signal_layer": "bw"}}}
    with pytest.raises(NetworkError, match=r"layer 'output': loss 'via_layer' is not available here: .*fast_bw.*RASR"):
        TFNetwork(outputs(net), extern)


def test_a_loss_layer_without_n_out_infers_it_or_names_the_missing_target():
    extern = {"data": Data("data", shape=(None, 3)), "classes": Data("classes", shape=(None,), sparse=True, dim=4)}
    net = TFNetwork(outputs({"ctc": {"class": "softmax", "from": "data", "loss": "ctc", "target": "classes"},
                     "output": {"class": "softmax", "from": "data", "loss": "ce"}}), extern)
    assert net.layers["ctc"].output.dim == 5 and net.layers["output"].output.dim == 4  # + the CTC blank
    with pytest.raises(NetworkError, match=r"layer 'ctc': its target 'src' is no data key \(known: classes, data\)"):
        TFNetwork(outputs({"ctc": {"class": "softmax", "from": "data", "loss": "ctc", "target": "src"}}), extern)



def test_dot_optional_var_axis_is_an_old_form_refused_with_a_behavior_version():
    """'stag:NAME?' in dot's var1/var2 (an axis used when present) came from RETURNN's 2021 branch
    frithjof-self-attention (Zettelkasten/returnn-self-attention); released RETURNN has no such axis form
    (1.20261022: 'no spatial tag found with name ...?'). Kept without a behavior_version, one line with one."""
    from returnn.config import Config, set_global_config
    net_dict = {"q": {"class": "split_dims", "axis": "F", "dims": (1, 3), "from": "data"},
                "output": {"class": "dot", "from": ["q", "q"], "red1": "static:-1", "red2": "static:-1",
                           "var1": "T?", "var2": "T"}}
    batch, _ = _batch()
    out = TFNetwork(outputs(net_dict), {"data": Data("data", shape=(None, 3))}).forward(batch, RunContext(False))
    assert out["output"].tensor.shape[-2:] == (4, 4)
    set_global_config(Config({"behavior_version": 1}))  # (the suite's fixture restores the global config)
    with pytest.raises(NetworkError, match="'output'.*var1 'T\\?'.*optional axis"):
        TFNetwork(outputs(net_dict), {"data": Data("data", shape=(None, 3))}).forward(batch, RunContext(False))


def test_cum_concat_without_out_spatial_dim_is_an_old_form_refused_with_a_behavior_version():
    """RETURNN's CumConcatLayer requires its dim (new_dim from 2021-08, out_spatial_dim from 2021-11;
    1.20261022: TypeError, missing 'out_spatial_dim'); only the 2021 branch frithjof-self-attention made one
    (Zettelkasten/returnn-self-attention's nets). Kept without a behavior_version, one line with one."""
    from returnn.config import Config, set_global_config
    net_dict = {"output": {"class": "rec", "from": "data", "unit": {
        "acc": {"class": "cum_concat", "from": "data:source"},
        "output": {"class": "reduce", "mode": "sum", "axis": "stag:acc:cum-concat", "from": "acc"}}}}
    batch, x = _batch()
    out = TFNetwork(outputs(net_dict), {"data": Data("data", shape=(None, 3))}).forward(batch, RunContext(False))
    np.testing.assert_allclose(out["output"].tensor.numpy()[0], np.cumsum(x[0], 0), rtol=1e-5)
    set_global_config(Config({"behavior_version": 1}))  # (the suite's fixture restores the global config)
    with pytest.raises(NetworkError, match="'output/acc'.*needs 'out_spatial_dim'"):
        TFNetwork(outputs(net_dict), {"data": Data("data", shape=(None, 3))}).forward(batch, RunContext(False))


def test_initial_output_naming_no_layer_outside_a_loop_is_refused_with_a_behavior_version():
    """RETURNN's LayerBase.transform_config_dict looks a layer's initial_output up as a layer (get_layer) also
    outside rec loops (since 2019-08; ignored there before): 'base:init' at top level is LayerNotFound in
    1.20261022 (returnn_fuzz mutate --train seed 83). Kept without a behavior_version, one line with one; names of
    the net, of a subnetwork (relative, 'base:' one level up) and RETURNN's keywords pass."""
    from returnn.config import Config, set_global_config
    data = {"data": Data("data", shape=(None, 3))}
    bad = {"output": {"class": "copy", "from": "data", "initial_output": "base:init"}}
    TFNetwork(outputs(bad), data)
    set_global_config(Config({"behavior_version": 1}))  # (the suite's fixture restores the global config)
    with pytest.raises(NetworkError, match="'output': 'initial_output' 'base:init' names no layer"):
        TFNetwork(outputs(bad), data)
    with pytest.raises(NetworkError, match="'output': 'initial_output' names unknown data key 'nope'"):
        TFNetwork(outputs({"output": {"class": "copy", "from": "data", "initial_output": "data:nope"}}), data)
    for net in ({"a": {"class": "copy", "from": "data"},
                 "output": {"class": "copy", "from": "data", "initial_output": "a"}},
                {"output": {"class": "copy", "from": "data", "initial_output": "zeros"}},
                {"i": {"class": "copy", "from": "data"}, "output": {"class": "subnetwork", "from": "data", "subnetwork": {
                    "a": {"class": "copy", "from": "data"},
                    "b": {"class": "copy", "from": "data", "initial_output": "a"},
                    "output": {"class": "copy", "from": "b", "initial_output": "base:i"}}}}):
        TFNetwork(outputs(net), data)
