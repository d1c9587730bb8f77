"""Wrong types and ranges of declared config keys are one line naming the key, at start-up."""
from __future__ import annotations

import pytest

from helpers import TINY_12AX, assert_one_line_error, run_rnn, train_args, write_config
from returnn.config_keys.values import check_values
from returnn.errors import ConfigError

BAD = [
    ({"num_epochs": -1}, "config key 'num_epochs': must be >= 0, got -1"),
    ({"num_epochs": 2.5}, "config key 'num_epochs': expected an integer, got 2.5"),
    ({"num_epochs": "many"}, "config key 'num_epochs': expected an integer, got 'many'"),
    ({"learning_rate": -0.1}, "config key 'learning_rate': must be >= 0, got -0.1"),
    ({"learning_rates": [0.1, -1]}, "config key 'learning_rates': learning rate -1 for epoch 2 is not a finite number >= 0"),
    ({"learning_rates": [0.1, "x"]}, "config key 'learning_rates': learning rate 'x' for epoch 2"),
    ({"learning_rates": {"a": 0.1}}, "config key 'learning_rates': epoch key 'a' is not an integer >= 1"),
    ({"learning_rates": "0.1"}, "config key 'learning_rates': expected a list or a dict, got '0.1'"),
    ({"max_seq_length": "abc"}, "config key 'max_seq_length': expected an integer or a number or a dict, got 'abc'"),
    ({"max_seq_length": {"data": -3}}, "config key 'max_seq_length': entry 'data': expected an integer >= 0"),
    ({"num_inputs": "x"}, "config key 'num_inputs': expected an integer, got 'x'"),
    ({"num_inputs": 0}, "config key 'num_inputs': must be >= 1, got 0"),
    ({"num_outputs": {"classes": [0, 1]}}, "config key 'num_outputs': entry 'classes': expected [dim >= 1, ndim >= 1]"),
    ({"num_outputs": [2, 1, 3]}, "config key 'num_outputs': expected [dim >= 1, ndim >= 1], got [2, 1, 3]"),
    ({"batch_size": {"data": "x"}}, "config key 'batch_size': entry 'data': expected an integer >= 1"),
    ({"log_verbosity": [5, "loud"]}, "config key 'log_verbosity': expected integers >= 0"),
    ({"search_output_layer": ["output", 3]}, "config key 'search_output_layer': expected names (strings)"),
    ({"chunking": 1.5}, "config key 'chunking': expected a string or an integer or a dict or a list or a function"),
    ({"extern_data": {"data": 3}}, "config key 'extern_data': entry 'data': expected a dict or a list, got 3"),
    ({"extern_data": [1]}, "config key 'extern_data': expected a dict, got [1]"),
    ({"eval_datasets": ["x"]}, "config key 'eval_datasets': expected a dict, got ['x']"),
    ({"eval_datasets": {"x": 3}}, "config key 'eval_datasets': entry 'x': expected a dict or a string, got 3"),
    ({"tf_session_opts": 4}, "config key 'tf_session_opts': expected a dict, got 4"),
    ({"tf_session_opts": {"intra_op_parallelism_threads": "x"}},
     "config key 'tf_session_opts': 'intra_op_parallelism_threads': expected an integer >= 0, got 'x'"),
    ({"network": "2**40"}, "config key 'network': expected a dict, got '2**40'"),
    ({"network": {"output": 3}}, "config key 'network': entry 'output': expected a dict, got 3"),
    ({"save_interval": 0}, "config key 'save_interval': must be >= 1, got 0"),
    ({"horovod_stall_timeout": -5}, "config key 'horovod_stall_timeout': must be >= 0, got -5"),
    # issue 28: RETURNN refuses batch_size 0 ("batch_size must be set and be greater than 0") and
    # max_seqs 0 (asserts max_seqs > 0 after mapping -1 to no limit); this engine took both as no limit
    ({"batch_size": 0}, "config key 'batch_size': must be >= 1, got 0"),
    ({"batch_size": {"data": 0}}, "config key 'batch_size': entry 'data': expected an integer >= 1, got 0"),
    ({"forward_batch_size": {"data": 0}}, "config key 'forward_batch_size': entry 'data': expected an integer >= 1"),
    ({"max_seqs": 0}, "config key 'max_seqs': expected -1 (no limit) or an integer >= 1, got 0"),
    ({"max_seqs": -3}, "config key 'max_seqs': expected -1 (no limit) or an integer >= 1, got -3"),
    # NaN passed every '>= minimum' check; inf trains nothing but NaN parameters (RETURNN: at the first step)
    ({"learning_rate": float("nan")}, "config key 'learning_rate': must be a finite number, got nan"),
    ({"learning_rate": "inf"}, "config key 'learning_rate': must be a finite number, got 'inf'"),
    ({"gradient_clip": float("nan")}, "config key 'gradient_clip': must be a finite number, got nan"),
    ({"min_learning_rate": float("inf")}, "config key 'min_learning_rate': must be a finite number, got inf"),
    ({"learning_rates": [0.1, float("nan")]}, "config key 'learning_rates': learning rate nan for epoch 2 is not a "
                                               "finite number >= 0"),
    # typed values of structured keys, checked before the first epoch instead of when first used
    ({"cleanup_old_models": {"keep": ["3", "6"]}}, "config key 'cleanup_old_models': 'keep': epochs must be integers "
                                                   ">= 1, got '3' (a string never matches an epoch: that epoch would be "
                                                   "deleted)"),
    ({"cleanup_old_models": {"keep": 4}}, "config key 'cleanup_old_models': 'keep': expected a list of epochs"),
    ({"cleanup_old_models": {"keep_last_n": "2"}}, "config key 'cleanup_old_models': 'keep_last_n': expected an "
                                                   "integer >= 1, got '2'"),
    ({"cleanup_old_models": {"keep_last_n": 0}}, "config key 'cleanup_old_models': 'keep_last_n': expected an "
                                                 "integer >= 1, got 0"),
    ({"cleanup_old_models": {"keep_best_n": -1}}, "config key 'cleanup_old_models': 'keep_best_n': expected an "
                                                  "integer >= 0"),
    ({"cleanup_old_models": {"keep_lats_n": 3}}, "config key 'cleanup_old_models': unknown option(s) keep_lats_n"),
    ({"search_output_file_format": "csv"}, "config key 'search_output_file_format': unknown 'csv' (known: txt, py)"),
    ({"learning_rate_control": "newbobb"}, "config key 'learning_rate_control': unknown 'newbobb' (known: constant"),
    ({"horovod_reduce_type": "sum"}, "config key 'horovod_reduce_type': unknown 'sum' (known: grad, param)"),
    ({"start_epoch": 0}, "config key 'start_epoch': expected \"auto\" or an epoch >= 1, got 0"),
    ({"start_epoch": "latest"}, "config key 'start_epoch': expected \"auto\" or an epoch >= 1, got 'latest'"),
    ({"chunking": "50:x"}, "config key 'chunking': expected 'size:step', got '50:x'"),
    ({"min_chunk_size": -1}, "config key 'min_chunk_size': expected a frame count >= 0"),
    ({"train": {"files": ["a.hdf"]}}, "config key 'train': a dataset dict needs 'class'"),
    ({"eval_datasets": {"x": {"files": []}}}, "config key 'eval_datasets': entry 'x': a dataset dict needs 'class'"),
    ({"log": ["a.log", 3]}, "config key 'log': expected names (strings), got ['a.log', 3]"),
]



@pytest.mark.parametrize("entries, message", BAD, ids=[str(sorted(e.items())) for e, _ in BAD])
def test_bad_values_name_the_key(entries, message):
    with pytest.raises(ConfigError) as info:
        check_values(entries)
    assert str(info.value).startswith(message), str(info.value)


def test_good_values_pass():
    check_values({"num_epochs": 0, "learning_rate": 0, "learning_rates": {1: 0.5, "2": 0.25},
                  "num_outputs": {"classes": [2, 1], "data": [9, 2], "w": {"dim": 3}, "s": {"shape": (None, 3)}},
                  "extern_data": {"data": (80, 2), "classes": [10, 1], "x": {"dim": 3}},  # RETURNN's [dim, ndim] too
                  "num_inputs": "9", "max_seq_length": {"data": 100}, "eval_datasets": {"x": {"class": "A"}, "y": "d"},
                  "tf_session_opts": {"intra_op_parallelism_threads": 1, "log_device_placement": False},
                  "network": {"#config": {"a": 1}, "output": {"class": "softmax"}}, "batch_size": 5,
                  "use_horovod": "true", "log": ["a", "b"], "num_epochs_extra": "not declared"})


def test_returnn_value_forms_pass():
    """Forms RETURNN's config getters accept for these keys (per-key dicts, NumbersDicts, lists,
    functions)."""
    from returnn.util.basic import NumbersDict
    check_values({"chunking": ({"data": 200, "classes": 50}, {"data": 100, "classes": 25}),
                  "min_chunk_size": {"data": 10, "classes": 2}, "batch_size": NumbersDict({"data": 5000}),
                  "forward_batch_size": {"data": 2000}, "max_seq_length": NumbersDict(75), "max_seqs": 20,
                  "search_output_layer": ["output", "ctc"], "log_verbosity": [5, 3], "cache_size": ["1G", "1G", "0"],
                  "learning_rate_control_error_measure": ["dev_score_output", "dev_error"],
                  "newbob_learning_rate_decay": lambda lr: lr * 0.7, "learning_rate_decay": 0.8,
                  "num_outputs": [10, 1]})
    check_values({"chunking": lambda dataset, **_: iter(()), "num_outputs": {"data": 9, "classes": (4, 1)}})


@pytest.mark.parametrize("args, message", [
    (["++num_epochs", "-1"], "config key 'num_epochs': must be >= 0, got -1"),
    (["++learning_rate", "-0.5"], "config key 'learning_rate': must be >= 0, got -0.5"),
    (["++network", "2**40"], "config key 'network': expected a dict, got '2**40'; ++network takes a Python literal"),
    (["++learning_rates", "[0.1, None]"], "config key 'learning_rates': learning rate None for epoch 2"),
    (["++batch_size", "0"], "config key 'batch_size': must be >= 1, got 0"),
    (["++max_seqs", "0"], "config key 'max_seqs': expected -1 (no limit) or an integer >= 1, got 0"),
    (["++learning_rate", "inf"], "config key 'learning_rate': must be a finite number, got 'inf'"),
    (["++learning_rate", "nan"], "config key 'learning_rate': must be a finite number, got 'nan'"),
    (["++cleanup_old_models", "{'keep': ['1']}"], "config key 'cleanup_old_models': 'keep': epochs must be integers"),
])
def test_command_line_values_are_one_line_errors(tmp_path, args, message):
    config = write_config(tmp_path / "tiny.config", TINY_12AX)
    proc = run_rnn(train_args(config, tmp_path, *args), timeout=300)
    assert_one_line_error(proc, message)
    assert not (tmp_path / "model.001.index").exists()


def test_good_forms_of_the_newly_checked_keys_pass():
    check_values({"cleanup_old_models": {"keep": range(5, 100, 5), "keep_last_n": 1, "keep_best_n": 0}, "max_seqs": -1,
                  "start_epoch": "auto", "max_seq_length": float("inf"), "forward_batch_size": 0,
                  "cache_size": "1G,1G,0", "search_output_file_format": "py", "train": "a.hdf,b.hdf"})
    check_values({"cleanup_old_models": True, "start_epoch": 3, "max_seqs": 1, "learning_rate": 0.0,
                  "chunking": "50:25", "min_chunk_size": 10, "cache_size": -1, "log": "x.log"})
    check_values({"cleanup_old_models": {"keep": {4, 8}}, "train": {"class": "HDFDataset", "files": []}})


def test_every_structured_key_is_checked_at_startup():
    """A declared key whose value may be a dict or a list has a structure check in values.py, or is
    checked by the module that reads it during start-up (CHECKED_WHEN_BUILT); a new key must be
    given one of the two (a check that only happens when a value is first used, e.g. after the
    first epochs, is too late)."""
    from returnn.config_keys.registry import KEYS
    from returnn.config_keys.values import CHECKED_WHEN_BUILT, _STRUCTURE
    unchecked = sorted(name for name, key in KEYS.items() if {"dict", "list"} & set(key.types)
                       and name not in _STRUCTURE and name not in CHECKED_WHEN_BUILT)
    assert not unchecked, "structured config keys without a start-up check: %s" % unchecked
    assert not set(_STRUCTURE) & set(CHECKED_WHEN_BUILT)
    assert set(_STRUCTURE) | set(CHECKED_WHEN_BUILT) <= set(KEYS)


def test_epoch_config_of_the_network_is_checked_at_startup(tmp_path):
    """'#config' of a net dict sets config keys for its epochs (pretrain, get_network): a static
    schedule's are checked before anything is trained, naming the epoch."""
    text = TINY_12AX.replace('network = {', 'network = {\n    "#config": {"learning_rate": -0.1, "batch_size": 200},')
    config = write_config(tmp_path / "tiny.config", text)
    proc = run_rnn(train_args(config, tmp_path), timeout=300)
    assert_one_line_error(proc, "network of epoch 1, '#config': config key 'learning_rate': must be >= 0, got -0.1")
    assert not (tmp_path / "model.001.index").exists()
