"""A ``choice`` with ``input_type = "regression"`` (RETURNN's Tacotron decoders): with teacher
forcing its value is the dense target's frames, so ``prev:choice`` is the previous target frame
(zeros at the first step); search through it is refused in one line."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from returnn.config import Config
from returnn.errors import NetworkError
from returnn.extern_data import extern_data_from_config
from returnn.tensor import SpatialDim
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork

DEC = SpatialDim("dec time")


def _extern():
    return extern_data_from_config(Config({"extern_data": {
        "data": {"dim": 3}, "target": {"dim": 4, "shape": (None, 4), "same_dim_tags_as": {"t": DEC}}}}))


def _net(choice_extra=None):
    unit = {
        "choice": dict({"class": "choice", "from": ["output"], "target": "target", "input_type": "regression",
                        "beam_size": 1}, **(choice_extra or {})),
        "prev_frame": {"class": "copy", "from": ["prev:choice"], "is_output_layer": True},
        "pre": {"class": "slice", "axis": "F", "slice_start": 2, "from": ["prev:choice"]},
        "s": {"class": "rnn_cell", "unit": "LSTMBlock", "from": ["pre"], "n_out": 5},
        "output": {"class": "linear", "activation": None, "from": ["s"], "n_out": 4, "target": "target",
                   "loss": "mse"},
        "end": {"class": "compare", "from": ["output"], "kind": "greater", "value": 0.5}}
    return {"decoder": {"class": "rec", "from": [], "target": "target", "max_seq_len": 10, "unit": unit},
            "output": {"class": "copy", "from": ["decoder/prev_frame"]}}


def _batch(lens):
    rng = np.random.RandomState(0)
    t = max(lens + [1])
    target = rng.randn(len(lens), t, 4).astype(np.float32)
    return {"data": tf.constant(rng.randn(len(lens), 2, 3).astype(np.float32)), "data:seq_len": tf.constant([2] * len(lens)),
            "target": tf.constant(target), "target:seq_len": tf.constant(lens, dtype=tf.int32)}, target


@pytest.mark.parametrize("lens", [[4, 2], [3, 0]])
def test_teacher_forcing_feeds_the_previous_target_frame(lens):
    net = TFNetwork(_net(), _extern())
    assert not net.layers["decoder"].sub_layers()["choice"].output.sparse
    batch, target = _batch(lens)
    out = net.forward(batch, RunContext(True))
    prev = out["output"].tensor.numpy()
    for b, n in enumerate(lens):
        ref = np.concatenate([np.zeros((1, 4), np.float32), target[b, :max(n - 1, 0)]])[:n]
        np.testing.assert_allclose(prev[b, :n], ref, rtol=1e-6)
    losses = net.compute_losses(out, batch)
    assert np.isfinite(float(losses["decoder/output"].loss_sum))


def test_regression_needs_a_dense_target():
    TFNetwork(_net(), _extern(), search=True)  # search through it: tests/test_rec_search.py (9edd89f)
    ext = extern_data_from_config(Config({"extern_data": {
        "data": {"dim": 3}, "target": {"dim": 4, "sparse": True, "same_dim_tags_as": {"t": DEC}}}}))
    with pytest.raises(NetworkError, match="needs a dense target"):
        TFNetwork(_net(), ext)
    with pytest.raises(NetworkError, match="input_type"):
        TFNetwork(_net({"input_type": "probs"}), _extern())
