"""Start-up check of the keys a config sets: typos get a warning naming the nearest declared key."""
from __future__ import annotations

from typing import Any, Dict, Iterable, List, Tuple

from returnn.config_keys.registry import KEYS, RETURNN_IGNORED, RETURNN_UNSUPPORTED, suggest


def _is_config_helper(value: Any) -> bool:
    """Functions a config defines (hooks, helpers) are not settings."""
    return callable(value) and not isinstance(value, type)


def unknown_keys(entries: Dict[str, Any], cmdline_keys: Iterable[str]) -> Tuple[List[str], List[str]]:
    """The keys set in ``entries`` (the loaded config) that the engine does not read: (warning lines,
    names of the config's own helper variables).

    A ``++key`` from the command line that is not declared is always a warning; a config entry when it
    is close to a declared key (a typo). Other module-level variables of a config are helpers the
    config uses itself (functions it defines are not listed). RETURNN keys without effect here are
    accepted silently, and so are RETURNN keys not implemented here at RETURNN's default (other values
    are refused before, by :func:`returnn.config_keys.values.check_values`).
    """
    cmdline = set(cmdline_keys)
    lines: List[str] = []
    helpers: List[str] = []
    for name in sorted(entries):
        if name in KEYS or name in RETURNN_IGNORED or name in RETURNN_UNSUPPORTED:
            continue
        where = "++%s (command line)" % name if name in cmdline else "config key %r" % name
        near = suggest(name)
        if near is not None:
            lines.append("%s is unknown; did you mean %s? (rnn.py --help-keys lists all keys)" % (where, near))
        elif name in cmdline:
            lines.append("%s is unknown; it is ignored (rnn.py --help-keys lists all keys)" % where)
        elif not _is_config_helper(entries[name]):
            helpers.append(name)
    return lines, helpers
