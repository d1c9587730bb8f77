"""Value forms RETURNN's config getters accept for keys this engine reads, read the same way here:
``learning_rate_decay`` (RETURNN's newer name, read first) and a decay function, a list of error
measures, ``log_verbosity`` per log target, ``cache_size`` per dataset, ``num_outputs`` for the key
``target`` and as ``[dim, ndim]``, an int for ``data`` in ``num_outputs`` (dense, as RETURNN)."""
from __future__ import annotations

import pytest

from returnn.__main__ import _verbosity
from returnn.config import Config
from returnn.datasets import cache_size_for
from returnn.extern_data import extern_data_from_config
from returnn.learning_rate_control import LearningRateControl


def rates(control, errors):
    out = []
    for epoch, err in enumerate(errors, start=1):
        out.append(control.get_learning_rate_for_epoch(epoch))
        control.set_epoch_error(epoch, err)
    return out + [control.get_learning_rate_for_epoch(len(errors) + 1)]


WORSE = [{"dev_score": 1.0, "dev_error": 0.5}, {"dev_score": 2.0, "dev_error": 0.6}]


def test_learning_rate_decay_name_and_function():
    base = {"learning_rate_control": "newbob", "learning_rate": 1.0}
    assert rates(LearningRateControl.from_config(Config(base)), WORSE)[-1] == 0.5
    assert rates(LearningRateControl.from_config(Config(dict(base, learning_rate_decay=0.8,
                                                             newbob_learning_rate_decay=0.3))), WORSE)[-1] == 0.8
    control = LearningRateControl.from_config(Config(dict(base, newbob_learning_rate_decay=lambda lr: lr - 0.25)))
    assert rates(control, WORSE)[-1] == 0.75


def test_error_measure_list_takes_the_first_present():
    config = {"learning_rate_control": "newbob", "learning_rate_control_error_measure": ["dev_missing", "dev_error"]}
    control = LearningRateControl.from_config(Config(config))
    rates(control, WORSE)
    assert control.error_key(1) == "dev_error"


def test_log_verbosity_per_target():
    assert _verbosity(Config({"log_verbosity": [5, 2]})) == 5
    assert _verbosity(Config({"log_verbosity": 4})) == 4


@pytest.mark.parametrize("value, expected", [
    ("1G,2G,0", {"train": "1G", "dev": "2G", "eval": "0", "search_data": "0", "devtrain": "2G", "train_0": "1G"}),
    (["1G", "2G"], {"train": "1G", "dev": "2G", "eval": "0"}),
    (["3G"], {"train": "3G", "dev": "3G"}),
    ("512M", {"train": "512M", "eval": "512M"}),
])
def test_cache_size_per_dataset(value, expected):
    for name, size in expected.items():
        assert cache_size_for(value, name) == size


def test_num_outputs_forms():
    specs = extern_data_from_config(Config({"num_outputs": [7, 1], "target": "orth", "num_inputs": 3}))
    assert specs["orth"].sparse and specs["orth"].dim == 7 and not specs["data"].sparse
    specs = extern_data_from_config(Config({"num_outputs": {"data": 9, "classes": 4}, "sparse_input": True}))
    assert not specs["data"].sparse and specs["data"].dim == 9 and specs["classes"].sparse


def test_learning_rates_as_a_string_of_a_json_config(tmp_path):
    """RETURNN evaluates a string ``learning_rates`` and requires a dict (its mdlstm demo's JSON config);
    here it is a literal, never evaluated."""
    from returnn.config import load_config_from_args
    from returnn.errors import ConfigError
    path = tmp_path / "c.json"
    path.write_text('{"learning_rate": 0.5, "learning_rates": "{1: 0.0005, 3: 0.0003}"}')
    config = load_config_from_args([str(path)])
    assert config.typed_value("learning_rates") == {1: 0.0005, 3: 0.0003}
    control = LearningRateControl.from_config(config)
    assert [control.get_learning_rate_for_epoch(e) for e in (1, 2, 3, 4)] == [0.0005, 0.0005, 0.0003, 0.0003]
    path.write_text('{"learning_rates": "[0.1, 0.2]"}')
    with pytest.raises(ConfigError, match="'learning_rates': a string must be a dict literal"):
        load_config_from_args([str(path)])
    path.write_text('{"learning_rates": "__import__(\'os\').getcwd()"}')
    with pytest.raises(ConfigError, match="a string must be a dict literal"):
        load_config_from_args([str(path)])
