"""Golden cases of the basic layer families (loaded by make_goldens.py): linear, softmax,
activation, combine, copy, dropout, conv/pool/transposed_conv, rec units and attention, reduce,
shape layers and the rest registered here before the structural cases got their own files."""
from make_goldens import LENS, LENS_LONG, LENS_ZERO, SPARSE7, X4, X5_CLASSES6, X6, _lin, case

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
case("dot_feature_feature_no_mask", "dot", {
    "a": _lin(4), "b": _lin(4, act="tanh"),
    "output": {"class": "dot", "red1": "F", "red2": "F", "var1": None, "var2": None, "from": ["a", "b"],
               "use_mask": False}},
    notes="use_mask False has no effect when no reduced axis is dynamic (returnn_fuzz mutate seed 36)")
case("dot_time_reduce", "dot", {
    "a": _lin(3), "output": {"class": "dot", "red1": "T", "red2": "T", "var1": "F", "var2": "F",
                             "from": ["data", "a"]}},
    notes="sum over (real) time frames: B,F1,F2")
case("gating_split", "gating", {"output": {"class": "gating", "activation": "tanh", "from": "data"}}, extern=X6)
case("gating_two_sources", "gating", {"a": _lin(5), "output": {"class": "gating", "activation": "identity",
                                                               "from": ["data", "a"]}})
case("softmax_over_spatial", "attention", {
    "e": _lin(1), "output": {"class": "softmax_over_spatial", "from": "e"}})
case("softmax_over_spatial_start_0", "attention", {
    "e": _lin(1), "output": {"class": "softmax_over_spatial", "from": "e", "start": 0}},
    notes="RETURNN applies 'start' only when truthy: 0 is no start (returnn_fuzz mutate seed 36)")
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
for _k in ("prefix", "postfix"):  # repeat 0 adds no frame (refused here before: returnn_fuzz mutate seed 42)
    case("%s_in_time_repeat_0" % _k, "time_edit", {"output": {"class": "%s_in_time" % _k, _k: 0.5, "repeat": 0,
                                                              "from": "data"}})
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
# RETURNN's fused path (param_version 2, masked_time False, use_sample 0): evaluation normalises with the stored
# statistics and updates nothing, also where update_sample_only_in_training is False (behavior_version < 12)
# (returnn_fuzz mutate seed 189, DIFFER)
case("batch_norm_fused_param_version2_eval", "batch_norm", {"output": {
    "class": "batch_norm", "masked_time": False, "param_version": 2, "from": "data"}})
case("batch_norm_option_fused_param_version2_eval", "batch_norm", {"output": {
    "class": "linear", "activation": None, "n_out": 4, "from": "data",
    "batch_norm": {"masked_time": False, "param_version": 2, "momentum": 0.5}}})
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
# repetitions 0 (RETURNN's tf.repeat: every sequence empty; refused here before, mutate --train seed 55)
case("repeat_time_zero", "repeat", {"output": {"class": "repeat", "repetitions": 0, "axis": "T", "from": "data"}})
# repeat: RETURNN's output is batch-major with the repeated axis right after the batch axis (first without a batch
# axis, then only a static axis an int number of times); this engine kept the axis in place and refused batch-less
# inputs (found with Zettelkasten/returnn-self-attention's key-chunk mask)
case("repeat_feature_layout", "repeat", {
    "r": {"class": "repeat", "from": "data", "axis": "F", "repetitions": 2},
    "output": {"class": "merge_dims", "axes": "except_batch", "from": "r"}}, config={"behavior_version": 0})
case("repeat_batchless_static", "repeat", {
    "r": {"class": "range", "start": 0, "limit": 3, "delta": 1},
    "rr": {"class": "repeat", "from": "r", "axis": "F", "repetitions": 2},
    "rf": {"class": "cast", "dtype": "float32", "from": "rr"},
    "output": {"class": "combine", "kind": "add", "from": ["data", "rf"], "allow_broadcast_all_sources": True}},
    extern={"data": {"dim": 6}})
# repetitions 1: RETURNN's out dim is tag * 1, the axis itself, so it combines with the input frame by frame (this
# engine made a new axis and refused the combine)
case("repeat_one_same_axis", "repeat", {
    "r": {"class": "repeat", "from": "data", "axis": "T", "repetitions": 1},
    "output": {"class": "combine", "kind": "add", "from": ["data", "r"]}})
