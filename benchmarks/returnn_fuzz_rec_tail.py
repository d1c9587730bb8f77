"""More rec draws for the differential check (:mod:`returnn_fuzz_rec`, ``--kind rec``, seeds >= 40):
``rec`` layers with a named unit over the whole sequence (every unit name RETURNN knows, with the
``unit_opts`` its cell takes, ``direction: -1``, the ``initial_state`` forms, read back by
``get_last_hidden_state`` or stacked into a bidirectional pair), and loop forms the plain loop draws
never use: ``rec_unstack`` of an outside layer, ``masked_computation`` (with ``unmask``), ``cond``,
``get_rec_accumulated`` / ``rec_last_output`` of a sub-layer, a loop that ends itself (an ``end``
layer, ``max_seq_len``, ``include_eos``), ``optimize_move_layers_out: False``.

Every draw is reproducible from (seed, index); the case names carry them.
"""
from __future__ import annotations

import random
from typing import Any, Dict, List, Optional

Layer = Dict[str, Any]

LSTM_NATIVE = ["lstm", "nativelstm", "nativelstm2", "nativelstmlowmem", "lstmp", "lstmblock", "lstmblockfused",
               "cudnnlstm", "vanillalstm"]
LSTM_TF = ["standardlstm", "basiclstm", "zoneoutlstm", "layernormvariantslstm"]
ONE_STATE = ["gru", "basicrnn", "rhn", "grublock", "cudnngru"]
LENS = [[7, 4, 1], [5, 3, 0], [6, 6, 2], [1, 1, 1], [4, 2, 3]]


def _unit_opts(rng: random.Random, unit: str) -> Optional[Dict[str, Any]]:
    """Options a RETURNN user sets for this unit (some of them RETURNN refuses: that is checked too)."""
    if rng.random() < 0.4:
        return None
    if unit in ("standardlstm", "basiclstm"):
        opts: Dict[str, Any] = {}
        if rng.random() < 0.6:
            opts["forget_bias"] = rng.choice([0.0, 1.0, 0.5])
        if unit == "standardlstm" and rng.random() < 0.4:
            opts["use_peepholes"] = True
        if unit == "standardlstm" and rng.random() < 0.3:
            opts["cell_clip"] = rng.choice([0.5, 1.0])
        return opts
    if unit == "lstmp":
        return {"num_proj": rng.choice([2, 3])} if rng.random() < 0.5 else {"forget_bias": 0.0}
    if unit in LSTM_NATIVE:
        return rng.choice([{"forget_bias": 0.0}, {"forget_bias": 1.0}, {"rec_weight_dropout": 0.1}])
    if unit == "zoneoutlstm":
        opts = {"zoneout_factor_cell": rng.choice([0.0, 0.1, 0.5]),
                "zoneout_factor_output": rng.choice([0.0, 0.05, 0.3])}
        if rng.random() < 0.4:
            opts["use_zoneout_output"] = rng.choice([True, False])
        return opts
    if unit == "rhn":
        opts = {"depth": rng.choice([1, 2, 3])}
        if rng.random() < 0.4:
            opts["transform_bias"] = rng.choice([-1.0, 0.5])
        if rng.random() < 0.2:
            opts["dropout"] = 0.2
        return opts
    if unit == "layernormvariantslstm":
        variant = rng.choice([{}, {"global_norm": False, "per_gate_norm": True},
                              {"global_norm": False, "per_gate_norm": True, "cell_norm_in_output": False},
                              {"with_concat": False}, {"global_norm": False, "global_norm_joined": True},
                              {"cell_norm": False, "hidden_norm": True}])
        variant = dict(variant)
        if rng.random() < 0.4:
            variant["forget_bias"] = rng.choice([0.0, 1.0])
        if rng.random() < 0.3:
            variant["norm_gain"], variant["norm_shift"] = 0.5, 0.1
        return variant
    return None


def _state_layer(network: Dict[str, Layer], name: str, n: int, src: str = "data") -> str:
    """A (batch, n) layer: the mean over time of the input, projected."""
    if "data_mean" not in network:
        network["data_mean"] = {"class": "reduce", "mode": "mean", "axis": "T", "from": src}
    network[name] = {"class": "linear", "activation": "tanh", "n_out": n, "from": "data_mean"}
    return name


def _initial_state(rng: random.Random, network: Dict[str, Layer], unit: str, n: int, prefix: str) -> Any:
    lstm = unit in LSTM_NATIVE + LSTM_TF
    forms: List[Any] = [None, 0, "zeros", 1, "ones", "var", "layer"]
    if lstm:
        forms += ["dict", "list"]
    form = rng.choice(forms)
    if form == "layer":
        return _state_layer(network, prefix + "_init", n)
    if form == "dict":
        return {"c": _state_layer(network, prefix + "_init_c", n), "h": rng.choice(["zeros", prefix + "_init_c"])}
    if form == "list":
        return [_state_layer(network, prefix + "_init_c", n), _state_layer(network, prefix + "_init_h", n)]
    return form


def _unit_layer(rng: random.Random, network: Dict[str, Layer], name: str, src: Any, sparse: bool) -> Layer:
    unit = rng.choice(LSTM_NATIVE + LSTM_TF + LSTM_TF + ONE_STATE + ONE_STATE)
    n_out = rng.choice([3, 4])
    layer: Layer = {"class": "rec", "unit": unit, "n_out": n_out, "from": src}
    opts = _unit_opts(rng, unit)
    if opts is not None:
        layer["unit_opts"] = opts
    if rng.random() < 0.4:
        layer["direction"] = rng.choice([-1, -1, 1])
    if rng.random() < 0.4:
        state = _initial_state(rng, network, unit, n_out, name)
        if state is not None:
            layer["initial_state"] = state
    if unit in ("standardlstm", "basiclstm", "gru", "zoneoutlstm") and rng.random() < 0.15:
        layer["unroll"] = True  # RETURNN's static_rnn over max_seq_len frames (the input must fit)
        layer["max_seq_len"] = rng.choice([7, 9])
    if sparse and unit not in ("lstm", "nativelstm2", "lstmp"):  # mostly dense inputs: RETURNN's cells need them
        network["emb"] = {"class": "linear", "activation": None, "n_out": 4, "from": "data"}
        layer["from"] = "emb"
    return layer


def _draw_unit(rng: random.Random, network: Dict[str, Layer], sparse: bool) -> str:
    """A named-unit rec layer (or a bidirectional pair, or two stacked); returns the family."""
    form = rng.choice(["single", "single", "bidir", "stack", "last_state"])
    if form == "bidir":
        fw = _unit_layer(rng, network, "fw", "data", sparse)
        bw = _unit_layer(rng, network, "bw", "data", sparse)
        fw.pop("direction", None)
        bw["direction"] = -1
        network["fw"], network["bw"] = fw, bw
        network["output"] = {"class": "copy", "from": ["fw", "bw"]}
        return "rec_unit_bidir[%s,%s]" % (fw["unit"], bw["unit"])
    if form == "stack":
        network["l1"] = _unit_layer(rng, network, "l1", "data", sparse)
        network["output"] = _unit_layer(rng, network, "l2", "l1", False)
        return "rec_unit_stack[%s,%s]" % (network["l1"]["unit"], network["output"]["unit"])
    layer = _unit_layer(rng, network, "lstm", "data", sparse)
    if form == "last_state":
        network["lstm"] = layer
        lstm = layer["unit"] in LSTM_NATIVE + LSTM_TF
        key = rng.choice(["*", "c", "h"] if lstm else ["*", None])
        n = layer["n_out"] * (2 if lstm and key == "*" and layer["unit"] != "nativelstmlowmem" else 1)
        network["output"] = {"class": "get_last_hidden_state", "from": "lstm", "n_out": n, "key": key}
        return "rec_unit_last_state[%s,%s]" % (layer["unit"], key)
    network["output"] = layer
    return "rec_unit[%s]" % layer["unit"]


def _per_frame(rng: random.Random, sparse: bool) -> Dict[str, Layer]:
    """A dense per-frame value ``x`` of the loop (an embedding of sparse inputs)."""
    if sparse:
        return {"x": {"class": "linear", "activation": None, "n_out": 4, "from": "data:source"}}
    return {"x": {"class": "linear", "activation": rng.choice(["tanh", None]), "n_out": 4, "from": "data:source"}}


def _mask(rng: random.Random, unit: Dict[str, Layer]) -> None:
    """``mask``: a per-step boolean of the loop."""
    if rng.random() < 0.5:
        unit["red"] = {"class": "reduce", "mode": "sum", "axis": "F", "from": "x"}
        unit["mask"] = {"class": "compare", "kind": "greater", "value": 0.0, "from": "red"}
    else:
        unit["const1"] = {"class": "constant", "value": rng.choice([0, 1]), "with_batch_dim": True}
        unit["mask"] = {"class": "eval", "from": [":i", "const1"], "out_type": {"dtype": "bool"},
                        "eval": "tf.equal(source(0) % 2, source(1))"}


def _masked(rng: random.Random, unit: Dict[str, Layer]) -> str:
    _mask(rng, unit)
    inner = rng.choice([
        {"class": "rnn_cell", "unit": rng.choice(["LSTMBlock", "GRU", "BasicRNN", "StandardLSTM"]), "n_out": 3,
         "from": "data"},
        {"class": "linear", "activation": "tanh", "n_out": 3, "from": "data"},
        {"class": "cumsum", "from": "data"},
    ])
    unit["masked"] = {"class": "masked_computation", "from": "x", "mask": "mask", "unit": inner}
    if rng.random() < 0.6:
        unit["unmask"] = {"class": "unmask", "from": "masked", "mask": "mask"}
        last = "unmask"
    else:
        last = "masked"
    unit["output"] = {"class": "linear", "activation": "tanh", "n_out": 3,
                      "from": [last] + (["prev:output"] if rng.random() < 0.5 else [])}
    return "masked_computation[%s]" % inner["class"]


def _cond(rng: random.Random, unit: Dict[str, Layer]) -> str:
    _mask(rng, unit)
    true = {"class": "linear", "activation": "tanh", "n_out": 3, "from": "x"}
    false = rng.choice([{"class": "linear", "activation": "relu", "n_out": 3, "from": "x"},
                        {"class": "copy", "from": "prev:output"}])
    unit["output"] = {"class": "cond", "condition": "mask", "true_layer": true, "false_layer": false}
    if false["class"] == "copy":
        unit["output"]["initial_output"] = rng.choice([0, "zeros", 1])
    return "cond[%s]" % false["class"]


def _unstack(rng: random.Random, network: Dict[str, Layer], unit: Dict[str, Layer]) -> str:
    network["enc"] = {"class": "linear", "activation": "tanh", "n_out": 3, "from": "data"}
    unit["u"] = {"class": "rec_unstack", "from": "base:enc"}
    unit["output"] = {"class": "linear", "activation": "tanh", "n_out": 3,
                      "from": ["u", "prev:output"] + (["x"] if rng.random() < 0.5 else [])}
    return "rec_unstack"


def _accumulated(rng: random.Random, network: Dict[str, Layer], unit: Dict[str, Layer]) -> str:
    """A sub-layer read from outside: ``get_rec_accumulated`` / ``rec_last_output`` / ``loop/sub``."""
    unit["h"] = {"class": "linear", "activation": "tanh", "n_out": 3, "from": ["x", "prev:h"],
                 "is_output_layer": True}
    unit["output"] = {"class": "linear", "activation": None, "n_out": 2, "from": "h"}
    kind = rng.choice(["get_rec_accumulated", "rec_last_output", "sub"])
    if kind == "get_rec_accumulated":
        network["output"] = {"class": "get_rec_accumulated", "from": "loop", "sub_layer": "h"}
    elif kind == "rec_last_output":  # RETURNN needs need_last (KeyError without): mostly set
        unit["h"].pop("is_output_layer")
        if rng.random() < 0.8:
            unit["h"]["need_last"] = True
        network["output"] = {"class": "rec_last_output", "rec_layer": "loop", "sub_layer_name": "h"}
    else:
        network["output"] = {"class": "copy", "from": "loop/h"}
    return kind


def _draw_loop(rng: random.Random, network: Dict[str, Layer], sparse: bool) -> str:
    """A loop over the input with one of the rarer forms; returns the family."""
    unit = _per_frame(rng, sparse)
    form = rng.choice(["masked", "masked", "cond", "unstack", "accumulated", "accumulated"])
    if form == "masked":
        family = _masked(rng, unit)
    elif form == "cond":
        family = _cond(rng, unit)
    elif form == "unstack":
        family = _unstack(rng, network, unit)
    else:
        family = _accumulated(rng, network, unit)
    rec: Layer = {"class": "rec", "from": "data", "unit": unit}
    if rng.random() < 0.4:
        rec["optimize_move_layers_out"] = False
    if "output" in network:  # read from outside
        network["loop"] = rec
    else:
        network["output"] = rec
    return family


def _draw_ending(rng: random.Random, network: Dict[str, Layer], sparse: bool) -> str:
    """A loop without input that ends itself: an ``end`` layer over the step index (a per-sequence
    end from the input's length), ``max_seq_len``, ``include_eos``."""
    network["enc"] = {"class": "linear", "activation": "tanh", "n_out": 3, "from": "data"}
    network["enc_len"] = {"class": "length", "from": "data"}
    k = rng.choice([0, 1, 2, 3])
    end_from = rng.choice(["len", "const", "state"])
    unit: Dict[str, Layer] = {
        "s": {"class": "linear", "activation": "tanh", "n_out": 3, "from": ["prev:s", "prev:output"]},
        "pos": {"class": "gather", "from": "base:enc", "position": "clip", "axis": "T"},
        "clip": {"class": "eval", "from": [":i", "base:enc_len"], "out_type": {"dtype": "int32"},
                 "eval": "tf.minimum(source(0), tf.maximum(source(1) - 1, 0))"},
        "output": {"class": "combine", "kind": "add", "from": ["s", "pos"]},
    }
    if end_from == "len":
        unit["end"] = {"class": "compare", "kind": "greater_equal", "from": [":i", "base:enc_len"]}
    elif end_from == "state":  # from the loop's own values (differs per sequence)
        unit["end_sum"] = {"class": "reduce", "mode": "sum", "axis": "F", "from": "output"}
        unit["end"] = {"class": "compare", "kind": rng.choice(["greater", "less"]), "value": rng.choice([0.0, 0.5]),
                       "from": "end_sum"}
    else:
        unit["end"] = {"class": "compare", "kind": "greater_equal", "from": ":i", "value": k}
    rec: Layer = {"class": "rec", "from": [], "unit": unit}
    if rng.random() < 0.5:
        rec["include_eos"] = rng.choice([True, False])
    if rng.random() < 0.5:
        rec["max_seq_len"] = rng.choice([2, 5, "max_len_from('base:data') + 1"])
    if rng.random() < 0.3:
        rec["optimize_move_layers_out"] = False
    network["output"] = rec
    return "rec_end[%s]" % end_from


def draw(seed: int, index: int) -> Dict[str, Any]:
    """Case ``index`` of ``seed``: keyword arguments of make_goldens.py's ``case()``."""
    rng = random.Random("rectail/%i/%i" % (seed, index))
    sparse = rng.random() < 0.25
    extern = {"data": {"dim": 7, "sparse": True}} if sparse else {"data": {"dim": rng.choice([4, 5])}}
    network: Dict[str, Layer] = {}
    kind = rng.random()
    if kind < 0.5:
        family = _draw_unit(rng, network, sparse)
    elif kind < 0.85:
        family = _draw_loop(rng, network, sparse)
    else:
        family = _draw_ending(rng, network, sparse)
    config = {"behavior_version": rng.choice([0, 12, 21])} if rng.random() < 0.6 else {}
    return dict(name="fuzzrec_%i_%i" % (seed, index), family=family, network=network, extern=extern,
                config=config, lens={"data": rng.choice(LENS)},
                notes="returnn_fuzz --kind rec seed %i index %i (tail draws)" % (seed, index))
