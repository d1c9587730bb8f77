"""A searching ``choice`` with a ``target`` has the target's template (RETURNN's
``ChoiceLayer.get_out_data_from_opts``): its labels carry the target's class dim in search as in
training; scores of another size than the target's classes are refused in search (RETURNN asserts
``sources[0].output.dim == output.dim`` there)."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from returnn.config import Config
from returnn.errors import NetworkError
from returnn.extern_data import extern_data_from_config
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork


def _extern():
    return extern_data_from_config(Config({"extern_data": {
        "data": {"dim": 2}, "classes": {"dim": 5, "sparse": True}}}))


def _net(n_scores: int = 5):
    unit = {"embed": {"class": "linear", "activation": None, "with_bias": False, "from": "prev:output", "n_out": 3},
            "s": {"class": "linear", "activation": "tanh", "from": ["embed", "base:enc_last"], "n_out": 4},
            "prob": {"class": "softmax", "from": "s", "n_out": n_scores},
            "output": {"class": "choice", "target": "classes", "beam_size": 2, "from": "prob", "initial_output": 0},
            "end": {"class": "compare", "from": "output", "value": 0}}
    return {"encoder": {"class": "linear", "activation": "tanh", "n_out": 4, "from": "data:data"},
            "enc_last": {"class": "reduce", "mode": "max", "axes": "T", "from": "encoder"},
            "output": {"class": "rec", "from": [], "target": "classes", "max_seq_len": 4, "unit": unit}}


def test_search_labels_have_the_targets_class_dim():
    extern = _extern()
    for search in (False, True):
        net = TFNetwork(_net(), extern, search=search)
        choice = net.layers["output"].sub_layers()["output"]
        assert choice.output.sparse_dim is extern["classes"].sparse_dim, search
        assert net.layers["output"].output.sparse_dim is extern["classes"].sparse_dim, search
    rng = np.random.RandomState(0)
    batch = {"data": tf.constant(rng.randn(2, 3, 2).astype(np.float32)), "data:seq_len": tf.constant([3, 0])}
    out = net.forward(batch, RunContext(False))["output"]
    labels, lens = out.tensor.numpy(), out.seq_len.numpy()
    assert labels.shape[0] == 2 and (labels >= 0).all() and (labels < 5).all()
    assert (lens <= 4).all()


def test_search_refuses_scores_of_another_size_than_the_target():
    TFNetwork(_net(n_scores=4), _extern())  # teacher forcing: the target is the value, RETURNN builds it
    with pytest.raises(NetworkError, match=r"'output/output'.*in search, its scores \(source 0\) have 4 labels, "
                                           r"its target 'classes' has 5"):
        TFNetwork(_net(n_scores=4), _extern(), search=True)
