"""The :func:`import_` entry point (see the package doc)."""
from __future__ import annotations

import importlib
import types
from typing import Optional

from returnn.import_.common import module_name
from returnn.import_.git import get_repo_path


def import_(repo: str, path: str, version: Optional[str] = None) -> types.ModuleType:
    """The module at ``path`` (a file or package inside the repository, relative) of ``repo`` (e.g.
    ``github.com/rwth-i6/returnn-experiments``) at ``version`` (``DATE-REV``: date YYYYMMDD[HH[MM[SS]]],
    at least 7 hex digits of the commit; None: the development working tree)."""
    if not isinstance(path, str) or not path or path.startswith("/") or ".." in path:
        raise ValueError("import_: path must be relative inside the repository, got %r" % (path,))
    repo_path = get_repo_path(repo, version)
    return importlib.import_module(module_name(repo, repo_path, path, version))
