"""Golden cases of issue 27's long tail (nets RETURNN builds that were refused here): slice_nd of an input without
batch axis (the start per sequence), transposed_conv/conv bias layers of size-1 axes only,
dot reducing a sparse dim, get_rec_accumulated of an only_on_eval sub-layer."""
from make_goldens import LENS_ZERO, case

# slice_nd of an input without batch axis, the start per sequence: the gather takes the batch from the start
_START_HALF = {"len": {"class": "length", "from": "data"},
               "start": {"class": "eval", "from": "len", "eval": "source(0) // 2"}}
_TF = {"r": {"class": "range_in_axis", "from": "data", "axis": "T"},
       "rf": {"class": "cast", "from": "r", "dtype": "float32"},
       "w": {"class": "variable", "shape": [4]},
       "tf": {"class": "combine", "kind": "mul", "from": ["rf", "w"], "allow_broadcast_all_sources": True}}
case("slice_nd_batchless_dynamic_input", "slice_nd_batchless", dict(_START_HALF, **_TF, **{
    "output": {"class": "slice_nd", "from": "tf", "start": "start", "size": 2}}), lens={"data": LENS_ZERO})
case("slice_nd_batchless_dynamic_input_size_none", "slice_nd_batchless", dict(_START_HALF, **_TF, **{
    "output": {"class": "slice_nd", "from": "tf", "start": "start", "size": None}}), lens={"data": LENS_ZERO})
case("slice_nd_batchless_variable_feature_axis", "slice_nd_batchless", dict(_START_HALF, **{
    "v": {"class": "variable", "shape": [3, 6]},
    "output": {"class": "slice_nd", "from": "v", "start": "start", "size": 2, "axis": "F"}}), lens={"data": LENS_ZERO})
case("slice_nd_batchless_variable_per_frame_start", "slice_nd_batchless", {
    "t": {"class": "range_in_axis", "from": "data", "axis": "T"},
    "len": {"class": "length", "from": "data"},
    "start": {"class": "combine", "kind": "eval", "from": ["t", "len"], "allow_broadcast_all_sources": True,
              "eval": "tf.minimum(source(0), source(1)) - 1"},  # (B, T), -1 at the first frame
    "v": {"class": "variable", "shape": [3, 6]},
    "output": {"class": "slice_nd", "from": "v", "start": "start", "size": 2, "axis": "F"}}, lens={"data": LENS_ZERO})

# transposed_conv / conv with a 'bias' layer of size-1 axes only (one value for every channel) or of only a batch
# axis: RETURNN adds it made compatible to the output (refused here before); a bias with the input's time axis
# (RETURNN: cannot match the axes) stays refused
for _n, _b in (("size1", {"class": "variable", "shape": [1]}),
               ("size1_n_out1", {"class": "variable", "shape": [1]}),
               ("size1x1", {"class": "variable", "shape": [1, 1]}),
               ("batch_only", {"class": "reduce", "mode": "sum", "axis": ["T", "F"], "from": "data"})):
    case("transposed_conv_bias_%s" % _n, "transposed_conv_bias", {
        "b": _b,
        "output": {"class": "transposed_conv", "filter_size": [2], "strides": [2], "n_out": 1 if "n_out1" in _n else 3,
                   "bias": "b", "from": "data"}}, lens={"data": LENS_ZERO})
case("conv_bias_size1", "transposed_conv_bias", {
    "b": {"class": "variable", "shape": [1]},
    "output": {"class": "conv", "filter_size": [3], "padding": "same", "n_out": 3, "bias": "b", "from": "data"}},
    lens={"data": LENS_ZERO})

# dot reducing the sparse dim of one source (RETURNN's DotLayer: then a gather of the other source's rows, an
# embedding lookup), e.g. of a window of sparse data
_VOCAB = {"__dim__": "vocab", "dimension": 7, "kind": "feature"}
_SPARSE_VOCAB = {"data": {"sparse_dim": _VOCAB}}
_EMB = {"class": "variable", "shape": [{"__dim__": "vocab"}, 4]}
case("dot_sparse_window", "dot_sparse", {
    "win": {"class": "window", "window_size": 3, "from": "data"},
    "emb": _EMB,
    "output": {"class": "dot", "from": ["win", "emb"], "reduce": {"__dim__": "vocab"}}},
    extern=_SPARSE_VOCAB, lens={"data": LENS_ZERO}, config={"behavior_version": 16})
# the sparse source second: the dense first source's reduced axis after its own axes (before them RETURNN reshapes the
# gathered rows into the wrong order, a RETURNN bug refused here)
case("dot_sparse_second", "dot_sparse", {
    "emb": {"class": "variable", "shape": [4, {"__dim__": "vocab"}]},
    "output": {"class": "dot", "from": ["emb", "data"], "reduce": {"__dim__": "vocab"}}},
    extern=_SPARSE_VOCAB, lens={"data": LENS_ZERO}, config={"behavior_version": 16})
case("dot_sparse_plain", "dot_sparse", {
    "emb": _EMB,
    "output": {"class": "dot", "from": ["data", "emb"], "reduce": {"__dim__": "vocab"}}},
    extern=_SPARSE_VOCAB, lens={"data": LENS_ZERO}, config={"behavior_version": 16})

# get_rec_accumulated of a rec unit's sub-layer that is only_on_eval (RETURNN: the sub-layer's accumulated output)
_UNIT_EVAL = {
    "h": {"class": "linear", "activation": "tanh", "n_out": 3, "from": ["data:source", "prev:h"]},
    "e": {"class": "linear", "activation": None, "n_out": 2, "from": "h", "only_on_eval": True, "is_output_layer": True},
    "output": {"class": "copy", "from": "h"}}
case("get_rec_accumulated_only_on_eval", "get_rec_accumulated_only_on_eval", {
    "rec": {"class": "rec", "from": "data", "unit": _UNIT_EVAL},
    "output": {"class": "get_rec_accumulated", "from": "rec", "sub_layer": "e"}}, lens={"data": LENS_ZERO})
case("get_rec_accumulated_only_on_eval_recurrent", "get_rec_accumulated_only_on_eval", {
    "rec": {"class": "rec", "from": "data", "unit": dict(_UNIT_EVAL, e=dict(
        _UNIT_EVAL["e"], **{"from": ["h", "prev:e"]}))},
    "output": {"class": "get_rec_accumulated", "from": "rec", "sub_layer": "e"}}, lens={"data": LENS_ZERO})

# split_dims of the batch axis into int dims with one -1 (RETURNN: the -1 axis a batch axis, the others static;
# a plain reshape); here the golden batch of 3 -> (1, 3)
_RED = {"red": {"class": "reduce", "mode": "mean", "axis": "T", "from": "data"}}
case("split_dims_batch_axis", "split_dims_batch", dict(_RED, output={
    "class": "split_dims", "axis": "B", "dims": [-1, 3], "from": "red"}), lens={"data": LENS_ZERO})
case("split_dims_batch_axis_static_first", "split_dims_batch", dict(_RED, output={
    "class": "split_dims", "axis": "B", "dims": [3, -1], "from": "red"}), lens={"data": LENS_ZERO})
case("split_dims_batch_axis_then_reduce", "split_dims_batch", dict(_RED, **{
    "s": {"class": "split_dims", "axis": "B", "dims": [-1, 3], "from": "red"},
    "output": {"class": "reduce", "mode": "sum", "axis": "stag:s_split_dims1", "from": "s"}}), lens={"data": LENS_ZERO})

# slice_nd of an input without batch axis by an int start and size: RETURNN's plain slice, no batch axis
case("slice_nd_batchless_int_start", "slice_nd_batchless", {
    "v": {"class": "variable", "shape": [3, 6]},
    "output": {"class": "slice_nd", "from": "v", "start": 1, "size": 2, "axis": "F"}}, lens={"data": LENS_ZERO})
case("slice_nd_batchless_int_start_dynamic_input", "slice_nd_batchless", {
    "r": {"class": "range_in_axis", "from": "data", "axis": "T"},
    "output": {"class": "slice_nd", "from": "r", "start": 1, "size": 2}}, lens={"data": LENS_ZERO})
# the dense source with the batch axis too (one table per sequence): RETURNN's gather with batch_dims 1
case("dot_sparse_per_sequence_table", "dot_sparse", {
    "emb": {"class": "variable", "shape": [{"__dim__": "vocab"}, 4], "add_batch_axis": True},
    "output": {"class": "dot", "from": ["data", "emb"], "reduce": {"__dim__": "vocab"}}},
    extern=_SPARSE_VOCAB, lens={"data": LENS_ZERO}, config={"behavior_version": 16})
# a masked mean as RETURNN rounds it (mean over the padded axis times padded / real length): 3 * the mean of
# |x| over 3 frames ties with the cumsum's last frame; search_sorted shows which side of it the rounding falls
# (chain seed 400 #61: sum / length here was one ulp above, an index one further)
case("fuzz_reduce_mean_returnn_rounding", "fuzz_reduce", {
    "abs": {"class": "activation", "activation": "abs", "from": "data"},
    "cs": {"class": "cumsum", "axis": "T", "from": "abs"},
    "srt": {"class": "gather", "axis": "F", "position": 0, "from": "cs"},
    "v1": {"class": "eval", "from": "abs", "eval": "source(0) * 3.0"},
    "vals": {"class": "reduce", "mode": "mean", "axes": "T", "from": "v1"},
    "output": {"class": "search_sorted", "sorted_sequence": "srt", "values": "vals", "axis": "T"}},
    extern={"data": {"dim": 3}}, lens={"data": [7, 3, 3]})
