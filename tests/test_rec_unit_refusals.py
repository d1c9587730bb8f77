"""What RETURNN refuses about rec units and their state, refused here too (found by
benchmarks/returnn_fuzz.py --kind rec, seeds 40/41; each refusal checked against RETURNN 1.20261022):
native LSTM units take forget_bias 0 only and only their class's unit_opts, NativeLstm (v1) takes no
initial_state (zeros neither, nor a rec loop's state), LSTMBlock(Fused) and cudnnlstm take no
rec_weight_dropout with an initial state or in a loop (TensorFlow's LSTMCell sizes their state there),
get_last_hidden_state's key must fit the state
(LSTM: '*', 'c', 'h'; one-tensor states: '*' or None), rec_last_output needs need_last."""
import pytest

from helpers import outputs
from returnn.errors import NetworkError
from returnn.tensor import Data
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork
import numpy as np
import tensorflow as tf


def _build_and_run(net_dict):
    net = TFNetwork(outputs(net_dict), {"data": Data("data", shape=(None, 3))})
    batch = {"data": tf.constant(np.ones((2, 4, 3), np.float32)), "data:seq_len": tf.constant([4, 2])}
    return net.forward(batch, RunContext(False))


def _rec(unit, **opts):
    return {"class": "rec", "unit": unit, "n_out": 2, "from": "data", **opts}


@pytest.mark.parametrize("layer, match", [
    (_rec("lstm", unit_opts={"forget_bias": 1.0}), "forget_bias 0 only"),  # NativeLstm2 asserts it
    (_rec("lstmblockfused", unit_opts={"forget_bias": 0.5}), "forget_bias 0 only"),
    (_rec("nativelstm", unit_opts={"rec_weight_dropout": 0.1}), "takes no unit_opts"),
    (_rec("nativelstmlowmem", unit_opts={"forget_bias": 0.0}), "takes no unit_opts"),
    (_rec("vanillalstm", unit_opts={"forget_bias": 0.0}), "takes no unit_opts"),
    (_rec("standardlstm", unit_opts={"rec_weight_dropout": 0.1}), "unknown unit_opts"),  # TF's LSTMCell
    (_rec("basiclstm", unit_opts={"rec_weight_dropout": 0.1}), "unknown unit_opts"),
    (_rec("nativelstm", initial_state="zeros"), "NativeLstm"),
    # RETURNN sizes the state with TensorFlow's LSTMCell (LSTMBlock on TF 2), built with the unit_opts
    (_rec("lstmblock", unit_opts={"rec_weight_dropout": 0.1}, initial_state="zeros"), "no unit_opts 'rec_weight_dropout'"),
    (_rec("cudnnlstm", unit_opts={"rec_weight_dropout": 0.1}, initial_state=0), "no unit_opts 'rec_weight_dropout'"),
    ({"class": "rec", "from": "data", "unit": {
        "s": {"class": "rec", "unit": "lstmblockfused", "n_out": 2, "from": ["data:source", "prev:output"],
              "unit_opts": {"rec_weight_dropout": 0.1}},
        "output": {"class": "copy", "from": "s"}}}, "no unit_opts 'rec_weight_dropout'"),
    (_rec("nativelstm", initial_state=0), "NativeLstm"),
    ({"class": "rec", "from": "data", "unit": {  # in a loop, its state is an initial state to RETURNN
        "s": {"class": "rec", "unit": "nativelstm", "n_out": 2, "from": ["data:source", "prev:output"]},
        "output": {"class": "copy", "from": "s"}}}, "NativeLstm"),
    ({"class": "rec", "from": "data", "unit": {
        "s": {"class": "rec", "unit": "lstm", "n_out": 2, "from": ["data:source", "prev:output"],
              "unit_opts": {"forget_bias": 1.0}},
        "output": {"class": "copy", "from": "s"}}}, "forget_bias 0 only"),
])
def test_rec_unit_options_returnn_refuses(layer, match):
    with pytest.raises(NetworkError, match=match):
        _build_and_run({"output": layer})


@pytest.mark.parametrize("unit, key, n_out", [
    ("gru", "h", 2), ("gru", "c", 2), ("nativelstm2", None, 4), ("nativelstm2", 0, 2), ("nativelstmlowmem", "c", 2),
    ("nativelstmlowmem", "*", 4),  # its state is c alone: size 2
])
def test_get_last_hidden_state_key_must_fit_the_state(unit, key, n_out):
    with pytest.raises(NetworkError):
        _build_and_run({"l": _rec(unit), "output": {"class": "get_last_hidden_state", "from": "l", "n_out": n_out,
                                                    "key": key}})


@pytest.mark.parametrize("unit, key, n_out", [("gru", None, 2), ("gru", "*", 2), ("nativelstmlowmem", None, 2),
                                              ("nativelstm2", "h", 2), ("layernormvariantslstm", "*", 4)])
def test_get_last_hidden_state_keys_returnn_takes(unit, key, n_out):
    out = _build_and_run({"l": _rec(unit), "output": {"class": "get_last_hidden_state", "from": "l",
                                                      "n_out": n_out, "key": key}})
    assert out["output"].tensor.shape == (2, n_out)


def test_rec_last_output_needs_need_last():
    def net(need_last):
        h = {"class": "linear", "activation": "tanh", "n_out": 2, "from": ["data:source", "prev:h"]}
        if need_last:
            h["need_last"] = True
        return {"loop": {"class": "rec", "from": "data", "unit": {"h": h, "output": {"class": "copy", "from": "h"}}},
                "output": {"class": "rec_last_output", "rec_layer": "loop", "sub_layer_name": "h"}}
    with pytest.raises(NetworkError, match="need_last"):
        _build_and_run(net(False))
    assert _build_and_run(net(True))["output"].tensor.shape == (2, 2)


def test_loop_over_a_source_ended_by_its_end_layer_is_refused():
    """A rec loop over a source whose unit has an 'end' sub-layer and nothing that gives its length (no
    size_target, target or target-fed choice): RETURNN's loop runs along a new time axis until 'end' (with
    max_seq_len; without, it asserts), not along the source as this engine did; refused in one line."""
    unit = {"h": {"class": "linear", "n_out": 2, "activation": "tanh", "from": ["data:source", "prev:h"]},
            "end": {"class": "compare", "from": "h", "kind": "greater", "value": 0.5},
            "output": {"class": "copy", "from": "h"}}
    with pytest.raises(NetworkError, match="'output'.*'end' sub-layer runs until 'end'"):
        _build_and_run({"output": {"class": "rec", "from": "data", "unit": unit, "max_seq_len": 5}})


_COUNTER = {"class": "rec", "from": "data", "unit": {"output": {
    "class": "activation", "activation": "identity + 1", "from": "prev:output", "initial_output": 0,
    "out_type": {"dim": 1}}}}


@pytest.mark.parametrize("net, match", [
    # a batch-less loop output (T, 1) with the data's per-sequence lengths: a mask by them needs the batch axis
    # (RETURNN asserts that a mask's sizes have no axes the value lacks: its issue 721)
    ({"loop": _COUNTER, "output": {"class": "reduce", "mode": "sum", "axis": "T", "from": "loop"}}, "cannot be masked"),
    # a cell over prev: alone is batch-less: RETURNN fails on its state too (cannot set batch_dim_axis)
    ({"output": {"class": "rec", "from": "data", "unit": {
        "s": {"class": "rnn_cell", "unit": "BasicLSTM", "n_out": 3, "from": "prev:s"},
        "output": {"class": "copy", "from": "s"}}}}, r"one step must be \(batch, feature\)"),
])
def test_batchless_loop_refusals(net, match):
    """A rec unit that reads nothing with a batch axis is batch-less (RETURNN's (T, F)); what RETURNN cannot build
    of it is refused in one line."""
    with pytest.raises(NetworkError, match=match):
        _build_and_run(net)


def test_end_layer_with_more_than_the_batch_axis_is_refused():
    """RETURNN asserts its loop's 'end' sub-layer has the shape () (one flag per sequence, or one for all): an end
    compared with a length of add_time_axis (B, 1) fails there (checked with RETURNN 1.20261022, returnn_fuzz
    mutate seed 190 #30); it was built here. The same loop with the plain (B,) length builds."""
    def net(add_time_axis):
        return {"n": {"class": "length", "from": "data", "add_time_axis": add_time_axis},
                "output": {"class": "rec", "from": [], "max_seq_len": 4, "unit": {
                    "h": {"class": "linear", "n_out": 2, "activation": "tanh", "from": "prev:h"},
                    "end": {"class": "compare", "kind": "greater_equal", "from": [":i", "base:n"]},
                    "output": {"class": "copy", "from": "h"}}}}
    with pytest.raises(NetworkError, match="'output' \\(rec\\): its 'end' sub-layer must give one flag per sequence"):
        _build_and_run(net(True))
    assert _build_and_run(net(False))["output"].tensor.shape[-1] == 2
