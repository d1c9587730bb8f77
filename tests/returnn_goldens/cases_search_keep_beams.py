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
