"""Golden cases found by the differential check over rec loops (benchmarks/returnn_fuzz.py --kind
rec) where this engine differed from RETURNN or refused what RETURNN builds, kept as goldens once
fixed (loaded by make_goldens.py): a cumsum in the loop starts from its initial_output; attention
energies of a per-frame query over a base: layer whose time axis is the loop's own run in the loop
(all encoder frames per step) where they do not build over the whole sequence, else (as RETURNN
moves them out) over the whole sequence."""
from golden_dims import dim_marker, dim_ref
from make_goldens import case

X5 = {"data": {"dim": 5}}
X4 = {"data": {"dim": 4}}

for init in ("ones", 0.5):
    case("fuzzrec_cumsum_initial_output_%s" % init, "fuzzrec_cumsum", {"output": {"class": "rec", "from": "data", "unit": {
        "s0": {"class": "cumsum", "from": "data:source", "initial_output": init},
        "output": {"class": "combine", "kind": "add", "from": ["s0", "prev:output"]}}}}, extern=X4,
        lens={"data": [7, 4, 0]})
# a reverse cumsum in a loop reading nothing of the loop: RETURNN moves it out and adds its initial_output to the whole
# sum (returnn_fuzz --kind mutate seed 111; was refused: 'the sum runs forward only'); so does one outside any loop
case("fuzzrec_cumsum_initial_output_ones_reverse", "fuzzrec_cumsum", {"output": {"class": "rec", "from": "data", "unit": {
    "s0": {"class": "cumsum", "from": "data:source", "initial_output": "ones", "reverse": True},
    "output": {"class": "combine", "kind": "add", "from": ["s0", "prev:output"]}}}}, extern=X4,
    lens={"data": [7, 4, 0]})
case("cumsum_initial_output_outside_loop", "fuzzrec_cumsum", {
    "output": {"class": "cumsum", "from": "data", "initial_output": 0.5, "reverse": True}}, extern=X4,
    lens={"data": [7, 4, 0]})
case("fuzzrec_cumsum_initial_output_var", "fuzzrec_cumsum", {"output": {"class": "rec", "from": "data", "unit": {
    "s0": {"class": "linear", "activation": "tanh", "n_out": 3, "from": ["data:source", "prev:output"]},
    "output": {"class": "cumsum", "from": "s0", "initial_output": "var"}}}}, extern=X4)
case("fuzzrec_attention_query_of_frame", "fuzzrec_attention", {
    "enc": {"class": "linear", "activation": "tanh", "n_out": 3, "from": "data"},
    "output": {"class": "rec", "from": "data", "unit": {
        "q": {"class": "linear", "activation": None, "n_out": 3, "from": "data:source"},
        "energy": {"class": "dot", "from": ["base:enc", "q"], "red1": "F", "red2": "F", "var1": "T", "var2": None},
        "weights": {"class": "softmax_over_spatial", "from": "energy"},
        "output": {"class": "generic_attention", "weights": "weights", "base": "base:enc"}}}},
    extern=X5, config={"behavior_version": 12}, lens={"data": [7, 4, 1]})
# the same with var axes left to RETURNN ("auto"): the energies build over the whole sequence (the
# query's frames pair with the encoder's by the shared time axis), so RETURNN computes them there
case("fuzzrec_attention_energies_moved_out", "fuzzrec_attention", {
    "enc": {"class": "linear", "activation": "tanh", "n_out": 3, "from": "data"},
    "output": {"class": "rec", "from": "data", "unit": {
        "q": {"class": "linear", "activation": None, "n_out": 3, "from": "data:source"},
        "energy": {"class": "dot", "from": ["base:enc", "q"], "reduce": "F"},
        "weights": {"class": "softmax_over_spatial", "from": "energy"},
        "att": {"class": "generic_attention", "weights": "weights", "base": "base:enc"},
        "output": {"class": "linear", "activation": "relu", "n_out": 3, "from": ["att", "prev:output"],
                   "initial_output": 1}}}},
    extern=X5, config={"behavior_version": 12}, lens={"data": [5, 3, 0]})
# a loop's frames past a sequence's end read a moved-out linear chain's padded frames as they are (RETURNN's
# TensorArray of the padded tensor); a centered window over the loop's output reads them at the sequence's end
case("fuzzrec_moved_out_linears_past_the_end", "fuzz_rec", {
    "loop": {"class": "rec", "from": "data", "unit": {
        "emb": {"class": "linear", "activation": None, "n_out": 4, "from": "data:source"},
        "s0": {"class": "linear", "activation": "sigmoid", "n_out": 4, "from": ["emb"], "with_bias": False},
        "output": {"class": "combine", "kind": "add", "from": ["s0", "prev:output"]}}},
    "output": {"class": "window", "window_size": 3, "from": "loop"}}, extern=X4)
# get_last_hidden_state of named units over whole sequences (returnn_fuzz --kind rec seeds 40, 42): RETURNN's
# low-memory LSTM and NativeLstm (v1) keep only their cell state (key '*' gives c, size n_out); the layer-norm LSTM's final
# state (c, h), also run backwards
case("fuzzrec_lowmem_lstm_last_state", "fuzzrec_last_state", {
    "lstm": {"class": "rec", "unit": "nativelstmlowmem", "n_out": 4, "from": "data"},
    "output": {"class": "get_last_hidden_state", "from": "lstm", "n_out": 4, "key": "*"}}, extern=X5)
case("fuzzrec_layernorm_lstm_last_state", "fuzzrec_last_state", {
    "lstm": {"class": "rec", "unit": "layernormvariantslstm", "n_out": 3, "from": "data", "direction": -1,
             "unit_opts": {"global_norm": False, "per_gate_norm": True}},
    "output": {"class": "get_last_hidden_state", "from": "lstm", "n_out": 6}}, extern=X4, lens={"data": [7, 4, 0]})
case("fuzzrec_nativelstm_v1_last_state", "fuzzrec_last_state", {
    "lstm": {"class": "rec", "unit": "nativelstm", "n_out": 3, "from": "data", "direction": -1},
    "output": {"class": "get_last_hidden_state", "from": "lstm", "n_out": 3, "key": "*"}}, extern=X4)
case("fuzzrec_nativelstm_v1_last_state_fw", "fuzzrec_last_state", {
    "lstm": {"class": "rec", "unit": "nativelstm", "n_out": 3, "from": "data"},
    "output": {"class": "get_last_hidden_state", "from": "lstm", "n_out": 3, "key": None}}, extern=X4,
    lens={"data": [7, 4, 0]})
# TensorFlow's LSTMCell unit_opts cell_clip (standardlstm; rnn_cell LSTMBlock runs that cell in RETURNN): the
# cell state clipped before the output reads it (returnn_fuzz --kind rec seed 42 refused it)
case("fuzzrec_standardlstm_cell_clip", "fuzzrec_cell_clip", {
    "lstm": {"class": "rec", "unit": "standardlstm", "n_out": 4, "from": "data", "direction": -1,
             "unit_opts": {"cell_clip": 0.3, "use_peepholes": True}},
    "last": {"class": "get_last_hidden_state", "from": "lstm", "n_out": 8},
    "output": {"class": "combine", "kind": "add", "from": ["lstm", "last"]}}, extern=X5)
case("fuzzrec_rnn_cell_cell_clip_in_loop", "fuzzrec_cell_clip", {"output": {"class": "rec", "from": "data", "unit": {
    "s": {"class": "rnn_cell", "unit": "LSTMBlock", "n_out": 3, "from": ["data:source", "prev:output"],
          "unit_opts": {"cell_clip": 0.2, "forget_bias": 0.0}},
    "output": {"class": "linear", "activation": "tanh", "n_out": 3, "from": "s"}}}}, extern=X4)
# a loop without source and target, ended by its 'end' sub-layer (ORed over the steps) within max_seq_len
# (returnn_fuzz --kind rec seeds 40-43; was refused): each sequence's length counts the steps before its end,
# with include_eos the end step too; max_seq_len (a number or max_len_from) cuts the loop
ENDING_UNIT = {
    "s": {"class": "linear", "activation": "tanh", "n_out": 3, "from": ["prev:s", "prev:output"]},
    "clip": {"class": "eval", "from": [":i", "base:enc_len"], "out_type": {"dtype": "int32"},
             "eval": "tf.minimum(source(0), tf.maximum(source(1) - 1, 0))"},
    "pos": {"class": "gather", "from": "base:enc", "position": "clip", "axis": "T"},
    "output": {"class": "combine", "kind": "add", "from": ["s", "pos"]},
    "end": {"class": "compare", "kind": "greater_equal", "from": [":i", "base:enc_len"]}}
ENC = {"enc": {"class": "linear", "activation": "tanh", "n_out": 3, "from": "data"},
       "enc_len": {"class": "length", "from": "data"}}
for eos in (False, True):
    case("fuzzrec_loop_ended_by_end_eos%i" % eos, "fuzzrec_ending", dict(ENC, output={
        "class": "rec", "from": [], "unit": ENDING_UNIT, "include_eos": eos,
        "max_seq_len": "max_len_from('base:data') + 1"}), extern=X4, lens={"data": [5, 3, 0]})
case("fuzzrec_loop_ended_by_max_seq_len", "fuzzrec_ending", dict(ENC, output={
    "class": "rec", "from": [], "unit": ENDING_UNIT, "max_seq_len": 4}), extern=X4, lens={"data": [7, 4, 1]})
case("fuzzrec_loop_ended_by_step", "fuzzrec_ending", dict(ENC, output={
    "class": "rec", "from": [], "include_eos": True, "max_seq_len": 5,
    "unit": dict(ENDING_UNIT, end={"class": "compare", "kind": "greater_equal", "from": ":i", "value": 2})}),
    extern=X4, lens={"data": [7, 4, 1]})
# ... with an 'end' that alone reads a base: layer (RETURNN always builds 'end'; here that layer was not found)
case("fuzzrec_loop_ended_by_end_alone_reading_base", "fuzzrec_ending", dict(ENC, output={
    "class": "rec", "from": [], "max_seq_len": 6, "unit": {
        "s": {"class": "linear", "activation": "tanh", "n_out": 3, "from": ["prev:s", "prev:output"]},
        "output": {"class": "linear", "activation": "tanh", "n_out": 3, "from": ["s"]},
        "end": {"class": "compare", "kind": "greater_equal", "from": [":i", "base:enc_len"]}}}),
    extern=X4, lens={"data": [5, 3, 1]})
# ... with the rec layer's own target: its length only where RETURNN's train_flag is not False (training, eval);
# in the forward task 'end' ends the loop (returnn_fuzz --kind mutate --train seed 48: the target's length was used)
XC = dict(X4, classes={"dim": 5, "sparse": True, "available_for_inference": False})
for train in (False, True):
    case("fuzzrec_loop_with_target_ended_by_end_train%i" % train, "fuzzrec_ending", dict(ENC, output={
        "class": "rec", "from": [], "unit": ENDING_UNIT, "target": "classes", "max_seq_len": 6}),
        extern=XC, lens={"data": [5, 3, 0], "classes": [7, 2, 4]}, train=train)
# attention energies (explicit var1 T / var2 None) of a query computed after the loop (from a state in it):
# over the whole sequence the dot does not build, so RETURNN runs them per step (all encoder frames per
# query frame); was refused here (returnn_fuzz --kind rec seeds 40, 44)
case("fuzzrec_attention_query_after_loop", "fuzzrec_attention", {
    "enc": {"class": "linear", "activation": "tanh", "n_out": 3, "from": "data"},
    "output": {"class": "rec", "from": "data", "unit": {
        "s0": {"class": "linear", "activation": "tanh", "n_out": 4, "from": ["data:source", "prev:s0"]},
        "q": {"class": "linear", "activation": None, "n_out": 3, "from": "s0"},
        "energy": {"class": "dot", "from": ["base:enc", "q"], "red1": "F", "red2": "F", "var1": "T", "var2": None},
        "weights": {"class": "softmax_over_spatial", "from": "energy"},
        "output": {"class": "generic_attention", "weights": "weights", "base": "base:enc"}}}},
    extern=X5, lens={"data": [7, 4, 1]})
# layers after the loop (nothing in it reads them) reading ':i' run over the stacked frames, ':i' the frames'
# indices, as RETURNN moves them out: a window there is RETURNN's centered one, over the loop's frame past a
# sequence's end, whose step read prev: of a moved-out layer, the last real frame (returnn_fuzz --kind rec
# seed 41; was refused: 'inside a rec loop, set window_right=0')
case("fuzzrec_step_index_after_loop", "fuzzrec_after_loop", {"output": {"class": "rec", "from": "data", "unit": {
    "emb": {"class": "linear", "activation": None, "n_out": 4, "from": "data:source"},
    "s0": {"class": "rnn_cell", "unit": "LSTMBlock", "n_out": 3, "from": "emb"},
    "s1": {"class": "linear", "activation": None, "n_out": 3, "from": ["s0", "prev:s1", "prev:emb"]},
    "s2_win": {"class": "window", "window_size": 2, "from": "s1"},
    "s2": {"class": "reduce", "mode": "sum", "axis": "stag:s2_win:window", "from": "s2_win"},
    "output": {"class": "eval", "from": ["s2", ":i"], "eval": "source(0) * tf.cast(source(1) + 1, tf.float32) * 0.25"}}}},
    extern={"data": {"dim": 7, "sparse": True}}, lens={"data": [7, 4, 1]})
# nativelstmlowmem's initial_state: its one state c (h starts at zeros), as RETURNN's LstmLowMem takes it (returnn_fuzz
# --kind rec seed 47; was refused)
case("fuzzrec_lowmem_lstm_initial_state_layer", "fuzzrec_last_state", {
    "data_mean": {"class": "reduce", "mode": "mean", "axis": "T", "from": "data"},
    "init": {"class": "linear", "activation": "tanh", "n_out": 4, "from": "data_mean"},
    "output": {"class": "rec", "unit": "nativelstmlowmem", "n_out": 4, "from": "data", "initial_state": "init",
               "direction": -1}}, extern=X4, lens={"data": [7, 4, 0]})
case("fuzzrec_lowmem_lstm_initial_state_var", "fuzzrec_last_state", {
    "l": {"class": "rec", "unit": "nativelstmlowmem", "n_out": 3, "from": "data", "initial_state": "var"},
    "output": {"class": "get_last_hidden_state", "from": "l", "n_out": 3}}, extern=X4, lens={"data": [7, 4, 0]})
# the loop's steps past a sequence's end read a moved-out embedding of its sparse input at the padded frames
# as RETURNN does (the padded class index embedded; was zeros), which a pool after the loop reads
# (returnn_fuzz --kind rec seed 48)
case("fuzzrec_embedding_read_past_the_end", "fuzz_rec", {
    "loop": {"class": "rec", "from": "data", "unit": {
        "emb": {"class": "linear", "activation": None, "n_out": 4, "from": "data:source"},
        "output": {"class": "linear", "activation": "sigmoid", "n_out": 4, "from": ["emb", "prev:output"],
                   "with_bias": False}}},
    "output": {"class": "pool", "mode": "avg", "pool_size": [3], "padding": "same", "from": "loop"}},
    extern={"data": {"dim": 7, "sparse": True}}, lens={"data": [7, 4, 1]})
# layernormvariantslstm's initial_state over whole sequences (returnn_fuzz --kind rec seeds 62, 64; was refused):
# RETURNN's state (c, h) from a variable, ones or a layer, also run backwards, its final state after it
case("fuzzrec_layernorm_lstm_initial_state_var", "fuzzrec_last_state", {
    "l": {"class": "rec", "unit": "layernormvariantslstm", "n_out": 3, "from": "data", "initial_state": "var",
          "unit_opts": {"hidden_norm": True}},
    "last": {"class": "get_last_hidden_state", "from": "l", "n_out": 6},
    "output": {"class": "copy", "from": "last"}}, extern=X4, lens={"data": [7, 4, 0]})
case("fuzzrec_layernorm_lstm_initial_state_layer", "fuzzrec_last_state", {
    "data_mean": {"class": "reduce", "mode": "mean", "axis": "T", "from": "data"},
    "init": {"class": "linear", "activation": "tanh", "n_out": 3, "from": "data_mean"},
    "output": {"class": "rec", "unit": "layernormvariantslstm", "n_out": 3, "from": "data", "direction": -1,
               "initial_state": {"c": "init", "h": "ones"}}}, extern=X4, lens={"data": [7, 4, 0]})
# the loop's steps past a sequence's end read a moved-out layer's padded frames as the layer computed them (here
# exp of a layer norm's shift; RETURNN's TensorArray of the padded tensor), not zeros; a window after the loop
# reads those steps at each sequence's end
case("fuzzrec_moved_out_layer_norm_past_the_end", "fuzz_rec", {
    "loop": {"class": "rec", "from": "data", "unit": {
        "ln": {"class": "layer_norm", "from": "data:source"},
        "a": {"class": "activation", "activation": "exp", "from": "ln"},
        "output": {"class": "linear", "activation": "sigmoid", "n_out": 4, "from": ["a", "prev:output"],
                   "with_bias": False}}},
    "output": {"class": "window", "window_size": 3, "from": "loop"}}, extern=X4)
# an rnn_cell over whole sequences of time-major input (RETURNN reads it time-major); from behavior_version 18
# a window over T puts its window axis, then T, before the batch, so the reduced window is (T, B, F)
for where in ("net", "loop"):
    _cell = {"win": {"class": "window", "window_size": 2, "from": "data" if where == "net" else "data:source"},
             "red": {"class": "reduce", "mode": "sum", "axis": "stag:win:window", "from": "win"},
             "output": {"class": "rnn_cell", "unit": "StandardLSTM", "n_out": 3, "from": "red"}}
    case("fuzz_rnn_cell_time_major_input_bv18_%s" % where, "fuzz_rnn_cell",
         _cell if where == "net" else {"output": {"class": "rec", "from": "data", "unit": _cell}}, extern=X4,
         config={"behavior_version": 18}, lens={"data": [6, 4, 1]})
# a loop's steps past a sequence's end are computed (RETURNN stacks them unmasked): a linear resize after the
# loop interpolates them into each sequence's last frames (fuzz_82_76)
case("fuzzrec_loop_padding_resize_linear", "fuzz_rec", {
    "r": {"class": "rec", "from": "data", "unit": {"output": {
        "class": "linear", "n_out": 3, "activation": "tanh", "from": ["data:source", "prev:output"]}}},
    "output": {"class": "resize", "factor": 2, "axis": "T", "kind": "linear", "from": "r"}}, extern=X4,
    lens={"data": [6, 4, 1]})
# ... and a layer after the loop (moved out: it reads only in-loop layers) computes on them too, so a
# merge_dims of F and T (whose real positions then include T's padding) reads them (fuzzrec_109_1)
case("fuzzrec_loop_padding_after_loop_merge_dims", "fuzz_rec", {
    "loop": {"class": "rec", "from": "data", "unit": {
        "s1": {"class": "linear", "activation": "tanh", "n_out": 4, "from": ["data:source", "prev:s1"]},
        "output": {"class": "linear", "activation": "sigmoid", "n_out": 3, "from": "s1", "with_bias": False}}},
    "output": {"class": "merge_dims", "axes": ["F", "T"], "keep_order": True, "from": "loop"}}, extern=X5,
    lens={"data": [5, 3, 1]})
# prev: of a layer moved out of the loop is its whole padded sequence shifted by one frame (RETURNN reads it
# unmasked), so past a sequence's end it holds that layer's frames as computed there (a centered window over
# the last real frames); softmax_over_spatial without its time mask reads them (fuzzrec_109_19)
for where in ("after", "loop"):
    _out = {"class": "copy", "from": "prev:s0"} if where == "after" else {
        "class": "linear", "activation": "tanh", "n_out": 4, "from": ["prev:s0", "prev:output"]}
    case("fuzzrec_prev_of_moved_out_padding_%s" % where, "fuzz_rec", {
        "loop": {"class": "rec", "from": "data", "unit": {
            "s0_win": {"class": "window", "window_size": 3, "from": "data:source"},
            "s0": {"class": "reduce", "mode": "sum", "axis": "static:0", "from": "s0_win"},
            "output": _out}},
        "output": {"class": "softmax_over_spatial", "use_time_mask": False, "log_space": True, "from": "loop"}},
        extern=X5, lens={"data": [4, 2, 3]})
# a slice_nd kept in the loop whose size changes per step (RETURNN's test_SliceNdLayer_multidimensional_size
# with optimize_move_layers_out False): its frames have another width each step, stacked padded to the widest
# (the stacking failed here before: returnn_fuzz --kind mutate --train seed 36, CRASH)
_TM = dim_marker("time", None)
case("fuzzrec_slice_nd_per_step_size_in_loop", "fuzz_rec", {"output": {
    "class": "rec", "from": "data:data", "optimize_move_layers_out": False, "unit": {
        "const1": {"class": "constant", "value": 1},
        "start": {"class": "reinterpret_data", "from": "prev:choice", "set_sparse": False},
        "size": {"class": "combine", "from": ["const1", "start"], "kind": "add"},
        "slices": {"class": "slice_nd", "from": "base:data:data", "start": "start", "size": "size"},
        "output": {"class": "reduce", "from": "slices", "mode": "max", "axes": "stag:slice"},
        "prob": {"class": "softmax", "from": "data:source", "target": "classes", "loss": "ce"},
        "choice": {"class": "choice", "target": "classes", "beam_size": 3, "from": "prob", "input_type": "prob",
                   "initial_output": 0}}}},
    extern={"data": {"dim": 3, "same_dim_tags_as": {"t": _TM}},
            "classes": {"dim": 3, "sparse": True, "same_dim_tags_as": {"t": dim_ref("time")}}},
    config={"behavior_version": 38}, train=True, lens={"data": [7, 4, 1], "classes": [7, 4, 1]})
# a choice's keep_beams in training (teacher forcing, no search): no effect, as in RETURNN (refused here before:
# returnn_fuzz --kind mutate --train seed 39, GAP)
case("fuzzrec_choice_keep_beams_in_training", "fuzz_rec", {"output": {
    "class": "rec", "from": "data:data", "unit": {
        "start": {"class": "copy", "from": "prev:choice"},
        "slices": {"class": "slice_nd", "from": "base:data:data", "start": "start", "size": None},
        "output": {"class": "reduce", "from": "slices", "mode": "max", "axes": "stag:slice"},
        "prob": {"class": "softmax", "from": "data:source", "target": "classes", "loss": "ce"},
        "choice": {"class": "choice", "target": "classes", "beam_size": 3, "from": "prob", "input_type": "prob",
                   "initial_output": 0, "keep_beams": True}}}},
    extern={"data": {"dim": 3, "same_dim_tags_as": {"t": _TM}},
            "classes": {"dim": 3, "sparse": True, "same_dim_tags_as": {"t": dim_ref("time")}}},
    config={"behavior_version": 38}, train=True, lens={"data": [7, 4, 1], "classes": [7, 4, 1]})
# extra_deps of a unit layer (copy family): the named unit, prev: or base: layer is built and run with it, its
# value unused, as RETURNN's get_dep_layers (here the unit ignored them before: their parameters were missing)
_XD = {"data": {"dim": 3}}
_B = {"class": "linear", "from": ["prev:output", "data:source"], "n_out": 3, "activation": "tanh"}
_A = {"class": "linear", "from": "data:source", "n_out": 2, "activation": "tanh"}
case("fuzzrec_extra_deps_unit_layer", "fuzz_rec", {"output": {"class": "rec", "from": "data", "unit": {
    "a": _A, "b": _B, "output": {"class": "copy", "from": "b", "extra_deps": ["a"]}}}}, extern=_XD)
case("fuzzrec_extra_deps_prev_in_loop", "fuzz_rec", {"output": {"class": "rec", "from": "data", "unit": {
    "a": dict(_A, **{"from": ["data:source", "prev:a"]}), "b": _B,
    "output": {"class": "dropout", "dropout": 0.0, "from": "b", "extra_deps": "prev:a"}}}}, extern=_XD)
case("fuzzrec_extra_deps_base_layer", "fuzz_rec", {
    "x": {"class": "linear", "from": "data", "n_out": 2},
    "output": {"class": "rec", "from": "data", "unit": {
        "b": _B, "output": {"class": "copy", "from": "b", "extra_deps": ["base:x"]}}}}, extern=_XD)
# a loop over its source with a size_target no data has, in a network that does not evaluate (forward): RETURNN
# takes the length from the source and never reads size_target (refused here before: returnn_fuzz --kind mutate)
case("fuzzrec_size_target_unread_with_source", "fuzz_rec", {"output": {
    "class": "rec", "from": "data", "size_target": "classes", "unit": {"b": _B, "output": {"class": "copy", "from": "b"}}}},
    extern=_XD)
# a choice with scheduled_sampling in training (refused here before): RETURNN samples its label from its scores
# (one near one-hot distribution: the argmax) and feeds it back; gold_mixin_prob 1: always the target
_XS = {"data": {"dim": 3}, "classes": {"dim": 4, "sparse": True}}


def _ss_net(scheduled_sampling, input_type="prob", scale=1.0):
    return {"output": {"class": "rec", "from": "data", "unit": {
        "emb": {"class": "linear", "from": "prev:choice", "n_out": 3, "activation": None},
        "s": {"class": "linear", "from": ["emb", "data:source"], "n_out": 4, "activation": "tanh"},
        "big": {"class": "eval", "from": "s", "eval": "source(0) * %r" % scale},
        "prob": {"class": "softmax", "from": "big", "target": "classes", "loss": "ce"} if input_type == "prob" else
                {"class": "linear", "activation": "log_softmax", "from": "big", "n_out": 4},
        "choice": {"class": "choice", "from": "prob", "target": "classes", "beam_size": 1, "input_type": input_type,
                   "scheduled_sampling": scheduled_sampling, "initial_output": 0},
        "output": {"class": "copy", "from": "choice"}}}}


_SS_LENS = {"data": [5, 3, 2], "classes": [5, 3, 2]}
case("fuzzrec_scheduled_sampling_gold", "fuzz_rec", _ss_net({"gold_mixin_prob": 1.0}), extern=_XS, train=True,
     lens=_SS_LENS)
case("fuzzrec_scheduled_sampling_prob", "fuzz_rec", _ss_net(True, "prob", 1000.0), extern=_XS, train=True,
     lens=_SS_LENS)
case("fuzzrec_scheduled_sampling_log_prob", "fuzz_rec", _ss_net(True, "log_prob", 1000.0), extern=_XS, train=True,
     lens=_SS_LENS)
# the published RNA/RNN-T decoders of 2021 (jotix16's transducer_fullsum): a masked_computation of the previous
# non-blank label with initial_output on it and on its unit, nothing reading prev: of it (refused here before)
def _rna_net(init_masked):
    masked = {"class": "masked_computation", "unit": {"class": "copy", "initial_output": 0}, "from": "prev:output_",
              "mask": "prev:emit", "initial_output": init_masked}
    return {"output": {"class": "rec", "from": "data", "optimize_move_layers_out": False, "unit": {
        "wo_b": masked,
        "nb": {"class": "linear", "from": "wo_b", "n_out": 2, "activation": None},
        "s": {"class": "linear", "from": ["data:source", "nb"], "n_out": 4, "activation": "tanh"},
        "prob": {"class": "softmax", "from": "s", "target": "classes", "loss": "ce"},
        "output_": {"class": "choice", "from": "prob", "target": "classes", "beam_size": 1, "initial_output": 0},
        "emit": {"class": "compare", "from": "output_", "value": 0, "kind": "not_equal", "initial_output": True},
        "output": {"class": "copy", "from": "s"}}}}


case("fuzzrec_masked_initial_output_unread", "fuzz_rec", _rna_net(0), extern=_XS, train=True, lens=_SS_LENS)
case("fuzzrec_masked_initial_output_unit_wins", "fuzz_rec", _rna_net(1), extern=_XS, train=True, lens=_SS_LENS)
# use_global_rec_step_offset on a sub-network unit: RETURNN adds a placeholder fed from outside to ':i'; a unit
# that does not read ':i' computes the same (returnn_fuzz --kind mutate --train seed 48: refused here as unknown)
case("fuzzrec_global_rec_step_offset_unread", "fuzzrec_options", {"output": {
    "class": "rec", "from": "data", "use_global_rec_step_offset": True, "unit": {
        "cell": {"class": "rnn_cell", "unit": "GRU", "n_out": 4, "from": "data:source"},
        "output": {"class": "copy", "from": "cell"}}}}, extern=X4, train=True)
# ... initial_output 'var' there: RETURNN makes no parameter for it (returnn_fuzz --kind mutate --train seed 50: an
# extra parameter init_masked_var here)
case("fuzzrec_masked_initial_output_var_unused", "fuzz_rec", _rna_net("var"), extern=_XS, train=True, lens=_SS_LENS)
# gather's clip_to_valid on an empty sequence: RETURNN's tf.clip_by_value bounds above first, so the position becomes
# 0 (its padded frame 0 read), not -1 (zeros here before: mutate --train seed 164)
case("fuzzrec_loop_ended_by_end_clip_to_valid_empty", "fuzzrec_ending", dict(ENC, output={
    "class": "rec", "from": [], "include_eos": True, "max_seq_len": "max_len_from('base:data') + 1",
    "unit": dict(ENDING_UNIT, pos=dict(ENDING_UNIT["pos"], clip_to_valid=True))}), extern=X4, lens={"data": [5, 3, 0]})
# need_last on a layer in the loop: RETURNN keeps its last frame in the steps after a sequence's end (where it
# takes prev: of it), which a linear resize after the loop reads (returnn_fuzz mutate seed 250 #53)
case("fuzzrec_loop_need_last_padding_resize_linear", "fuzz_rec", {
    "r": {"class": "rec", "from": "data", "unit": {"output": {
        "class": "linear", "n_out": 3, "activation": "tanh", "from": ["data:source", "prev:output"], "need_last": True}}},
    "output": {"class": "resize", "factor": 2, "axis": "T", "kind": "linear", "from": "r"}}, extern=X4,
    lens={"data": [6, 4, 1]})
case("fuzzrec_loop_need_last_ended_by_end_layer", "fuzz_rec", {
    "enc": {"class": "reduce", "mode": "mean", "axis": "T", "from": "data"},
    "len": {"class": "length", "from": "data"},
    "r": {"class": "rec", "from": [], "max_seq_len": 6, "unit": {
        "output": {"class": "linear", "n_out": 3, "activation": "tanh", "from": ["base:enc", "prev:output"],
                   "need_last": True},
        "end": {"class": "compare", "kind": "greater_equal", "from": [":i", "base:len"]}}},
    "output": {"class": "resize", "factor": 2, "axis": "T", "kind": "linear", "from": "r"}}, extern=X4,
    lens={"data": [6, 4, 1]})
