"""RETURNN's ``preload_from_files``: parameters taken from another checkpoint by layer name, with
``prefix``, ``var_name_mapping``, ``ignore_params``, ``ignore_missing``, the first entry winning,
``init_for_train`` only when training starts from scratch."""
from __future__ import annotations

import numpy as np
import pytest

from helpers import TINY_12AX, run_rnn, train_args, write_config
from test_checkpoint_fit import BASE, EXTRA, _net, _saved

from returnn.errors import ConfigError
from returnn.tf.preload import preload_from_files


def _values(net, layer):
    return [v.numpy() for v in net.layers[layer].variables]


def test_init_for_train_loads_by_name_and_keeps_initialisation_of_missing_with_ignore_missing(tmp_path):
    prefix, _ = _saved(tmp_path, BASE)
    net = _net(EXTRA)
    before = _values(net, "extra")
    spec = {"a": {"filename": prefix, "init_for_train": True, "ignore_missing": True}}
    assert preload_from_files(spec, net, starting_training=False) == 0  # a recognition entry is not this one
    assert preload_from_files(spec, net, starting_training=True) == 4
    for layer in ("hidden", "output"):
        assert all(np.all(v == 0.25) for v in _values(net, layer))
    for old, new in zip(before, _values(net, "extra")):
        np.testing.assert_array_equal(old, new)


def test_missing_parameter_without_ignore_missing_names_entry_file_and_parameter(tmp_path):
    prefix, _ = _saved(tmp_path, BASE)
    with pytest.raises(ConfigError, match=r"preload_from_files entry 'a': checkpoint .*model\.001 has no parameter "
                                          r"for 'extra/W', 'extra/b'"):
        preload_from_files({"a": {"filename": prefix}}, _net(EXTRA), starting_training=False)


def test_prefix_mapping_ignore_and_first_entry_wins(tmp_path):
    prefix, _ = _saved(tmp_path, BASE)
    layers = {"enc_hidden": BASE["hidden"], "output": dict(BASE["output"], **{"from": "enc_hidden"})}
    net = _net(layers)
    init_output = _values(net, "output")
    spec = {"1": {"filename": prefix, "prefix": "enc_"},  # enc_hidden <- hidden; output does not match the prefix
            "2": {"filename": prefix, "ignore_params": ["output/b"], "ignore_missing": True,
                  "var_name_mapping": {"enc_hidden/W": "output/W"}}}  # enc_hidden/W is already loaded by "1"
    assert preload_from_files(spec, net, starting_training=False) == 3
    assert all(np.all(v == 0.25) for v in _values(net, "enc_hidden"))
    w, bias = (net.layers["output"].variables[i].numpy() for i in (0, 1))
    w_name = net.layers["output"].variables[0].name
    assert w_name.startswith("W") and np.all(w == 0.25)
    np.testing.assert_array_equal(bias, init_output[1])  # ignored


def test_shape_mismatch_and_bad_options_are_one_line(tmp_path):
    prefix, _ = _saved(tmp_path, BASE)
    with pytest.raises(ConfigError, match=r"parameter 'hidden/W' has shape \(9, 8\) in .* but 'hidden/W' has \(9, 10\)"):
        preload_from_files({"a": {"filename": prefix}}, _net(dict(BASE, hidden=dict(BASE["hidden"], n_out=10))), False)
    with pytest.raises(ConfigError, match="unknown option"):
        preload_from_files({"a": {"filename": prefix, "init_for_trian": True}}, _net(BASE), False)
    with pytest.raises(ConfigError, match="not found"):
        preload_from_files({"a": {"filename": str(tmp_path / "nope.001")}}, _net(BASE), False)


def test_rnn_training_from_scratch_preloads_renamed_layer(tmp_path):
    first = write_config(tmp_path / "a.config", TINY_12AX.replace("num_epochs = 2", "num_epochs = 1"))
    assert run_rnn(train_args(first, tmp_path / "a")).returncode == 0
    spec = {"base": {"filename": str(tmp_path / "a" / "model.001"), "init_for_train": True,
                     "var_name_mapping": {"hid/W": "hidden/W", "hid/b": "hidden/b"}}}
    second = write_config(tmp_path / "b.config", TINY_12AX.replace('"hidden"', '"hid"').replace(
        "num_epochs = 2", "num_epochs = 1\npreload_from_files = %r" % (spec,)))
    proc = run_rnn(train_args(second, tmp_path / "b"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "preload_from_files 'base': 4 parameter(s) from %s" % spec["base"]["filename"] in proc.stdout
    assert "preload_from_files" not in proc.stderr  # a declared key: no unknown-key warning


def _engine(tmp_path, task: str, layers: dict, **keys):
    from returnn.config import Config
    from returnn.distributed.context import DistributedContext
    from returnn.tf.engine import Engine
    config = Config(dict({"task": task, "dev": {"class": "Task12AXDataset", "num_seqs": 4, "fixed_random_seed": 1},
                          "extern_data": {"data": {"dim": 9}, "classes": {"dim": 2, "sparse": True}},
                          "model": str(tmp_path / "fused"), "network": layers},
                         **keys))
    return Engine(config, DistributedContext.from_config(config))


def test_recognition_preload_goes_first_and_the_model_checkpoint_loads_only_the_rest(tmp_path):
    """RETURNN's order for eval/search/forward: the recognition entries, then the model checkpoint
    without what they loaded; so an LM fused in for decoding need not be in the AM's checkpoint,
    and a parameter both have takes the preloaded value."""
    from returnn.tf.checkpoint import CheckpointManager
    am_prefix, _ = _saved(tmp_path / "am", BASE)  # hidden, output: 0.25
    lm_net = _net({"lm": {"class": "linear", "activation": "tanh", "n_out": 8, "from": "data"},
                   "output": dict(BASE["output"], **{"from": "lm"})})
    for var in lm_net.variables:
        var.assign(np.full(var.shape, -0.5, dtype=np.float32))
    lm_prefix = CheckpointManager(str(tmp_path / "lm" / "model"), network=lm_net).save(1)
    fused = dict(BASE, lm={"class": "linear", "activation": "tanh", "n_out": 8, "from": "data"},
                 comb={"class": "combine", "kind": "add", "from": ["hidden", "lm"]},
                 output=dict(BASE["output"], **{"from": "comb"}))
    spec = {"lm": {"filename": lm_prefix, "ignore_missing": True, "ignore_params": ["output/b"]}}
    for task in ("eval", "search", "forward"):
        engine = _engine(tmp_path, task, fused, load=am_prefix, preload_from_files=spec)
        assert engine._load_for_inference() == 1
        got = {name: float(np.unique(engine.network.layers[name.split("/")[0]].variables[i].numpy())[0])
               for i, name in ((0, "hidden/W"), (0, "lm/W"), (0, "output/W"), (1, "output/b"))}
        assert got == {"hidden/W": 0.25, "lm/W": -0.5, "output/W": -0.5, "output/b": 0.25}, (task, got)
    # without the preload, the AM checkpoint lacks the LM: one line naming it
    engine = _engine(tmp_path, "eval", fused, load=am_prefix)
    with pytest.raises(ConfigError, match="lacks layer 'lm'"):
        engine._load_for_inference()


def test_task_search_builds_only_the_search_network(tmp_path):
    """As RETURNN (use_search_flag): a net that only builds in search (a choice without target:
    its labels come from the scores) is not first built as a training network."""
    from returnn.tf.network import TFNetwork
    built = []
    original = TFNetwork.__init__

    def spy(self, *args, **kwargs):
        built.append(kwargs.get("search"))
        original(self, *args, **kwargs)
    TFNetwork.__init__ = spy
    try:
        _engine(tmp_path, "search", BASE)
        _engine(tmp_path, "eval", BASE)
    finally:
        TFNetwork.__init__ = original
    assert built == [True, False]
