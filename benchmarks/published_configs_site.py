"""The site half of benchmarks/published_configs.py: what a published config finds next to it where it
was run, rebuilt in the probe's working directory.

- :func:`copy_neighbours`: the files of the config's directory (and its sub-directories), and the
  directories its ``sys.path.append/insert("relative/dir")`` calls name, copied from the git mirror
  (at the listed commit, plus files only the newest commit has)
  into ``WORKDIR/tree/`` under their repository paths; the config runs in its directory there and
  ``PYTHONPATH`` holds that directory and every copied directory with Python modules (configs import
  neighbouring modules: ``lsh_attention``, ``rnnt_tf_impl`` from ``code/``, ``../hmm_module/hmm.py``);
  :func:`repo_modules` adds modules it imports from elsewhere in the repository.
- :func:`substitute_files`: absolute site paths in the config's string literals that name a
  vocabulary (``vocab*``, ``*.vocab``, ``*.pkl`` with vocab in the name), BPE codes (``*codes*``,
  ``*bpe_code*``), a lexicon (``*lexicon*``) or feature statistics (``mean``, ``std_dev``: one value)
  are rewritten to small files in ``WORKDIR/site/``
  (``PROBE_SUBST`` tells :mod:`published_configs_synth` to rewrite vocabularies with the config's
  target dim once it is known); :func:`substitute_in_modules` does the same in the copied modules.
- :func:`import_packages`: repositories the config loads with RETURNN's ``import_("HOST/OWNER/NAME", ...)``
  are cloned from their mirrors into the package directory (``RETURNN_PKG_PATH`` in the working
  directory), the development tree checked out at the newest commit of any branch before the config's
  commit (as the config's author likely had it); versions are added by ``import_`` itself (``git worktree``).
- :func:`ext_args`: ``++ext_*`` values of Sisyphus-driven configs (``config.value("ext_model")`` & co.)
  that the list entry does not give: model and learning-rate file in the working directory, one epoch,
  no partition.
"""
from __future__ import annotations

import json
import os
import pickle
import posixpath
import re
import subprocess
import sys
from typing import Dict, List, Tuple

MAX_FILE = 2 << 20  # bytes: larger neighbours (logs, data) are not copied
MAX_TOTAL = 40 << 20
SYS_PATH = re.compile(r"sys\.path\.(?:append|insert)\(\s*(?:\d+\s*,\s*)?[\"']([^\"']+)[\"']")
SITE_LITERAL = re.compile(r"[\"'](/[^\"'\s%{}]+)[\"']")
# a file in a site directory held by a variable: '%s/trans.bpe_1000.vocab' % dataset_dir
SITE_FORMATTED = re.compile(r"[\"']%s(/[^\"'\s%{}]+)[\"']\s*%\s*\w+")
VOCAB = re.compile(r"(^vocab|[._-]vocab|vocab[._-]|\.dict$)", re.I)
CODES = re.compile(r"(codes|bpe_code)", re.I)
LEXICON = re.compile(r"lexicon", re.I)
STATS = re.compile(r"(^|[._-])(mean|std_?dev|variance)(\.txt)?$", re.I)  # feature statistics (numpy.loadtxt)
EXT = re.compile(r"config\.(?:value|int|float|bool|typed_value)\(\s*[\"'](ext_\w+)[\"']")
EXT_DEFAULTS = {"ext_model": "model/network", "ext_learning_rate_file": "newbob.data", "ext_num_epochs": "1",
                "ext_partition_epoch": "1"}


def _tree_files(gd: str, rev: str, path: str) -> List[Tuple[str, int]]:
    """(path, size) of the blobs under ``path`` at ``rev``."""
    res = subprocess.run(["git", "--git-dir", gd, "ls-tree", "-r", "-l", rev, "--", path.rstrip("/") + "/"],
                         capture_output=True)
    out = []
    for line in res.stdout.decode("utf-8", "replace").splitlines():
        meta, _, name = line.partition("\t")
        parts = meta.split()
        if len(parts) == 4 and parts[1] == "blob" and parts[3].isdigit():
            out.append((name, int(parts[3])))
    return out


def copy_neighbours(gd: str, rev: str, config_path: str, text: str, workdir: str) -> Tuple[str, List[str]]:
    """Copies the config's neighbours (see the module doc); returns the directory to run in and the
    directories for ``PYTHONPATH``."""
    tree = os.path.join(workdir, "tree")
    cfg_dir = posixpath.dirname(config_path)
    dirs = [cfg_dir]
    for rel in SYS_PATH.findall(text):
        if not rel.startswith("/"):
            dirs.append(posixpath.normpath(posixpath.join(cfg_dir, rel)))
    total = 0
    py_dirs: List[str] = []
    copied = set()
    for d, r in [(d, r) for r in (rev, "HEAD") for d in dirs]:  # files added later (code/ of rnn-transducer): HEAD's
        if d.startswith(".."):
            continue
        for name, size in _tree_files(gd, r, d):
            if size > MAX_FILE or total + size > MAX_TOTAL or name == config_path or name in copied:
                continue
            copied.add(name)
            blob = subprocess.run(["git", "--git-dir", gd, "show", "%s:%s" % (r, name)], capture_output=True)
            if blob.returncode != 0:
                continue
            dest = os.path.join(tree, name)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(dest, "wb") as f:
                f.write(blob.stdout)
            total += size
            if name.endswith(".py") and os.path.dirname(dest) not in py_dirs:
                py_dirs.append(os.path.dirname(dest))
    run_dir = os.path.join(tree, cfg_dir)
    os.makedirs(run_dir, exist_ok=True)
    return run_dir, [run_dir] + [d for d in py_dirs if d != run_dir]


IMPORT = re.compile(r"^\s*(?:from\s+(\w+)[\w.]*\s+import\b|import\s+(\w+))", re.M)


def repo_modules(gd: str, rev: str, text: str, workdir: str, have: List[str]) -> List[str]:
    """Modules the config imports that neither Python, this engine nor the copied neighbours
    (``have``: directories) provide, taken from elsewhere in the repository when exactly one
    ``NAME.py`` there has the name (a thesis config importing ``rna_tf_impl`` of another
    experiment's ``code/``), with the modules of its directory; returns the directory they were put
    in, if any."""
    import importlib.util
    from returnn.config_env import OLD_MODULE_NAMES
    names = {a or b for a, b in IMPORT.findall(text)}
    missing = sorted(n for n in names if n not in OLD_MODULE_NAMES and importlib.util.find_spec(n) is None
                     and not any(os.path.exists(os.path.join(d, n + ".py")) for d in have))
    if not missing:
        return []
    res = subprocess.run(["git", "--git-dir", gd, "ls-tree", "-r", "--name-only", "HEAD"], capture_output=True)
    files = res.stdout.decode("utf-8", "replace").splitlines()
    dest = os.path.join(workdir, "repo-modules")
    for name in missing:
        found = [f for f in files if posixpath.basename(f) == name + ".py"]
        if len(found) != 1:
            continue
        home = posixpath.dirname(found[0])  # with the modules next to it (rna_tf_impl imports ref_transduce)
        for path in [f for f in files if posixpath.dirname(f) == home and f.endswith(".py")]:
            target = os.path.join(dest, posixpath.basename(path))
            if os.path.exists(target):
                continue
            blob = subprocess.run(["git", "--git-dir", gd, "show", "HEAD:" + path], capture_output=True)
            if blob.returncode == 0:
                os.makedirs(dest, exist_ok=True)
                with open(target, "wb") as f:
                    f.write(blob.stdout)
    return [dest] if os.path.isdir(dest) else []


def _kind(path: str) -> str:
    base = posixpath.basename(path)
    if LEXICON.search(base):
        return "lexicon"
    if base.lower().startswith("vocab"):  # vocab.swbd_clean.bpe_code_1k: the vocabulary of those BPE codes
        return "vocab"
    if CODES.search(base):
        return "codes"
    if VOCAB.search(base):
        return "vocab"
    if STATS.search(base):
        return "stats"
    return ""


def write_substitute(path: str, kind: str, dim: int) -> None:
    """A small file of ``kind`` (vocab: ``dim`` labels, pickled when the name ends in .pkl)."""
    if kind == "vocab":
        labels = {"<s>": 0, "</s>": 0, "<unk>": 1}
        labels.update({"l%i" % i: i for i in range(2, max(dim, 3))})
        if path.endswith(".pkl"):
            with open(path, "wb") as f:
                pickle.dump(labels, f)
        else:
            with open(path, "w") as f:
                f.write(repr(labels) + "\n")
    elif kind == "codes":
        with open(path, "w") as f:
            f.write("#version: 0.2\nl 2\n")
    elif kind == "stats":  # one value, broadcast over the features: mean 0, deviation / variance 1
        with open(path, "w") as f:
            f.write("0.0\n" if "mean" in posixpath.basename(path).lower() else "1.0\n")
    elif kind == "lexicon":
        with open(path, "w") as f:
            f.write('<?xml version="1.0" encoding="utf-8"?>\n<lexicon>\n<phoneme-inventory>\n'
                    '<phoneme><symbol>a</symbol></phoneme>\n</phoneme-inventory>\n'
                    '<lemma><orth>a</orth><phon>a</phon></lemma>\n</lexicon>\n')


def substitute_files(text: str, workdir: str) -> Tuple[str, Dict[str, str]]:
    """The config text with site vocabularies, BPE codes and lexicons replaced by files in
    ``WORKDIR/site/`` (written with a default size), and the map local path -> kind."""
    site = os.path.join(workdir, "site")
    subst: Dict[str, str] = {}

    def repl(m: "re.Match[str]") -> str:
        path = m.group(1)
        kind = _kind(path)
        if not kind or os.path.exists(path):
            return m.group(0)
        local = os.path.join(site, posixpath.basename(path))
        if local not in subst:
            os.makedirs(site, exist_ok=True)
            write_substitute(local, kind, 100)
            subst[local] = kind
        return repr(local)

    return SITE_FORMATTED.sub(repl, SITE_LITERAL.sub(repl, text)), subst


IMPORT_CALL = re.compile(r"import_\(\s*[\"']([\w.-]+)/([\w.-]+)/([\w.-]+)[\"']")


_MISSING_MIRRORS: set = set()


def import_packages(gd: str, rev: str, text: str, workdir: str, mirrors: str) -> Dict[str, str]:
    """The environment of RETURNN's package directories, with clones of the mirrors of the repositories
    the config's ``import_`` calls name (see the module doc); empty when it calls none."""
    repos = sorted(set(IMPORT_CALL.findall(text)))
    if not repos:
        return {}
    pkg = os.path.join(workdir, "pkg")
    os.makedirs(pkg, exist_ok=True)
    date = subprocess.run(["git", "--git-dir", gd, "log", "-1", "--format=%cI", rev], capture_output=True,
                          text=True).stdout.strip()
    for host, owner, name in repos:
        base = os.path.join(mirrors, "%s+%s" % (owner, name), "repo")
        mirror = next((c for c in (base, os.path.join(base, ".git")) if os.path.exists(os.path.join(c, "HEAD"))), None)
        if mirror is None:  # the config then fails on its imports: say which mirror to fetch (once)
            if (owner, name) not in _MISSING_MIRRORS:
                _MISSING_MIRRORS.add((owner, name))
                print("published_configs: no mirror of %s/%s under %s (a config imports it with import_); fetch it, "
                      "else such configs fail on their imports" % (owner, name, mirrors), file=sys.stderr, flush=True)
            continue
        dest = os.path.join(pkg, host, owner, name)
        subprocess.run(["git", "clone", "-q", "--shared", "--no-checkout", mirror, dest], capture_output=True)
        at = subprocess.run(["git", "-C", dest, "rev-list", "-1", "--all", "--before=" + date] if date else
                            ["git", "-C", dest, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
        subprocess.run(["git", "-C", dest, "checkout", "-q", "--detach", at or "HEAD"], capture_output=True)
    return {"RETURNN_PKG_PATH": pkg, "RETURNN_PKG_IMPORT_PATH": os.path.join(workdir, "pkg-import")}


def substitute_in_modules(dirs: List[str], workdir: str) -> Dict[str, str]:
    """:func:`substitute_files` applied to the copied Python modules in ``dirs`` (and their
    sub-directories): networks a config imports name site files too (the chunked-AED ted2 networks
    load feature statistics); returns the substitutes written."""
    subst: Dict[str, str] = {}
    for top in dirs:
        for root, _, files in os.walk(top):
            for name in files:
                if not name.endswith(".py"):
                    continue
                path = os.path.join(root, name)
                with open(path, encoding="utf-8", errors="surrogateescape") as f:
                    text = f.read()
                new, found = substitute_files(text, workdir)
                if found:
                    with open(path, "w", encoding="utf-8", errors="surrogateescape") as f:
                        f.write(new)
                    subst.update(found)
    return subst


def ext_args(text: str, given: List[str]) -> List[str]:
    """``++ext_KEY value`` for the ext keys the config reads that ``given`` does not set (see module doc)."""
    have = {a[2:] for a in given if a.startswith("++")}
    out: List[str] = []
    for key in dict.fromkeys(EXT.findall(text)):
        if key not in have and key in EXT_DEFAULTS:
            out += ["++" + key, EXT_DEFAULTS[key]]
    return out


def subst_env(subst: Dict[str, str]) -> Dict[str, str]:
    return {"PROBE_SUBST": json.dumps(subst)} if subst else {}
