"""Golden cases of layers whose options take Dim objects (written as golden_dims.py markers, loaded
by make_goldens.py): reshape, unflatten_nd, boolean_mask, fold, range, range_from_length, remove,
cum_concat in a rec loop (self-attention over the frames so far).

Left out because RETURNN itself fails on them: ``remove`` also with an ``out_dim`` (its sanity check:
"dynamic dim Dim{'removed'[?]} undefined"), ``range`` with float arguments (its output template
takes ``len(range(start, limit, delta))``: "'float' object cannot be interpreted as an integer"),
``cum_concat`` attention whose query reads ``prev:output`` (its loop template: "dynamic dim
Dim{'hist'} value unknown"; the same net without the prev: reference kept in the loop builds).
``boolean_mask`` over (B, T): RETURNN's tf.boolean_mask also takes padded frames where the mask
layer is True there (stored with zero padding), as this engine does (it took real frames only before:
returnn_fuzz mutate seed 281 #98).
"""
from golden_dims import dim_marker, dim_ref
from make_goldens import CASES, case

TIME = dim_marker("time")
FEAT6 = dim_marker("feat", 6, "feature")
X6_DIMS = {"data": {"dim_tags": [dim_ref("batch"), TIME, FEAT6]}}
EVEN = {"data": [6, 4, 2]}


def _lin(n, src="data", act=None):
    return {"class": "linear", "activation": act, "with_bias": True, "n_out": n, "from": src}


# --- reshape
case("reshape_split_feature", "reshape", {"output": {
    "class": "reshape", "from": "data", "in_dims": [dim_ref("feat")],
    "out_dims": [dim_marker("f2", 2, "spatial"), dim_marker("f3", 3, "feature")]}}, extern=X6_DIMS)
case("reshape_merge_time_feature_static", "reshape", {
    "split": {"class": "reshape", "from": "data", "in_dims": [dim_ref("feat")],
              "out_dims": [dim_marker("f2", 2, "spatial"), dim_marker("f3", 3, "feature")]},
    "output": {"class": "reshape", "from": "split", "in_dims": [dim_ref("f3"), dim_ref("f2")],
               "out_dims": [dim_marker("f6", 6, "feature")]}}, extern=X6_DIMS,
    notes="in_dims in another order than the input's: the axes are permuted before the reshape")

# --- unflatten_nd: (B, T, F) -> (B, W, H, F) with sizes (W, H) = (T/2, 2) per sequence
case("unflatten_nd_two_axes", "unflatten_nd", {
    "len": {"class": "length", "from": "data"},
    "sizes": {"class": "eval", "from": "len", "eval": "tf.concat([source(0) // 2, source(0) * 0 + 2], axis=1)",
              "out_type": {"dims": [dim_ref("batch"), dim_marker("two", 2, "feature")], "dtype": "int32"}},
    "output": {"class": "unflatten_nd", "from": "data", "sizes": "sizes", "num_axes": 2}}, lens=EVEN)

# batch_norm over two dynamic axes: RETURNN flattens only (batch, time) (copy_time_flattened) and takes
# tf.nn.moments there, so the padded positions of the other dynamic axis (unflatten_nd's zeros) count
case("batch_norm_two_dynamic_axes", "unflatten_nd", {
    "len": {"class": "length", "from": "data"},
    "sizes": {"class": "eval", "from": "len", "eval": "tf.concat([source(0) * 0 + 2, source(0) // 2], axis=1)",
              "out_type": {"dims": [dim_ref("batch"), dim_marker("two", 2, "feature")], "dtype": "int32"}},
    "grid": {"class": "unflatten_nd", "from": "data", "sizes": "sizes", "num_axes": 2},
    "output": {"class": "batch_norm", "from": "grid", "momentum": 0.1}}, lens=EVEN, train=True)

# --- boolean_mask
case("boolean_mask_batch_time", "boolean_mask", {
    "red": {"class": "reduce", "mode": "sum", "axis": "F", "from": "data"},
    "mask": {"class": "compare", "kind": "greater", "value": 0.0, "from": "red"},
    "output": {"class": "boolean_mask", "from": "data", "mask": "mask", "dims": [dim_ref("batch"), dim_ref("time")],
               "out_dim": dim_marker("masked")}}, extern=X6_DIMS,
    notes="the frames with a positive feature sum, all sequences packed into one axis (batch-less output)")
case("boolean_mask_batch_time_padded_frames_true", "boolean_mask", {
    "red": {"class": "reduce", "mode": "sum", "axis": "F", "from": "data"},
    "mask": {"class": "compare", "kind": "greater", "value": -1, "from": "red"},
    "output": {"class": "boolean_mask", "from": "data", "mask": "mask", "dims": [dim_ref("batch"), dim_ref("time")],
               "out_dim": dim_marker("masked")}}, extern=X6_DIMS,
    notes="the mask True on padded frames too (their sum 0 > -1): RETURNN takes them")

# --- fold (the inverse of window)
case("fold_mean_same", "fold", {
    "win": {"class": "window", "from": "data", "window_size": 3, "window_dim": dim_marker("win", 3)},
    "output": {"class": "fold", "from": "win", "mode": "mean", "in_spatial_dim": dim_ref("time"),
               "window_dim": dim_ref("win")}}, extern=X6_DIMS)
case("fold_sum_same", "fold", {
    "win": {"class": "window", "from": "data", "window_size": 3, "window_dim": dim_marker("win", 3)},
    "output": {"class": "fold", "from": "win", "mode": "sum", "in_spatial_dim": dim_ref("time"),
               "window_dim": dim_ref("win")}}, extern=X6_DIMS)
case("fold_mean_valid", "fold", {
    "win": {"class": "window", "from": "data", "window_size": 3, "padding": "valid", "window_dim": dim_marker("win", 3),
            "out_spatial_dim": dim_marker("wtime")},
    "output": {"class": "fold", "from": "win", "mode": "mean", "padding": "valid", "in_spatial_dim": dim_ref("wtime"),
               "window_dim": dim_ref("win")}}, extern=X6_DIMS, lens={"data": [7, 5, 3]})
# stride 0 (RETURNN takes it: every frame's window added at position 0; refused here before, mutate seed 54)
case("fold_sum_valid_stride0", "fold", {
    "win": {"class": "window", "from": "data", "window_size": 3, "window_dim": dim_marker("win", 3)},
    "output": {"class": "fold", "from": "win", "mode": "sum", "padding": "valid", "stride": 0,
               "in_spatial_dim": dim_ref("time"), "window_dim": dim_ref("win")}}, extern=X6_DIMS)
case("fold_mean_valid_stride0", "fold", {
    "win": {"class": "window", "from": "data", "window_size": 3, "window_dim": dim_marker("win", 3)},
    "output": {"class": "fold", "from": "win", "mode": "mean", "padding": "valid", "stride": 0,
               "in_spatial_dim": dim_ref("time"), "window_dim": dim_ref("win")}}, extern=X6_DIMS)

# a stride over 1: RETURNN's new axis (n * stride + the sides) is longer than the frames the windows reach; those
# frames are zeros here (its value stops short of its own sizes; returnn_fuzz mutate --train seed 212 #4)
case("fold_mean_valid_stride2", "fold", {
    "win": {"class": "window", "from": "data", "window_size": 3, "padding": "valid", "window_dim": dim_marker("win", 3),
            "out_spatial_dim": dim_marker("wtime")},
    "output": {"class": "fold", "from": "win", "mode": "mean", "padding": "valid", "stride": 2,
               "in_spatial_dim": dim_ref("wtime"), "window_dim": dim_ref("win")}}, extern=X6_DIMS, lens={"data": [7, 5, 3]})
case("fold_sum_same_stride3_window2", "fold", {
    "win": {"class": "window", "from": "data", "window_size": 2, "window_dim": dim_marker("win", 2)},
    "output": {"class": "fold", "from": "win", "mode": "sum", "stride": 3, "in_spatial_dim": dim_ref("time"),
               "window_dim": dim_ref("win")}}, extern=X6_DIMS)

# --- range, range_from_length
case("range_over_feature", "range", {
    "r": {"class": "range", "limit": 12, "start": 0, "delta": 2, "dtype": "float32", "out_spatial_dim": dim_ref("feat")},
    "output": {"class": "combine", "kind": "mul", "from": ["data", "r"]}}, extern=X6_DIMS,
    notes="a range on the data's feature dim, broadcast over batch and time")
case("range_same_size_as_feature_bv0", "range", {
    "r": {"class": "range", "limit": 12, "start": 0, "delta": 2, "dtype": "float32"},
    "output": {"class": "combine", "kind": "mul", "from": ["data", "r"]}}, extern=X6_DIMS,
    config={"behavior_version": 0},
    notes="before behavior version 16 RETURNN's get_common_data matches static axes of one size (a feature axis "
          "as spatial), user-made too: the range meets the feature axis (returnn_fuzz mutate seed 36); from 16 it "
          "is its own axis, and every source needs broadcasting (refused from behavior version 4)")
case("range_from_length", "range", {
    "len": {"class": "length", "from": "data"},
    "r": {"class": "range_from_length", "from": "len"},
    "rf": {"class": "cast", "dtype": "float32", "from": "r"},
    "output": {"class": "combine", "kind": "add", "from": ["data", "rf"]}},
    notes="the range has the data's time dim (the length's tag): added per frame")
case("range_from_length_own_dim", "range", {
    "len": {"class": "length", "from": "data"},
    "double": {"class": "eval", "from": "len", "eval": "source(0) * 2"},
    "r": {"class": "range_from_length", "from": "double", "out_spatial_dim": dim_marker("t2")},
    "rf": {"class": "cast", "dtype": "float32", "from": "r"},
    "lenf": {"class": "cast", "dtype": "float32", "from": "len"},
    "output": {"class": "combine", "kind": "add", "from": ["lenf", "rf"]}},
    notes="a new dim whose sizes are twice the lengths")

# --- remove
case("remove_symbol", "remove", {"output": {"class": "remove", "from": "data", "symbol": 2,
                                            "out_dim": dim_marker("removed")}},
     extern={"data": {"dim": 4, "sparse": True}})

# --- cum_concat in a rec loop: attention over the frames so far (RETURNN's
# test_reclayer_optimize_out_cum_concat_gen_self_att)
KEY, VAL = dim_marker("key", 3, "feature"), dim_marker("val", 4, "feature")
ATT_UNIT = {
    "q": {"class": "linear", "activation": None, "out_dim": KEY, "from": ["data:source", "prev:output"]},
    "k": {"class": "linear", "activation": None, "out_dim": dim_ref("key"), "from": "data:source"},
    "v": {"class": "linear", "activation": None, "out_dim": VAL, "from": "data:source"},
    "k_acc": {"class": "cum_concat", "from": "k", "out_spatial_dim": dim_marker("hist")},
    "v_acc": {"class": "cum_concat", "from": "v", "out_spatial_dim": dim_ref("hist")},
    "energy": {"class": "dot", "from": ["q", "k_acc"], "red1": dim_ref("key"), "red2": dim_ref("key"), "var1": None,
               "var2": dim_ref("hist")},
    "att_w": {"class": "softmax_over_spatial", "from": "energy", "axis": dim_ref("hist")},
    "att": {"class": "dot", "from": ["att_w", "v_acc"], "red1": dim_ref("hist"), "red2": dim_ref("hist"),
            "var1": None, "var2": dim_ref("val")},
    "output": {"class": "linear", "activation": "tanh", "n_out": 3, "from": "att"},
}
case("cum_concat_self_att_moved_out", "cum_concat", {"output": {"class": "rec", "from": "data", "unit": dict(
    ATT_UNIT, q={"class": "linear", "activation": None, "out_dim": KEY, "from": "data:source"})}},
    notes="nothing depends on prev: RETURNN moves the whole unit out of the loop")
case("cum_concat_self_att_kept_in_loop", "cum_concat", {"output": {
    "class": "rec", "from": "data", "optimize_move_layers_out": False, "unit": dict(
        ATT_UNIT, q={"class": "linear", "activation": None, "out_dim": KEY, "from": "data:source"})}},
    notes="as moved out, but optimize_move_layers_out False: step by step")

# --- length-0 sequences
for _name, _lens in (("reshape_split_feature", [5, 3, 0]), ("unflatten_nd_two_axes", [4, 2, 0]),
                     ("boolean_mask_batch_time", [5, 3, 0]), ("fold_mean_same", [5, 3, 0]),
                     ("fold_mean_valid", [5, 3, 0]), ("range_from_length_own_dim", [5, 3, 0]),
                     ("cum_concat_self_att_moved_out", [5, 3, 0]), ("cum_concat_self_att_kept_in_loop", [5, 3, 0])):
    _c = CASES[_name]
    case(_name + "_zero_len", _c["family"], _c["network"], extern=_c["extern"], config=_c["config"],
         lens={"data": _lens}, notes=_c["notes"])
# --- reinterpret_data naming two axes at once (Zettelkasten/returnn-self-attention's heads and rounds): this engine
# kept the renames in a dict keyed by Dims on the layer, which tf.Module's tracking cannot sort (a crash)
case("reinterpret_data_set_two_dim_tags", "reinterpret_data", {
    "s": {"class": "split_dims", "axis": "F", "dims": [2, 3], "from": "data"},
    "n": {"class": "reinterpret_data", "from": "s", "set_dim_tags": {"static:0": dim_marker("heads", 2),
                                                                    "static:1": dim_marker("inner", 3)}},
    "output": {"class": "reduce", "mode": "sum", "axis": "stag:heads", "from": "n"}}, extern={"data": {"dim": 6}})
# length with add_time_axis: RETURNN's (B, 1) has an engine-made time axis of size 1, which broadcasts against the
# time axis of another source (this engine kept both axes: (B, T, 1, F); mutate --train seed 62)
case("length_add_time_axis_broadcasts", "length", {
    "len": {"class": "length", "from": "data", "add_time_axis": True},
    "c": {"class": "cast", "dtype": "float32", "from": "len"},
    "output": {"class": "combine", "kind": "add", "from": ["data", "c"]}}, extern={"data": {"dim": 3}})

# --- dim math makes a fold's (a pad's) axis the one the window (the conv) cut: RETURNN's linear terms cancel,
# ``2 + ((-1+time)+-1) + 0`` is ``time`` itself, with its sizes (returnn_fuzz mutate seed 158: a new axis here, of
# size 2 for a sequence of 0 or 1 frames, and not the data's time axis)
for _lens, _sfx in (([5, 3, 0], "zero_len"), ([5, 1, 2], "short")):
    case("fold_valid_after_valid_window_" + _sfx, "fold", {
        "win": {"class": "window", "from": "data", "window_size": 3, "padding": "valid", "window_dim": dim_marker("win", 3),
                "out_spatial_dim": dim_marker("wtime")},
        "fold": {"class": "fold", "from": "win", "mode": "mean", "padding": "valid", "window_left": 2,
                 "in_spatial_dim": dim_ref("wtime"), "window_dim": dim_ref("win")},
        "output": {"class": "copy", "from": "fold"}}, extern=X6_DIMS, lens={"data": _lens})
    case("pad_after_valid_conv_" + _sfx, "pad", {
        "conv": {"class": "conv", "from": "data", "filter_size": [3], "padding": "valid", "n_out": 6,
                 "activation": None},
        "pad": {"class": "pad", "from": "conv", "axes": "T", "padding": 1},
        "output": {"class": "combine", "kind": "add", "from": ["pad", "data"]}}, extern=X6_DIMS, lens={"data": _lens})
case("fold_same_is_the_time_axis", "fold", {
    "win": {"class": "window", "from": "data", "window_size": 3, "window_dim": dim_marker("win", 3)},
    "fold": {"class": "fold", "from": "win", "mode": "sum", "in_spatial_dim": dim_ref("time"), "window_dim": dim_ref("win")},
    "output": {"class": "combine", "kind": "add", "from": ["fold", "data"]}}, extern=X6_DIMS, lens={"data": [5, 3, 0]})
# the other int forms of window_left/window_right: RETURNN merges an int side with the valid window's cut next to it
for _k, _sides in ((4, {"window_right": 0}), (4, {"window_left": 1, "window_right": 1}), (3, {"window_left": 0}),
                   (4, {"window_left": 3})):
    case("fold_valid_after_valid_window_k%i_%s" % (_k, "_".join("%s%i" % (k[7], v) for k, v in _sides.items())),
         "fold", {
             "win": {"class": "window", "from": "data", "window_size": _k, "padding": "valid",
                     "window_dim": dim_marker("win", _k), "out_spatial_dim": dim_marker("wtime")},
             "output": {"class": "fold", "from": "win", "mode": "sum", "padding": "valid", "in_spatial_dim": dim_ref("wtime"),
                        "window_dim": dim_ref("win"), **_sides}}, extern=X6_DIMS, lens={"data": [6, 2, 0]})
# the padded axis alone, and after a valid window: RETURNN's sizes are time's (``1 + ((-1+time)+-1) + 1`` is time)
case("pad_after_valid_conv_alone", "pad", {
    "conv": {"class": "conv", "from": "data", "filter_size": [3], "padding": "valid", "n_out": 6, "activation": None},
    "output": {"class": "pad", "from": "conv", "axes": "T", "padding": 1}}, extern=X6_DIMS, lens={"data": [5, 1, 0]})
case("pad_after_valid_window", "pad", {
    "win": {"class": "window", "from": "data", "window_size": 3, "padding": "valid"},
    "red": {"class": "reduce", "mode": "sum", "from": "win", "axis": "static:0"},
    "pad": {"class": "pad", "from": "red", "axes": "T", "padding": 1},
    "output": {"class": "combine", "kind": "add", "from": ["pad", "data"]}}, extern=X6_DIMS, lens={"data": [5, 1, 0]})
# RETURNN's dim math keeps the cut of each side apart ((a + time) + b, sizes clipped at 0 after a negative term,
# an int of a later pad or slice merged into the side it is on): a valid conv then a pad on the left only is
# time + -1, and a slice from 2 then a pad on the right is (-2+time)+1 (not one rule T + offset)
CONV3 = {"class": "conv", "from": "data", "filter_size": [3], "padding": "valid", "n_out": 6, "activation": None}
case("pad_left_after_valid_conv", "pad", {
    "conv": CONV3, "output": {"class": "pad", "from": "conv", "axes": "T", "padding": [(1, 0)]}},
    extern=X6_DIMS, lens={"data": [5, 1, 0]})
case("pad_right_after_slice", "pad", {
    "sl": {"class": "slice", "from": "data", "axis": "T", "slice_start": 2},
    "output": {"class": "pad", "from": "sl", "axes": "T", "padding": [(0, 1)]}}, extern=X6_DIMS, lens={"data": [5, 1, 0]})
case("combine_valid_conv_and_crop", "pad", {
    "conv": CONV3, "crop": {"class": "slice", "from": "data", "axis": "T", "slice_start": 1, "slice_end": -1},
    "output": {"class": "combine", "kind": "add", "from": ["conv", "crop"]}}, extern=X6_DIMS, lens={"data": [5, 2, 0]})
# (a valid conv and a slice from 2, '(-1+time)+-1' and '-2+time', are two axes to RETURNN, which then fails to match
# them: refused, tests/test_option_effects.py)
# a valid pool over a batch shorter than its window: no frame (TF's pool), then padded (returnn dimfuzz seed 2 #35;
# here the pool ran on the batch padded to the window: one frame more)
case("pool_valid_on_a_too_short_batch_then_pad", "pad", {
    "sl": {"class": "slice", "from": "data", "axis": "T", "slice_start": 2, "slice_end": -1},
    "pool": {"class": "pool", "from": "sl", "pool_size": [3], "padding": "valid", "mode": "max"},
    "output": {"class": "pad", "from": "pool", "axes": "T", "padding": [(0, 2)]}}, extern=X6_DIMS,
    lens={"data": [5, 1, 2]})
# RETURNN's dim-math tree (returnn/tf/layers/dim_shift.py): postfix_in_time then a slice from 3 is -3+(time+1),
# sizes relu(T-2) (here relu(T-3)+1 before), and a pad after it -1+(time+3) (returnn dimfuzz seed 11 #52, #46,
# #23: a pad after a postfix after a valid conv)
case("postfix_then_slice_from_3", "postfix_in_time", {
    "post": {"class": "postfix_in_time", "from": "data", "postfix": 0.5, "repeat": 2},
    "output": {"class": "slice", "from": "post", "axis": "T", "slice_start": 3, "slice_end": -1}},
    extern=X6_DIMS, lens={"data": [5, 1, 2]})
case("postfix_then_slice_then_pad", "postfix_in_time", {
    "post": {"class": "postfix_in_time", "from": "data", "postfix": 0.5, "repeat": 2},
    "sl": {"class": "slice", "from": "post", "axis": "T", "slice_start": 1, "slice_end": -1},
    "output": {"class": "pad", "from": "sl", "axes": "T", "padding": [(0, 2)]}}, extern=X6_DIMS, lens={"data": [7, 3, 0]})
case("valid_conv_then_postfix_then_pad", "postfix_in_time", {
    "conv": CONV3, "post": {"class": "postfix_in_time", "from": "conv", "postfix": 0.5, "repeat": 1},
    "output": {"class": "pad", "from": "post", "axes": "T", "padding": [(1, 1)]}}, extern=X6_DIMS,
    lens={"data": [5, 1, 0]})
# repeat: each sequence's frames beyond its new length are zeros (RETURNN appends one zero frame and repeats it
# there), which a strided conv reads (returnn_fuzz --kind dims seed 1 #22, #44: here the last frame of the batch)
case("repeat_then_strided_conv", "repeat", {
    "r": {"class": "repeat", "from": "data", "repetitions": 2, "axis": "T"},
    "output": {"class": "conv", "from": "r", "filter_size": [3], "padding": "same", "strides": [2], "n_out": 6,
               "activation": None}}, extern=X6_DIMS, lens={"data": [5, 1, 2]})
# a valid window over a batch shorter than it: no window (returnn_fuzz --kind dims seed 5 #57: here one of padding,
# which a shift_axis moved into the sequences)
case("window_valid_on_a_too_short_batch_then_shift", "window", {
    "sl": {"class": "slice", "from": "data", "axis": "T", "slice_start": 1, "slice_end": -1},
    "w": {"class": "window", "from": "sl", "window_size": 3, "padding": "valid"},
    "red": {"class": "reduce", "mode": "sum", "from": "w", "axis": "static:0"},
    "output": {"class": "shift_axis", "from": "red", "axis": "T", "amount": 1}}, extern=X6_DIMS, lens={"data": [4, 0, 3]})

# postfix_in_time / prefix_in_time over a static axis (RETURNN's 'axis'; refused here before: returnn_fuzz mutate
# seed 214 #44): the number appended to / put before that axis
case("postfix_in_time_feature_axis", "postfix_in_time", {
    "post": {"class": "postfix_in_time", "from": "data", "postfix": 0.5, "repeat": 2, "axis": "F"},
    "output": {"class": "slice", "from": "post", "axis": "T", "slice_start": 1}}, extern=X6_DIMS)
case("prefix_in_time_static_spatial_axis", "postfix_in_time", {
    "output": {"class": "prefix_in_time", "from": "data", "prefix": -1.0, "repeat": 1,
               "axis": "stag:spatial1:static3:data"}}, extern={"data": {"shape": (None, 3, 4)}})

# RETURNN's dim math for strided convs and pools (ceildiv_right), upsamplings (transposed conv, resize, repeat:
# ``in * n``) and its simplifications: ceildiv(x * n, n) is x. Two equal strided convs share their axis, a pool
# of stride 2 after an upsampling by 2 is the axis before it (returnn_fuzz --kind dims seeds 14, 18-20: refused
# here before as "both derive from" the time axis)
STRIDED_SAME = {"class": "conv", "from": "data", "filter_size": [2], "padding": "same", "strides": [2], "n_out": 6,
                "activation": None}
case("two_equal_strided_convs_share_their_axis", "conv", {
    "a": STRIDED_SAME, "b": dict(STRIDED_SAME),
    "output": {"class": "combine", "kind": "add", "from": ["a", "b"]}}, extern=X6_DIMS, lens={"data": [7, 5, 0]})
case("valid_conv_upsampled_then_pooled_is_its_axis", "conv", {
    "l0": {"class": "conv", "from": "data", "filter_size": [3], "padding": "valid", "strides": [2], "n_out": 6,
           "activation": None},
    "l1": {"class": "transposed_conv", "from": "l0", "filter_size": [2], "strides": [2], "n_out": 6,
           "activation": None, "padding": "same"},
    "l2": {"class": "pool", "from": "l1", "pool_size": [2], "padding": "same", "strides": [2], "mode": "avg"},
    "output": {"class": "combine", "kind": "add", "from": ["l2", "l0"]}}, extern=X6_DIMS, lens={"data": [7, 5, 1]})
case("resize_pool_resize_is_one_axis", "resize", {
    "l0": {"class": "resize", "from": "data", "factor": 2, "axis": "T", "kind": "nn"},
    "l1": {"class": "pool", "from": "l0", "pool_size": [2], "padding": "same", "strides": [2], "mode": "avg"},
    "l2": {"class": "resize", "from": "l1", "factor": 2, "axis": "T", "kind": "nn"},
    "output": {"class": "combine", "kind": "add", "from": ["l2", "l0"]}}, extern=X6_DIMS, lens={"data": [6, 3, 0]})
case("repeat_then_strided_conv_is_the_time_axis", "repeat", {
    "l0": {"class": "repeat", "from": "data", "repetitions": 2, "axis": "T"},
    "l1": {"class": "conv", "from": "l0", "filter_size": [3], "padding": "same", "strides": [2], "n_out": 6,
           "activation": None},
    "output": {"class": "combine", "kind": "add", "from": ["l1", "data"]}}, extern=X6_DIMS, lens={"data": [5, 1, 2]})
# the conv that cancels the upsampling has its own dim, declared the same as the time axis: a pad and an upsampling
# after it derive from that dim, not from the time axis, so RETURNN (behavior version 0) broadcasts both axes
case("axis_derived_from_a_cancelling_conv_is_another_axis", "conv", {
    "l0": {"class": "resize", "from": "data", "factor": 2, "axis": "T", "kind": "nn"},
    "l1": {"class": "conv", "from": "l0", "filter_size": [3], "padding": "same", "strides": [2], "n_out": 6,
           "activation": None},
    "l2": {"class": "pad", "from": "l1", "axes": "T", "padding": [[2, 2]]},
    "l3": {"class": "transposed_conv", "from": "l2", "filter_size": [2], "strides": [2], "n_out": 6,
           "activation": None, "padding": "valid"},
    "output": {"class": "combine", "kind": "add", "from": ["l3", "data"]}}, extern=X6_DIMS, lens={"data": [5, 3, 0]})
# a slice with a step and a strided window are the same dim math (ceildiv_right) as a strided conv or pool
case("slice_step_2_is_a_strided_convs_axis", "slice", {
    "sl": {"class": "slice", "from": "data", "axis": "T", "slice_step": 2},
    "conv": dict(STRIDED_SAME),
    "output": {"class": "combine", "kind": "add", "from": ["sl", "conv"]}}, extern=X6_DIMS, lens={"data": [7, 4, 1]})
case("strided_window_is_a_strided_pools_axis", "window", {
    "w": {"class": "window", "from": "data", "window_size": 3, "padding": "valid", "stride": 2},
    "red": {"class": "reduce", "mode": "max", "from": "w", "axis": "stag:w:window"},
    "pool": {"class": "pool", "from": "data", "pool_size": [3], "padding": "valid", "strides": [2], "mode": "max"},
    "output": {"class": "combine", "kind": "sub", "from": ["red", "pool"]}}, extern=X6_DIMS, lens={"data": [7, 4, 3]})
# a Dim the config gives for a computed axis (out_dim, out_dims, out_spatial_dim) is declared the same as the dim math
# (RETURNN's out_dim_.declare_same_as(out_dim)): it equals the same computation without one
case("resize_out_dim_is_the_same_resize_without", "resize", {
    "a": {"class": "resize", "from": "data", "factor": 2, "axis": "T", "kind": "nn", "out_dim": dim_marker("up")},
    "b": {"class": "resize", "from": "data", "factor": 2, "axis": "T", "kind": "linear"},
    "output": {"class": "combine", "kind": "add", "from": ["a", "b"]}}, extern=X6_DIMS, lens={"data": [5, 2, 0]})
case("pad_out_dims_is_the_same_pad_without", "pad", {
    "a": {"class": "pad", "from": "data", "axes": "T", "padding": [[1, 2]], "out_dims": dim_marker("padded")},
    "b": {"class": "pad", "from": "data", "axes": "T", "padding": [[1, 2]], "value": 1.0},
    "output": {"class": "combine", "kind": "add", "from": ["a", "b"]}}, extern=X6_DIMS, lens={"data": [5, 2, 0]})
case("concat_out_dim_is_the_same_concat_without", "concat", {
    "a": {"class": "concat", "from": [("data", "T"), ("data", "T")], "out_dim": dim_marker("cat")},
    "b": {"class": "concat", "from": [("data", "T"), ("data", "T")]},
    "output": {"class": "combine", "kind": "add", "from": ["a", "b"]}}, extern=X6_DIMS, lens={"data": [5, 2, 0]})
case("postfix_out_dim_is_the_same_postfix_without", "postfix_in_time", {
    "a": {"class": "postfix_in_time", "from": "data", "postfix": 0.5, "repeat": 2, "out_dim": dim_marker("post")},
    "b": {"class": "postfix_in_time", "from": "data", "postfix": -1.0, "repeat": 2},
    "output": {"class": "combine", "kind": "add", "from": ["a", "b"]}}, extern=X6_DIMS, lens={"data": [5, 2, 0]})
