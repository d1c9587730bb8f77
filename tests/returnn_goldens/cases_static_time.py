"""Layers over a static time axis (extern data ``shape (6, 5)``, every sequence 6 frames, no lengths):
RETURNN builds them with its full-length sequence lengths (``Data.get_sequence_lengths``)."""
from make_goldens import case

STATIC = {"data": {"shape": (6, 5), "time_dim_axis": 1}}
L6 = {"data": [6, 6, 6]}


def _static(name, layer):
    case("static_time_" + name, "static_time", {"output": dict(layer, **{"from": "data"})}, extern=STATIC, lens=L6)


_static("rec_nativelstm2", {"class": "rec", "unit": "nativelstm2", "n_out": 3})
_static("rec_lstm_backward", {"class": "rec", "unit": "nativelstm2", "n_out": 3, "direction": -1})
_static("rec_gru", {"class": "rec", "unit": "gru", "n_out": 3})
_static("prefix_in_time", {"class": "prefix_in_time", "repeat": 2})
_static("postfix_in_time", {"class": "postfix_in_time", "repeat": 2})
_static("rec_subnet", {"class": "rec", "from": "data", "unit": {
    "h": {"class": "linear", "activation": "tanh", "n_out": 3, "from": ["data:source", "prev:h"]},
    "output": {"class": "copy", "from": "h"}}})
_static("conv_then_lstm_layer_norm", {"class": "rec", "unit": "lstm", "unit_opts": {"layer_norm": False}, "n_out": 3})
