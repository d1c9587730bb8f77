#!/usr/bin/env python3
"""Published RETURNN configs (returnn-experiments and other public repositories, listed in
tests/data/published_configs.json by repository, path and commit) trained with this engine on random
data (issue 27).

Usage: .venv/bin/python benchmarks/published_configs.py [--mirrors DIR] [--only SUBSTR ...] [--search]
                                                       [--timeout S] [--keep DIR] [--json OUT] [-v]

The configs are not stored here: each is read from a git mirror of its repository
(``DIR/OWNER+NAME/repo``, a bare git directory or a work tree's ``.git``, as the search tool's fetch
leaves them; default ``/work/.mirror``); a config whose repository has no mirror is skipped.

Per config: the config is written to a fresh working directory, its top-level statements (but
definitions) run guarded (a config that builds its RASR or file datasets at load time fails on files
that exist only at its site, and so do the statements using them; the probe replaces those datasets
anyway; what failed is listed as ``guarded``), the list's ``args`` (``++key value``, e.g. the parameters a Sisyphus job passes) are added,
the config's neighbours (modules, files, substitutes for site vocabularies, BPE codes and lexicons,
``++ext_*`` values of Sisyphus-driven configs: :mod:`published_configs_site`) are put in place,
and a second config (``override.config``, :mod:`published_configs_synth`) replaces the datasets with
random data matching the config's extern data and makes the run tiny (one epoch, six sequences of
~64 frames, CPU). Then ``rnn.py`` trains; with ``--search`` a config that has a search (a ``choice``
layer) also decodes with the trained epoch. Printed per config: ``OK``, or the kind and the error's
last line: ``ENGINE`` (this engine failed), ``NOT-HERE`` (RASR, KenLM: a one-line refusal, exit 2),
``FILE`` (a file the config names is missing) and ``RETURNN`` (the config fails in RETURNN too, from
the list's ``returnn_fails`` note).
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from typing import Any, Dict, List, Optional, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import published_configs_site as site  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_LIST = os.path.join(REPO, "tests", "data", "published_configs.json")
NOT_HERE = re.compile(r"not available here: .*(RASR|Sprint|KenLM|fast_bw)")
# "not found" only after a path (an axis or layer "not found" is this engine's failure)
MISSING_FILE = re.compile(r"No such file|does not exist|file not found|\S*/\S* not found|cannot open|FileNotFound|"
                          r"no checkpoint|"
                          r"is missing or incomplete", re.I)
SEQ2SEQ_HINTS = re.compile(r"[\"']ctc[\"']|[\"']choice[\"']|rnnt|RNNT|transducer|[\"']decide[\"']|"
                           r"TranslationDataset|OggZipDataset|LibriSpeechCorpus")


def git_dir(mirrors: str, repo: str) -> Optional[str]:
    base = os.path.join(mirrors, repo.replace("/", "+"), "repo")
    for cand in (base, os.path.join(base, ".git")):
        if os.path.exists(os.path.join(cand, "HEAD")):
            return cand
    return None


def read_config(gd: str, commit: str, path: str) -> str:
    for rev in (commit, "HEAD"):
        res = subprocess.run(["git", "--git-dir", gd, "show", "%s:%s" % (rev, path)], capture_output=True)
        if res.returncode == 0:
            return res.stdout.decode("utf-8", "replace")
    raise FileNotFoundError("%s not in %s" % (path, gd))


def _guarded(stmt: ast.stmt) -> bool:
    """Top-level statements but definitions: those that call something (where a config touches files of
    its site), imports (site modules: cachemanager, ...), and the statements using what those define
    (``train = {"datasets": {"sprint": train_sprint}}`` after ``train_sprint = get_sprint_dataset(...)``
    failed: the override replaces the datasets anyway)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return False
    return not (isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__")


def guard_statements(text: str) -> str:
    """A Python config whose top-level statements (but definitions) run in try/except, printing
    ``probe: statement at line N failed: ...`` (see the module doc); other forms (JSON, RETURNN's line
    format) come back unchanged."""
    if text.lstrip().startswith("{"):
        return text
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text
    lines = text.splitlines()
    out: List[str] = []
    pos = 0
    for stmt in tree.body:
        start, end = stmt.lineno - 1, stmt.end_lineno
        if not _guarded(stmt):
            continue
        out.extend(lines[pos:start])
        body = lines[start:end]
        out.append("try:")
        out.extend("    " + line for line in body)
        out.append("except Exception as _probe_exc:")
        out.append("    print('probe: statement at line %i failed: %%s: %%s' %% (type(_probe_exc).__name__, _probe_exc))"
                   % (start + 1))
        pos = end
    out.extend(lines[pos:])
    return "\n".join(out) + "\n"


def override_text() -> str:
    return ("#!rnn.py\n"
            "import sys\n"
            "sys.path.insert(0, %r)\n"
            "from published_configs_synth import overrides as _overrides\n"
            "globals().update(_overrides(config))\n" % os.path.join(REPO, "benchmarks"))


def _error_line(stderr: str, stdout: str) -> str:
    for text in (stderr, stdout):
        lines = [l for l in text.splitlines() if l.strip()]
        for line in reversed(lines):
            if line.startswith("ERROR") or re.match(r"^\w*(Error|Exception)\b", line):
                return line.strip()[:400]
    lines = [l for l in (stderr + stdout).splitlines() if l.strip()]
    return lines[-1].strip()[:400] if lines else "(no output)"


def run_rnn(workdir: str, cfg_name: str, env: Dict[str, str], timeout: float, args: List[str]
            ) -> Tuple[int, str, float, List[str]]:
    """Exit code, error line, seconds, and the config statements the guard caught."""
    start = time.time()
    try:
        res = subprocess.run([sys.executable, os.path.join(REPO, "rnn.py"), cfg_name, "override.config"] + args,
                             cwd=workdir, env=env, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return -1, "timeout after %is" % timeout, time.time() - start, []
    stdout, stderr = res.stdout.decode("utf-8", "replace"), res.stderr.decode("utf-8", "replace")
    with open(os.path.join(workdir, "run-%s.log" % env["PROBE_TASK"]), "w") as f:
        f.write(stdout + "\n--- stderr\n" + stderr)
    caught = sorted(set(line.strip() for line in stdout.splitlines() if line.startswith("probe: statement")))
    line = "" if res.returncode == 0 else _error_line(stderr, stdout)
    return res.returncode, line, time.time() - start, caught


def has_choice(text: str, rundir: str) -> bool:
    """A ``choice`` layer in the config or in the Python modules of its directory (networks the
    config imports: the chunked-AED configs' ``networks/``)."""
    choice = re.compile(r"[\"']choice[\"']")
    if choice.search(text):
        return True
    for root, _, files in os.walk(rundir):
        for name in files:
            if name.endswith(".py"):
                with open(os.path.join(root, name), encoding="utf-8", errors="replace") as f:
                    if choice.search(f.read()):
                        return True
    return False


def classify(rc: int, line: str, entry: Dict[str, Any], caught: Optional[List[str]] = None) -> str:
    if rc == 0:
        return "OK"
    if entry.get("returnn_fails"):
        return "RETURNN"
    if MISSING_FILE.search(line):
        return "FILE"
    if re.search(r"is not defined|needs 'network'|names unknown data key", line) and \
            any(MISSING_FILE.search(c) for c in caught or ()):
        return "FILE"  # a name (num_outputs) the config sets from a file of its site (a guarded statement failed on it)
    if rc == 2 and NOT_HERE.search(line):
        return "NOT-HERE"
    return "ENGINE"


def probe(entry: Dict[str, Any], mirrors: str, args: argparse.Namespace) -> Dict[str, Any]:
    result = dict(entry)
    gd = git_dir(mirrors, entry["repo"])
    if gd is None:
        result.update(kind="SKIP", error="no mirror of %s under %s" % (entry["repo"], mirrors))
        return result
    text = read_config(gd, entry["commit"], entry["path"])
    # --dump-nets: the sites of configs dumped for returnn_fuzz_configs.py (not JSON) stay in DIR.sites
    sites = os.path.abspath(args.dump_nets.rstrip("/")) + ".sites" if args.dump_nets and not args.keep else None
    if sites:
        os.makedirs(sites, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix="published-", dir=args.keep or sites)
    rundir, py_dirs = site.copy_neighbours(gd, entry["commit"], entry["path"], text, workdir)
    py_dirs += site.repo_modules(gd, entry["commit"], text, workdir, py_dirs)
    text, subst = site.substitute_files(text, workdir)
    subst.update(site.substitute_in_modules([rundir], workdir))
    name = os.path.basename(entry["path"])
    if not name.endswith((".config", ".py")):
        name += ".config"
    with open(os.path.join(rundir, name), "w") as f:
        f.write(guard_statements(text))
    with open(os.path.join(rundir, "override.config"), "w") as f:
        f.write(override_text())
    env = dict(os.environ, PROBE_TASK="train", PYTHONPATH=os.pathsep.join([REPO] + py_dirs),
               PROBE_SEQ2SEQ=entry.get("seq2seq", "1" if SEQ2SEQ_HINTS.search(text) else "0"))
    env.update(site.subst_env(subst))
    env.update(site.import_packages(gd, entry["commit"], text, workdir, mirrors))
    if entry.get("lengths"):
        env["PROBE_LENGTHS"] = json.dumps(entry["lengths"])
    env.update({k: str(v) for k, v in entry.get("env", {}).items()})
    extra = [str(a) for a in entry.get("args", [])]
    extra += site.ext_args(text, extra)
    if args.dump_nets:  # only the network dict and data, for returnn_fuzz.py --kind published
        flat = re.sub(r"\W", "_", entry["repo"].split("/")[-1] + "__" + entry["path"])
        if len(flat) > 160:  # file names have a length limit: the end, with a hash of the whole
            flat = flat[:40] + "_%08x_" % zlib.crc32(flat.encode()) + flat[-110:]
        env["PROBE_DUMP_NET"] = os.path.join(os.path.abspath(args.dump_nets), flat + ".json")
    rc, line, took, caught = run_rnn(rundir, name, env, args.timeout, extra)
    result.update(rc=rc, error=line, seconds=round(took, 1), kind=classify(rc, line, entry, caught), workdir=rundir,
                  guarded=caught)
    if rc == 0 and args.search and has_choice(text, rundir):
        env["PROBE_TASK"] = "search"  # ++task on the command line: config code reading config.value("task") sees it
        rc, line, took, _ = run_rnn(rundir, name, env, args.timeout, extra + ["++task", "search"])
        result.update(search_rc=rc, search_error=line, search_kind=classify(rc, line, entry))
    if not args.keep and not (sites and "config_mode" in _read_json(env["PROBE_DUMP_NET"])):
        shutil.rmtree(workdir, ignore_errors=True)
    return result


def _read_json(path: str) -> Dict[str, Any]:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", default=DEFAULT_LIST)
    parser.add_argument("--mirrors", default="/work/.mirror")
    parser.add_argument("--only", nargs="*", default=None, help="substrings of repo/path to run")
    parser.add_argument("--search", action="store_true", help="also decode configs with a choice layer")
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--keep", default=None, help="keep the working directories under this directory")
    parser.add_argument("--json", default=None, help="write the results here")
    parser.add_argument("--dump-nets", default=None, metavar="DIR",
                        help="do not train: write each config's network dict and data as a JSON case into DIR "
                             "(returnn_fuzz.py --kind published --cases-dir DIR compares them with RETURNN by value)")
    args = parser.parse_args(argv)
    if args.dump_nets:
        os.makedirs(args.dump_nets, exist_ok=True)
    with open(args.list) as f:
        entries = json.load(f)
    if args.only:
        entries = [e for e in entries if any(s in e["repo"] + "/" + e["path"] for s in args.only)]
    results = []
    for entry in entries:
        res = probe(entry, args.mirrors, args)
        results.append(res)
        extra = "" if "search_kind" not in res else "  search: %s %s" % (res["search_kind"], res["search_error"])
        if res.get("guarded") and res["kind"] != "OK":
            extra += "  [guarded: %s]" % " | ".join(res["guarded"])[:600]
        print("%-8s %6.1fs %s:%s  %s%s" % (res["kind"], res.get("seconds", 0), res["repo"], res["path"],
                                            res.get("error", ""), extra), flush=True)
    counts: Dict[str, int] = {}
    for res in results:
        counts[res["kind"]] = counts.get(res["kind"], 0) + 1
    print("summary: %s of %i" % (", ".join("%s %i" % kv for kv in sorted(counts.items())), len(results)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
