"""Resuming after the network of the config changed: a layer renamed, removed or added, a shape
changed. The error names the checkpoint and the layer/parameter; ``load_ignore_missing_vars``
(RETURNN's key) lets a new layer start from its initialisation while the others are restored."""
from __future__ import annotations

import numpy as np
import pytest

from helpers import TINY_12AX, assert_one_line_error, run_rnn, train_args, write_config

BASE = {
    "hidden": {"class": "linear", "activation": "tanh", "n_out": 8, "from": "data"},
    "output": {"class": "softmax", "loss": "ce", "from": "hidden"},
}


def _net(layers: dict):
    from returnn.tensor import Data
    from returnn.tf.network import TFNetwork
    extern = {"data": Data("data", shape=(None, 9)), "classes": Data("classes", shape=(None,), dim=2, sparse=True,
                                                                      dtype="int32")}
    return TFNetwork(layers, extern)


def _saved(tmp_path, layers: dict) -> tuple:
    """A checkpoint of a network built from ``layers``; returns (prefix, network)."""
    from returnn.tf.checkpoint import CheckpointManager
    net = _net(layers)
    for var in net.variables:  # values that differ from any initialisation
        var.assign(np.full(var.shape, 0.25, dtype=np.float32))
    return CheckpointManager(str(tmp_path / "model"), network=net).save(1), net


def _restore(prefix: str, layers: dict, ignore_missing: bool = False):
    from returnn.tf.checkpoint import CheckpointManager
    net = _net(layers)
    manager = CheckpointManager(prefix.rsplit(".", 1)[0], network=net)
    manager.ignore_missing_vars = ignore_missing
    manager.restore(prefix)
    return net


RENAMED = {"hid": BASE["hidden"], "output": dict(BASE["output"], **{"from": "hid"})}
EXTRA = dict(BASE, extra={"class": "linear", "activation": "tanh", "n_out": 4, "from": "data",
                          "is_output_layer": True})  # built although no loss needs it
REMOVED = {"output": dict(BASE["output"], **{"from": "data"})}


@pytest.mark.parametrize("layers,needles", [
    (RENAMED, ["lacks layer 'hid' (W, b) of the network", "lacks layer 'hidden' (W, b) of the checkpoint",
               "(renamed?)"]),
    (EXTRA, ["the checkpoint lacks layer 'extra' (W, b)"]),
    (dict(BASE, hidden=dict(BASE["hidden"], n_out=10)),
     ["layer 'hidden' parameter 'W' has shape (9, 8) in the checkpoint but (9, 10) in the network"]),
    (REMOVED, ["layer 'output' parameter 'W' has shape (8, 2) in the checkpoint but (9, 2)"]),
    (dict(BASE, unused={"class": "linear", "n_out": 8, "from": "data"}, output=dict(BASE["output"], **{"from": "unused"}),
          hidden=None),
     ["the network lacks layer 'hidden' (W, b) of the checkpoint"]),
], ids=["renamed", "added", "n_out", "removed", "removed_parallel"])
def test_changed_network_names_checkpoint_and_layer(tmp_path, layers, needles):
    from returnn.errors import ConfigError
    layers = {k: v for k, v in layers.items() if v is not None}
    prefix, _ = _saved(tmp_path, BASE)
    with pytest.raises(ConfigError) as info:
        _restore(prefix, layers)
    message = str(info.value)
    assert message.startswith("checkpoint %s does not fit the network of the config: " % prefix)
    for needle in needles:
        assert needle in message, message
    assert "\n" not in message


def test_ignore_missing_vars_restores_the_rest_and_keeps_initialisation_of_new_layer(tmp_path):
    prefix, _ = _saved(tmp_path, BASE)
    fresh = _net(EXTRA)
    net = _restore(prefix, EXTRA, ignore_missing=True)
    for name in ("hidden", "output"):
        for var in net.layers[name].variables:
            np.testing.assert_array_equal(var.numpy(), 0.25)
    extra_w = net.layers["extra"].variables
    assert extra_w and all(not np.all(v.numpy() == 0.25) for v in extra_w if v.shape.rank == 2)
    for var, init in zip(extra_w, fresh.layers["extra"].variables):  # same seed: the same initialisation
        np.testing.assert_allclose(var.numpy(), init.numpy())


def test_ignore_missing_vars_still_refuses_changed_shapes(tmp_path):
    from returnn.errors import ConfigError
    prefix, _ = _saved(tmp_path, BASE)
    with pytest.raises(ConfigError, match="parameter 'W' has shape"):
        _restore(prefix, dict(BASE, hidden=dict(BASE["hidden"], n_out=10)), ignore_missing=True)


def test_rnn_resume_after_rename_is_one_line_and_ignore_missing_trains_on(tmp_path):
    config = write_config(tmp_path / "a.config", TINY_12AX.replace("num_epochs = 2", "num_epochs = 1"))
    assert run_rnn(train_args(config, tmp_path)).returncode == 0
    renamed = write_config(tmp_path / "b.config", TINY_12AX.replace('"hidden"', '"hid"'))
    proc = run_rnn(train_args(renamed, tmp_path))
    assert_one_line_error(proc, str(tmp_path / "model.001"), "'hid'", "'hidden'", "renamed")
    proc = run_rnn(train_args(renamed, tmp_path, "++load_ignore_missing_vars", "True"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "load_ignore_missing_vars" in proc.stdout + proc.stderr
    assert (tmp_path / "model.002.index").exists()


def test_layer_only_in_checkpoint_is_named_and_left_out(tmp_path, monkeypatch):
    """RETURNN's restore leaves out the values of a layer the network lacks (a search network without
    a training-only layer): restored with a warning naming it, with and without ignore_missing."""
    import io
    from returnn.log import log
    prefix, _ = _saved(tmp_path, EXTRA)
    for ignore in (False, True):
        warnings = io.StringIO()
        monkeypatch.setattr(log, "warn", warnings)
        net = _restore(prefix, BASE, ignore_missing=ignore)
        assert all(np.all(v.numpy() == 0.25) for v in net.variables)
        assert "the network lacks layer 'extra' (W, b) of the checkpoint (removed?)" in warnings.getvalue()
