#!/usr/bin/env python3
"""Differential check of the common layout of several sources against the real RETURNN (issue 27): the
template of a ``combine`` layer (RETURNN's ``Data.get_common_data`` of its sources, each source then brought
into it by ``copy_compatible_to``), and ``Data.get_common_data`` as config code calls it.

Each case: 2-3 sources, each of up to 3 axes drawn from two dynamic dims (``time``, ``u``), config-made static
dims of size 3 (features ``f``, ``g``, a spatial ``s``), engine-made ones (``a3``, a feature ``a3f``: a
variable's shape, extern data without dim tags; ``a1`` of size 1), mostly with the batch axis, in random
order; at a random behavior_version (0, 10, 12, 16). RETURNN's side gives the template's dims (by
description), feature and time axis, or the error; here ``Data.get_common_data`` and ``CombineLayer``'s output.

Verdicts (per case, of the combine layer; ``Data.get_common_data``'s differences count as DIFFER too):
AGREE, BOTH-FAIL, DIFFER, LAX (built here, RETURNN fails: its ``copy_compatible_to`` cannot map a source),
GAP (RETURNN builds, refused here). RETURNN's side sets the sources' values and the sum as the template's
value, as its layer does: a template that keeps an engine-made size-1 axis where a source's larger axis
broadcasts into it fails there ("Mismatching shape"). QUIRK (kept for such a template without that check):
RETURNN's template differs from this engine's only by such a size-1 axis.

``--layer`` compare, switch (the last source is the bool condition; of two sources the false branch is the
constant 0.0), stack, eval or eval_out instead of combine: each as RETURNN's layer builds its template from
``get_common_data``; eval runs ``source(0) + source(1) + ...`` (each source read with ``auto_convert``:
``copy_compatible_to`` the output template, which fails for some sources where the template was made);
eval_out the same with ``out_type={"dims": ...}``: the largest source's dims shuffled, maybe another source's
dim added (each source brought into that template); concat: a copy layer of several sources (RETURNN's
concat_sources: ``get_common_data`` with ``ignore_feature_dim``, the feature dims summed, each source brought in by
``copy_compatible_to(except_feature=True, unbroadcast=True)``, ``tf.concat`` on the feature axis); concat_layer:
the ``concat`` layer of each source on one of its axes (drawn), with or without ``allow_broadcast`` (RETURNN's
template: ``get_common_data`` of the sources with that axis replaced by the summed dim; each source brought into it
by ``copy_compatible_to(add_dims=allow_broadcast)`` with its own part there).

Usage: .venv/bin/python benchmarks/returnn_fuzz_common_layout.py [--seed S] [--n N] [--layer L] [--show ...]
"""
from __future__ import annotations

import json
import os
import random
import sys
import tempfile
from typing import Any, Dict, List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import returnn_fuzz_pyside as pyside  # noqa: E402

NAMES = ["time", "u", "f", "g", "s", "a1", "a3", "a3f"]


LAYERS = ("combine", "compare", "switch", "stack", "eval", "eval_out", "concat", "concat_layer")


def make_cases(seed: int, n: int, layer: str = "combine") -> List[Dict[str, Any]]:
    rng = random.Random(seed)
    cases = []
    for i in range(n):
        srcs = []
        for _ in range(rng.choice([2, 2, 3])):
            dims = rng.sample(NAMES, rng.randint(0, 3))
            if rng.random() < 0.85 or not dims:
                dims.insert(rng.randint(0, len(dims)), "B")
            srcs.append(dims)
        case = {"name": "layout_%i_%i" % (seed, i), "sources": srcs, "bv": rng.choice([0, 0, 10, 12, 16]),
                "layer": layer}
        if layer == "concat_layer":
            for src in srcs:
                if not [n for n in src if n != "B"]:
                    src.append(rng.choice(NAMES))
            case["axes"] = [rng.choice([n for n in src if n != "B"]) for src in srcs]
            case["allow_broadcast"] = rng.random() < 0.5
        if layer == "eval_out":
            out = list(max(srcs, key=len))
            rng.shuffle(out)
            extra = [n for s in srcs for n in s if n not in out]
            if extra and rng.random() < 0.5:
                out.insert(rng.randint(0, len(out)), rng.choice(extra))
            case["out"] = out
        cases.append(case)
    return cases


def run_cases(cases_file: str, out_file: str) -> None:
    """In either engine's Python (``--run``): each case's templates."""
    import tensorflow as tf
    from returnn.tensor import Dim, batch_dim
    from returnn.util.basic import BehaviorVersion
    try:
        import returnn.tensor.dim_tree  # noqa: F401  (this repository's package)
        ours = True
    except ImportError:
        ours = False
    if ours:
        from returnn.tensor import Data
        from returnn.tf.layers.basic import CombineLayer
    else:
        from returnn.tensor import Tensor as Data
        tf.compat.v1.disable_eager_execution()

    def pool() -> Dict[str, Any]:
        sp, ft = Dim.Types.Spatial, Dim.Types.Feature
        p = {"time": Dim(None, kind=sp, description="time"), "u": Dim(None, kind=sp, description="u"),
             "f": Dim(3, kind=ft, description="f"), "g": Dim(3, kind=ft, description="g"),
             "s": Dim(3, kind=sp, description="s"), "a1": Dim(1, kind=sp, description="a1", auto_generated=True),
             "a3": Dim(3, kind=sp, description="a3", auto_generated=True),
             "a3f": Dim(3, kind=ft, description="a3f", auto_generated=True), "B": batch_dim}
        if not ours:  # RETURNN's templates check that a dynamic dim has sizes (the batch too, to unbroadcast to it)
            bsize = tf.compat.v1.placeholder(tf.int32, [], name="batch_size")
            p["B"] = Dim(None, kind=Dim.Types.Batch, description="batch")
            p["B"].dyn_size_ext = Data("batch_size", dim_tags=[], dtype="int32")
            p["B"].dyn_size_ext.placeholder = bsize
            for k in ("time", "u"):
                p[k].dyn_size_ext = Data(k + "_len", dim_tags=[batch_dim], dtype="int32")
                p[k].dyn_size_ext.placeholder = tf.compat.v1.placeholder(tf.int32, [None], name=k + "_len")
        return p

    def desc(t: Any) -> List[Any]:
        dims = t.dims if ours else t.dim_tags
        return [["B" if d.is_batch_dim() else d.description for d in dims], t.feature_dim_axis, t.time_dim_axis]

    def error(e: Exception) -> str:
        return "%s: %s" % (type(e).__name__, str(e).split("\n")[0][:150])

    out = {}
    for case in json.load(open(cases_file)):
        if ours:
            BehaviorVersion.set(case["bv"])
        else:  # (RETURNN's set also switches its dim equality: simple from 16)
            BehaviorVersion._reset()
            BehaviorVersion.set(case["bv"])
        p = pool()
        datas = [Data("s%i" % i, **{"dims" if ours else "dim_tags": [p[n] for n in ds]})
                 for i, ds in enumerate(case["sources"])]
        res: Dict[str, Any] = {}
        try:
            res["common"] = desc(Data.get_common_data(datas))
        except Exception as e:  # noqa: BLE001 (the verdict)
            res["common_error"] = error(e)
        kind = case.get("layer", "combine")
        if kind == "switch":  # [true, (false,) condition]: the last source is the bool condition
            datas[-1] = Data("s%i" % (len(datas) - 1), dtype="bool",
                             **{"dims" if ours else "dim_tags": [p[n] for n in case["sources"][-1]]})
        try:
            out_dims = [p[n] for n in case["out"]] if "out" in case else None
            if kind == "concat_layer":
                pairs = [(d, p[a]) for d, a in zip(datas, case["axes"])]
                layer = (_our_concat_layer if ours else _returnn_concat_layer)(pairs, case["allow_broadcast"])
            elif ours:  # (as in a network build: dynamic dims have sizes, RETURNN's side gives them placeholders)
                layer = our_layer(kind, datas, out_dims)
            else:
                layer = returnn_layer(kind, datas, out_dims)
            res["layer"] = desc(layer)
            if kind == "concat":  # (this engine puts the new feature axis last, its own dim: the axes as a set)
                names, f, t = res["layer"]
                names = ["F*" if a == f else n for a, n in enumerate(names)]
                res["layer"] = [sorted(names), None if t is None else names[t]]
        except Exception as e:  # noqa: BLE001
            res["error"] = error(e)
        out[case["name"]] = res
    json.dump(out, open(out_file, "w"))


def our_layer(kind: str, datas: List[Any], out_dims: Any = None) -> Any:
    """This engine's layer of ``kind`` on ``datas`` (switch: true, false (or the constant 0.0), condition)."""
    from returnn.tensor.dim import building_network
    from returnn.tf.layers.basic import CombineLayer
    from returnn.tf.layers.control import CompareLayer, SwitchLayer
    from returnn.tf.layers.split_stack import StackLayer
    with building_network():
        if kind in ("eval", "eval_out"):
            return _our_eval(datas, out_dims)
        if kind == "combine":
            return CombineLayer("c", {"kind": "add"}, datas).output
        if kind == "concat":
            return _our_concat(datas)
        if kind == "compare":
            return CompareLayer("c", {"kind": "less"}, datas).output
        if kind == "stack":
            return StackLayer("c", {}, datas).output
        opts = {"condition": "cond", "true_from": "t", "false_from": "f" if len(datas) > 2 else 0.0}
        refs = [datas[-1], datas[0]] + ([datas[1]] if len(datas) > 2 else [])
        return SwitchLayer("c", opts, refs).output


def _our_concat(datas: List[Any]) -> Any:
    """This engine's copy layer of several sources, run on zeros."""
    from returnn.tf.layers.basic import CopyLayer
    layer = CopyLayer("c", {}, datas)
    out = layer.forward(_zero_values(datas), None)
    assert out.tensor.shape.rank == layer.output.batch_ndim
    return layer.output


def _zero_values(datas: List[Any]) -> List[Any]:
    """Zero values of the templates ``datas`` (batch 2, dynamic axes 4 frames)."""
    import tensorflow as tf
    from returnn.tf.layers.output import LayerOutput
    values = []
    for d in datas:
        sizes = {dim: tf.fill([2], 4) for dim in d.dims if dim.is_dynamic()}
        shape = [2 if dim.is_batch_dim() else (4 if dim.dimension is None else dim.dimension) for dim in d.dims]
        values.append(LayerOutput(tf.zeros(shape), d, sizes))
    return values


def _our_concat_layer(pairs: List[Any], allow_broadcast: bool) -> Any:
    """This engine's concat layer of (source, axis) pairs, run on zeros."""
    from returnn.tensor.dim import building_network
    from returnn.tf.layers.concat import ConcatLayer
    datas = [d for d, _ in pairs]
    with building_network():
        layer = ConcatLayer("c", {"from": [("s%i" % i, a) for i, (_, a) in enumerate(pairs)],
                                  "allow_broadcast": allow_broadcast}, datas)
        layer.forward(_zero_values(datas), None)
    return layer.output


def _returnn_concat_layer(pairs: List[Any], allow_broadcast: bool) -> Any:
    """RETURNN's ConcatLayer as its code builds it (template, then each source into it, then the value)."""
    import tensorflow as tf
    from returnn.tensor import Tensor as Data
    from returnn.tf.util.basic import concat_with_opt_broadcast
    for d, _ in pairs:
        d.placeholder = tf.compat.v1.placeholder(tf.as_dtype(d.dtype), d.batch_shape)
    axes = [d.get_axis_from_description(a) for d, a in pairs]
    parts = [d.dim_tags[a] for (d, _), a in zip(pairs, axes)]
    out_dim = sum(parts)
    out = Data.get_common_data([d.copy_template_replace_dim_tag(axis=a, new_dim_tag=out_dim)
                                for (d, _), a in zip(pairs, axes)], allow_broadcast_all_sources=True, name="c")
    out_axis = out.get_axis_from_description(out_dim)
    srcs = []
    for (d, _), a in zip(pairs, axes):
        ref = out.copy_template().copy_template_replace_dim_tag(axis=out_axis, new_dim_tag=d.dim_tags[a])
        srcs.append(d.copy_compatible_to(ref, add_dims=allow_broadcast, unbroadcast=False))
    out.placeholder = concat_with_opt_broadcast([x.placeholder for x in srcs], axis=out_axis,
                                                allow_broadcast=[allow_broadcast] * len(srcs))
    return out


def _our_eval(datas: List[Any], out_dims: Any = None) -> Any:
    """This engine's eval layer of ``source(0) + source(1) + ...``, run on zeros (its sources read in the step)."""
    from returnn.tf.layers.eval_layer import EvalLayer
    opts: Dict[str, Any] = {"eval": " + ".join("source(%i)" % i for i in range(len(datas)))}
    if out_dims is not None:
        opts["out_type"] = {"dims": out_dims}
    layer = EvalLayer("c", opts, datas)
    layer.forward(_zero_values(datas), None)
    return layer.output


def returnn_layer(kind: str, datas: List[Any], out_dims: Any = None) -> Any:
    """RETURNN's layer of ``kind`` as its code builds it: the template, each source brought into it by
    ``copy_compatible_to`` and the result set as its value (its check of the value's shape)."""
    import tensorflow as tf
    from returnn.tensor import Dim, Tensor as Data
    for d in datas:
        d.placeholder = tf.compat.v1.placeholder(tf.as_dtype(d.dtype), d.batch_shape)
    if kind == "switch":
        true, cond = datas[0], datas[-1]
        false = datas[1] if len(datas) > 2 else Data.template_from_constant(0.0, name="f", dtype="float32")
        if len(datas) == 2:
            false.placeholder = tf.constant(0.0)
        out = Data.get_common_data([true, false, cond.copy_template()])
        out.dtype, out.sparse_dim = true.dtype, true.sparse_dim
        out = out.copy(name="c")
        value = tf.where(cond.copy_compatible_to(out, check_dtype=False, check_sparse=False).placeholder,
                         true.copy_compatible_to(out).placeholder, false.copy_compatible_to(out).placeholder)
        out.copy_template().placeholder = value
        return out
    if kind == "stack":
        common = Data.get_common_data(datas, name="c_sources")
        axis = common.get_default_new_axis_for_dim_tag(Dim(kind=Dim.Types.Spatial, dimension=1))
        new = Dim(kind=Dim.Types.Spatial, description="c:stack", dimension=len(datas), auto_generated=True)
        out = common.copy_template(name="c").copy_add_dim_by_tag(axis=axis, dim_tag=new, unbroadcast=True)
        srcs = [d.copy_compatible_to(common, unbroadcast=True).placeholder for d in datas]
        out.copy_template().placeholder = tf.stack(srcs, axis=axis)
        return out
    if kind == "concat":  # get_concat_sources_data_template, then concat_sources
        common = Data.get_common_data(datas, ignore_feature_dim=True)
        if not common.have_feature_axis():
            raise Exception("no feature axis in the common template %s (RETURNN's concat_sources fails)" % common)
        dim = None
        for d in datas:
            if d.have_feature_axis() and d.feature_dim_or_sparse_dim.dimension is not None:
                dim = d.feature_dim_or_sparse_dim if dim is None else dim + d.feature_dim_or_sparse_dim
        out = common.copy_template_replace_dim_tag(name="c", axis=common.feature_dim_axis, new_dim_tag=dim)
        parts = [d.copy_compatible_to(out, unbroadcast=True, except_feature=True).placeholder for d in datas]
        out.placeholder = tf.concat(parts, axis=out.feature_dim_axis)
        return out
    if kind == "eval_out":  # the template from out_type (Data(**out_type), name and dtype from the layer)
        Data.get_common_data(datas)  # (CombineLayer's, for an out_type with 'dims': fails where all need broadcasting)
        common = Data(name="c", dim_tags=out_dims, dtype=datas[0].dtype)
        value = sum(d.copy_compatible_to(common, check_dtype=False, check_sparse=False).placeholder for d in datas)
        common.copy_template().placeholder = value
        return common
    common = Data.get_common_data(datas, name="c")
    if kind == "eval":  # EvalLayer: source(i) is copy_compatible_to(output, check_dtype=False, check_sparse=False)
        value = sum(d.copy_compatible_to(common, check_dtype=False, check_sparse=False).placeholder for d in datas)
        common.copy_template().placeholder = value
        return common
    if kind == "compare":
        common = common.copy_template()
        value = sum(d.copy_compatible_to(common, check_dtype=False, check_sparse=False).placeholder for d in datas)
        common.dtype, common.sparse_dim = "bool", None
        common.copy_template().placeholder = tf.less(value, 0.0)
        return common
    value = sum(d.copy_compatible_to(common).placeholder for d in datas)
    common.copy_template().placeholder = value
    return common


def verdict(ours: Dict[str, Any], theirs: Dict[str, Any]) -> str:
    v = pyside.error_verdict(ours, theirs)
    if v is None:
        if ours["layer"] != theirs["layer"]:
            a, b = ours["layer"][0], theirs["layer"][0]
            quirk = len(a) == len(b) and "a1" in b and "a1" not in a
            v = "QUIRK" if quirk else "DIFFER"
        else:
            v = "AGREE"
    if "common" in theirs and ours.get("common") != theirs["common"]:
        return "DIFFER"  # (config code's get_common_data has no refusals of its own beyond RETURNN's)
    return v


def main() -> None:
    layer = "combine"
    if "--layer" in sys.argv:  # (this script's own option: which layer's template, see LAYERS)
        i = sys.argv.index("--layer")
        layer = sys.argv[i + 1]
        del sys.argv[i:i + 2]
        if layer not in LAYERS:
            sys.exit("--layer must be one of %s" % ", ".join(LAYERS))
    args = pyside.start(__doc__, 300, run_cases)
    if args is None:
        return
    cases = make_cases(args.seed, args.n, layer)
    with tempfile.TemporaryDirectory() as tmp:
        theirs, ours = pyside.both_engines(__file__, args.returnn_python, cases, tmp)
    pyside.report("common layout", args.seed, cases, ours, theirs, verdict, args.show,
                  lambda c, o, t: "bv %i %s\n          here    %s\n          RETURNN %s" % (
                      c["bv"], c["sources"], pyside.short(o), pyside.short(t)))


if __name__ == "__main__":
    main()
