"""Networks of the long tail of RETURNN's layer classes for the differential check
(:mod:`returnn_fuzz`, drawn by :func:`returnn_fuzz_cases.draw` some of the time): reshaping
(transpose, reshape, combine_dims, unflatten_nd, flatten/unflatten_batch, split_batch_time, fold,
boolean_mask, time_unchunking, swap_time_feature), indexing (slice_nd, gather_nd, scatter_nd,
search_sorted), signal processing (dct, stft, istft, mel_filterbank, complex layers, tile_features),
parameters (variable, weighted_sum, elemwise_prod), attention (relative_positional_encoding,
dot/concat/gauss_window attention), control (cond, masked_computation outside loops) and the
sparse-target layers (sparse_softmax_cross_entropy_with_logits, ctc_loss, edit_distance).

Each family draws its input (extern data, lengths) and the layers with the options a RETURNN user
sets; :func:`draw` returns them (the caller may put a chain layer before or after).
Left out: random layers (``random``, ``rand_int``: the engines' generators differ), layers that need
a trained state or the search (``accumulate_mean``, ``choice_*``, ``decide_keep_beam``), and
``kenlm``/``fast_bw``/beamforming layers (external data or ops). Drawn although RETURNN 1.20261022
fails on every form (its bugs; this engine builds them, verdict LAX): ``alternating_real_to_complex``
and ``complex_to_alternating_real`` (shape sanity checks), ``tile_features`` (IndexError),
``swap_time_feature``/``flatten_time`` (old Data API), ``fill_unused`` (old tf.expand_dims API),
``unmask`` outside loops (no rec layer).
"""
from __future__ import annotations

import random
from typing import Any, Callable, Dict, List, Tuple

Layer = Dict[str, Any]
Draw = Tuple[Dict[str, Any], Dict[str, List[int]], Dict[str, Layer], bool]  # extern, lens, network, dense 'data'


def _c(rng: random.Random, *choices):
    return rng.choice(choices)


def _maybe(rng: random.Random, opts: Dict[str, Any], key: str, *choices) -> None:
    """Sets ``opts[key]`` to one of ``choices`` half of the time (else RETURNN's default)."""
    if rng.random() < 0.5:
        opts[key] = rng.choice(choices)


def dim(name: str, n=None, kind: str = "spatial") -> Dict[str, Any]:
    """A Dim marker (tests/returnn_goldens/golden_dims.py)."""
    return {"__dim__": name, "dimension": n, "kind": kind}


def ref(name: str) -> Dict[str, Any]:
    return {"__dim__": name}


LENS = [[7, 4, 1], [5, 3, 0], [6, 6, 2], [7, 5, 3], [6, 4, 2], [1, 1, 1]]
LONG = [[20, 13, 9], [16, 16, 5], [12, 8, 0]]


def _dense(rng) -> Tuple[Dict[str, Any], Dict[str, List[int]]]:
    extern = _c(rng, {"data": {"dim": 6}}, {"data": {"dim": 5}}, {"data": {"dim": 4}},
                {"data": {"dim": 6, "time_dim_axis": 0, "batch_dim_axis": 1}}, {"data": {"shape": (None, 2, 3)}})
    return extern, {"data": rng.choice(LENS)}


def _dims6(rng) -> Tuple[Dict[str, Any], Dict[str, List[int]]]:
    return ({"data": {"dim_tags": [ref("batch"), dim("time"), dim("feat", _c(rng, 6, 4), "feature")]}},
            {"data": rng.choice(LENS)})


def _lin(n: int, src: str, act=None) -> Layer:
    return {"class": "linear", "activation": act, "n_out": n, "from": src}


# --- reshaping ---------------------------------------------------------------------------------

def f_transpose(rng) -> Draw:
    extern, lens = _dense(rng)
    perm = _c(rng, {"T": "F", "F": "T"}, {"F": "T", "T": "F"}, {"B": "T", "T": "B"}, {"T": "B"}, ["F", "T", "B"],
              ["T", "B", "F"], {"F": "S:0", "S:0": "F"})  # (no int keys: JSON makes them str for RETURNN)
    return extern, lens, {"output": {"class": "transpose", "perm": perm, "from": "data"}}, True


def f_reshape(rng) -> Draw:
    extern, lens = _dims6(rng)
    n = extern["data"]["dim_tags"][2]["dimension"]
    a = _c(rng, 2, 1, n)
    out_dims = [dim("r1", a, _c(rng, "spatial", "feature")), dim("r2", n // a, _c(rng, "feature", "spatial"))]
    net = {"output": {"class": "reshape", "in_dims": [ref("feat")], "out_dims": out_dims, "from": "data"}}
    if rng.random() < 0.4:  # and back, maybe in the other order
        net["split"] = dict(net.pop("output"))
        ins = [ref("r1"), ref("r2")] if rng.random() < 0.5 else [ref("r2"), ref("r1")]
        net["output"] = {"class": "reshape", "in_dims": ins, "out_dims": [dim("m", n, "feature")], "from": "split"}
    return extern, lens, net, False


def f_combine_dims(rng) -> Draw:
    extern, lens = {"data": {"dim": 6}}, {"data": rng.choice(LENS)}
    dims = _c(rng, (2, 3), (3, 2), (1, 6))
    net = {"split": {"class": "split_dims", "axis": "F", "dims": dims, "from": "data"},
           "output": {"class": "combine_dims", "axes": _c(rng, ["dim:%i" % dims[1], "dim:%i" % dims[0]],
                                                          ["dim:%i" % dims[0], "dim:%i" % dims[1]], "static",
                                                          ["T", "dim:%i" % dims[0]]), "from": "split"}}
    return extern, lens, net, False


def f_unflatten_nd(rng) -> Draw:
    extern, lens = _dims6(rng)
    lens = {"data": _c(rng, [6, 4, 2], [4, 4, 0], [6, 6, 6])}
    k = _c(rng, 2, 1, 3)
    net = {"len": {"class": "length", "from": "data"},
           "sizes": {"class": "eval", "from": "len", "eval": "tf.concat([source(0) // %i, source(0) * 0 + %i], axis=1)"
                     % (k, k), "out_type": {"dims": [ref("batch"), dim("two", 2, "feature")], "dtype": "int32"}},
           "output": {"class": "unflatten_nd", "from": "data", "sizes": "sizes", "num_axes": 2}}
    _maybe(rng, net["output"], "in_dim", "T", ref("time"))
    return extern, lens, net, False


def f_flatten_batch(rng) -> Draw:
    extern, lens = _dense(rng)
    o = {"class": "flatten_batch", "from": "data"}
    _maybe(rng, o, "batch_major", True, False)
    _maybe(rng, o, "axis", "T")
    net = {"flat": o, "lin": _lin(_c(rng, 3, 4), "flat", _c(rng, "tanh", None)),
           "output": {"class": "unflatten_batch", "from": "lin"}}
    r = rng.random()
    if r < 0.3:
        net = {"output": o}
    elif r < 0.6:  # merge_dims B,T keeps all frames; split_batch_time restores them
        net = {"m": {"class": "merge_dims", "axes": _c(rng, ["B", "T"], ["T", "B"]), "from": "data"},
               "lin": _lin(3, "m", "tanh"), "output": {"class": "split_batch_time", "base": "data", "from": "lin"}}
        _maybe(rng, net["m"], "keep_order", True, False)
    return extern, lens, net, True


def f_fold(rng) -> Draw:
    extern, lens = _dims6(rng)
    size = _c(rng, 2, 3, 4)
    win = {"class": "window", "from": "data", "window_size": size, "window_dim": dim("win", size)}
    fold = {"class": "fold", "from": "win", "mode": _c(rng, "mean", "sum"), "in_spatial_dim": ref("time"),
            "window_dim": ref("win")}
    if rng.random() < 0.4:
        win.update(padding="valid", out_spatial_dim=dim("wtime"))
        fold.update(padding="valid", in_spatial_dim=ref("wtime"))
    if rng.random() < 0.3:
        left = _c(rng, 0, size - 1, size // 2)
        win["window_left"] = fold["window_left"] = left
        if rng.random() < 0.5:
            win["window_right"] = fold["window_right"] = size - 1 - left
    if "padding" not in win and rng.random() < 0.3:  # (valid + stride: RETURNN's sizes exceed its output by stride-1)
        win["stride"] = fold["stride"] = 2
    return extern, lens, {"win": win, "output": fold}, False


def f_boolean_mask(rng) -> Draw:
    extern, lens = _dims6(rng)
    net = {"red": {"class": "reduce", "mode": "sum", "axis": "F", "from": "data"},
           "mask": {"class": "compare", "kind": _c(rng, "greater", "less"), "value": 0.0, "from": "red"},
           "output": {"class": "boolean_mask", "from": "data", "mask": "mask",
                      "dims": _c(rng, [ref("batch"), ref("time")], [ref("time")]), "out_dim": dim("masked")}}
    return extern, lens, net, False


def f_chunking(rng) -> Draw:
    extern, lens = _dense(rng)
    net = {"ch": {"class": "time_chunking", "chunk_size": _c(rng, 2, 3, 4), "chunk_step": _c(rng, 1, 2, 3),
                  "from": "data"},
           "a": _c(rng, _lin(3, "ch", "tanh"), {"class": "rec", "unit": "nativelstm2", "n_out": 3, "from": "ch"},
                   {"class": "cumsum", "from": "ch"}),
           "output": {"class": "time_unchunking", "chunking_layer": "ch", "from": "a"}}
    return extern, lens, net, True


def f_misc_shape(rng) -> Draw:
    extern, lens = {"data": {"dim": _c(rng, 4, 6)}}, {"data": rng.choice(LENS)}
    kind = _c(rng, "swap_time_feature", "batch_softmax", "tile_features", "fill_unused", "flatten_time",
              "batch_median_pooling")
    o: Layer = {"class": kind, "from": "data"}
    if kind == "tile_features":
        o["repetitions"] = _c(rng, 1, 2, 3)
    elif kind == "fill_unused":
        _maybe(rng, o, "fill_value", 0.0, -1.0)
    elif kind == "batch_median_pooling":  # (RETURNN's template needs pool_size given)
        o["pool_size"] = _c(rng, 1, 3)
    return extern, lens, {"output": o}, True


# --- indexing ------------------------------------------------------------------------------------

def _positions(rng, net: Dict[str, Layer], axis: str = "T") -> str:
    """Adds an int layer 'pos' of per-frame (or per-sequence) positions along time to ``net``."""
    kind = _c(rng, "shift", "reverse", "per_seq", "argmax")
    if kind == "shift":
        net["p0"] = {"class": "range_in_axis", "from": "data", "axis": axis}
        net["pos"] = {"class": "eval", "from": "p0", "eval": "source(0) + %i" % _c(rng, 1, -1, 2, 0)}
    elif kind == "reverse":
        net["t"] = {"class": "range_in_axis", "from": "data", "axis": "T"}
        net["len"] = {"class": "length", "from": "data"}
        net["pos"] = {"class": "combine", "kind": "eval", "from": ["t", "len"], "allow_broadcast_all_sources": True,
                      "eval": "tf.maximum(source(1) - 1 - source(0), 0)"}
    elif kind == "per_seq":
        net["pos"] = {"class": "range_in_axis", "from": "data", "axis": "B"}
    else:
        net["lin"] = _lin(_c(rng, 3, 6), "data")
        net["pos"] = {"class": "reduce", "mode": "argmax", "axis": "F", "from": "lin"}
    return "pos"


def f_slice_nd(rng) -> Draw:
    extern, lens = _dense(rng)
    lens = {"data": _c(rng, [7, 5, 3], [7, 4, 1], [6, 6, 2])}
    net: Dict[str, Layer] = {}
    if rng.random() < 0.5:
        net["start"] = {"class": "range_in_axis", "from": "data", "axis": "B"}
    else:
        net["len"] = {"class": "length", "from": "data"}
        net["start"] = {"class": "eval", "from": "len", "eval": "source(0) // %i" % _c(rng, 2, 3)}
    o = {"class": "slice_nd", "from": "data", "start": "start", "size": _c(rng, 1, 2, 3, None)}
    _maybe(rng, o, "min_size", 1, 2)
    net["output"] = o
    return extern, lens, net, True


def f_gather_nd(rng) -> Draw:
    extern, lens = _dense(rng)
    net: Dict[str, Layer] = {}
    pos = _positions(rng, net)
    if rng.random() < 0.5:
        net["output"] = {"class": "gather_nd", "from": "data", "position": pos}
    else:
        net["output"] = {"class": "gather", "from": "data", "position": pos, "axis": "T"}
    return extern, lens, net, True


def f_scatter_nd(rng) -> Draw:
    extern, lens = _dense(rng)
    net: Dict[str, Layer] = {}
    pos = _positions(rng, net)
    o = {"class": "scatter_nd", "from": "data", "position": pos, "position_axis": "T",
         "output_dim_via_time_from": "data"}
    _maybe(rng, o, "filter_invalid_indices", True, False)
    net["output"] = o
    return extern, lens, net, True


def f_search_sorted(rng) -> Draw:
    extern, lens = {"data": {"dim": _c(rng, 3, 5)}}, {"data": rng.choice(LENS)}
    net = {"abs": {"class": "activation", "activation": "abs", "from": "data"},
           "cs": {"class": "cumsum", "axis": "T", "from": "abs"},
           "srt": {"class": "gather", "axis": "F", "position": 0, "from": "cs"}}
    net["vals"] = {"class": "reduce", "mode": _c(rng, "sum", "mean", "max"), "axes": "T", "from": "abs"}
    if rng.random() < 0.4:  # values of another scale (RETURNN: exactly one axis not in sorted_sequence)
        net["vals"] = dict(net["vals"], **{"from": "v1"})
        net["v1"] = {"class": "eval", "from": "abs", "eval": "source(0) * %s" % _c(rng, "0.5", "3.0")}
    o = {"class": "search_sorted", "sorted_sequence": "srt", "values": "vals", "axis": "T"}
    _maybe(rng, o, "side", "left", "right")
    net["output"] = o
    return extern, lens, net, False


# --- signal processing ---------------------------------------------------------------------------

def f_dct(rng) -> Draw:
    extern, lens = _dense(rng)
    o = {"class": "dct", "from": "data"}
    _maybe(rng, o, "type", 1, 2, 3)
    _maybe(rng, o, "norm", None, "ortho")
    return extern, lens, {"output": o}, True


def f_stft(rng) -> Draw:
    extern, lens = {"data": {"dim": 1}}, {"data": rng.choice(LONG)}  # (RETURNN: single channel only)
    size = _c(rng, 4, 6, 8)
    o = {"class": "stft", "from": "data", "frame_shift": _c(rng, 2, 3, 4), "frame_size": size}
    _maybe(rng, o, "fft_size", 8, 16)
    net = {"output": o}
    r = rng.random()
    if r < 0.35:
        net = {"stft": o, "output": dict(o, **{"class": "istft", "from": "stft"})}
    elif r < 0.55:
        net = {"stft": o, "output": {"class": "complex_to_alternating_real", "from": "stft"}}
    return extern, lens, net, False


def f_mel(rng) -> Draw:
    fft = _c(rng, 16, 8)
    extern, lens = {"data": {"dim": fft // 2 + 1}}, {"data": rng.choice(LENS)}
    n = _c(rng, 3, 4)
    o = {"class": "mel_filterbank", "from": "data", "fft_size": fft, "nr_of_filters": n, "n_out": n,
         "sampling_rate": _c(rng, 8000, 16000)}
    _maybe(rng, o, "f_min", 0, 300)
    _maybe(rng, o, "f_max", 3000, 4000)
    net = {"output": o}
    if rng.random() < 0.5:
        net = {"abs": {"class": "activation", "activation": "abs", "from": "data"}, "output": dict(o, **{"from": "abs"})}
    return extern, lens, net, False


def f_complex(rng) -> Draw:
    extern, lens = {"data": {"dim": _c(rng, 4, 6)}}, {"data": rng.choice(LENS)}
    kind = _c(rng, "clp", "round", "abs")
    n_out = {"n_out": extern["data"]["dim"] // 2} if rng.random() < 0.7 else {}  # (RETURNN needs it)
    if kind == "clp":
        net = {"output": {"class": "complex_linear_projection", "from": "data", "nr_of_filters": _c(rng, 2, 4)}}
    elif kind == "round":
        net = {"c": dict({"class": "alternating_real_to_complex", "from": "data"}, **n_out),
               "output": dict({"class": "complex_to_alternating_real", "from": "c"},
                              **({"n_out": 2 * n_out["n_out"]} if n_out else {}))}
    else:
        net = {"c": dict({"class": "alternating_real_to_complex", "from": "data"}, **n_out),
               "output": {"class": "eval", "from": "c", "eval": "tf.abs(source(0))", "out_type": {"dtype": "float32"}}}
    return extern, lens, net, False


# --- parameters ----------------------------------------------------------------------------------

def f_variable(rng) -> Draw:
    extern, lens = {"data": {"dim": 5}}, {"data": rng.choice(LENS)}
    v: Layer = {"class": "variable", "shape": _c(rng, [5], [1], [])}
    _maybe(rng, v, "add_batch_axis", True, False)
    _maybe(rng, v, "add_time_axis", True, False)
    _maybe(rng, v, "init", 0.5, "glorot_uniform")
    r = rng.random()
    if r < 0.3:
        net = {"output": v}
    else:
        net = {"v": v, "output": {"class": "combine", "kind": _c(rng, "add", "mul"), "from": ["data", "v"]}}
    return extern, lens, net, False


def f_weighted(rng) -> Draw:
    extern, lens = _dense(rng)
    if rng.random() < 0.5:
        o: Layer = {"class": "weighted_sum", "from": "data", "axes": _c(rng, "F", "static", "T")}
        if rng.random() < 0.4:
            o.update(size=_c(rng, (1,), (2,), (3,)), padding=_c(rng, "same", "valid"))
            _maybe(rng, o, "keep_dims", True)
    else:
        o = {"class": "elemwise_prod", "from": "data", "axes": _c(rng, "F", "static", "spatial")}
    return extern, lens, {"output": o}, True


# --- attention -----------------------------------------------------------------------------------

def f_rel_pos(rng) -> Draw:
    extern, lens = _dense(rng)
    rel = {"class": "relative_positional_encoding", "n_out": 2, "from": "data"}
    _maybe(rng, rel, "clipping", 2, 3, 16)
    _maybe(rng, rel, "fixed", True, False)
    att = {"class": "self_attention", "num_heads": 2, "total_key_dim": 4, "n_out": 4, "key_shift": "rel",
           "from": "data"}
    _maybe(rng, att, "attention_left_only", True, False)
    return extern, lens, {"rel": rel, "output": att}, True


def f_attention(rng) -> Draw:
    extern, lens = {"data": {"dim": 5}}, {"data": _c(rng, [7, 5, 3], [7, 4, 1], [6, 6, 2])}
    kind = _c(rng, "dot", "concat", "gauss")
    base = {"enc": _lin(4, "data", "tanh"), "enc_ctx": _lin(3, "data")}
    unit: Dict[str, Layer] = {"q": _lin(3, ["data:source", "prev:att"], "tanh")}
    if kind == "dot":
        unit["att"] = {"class": "dot_attention", "from": "q", "base": "base:enc", "base_ctx": "base:enc_ctx"}
        _maybe(rng, unit["att"], "energy_factor", 0.5, 2.0)
    elif kind == "concat":
        unit["att"] = {"class": "concat_attention", "from": "q", "base": "base:enc", "base_ctx": "base:enc_ctx"}
    else:
        unit["dt"] = {"class": "linear", "activation": "2*sigmoid", "n_out": 1, "from": ["data:source", "prev:att"]}
        unit["t"] = {"class": "combine", "kind": "add", "n_out": 1, "from": ["prev:t", "dt"], "initial_output": -1}
        unit["att"] = {"class": "gauss_window_attention", "window_size": _c(rng, 2, 3, 4), "from": "t",
                       "base": "base:enc"}
        _maybe(rng, unit["att"], "std", 0.5, 1.5)
        _maybe(rng, unit["att"], "inner_size", 2)
        del unit["q"]
    unit["output"] = {"class": "copy", "from": "att"}
    return extern, lens, dict(base, output={"class": "rec", "from": "data", "unit": unit}), False


# --- control -------------------------------------------------------------------------------------

def f_cond(rng) -> Draw:
    extern, lens = {"data": {"dim": 4}}, {"data": rng.choice(LENS)}
    net = {"len": {"class": "length", "from": "data"},
           "max_len": {"class": "reduce", "mode": _c(rng, "max", "min"), "axes": "B", "from": "len"},
           "c": {"class": "compare", "from": "max_len", "kind": "greater", "value": _c(rng, 0, 3, 5, 10)},
           "output": {"class": "cond", "from": [], "condition": "c",
                      "true_layer": _c(rng, _lin(4, "data", "tanh"), {"class": "copy", "from": "data"},
                                       {"class": "subnetwork", "from": "data", "subnetwork": {
                                           "lin": _lin(4, "data", "tanh"),
                                           "output": {"class": "combine", "kind": "add", "from": ["data", "lin"]}}}),
                      "false_layer": _c(rng, _lin(4, "data", "relu"), {"class": "activation", "activation": "exp",
                                                                       "from": "data"})}}
    return extern, lens, net, False


def f_masked(rng) -> Draw:
    extern, lens = _dims6(rng)
    unit = _c(rng, {"class": "rec", "unit": "nativelstm2", "n_out": 3, "from": "data"},
              {"class": "linear", "activation": "tanh", "n_out": 3, "from": "data"},
              {"class": "cumsum", "from": "data"})
    net = {"red": {"class": "reduce", "mode": "sum", "axis": "F", "from": "data"},
           "mask": {"class": "compare", "kind": _c(rng, "greater", "less"), "value": 0.0, "from": "red"},
           "output": {"class": "masked_computation", "from": "data", "mask": "mask", "unit": unit}}
    if rng.random() < 0.8:  # (RETURNN asserts them outside loops)
        net["output"].update(in_spatial_dim=ref("time"), out_spatial_dim=dim("masked"))
    if rng.random() < 0.3:  # (RETURNN 1.20261022 fails on unmask outside loops: no rec layer)
        net["masked"] = net.pop("output")
        net["output"] = {"class": "unmask", "from": "masked", "mask": "mask"}
    return extern, lens, net, False


# --- sparse targets ------------------------------------------------------------------------------

def f_sparse(rng) -> Draw:
    extern = {"data": {"dim": 5}, "labels": {"dim": 6, "sparse": True}}
    lens = {"data": _c(rng, [7, 5, 3], [7, 4, 2]), "labels": _c(rng, [3, 2, 0], [3, 2, 1], [2, 2, 2])}
    kind = _c(rng, "ce", "ctc", "edit", "ce_argmax")
    if kind == "ctc":
        o = {"class": "ctc_loss", "logits": "lin", "targets": "data:labels"}
        _maybe(rng, o, "max_approx", True, False)
        _maybe(rng, o, "label_loop", True, False)
        _maybe(rng, o, "blank_index", -1, 0, 6)
        if rng.random() < 0.3:
            o["logits_normalized"] = True
        net = {"lin": _lin(7, "data", "log_softmax" if o.get("logits_normalized") else None), "output": o}
    elif kind == "edit":
        net = {"lin": _lin(6, "data"), "am": {"class": "reduce", "mode": "argmax", "axis": "F", "from": "lin"},
               "output": {"class": "edit_distance", "a": _c(rng, "am", "data:labels"), "b": "data:labels"}}
    elif kind == "ce":
        extern = {"data": {"dim_tags": [ref("batch"), dim("time"), dim("feat", 5, "feature")]},
                  "classes": {"dim": 6, "sparse": True}}
        if rng.random() < 0.8:  # on the logits' time axis (else RETURNN refuses it)
            extern["classes"]["same_dim_tags_as"] = {"t": ref("time")}
        lens = {"data": lens["data"], "classes": lens["data"]}
        net = {"lin": _lin(6, "data"), "output": {"class": "sparse_softmax_cross_entropy_with_logits",
                                                  "logits": "lin", "targets": "data:classes"}}
    else:
        extern, lens = {"data": {"dim": 5}}, {"data": lens["data"]}
        net = {"lin": _lin(6, "data"), "lin2": _lin(6, "data"),
               "am": {"class": "reduce", "mode": "argmax", "axes": "F", "from": "lin2"},
               "output": {"class": "sparse_softmax_cross_entropy_with_logits", "logits": "lin", "targets": "am"}}
        _maybe(rng, net["output"], "axis", "F")
    return extern, lens, net, False


FAMILIES: List[Callable[[random.Random], Draw]] = [
    f_transpose, f_reshape, f_combine_dims, f_unflatten_nd, f_flatten_batch, f_fold, f_boolean_mask, f_chunking,
    f_misc_shape, f_slice_nd, f_gather_nd, f_scatter_nd, f_search_sorted, f_dct, f_stft, f_mel, f_complex,
    f_variable, f_weighted, f_rel_pos, f_attention, f_cond, f_masked, f_sparse]


def draw(rng: random.Random) -> Draw:
    """(extern, lens, network, whether the network reads a dense 'data' a chain layer may replace)."""
    return rng.choice(FAMILIES)(rng)
