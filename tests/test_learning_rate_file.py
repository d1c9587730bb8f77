"""The learning-rate file is parsed, never evaluated: RETURNN's old and new formats are read, and
anything that is not a literal is one error naming the file and line (no code runs)."""
from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from returnn.errors import DataError
from returnn.learning_rate_file import (EpochData, format_learning_rate_file, parse_learning_rate_text,
                                        read_learning_rate_file)
from helpers import TINY_12AX, assert_one_line_error, run_rnn, train_args, write_config

ROOT = Path(__file__).resolve().parents[1]
PLOT = str(ROOT / "tools" / "plot-learning-curves.py")

# The exploit of issue 13: reaches os.system through EpochData's globals.
def _exploit(marker: Path) -> str:
    return ("{\n1: EpochData(learningRate=EpochData.__init__.__globals__['os'].system('touch %s') * 0 + 0.01,\n"
            "error={'train_score': 1.0}),\n}\n" % marker)


# What RETURNN writes today (util.better_repr of the epoch dict): meta entries, float('nan'),
# numpy scalars from session runs, short dicts on one line.
RETURNN_NEW = """{
1: EpochData(learningRate=0.001, error={
':meta:effective_learning_rate': np.float32(0.001),
':meta:epoch_num_train_steps': 12,
':meta:epoch_train_time_secs': 3,
':meta:global_train_step': 0,
':meta:hostname': 'node1',
'dev_error_output': 0.25,
'dev_score_output': float('nan'),
'train_score_output': 2.0,
}),
2: EpochData(learningRate=0.0005, error={'dev_score_output': 1.5, 'train_score_output': np.float64(1.25)}),
3: EpochData(learningRate=0.0005, error=3.5),
4: EpochData(learningRate=1e-05, error={}),
}
"""


def test_reads_returnn_new_format_with_meta_and_keeps_meta_on_rewrite():
    epochs = parse_learning_rate_text(RETURNN_NEW, "newbob.data")
    assert sorted(epochs) == [1, 2, 3, 4]
    assert epochs[1].learning_rate == 0.001
    assert epochs[1].error["dev_error_output"] == 0.25 and math.isnan(epochs[1].error["dev_score_output"])
    assert ":meta:hostname" not in epochs[1].error
    assert epochs[1].meta == {"effective_learning_rate": pytest.approx(0.001), "epoch_num_train_steps": 12,
                              "epoch_train_time_secs": 3, "global_train_step": 0, "hostname": "node1"}
    assert epochs[2].error == {"dev_score_output": 1.5, "train_score_output": 1.25}
    assert epochs[3].error == {"old_format_score": 3.5} and epochs[4].learning_rate == 1e-05
    again = parse_learning_rate_text(format_learning_rate_file(epochs), "x")
    assert again[1].meta == epochs[1].meta and math.isnan(again[1].error["dev_score_output"])
    assert {e: d.learning_rate for e, d in again.items()} == {e: d.learning_rate for e, d in epochs.items()}


def test_old_nan_inf_names_and_signs():
    text = "{1: EpochData(learningRate=-0.0, error={'a': nan, 'b': -inf, 'c': +1, 'd': float('-inf')})}"
    e = parse_learning_rate_text(text, "f")[1]
    assert math.isnan(e.error["a"]) and e.error["b"] == -math.inf and e.error["c"] == 1.0
    assert e.error["d"] == -math.inf


def test_exploit_of_issue_13_runs_nothing(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "lr.data"
    path.write_text(_exploit(marker))
    with pytest.raises(DataError, match=r"lr.data:2: bad learning-rate file"):
        read_learning_rate_file(str(path))
    assert not marker.exists()


@pytest.mark.parametrize("text, line", [
    ("{1: EpochData(learningRate=__import__('os').getpid(), error={})}", 1),
    ("{1: EpochData(learningRate=0.1, error={'a': (lambda: 1)()})}", 1),
    ("{\n1: EpochData(learningRate=0.1,\n error={'a': [x for x in ()]})}", 3),
    ("{1: EpochData(learningRate=0.1, error={'a': 1 + 1})}", 1),
    ("{1: EpochData(learningRate=0.1, error={'a': f'{1}'})}", 1),
    ("{1: EpochData(learningRate=0.1, error={'a': np.load('x')})}", 1),
    ("{1: EpochData(learningRate=0.1, error={'a': os.system('true')})}", 1),
    ("{1: EpochData(learningRate=0.1, error={**{}})}", 1),
    ("{1: EpochData(0.1)}", 1),
    ("{1: EpochData(learningRate=0.1, bogus=1)}", 1),
    ("{1: EpochData(learningRate='x')}", 1),
    ("{1: EpochData(learningRate=0.1, error={'a': 'text'})}", 1),
    ("{1: EpochData(learningRate=0.1, error={2: 1.0})}", 1),
    ("{1: OtherData(learningRate=0.1)}", 1),
    ("{'one': EpochData(learningRate=0.1)}", 1),
    ("{\n\n-1: EpochData(learningRate=0.1)}", 3),
    ("{1.5: EpochData(learningRate=0.1)}", 1),
    ("[EpochData(learningRate=0.1)]", 1),
    ("{1: EpochData(learningRate=float('x'))}", 1),
])
def test_non_literals_are_rejected_with_file_and_line(text, line):
    with pytest.raises(DataError) as info:
        parse_learning_rate_text(text, "/x/lr.data")
    assert str(info.value).startswith("/x/lr.data:%i: " % line), str(info.value)
    assert "\n" not in str(info.value)


def test_unreadable_files_are_one_line_errors(tmp_path):
    with pytest.raises(DataError, match="lr.d is a directory"):
        (tmp_path / "lr.d").mkdir()
        read_learning_rate_file(str(tmp_path / "lr.d"))
    latin = tmp_path / "latin.data"
    latin.write_bytes(b"{\n1: EpochData(learningRate=0.1, error={'d\xe9v': 1.0})}\n")
    with pytest.raises(DataError, match=r"latin.data:2: learning-rate file is not UTF-8"):
        read_learning_rate_file(str(latin))
    nul = tmp_path / "nul.data"
    nul.write_bytes(b"{1: EpochData(learningRate=0.1)}\x00")
    with pytest.raises(DataError, match="nul.data"):
        read_learning_rate_file(str(nul))
    deep = tmp_path / "deep.data"
    deep.write_text("{1: EpochData(learningRate=0.1, error={'a': %s1%s})}" % ("[" * 100000, "]" * 100000))
    with pytest.raises(DataError, match="deep.data"):
        read_learning_rate_file(str(deep))



def test_files_that_are_no_learning_rate_file_are_refused_without_blocking(tmp_path):
    """A FIFO (would block the run), a device (/dev/zero: never ends, took all memory), a huge file,
    the same epoch twice (which rate was meant?): one line each, at once."""
    import time
    fifo = tmp_path / "fifo.data"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.data"
    os.symlink("/dev/zero", zero)
    huge = tmp_path / "huge.data"
    huge.write_text("{1: EpochData(learningRate=0.1, error={})}\n")
    os.truncate(huge, 200 * 2 ** 20)  # sparse: no disk space used
    twice = tmp_path / "twice.data"
    twice.write_text("{1: EpochData(learningRate=0.1, error={}),\n2: EpochData(learningRate=0.1, error={}),\n"
                     "1: EpochData(learningRate=5.0, error={})}\n")
    start = time.monotonic()
    for path, message in [(fifo, "fifo.data is not a regular file (a FIFO)"),
                          (zero, "zero.data is not a regular file (a device)"),
                          (huge, "huge.data holds 209715200 bytes, more than the 16 MB"),
                          (twice, "twice.data:3: bad learning-rate file: epoch 1 occurs twice (also at line 1)")]:
        with pytest.raises(DataError) as info:
            read_learning_rate_file(str(path))
        assert message in str(info.value) and "\n" not in str(info.value)
    assert time.monotonic() - start < 10


def test_training_with_a_fifo_as_learning_rate_file_ends_at_once(tmp_path):
    config = write_config(tmp_path / "tiny.config", TINY_12AX)
    os.mkfifo(tmp_path / "lr.data")
    proc = run_rnn([config, "++model", tmp_path / "model", "++learning_rate_file", tmp_path / "lr.data"], timeout=120)
    assert_one_line_error(proc, "config key 'learning_rate_file': %s is a FIFO, not a regular file: training would "
                                "replace it" % (tmp_path / "lr.data"))


def test_epoch_data_repr_round_trips_non_finite():
    data = {3: EpochData(0.5, {"train_score": math.inf}, {"note": [1, (2,), {"k": math.nan}]})}
    back = parse_learning_rate_text(format_learning_rate_file(data), "f")[3]
    assert back.error == {"train_score": math.inf} and back.meta["note"][:2] == [1, (2,)]
    assert math.isnan(back.meta["note"][2]["k"])


def test_training_and_plot_tool_refuse_exploit_file(tmp_path):
    marker = tmp_path / "pwned"
    config = write_config(tmp_path / "tiny.config", TINY_12AX.replace("num_epochs = 2", "num_epochs = 1"))
    lr_file = tmp_path / "model.lr.data"
    lr_file.write_text(_exploit(marker))
    proc = run_rnn(train_args(config, tmp_path), timeout=300)
    assert_one_line_error(proc, str(lr_file) + ":2: bad learning-rate file")
    plot = subprocess.run([sys.executable, PLOT, str(lr_file)], cwd=str(ROOT), capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert plot.returncode == 2 and str(lr_file) + ":2:" in plot.stderr, plot.stderr
    assert not marker.exists()


@pytest.mark.parametrize("value", ["-0.5", "nan", "float('nan')", "inf", "-inf", "np.float64(-1e-3)"])
def test_learning_rate_values_are_checked_like_the_config_key(value):
    """A rate the file holds for an epoch is used for that epoch: it must be what config key
    'learning_rate' accepts (finite, >= 0); scores may be non-finite (a broken epoch's)."""
    text = "{\n1: EpochData(learningRate=0.1, error={'dev_score': nan}),\n2: EpochData(learningRate=%s, error={})}" % value
    with pytest.raises(DataError, match=r"^/x/lr.data:3: bad learning-rate file: learningRate .* is not a finite "
                                        r"number >= 0$"):
        parse_learning_rate_text(text, "/x/lr.data")


def test_training_refuses_a_negative_rate_for_the_next_epoch_in_the_file(tmp_path):
    config = write_config(tmp_path / "tiny.config", TINY_12AX.replace("num_epochs = 2", "num_epochs = 1"))
    lr_file = tmp_path / "model.lr.data"
    lr_file.write_text("{\n1: EpochData(learningRate=-0.01, error={}),\n}\n")  # would be used for epoch 1
    proc = run_rnn(train_args(config, tmp_path), timeout=300)
    assert_one_line_error(proc, "%s:2: bad learning-rate file: learningRate -0.01 is not a finite number >= 0"
                          % lr_file)
    assert not (tmp_path / "model.001.index").exists()
