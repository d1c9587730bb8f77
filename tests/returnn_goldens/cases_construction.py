"""Golden cases of network construction features (loaded by make_goldens.py): RETURNN's
``initial_state`` forms of the recurrent units (trainable ``var`` states under RETURNN's parameter
names, ``ones``, layers, per-state dicts), ``initial_output`` forms of rec sub-layers (``var``,
``apply(0)``, True), LSTM peepholes (``use_peepholes``), references (``split/0`` in rec units,
``extra.NAME:layer``), output dims inferred from the target, and rec cell units over inputs with an
extra axis (RETURNN merges it into the batch), and rec sub-layers marked ``only_on_eval`` / ``only_on_search``
(RETURNN's rec cell builds its output and what it reads whatever the flags say)."""
from make_goldens import LENS_LONG, X5, X5_CLASSES6, X6, case

INIT = {"proj": {"class": "linear", "activation": "tanh", "n_out": 4, "from": "data"},
        "init_h": {"class": "reduce", "mode": "mean", "axis": "T", "from": "proj"},
        "init_c": {"class": "reduce", "mode": "max", "axis": "T", "from": "proj"}}

# --- initial_state of rec layers over whole sequences
for unit in ("nativelstm2", "lstm", "standardlstm"):
    case("rec_%s_initial_state_var" % unit, "initial_state",
         {"output": {"class": "rec", "unit": unit, "n_out": 4, "initial_state": "var", "from": "data"}})
case("rec_nativelstm2_initial_state_var_backward", "initial_state",
     {"output": {"class": "rec", "unit": "nativelstm2", "n_out": 4, "initial_state": "var", "direction": -1,
                 "from": "data"}})
case("rec_standardlstm_initial_state_var_backward", "initial_state",
     {"output": {"class": "rec", "unit": "standardlstm", "n_out": 3, "initial_state": "var", "direction": -1,
                 "from": "data"}})
case("rec_nativelstm2_initial_state_ones", "initial_state",
     {"output": {"class": "rec", "unit": "nativelstm2", "n_out": 4, "initial_state": "ones", "from": "data"}})
case("rec_nativelstm2_initial_state_layers", "initial_state", dict(INIT, output={
    "class": "rec", "unit": "nativelstm2", "n_out": 4, "initial_state": {"c": "init_c", "h": "init_h"},
    "from": "data"}))
case("rec_nativelstm2_initial_state_mixed", "initial_state", dict(INIT, output={
    "class": "rec", "unit": "nativelstm2", "n_out": 4, "initial_state": {"c": "var", "h": "init_h"},
    "from": "data"}))
case("rec_gru_initial_state_var", "initial_state",
     {"output": {"class": "rec", "unit": "gru", "n_out": 4, "initial_state": "var", "from": "data"}})
case("rec_gru_initial_state_layer", "initial_state", dict(INIT, output={
    "class": "rec", "unit": "gru", "n_out": 4, "initial_state": "init_h", "from": "data"}))
case("rec_gru_initial_state_from_rec_layer", "initial_state", {
    "enc": {"class": "rec", "unit": "gru", "n_out": 4, "from": "data"},
    "output": {"class": "rec", "unit": "gru", "n_out": 4, "initial_state": "enc", "from": "data"}},
    notes="a recurrent layer as initial_state: its last hidden state")
case("rec_rhn_initial_state_var", "initial_state",
     {"output": {"class": "rec", "unit": "rhn", "n_out": 4, "initial_state": "var", "from": "data"}})

# --- initial_state of cells in rec loops
case("rnn_cell_initial_state_var", "initial_state", {"output": {"class": "rec", "from": "data", "unit": {
    "s": {"class": "rnn_cell", "unit": "LSTMBlock", "n_out": 4, "initial_state": "var", "from": ["data:source"]},
    "output": {"class": "linear", "activation": "tanh", "n_out": 3, "from": ["s", "prev:s"]}}}})
case("rnn_cell_initial_state_base_layers", "initial_state", dict(INIT, output={
    "class": "rec", "from": "data", "unit": {
        "s": {"class": "rnn_cell", "unit": "LSTMBlock", "n_out": 4, "from": ["data:source"],
              "initial_state": {"c": "base:init_c", "h": "base:init_h"}},
        "output": {"class": "copy", "from": ["s", "prev:s"]}}}))
case("rnn_cell_gru_initial_state_ones", "initial_state", {"output": {"class": "rec", "from": "data", "unit": {
    "s": {"class": "rnn_cell", "unit": "GRU", "n_out": 4, "initial_state": "ones", "from": ["data:source"]},
    "output": {"class": "copy", "from": ["s", "prev:s"]}}}})

# --- peepholes (TensorFlow's LSTMCell: w_i_diag, w_f_diag, w_o_diag)
case("rec_standardlstm_peepholes", "peepholes", {"output": {
    "class": "rec", "unit": "standardlstm", "n_out": 4, "unit_opts": {"use_peepholes": True}, "from": "data"}})
case("rec_standardlstm_peepholes_var_backward", "peepholes", {"output": {
    "class": "rec", "unit": "standardlstm", "n_out": 4, "unit_opts": {"use_peepholes": True, "forget_bias": 0.0},
    "initial_state": "var", "direction": -1, "from": "data"}})
case("rnn_cell_peepholes_in_loop", "peepholes", {"output": {"class": "rec", "from": "data", "unit": {
    "s": {"class": "rnn_cell", "unit": "standardlstm", "n_out": 4, "unit_opts": {"use_peepholes": True},
          "initial_state": "var", "from": ["data:source"]},
    "output": {"class": "copy", "from": ["s"]}}}})

# --- initial_output of rec sub-layers
case("initial_output_var", "initial_output", {"output": {"class": "rec", "from": "data", "unit": {
    "emb": {"class": "linear", "activation": "tanh", "n_out": 3, "from": ["data:source"], "initial_output": "var"},
    "output": {"class": "combine", "kind": "add", "from": ["emb", "prev:emb"]}}}})
case("initial_output_apply0", "initial_output", {"output": {"class": "rec", "from": "data", "unit": {
    "emb": {"class": "linear", "activation": "tanh", "n_out": 3, "from": ["data:source", "prev:output"],
            "initial_output": "apply(0)"},
    "output": {"class": "linear", "activation": "sigmoid", "n_out": 3, "from": ["prev:emb", "data:source"]}}}})
case("initial_output_true", "initial_output", {"output": {"class": "rec", "from": "data", "unit": {
    "acc": {"class": "combine", "kind": "mul", "from": ["prev:acc", "x"], "initial_output": True},
    "x": {"class": "linear", "activation": "sigmoid", "n_out": 3, "from": ["data:source"]},
    "output": {"class": "copy", "from": ["acc"]}}}})

# --- references
case("split_sub_outputs_in_rec_unit", "references", {"output": {"class": "rec", "from": "data", "unit": {
    "input": {"class": "linear", "activation": "tanh", "n_out": 6, "from": ["data:source", "prev:output"]},
    "split": {"class": "split", "from": "input", "size_splits": [2, 4]},
    "output": {"class": "linear", "activation": None, "n_out": 3, "from": ["split/1", "split/0"]}}}})
# (prev:split/1 fails in RETURNN 1.2026: KeyError 'split/1' in its loop, moved out or not)
case("extra_net_layer", "references", {
    "input": {"class": "linear", "activation": "relu", "n_out": 4, "from": "data"},
    "extra.2:input": {"class": "linear", "activation": None, "n_out": 4, "from": "data"},
    "output": {"class": "combine", "kind": "add", "from": ["input", "extra.2:input", "extra.3:input"]}})
# --- output dims from the target
case("rec_lstm_dim_from_target", "out_dim_inference", {"output": {
    "class": "rec", "unit": "nativelstm2", "loss": "ce", "target": "classes", "from": "data"}}, extern=X5_CLASSES6)
case("linear_in_rec_dim_from_target", "out_dim_inference", {"output": {"class": "rec", "from": "data", "unit": {
    "prob": {"class": "softmax", "from": ["data:source", "prev:prob"], "target": "classes", "loss": "ce"},
    "output": {"class": "copy", "from": "prob"}}}}, extern=X5_CLASSES6)
# --- rec cell units over an input of more axes than (B, T, F): RETURNN merges them into the batch
SPLIT = {"split": {"class": "split_dims", "axis": "F", "dims": [2, 3], "from": "data"}}
for unit, direction in (("nativelstm2", 1), ("lstm", -1), ("standardlstm", 1)):
    case("rec_%s_dir%i_merged_spatial_axis" % (unit, direction), "rec_merged_axes", dict(SPLIT, output={
        "class": "rec", "unit": unit, "n_out": 4, "direction": direction, "from": "split"}), extern=X6,
        lens={"data": [7, 4, 0]})
case("rec_gru_dir-1_merged_spatial_axis", "rec_merged_axes", dict(SPLIT, output={
    "class": "rec", "unit": "gru", "n_out": 4, "direction": -1, "from": "split"}), extern=X6, lens={"data": [7, 4, 0]})
# ... with an initial state that is the same for every row (also for the merged batch; refused here before:
# returnn_fuzz --kind mutate --train seed 42, GAP)
for unit, init in (("lstm", "ones"), ("nativelstm2", "ones")):
    case("rec_%s_merged_spatial_axis_initial_state_%s" % (unit, init), "rec_merged_axes", dict(SPLIT, output={
        "class": "rec", "unit": unit, "n_out": 4, "direction": -1, "from": "split", "initial_state": init}),
        extern=X6, lens={"data": [7, 4, 0]})
case("rec_nativelstm2_merged_axes_two_sources", "rec_merged_axes", dict(SPLIT, lin={
    "class": "linear", "activation": "tanh", "n_out": 2, "from": "split"}, output={
    "class": "rec", "unit": "nativelstm2", "n_out": 3, "from": ["split", "lin"]}), extern=X6)
# positional_encoding over (B, T, S, F): the same encoding for each S (RETURNN broadcasts/tiles it)
SPLIT8 = {"lin": {"class": "linear", "activation": None, "n_out": 8, "from": "data"},
          "split": {"class": "split_dims", "axis": "F", "dims": [2, 4], "from": "lin"}}
case("positional_encoding_add_merged_spatial_axis", "positional_encoding", dict(SPLIT8, output={
    "class": "positional_encoding", "add_to_input": True, "from": "split"}), extern=X6)
case("positional_encoding_n_out_merged_spatial_axis", "positional_encoding", dict(SPLIT, output={
    "class": "positional_encoding", "n_out": 4, "from": "split"}), extern=X6)
case("positional_encoding_offset_spatial_axis", "positional_encoding", dict(SPLIT8, off={
    "class": "length", "from": "data"}, output={
    "class": "positional_encoding", "add_to_input": True, "offset": "off", "from": "split"}), extern=X6)
# an offset (B, 1) (length's add_time_axis): RETURNN broadcasts its size-1 axis as one offset per sequence
case("positional_encoding_offset_with_a_size_one_axis", "positional_encoding", dict(SPLIT8, off={
    "class": "length", "from": "data", "add_time_axis": True}, output={
    "class": "positional_encoding", "add_to_input": True, "offset": "off", "from": "split"}), extern=X6)
# an offset over any of the output's axes but the feature axis (RETURNN's copy_compatible_to): a scalar (the length
# of a static axis) or (T,) (returnn_fuzz mutate seed 182, GAP)
case("positional_encoding_scalar_offset", "positional_encoding", dict(SPLIT8, off={
    "class": "length", "from": "data", "axis": "f"}, output={
    "class": "positional_encoding", "add_to_input": True, "offset": "off", "from": "split"}), extern=X6)
case("positional_encoding_offset_over_time_only", "positional_encoding", dict(SPLIT8, off={
    "class": "range_in_axis", "from": "data", "axis": "T"}, output={
    "class": "positional_encoding", "add_to_input": True, "offset": "off", "from": "split"}), extern=X6)

_ = (LENS_LONG, X5)
# only_on_eval / only_on_search layers are no roots where the network does not evaluate / search, but a layer
# that reads one builds it (RETURNN's ignore_layer skips roots only; get_layer constructs it): refused here before
case("only_on_eval_read_by_output", "construction", {
    "check": {"class": "linear", "from": "data", "n_out": 2, "only_on_eval": True},
    "output": {"class": "copy", "from": "check"}})
case("only_on_search_read_by_output", "construction", {
    "s": {"class": "linear", "from": "data", "n_out": 2, "only_on_search": True},
    "output": {"class": "copy", "from": "s"}})


# --- only_on_eval / only_on_search in a rec unit: no effect there (RETURNN's rec cell takes its roots without
# looking at them; were dropped here: an empty unit, or an unknown sub-layer for its reader)
def _flagged_unit(sub, flag):
    unit = {"a": {"class": "linear", "activation": "tanh", "n_out": 3, "from": ["data:source", "prev:a"]},
            "b": {"class": "linear", "activation": None, "n_out": 2, "from": "a"},
            "output": {"class": "copy", "from": "b"}}
    unit[sub][flag] = True
    return {"loop": {"class": "rec", "from": "data", "unit": unit}, "output": {"class": "copy", "from": "loop"}}


case("rec_unit_only_on_eval_output_in_forward", "construction", _flagged_unit("output", "only_on_eval"))
case("rec_unit_only_on_search_output_in_training", "construction", _flagged_unit("output", "only_on_search"),
     train=True)
case("rec_unit_only_on_search_read_in_training", "construction", _flagged_unit("b", "only_on_search"), train=True)
