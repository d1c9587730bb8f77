"""RETURNN's old config forms: the line format ("key value"), dataset strings
("Module::Class(args)", "Class:args", "config:name"), and the network from hidden_size & co."""
import pytest

from helpers import assert_one_line_error, describe, run_rnn, train_args
from returnn.config import Config, set_global_config
from returnn.datasets import dataset_dict_from_string
from returnn.errors import ConfigError, DataError
from returnn.old_network import apply_old_network_keys

LINES = """\
# dataset
train GeneratingDataset::Task12AXDataset(num_seqs=40)
dev Task12AXDataset:num_seqs=10,fixed_random_seed=2
num_inputs 9
num_outputs 2   # trailing comment

hidden_size 10,12
hidden_type forward
activation tanh,sigmoid
dropout 0.1,0.0,0.2
bidirectional false
batch_size 500
max_seqs 10
chunking 50:25
adam true
learning_rate 0.01
num_epochs 2
"""


def load(tmp_path, text, name="c.config"):
    path = tmp_path / name
    path.write_text(text)
    config = Config()
    config.load_file(str(path))
    return config


def test_line_format_values_and_include(tmp_path):
    (tmp_path / "base.config").write_text("learning_rate 0.5\ntask train\n")
    config = load(tmp_path, LINES + "include base.config\n")
    assert config.int("num_inputs") == 9 and config.int("num_outputs") == 2
    assert config.int_list("hidden_size") == [10, 12] and config.list("activation") == ["tanh", "sigmoid"]
    assert config.value("chunking") == "50:25" and config.bool("adam") is True and config.bool("bidirectional") is False
    assert config.float("learning_rate") == 0.5 and config.value("task") == "train"
    assert config.value("train") == "GeneratingDataset::Task12AXDataset(num_seqs=40)"
    with pytest.raises(ConfigError, match=r"bad\.config:2: expected 'key value', got 'lonely'"):
        load(tmp_path, "task train\nlonely\n", "bad.config")
    # a config without '#!' line that is Python code stays Python
    assert load(tmp_path, "x = 3\ny = [x] * 2\n", "py.config").typed_value("y") == [3, 3]


def test_dataset_strings():
    assert dataset_dict_from_string("GeneratingDataset::Task12AXDataset(num_seqs=40)") == \
        {"class": "Task12AXDataset", "num_seqs": 40}
    assert dataset_dict_from_string("Task12AXDataset:num_seqs=10,fixed_random_seed=2") == \
        {"class": "Task12AXDataset", "num_seqs": 10, "fixed_random_seed": 2}
    assert dataset_dict_from_string("a.hdf,b.hdf") == {"class": "HDFDataset", "files": ["a.hdf", "b.hdf"]}
    assert dataset_dict_from_string("{'class': 'HDFDataset', 'files': ['x.hdf']}")["files"] == ["x.hdf"]
    set_global_config(Config({"my_train": {"class": "Task12AXDataset", "num_seqs": 5}}))
    try:
        assert dataset_dict_from_string("config:my_train") == {"class": "Task12AXDataset", "num_seqs": 5}
    finally:
        set_global_config(Config())
    with pytest.raises(DataError, match="dataset train: cannot read the options"):
        dataset_dict_from_string("Task12AXDataset(num_seqs=__import__('os').getpid())", "train")


def test_network_from_hidden_keys(tmp_path):
    config = load(tmp_path, LINES)
    apply_old_network_keys(config)
    assert config.typed_value("network") == {
        "hidden_0": {"class": "forward", "n_out": 10, "activation": "tanh", "from": ["data"], "dropout": 0.1},
        "hidden_1": {"class": "forward", "n_out": 12, "activation": "sigmoid", "from": ["hidden_0"]},
        "output": {"class": "softmax", "loss": "ce", "from": ["hidden_1"], "dropout": 0.2}}
    json_net = load(tmp_path, 'network {"network": {"output": {"class": "softmax", "loss": "ce"}}}\n', "j.config")
    apply_old_network_keys(json_net)
    assert json_net.typed_value("network") == {"output": {"class": "softmax", "loss": "ce"}}


def test_line_format_config_trains(tmp_path):
    config = tmp_path / "old.config"
    config.write_text(LINES + "pretrain default\n")
    proc = run_rnn(train_args(config, tmp_path), timeout=300)
    assert proc.returncode == 0, describe(proc)
    assert "network for epoch 2: layers hidden_0, hidden_1, output" in proc.stdout, describe(proc)
    assert "epoch 2 score" in proc.stdout and "WARNING" not in proc.stdout + proc.stderr, describe(proc)


def test_bad_line_format_is_one_line(tmp_path):
    config = tmp_path / "bad.config"
    config.write_text(LINES.replace("num_inputs 9", "num_inputs"))
    proc = run_rnn(train_args(config, tmp_path), timeout=300)
    assert_one_line_error(proc, "bad.config:4: expected 'key value', got 'num_inputs'")
