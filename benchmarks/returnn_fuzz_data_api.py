#!/usr/bin/env python3
"""Differential check of RETURNN's ``Data`` template API as config code calls it (eval layers with
``as_data``, config layer classes' ``get_out_data_from_opts``) against the real RETURNN (issue 27: config code
using RETURNN's Python API). Templates are plain Python in both engines.

Each case: a template from RETURNN's old constructor keywords (``shape`` with dynamic and static axes,
``batch_dim_axis``, ``time_dim_axis``, ``feature_dim_axis``, ``sparse`` with ``dim``, ``dtype``), then a chain
of one to three calls: layout copies (``copy_as_batch_major``, ``copy_as_time_major``, ``copy_move_axis``,
``copy_add_spatial_dim``, ``copy_template_excluding_axis``, ...), axis lookups (``get_axis_from_description``
with "T", "B", "F", "spatial", "dyn", "static", "stag:", ints, ...) and properties. From seed 6 also RETURNN's further
lookups (get_bc_shape, get_axes_by_tag_name, get_description_from_axis, *_dense shapes, ...) and calls with a second
template: Dim.is_equal with its options, Dim.get_all_dimension_tags, get_common_data, find_matching_dim_map; from
seed 8 copy_compatible_to and copy_compatible_to_dims; from seed 15 copy_add_dim_by_tag. Per step both give a summary:
for a template its axes (each named by the input axis it is, or "new"), batch shape, the batch, time and
feature axis, sparse, dim and dtype; for other results the value (axes, bools, shapes). They must be equal.

Verdicts: AGREE, BOTH-FAIL, DIFFER, LAX (a result here, RETURNN fails), GAP (RETURNN gives one, refused here).

Usage: .venv/bin/python benchmarks/returnn_fuzz_data_api.py [--seed S] [--n N] [--show DIFFER LAX GAP]
"""
from __future__ import annotations

import json
import os
import random
import sys
import tempfile
from typing import Any, Dict, List, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import returnn_fuzz_pyside as pyside  # noqa: E402

PROPERTIES = ["batch_shape", "shape", "dim", "batch_ndim", "ndim", "time_dim_axis", "feature_dim_axis",
              "batch_dim_axis", "time_dim_axis_excluding_batch", "feature_dim_axis_or_unspecified",
              "is_batch_major", "is_time_major", "have_time_axis()", "have_batch_axis()", "have_feature_axis()",
              "get_spatial_batch_axes()", "get_spatial_axes()", "get_dynamic_axes()", "get_static_axes()",
              "get_time_dim_tag()", "get_dynamic_batch_shape_desc",
              # seeds >= 6: RETURNN's further lookups (returnn/tensor/data_query.py)
              "shape_dense", "batch_shape_dense", "ndim_dense", "batch_ndim_dense", "dim_tags_sparse",
              "is_batch_feature_major", "get_axes_with_size()", "get_feature_batch_axes()", "get_feature_axes()",
              "get_bc_spatial_batch_shape()", "get_batch_shape_dim_tags()", "get_dyn_size_tags()",
              "get_static_batch_dim()", "get_batch_dim_tag()", "remaining_dims()", "is_time_axis_dynamic()",
              "time_dim_axis_or_unspecified"]
IS_EQUAL_OPTS = [{}, {"allow_same_feature_dim": True}, {"allow_same_spatial_dim": True},
                 {"treat_feature_as_spatial": True, "allow_same_spatial_dim": True}, {"broadcast_matches": True},
                 {"ignore_feature_dim": True}, {"unknown_spatial_matches": True}, {"derived_matches": True}]
BC_OPTS = [{}, {"T": 1}, {"F": "x"}, {"B": -1}, {"*": None}, {"spatial": None, "F": 1}, {"T": 1, "time": 1}]
DESCRIPTIONS = ["T", "B", "F", "t", "b", "f", "spatial", "dyn", "static", "spatial:0", "spatial:-1", "dyn:0",
                "static:0", "*", "stag:time", "stag:feat", 0, 1, -1, 2, "T?"]


def _template(rng: random.Random, static: bool = False) -> Dict[str, Any]:
    """Old-style keywords; ``static``: no dynamic axes (RETURNN's dynamic dims of a template made outside a network
    are 'undefined' and match any other dynamic dim in get_common_data; its network's dims, as all dims here, do
    not)."""
    n = rng.randint(0, 3)
    shape = [rng.choice([3, 4, 1] if static else [None, None, 3, 4, 1]) for _ in range(n)]
    t: Dict[str, Any] = {"shape": shape}
    if rng.random() < 0.25:
        t["sparse"] = True
        t["dim"] = rng.randint(3, 7)
    elif shape and shape[-1] is not None:
        t["dim"] = shape[-1]
    elif rng.random() < 0.5:
        t["dim"] = None
    r = rng.random()
    if r < 0.15:
        t["batch_dim_axis"] = None
    elif r < 0.4:
        t["batch_dim_axis"] = rng.randint(0, n)
    if rng.random() < 0.2:
        t["time_dim_axis"] = rng.choice([None, 0, 1, 2])
    if rng.random() < 0.15:
        t["feature_dim_axis"] = rng.choice([None, 0, 1, 2, 3])
    if rng.random() < 0.1:
        t["dtype"] = rng.choice(["int32", "float32", "bool"])
    return t


def _call(rng: random.Random, seed: int) -> List[Any]:
    k = lambda: rng.randint(-2, 3)  # noqa: E731
    return rng.choice([
        ["copy_as_batch_major"], ["copy_as_time_major"], ["copy_as_bt_or_tb_major"], ["copy_as_batch_feature_major"],
        ["copy_as_time_batch_major"], ["copy_as_batch_spatial_major"], ["copy_with_feature_last"],
        ["copy_with_feature_dim_axis", k()], ["copy_add_batch_dim", k()], ["copy_add_spatial_dim", k()],
        ["copy_add_feature_dim"], ["copy_template_excluding_axis", k()], ["copy_template_excluding_time_dim"],
        ["copy_template_excluding_spatial_dim", rng.randint(0, 1)], ["copy_move_axis", k(), k()],
        ["copy_swap_axes", k(), k()], ["copy_split_feature_dim", rng.choice([1, 2])], ["copy_with_batch_dim_axis", k()],
        ["copy_with_time_dim_axis", k()], ["copy_template_excluding_batch_dim"] if False else ["copy_as_batch_major"],
        ["get_axis_from_description", rng.choice(DESCRIPTIONS)], ["get_axes_from_description", rng.choice(DESCRIPTIONS)],
        ["get_batch_axis_excluding_batch", k()], ["get_batch_axis", k()], ["property", rng.choice(PROPERTIES)],
    ] + ([] if seed < 6 else [  # seeds >= 6: RETURNN's further methods and the Dim comparison API
        ["copy_template_dense"], ["copy_template_replace_dim", k(), rng.choice([None, 2, 5])],
        ["get_axes_by_tag_name", rng.choice(["time", "feat", "spatial", "x", "static"]), rng.random() < 0.5],
        ["get_axis_by_tag_name", rng.choice(["time", "feat", "spatial0", "static"]), rng.random() < 0.5],
        ["get_special_axes_dict", rng.random() < 0.5, rng.random() < 0.5], ["get_description_from_axis", k()],
        ["get_bc_shape", rng.choice(BC_OPTS)], ["get_batch_shape", 7], ["is_axis_dynamic", k()],
        ["dims_is_equal", k(), k(), rng.choice(IS_EQUAL_OPTS)],
        ["other", "is_equal_with", _template(rng), k(), k(), rng.choice(IS_EQUAL_OPTS)],
        ["other", "common_with", _template(rng, static=True)], ["other", "common_with_part", k()],
        ["other", "matching_map_with", _template(rng)],
        ["other", "all_dims_with", _template(rng), rng.choice(IS_EQUAL_OPTS)],
    ]) + ([] if seed < 8 else [  # seeds >= 8: copy_compatible_to
        ["other", "compatible_to_common", _template(rng, static=True), rng.random() < 0.3],
        ["other", "compatible_to_swapped", k(), k()], ["other", "compatible_to", _template(rng), rng.random() < 0.3],
        ["other", "compatible_to_dims", _template(rng), rng.randint(0, 99), rng.random() < 0.5],
    ]) + ([] if seed < 15 else [  # seeds >= 15: copy_add_dim_by_tag of another template's dim
        ["other", "add_dim_of", _template(rng), rng.choice([None, -1, 0, 1, 2, 3]), rng.random() < 0.5],
    ]))


def draw(seed: int, n: int) -> List[Dict[str, Any]]:
    rng = random.Random(seed)
    return [{"name": "data_%i_%i" % (seed, i), "template": _template(rng),
             "calls": [_call(rng, seed) for _ in range(rng.randint(1, 3))]} for i in range(n)]


def _summary(value: Any, tags: List[Any]) -> Any:
    """A result as JSON: a template's structure with its axes named by the input's axes they are."""
    def tag_name(tag) -> Any:
        for i, t in enumerate(tags):  # (a batch dim by identity: a size-1 broadcast one is another)
            if t is tag or (t == tag and not tag.is_batch_dim()):
                return i
        return "batch" if getattr(tag, "is_batch_dim", lambda: False)() else "new"

    if hasattr(value, "dim_tags") and hasattr(value, "batch_shape"):
        return {"axes": [tag_name(t) for t in value.dim_tags], "batch_shape": list(value.batch_shape),
                "batch": value.batch_dim_axis, "time": value.time_dim_axis, "feature": value.feature_dim_axis,
                "sparse": bool(value.sparse), "dim": value.dim, "dtype": str(value.dtype)}
    if hasattr(value, "is_batch_dim") and hasattr(value, "dimension"):  # a Dim
        return {"dim_of": tag_name(value)}
    if isinstance(value, (list, tuple)):
        return [_summary(v, tags) for v in value]
    if isinstance(value, dict):
        return {str(k): _summary(v, tags) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if type(value).__name__ == "_NotSpecified" or getattr(value, "__name__", None) == "NotSpecified":
        return "NotSpecified"  # (RETURNN's is a class)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "__bool__"):  # a flag usable as a bool and as a call (this engine's is_batch_major)
        return bool(value)
    return repr(type(value).__name__)


def run_cases(cases_file: str, out_file: str) -> None:
    """Runs in either engine's Python (``returnn`` on the path)."""
    try:
        from returnn.tf.util.data import Data
    except ImportError:
        from returnn.tensor import Data
    with open(cases_file) as f:
        cases = json.load(f)
    results = {}
    for case in cases:
        steps: List[Any] = []
        try:
            data = Data(name="x", **case["template"])
            tags = list(data.dim_tags)
            steps.append(_summary(data, tags))
            for call in case["calls"]:
                if not (hasattr(data, "dim_tags") and hasattr(data, "batch_shape")):
                    break
                if call[0] == "other":  # a second template (its dims named after the first's in the summaries)
                    value = _with_other(Data, data, call[1:], tags)
                elif call[0] == "dims_is_equal":
                    value = data.dim_tags[call[1]].is_equal(data.dim_tags[call[2]], **call[3])
                elif call[0] == "property":
                    name = call[1]
                    value = getattr(data, name.rstrip("()"))
                    value = value() if name.endswith("()") else value
                else:
                    value = getattr(data, call[0])(*call[1:])
                steps.append(_summary(value, tags))
                data = value
            results[case["name"]] = {"steps": steps}
        except Exception as exc:  # noqa: BLE001 -- an engine's refusal is a verdict
            results[case["name"]] = {"steps": steps, "error": ("%s: %s" % (type(exc).__name__, exc)).splitlines()[0][:200]}
    with open(out_file, "w") as f:
        json.dump(results, f)


def _with_other(data_class: Any, data: Any, call: List[Any], tags: List[Any]) -> Any:
    """The calls with a second template ``call[1]`` (``tags`` extended by its dims)."""
    kind, template = call[0], call[1]
    if kind in ("common_with_part", "compatible_to_swapped"):
        template = {"shape": []}
    other = data_class(name="x" if kind == "is_equal_with" else "y", **template)
    tags.extend(t for t in other.dim_tags if not any(t is u for u in tags))
    if kind == "is_equal_with":
        return data.dim_tags[call[2]].is_equal(other.dim_tags[call[3]], **call[4])
    if kind == "common_with":
        return data_class.get_common_data([data, other])
    if kind == "common_with_part":  # with a template of some of its own axes
        return data_class.get_common_data([data.copy_template_excluding_axis(call[1]), data])
    if kind == "matching_map_with":
        return data.find_matching_dim_map(other, list(range(other.batch_ndim)))
    if kind == "compatible_to_common":  # to the common template with another one (as RETURNN's layers do)
        return data.copy_compatible_to(data_class.get_common_data([data, other]), unbroadcast=call[2])
    if kind == "compatible_to_swapped":
        return data.copy_compatible_to(data.copy_swap_axes(call[1], call[2]))
    if kind == "compatible_to":
        return data.copy_compatible_to(other, unbroadcast=call[2], check_sparse=False, check_dtype=False)
    if kind == "compatible_to_dims":  # its dims shuffled, maybe with another template's last one
        dims = list(data.dim_tags)
        random.Random(call[2]).shuffle(dims)
        if call[3] and other.dim_tags:
            dims.insert(call[2] % (len(dims) + 1), other.dim_tags[-1])
        return data.copy_compatible_to_dims(dims)
    if kind == "add_dim_of":  # its last dim (or the batch dim) added at an axis
        dim = other.dim_tags[-1] if other.dim_tags else data.dim_tags[0]
        return data.copy_add_dim_by_tag(dim, unbroadcast=call[3], axis=call[2])
    if kind == "all_dims_with":
        return type(data.dim_tags[0]).get_all_dimension_tags([data, other], call[2])[0]
    raise ValueError(kind)


def verdict(ours: Dict[str, Any], theirs: Dict[str, Any]) -> str:
    n = min(len(ours["steps"]), len(theirs["steps"]))
    if ours["steps"][:n] != theirs["steps"][:n]:
        return "DIFFER"
    if "error" in ours and "error" in theirs and len(ours["steps"]) == len(theirs["steps"]):
        return "BOTH-FAIL"
    if len(ours["steps"]) < len(theirs["steps"]) or ("error" in ours and "error" not in theirs):
        return "GAP"
    if len(ours["steps"]) > len(theirs["steps"]) or "error" in theirs:
        return "LAX"
    return "AGREE"


def _describe(case: Dict[str, Any], ours: Dict[str, Any], theirs: Dict[str, Any]) -> str:
    return "%s %s\n          here    %s\n          RETURNN %s" % (
        json.dumps(case["template"]), json.dumps(case["calls"]), pyside.short(ours), pyside.short(theirs))


def main(argv: Optional[List[str]] = None) -> int:
    args = pyside.start(__doc__, 500, run_cases, argv)
    if args is None:
        return 0 if "--run" in (argv or sys.argv) else 2
    cases = draw(args.seed, args.n)
    with tempfile.TemporaryDirectory(prefix="fuzz_data_") as tmp:
        theirs, ours = pyside.both_engines(__file__, args.returnn_python, cases, tmp)
    pyside.report("data api", args.seed, cases, ours, theirs, verdict, args.show, _describe)
    return 0


if __name__ == "__main__":
    sys.exit(main())
