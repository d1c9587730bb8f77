"""The registry of config keys: each key the engine reads is declared once, with its type, default
and one line of doc. The config getters take their defaults from here; unknown-key warnings,
``rnn.py --help-keys`` and docs/config-keys.md are generated from it.

Declare a key (in :mod:`returnn.config_keys.declarations`, in the section it belongs to)::

    declare("num_epochs", "int", 5, "Epochs to train.", group="training")

Types are names: ``int``, ``float``, ``bool``, ``str``, ``list``, ``dict``, ``any``, or several joined
by ``|`` (``"str|dict"``). A ``str`` key keeps ``++key value`` as text even when the value looks
like a number. ``minimum`` bounds a number, ``choices`` lists the strings an enumeration takes; the
structure of dict/list values is checked by :mod:`returnn.config_keys.values` (every such key has
a check there or names the module that checks it at start-up, ``tests/test_config_values.py``).
"""
from __future__ import annotations

import dataclasses
import difflib
from typing import Any, Dict, Iterable, List, Optional, Tuple

TYPE_NAMES = ("int", "float", "bool", "str", "list", "dict", "any", "callable")


@dataclasses.dataclass(frozen=True)
class Key:
    """One declared config key."""

    name: str
    type: str
    default: Any
    doc: str
    group: str
    minimum: Optional[float] = None  # smallest allowed value of a number (checked at start-up)
    choices: Optional[Tuple[str, ...]] = None  # the allowed strings of an enumeration (checked at start-up)

    @property
    def types(self) -> List[str]:
        return self.type.split("|")


KEYS: Dict[str, Key] = {}
"""Keys this engine reads, by name."""

RETURNN_IGNORED: Dict[str, str] = {}
"""RETURNN keys accepted without effect here: the reason the result is the same (other backends,
debugging aids, tasks this engine refuses, RETURNN internals)."""

RETURNN_UNSUPPORTED: Dict[str, str] = {}
"""RETURNN keys that would change what RETURNN does but are not implemented here: reason. A config
that sets one to anything but :data:`RETURNN_DEFAULTS` is refused at start-up (one ConfigError)."""

RETURNN_DEFAULTS: Dict[str, Tuple[Any, ...]] = {}
"""The values of a :data:`RETURNN_UNSUPPORTED` key that change nothing (RETURNN's default; None = unset)."""


def declare(name: str, type_: str, default: Any, doc: str, group: str = "general",
            minimum: Optional[float] = None, choices: Optional[Tuple[str, ...]] = None) -> Key:
    """Declares a key the engine reads. Declaring a name twice is an error."""
    for t in type_.split("|"):
        if t not in TYPE_NAMES:
            raise ValueError("config key %r: unknown type name %r (known: %s)" % (name, t, ", ".join(TYPE_NAMES)))
    if name in KEYS:
        raise ValueError("config key %r is declared twice" % name)
    RETURNN_IGNORED.pop(name, None)
    RETURNN_UNSUPPORTED.pop(name, None)
    key = Key(name, type_, default, doc, group, minimum, tuple(choices) if choices else None)
    KEYS[name] = key
    return key


def ignore(names: Iterable[str], reason: str) -> None:
    """Lists RETURNN keys this engine does not read because they change nothing here; ``reason``
    says why. Keys declared with :func:`declare` stay declared."""
    for name in names:
        if name not in KEYS:
            RETURNN_IGNORED[name] = reason


def refuse(defaults: Dict[str, Any], reason: str) -> None:
    """Lists RETURNN keys that change what RETURNN does and are not implemented here, each with
    RETURNN's default: a config may set that value (or None), any other is refused at start-up."""
    for name, default in defaults.items():
        if name not in KEYS:
            RETURNN_UNSUPPORTED[name] = reason
            RETURNN_DEFAULTS[name] = (default,) if default is None else (default, None)


def accepts_default(name: str, value: Any) -> bool:
    """Whether ``value`` of the unsupported key ``name`` is one that changes nothing."""
    for ok in RETURNN_DEFAULTS.get(name, (None,)):
        try:
            if value is ok or (value == ok and (value is None) == (ok is None)):
                return True
        except Exception:  # e.g. arrays
            continue
    return False


def lookup(name: str) -> Optional[Key]:
    """The declaration of ``name``, or None."""
    return KEYS.get(name)


def default_of(name: str) -> Any:
    """Declared default of ``name`` (None for an undeclared key, as RETURNN's getters do)."""
    key = KEYS.get(name)
    return None if key is None else key.default


def is_known(name: str) -> bool:
    """Declared, or a RETURNN key this engine knows it does not read."""
    return name in KEYS or name in RETURNN_IGNORED or name in RETURNN_UNSUPPORTED


def suggest(name: str) -> Optional[str]:
    """The declared key nearest to ``name`` (a likely typo), or None."""
    candidates = {k.lower(): k for k in KEYS}
    match = difflib.get_close_matches(name.lower(), list(candidates), n=1, cutoff=0.75)
    return candidates[match[0]] if match else None
