"""Issue 27's long tail: the forms next to the ones implemented after RETURNN (goldens in
tests/returnn_goldens/cases_long_tail27.py) that stay refused, each with one line naming the layer."""
import pytest

from helpers import outputs
from returnn.config import Config, get_global_config, set_global_config
from returnn.errors import NetworkError
from returnn.extern_data import data_from_opts
from returnn.tensor import Data, Dim
from returnn.tf.network import TFNetwork

VOCAB = Dim(7, kind=Dim.Types.Feature, description="vocab")


def _build(net_dict, data, behavior_version=16):
    old = get_global_config()
    set_global_config(Config({"behavior_version": behavior_version}))
    try:
        return TFNetwork(outputs(net_dict), {"data": data})
    finally:
        set_global_config(old)


def test_extern_data_of_a_sparse_dim_only_is_sparse_over_time():
    """RETURNN's default shape of data given just a sparse_dim: (B, T) class indices."""
    data = data_from_opts("data", {"sparse_dim": VOCAB})
    assert data.sparse and data.sparse_dim is VOCAB and data.batch_shape == (None, None)


@pytest.mark.parametrize("net, match", [
    # RETURNN gathers the rows of (vocab, 4) and reshapes (4, B, T) from (B, T, 4): values in the wrong places
    ({"emb": {"class": "variable", "shape": [VOCAB, 4]},
      "output": {"class": "dot", "from": ["emb", "data"], "reduce": VOCAB}},
     "'output' \\(dot\\): the dense first source's reduced axis before its own axes"),
    ({"emb": {"class": "variable", "shape": [4, VOCAB]},
      "output": {"class": "dot", "from": ["data", "emb"], "reduce": VOCAB}},
     "'output' \\(dot\\): the dense second source's reduced axis after its own axes"),
    # a sparse source reduced by another axis than its sparse dim: its int indices meet float values (RETURNN's
    # matmul of two dtypes fails)
    ({"emb": {"class": "variable", "shape": [VOCAB, 4]},
      "output": {"class": "dot", "from": ["data", "emb"], "red1": "T", "red2": VOCAB}},
     "'output' \\(dot\\): a sparse source reduced by other axes than its sparse dim multiplies its int32 indices"),
])
def test_sparse_dot_refusals(net, match):
    with pytest.raises(NetworkError, match=match):
        _build(net, Data("data", sparse_dim=VOCAB, shape=(None,)))


@pytest.mark.parametrize("net, match", [
    ({"v": {"class": "variable", "shape": [3, 6]},
      "output": {"class": "slice_nd", "from": "v", "start": 1, "size": None, "axis": "F"}},
     "'output' \\(slice_nd\\): an input without batch axis .* needs a 'start' layer with a batch axis, or an int"),
    # RETURNN leaves the new axis' sizes undefined there (its Tensor sanity check fails)
    ({"len": {"class": "length", "from": "data"},
      "v": {"class": "variable", "shape": [3, 6]},
      "output": {"class": "slice_nd", "from": "v", "start": "len", "size": None, "axis": "F"}},
     "'output' \\(slice_nd\\): size None on the static axis"),
])
def test_slice_nd_batchless_refusals(net, match):
    with pytest.raises(NetworkError, match=match):
        _build(net, Data("data", shape=(None, 5)))


def test_custom_score_combine_sees_the_choices_cheating_option():
    """RETURNN's ChoiceLayer keeps 'cheating' as given; the 2022-approx-recombination config's
    custom_score_combine reads layer.cheating (AttributeError here before)."""
    import numpy as np
    import tensorflow as tf
    from returnn.tf.layers import RunContext
    seen = []

    def combine(layer, scores_in, scores_base, **_kwargs):
        seen.append((layer.cheating, layer.search_flag))
        return scores_in + scores_base

    extern = {"data": Data("data", shape=(None, 4)), "classes": Data("classes", dim=4, sparse=True)}
    net = TFNetwork({"output": {"class": "rec", "from": "data", "unit": {
        "output": {"class": "choice", "from": "data:source", "input_type": "log_prob", "target": None,
                   "beam_size": 2, "custom_score_combine": combine}}}}, extern, search=True)
    logp = np.log(np.full((2, 3, 4), 0.25, np.float32))
    net.forward({"data": tf.constant(logp), "data:seq_len": tf.constant([3, 2])}, RunContext(False), only=["output"])
    assert seen and all(s == (False, True) for s in seen)


def test_extra_search_decoder_shares_a_subnetwork_sublayers_parameters():
    """A subnetwork inside the searched decoder (the 2022-approx-recombination config's LM) shares its layers'
    parameters with the trained decoder's, as RETURNN (checked with RETURNN 1.20261022: one set of variables,
    these names); here the extra net's subnetwork layers made their own (a name clash)."""
    from returnn.tf.returnn_params import returnn_param_shapes

    def dec():
        return {"class": "rec", "from": [], "target": "classes", "max_seq_len": 4, "unit": {
            "emb": {"class": "linear", "from": "prev:output", "n_out": 3, "activation": None},
            "lm": {"class": "subnetwork", "from": "emb", "trainable": False, "subnetwork": {
                "input": {"class": "linear", "from": "data", "n_out": 3, "activation": "tanh"},
                "output": {"class": "linear", "from": "input", "n_out": 5, "activation": None}}},
            "prob": {"class": "softmax", "from": ["emb", "lm"], "target": "classes", "loss": "ce"},
            "output": {"class": "choice", "from": "prob", "target": "classes", "beam_size": 2, "initial_output": 0},
            "end": {"class": "compare", "from": "output", "value": 0}}}
    extern = {"data": data_from_opts("data", {"dim": 2}),
              "classes": data_from_opts("classes", {"dim": 5, "sparse": True})}
    net = TFNetwork({"output": dec(), "extra.search:output": dec(),
                     "decision": {"class": "decide", "from": "extra.search:output", "is_output_layer": True}}, extern)
    assert sorted(returnn_param_shapes(net)) == [
        "output/rec/%s/%s" % (layer, p) for layer in ("emb", "lm/input", "lm/output", "prob") for p in ("W", "b")]


@pytest.mark.parametrize("e_opts, ok", [({}, False), ({"is_output_layer": True}, True)])
def test_get_rec_accumulated_of_a_sub_layer_the_loop_does_not_build(e_opts, ok):
    """RETURNN asserts 'maybe 'e' not with is_output_layer?' where nothing in the loop needs the sub-layer
    (checked with RETURNN 1.20261022); refused here too (the loop does not build it)."""
    net = {"rec": {"class": "rec", "from": "data", "unit": {
        "h": {"class": "linear", "activation": "tanh", "n_out": 3, "from": ["data:source", "prev:h"]},
        "e": dict({"class": "linear", "activation": None, "n_out": 2, "from": "h"}, **e_opts),
        "output": {"class": "copy", "from": "h"}}},
        "output": {"class": "get_rec_accumulated", "from": "rec", "sub_layer": "e"}}
    if ok:
        _build(net, Data("data", shape=(None, 5)))
        return
    with pytest.raises(NetworkError, match="layer 'rec' \\(rec\\): no sub-layer 'e'"):
        _build(net, Data("data", shape=(None, 5)))
