"""The registry of config keys: each key the engine reads is declared once, with its type, default
and one line of doc. The config getters take their defaults from here; unknown-key warnings,
``rnn.py --help-keys`` and docs/config-keys.md are generated from it.

Declare a key (in :mod:`returnn.config_keys.declarations`, in the section it belongs to)::

    declare("num_epochs", "int", 5, "Epochs to train.", group="training")

Types are names: ``int``, ``float``, ``bool``, ``str``, ``list``, ``dict``, ``any``, or several joined
by ``|`` (``"str|dict"``). A ``str`` key keeps ``++key value`` as text even when the value looks
like a number.
"""
from __future__ import annotations

import dataclasses
import difflib
from typing import Any, Dict, Iterable, List, Optional

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

    @property
    def types(self) -> List[str]:
        return self.type.split("|")


KEYS: Dict[str, Key] = {}
"""Keys this engine reads, by name."""

RETURNN_IGNORED: Dict[str, str] = {}
"""RETURNN keys accepted without effect here (other backends, debugging, RETURNN internals): reason."""

RETURNN_UNSUPPORTED: Dict[str, str] = {}
"""RETURNN keys that would change what RETURNN does but are not implemented here: reason."""


def declare(name: str, type_: str, default: Any, doc: str, group: str = "general",
            minimum: Optional[float] = None) -> Key:
    """Declares a key the engine reads. Declaring a name twice is an error."""
    for t in type_.split("|"):
        if t not in TYPE_NAMES:
            raise ValueError("config key %r: unknown type name %r (known: %s)" % (name, t, ", ".join(TYPE_NAMES)))
    if name in KEYS:
        raise ValueError("config key %r is declared twice" % name)
    RETURNN_IGNORED.pop(name, None)
    RETURNN_UNSUPPORTED.pop(name, None)
    key = Key(name, type_, default, doc, group, minimum)
    KEYS[name] = key
    return key


def ignore(names: Iterable[str], reason: str, supported: bool = True) -> None:
    """Lists RETURNN keys this engine does not read. ``supported=False``: the key changes what RETURNN
    does, so a config that sets it gets a warning; otherwise it has no effect here and is accepted
    silently. Keys declared with :func:`declare` stay declared."""
    for name in names:
        if name in KEYS:
            continue
        (RETURNN_IGNORED if supported else RETURNN_UNSUPPORTED)[name] = reason


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
