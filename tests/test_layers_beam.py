"""Beam layers: choice_get_beam_scores / choice_get_src_beams inside a searched rec loop (the beam
search attaches them to its choice), decide_keep_beam, split_batch_beam; without search they are errors."""
import numpy as np
import pytest
import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, SpatialDim
from returnn.tf.layers import RunContext
from returnn.tf.layers.base import LayerOutput
from returnn.tf.network import TFNetwork

from test_rec_search import EMB, EOS, P, U, _set_weights  # noqa: F401  (the known label chain of the search tests)


def _net(beam, unit_extra, end):
    extern = {"data": Data("data", shape=(None, 2)), "classes": Data("classes", dim=4, sparse=True)}
    unit = {"emb": EMB, "prob": {"class": "softmax", "from": ["emb", "base:enc"], "n_out": 4, "with_bias": False},
            "output": {"class": "choice", "initial_output": 0, "from": "prob", "target": "classes", "beam_size": beam,
                       "length_normalization": False},
            "end": end}
    unit.update(unit_extra)
    return TFNetwork({"enc": {"class": "reduce", "mode": "mean", "axes": "T", "from": "data"},
                      "output": {"class": "rec", "from": [], "target": "classes", "max_seq_len": 8, "unit": unit}},
                     extern, search=True)


def _search(net):
    _set_weights(net.layers["output"].layers, np.concatenate([np.log(P), np.zeros((1, 4)), U[1:2]], 0))
    x = np.zeros((2, 3, 2), "float32")
    out = net.forward({"data": tf.constant(x), "data:seq_len": tf.constant([3, 3])}, RunContext(False),
                      only=["output"])["output"]
    return [list(out.tensor.numpy()[b, :n]) for b, n in enumerate(out.seq_len.numpy())]


def test_beam_scores_in_search_steer_the_end():
    # greedy: 0 -> 1 (p .6), 1 -> 1 (.4), ...: the score falls below -2 at the third step, which ends
    net = _net(1, {"bs": {"class": "choice_get_beam_scores", "from": "output"},
                   "kept": {"class": "decide_keep_beam", "from": "bs"}},
               {"class": "compare", "from": "kept", "kind": "less", "value": -2.0})
    assert _search(net) == [[1, 1], [1, 1]]


def test_src_beams_run_in_search():
    net = _net(2, {"sb": {"class": "choice_get_src_beams", "from": "output"},
                   "sb_ok": {"class": "compare", "from": "sb", "kind": "less", "value": 2, "is_output_layer": True}},
               {"class": "compare", "from": "output", "value": EOS})
    assert _search(net) == [[2], [2]]


def test_choice_beam_layers_need_search_choices():
    # as the unit's output over the whole sequence (a (B,) value without the loop's time axis): refused at once
    with pytest.raises(NetworkError, match="has no loop time axis"):
        TFNetwork({"output": {"class": "rec", "from": "data", "unit": {
            "prob": {"class": "softmax", "from": "data:source", "n_out": 4},
            "out": {"class": "choice", "initial_output": 0, "from": "prob", "target": "classes", "beam_size": 2},
            "output": {"class": "choice_get_beam_scores", "from": "out"}}}},
            {"data": Data("data", shape=(None, 2)), "classes": Data("classes", dim=4, sparse=True)})
    with pytest.raises(NetworkError, match="no search choices"):
        net = TFNetwork({"output": {"class": "rec", "from": "data", "unit": {
            "prob": {"class": "softmax", "from": "data:source", "n_out": 4},
            "out": {"class": "choice", "initial_output": 0, "from": "prob", "target": "classes", "beam_size": 2},
            "bs": {"class": "choice_get_beam_scores", "from": "out"},
            "output": {"class": "combine", "kind": "add", "from": ["prob", "bs"]}}}},
            {"data": Data("data", shape=(None, 2)), "classes": Data("classes", dim=4, sparse=True)})
        net.forward({"data": tf.zeros((2, 3, 2)), "data:seq_len": tf.constant([3, 2]),
                     "classes": tf.zeros((2, 3), tf.int32), "classes:seq_len": tf.constant([3, 2])}, RunContext(False))


def test_split_batch_beam():
    beam = SpatialDim("beam", 2)
    net = TFNetwork({"output": {"class": "split_batch_beam", "from": "data", "beam_dim": beam}},
                    {"data": Data("data", shape=(None, 3))})
    x = np.arange(4 * 5 * 3, dtype="float32").reshape(4, 5, 3)
    out = net.forward({"data": tf.constant(x), "data:seq_len": tf.constant([5, 4, 3, 2])}, RunContext(False))["output"]
    np.testing.assert_array_equal(out.tensor.numpy(), x.reshape(2, 2, 5, 3))
    assert out.data.dims[1] is beam and out.seq_len.numpy().tolist() == [5, 3]
    with pytest.raises(NetworkError, match="beam_dim"):
        TFNetwork({"output": {"class": "split_batch_beam", "from": "data"}}, {"data": Data("data", shape=(None, 3))})
