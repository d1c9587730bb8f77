"""Golden cases of a searched loop with two choices (loaded by make_goldens.py), as a factored decoder has them
(patrick-wilken/returnn-examples factored-nmt: a lemma, then a factor given the lemma): in each step the first
choice extends every hypothesis by its labels and keeps the best beam_size, then the second does so from there;
the loop's value is the last choice's labels (all beam_size hypotheses, best first), loop/a the first choice's of
the same hypotheses. Over the source's frames without length normalization, and ended by 'end' (on either choice)
with it, the decoder an LSTM cell so no two hypotheses tie."""
from golden_dims import dim_marker, dim_ref
from make_goldens import case

X4_DIMS = {"data": {"dim_tags": [dim_ref("batch"), dim_marker("time"), dim_marker("feat", 4, "feature")]}}
ENC = {"class": "linear", "activation": "tanh", "with_bias": True, "out_dim": dim_marker("enc", 5, "feature"),
       "from": "data"}


def _unit(u, lin_a_from, lin_b_from, norm, **extra):
    unit = {
        "u": u,
        "lin_a": {"class": "linear", "activation": "log_softmax", "with_bias": True,
                  "out_dim": dim_marker("ca", 4, "feature"), "from": lin_a_from},
        "a": {"class": "choice", "from": "lin_a", "target": None, "beam_size": 3, "search": True,
              "input_type": "log_prob", "is_output_layer": True},
        "emb_a": {"class": "linear", "activation": None, "with_bias": False, "out_dim": dim_marker("ea", 3, "feature"),
                  "from": "a", "initial_output": 0},
        "lin_b": {"class": "linear", "activation": "log_softmax", "with_bias": True,
                  "out_dim": dim_marker("cb", 3, "feature"), "from": lin_b_from},
        "b": {"class": "choice", "from": "lin_b", "target": None, "beam_size": 3, "search": True,
              "input_type": "log_prob", "is_output_layer": True},
        "emb_b": {"class": "linear", "activation": None, "with_bias": False, "out_dim": dim_marker("eb", 2, "feature"),
                  "from": "b", "initial_output": 0},
        "output": {"class": "copy", "from": "b"}, **extra}
    if not norm:
        unit["a"]["length_normalization"] = unit["b"]["length_normalization"] = False
    return unit


OVER_TIME = _unit({"class": "rec_unstack", "from": "base:enc", "axis": dim_ref("time")}, ["u", "prev:emb_b"],
                  ["u", "emb_a"], norm=False)
for name, output in (("search_two_choices_over_time", "output"), ("search_two_choices_over_time_first", "out_a")):
    case(name, "search_two_choices", {
        "enc": ENC, "loop": {"class": "rec", "from": [], "axis": dim_ref("time"), "unit": OVER_TIME},
        "out_a": {"class": "copy", "from": "loop/a", "is_output_layer": True},
        "output": {"class": "copy", "from": "loop"}}, extern=X4_DIMS, lens={"data": [5, 3, 2]}, search=True,
        output=output)

for end_on in ("a", "b"):
    unit = _unit({"class": "reduce", "mode": "mean", "axis": "T", "from": "base:enc"}, ["s"], ["s", "emb_a"], norm=True,
                 s={"class": "rnn_cell", "unit": "LSTMBlock", "n_out": 4, "from": ["prev:emb_b", "u"]},
                 end={"class": "compare", "from": end_on, "value": 0, "kind": "equal"})
    for name, output in (("search_two_choices_end_on_%s" % end_on, "output"),
                         ("search_two_choices_end_on_%s_first" % end_on, "out_a")):
        case(name, "search_two_choices", {
            "enc": ENC, "loop": {"class": "rec", "from": [], "max_seq_len": 6, "unit": unit},
            "out_a": {"class": "copy", "from": "loop/a", "is_output_layer": True},
            "output": {"class": "copy", "from": "loop"}}, extern=X4_DIMS, lens={"data": [5, 3, 2]}, search=True,
            output=output)
