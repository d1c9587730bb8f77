"""Golden case of a choice's ``keep_beams`` in a search (loaded by make_goldens.py): RETURNN's ``beam_search``
then keeps each incoming hypothesis with beam_size / beam_in continuations (after the first step, where the one
hypothesis there is gives the beam_size best labels, each hypothesis continues with its best label), instead of
the best beam_size continuations of all. The declared-axis search of cases_rc_loops.py (all beams compared)."""
from golden_dims import dim_marker, dim_ref
from make_goldens import case

X4_DIMS = {"data": {"dim_tags": [dim_ref("batch"), dim_marker("time"), dim_marker("feat", 4, "feature")]}}
case("search_choice_keep_beams", "search_keep_beams", {
    "enc": {"class": "linear", "activation": "tanh", "with_bias": True, "out_dim": dim_marker("enc", 5, "feature"),
            "from": "data"},
    "loop": {"class": "rec", "from": [], "axis": dim_ref("time"), "unit": {
        "u": {"class": "rec_unstack", "from": "base:enc", "axis": dim_ref("time")},
        "lin": {"class": "linear", "activation": "log_softmax", "with_bias": True,
                "out_dim": dim_marker("cls", 4, "feature"), "from": "u"},
        "choice": {"class": "choice", "from": "lin", "target": None, "beam_size": 3, "search": True,
                   "input_type": "log_prob", "length_normalization": False, "keep_beams": True},
        "output": {"class": "copy", "from": "choice"}}},
    "output": {"class": "copy", "from": "loop"}}, extern=X4_DIMS, lens={"data": [9, 6, 3]})

# a searched loop in a training network (the choice's search True): a sub-layer that reads no choice (a counter
# over a constant with the batch axis) has no beam in RETURNN, so the loop's output is (T, B, F), not the beam's
# B * K rows; read from outside as loop/i likewise, beside the labels' hypotheses
COUNTER_UNIT = {
    "u": {"class": "rec_unstack", "from": "base:enc", "axis": dim_ref("time")},
    "one": {"class": "constant", "value": 1.0, "shape": [2], "with_batch_dim": True},
    "i": {"class": "combine", "kind": "add", "from": ["prev:i", "one"], "initial_output": 0},
    "lin": {"class": "linear", "activation": "log_softmax", "with_bias": True, "out_dim": dim_marker("cls", 3, "feature"),
            "from": "u"},
    "choice": {"class": "choice", "from": "lin", "target": None, "beam_size": 3, "search": True,
               "input_type": "log_prob", "length_normalization": False}}
ENC = {"class": "linear", "activation": "tanh", "with_bias": True, "out_dim": dim_marker("enc", 5, "feature"),
       "from": "data"}
case("search_train_beam_free_output", "search_keep_beams", {
    "enc": ENC,
    "loop": {"class": "rec", "from": [], "axis": dim_ref("time"), "unit": dict(
        COUNTER_UNIT, output={"class": "copy", "from": "i"},
        labels={"class": "copy", "from": "choice", "is_output_layer": True})},
    "output": {"class": "copy", "from": "loop"}}, extern=X4_DIMS, lens={"data": [9, 6, 3]}, train=True)
case("search_train_beam_free_sub_layer", "search_keep_beams", {
    "enc": ENC,
    "loop": {"class": "rec", "from": [], "axis": dim_ref("time"), "unit": dict(
        COUNTER_UNIT, i=dict(COUNTER_UNIT["i"], is_output_layer=True), output={"class": "copy", "from": "choice"})},
    "output": {"class": "copy", "from": "loop/i"}}, extern=X4_DIMS, lens={"data": [9, 6, 3]}, train=True)
