"""Working trees of :mod:`returnn.import_` (RETURNN's): the clone ``PKG/REPO`` is the development
tree; a version ``DATE-REV`` is a ``git worktree`` of the clone at ``PKG/REPO@vFULLDATE-REV12``
(the commit's date as YYYYMMDDHHMMSS and 12 hex digits), found among the existing ones by its
revision prefix, else added (after a ``git fetch`` when the clone lacks the commit). The version's
date must be a prefix of the commit's date (:class:`InvalidVersion` otherwise)."""
from __future__ import annotations

import os
import re
import subprocess
from typing import Optional, Tuple

from returnn.import_ import common
from returnn.import_.common import InvalidVersion

_REV = re.compile(r"^[0-9a-f]{7,40}$")
_DATE = re.compile(r"^\d{4}[01]\d[0-3]\d(\d\d(\d\d(\d\d)?)?)?$")  # YYYYMMDD[HH[MM[SS]]]


def _git(args: list, cwd: Optional[str] = None) -> str:
    res = subprocess.run(["git"] + args, cwd=cwd, capture_output=True, text=True)
    if res.returncode != 0:
        raise OSError("import_: git %s failed: %s" % (" ".join(args), res.stderr.strip()[-500:]))
    return res.stdout


def split_version(version: str) -> Tuple[str, str]:
    """``DATE-REV`` -> (date, rev), both checked."""
    date, sep, rev = version.rpartition("-")
    if not sep or not _DATE.match(date) or not _REV.match(rev):
        raise InvalidVersion("import_: version %r is not DATE-REV (date YYYYMMDD[HH[MM[SS]]], at least 7 hex "
                             "digits of the commit)" % (version,))
    return date, rev


def _main_path(repo: str) -> str:
    if not repo or ".." in repo or ":" in repo or repo.startswith("/") or "/" not in repo:
        raise ValueError("import_: invalid repository name %r (e.g. github.com/rwth-i6/returnn-experiments)" % (repo,))
    return os.path.join(common.package_path(), repo)


def _clone(repo: str) -> str:
    """The clone of ``repo`` (cloned from ``https://HOST/PATH`` if missing)."""
    path = _main_path(repo)
    if not os.path.exists(path):
        host, _, rest = repo.partition("/")
        common.logger.info("import_: git clone %s", repo)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        _git(["clone", "https://%s/%s" % (host, rest), path])
    return path


def _commit(main: str, rev: str) -> Optional[Tuple[str, str]]:
    """(full hash, date YYYYMMDDHHMMSS) of ``rev`` in the clone, None if it lacks it."""
    res = subprocess.run(["git", "-c", "log.showsignature=false", "log", "-n1", "--format=format:%H %cd",
                          "--date=format:%Y%m%d%H%M%S", rev, "--"], cwd=main, capture_output=True, text=True)
    if res.returncode != 0 or not res.stdout.strip():
        return None
    full, date = res.stdout.split()
    return (full, date) if full.startswith(rev) else None


def _check(version: str, full_version: str) -> None:
    date, rev = split_version(version)
    have_date, have_rev = full_version.split("-")
    if not have_date.startswith(date):
        raise InvalidVersion("import_: version %s: the commit's date is %s" % (version, have_date))
    if not (have_rev.startswith(rev) or rev.startswith(have_rev)):
        raise InvalidVersion("import_: version %s: the working tree is at %s" % (version, have_rev))


def get_repo_path(repo: str, version: Optional[str]) -> str:
    """The working tree of ``repo`` at ``version`` (None: the development tree), made if missing."""
    main = _clone(repo)
    if not version:
        common.logger.warning("import_: %s: the development working tree %s (no version given)", repo, main)
        return main
    date, rev = split_version(version)
    prefix = os.path.basename(main) + "@v"
    for name in sorted(os.listdir(os.path.dirname(main))):
        if name.startswith(prefix):
            have = name[len(prefix):]
            have_rev = have.rpartition("-")[2]
            if have_rev.startswith(rev) or rev.startswith(have_rev):
                _check(version, have)
                return os.path.join(os.path.dirname(main), name)
    found = _commit(main, rev)
    if found is None:
        common.logger.info("import_: git fetch %s", repo)
        _git(["fetch"], cwd=main)
        found = _commit(main, rev)
    if found is None:
        raise InvalidVersion("import_: %s has no commit %s (version %s)" % (repo, rev, version))
    full_version = "%s-%s" % (found[1], found[0][:12])
    _check(version, full_version)
    path = "%s@v%s" % (main, full_version)
    common.logger.info("import_: git worktree %s %s", repo, full_version)
    _git(["worktree", "add", path, found[0]], cwd=main)
    return path
