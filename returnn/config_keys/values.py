"""Start-up check of the values a config sets for declared keys: type (as declared), minimum and
choices (as declared), finiteness of numbers, and the structure of the keys with structured values;
and of RETURNN keys not implemented here, which only RETURNN's default passes. The first problem is
one ConfigError naming the key, before anything is built (a ``++network 2**40`` stays a string and is
reported here, not deep in the network builder; ``cleanup_old_models = {"keep": ["3"]}`` here, not
after the first epochs, when it would delete the epoch it means to keep).

Every declared key whose value may be a dict or a list has a check in :data:`_STRUCTURE`, or is
listed in :data:`CHECKED_WHEN_BUILT` with the start-up step that checks it (before the first
training step); ``tests/test_config_values.py`` fails for a new key that has neither."""
from __future__ import annotations

import math
import numbers
from typing import Any, Callable, Dict, Iterable, Optional

from returnn.config_keys.registry import KEYS, RETURNN_DEFAULTS, RETURNN_UNSUPPORTED, accepts_default
from returnn.errors import ConfigError

_BOOL_WORDS = ("true", "false", "yes", "no", "on", "off", "0", "1", "")


def _is_int(v: Any) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, numbers.Integral):
        return True
    if isinstance(v, numbers.Real):
        return float(v).is_integer()
    if isinstance(v, str):
        try:
            int(v.strip())
            return True
        except ValueError:
            return False
    return False


def _is_number(v: Any) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, numbers.Real):
        return True
    if isinstance(v, str):
        try:
            float(v)
            return True
        except ValueError:
            return False
    return False


_TYPES: Dict[str, Callable[[Any], bool]] = {
    "int": _is_int,
    "float": _is_number,
    "bool": lambda v: isinstance(v, (bool, numbers.Integral)) or (isinstance(v, str) and v.strip().lower() in _BOOL_WORDS),
    "str": lambda v: isinstance(v, str),
    "list": lambda v: isinstance(v, (list, tuple)),
    "dict": lambda v: isinstance(v, dict) or _is_numbers_dict(v),
    "any": lambda v: True,
    "callable": callable,
}
_WORDS = {"int": "an integer", "float": "a number", "bool": "a boolean", "str": "a string", "list": "a list",
          "dict": "a dict", "callable": "a function"}


def _is_numbers_dict(v: Any) -> bool:
    """RETURNN's NumbersDict (per-key numbers), which configs give where a dict is allowed."""
    return type(v).__name__ == "NumbersDict" and hasattr(v, "dict") and hasattr(v, "value")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _non_negative_rate(v: Any) -> bool:
    return _is_number(v) and math.isfinite(float(v)) and float(v) >= 0


def _check_learning_rates(value: Any) -> Optional[str]:
    items = value.items() if isinstance(value, dict) else enumerate(value, 1)
    for epoch, lr in items:
        if not _is_int(epoch) or int(epoch) < 1:
            return "epoch key %s is not an integer >= 1" % _short(epoch)
        if not _non_negative_rate(lr):
            return "learning rate %s for epoch %s is not a finite number >= 0" % (_short(lr), epoch)
    return None


def _values_of(kinds: str) -> Callable[[Any], Optional[str]]:
    """A check that a dict maps string keys to values of the declared kinds (``"dict|str"``); keys
    starting with ``#`` are RETURNN's special entries (``#config``, ``#copy_param_mode``) and pass."""
    def check(value: Any) -> Optional[str]:
        for name, item in value.items():
            if not isinstance(name, str):
                return "key %s is not a string" % _short(name)
            if name.startswith("#"):
                continue
            if not any(_TYPES[k](item) for k in kinds.split("|")):
                return "entry %r: expected %s, got %s" % (name, " or ".join(_WORDS[k] for k in kinds.split("|")),
                                                           _short(item))
        return None
    return check


def _check_num_entry(item: Any) -> Optional[str]:
    """``dim``, ``[dim, ndim]`` or a data-options dict (checked with extern_data)."""
    if isinstance(item, dict):
        return None
    if isinstance(item, (list, tuple)):
        if len(item) != 2 or not all(_is_int(v) for v in item) or int(item[0]) < 1 or int(item[1]) < 1:
            return "expected [dim >= 1, ndim >= 1], got %s" % _short(item)
        return None
    if not _is_int(item) or int(item) < 1:
        return "expected a dim >= 1, [dim, ndim] or a dict, got %s" % _short(item)
    return None


def _check_num_outputs(value: Any) -> Optional[str]:
    if not isinstance(value, dict):
        return _check_num_entry(value)
    for name, item in value.items():
        problem = _check_num_entry(item)
        if problem:
            return "entry %r: %s" % (name, problem)
    return None


def _check_thread_counts(value: Any) -> Optional[str]:
    for name in ("intra_op_parallelism_threads", "inter_op_parallelism_threads"):
        if name in value and (not _is_int(value[name]) or int(value[name]) < 0):
            return "%r: expected an integer >= 0, got %s" % (name, _short(value[name]))
    return None


def _check_lengths(value: Any) -> Optional[str]:
    """Frame counts per data key (``{key: n}`` or a NumbersDict); a plain number passes (its sign
    has a meaning for max_seq_length)."""
    if _is_numbers_dict(value):
        value = dict(value.dict, **({} if value.value is None else {"(broadcast)": value.value}))
    if isinstance(value, dict):
        for name, item in value.items():
            if not _is_int(item) or int(item) < 0:
                return "entry %r: expected an integer >= 0, got %s" % (name, _short(item))
    return None


def _check_frames(value: Any) -> Optional[str]:
    """``batch_size``: frames > 0 (RETURNN: "batch_size must be set and be greater than 0"; in the
    per-key form, as RETURNN asserts, no key's limit <= 0)."""
    if _is_numbers_dict(value):
        value = dict(value.dict, **({} if value.value is None else {"(broadcast)": value.value}))
    if isinstance(value, dict):
        for name, item in value.items():
            if not _is_int(item) or int(item) < 1:
                return "entry %r: expected an integer >= 1, got %s" % (name, _short(item))
    return None


def _check_optional_frames(value: Any) -> Optional[str]:
    """``forward_batch_size``: 0 means ``batch_size``; a per-key form as batch_size's."""
    return _check_frames(value) if isinstance(value, dict) or _is_numbers_dict(value) else None


def _check_max_seqs(value: Any) -> Optional[str]:
    """-1 (no limit) or >= 1: RETURNN asserts ``max_seqs > 0`` after mapping -1 to no limit."""
    if int(value) == -1 or int(value) >= 1:
        return None
    return "expected -1 (no limit) or an integer >= 1, got %s (RETURNN refuses it too)" % _short(value)


def _check_cleanup_old_models(value: Any) -> Optional[str]:
    """True/False, or a dict of RETURNN's options (``keep_last_n`` >= 1, ``keep_best_n`` >= 0, as RETURNN
    asserts; ``keep``: epochs as integers, else they would not match and the epoch would be deleted)."""
    if not isinstance(value, dict):
        return None  # True/False; a list/tuple is RETURNN's stray-comma case: the defaults (a warning)
    from returnn.tf.model_cleanup import OPTIONS  # lazily: only for a dict value
    unknown = sorted(str(k) for k in value if k not in OPTIONS)
    if unknown:
        return "unknown option(s) %s (known: %s)" % (", ".join(unknown), ", ".join(OPTIONS))
    for name, least in (("keep_last_n", 1), ("keep_best_n", 0)):
        if name in value and (not _is_int(value[name]) or isinstance(value[name], str) or int(value[name]) < least):
            return "%r: expected an integer >= %i, got %s" % (name, least, _short(value[name]))
    keep = value.get("keep")
    if keep is not None:
        if not isinstance(keep, (list, tuple, set, frozenset, range)):
            return "'keep': expected a list of epochs (integers), got %s" % _short(keep)
        bad = [e for e in keep if isinstance(e, (bool, str)) or not _is_int(e) or int(e) < 1]
        if bad:
            return "'keep': epochs must be integers >= 1, got %s (a string never matches an epoch: that epoch " \
                   "would be deleted)" % _short(bad[0])
    return None


def _check_start_epoch(value: Any) -> Optional[str]:
    if value == "auto" or (_is_int(value) and int(value) >= 1):
        return None
    return "expected \"auto\" or an epoch >= 1, got %s" % _short(value)


def _check_chunking(value: Any) -> Optional[str]:
    from returnn.datasets.chunking import chunk_options
    try:
        chunk_options(value)
    except ConfigError as exc:
        return str(exc).split("'chunking': ", 1)[-1]
    return None


def _check_min_chunk_size(value: Any) -> Optional[str]:
    from returnn.datasets.chunking import parse_min_chunk_size
    try:
        parse_min_chunk_size(value)
    except ConfigError as exc:
        return str(exc).split("'min_chunk_size': ", 1)[-1]
    return None


def _check_dataset(value: Any) -> Optional[str]:
    """A dataset: a dict with a string ``class`` (its options are checked when it is built at
    start-up), or one of RETURNN's string forms."""
    if isinstance(value, dict) and not isinstance(value.get("class"), str):
        return "a dataset dict needs 'class' (a dataset class name), got %s" % _short(value)
    return None


def _check_eval_datasets(value: Any) -> Optional[str]:
    problem = _values_of("dict|str")(value)
    if problem:
        return problem
    for name, spec in value.items():
        problem = _check_dataset(spec)
        if problem:
            return "entry %r: %s" % (name, problem)
    return None


def _check_int_list(value: Any) -> Optional[str]:
    if isinstance(value, (list, tuple)) and not all(_is_int(v) and int(v) >= 0 for v in value):
        return "expected integers >= 0, got %s" % _short(value)
    return None


def _check_str_list(value: Any) -> Optional[str]:
    if isinstance(value, (list, tuple)) and not all(isinstance(v, str) for v in value):
        return "expected names (strings), got %s" % _short(value)
    return None


_LAST_BEST_OPTIONS = {"modulo": "int", "filter_score": "number", "only_last_n": "int", "min_score_dist": "number",
                      "only_last_epochs": "int", "first_epoch": "int"}


def _check_use_last_best_model(value: Any) -> Optional[str]:
    """RETURNN's options (``modulo`` >= 1, the rest passed to its get_last_best_epoch, which takes no others)."""
    if not isinstance(value, dict):
        return None
    for name, v in value.items():
        kind = _LAST_BEST_OPTIONS.get(name)
        if kind is None:
            return "unknown option %r (known: %s)" % (name, ", ".join(_LAST_BEST_OPTIONS))
        if v is None and name == "only_last_epochs":
            continue
        if not (_is_int(v) if kind == "int" else _is_number(v) and not isinstance(v, bool)):
            return "option %r: expected %s, got %s" % (name, "an integer" if kind == "int" else "a number", _short(v))
    if "modulo" in value and int(value["modulo"]) < 1:
        return "option 'modulo': must be >= 1, got %s" % _short(value["modulo"])
    return None


def _check_dynamic_learning_rate(value: Any) -> Optional[str]:
    from returnn.tf.gradients import dynamic_learning_rate_problem
    return dynamic_learning_rate_problem(value)


_STRUCTURE: Dict[str, Callable[[Any], Optional[str]]] = {
    "learning_rates": _check_learning_rates,
    "eval_datasets": _check_eval_datasets,
    "train": _check_dataset,
    "dev": _check_dataset,
    "eval": _check_dataset,
    "search_data": _check_dataset,
    "cleanup_old_models": _check_cleanup_old_models,
    "max_seqs": _check_max_seqs,
    "start_epoch": _check_start_epoch,
    "chunking": _check_chunking,
    "min_chunk_size": _check_min_chunk_size,
    "log": _check_str_list,
    "extern_data": _values_of("dict|list"),  # an option dict, or RETURNN's [dim, ndim] as in num_outputs
    "network": _values_of("dict"),
    "num_outputs": _check_num_outputs,
    "tf_session_opts": _check_thread_counts,
    "max_seq_length": _check_lengths,
    "min_seq_length": _check_lengths,
    "max_pad_size": _check_lengths,
    "batch_size": _check_frames,
    "forward_batch_size": _check_optional_frames,
    "log_verbosity": _check_int_list,
    "search_output_layer": _check_str_list,
    "learning_rate_control_error_measure": _check_str_list,
    "use_last_best_model": _check_use_last_best_model,
    "dynamic_learning_rate": _check_dynamic_learning_rate,
}


CHECKED_WHEN_BUILT: Dict[str, str] = {
    "hidden_size": "returnn/old_network.py when the config is loaded",
    "hidden_type": "returnn/old_network.py when the config is loaded",
    "hidden_name": "returnn/old_network.py when the config is loaded",
    "activation": "returnn/old_network.py when the config is loaded",
    "dropout": "returnn/old_network.py when the config is loaded",
    "pretrain": "returnn/tf/network_schedule.py (NetworkSchedule.from_config, Engine set-up)",
    "pretrain_repetitions": "returnn/tf/network_schedule.py (NetworkSchedule.from_config, Engine set-up)",
    "optimizer": "returnn/tf/optimizers.py (create_optimizer, Engine set-up)",
    "cache_size": "the datasets that take it, when they are built (Engine set-up: 'dataset train (HDFDataset): option "
                  "'cache_size' ...')",
    "preload_from_files": "returnn/tf/preload.py when the training or the checkpoint is set up (before the first step)",
    "search_train_network_layers": "returnn/tf/extra_nets.py (search_train_roots) when the Engine builds the network "
                                   "(a name that is no layer, or no name, is one line)",
    "context_window": "returnn/datasets/context_window.py (parse_context_window) when the engine builds its datasets",
    "debug_print_layer_output": "returnn/tf/layers/output_hooks.py (configure) when each layer is built (a value "
                                "that is no bool or print-option dict is one line naming the layer)",
}
"""Declared keys with dict/list values checked by the module that reads them, during start-up."""

# Numbers that may be infinite (no limit); every other number key must be finite (NaN never passes).
_MAY_BE_INFINITE = ("max_seq_length",)


def check_values(entries: Dict[str, Any], cmdline_keys: Iterable[str] = ()) -> None:
    """Raises a ConfigError for the first declared key in ``entries`` whose value does not fit
    (``cmdline_keys``: keys given as ``++key value``, for the hint that those are literals)."""
    cmdline = set(cmdline_keys)
    for name in sorted(entries):
        key, value = KEYS.get(name), entries[name]
        if name in RETURNN_UNSUPPORTED and not accepts_default(name, value):
            raise ConfigError("config key %r = %s: %s (only RETURNN's default %s is accepted)" % (
                name, _short(value), RETURNN_UNSUPPORTED[name], _short(RETURNN_DEFAULTS[name][0])))
        if key is None or value is None:
            continue
        if not any(_TYPES[t](value) for t in key.types):
            hint = ("; ++%s takes a Python literal, expressions are not evaluated" % name
                    if name in cmdline and isinstance(value, str) else "")
            raise ConfigError("config key %r: expected %s, got %s%s"
                              % (name, " or ".join(_WORDS[t] for t in key.types if t in _WORDS), _short(value), hint))
        if _is_number(value) and not isinstance(value, bool) and ("int" in key.types or "float" in key.types) \
                and not math.isfinite(float(value)) and not (name in _MAY_BE_INFINITE and float(value) > 0):
            raise ConfigError("config key %r: must be a finite number, got %s" % (name, _short(value)))
        if key.minimum is not None and _is_number(value) and not float(value) >= key.minimum:
            raise ConfigError("config key %r: must be >= %s, got %s" % (name, _short(key.minimum), _short(value)))
        if key.choices is not None and isinstance(value, str) and value not in key.choices:
            raise ConfigError("config key %r: unknown %r (known: %s)" % (name, value, ", ".join(key.choices)))
        check = _STRUCTURE.get(name)
        problem = check(value) if check is not None else None
        if problem:
            raise ConfigError("config key %r: %s" % (name, problem))


def check_epoch_config(net_dict: Any, epoch: int) -> None:
    """The ``#config`` entry of an epoch's net dict (pretrain, ``get_network``) sets config keys for
    that epoch: checked like the config's own values, naming the epoch."""
    overrides = net_dict.get("#config") if isinstance(net_dict, dict) else None
    if overrides is None:
        return
    if not isinstance(overrides, dict):
        raise ConfigError("network of epoch %i: '#config' must be a dict of config keys, got %s"
                          % (epoch, _short(overrides)))
    try:
        check_values(overrides)
    except ConfigError as exc:
        raise ConfigError("network of epoch %i, '#config': %s" % (epoch, exc)) from None
