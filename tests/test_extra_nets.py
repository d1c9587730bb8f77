"""RETURNN's extra nets (``"extra.NAME:layer"``): a layer built again with another flag (``.search``:
for beam search), sharing parameters by name with the main network's layer; RETURNN's tests
test_extra1, test_extra_subnet, test_extra_search in this engine (values against the main layers)."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from returnn.extern_data import data_from_opts
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork
from returnn.tf.returnn_params import returnn_param_shapes, returnn_param_values, set_returnn_param_values


def _run(net, x, names):
    out = net.forward({"data": tf.constant(x), "data:seq_len": tf.constant([x.shape[1]] * len(x))},
                      RunContext(False), only=names)
    return [out[n].tensor.numpy() for n in names]


def test_extra_layer_shares_parameters_and_can_be_given_its_own_dict():
    """RETURNN's test_extra1: extra.2:input has its own dict, extra.3:input is input's again."""
    net = TFNetwork({
        "input": {"class": "linear", "activation": "relu", "n_out": 3, "from": "data"},
        "extra.2:input": {"class": "linear", "activation": None, "n_out": 3, "from": "data"},
        "output1": {"class": "copy", "from": "input", "is_output_layer": True},
        "output2": {"class": "activation", "from": "extra.2:input", "activation": "relu", "is_output_layer": True},
        "output3": {"class": "copy", "from": "extra.3:input", "is_output_layer": True}},
        {"data": data_from_opts("data", {"dim": 2})})
    assert sorted(returnn_param_shapes(net)) == ["input/W", "input/b"]
    x = np.random.RandomState(0).randn(2, 3, 2).astype(np.float32)
    out1, out2, out3 = _run(net, x, ["output1", "output2", "output3"])
    np.testing.assert_allclose(out1, out2, rtol=1e-6)
    np.testing.assert_allclose(out2, out3, rtol=1e-6)


def test_extra_subnetwork():
    """RETURNN's test_extra_subnet: the subnetwork in extra net 3 is the main one again, in extra net 2
    its own dict (its output2 shares the main output2's parameters)."""
    net = TFNetwork({
        "subnet": {"class": "subnetwork", "from": "data:data", "subnetwork": {
            "output": {"class": "linear", "activation": "relu", "n_out": 3, "from": "data"},
            "output2": {"class": "linear", "activation": "relu", "n_out": 3, "from": "data", "is_output_layer": True}}},
        "extra.2:subnet": {"class": "subnetwork", "from": "data:data", "subnetwork": {
            "output": {"class": "copy", "from": "data"},
            "output2": {"class": "linear", "from": "data:data", "activation": None, "n_out": 3,
                        "is_output_layer": True}}},
        "sub1_output1": {"class": "copy", "from": "subnet/output", "is_output_layer": True},
        "sub1_output2": {"class": "copy", "from": "subnet/output2", "is_output_layer": True},
        "sub2_output1": {"class": "copy", "from": "extra.2:subnet/output", "is_output_layer": True},
        "sub2_output2": {"class": "activation", "activation": "relu", "from": "extra.2:subnet/output2",
                         "is_output_layer": True},
        "sub3_output1": {"class": "copy", "from": "extra.3:subnet/output", "is_output_layer": True},
        "sub3_output2": {"class": "copy", "from": "extra.3:subnet/output2", "is_output_layer": True}},
        {"data": data_from_opts("data", {"dim": 3})})
    assert len(returnn_param_shapes(net)) == 4
    x = np.random.RandomState(1).randn(2, 3, 3).astype(np.float32)
    s11, s12, s21, s22, s31, s32 = _run(net, x, ["sub1_output1", "sub1_output2", "sub2_output1", "sub2_output2",
                                                 "sub3_output1", "sub3_output2"])
    np.testing.assert_allclose(s11, s31, rtol=1e-6)
    np.testing.assert_allclose(s12, s32, rtol=1e-6)
    np.testing.assert_allclose(s12, s22, rtol=1e-6)
    np.testing.assert_allclose(s21, x, rtol=1e-6)


def _decoder(search_flag_name=None):
    unit = {
        "emb": {"class": "linear", "n_out": 3, "from": "prev:output"},  # (labels: embedded alone, as RETURNN)
        "prob": {"class": "softmax", "from": ["emb", "base:enc"], "target": "classes", "loss": "ce"},
        "output": {"class": "choice", "initial_output": 0, "from": "prob", "target": "classes", "beam_size": 3},
        "end": {"class": "compare", "from": "output", "value": 0}}
    # no 'target' on the rec layer: searched in training it ends by 'end' as in the search task (with one, RETURNN
    # searches as long as the target there: tests/test_search_train_goldens.py)
    return {"class": "rec", "from": [], "max_seq_len": 6, "unit": unit}


def _extern():
    return {"data": data_from_opts("data", {"dim": 2}), "classes": data_from_opts("classes", {"dim": 5,
                                                                                               "sparse": True})}


def test_extra_search_decoder_shares_the_trained_decoders_parameters():
    """The usual use: a decoder trained with teacher forcing (its loss) and the same decoder searched
    in the same network (extra.search:output, e.g. for a decide layer), one set of parameters. The
    main decoder depends on the searched one here (built after it): sharing works in either order."""
    net = TFNetwork({
        "enc": {"class": "reduce", "mode": "mean", "axes": "T", "from": "data"},
        "decision": {"class": "decide", "from": "extra.search:output", "is_output_layer": True},
        "dummy": {"class": "copy", "from": ["enc"], "extra_deps": ["decision"]},
        "output": _decoder()}, _extern())
    search = TFNetwork({"enc": {"class": "reduce", "mode": "mean", "axes": "T", "from": "data"},
                        "output": _decoder()}, _extern(), search=True)
    assert sorted(returnn_param_shapes(net)) == sorted(returnn_param_shapes(search)) == \
        ["output/rec/emb/W", "output/rec/emb/b", "output/rec/prob/W", "output/rec/prob/b"]
    assert net.layers["extra.search:output"].search and not net.layers["output"].search
    # RETURNN computes the losses of the extra net's layers too (over all hypotheses of the search)
    assert sorted(info.layer for info in net.losses) == ["extra.search:output/prob", "output/prob"]
    set_returnn_param_values(search, returnn_param_values(net))
    x = np.random.RandomState(2).randn(3, 4, 2).astype(np.float32)
    batch = {"data": tf.constant(x), "data:seq_len": tf.constant([4, 4, 4])}
    ours = net.forward(batch, RunContext(False), only=["decision"])["decision"]
    theirs = search.forward(batch, RunContext(False), only=["output"])["output"]
    np.testing.assert_array_equal(ours.seq_len.numpy(), theirs.seq_len.numpy())
    for b, n in enumerate(ours.seq_len.numpy()):
        np.testing.assert_array_equal(ours.tensor.numpy()[b, :n], theirs.tensor.numpy()[b, :n])
