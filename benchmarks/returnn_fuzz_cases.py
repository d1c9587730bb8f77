"""Random small networks for the differential check against the real RETURNN
(:mod:`returnn_fuzz`): an input layout, then a chain of one to three layers drawn from a catalog
of layer classes with random options (axes, modes, sizes, paddings). Many draws are invalid in
both engines (that is fine: both must refuse); the point is the draws one engine builds and the
other does not, and the ones whose values differ.

Every draw is reproducible from (seed, index); the case names carry them.
"""
from __future__ import annotations

import random
from typing import Any, Callable, Dict, List, Tuple

import returnn_fuzz_tail

Layer = Dict[str, Any]

INPUTS: List[Tuple[str, Dict[str, Any]]] = [
    ("btf6", {"data": {"dim": 6}}),
    ("btf5", {"data": {"dim": 5}}),
    ("btsf", {"data": {"shape": (None, 3, 4)}}),
    ("sparse7", {"data": {"dim": 7, "sparse": True}}),
]  # (make_goldens.py feeds inputs with a time axis only)
LENS = [[7, 4, 1], [5, 3, 0], [6, 6, 2], [1, 1, 1], [4, 2, 3]]
AXES = ["T", "F", "B", "except_batch", "except_time", "spatial", "static", "dynamic", ["T", "F"], "stag:time", 0, -1]
ACTIVATIONS = ["relu", "tanh", "sigmoid", "abs", "softplus", "log_sigmoid", "gelu", "swish", "elu", "selu",
               "log_softmax", "softmax", "identity", "square", "relu+tanh", "sin", "cos", "exp", None]


def _c(rng: random.Random, *choices):
    return rng.choice(choices)


def _maybe(rng: random.Random, opts: Dict[str, Any], key: str, *choices) -> None:
    """Sets ``opts[key]`` to one of ``choices`` half of the time (else RETURNN's default)."""
    if rng.random() < 0.5:
        opts[key] = rng.choice(choices)


def _reduce(rng):
    o = {"class": "reduce", "mode": _c(rng, "sum", "max", "mean", "min", "logsumexp", "argmax", "prod"),
         "axis": _c(rng, *AXES)}
    _maybe(rng, o, "keep_dims", True, False)
    _maybe(rng, o, "enforce_batch_dim_axis", 0)
    return o


def _activation(rng):
    return {"class": "activation", "activation": _c(rng, *ACTIVATIONS)}


def _softmax_over_spatial(rng):
    o = {"class": "softmax_over_spatial"}
    _maybe(rng, o, "axis", "T", "F", "stag:time")
    _maybe(rng, o, "energy_factor", 0.5, 2.0)
    _maybe(rng, o, "use_time_mask", True, False)
    _maybe(rng, o, "log_space", True, False)
    _maybe(rng, o, "window_size", 2, 3)
    return o


def _slice(rng):
    o = {"class": "slice", "axis": _c(rng, "T", "F", "S:0", -1)}
    _maybe(rng, o, "slice_start", 0, 1, -2, 3)
    _maybe(rng, o, "slice_end", -1, 2, 4, None)
    _maybe(rng, o, "slice_step", 2, -1, 3)
    return o


def _pad(rng):
    o = {"class": "pad", "axes": _c(rng, "T", "F", ["T", "F"], "spatial", "S:0"),
         "padding": _c(rng, 1, (1, 2), (0, 3), (2, 0))}
    _maybe(rng, o, "mode", "constant", "reflect", "replication", "symmetric", "circular")
    _maybe(rng, o, "value", 0.0, 1.5, -2.0)
    return o


def _merge_dims(rng):
    o = {"class": "merge_dims", "axes": _c(rng, "static", ["T", "F"], "except_batch", ["B", "T"], ["F", "T"],
                                           "spatial", "except_time")}
    _maybe(rng, o, "keep_order", True, False)
    return o


def _split_dims(rng):
    return {"class": "split_dims", "axis": _c(rng, "F", "T"), "dims": _c(rng, (2, -1), (-1, 2), (3, -1), (1, -1))}


def _cumsum(rng):
    o = {"class": "cumsum"}
    _maybe(rng, o, "axis", "T", "F", "stag:time")
    _maybe(rng, o, "reverse", True, False)
    _maybe(rng, o, "additional_left_summand_per_element", 0.0, 1.5)
    return o


def _window(rng):
    o = {"class": "window", "window_size": _c(rng, 1, 2, 3, 4)}
    _maybe(rng, o, "window_left", 0, 1, 2)
    _maybe(rng, o, "window_right", 0, 1)
    _maybe(rng, o, "padding", "same", "valid")
    _maybe(rng, o, "stride", 1, 2)
    _maybe(rng, o, "axis", "T", "F")
    return o


def _conv(rng):
    o = {"class": "conv", "filter_size": _c(rng, (1,), (2,), (3,)), "n_out": _c(rng, 2, 4),
         "padding": _c(rng, "same", "valid")}
    _maybe(rng, o, "strides", 1, 2, 3)
    _maybe(rng, o, "dilation_rate", 1, 2)
    _maybe(rng, o, "activation", "relu", "tanh", None)
    _maybe(rng, o, "with_bias", True, False)
    _maybe(rng, o, "input_expand_dims", 1)
    return o


def _pool(rng):
    o = {"class": "pool", "mode": _c(rng, "max", "avg"), "pool_size": _c(rng, (1,), (2,), (3,)),
         "padding": _c(rng, "same", "valid")}
    _maybe(rng, o, "strides", 1, 2, 3)
    _maybe(rng, o, "dilation_rate", 1, 2)
    _maybe(rng, o, "use_time_mask", True, False)
    return o


def _shift_axis(rng):
    o = {"class": "shift_axis", "axis": _c(rng, "T", "F"), "amount": _c(rng, 1, -1, 2, 0)}
    _maybe(rng, o, "pad", True, False)
    _maybe(rng, o, "adjust_size_info", True, False)
    return o


def _linear(rng):
    o = {"class": "linear", "n_out": _c(rng, 3, 5)}
    _maybe(rng, o, "activation", "relu", "tanh", None, "sigmoid")
    _maybe(rng, o, "with_bias", True, False)
    return o


def _norm(rng):
    o = {"class": _c(rng, "layer_norm", "norm", "math_norm")}
    if o["class"] == "norm":
        o["axis"] = _c(rng, "F", "T", ["T", "F"])
        _maybe(rng, o, "scale", True, False)
        _maybe(rng, o, "bias", True, False)
        _maybe(rng, o, "epsilon", 1e-3)
    elif o["class"] == "math_norm":
        o["p"] = _c(rng, 1, 2)
        o["axis"] = _c(rng, "F", "T")
        _maybe(rng, o, "keep_dims", True, False)
    return o


def _misc(rng):
    kind = _c(rng, "reverse_sequence", "seq_len_mask", "length", "range_in_axis", "postfix_in_time",
              "prefix_in_time", "expand_dims", "copy", "time_chunking", "repeat", "tile", "top_k", "resize",
              "range_from_length", "squeeze", "gather", "compare", "cast", "constant_pad_eval")
    o: Layer = {"class": kind}
    if kind == "reverse_sequence":  # an extra class of this engine, not RETURNN's: a reversed feature axis instead
        o = {"class": "slice", "axis": "F", "slice_step": -1}
    elif kind == "seq_len_mask":
        o.update(mask_value=_c(rng, 0.0, -1.0), axis=_c(rng, "T", "F"))
    elif kind == "range_in_axis":
        o["axis"] = _c(rng, "T", "F", "B")
        _maybe(rng, o, "keepdims", True, False)
    elif kind in ("postfix_in_time", "prefix_in_time"):
        o[kind.split("_")[0]] = _c(rng, 0.0, 1.0)
        _maybe(rng, o, "repeat", 1, 2)
    elif kind == "expand_dims":
        o["axis"] = _c(rng, "T", "F", "spatial", 0, -1)
        _maybe(rng, o, "dim", 1, 2)
    elif kind == "time_chunking":
        o.update(chunk_size=_c(rng, 2, 3), chunk_step=_c(rng, 1, 2))
    elif kind == "repeat":
        o.update(repetitions=_c(rng, 2, 3), axis=_c(rng, "T", "F"))
    elif kind == "tile":
        o["multiples"] = _c(rng, {"F": 2}, {"T": 2}, {"B": 1})
    elif kind == "top_k":
        o.update(k=_c(rng, 1, 2), axis=_c(rng, "F", "T"))
        _maybe(rng, o, "sorted", True, False)
    elif kind == "resize":
        o.update(factor=_c(rng, 2, 3), axis=_c(rng, "T", "F"), kind=_c(rng, "nn", "linear", "fill", "cubic"))
    elif kind == "squeeze":
        o["axis"] = _c(rng, "F", "T", 0, "spatial")
    elif kind == "gather":
        o.update(position=_c(rng, 0, 1, -1), axis=_c(rng, "F", "T"))
    elif kind == "compare":
        o.update(kind=_c(rng, "less", "greater", "equal", "less_equal"), value=_c(rng, 0.0, 1))
    elif kind == "cast":
        o["dtype"] = _c(rng, "int32", "float32", "bool")
    elif kind == "constant_pad_eval":
        o = {"class": "eval", "eval": _c(rng, "source(0) * 2.0 + 1.0", "tf.nn.relu(source(0))",
                                         "source(0) - tf.reduce_max(source(0))", "tf.math.cumsum(source(0), axis=1)",
                                         "tf.reduce_sum(source(0), axis=-1, keepdims=True) + source(0)")}
    return o


def _more(rng):
    kind = _c(rng, "rec", "self_attention", "positional_encoding", "switch", "variable_scale", "batch_norm",
              "dropout", "scatter_like_eval", "reinterpret_data", "swap_axes", "sort")
    o: Layer = {"class": kind}
    if kind == "rec":
        o.update(unit=_c(rng, "lstm", "nativelstm2", "gru", "rnn_cell_lstm"), n_out=_c(rng, 3, 4))
        if o["unit"] == "rnn_cell_lstm":
            o["unit"] = "LSTMBlock"
        _maybe(rng, o, "direction", 1, -1)
    elif kind == "self_attention":
        o.update(num_heads=_c(rng, 1, 2), total_key_dim=_c(rng, 4, 6), n_out=_c(rng, 4, 6))
        _maybe(rng, o, "attention_left_only", True, False)
        _maybe(rng, o, "key_shift", None)
    elif kind == "positional_encoding":
        o["add_to_input"] = _c(rng, True, False)
        if not o["add_to_input"]:
            o["n_out"] = _c(rng, 4, 6)
    elif kind == "switch":
        o = {"class": "switch", "condition": _c(rng, True, False), "true_from": None, "false_from": 0.5}
    elif kind == "variable_scale":
        o = {"class": "eval", "eval": "source(0) * 0.5"}
    elif kind == "batch_norm":
        _maybe(rng, o, "use_shift", True, False)
        _maybe(rng, o, "use_std", True, False)
        _maybe(rng, o, "masked_time", True, False)
        _maybe(rng, o, "momentum", 0.1)
    elif kind == "dropout":
        o["dropout"] = 0.3
    elif kind == "scatter_like_eval":
        o = {"class": "eval", "eval": "tf.where(source(0) > 0, source(0), tf.zeros_like(source(0)))"}
    elif kind == "reinterpret_data":
        _maybe(rng, o, "enforce_batch_major", True)
        _maybe(rng, o, "enforce_time_major", True)
        _maybe(rng, o, "set_sparse", False)
    elif kind == "swap_axes":
        o.update(axis1=_c(rng, "T", "B"), axis2=_c(rng, "F", "T"))
    elif kind == "sort":
        o.update(axis=_c(rng, "F", "T"), descending=_c(rng, True, False))
    return o


def _more2(rng):
    """Layers of the long tail: splitting, stacking, chunking, convolutions over two axes."""
    kind = _c(rng, "split", "stack_self", "concat_self", "time_chunking_round", "conv2d", "transposed_conv",
              "softmax", "copy_concat", "linear_multi", "reinterpret_set_axes", "subnetwork", "gating", "variable_add",
              "range_from_length", "length_mask_eval", "prefix_in_time", "scatter_dims")
    o: Layer = {"class": kind}
    if kind == "split":
        o = {"class": "copy", "from": None, "_split": {"class": "split", "axis": _c(rng, "F", "T"),
                                                       "num_splits": _c(rng, 2, 3)},
             "_pick": _c(rng, 0, 1, -1)}
    elif kind == "stack_self":
        o = {"class": "stack", "axis": _c(rng, None, 0, 1, -1), "_self": True}
    elif kind == "concat_self":
        o = {"class": "concat", "_axes": _c(rng, "F", "T")}
    elif kind == "time_chunking_round":
        o = {"class": "time_chunking", "chunk_size": _c(rng, 2, 3), "chunk_step": _c(rng, 1, 2), "_unchunk": True}
    elif kind == "conv2d":
        o = {"class": "conv", "filter_size": _c(rng, (2, 2), (1, 3), (3, 1)), "n_out": _c(rng, 2, 3),
             "padding": _c(rng, "same", "valid"), "input_expand_dims": _c(rng, 0, 1)}
        _maybe(rng, o, "strides", (1, 2), (2, 1))
    elif kind == "transposed_conv":
        o.update(filter_size=[_c(rng, 1, 2, 3)], strides=[_c(rng, 1, 2)], n_out=_c(rng, 2, 4))
        _maybe(rng, o, "padding", "same", "valid")
        _maybe(rng, o, "remove_padding", 1)
        _maybe(rng, o, "output_padding", [0], [1])
    elif kind == "softmax":
        o.update(n_out=_c(rng, 3, 4))
        _maybe(rng, o, "log_space", True)
    elif kind == "copy_concat":
        o = {"class": "copy", "_with_data": True}
    elif kind == "linear_multi":
        o = {"class": "linear", "n_out": 3, "activation": None, "_with_data": True}
    elif kind == "reinterpret_set_axes":
        o = {"class": "reinterpret_data", "set_axes": {"T": _c(rng, "F", "T")}}
    elif kind == "subnetwork":
        o = {"class": "subnetwork", "subnetwork": {
            "a": {"class": "linear", "activation": "tanh", "n_out": 3, "from": "data"},
            "output": {"class": "combine", "kind": "mul", "from": ["a", "a"]}}}
    elif kind == "gating":
        o = {"class": "gating", "activation": _c(rng, "tanh", "sigmoid", "identity")}
    elif kind == "variable_add":
        o = {"class": "eval", "eval": "source(0) + 1.0"}
    elif kind == "range_from_length":
        o = {"class": "length", "_then_range": True}
    elif kind == "length_mask_eval":
        o = {"class": "seq_len_mask", "mask_value": _c(rng, 0.0, -5.0), "axis": "T"}
    elif kind == "prefix_in_time":
        o.update(prefix=0.5, repeat=_c(rng, 1, 2))
    elif kind == "scatter_dims":
        o = {"class": "split_dims", "axis": "F", "dims": _c(rng, (1, -1), (-1, 1))}
    return o


def _expand_more2(network: Dict[str, Layer], name: str, layer: Layer, prev: str) -> None:
    """Turns the markers of :func:`_more2` into layers (some need helper layers or two sources)."""
    if "_split" in layer:
        split = dict(layer.pop("_split"), **{"from": prev})
        network[name + "_split"] = split
        layer["from"] = "%s_split/%i" % (name, layer.pop("_pick") % split["num_splits"])
    elif layer.pop("_self", False):
        layer["from"] = [prev, prev]
    elif "_axes" in layer:
        axis = layer.pop("_axes")
        layer["from"] = [{"__tuple__": [prev, axis]}] * 2  # (layer, axis) tuples through JSON: golden_dims.py
    elif layer.pop("_unchunk", False):
        network[name + "_chunked"] = dict(layer, **{"from": prev})
        layer.clear()
        layer.update({"class": "time_unchunking", "from": name + "_chunked", "chunking_layer": name + "_chunked"})
    elif layer.pop("_with_data", False):
        layer["from"] = [prev, "data"]
    elif layer.pop("_then_range", False):
        network[name + "_len"] = dict(layer, **{"from": prev})
        layer.clear()
        layer.update({"class": "range_from_length", "from": name + "_len"})
    else:
        layer["from"] = prev


def _combine(rng, prev: str) -> Layer:
    other = _c(rng, "data", prev)
    return {"class": "combine", "kind": _c(rng, "add", "sub", "mul", "maximum", "minimum", "average", "truediv"),
            "from": [prev, other]}


def _dot(rng, prev: str) -> Layer:
    o = {"class": "dot", "from": [prev, _c(rng, prev, "data")], "reduce": _c(rng, "F", "T", ["T", "F"], "static")}
    _maybe(rng, o, "var1", "T", "F", None)
    _maybe(rng, o, "var2", "T", "F", None)
    return o


SINGLE: List[Callable[[random.Random], Layer]] = [
    _reduce, _activation, _softmax_over_spatial, _slice, _pad, _merge_dims, _split_dims, _cumsum, _window,
    _conv, _pool, _shift_axis, _linear, _norm, _misc, _misc, _more, _more, _more2, _more2]
PAIRED = [_combine, _dot]


def chain_layer(rng: random.Random) -> Layer:
    """One layer of the single-source catalog (without ``from``)."""
    return rng.choice(SINGLE)(rng)


def batch_norm(rng: random.Random) -> Layer:
    """A batch_norm layer with random options (training draws use the batch's statistics)."""
    o: Layer = {"class": "batch_norm"}
    _maybe(rng, o, "use_shift", True, False)
    _maybe(rng, o, "use_std", True, False)
    _maybe(rng, o, "masked_time", True, False)
    _maybe(rng, o, "momentum", 0.1)
    _maybe(rng, o, "epsilon", 1e-3, 0.1)
    _maybe(rng, o, "delay_sample_update", True, False)
    return o


TAIL_P = 0.4  # share of the cases drawn from the long tail (returnn_fuzz_tail)


def _draw_tail(rng: random.Random) -> Tuple[Dict[str, Any], Dict[str, Any], Dict[str, Layer]]:
    """(extern, lens, network) of a long-tail family, sometimes after or before a chain layer."""
    extern, lens, tail, dense = returnn_fuzz_tail.draw(rng)
    network: Dict[str, Layer] = {}
    if dense and rng.random() < 0.25:  # a chain layer makes the tail's input
        pre = chain_layer(rng)
        _expand_more2(network, "pre", pre, "data")
        network["pre"] = pre
        for layer in tail.values():  # top-level references only (nested ones are subnetworks' own)
            for key, value in layer.items():
                if value == "data":
                    layer[key] = "pre"
                elif isinstance(value, list) and "data" in value:
                    layer[key] = ["pre" if v == "data" else v for v in value]
    out = tail.pop("output")
    network.update(tail)
    if rng.random() < 0.25:  # and one after
        network["tail"] = out
        out = chain_layer(rng)
        _expand_more2(network, "output", out, "tail")
    network["output"] = out
    return extern, lens, network


def draw(seed: int, index: int, train: bool = False) -> Dict[str, Any]:
    """Case ``index`` of ``seed``: keyword arguments of make_goldens.py's ``case()``; ``train``:
    half of the chains start with a batch_norm (and the case runs in training mode). A share
    ``TAIL_P`` of the cases (decided by a generator of its own: the others stay as before) is a
    long-tail network of :mod:`returnn_fuzz_tail`."""
    rng = random.Random("%i/%i%s" % (seed, index, "/train" if train else ""))
    tail_rng = random.Random("%i/%i/tail%s" % (seed, index, "/train" if train else ""))
    if tail_rng.random() < TAIL_P:
        extern, lens, network = _draw_tail(tail_rng)
        config = {"behavior_version": tail_rng.choice([0, 12, 21])} if tail_rng.random() < 0.6 else {}
        family = "+".join(str(layer["class"]) for layer in network.values())
        return dict(name="fuzz%s_%i_%i" % ("train" if train else "", seed, index), family=family, network=network,
                    extern=extern, config=config, lens=lens, train=train,
                    notes="returnn_fuzz%s seed %i index %i long tail" % (" --train" if train else "", seed, index))
    in_name, extern = rng.choice(INPUTS)
    lens = rng.choice(LENS)
    network: Dict[str, Layer] = {}
    prev = "data"
    n = rng.choice([1, 1, 2, 2, 3])
    for i in range(n):
        name = "output" if i == n - 1 else "l%i" % i
        if prev != "data" and rng.random() < 0.25:
            layer = rng.choice(PAIRED)(rng, prev)
        else:
            layer = batch_norm(rng) if train and i == 0 and rng.random() < 0.5 else rng.choice(SINGLE)(rng)
            if layer.get("true_from", 1) is None:
                layer["true_from"] = prev
            else:
                _expand_more2(network, name, layer, prev)
        network[name] = layer
        prev = name
    config = {"behavior_version": rng.choice([0, 12, 21])} if rng.random() < 0.6 else {}
    family = "+".join(str(layer["class"]) for layer in network.values())
    return dict(name="fuzz%s_%i_%i" % ("train" if train else "", seed, index), family=family, network=network,
                extern=extern, config=config, lens={"data": lens}, train=train,
                notes="returnn_fuzz%s seed %i index %i input %s" % (" --train" if train else "", seed, index, in_name))
