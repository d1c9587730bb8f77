"""Text generated from the key registry: ``rnn.py --help-keys`` and docs/config-keys.md."""
from __future__ import annotations

import fnmatch
from typing import List, Optional

from returnn.config_keys.registry import KEYS, RETURNN_DEFAULTS, RETURNN_IGNORED, RETURNN_UNSUPPORTED, Key

DOC_PATH = "docs/config-keys.md"


def _matches(name: str, pattern: Optional[str]) -> bool:
    if not pattern:
        return True
    if any(c in pattern for c in "*?["):
        return fnmatch.fnmatchcase(name, pattern)
    return pattern.lower() in name.lower()


def _groups(keys: List[Key]) -> List[str]:
    seen: List[str] = []
    for key in keys:
        if key.group not in seen:
            seen.append(key.group)
    return seen


def help_keys_text(pattern: Optional[str] = None) -> str:
    """Declared keys (name, type, default, doc) matching ``pattern`` (substring or glob), by group."""
    keys = [k for k in KEYS.values() if _matches(k.name, pattern)]
    out: List[str] = []
    for group in _groups(keys):
        out.append("[%s]" % group)
        for key in (k for k in keys if k.group == group):
            out.append("  %-34s %-12s default %-10s %s" % (key.name, key.type, repr(key.default), key.doc))
    for title, table in (("RETURNN keys without effect here", RETURNN_IGNORED),
                         ("RETURNN keys not implemented here (refused unless RETURNN's default)", RETURNN_UNSUPPORTED)):
        names = sorted(n for n in table if _matches(n, pattern))
        if names and pattern:
            out.append("[%s]" % title)
            out.extend("  %-34s %s%s" % (n, table[n], "" if n not in RETURNN_DEFAULTS else
                                          "; only %r" % (RETURNN_DEFAULTS[n][0],)) for n in names)
        elif names:
            out.append("[%s] %i keys; rnn.py --help-keys PATTERN shows them" % (title, len(names)))
    if not out:
        return "no config key matches %r" % pattern
    return "\n".join(out)


def markdown() -> str:
    """The whole reference as Markdown (docs/config-keys.md)."""
    out = ["# Config keys", "",
           "Generated from `returnn/config_keys/` by `tools/gen-config-keys-doc.py`; do not edit by hand.",
           "`rnn.py --help-keys [PATTERN]` prints the same. A key that is not listed gets a warning at",
           "start-up naming the nearest known key.", ""]
    keys = list(KEYS.values())
    for group in _groups(keys):
        out += ["## %s" % group.capitalize(), "", "| Key | Type | Default | Meaning |", "|---|---|---|---|"]
        for key in (k for k in keys if k.group == group):
            doc = key.doc.replace("|", "\\|")
            out.append("| `%s` | %s | `%r` | %s |" % (key.name, key.type.replace("|", " or "), key.default, doc))
        out.append("")
    for title, table in (("RETURNN keys without effect here", RETURNN_IGNORED),
                         ("RETURNN keys not implemented here (refused unless RETURNN's default)", RETURNN_UNSUPPORTED)):
        out += ["## %s" % title, ""]
        by_reason: dict = {}
        for name in sorted(table):
            by_reason.setdefault(table[name], []).append(name)
        for reason, names in by_reason.items():
            listed = ", ".join("`%s`" % n if n not in RETURNN_DEFAULTS else "`%s` (`%r`)" % (n, RETURNN_DEFAULTS[n][0])
                               for n in names)
            out += ["%s: %s." % (reason[0].upper() + reason[1:], listed), ""]
    return "\n".join(out)
