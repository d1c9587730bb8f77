"""Golden cases found by the differential check's long-tail networks (benchmarks/returnn_fuzz_tail.py)
where this engine differed from RETURNN, kept as goldens once fixed (loaded by make_goldens.py):
time_chunking of a time-major input, gather(_nd) by a position without batch axis, merge_dims of the batch
axis of a time-major input without keep_order, gather(_nd) of time-major inputs or positions, slice_nd's time
axis, a size-1 feature axis from behavior version 11, scatter_nd's and gather_nd's padded positions,
unflatten_nd's padding, gather's common axes, the feature axis of a window over the features,
transposed_conv's lengths after remove_padding and padded frames, shift_axis of split_dims' remainder axis, a variable's
dummy time axis broadcast before behavior version 11, self_attention over an input with a size-1 axis,
activations of class indices,
'stag:' names of axes made by dim math (pad, slice, conv, pool), a rec layer on an input without time axis,
resize/transposed_conv/weighted_sum reading padded frames a layer computed, slice_nd of a size
equal to an engine-made static axis, slice's static end and stepped dims,
reduce's kept axis, shift_axis's fresh axis."""
from make_goldens import LENS_LONG, case

XTM6 = {"data": {"dim": 6, "time_dim_axis": 0, "batch_dim_axis": 1}}

# time_chunking moves the time axis first and the batch second (RETURNN's TimeChunkingLayer): any layout chunks
case("fuzz_time_chunking_time_major", "fuzz_time_chunking", {
    "output": {"class": "time_chunking", "chunk_size": 3, "chunk_step": 2, "from": "data"}}, extern=XTM6,
    lens={"data": LENS_LONG})
case("fuzz_time_chunking_time_major_round_trip", "fuzz_time_chunking", {
    "ch": {"class": "time_chunking", "chunk_size": 4, "chunk_step": 2, "from": "data"},
    "a": {"class": "cumsum", "from": "ch"},
    "output": {"class": "time_unchunking", "chunking_layer": "ch", "from": "a"}}, extern=XTM6)
# time_chunking's and time_unchunking's outputs are time-major, as RETURNN's: an eval reads the raw axes (returnn_fuzz
# chain seed 372 #55: batch-major here, the cumsum ran over another axis)
case("fuzz_time_chunking_eval_raw_axes", "fuzz_time_chunking", {
    "ch": {"class": "time_chunking", "chunk_size": 4, "chunk_step": 1, "from": "data"},
    "a": {"class": "eval", "eval": "tf.math.cumsum(source(0), axis=0)", "from": "ch"},
    "tail": {"class": "time_unchunking", "chunking_layer": "ch", "from": "a"},
    "output": {"class": "eval", "eval": "tf.math.cumsum(source(0), axis=1)", "from": "tail"}},
    extern={"data": {"shape": (None, 2, 3)}}, lens={"data": LENS_LONG})
# time_chunking's 'axis' (RETURNN's option; refused here before): the time axis by its tag, a static axis
case("fuzz_time_chunking_axis_by_tag", "fuzz_time_chunking", {
    "output": {"class": "time_chunking", "chunk_size": 3, "chunk_step": 3, "axis": "stag:time", "from": "data"}},
    extern={"data": {"dim_tags": [{"__dim__": "batch"}, {"__dim__": "time", "dimension": None, "kind": "spatial"},
                                  {"__dim__": "fa", "dimension": 4, "kind": "feature"}]}}, lens={"data": LENS_LONG})
case("fuzz_time_chunking_static_axis", "fuzz_time_chunking", {
    "output": {"class": "time_chunking", "chunk_size": 3, "chunk_step": 2, "axis": "stag:spatial0:static5:data",
               "from": "data"}}, extern={"data": {"shape": (5, 2), "time_dim_axis": None}})
# a position without batch axis (range_in_axis over time: (T,), per-sequence sizes) is taken for every sequence
for _cls, _extra in (("gather_nd", {}), ("gather", {"axis": "T"})):
    case("fuzz_%s_position_without_batch" % _cls, "fuzz_gather", {
        "t": {"class": "range_in_axis", "from": "data", "axis": "T"},
        "pos": {"class": "eval", "from": "t", "eval": "source(0) // 2"},
        "output": dict({"class": _cls, "from": "data", "position": "pos"}, **_extra)}, extern={"data": {"dim": 5}})
# merge_dims of the batch axis without keep_order (before behavior version 6) merges the batch axis first, whatever
# the input's layout (RETURNN: so that split_batch_time undoes it)
for _axes in (["T", "B"], ["B", "T"]):
    case("fuzz_merge_dims_%s_time_major_bv0" % "".join(_axes), "fuzz_merge_dims_batch", {
        "m": {"class": "merge_dims", "axes": _axes, "from": "data"},
        "lin": {"class": "linear", "activation": "tanh", "n_out": 3, "from": "m"},
        "output": {"class": "split_batch_time", "base": "data", "from": "lin"}}, extern=XTM6,
        config={"behavior_version": 0}, lens={"data": [6, 6, 2]})
case("fuzz_merge_dims_TB_time_major_bv0_merged", "fuzz_merge_dims_batch", {
    "output": {"class": "merge_dims", "axes": ["T", "B"], "from": "data"}}, extern=XTM6,
    config={"behavior_version": 0}, lens={"data": [6, 6, 2]})
# gather(_nd) takes 'from' and a position layer of any layout (RETURNN moves the batch axes first)
_REVERSED = {"t": {"class": "range_in_axis", "from": "data", "axis": "T"}, "len": {"class": "length", "from": "data"},
             "pos": {"class": "combine", "kind": "eval", "from": ["t", "len"], "allow_broadcast_all_sources": True,
                     "eval": "tf.maximum(source(1) - 1 - source(0), 0)"}}  # (T, B): time-major
for _cls, _extra in (("gather_nd", {}), ("gather", {"axis": "T"})):
    for _x, _extern in (("", {"data": {"dim": 5}}), ("_time_major_data", XTM6)):
        case("fuzz_%s_time_major_position%s" % (_cls, _x), "fuzz_gather", dict(_REVERSED, output=dict(
            {"class": _cls, "from": "data", "position": "pos"}, **_extra)), extern=_extern, lens={"data": LENS_LONG})
# slice_nd's time axis: RETURNN's default rule on its output (the first dynamic spatial axis): the slice axis for a
# size to the end, the start's time axis for per-frame starts (B, T) with a fixed size
_FRAMES = {"t": {"class": "range_in_axis", "from": "data", "axis": "T"},
           "start": {"class": "eval", "from": "t", "eval": "source(0) // 2"}}
case("fuzz_slice_nd_to_end_reduce_time", "fuzz_slice_nd", {
    "start": {"class": "range_in_axis", "from": "data", "axis": "B"},
    "sl": {"class": "slice_nd", "from": "data", "start": "start", "size": None},
    "output": {"class": "softmax_over_spatial", "from": "sl"}}, extern={"data": {"dim": 5}}, lens={"data": LENS_LONG})
case("fuzz_slice_nd_per_frame_reduce_time", "fuzz_slice_nd", dict(_FRAMES, **{
    "len": {"class": "length", "from": "data"},
    "st": {"class": "combine", "kind": "eval", "from": ["start", "len"], "allow_broadcast_all_sources": True,
           "eval": "tf.minimum(source(0), source(1) * 0 + source(0))"},
    "sl": {"class": "slice_nd", "from": "data", "start": "st", "size": 2},
    "output": {"class": "reduce", "mode": "sum", "axis": "T", "from": "sl"}}), extern={"data": {"dim": 5}},
    lens={"data": LENS_LONG})
# a feature axis of size 1 broadcasts to another feature axis only before behavior version 11 (RETURNN's
# broadcast_matches); from then on it is an axis of its own: (B, T, F5) + (F1) -> (B, T, F5, F1) when allowed
case("fuzz_combine_variable_shape1_bv12_broadcast_all", "fuzz_combine", {
    "v": {"class": "variable", "shape": [1]},
    "output": {"class": "combine", "kind": "add", "from": ["data", "v"], "allow_broadcast_all_sources": True}},
    extern={"data": {"dim": 5}}, config={"behavior_version": 12})
# scatter_nd writes the padded entries of position too (RETURNN's tf.scatter_nd): here each sequence's frames
# beyond its length (a concat over time reads data's padded frames) all land on frame 0
case("fuzz_scatter_nd_padded_positions_write", "fuzz_scatter_nd", {
    "pre": {"class": "concat", "from": [{"__tuple__": ["data", "T"]}, {"__tuple__": ["data", "T"]}]},
    "t": {"class": "range_in_axis", "from": "pre", "axis": "T"}, "len": {"class": "length", "from": "pre"},
    "pos": {"class": "combine", "kind": "eval", "from": ["t", "len"], "allow_broadcast_all_sources": True,
            "eval": "tf.maximum(source(1) - 1 - source(0), 0)"},
    "output": {"class": "scatter_nd", "from": "pre", "position": "pos", "position_axis": "T",
               "output_dim_via_time_from": "pre"}}, extern={"data": {"dim": 5}}, lens={"data": [6, 4, 2]})
# gather_nd gathers at the padded entries of position too (RETURNN's batch_gather): a reverse cumsum reads them
case("fuzz_gather_nd_padded_positions_reverse_cumsum", "fuzz_gather", {
    "lin": {"class": "linear", "activation": None, "n_out": 6, "from": "data"},
    "pos": {"class": "reduce", "mode": "argmax", "axis": "F", "from": "lin"},
    "g": {"class": "gather_nd", "from": "data", "position": "pos"},
    "output": {"class": "cumsum", "axis": "T", "reverse": True, "from": "g"}}, extern={"data": {"dim": 5}})
# unflatten_nd's positions outside a sequence's grid hold its frame 0 (RETURNN gathers index 0 there), which a
# reverse cumsum reads
case("fuzz_unflatten_nd_padding_reverse_cumsum", "fuzz_unflatten_nd", {
    "len": {"class": "length", "from": "data"},
    "sizes": {"class": "eval", "from": "len", "eval": "tf.concat([source(0) // 2, source(0) * 0 + 2], axis=1)",
              "out_type": {"dims": [{"__dim__": "batch"}, {"__dim__": "two", "dimension": 2, "kind": "feature"}],
                           "dtype": "int32"}},
    "u": {"class": "unflatten_nd", "from": "data", "sizes": "sizes", "num_axes": 2},
    "output": {"class": "cumsum", "reverse": True, "from": "u"}}, extern={"data": {"dim": 4}}, lens={"data": [6, 4, 2]})
# gather takes every axis the position shares with the input per entry (RETURNN's GatherLayer: batch_dims), e.g.
# the frame-wise argmax picks one feature per frame; (B, T, 2, 3) by (B, T, 2) positions into T gives (B, 2, T, 3)
_ARGMAX = {"lin": {"class": "linear", "activation": None, "n_out": 3, "from": "data"},
           "pos": {"class": "reduce", "mode": "argmax", "axis": "F", "from": "lin"}}
case("fuzz_gather_feature_per_frame", "fuzz_gather", dict(_ARGMAX, output={
    "class": "gather", "from": "data", "position": "pos", "axis": "F"}), extern={"data": {"dim": 5}})
case("fuzz_gather_time_common_spatial", "fuzz_gather", dict(_ARGMAX, output={
    "class": "gather", "from": "data", "position": "pos", "axis": "T"}), extern={"data": {"shape": (None, 2, 3)}})
# gather on the batch axis by a position layer (refused here before): the position's batch axis replaces it, a
# common axis (T) gathered per entry; sequences of one length (the gathered rows keep the lengths of the position's)
case("fuzz_gather_batch_per_frame", "fuzz_gather", dict(_ARGMAX, output={
    "class": "gather", "from": "data", "position": "pos", "axis": "B"}), extern={"data": {"shape": (None, 2, 3)}},
    lens={"data": [5, 5, 5]})
case("fuzz_gather_batch_per_sequence", "fuzz_gather", {
    "r": {"class": "range_in_axis", "from": "data", "axis": "B"},
    "pos": {"class": "eval", "from": "r", "eval": "2 - source(0)"},
    "output": {"class": "gather", "from": "data", "position": "pos", "axis": "B"}}, extern={"data": {"dim": 4}},
    lens={"data": [5, 5, 5]})
case("fuzz_gather_batch_by_a_batchless_position", "fuzz_gather", {
    "r": {"class": "range_in_axis", "from": "data", "axis": "T"},
    "pos": {"class": "eval", "from": "r", "eval": "source(0) % 2"},
    "output": {"class": "gather", "from": "data", "position": "pos", "axis": "B"}}, extern={"data": {"dim": 4}},
    lens={"data": [5, 5, 5]})
# a window over the (default) feature axis before behavior version 18: RETURNN's default feature axis of the new
# layout is the window axis (the last static one), which a linear layer then contracts
case("fuzz_window_feature_linear_bv0", "fuzz_window", {
    "l0": {"class": "window", "window_size": 2, "window_right": 1, "axis": "F", "from": "data"},
    "output": {"class": "linear", "n_out": 3, "activation": None, "from": "l0"}}, extern={"data": {"dim": 5}})
# transposed_conv's remove_padding on a sequence shorter than the removed frames: length 0 (RETURNN's dim math)
case("fuzz_transposed_conv_remove_padding_zero_length", "fuzz_transposed_conv", {
    "output": {"class": "transposed_conv", "filter_size": [2], "strides": [1], "n_out": 2, "padding": "same",
               "remove_padding": 1, "from": "data"}}, extern={"data": {"dim": 5}}, lens={"data": [5, 1, 0]})
# transposed_conv's padded frames hold what RETURNN computes there (the bias and the last frames' contributions,
# no masking), which gather_nd reads for a sequence shorter than its position
case("fuzz_transposed_conv_padded_frames_gathered", "fuzz_transposed_conv", {
    "pre": {"class": "transposed_conv", "filter_size": [2], "strides": [1], "n_out": 2, "output_padding": [1],
            "from": "data"},
    "pos": {"class": "range_in_axis", "from": "pre", "axis": "B"},
    "output": {"class": "gather_nd", "from": "pre", "position": "pos"}}, extern={"data": {"dim": 5}},
    config={"behavior_version": 12}, lens={"data": [6, 6, 2]})
# shift_axis with adjust_size_info keeps the lengths of split_dims' padded remainder axis (RETURNN sets them as a
# size tensor tied to no dim tag: the shift's own tag takes them over, its adjusted sizes count as the same); a
# second shift of that output adjusts them: lengths ceil(L / 2) = [3, 2, 0], then [3, 3, 1]
case("fuzz_split_dims_rem_shift_axis_twice", "fuzz_shift_axis", {
    "s": {"class": "split_dims", "axis": "T", "dims": [-1, 2], "from": "data"},
    "a": {"class": "shift_axis", "axis": "T", "amount": -1, "from": "s"},
    "output": {"class": "shift_axis", "axis": "T", "amount": 1, "from": "a"}}, extern={"data": {"dim": 4}},
    config={"behavior_version": 21}, lens={"data": [5, 3, 0]})
case("fuzz_split_dims_rem_first_shift_axis", "fuzz_shift_axis", {
    "s": {"class": "split_dims", "axis": "T", "dims": [2, -1], "from": "data"},
    "output": {"class": "shift_axis", "axis": "T", "amount": 2, "from": "s"}}, extern={"data": {"dim": 4}},
    lens={"data": [4, 2, 3]})
# a variable's add_time_axis is RETURNN's auto-generated dummy time of size 1: before behavior version 11
# (broadcast_matches) it matches data's time axis, (B, T, F) * (B, 1) -> (B, T, F) (with the variable first
# RETURNN fails: its common template takes the dummy time's size 1 for T)
case("fuzz_variable_dummy_time_broadcast_bv0", "fuzz_variable", {
    "v": {"class": "variable", "shape": [], "add_batch_axis": True, "add_time_axis": True, "init": 0.5},
    "output": {"class": "combine", "kind": "mul", "from": ["data", "v"]}}, extern={"data": {"dim": 5}},
    config={"behavior_version": 0})
case("fuzz_variable_dummy_time_feature_bv0", "fuzz_variable", {
    "v": {"class": "variable", "shape": [5], "add_time_axis": True, "init": "glorot_uniform"},
    "output": {"class": "combine", "kind": "add", "from": ["data", "v"]}}, extern={"data": {"dim": 5}},
    config={"behavior_version": 0})
# self_attention reshapes its batch-major, feature-last input to (B, T, heads, -1) (RETURNN): a size-1 axis after
# the time axis is absorbed, the output (B, T, n_out) drops it; also from a time-major input
for _x, _extern in (("", {"data": {"dim": 6}}), ("_time_major", XTM6)):
    case("fuzz_self_attention_size1_axis%s" % _x, "fuzz_self_attention", {
        "l0": {"class": "split_dims", "axis": "F", "dims": [1, -1], "from": "data"},
        "output": {"class": "self_attention", "num_heads": 2, "total_key_dim": 4, "n_out": 6, "from": "l0"}},
        extern=_extern)
# an activation of class indices: RETURNN applies it to the int32 values and keeps the sparse template
for _act in ("square", "1-abs", "sign"):
    case("fuzz_activation_sparse_%s" % _act.replace("-", "_minus_"), "fuzz_activation", {
        "output": {"class": "activation", "activation": _act, "from": "data"}},
        extern={"data": {"dim": 7, "sparse": True}})
# 'stag:NAME' searches a dim's description and its same base's: RETURNN's pad and slice dims are dim math named
# after the input's dim ("time:...+3", "(-1+time:...)+-1"), a conv's or pool's tag ("l0:conv:s0") is the same as
# such a dim math ("(-1+time:...)+-1", "⌈(time:...+-1)/2⌉"): 'stag:time' finds all of them
case("fuzz_stag_time_after_pad", "fuzz_stag", {
    "l0": {"class": "pad", "axes": "T", "padding": [0, 3], "mode": "constant", "value": -2.0, "from": "data"},
    "output": {"class": "cumsum", "axis": "stag:time", "additional_left_summand_per_element": 1.5, "from": "l0"}},
    extern={"data": {"dim": 4}}, config={"behavior_version": 0})
for _n, _l0 in (("slice", {"class": "slice", "axis": "T", "slice_start": 1, "slice_end": -1}),
                ("conv_valid", {"class": "conv", "filter_size": [3], "padding": "valid", "n_out": 3}),
                ("pool_strided", {"class": "pool", "mode": "max", "pool_size": [2], "padding": "valid"})):
    case("fuzz_stag_time_after_%s" % _n, "fuzz_stag", {
        "l0": dict(_l0, **{"from": "data"}),
        "output": {"class": "reduce", "mode": "max", "axis": "stag:extern_data", "from": "l0"}},
        extern={"data": {"dim": 4}}, lens={"data": LENS_LONG})
# a rec layer on an input without time axis (outside a loop) runs one step from its initial state (RETURNN's
# single_step_dim: a time axis of one frame added, then dropped); further axes merge into the batch as usual
_MEAN = {"m": {"class": "reduce", "mode": "mean", "axis": "T", "from": "data"}}
case("fuzz_rec_one_step_merged_batch_time_bv0", "fuzz_rec_one_step", {
    "l0": {"class": "merge_dims", "axes": ["B", "T"], "keep_order": False, "from": "data"},
    "output": {"class": "rec", "unit": "lstm", "n_out": 3, "from": "l0"}}, extern={"data": {"dim": 5}},
    config={"behavior_version": 0}, lens={"data": [6, 6, 2]})
# (RETURNN's TensorFlow-cell units fail there: standardlstm, basiclstm, vanillalstm, layernormvariantslstm)
for _unit, _extra in (("nativelstm2", {"initial_state": "var"}), ("lstm", {"direction": -1})):
    case("fuzz_rec_one_step_%s" % _unit, "fuzz_rec_one_step", dict(_MEAN, output=dict(
        {"class": "rec", "unit": _unit, "n_out": 4, "from": "m"}, **_extra)), extern={"data": {"dim": 5}})
case("fuzz_rec_one_step_extra_axis", "fuzz_rec_one_step", dict(_MEAN, output={
    "class": "rec", "unit": "lstm", "n_out": 3, "from": "m"}), extern={"data": {"shape": (None, 2, 3)}})
# resize (linear), transposed_conv and weighted_sum read their input's padded frames as they are (RETURNN does not
# mask them; transposed_conv's use_time_mask does): after an exp, exp(0) = 1 there reaches a sequence's last frames
_EXP = {"a": {"class": "activation", "activation": "exp", "from": "data"}}
for _n, _l in (("resize_linear", {"class": "resize", "factor": 2, "axis": "T", "kind": "linear"}),
               ("transposed_conv", {"class": "transposed_conv", "filter_size": [3], "strides": [1], "n_out": 2}),
               ("transposed_conv_time_mask", {"class": "transposed_conv", "filter_size": [3], "strides": [1],
                                              "n_out": 2, "use_time_mask": True}),
               ):
    case("fuzz_%s_computed_padding" % _n, "fuzz_computed_padding", dict(_EXP, output=dict(_l, **{"from": "a"})),
         extern={"data": {"dim": 3}})
# (weighted_sum over the feature axis keeps exp(0)'s padded frames summed, which the resize reads)
case("fuzz_weighted_sum_computed_padding", "fuzz_computed_padding", dict(_EXP, **{
    "w": {"class": "weighted_sum", "axes": "F", "size": [3], "padding": "same", "from": "a"},
    "output": {"class": "resize", "factor": 2, "axis": "T", "kind": "linear", "from": "w"}}),
    extern={"data": {"dim": 3}})
# slice_nd with a per-sequence start and an int size equal to an engine-made static axis of the input (extern data
# without dim tags): RETURNN's gather takes the slice axis and that axis as one, out[b, i] = x[b, start_b + i, i]
case("fuzz_slice_nd_size_of_static_axis_diagonal", "fuzz_slice_nd", {
    "start": {"class": "range_in_axis", "from": "data", "axis": "B"},
    "output": {"class": "slice_nd", "from": "data", "start": "start", "size": 2}},
    extern={"data": {"shape": (None, 2, 3)}}, lens={"data": LENS_LONG})
# slice_nd with a start layer on a static axis: RETURNN bounds the positions by the input's axis 1, right only when
# that is the sliced axis (elsewhere refused here: test_build_checks_returnn)
case("fuzz_slice_nd_start_layer_static_axis_one", "fuzz_slice_nd", {
    "start": {"class": "range_in_axis", "from": "data", "axis": "B"},
    "output": {"class": "slice_nd", "from": "data", "start": "start", "size": 2, "axis": "stag:spatial0:static4:data"}},
    extern={"data": {"shape": (4, 3), "time_dim_axis": None}})
# slice with a non-negative end on the time axis: RETURNN's static axis of ceil((end - start) / step) frames (not
# derived from T, so it broadcasts against T); a stepped slice is dim math named after T ('stag:time' finds it)
case("fuzz_slice_end_static_on_time_broadcast", "fuzz_slice", {
    "l0": {"class": "slice", "axis": "T", "slice_end": 4, "slice_step": 2, "from": "data"},
    "output": {"class": "combine", "kind": "add", "from": ["l0", "data"]}}, extern={"data": {"dim": 5}},
    config={"behavior_version": 0}, lens={"data": [4, 2, 3]})
case("fuzz_slice_step_stag_time", "fuzz_slice", {
    "l0": {"class": "slice", "axis": "T", "slice_end": -1, "slice_step": 3, "from": "data"},
    "output": {"class": "softmax_over_spatial", "axis": "stag:time", "from": "l0"}}, extern={"data": {"dim": 5}},
    lens={"data": LENS_LONG})
# reduce with keep_dims replaces the reduced axis by an engine-made static axis of size 1 (RETURNN), also the time
# axis: before behavior version 11 it broadcasts against T, e.g. subtracting the mean over time
case("fuzz_reduce_keep_dims_time_broadcast_bv0", "fuzz_reduce", {
    "r": {"class": "reduce", "mode": "mean", "axis": "T", "keep_dims": True, "from": "data"},
    "output": {"class": "combine", "kind": "sub", "from": ["data", "r"]}}, extern={"data": {"dim": 4}},
    config={"behavior_version": 0})
# shift_axis with adjust_size_info gives the adjusted lengths a fresh dim tag in RETURNN (derived from nothing):
# a combine with the input broadcasts the two time axes (B, T', T, F); a slice whose step rounds end - start = -1
# up to 0 is an empty static axis
case("fuzz_shift_axis_fresh_axis_combine_bv0", "fuzz_shift_axis", {
    "l0": {"class": "shift_axis", "axis": "T", "amount": 1, "pad": True, "from": "data"},
    "output": {"class": "combine", "kind": "minimum", "from": ["l0", "data"]}}, extern={"data": {"dim": 5}},
    config={"behavior_version": 0}, lens={"data": [6, 6, 2]})
case("fuzz_slice_end_before_start_stepped_empty", "fuzz_slice", {
    "output": {"class": "slice", "axis": "T", "slice_start": 3, "slice_end": 2, "slice_step": 3, "from": "data"}},
    extern={"data": {"dim": 5}})
# conv/pool 'padding' as a list longer than the spatial axes: RETURNN reads entry i for spatial axis i (its
# get_out_data_from_opts and int padding), the rest unused (returnn_fuzz --kind mutate --train seed 48: refused here)
case("fuzz_pool_padding_list_longer", "fuzz_padding_list", {
    "output": {"class": "pool", "mode": "max", "pool_size": [3], "padding": [1, 2], "strides": [3], "from": "data"}},
    extern={"data": {"dim": 5}})
case("fuzz_conv_padding_list_longer", "fuzz_padding_list", {
    "output": {"class": "conv", "filter_size": [3], "padding": [2, 0], "n_out": 3, "from": "data"}},
    extern={"data": {"dim": 5}})
# batch_norm (masked_time) on a value whose time axis is static: RETURNN's copy_time_flattened then only merges
# batch and time, nothing masked (the padding of another dynamic axis counts) (returnn_fuzz chain seed 330)
case("fuzz_batch_norm_static_time_axis_unmasked", "fuzz_batch_norm", {
    "l0": {"class": "split_dims", "axis": "T", "dims": [2, -1], "from": "data"},
    "l1": {"class": "reinterpret_data", "set_axes": {"T": "F"}, "from": "l0"},
    "output": {"class": "batch_norm", "use_shift": False, "momentum": 0.1, "from": "l1"}},
    extern={"data": {"dim": 5}}, lens={"data": [4, 2, 3]})
# merge_dims' axis is RETURNN's dim-math product, described "time:var:extern_data:data*feature:data": 'stag:time'
# finds it (returnn_fuzz chain seed 323)
case("fuzz_merge_dims_product_found_by_stag", "fuzz_merge_dims", {
    "l0": {"class": "merge_dims", "axes": "except_batch", "from": "data"},
    "output": {"class": "softmax_over_spatial", "axis": "stag:time", "energy_factor": 0.5, "log_space": True,
               "window_size": 3, "from": "l0"}}, extern={"data": {"dim": 5}})
# ... and with add_time_axis (a static time axis of size 1 first; returnn_fuzz mutate seed 170). RETURNN's
# get_common_data adds the variable's two size-1 axes one by one and the second meets the first: one axis (here
# two before). (With the variable first at behavior version 0 RETURNN's template and its tensor disagree.)
for _bv in (0, 12, 21):
    case("fuzz_combine_variable_add_time_axis_bv%i_broadcast_all" % _bv, "fuzz_combine", {
        "v": {"class": "variable", "shape": [1], "add_time_axis": True},
        "output": {"class": "combine", "kind": "add", "from": ["data", "v"], "allow_broadcast_all_sources": True}},
        extern={"data": {"dim": 5}}, config={"behavior_version": _bv})
    if _bv:
        case("fuzz_combine_variable_add_time_axis_bv%i_reversed" % _bv, "fuzz_combine", {
            "v": {"class": "variable", "shape": [1], "add_time_axis": True},
            "output": {"class": "combine", "kind": "mul", "from": ["v", "data"], "allow_broadcast_all_sources": True}},
            extern={"data": {"dim": 5}}, config={"behavior_version": _bv})
# (of shape [3, 3] the two axes are one as well, and RETURNN fails: refused, tests/test_option_effects.py)
for _shape in ([1, 1], [1, 3]):
    case("fuzz_combine_variable_shape%s_bv12_broadcast_all" % "x".join(map(str, _shape)), "fuzz_combine", {
        "v": {"class": "variable", "shape": _shape},
        "output": {"class": "combine", "kind": "add", "from": ["data", "v"], "allow_broadcast_all_sources": True}},
        extern={"data": {"dim": 5}}, config={"behavior_version": 12})
# a valid window over a slice shorter than it, shifted (returnn_fuzz mutate seed 250 #35)
case("fuzz_window_valid_after_slice_from_2_then_shift", "window", {
    "sl": {"class": "slice", "from": "data", "axis": "T", "slice_start": 2, "slice_end": -1},
    "w": {"class": "window", "from": "sl", "window_size": 3, "padding": "valid"},
    "red": {"class": "reduce", "mode": "sum", "from": "w", "axis": "static:0"},
    "output": {"class": "shift_axis", "from": "red", "axis": "T", "amount": 1}}, extern={"data": {"dim": 6}},
    lens={"data": [4, 0, 3]})
# pad in mode replication (or reflect) with handle_dynamic_dims (behavior_version 21) and no right padding: RETURNN
# masks nothing, so an empty sequence replicates the input's padded frame 0 (zeros), not 'value' (returnn_fuzz
# chain seed 382 #12)
for _mode in ("replication", "reflect"):
    case("fuzz_pad_%s_left_bv21_empty_sequence" % _mode, "fuzz_pad", {
        "output": {"class": "pad", "axes": "spatial", "padding": [2, 0], "mode": _mode, "value": -2.0,
                   "from": "data"}}, extern={"data": {"dim": 6}}, config={"behavior_version": 21},
        lens={"data": [5, 3, 0]})
# swap_axes of T and F in (B, T, S, F) without an explicit feature axis: RETURNN leaves the feature axis to its
# default rule on the new layout, the static S (a linear after it reads S: returnn_fuzz chain seed 384 #84)
case("fuzz_swap_axes_time_feature_unspecified_feature_then_linear", "fuzz_swap_axes", {
    "sw": {"class": "swap_axes", "axis1": "T", "axis2": "F", "from": "data"},
    "output": {"class": "linear", "n_out": 5, "activation": "tanh", "from": "sw"}},
    extern={"data": {"shape": (None, 3, 4)}}, config={"behavior_version": 12})
# split_dims of the batch axis into dims the batch is no multiple of: RETURNN pads the batch (a dynamic dim, so
# pad_to_multiples by default) with pad_value, the golden batch of 3 -> (2, 2) (returnn_fuzz mutate seed 236 #96:
# a traceback here, the reshape failed); without padding RETURNN fails as here
case("fuzz_split_dims_batch_axis_padded", "split_dims_batch", {
    "red": {"class": "reduce", "mode": "mean", "axis": "T", "from": "data"},
    "output": {"class": "split_dims", "axis": "B", "dims": [2, -1], "pad_value": 0.5, "from": "red"}},
    extern={"data": {"dim": 5}})
# shift_axis along the batch axis: RETURNN shifts the rows (sequences) as they are, each row keeping the sizes of
# its position (returnn_fuzz mutate seed 245 #35: a traceback here)
case("fuzz_shift_axis_batch", "fuzz_shift_axis", {
    "output": {"class": "shift_axis", "axis": "b", "amount": 1, "pad_value": 0.5, "from": "data"}},
    extern={"data": {"dim": 5}})
# softmax_over_spatial with log_space: RETURNN's log_softmax of the masked energies, also below log(1e-30) where the
# weights underflow (here clamped at log(1e-30) = -69.08 before; found beside returnn_fuzz chain seed 387 #10)
case("fuzz_softmax_over_spatial_log_space_peaked", "fuzz_softmax_over_spatial", {
    "output": {"class": "softmax_over_spatial", "energy_factor": 60.0, "log_space": True, "from": "data"}},
    extern={"data": {"dim": 4}})
# dot of sparse indices reducing another axis than their sparse dim (T): RETURNN multiplies the int indices as they
# are (its matmul, padded frames masked; with float values beside them it fails). Was refused here (returnn_fuzz
# chain seed 400 #85 GAP)
for _bv, _vars in ((0, {"var1": None, "var2": "F"}), (12, {})):
    case("fuzz_dot_sparse_indices_reduce_time_bv%i" % _bv, "fuzz_dot", {
        "l0": {"class": "pad", "axes": "T", "padding": [1, 2], "mode": "replication", "from": "data"},
        "output": dict({"class": "dot", "from": ["l0", "l0"], "reduce": "T"}, **_vars)},
        extern={"data": {"dim": 7, "sparse": True}}, config={"behavior_version": _bv}, lens={"data": [5, 3, 1]})
# positional_encoding along the batch axis ("b"): RETURNN's positions are the sequences' indices (plus the offset);
# on a (B, F) input too, not one rec step (returnn_fuzz mutate seed 269 #56 GAP: refused here)
case("fuzz_positional_encoding_batch_axis_offset", "fuzz_positional_encoding", {
    "lin": {"class": "linear", "activation": None, "n_out": 8, "from": "data"},
    "split": {"class": "split_dims", "axis": "F", "dims": [2, 4], "from": "lin"},
    "off": {"class": "length", "from": "data"},
    "output": {"class": "positional_encoding", "add_to_input": True, "offset": "off", "from": "split", "axis": "b"}},
    extern={"data": {"dim": 5}})
case("fuzz_positional_encoding_batch_axis_no_time", "fuzz_positional_encoding", {
    "red": {"class": "reduce", "mode": "mean", "axis": "T", "from": "data"},
    "output": {"class": "positional_encoding", "n_out": 6, "from": "red", "axis": "b"}}, extern={"data": {"dim": 5}})
# a negative slice_step on a dynamic axis: RETURNN slices the padded tensor (reversed from slice_start) and takes its
# dim math's sizes (length - start) / |step|, so shorter sequences start with padding frames (returnn_fuzz rec seed
# 93 #61 GAP: refused here). Where those sizes exceed the slice's frames the step stops (tests/test_slice_layer.py)
for _start, _step in ((None, -1), (3, -1), (5, -2)):
    case("fuzz_slice_negative_step_dynamic_start%s_step%i" % (_start, -_step), "fuzz_slice", {
        "lin": {"class": "linear", "activation": "tanh", "n_out": 3, "from": "data"},
        "output": {"class": "slice", "axis": "T", "slice_start": _start, "slice_step": _step, "from": "lin"}},
        extern={"data": {"dim": 4}})
# elemwise_prod over no axes ('spatial' where there is no static one): RETURNN's W is a scalar (returnn_fuzz chain
# seed 405 #83 GAP: refused here)
case("fuzz_elemwise_prod_no_axes_after_reduce", "elemwise_prod", {
    "pre": {"class": "reduce", "mode": "logsumexp", "axis": ["T", "F"], "from": "data"},
    "output": {"class": "elemwise_prod", "from": "pre", "axes": "spatial"}}, extern={"data": {"dim": 5}})
case("fuzz_elemwise_prod_no_axes_batch_feature", "elemwise_prod", {
    "pre": {"class": "reduce", "mode": "max", "axis": "T", "from": "data"},
    "output": {"class": "elemwise_prod", "from": "pre", "axes": "spatial"}}, extern={"data": {"dim": 5}})
# the batch_norm option normalises a layer's padded frames too (RETURNN's placeholder as a whole): a resize after it
# reads them (returnn_fuzz mutate seed 289 #33 DIFFER: zeros here); on a copy of data its zero frames normalised
case("fuzz_batch_norm_option_padded_frames_rec_need_last_resize", "fuzz_batch_norm_option", {
    "r": {"class": "rec", "from": "data", "batch_norm": True, "unit": {
        "output": {"class": "linear", "n_out": 3, "activation": "tanh", "from": ["data:source", "prev:output"],
                   "need_last": True}}},
    "output": {"class": "resize", "factor": 2, "axis": "T", "kind": "linear", "from": "r"}},
    extern={"data": {"dim": 4}}, lens={"data": [6, 4, 1]})
case("fuzz_batch_norm_option_padded_frames_copy_resize", "fuzz_batch_norm_option", {
    "c": {"class": "copy", "from": "data", "batch_norm": True},
    "output": {"class": "resize", "factor": 2, "axis": "T", "kind": "linear", "from": "c"}},
    extern={"data": {"dim": 4}}, lens={"data": [6, 4, 1]})
# prefix_in_time's size_base: RETURNN's output takes that layer's time dim and sizes over the prefix and the input's
# frames as they are (returnn_fuzz mutate seed 288 #33 GAP: an unknown option here)
case("fuzz_prefix_in_time_size_base_own_input", "fuzz_prefix_in_time", {
    "output": {"class": "prefix_in_time", "prefix": 0.5, "from": "data", "size_base": "data"}},
    extern={"data": {"dim": 4}})
case("fuzz_prefix_in_time_size_base_longer", "fuzz_prefix_in_time", {
    "post": {"class": "postfix_in_time", "postfix": 1.0, "repeat": 2, "from": "data"},
    "lin": {"class": "linear", "activation": "tanh", "n_out": 3, "from": "data"},
    "pre": {"class": "prefix_in_time", "prefix": -0.5, "repeat": 2, "from": "lin", "size_base": "post"},
    "output": {"class": "combine", "kind": "add", "from": ["pre", "post"]}}, extern={"data": {"dim": 3}})
