"""Golden cases of ``need_last`` in a searched loop (loaded by make_goldens.py): RETURNN keeps a need_last
layer's last frame in the steps after a hypothesis ended (where its end flag is set, with include_eos the
previous step's), also in beam search, so a layer reading the traced-back frames' padding (a linear resize)
sees the last frame repeated."""
from golden_dims import dim_marker, dim_ref
from make_goldens import case

X4_DIMS = {"data": {"dim_tags": [dim_ref("batch"), dim_marker("time"), dim_marker("feat", 4, "feature")]}}


def _unit(include_eos: bool) -> dict:
    return {
        "lin": {"class": "linear", "activation": "log_softmax", "with_bias": True,
                "out_dim": dim_marker("cls", 4, "feature"), "from": ["base:enc", "prev:h"]},
        "choice": {"class": "choice", "from": "lin", "target": None, "beam_size": 3, "search": True,
                   "input_type": "log_prob", "initial_output": 0},
        "emb": {"class": "linear", "activation": None, "with_bias": False, "out_dim": dim_marker("emb", 3, "feature"),
                "from": "choice"},
        "h": {"class": "linear", "activation": "tanh", "with_bias": True, "out_dim": dim_marker("h", 3, "feature"),
              "from": ["emb", "prev:h"], "need_last": True, "is_output_layer": True},
        "end": {"class": "compare", "kind": "equal", "value": 3, "from": "choice"},
        "output": {"class": "copy", "from": "choice"}}


for eos in (False, True):
    case("search_need_last_padding_resize%s" % ("_include_eos" if eos else ""), "search_need_last", {
        "enc": {"class": "reduce", "mode": "mean", "axis": "T", "from": "data"},
        "loop": {"class": "rec", "from": [], "max_seq_len": 7, "include_eos": eos, "unit": _unit(eos)},
        "output": {"class": "resize", "factor": 2, "axis": "T", "kind": "linear", "from": "loop/h"}},
        extern=X4_DIMS, lens={"data": [5, 4, 2]}, search=True)
