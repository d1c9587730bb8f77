"""Draws for ``returnn_fuzz.py --kind dims``: chains of layers that cut, pad, stretch or shift the time
axis (valid conv/pool/window, slices, pads, prefix/postfix_in_time, strided conv/pool, shift_axis,
transposed_conv, repeat, resize) on sequences of 0 and 1 frames among others, the output sometimes
combined with an earlier layer's. It checks RETURNN's dim math (returnn/tf/layers/dim_shift.py):
which axes are one, their sizes, and what the layers write into short batches."""
from __future__ import annotations

import random
from typing import Any, Dict

LENGTHS = ([7, 3, 0], [5, 1, 2], [6, 2, 1], [4, 0, 3])


def _layer(rng: random.Random, src: str) -> Dict[str, Any]:
    kind = rng.choice(["conv", "slice", "pad", "window", "pool", "slice", "pad", "post", "pre", "sconv", "spool",
                       "shift", "tconv", "repeat", "resize"])
    if kind == "conv":
        return {"class": "conv", "from": src, "filter_size": [rng.choice([2, 3, 4])], "padding": "valid", "n_out": 6,
                "activation": None}
    if kind == "pool":
        return {"class": "pool", "from": src, "pool_size": [rng.choice([2, 3])], "padding": "valid", "mode": "max"}
    if kind == "slice":
        out = {"class": "slice", "from": src, "axis": "T", "slice_start": rng.choice([0, 1, 2, 3])}
        end = rng.choice([None, -1, -2])
        return out if end is None else dict(out, slice_end=end)
    if kind == "pad":
        return {"class": "pad", "from": src, "axes": "T", "padding": [[rng.choice([0, 1, 2]), rng.choice([0, 1, 2, 3])]]}
    if kind == "window":
        return {"class": "window", "from": src, "window_size": rng.choice([2, 3]), "padding": "valid"}
    if kind in ("post", "pre"):
        name = "postfix" if kind == "post" else "prefix"
        return {"class": name + "_in_time", "from": src, name: 0.5, "repeat": rng.choice([1, 2])}
    if kind == "sconv":
        return {"class": "conv", "from": src, "filter_size": [rng.choice([2, 3])], "padding": rng.choice(["same", "valid"]),
                "strides": [2], "n_out": 6, "activation": None}
    if kind == "spool":
        return {"class": "pool", "from": src, "pool_size": [2], "padding": rng.choice(["same", "valid"]), "strides": [2],
                "mode": "avg"}
    if kind == "shift":
        return {"class": "shift_axis", "from": src, "axis": "T", "amount": rng.choice([1, -1, 2])}
    if kind == "tconv":
        return {"class": "transposed_conv", "from": src, "filter_size": [2], "strides": [2], "n_out": 6,
                "activation": None, "padding": rng.choice(["same", "valid"])}
    if kind == "repeat":
        return {"class": "repeat", "from": src, "repetitions": 2, "axis": "T"}
    return {"class": "resize", "from": src, "factor": 2, "axis": "T", "kind": "nn"}


def draw(seed: int, index: int) -> Dict[str, Any]:
    """Case ``index`` of ``seed`` (make_goldens' case dict)."""
    rng = random.Random("dims/%i/%i" % (seed, index))
    net: Dict[str, Any] = {}
    names, src = ["data"], "data"
    for j in range(rng.choice([1, 2, 3, 3, 4])):
        layer = _layer(rng, src)
        if layer["class"] == "window":  # its window axis summed away: the cut time axis stays
            net["w%i" % j] = layer
            layer = {"class": "reduce", "mode": "sum", "from": "w%i" % j, "axis": "static:0"}
        src = "l%i" % j
        net[src] = layer
        names.append(src)
    if rng.random() < 0.5:
        net["output"] = {"class": "combine", "kind": "add", "from": [src, rng.choice(names[:-1])]}
    else:
        net["output"] = {"class": "copy", "from": src}
    return dict(name="dims_%i_%i" % (seed, index), family="fuzz_dims", network=net, extern={"data": {"dim": 6}},
                config={}, output="output", lens={"data": rng.choice(LENGTHS)}, notes="", train=False, search=False,
                param_scale=None)
