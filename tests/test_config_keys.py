"""The config key registry: every key the engine reads is declared; defaults come from the
declarations; typos and unsupported RETURNN keys are warned about; help and docs are generated."""
from __future__ import annotations

import ast
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO, TINY_12AX, describe, run_rnn, train_args, write_config
from returnn import config_keys
from returnn.config import CHECK_KEYS_ENV, Config, UndeclaredKeyError
from returnn.config_keys.check import unknown_keys
from returnn.config_keys.docs import help_keys_text, markdown

GETTERS = {"int", "float", "bool", "is_true", "value", "typed_value", "opt_typed_value", "list", "int_list",
           "float_list", "has", "is_typed", "get_of_type"}


def _getter_calls(path: Path):
    """``(call node, key or None)`` of each ``<...config...>.getter(KEY, ...)`` call in a source file;
    None when the key is not a string literal."""
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in GETTERS):
            continue
        if "config" not in ast.unparse(node.func.value).lower() or not node.args:
            continue
        arg = node.args[0]
        yield node, (arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None)


def _config_reads(path: Path):
    """(line, key or None) of each config getter call in a source file."""
    for node, key in _getter_calls(path):
        yield node.lineno, key


def _passes_constant_default(node: ast.Call) -> bool:
    """Whether the call passes a literal default (a default computed from another key is fine)."""
    positional = 2 if node.func.attr == "get_of_type" else 1
    defaults = node.args[positional:positional + 1] + [kw.value for kw in node.keywords if kw.arg == "default"]
    for default in defaults:
        try:
            ast.literal_eval(default)
            return True
        except ValueError:
            continue
    return False


def _sources():
    for top in ("returnn", "tools"):
        yield from sorted((REPO / top).rglob("*.py"))
    yield REPO / "rnn.py"


def test_every_key_read_in_code_is_declared():
    undeclared = []
    for path in _sources():
        if path.name == "config.py" and path.parent.name == "returnn":
            continue  # the getters themselves
        for line, key in _config_reads(path):
            if key is not None and key not in config_keys.KEYS:
                undeclared.append("%s:%i reads %r" % (path.relative_to(REPO), line, key))
    assert not undeclared, "declare these in returnn/config_keys/declarations.py:\n" + "\n".join(undeclared)



def test_declared_keys_are_read_without_a_second_default():
    """The declared default is the only one: code reads declared keys without passing a default."""
    doubled = []
    for path in _sources():
        rel = str(path.relative_to(REPO))
        if rel == "returnn/config.py":
            continue
        for node, key in _getter_calls(path):
            if key in config_keys.KEYS and _passes_constant_default(node):
                doubled.append("%s:%i %s" % (rel, node.lineno, ast.unparse(node)))
    assert not doubled, "drop the default (declared in returnn/config_keys/declarations.py):\n" + "\n".join(doubled)


def test_scan_finds_reads(tmp_path):
    """The scan above sees literal and computed keys (so it can fail)."""
    src = write_config(tmp_path / "m.py", "def f(config, k):\n    config.int('num_epoch')\n    self_config = config\n"
                                          "    return self_config.typed_value(k, None)\n")
    assert list(_config_reads(src)) == [(2, "num_epoch"), (4, None)]


def test_engine_reading_undeclared_key_fails_at_run_time(monkeypatch):
    monkeypatch.setenv(CHECK_KEYS_ENV, "1")
    config = Config({"nonexistent_key_xyz": 1})
    namespace = {"__name__": "returnn.some_module", "config": config}
    with pytest.raises(UndeclaredKeyError, match="nonexistent_key_xyz"):
        exec("config.int('nonexistent_key_xyz', 3)", namespace)
    assert eval("config.int('num_epochs')", namespace) == 5
    # config files (and code outside the package) read their own keys freely, with RETURNN's defaults
    user = {"__name__": "__returnn_config__", "config": config}
    assert eval("config.int('nonexistent_key_xyz', 3)", user) == 1
    assert eval("config.bool('other_undeclared')", user) is False
    assert eval("config.value('other_undeclared')", user) is None


def test_getters_take_declared_defaults():
    config = Config()
    for key in config_keys.KEYS.values():
        assert config.typed_value(key.name) == key.default, key.name
    assert Config().int("num_epochs") == 5
    assert Config({"num_epochs": 2}).int("num_epochs") == 2
    assert Config().float("learning_rate") == config_keys.KEYS["learning_rate"].default
    assert Config().value("task") == "train"
    assert Config().int("num_epochs", 7) == 7  # an explicit default still wins


def test_declarations_are_well_formed():
    for key in config_keys.KEYS.values():
        assert key.doc.strip() and key.doc.endswith(".") and "\n" not in key.doc, key.name
        assert key.name not in config_keys.RETURNN_IGNORED and key.name not in config_keys.RETURNN_UNSUPPORTED
    with pytest.raises(ValueError, match="twice"):
        config_keys.declare("num_epochs", "int", 1, "Again.")
    with pytest.raises(ValueError, match="unknown type"):
        config_keys.declare("some_new_key_abc", "integer", 1, "Bad type.")
    assert "some_new_key_abc" not in config_keys.KEYS


def test_override_of_declared_string_key_stays_text():
    config = Config()
    config.apply_overrides([("model", "123"), ("num_epochs", "3"), ("learning_rate", "1e-3")])
    assert config.typed_dict == {"model": "123", "num_epochs": 3, "learning_rate": 1e-3}


def test_unknown_keys_warned_with_nearest_known_key():
    def helper():
        return 1
    entries = {"num_epoch": 1, "lerning_rate": 0.1, "num_epochs": 3, "use_tensorflow": True,
               "accum_grad_multiple_step": 2, "my_layers": 6, "make_net": helper, "cmdline_typo_zzz": 1}
    warnings, helpers = unknown_keys(entries, ["num_epoch", "cmdline_typo_zzz"])
    text = "\n".join(warnings)
    assert "++num_epoch (command line) is unknown; did you mean num_epochs?" in text
    assert "config key 'lerning_rate' is unknown; did you mean learning_rate?" in text
    assert "++cmdline_typo_zzz (command line) is unknown; it is ignored" in text
    assert "'accum_grad_multiple_step': RETURNN option not implemented" in text or \
        "accum_grad_multiple_step" not in config_keys.RETURNN_UNSUPPORTED
    assert "use_tensorflow" not in text and "my_layers" not in text and "make_net" not in text
    assert helpers == ["my_layers"]
    assert len(warnings) == 3 + ("accum_grad_multiple_step" in config_keys.RETURNN_UNSUPPORTED)


def test_typo_on_command_line_warns_in_a_real_run(tmp_path):
    cfg = write_config(tmp_path / "tiny.config", TINY_12AX)
    proc = run_rnn(train_args(cfg, tmp_path, "++num_epoch", "1", "++log_verbosity", "3"))
    assert proc.returncode == 0, describe(proc)
    assert "WARNING: ++num_epoch (command line) is unknown; did you mean num_epochs?" in proc.stdout
    assert "Finished training in epoch 2." in proc.stdout  # the config's num_epochs = 2 was used
    assert "RETURNN starting up, version" in proc.stdout and "TensorFlow: " in proc.stdout
    log_text = (tmp_path / "model.log").read_text()
    assert "did you mean num_epochs?" in log_text


def test_help_version_and_help_keys():
    proc = run_rnn(["--help"])
    assert proc.returncode == 0 and "--help-keys [PATTERN]" in proc.stdout and "++key value" in proc.stdout
    proc = run_rnn(["--version"])
    assert proc.returncode == 0, describe(proc)
    assert proc.stdout.startswith("returnn 0.") and "TensorFlow" in proc.stdout and "Python 3." in proc.stdout
    proc = run_rnn(["--help-keys", "epoch"])
    assert proc.returncode == 0
    assert "num_epochs" in proc.stdout and "default 5" in proc.stdout and "batch_size" not in proc.stdout
    proc = run_rnn(["--help-keys"])
    assert all(name in proc.stdout for name in config_keys.KEYS)
    proc = run_rnn([])
    assert proc.returncode == 2 and "usage: rnn.py CONFIG" in proc.stderr


def test_unknown_option_is_rejected_naming_the_fix(tmp_path):
    cfg = write_config(tmp_path / "tiny.config", TINY_12AX)
    proc = run_rnn([cfg, "--num_epoch", "1"])  # --num_epochs is RETURNN's option (tests/test_cmdline_flags.py)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "ERROR: unknown option --num_epoch: config keys are set with ++num_epochs VALUE"
    proc = run_rnn([cfg, "--frobnicate"])
    assert proc.returncode == 2 and "unknown option --frobnicate" in proc.stderr


def test_help_keys_text_lists_returnn_keys_by_pattern():
    text = help_keys_text("use_tensorflow")
    assert "use_tensorflow" in text and "no effect here" in text
    assert help_keys_text("zzz_no_such") == "no config key matches 'zzz_no_such'"


def test_generated_key_reference_is_up_to_date():
    doc = (REPO / "docs" / "config-keys.md").read_text()
    assert doc == markdown() + "\n", "docs/config-keys.md is out of date: run tools/gen-config-keys-doc.py"
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "gen-config-keys-doc.py"), "--check"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_rnn_py_is_executable():
    assert os.stat(REPO / "rnn.py").st_mode & stat.S_IXUSR
    assert (REPO / "rnn.py").read_text().startswith("#!/usr/bin/env python3")


def test_forward_override_hdf_output_is_read():
    """RETURNN's forward_override_hdf_output (set by the internal-LM configs of returnn-experiments): the
    forward task replaces an existing output_file only with it, else stops, as RETURNN
    (tests/test_output_files.py); forward_output_layer and eval_output_file are read too."""
    for key in ("forward_override_hdf_output", "forward_output_layer", "eval_output_file"):
        assert key in config_keys.KEYS
        assert key not in config_keys.RETURNN_IGNORED and key not in config_keys.RETURNN_UNSUPPORTED
