"""Golden values from the real RETURNN (PyPI package ``returnn``, TF backend, graph mode): one small
network per layer family/variant, its inputs, its parameters (set to fixed random values, never
RETURNN's initialisation) and the output RETURNN computes. ``tests/test_returnn_goldens.py`` builds
the same network with this repository's engine, loads the parameters by RETURNN's names and
compares.

Regenerate (from a directory OUTSIDE the repository, so that ``import returnn`` is the PyPI package;
``DISABLE_CUDA=1`` makes RETURNN compile its native LSTM ops for the CPU)::

    cd /tmp && DISABLE_CUDA=1 /work/main/.bench-venv-returnn/bin/python \\
        /work/main/tests/returnn_goldens/make_goldens.py [--only CASE ...] [--list]

Writes ``tests/data/returnn_goldens/<case>.npz`` (``--out DIR`` elsewhere). More cases live in
``cases_<area>.py`` beside this file (``from make_goldens import case, ...``; loaded by ``main``). The output is
deterministic: fixed numpy seeds per case, one TF thread, zip members with a fixed date.

Each ``.npz`` holds
  ``meta``          0-d unicode string, JSON: case, family, network (the net dict exactly as given to
                    RETURNN, after a JSON round trip), extern_data, config (other config keys, e.g.
                    behavior_version), output_layer, train_flag (false), returnn_version, tf_version,
                    params (RETURNN names without ":0", in get_saveable_params_list order, without
                    global_step), param_shapes, out_dims ("B,T,F"-like), time_axis (of "out", or null),
                    dynamic_axes (axes of "out" with per-sequence sizes), input_padding ("garbage"
                    or "zeros", see below), zero_length, notes;
  ``in:KEY``        batch-major padded input of each data key (float32, or int32 class indices), axes
                    as batch, time, then the others in the declared order (RETURNN is fed it
                    transposed to the layout the extern data declares, e.g. time-major);
  ``len:KEY``       int32 (B,) sequence lengths of KEY;
  ``param:NAME``    the value of each parameter;
  ``out``           the output layer's value, batch-major (float32, or the layer's int dtype);
  ``out_len``       int32 (B,) sizes of out's time axis (when it has a dynamic one);
  ``out_size:I``    int32 (B,) sizes of each dynamic axis I of out.

Padding: inputs are padded with large random garbage so that an engine that does not mask fails.
The generator runs each case with two different garbage paddings; when RETURNN's own real frames
differ (RETURNN does not mask there, e.g. ``conv``/``pool`` without ``use_time_mask``), the
case is stored with zero padding (what RETURNN's datasets feed) and ``input_padding: "zeros"``.
Padded positions of ``out`` hold whatever RETURNN left there: compare real positions only.

Left out because RETURNN itself fails on them: ``rec`` unit ``nativelstm2`` with ``unit_opts``
``forget_bias`` (RETURNN: set it via the parameter init), ``rnn_cell`` unit ``NativeLSTM2`` in a
rec unit (AssertionError), ``rec`` unit ``rnn`` (NotImplementedError), ``pool`` mode ``avg`` with
``use_time_mask`` (dtype error in RETURNN's masking).
"""
from __future__ import annotations

import argparse
import io
import json
import os
import sys
import zipfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DEFAULT_OUT = os.path.join(REPO, "tests", "data", "returnn_goldens")
B = 3


def _check_real_returnn():
    """Exits with one line when ``import returnn`` is this repository's package."""
    import returnn
    path = os.path.realpath(getattr(returnn, "__file__", None) or "")
    if not path or path.startswith(os.path.realpath(os.path.join(REPO, "returnn")) + os.sep):
        sys.exit("make_goldens.py: 'import returnn' gives this repository's package (%s), not the PyPI RETURNN; "
                 "run it with the RETURNN venv from a directory outside the repository (see the docstring)" % path)


# --------------------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------------------

CASES = {}

X5 = {"data": {"dim": 5}}
X6 = {"data": {"dim": 6}}
X4 = {"data": {"dim": 4}}
SPARSE7 = {"data": {"dim": 7, "sparse": True}}
X5_CLASSES6 = {"data": {"dim": 5}, "classes": {"dim": 6, "sparse": True, "available_for_inference": True}}
LENS = [7, 4, 1]
LENS_ZERO = [5, 3, 0]
LENS_LONG = [7, 5, 3]


def case(name, family, network, extern=None, config=None, output="output", lens=None, notes=""):
    """Registers a case; ``lens``: {data key: lengths} (default: data [7, 4, 1])."""
    assert name not in CASES, name
    extern = extern or X5
    lens = dict(lens or {})
    for key in extern:
        lens.setdefault(key, LENS)
    CASES[name] = dict(name=name, family=family, network=network, extern=extern, config=config or {},
                       output=output, lens=lens, notes=notes)


def _lin(n, src="data", act=None, bias=True):
    return {"class": "linear", "activation": act, "with_bias": bias, "n_out": n, "from": src}


# --- linear / softmax / activation / combine / copy / dropout
case("linear_tanh", "linear", {"output": _lin(4, act="tanh")})
case("linear_relu_nobias", "linear", {"output": _lin(6, act="relu", bias=False)})
case("linear_identity_zero_len", "linear", {"output": _lin(3)}, lens={"data": LENS_ZERO})
case("linear_sparse_embedding", "linear", {"output": _lin(4, bias=False)}, extern=SPARSE7)
case("linear_sparse_bias_tanh", "linear", {"output": _lin(4, act="tanh")}, extern=SPARSE7)
case("linear_two_sources", "linear", {
    "a": _lin(3, act="tanh"),
    "output": _lin(4, src=["data", "a"], act="sigmoid")})
case("linear_stacked_init_irrelevant", "linear", {
    "a": dict(_lin(6, act="relu"), forward_weights_init="random_normal_initializer(mean=0.0, stddev=0.1)",
              bias_init=1.0),
    "output": dict(_lin(4, src="a"), forward_weights_init="variance_scaling_initializer(scale=0.5)")},
    notes="init options are irrelevant: all parameter values are overwritten")
case("hidden_alias", "linear", {"output": {"class": "hidden", "activation": "tanh", "n_out": 4, "from": "data"}})
case("softmax", "softmax", {"output": {"class": "softmax", "n_out": 4, "from": "data"}})
case("softmax_sparse_input", "softmax", {"output": {"class": "softmax", "n_out": 5, "from": "data"}}, extern=SPARSE7)
for act in ["relu", "tanh", "sigmoid", "elu", "softplus", "log_softmax", "abs", "exp", "swish", "gelu",
            "log_sigmoid", "sin", "square", "relu6", "sqrt", "log"]:
    inner = "abs" if act in ("sqrt", "log") else None
    net = {"output": {"class": "activation", "activation": act, "from": "abs" if inner else "data"}}
    if inner:
        net["abs"] = {"class": "activation", "activation": "abs", "from": "data"}
    case("activation_" + act, "activation", net)
case("activation_chain", "activation", {"output": {"class": "activation", "activation": "tanh+sigmoid", "from": "data"}},
     notes="RETURNN applies '+'-joined activations in order (here tanh, then sigmoid)")
case("combine_add", "combine", {"a": _lin(5, act="tanh"), "output": {"class": "combine", "kind": "add", "from": ["data", "a"]}})
case("combine_mul_activation", "combine", {
    "a": _lin(5), "output": {"class": "combine", "kind": "mul", "activation": "tanh", "from": ["data", "a"]}})
case("combine_sub_broadcast_bf", "combine", {
    "red": {"class": "reduce", "mode": "mean", "axes": "T", "from": "data"},
    "output": {"class": "combine", "kind": "sub", "from": ["data", "red"]}},
    notes="(B,T,F) - (B,F): broadcast over time")
case("combine_add_three", "combine", {
    "a": _lin(5), "b": _lin(5, act="relu"),
    "output": {"class": "combine", "kind": "add", "from": ["data", "a", "b"]}})
case("combine_truediv_maximum", "combine", {
    "a": {"class": "activation", "activation": "exp", "from": "data"},
    "m": {"class": "combine", "kind": "maximum", "from": ["data", "a"]},
    "output": {"class": "combine", "kind": "truediv", "from": ["data", "m"]}})
case("combine_constant_broadcast", "combine", {
    "c": {"class": "constant", "value": 2.5},
    "output": {"class": "combine", "kind": "mul", "from": ["data", "c"]}})
case("copy_concat", "copy", {"a": _lin(3, act="tanh"), "b": _lin(2),
                             "output": {"class": "copy", "from": ["data", "a", "b"]}})
case("dropout_eval", "dropout", {"output": {"class": "dropout", "dropout": 0.5, "from": "data"}},
     notes="eval mode: identity")
case("linear_dropout_eval", "dropout", {"output": dict(_lin(4, act="tanh"), dropout=0.3)})

# --- conv / pool / transposed_conv
CONV_NOTE = "RETURNN conv/pool do not mask padded frames (use_time_mask False): stored with zero padding"
case("conv1d_same", "conv", {"output": {"class": "conv", "filter_size": [3], "padding": "same", "n_out": 4,
                                        "with_bias": True, "from": "data"}}, lens={"data": LENS_LONG})
case("conv1d_valid_relu", "conv", {"output": {"class": "conv", "filter_size": [3], "padding": "valid", "n_out": 4,
                                              "with_bias": True, "activation": "relu", "from": "data"}},
     lens={"data": LENS_LONG})
case("conv1d_strides2_same", "conv", {"output": {"class": "conv", "filter_size": [3], "padding": "same", "n_out": 4,
                                                 "strides": 2, "with_bias": True, "from": "data"}},
     lens={"data": LENS_LONG})
case("conv1d_strides2_valid_nobias", "conv", {"output": {"class": "conv", "filter_size": [2], "padding": "valid",
                                                         "n_out": 3, "strides": 2, "with_bias": False,
                                                         "from": "data"}}, lens={"data": LENS_LONG})
case("conv1d_dilation2_same", "conv", {"output": {"class": "conv", "filter_size": [3], "padding": "same", "n_out": 4,
                                                  "dilation_rate": 2, "with_bias": True, "from": "data"}},
     lens={"data": LENS_LONG})
case("conv1d_default_bias", "conv", {"output": {"class": "conv", "filter_size": [3], "padding": "same", "n_out": 4,
                                                "from": "data"}}, lens={"data": LENS_LONG},
     notes="with_bias not given: RETURNN's default is False before behavior_version 10")
case("conv1d_default_bias_bv12", "conv", {"output": {"class": "conv", "filter_size": [3], "padding": "same",
                                                     "n_out": 4, "from": "data"}},
     config={"behavior_version": 12}, lens={"data": LENS_LONG},
     notes="with_bias not given: RETURNN's default is True from behavior_version 10")
case("conv1d_use_time_mask", "conv", {"output": {"class": "conv", "filter_size": [3], "padding": "same", "n_out": 4,
                                                 "with_bias": True, "use_time_mask": True, "from": "data"}},
     lens={"data": LENS_LONG}, notes="use_time_mask: RETURNN masks padded frames itself")
case("conv2d_split_dims", "conv", {
    "split": {"class": "split_dims", "axis": "F", "dims": [3, 2], "from": "data"},
    "output": {"class": "conv", "filter_size": [3, 2], "padding": "same", "n_out": 4, "with_bias": True,
               "from": "split"}}, extern=X6, lens={"data": LENS_LONG})
case("conv2d_input_split_feature_dim", "conv", {
    "output": {"class": "conv", "filter_size": [3, 3], "padding": "valid", "n_out": 3, "with_bias": True,
               "input_split_feature_dim": 2, "activation": "tanh", "from": "data"}}, extern=X6,
     lens={"data": LENS_LONG})
case("conv2d_input_add_feature_dim", "conv", {
    "output": {"class": "conv", "filter_size": [3, 2], "padding": "same", "n_out": 3, "with_bias": True,
               "input_add_feature_dim": True, "strides": [1, 2], "from": "data"}}, extern=X4,
     lens={"data": LENS_LONG})
case("pool1d_max_same", "pool", {"output": {"class": "pool", "mode": "max", "pool_size": [2], "padding": "same",
                                            "from": "data"}}, lens={"data": LENS_LONG})
case("pool1d_avg_valid", "pool", {"output": {"class": "pool", "mode": "avg", "pool_size": [3], "padding": "valid",
                                             "strides": [1], "from": "data"}}, lens={"data": LENS_LONG})
case("pool1d_max_stride3", "pool", {"output": {"class": "pool", "mode": "max", "pool_size": [3], "padding": "same",
                                               "strides": [3], "from": "data"}}, lens={"data": LENS_LONG})
case("pool2d_after_split", "pool", {
    "split": {"class": "split_dims", "axis": "F", "dims": [3, 2], "from": "data"},
    "output": {"class": "pool", "mode": "max", "pool_size": [2, 1], "padding": "same", "from": "split"}},
    extern=X6, lens={"data": LENS_LONG})
case("transposed_conv_s2", "transposed_conv", {
    "output": {"class": "transposed_conv", "filter_size": [3], "strides": [2], "n_out": 4, "from": "data"}},
    lens={"data": LENS_LONG})
case("transposed_conv_valid_nobias", "transposed_conv", {
    "output": {"class": "transposed_conv", "filter_size": [2], "strides": [2], "padding": "valid", "n_out": 3,
               "with_bias": False, "activation": "tanh", "from": "data"}}, lens={"data": LENS_LONG})

# --- rec (LSTM units), rnn_cell
for unit in ["nativelstm2", "lstm", "standardlstm", "basiclstm", "lstmblock", "lstmblockfused", "nativelstm",
             "cudnnlstm", "layernormvariantslstm", "gru", "basicrnn", "zoneoutlstm"]:
    case("rec_" + unit, "rec_lstm" if "lstm" in unit else "rec_" + unit,
         {"output": {"class": "rec", "unit": unit, "n_out": 4, "from": "data"}})
case("rec_nativelstm2_backward", "rec_lstm", {"output": {"class": "rec", "unit": "nativelstm2", "n_out": 4,
                                                         "direction": -1, "from": "data"}})
case("rec_standardlstm_backward", "rec_lstm", {"output": {"class": "rec", "unit": "standardlstm", "n_out": 3,
                                                          "direction": -1, "from": "data"}})
# (RETURNN's native LSTM units refuse unit_opts forget_bias: "should be done via right param init")
case("rec_basiclstm_forget_bias", "rec_lstm", {"output": {"class": "rec", "unit": "basiclstm", "n_out": 4,
                                                          "unit_opts": {"forget_bias": 1.5}, "from": "data"}})
case("rec_standardlstm_forget_bias0", "rec_lstm", {"output": {"class": "rec", "unit": "standardlstm", "n_out": 4,
                                                              "unit_opts": {"forget_bias": 0.0}, "from": "data"}})
case("rec_nativelstm2_zero_len", "rec_lstm", {"output": {"class": "rec", "unit": "nativelstm2", "n_out": 4,
                                                         "from": "data"}}, lens={"data": LENS_ZERO})
case("rec_nativelstm2_sparse", "rec_lstm", {"output": {"class": "rec", "unit": "nativelstm2", "n_out": 4,
                                                       "from": "data"}}, extern=SPARSE7)
case("rec_bilstm_two_layers", "rec_lstm", {
    "fw1": {"class": "rec", "unit": "nativelstm2", "n_out": 3, "direction": 1, "from": "data"},
    "bw1": {"class": "rec", "unit": "nativelstm2", "n_out": 3, "direction": -1, "from": "data"},
    "fw2": {"class": "rec", "unit": "nativelstm2", "n_out": 3, "direction": 1, "from": ["fw1", "bw1"]},
    "bw2": {"class": "rec", "unit": "nativelstm2", "n_out": 3, "direction": -1, "from": ["fw1", "bw1"]},
    "output": {"class": "copy", "from": ["fw2", "bw2"]}})
# (rnn_cell unit NativeLSTM2 fails in RETURNN with an AssertionError; rec unit "rnn": NotImplementedError)
for cell in ["LSTMBlock", "GRU", "BasicLSTM", "BasicRNN", "StandardLSTM", "LSTMBlockFused"]:
    case("rnn_cell_" + cell.lower(), "rnn_cell",
         {"output": {"class": "rec", "from": "data", "unit": {
             "cell": {"class": "rnn_cell", "unit": cell, "n_out": 4, "from": "data:source"},
             "output": {"class": "copy", "from": "cell"}}}},
         notes="rnn_cell inside a rec unit (one step per frame)")
case("rnn_cell_outside_loop", "rnn_cell",
     {"output": {"class": "rnn_cell", "unit": "LSTMBlock", "n_out": 4, "from": "data"}},
     notes="rnn_cell used directly on a sequence")

# --- rec with a dict unit
case("rec_unit_prev_teacher_forced", "rec_subnet", {
    "output": {"class": "rec", "from": "data:classes", "unit": {
        "embed": {"class": "linear", "activation": None, "with_bias": False, "from": "data:source", "n_out": 4},
        "h": {"class": "linear", "activation": "tanh", "from": ["prev:embed", "prev:h"], "n_out": 5},
        "s": {"class": "rnn_cell", "unit": "LSTMBlock", "from": ["h", "prev:output"], "n_out": 5},
        "output": {"class": "softmax", "from": ["s", "h"], "n_out": 6}}}},
    extern={"classes": X5_CLASSES6["classes"]}, lens={"classes": [5, 3, 2]},
    notes="loop over the classes frames (no 'data' key); data:source and prev: references")
case("rec_unit_choice_teacher_forced", "rec_subnet", {
    "enc": {"class": "linear", "activation": "tanh", "n_out": 4, "from": "data"},
    "enc_last": {"class": "reduce", "mode": "mean", "axes": "T", "from": "enc"},
    "dec": {"class": "rec", "from": [], "target": "classes", "unit": {
        "embed": {"class": "linear", "activation": None, "with_bias": False, "from": "prev:output", "n_out": 4},
        "s": {"class": "rnn_cell", "unit": "LSTMBlock", "from": ["prev:embed", "base:enc_last"], "n_out": 5},
        "prob": {"class": "softmax", "from": ["s"], "target": "classes", "n_out": 6, "is_output_layer": True},
        "output": {"class": "choice", "from": "prob", "target": "classes", "beam_size": 3, "initial_output": 0}}},
    "output": {"class": "copy", "from": "dec/prob"}},
    extern=X5_CLASSES6, lens={"data": LENS, "classes": [5, 3, 2]},
    notes="choice layer in teacher forcing (no search): the labels are the targets; compares dec/prob")
ATT_UNIT = {
    "output": {"class": "choice", "target": "classes", "beam_size": 3, "from": "output_prob", "initial_output": 0},
    "end": {"class": "compare", "from": "output", "value": 0},
    "target_embed": {"class": "linear", "activation": None, "with_bias": False, "from": "output", "n_out": 4,
                     "initial_output": 0},
    "s": {"class": "rnn_cell", "unit": "LSTMBlock", "from": ["prev:target_embed", "prev:att"], "n_out": 5},
    "readout_in": {"class": "linear", "from": ["s", "prev:target_embed", "att"], "activation": None, "n_out": 6},
    "readout": {"class": "reduce_out", "mode": "max", "num_pieces": 2, "from": "readout_in"},
    "output_prob": {"class": "softmax", "from": "readout", "target": "classes", "n_out": 6, "is_output_layer": True},
}
MLP_ATT = {
    "s_transformed": {"class": "linear", "activation": None, "with_bias": False, "from": "s", "n_out": 6},
    "energy_in": {"class": "combine", "kind": "add", "from": ["base:enc_ctx", "s_transformed"]},
    "energy_tanh": {"class": "activation", "activation": "tanh", "from": "energy_in"},
    "energy": {"class": "linear", "activation": None, "with_bias": False, "from": "energy_tanh", "n_out": 1},
    "att_weights": {"class": "softmax_over_spatial", "from": "energy"},
    "att": {"class": "generic_attention", "weights": "att_weights", "base": "base:encoder"},
}
DOT_ATT = {
    "s_transformed": {"class": "linear", "activation": None, "with_bias": False, "from": "s", "n_out": 6},
    "att": {"class": "dot_attention", "from": "s_transformed", "base": "base:encoder", "base_ctx": "base:enc_ctx"},
}
for kind, att in [("mlp", MLP_ATT), ("dot", DOT_ATT)]:
    case("rec_attention_%s" % kind, "rec_attention", {
        "encoder": {"class": "rec", "unit": "nativelstm2", "n_out": 5, "from": "data"},
        "enc_ctx": {"class": "linear", "activation": None, "with_bias": True, "from": "encoder", "n_out": 6},
        "dec": {"class": "rec", "from": [], "target": "classes", "unit": dict(ATT_UNIT, **att)},
        "output": {"class": "copy", "from": "dec/output_prob"}},
        extern=X5_CLASSES6, lens={"data": LENS, "classes": [4, 3, 2]},
        notes="RETURNN's demo-tf-enc-dec style decoder, teacher forced; compares dec/output_prob")

# --- normalisation
case("layer_norm", "layer_norm", {"output": {"class": "layer_norm", "from": "data"}})
case("layer_norm_after_linear", "layer_norm", {"a": _lin(4, act="relu"),
                                               "output": {"class": "layer_norm", "epsilon": 0.01, "from": "a"}})
case("batch_norm_default_bv", "batch_norm", {"output": {"class": "batch_norm", "from": "data"}},
     notes="behavior_version 0: momentum 0.99, moving stats updated in eval too and used at once (the output "
           "depends on this batch's statistics over real frames); param_version 0 names, (1, 1, F) shapes")
case("batch_norm_bv12", "batch_norm", {"output": {"class": "batch_norm", "masked_time": True, "from": "data"}},
     config={"behavior_version": 12}, notes="behavior_version 12: eval uses the moving stats only; v2_ names, (F,)")
case("batch_norm_bv12_no_shift", "batch_norm", {"output": {"class": "batch_norm", "masked_time": True,
                                                           "use_shift": False, "epsilon": 0.01, "from": "data"}},
     config={"behavior_version": 12})
case("batch_norm_param_version1", "batch_norm", {"output": {"class": "batch_norm", "param_version": 1,
                                                            "update_sample_only_in_training": True,
                                                            "delay_sample_update": True, "from": "data"}})
case("norm_feature", "norm", {"output": {"class": "norm", "axes": "F", "from": "data"}})
case("math_norm_l2", "math_norm", {"output": {"class": "math_norm", "p": 2, "axes": "F", "from": "data"}})

# --- attention-style layers
case("self_attention_2heads", "self_attention", {
    "output": {"class": "self_attention", "num_heads": 2, "total_key_dim": 4, "n_out": 6, "from": "data"}})
case("self_attention_left_only", "self_attention", {
    "output": {"class": "self_attention", "num_heads": 2, "total_key_dim": 4, "n_out": 6,
               "attention_left_only": True, "from": "data"}})
case("self_attention_zero_len", "self_attention", {
    "output": {"class": "self_attention", "num_heads": 2, "total_key_dim": 4, "n_out": 4, "from": "data"}},
    lens={"data": LENS_ZERO})
case("transformer_block", "self_attention", {
    "ln": {"class": "layer_norm", "from": "data"},
    "att": {"class": "self_attention", "num_heads": 2, "total_key_dim": 6, "n_out": 6, "from": "ln"},
    "att_lin": _lin(5, src="att", bias=False),
    "res": {"class": "combine", "kind": "add", "from": ["data", "att_lin"]},
    "ff_ln": {"class": "layer_norm", "from": "res"},
    "ff1": _lin(8, src="ff_ln", act="relu"),
    "ff2": _lin(5, src="ff1"),
    "output": {"class": "combine", "kind": "add", "from": ["res", "ff2"]}})
case("relative_positional_encoding", "self_attention", {
    "rel": {"class": "relative_positional_encoding", "n_out": 2, "clipping": 3, "from": "data"},
    "output": {"class": "self_attention", "num_heads": 2, "total_key_dim": 4, "n_out": 4,
               "key_shift": "rel", "from": "data"}})
case("dot_feature_feature", "dot", {
    "a": _lin(4), "b": _lin(4, act="tanh"),
    "output": {"class": "dot", "red1": "F", "red2": "F", "var1": None, "var2": None, "from": ["a", "b"]}},
    notes="per frame scalar product")
case("dot_time_reduce", "dot", {
    "a": _lin(3), "output": {"class": "dot", "red1": "T", "red2": "T", "var1": "F", "var2": "F",
                             "from": ["data", "a"]}},
    notes="sum over (real) time frames: B,F1,F2")
case("gating_split", "gating", {"output": {"class": "gating", "activation": "tanh", "from": "data"}}, extern=X6)
case("gating_two_sources", "gating", {"a": _lin(5), "output": {"class": "gating", "activation": "identity",
                                                               "from": ["data", "a"]}})
case("softmax_over_spatial", "attention", {
    "e": _lin(1), "output": {"class": "softmax_over_spatial", "from": "e"}})
case("generic_attention_outer", "attention", {
    "e": _lin(1), "w": {"class": "softmax_over_spatial", "from": "e"},
    "output": {"class": "generic_attention", "weights": "w", "base": "data"}},
    notes="weights (B,T,1) over the base's time: (B,F)")
case("positional_encoding_add", "positional_encoding", {
    "output": {"class": "positional_encoding", "add_to_input": True, "from": "data"}}, extern=X6)
case("positional_encoding_n_out", "positional_encoding", {
    "output": {"class": "positional_encoding", "n_out": 5, "from": "data"}})

# --- reductions
for mode in ["mean", "max", "sum", "min"]:
    case("reduce_%s_time" % mode, "reduce", {"output": {"class": "reduce", "mode": mode, "axes": "T", "from": "data"}})
case("reduce_mean_feature", "reduce", {"output": {"class": "reduce", "mode": "mean", "axes": "F", "from": "data"}})
case("reduce_max_time_keep_dims", "reduce", {"output": {"class": "reduce", "mode": "max", "axis": "T",
                                                        "keep_dims": True, "from": "data"}})
case("reduce_logsumexp_time", "reduce", {"output": {"class": "reduce", "mode": "logsumexp", "axes": "T",
                                                    "from": "data"}})
case("reduce_out_max", "reduce_out", {"output": {"class": "reduce_out", "mode": "max", "num_pieces": 2,
                                                 "from": "data"}}, extern=X6)
case("reduce_out_sum", "reduce_out", {"output": {"class": "reduce_out", "mode": "sum", "num_pieces": 3,
                                                 "from": "data"}}, extern=X6)

# --- shapes, slicing
case("split_dims_feature", "split_dims", {"output": {"class": "split_dims", "axis": "F", "dims": [3, 2],
                                                     "from": "data"}}, extern=X6)
case("split_merge_dims", "merge_dims", {
    "split": {"class": "split_dims", "axis": "F", "dims": [2, 3], "from": "data"},
    "tr": _lin(4, src="split", act="tanh"),
    "output": {"class": "merge_dims", "axes": "static", "from": "tr"}}, extern=X6)
case("slice_feature", "slice", {"output": {"class": "slice", "axis": "F", "slice_start": 1, "slice_end": 4,
                                           "from": "data"}})
case("slice_feature_step", "slice", {"output": {"class": "slice", "axis": "F", "slice_step": 2, "from": "data"}})
case("slice_time", "slice", {"output": {"class": "slice", "axis": "T", "slice_start": 1, "from": "data"}},
     lens={"data": LENS_LONG})
case("pad_time", "pad", {"output": {"class": "pad", "axes": "T", "padding": [1, 2], "from": "data"}})
case("pad_feature_value", "pad", {"output": {"class": "pad", "axes": "F", "padding": [2, 1], "value": 1.5,
                                             "from": "data"}})
case("window_time", "window", {"output": {"class": "window", "window_size": 3, "from": "data"}})
case("window_left_right", "window", {"output": {"class": "window", "window_size": 3, "window_left": 2, "window_right": 0,
                                                "from": "data"}})
case("window_valid_stride", "window", {"output": {"class": "window", "window_size": 2, "padding": "valid",
                                                  "stride": 2, "from": "data"}}, lens={"data": LENS_LONG})
case("gather_feature", "gather", {"output": {"class": "gather", "position": 2, "axis": "F", "from": "data"}})
case("gather_time_by_layer", "gather", {
    "pos": {"class": "constant", "value": 0},
    "output": {"class": "gather", "position": "pos", "axis": "T", "from": "data"}})
case("expand_squeeze", "shape", {
    "e": {"class": "expand_dims", "axis": "spatial", "from": "data"},
    "output": {"class": "squeeze", "axis": "spatial:-1", "from": "e"}})
case("swap_axes", "shape", {"output": {"class": "swap_axes", "axis1": "T", "axis2": "F", "from": "data"}})
case("cumsum_time", "cumsum", {"output": {"class": "cumsum", "axis": "T", "from": "data"}})
case("shift_axis_time", "shift_axis", {"output": {"class": "shift_axis", "axis": "T", "amount": 1, "from": "data"}})
case("seq_len_mask", "seq_len_mask", {"output": {"class": "seq_len_mask", "mask_value": -3.0, "from": "data"}})
case("split_and_combine", "split", {
    "sp": {"class": "split", "axis": "F", "size_splits": [2, 3], "from": "data"},
    "a": _lin(4, src="sp/0"), "b": _lin(4, src="sp/1", act="tanh"),
    "output": {"class": "combine", "kind": "mul", "from": ["a", "b"]}})
case("stack_two", "stack", {"a": _lin(5), "output": {"class": "stack", "from": ["data", "a"]}})
case("repeat_time", "repeat", {"output": {"class": "repeat", "repetitions": 2, "axis": "T", "from": "data"}})
case("prefix_in_time", "time_edit", {"output": {"class": "prefix_in_time", "prefix": 0.5, "from": "data"}})
case("postfix_in_time", "time_edit", {"output": {"class": "postfix_in_time", "postfix": -1.0, "from": "data"}})
case("get_last_hidden_state", "time_edit", {"a": {"class": "rec", "unit": "nativelstm2", "n_out": 3, "from": "data"},
                                            "output": {"class": "get_last_hidden_state", "from": "a", "n_out": 6}})
case("compare_switch", "control", {
    "a": _lin(5),
    "cmp": {"class": "compare", "kind": "greater", "from": ["data", "a"]},
    "output": {"class": "switch", "condition": "cmp", "true_from": "data", "false_from": "a"}})
case("constant_range_length", "generated", {
    "len": {"class": "length", "from": "data"},
    "lenf": {"class": "cast", "dtype": "float32", "from": "len"},
    "rng": {"class": "range_in_axis", "axis": "T", "from": "data"},
    "rngf": {"class": "cast", "dtype": "float32", "from": "rng"},
    "a": {"class": "combine", "kind": "add", "from": ["data", "rngf"]},
    "output": {"class": "combine", "kind": "mul", "from": ["a", "lenf"]}})
case("variable_add", "variable", {"v": {"class": "variable", "shape": [5]},
                                  "output": {"class": "combine", "kind": "add", "from": ["data", "v"]}})
case("eval_expr", "eval", {"output": {"class": "eval", "eval": "tf.tanh(source(0)) * 2.0 + 1.0", "from": "data"}})
case("time_chunking_roundtrip", "time_chunking", {
    "ch": {"class": "time_chunking", "chunk_size": 3, "chunk_step": 3, "from": "data"},
    "a": {"class": "rec", "unit": "nativelstm2", "n_out": 3, "from": "ch"},
    "output": {"class": "time_unchunking", "chunking_layer": "ch", "from": "a"}}, lens={"data": LENS_LONG})

# --- more variants: masking options, shared and nested parameters, common model patterns
case("pool1d_max_same_time_mask", "pool", {"output": {"class": "pool", "mode": "max", "pool_size": [2],
                                                      "padding": "same", "use_time_mask": True, "from": "data"}},
     lens={"data": LENS_LONG})
# (pool mode "avg" with use_time_mask: RETURNN fails with a dtype error in its SelectV2 op)
case("blstm_pool_reduction", "rec_lstm", {
    "fw": {"class": "rec", "unit": "nativelstm2", "n_out": 3, "direction": 1, "from": "data"},
    "bw": {"class": "rec", "unit": "nativelstm2", "n_out": 3, "direction": -1, "from": "data"},
    "pool": {"class": "pool", "mode": "max", "pool_size": [2], "padding": "same", "from": ["fw", "bw"]},
    "output": {"class": "rec", "unit": "nativelstm2", "n_out": 4, "from": "pool"}},
    notes="RETURNN's ASR pattern: BLSTM, max-pool time reduction, LSTM")
case("conv1d_groups_depthwise", "conv", {"output": {"class": "conv", "filter_size": [3], "padding": "same",
                                                    "n_out": 4, "groups": 4, "with_bias": True, "from": "data"}},
     extern=X4, lens={"data": LENS_LONG})
case("batch_norm_default_bv_unmasked", "batch_norm", {"output": {"class": "batch_norm", "masked_time": False,
                                                                 "from": "data"}},
     notes="masked_time False: batch statistics include the padded positions")
case("rec_layernormvariantslstm_opts", "rec_lstm", {
    "output": {"class": "rec", "unit": "layernormvariantslstm", "n_out": 4, "from": "data",
               "unit_opts": {"global_norm": False, "per_gate_norm": True, "hidden_norm": True, "cell_norm_in_output": False,
                             "forget_bias": 1.0, "norm_shift": 0.1, "norm_gain": 0.9}}})
for bv in (0, 17):
    case("rnn_cell_zoneoutlstm_bv%i" % bv, "rnn_cell", {
        "output": {"class": "rec", "from": "data", "unit": {
            "cell": {"class": "rnn_cell", "unit": "ZoneoutLSTM", "n_out": 4, "from": "data:source",
                     "unit_opts": {"zoneout_factor_cell": 0.3, "zoneout_factor_output": 0.2}},
            "output": {"class": "copy", "from": "cell"}}}},
        config={"behavior_version": bv} if bv else None,
        notes="eval mode: zoneout mixes the new and old state by its factors; output zoned-out h from "
              "behavior_version 17")
case("rnn_cell_gru_outside_loop", "rnn_cell",
     {"output": {"class": "rnn_cell", "unit": "GRU", "n_out": 3, "from": "data"}})
case("rec_rhn", "rec_rhn", {"output": {"class": "rec", "unit": "rhn", "n_out": 4, "from": "data"}})
case("rec_vanillalstm", "rec_lstm", {"output": {"class": "rec", "unit": "vanillalstm", "n_out": 4, "from": "data"}})
case("rec_rhn_depth2_backward", "rec_rhn", {
    "output": {"class": "rec", "unit": "rhn", "n_out": 3, "direction": -1, "from": "data",
               "unit_opts": {"depth": 2, "transform_bias": -2.0, "dropout": 0.3}}},
     notes="eval mode: no dropout")
case("rec_gru_backward", "rec_gru", {"output": {"class": "rec", "unit": "gru", "n_out": 3, "direction": -1,
                                                "from": "data"}})
case("rnn_cell_rhn", "rnn_cell", {
    "output": {"class": "rec", "from": "data", "unit": {
        "cell": {"class": "rnn_cell", "unit": "RHN", "n_out": 4, "from": "data:source", "unit_opts": {"depth": 3}},
        "output": {"class": "copy", "from": "cell"}}}},
     notes="rnn_cell inside a rec unit (one step per frame)")
case("self_attention_in_rec_loop", "self_attention", {
    "output": {"class": "rec", "from": "data", "unit": {
        "h": {"class": "linear", "activation": "tanh", "from": ["data:source", "prev:h"], "n_out": 4},
        "att": {"class": "self_attention", "num_heads": 2, "total_key_dim": 4, "n_out": 4,
                "attention_left_only": True, "from": "h"},
        "output": {"class": "combine", "kind": "add", "from": ["h", "att"]}}}},
    notes="self_attention inside the loop: keys/values accumulated per step")
case("subnetwork", "subnetwork", {
    "sub": {"class": "subnetwork", "from": "data", "subnetwork": {
        "a": _lin(4, act="relu"), "b": _lin(4, src=["data", "a"]),
        "output": {"class": "combine", "kind": "add", "from": ["a", "b"]}}},
    "output": _lin(3, src="sub", act="tanh")})
case("reuse_params_linear", "reuse_params", {
    "a": _lin(5, act="tanh"),
    "b": dict(_lin(5, src="a", act="tanh"), reuse_params="a"),
    "output": {"class": "combine", "kind": "add", "from": ["a", "b"]}},
    notes="b shares a's W and b: one set of parameters")
case("cumsum_time_reverse", "cumsum", {"output": {"class": "cumsum", "axis": "T", "reverse": True, "from": "data"}})
case("scaled_grad_identity", "control", {"output": {"class": "scaled_grad", "scale": -0.5, "from": "data"}})
case("tile_feature", "tile", {"output": {"class": "tile", "multiples": {"F": 2}, "from": "data"}})
case("reinterpret_data_identity", "shape", {"a": _lin(4), "output": {"class": "reinterpret_data",
                                                                     "enforce_batch_major": True, "from": "a"}})
case("transposed_conv_remove_padding", "transposed_conv", {
    "output": {"class": "transposed_conv", "filter_size": [4], "strides": [2], "padding": "valid",
               "remove_padding": 1, "n_out": 3, "from": "data"}}, lens={"data": LENS_LONG})


def _load_more_cases():
    """Cases of other layer families live in ``cases_*.py`` beside this file: each imports
    ``case`` (and helpers) from this module and registers its cases when imported."""
    import importlib.util
    here = os.path.dirname(os.path.abspath(__file__))
    sys.modules.setdefault("make_goldens", sys.modules[__name__])
    for fn in sorted(os.listdir(here)):
        if fn.startswith("cases_") and fn.endswith(".py"):
            spec = importlib.util.spec_from_file_location(fn[:-3], os.path.join(here, fn))
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)


# --------------------------------------------------------------------------------------------------
# Running one case in RETURNN
# --------------------------------------------------------------------------------------------------

def _seed(name, salt):
    return zlib.crc32(("%s/%s" % (name, salt)).encode()) & 0x7FFFFFFF


def _inputs(c, extern, padding):
    """{key: (array, lens)}; padding: 'garbage:N' (random large values) or 'zeros'."""
    import numpy as np
    out = {}
    for i, key in enumerate(sorted(c["extern"])):
        data = extern.data[key]
        lens = np.array(c["lens"][key], np.int32)
        t = int(lens.max())
        order = _batch_array_axes(data)
        shape = [B] + [t if s is None else s for s in (data.batch_shape[i] for i in order[1:])]
        rng = np.random.RandomState(_seed(c["name"], "in:%s" % key))
        if data.sparse:
            real = rng.randint(0, data.dim, size=shape).astype(np.int32)
        else:
            real = rng.normal(size=shape).astype(np.float32)
        if padding == "zeros":
            pad = np.zeros_like(real)
        else:
            prng = np.random.RandomState(_seed(c["name"], "pad:%s:%s" % (key, padding)))
            if data.sparse:
                pad = prng.randint(0, data.dim, size=shape).astype(np.int32)
            else:
                pad = (prng.uniform(200.0, 1000.0, size=shape) * prng.choice([-1.0, 1.0], size=shape)).astype(np.float32)
        mask = np.arange(t)[None, :] < lens[:, None]
        mask = mask.reshape(mask.shape + (1,) * (len(shape) - 2))
        out[key] = (np.where(mask, real, pad).astype(real.dtype), lens)
    return out


def _batch_array_axes(data):
    """The axes of ``data`` in the order the batch arrays ``in:KEY`` hold them (the engine's batch
    format, returnn/extern_data.py batch_array_axes): batch, time, then the others as declared;
    RETURNN is fed the array transposed to the declared layout."""
    b, t = data.batch_dim_axis, data.time_dim_axis
    assert b is not None, "golden inputs need a batch axis"
    if t is None:
        assert b == 0, "golden inputs without a time axis must be batch-major"
        return list(range(data.batch_ndim))
    return [b, t] + [i for i in range(data.batch_ndim) if i not in (b, t)]


def _dims_desc(data):
    parts = []
    for i, tag in enumerate(data.dim_tags):
        if i == data.batch_dim_axis:
            parts.append("B")
        elif i == data.time_dim_axis:
            parts.append("T")
        elif i == data.feature_dim_axis:
            parts.append("F" if tag.dimension is not None else "F?")
        else:
            parts.append("S(%s)" % (tag.dimension if tag.dimension is not None else "dyn"))
    return ",".join(parts)


def _real_mask(out, sizes):
    import numpy as np
    mask = np.ones(out.shape, bool)
    for axis, size in sizes.items():
        shape = [1] * out.ndim
        shape[0], shape[axis] = out.shape[0], out.shape[axis]
        m = np.arange(out.shape[axis])[None, :] < size[:, None]
        mask &= m.reshape(shape)
    return mask


def run_case(c):
    """Builds ``c`` in RETURNN, sets its parameters, runs it; returns the npz dict."""
    import numpy as np
    import tensorflow as tf
    import returnn
    from returnn.config import Config, set_global_config
    from returnn.tf.network import TFNetwork
    from returnn.util import BehaviorVersion

    network = json.loads(json.dumps(c["network"]))
    extern_data = json.loads(json.dumps(c["extern"]))
    config = Config(dict(extern_data=extern_data, **c["config"]))
    set_global_config(config)
    BehaviorVersion._behavior_version = c["config"].get("behavior_version")
    with tf.compat.v1.Graph().as_default() as graph:
        tf.compat.v1.set_random_seed(1)
        net = TFNetwork(config=config, train_flag=False)
        net.construct_from_dict(network)
        params = [p for p in net.get_saveable_params_list() if p.name.split(":")[0] != "global_step"]
        layer = net.get_layer(c["output"])
        out = layer.output.copy_as_batch_major()
        fetch = {"out": out.placeholder}
        dyn_axes = [i for i, tag in enumerate(out.dim_tags) if i != out.batch_dim_axis and tag.dimension is None]
        for i in dyn_axes:
            size = out.get_dynamic_size(i)
            fetch["size%i" % i] = size
        rng = np.random.RandomState(_seed(c["name"], "params"))
        values = {}
        for p in params:
            name = p.name.split(":")[0]
            shape = p.shape.as_list()
            v = rng.normal(size=shape) * 0.5
            if name.endswith("variance"):
                v = np.abs(v) + 0.5
            values[name] = v.astype(p.dtype.base_dtype.as_numpy_dtype)
        sess_cfg = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1,
                                            device_count={"GPU": 0})
        with tf.compat.v1.Session(graph=graph, config=sess_cfg) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())

            def run(padding):
                for p in params:  # again before each run: batch_norm may update its statistics in eval
                    p.load(values[p.name.split(":")[0]], sess)
                feeds = _inputs(c, net.extern_data, padding)
                feed_dict = {}
                for key, (arr, lens) in feeds.items():
                    data = net.extern_data.data[key]
                    order = _batch_array_axes(data)
                    feed_dict[data.placeholder] = arr.transpose([order.index(i) for i in range(arr.ndim)])
                    feed_dict[data.size_placeholder[data.time_dim_axis_excluding_batch]] = lens
                res = sess.run(fetch, feed_dict=feed_dict)
                sizes = {i: np.asarray(res["size%i" % i]) for i in dyn_axes}
                return feeds, res["out"], sizes

            feeds, y, sizes = run("garbage:1")
            _, y2, sizes2 = run("garbage:2")
            for i in dyn_axes:
                assert sizes[i].shape == (B,), "%s: size of axis %i has shape %s" % (c["name"], i, sizes[i].shape)
            mask = _real_mask(y, sizes)
            same = all((sizes[i] == sizes2[i]).all() for i in dyn_axes) and np.allclose(
                np.where(mask, y, 0), np.where(mask, y2, 0), rtol=0, atol=1e-6, equal_nan=True)
            padding = "garbage"
            if not same:
                padding = "zeros"
                feeds, y, sizes = run("zeros")
            if y.dtype.kind == "f" and not np.isfinite(y[_real_mask(y, sizes)]).all():
                raise RuntimeError("%s: non-finite output on real frames" % c["name"])
    meta = {
        "case": c["name"], "family": c["family"], "network": network, "extern_data": extern_data,
        "config": c["config"], "output_layer": c["output"], "train_flag": False,
        "returnn_version": returnn.__long_version__ if hasattr(returnn, "__long_version__") else returnn.__version__,
        "tf_version": tf.__version__,
        "params": [p.name.split(":")[0] for p in params],
        "param_shapes": {p.name.split(":")[0]: p.shape.as_list() for p in params},
        "out_dims": _dims_desc(out), "time_axis": out.time_dim_axis if out.time_dim_axis in dyn_axes else None,
        "dynamic_axes": dyn_axes, "out_dtype": str(y.dtype), "input_padding": padding,
        "zero_length": any(0 in c["lens"][k] for k in feeds),
        "notes": c["notes"] + ("" if padding == "garbage" else
                               (" | " if c["notes"] else "") + "RETURNN's real frames depend on the padded input "
                               "values here (no masking): stored with zero padding"),
    }
    arrays = {"meta": np.array(json.dumps(meta, sort_keys=True))}
    for key, (arr, lens) in sorted(feeds.items()):
        arrays["in:" + key] = arr
        arrays["len:" + key] = lens.astype(np.int32)
    for name in meta["params"]:
        arrays["param:" + name] = values[name]
    arrays["out"] = y
    if meta["time_axis"] is not None:
        arrays["out_len"] = sizes[meta["time_axis"]].astype(np.int32)
    for i in dyn_axes:
        arrays["out_size:%i" % i] = sizes[i].astype(np.int32)
    return arrays


def write_npz(path, arrays):
    """Like np.savez_compressed, but byte-for-byte reproducible (fixed zip member dates)."""
    import numpy as np
    tmp = path + ".tmp"
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for key in sorted(arrays):
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.asarray(arrays[key]), allow_pickle=False)
            info = zipfile.ZipInfo(key + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, buf.getvalue())
    os.replace(tmp, path)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", metavar="CASE", help="only these cases")
    parser.add_argument("--out", default=DEFAULT_OUT, help="output directory (default: %(default)s)")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument("--keep-going", action="store_true", help="report failing cases and continue")
    args = parser.parse_args(argv)
    _load_more_cases()
    if args.list:
        for name, c in CASES.items():
            print("%-40s %s" % (name, c["family"]))
        return
    _check_real_returnn()
    os.environ.setdefault("DISABLE_CUDA", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    tf.compat.v1.disable_eager_execution()
    unknown = sorted(set(args.only or []) - set(CASES))
    if unknown:
        sys.exit("make_goldens.py: unknown case(s) %s (see --list)" % ", ".join(unknown))
    os.makedirs(args.out, exist_ok=True)
    failed = []
    for name in args.only or list(CASES):
        try:
            arrays = run_case(CASES[name])
        except Exception as exc:  # noqa: BLE001 - report and go on with --keep-going
            if not args.keep_going:
                raise
            failed.append(name)
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            print("FAILED %s: %s: %s" % (name, type(exc).__name__, first), flush=True)
            continue
        path = os.path.join(args.out, name + ".npz")
        write_npz(path, arrays)
        meta = json.loads(str(arrays["meta"]))
        print("wrote %s (%s, out %s %s, padding %s)" % (path, meta["family"], meta["out_dims"],
                                                         tuple(arrays["out"].shape), meta["input_padding"]), flush=True)
    if failed:
        print("failed cases: %s" % " ".join(failed))
        sys.exit(1)


if __name__ == "__main__":
    main()
