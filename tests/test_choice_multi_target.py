"""A ``choice`` with several sources and a list of targets (RETURNN's test_attention_two_targets):
``NAME/out_I`` sub-outputs, the targets in training, the pruned combinations in search (against
numpy), in-loop ``is_output_layer`` layers read from outside after a search."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from returnn.config import Config
from returnn.errors import NetworkError
from returnn.extern_data import extern_data_from_config
from returnn.tensor import SpatialDim
from returnn.tf.layers import RunContext
from returnn.tf.layers.rec_net.search import _combine_sources, _combined_labels
from returnn.tf.network import TFNetwork

DEC = SpatialDim("dec time")


def _extern():
    return extern_data_from_config(Config({"extern_data": {
        "data": {"dim": 2}, "classes_0": {"dim": 7, "sparse": True, "same_dim_tags_as": {"t": DEC}},
        "classes_1": {"dim": 8, "sparse": True, "same_dim_tags_as": {"t": DEC}}}}))


def _net(unit_extra=None, beam=4, source_beams=(2, 6)):
    unit = {
        "end": {"class": "compare", "from": ["output_0"], "value": 0},
        "orth_embed_0": {"class": "linear", "activation": None, "from": ["output_0"], "n_out": 7},
        "orth_embed_1": {"class": "linear", "activation": None, "from": ["output_1"], "n_out": 7},
        "orth_embed": {"class": "copy", "from": ["orth_embed_0", "orth_embed_1"]},
        "s": {"class": "rnn_cell", "unit": "LSTMBlock", "from": ["prev:c", "prev:orth_embed"], "n_out": 7},
        "c_in": {"class": "linear", "activation": "tanh", "from": ["s", "prev:orth_embed"], "n_out": 5},
        "c": {"class": "dot_attention", "from": ["c_in"], "base": "base:encoder", "base_ctx": "base:encoder"},
        "output_prob_0": {"class": "softmax", "from": ["prev:s", "c"], "target": "classes_0", "loss": "ce"},
        "output_prob_1": {"class": "softmax", "from": ["prev:s", "c"], "target": "classes_1", "loss": "ce"},
        "output": {"class": "choice", "target": ["classes_0", "classes_1"], "beam_size": beam,
                   "from": ["output_prob_0", "output_prob_1"], "source_beam_sizes": list(source_beams)},
        "output_0": {"class": "copy", "from": ["output/out_0"], "is_output_layer": True},
        "output_1": {"class": "copy", "from": ["output/out_1"], "is_output_layer": True}}
    unit.update(unit_extra or {})
    return {"encoder": {"class": "linear", "activation": "tanh", "n_out": 5, "from": "data:data"},
            "output": {"class": "rec", "from": [], "target": "classes_1", "max_seq_len": 6, "unit": unit},
            "output_0": {"class": "copy", "from": ["output/output_0"], "target": "classes_0"},
            "output_1": {"class": "copy", "from": ["output/output_1"], "target": "classes_1"},
            "decision_0": {"class": "decide", "from": ["output_0"], "loss": "edit_distance", "target": "classes_0"},
            "decision_1": {"class": "decide", "from": ["output_1"], "loss": "edit_distance", "target": "classes_1"}}


def _batch():
    rng = np.random.RandomState(0)
    c0 = rng.randint(1, 7, size=(2, 4)).astype(np.int32)
    c1 = rng.randint(0, 8, size=(2, 4)).astype(np.int32)
    return {"data": tf.constant(rng.randn(2, 5, 2).astype(np.float32)), "data:seq_len": tf.constant([5, 3]),
            "classes_0": tf.constant(c0), "classes_0:seq_len": tf.constant([4, 2]),
            "classes_1": tf.constant(c1), "classes_1:seq_len": tf.constant([4, 2])}, c0, c1


def test_training_sub_outputs_are_the_targets():
    net = TFNetwork(_net(), _extern())
    rec = net.layers["output"]
    assert rec.sub_layers()["output"].sub_template("out_1").sparse_dim.dimension == 8
    batch, c0, c1 = _batch()
    out = net.forward(batch, RunContext(False))
    for key, ref in (("output_0", c0), ("output_1", c1), ("output", c0)):
        np.testing.assert_array_equal(out[key].tensor.numpy()[0], ref[0])
        np.testing.assert_array_equal(out[key].tensor.numpy()[1, :2], ref[1, :2])
    losses = net.compute_losses(out, batch)
    assert float(losses["decision_0"].error_sum) == float(losses["decision_1"].error_sum) == 0.0
    assert float(losses["output/output_prob_1"].loss_sum) > 0


def test_sub_outputs_need_a_list_of_targets_and_one_source_each():
    unit = _net()["output"]["unit"]
    with pytest.raises(NetworkError, match="2 targets .* need one source each, got 1"):
        TFNetwork(_net({"output": dict(unit["output"], **{"from": ["output_prob_0"]})}), _extern(), search=True)
    with pytest.raises(NetworkError, match="source_beam_sizes must be one int > 0 per source"):
        TFNetwork(_net(source_beams=(2,)), _extern(), search=True)


def test_pruned_combinations_against_numpy():
    rng = np.random.RandomState(3)
    beams = [2, 3]
    lp0, lp1 = np.log(rng.dirichlet(np.ones(5), size=4)), np.log(rng.dirichlet(np.ones(6), size=4))
    combined, pruned = _combine_sources([tf.constant(lp0, tf.float32), tf.constant(lp1, tf.float32)], beams)
    top0, top1 = np.argsort(-lp0, 1)[:, :2], np.argsort(-lp1, 1)[:, :3]
    ref = (np.take_along_axis(lp0, top0, 1)[:, :, None] + np.take_along_axis(lp1, top1, 1)[:, None, :]).reshape(4, 6)
    np.testing.assert_allclose(combined.numpy(), ref, rtol=1e-6)
    ids = np.array([5, 0, 3, 4], np.int32)
    rows = np.array([2, 2, 0, 1], np.int32)
    labels = _combined_labels(tf.constant(ids), tf.constant(rows), pruned, beams)
    np.testing.assert_array_equal(labels[0].numpy(), top0[rows, ids // 3])
    np.testing.assert_array_equal(labels[1].numpy(), top1[rows, ids % 3])


def test_search_picks_the_best_label_of_each_source_per_step():
    """Distributions that do not depend on the labels chosen (from the encoder only): the best
    hypothesis takes each source's best label at every step, whatever the pruning."""
    unit = {"output_prob_0": {"class": "softmax", "from": ["base:enc_last"], "target": "classes_0"},
            "output_prob_1": {"class": "softmax", "from": ["base:enc_last"], "target": "classes_1"},
            "output": {"class": "choice", "target": ["classes_0", "classes_1"], "beam_size": 3,
                       "from": ["output_prob_0", "output_prob_1"], "source_beam_sizes": [2, 2]},
            "output_0": {"class": "copy", "from": ["output/out_0"], "is_output_layer": True},
            "output_1": {"class": "copy", "from": ["output/out_1"], "is_output_layer": True}}
    net_dict = {"encoder": {"class": "linear", "activation": "tanh", "n_out": 5, "from": "data:data"},
                "enc_last": {"class": "reduce", "mode": "max", "axes": "T", "from": "encoder"},
                "output": {"class": "rec", "from": [], "target": "classes_1", "max_seq_len": 3, "unit": unit},
                "o1": {"class": "copy", "from": "output/output_1", "is_output_layer": True}}
    net = TFNetwork(net_dict, _extern(), search=True)
    batch, _, _ = _batch()
    out = net.forward(batch, RunContext(False))
    enc = out["enc_last"].tensor.numpy()
    probs = {i: enc @ net.layers["output"].sub_layers()["output_prob_%i" % i].W.numpy()
             + net.layers["output"].sub_layers()["output_prob_%i" % i].bias.numpy() for i in (0, 1)}
    for i, key in ((0, "output"), (0, "output/output_0"), (1, "o1")):
        got = out[key].tensor.numpy()
        assert got.shape == (2, 3)
        np.testing.assert_array_equal(got, np.repeat(probs[i].argmax(-1)[:, None], 3, axis=1))


def test_search_with_two_targets_reads_is_output_layer_sub_layers():
    """RETURNN's test_attention_two_targets in search: output/output_0 and output/output_1 (in-loop,
    is_output_layer) along the best hypothesis, their labels those of the choice's sub-outputs."""
    net = TFNetwork(_net(), _extern(), search=True)
    batch, _, _ = _batch()
    out = net.forward(batch, RunContext(False))
    o0, o1 = out["output_0"].tensor.numpy(), out["output_1"].tensor.numpy()
    np.testing.assert_array_equal(o0, out["output"].tensor.numpy())
    assert o0.shape == o1.shape and o0.shape[0] == 2 and (o1 < 8).all() and (o0 < 7).all()
    lens = out["output_1"].seq_len.numpy()
    np.testing.assert_array_equal(lens, out["output"].seq_len.numpy())
    for b, n in enumerate(lens):  # a hypothesis ends at its first label 0 of source 0 (the 'end' layer)
        assert 0 not in o0[b, :n].tolist()
