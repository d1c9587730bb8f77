#!/usr/bin/env python3
"""The literal network dicts of RETURNN's own TF tests, built in this engine and compared with what
the real RETURNN built of them (tests/data/returnn_test_nets.json, written by
tests/returnn_nets/run_returnn.py).

Usage: .venv/bin/python benchmarks/returnn_test_nets.py [--data FILE] [--json OUT] [--only ID ...] [-v]

Prints: how many nets both engines build, only RETURNN, only this engine, neither; for the nets this
engine does not build (of those RETURNN builds, then the rest), the one-line reasons grouped by kind
(unknown layer class, unknown option, ...), most frequent first, with the nets; for the nets both
build, whether the parameters agree (RETURNN's names and shapes, and the count), and every mismatch with both counts and the parameters
that differ (names and shapes in RETURNN's naming).

Each net is built as its test builds it: the extern data the test gives (dim tags as Dim objects,
one per name), the test's literal config keys in the global config, the behavior version RETURNN
was run with, search mode when RETURNN built it only in search mode. Parameters in RETURNN's naming
come from ``returnn.tf.returnn_params.returnn_param_shapes``; without it, the scalars of all
variables of the layers are counted (trainable ones and batch-norm statistics, as RETURNN counts)
and the output says so.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import re
import sys
import time
from collections import OrderedDict
from typing import Any, Dict, List, Optional, Sequence, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DATA = os.path.join(REPO, "tests", "data", "returnn_test_nets.json")
if REPO not in sys.path:
    sys.path.insert(0, REPO)
DIM_MARKER_KEY = "$dim"  # as in tests/returnn_nets/extract.py


def load(path: str = DEFAULT_DATA) -> Dict[str, Any]:
    with open(path) as f:
        return json.load(f)


def _make_dims(value: Any, cache: Dict[str, Any]) -> Any:
    """Dim markers of the JSON -> this engine's Dim objects, one per marker name."""
    from returnn.tensor import Dim, FeatureDim, SpatialDim, batch_dim
    if isinstance(value, dict) and DIM_MARKER_KEY in value:
        if value["kind"] == "batch":
            return batch_dim
        name = value[DIM_MARKER_KEY]
        if name not in cache:
            if value["kind"] == "spatial":
                cache[name] = SpatialDim(value["description"], value["dimension"])
            elif value["kind"] == "feature":
                cache[name] = FeatureDim(value["description"], value["dimension"])
            else:
                cache[name] = Dim(value["dimension"], name=value["description"])
        return cache[name]
    if isinstance(value, dict):
        return {k: _make_dims(v, cache) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_make_dims(v, cache) for v in value)
    return value


def one_line(exc: BaseException) -> str:
    text = "%s: %s" % (type(exc).__name__, " ".join(str(exc).split()))
    text = re.sub(r"0x[0-9a-fA-F]+", "0x…", text)
    return text if len(text) <= 300 else text[:297] + "..."


def param_shapes_function():
    """(returnn_param_shapes or None, note for the output)."""
    try:
        from returnn.tf.returnn_params import returnn_param_shapes
        return returnn_param_shapes, "parameters in RETURNN's naming (returnn.tf.returnn_params)"
    except ImportError as exc:
        return None, ("returnn.tf.returnn_params not importable (%s): counting the scalars of all layer "
                      "variables instead, names are this engine's" % exc)


def _variable_shapes(network) -> Dict[str, tuple]:
    """Fallback: every tf.Variable of the layers (trainable and not; shared ones once), named by
    layer and attribute path in this engine (not RETURNN's names)."""
    import tensorflow as tf
    out: Dict[str, tuple] = {}
    seen = set()
    for layer_name, layer in network.layers.items():
        for path, var in layer._flatten(predicate=lambda v: isinstance(v, tf.Variable), with_path=True):
            if id(var) in seen:
                continue
            seen.add(id(var))
            out["%s/%s" % (layer_name, "/".join(str(p) for p in path))] = tuple(var.shape.as_list())
    return out


# RETURNN's builds in the JSON: key -> what the output calls it
RUNS = OrderedDict([("returnn", "behavior version as RETURNN's tests run (latest, 38, unless the test sets one)"),
                    ("returnn_bv0", "behavior version 0 (a config without behavior_version)")])


def behavior_version_of(entry: Dict[str, Any], run: str) -> int:
    return entry["behavior_version"] if run == "returnn" else 0


def build_ours(entry: Dict[str, Any], shapes_fn=None, run: str = "returnn") -> Dict[str, Any]:
    """Build one net of the JSON in this engine as RETURNN's build ``run`` was made (behavior version,
    train or search mode): {"built", "mode", "error", "params", "num_params"}."""
    from returnn.config import Config, get_global_config, set_global_config
    from returnn.extern_data import extern_data_from_config
    from returnn.tf.network import TFNetwork

    mode = entry[run]["mode"] if entry[run]["built"] else "train"
    net = ast.literal_eval(entry["net"])
    extern = _make_dims(ast.literal_eval(entry["extern"]), {})
    opts = dict(ast.literal_eval(entry["config"]))
    opts["behavior_version"] = behavior_version_of(entry, run)
    opts.update(extern)
    old = get_global_config(auto_create=True)
    config = Config(opts)
    set_global_config(config)
    try:
        specs = extern_data_from_config(config)
        network = TFNetwork(net, specs, default_target=opts.get("target") or "classes", search=(mode == "search"))
        if shapes_fn is not None:
            shapes = {k: tuple(v) for k, v in shapes_fn(network).items()}
            from returnn.tf.layers import param_noise
            if mode == "train" and param_noise.uses_returnn_generator(network):  # as a training checkpoint holds it
                shapes[param_noise.RETURNN_GENERATOR_STATE] = (3,)
        else:
            shapes = _variable_shapes(network)
    except Exception as exc:  # noqa: BLE001 (any failure is a result)
        return {"built": False, "mode": mode, "error": one_line(exc), "params": None, "num_params": None}
    finally:
        set_global_config(old)
    params = sorted([name, list(shape)] for name, shape in shapes.items())
    return {"built": True, "mode": mode, "error": None, "params": params,
            "num_params": sum(_size(shape) for name, shape in params  # (RETURNN counts no generator state)
                              if name != "global_random_generator/random_generator/StateVar")}


def _size(shape: Sequence[Optional[int]]) -> int:
    n = 1
    for d in shape:
        if d is None:
            return 0  # RETURNN's get_num_params skips shapes with unknown dims
        n *= int(d)
    return n


def returnn_count(r: Dict[str, Any]) -> int:
    return int(r["num_params"])


def param_diff(ours: List[List[Any]], theirs: List[List[Any]]) -> List[str]:
    """Lines naming the parameters that differ: only RETURNN, only ours, different shapes."""
    a = {n: tuple(s) if s is not None else None for n, s in theirs}
    b = {n: tuple(s) for n, s in ours}
    lines = []
    for n in sorted(set(a) | set(b)):
        if n in a and n not in b:
            lines.append("only RETURNN: %s %s" % (n, a[n]))
        elif n in b and n not in a:
            lines.append("only ours: %s %s" % (n, b[n]))
        elif a[n] != b[n]:
            lines.append("shape: %s RETURNN %s, ours %s" % (n, a[n], b[n]))
    return lines


# (kind of failure, pattern on the one-line error); the first match wins. The detail shown per net is
# the pattern's named group 'd' (with the layer class, group 'cls', when the error names one).
REASON_KINDS: List[Tuple[str, str]] = [
    ("extern data not accepted", r"config key 'extern_data': entry '[^']*'(?:: | )(?P<d>.*?)(?:, got .*)?$"),
    ("unknown layer class", r"unknown layer class '(?P<d>[^']+)'"),
    ("unknown layer option", r"\((?P<cls>[\w]+)\): unknown option\(s\) (?P<d>.+?)(?: \(did you mean.*| \(known.*)?$"),
    ("unknown unit option", r"(?P<d>unknown unit_opts \S+)"),
    ("unknown rec unit", r"unknown unit (?P<d>\S+)"),
    ("n_out not inferred", r"(?P<d>needs 'n_out' or 'out_dim'|cannot tell the shape of '[^']*')"),
    ("layer/data reference not resolved", r"(?P<d>(?:names )?unknown (?:layer|data key) '[^']*')"),
    ("option value not supported", r"\((?P<cls>[\w]+)\): (?P<d>.*(?:not supported|not implemented|needs|must).*)$"),
    ("Python exception in the engine", r"^(?P<d>(?:TypeError|AttributeError|KeyError|IndexError|ValueError|"
                                       r"AssertionError|NotImplementedError|ZeroDivisionError|"
                                       r"InvalidArgumentError): .*)$"),
]


def classify(error: str) -> Tuple[str, str]:
    """(kind, detail) of a one-line error."""
    for kind, pattern in REASON_KINDS:
        m = re.search(pattern, error)
        if m:
            detail = m.group("d")
            detail = re.sub(r"\[[^\]]*\]|\"[^\"]*\"", "…", detail) if kind == "option value not supported" else detail
            detail = detail if len(detail) <= 110 else detail[:107] + "..."
            groups = m.groupdict()
            return kind, ("%s: %s" % (groups["cls"], detail)) if groups.get("cls") else detail
    text = error.split(": ", 1)[-1]
    text = re.sub(r"^(?:rec )?layer '[^']*'(?: \([\w]+\))?(?:, sub-layer '[^']*')?: ", "", text)
    return "other (%s)" % error.split(":", 1)[0], text if len(text) <= 110 else text[:107] + "..."


def compare(data: Dict[str, Any], only: Optional[Sequence[str]] = None, progress: bool = False,
            run: str = "returnn") -> Tuple[List[Dict[str, Any]], str]:
    """Build every net as RETURNN's build ``run``; per-net result records (id, ours, returnn, category,
    parameter agreement) and the parameters note."""
    shapes_fn, note = param_shapes_function()
    results = []
    nets = [n for n in data["nets"] if not only or n["id"] in only]
    t0 = time.time()
    for i, entry in enumerate(nets):
        if progress:
            print("\r%d/%d %-60s" % (i + 1, len(nets), entry["id"][:60]), end="", file=sys.stderr, flush=True)
        ours = build_ours(entry, shapes_fn, run)
        theirs = entry[run]
        category = {(True, True): "both", (False, True): "returnn_only", (True, False): "ours_only",
                    (False, False): "neither"}[(ours["built"], theirs["built"])]
        rec = {"id": entry["id"], "file": entry["file"], "line": entry["line"], "category": category,
               "behavior_version": behavior_version_of(entry, run),
               "ours": ours, "returnn": {k: theirs[k] for k in ("built", "mode", "error", "num_params", "params")}}
        if category == "both":
            # names (RETURNN's, what checkpoints store) and shapes, and the count RETURNN prints
            rec["param_diff"] = param_diff(ours["params"], theirs["params"])
            rec["params_agree"] = ours["num_params"] == returnn_count(theirs) and not rec["param_diff"]
        results.append(rec)
    if progress:
        print("\r%-80s\r" % "", end="", file=sys.stderr)
    return results, note + " (%.1f s for %d nets)" % (time.time() - t0, len(nets))


def report(results: List[Dict[str, Any]], note: str, data: Dict[str, Any], verbose: bool = False,
           run: str = "returnn", primary: Optional[List[Dict[str, Any]]] = None) -> str:
    """The text report of one run; with ``primary`` (the results of the first run), the failures
    are listed only for nets whose category differs from it."""
    out: List[str] = []
    cats = OrderedDict((c, [r for r in results if r["category"] == c])
                       for c in ("both", "returnn_only", "ours_only", "neither"))
    built_ours = len(cats["both"]) + len(cats["ours_only"])
    built_returnn = len(cats["both"]) + len(cats["returnn_only"])
    out.append("RETURNN's TF test nets: %d (RETURNN %s, TF %s), %s"
               % (len(results), data.get("returnn_version"), data.get("tensorflow_version"), RUNS[run]))
    out.append("  RETURNN builds %d, this engine builds %d" % (built_returnn, built_ours))
    out.append("  both %d | RETURNN only %d | ours only %d | neither %d"
               % tuple(len(v) for v in cats.values()))
    out.append("  " + note)
    if primary is not None:
        first = {r["id"]: r["category"] for r in primary}
        cats = OrderedDict((c, [r for r in rs if c == "both" or first.get(r["id"]) != c]) for c, rs in cats.items())
        if any(cats[c] for c in ("returnn_only", "neither", "ours_only")):
            out.append("  (below: only the failures that differ from the first run)")
    for title, failed in (("this engine fails, RETURNN builds", cats["returnn_only"]),
                          ("both fail", cats["neither"])):
        if not failed:
            continue
        out.append("")
        out.append("%s (%d), by kind of reason:" % (title, len(failed)))
        groups: Dict[str, List[Tuple[str, Dict[str, Any]]]] = {}
        for r in failed:
            kind, detail = classify(r["ours"]["error"])
            groups.setdefault(kind, []).append((detail, r))
        for kind, items in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            out.append("  %3d  %s" % (len(items), kind))
            by_detail: Dict[str, List[Dict[str, Any]]] = {}
            for detail, r in items:
                by_detail.setdefault(detail, []).append(r)
            for detail, rs in sorted(by_detail.items(), key=lambda kv: (-len(kv[1]), kv[0])):
                out.append("       %2d  %s" % (len(rs), detail))
                out.append("             %s" % (", ".join(r["id"] for r in rs[:5]) + (", ..." if len(rs) > 5 else "")))
                if verbose:
                    for r in rs:
                        out.append("             %s: %s" % (r["id"], r["ours"]["error"]))
            if title == "both fail" and verbose:
                for _, r in items:
                    out.append("         RETURNN: %s: %s" % (r["id"], r["returnn"]["error"]))
    if cats["ours_only"]:
        out.append("")
        out.append("this engine builds, RETURNN fails (%d):" % len(cats["ours_only"]))
        for r in cats["ours_only"]:
            out.append("  %s: RETURNN %s" % (r["id"], r["returnn"]["error"]))
    both = cats["both"]
    mism = [r for r in both if not r["params_agree"]]
    out.append("")
    out.append("parameters (names, shapes, count), nets both build: %d agree, %d differ" % (len(both) - len(mism), len(mism)))
    for r in mism:
        out.append("  %s (%s:%d): RETURNN %d, ours %d" % (r["id"], r["file"], r["line"], r["returnn"]["num_params"],
                                                        r["ours"]["num_params"]))
        for line in r["param_diff"] or ["(same names and shapes; RETURNN's get_num_params counts differently)"]:
            out.append("      " + line)
    return "\n".join(out)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=DEFAULT_DATA, help="the JSON of run_returnn.py (default %(default)s)")
    parser.add_argument("--json", metavar="OUT", help="write the per-net results to this file")
    parser.add_argument("--only", nargs="*", help="only these net ids")
    parser.add_argument("-v", "--verbose", action="store_true", help="every failing net's error")
    parser.add_argument("--runs", choices=("both", "tests", "bv0"), default="both",
                        help="compare with RETURNN's build at the tests' behavior version, at 0, or both (default)")
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    data = load(args.data)
    runs = list(RUNS) if args.runs == "both" else ["returnn" if args.runs == "tests" else "returnn_bv0"]
    per_run: Dict[str, List[Dict[str, Any]]] = {}
    for i, run in enumerate(runs):
        results, note = compare(data, args.only, progress=sys.stderr.isatty(), run=run)
        if i:
            print("\n" + "=" * 100 + "\n")
        print(report(results, note, data, args.verbose, run, per_run.get(runs[0])))
        per_run[run] = results
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"note": note, "runs": per_run}, f, indent=1, sort_keys=True)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
