#!/usr/bin/env python3
"""The literal network dicts of RETURNN's own TF tests, found with :mod:`ast` (never imported or run).

Usage: python tests/returnn_nets/extract.py [--src RETURNN_SOURCE_DIR] [--list] [--skipped]

A *net dict* is a dict display that :func:`ast.literal_eval` accepts, with string keys, whose values
are mostly (at least half, at least one) dicts with a ``"class"`` key. The outermost such dict wins:
dicts inside an accepted one (rec units, subnetworks) are part of it. A literal dict that is the
``unit``/``subnetwork`` of a bigger, non-literal dict (directly, or through a variable used as such in
the same function) is part of another net in its test; it is kept too, built alone as a net of its
own (``alone`` says why it is only a part; RETURNN builds some of them, e.g. a cond branch or a
subnetwork without ``base:`` references). Identical dicts are kept once (the first occurrence, in
file order), the other places listed under ``also_in``.

For each net the extern data the test gives: a literal ``extern_data`` dict, or ``num_inputs`` /
``num_outputs``, looked up (1) in the config dict that holds the net under ``"network"``, (2) the
nearest one in the same function (before the net, else after), (3) in a function of the same module
the test function calls; names in these values are resolved when the function (or module) assigns
them a literal. Otherwise :data:`DEFAULT_EXTERN_DATA`, and the entry says why. Literal config keys
of that config dict (``behavior_version``, ``debug_print_layer_output_template``, ...) are kept
under ``config``.

Only the standard library is used: both the RETURNN venv (run_returnn.py) and this repository's
venv import this module.
"""
from __future__ import annotations

import argparse
import ast
import glob
import os
import sys
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

DEFAULT_SRC = "/tmp/rsrc"
# RETURNN's TF test modules: network-building tests (the others hold no net dicts).
TEST_GLOB = "tests/test_TF*.py"
# What a test without (literal) extern data gets.
DEFAULT_EXTERN_DATA = {"data": {"dim": 10}, "classes": {"dim": 10, "sparse": True}}
EXTERN_KEYS = ("extern_data", "num_inputs", "num_outputs")
# Config keys that do not describe the network (data sets, files, training): not kept.
IGNORED_CONFIG_KEYS = frozenset({
    "network", "extern_data", "num_inputs", "num_outputs", "train", "dev", "eval", "eval_datasets",
    "model", "log", "tf_log_dir", "load", "preload_from_files", "import_model_train_epoch1",
    "learning_rate_file", "output_file", "search_output_file", "task",
})
SUB_NET_KEYS = ("unit", "subnetwork")


# Keys that make a dict of {"class": ...} dicts a config fragment, not a network.
CONFIG_FRAGMENT_KEYS = frozenset({"optimizer", "train", "dev", "eval", "eval_datasets", "network", "extern_data",
                                  "learning_rate_control"})


def is_net_dict(value: Any) -> bool:
    """A dict of layer dicts (see the module docstring); not an optimizer or datasets dict."""
    if not isinstance(value, dict) or not value or not all(isinstance(k, str) for k in value):
        return False
    if CONFIG_FRAGMENT_KEYS & set(value) or any(
            isinstance(v, dict) and str(v.get("class", "")).endswith("Dataset") for v in value.values()):
        return False
    layers = sum(1 for v in value.values() if isinstance(v, dict) and "class" in v)
    return layers >= 1 and 2 * layers >= len(value)


def literal(node: ast.AST) -> Tuple[bool, Any]:
    """(ok, value) of :func:`ast.literal_eval` on ``node``."""
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def canonical(value: Any) -> str:
    """A repr that does not depend on dict order (for dedupe)."""
    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda kv: repr(kv[0]))
        return "{%s}" % ", ".join("%r: %s" % (k, canonical(v)) for k, v in items)
    if isinstance(value, (list, tuple)):
        inner = ", ".join(canonical(v) for v in value)
        return ("[%s]" if isinstance(value, list) else "(%s,)") % inner
    if isinstance(value, (set, frozenset)):
        return "set(%s)" % sorted(repr(v) for v in value)
    return repr(value)


def _dict_items(node: ast.Dict) -> Iterator[Tuple[Optional[str], ast.AST]]:
    for key, value in zip(node.keys, node.values):
        yield (key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None), value


class _Scope:
    """One module-level function (or the module itself): its literal assignments and calls."""

    def __init__(self, name: str, node: ast.AST, module_scope: Optional["_Scope"]):
        self.name = name
        self.node = node
        self.module_scope = module_scope
        self.assigns: List[Tuple[int, str, ast.AST]] = []  # (line, name, value node)
        self.sub_net_names: set = set()  # names used as 'unit'/'subnetwork' values
        self.extern_candidates: List[Tuple[int, str, ast.AST, Optional[ast.Dict]]] = []  # line, key, value, holder
        self.called: List[str] = []
        self.calls: List[Tuple[str, List[ast.AST], Dict[str, ast.AST]]] = []  # calls of plain names
        self.flags: set = set()  # 'search_flag', 'train_flag=False', ...
        self.config_dicts: List[Tuple[int, ast.Dict]] = []  # Config({...}), config.update({...})
        nodes = [node] if module_scope is not None else [n for n in node.body
                                                           if not isinstance(n, (ast.FunctionDef, ast.ClassDef))]
        for top in nodes:
            for sub in ast.walk(top):
                self._note(sub)

    def _note(self, sub: ast.AST) -> None:
        if isinstance(sub, ast.Assign):
            for target in sub.targets:
                if isinstance(target, ast.Name):
                    self.assigns.append((sub.lineno, target.id, sub.value))
                elif isinstance(target, ast.Tuple) and isinstance(sub.value, ast.Tuple) \
                        and len(target.elts) == len(sub.value.elts):
                    for t, v in zip(target.elts, sub.value.elts):
                        if isinstance(t, ast.Name):
                            self.assigns.append((sub.lineno, t.id, v))
        elif isinstance(sub, ast.Dict):
            for key, value in _dict_items(sub):
                if key in SUB_NET_KEYS and isinstance(value, ast.Name):
                    self.sub_net_names.add(value.id)
                if key in EXTERN_KEYS:
                    self.extern_candidates.append((value.lineno, key, value, sub))
        elif isinstance(sub, ast.Call):
            for kw in sub.keywords:
                if kw.arg in SUB_NET_KEYS and isinstance(kw.value, ast.Name):
                    self.sub_net_names.add(kw.value.id)
                if kw.arg in EXTERN_KEYS:
                    self.extern_candidates.append((kw.value.lineno, kw.arg, kw.value, None))
                if kw.arg in ("search_flag", "train_flag", "eval_flag"):
                    ok, value = literal(kw.value)
                    self.flags.add("%s=%r" % (kw.arg, value if ok else "?"))
            if isinstance(sub.func, ast.Name):
                self.called.append(sub.func.id)
                self.calls.append((sub.func.id, list(sub.args), {kw.arg: kw.value for kw in sub.keywords if kw.arg}))
            if isinstance(sub.func, ast.Attribute) and sub.func.attr == "update" and len(sub.args) == 1 \
                    and isinstance(sub.args[0], ast.Name) and isinstance(sub.func.value, ast.Subscript):
                ok, key = literal(sub.func.value.slice)  # x["unit"].update(name)
                if ok and key in SUB_NET_KEYS:
                    self.sub_net_names.add(sub.args[0].id)
            if _call_name(sub) in ("Config", "update") and len(sub.args) == 1 and isinstance(sub.args[0], ast.Dict):
                self.config_dicts.append((sub.lineno, sub.args[0]))
            if isinstance(sub.func, ast.Attribute) and sub.func.attr == "init_from_dataset" and sub.args:
                self.extern_candidates.append((sub.lineno, "dataset", sub.args[0], None))
            if isinstance(sub.func, ast.Attribute) and sub.func.attr == "set" and len(sub.args) == 2:
                ok, key = literal(sub.args[0])  # config.set("extern_data", ...)
                if ok and key in EXTERN_KEYS:
                    self.extern_candidates.append((sub.lineno, key, sub.args[1], None))

    def resolve(self, node: ast.AST, line: int, depth: int = 0) -> Tuple[bool, Any]:
        """The value of ``node``: literals, names this scope (or the module) assigns a value before
        ``line``, small int arithmetic, dim tags (as :func:`dim_marker` dicts), ``ExternData(d)``
        and the data of two generating datasets (``X.num_outputs[...]``)."""
        try:
            return True, _Evaluator(self, line, depth).eval(node)
        except _Unresolved:
            return False, None

    def lookup(self, name: str, line: int, depth: int) -> Any:
        before = [(ln, v) for ln, n, v in self.assigns if n == name and ln <= line]
        if before:
            ln, node = before[-1]
            if isinstance(node, ast.Call) and _call_name(node) in DIM_CONSTRUCTORS:
                return _dim_from_call(self, node, name, ln, depth)
            ok, value = self.resolve(node, ln, depth + 1) if depth < 8 else (False, None)
            if ok:
                return value
            raise _Unresolved(name)
        if self.module_scope is not None:
            return self.module_scope.lookup(name, 10 ** 9, depth)
        if name == "batch_dim":
            return dim_marker("batch_dim", "batch", None, "batch")
        raise _Unresolved(name)


class _Unresolved(Exception):
    pass


# Dim tags of extern data are stored as marker dicts; run_returnn.py and the benchmark turn each
# marker name into one Dim object per net (so axes the test shares stay shared).
DIM_CONSTRUCTORS = ("SpatialDim", "FeatureDim", "Dim")
DIM_MARKER_KEY = "$dim"


def dim_marker(name: str, kind: Optional[str], dimension: Optional[int], description: str) -> Dict[str, Any]:
    """A dim tag as a literal: ``{"$dim": name, "kind": ..., "dimension": ..., "description": ...}``."""
    return {DIM_MARKER_KEY: name, "kind": kind, "dimension": dimension, "description": description}


def is_dim_marker(value: Any) -> bool:
    return isinstance(value, dict) and DIM_MARKER_KEY in value


def _call_name(node: ast.Call) -> Optional[str]:
    func = node.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _dim_from_call(scope: "_Scope", node: ast.Call, name: str, line: int, depth: int) -> Dict[str, Any]:
    ev = _Evaluator(scope, line, depth + 1)
    cls = _call_name(node)
    kwargs = {kw.arg: kw.value for kw in node.keywords if kw.arg}
    args = list(node.args)
    if cls in ("SpatialDim", "FeatureDim"):
        desc = ev.eval(args[0]) if args else ev.eval(kwargs["description"]) if "description" in kwargs else name
        dim_node = args[1] if len(args) > 1 else kwargs.get("dimension")
        dimension = ev.eval(dim_node) if dim_node is not None else None
        return dim_marker(name, "spatial" if cls == "SpatialDim" else "feature", dimension, desc)
    # Dim(dimension, name=...) or Dim(kind=Dim.Types.X, description=..., dimension=...)
    dim_node = args[0] if args else kwargs.get("dimension")
    dimension = ev.eval(dim_node) if dim_node is not None else None
    desc_node = kwargs.get("description") or kwargs.get("name") or (args[1] if len(args) > 1 else None)
    desc = ev.eval(desc_node) if desc_node is not None else name
    kind = None
    if "kind" in kwargs:
        kind_node = kwargs["kind"]
        if not isinstance(kind_node, ast.Attribute):
            raise _Unresolved(name)
        kind = {"Batch": "batch", "Spatial": "spatial", "Time": "spatial", "Feature": "feature"}.get(kind_node.attr)
        if kind is None:
            raise _Unresolved(name)
    return dim_marker(name, kind, dimension, desc)


class _Dataset:
    """A generating dataset of RETURNN's tests, as far as its data description goes."""

    def __init__(self, num_outputs: Dict[str, List[int]]):
        self.num_outputs = num_outputs

    def extern_data(self) -> Dict[str, Dict[str, Any]]:
        return {k: ({"dim": d, "sparse": True} if ndim == 1 else {"dim": d})
                for k, (d, ndim) in self.num_outputs.items()}


class _Evaluator:
    def __init__(self, scope: "_Scope", line: int, depth: int):
        self.scope, self.line, self.depth = scope, line, depth

    def eval(self, node: ast.AST) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                raise _Unresolved("**")
            return {self.eval(k): self.eval(v) for k, v in zip(node.keys, node.values)}
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            items = [self.eval(e) for e in node.elts]
            return items if isinstance(node, ast.List) else tuple(items) if isinstance(node, ast.Tuple) else set(items)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -self.eval(node.operand)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv)):
            a, b = self.eval(node.left), self.eval(node.right)
            if not (type(a) is int and type(b) is int):
                raise _Unresolved("arithmetic")
            return {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b}.get(type(node.op), a // b if b else 0)
        if isinstance(node, ast.Name):
            return self.scope.lookup(node.id, self.line, self.depth)
        if isinstance(node, ast.Call):
            name = _call_name(node)
            if name == "ExternData" and len(node.args) == 1 and not node.keywords:
                return self.eval(node.args[0])
            if name == "dict" and not node.args:
                return {kw.arg: self.eval(kw.value) for kw in node.keywords if kw.arg}
            if name == "Task12AXDataset":
                return _Dataset({"data": [9, 2], "classes": [2, 1]})
            if name in ("DummyDataset", "DummyDatasetMultipleSequenceLength"):
                kwargs = {kw.arg: kw.value for kw in node.keywords}
                dims = [kwargs.get("input_dim", node.args[0] if node.args else None),
                        kwargs.get("output_dim", node.args[1] if len(node.args) > 1 else None)]
                if None in dims:
                    raise _Unresolved(name)
                return _Dataset({"data": [self.eval(dims[0]), 2], "classes": [self.eval(dims[1]), 1]})
            raise _Unresolved(name or "call")
        if isinstance(node, ast.Attribute) and node.attr == "num_outputs":
            ds = self.eval(node.value)
            if isinstance(ds, _Dataset):
                return ds.num_outputs
            raise _Unresolved("num_outputs")
        if isinstance(node, ast.Subscript):
            value, index = self.eval(node.value), self.eval(node.slice)
            try:
                return value[index]
            except (KeyError, IndexError, TypeError):
                raise _Unresolved("subscript") from None
        raise _Unresolved(type(node).__name__)


def _walk_nets(node: ast.AST, parents: Tuple[Tuple[ast.AST, Optional[str]], ...], out: list) -> None:
    """Outermost net dicts below ``node``: (dict node, parents [(ancestor, key in it)], value)."""
    if isinstance(node, ast.Dict):
        ok, value = literal(node)
        if ok and is_net_dict(value):
            out.append((node, parents, value))
            return
        for key, child in _dict_items(node):
            _walk_nets(child, parents + ((node, key),), out)
        for key in node.keys:
            if key is not None:
                _walk_nets(key, parents + ((node, None),), out)
        return
    for child in ast.iter_child_nodes(node):
        _walk_nets(child, parents + ((node, None),), out)


def _assigned_name(node: ast.AST, parents) -> Optional[str]:
    if parents and isinstance(parents[-1][0], ast.Assign):
        targets = parents[-1][0].targets
        if len(targets) == 1 and isinstance(targets[0], ast.Name):
            return targets[0].id
    return None


def _usage(parents) -> str:
    """How the test passes the dict: construct_from_dict / network= / config['network'] / assigned."""
    if not parents:
        return "module"
    holder, key = parents[-1]
    if isinstance(holder, ast.Dict) and key:
        return "dict key %r" % key
    if isinstance(holder, ast.keyword):
        return "keyword %s=" % holder.arg
    if isinstance(holder, ast.Call):
        func = holder.func
        fname = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "?")
        return "argument of %s()" % fname
    if isinstance(holder, ast.Assign):
        return "assigned to %s" % ", ".join(ast.unparse(t) for t in holder.targets)
    return type(holder).__name__


def _extern_for(scope: _Scope, scopes: Dict[str, _Scope], line: int, parents
                ) -> Tuple[Dict[str, Any], Dict[str, Any], str, List[str]]:
    """(extern spec {key: value}, config keys, where from, notes)."""
    notes: List[str] = []
    holder = None
    for anc, key in reversed(parents):  # the config dict holding the net under "network"
        if isinstance(anc, ast.Dict) and key == "network":
            holder = anc
            break
    if holder is not None and any(k in EXTERN_KEYS for k, _ in _dict_items(holder)):
        spec, bad = _spec_of_holder(scope, holder)
        return spec, _config_of(scope, holder), "config dict holding the net", notes + bad
    found: List[Tuple[Dict[str, Any], Dict[str, Any], str, List[str]]] = []
    for sc, where in [(scope, "same function")] + [
            (scopes[c], "called function %s()" % c) for c in dict.fromkeys(scope.called)
            if c in scopes and scopes[c] is not scope and scopes[c].extern_candidates]:
        cands = sorted(sc.extern_candidates, key=lambda c: c[0])
        lines = list(dict.fromkeys(c[0] for c in cands))
        if sc is scope:  # nearest before the net first, then nearest after it
            lines = [ln for ln in reversed(lines) if ln <= line] + [ln for ln in lines if ln > line]
        for pick_line in lines:
            chosen = [c for c in cands if c[0] == pick_line]
            holder_dict = chosen[0][3]  # extern keys given together in one dict
            if holder_dict is not None:
                spec, bad = _spec_of_holder(sc, holder_dict)
                config = _config_of(sc, holder_dict)
            else:
                spec, bad, config = {}, [], _nearest_config(sc, pick_line)
                for ln, key, value, _ in chosen:
                    ok, v = sc.resolve(value, ln)
                    if ok and key == "dataset":
                        if isinstance(v, _Dataset):
                            spec["extern_data"] = v.extern_data()
                        else:
                            bad.append("dataset not known: %s" % _short(value))
                    elif ok:
                        spec[key] = v
                    else:
                        bad.append("%s not literal: %s" % (key, _short(value)))
            if spec and not bad and _valid_spec(spec):
                if sc is scope and holder_dict is None:
                    config = _nearest_config(sc, line) or config
                return spec, config, where, []
            found.append((spec, config, where, bad))
            notes += [n for n in bad if n not in notes]
    partial = [f for f in found if f[0] and _valid_spec(f[0])]
    if partial:
        spec, config, where, _ = partial[0]
        return spec, config, where + " (partly)", notes
    return {}, _nearest_config(scope, line), "default", notes


def _nearest_config(scope: "_Scope", line: int) -> Dict[str, Any]:
    """Literal keys of the nearest ``Config({...})`` / ``config.update({...})`` dict before ``line``."""
    before = [(ln, d) for ln, d in scope.config_dicts if ln <= line]
    return _config_of(scope, before[-1][1]) if before else {}


def _spec_of_holder(scope: _Scope, holder: ast.Dict) -> Tuple[Dict[str, Any], List[str]]:
    spec, bad = {}, []
    for key, value in _dict_items(holder):
        if key in EXTERN_KEYS:
            ok, v = scope.resolve(value, value.lineno)
            if ok:
                spec[key] = v
            else:
                bad.append("%s not literal: %s" % (key, _short(value)))
    return spec, bad


def _config_of(scope: _Scope, holder: ast.Dict) -> Dict[str, Any]:
    config = {}
    for key, value in _dict_items(holder):
        if key is None or key in IGNORED_CONFIG_KEYS:
            continue
        ok, v = scope.resolve(value, value.lineno)
        if ok:
            config[key] = v
    return config


def _short(node: ast.AST, limit: int = 80) -> str:
    text = " ".join(ast.unparse(node).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _valid_spec(spec: Dict[str, Any]) -> bool:
    try:
        if ast.literal_eval(repr(spec)) != spec:
            return False
    except (ValueError, SyntaxError):
        return False
    ext = spec.get("extern_data")
    if ext is not None:
        return isinstance(ext, dict) and bool(ext) and all(isinstance(v, (dict, list, tuple)) for v in ext.values())
    return "num_inputs" in spec or "num_outputs" in spec


def extract_file(path: str, rel: str) -> List[Dict[str, Any]]:
    """The net dicts of one test module, in file order (not deduplicated)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=path)
    module = _Scope("<module>", tree, None)
    scopes: Dict[str, _Scope] = {}
    units: List[Tuple[str, ast.AST, ast.AST]] = []  # (qualified name, def node, outer scope node)
    for top in tree.body:
        if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef)):
            units.append((top.name, top, top))
        elif isinstance(top, ast.ClassDef):
            for sub in top.body:
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    units.append(("%s.%s" % (top.name, sub.name), sub, sub))
    for name, node, _ in units:
        scopes[name] = _Scope(name, node, module)
    scopes.setdefault(module.name, module)
    # per function: its parameters (position and name) that it uses as a rec unit/subnetwork
    sub_net_params: Dict[str, set] = {}
    for name, node, _ in units:
        args = [a.arg for a in node.args.args]
        used = scopes[name].sub_net_names
        sub_net_params[name] = {i for i, a in enumerate(args) if a in used} | {a for a in args if a in used}
    found = []
    for name, node, _ in units + [("<module>", None, None)]:
        scope = scopes[name]
        hits: list = []
        if node is None:
            for top in tree.body:
                if not isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    _walk_nets(top, ((tree, None),), hits)
        else:
            _walk_nets(node, (), hits)
        for dnode, parents, value in hits:
            skip = None
            if parents and isinstance(parents[-1][0], ast.Dict) and parents[-1][1] in SUB_NET_KEYS:
                skip = "the %r of a non-literal layer dict" % parents[-1][1]
            target = _assigned_name(dnode, parents)
            if target and target in scope.sub_net_names:
                skip = "assigned to %s, used as a rec unit/subnetwork" % target
            for fname, args, kwargs in scope.calls:  # passed to a function that makes it a rec unit
                params = sub_net_params.get(fname, ())
                def is_it(a: ast.AST) -> bool:
                    return a is dnode or bool(target and isinstance(a, ast.Name) and a.id == target)
                passed = [i for i, a in enumerate(args) if is_it(a)] + [k for k, a in kwargs.items() if is_it(a)]
                if any(p in params for p in passed):
                    skip = "passed to %s(), which puts it in a rec unit/subnetwork" % fname
            spec, config, origin, notes = _extern_for(scope, scopes, dnode.lineno, parents)
            if origin != "default" and not _valid_spec(spec):
                notes.append("extern data found is unusable: %r" % (spec,))
                spec, origin = {}, "default"
            if origin == "default":
                spec = {"extern_data": DEFAULT_EXTERN_DATA}
            found.append({
                "file": rel, "function": name, "line": dnode.lineno, "usage": _usage(parents),
                "net": value, "extern": spec, "extern_origin": origin, "extern_notes": notes,
                "config": config, "flags": sorted(scope.flags), "skip": skip,
            })
    return found


def extract(src: str = DEFAULT_SRC) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    """(nets, parts): deduplicated net dicts with ids (the parts of other nets among them, with
    ``alone``), and the dicts that are parts of other nets."""
    files = sorted(glob.glob(os.path.join(src, TEST_GLOB)))
    if not files:
        raise SystemExit("no %s under %s (RETURNN's source with its tests)" % (TEST_GLOB, src))
    raw: List[Dict[str, Any]] = []
    for path in files:
        raw += extract_file(path, os.path.relpath(path, src))
    skipped = [r for r in raw if r["skip"]]
    nets: List[Dict[str, Any]] = []
    seen: Dict[str, Dict[str, Any]] = {}
    for r in raw:
        key = canonical([r["net"], r["extern"], r["config"], r["flags"]])  # the same build
        if key in seen:
            seen[key]["also_in"].append("%s:%d %s" % (r["file"], r["line"], r["function"]))
            continue
        r = dict(r, also_in=[])
        skip = r.pop("skip")
        if skip:
            r["alone"] = skip
        seen[key] = r
        nets.append(r)
    _assign_ids(nets)
    return nets, skipped


def _assign_ids(nets: List[Dict[str, Any]]) -> None:
    """Ids by test function name: ``func``, ``func#2`` for a second net of it; the file's short name
    (``TFEngine.func``) when two files have a function of that name."""
    files_of: Dict[str, set] = {}
    for n in nets:
        files_of.setdefault(n["function"], set()).add(n["file"])
    count: Dict[str, int] = {}
    per_func: Dict[Tuple[str, str], int] = {}
    for n in nets:
        per_func[(n["file"], n["function"])] = per_func.get((n["file"], n["function"]), 0) + 1
    for n in nets:
        base = n["function"]
        if len(files_of[base]) > 1:
            base = "%s.%s" % (os.path.basename(n["file"])[len("test_"):-len(".py")], base)
        count[base] = count.get(base, 0) + 1
        total = per_func[(n["file"], n["function"])]
        n["id"] = base if total == 1 else "%s#%d" % (base, count[base])


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", default=DEFAULT_SRC, help="RETURNN source dir with tests/ (default %(default)s)")
    parser.add_argument("--list", action="store_true", help="one line per net")
    parser.add_argument("--skipped", action="store_true", help="also list the dicts that are parts of other nets")
    args = parser.parse_args(argv)
    nets, skipped = extract(args.src)
    if args.list:
        for n in nets:
            print("%-60s %s:%d  extern=%s %s" % (n["id"], n["file"], n["line"], n["extern_origin"],
                                               "; ".join(n["extern_notes"])))
    if args.skipped:
        for s in skipped:
            print("part %s:%d %s: %s (built alone too)" % (s["file"], s["line"], s["function"], s["skip"]))
    origins: Dict[str, int] = {}
    for n in nets:
        o = n["extern_origin"].split(" ")[0]
        origins[o] = origins.get(o, 0) + 1
    print("%d net dicts (%d duplicates folded, %d of them parts of other nets); extern data from: %s"
          % (len(nets), sum(len(n["also_in"]) for n in nets), len(skipped),
             ", ".join("%s %d" % kv for kv in sorted(origins.items()))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
