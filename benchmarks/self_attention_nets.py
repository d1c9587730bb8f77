#!/usr/bin/env python3
"""The network dicts of Zettelkasten/returnn-self-attention (vanilla and LSH self-attention, vanilla,
full-LSH and chunked-LSH cross attention, inside and outside rec loops) as cases of the differential
check against the real RETURNN (:mod:`returnn_fuzz`): its ``add_*`` functions are called with the
arguments its tests (test_self_attention.py) use, the net dicts they write are made JSON (see below),
and both engines build and run them with the same parameters and inputs; the verdicts as in
returnn_fuzz (AGREE, DIFFER, GAP, LAX, CRASH, BOTH-FAIL).

Usage::

    .venv/bin/python benchmarks/self_attention_nets.py [--mirror GITDIR] [--only SUBSTR ...] [--list] [--modern]
                                                      [--behavior-version V] [--dump DIR] [--keep DIR]
                                                      [--returnn-python PY] [--trace]

``--list`` prints the case names; ``--dump DIR`` writes each case as JSON (no run).

The repository's modules are read from its mirror (a bare git dir) and imported in this process
with stand-ins for the few RETURNN names they import at module level (they only write dicts).
What is not JSON or not a RETURNN layer is rewritten, keeping the meaning:

- ``DimensionTag(kind, description)`` -> a golden_dims Dim marker of that description;
- the repository's own layer class ``name_axis`` (not part of RETURNN: it gives an axis a named dim
  tag) -> ``reinterpret_data`` with ``set_dim_tags`` {axis: Dim marker of the description} (static
  sizes from the call's arguments; description None -> ``copy``; a named feature axis stops being the
  feature axis, as the branch's distinct tags kept it apart from another of the same size); its axis
  forms ``T+1`` (the window axis right after a split_dims' chunk axis) and ``stag:X+1`` (the axis a
  merge_dims made) name the dim at the layer that makes the axis (split_dims ``dims`` / merge_dims
  ``out_dim``); ``repeat``'s axis named the same way gets the ``out_dim``; a ``range_in_axis``'s one
  axis is no feature axis;
- ``cum_concat`` without ``out_spatial_dim`` (the branch named its axis ``rec-history``) -> with a Dim
  marker ``rec-history`` (one per net: keys, values and queries of a unit share it, as their names did);
- a dot's optional var axis ``stag:NAME?`` (a feature of RETURNN's 2021 branch frithjof-self-attention,
  no released RETURNN's) -> ``stag:NAME`` outside a rec loop, ``var1``/``var2`` ``"auto"`` in one;
- the hashing test's python ``eval`` functions are left out (those tests are not cases here).

A net holding an LSH and a vanilla attention gives a case of each (:func:`prune`: both engines build
every layer of a net dict).

State (RETURNN 1.20261022): 76 cases. As the branch's nets are (no behavior version): 30 AGREE (vanilla
self-attention in and outside rec loops, with past_only / mask_current / shared keys; the full-LSH cross
attention; the vanilla halves of the LSH tests), 46 BOTH-FAIL: released RETURNN below behavior version 16
takes static dims of one size in one elementwise op as the same axis (key-chunk-offset with
other-key-chunk-offset; this engine does the same), and from version 7 on refuses the order-dependent axes
(``static:-1``) these nets use. ``--modern`` (:func:`modernize`, behavior version 21): 48 AGREE (also every
chunked LSH self-attention outside a loop: past_only, mask_current, chunk sizes and counts, one and two
heads, duplicates, both chunk alignments), 28 BOTH-FAIL (the LSH in a rec loop and the chunked LSH cross
attention: their axes by name mix the loop's time axis and the history's, which RETURNN asserts on too).

Random ops (``shuffle_kv``'s shuffle, hash drop-in draws with rate 0) draw differently in the
engines; cases with ``shuffle_kv`` are named ``..._shuffle`` (their outputs may differ on ties).
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import types
from collections import Counter
from typing import Any, Dict, List, Optional

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
MIRROR = "/work/.mirror/Zettelkasten+returnn-self-attention/repo"
MODULES = ("self_attention", "lsh", "cross_attention")
DIM_KEY = "__dim__"  # tests/returnn_goldens/golden_dims.py's marker


class _DimMarker(dict):
    """Stand-in of RETURNN's old ``DimensionTag``: a golden_dims Dim marker (a dict: JSON as it is)."""

    class Types:
        Time = "spatial"
        Spatial = "spatial"
        Feature = "feature"

    def __init__(self, kind: str = "spatial", description: str = "", dimension: Optional[int] = None, **_kw):
        super().__init__({DIM_KEY: description, "dimension": dimension, "kind": "spatial"})
        self.description = description


def load_modules(mirror: str = MIRROR) -> Dict[str, types.ModuleType]:
    """The repository's modules, imported from the mirror's HEAD with stand-ins for RETURNN's names."""
    tmp = tempfile.mkdtemp(prefix="self_att_src_")
    for mod in MODULES:
        src = subprocess.run(["git", "--git-dir=" + mirror, "show", "HEAD:%s.py" % mod], check=True,
                             capture_output=True, text=True).stdout
        with open(os.path.join(tmp, mod + ".py"), "w") as f:
            f.write(src)
    stubs = {
        "returnn": types.ModuleType("returnn"), "returnn.tf": types.ModuleType("returnn.tf"),
        "returnn.tf.layers": types.ModuleType("returnn.tf.layers"),
        "returnn.tf.layers.basic": types.ModuleType("returnn.tf.layers.basic"),
        "returnn.tf.util": types.ModuleType("returnn.tf.util"),
        "returnn.tf.util.data": types.ModuleType("returnn.tf.util.data"),
    }
    stubs["returnn.tf.layers.basic"].register_layer_class = lambda cls: None
    stubs["returnn.tf.layers.basic"]._ConcatInputLayer = object
    stubs["returnn.tf.util.data"].Data = object
    stubs["returnn.tf.util.data"].DimensionTag = _DimMarker
    saved = {k: sys.modules.get(k) for k in list(stubs) + list(MODULES)}
    sys.modules.update(stubs)
    sys.path.insert(0, tmp)
    try:
        import importlib
        mods = {mod: importlib.import_module(mod) for mod in MODULES}
    finally:
        sys.path.remove(tmp)
        for k, v in saved.items():
            if k in MODULES:
                continue  # keep ours (lsh imports cross_attention lazily)
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    return mods


def _marker(name: str, dims: Dict[str, Optional[int]]) -> Dict[str, Any]:
    """The Dim marker of ``name``; an ``other-`` dim of unspecified kind (at behavior versions below 16 RETURNN
    takes static spatial dims of one size as the same axis: the branch's distinct tags did not)."""
    assert name in dims, "no size known for the dim %r" % name
    return {DIM_KEY: name, "dimension": dims[name], "kind": "unspecified" if name.startswith("other-") else "spatial"}


def _producer(d: Dict[str, Any], name: str, classes: tuple) -> Dict[str, Any]:
    """The layer of class ``classes`` a chain of copies / reinterpret_data starts from (``name`` added)."""
    layer = d[name]
    while layer["class"] not in classes:
        assert layer["class"] in ("copy", "reinterpret_data"), (name, layer)
        name = layer["from"][0] if isinstance(layer["from"], list) else layer["from"]
        layer = d[name]
    layer["name"] = name
    return layer


def translate(d: Dict[str, Any], dims: Dict[str, Optional[int]], outer: Optional[Dict[str, Any]] = None) -> None:
    """Rewrites ``name_axis`` layers of the net dict ``d`` (and of rec units in it) in place (module doc);
    ``dims``: description -> static size (None: dynamic)."""
    for name, layer in list(d.items()):
        if layer is None:
            continue
        if layer.get("class") == "rec" and isinstance(layer.get("unit"), dict):
            translate(layer["unit"], dims, d)
        if layer.get("class") == "dot" and any(str(layer.get(k, "")).endswith("?") for k in ("var1", "var2")):
            if outer is None:  # the axis is always there outside a loop
                for k in ("var1", "var2"):
                    if str(layer.get(k, "")).endswith("?"):
                        layer[k] = layer[k][:-1]
            else:  # there only when moved out of the loop: RETURNN's "auto" var axes
                layer.update(var1="auto", var2="auto")
        if layer.get("class") == "cum_concat" and "out_spatial_dim" not in layer:
            layer.pop("axis", None)  # the branch's: the loop's time axis (released RETURNN: only single_step_dim)
            layer["out_spatial_dim"] = {DIM_KEY: "rec-history", "dimension": None, "kind": "spatial"}
        if layer.get("class") == "range_in_axis" and not layer.get("keepdims", True):  # its one axis is no feature
            d[name + "_feature"] = layer  # axis (else matched with another of the same size by RETURNN and here)
            d[name] = {"class": "reinterpret_data", "from": name + "_feature", "set_axes": {"F": None}}
        if layer.get("class") != "name_axis":
            continue
        axes, descrs = layer["axis"], layer["description"]
        axes = axes if isinstance(axes, list) else [axes]
        descrs = descrs if isinstance(descrs, list) else [descrs]
        src = layer["from"][0] if isinstance(layer["from"], list) else layer["from"]
        set_tags: Dict[str, Any] = {}
        dim_keys: List[List[Any]] = []  # set_dim_tags keyed by a Dim (golden_dims' keyed dict)
        for ax, descr in zip(axes, descrs):
            if descr is None:
                continue
            if ax == "T+1":  # the window axis of a split_dims [-1, window]: Dims there (all or none), the first new
                split = _producer(d, src, ("split_dims",))  # (padded to a multiple only while its size is unknown)
                chunk = {DIM_KEY: "%s@%s" % (descrs[axes.index("T")], split.pop("name")), "dimension": None,
                         "kind": "spatial"}
                split["dims"] = [chunk, _marker(descr, dims)]
                if outer is not None:  # in a loop, by its Dim ('T' is the loop's axis there)
                    set_tags.pop("T", None)
                    dim_keys.append([{DIM_KEY: chunk[DIM_KEY]}, _marker(descrs[axes.index("T")], dims)])
            elif ax.endswith("+1") or ax.startswith("stag:repeated"):  # the axis a merge_dims / repeat made
                made = _producer(d, src, ("merge_dims",) if ax.endswith("+1") else ("repeat",))
                if MODERN[0]:  # (RETURNN finds no stag of a dim declared the same as out_dim: named after it)
                    made["out_dim"] = {DIM_KEY: "made@" + made.pop("name"), "dimension": dims[descr], "kind": "spatial"}
                    dim_keys.append([{DIM_KEY: made["out_dim"][DIM_KEY]}, _marker(descr, dims)])
                else:
                    made.update(out_dim=_marker(descr, dims), name=None)
            else:
                set_tags[ax] = _marker(descr, dims)
        for layer_ in d.values():
            if layer_ is not None and "name" in layer_:
                del layer_["name"]
        opts = {k: v for k, v in layer.items() if k not in ("class", "axis", "description")}
        if dim_keys:
            d[name] = dict(opts, **{"class": "reinterpret_data", "set_dim_tags": {"__dict__": dim_keys}})
            continue
        if set_tags and any(ax == "F" or descr.startswith("other-") for ax, descr in zip(axes, descrs) if descr):
            # named: no feature axis (else matched with another of its size); RETURNN unsets it before naming
            d[name + "_tagged"] = dict(opts, **{"class": "reinterpret_data", "set_dim_tags": set_tags})
            d[name] = {"class": "reinterpret_data", "from": name + "_tagged", "set_axes": {"F": None}}
        elif set_tags:
            d[name] = dict(opts, **{"class": "reinterpret_data", "set_dim_tags": set_tags})
        else:
            d[name] = dict(opts, **{"class": "copy"})


def modernize(d: Dict[str, Any], outer: Optional[Dict[str, Any]] = None) -> None:
    """``--modern``: the order-dependent axes (``static:N``) named (in place, before :func:`translate`), so that
    the nets build at a behavior version from 16 on, where dims of one size stay apart unless they are one Dim
    (the branch's semantics) and ``static:N`` is refused: the hash generator's variable gets Dims (heads,
    rounds, key, half the hash classes) and a concat of its two halves an out_dim ``hash-classes``; a split of
    the heads Dims (heads, a feature Dim of the layer); ``static:-1``/``-2`` of dots and reduces by name."""
    def marker(name: str, n: int, kind: str = "spatial") -> Dict[str, Any]:
        return {DIM_KEY: name, "dimension": n, "kind": kind}
    for name, layer in list(d.items()):
        if not isinstance(layer, dict):
            continue
        if layer.get("class") == "rec" and isinstance(layer.get("unit"), dict):
            modernize(layer["unit"], d)
        if layer.get("class") == "name_axis" and layer["axis"] == ["static:0", "static:1"]:
            src = d[layer["from"][0]]
            if src["class"] == "variable":  # (else a copy of the outer one, named there)
                n, r, k, h = src["shape"]
                src["shape"] = [marker("att-heads", n), marker("att-rounds", r), marker("hash-key", k),
                                marker("hash-half", h, "feature")]
            d[name] = {"class": "copy", "from": layer["from"]}
        elif layer.get("class") == "name_axis" and layer["axis"] == "static:-2":
            d[name] = {"class": "copy", "from": layer["from"]}  # (the split_dims before names the heads)
        elif layer.get("class") == "split_dims" and layer.get("axis") == "F" and len(layer["dims"]) == 2 and all(
                isinstance(n, int) for n in layer["dims"]):
            n, f = layer["dims"]
            layer["dims"] = [marker("att-heads", n), marker("%s-feature" % name, f, "feature")]
        elif layer.get("class") == "merge_dims" and layer.get("axes") == "static":
            layer["axes"] = ["stag:att-heads", "F"]
        elif layer.get("class") in ("combine", "compare") and len(layer.get("from") or []) > 1:
            layer["allow_broadcast_all_sources"] = True
        elif layer.get("class") == "copy" and name.endswith("_hash_gen") and len(layer.get("from", [])) == 2:
            d[name] = {"class": "concat", "from": [[src, "F"] for src in layer["from"]],
                       "out_dim": marker("hash-classes", 2 * _hash_half(d, layer["from"][0], outer))}
        elif layer.get("class") == "dot":
            hashing = layer.get("red1") == "static:-2"
            for key in ("red1", "red2", "var1", "var2"):
                value = layer.get(key)
                values = value if isinstance(value, list) else [value]
                values = [("stag:hash-key" if v == "static:-2" else "stag:hash-classes" if hashing else "F")
                          if isinstance(v, str) and v.startswith("static:") else v for v in values]
                if value is not None:
                    layer[key] = values if isinstance(value, list) else values[0]
        elif layer.get("class") == "reduce" and layer.get("axes") == "static:-1":
            layer["axes"] = "stag:hash-classes"


def _hash_half(d: Dict[str, Any], top: str, outer: Optional[Dict[str, Any]] = None) -> int:
    """Half the hash classes: the last size of the hash generator's variable (behind its name_axis copy)."""
    layer = d[top]
    while layer["class"] != "variable":
        src = layer["from"][0] if isinstance(layer["from"], list) else layer["from"]
        layer = outer[src[len("base:"):]] if src.startswith("base:") else d[src]
    last = layer["shape"][-1]
    return last["dimension"] if isinstance(last, dict) else last


def _lsh_dims(num_heads: int, num_rounds: int, chunk_size: int, before: int, after: int,
              key_chunk_size: Optional[int] = None) -> Dict[str, Optional[int]]:
    key_chunk_size = key_chunk_size or chunk_size
    offsets = before + 1 + after
    return {"att-heads": num_heads, "att-rounds": num_rounds, "other-att-round": num_rounds,
            "query-window": chunk_size, "key-window": key_chunk_size, "key-chunk-offset": offsets,
            "other-key-chunk-offset": offsets, "stacked-key-window": offsets * key_chunk_size,
            "query-chunk": None, "key-chunk": None}


def _refs(layer: Any) -> List[str]:
    """The strings in a layer dict (its possible references to other layers)."""
    if isinstance(layer, str):
        return [layer]
    if isinstance(layer, dict):
        return [r for k, v in layer.items() if k != "class" for r in _refs(v)]
    if isinstance(layer, (list, tuple)):
        return [r for v in layer for r in _refs(v)]
    return []


def prune(net: Dict[str, Any], output: str) -> Dict[str, Any]:
    """Only the layers ``output`` needs (both engines build every layer of a net dict): a net of the tests
    holding an LSH and a vanilla attention gives a case of each; in the rec unit ``output``, ``end`` and the
    sub-layers read from outside are kept."""
    keep, unit_keep = set(), {"output", "end"}
    todo = [output]
    unit = (net.get("output") or {}).get("unit") if isinstance(net.get("output"), dict) else None
    while todo:
        n = todo.pop()
        if n.startswith("output/") and unit is not None:
            sub = n[len("output/"):]
            if sub not in unit_keep:
                unit_keep.add(sub)
            n = "output"
        n = n.split("/")[0]
        if n in keep or n not in net:
            continue
        keep.add(n)
        todo += _refs(net[n])
        if n == "output" and unit is not None:  # the unit's closure (base: refs lead back here)
            done, utodo = set(), list(unit_keep)
            while utodo:
                u = utodo.pop()
                for pre in ("prev:", "base:"):
                    if u.startswith(pre) and pre == "base:":
                        todo.append(u[len(pre):])
                        u = ""
                    elif u.startswith(pre):
                        u = u[len(pre):]
                u = u.split("/")[0]
                if u in done or u not in unit:
                    continue
                done.add(u)
                utodo += _refs(unit[u])
            net["output"] = dict(net["output"], unit={k: v for k, v in unit.items() if k in done})
    return {k: v for k, v in net.items() if k in keep}


def _case(name: str, network: Dict[str, Any], extern: Dict[str, Any], lens: Dict[str, List[int]],
          output: str = "output", train: bool = True, dims: Optional[Dict[str, Optional[int]]] = None
          ) -> Dict[str, Any]:
    network = prune(copy.deepcopy(network), output)  # one translation per case (a test's net gives several)
    if MODERN[0]:
        modernize(network)
    translate(network, dims or {})
    network = json.loads(json.dumps(network))  # tuples -> lists, markers -> dicts, floats as JSON
    return dict(name="selfatt_" + name, family="self_attention", network=network, extern=extern, config={},
                output=output, lens=lens, train=train, notes="Zettelkasten/returnn-self-attention " + name)


MODERN = [False]  # --modern (module doc of modernize)
X6 = {"data": {"dim": 6}}
LENS13 = {"data": [13, 11, 6]}
LENS7 = {"data": [7, 5, 3]}


def _rec_over_data(unit: Dict[str, Any], out: str, n_out: int, move_out: bool) -> Dict[str, Any]:
    """check_reclayer_optimize_out's net: a rec loop over data whose output copies ``out``."""
    unit = dict(unit, output={"class": "copy", "from": out, "n_out": n_out})
    return {"output": {"class": "rec", "from": "data", "unit": unit, "optimize_move_layers_out": move_out}}


def cases(mods: Dict[str, types.ModuleType]) -> List[Dict[str, Any]]:
    sa, lsh, ca = mods["self_attention"], mods["lsh"], mods["cross_attention"]
    out: List[Dict[str, Any]] = []
    heads, kd, vd = 2, 3, 3
    # test_vanilla_self_attention_equal_to_SelfAttentionLayer (the vanilla half), plus mask_current / shared kq
    for past in (False, True):
        for mask_current in (False, True):
            for share in (False, True):
                net: Dict[str, Any] = {}
                sa.add_vanilla_self_attention_layer(
                    net, "data", "att", inside_rec_layer=False, past_only=past, num_heads=heads, key_dim=kd,
                    value_dim=vd, share_key_query=share, mask_current=mask_current)
                net["output"] = {"class": "copy", "from": "att_att"}
                out.append(_case("vanilla_past%i_cur%i_share%i" % (past, mask_current, share), net, X6, LENS13))
    # test_vanilla_self_attention_optimize_out
    for move in (True, False):
        unit: Dict[str, Any] = {}
        sa.add_vanilla_self_attention_layer(
            unit, "data:source", "att", inside_rec_layer=True, past_only=True, time_axis="stag:extern_data:data",
            num_heads=heads, key_dim=kd, value_dim=vd)
        out.append(_case("vanilla_rec_move%i" % move, _rec_over_data(unit, "att_att", heads * vd, move), X6, LENS7))
    # test_lsh_attention_optimize_out
    for size, before, after, nh, align in [(1, 0, 0, 26, "identity"), (7, 0, 0, 26, "identity"),
                                           (7, 0, 0, 2, "identity"), (4, 1, 0, 26, "identity"),
                                           (4, 1, 0, 2, "identity"), (4, 1, 1, 26, "search_bounds_centered")]:
        for move in (True, False):
            unit = {}
            lsh.add_lsh_self_attention_layer(
                unit, "data:source", "att", chunks_before=before, chunks_after=after, chunk_size=size,
                num_heads=heads, key_dim=kd, value_dim=vd, num_hashes=nh, inside_rec_layer=True, past_only=True,
                allow_duplicate_attention=False, time_axis="stag:extern_data:data", chunk_alignment=align)
            out.append(_case("lsh_rec_c%i_b%i_a%i_h%i_%s_move%i" % (size, before, after, nh, align[:6], move),
                             _rec_over_data(unit, "att_att", heads * vd, move), X6, LENS7,
                             dims=_lsh_dims(heads, 1, size, before, after)))
    # test_lsh_self_attention_no_mask_different_hashes(_no_duplicates)
    variants = [(13, False, False, 5, 1, 1, True, 2, "identity"), (13, False, True, 5, 1, 1, True, 2, "identity"),
                (13, True, False, 7, 1, 0, True, 2, "identity"), (13, True, True, 7, 1, 0, True, 2, "identity"),
                (13, False, False, 5, 1, 1, True, 2, "search_bounds_centered"),
                (13, False, True, 5, 1, 1, True, 2, "search_bounds_centered"),
                (6, False, False, 4, 1, 0, False, 1, "identity"), (2, False, False, 1, 2, 0, False, 1, "identity"),
                (2, False, False, 1, 2, 0, False, 2, "identity"), (13, False, False, 5, 2, 0, False, 2, "identity"),
                (13, False, False, 5, 3, 0, False, 2, "identity"), (13, True, False, 5, 3, 0, False, 2, "identity"),
                (13, False, False, 5, 1, 1, False, 2, "identity"), (13, False, True, 5, 1, 1, False, 2, "identity"),
                (13, True, False, 7, 1, 0, False, 2, "identity"), (13, True, True, 7, 1, 0, False, 2, "identity"),
                (13, False, False, 5, 1, 1, False, 2, "search_bounds_centered"),
                (13, False, True, 5, 1, 1, False, 2, "search_bounds_centered")]
    for t, past, cur, size, before, after, dup, nheads, align in variants:
        net = {"lsh_out": {"class": "copy", "from": "lsh_att", "is_output_layer": True},
               "vanilla_out": {"class": "copy", "from": "vanilla_att", "is_output_layer": True},
               "output": {"class": "copy", "from": ["lsh_att"]}}
        lsh.add_lsh_self_attention_layer(
            net, "data", "lsh", inside_rec_layer=False, past_only=past, num_heads=nheads, key_dim=kd, value_dim=vd,
            num_hashes=26, chunk_size=size, chunks_before=before, chunks_after=after, mask_current=cur,
            mask_different_hashes=False, allow_duplicate_attention=dup, chunk_alignment=align, debug_print=False)
        sa.add_vanilla_self_attention_layer(
            net, "data", "vanilla", inside_rec_layer=False, past_only=past, num_heads=nheads, key_dim=kd,
            value_dim=vd, share_key_query=True, mask_current=cur)
        net["vanilla_qv0"]["reuse_params"] = "lsh_qv0"
        dims = _lsh_dims(nheads, 1, size, before, after)
        lens = {"data": [t, max(t - 2, 1), max(t // 2, 1)]}
        ext = {"data": {"dim": nheads * kd}}
        tag = "t%i_past%i_cur%i_c%i_b%i_a%i_dup%i_n%i_%s" % (t, past, cur, size, before, after, dup, nheads, align[:6])
        out.append(_case("lsh_" + tag, net, ext, lens, dims=dims))
        out.append(_case("lsh_vanilla_" + tag, net, ext, lens, output="vanilla_out", dims=dims))
    out += _cross_cases(sa, ca)
    # test_recompute_gradients's net (dropout 0)
    net = {"embed": {"class": "linear", "n_out": 5, "activation": None, "from": "data"},
           "self_att_print": {"class": "print", "from": "embed"}, "self_att_att": None}
    sa.add_vanilla_self_attention_layer(d=net, input="self_att_print", output="self_att", num_heads=heads, key_dim=kd,
                                        value_dim=vd, inside_rec_layer=False, dropout=0.0)
    net["output"] = {"class": "reduce", "axes": "*", "mode": "sum", "from": "self_att_att"}
    out.append(_case("recompute_net", net, {"data": {"dim": 7, "sparse": True}}, LENS7))
    return out


def _dec_net(unit_extra: Dict[str, Any], probs_from: List[str], end_value: int, max_seq_len: Any,
             outs: Dict[str, str]) -> Dict[str, Any]:
    unit = {"embed": {"class": "linear", "activation": None, "from": ["prev:output"], "n_out": 7}}
    unit.update(unit_extra)
    unit.update({"output_prob": {"class": "softmax", "from": probs_from, "target": "classes"},
                 "output": {"class": "choice", "beam_size": 4, "target": "classes", "from": ["output_prob"],
                            "initial_output": "zeros", "loss": "ce", "is_output_layer": True},
                 "end": {"class": "compare", "from": ["output"], "value": end_value}})
    net = {"encoder": {"class": "linear", "n_out": 5, "activation": None, "from": "data"},
           "output": {"class": "rec", "target": "classes", "from": [], "max_seq_len": max_seq_len, "unit": unit}}
    for name, src in outs.items():
        net[name] = {"class": "copy", "from": src, "is_output_layer": True}
    return net


def _sub_outputs(net: Dict[str, Any]) -> Dict[str, Any]:
    """The decoder's sub-layers read from outside the loop made output layers, as the tests do."""
    for layer in net.values():
        src = layer.get("from") if isinstance(layer, dict) else None
        if isinstance(src, str) and src.startswith("output/"):
            net["output"]["unit"][src[len("output/"):]]["is_output_layer"] = True
    return net


def _cross_cases(sa, ca) -> List[Dict[str, Any]]:
    out: List[Dict[str, Any]] = []
    ext = {"data": {"dim": 7, "sparse": True}, "classes": {"dim": 6, "sparse": True, "available_for_inference": False}}
    lens = {"data": [7, 5, 3], "classes": [5, 4, 2]}
    heads, kd, vd = 2, 3, 3
    # test_full_lsh_cross_attention_construct
    net = _dec_net({"att_att": None}, ["att_att"], 0, 'max_len_from("base:encoder") * 3', {"att_out": "output/att_att"})
    ca.add_full_lsh_cross_attention_layer(d=net["output"]["unit"], db=net, input="embed", keys_input="base:encoder",
                                          output="att", num_heads=heads, key_dim=kd, value_dim=vd, num_hashes=6)
    out.append(_case("full_lsh_cross", _sub_outputs(net), ext, lens, output="att_out",
                     dims=_lsh_dims(heads, 1, 1, 0, 0)))
    # test_lsh_cross_attention_equals_full_lsh_cross_attention(_shuffle_kv)
    for enc_t, dec_t, size, before, after, nheads, nh, align, shuffle in [
            (5, 1, 6, 0, 0, 1, 4, "identity", False), (15, 10, 5, 1, 1, 2, 6, "identity", False),
            (5, 1, 6, 0, 0, 1, 4, "search_bounds_centered", False),
            (15, 10, 5, 1, 1, 2, 6, "search_bounds_centered", False), (5, 1, 5, 0, 0, 1, 4, "identity", True),
            (15, 10, 5, 1, 1, 2, 6, "search_bounds_centered", True)]:
        net = _dec_net({"chunked_att_att": None, "full_att_att": None}, ["full_att_att", "chunked_att_att"], -1, dec_t,
                       {"chunked_att": "output/chunked_att_att", "full_att": "output/full_att_att"})
        unit = net["output"]["unit"]
        ca.add_full_lsh_cross_attention_layer(d=unit, db=net, input="embed", keys_input="base:encoder",
                                              output="full_att", num_heads=nheads, key_dim=kd, value_dim=vd,
                                              num_hashes=nh)
        ca.add_lsh_cross_attention_layer(
            d=unit, db=net, input="embed", keys_input="base:encoder", output="chunked_att", num_heads=nheads,
            key_dim=kd, value_dim=vd, num_hashes=nh, key_chunk_size=size, query_chunk_size=size,
            key_chunks_before=before, key_chunks_after=after, chunk_alignment=align, shuffle_kv=shuffle)
        unit["chunked_att_query0"]["reuse_params"] = "full_att_query0"
        net["chunked_att_key0"]["reuse_params"] = "full_att_key0"
        net["chunked_att_value0"]["reuse_params"] = "full_att_value0"
        unit["chunked_att_hash_gen_top_unnamed"] = {"class": "copy", "from": "base:full_att_hash_gen_top_unnamed"}
        dims = _lsh_dims(nheads, 1, size, before, after)
        tag = "e%i_d%i_c%i_b%i_a%i_n%i_h%i_%s%s" % (enc_t, dec_t, size, before, after, nheads, nh, align[:6],
                                                  "_shuffle" if shuffle else "")
        elens = {"data": [enc_t, max(enc_t - 3, 1), max(enc_t // 2, 1)], "classes": [dec_t] * 3}
        out.append(_case("lsh_cross_" + tag, _sub_outputs(net), ext, elens, output="chunked_att", dims=dims))
        out.append(_case("lsh_cross_full_" + tag, net, ext, elens, output="full_att", dims=dims))
    # test_lsh_cross_attention_no_mask_different_hashes
    for cur, shuffle in [(False, False), (False, True)]:  # the test passes mask_current to no call
        net = _dec_net({"lsh_att": None, "vanilla_att": None}, ["lsh_att", "vanilla_att"], -1,
                       'max_len_from("base:encoder") * 3', {"vanilla_out": "output/vanilla_att",
                                                            "lsh_out": "output/lsh_att"})
        net["encoder"].pop("from")
        unit = net["output"]["unit"]
        ca.add_lsh_cross_attention_layer(
            unit, net, input="embed", keys_input="base:encoder", output="lsh", num_heads=heads, key_dim=kd,
            value_dim=vd, num_hashes=26, key_chunk_size=5, query_chunk_size=5, key_chunks_before=1, key_chunks_after=1,
            mask_different_hashes=False, allow_duplicate_attention=True, chunk_alignment="identity",
            shuffle_kv=shuffle)
        ca.add_vanilla_cross_attention_layer(unit, net, input="embed", keys_input="base:encoder", output="vanilla",
                                             num_heads=heads, key_dim=kd, value_dim=vd)
        unit["lsh_query0"]["reuse_params"] = "vanilla_query0"
        net["lsh_key0"]["reuse_params"] = "vanilla_key0"
        net["lsh_value0"]["reuse_params"] = "vanilla_value0"
        dims = _lsh_dims(heads, 1, 5, 1, 1)
        ext2 = {"data": {"dim": 6}, "classes": {"dim": 6, "sparse": True}}
        lens2 = {"data": [13, 10, 6], "classes": [13, 10, 6]}
        tag = "cur%i%s" % (cur, "_shuffle" if shuffle else "")
        out.append(_case("lsh_cross_nomask_" + tag, _sub_outputs(net), ext2, lens2, output="lsh_out", dims=dims))
        out.append(_case("lsh_cross_nomask_vanilla_" + tag, net, ext2, lens2, output="vanilla_out", dims=dims))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mirror", default=MIRROR)
    parser.add_argument("--only", nargs="+", metavar="SUBSTR")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--dump", help="write the cases as JSON into this directory (no run)")
    parser.add_argument("--keep", help="keep RETURNN's outputs (.npz) here")
    parser.add_argument("--returnn-python", default=os.path.join(REPO, ".bench-venv-returnn", "bin", "python"))
    parser.add_argument("--trace", action="store_true")
    parser.add_argument("--behavior-version", type=int, help="the cases' behavior_version (default: none)")
    parser.add_argument("--modern", action="store_true", help="name the order-dependent axes (modernize) and "
                                                                   "build at behavior version 21")
    args = parser.parse_args()
    MODERN[0] = args.modern
    if args.modern and args.behavior_version is None:
        args.behavior_version = 21
    all_cases = cases(load_modules(args.mirror))
    if args.behavior_version is not None:
        for c in all_cases:
            c["config"]["behavior_version"] = args.behavior_version
            c["name"] += "_bv%i" % args.behavior_version
    if args.only:
        all_cases = [c for c in all_cases if any(s in c["name"] for s in args.only)]
    if args.list:
        print("\n".join(c["name"] for c in all_cases))
        return 0
    if args.dump:
        os.makedirs(args.dump, exist_ok=True)
        for c in all_cases:
            with open(os.path.join(args.dump, c["name"] + ".json"), "w") as f:
                json.dump(c, f, indent=1)
        return 0
    import returnn_fuzz  # noqa: E402  (puts the repository and tests/ on sys.path)
    out_dir = args.keep or tempfile.mkdtemp(prefix="self_att_")
    os.makedirs(out_dir, exist_ok=True)
    failed = returnn_fuzz.run_returnn(all_cases, out_dir, args.returnn_python, args.trace)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    counts: Counter = Counter()
    for c in all_cases:
        kind, detail = returnn_fuzz.verdict(c, out_dir, failed.get(c["name"]))
        counts[kind] += 1
        if kind != "AGREE":
            print("%-9s %s | %s" % (kind, c["name"], detail), flush=True)
    print("\n%i cases: %s" % (len(all_cases), ", ".join("%s %i" % kv for kv in sorted(counts.items()))))
    return 1 if counts["DIFFER"] or counts["CRASH"] else 0


if __name__ == "__main__":
    sys.exit(main())
