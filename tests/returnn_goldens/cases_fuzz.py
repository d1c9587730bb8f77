"""Golden cases found by the differential check (benchmarks/returnn_fuzz.py) where this engine
differed from RETURNN, kept as goldens once fixed (loaded by make_goldens.py): norm's statistics
over a time axis include the padded frames; pad of a dynamic axis before behavior version 21 pads
the tensor as it is (also reflect/symmetric/replication), from version 21 after each sequence's
end; slice with a negative step on a static axis; softmax_over_spatial's window_size alone."""
from make_goldens import LENS_LONG, case

X34 = {"data": {"shape": (None, 3, 4)}}
X5 = {"data": {"dim": 5}}

case("fuzz_norm_over_time", "fuzz_norm", {"output": {"class": "norm", "axis": "T", "from": "data"}}, extern=X34)
case("fuzz_norm_time_feature_no_bias", "fuzz_norm", {
    "output": {"class": "norm", "axis": ["T", "F"], "bias": False, "epsilon": 1e-3, "from": "data"}},
    lens={"data": [6, 6, 2]})
for mode in ("constant", "reflect", "symmetric", "replication"):
    case("fuzz_pad_time_%s_bv0" % mode, "fuzz_pad", {
        "output": {"class": "pad", "axes": "T", "padding": (2, 1), "mode": mode, "value": 1.5, "from": "data"}},
        extern=X5, lens={"data": LENS_LONG})
case("fuzz_pad_time_value_bv21", "fuzz_pad", {
    "output": {"class": "pad", "axes": "T", "padding": (1, 2), "value": -2.0, "from": "data"}},
    extern=X5, config={"behavior_version": 21}, lens={"data": [5, 3, 0]})
case("fuzz_pad_time_left_only_symmetric_bv21", "fuzz_pad", {
    "output": {"class": "pad", "axes": "T", "padding": (2, 0), "mode": "symmetric", "from": "data"}},
    extern=X5, config={"behavior_version": 21}, lens={"data": LENS_LONG})
# no padding at all: RETURNN's input as it is, whatever the mode says (it checks the mode only in tf.pad)
case("fuzz_pad_zero_padding_any_mode", "fuzz_pad", {
    "output": {"class": "pad", "axes": ["T", "F"], "padding": [(0, 0), (0, 0)], "mode": "avg", "from": "data"}},
    extern=X5, lens={"data": LENS_LONG})
case("fuzz_slice_feature_reversed", "fuzz_slice", {
    "output": {"class": "slice", "axis": "F", "slice_step": -2, "from": "data"}}, extern=X5)
case("fuzz_softmax_over_spatial_window_size_alone", "fuzz_softmax_over_spatial", {
    "output": {"class": "softmax_over_spatial", "window_size": 2, "energy_factor": 2.0, "from": "data"}}, extern=X5)
for mode in ("max", "min", "logsumexp", "mean"):  # over an empty sequence: RETURNN's replacement values
    case("fuzz_reduce_%s_time_zero_length" % mode, "fuzz_reduce", {
        "output": {"class": "reduce", "mode": mode, "axis": "T", "from": "data"}}, extern=X34,
        lens={"data": [5, 3, 0]})
case("fuzz_dot_no_var_bv21", "fuzz_dot", {  # no size-1 var2 axis from behavior version 3
    "output": {"class": "dot", "from": ["data", "data"], "reduce": "F", "var1": None, "var2": None}},
    extern=X5, config={"behavior_version": 21})
case("fuzz_dot_no_var_bv0", "fuzz_dot", {
    "output": {"class": "dot", "from": ["data", "data"], "reduce": "F", "var1": None, "var2": None}}, extern=X5)
# conv, pool and window read the padded frames as they are (a cumsum's total, a linear layer's bias there)
case("fuzz_cumsum_conv", "fuzz_padded_frames", {
    "l0": {"class": "cumsum", "axis": "T", "from": "data"},
    "output": {"class": "conv", "filter_size": [2], "n_out": 2, "padding": "same", "activation": "relu",
               "with_bias": False, "from": "l0"}}, extern=X5)
case("fuzz_linear_conv_conv", "fuzz_padded_frames", {
    "l0": {"class": "linear", "n_out": 4, "activation": None, "from": "data"},
    "l1": {"class": "conv", "filter_size": [3], "n_out": 3, "padding": "same", "with_bias": True, "from": "l0"},
    "output": {"class": "conv", "filter_size": [3], "n_out": 2, "padding": "same", "from": "l1"}}, extern=X5,
    lens={"data": [7, 4, 0]})
case("fuzz_linear_pool_max", "fuzz_padded_frames", {
    "l0": {"class": "linear", "n_out": 4, "activation": None, "from": "data"},
    "output": {"class": "pool", "mode": "max", "pool_size": [3], "padding": "same", "strides": 1, "from": "l0"}},
    extern=X5)
case("fuzz_batch_norm_window", "fuzz_padded_frames", {
    "l0": {"class": "batch_norm", "use_shift": False, "momentum": 0.1, "from": "data"},
    "output": {"class": "window", "window_size": 4, "window_right": 1, "axis": "T", "from": "l0"}}, extern=X5)
# softmax_over_spatial moves its axis last (RETURNN's copy_move_axis): order-dependent axes and windows see that
case("fuzz_softmax_over_spatial_then_s0_slice", "fuzz_softmax_over_spatial", {
    "l0": {"class": "softmax_over_spatial", "axis": "stag:time", "from": "data"},
    "output": {"class": "slice", "axis": "S:0", "slice_end": -1, "slice_step": 3, "from": "l0"}}, extern=X34,
    lens={"data": [5, 3, 0]})
case("fuzz_window_then_softmax_over_spatial", "fuzz_softmax_over_spatial", {
    "l0": {"class": "window", "window_size": 3, "window_left": 0, "stride": 2, "axis": "T", "from": "data"},
    "output": {"class": "softmax_over_spatial", "energy_factor": 2.0, "log_space": True, "from": "l0"}}, extern=X5)
# concat along time: RETURNN's TF layer joins the padded tensors (sizes summed), no packing
case("fuzz_concat_time_padded", "fuzz_concat", {"output": {"class": "concat", "from": [
    {"__tuple__": ["data", "T"]}, {"__tuple__": ["l0", "T"]}]}, "l0": {"class": "activation", "activation": "tanh",
                                                                       "from": "data"}}, extern=X5)
# window over the feature axis with a stride: the strided axis is a new dim, the feature axis is then
# RETURNN's default, the last (the window), which a following linear layer projects
case("fuzz_window_feature_strided_linear", "fuzz_window", {
    "w": {"class": "window", "window_size": 2, "stride": 2, "axis": "F", "from": "data"},
    "output": {"class": "linear", "n_out": 3, "activation": None, "from": "w"}}, extern={"data": {"dim": 6}})
case("fuzz_window_feature_strided_4d", "fuzz_window", {
    "output": {"class": "window", "window_size": 2, "stride": 2, "axis": "F", "from": "data"}}, extern=X34)
for mode in ("argmax", "argmin"):  # keep_dims: the labels in a kept size-1 axis
    case("fuzz_reduce_%s_keep_dims" % mode, "fuzz_reduce", {
        "output": {"class": "reduce", "mode": mode, "axis": "T", "keep_dims": True, "from": "data"}}, extern=X5,
        lens={"data": [5, 3, 0]})
# combine of sparse sources: RETURNN computes on the class indices, the first largest source's class dim
S7 = {"data": {"dim": 7, "sparse": True}}
case("fuzz_combine_sparse_add", "fuzz_combine", {
    "l0": {"class": "gather", "axis": "T", "position": 0, "from": "data"},
    "output": {"class": "combine", "kind": "add", "from": ["l0", "data"]}}, extern=S7, lens={"data": [5, 3, 1]})
case("fuzz_combine_sparse_maximum_embedded", "fuzz_combine", {
    "l0": {"class": "combine", "kind": "maximum", "from": ["data", "data"]},
    "output": {"class": "linear", "n_out": 3, "activation": None, "from": "l0"}}, extern=S7)
# stack with the new axis last: RETURNN's default feature axis is then the new (static, last) axis
case("fuzz_stack_last_then_merge_time_feature", "fuzz_stack", {
    "l0": {"class": "stack", "axis": -1, "from": ["data", "data"]},
    "output": {"class": "merge_dims", "axes": ["T", "F"], "from": "l0"}}, config={"behavior_version": 12})
case("fuzz_stack_last_linear", "fuzz_stack", {
    "l0": {"class": "stack", "axis": -1, "from": ["data", "data"]},
    "output": {"class": "linear", "n_out": 3, "activation": None, "from": "l0"}})
# window from behavior version 18: RETURNN moves the slid-over axis to the front, the window axis before it
# (stride 1) or after it; a default feature axis is the new layout's default
for _name, _net in (
        ("time", {"output": {"class": "window", "window_size": 3, "from": "data"}}),
        ("feature_valid", {"output": {"class": "window", "window_size": 1, "padding": "valid", "axis": "F",
                                      "from": "data"}}),
        ("time_strided_merge", {"w": {"class": "window", "window_size": 3, "stride": 2, "from": "data"},
                                "output": {"class": "merge_dims", "axes": ["stag:w:window", "F"], "from": "w"}}),
        ("feature_linear", {"w": {"class": "window", "window_size": 2, "axis": "F", "from": "data"},
                            "output": {"class": "linear", "n_out": 2, "activation": None, "from": "w"}})):
    case("fuzz_window_bv21_" + _name, "fuzz_window", _net, extern=X5, config={"behavior_version": 21},
         lens={"data": [5, 3, 0]})
# 'F' names no axis of sparse data (RETURNN's get_feature_batch_axes): in a list of axes it adds none
case("fuzz_merge_dims_feature_time_of_sparse", "fuzz_merge_dims", {
    "output": {"class": "merge_dims", "axes": ["F", "T"], "keep_order": True, "from": "data"}}, extern=S7)
# a reverse cumsum over the padded tensor (RETURNN's tf.cumsum): the batch_norm's values in padded frames count
case("fuzz_cumsum_reverse_after_batch_norm", "fuzz_padded_frames", {
    "l0": {"class": "batch_norm", "use_shift": True, "use_std": True, "epsilon": 0.1, "from": "data"},
    "output": {"class": "cumsum", "reverse": True, "from": "l0"}}, extern={"data": {"dim": 6}})
# padded frames of a linear layer after another: RETURNN computes them from the padded input frames (the first
# layer's bias there), which a centered window then reads at the sequence's end
case("fuzz_linear_linear_window", "fuzz_padded_frames", {
    "emb": {"class": "linear", "activation": None, "n_out": 4, "from": "data"},
    "s0": {"class": "linear", "activation": "sigmoid", "n_out": 4, "from": "emb", "with_bias": False},
    "output": {"class": "window", "window_size": 3, "from": "s0"}}, extern={"data": {"dim": 4}})
# padded frames of a linear layer after a layer that computes non-zero ones (an activation's exp(0) = 1, a layer
# norm's shift): RETURNN projects them as they are (its linear does not mask), and a centered window or a conv
# reads the result at a sequence's end (a conformer's pointwise linear before its depthwise conv)
case("fuzz_exp_softmax_window", "fuzz_padded_frames", {
    "a": {"class": "activation", "activation": "exp", "from": "data"},
    "s": {"class": "softmax", "n_out": 3, "from": "a"},
    "output": {"class": "window", "window_size": 3, "from": "s"}}, extern={"data": {"dim": 4}})
case("fuzz_layer_norm_linear_conv", "fuzz_padded_frames", {
    "ln": {"class": "layer_norm", "from": "data"},
    "pw": {"class": "linear", "activation": "relu", "n_out": 3, "from": "ln"},
    "pw2": {"class": "linear", "activation": "tanh", "n_out": 3, "from": "pw"},
    "output": {"class": "conv", "filter_size": [3], "padding": "same", "n_out": 2, "from": "pw2"}},
    extern={"data": {"dim": 4}})
# from behavior_version 16 (simple dim equality) a user-made dim matches only itself; a linear layer without
# out_dim takes over its input's feature dim of its size (RETURNN's default output), so it still adds to the input
case("fuzz_linear_takes_over_user_feature_dim_bv16", "fuzz_dims", {
    "l": {"class": "linear", "n_out": 4, "activation": "tanh", "from": "data"},
    "output": {"class": "combine", "kind": "add", "from": ["data", "l"]}},
    extern={"data": {"dim_tags": [{"__dim__": "batch"}, {"__dim__": "time", "dimension": None, "kind": "spatial"},
                                  {"__dim__": "fa", "dimension": 4, "kind": "feature"}]}},
    config={"behavior_version": 16})
# gather: an axis of the position matches a free static spatial axis of the input of its size (RETURNN's
# allow_same_spatial_dim) and is gathered per entry (a diagonal); from behavior_version 16 not a user-made one
for _bv in (15, 16):
    case("fuzz_gather_range_same_size_spatial_axis_bv%i" % _bv, "fuzz_gather", {
        "pos": {"class": "range", "limit": 3, "from": []},
        "output": {"class": "gather", "from": "data", "position": "pos", "axis": "T"}},
        extern={"data": {"shape": (None, 3, 4)}}, config={"behavior_version": _bv}, lens={"data": [6, 4, 1]})
    case("fuzz_gather_range_user_spatial_axis_bv%i" % _bv, "fuzz_gather", {
        "pos": {"class": "range", "limit": 3, "from": []},
        "output": {"class": "gather", "from": "data", "position": "pos", "axis": "T"}},
        extern={"data": {"dim_tags": [{"__dim__": "batch"}, {"__dim__": "time", "dimension": None, "kind": "spatial"},
                                      {"__dim__": "su", "dimension": 3, "kind": "spatial"},
                                      {"__dim__": "fu", "dimension": 4, "kind": "feature"}]}},
        config={"behavior_version": _bv}, lens={"data": [6, 4, 1]})
# slice with a non-negative slice_end on the time axis: RETURNN's static axis of (end - start) is engine-made
# (auto_generated); of size 1 it broadcasts over another source's time axis before behavior_version 11
# (returnn_fuzz mutate seed 240 #77: was an axis of its own; from behavior_version 4 on refused, both broadcast)
case("fuzz_slice_static_end_size1_broadcasts_bv0", "fuzz_slice", {
    "conv": {"class": "conv", "from": "data", "filter_size": [3], "padding": "valid", "n_out": 6, "activation": None},
    "crop": {"class": "slice", "from": "data", "axis": "T", "slice_start": 1, "slice_end": 2},
    "output": {"class": "combine", "kind": "add", "from": ["conv", "crop"]}},
    extern={"data": {"dim": 6}}, config={"behavior_version": 0}, lens={"data": [7, 5, 3]})
# pad with the batch axis among 'axes' and zero padding there: tf.pad's no-op in RETURNN (refused here before, mutate
# seed 253 #70); other padding of the batch axis stays refused (RETURNN's template cannot size it)
case("fuzz_pad_batch_axis_zero_padding", "fuzz_pad", {
    "output": {"class": "pad", "axes": ["B", "T"], "padding": [[0, 0], [1, 2]], "value": 0.5, "from": "data"}},
    extern={"data": {"dim": 3}}, config={"behavior_version": 21}, lens={"data": LENS_LONG})
case("fuzz_pad_batch_axis_zero_padding_only", "fuzz_pad", {
    "output": {"class": "pad", "axes": ["B", "T"], "padding": [[0, 0], [0, 0]], "mode": "reflect", "from": "data"}},
    extern={"data": {"dim": 3}}, lens={"data": LENS_LONG})
