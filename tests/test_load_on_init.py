"""RETURNN's ``load_on_init`` of subnetwork layers: the subnetwork's parameters initialised from
another model's checkpoint (the parameter names inside the subnetwork = the names in the file),
at the top level, nested, and in rec units; applied where parameters are freshly initialised
(training from scratch, ``allow_random_model_init``), never over a restored checkpoint; one-line
refusals where it is not applied."""
from __future__ import annotations

import numpy as np
import pytest

from helpers import TINY_12AX, assert_one_line_error, describe, run_rnn, train_args, write_config
from test_checkpoint_fit import BASE, _net, _saved

from returnn.errors import ConfigError, NetworkError
from returnn.tf.preload import apply_load_on_init, load_on_init_entries

LM = {"hidden": BASE["hidden"], "output": {"class": "linear", "activation": None, "n_out": 2, "from": "hidden"}}


def _stored(prefix: str) -> dict:
    import tensorflow as tf
    from returnn.tf.checkpoint_fit import stored_params
    reader = tf.train.load_checkpoint(prefix)
    return {name: reader.get_tensor(name) for name in stored_params(reader.get_variable_to_shape_map())}


def _params(net) -> dict:
    from returnn.tf.returnn_params import network_params
    return {name: p.value() for name, p in network_params(net).items()}


def test_entries_found_with_their_parameter_scopes():
    sub = {"class": "subnetwork", "from": "data", "load_on_init": "/m/lm.005", "subnetwork": LM}
    inner = dict(sub, load_on_init={"filename": "/m/x.001", "ignore_missing": True})
    net = {"lm": sub, "outer": {"class": "subnetwork", "from": "data", "subnetwork": {"inner": inner, "output": {
        "class": "copy", "from": "inner"}}},
           "dec": {"class": "rec", "from": "data", "unit": {"lm": sub, "output": {"class": "copy", "from": "lm"}}},
           "plain": {"class": "subnetwork", "from": "data", "subnetwork": LM}}
    assert load_on_init_entries(net) == [("lm/", "/m/lm.005"), ("outer/inner/", inner["load_on_init"]),
                                         ("dec/rec/lm/", "/m/lm.005")]


@pytest.mark.parametrize("where", ["top", "rec"])
def test_subnetwork_parameters_come_from_the_file_and_the_rest_keeps_its_initialisation(tmp_path, where):
    prefix, _ = _saved(tmp_path, LM)
    sub = {"class": "subnetwork", "from": "data", "load_on_init": prefix, "subnetwork": LM}
    if where == "top":
        layers = {"lm": sub, "mix": {"class": "linear", "n_out": 3, "from": "lm"},
                  "output": {"class": "softmax", "loss": "ce", "from": "mix"}}
        scope = "lm/"
    else:
        layers = {"output": {"class": "rec", "from": "data", "target": "classes", "unit": {
            "lm": sub, "output": {"class": "softmax", "loss": "ce", "from": "lm"}}}}
        scope = "output/rec/lm/"
    net = _net(layers)
    before = _params(net)
    assert apply_load_on_init(net) == 4
    after, stored = _params(net), _stored(prefix)
    for name in ("hidden/W", "hidden/b", "output/W", "output/b"):
        np.testing.assert_array_equal(after[scope + name], stored[name])
        assert np.all(after[scope + name] == 0.25)
    others = [n for n in after if not n.startswith(scope)]
    assert others
    for name in others:  # not the subnetwork's: untouched
        np.testing.assert_array_equal(after[name], before[name])


def test_missing_parameters_and_bad_values_are_one_line(tmp_path):
    prefix, _ = _saved(tmp_path, {"hidden": BASE["hidden"], "output": dict(LM["output"])})
    bigger = dict(LM, extra={"class": "linear", "n_out": 2, "from": "hidden", "is_output_layer": True})
    sub = {"class": "subnetwork", "from": "data", "subnetwork": bigger}
    layers = {"lm": dict(sub, load_on_init=prefix), "output": {"class": "softmax", "loss": "ce", "from": "lm"}}
    with pytest.raises(ConfigError, match=r"layer 'lm' \(subnetwork\) option 'load_on_init': checkpoint .* has no "
                                          r"parameter for 'lm/extra/W'"):
        apply_load_on_init(_net(layers))
    layers["lm"]["load_on_init"] = {"filename": prefix, "ignore_missing": True}
    assert apply_load_on_init(_net(layers)) == 4
    layers["lm"]["load_on_init"] = {"filename": prefix, "prefix": "x"}
    with pytest.raises(ConfigError, match="unknown option.*prefix"):
        apply_load_on_init(_net(layers))
    layers["lm"]["load_on_init"] = 5
    with pytest.raises(ConfigError, match="expected a checkpoint name"):
        apply_load_on_init(_net(layers))
    layers["lm"]["load_on_init"] = lambda: prefix  # RETURNN: a callable giving the value
    assert apply_load_on_init(_net(dict(layers, lm=dict(layers["lm"], subnetwork=LM)))) == 4


def test_where_it_is_not_applied_it_is_refused():
    lm = {"class": "subnetwork", "from": "data", "load_on_init": "/m/lm.005", "subnetwork": LM}
    with pytest.raises(NetworkError, match="masked_computation.*'load_on_init' is not supported here"):
        _net({"m": {"class": "masked_computation", "mask": "data", "from": "data", "unit": lm},
              "output": {"class": "softmax", "loss": "ce", "from": "m"}})
    with pytest.raises(ConfigError, match="'lm'.*'load_on_init' together with 'name_scope'"):
        _net({"lm": dict(lm, name_scope="x"), "output": {"class": "softmax", "loss": "ce", "from": "lm"}})


LM_CONFIG = TINY_12AX.replace("num_epochs = 2", "num_epochs = 1")
MAIN = TINY_12AX.replace('''network = {
    "hidden": {"class": "linear", "activation": "tanh", "n_out": 8, "from": ["data"]},
    "output": {"class": "softmax", "loss": "ce", "from": ["hidden"], "dropout": 0.3},
}''', '''network = {
    "lm": {"class": "subnetwork", "from": "data", "load_on_init": _LM_MODEL, "subnetwork": {
        "hidden": {"class": "linear", "activation": "tanh", "n_out": 8, "from": "data", "trainable": False},
        "output": {"class": "softmax", "from": "hidden", "n_out": 2, "trainable": False}}},
    "output": {"class": "softmax", "loss": "ce", "from": ["lm"]},
}''')


def test_rnn_training_from_scratch_loads_it_and_a_resume_keeps_its_own_checkpoint(tmp_path):
    lm_dir = tmp_path / "lm"
    proc = run_rnn(train_args(write_config(tmp_path / "lm.config", LM_CONFIG), lm_dir))
    assert proc.returncode == 0, describe(proc)
    lm_model = str(lm_dir / "model.001")
    config = write_config(tmp_path / "main.config", "_LM_MODEL = %r\n" % lm_model + MAIN)
    proc = run_rnn(train_args(config, tmp_path / "main", "++num_epochs", "1"))
    assert proc.returncode == 0, describe(proc)
    assert "layer 'lm' (subnetwork) option 'load_on_init': 4 parameter(s) from %s" % lm_model in proc.stdout
    stored, trained = _stored(lm_model), _stored(str(tmp_path / "main" / "model.001"))
    for name in ("hidden/W", "hidden/b", "output/W", "output/b"):  # not trainable: still the LM's values
        np.testing.assert_array_equal(trained["lm/" + name], stored[name])
    # epoch 2 resumes from model.001: nothing is loaded over it
    proc = run_rnn(train_args(config, tmp_path / "main", "++num_epochs", "2"))
    assert proc.returncode == 0 and "load_on_init" not in proc.stdout, describe(proc)
    # a file that does not exist: one line naming the layer
    bad = write_config(tmp_path / "bad.config", "_LM_MODEL = %r\n" % str(tmp_path / "nope.001") + MAIN)
    assert_one_line_error(run_rnn(train_args(bad, tmp_path / "bad")), "layer 'lm' (subnetwork) option 'load_on_init'",
                          "not found")
