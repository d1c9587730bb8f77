"""Source scan behind tests/test_option_audit.py: which option names a set of modules *reads*.

What counts as a read of option ``"x"`` (found in the modules' syntax trees, never in strings or
comments):

- the key of a reader: ``<any>.opt(K)`` / ``opt(K)``; ``<d>.get(K, ...)``, ``<d>.pop(K, ...)``,
  ``<d>.setdefault(K, ...)``, ``<d>[K]``, ``K in <d>`` / ``K not in <d>`` where ``<d>``'s last name
  is ``opts``, ``*_opts``, ``options``, ``*_options`` or ``o`` (a layer's or a loss's option dict);
- where the key ``K`` is the string literal ``"x"``; or a loop variable over a literal tuple/list
  of strings or a literal dict's keys (also ``for key, default in (("x", 1), ...)``,
  ``for key, env in TABLE.items()`` and comprehensions), or a module-level name bound to such a
  literal; or a parameter of the enclosing function: then that function
  *reads its parameter*, and every call of it (by name, anywhere in the modules searched for
  definitions) passing ``"x"`` for that parameter (by position or keyword) is a read of ``"x"``,
  resolved to a fixed point (``self.weight(..., init_option="forward_weights_init")`` counts because
  ``Layer.weight`` reads ``self.opts[init_option]``); or ``self.<attr>`` where a class of the module
  sets ``<attr> = "x"`` (``self.opt(self.value_key)`` with ``value_key = "postfix"``).

Option declarations (``Option("x", ...)``), docstrings, error messages and any other literal are
no reads.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Set, Tuple

OPTS_NAME = re.compile(r"^(o|opts|options|\w+_opts|\w+_options)$")
DICT_READERS = ("get", "pop", "setdefault")


def _last_name(node: ast.AST) -> Optional[str]:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _is_opts(node: ast.AST) -> bool:
    name = _last_name(node)
    return name is not None and bool(OPTS_NAME.match(name))


def _strings(node: ast.AST) -> Optional[List[str]]:
    """The strings of a literal string or a literal tuple/list/set of strings; else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        out = []
        for elt in node.elts:
            if not (isinstance(elt, ast.Constant) and isinstance(elt.value, str)):
                return None
            out.append(elt.value)
        return out
    return None


class _Module:
    """One parsed module: its tree with parent links, module-level literal constants, functions."""

    def __init__(self, path: Path):
        self.path = path
        self.tree = ast.parse(path.read_text(), str(path))
        self.parent: Dict[ast.AST, ast.AST] = {}
        for node in ast.walk(self.tree):
            for child in ast.iter_child_nodes(node):
                self.parent[child] = node
        self.constants: Dict[str, ast.AST] = {}
        for stmt in self.tree.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                self.constants[stmt.targets[0].id] = stmt.value
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
                self.constants[stmt.target.id] = stmt.value
        # class attribute name -> the strings classes of this module set it to (``value_key = "postfix"``)
        self.class_strings: Dict[str, List[str]] = {}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ClassDef):
                for stmt in node.body:
                    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                            and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
                        self.class_strings.setdefault(stmt.targets[0].id, []).append(stmt.value.value)

    def enclosing_function(self, node: ast.AST) -> Optional[ast.AST]:
        while node in self.parent:
            node = self.parent[node]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                return node
        return None

    def loop_values(self, node: ast.Name) -> Optional[List[str]]:
        """Strings a loop variable takes, when it loops over a literal (or a module constant)."""
        cur: ast.AST = node
        while cur in self.parent:
            cur = self.parent[cur]
            gens: List[Tuple[ast.AST, ast.AST]] = []
            if isinstance(cur, (ast.For, ast.AsyncFor)):
                gens = [(cur.target, cur.iter)]
            elif isinstance(cur, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
                gens = [(g.target, g.iter) for g in cur.generators]
            for target, it in gens:
                values = self._target_values(target, it, node.id)
                if values is not None:
                    return values
        return None

    def _target_values(self, target: ast.AST, it: ast.AST, name: str) -> Optional[List[str]]:
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr in ("items", "keys") \
                and not it.args:  # over a literal dict's keys (``for key, env in TABLE.items()``)
            table = it.func.value
            table = self.constants.get(table.id, table) if isinstance(table, ast.Name) else table
            if not isinstance(table, ast.Dict):
                return None
            keys = ast.Tuple(elts=list(table.keys), ctx=ast.Load())
            if it.func.attr == "items" and isinstance(target, ast.Tuple) and target.elts:
                target = target.elts[0]
            return _strings(keys) if isinstance(target, ast.Name) and target.id == name else None
        if isinstance(it, ast.Name) and it.id in self.constants:
            it = self.constants[it.id]
        if isinstance(it, ast.Dict):
            it = ast.Tuple(elts=list(it.keys), ctx=ast.Load())
        if isinstance(target, ast.Name) and target.id == name:
            return _strings(it)
        if isinstance(target, ast.Tuple) and isinstance(it, (ast.Tuple, ast.List)):
            for pos, elt in enumerate(target.elts):
                if isinstance(elt, ast.Name) and elt.id == name:
                    out = []
                    for row in it.elts:
                        if not isinstance(row, (ast.Tuple, ast.List)) or len(row.elts) <= pos:
                            return None
                        value = _strings(row.elts[pos])
                        if value is None or len(value) != 1:
                            return None
                        out += value
                    return out
        return None


def _reader_keys(node: ast.AST) -> List[ast.AST]:
    """The key expressions this node reads an option with (see the module doc)."""
    if isinstance(node, ast.Call) and node.args:
        name = _last_name(node.func)
        if name == "opt":
            return [node.args[0]]
        if name in DICT_READERS and isinstance(node.func, ast.Attribute) and _is_opts(node.func.value):
            return [node.args[0]]
    if isinstance(node, ast.Subscript) and _is_opts(node.value):
        return [node.slice]
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)) \
            and _is_opts(node.comparators[0]):
        return [node.left]
    return []


def _params(fn: ast.AST) -> List[str]:
    args = fn.args
    return [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]


class Scan:
    """Reads of option names in ``modules`` (sites), with reading functions defined in ``definitions``
    (a superset: helpers such as ``Layer.weight`` or ``spatial.SpatialPlan``)."""

    def __init__(self, definitions: Iterable[Path]):
        self.modules = {p.resolve(): _Module(p) for p in definitions}
        # function name -> [(function node, module, is_method)]
        self.functions: Dict[str, List[Tuple[ast.AST, _Module, bool]]] = {}
        for mod in self.modules.values():
            for node in ast.walk(mod.tree):
                if isinstance(node, ast.ClassDef):
                    for item in node.body:
                        if isinstance(item, ast.FunctionDef):
                            key = node.name if item.name == "__init__" else item.name
                            self.functions.setdefault(key, []).append((item, mod, True))
                elif isinstance(node, ast.FunctionDef) and not isinstance(mod.parent.get(node), ast.ClassDef):
                    self.functions.setdefault(node.name, []).append((node, mod, False))
        self.reading_params: Set[Tuple[int, str]] = set()  # (id of function node, parameter)
        self._reads: Dict[Path, Set[str]] = {p: set() for p in self.modules}
        self._solve()

    def _key_strings(self, mod: _Module, key: ast.AST, new_params: Set[Tuple[int, str]]) -> List[str]:
        values = _strings(key)
        if values is not None:
            return values
        if isinstance(key, ast.Attribute) and isinstance(key.value, ast.Name) and key.value.id in ("self", "cls"):
            return mod.class_strings.get(key.attr, [])
        if isinstance(key, ast.Name):
            values = mod.loop_values(key)
            if values is not None:
                return values
            if key.id in mod.constants:
                return _strings(mod.constants[key.id]) or []
            fn = mod.enclosing_function(key)
            if fn is not None and key.id in _params(fn):
                new_params.add((id(fn), key.id))
        return []

    def _call_params(self, call: ast.Call) -> List[Tuple[ast.AST, int, str]]:
        """(argument, id of a callee, its parameter) for each argument of a call to a known function."""
        out = []
        for fn, _mod, is_method in self.functions.get(_last_name(call.func) or "", ()):
            params = _params(fn)
            positional = params[1:] if is_method and params and params[0] in ("self", "cls") else params
            for i, arg in enumerate(call.args):
                if i < len(positional):
                    out.append((arg, id(fn), positional[i]))
            for kw in call.keywords:
                if kw.arg in params:
                    out.append((kw.value, id(fn), kw.arg))
        return out

    def _solve(self) -> None:
        while True:
            new_params: Set[Tuple[int, str]] = set()
            for path, mod in self.modules.items():
                for node in ast.walk(mod.tree):
                    keys = _reader_keys(node)
                    if isinstance(node, ast.Call):
                        keys = keys + [arg for arg, fn, p in self._call_params(node) if (fn, p) in self.reading_params]
                    for key in keys:
                        self._reads[path].update(self._key_strings(mod, key, new_params))
            if new_params <= self.reading_params:
                return
            self.reading_params |= new_params

    def reads(self, paths: Iterable[Path]) -> Set[str]:
        """Option names read in these modules (each must be among the definitions)."""
        out: Set[str] = set()
        for p in paths:
            out |= self._reads[Path(p).resolve()]
        return out


def imported_modules(path: Path, root: Path, package: str = "returnn") -> Set[Path]:
    """Files of the ``package`` modules ``path`` imports (anywhere in it, also inside functions)."""
    tree = ast.parse(Path(path).read_text(), str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == package:
            names.add(node.module)
            names.update("%s.%s" % (node.module, a.name) for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names if a.name.split(".")[0] == package)
    out = set()
    for name in names:
        base = root.joinpath(*name.split("."))
        for cand in (base.with_suffix(".py"), base / "__init__.py"):
            if cand.is_file():
                out.add(cand.resolve())
    return out
