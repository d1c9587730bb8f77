"""Config keys: each key the engine reads is declared once (``declarations.py``); RETURNN keys it does
not read are listed (``returnn_keys.py``). See :mod:`returnn.config_keys.registry` for the API."""
from returnn.config_keys import declarations, returnn_keys  # noqa: F401  (fill the registry)
from returnn.config_keys.registry import (KEYS, RETURNN_IGNORED, RETURNN_UNSUPPORTED, Key, declare, default_of,
                                          ignore, is_known, lookup, suggest)

__all__ = ["KEYS", "RETURNN_IGNORED", "RETURNN_UNSUPPORTED", "Key", "declare", "default_of", "ignore", "is_known",
           "lookup", "suggest"]
