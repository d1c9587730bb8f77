"""RETURNN's old command-line options (``--task search``, ``-x search``, ``--num_epochs=1``,
``--config FILE``): each sets its config key as ``++key value`` does."""
from __future__ import annotations

import re
import textwrap

import pytest

from returnn.cmdline_flags import OLD_FLAGS, match_flag
from returnn.config import Config, split_cmd_args
from returnn.errors import ConfigError
from helpers import TINY_12AX, assert_one_line_error, describe, run_rnn, write_config


def test_split_cmd_args_reads_old_options_in_every_form():
    files, overrides = split_cmd_args(
        ["a.config", "--task", "search", "-x", "forward", "--task=eval", "-xtrain", "-n", "3",
         "--max_sequences=7", "-t", "-1", "++threshold", "+-0.5", "--config", "b.config", "--config=c.config",
         "-b", "+-2", "--frobnicate", "-Q"])
    assert files == ["a.config", "b.config", "c.config", "--frobnicate", "-Q"]
    assert overrides == [("task", "search"), ("task", "forward"), ("task", "eval"), ("task", "train"),
                         ("num_epochs", "3"), ("max_seqs", "7"), ("truncate", "-1"), ("threshold", "-0.5"),
                         ("batch_size", "-2")]


def test_every_old_option_maps_to_its_key():
    keys = {}
    for short, long, key in OLD_FLAGS:
        assert match_flag(short) == (key, None) and match_flag(long) == (key, None)
        assert match_flag(long + "=v") == (key, "v") and match_flag(short + "v") == (key, "v")
        keys[short] = key
    assert len(keys) == len(OLD_FLAGS) == 27  # no flag listed twice
    assert (keys["-v"], keys["-z"], keys["-L"], keys["-E"], keys["-u"]) == \
        ("log_verbosity", "max_seqs", "load", "eval", "device")
    assert match_flag("--help-keys") is None and match_flag("--tasks") is None and match_flag("++task") is None


@pytest.mark.parametrize("args,needle", [
    (["a.config", "--task"], "--task needs a value (it sets config key 'task', as ++task VALUE does)"),
    (["a.config", "-n"], "-n needs a value (it sets config key 'num_epochs'"),
    (["a.config", "--config"], "--config needs a config file name"),
])
def test_old_option_without_value_is_a_config_error(args, needle):
    with pytest.raises(ConfigError, match=re.escape(needle)):
        split_cmd_args(args)


def test_old_options_are_typed_like_overrides_and_win_over_the_config(tmp_path):
    a = write_config(tmp_path / "a.config", textwrap.dedent("""\
        #!rnn.py
        num_epochs = 5
        learning_rate = 0.5
        seen_task = config.value("task", None)  # the options are visible while the config runs
        task = "train"
        seen_own = config.value("task", None)  # as in RETURNN: the config's own value once it set one
        """))
    b = write_config(tmp_path / "b.config", "#!rnn.py\nbatch_size = 100\n")
    config = Config()
    config.parse_cmd_args([str(a), "-x", "search", "--num_epochs=2", "-r", "1e-3", "--config", str(b), "-b", "70"])
    assert config.typed_value("task") == "search" and config.typed_value("seen_task") == "search"
    assert config.typed_value("seen_own") == "train"
    assert config.typed_value("num_epochs") == 2 and type(config.typed_value("num_epochs")) is int
    assert config.typed_value("learning_rate") == 1e-3 and config.typed_value("batch_size") == 70
    assert config.files[-1] == str(b) and config.cmdline_keys == ["task", "num_epochs", "learning_rate",
                                                                   "batch_size"]


def test_rnn_py_trains_and_evaluates_with_old_options(tmp_path):
    cfg = write_config(tmp_path / "tiny.config", TINY_12AX)
    model = str(tmp_path / "model")
    common = ["++model", model, "--log=" + str(tmp_path / "log"), "++learning_rate_file", str(tmp_path / "lr")]
    proc = run_rnn([cfg, "-n", "1", "--task", "train"] + common)
    assert proc.returncode == 0, describe(proc)
    assert (tmp_path / "model.001.index").exists() and not (tmp_path / "model.002.index").exists()
    proc = run_rnn([cfg, "-xeval", "-v", "3"] + common)
    assert proc.returncode == 0, describe(proc)
    assert "epoch 1 dev:" in proc.stdout, describe(proc)
    proc = run_rnn([cfg, "--task"])
    assert_one_line_error(proc, "--task needs a value")
    proc = run_rnn([cfg, "--num_epoch", "1"])
    assert_one_line_error(proc, "unknown option --num_epoch: config keys are set with ++num_epochs VALUE")
