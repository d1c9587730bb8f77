"""``from returnn.util import better_exchook``: RETURNN's extended traceback printer, which configs and
scripts install. Here tracebacks are Python's own: :func:`install` keeps the standard hook and
:func:`better_exchook` prints as it does (this engine reports input errors in one line anyway)."""
from __future__ import annotations

import sys
import traceback


def better_exchook(etype, value, tb, debugshell: bool = False, autodebugshell: bool = True, file=None,
                   with_color=None, with_preamble: bool = True) -> None:
    """Prints the exception like Python's default hook."""
    traceback.print_exception(etype, value, tb, file=file or sys.stderr)


def install() -> None:
    """RETURNN replaces ``sys.excepthook``; Python's own stays here."""


def replace_traceback_format_tb() -> None:
    """No-op (RETURNN patches traceback formatting)."""


def setup_all() -> None:
    install()
