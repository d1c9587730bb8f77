"""Golden cases of issue 27's structural layers (loaded by make_goldens.py): concat, flatten_batch /
unflatten_batch, transpose, combine_dims, slice_nd, scatter_nd, top_k, search_sorted,
weighted_sum, elemwise_prod, resize, rec_unstack, get_rec_accumulated,
rec_last_output, cum_concat.

Left out: layers whose options need Dim objects (in cases_dim_layers.py, as golden_dims.py markers),
scalar outputs (length of the batch axis), the gradient
layer (RETURNN's graph only; ours runs in compiled steps, tested in tests/test_layers_structural.py),
image_summary (RETURNN needs a (T, T, B, 1) input for its TensorBoard image).
Left out because RETURNN itself fails on them: ``top_k`` over a dynamic axis (its masking: "ndim does not
match"), ``batch_softmax`` (tf.where of a (B*T,) mask with (B*T, F) values: not broadcastable), ``remove``
(its new dim stays undefined), ``fold`` with axis descriptions (it takes only Dim objects: with Dims in
cases_dim_layers.py), the old
fixed-layout layers ``fill_unused`` (TF1's ``expand_dims(dim=)``), ``swap_time_feature`` and
``flatten_time`` (assertions on setting ``dim``/``shape``), ``tile_features`` (it reads a third
non-batch axis of a (B, T, F) input), ``search_sorted`` of a sorted (B, T, F) (its masked copy loses the
placeholder: 'NoneType' has no 'dtype').
``concat`` along time uses equal lengths: RETURNN joins the padded tensors (its "real" frames hold
padding when lengths differ), this engine packs each sequence's real frames (see
returnn/tf/layers/concat.py)."""
from make_goldens import LENS_LONG, X6, case


def _lin(n, src="data", act=None):
    return {"class": "linear", "activation": act, "with_bias": True, "n_out": n, "from": src}


EQUAL = {"data": [5, 5, 5]}

case("concat_features", "concat", {
    "a": _lin(3, act="tanh"),
    "output": {"class": "concat", "from": [("data", "F"), ("a", "F")]}})
case("concat_time_equal_lengths", "concat", {
    "a": _lin(5, act="tanh"),
    "output": {"class": "concat", "from": [("data", "T"), ("a", "T")]}}, lens=EQUAL)
case("flatten_batch", "flatten_batch", {"output": {"class": "flatten_batch", "from": "data"}},
     notes="the batch axis holds the real frames of all sequences, sequence by sequence")
case("flatten_batch_time_major", "flatten_batch", {
    "output": {"class": "flatten_batch", "batch_major": False, "from": "data"}})
case("flatten_unflatten_batch", "flatten_batch", {
    "flat": {"class": "flatten_batch", "from": "data"},
    "lin": _lin(4, src="flat", act="tanh"),
    "output": {"class": "unflatten_batch", "from": "lin"}},
    notes="frame-wise layer on the packed frames, then back to (B, T, F)")
case("merge_dims_batch_split_batch_time", "flatten_batch", {
    "m": {"class": "merge_dims", "axes": ["B", "T"], "from": "data"},
    "lin": _lin(4, src="m", act="tanh"),
    "output": {"class": "split_batch_time", "base": "data", "from": "lin"}},
    notes="merge_dims of B and T keeps the padded frames (B*T rows); split_batch_time restores (B, T)")
case("transpose_time_feature", "transpose", {"output": {"class": "transpose", "from": "data",
                                                        "perm": {"T": "F", "F": "T"}}})
case("combine_dims_reordered", "combine_dims", {
    "split": {"class": "split_dims", "axis": "F", "dims": [2, 3], "from": "data"},
    "output": {"class": "combine_dims", "axes": ["dim:3", "dim:2"], "from": "split"}}, extern=X6)
case("slice_nd_start_per_seq", "slice_nd", {
    "start": {"class": "range_in_axis", "from": "data", "axis": "B"},
    "output": {"class": "slice_nd", "from": "data", "start": "start", "size": 2}}, lens={"data": LENS_LONG})
case("slice_nd_to_end", "slice_nd", {
    "start": {"class": "range_in_axis", "from": "data", "axis": "B"},
    "output": {"class": "slice_nd", "from": "data", "start": "start", "size": None}}, lens={"data": LENS_LONG})
case("scatter_nd_shift_time", "scatter_nd", {
    "pos0": {"class": "range_in_axis", "from": "data", "axis": "T"},
    "one": {"class": "constant", "value": 1},
    "pos": {"class": "combine", "kind": "add", "from": ["pos0", "one"]},
    "output": {"class": "scatter_nd", "from": "data", "position": "pos", "position_axis": "T",
               "output_dim_via_time_from": "data", "filter_invalid_indices": True}},
    notes="frame t written to t + 1 (the last real frame of the longest sequence is dropped)")
case("top_k_feature", "top_k", {"output": {"class": "top_k", "from": "data", "axis": "F", "k": 2}})
case("top_k_feature_indices", "top_k", {
    "top": {"class": "top_k", "from": "data", "axis": "F", "k": 3},
    "output": {"class": "copy", "from": "top/indices"}})
# over the batch axis (refused here before: returnn_fuzz): the sequences' top k per feature, no batch axis left
_XF = {"data": {"shape": (4,), "time_dim_axis": None}}
case("top_k_batch", "top_k", {"output": {"class": "top_k", "from": "data", "axis": "B", "k": 2}}, extern=_XF)
case("top_k_batch_indices", "top_k", {"top": {"class": "top_k", "from": "data", "axis": "B", "k": 2},
                                      "output": {"class": "copy", "from": "top/indices"}}, extern=_XF)
case("search_sorted", "search_sorted", {
    "abs": {"class": "activation", "activation": "abs", "from": "data"},
    "cs": {"class": "cumsum", "axis": "T", "from": "abs"},
    "srt": {"class": "gather", "axis": "F", "position": 0, "from": "cs"},
    "vals": {"class": "reduce", "mode": "sum", "axes": "T", "from": "abs"},
    "output": {"class": "search_sorted", "sorted_sequence": "srt", "values": "vals", "axis": "T"}})
case("weighted_sum_feature", "weighted_sum", {"output": {"class": "weighted_sum", "axes": "F", "from": "data"}})
case("elemwise_prod_feature", "elemwise_prod", {"output": {"class": "elemwise_prod", "axes": "F", "from": "data"}})
for kind in ("nn", "linear", "cubic"):
    case("resize_%s_x2" % kind, "resize", {"output": {"class": "resize", "axis": "T", "factor": 2, "kind": kind,
                                                      "from": "data"}})
case("resize_fill", "resize", {"output": {"class": "resize", "axis": "T", "factor": 3, "kind": "fill",
                                          "fill_value": -1.0, "from": "data"}})
case("resize_nn_float_factor", "resize", {"output": {"class": "resize", "axis": "T", "factor": 1.5, "kind": "nn",
                                                     "from": "data"}})

# --- access to rec sub-layers
case("rec_unstack_declare_rec_time", "rec_access", {
    "output": {"class": "rec", "from": [], "unit": {
        "input": {"class": "rec_unstack", "from": "base:data:data", "axis": "T", "declare_rec_time": True},
        "output": {"class": "combine", "kind": "add", "from": ["prev:output", "input"]}}}},
    notes="a rec layer without from and target loops over the rec_unstack's axis (a running sum)")
case("rec_unstack_with_source", "rec_access", {
    "lin": _lin(4, act="tanh"),
    "output": {"class": "rec", "from": "data", "unit": {
        "other": {"class": "rec_unstack", "from": "base:lin"},
        "h": {"class": "linear", "activation": "tanh", "n_out": 4, "from": ["data:source", "other", "prev:h"]},
        "output": {"class": "copy", "from": "h"}}}})
case("get_rec_accumulated", "rec_access", {
    "rec": {"class": "rec", "from": "data", "unit": {
        "h": {"class": "linear", "activation": "tanh", "n_out": 4, "from": ["data:source", "prev:h"],
              "is_output_layer": True},
        "output": {"class": "linear", "activation": None, "n_out": 3, "from": "h"}}},
    "output": {"class": "get_rec_accumulated", "from": "rec", "sub_layer": "h"}})
case("rec_last_output", "rec_access", {
    "rec": {"class": "rec", "from": "data", "unit": {
        "h": {"class": "linear", "activation": "tanh", "n_out": 4, "from": ["data:source", "prev:h"],
              "need_last": True, "initial_output": 1.0},
        "output": {"class": "copy", "from": "h"}}},
    "output": {"class": "rec_last_output", "rec_layer": "rec", "sub_layer_name": "h"}},
    lens={"data": [5, 3, 0]}, notes="last frame per sequence; the length-0 sequence gets the initial output")

# k 0 (RETURNN's tf.math.top_k: an empty axis; refused here before, mutate --train seed 55)
case("top_k_feature_k0", "top_k", {
    "top": {"class": "top_k", "from": "data", "axis": "F", "k": 0},
    "output": {"class": "copy", "from": "top/indices"}})
# squeeze of 'F' on sparse data: the description names no axis and RETURNN squeezes nothing (refused here before,
# chain seed 306)
case("squeeze_feature_of_sparse_no_op", "squeeze", {"output": {"class": "squeeze", "axis": "F", "from": "data"}},
     extern={"data": {"dim": 7, "sparse": True}})
# an explicit time axis (reinterpret_data set_axes 't' on a static axis) stays the time axis through frame-wise layers
# (RETURNN's copy_template keeps time_dim_axis): a later 'T' names it, not the first dynamic axis
case("time_axis_set_static_kept_by_linear", "reinterpret_data", {
    "sp": {"class": "split_dims", "axis": "F", "dims": (2, 3), "from": "data"},
    "ri": {"class": "reinterpret_data", "set_axes": {"t": "dim:2"}, "from": "sp"},
    "lin": {"class": "linear", "n_out": 4, "activation": "tanh", "from": "ri"},
    "output": {"class": "reduce", "mode": "max", "axes": "T", "from": "lin"}},
    extern={"data": {"dim": 6}})
# slice_nd of an input whose feature axis is by the default rule (resize of F puts it before T): RETURNN's gather
# template leaves the feature axis to the default rule, the last static axis, which is the static slice, not the
# input's features (chain seed 398 #97: the linear read the 12 features here, 3 slice frames in RETURNN)
case("slice_nd_static_slice_after_default_features", "slice_nd", {
    "pre": {"class": "resize", "factor": 2, "axis": "F", "kind": "nn", "from": "data"},
    "len": {"class": "length", "from": "pre"},
    "start": {"class": "eval", "from": "len", "eval": "source(0) // 3"},
    "tail": {"class": "slice_nd", "from": "pre", "start": "start", "size": 3, "min_size": 2},
    "output": {"class": "linear", "n_out": 3, "from": "tail"}}, extern={"data": {"dim": 6}}, lens={"data": LENS_LONG})
# the same rule in gather: positions of a constant (3,) gathered from T of that input: the positions' axis is last
case("gather_static_positions_after_default_features", "gather", {
    "pre": {"class": "resize", "factor": 2, "axis": "F", "kind": "nn", "from": "data"},
    "pos": {"class": "constant", "value": 1, "shape": [3], "dtype": "int32"},
    "g": {"class": "gather", "from": "pre", "position": "pos", "axis": "T"},
    "output": {"class": "linear", "n_out": 2, "from": "g"}}, extern={"data": {"dim": 6}}, lens={"data": LENS_LONG})
