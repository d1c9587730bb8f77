"""Start-up check of the values a config sets for declared keys: type (as declared), minimum (as
declared) and the shape of the structured keys; and of RETURNN keys not implemented here, which only
RETURNN's default passes. The first problem is one ConfigError naming the key, before anything is
built (a ``++network 2**40`` stays a string and is reported here, not deep in the network builder)."""
from __future__ import annotations

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
    return _is_number(v) and float(v) >= 0


def _check_learning_rates(value: Any) -> Optional[str]:
    items = value.items() if isinstance(value, dict) else enumerate(value, 1)
    for epoch, lr in items:
        if not _is_int(epoch) or int(epoch) < 1:
            return "epoch key %s is not an integer >= 1" % _short(epoch)
        if not _non_negative_rate(lr):
            return "learning rate %s for epoch %s is not a number >= 0" % (_short(lr), epoch)
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


def _check_int_list(value: Any) -> Optional[str]:
    if isinstance(value, (list, tuple)) and not all(_is_int(v) and int(v) >= 0 for v in value):
        return "expected integers >= 0, got %s" % _short(value)
    return None


def _check_str_list(value: Any) -> Optional[str]:
    if isinstance(value, (list, tuple)) and not all(isinstance(v, str) for v in value):
        return "expected names (strings), got %s" % _short(value)
    return None


_STRUCTURE: Dict[str, Callable[[Any], Optional[str]]] = {
    "learning_rates": _check_learning_rates,
    "eval_datasets": _values_of("dict|str"),
    "extern_data": _values_of("dict|list"),  # an option dict, or RETURNN's [dim, ndim] as in num_outputs
    "network": _values_of("dict"),
    "num_outputs": _check_num_outputs,
    "tf_session_opts": _check_thread_counts,
    "max_seq_length": _check_lengths,
    "batch_size": _check_lengths,
    "eval_batch_size": _check_lengths,
    "forward_batch_size": _check_lengths,
    "log_verbosity": _check_int_list,
    "search_output_layer": _check_str_list,
    "learning_rate_control_error_measure": _check_str_list,
}


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
        if key.minimum is not None and _is_number(value) and float(value) < key.minimum:
            raise ConfigError("config key %r: must be >= %s, got %s" % (name, _short(key.minimum), _short(value)))
        check = _STRUCTURE.get(name)
        problem = check(value) if check is not None else None
        if problem:
            raise ConfigError("config key %r: %s" % (name, problem))
