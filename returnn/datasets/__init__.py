"""Datasets: the API (:mod:`.base`), generating datasets, HDF, batching; ``init_dataset`` builds
one from a config entry such as ``{"class": "HDFDataset", "files": [...]}``."""
from __future__ import annotations

import ast
import importlib
import re
from typing import Any, Dict, Optional, Union

from returnn.datasets.base import DATASET_CLASSES, DataInfo, Dataset, register_dataset
from returnn.errors import DataError, known_list

# Modules that register dataset classes when imported.
_DATASET_MODULES = ("returnn.datasets.generating", "returnn.datasets.tasks", "returnn.datasets.hdf",
                    "returnn.datasets.meta", "returnn.datasets.lm", "returnn.datasets.concat",
                    "returnn.datasets.sprint", "returnn.datasets.dummy", "returnn.datasets.wrappers",
                    "returnn.datasets.map", "returnn.datasets.numpy_dump", "returnn.datasets.not_here")


def _load_registry() -> Dict[str, type]:
    for mod in _DATASET_MODULES:
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name != mod:
                raise
    return DATASET_CLASSES


_CLASS_ARGS = re.compile(r"^\s*(?:\w+::)?(\w+)\s*\((.*)\)\s*$", re.S)  # [Module::]Class(key=value, ...)
_CLASS_COLON = re.compile(r"^\s*(\w+):(.*)$", re.S)  # Class:key=value,...


def _literal_kwargs(text: str, name: Optional[str]) -> Dict[str, Any]:
    """``key=literal, ...`` as a dict (parsed, never evaluated)."""
    try:
        call = ast.parse("dict(%s)" % text, mode="eval").body
        if call.args:
            raise ValueError("positional arguments")
        return {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords}
    except (SyntaxError, ValueError) as exc:
        raise DataError("dataset %s: cannot read the options %r (%s)" % (name or "?", text, exc)) from None


def dataset_dict_from_string(text: str, name: Optional[str] = None) -> Dict[str, Any]:
    """RETURNN's string forms of a dataset: a Python-literal dict, ``config:NAME`` (another config
    entry), ``Class:key=value,...``, ``Module::Class(key=value, ...)``, or HDF file(s) separated
    by commas."""
    text = text.strip()
    if text.startswith("{"):
        try:
            value = ast.literal_eval(text)
        except (SyntaxError, ValueError) as exc:
            raise DataError("dataset %s: cannot read %r (%s)" % (name or "?", text, exc)) from None
        if not isinstance(value, dict):
            raise DataError("dataset %s: expected a dict, got %r" % (name or "?", text))
        return value
    if text.startswith("config:"):
        from returnn.config import get_global_config
        key = text[len("config:"):].strip()
        value = get_global_config().typed_dict.get(key)
        if not isinstance(value, (dict, str)):
            raise DataError("dataset %s: %r names no dataset dict in the config" % (name or "?", text))
        return dataset_dict_from_string(value, name) if isinstance(value, str) else dict(value)
    m = _CLASS_ARGS.match(text)
    if m:
        return dict(_literal_kwargs(m.group(2), name), **{"class": m.group(1)})
    m = _CLASS_COLON.match(text)
    if m:
        return dict(_literal_kwargs(m.group(2), name), **{"class": m.group(1)})
    return {"class": "HDFDataset", "files": [f for f in text.split(",") if f]}


def eval_dataset_spec(spec: Any, name: Optional[str] = None) -> Any:
    """A dev/eval dataset dict as RETURNN reads it: ordered by length (``sorted``: least padding)
    unless the dict names a ``seq_ordering``. A ConcatDataset without one is refused: RETURNN gives it
    ``sorted`` too, which its ConcatDataset does not implement (NotImplementedError)."""
    if isinstance(spec, dict) and "seq_ordering" not in spec:
        if spec.get("class") == "ConcatDataset":
            raise DataError("dataset %s (ConcatDataset): as a dev/eval set it needs 'seq_ordering': 'default' in its "
                            "dict (RETURNN's eval defaults order it 'sorted', which its ConcatDataset does not "
                            "implement)" % (name or "?"))
        return dict(spec, seq_ordering="sorted")
    return spec


def cache_size_for(value: Any, name: Optional[str]) -> Any:
    """The config's ``cache_size`` for the dataset ``name``: RETURNN's list form (``"1G,1G,0"`` or a
    list) gives train, dev and eval their own (two values: eval 0; one: every dataset); other
    datasets take dev's, ``search_data`` eval's. RETURNN divides a single value among the datasets:
    that only changes memory use, not the data, so each takes it whole here."""
    if isinstance(value, str) and "," in value:
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, (list, tuple)):
        return value
    sizes = list(value) + (["0"] if len(value) == 2 else [])
    if len(sizes) == 1:
        return sizes[0]
    if len(sizes) != 3:
        raise DataError("config key 'cache_size': one, two or three sizes (train, dev, eval), got %r" % (value,))
    base = "search_data" if name == "search_data" else (name or "").split("_")[0]
    return sizes[{"train": 0, "eval": 2, "search_data": 2}.get(base, 1)]


def init_dataset(spec: Union[Dict[str, Any], str, Dataset], defaults: Optional[Dict[str, Any]] = None,
                 name: Optional[str] = None) -> Dataset:
    """Builds a dataset from a config entry.

    ``spec`` is a dict with ``"class"``, a string (see :func:`dataset_dict_from_string`), or a dataset.
    ``defaults`` are global options (e.g. ``cache_size``) a dataset class takes when its dict does
    not set them (see ``Dataset.global_options``).
    """
    if isinstance(spec, Dataset):
        return spec
    if isinstance(spec, str):
        spec = dataset_dict_from_string(spec, name)
    if not isinstance(spec, dict):
        raise DataError("dataset %s: expected a dict with 'class', got %r" % (name or "?", spec))
    opts = dict(spec)
    class_name = opts.pop("class", None)
    if not class_name:
        raise DataError("dataset %s: missing 'class' (known: %s)" % (name or "?", known_list(_load_registry())))
    registry = _load_registry()
    if class_name not in registry:
        raise DataError("dataset %s: unknown dataset class %r (known: %s)"
                        % (name or "?", class_name, known_list(registry)))
    cls = registry[class_name]
    for key in getattr(cls, "global_options", ()):
        if key not in opts and defaults and defaults.get(key) is not None:
            opts[key] = cache_size_for(defaults[key], name) if key == "cache_size" else defaults[key]
    if name and "name" not in opts:
        opts["name"] = name
    try:
        return cls(**opts)
    except TypeError as exc:
        raise DataError("dataset %s (%s): bad options: %s" % (name or class_name, class_name, exc))


__all__ = ["DataInfo", "Dataset", "register_dataset", "init_dataset", "DATASET_CLASSES"]
