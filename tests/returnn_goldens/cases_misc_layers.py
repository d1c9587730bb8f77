"""Golden cases of RETURNN's remaining layer classes (loaded by make_goldens.py): accumulate_mean,
split_concatenated_multichannel (the output has another batch), framewise_statistics, gather_nd, decide, forced_align, masked_computation with unmask (a cumsum
or a cell in the loop), window in a rec loop (the recurrent variant), rec loops sized by
size_target, subnetworks.

Left out: ``tikhonov_regularization`` (this engine refuses it: its meta-loss acts in back-propagation
only; the forward value is the input), a loop over ``size_target`` in which nothing has a batch axis
(RETURNN's output is then (T, F) without batch, T with sizes per sequence: no real frames to
compare). RETURNN fails on: ``masked_computation`` moved out of the loop when the mask is True on
padded frames (its packed frames outnumber the lengths: "indices ... does not index into param
shape"; the LSTM case keeps the loop), the ``cumsum`` rec unit of RETURNN's own test (not in the
PyPI version: "unknown cell 'cumsum'"; the cumsum layer instead), subnetwork sources as
``data:0`` (DataNotFound: "unknown key '0'"). RETURNN 1.2026 fails on every segmental-model layer
(segment_input, unsegment_input, classes_to_segments, classes_to_length_distribution(_global),
segment_alignment, and so apply_length_distribution and normalize_length_scores behind them):
their templates set ``size_placeholder = {0: None}`` ("'NoneType' object has no attribute
'_RETURNN_dyn_size_beam'"); on ``batch_median_pooling`` (its template reads the input's
placeholder: AssertionError) and on ``alternating_real_to_complex`` / ``complex_to_alternating_real``
also with n_out ("Mismatching shape: Raw tensor (None, None, None)").
"""
from golden_dims import dim_marker, dim_ref
from make_goldens import CASES, X5_CLASSES6, case

L753 = {"data": [7, 5, 3]}
SPARSE6 = {"dim": 6, "sparse": True, "available_for_inference": True}


def _lin(n, src="data", act=None):
    return {"class": "linear", "activation": act, "with_bias": True, "n_out": n, "from": src}


# --- layers with their own variables or side effects (the forward value in evaluation)
case("accumulate_mean_added", "accumulate_mean", {
    "acc": {"class": "accumulate_mean", "exp_average": 0.1, "from": "data"},
    "output": {"class": "combine", "kind": "add", "from": ["data", "acc"]}},
    notes="in evaluation the layer's value is its variable 'mean' (set like any parameter)")
case("framewise_statistics_beside", "framewise_statistics", {
    "sm": {"class": "softmax", "from": "data", "n_out": 6, "target": "classes"},
    "stats": {"class": "framewise_statistics", "sil_label_idx": 0, "from": "sm"},
    "stats_f": {"class": "cast", "dtype": "float32", "from": "stats"},
    "output": {"class": "combine", "kind": "add", "from": ["sm", "stats_f"]}}, extern=X5_CLASSES6,
    notes="its output is a dummy 0; the statistics go to the engine")

# --- gather_nd: each sequence's frames in reverse order
case("gather_nd_reverse", "gather_nd", {
    "t": {"class": "range_in_axis", "from": "data", "axis": "T"},
    "len": {"class": "length", "from": "data"},
    "pos": {"class": "combine", "kind": "eval", "from": ["t", "len"], "allow_broadcast_all_sources": True,
            "eval": "tf.maximum(source(1) - 1 - source(0), 0)"},
    "output": {"class": "gather_nd", "from": "data", "position": "pos"}}, lens=L753)

# --- decide without search: the input as it is
case("decide_without_search", "decide", {
    "lin": _lin(4, act="tanh"),
    "output": {"class": "decide", "from": "lin"}})

# --- forced_align (Viterbi over the CTC topology)
for topology in ("ctc", "rna"):
    case("forced_align_%s" % topology, "forced_align", {
        "lin": {"class": "linear", "activation": "log_softmax", "n_out": 7, "from": "data"},
        "output": {"class": "forced_align", "from": "lin", "align_target": "data:classes", "topology": topology,
                   "input_type": "log_prob"}},
        extern={"data": {"dim": 5}, "classes": SPARSE6}, lens={"data": [7, 5, 3], "classes": [3, 2, 0]})
# 'prob' given log-probabilities: every score is log(1e-20), every path ties (RETURNN's fast_viterbi keeps
# the first best edge of its CTC automaton); a softmax input, batch- and time-major
for topology in ("ctc", "rna"):
    case("forced_align_%s_ties" % topology, "forced_align", {
        "lin": {"class": "linear", "activation": "log_softmax", "n_out": 7, "from": "data"},
        "output": {"class": "forced_align", "from": "lin", "align_target": "data:classes", "topology": topology,
                   "input_type": "prob"}},
        extern={"data": {"dim": 5}, "classes": SPARSE6}, lens={"data": [7, 5, 3], "classes": [3, 2, 0]})
for _suffix, _x in (("", {"dim": 5}), ("_time_major", {"dim": 5, "time_dim_axis": 0, "batch_dim_axis": 1})):
    case("forced_align_ctc_softmax_prob" + _suffix, "forced_align", {
        "lin": {"class": "linear", "activation": "softmax", "n_out": 7, "from": "data"},
        "output": {"class": "forced_align", "from": "lin", "align_target": "data:classes", "topology": "ctc",
                   "input_type": "prob"}},
        extern={"data": _x, "classes": SPARSE6}, lens={"data": [7, 5, 3], "classes": [3, 2, 1]})

# --- masked_computation with unmask (RETURNN's test_MaskedComputationLayer_UnmaskLayer_in_loop)
MASKED_UNIT = {
    "const1": {"class": "constant", "value": 1, "with_batch_dim": True},
    "mask": {"class": "eval", "from": [":i", "const1"], "out_type": {"dtype": "bool"},
             "eval": "tf.equal(source(0) % 2, source(1))"},
    "masked": {"class": "masked_computation", "from": "data:source", "mask": "mask", "unit": {
        "class": "subnetwork", "from": "data", "subnetwork": {
            "input0": {"class": "cast", "from": "data", "dtype": "float32"},
            "input1": {"class": "expand_dims", "axis": "f", "from": "input0"},
            "output": {"class": "cumsum", "from": "input1"}}}},
    "unmask": {"class": "unmask", "from": "masked", "mask": "mask"},
    "output": {"class": "squeeze", "from": "unmask", "axis": "f"}}
case("masked_computation_unmask_in_loop", "masked_computation", {"output": {
    "class": "rec", "from": "data", "optimize_move_layers_out": False, "unit": MASKED_UNIT}},
    extern={"data": {"dim": 20, "sparse": True}}, notes="a running sum over the odd frames, held on the even ones")
case("masked_computation_unmask_moved_out", "masked_computation", {"output": {
    "class": "rec", "from": "data", "unit": MASKED_UNIT}}, extern={"data": {"dim": 20, "sparse": True}})
case("masked_computation_lstm_in_loop", "masked_computation", {"output": {
    "class": "rec", "from": "data", "optimize_move_layers_out": False, "unit": {
    "red": {"class": "reduce", "mode": "sum", "axis": "F", "from": "data:source"},
    "mask": {"class": "compare", "kind": "greater", "value": 0.0, "from": "red"},
    "masked": {"class": "masked_computation", "from": "data:source", "mask": "mask", "unit": {
        "class": "rnn_cell", "unit": "LSTMBlock", "n_out": 4, "from": "data"}},
    "unmask": {"class": "unmask", "from": "masked", "mask": "mask"},
    "output": {"class": "linear", "activation": "tanh", "n_out": 3, "from": "unmask"}}}},
    notes="the cell steps only on frames with a positive feature sum; its state is held on the others")

# --- window in a rec loop (RETURNN's recurrent variant: the last window_size frames as loop state)
case("window_recurrent_in_loop", "window", {"output": {"class": "rec", "from": "data", "unit": {
    "x": {"class": "linear", "activation": "tanh", "n_out": 3, "from": ["data:source", "prev:output"]},
    "win": {"class": "window", "from": "x", "window_size": 3, "window_left": 2, "window_dim": dim_marker("w", 3)},
    "red": {"class": "reduce", "mode": "mean", "axis": dim_ref("w"), "from": "win"},
    "output": {"class": "linear", "activation": "tanh", "n_out": 3, "from": ["red", "x"]}}}},
    lens={"data": [7, 5, 0]}, notes="the window's input depends on prev:output: it stays in the loop")
case("window_recurrent_right0", "window", {"output": {"class": "rec", "from": "data", "unit": {
    "x": {"class": "linear", "activation": "tanh", "n_out": 3, "from": ["data:source", "prev:output"]},
    "win": {"class": "window", "from": "x", "window_size": 2, "window_right": 0},
    "output": {"class": "merge_dims", "axes": "except_batch", "from": "win"}}}},
    notes="window_right 0 instead of window_left; the window merged into the features (fed back)")

# --- rec loops sized by size_target
case("rec_size_target_with_base", "size_target", {
    "enc": {"class": "reduce", "mode": "mean", "axis": "T", "from": "data"},
    "output": {"class": "rec", "from": [], "size_target": "classes", "unit": {
        "h": {"class": "rnn_cell", "unit": "GRU", "n_out": 3, "from": ["base:enc", "prev:h"]},
        "output": {"class": "copy", "from": "h"}}}},
    extern={"data": {"dim": 5}, "classes": SPARSE6}, lens={"data": [7, 4, 1], "classes": [2, 6, 4]})

# --- subnetworks
case("subnetwork_sub_layer_access", "subnetwork", {
    "sub": {"class": "subnetwork", "from": "data", "subnetwork": {
        "a": {"class": "linear", "activation": "tanh", "n_out": 4, "from": "data"},
        "b": {"class": "linear", "activation": None, "n_out": 4, "from": "a"},
        "output": {"class": "combine", "kind": "add", "from": ["a", "b"]}}},
    "output": {"class": "combine", "kind": "mul", "from": ["sub", "sub/a"]}},
    notes="a sub-layer read from outside as sub/a")
case("subnetwork_two_sources_base", "subnetwork", {
    "x": _lin(3, act="tanh"),
    "sub": {"class": "subnetwork", "from": ["data", "x"], "subnetwork": {
        "a": {"class": "linear", "activation": "relu", "n_out": 4, "from": "data"},
        "b": {"class": "linear", "activation": None, "n_out": 4, "from": ["data", "base:x"]},
        "output": {"class": "combine", "kind": "sub", "from": ["a", "b"]}}},
    "output": {"class": "copy", "from": "sub"}},
    notes="two sources (concatenated as its data), a base: reference")
case("subnetwork_concat_sources", "subnetwork", {
    "x": _lin(3, act="tanh"),
    "output": {"class": "subnetwork", "from": ["data", "x"], "concat_sources": True, "subnetwork": {
        "output": {"class": "linear", "activation": "tanh", "n_out": 4, "from": "data"}}}},
    notes="concat_sources: the sources concatenated into one data (5 + 3 features)")
case("subnetwork_in_rec_unit", "subnetwork", {"output": {"class": "rec", "from": "data", "unit": {
    "sub": {"class": "subnetwork", "from": ["data:source", "prev:output"], "subnetwork": {
        "h": {"class": "linear", "activation": "tanh", "n_out": 3, "from": "data"},
        "output": {"class": "linear", "activation": None, "n_out": 3, "from": ["h", "base:prev:output"]}}},
    "output": {"class": "activation", "activation": "tanh", "from": "sub"}}}})

# --- a layer changing the batch
case("split_concatenated_multichannel", "multichannel", {"output": {
    "class": "split_concatenated_multichannel", "nr_of_channels": 2, "from": "data"}}, extern={"data": {"dim": 6}},
    notes="the 2 channels of each sequence as consecutive batch entries")

# --- length-0 sequences
for _name, _lens in (("gather_nd_reverse", {"data": [5, 3, 0]}),
                     ("forced_align_ctc", {"data": [7, 5, 0], "classes": [3, 2, 0]}),
                     ("masked_computation_unmask_in_loop", {"data": [5, 3, 0]}),
                     ("masked_computation_unmask_moved_out", {"data": [5, 3, 0]}),
                     ("masked_computation_lstm_in_loop", {"data": [5, 3, 0]}),
                     ("rec_size_target_with_base", {"data": [7, 4, 1], "classes": [2, 6, 0]}),
                     ("subnetwork_in_rec_unit", {"data": [5, 3, 0]}),
                     ("split_concatenated_multichannel", {"data": [5, 3, 0]})):
    _c = CASES[_name]
    case(_name + "_zero_len", _c["family"], _c["network"], extern=_c["extern"], config=_c["config"], lens=_lens,
         notes=_c["notes"])

# --- masked_computation's unit reading other layers of the network around it (RETURNN resolves them
# there and packs those with the masked time axis too; a layer without it is read as it is; the output
# has the packed time axis): with and
# without 'from', a subnetwork unit's base: reference, and per step in a loop (the unit reads the loop's layers)
_MASK = {"c": {"class": "reduce", "mode": "max", "axis": "F", "from": "data"},
         "m": {"class": "compare", "kind": "greater", "value": 0, "from": "c"},
         "l": {"class": "linear", "n_out": 3, "activation": "tanh", "from": "data"},
         "g": {"class": "reduce", "mode": "mean", "axis": "T", "from": "l"}}
case("masked_computation_unit_reads_network", "masked_computation", dict(_MASK, **{
    "output": {"class": "masked_computation", "mask": "m", "from": "data",
               "unit": {"class": "linear", "n_out": 2, "from": ["data", "l", "g"]}}}), extern={"data": {"dim": 4}})
case("masked_computation_without_from", "masked_computation", dict(_MASK, **{
    "output": {"class": "masked_computation", "mask": "m", "unit": {"class": "linear", "n_out": 2, "from": ["l", "data"]}}}),
    extern={"data": {"dim": 4}},
    config={"behavior_version": 12})
case("masked_computation_subnetwork_base_ref", "masked_computation", dict(_MASK, **{
    "output": {"class": "masked_computation", "mask": "m", "from": "data", "unit": {
        "class": "subnetwork", "from": "data", "subnetwork": {
            "a": {"class": "linear", "n_out": 2, "from": ["data", "base:l"]},
            "output": {"class": "copy", "from": "a"}}}}}), extern={"data": {"dim": 4}})
case("masked_computation_in_loop_reads_loop", "masked_computation", {"output": {"class": "rec", "from": "data", "unit": {
    "x": {"class": "linear", "activation": None, "n_out": 4, "from": "data:source"},
    "red": {"class": "reduce", "mode": "sum", "axis": "F", "from": "x"},
    "mask": {"class": "compare", "kind": "greater", "value": 0.0, "from": "red"},
    "masked": {"class": "masked_computation", "mask": "mask", "from": "x",
               "unit": {"class": "linear", "activation": "tanh", "n_out": 3, "from": ["data", "x", "prev:output"]}},
    "unmask": {"class": "unmask", "from": "masked", "mask": "mask"},
    "output": {"class": "linear", "activation": "tanh", "n_out": 3, "from": ["unmask", "prev:output"]}}}},
    extern={"data": {"dim": 4}})
# --- time_chunking of a static time axis (a reduce with keep_dims over T leaves a size-1 one): RETURNN chunks it
# with every sequence of that length (returnn_fuzz chain seed 90; was refused), and time_unchunking undoes it
_KEEP_T = {"pre": {"class": "reduce", "mode": "logsumexp", "axis": "spatial", "keep_dims": True, "from": "data"}}
case("time_chunking_static_time", "time_chunking", dict(_KEEP_T, **{
    "output": {"class": "time_chunking", "chunk_size": 3, "chunk_step": 2, "from": "pre"}}), extern={"data": {"dim": 4}})
case("time_unchunking_static_time", "time_chunking", dict(_KEEP_T, **{
    "ch": {"class": "time_chunking", "chunk_size": 3, "chunk_step": 2, "from": "pre"},
    "a": {"class": "linear", "activation": "tanh", "n_out": 3, "from": "ch"},
    "output": {"class": "time_unchunking", "chunking_layer": "ch", "from": "a"}}), extern={"data": {"dim": 4}})
# --- reduce modes any/all of a bool input (RETURNN's tf.reduce_any/all; padded frames False/True): the LSH
# attention of Zettelkasten/returnn-self-attention reduces its masks so (refused here before: unknown mode)
_POS = {"pos": {"class": "compare", "kind": "greater", "value": 0.0, "from": "data"}}
case("reduce_any_time", "reduce", dict(_POS, output={"class": "reduce", "mode": "any", "axis": "T", "from": "pos"}),
     extern={"data": {"dim": 4}}, lens={"data": [7, 2, 1]})
case("reduce_all_time", "reduce", dict(_POS, output={"class": "reduce", "mode": "all", "axis": "T", "from": "pos"}),
     extern={"data": {"dim": 4}}, lens={"data": [7, 2, 1]})
case("reduce_any_feature", "reduce", dict(_POS, output={"class": "reduce", "mode": "any", "axis": "F", "from": "pos"}),
     extern={"data": {"dim": 4}})
# --- a rec loop over a source whose unit has an 'end' sub-layer: RETURNN's loop then runs along the size_target's
# time axis (else the rec layer's target in training, else a target-fed choice's), reading the source's frames per
# step; this engine looped over the source's length (sizes 7, 4, 1 instead of 5, 6, 2)
_END_UNIT = {"h": {"class": "linear", "n_out": 3, "activation": "tanh", "from": ["data:source", "prev:h"]},
             "r": {"class": "reduce", "mode": "max", "axis": "F", "from": "h"},
             "end": {"class": "compare", "from": "r", "kind": "greater", "value": 1e9},
             "output": {"class": "copy", "from": "h"}}
_XC3 = {"data": {"dim": 3}, "classes": {"dim": 4, "sparse": True}}
case("rec_source_end_size_target", "rec", {"output": {"class": "rec", "from": "data", "size_target": "classes",
                                                      "unit": _END_UNIT}},
     extern=_XC3, lens={"data": [7, 4, 1], "classes": [5, 6, 2]})
case("rec_source_end_target_train", "rec", {"output": {"class": "rec", "from": "data", "target": "classes",
                                                       "unit": _END_UNIT}},
     extern=_XC3, lens={"data": [7, 4, 1], "classes": [5, 6, 2]}, train=True)
case("rec_source_end_choice_target", "rec", {"output": {"class": "rec", "from": "data", "unit": {
    "emb": {"class": "linear", "activation": None, "from": "prev:output", "n_out": 5},
    "s": {"class": "rnn_cell", "unit": "GRU", "from": ["prev:emb", "data:source"], "n_out": 7},
    "prob": {"class": "softmax", "from": ["s"], "target": "classes", "loss": "ce"},
    "output": {"class": "choice", "initial_output": 0, "from": "prob", "target": "classes", "beam_size": 3},
    "end": {"class": "compare", "from": "output", "value": 0}}}},
    extern={"data": {"dim": 4}, "classes": {"dim": 3, "sparse": True}}, lens={"data": [7, 4, 1], "classes": [5, 6, 2]})
# ... its layers moved out of the loop read the source whole, along the source's own time axis (RETURNN's
# data:source outside the loop): the full-sum transducers of jotix16's returnn_template_project (rnnt_2021) build
# their (B, T, U+1, V) scores so
case("rec_source_end_moved_out_reads_source_axis", "rec", {
    "output": {"class": "rec", "from": "data", "unit": {
        "am": {"class": "copy", "from": "data:source"},
        "lp": {"class": "linear", "from": "am", "n_out": 2, "activation": "tanh", "is_output_layer": True},
        "emb": {"class": "linear", "from": "prev:output", "n_out": 2, "activation": None},
        "prob": {"class": "softmax", "from": "emb", "target": "classes", "loss": "ce"},
        "output": {"class": "choice", "target": "classes", "from": "prob", "beam_size": 2, "initial_output": 0},
        "end": {"class": "compare", "from": "output", "value": 0}}},
    "lp": {"class": "copy", "from": "output/lp", "is_output_layer": True}},
    extern=_XC3, lens={"data": [7, 4, 1], "classes": [5, 6, 2]}, train=True, output="lp")
# a rec layer over a source without an 'end' sub-layer reads no size_target (RETURNN: the source's time axis), also
# one that names no data key (refused here before: mutate --train seed 55)
case("rec_cell_size_target_unread", "rec", {"output": {"class": "rec", "unit": "gru", "n_out": 4, "from": "data",
                                                       "size_target": "classes"}}, extern={"data": {"dim": 3}})
# combine of sparse and dense int sources: RETURNN makes each compatible to the output with check_sparse=False,
# the output being the first largest source's template (refused here before: mutate --train seed 68)
case("combine_sparse_and_dense_ints", "combine", {
    "len": {"class": "length", "from": "data", "sparse": True},
    "r": {"class": "range_in_axis", "axis": "T", "from": "data"},
    "output": {"class": "combine", "kind": "sub", "from": ["r", "len"], "allow_broadcast_all_sources": True}},
    extern={"data": {"dim": 3}})
# a dynamic axis' length is today's RETURNN's size data itself: int32 whatever dtype says, so it combines with int32
# positions (refused here before as sources of different dtypes: mutate seed 151); without a behavior_version the
# dtype is taken, as the RETURNN of 2019 configs
case("length_dynamic_axis_dtype_stays_int32", "length", {
    "len": {"class": "length", "from": "data", "dtype": "float32"},
    "r": {"class": "range_in_axis", "axis": "T", "from": "data"},
    "p": {"class": "combine", "kind": "sub", "from": ["r", "len"], "allow_broadcast_all_sources": True},
    "output": {"class": "gather", "position": "p", "axis": "T", "from": "data", "clip_to_valid": True}},
    extern={"data": {"dim": 3}}, config={"behavior_version": 12})
