"""Datasets: the API (:mod:`.base`), generating datasets, HDF, batching; ``init_dataset`` builds
one from a config entry such as ``{"class": "HDFDataset", "files": [...]}``."""
from __future__ import annotations

import importlib
from typing import Any, Dict, Optional, Union

from returnn.datasets.base import DATASET_CLASSES, DataInfo, Dataset, register_dataset
from returnn.errors import DataError, known_list

# Modules that register dataset classes when imported.
_DATASET_MODULES = ("returnn.datasets.generating", "returnn.datasets.tasks", "returnn.datasets.hdf",
                    "returnn.datasets.meta", "returnn.datasets.lm", "returnn.datasets.concat",
                    "returnn.datasets.sprint")


def _load_registry() -> Dict[str, type]:
    for mod in _DATASET_MODULES:
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name != mod:
                raise
    return DATASET_CLASSES


def init_dataset(spec: Union[Dict[str, Any], str, Dataset], defaults: Optional[Dict[str, Any]] = None,
                 name: Optional[str] = None) -> Dataset:
    """Builds a dataset from a config entry.

    ``spec`` is a dict with ``"class"``, a string naming HDF file(s) (comma-separated), or a dataset.
    ``defaults`` are global options (e.g. ``cache_size``) a dataset class takes when its dict does
    not set them (see ``Dataset.global_options``).
    """
    if isinstance(spec, Dataset):
        return spec
    if isinstance(spec, str):
        text = spec.strip()
        if text.startswith("{"):
            import ast
            spec = ast.literal_eval(text)
        else:
            spec = {"class": "HDFDataset", "files": [f for f in text.split(",") if f]}
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
            opts[key] = defaults[key]
    if name and "name" not in opts:
        opts["name"] = name
    try:
        return cls(**opts)
    except TypeError as exc:
        raise DataError("dataset %s (%s): bad options: %s" % (name or class_name, class_name, exc))


__all__ = ["DataInfo", "Dataset", "register_dataset", "init_dataset", "DATASET_CLASSES"]
