"""Claims of README.md and docs/*.md checked against the code, so that they cannot go stale: the
log level of each line the verbosity tables name (read from the code's ``print(..., file=log.vN)``
calls and the start-up banner), the number of tests README gives, and the defaults, key names and
numbers the prose states."""
from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Dict, List, Optional

import pytest

from helpers import REPO

README = (REPO / "README.md").read_text()
RUNNING = (REPO / "docs" / "running.md").read_text()

# What the verbosity texts name -> where the code prints it: (file, a literal the printed text starts
# with). The level is read from that print call (``file=log.vN``) or from the banner's (level, text).
LINES = {
    "score lines": ("returnn/tf/engine.py", "RETURNN's level for the epoch score line"),
    "results of `task": ("returnn/tf/engine_inference.py", "forwarded %i sequences of"),
    "devices": ("returnn/startup.py", "Local devices available to TensorFlow"),
    "start-up": ("returnn/startup.py", "RETURNN starting up"),
    "start training at epoch": ("returnn/tf/engine.py", "start training at epoch"),
    "learning rate": ("returnn/tf/engine.py", "start epoch %i with learning rate"),
    "epoch timing": ("returnn/tf/engine.py", "finished_line(\"train\""),
    "finished after": ("returnn/tf/engine.py", "finished_line(\"train\""),
    "Finished training": ("returnn/tf/engine.py", "Finished training in epoch"),
    "loaded checkpoints": ("returnn/tf/engine_inference.py", "loaded checkpoint %s"),
    "saved checkpoints": ("returnn/tf/engine.py", "saved model %s"),
    "progress lines": ("returnn/tf/progress.py", "%s epoch %i, step %i of %i"),
    "where the epoch time went": ("returnn/tf/engine.py", "time split"),
    "trace cost": ("returnn/tf/engine.py", "step functions traced in"),
    "the command line": ("returnn/startup.py", "RETURNN command line options"),
    "config's own variables": ("returnn/__main__.py", "the config's own variables?"),
    "one line per training step": ("returnn/tf/progress.py", "progress_line(self.name"),
}


def code_level(path: str, marker: str) -> int:
    """The log level of the print call (or banner entry) whose source contains ``marker``."""
    source = (REPO / path).read_text()
    for line in source.splitlines():  # a one-line print (the marker may be its comment)
        m = re.search(r"file=log\.v(\d)", line)
        if marker in line and m:
            return int(m.group(1))
    tree = ast.parse(source)
    for node in ast.walk(tree):
        segment = ast.get_source_segment(source, node) or ""
        if marker not in segment:
            continue
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print":
            for kw in node.keywords:
                if kw.arg == "file" and isinstance(kw.value, ast.Attribute) and re.fullmatch(r"v\d", kw.value.attr):
                    return int(kw.value.attr[1])
        if isinstance(node, ast.Tuple) and node.elts and isinstance(node.elts[0], ast.Constant) \
                and isinstance(node.elts[0].value, int):  # the banner's (level, text)
            return node.elts[0].value
    raise AssertionError("no print call or banner entry in %s contains %r" % (path, marker))


def running_table() -> Dict[int, str]:
    """docs/running.md's verbosity table: level -> what it adds."""
    section = RUNNING[RUNNING.index("## Log verbosity"):]
    rows = re.findall(r"^\| (\d) \| (.+) \|$", section, re.M)
    assert rows, "no verbosity table in docs/running.md"
    return {int(level): text for level, text in rows}


def readme_levels() -> Dict[int, str]:
    """README's "How much it prints": level -> what it adds ('N text; N text; ...')."""
    text = README[README.index("**How much it prints.**"):]
    text = " ".join(text[:text.index("The whole table")].split())
    return {int(m.group(1)): m.group(2) for m in re.finditer(r"(?:^|[:;] )(\d) ([^;]+)", text.split(":", 1)[1].strip())}


def _level_of(claim: str, table: Dict[int, str]) -> Optional[int]:
    found = [level for level, text in table.items() if claim.lower() in text.lower()]
    assert len(found) <= 1, "%r is in more than one level: %s" % (claim, found)
    return found[0] if found else None


@pytest.mark.parametrize("doc", ["docs/running.md", "README.md"])
def test_verbosity_tables_match_the_code(doc):
    table = running_table() if doc == "docs/running.md" else readme_levels()
    assert len(table) >= 5, table
    checked = 0
    for claim, (path, marker) in LINES.items():
        level = _level_of(claim, table)
        if level is None:
            continue
        assert level == code_level(path, marker), \
            "%s puts %r at level %i; %s prints it at %i" % (doc, claim, level, path, code_level(path, marker))
        checked += 1
    assert checked >= 6, "the %s verbosity text names too few of the lines this test knows" % doc


def test_readme_default_verbosity_and_step_lines():
    from returnn.config_keys import default_of
    assert "`log_verbosity` (default %i)" % default_of("log_verbosity") in README
    assert "`log_verbosity` (default %i)" % default_of("log_verbosity") in RUNNING


def _collected_whole_suite(session) -> Optional[int]:
    """The number of tests collected in this session when it collected every test file, else None."""
    files = {Path(str(item.fspath)).name for item in session.items}
    wanted = {p.name for p in (REPO / "tests").glob("test_*.py")}
    return len(session.items) if wanted <= files else None


def test_readme_test_count_is_about_right(request):
    """README's "some N tests" is what a whole-suite run collects, give or take (the suite grows: up to
    half as many again before the number is stale); skipped when only part of the suite was collected."""
    m = re.search(r"`make test` runs some ([\d,]+) tests", README)
    assert m, "README no longer says how many tests make test runs"
    claimed = int(m.group(1).replace(",", ""))
    count = _collected_whole_suite(request.session)
    if count is None:
        pytest.skip("only part of the suite was collected")
    assert count / 1.5 <= claimed <= 1.25 * count, "README says %i tests, the suite has %i" % (claimed, count)


def test_readme_tool_and_doc_paths_exist():
    """Every repository path README and docs name in backticks (tools/, demos/, docs/, returnn/, tests/) exists."""
    missing: List[str] = []
    for doc in [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md")):
        for path in re.findall(r"`((?:tools|demos|docs|returnn|tests|benchmarks)/[\w./-]+?)`?[\s`:)(,]",
                               doc.read_text()):
            path = path.rstrip(".")
            if "*" in path or path.endswith("/"):
                continue
            if not (REPO / path).exists():
                missing.append("%s: %s" % (doc.name, path))
    assert not missing, missing


def _literal(text: str):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


DOCS = [REPO / "README.md"] + sorted(p for p in (REPO / "docs").glob("*.md") if p.name != "config-keys.md")


def default_claims() -> List[tuple]:
    """(doc, key, claimed default) for every "`key` (default X" in README and docs (config-keys.md is
    generated), and every row "| `key` | ... `"x"` (default) ..." or "... default X ..." of README's
    distributed options table."""
    from returnn.config_keys import KEYS
    claims = []
    for doc in DOCS:
        text = doc.read_text()
        for key, value in re.findall(r"`(\w+)` \(default `?([-+\w.\"']+)", text):
            if key in KEYS:
                claims.append((doc.name, key, _literal(value.strip("`"))))
        if doc.name != "README.md":
            continue
        section = text[text.index("### Distributed options"):]
        for row in re.findall(r"^\| `(\w+)` \|(.*)\|$", section, re.M):
            key, rest = row
            if key not in KEYS:
                continue
            m = re.search(r"`([^`]+)` \(default\)", rest) or re.search(r"\bdefault (-?[\d.e+-]+)\b", rest)
            if m:
                claims.append((doc.name, key, _literal(m.group(1).rstrip("."))))
    return claims


def test_defaults_named_in_the_docs_are_the_declared_ones():
    from returnn.config_keys import default_of
    claims = default_claims()
    assert len(claims) >= 8, claims  # README: log_verbosity, prefetch_batches, optimizer_epsilon, horovod_*
    # a key declared with None has a default the engine computes (tf_log_dir: tf-log next to the model);
    # the docs say which, and the key's doc says it too
    wrong = ["%s: %s default %r, declared %r" % (doc, key, value, default_of(key))
             for doc, key, value in claims if default_of(key) is not None and value != default_of(key)]
    assert not wrong, wrong


def test_config_keys_the_docs_name_exist():
    """Keys in README's key rows and every `++key` in README/docs are keys the engine knows (declared,
    or RETURNN keys it lists): a renamed key cannot leave the docs behind."""
    from returnn import config_keys
    unknown = []
    for row in ("Checkpoints", "Logging", "Data", "Threads"):
        m = re.search(r"^\| %s \|(.*)\|$" % re.escape(row), README, re.M)
        assert m, "README has no %r row" % row
        unknown += ["README %s: %s" % (row, w) for w in re.findall(r"`([a-z][a-z0-9_]*)`", m.group(1))
                    if not config_keys.is_known(w)]
    section = README[README.index("### Distributed options"):README.index("## Tools")]
    unknown += ["README distributed: %s" % w for w in re.findall(r"^\| `(\w+)`", section, re.M)
                if not config_keys.is_known(w)]
    placeholders = {"key", "k", "flag", "num_epoch"}  # ++key value; README's typo example ++num_epoch
    for doc in [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md")):
        unknown += ["%s: ++%s" % (doc.name, w) for w in re.findall(r"\+\+([A-Za-z_]\w*)", doc.read_text())
                    if w not in placeholders and not config_keys.is_known(w)]
    assert not unknown, unknown
    assert "`++num_epoch 1` -> \"did you mean num_epochs?\"" in README
    from returnn.config_keys.check import unknown_keys
    assert unknown_keys({"num_epoch": 1}, ["num_epoch"])[0][0].startswith(
        "++num_epoch (command line) is unknown; did you mean num_epochs?")


def test_check_distributed_defaults_in_running_md():
    """docs/running.md's `--option` (default N) claims of tools/check-distributed.py are its argparse defaults."""
    from returnn.distributed.check import parse_args
    defaults = vars(parse_args([]))
    section = RUNNING[RUNNING.index("## First: check the cluster"):]
    section = section[:section.index("\n## ", 5)]
    claims = re.findall(r"`--([\w-]+)`[^`(]{0,40}\((?:[^()`]*?default )?(\d+(?:\.\d+)?)(?: s)?\)", section)
    assert {"reach-timeout", "timeout", "size-mb", "repeats"} <= {name for name, _ in claims}, claims
    for name, value in claims:
        assert defaults[name.replace("-", "_")] == float(value), (name, value, defaults)


def test_module_size_claim_of_architecture_md():
    """docs/architecture.md names the line count modules stay under; the largest module keeps to it."""
    text = (REPO / "docs" / "architecture.md").read_text()
    m = re.search(r"stays under (\d+) lines", text)
    assert m, "docs/architecture.md no longer says how long a module may be"
    sizes = {str(p.relative_to(REPO)): len(p.read_text().splitlines()) for p in (REPO / "returnn").rglob("*.py")}
    largest = max(sizes, key=sizes.get)
    assert sizes[largest] <= int(m.group(1)), "%s has %i lines; docs/architecture.md says modules stay under %s" % (
        largest, sizes[largest], m.group(1))


def test_tests_the_docs_name_exist():
    """Every `tests/FILE.py::test_name` README and docs cite (reliability.md names the test behind each
    claim) is a test function in that file."""
    missing = []
    for doc in [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md")):
        for path, name in re.findall(r"(tests/[\w/]+\.py)::(test_\w+)", doc.read_text()):
            file = REPO / path
            if not file.exists() or not re.search(r"^\s*def %s\(" % name, file.read_text(), re.M):
                missing.append("%s: %s::%s" % (doc.name, path, name))
    assert not missing, missing


def test_exit_codes_of_reliability_md_are_the_codes_the_errors_carry():
    import signal as signals

    from returnn.errors import ConfigError, RuntimeFailure, StopSignal, TrainingInterrupted
    text = (REPO / "docs" / "reliability.md").read_text()
    rows = dict(re.findall(r"^\| (\d+|128 \+ signum) \| ([^|]+)\|", text, re.M))
    assert ConfigError.exit_code == 2 and "bad input" in rows["2"]
    assert RuntimeFailure.exit_code == 1 and "runtime failure" in rows["1"]
    assert TrainingInterrupted(signals.SIGTERM).exit_code == 143 and "SIGTERM (143)" in rows["128 + signum"]
    assert StopSignal(signals.SIGUSR1).exit_code == 138 and "SIGUSR1 (138)" in rows["128 + signum"]
    assert TrainingInterrupted(signals.SIGINT).exit_code == 130 and "Ctrl-C" in rows["130"]
    # the code's own account of Ctrl-C (interrupts.py): saved like SIGTERM in the loop, a second one stops at once
    from returnn import interrupts
    assert signals.SIGINT in interrupts.STOP_SIGNALS
    assert "`<model>.interrupted`" in rows["130"] and "second Ctrl-C" in rows["130"]
