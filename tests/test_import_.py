"""RETURNN's import_ (returnn/import_/): working trees of a Git repository at a version, made
importable below returnn_import under RETURNN's module names; each case in a fresh process (the
import mechanism keeps process-wide state), the 'remote' a local repository reached through git's
url.insteadOf."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers import REPO, child_env

DATE_ENV = {"GIT_AUTHOR_DATE": "2021-03-24T12:31:03+0100", "GIT_COMMITTER_DATE": "2021-03-24T12:31:03+0100",
            "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}


def git(cwd: Path, *args: str, env=None) -> str:
    return subprocess.run(["git", *args], cwd=str(cwd), check=True, capture_output=True, text=True,
                          env=dict(os.environ, **(env or {}))).stdout.strip()


@pytest.fixture
def remote(tmp_path):
    """A repository 'owner/exp' with a package common/ (relative imports) and a plain tools/ dir:
    two commits (the first dated 2021-03-24 12:31:03)."""
    src = tmp_path / "remote" / "owner" / "exp"
    (src / "common" / "models").mkdir(parents=True)
    (src / "tools").mkdir()
    (src / "common" / "__init__.py").write_text("")
    (src / "common" / "models" / "__init__.py").write_text("")
    (src / "common" / "models" / "net.py").write_text("from ..config import DIM\nNET = {'out': DIM}\n")
    (src / "common" / "config.py").write_text("DIM = 1\n")
    (src / "tools" / "helper.py").write_text("NAME = 'helper'\n")
    git(src, "init", "-q", "-b", "main")
    git(src, "add", ".")
    git(src, "commit", "-q", "-m", "one", env=DATE_ENV)
    first = git(src, "rev-parse", "HEAD")
    (src / "common" / "config.py").write_text("DIM = 2\n")
    git(src, "commit", "-q", "-am", "two", env=dict(DATE_ENV, GIT_COMMITTER_DATE="2022-01-02T03:04:05+0000"))
    return tmp_path, first


def run(tmp_path: Path, code: str) -> subprocess.CompletedProcess:
    """``code`` in a fresh Python with the package dirs under tmp_path and github.com -> the local remote."""
    env = child_env({"RETURNN_PKG_PATH": str(tmp_path / "pkg"), "RETURNN_PKG_IMPORT_PATH": str(tmp_path / "imp"),
                     "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "url.file://%s/.insteadOf" % (tmp_path / "remote"),
                     "GIT_CONFIG_VALUE_0": "https://github.com/", "PYTHONPATH": str(REPO)})
    (tmp_path / "pkg").mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=str(tmp_path), env=env,
                          capture_output=True, text=True, timeout=120)


def test_versioned_import_clones_adds_a_worktree_and_uses_returnns_module_names(remote):
    tmp_path, first = remote
    res = run(tmp_path, """
        from returnn.import_ import import_
        mod = import_("github.com/owner/exp", "common", "20210324-%s")
        from returnn_import.github_com.owner.exp.v20210324123103_%s.common.models.net import NET
        print(mod.__name__, NET)
        tools = import_("github.com/owner/exp", "tools/helper.py", "20210324-%s")
        print(tools.__name__, tools.NAME)
    """ % (first[:7], first[:12], first[:9]))
    assert res.returncode == 0, res.stderr
    lines = res.stdout.split("\n")
    assert lines[0] == "returnn_import.github_com.owner.exp.v20210324123103_%s.common {'out': 1}" % first[:12]
    assert lines[1] == "returnn_import.github_com.owner.exp.v20210324123103_%s.tools.helper helper" % first[:12]
    tree = tmp_path / "pkg" / "github.com" / "owner" / ("exp@v20210324123103-%s" % first[:12])
    assert (tree / "common" / "config.py").read_text() == "DIM = 1\n"  # the first commit, not the clone's HEAD
    link = tmp_path / "imp" / "returnn_import" / "github_com" / "owner" / "exp" / ("v20210324123103_" + first[:12])
    assert os.readlink(link / "common") == str(tree / "common")
    assert os.readlink(link / "tools" / "helper.py") == str(tree / "tools" / "helper.py")  # tools/ has no __init__
    again = run(tmp_path, """
        from returnn.import_ import import_
        print(import_("github.com/owner/exp", "common/config.py", "202103-%s").DIM)
    """ % first[:8])
    assert again.returncode != 0 and "InvalidVersion" in again.stderr  # date 202103 is not YYYYMMDD
    # the existing working tree is found by its revision prefix (a new process, nothing cached)
    again = run(tmp_path, """
        from returnn.import_ import import_
        print(import_("github.com/owner/exp", "common/config.py", "20210324-%s").DIM)
    """ % first[:8])
    assert again.returncode == 0 and again.stdout.strip() == "1", again.stderr


def test_dev_tree_wrong_dates_unknown_commits_and_imports_without_import_call(remote):
    tmp_path, first = remote
    res = run(tmp_path, """
        from returnn.import_ import import_
        print(import_("github.com/owner/exp", "common/config.py").DIM)
        from returnn_import.github_com.owner.exp.dev.common.models import net
        print(net.NET)
    """)
    assert res.returncode == 0 and res.stdout.split() == ["2", "{'out':", "2}"], res.stderr
    cases = {
        "20210325-%s" % first[:7]: "InvalidVersion: import_: version 20210325-%s: the commit's date is 20210324123103"
                                   % first[:7],
        "20210324-abcdef0": "InvalidVersion: import_: github.com/owner/exp has no commit abcdef0",
        "20210324-xyz": "InvalidVersion: import_: version '20210324-xyz' is not DATE-REV",
    }
    for version, error in cases.items():
        res = run(tmp_path, "from returnn.import_ import import_\nimport_('github.com/owner/exp', 'common', %r)\n"
                  % version)
        assert res.returncode != 0 and error in res.stderr, res.stderr
    res = run(tmp_path, "import returnn.import_\nimport returnn_import.github_com.owner.exp.dev.common\n")
    assert "ModuleNotFoundError" in res.stderr  # nothing set up in a fresh import directory
    res = run(tmp_path, """
        import sys
        from returnn.import_ import import_
        import_("github.com/owner/exp", "common")
        del sys.modules["returnn_import.github_com.owner"]
        from returnn.import_ import common
        common._registered.clear()
        import returnn_import.github_com.owner
    """)
    assert "MissingExplicitImport: module returnn_import.github_com.owner: call import_(...) for it first" in res.stderr
    res = run(tmp_path, "from returnn.import_ import import_\nimport_('github.com/owner/exp', '../x')\n")
    assert "ValueError: import_: path must be relative inside the repository" in res.stderr
