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
    ({"learning_rates": [0.1, -1]}, "config key 'learning_rates': learning rate -1 for epoch 2 is not a number >= 0"),
    ({"learning_rates": [0.1, "x"]}, "config key 'learning_rates': learning rate 'x' for epoch 2"),
    ({"learning_rates": {"a": 0.1}}, "config key 'learning_rates': epoch key 'a' is not an integer >= 1"),
    ({"learning_rates": "0.1"}, "config key 'learning_rates': expected a list or a dict, got '0.1'"),
    ({"max_seq_length": "abc"}, "config key 'max_seq_length': expected an integer or a number or a dict, got 'abc'"),
    ({"max_seq_length": {"data": -3}}, "config key 'max_seq_length': entry 'data': expected an integer >= 0"),
    ({"num_inputs": "x"}, "config key 'num_inputs': expected an integer, got 'x'"),
    ({"num_inputs": 0}, "config key 'num_inputs': must be >= 1, got 0"),
    ({"num_outputs": {"classes": [0, 1]}}, "config key 'num_outputs': entry 'classes': expected [dim >= 1, ndim >= 1]"),
    ({"num_outputs": [2, 1, 3]}, "config key 'num_outputs': expected [dim >= 1, ndim >= 1], got [2, 1, 3]"),
    ({"batch_size": {"data": "x"}}, "config key 'batch_size': entry 'data': expected an integer >= 0"),
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
                  "network": {"#config": {"a": 1}, "output": {"class": "softmax"}}, "batch_size": 0,
                  "use_horovod": "true", "log": ["a", "b"], "num_epochs_extra": "not declared"})


def test_returnn_value_forms_pass():
    """Forms RETURNN's config getters accept for these keys (per-key dicts, NumbersDicts, lists,
    functions)."""
    from returnn.util.basic import NumbersDict
    check_values({"chunking": ({"data": 200, "classes": 50}, {"data": 100, "classes": 25}),
                  "min_chunk_size": {"data": 10, "classes": 2}, "batch_size": NumbersDict({"data": 5000}),
                  "eval_batch_size": {"data": 2000}, "max_seq_length": NumbersDict(75), "max_seqs": 20,
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
])
def test_command_line_values_are_one_line_errors(tmp_path, args, message):
    config = write_config(tmp_path / "tiny.config", TINY_12AX)
    proc = run_rnn(train_args(config, tmp_path, *args), timeout=300)
    assert_one_line_error(proc, message)
    assert not (tmp_path / "model.001.index").exists()
