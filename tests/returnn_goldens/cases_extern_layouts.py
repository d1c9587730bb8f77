"""Golden cases of extern data in other layouts than (batch, time, feature) (loaded by
make_goldens.py): time-major (batch_dim_axis 1), batch-feature-major ("shape": (F, None)),
explicit time/feature axes. RETURNN is fed the inputs in the declared layout; the files hold them
as this engine's batches do (batch, time, rest), and the network transposes them.

Left out: data without a batch axis and data with several dynamic axes (RETURNN's data feeding
asserts a batch axis and one dynamic axis; tested against numpy in tests/test_extern_layouts.py),
dim tags given as Dim objects (the cases are JSON)."""
from make_goldens import LENS_LONG, case

BFT = {"data": {"dim": 5, "shape": (5, None)}}  # [B,F,T]
BFT_EXPLICIT = {"data": {"dim": 5, "shape": (5, None), "time_dim_axis": 2, "feature_dim_axis": 1}}
TBF = {"data": {"shape": (None, 5), "batch_dim_axis": 1}}  # [T,B,F]
L = {"data": LENS_LONG}

case("extern_bft_rec_nativelstm2", "extern_layout", {
    "output": {"class": "rec", "unit": "nativelstm2", "n_out": 3, "from": "data"}}, extern=BFT_EXPLICIT, lens=L,
    notes="RETURNN's test_reclayer_batch_feature_input")
case("extern_bft_linear", "extern_layout", {
    "output": {"class": "linear", "activation": "tanh", "n_out": 4, "from": "data"}}, extern=BFT, lens=L)
case("extern_bft_pad_no_op", "extern_layout", {
    "output": {"class": "pad", "mode": "constant", "axes": "spatial", "padding": [(0, 0)], "value": 0,
               "from": "data"}}, extern=BFT, lens=L, notes="RETURNN's test_PadLayer_no_op")
case("extern_bft_split_dims_time", "extern_layout", {
    "output": {"class": "split_dims", "axis": "T", "dims": [-1, 1], "from": "data"}}, extern=BFT, lens=L,
    notes="RETURNN's test_SplitDimsLayer_batch_feature_major_keep_feature")
case("extern_bft_resize_time", "extern_layout", {
    "output": {"class": "resize", "axis": "T", "factor": 2, "kind": "nn", "from": "data"}}, extern=BFT, lens=L,
    notes="RETURNN's test_ResizeLayer_BFT")
case("extern_bft_reduce_time", "extern_layout", {
    "output": {"class": "reduce", "mode": "max", "axes": "T", "from": "data"}}, extern=BFT, lens=L)
case("extern_bft_conv", "extern_layout", {
    "output": {"class": "conv", "filter_size": [3], "padding": "same", "n_out": 4, "with_bias": True,
               "from": "data"}}, extern=BFT, lens=L)
case("extern_tbf_linear", "extern_layout", {
    "output": {"class": "linear", "activation": None, "n_out": 4, "from": "data"}}, extern=TBF, lens=L)
case("extern_tbf_rec_nativelstm2", "extern_layout", {
    "output": {"class": "rec", "unit": "nativelstm2", "n_out": 3, "from": "data"}}, extern=TBF, lens=L)
case("extern_tbf_transposed_conv", "extern_layout", {
    "output": {"class": "transposed_conv", "activation": None, "filter_size": [3], "strides": [2], "n_out": 4,
               "from": "data"}}, extern=TBF, lens=L, notes="RETURNN's test_TransposedConvLayer_1d_time_major")
case("extern_tbf_self_attention", "extern_layout", {
    "output": {"class": "self_attention", "num_heads": 2, "total_key_dim": 4, "n_out": 4, "from": "data"}},
    extern=TBF, lens=L)
case("extern_tbf_sparse_linear", "extern_layout", {
    "output": {"class": "linear", "activation": None, "n_out": 4, "from": "data"}},
    extern={"data": {"dim": 7, "sparse": True, "shape": (None,), "batch_dim_axis": 1}}, lens=L)
# a static time axis (13 frames, no lengths): every key position is attended (RETURNN's
# test_SelfAttentionLayer_static_time; the key mask needed lengths here: ValueError)
case("extern_static_time_self_attention", "extern_layout", {
    "output": {"class": "self_attention", "num_heads": 2, "total_key_dim": 8, "n_out": 8, "from": "data"}},
    extern={"data": {"shape": (13, 5), "time_dim_axis": 1}}, lens={"data": [13, 13, 13]})
