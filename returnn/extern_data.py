"""What the network's input data look like: ``extern_data``, or ``num_inputs``/``num_outputs``,
or, when the config says nothing, the train dataset. Mismatches with a dataset are one-line errors
naming both sides."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from returnn.config import Config
from returnn.datasets.base import Dataset
from returnn.errors import ConfigError, DataError
from returnn.tensor import Data, Dim

# Keys of an ``extern_data`` / ``num_outputs`` dict entry (RETURNN's Data options). Others are errors.
DATA_OPTS = {
    "dim": "feature dim, or number of classes when sparse",
    "shape": "shape without the batch axis, None for dynamic axes, e.g. (None, 40)",
    "sparse": "True: integer class indices",
    "sparse_dim": "Dim of the classes (instead of dim + sparse)",
    "dtype": "e.g. 'float32', 'int32'",
    "time_dim_axis": "time axis counted with batch (None: no time axis)",
    "feature_dim_axis": "feature axis counted with batch",
    "batch_dim_axis": "batch axis (None: no batch axis); batches arrive batch-major and are transposed",
    "available_for_inference": "whether the key exists in forward/search",
    "dim_tags": "the axes as Dim objects, batch included",
    "dims": "same as dim_tags",
    "same_dim_tags_as": "{axis description: Dim}: make that axis this Dim",
    "vocab": "accepted, not used",
    "version": "RETURNN's Tensor version: 1 (its default time/feature axis rules, as here; returnn_common writes "
               "it), 2 (no default axes) is refused",
}


def _where(config_key: str, key: str) -> str:
    return "config key %r: entry %r" % (config_key, key)


def data_from_opts(key: str, opts: Dict[str, Any], config_key: str = "extern_data") -> Data:
    """RETURNN's Data options (an ``extern_data`` entry) -> :class:`Data`; one-line errors."""
    where = _where(config_key, key)
    if not isinstance(opts, dict):
        raise ConfigError("%s must be a dict, got %r" % (where, opts))
    unknown = sorted(set(opts) - set(DATA_OPTS))
    if unknown:
        raise ConfigError("%s: unknown option(s) %s (known: %s)" % (where, ", ".join(unknown), ", ".join(sorted(DATA_OPTS))))
    if opts.get("version", 1) != 1:
        raise ConfigError("%s: 'version' %r is not supported (only 1: RETURNN's default time/feature axes, as here)"
                          % (where, opts["version"]))
    kwargs = {k: v for k, v in opts.items() if k not in ("vocab", "same_dim_tags_as", "dims", "version")}
    if "dims" in opts:
        kwargs["dim_tags"] = opts["dims"]
    dim = opts.get("dim")
    if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int) or dim < 1):
        raise ConfigError("%s: 'dim' must be an int >= 1, got %r" % (where, dim))
    shape = opts.get("shape")
    if shape is not None and (not isinstance(shape, (list, tuple)) or any(
            s is not None and (isinstance(s, bool) or not isinstance(s, int) or s < 1) for s in shape)):
        raise ConfigError("%s: 'shape' must be a tuple of ints >= 1 or None, got %r" % (where, shape))
    batch_axis = opts.get("batch_dim_axis", 0)
    if batch_axis is not None and (isinstance(batch_axis, bool) or not isinstance(batch_axis, int)):
        raise ConfigError("%s: 'batch_dim_axis' must be an int or None, got %r" % (where, batch_axis))
    if dim is None and shape is None and opts.get("dim_tags", opts.get("dims")) is None:
        if "dim" not in opts and opts.get("sparse_dim") is None:
            raise ConfigError("%s needs 'dim' or 'shape'" % where)
        # RETURNN's default shape with 'dim': None given (or a sparse_dim): a time axis, then (dense) a feature axis of
        # unknown size
        kwargs["shape"] = (None,) if opts.get("sparse") or opts.get("sparse_dim") is not None else (None, None)
    if dim is None and shape is not None and not opts.get("sparse") and shape and shape[-1] is not None:
        kwargs["dim"] = shape[-1]
    try:
        data = Data(key, **kwargs)
    except (ValueError, TypeError) as exc:
        raise ConfigError("%s: %s" % (where, exc)) from None
    for axis, tag in dict(opts.get("same_dim_tags_as") or {}).items():
        if not isinstance(tag, Dim):
            raise ConfigError("%s: same_dim_tags_as[%r] must be a Dim, got %r" % (where, axis, tag))
        try:
            data = data.copy_template_replace_dim_tag(data.get_axis_from_description(axis), tag)
        except ValueError as exc:
            raise ConfigError("%s: same_dim_tags_as: %s" % (where, exc)) from None
    if not data.have_batch_axis() and data.get_dynamic_axes():
        raise ConfigError("%s: data without a batch axis must have static axes only, got %s" % (where, data.short_repr()))
    return data


def frame_axis(data: Data) -> Optional[int]:
    """The axis of ``data`` (counted with batch) that a batch array holds second, with the lengths
    ``key:seq_len``: the time axis, else the first dynamic axis; None when there is neither (the
    array then has a length-1 axis there)."""
    if data.time_dim_axis is not None:
        return data.time_dim_axis
    dyn = data.get_dynamic_axes()
    return dyn[0] if dyn else None


def batch_array_axes(data: Data) -> List[Optional[int]]:
    """The axes of ``data`` in the order a batch array holds them: batch, frame axis (None: a
    length-1 axis, data without one), then the other axes as ``data`` declares them. Datasets give
    every key so (batch-major, ``(B, T, ...)``); the network transposes it to the declared layout.
    Data without a batch axis come as declared."""
    if not data.have_batch_axis():
        return list(range(data.batch_ndim))
    b, t = data.batch_dim_axis, frame_axis(data)
    return [b, t] + [i for i in range(data.batch_ndim) if i not in (b, t)]


def size_key(key: str, data: Data, axis: int) -> str:
    """The batch dict's key of the per-sequence sizes of dynamic ``axis`` of data ``key``:
    ``key:seq_len`` for the frame axis, ``key:size:AXIS`` for others (fed directly; datasets deliver
    one length per sequence, see :func:`check_batch_deliverable`)."""
    return key + ":seq_len" if axis == frame_axis(data) else "%s:size:%i" % (key, axis)


def check_batch_deliverable(key: str, data: Data) -> None:
    """One-line error when a dataset cannot deliver data ``key`` in batches: no batch axis, or more
    than one dynamic axis (datasets give one length per sequence; RETURNN's feeding asserts both)."""
    where = "data key %r (%s)" % (key, data.short_repr())
    if not data.have_batch_axis():
        raise ConfigError("%s has no batch axis: datasets deliver batches (batch, ...); only a direct feed "
                          "can give it (RETURNN's data feeding asserts a batch axis too)" % where)
    if len(data.get_dynamic_axes()) > 1:
        raise ConfigError("%s has %i dynamic axes: datasets deliver one length per sequence, so only its "
                          "time axis can be dynamic (RETURNN's data feeding asserts the same)"
                          % (where, len(data.get_dynamic_axes())))


def _data_from_num(key: str, value: Any, config_key: str, sparse_input: bool = False) -> Data:
    """A ``num_outputs`` entry: ``dim``, ``[dim, ndim]`` (ndim 1 = sparse) or a Data dict."""
    where = _where(config_key, key)
    if isinstance(value, dict):
        return data_from_opts(key, value, config_key)
    if isinstance(value, (list, tuple)):
        if len(value) < 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in value[:2]):
            raise ConfigError("%s must be [dim, ndim] or a dict, got %r" % (where, value))
        dim, ndim = value[0], value[1]
        if ndim < 1:
            raise ConfigError("%s: ndim must be >= 1, got %r" % (where, ndim))
        if ndim == 1:
            return data_from_opts(key, {"dim": dim, "sparse": True, "shape": (None,)}, config_key)
        return data_from_opts(key, {"dim": dim, "shape": (None,) * (ndim - 1) + (dim,)}, config_key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError("%s must be an int, [dim, ndim] or a dict, got %r" % (where, value))
    if key == "data" and config_key == "num_outputs":  # RETURNN: an int for 'data' in num_outputs is dense
        sparse_input = False
    sparse = sparse_input if key == "data" else True
    return data_from_opts(key, {"dim": value, "sparse": sparse}, config_key)


def extern_data_from_config(config: Config, dataset: Optional[Dataset] = None) -> Dict[str, Data]:
    """The data description: ``extern_data`` > ``num_inputs``/``num_outputs`` > the dataset."""
    extern = config.typed_value("extern_data")
    if extern is not None and not isinstance(extern, dict):
        raise ConfigError("config key 'extern_data' must be a dict of data keys, got %r" % (extern,))
    if extern:  # entries are option dicts, or RETURNN's [dim, ndim] as in num_outputs
        return {k: _data_from_num(k, v, "extern_data") if isinstance(v, (list, tuple)) else data_from_opts(k, v)
                for k, v in extern.items()}
    specs: Dict[str, Data] = {}
    num_outputs = config.typed_value("num_outputs")
    sparse_input = bool(config.typed_value("sparse_input"))
    if isinstance(num_outputs, dict):
        specs.update({k: _data_from_num(k, v, "num_outputs", sparse_input) for k, v in num_outputs.items()})
    elif num_outputs is not None:  # RETURNN: the description of the key 'target'
        target = config.value("target") or "classes"
        specs[target] = _data_from_num(target, num_outputs, "num_outputs")
    num_inputs = config.typed_value("num_inputs")
    if num_inputs is not None:
        if isinstance(num_inputs, bool) or not isinstance(num_inputs, int) or num_inputs < 1:
            raise ConfigError("config key 'num_inputs' must be an int >= 1, got %r" % (num_inputs,))
        sparse = specs["data"].sparse if "data" in specs else sparse_input or bool(
            dataset and "data" in dataset.data_infos() and dataset.is_data_sparse("data"))
        specs["data"] = data_from_opts("data", {"dim": num_inputs, "sparse": sparse}, "num_inputs")
    if dataset is not None:
        for key, info in dataset.data_infos().items():
            if key not in specs:
                specs[key] = Data(key, dim=info.dim, sparse=info.sparse, shape=(None,) + tuple(info.shape))
    if not specs:
        raise ConfigError("no data description: set 'extern_data' or 'num_inputs'/'num_outputs', or a 'train' dataset")
    return specs


def _config_key_for(key: str, config: Config) -> str:
    if config.has("extern_data"):
        return "extern_data[%r]" % key
    if key == "data" and config.has("num_inputs"):
        return "num_inputs"
    return "num_outputs[%r]" % key if isinstance(config.typed_value("num_outputs"), dict) \
        or key != (config.value("target") or "classes") else "num_outputs"


def check_dataset_matches(specs: Dict[str, Data], dataset: Dataset, dataset_name: str, config: Config) -> None:
    """Raises a one-line error when ``dataset`` disagrees with the data description."""
    infos = dataset.data_infos()
    where = getattr(dataset, "description", None) or dataset.name
    for key, spec in specs.items():
        if key not in infos:
            continue
        info = infos[key]
        if spec.dim is not None and info.dim != spec.dim:  # dim None: any (e.g. indices of unknown range)
            what = "input dim" if key == "data" else "dim of %r" % key
            raise DataError("%s mismatch: config %s says %s, but dataset %s (%s) has %s"
                            % (what, _config_key_for(key, config), spec.dim, dataset_name, where, info.dim))
        if info.sparse != spec.sparse:
            raise DataError("data key %r: config %s says %s, but dataset %s (%s) has %s data"
                            % (key, _config_key_for(key, config), "sparse" if spec.sparse else "dense",
                               dataset_name, where, "sparse" if info.sparse else "dense"))


class ExternData:
    """RETURNN's ``ExternData`` (``returnn.tf.network``), as far as code imported by configs uses it:
    the data templates by key (``data``), given as :class:`Data` or as Data options (``extern_data``
    entries). It holds templates only, no tensors."""

    def __init__(self, data: Optional[Dict[str, Any]] = None, default_input: str = "data",
                 default_target: str = "classes"):
        self.data: Dict[str, Data] = {}
        self.default_input, self.default_target = default_input, default_target
        for key, value in (data or {}).items():
            self.data[key] = value if isinstance(value, Data) else data_from_opts(key, dict(value))

    def init_from_config(self, config: Config) -> None:
        """The templates of ``config`` (its extern_data or num_inputs/num_outputs)."""
        self.data.update(extern_data_from_config(config))

    def register_data(self, data: Data) -> None:
        if data.name in self.data:
            raise ConfigError("ExternData: data key %r exists already" % data.name)
        self.data[data.name] = data

    def has_data(self, name: str) -> bool:
        return name in self.data

    def get_data(self, name: str) -> Data:
        return self.data[name]

    def get_default_input_data(self) -> Data:
        return self.data[self.default_input]

    def get_default_target_data(self) -> Data:
        return self.data[self.default_target]
