"""Options every RETURNN layer has (its LayerBase): ``batch_norm`` on the output, the constraints
``spatial_smoothing`` and ``darc1`` in the training objective, against numpy references."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from returnn.errors import NetworkError
from returnn.extern_data import data_from_opts
from returnn.tf.layers.base import RunContext
from returnn.tf.network import TFNetwork
from returnn.tf.returnn_params import returnn_param_shapes, set_returnn_param_values

LENGTHS = (6, 4, 0)


def _extern(dim=9):
    return {"data": data_from_opts("data", {"dim": dim}), "classes": data_from_opts("classes", {"dim": 3, "sparse": True})}


def _batch(dim=9):
    rng = np.random.RandomState(3)
    x = rng.randn(len(LENGTHS), max(LENGTHS), dim).astype(np.float32)
    x[np.arange(max(LENGTHS))[None, :] >= np.array(LENGTHS)[:, None]] = 1e3  # garbage on padded frames
    lens = tf.constant(LENGTHS, tf.int32)
    y = np.zeros((len(LENGTHS), max(LENGTHS)), np.int32)
    return {"data": tf.constant(x), "data:seq_len": lens, "classes": tf.constant(y), "classes:seq_len": lens}, x


def _real(a):
    return a[np.arange(a.shape[1])[None, :] < np.array(LENGTHS)[:, None]]


@pytest.mark.parametrize("version,names", [
    (0, ["h/batch_norm/h_h_output_beta", "h/batch_norm/h_h_output_gamma", "h/batch_norm/h_h_output_mean",
         "h/batch_norm/h_h_output_variance"]),
    (12, ["h/batch_norm/v2_beta", "h/batch_norm/v2_gamma", "h/batch_norm/v2_mean", "h/batch_norm/v2_variance"]),
])
def test_batch_norm_option_normalises_the_output_like_a_batch_norm_layer(version, names, monkeypatch):
    from returnn.config import Config, set_global_config
    set_global_config(Config({"behavior_version": version}))
    try:
        net = TFNetwork({"h": {"class": "linear", "n_out": 4, "from": "data", "activation": "tanh",
                               "batch_norm": {"masked_time": True}},
                         "output": {"class": "softmax", "loss": "ce", "from": "h"}}, _extern())
        shapes = returnn_param_shapes(net)
        assert sorted(n for n in shapes if "batch_norm" in n) == names
        assert shapes[names[2]] == ((1, 1, 4) if version == 0 else (4,))
        rng = np.random.RandomState(1)
        values = {n: (rng.rand(*s) + 0.5).astype(np.float32) for n, s in shapes.items()}
        set_returnn_param_values(net, values)
        batch, x = _batch()
        out = net.forward(batch, RunContext(False), only=["h"])["h"].tensor.numpy()
    finally:
        set_global_config(Config({}))
    v = {n.rsplit("_", 1)[-1] if version == 0 else n.rsplit("v2_", 1)[-1]: values[n].reshape(-1) for n in names}
    h = np.tanh(x @ values["h/W"] + values["h/b"])
    if version == 0:  # RETURNN before behavior_version 12: evaluation updates the statistics and uses them at once
        real = _real(h)
        v["mean"] = v["mean"] + (real.mean(0) - v["mean"]) * 0.99
        v["variance"] = v["variance"] + (real.var(0) - v["variance"]) * 0.99
    ref = (h - v["mean"]) / np.sqrt(v["variance"] + 1e-3) * v["gamma"] + v["beta"]
    np.testing.assert_allclose(_real(out), _real(ref), rtol=1e-4, atol=1e-4)


def _smoothing_ref(frame: np.ndarray, h: int, w: int) -> float:
    img = frame.reshape(h, w)
    img = np.pad(img, 1, mode="wrap")
    kernel = np.full((3, 3), -0.125)
    kernel[1, 1] = 1.0
    total = 0.0
    for i in range(h):
        for j in range(w):
            total += float(np.sum(img[i:i + 3, j:j + 3] * kernel)) ** 2
    return total


def test_spatial_smoothing_and_darc1_enter_the_training_objective():
    net = TFNetwork({"h": {"class": "linear", "n_out": 12, "from": "data", "activation": None,
                           "spatial_smoothing": 0.3, "darc1": 0.2},
                     "output": {"class": "softmax", "loss": "ce", "from": "h"}}, _extern())
    assert net.output_constraint_layers == ["h"] and net.has_constraints
    batch, x = _batch()
    outputs = net.forward(batch, RunContext(False), only=["h"])
    got = float(net.constraints(outputs))
    h = _real(x @ net.layers["h"].W.numpy() + net.layers["h"].bias.numpy())  # (frames, 12): a 3 x 4 grid
    smooth = sum(_smoothing_ref(frame, 4, 3) for frame in h)
    darc = float(np.max(np.sum(np.abs(h), axis=0)))
    assert got == pytest.approx(0.3 * smooth + 0.2 * darc, rel=1e-4)


@pytest.mark.parametrize("layer,needle", [
    ({"class": "linear", "n_out": 8, "from": "data", "spatial_smoothing": 0.1}, "h x w grid with h, w >= 3"),
    ({"class": "linear", "n_out": 9, "from": "data", "activation": "tanh", "darc1": 0.1}, "'darc1' with activation"),
    ({"class": "linear", "n_out": 9, "from": "data", "batch_norm": {"momentun": 0.1}}, "unknown batch_norm option"),
])
def test_bad_base_options_are_one_line(layer, needle):
    with pytest.raises(NetworkError, match=needle):
        TFNetwork({"output": dict(layer, is_output_layer=True)}, _extern())


def test_initial_output_outside_a_rec_unit_is_accepted_and_changes_nothing():
    """RETURNN's LayerBase takes initial_output on every layer; outside a rec unit nothing reads it (the
    i6 segmental configs set it on a top-level rec layer): same parameters, same output."""
    batch, _ = _batch()
    outs = []
    for extra in ({}, {"initial_output": 0}):
        net = TFNetwork({"output": dict({"class": "rec", "unit": "nativelstm2", "n_out": 3, "from": "data"}, **extra)},
                        _extern())
        assert returnn_param_shapes(net) == {"output/rec/W": (9, 12), "output/rec/W_re": (3, 12), "output/rec/b": (12,)}
        set_returnn_param_values(net, {n: np.full(s, 0.1, np.float32) for n, s in returnn_param_shapes(net).items()})
        outs.append(net.forward(batch, RunContext(False))["output"].tensor.numpy())
    np.testing.assert_allclose(_real(outs[0]), _real(outs[1]))


@pytest.mark.parametrize("version,train,refused", [(0, True, False), (1, True, True), (12, True, True),
                                                   (12, False, False)])
def test_batch_norm_with_masked_time_needs_a_time_axis(version, train, refused):
    """RETURNN's batch norm flattens the time axis for masked_time (copy_time_flattened): on an output without
    one it fails wherever it takes batch statistics (training; and evaluation before version 12); RETURNN of
    2018 normalised over the batch, kept for configs without a behavior_version."""
    from returnn.config import Config, set_global_config
    set_global_config(Config({"behavior_version": version}))
    net_dict = {"r": {"class": "reduce", "mode": "max", "axis": "T", "from": "data"},
                "output": {"class": "linear", "n_out": 4, "from": "r", "batch_norm": {"masked_time": True}}}
    try:
        if refused:
            with pytest.raises(NetworkError, match="masked_time on .* no time axis"):
                TFNetwork(net_dict, _extern(), train_flag=train)
        else:
            TFNetwork(net_dict, _extern(), train_flag=train)
            TFNetwork(dict(net_dict, output=dict(net_dict["output"], batch_norm={"masked_time": False})), _extern())
    finally:
        set_global_config(Config({}))
