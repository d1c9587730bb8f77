"""Random rec loops for the differential check against the real RETURNN (:mod:`returnn_fuzz`,
``--kind rec``): a ``rec`` layer whose unit is a small subnetwork of one to four layers drawn from
the layers used inside loops (recurrent linear/combine/eval over ``prev:``, cumsum and window with
their loop state, ``rnn_cell`` units, attention over an encoder outside the loop, ``cum_concat``
self-attention), with random ``initial_output``/``initial_state`` forms, optionally followed by
one layer of the plain chain catalog; from seed 40 on half the cases come from
:mod:`returnn_fuzz_rec_tail` (named units over whole sequences, masked_computation, cond, ...).

Every draw is reproducible from (seed, index); the case names carry them.
"""
from __future__ import annotations

import random
from typing import Any, Dict, List, Optional

Layer = Dict[str, Any]

INPUTS = [("btf4", {"data": {"dim": 4}}), ("btf5", {"data": {"dim": 5}}), ("sparse7", {"data": {"dim": 7, "sparse": True}})]
LENS = [[7, 4, 1], [5, 3, 0], [6, 6, 2], [1, 1, 1], [4, 2, 3]]
INIT_OUTPUTS = [0, 1, "zeros", "ones", "var", "apply(0)", 0.5]
CELLS = ["LSTMBlock", "BasicLSTM", "BasicRNN", "GRU", "LSTMBlockFused", "StandardLSTM"]


class _Loop:
    """The unit under construction: its layers and the feature dim of each (None: not a plain [B,F])."""

    def __init__(self, rng: random.Random, in_dim: int, sparse: bool, enc_dim: Optional[int]):
        self.rng = rng
        self.unit: Dict[str, Layer] = {}
        self.dims: Dict[str, Optional[int]] = {"data:source": None if sparse else in_dim}
        self.enc_dim = enc_dim

    def pick(self, dense: bool = True) -> str:
        """A layer of the loop (or the current input frame) to read; a plain [B,F] one if ``dense``."""
        names = [n for n, d in self.dims.items() if d is not None or not dense]
        if len(names) > 1 and self.rng.random() < 0.6:  # mostly the newest: fewer unused layers
            return names[-1]
        return self.rng.choice(names) if names else "data:source"

    def maybe_initial(self, layer: Layer) -> None:
        if self.rng.random() < 0.4:
            layer["initial_output"] = self.rng.choice(INIT_OUTPUTS)


def _linear(loop: _Loop, name: str) -> Layer:
    rng = loop.rng
    n_out = rng.choice([3, 4])
    src = [loop.pick(dense=False)]
    if rng.random() < 0.6:
        src.append("prev:" + name)
    if rng.random() < 0.3 and len(loop.unit) > 0:
        src.append("prev:" + rng.choice(list(loop.unit)))
    layer = {"class": "linear", "activation": rng.choice(["tanh", "relu", None, "sigmoid"]), "n_out": n_out,
             "from": src}
    if rng.random() < 0.3:
        layer["with_bias"] = False
    loop.maybe_initial(layer)
    loop.dims[name] = n_out
    return layer


def _combine_prev(loop: _Loop, name: str) -> Layer:
    x = loop.pick()
    kind = loop.rng.choice(["add", "mul", "sub", "maximum", "average"])
    layer = {"class": "combine", "kind": kind, "from": [x, "prev:" + name]}
    loop.maybe_initial(layer)
    loop.dims[name] = loop.dims[x]
    return layer


def _eval_prev(loop: _Loop, name: str) -> Layer:
    x = loop.pick()
    layer = {"class": "eval", "from": [x, "prev:" + name],
             "eval": loop.rng.choice(["source(0) + 0.5 * source(1)", "tf.tanh(source(0) - source(1))",
                                      "tf.maximum(source(0), source(1)) * 0.9"])}
    loop.maybe_initial(layer)
    loop.dims[name] = loop.dims[x]
    return layer


def _cumsum(loop: _Loop, name: str) -> Layer:
    x = loop.pick()
    layer = {"class": "cumsum", "from": x}
    if loop.rng.random() < 0.3:
        layer["additional_left_summation"] = True
    loop.maybe_initial(layer)
    loop.dims[name] = loop.dims[x]
    return layer


def _window_reduce(loop: _Loop, name: str) -> Layer:
    """A window over the loop's past frames, reduced right away (a second layer)."""
    x = loop.pick()
    win = name + "_win"
    loop.unit[win] = {"class": "window", "window_size": loop.rng.choice([1, 2, 3]), "from": x}
    loop.dims[win] = None
    mode = loop.rng.choice(["sum", "max", "mean"])
    loop.dims[name] = loop.dims[x]
    return {"class": "reduce", "mode": mode, "axis": loop.rng.choice(["stag:%s:window" % win, "static:0"]),
            "from": win}


def _rnn_cell(loop: _Loop, name: str) -> Layer:
    rng = loop.rng
    n_out = rng.choice([3, 4])
    layer = {"class": "rnn_cell", "unit": rng.choice(CELLS), "n_out": n_out, "from": loop.pick(dense=False)}
    if rng.random() < 0.4:
        layer["initial_state"] = rng.choice(["zeros", "ones", "var", 0])
    loop.dims[name] = n_out
    return layer


def _rec_unit(loop: _Loop, name: str) -> Layer:
    """A ``rec`` layer with a named unit inside the loop (one step per frame)."""
    rng = loop.rng
    n_out = rng.choice([3, 4])
    layer = {"class": "rec", "unit": rng.choice(["lstm", "nativelstm2", "gru", "standardlstm", "LSTMBlock"]),
             "n_out": n_out, "from": loop.pick(dense=False)}
    if rng.random() < 0.3:
        layer["initial_state"] = rng.choice(["zeros", "var"])
    loop.dims[name] = n_out
    return layer


def _attention(loop: _Loop, name: str) -> Layer:
    """Dot attention of a loop query over the encoder outside the loop (three layers)."""
    if loop.enc_dim is None:
        return _linear(loop, name)
    rng = loop.rng
    q, e, w = name + "_q", name + "_energy", name + "_weights"
    loop.unit[q] = {"class": "linear", "activation": None, "n_out": loop.enc_dim,
                    "from": [loop.pick(dense=False)] + (["prev:" + name] if rng.random() < 0.5 else [])}
    loop.unit[e] = {"class": "dot", "from": ["base:enc", q], "reduce": "F"}
    if rng.random() < 0.5:
        loop.unit[e] = {"class": "dot", "from": ["base:enc", q], "red1": "F", "red2": "F", "var1": "T", "var2": None}
    loop.unit[w] = {"class": "softmax_over_spatial", "from": e}
    if rng.random() < 0.3:
        loop.unit[w]["energy_factor"] = 0.5
    loop.dims.update({q: loop.enc_dim, e: None, w: None})
    loop.dims[name] = loop.enc_dim
    return {"class": "generic_attention", "weights": w, "base": "base:enc"}


def _self_attention_history(loop: _Loop, name: str) -> Layer:
    """``cum_concat`` of the loop's frames so far, then a sum over that history."""
    x = loop.pick()
    hist = name + "_hist"
    hist_dim = {"__dim__": name + "_history", "dimension": None, "kind": "spatial"}  # golden_dims.py marker
    loop.unit[hist] = {"class": "cum_concat", "from": x, "out_spatial_dim": hist_dim}
    loop.dims[hist] = None
    loop.dims[name] = loop.dims[x]
    if loop.rng.random() < 0.5:  # RETURNN refuses a reduce over that axis in the loop (its mask): attention
        energy, weights = name + "_energy", name + "_weights"
        loop.unit[energy] = {"class": "dot", "from": [hist, x], "reduce": "F", "var1": hist_dim, "var2": None}
        loop.unit[weights] = {"class": "softmax_over_spatial", "from": energy, "axis": hist_dim}
        loop.dims[energy] = loop.dims[weights] = None
        return {"class": "dot", "from": [weights, hist], "reduce": hist_dim, "var1": None, "var2": "F"}
    return {"class": "reduce", "mode": loop.rng.choice(["sum", "max", "mean"]), "axis": hist_dim, "from": hist}


def _activation(loop: _Loop, name: str) -> Layer:
    x = loop.pick()
    loop.dims[name] = loop.dims[x]
    return {"class": "activation", "activation": loop.rng.choice(["tanh", "softmax", "log_softmax", "relu", "exp"]),
            "from": x}


def _step_scaled(loop: _Loop, name: str) -> Layer:
    """A frame scaled by the step index ``:i``."""
    x = loop.pick()
    loop.dims[name] = loop.dims[x]
    return {"class": "eval", "from": [x, ":i"], "eval": "source(0) * tf.cast(source(1) + 1, tf.float32) * 0.25"}


def _gather_base(loop: _Loop, name: str) -> Layer:
    """The encoder frame at the step index (``gather`` with a layer position)."""
    if loop.enc_dim is None:
        return _activation(loop, name)
    loop.dims[name] = loop.enc_dim
    return {"class": "gather", "from": "base:enc", "position": ":i", "axis": "T"}


def _self_attention(loop: _Loop, name: str) -> Layer:
    """``self_attention`` in the loop: over the frames so far (its own state)."""
    rng = loop.rng
    n_out = rng.choice([4, 6])
    src = loop.pick(dense=False)
    loop.dims[name] = n_out
    return {"class": "self_attention", "num_heads": rng.choice([1, 2]), "total_key_dim": rng.choice([4, 6]),
            "n_out": n_out, "attention_left_only": True, "from": src}


def _softmax(loop: _Loop, name: str) -> Layer:
    n_out = loop.rng.choice([3, 5])
    src = [loop.pick(dense=False)] + (["prev:" + name] if loop.rng.random() < 0.5 else [])
    loop.dims[name] = n_out
    return {"class": "softmax", "n_out": n_out, "from": src}


IN_LOOP = [_linear, _linear, _combine_prev, _eval_prev, _cumsum, _window_reduce, _rnn_cell, _rec_unit, _attention,
           _self_attention_history, _activation, _step_scaled, _gather_base, _self_attention, _softmax]


def draw(seed: int, index: int, chain_layer=None) -> Dict[str, Any]:
    """Case ``index`` of ``seed``: keyword arguments of make_goldens.py's ``case()``.
    ``chain_layer(rng)``: draws a plain layer to follow the loop (the chain catalog's). From seed 40
    on, half the cases are :mod:`returnn_fuzz_rec_tail`'s (named units, rarer loop forms); earlier
    seeds draw as before (their case names are cited in commits)."""
    if seed >= 40 and random.Random("rectail?/%i/%i" % (seed, index)).random() < 0.5:
        import returnn_fuzz_rec_tail
        return returnn_fuzz_rec_tail.draw(seed, index)
    rng = random.Random("rec/%i/%i" % (seed, index))
    in_name, extern = rng.choice(INPUTS)
    in_dim = extern["data"]["dim"]
    network: Dict[str, Layer] = {}
    enc_dim = None
    if rng.random() < 0.5:
        enc_dim = rng.choice([3, 4])
        network["enc"] = {"class": "linear", "activation": "tanh", "n_out": enc_dim, "from": "data"}
    loop = _Loop(rng, in_dim, bool(extern["data"].get("sparse")), enc_dim)
    n = rng.choice([1, 2, 2, 3, 4])
    if extern["data"].get("sparse"):
        loop.unit["emb"] = {"class": "linear", "activation": None, "n_out": 4, "from": "data:source"}
        loop.dims["emb"] = 4
        del loop.dims["data:source"]
    for i in range(n):
        name = "output" if i == n - 1 else "s%i" % i
        loop.unit[name] = rng.choice(IN_LOOP)(loop, name)
    rec: Layer = {"class": "rec", "from": "data", "unit": loop.unit}
    if rng.random() < 0.3:
        rec["optimize_move_layers_out"] = rng.choice([True, False])
    last = "output"
    if chain_layer is not None and rng.random() < 0.3:
        network["loop"] = rec
        follow = chain_layer(rng)
        follow["from"] = "loop"
        network["output"] = follow
    else:
        network[last] = rec
    config = {"behavior_version": rng.choice([0, 12, 21])} if rng.random() < 0.6 else {}
    family = "rec[%s]" % "+".join(str(layer["class"]) for layer in loop.unit.values())
    if "loop" in network:
        family += "+" + str(network["output"]["class"])
    return dict(name="fuzzrec_%i_%i" % (seed, index), family=family, network=network, extern=extern,
                config=config, lens={"data": rng.choice(LENS)},
                notes="returnn_fuzz --kind rec seed %i index %i input %s" % (seed, index, in_name))
