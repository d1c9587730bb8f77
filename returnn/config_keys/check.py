"""Start-up check of the keys a config sets: typos get a warning naming the nearest declared key.

How an entry of a config is judged (:func:`unknown_keys`):

- declared keys, and RETURNN's keys (``returnn_keys.py``: every key RETURNN's source reads, with what
  this engine does about those it does not read) are known: nothing to say here;
- a ``++key`` from the command line that is not known is always a warning (with the nearest key);
- the config's own helpers are never reported: names starting with ``_``, functions, classes, modules
  and objects of its own (a ``Dim``, a dataset instance): only plain values (numbers, strings, bools,
  None, lists/tuples/sets/dicts) can be settings;
- a plain value whose name is close to a declared or RETURNN key (difflib ratio >= 0.75 on the lower-
  cased names, :func:`suggest`) is a likely typo: a warning naming it;
- other plain values are the config's own variables (``demo_name``): listed, not warned about.
"""
from __future__ import annotations

import difflib
import types
from typing import Any, Dict, Iterable, List, Optional, Tuple

from returnn.config_keys.registry import KEYS, RETURNN_IGNORED, RETURNN_UNSUPPORTED, is_known

_PLAIN_SCALARS = (bool, int, float, complex, str, bytes, type(None))
_PLAIN_CONTAINERS = (list, tuple, set, frozenset, dict)


def is_plain_value(value: Any) -> bool:
    """Whether ``value`` is what a setting holds: a number, string, bool, None or a list/tuple/set/dict
    (of anything). Functions, classes, modules and other objects are the config's own helpers."""
    if isinstance(value, (types.ModuleType, type)) or callable(value):
        return False
    return type(value) in _PLAIN_SCALARS or type(value) in _PLAIN_CONTAINERS \
        or isinstance(value, _PLAIN_SCALARS + _PLAIN_CONTAINERS) and type(value).__module__ == "builtins"


def suggest(name: str) -> Optional[str]:
    """The known key nearest to ``name`` (a likely typo): a declared one first, else a RETURNN key; None
    when none has a difflib ratio of at least 0.75 (lower-cased)."""
    for table in (KEYS, dict(RETURNN_IGNORED, **RETURNN_UNSUPPORTED)):
        candidates = {k.lower(): k for k in table}
        match = difflib.get_close_matches(name.lower(), list(candidates), n=1, cutoff=0.75)
        if match:
            return candidates[match[0]]
    return None


def unknown_keys(entries: Dict[str, Any], cmdline_keys: Iterable[str]) -> Tuple[List[str], List[str]]:
    """The keys set in ``entries`` (the loaded config) that the engine does not know: (warning lines,
    names of the config's own plain variables). See the module doc for the rules."""
    cmdline = set(cmdline_keys)
    lines: List[str] = []
    helpers: List[str] = []
    for name in sorted(entries):
        if is_known(name):
            continue
        if name in cmdline:
            near = suggest(name)
            lines.append("++%s (command line) is unknown; %s (rnn.py --help-keys lists all keys)"
                         % (name, "did you mean %s?" % near if near else "it is ignored"))
            continue
        if name.startswith("_") or not is_plain_value(entries[name]):
            continue
        near = suggest(name)
        if near is not None:
            lines.append("config key %r is unknown; did you mean %s? (rnn.py --help-keys lists all keys)"
                         % (name, near))
        else:
            helpers.append(name)
    return lines, helpers
