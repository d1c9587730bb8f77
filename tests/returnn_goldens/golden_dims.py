"""Dim objects in golden cases. The cases are JSON (they are stored in each golden's meta), so a
Dim is written as a marker dict ``{"__dim__": NAME, "dimension": N or None, "kind": KIND}``
(kind: "spatial" (default), "feature" or "unspecified"); every marker of one NAME in a case (its
extern_data and network) is the same Dim object, and ``{"__dim__": NAME}`` alone refers to a Dim
declared elsewhere in the case. NAME "batch" is the batch dim. ``{"__tuple__": [...]}`` is a tuple
(JSON has lists only; RETURNN compares an eval's ``out_type`` shape with a tuple); ``{"__dict__": [[KEY, VALUE], ...]}``
is a dict with keys that are not strings (JSON makes them strings: ``label_map``'s int keys, ``declare_same_sizes_as``;
a key may be a Dim marker: ``set_dim_tags`` by Dim).
Both sides resolve the markers
with their own Dim class: make_goldens.py with RETURNN's, tests/test_returnn_goldens.py with this
engine's (pure Python, no imports: loaded by path from both venvs).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional

DIM_KEY = "__dim__"
TUPLE_KEY = "__tuple__"
DICT_KEY = "__dict__"


def dim_marker(name: str, dimension: Optional[int] = None, kind: str = "spatial") -> Dict[str, Any]:
    """The marker of a Dim named ``name`` (see the module docstring)."""
    return {DIM_KEY: name, "dimension": dimension, "kind": kind}


def dim_ref(name: str) -> Dict[str, Any]:
    """A reference to the Dim ``name`` declared by a :func:`dim_marker` elsewhere in the case."""
    return {DIM_KEY: name}


def as_tuple(*items: Any) -> Dict[str, Any]:
    """A tuple, kept a tuple through the JSON of the golden's meta."""
    return {TUPLE_KEY: list(items)}


def keyed_dict(items: Dict[Any, Any]) -> Dict[str, Any]:
    """A dict whose keys are not all strings (ints, None), kept so through the JSON of the golden's meta."""
    return {DICT_KEY: [[k, v] for k, v in items.items()]}


def has_markers(obj: Any) -> bool:
    if isinstance(obj, dict):
        return DIM_KEY in obj or TUPLE_KEY in obj or DICT_KEY in obj or any(has_markers(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return any(has_markers(v) for v in obj)
    return False


def make_resolver(make_dim: Callable[[str, Optional[int], str], Any], batch_dim: Any,
                  *structures: Any) -> Callable[[Any], Any]:
    """A function replacing the markers in a (JSON) structure by Dims; ``make_dim(name, dimension,
    kind)`` creates one. One resolver per case (declared in ``structures``: the case's extern_data
    and network): the same NAME gives the same object in all calls."""
    declared: Dict[str, Dict[str, Any]] = {}
    dims: Dict[str, Any] = {}

    def collect(obj: Any) -> None:
        if isinstance(obj, dict):
            if DIM_KEY in obj and len(obj) > 1:
                spec = {"dimension": obj.get("dimension"), "kind": obj.get("kind", "spatial")}
                old = declared.setdefault(obj[DIM_KEY], spec)
                assert old == spec, "dim %r declared twice differently: %r, %r" % (obj[DIM_KEY], old, spec)
            for value in obj.values():
                collect(value)
        elif isinstance(obj, (list, tuple)):
            for value in obj:
                collect(value)

    def get(name: str) -> Any:
        if name == "batch":
            return batch_dim
        if name not in dims:
            assert name in declared, "dim %r is referenced but never declared" % name
            spec = declared[name]
            dims[name] = make_dim(name, spec["dimension"], spec["kind"])
        return dims[name]

    for structure in structures:
        collect(structure)

    def resolve(obj: Any) -> Any:
        return _replace(obj, get)

    return resolve


def _replace(obj: Any, get: Callable[[str], Any]) -> Any:
    if isinstance(obj, dict):
        if DIM_KEY in obj:
            return get(obj[DIM_KEY])
        if TUPLE_KEY in obj:
            return tuple(_replace(v, get) for v in obj[TUPLE_KEY])
        if DICT_KEY in obj:
            return {_replace(k, get) if isinstance(k, dict) else k: _replace(v, get) for k, v in obj[DICT_KEY]}
        return {k: _replace(v, get) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_replace(v, get) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_replace(v, get) for v in obj)
    return obj
