"""Golden cases of rec loops in the forms rwth-i6/returnn_common writes (benchmarks/returnn_common_nets.py,
its test_nn_loop configs; loaded by make_goldens.py): a loop without source ended by its 'end' sub-layer whose
most steps come from a scalar layer (``max_seq_len_via``) and whose time axis is a new ``axis`` Dim, and the
one-frame template of a ``prev:`` accumulator taken from its ``initial_output`` ``base:`` layer (RETURNN takes
that layer's template; a concat of such a ``prev:`` with the frame feeding a linear of the loop)."""
from golden_dims import as_tuple, dim_marker, dim_ref
from make_goldens import case

TIME = dim_marker("time")
FEAT = dim_marker("feat", 4, "feature")
X4_DIMS = {"data": {"dim_tags": [dim_ref("batch"), TIME, FEAT]}}
LENS = {"data": [7, 4, 1]}

# lengths 7, 4, 1 start the accumulator at 7, 4, 1; 'end' at >= 6: 1 step, 3 steps, 6 steps (less one without
# include_eos); the scalar layer 'limit' cuts the loop at 3 steps
for label, limit, eos in (("end", 10, False), ("cut", 3, True)):
    case("rc_loop_max_seq_len_via_%s" % label, "rc_loops", {
        "len": {"class": "length", "from": "data"},
        "init": {"class": "cast", "from": "len", "dtype": "float32"},
        "limit": {"class": "constant", "value": limit},
        "red": {"class": "reduce", "mode": "mean", "axis": dim_ref("time"), "from": "data"},
        "loop": {"class": "rec", "from": [], "max_seq_len_via": "limit", "axis": dim_marker("loop"),
                 "include_eos": eos, "unit": {
                     "add": {"class": "eval", "from": "prev:add", "eval": "source(0) + 1.0",
                             "initial_output": "base:init"},
                     "end": {"class": "compare", "kind": "greater_equal", "from": "add", "value": 6.0},
                     "mul": {"class": "combine", "kind": "mul", "from": ["add", "base:red"]},
                     "output": {"class": "copy", "from": "mul"}}},
        "output": {"class": "copy", "from": "loop"}}, extern=X4_DIMS, lens=LENS)

# the accumulator's sources tell no template (prev: of itself, a scalar frame of a range): RETURNN takes the
# initial_output layer's (B, F)
case("rc_loop_prev_template_from_initial_output", "rc_loops", {
    "range": {"class": "range_in_axis", "from": "data", "axis": dim_ref("time"), "dtype": "float32"},
    "init": {"class": "reduce", "mode": "max", "axis": dim_ref("time"), "from": "data"},
    "loop": {"class": "rec", "from": [], "axis": dim_ref("time"), "unit": {
        "u": {"class": "rec_unstack", "from": "base:range", "axis": dim_ref("time")},
        "acc": {"class": "combine", "kind": "add", "from": ["prev:acc", "u"], "initial_output": "base:init"},
        "output": {"class": "copy", "from": "acc"}}},
    "output": {"class": "copy", "from": "loop"}}, extern=X4_DIMS, lens=LENS)

# returnn_common's Linear cell: concat of the frame and prev:h (its template from the initial_output layer)
H = dim_marker("h", 3, "feature")
case("rc_loop_concat_prev_of_initial_output", "rc_loops", {
    "red": {"class": "reduce", "mode": "mean", "axis": dim_ref("time"), "from": "data"},
    "init": {"class": "linear", "activation": "tanh", "with_bias": True, "out_dim": H, "from": "red"},
    "loop": {"class": "rec", "from": [], "axis": dim_ref("time"), "unit": {
        "h": {"class": "copy", "from": "lin", "initial_output": "base:init"},
        "u": {"class": "rec_unstack", "from": "base:data", "axis": dim_ref("time")},
        "concat": {"class": "concat", "from": [as_tuple("u", dim_ref("feat")), as_tuple("prev:h", dim_ref("h"))],
                   "out_dim": dim_marker("cat", 7, "feature")},
        "lin": {"class": "linear", "activation": "tanh", "with_bias": True, "out_dim": dim_ref("h"),
                "from": "concat"},
        "output": {"class": "copy", "from": "lin"}}},
    "output": {"class": "copy", "from": "loop"}}, extern=X4_DIMS, lens=LENS)

# returnn_common's test_ctc_search: a beam search in a loop over a declared axis (rec_unstack, 'axis' without
# 'from'): the sequences' lengths end the loop; as any loop without 'end', the step at a sequence's length still
# chooses, on the frame its layers computed there (the second and third beams of the shorter sequences tell)
CLS = dim_marker("cls", 3, "feature")
case("rc_loop_search_over_declared_axis", "rc_loops", {
    "enc": {"class": "linear", "activation": "tanh", "with_bias": True, "out_dim": dim_marker("enc", 5, "feature"),
            "from": "data"},
    "loop": {"class": "rec", "from": [], "axis": dim_ref("time"), "unit": {
        "u": {"class": "rec_unstack", "from": "base:enc", "axis": dim_ref("time")},
        "lin": {"class": "linear", "activation": "log_softmax", "with_bias": True, "out_dim": CLS, "from": "u"},
        "choice": {"class": "choice", "from": "lin", "target": None, "beam_size": 3, "search": True,
                   "input_type": "log_prob", "length_normalization": False},
        "output": {"class": "copy", "from": "choice"}}},
    "output": {"class": "copy", "from": "loop"}}, extern=X4_DIMS, lens={"data": [9, 6, 3]})
# the same with the padded frames mattering: the step past a shorter sequence's end reorders its beams by the scores
# computed on the padded frame (read as masked zeros here before, and no step past the end: mutate seed 152)
case("rc_loop_search_step_past_the_end", "rc_loops", {
    "enc": {"class": "linear", "activation": "tanh", "out_dim": dim_marker("enc", 5, "feature"), "from": "data"},
    "loop": {"class": "rec", "from": [], "axis": dim_ref("time"), "unit": {
        "u": {"class": "rec_unstack", "from": "base:enc", "axis": dim_ref("time")},
        "lin": {"class": "linear", "activation": "log_softmax", "out_dim": CLS, "from": "u"},
        "choice": {"class": "choice", "from": "lin", "target": None, "beam_size": 3, "search": True,
                   "input_type": "log_prob", "length_normalization": False},
        "output": {"class": "copy", "from": "choice"}}},
    "output": {"class": "copy", "from": "loop"}}, extern=X4_DIMS, lens={"data": [9, 2, 5]})
# a choice reading a log_softmax layer as 'prob' (its default input_type): RETURNN's get_log_output undoes only a
# softmax, so it takes safe_log of the (negative) log-probabilities: all ties (mutate seed 169: log_softmax here)
case("rc_loop_search_log_softmax_read_as_prob", "rc_loops", {
    "enc": {"class": "linear", "activation": "tanh", "out_dim": dim_marker("enc", 5, "feature"), "from": "data"},
    "loop": {"class": "rec", "from": [], "axis": dim_ref("time"), "unit": {
        "u": {"class": "rec_unstack", "from": "base:enc", "axis": dim_ref("time")},
        "lin": {"class": "linear", "activation": "log_softmax", "out_dim": CLS, "from": "u"},
        "choice": {"class": "choice", "from": "lin", "target": None, "beam_size": 3, "search": True,
                   "length_normalization": False},
        "output": {"class": "copy", "from": "choice"}}},
    "output": {"class": "copy", "from": "loop"}}, extern=X4_DIMS, lens={"data": [9, 6, 3]})
