"""Output dims as RETURNN infers them instead of demanding ``n_out``: from the target of any layer
class (RETURNN's ``transform_config_dict``: linear/softmax get the target's own Dim, others its size,
+1 for ctc), and the one-frame shape of ``prev:x`` in rec units from ``x``'s ``out_type``."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from returnn.errors import NetworkError
from returnn.extern_data import data_from_opts
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork
from returnn.tf.returnn_params import returnn_param_shapes


def _extern():
    return {"data": data_from_opts("data", {"dim": 4}),
            "classes": data_from_opts("classes", {"dim": 3, "sparse": True}),
            "feat": data_from_opts("feat", {"dim": 5})}


def test_rec_lstm_with_a_loss_takes_the_target_dim():
    """RETURNN's test_RecLayer_NativeLstm_Nan / test_rec_nativelstm: rec with mse and no n_out."""
    net = TFNetwork({"output": {"class": "rec", "unit": "NativeLSTM", "loss": "mse", "target": "feat",
                                "from": "data:data"}}, _extern())
    assert net.layers["output"].output.dim == 5
    assert returnn_param_shapes(net)["output/rec/W_re"] == (5, 20)
    net = TFNetwork({"output": {"class": "rec", "unit": "nativelstm2", "loss": "ce", "from": "data"}}, _extern())
    assert net.layers["output"].output.dim == 3  # the default target "classes"


def test_linear_and_softmax_take_the_targets_dim_tag_and_ctc_one_more():
    ext = _extern()
    net = TFNetwork({"a": {"class": "linear", "target": "classes", "from": "data", "is_output_layer": True},
                     "output": {"class": "softmax", "loss": "ctc", "from": "data"}}, ext)
    assert net.layers["a"].output.feature_dim is ext["classes"].sparse_dim
    assert net.layers["output"].output.dim == 4


def test_a_loss_with_target_none_gives_no_dim():
    """RETURNN takes the default target only for a layer without a 'target' key: ``"target": None`` is no target,
    so nothing gives the dim (returnn_fuzz mutate seed 211 #61: built here with the dim of 'classes')."""
    with pytest.raises(NetworkError, match="needs 'n_out' or 'out_dim'"):
        TFNetwork({"output": {"class": "softmax", "loss": "ce", "target": None, "from": "data"}}, _extern())
    unit = {"prob": {"class": "softmax", "from": "prev:output", "loss": "ce", "target": None},
            "output": {"class": "choice", "beam_size": 2, "from": "prob", "target": "classes", "initial_output": 0}}
    with pytest.raises(NetworkError, match="needs 'n_out' or 'out_dim'"):
        TFNetwork({"output": {"class": "rec", "from": "data", "target": "classes", "unit": unit}}, _extern())


def test_other_classes_use_the_target_dim_only_where_they_need_one():
    """RETURNN's templates take the target's dim, its layers keep the dim they compute (e.g. a copy of
    a ctc softmax with an edit_distance loss: one more than the target, demo-timit-lstm-ctc)."""
    net = TFNetwork({"prob": {"class": "softmax", "loss": "ctc", "from": "data"},
                     "ler": {"class": "copy", "from": "prob", "target": "classes", "is_output_layer": True}}, _extern())
    assert net.layers["ler"].output.dim == 4
    net = TFNetwork({"output": {"class": "rnn_cell", "unit": "GRU", "from": "data", "target": "feat", "loss": "mse"}},
                    _extern())
    assert net.layers["output"].output.dim == 5


def test_prev_shape_from_out_type_counts_steps():
    """RETURNN's test_engine_rec_subnet_count: prev:output's shape comes from output's out_type."""
    net = TFNetwork({"output": {"class": "rec", "from": ["data"], "unit": {
        "output": {"class": "activation", "activation": "identity + 1", "from": ["prev:output"], "initial_output": 0,
                   "out_type": {"dim": 1, "dtype": "int32"}}}}}, _extern())
    x = np.zeros([2, 4, 4], np.float32)
    y = net.forward({"data": tf.constant(x), "data:seq_len": tf.constant([4, 2])}, RunContext(False))["output"]
    assert y.data.dtype == "int32"
    assert y.data.batch_dim_axis is None  # it reads nothing with a batch axis: (T, 1), as RETURNN (golden rec_batchless_count)
    np.testing.assert_array_equal(y.tensor.numpy()[:, 0], [1, 2, 3, 4])


def test_softmax_in_a_rec_unit_takes_its_target_dim():
    net = TFNetwork({"output": {"class": "rec", "from": "data", "unit": {
        "prob": {"class": "softmax", "from": ["data:source", "prev:prob"], "target": "classes", "loss": "ce"},
        "output": {"class": "copy", "from": "prob"}}}}, _extern())
    assert returnn_param_shapes(net)["output/rec/prob/W"] == (7, 3)


def test_prev_shape_from_a_sparse_out_type_without_dim():
    """out_type {"sparse": True, "dim": None}: class indices of an unknown number of classes."""
    net = TFNetwork({"output": {"class": "rec", "from": "data", "unit": {
        "last": {"class": "eval", "from": ["prev:last"], "initial_output": 0, "eval": "source(0) + 1",
                 "out_type": {"shape": (), "dtype": "int32", "dim": None, "sparse": True}},
        "output": {"class": "copy", "from": "last"}}}}, _extern())
    y = net.forward({"data": tf.zeros([2, 3, 4]), "data:seq_len": tf.constant([3, 2])}, RunContext(False))["output"]
    assert y.data.sparse and y.data.dim is None
    np.testing.assert_array_equal(y.tensor.numpy(), [[1, 2, 3]] * 2)
