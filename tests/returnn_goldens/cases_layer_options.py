"""Golden cases of layer options from RETURNN's own test nets (loaded by make_goldens.py): conv with
``filter`` (another layer's output as the kernel, RETURNN's test_ConvLayer_custom_filter_no_dim_tags),
matched to the kernel's axes by size. ``dropout_axis``, ``grad_filter`` and ``updater_opts`` act in
training only (tests/test_layer_returnn_options.py, tests/test_updater_opts.py)."""
from make_goldens import LENS_LONG, case

L = {"data": LENS_LONG}

case("conv1d_filter_layer", "conv_filter", {
    "conv_h_filter": {"class": "variable", "shape": (6, 1, 15), "init": "glorot_uniform"},
    "output": {"class": "conv", "filter_size": (6,), "strides": 2, "n_out": 15, "padding": "valid",
               "filter": "conv_h_filter", "from": "data"}}, extern={"data": {"shape": (None, 1)}},
    lens={"data": [9, 7, 6]}, notes="RETURNN's test_ConvLayer_custom_filter_no_dim_tags")
case("conv1d_filter_layer_same", "conv_filter", {
    "f": {"class": "variable", "shape": (3, 5, 4)},
    "output": {"class": "conv", "filter_size": [3], "padding": "same", "n_out": 4, "with_bias": False,
               "filter": "f", "from": "data"}}, lens=L)
case("conv1d_filter_layer_permuted", "conv_filter", {
    "f": {"class": "variable", "shape": (4, 3, 5)},
    "output": {"class": "conv", "filter_size": [3], "padding": "same", "n_out": 4, "with_bias": True,
               "filter": "f", "from": "data"}}, lens=L,
    notes="the filter's axes (n_out 4, filter_size 3, input 5) matched by size")

# conv/pool padding beyond 'same'/'valid' (RETURNN's ConvLayer/PoolLayer): explicit zeros (an int or one per
# spatial axis; a max pool pads -inf, an avg pool counts them) and 'same_static' (zeros, windows independent of
# the batch's padded length). Before, refused here ("padding must be 'same' or 'valid'").
S32 = {"split": {"class": "split_dims", "axis": "F", "dims": [3, 2], "from": "data"}}
X6 = {"data": {"dim": 6}}
case("conv_padding_int", "conv_padding", {
    "output": {"class": "conv", "filter_size": [3], "padding": 1, "n_out": 3, "from": "data"}}, lens=L)
case("conv_padding_int_strided_zero_len", "conv_padding", {
    "output": {"class": "conv", "filter_size": [3], "padding": 2, "strides": 2, "n_out": 3, "from": "data"}},
    lens={"data": [6, 3, 0]})
case("conv2d_padding_per_axis", "conv_padding", dict(S32, output={
    "class": "conv", "filter_size": [3, 2], "padding": [2, 1], "n_out": 4, "from": "split"}), extern=X6, lens=L)
case("pool_avg_padding_int_counted", "conv_padding", {
    "output": {"class": "pool", "mode": "avg", "pool_size": [3], "padding": 1, "strides": 1, "from": "data"}}, lens=L)
case("pool_max_padding_int", "conv_padding", {
    "output": {"class": "pool", "mode": "max", "pool_size": [2], "padding": 1, "from": "data"}}, lens=L)
case("pool2d_avg_padding_per_axis", "conv_padding", dict(S32, output={
    "class": "pool", "mode": "avg", "pool_size": [2, 2], "padding": [0, 1], "from": "split"}), extern=X6, lens=L)
case("conv_same_static_strided", "conv_padding", {
    "output": {"class": "conv", "filter_size": [4], "padding": "same_static", "strides": 2, "n_out": 3,
               "from": "data"}}, lens=L)
case("conv2d_same_static_static_axis", "conv_padding", dict(S32, output={
    "class": "conv", "filter_size": [3, 3], "strides": [1, 2], "padding": "same_static", "n_out": 4,
    "from": "split"}), extern=X6, lens=L)
case("pool_avg_same_static", "conv_padding", {
    "output": {"class": "pool", "mode": "avg", "pool_size": [3], "padding": "same_static", "strides": 2,
               "from": "data"}}, lens=L)
case("pool_max_same_static_zeros", "conv_padding", {
    "output": {"class": "pool", "mode": "max", "pool_size": [3], "padding": "same_static", "strides": 2,
               "from": "data"}}, lens=L, notes="RETURNN pads zeros for max too")

# RETURNN's combine with_bias (a parameter 'b', zeros, added before the activation) and conv's bias layer
# (returnn_common's nets: filter and bias from variable layers). Before, both were unknown options here.
case("combine_with_bias_activation", "bias_options", {
    "c": {"class": "constant", "value": 2.5},
    "output": {"class": "combine", "kind": "mul", "from": ["data", "c"], "with_bias": True, "activation": "tanh"}})
case("combine_add_with_bias_zero_len", "bias_options", {
    "a": {"class": "linear", "n_out": 5, "from": "data"},
    "output": {"class": "combine", "kind": "add", "from": ["data", "a"], "with_bias": True}}, lens={"data": [5, 3, 0]})
case("conv_filter_and_bias_layers", "bias_options", {
    "f": {"class": "variable", "shape": (3, 5, 4)}, "b": {"class": "variable", "shape": (4,)},
    "output": {"class": "conv", "filter_size": [3], "padding": "same", "n_out": 4, "filter": "f", "bias": "b",
               "from": "data"}}, lens=L)
case("conv_bias_layer_valid", "bias_options", {
    "b": {"class": "variable", "shape": (4,)},
    "output": {"class": "conv", "filter_size": [3], "padding": "valid", "n_out": 4, "bias": "b", "from": "data",
               "activation": "relu"}}, lens=L)
# a scalar bias layer: RETURNN's copy_compatible_to broadcasts it to every channel (refused here before; mutate s54)
case("conv_bias_layer_scalar", "bias_options", {
    "b": {"class": "variable", "shape": ()},
    "output": {"class": "conv", "filter_size": [3], "padding": "valid", "n_out": 4, "bias": "b", "from": "data",
               "activation": "relu"}}, lens=L)
case("conv_bias_layer_per_sequence", "bias_options", {  # a bias with a batch axis: one per sequence (mutate s57)
    "b": {"class": "linear", "activation": None, "n_out": 4, "from": "red"},
    "red": {"class": "reduce", "mode": "mean", "axis": "T", "from": "data"},
    "output": {"class": "conv", "filter_size": [3], "padding": "same", "n_out": 4, "bias": "b", "from": "data"}},
    lens=L)
case("transposed_conv_bias_layer_per_sequence", "bias_options", {
    "b": {"class": "variable", "shape": (3,), "add_batch_axis": True},
    "output": {"class": "transposed_conv", "filter_size": [2], "strides": [2], "n_out": 3, "bias": "b",
               "from": "data"}}, lens=L)
case("transposed_conv_bias_layer_scalar", "bias_options", {
    "b": {"class": "variable", "shape": ()},
    "output": {"class": "transposed_conv", "filter_size": [2], "strides": [2], "n_out": 3, "bias": "b",
               "from": "data"}}, lens=L)

# gather clip_to_valid (RETURNN: the position clipped to 0 .. the axis length - 1, per sequence on a dynamic axis;
# an unknown option here before)
case("gather_clip_to_valid_static", "gather_clip", {
    "output": {"class": "gather", "position": 9, "axis": "F", "from": "data", "clip_to_valid": True}})
case("gather_clip_to_valid_time_int_zero_len", "gather_clip", {
    "output": {"class": "gather", "position": 5, "axis": "T", "from": "data", "clip_to_valid": True}},
    lens={"data": [7, 3, 0]})
case("gather_clip_to_valid_time_positions", "gather_clip", {
    "len": {"class": "length", "from": "data"},
    "r": {"class": "range_in_axis", "axis": "T", "from": "data"},
    "p": {"class": "combine", "kind": "sub", "from": ["r", "len"], "allow_broadcast_all_sources": True},
    "p2": {"class": "eval", "from": "p", "eval": "source(0) + 3"},
    "output": {"class": "gather", "position": "p2", "axis": "T", "from": "data", "clip_to_valid": True}}, lens=L)

# constant's dims as RETURNN's template_from_constant makes them: engine-made (they match another engine-made
# static dim of their size, e.g. extern data's feature dim), spatial but the last, a feature dim. Before, a
# multi-axis constant added axes in combine where RETURNN matches them.
case("constant_shape_matches_feature_by_size", "constant_dims", {
    "c": {"class": "constant", "value": 2.5, "shape": [3, 5, 4]},
    "output": {"class": "combine", "kind": "mul", "from": ["data", "c"]}})
case("constant_shape_static_feature_zero_len", "constant_dims", {
    "c": {"class": "constant", "value": 1.5, "shape": [2, 5]},
    "output": {"class": "combine", "kind": "add", "from": ["data", "c"]}}, lens={"data": [5, 3, 0]})

# the batch_norm option on rec and rnn_cell: RETURNN makes its parameters in the layer's rec/ scope
# (output/rec/batch_norm/...); here they were named output/batch_norm/... (checkpoints did not load either way)
case("rec_nativelstm2_batch_norm_option", "bn_scope", {
    "output": {"class": "rec", "unit": "nativelstm2", "n_out": 4, "from": "data", "batch_norm": True}}, train=True)
case("rnn_cell_in_loop_batch_norm_option", "bn_scope", {
    "output": {"class": "rec", "from": "data", "unit": {
        "cell": {"class": "rnn_cell", "unit": "LSTMBlock", "n_out": 4, "from": "data:source", "batch_norm": True},
        "output": {"class": "copy", "from": "cell"}}}})

# before behavior_version 11 (RETURNN's broadcast_matches) a variable's dummy time axis takes data's time axis also
# when the variable is the source with the most axes (it was only matched the other way round here)
case("variable_dummy_time_in_base_bv0", "broadcast_matches", {
    "v": {"class": "variable", "shape": [2, 5], "add_batch_axis": True, "add_time_axis": True, "init": 0.5},
    "output": {"class": "combine", "kind": "mul", "from": ["data", "v"]}}, config={"behavior_version": 0})

# softmax_over_spatial energy_factor 0: RETURNN scales only by a truthy factor (0 scales nothing); this engine
# multiplied by 0 (uniform weights)
case("softmax_over_spatial_energy_factor_zero", "energy_factor", {
    "output": {"class": "softmax_over_spatial", "energy_factor": 0.0, "from": "data"}}, extern={"data": {"shape": (None, 1)}},
    lens=L)

# a sub-network rec with direction -1: RETURNN asserts the value but reverses only cell units, so its loop runs
# forward (refused here before)
case("rec_subnet_direction_backward", "rec_direction", {
    "output": {"class": "rec", "from": "data", "direction": -1, "unit": {
        "h": {"class": "linear", "activation": "tanh", "from": ["data:source", "prev:h"], "n_out": 4},
        "output": {"class": "copy", "from": "h"}}}}, lens=L)

# reuse_params naming a layer that does not exist, on a layer without parameters: RETURNN resolves the name only
# when a parameter asks for it (LazyLayerResolver), so it builds; refused here before
case("reuse_params_unknown_on_paramless_layer", "reuse_params_lazy", {
    "output": {"class": "activation", "activation": "tanh", "from": "data", "reuse_params": "no_such_layer"}}, lens=L)

# conv 'bias' as a layer with a size-1 axis besides the channels: RETURNN adds it made compatible to the output (the
# size-1 axis broadcasts over a spatial one); refused here before ("must have one static axis")
case("conv_bias_layer_size1_axis", "conv_bias_layer", {
    "b": {"class": "variable", "shape": [1, 3], "init": 0.5},
    "output": {"class": "conv", "filter_size": [2], "padding": "same", "n_out": 3, "bias": "b", "from": "data"}}, lens=L)

# the batch_norm option's parameter names before param_version 2 hold the name of the layer's output data, which
# RETURNN's eval, combine (compare) and squeeze take from their only source ("data", "b_output") and slice_nd from its
# gather ("n_gather_output"); here every layer was "<layer>_<layer>_output" (RETURNN's checkpoints did not load)
_BN = {"batch_norm": True}
case("batch_norm_option_names_kept_from_source", "bn_names", {
    "b": {"class": "linear", "n_out": 5, "from": "data"},
    "e": dict(_BN, **{"class": "eval", "eval": "source(0) * 2.", "from": "data"}),
    "c": {"class": "eval", "eval": "source(0)", "from": "b"},
    "a": dict(_BN, **{"class": "combine", "kind": "add", "from": "c"}),
    "a2": dict(_BN, **{"class": "eval", "eval": "source(0) + source(1)", "from": ["b", "b"]}),
    "x": {"class": "expand_dims", "axis": "spatial", "from": "b"},
    "s": dict(_BN, **{"class": "squeeze", "axis": "dim:1", "from": "x"}),
    "p": {"class": "constant", "value": 1},
    "n": dict(_BN, **{"class": "slice_nd", "start": "p", "size": None, "from": "b"}),
    "output": {"class": "copy", "from": ["e", "a", "a2", "s"]}, "o2": {"class": "copy", "from": "n", "is_output_layer": True}},
    train=True, config={"behavior_version": 0})

# reduce with use_time_mask False: RETURNN reduces the padded tensor as the layer before computed it (a linear
# layer's bias and activation there, an LSTM's padded steps; data's zero frames); here padding counted as zeros
_L = {"class": "linear", "n_out": 3, "activation": "tanh", "from": "data", "bias_init": 0.7}
for _mode in ("mean", "max"):
    case("reduce_no_time_mask_%s_after_linear" % _mode, "reduce_padding", {
        "l": _L, "output": {"class": "reduce", "mode": _mode, "axes": "T", "use_time_mask": False, "from": "l"}})
case("reduce_no_time_mask_concat_and_lstm", "reduce_padding", {
    "l": _L, "r": {"class": "rec", "unit": "nativelstm2", "n_out": 3, "from": "data"},
    "output": {"class": "reduce", "mode": "sum", "axes": "T", "use_time_mask": False, "from": ["l", "data", "r"]}})
case("reduce_no_time_mask_activation_zero_length", "reduce_padding", {
    "l": dict(_L, activation="exp"), "a": {"class": "activation", "activation": "relu", "from": "l"},
    "output": {"class": "reduce", "mode": "mean", "axes": "T", "use_time_mask": False, "from": "a"}},
    lens={"data": [7, 4, 0]})
# transposed_conv 'bias' (RETURNN's TransposedConvLayer): a layer added instead of an own parameter, made compatible to
# the output; a falsy bias is none (returnn_fuzz --kind mutate --train seed 48: refused here as an unknown option)
case("transposed_conv_bias_layer", "bias_options", {
    "b": {"class": "variable", "shape": [1, 4], "init": 0.5},
    "output": {"class": "transposed_conv", "filter_size": [3], "strides": [2], "n_out": 4, "bias": "b",
               "activation": "tanh", "from": "data"}}, lens=L)
case("transposed_conv_bias_false", "bias_options", {
    "output": {"class": "transposed_conv", "filter_size": [3], "strides": [2], "n_out": 4, "bias": False,
               "from": "data"}}, lens=L)

# dot with use_mask False over a dynamic reduced axis: RETURNN sums the padded positions too, as they are read there
# (a linear layer's computed padding, data's zero frames); refused here before
for _name, _a in (("dot_no_mask_time_after_linears", "l"), ("dot_no_mask_time_data", "data")):
    case(_name, "dot_padding", {
        "l": _L, "m": dict(_L, bias_init=0.3, n_out=2),
        "output": {"class": "dot", "red1": "T", "red2": "T", "var1": "F", "var2": "F", "use_mask": False,
                   "from": [_a, "m"]}}, config={"behavior_version": 0})

# a rec sub-network's loop reads its source past a sequence's end as the layer before computed it (RETURNN's loop over
# the padded tensor; a linear layer's bias there): read as zeros here before, so the padded steps differed
case("rec_subnet_reads_source_padding", "reduce_padding", {
    "l": dict(_L, n_out=4), "r": {"class": "rec", "from": "l", "unit": {
        "h": {"class": "linear", "n_out": 3, "activation": "tanh", "from": ["data:source", "prev:h"]},
        "output": {"class": "copy", "from": "h"}}},
    "output": {"class": "reduce", "mode": "sum", "axes": "T", "use_time_mask": False, "from": "r"}})

# RETURNN's LayerBase option 'state' (the explicit rec state): a rec layer's one step (an input without time axis)
# from the state given by layers (its test_reclayer_single_step), and in a rec loop an rnn_cell continuing from
# layers' values instead of its carried state (i6's masked decoders: LSTMStateTuple('prev:s_c', 'prev:s_h'))
case("rec_single_step_state", "explicit_state", {
    "linear": {"class": "linear", "from": "data", "n_out": 5},
    "reduce": {"class": "reduce", "mode": "mean", "from": "linear", "axis": "T"},
    "output": {"class": "rec", "unit": "lstm", "n_out": 5, "from": "reduce", "state": {"h": "reduce", "c": "reduce"}}})

case("rnn_cell_gru_in_loop_state", "explicit_state", {"output": {"class": "rec", "from": "data", "unit": {
    "_s": {"class": "rnn_cell", "unit": "gru", "n_out": 4, "from": "data:source", "state": "prev:x"},
    "x": {"class": "linear", "activation": "tanh", "n_out": 4, "from": "_s"},
    "output": {"class": "copy", "from": "_s"}}}})
