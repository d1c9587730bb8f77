"""What the network's input data look like: ``extern_data``, or ``num_inputs``/``num_outputs``,
or, when the config says nothing, the train dataset. Mismatches with a dataset are one-line errors
naming both sides."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional

from returnn.config import Config
from returnn.datasets.base import Dataset
from returnn.errors import ConfigError, DataError


@dataclass(frozen=True)
class DataSpec:
    """One data key: feature dim (number of classes when sparse), sparse or dense."""

    dim: int
    sparse: bool


def _spec_from_num(key: str, value: Any) -> DataSpec:
    """RETURNN's ``num_outputs`` entry: ``dim`` or ``[dim, ndim]`` (ndim 1 = sparse)."""
    if isinstance(value, (list, tuple)):
        if len(value) < 2:
            raise ConfigError("config key 'num_outputs': entry %r must be [dim, ndim], got %r" % (key, value))
        return DataSpec(int(value[0]), int(value[1]) == 1)
    return DataSpec(int(value), key != "data")


def _spec_from_extern(key: str, value: Dict[str, Any]) -> DataSpec:
    if not isinstance(value, dict):
        raise ConfigError("config key 'extern_data': entry %r must be a dict, got %r" % (key, value))
    sparse = bool(value.get("sparse", False))
    dim = value.get("dim")
    if dim is None and value.get("shape"):
        dim = value["shape"][-1] if not sparse else None
    if dim is None:
        raise ConfigError("config key 'extern_data': entry %r needs 'dim'" % key)
    return DataSpec(int(dim), sparse)


def extern_data_from_config(config: Config, dataset: Optional[Dataset] = None) -> Dict[str, DataSpec]:
    """The data description: ``extern_data`` > ``num_inputs``/``num_outputs`` > the dataset."""
    extern = config.typed_value("extern_data")
    if extern:
        return {k: _spec_from_extern(k, v) for k, v in extern.items()}
    specs: Dict[str, DataSpec] = {}
    num_outputs = config.typed_value("num_outputs")
    if isinstance(num_outputs, dict):
        specs.update({k: _spec_from_num(k, v) for k, v in num_outputs.items()})
    elif num_outputs is not None:
        specs["classes"] = DataSpec(int(num_outputs), True)
    num_inputs = config.typed_value("num_inputs")
    if num_inputs is not None:
        sparse = specs["data"].sparse if "data" in specs else bool(dataset and "data" in dataset.data_infos()
                                                                    and dataset.is_data_sparse("data"))
        specs["data"] = DataSpec(int(num_inputs), sparse)
    if dataset is not None:
        for key, info in dataset.data_infos().items():
            specs.setdefault(key, DataSpec(info.dim, info.sparse))
    if not specs:
        raise ConfigError("no data description: set 'extern_data' or 'num_inputs'/'num_outputs', or a 'train' dataset")
    return specs


def _config_key_for(key: str, config: Config) -> str:
    if config.has("extern_data"):
        return "extern_data[%r]" % key
    if key == "data" and config.has("num_inputs"):
        return "num_inputs"
    return "num_outputs[%r]" % key if isinstance(config.typed_value("num_outputs"), dict) or key != "classes" \
        else "num_outputs"


def check_dataset_matches(specs: Dict[str, DataSpec], dataset: Dataset, dataset_name: str, config: Config) -> None:
    """Raises a one-line error when ``dataset`` disagrees with the data description."""
    infos = dataset.data_infos()
    where = getattr(dataset, "description", None) or dataset.name
    for key, spec in specs.items():
        if key not in infos:
            continue
        info = infos[key]
        if info.dim != spec.dim:
            what = "input dim" if key == "data" else "dim of %r" % key
            raise DataError("%s mismatch: config %s says %i, but dataset %s (%s) has %i"
                            % (what, _config_key_for(key, config), spec.dim, dataset_name, where, info.dim))
        if info.sparse != spec.sparse:
            raise DataError("data key %r: config %s says %s, but dataset %s (%s) has %s data"
                            % (key, _config_key_for(key, config), "sparse" if spec.sparse else "dense",
                               dataset_name, where, "sparse" if info.sparse else "dense"))
