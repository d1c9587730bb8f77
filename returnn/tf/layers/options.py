"""Layer options, declared once: name, default, one line of doc.

A layer class lists its own options in ``options``; :func:`declared_options` collects them over
the class hierarchy (base class first). Unknown options, help texts and docs are derived from
these declarations. Value checks shared by many layers live here too, each raising a one-line
:class:`NetworkError` naming the layer.
"""
from __future__ import annotations

import difflib
from typing import Any, Dict, NamedTuple, Optional

from returnn.errors import NetworkError


class Option(NamedTuple):
    """One layer option: ``name``, its ``default`` and a one-line ``doc``."""

    name: str
    default: Any
    doc: str


def declared_options(cls: type) -> Dict[str, Option]:
    """All options of a layer class, base classes first."""
    out: Dict[str, Option] = {}
    for klass in reversed(cls.__mro__):
        for opt in klass.__dict__.get("options", ()):
            out[opt.name] = opt
    return out


def check_unknown(layer_desc: str, opts: Dict[str, Any], known: Dict[str, Option]) -> None:
    """Error for options not in ``known``, with close matches suggested."""
    unknown = sorted(set(opts) - set(known))
    if not unknown:
        return
    hints = []
    for name in unknown:
        close = difflib.get_close_matches(name, list(known), n=1)
        hints.append("%r%s" % (name, " (did you mean %r?)" % close[0] if close else ""))
    raise NetworkError("%s: unknown option(s) %s" % (layer_desc, ", ".join(hints)))


def options_help(cls: type) -> str:
    """One line per option: ``name (default): doc``."""
    return "\n".join("%s (default %r): %s" % (o.name, o.default, o.doc) for o in declared_options(cls).values())


def positive_int(layer_desc: str, key: str, value: Any, limit: int = 2 ** 31 - 1) -> int:
    """An int in ``1..limit`` (no bools, no floats)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
        raise NetworkError("%s: %r must be an int in 1..%i, got %r" % (layer_desc, key, limit, value))
    return value


def optional_positive_int(layer_desc: str, key: str, value: Any) -> Optional[int]:
    return None if value is None else positive_int(layer_desc, key, value)


def rate(layer_desc: str, key: str, value: Any) -> float:
    """A probability in ``[0, 1)`` (e.g. dropout); None counts as 0."""
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) < 1.0:
        raise NetworkError("%s: %r must be a number in [0, 1), got %r" % (layer_desc, key, value))
    return float(value)


def non_negative(layer_desc: str, key: str, value: Any) -> float:
    """A number >= 0; None counts as 0."""
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not float(value) >= 0.0:
        raise NetworkError("%s: %r must be a number >= 0, got %r" % (layer_desc, key, value))
    return float(value)


def one_of(layer_desc: str, key: str, value: Any, choices) -> Any:
    if value not in choices:
        raise NetworkError("%s: %r must be one of %s, got %r" % (layer_desc, key, ", ".join(map(repr, choices)), value))
    return value
