"""Build-time rules of RETURNN's behavior versions. A layer dict without "from"
(LayerBase.transform_config_dict): before behavior version 1 its source is "data"; from version 1 on
it is refused, unless the layer's class fills it in (constant, range, variable, subnetwork, ...); the
rule holds in subnetworks, rec units and cond branches alike, and only for layers that are built.
conv, pool and transposed_conv need 'in_spatial_dims' from version 8 on when the input has several
spatial axes. dot's automatic var axes before version 14 take static axes of one size as one. From
version 16 (simple dim equality) a dim the user made matches no other axis of its size when sources are
combined; a linear layer takes over its input's feature dim of its size."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from returnn.config import Config, get_global_config, set_global_config
from returnn.errors import NetworkError
from returnn.tensor import Data
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork


def _net(layers, behavior_version=None, extra_roots=()):
    old = get_global_config()
    set_global_config(Config({"behavior_version": behavior_version} if behavior_version is not None else {}))
    try:
        return TFNetwork(layers, {"data": Data("data", shape=(None, 3)), "data6": Data("data6", shape=(None, 6))},
                         extra_roots=extra_roots)
    finally:
        set_global_config(old)


LINEAR = {"class": "linear", "n_out": 2, "activation": None}


@pytest.mark.parametrize("net, where", [
    ({"output": dict(LINEAR)}, "output"),
    ({"output": {"class": "subnetwork", "from": "data", "subnetwork": {"output": dict(LINEAR)}}}, "output/output"),
    ({"output": {"class": "rec", "from": "data", "unit": {"output": dict(LINEAR)}}}, "output/output"),
    ({"output": {"class": "rec", "unit": "lstm", "n_out": 2}}, "output"),
])
def test_refused_from_behavior_version_1(net, where):
    with pytest.raises(NetworkError, match=r"layer '%s': missing \"from\" \(RETURNN requires it from behavior_version 1"
                       % where):
        _net(net, behavior_version=1)


def test_before_behavior_version_1_the_source_is_data():
    net = _net({"output": dict(LINEAR)})
    x = np.random.RandomState(0).randn(2, 4, 3).astype(np.float32)
    y = net.forward({"data": tf.constant(x), "data:seq_len": tf.constant([4, 2], tf.int32)}, RunContext(False))["output"].tensor.numpy()
    layer = net.layers["output"]
    ref = x @ layer.W.numpy() + layer.bias.numpy()
    for s, n in enumerate([4, 2]):
        np.testing.assert_allclose(y[s, :n], ref[s, :n], rtol=1e-5, atol=1e-6)


def test_classes_that_fill_it_in_and_unbuilt_layers_are_not_refused():
    net = _net({"c": {"class": "constant", "value": 1.0}, "unused": dict(LINEAR),
                "sub": {"class": "subnetwork", "subnetwork": {"output": {"class": "copy", "from": "base:data"}}},
                "output": {"class": "combine", "kind": "add", "from": ["data", "c", "sub"]}}, behavior_version=12)
    assert "unused" not in net.layers and "c" in net.layers



SPLIT = {"class": "split_dims", "axis": "F", "dims": [1, 3], "from": "data"}


@pytest.mark.parametrize("layer", [
    {"class": "conv", "filter_size": [3, 1], "padding": "same", "n_out": 2, "from": "s"},
    {"class": "pool", "mode": "max", "pool_size": [2, 1], "padding": "same", "from": "s"},
    {"class": "transposed_conv", "filter_size": [2, 1], "strides": [2, 1], "padding": "valid", "n_out": 2, "from": "s"},
])
def test_conv_without_in_spatial_dims_over_two_spatial_axes(layer):
    """RETURNN's ConvLayer.transform_input (conv, pool, transposed_conv): from behavior_version 8 on,
    an input with more than one spatial axis needs 'in_spatial_dims'; before, all of them are taken."""
    with pytest.raises(NetworkError, match="has 2 spatial axes: RETURNN requires 'in_spatial_dims'"):
        _net({"s": SPLIT, "output": layer}, behavior_version=8)
    assert len(_net({"s": SPLIT, "output": layer}, behavior_version=7).layers["output"].output.dims) == 4
    given = dict(layer, in_spatial_dims=["T", "stag:s_split_dims0"])
    assert len(_net({"s": SPLIT, "output": given}, behavior_version=8).layers["output"].output.dims) == 4


def test_conv_input_transforms_need_exactly_one_spatial_axis():
    conv = {"class": "conv", "filter_size": [2], "padding": "same", "n_out": 2, "from": "r", "input_add_feature_dim": True}
    with pytest.raises(NetworkError, match="has 0 spatial axes"):
        _net({"r": {"class": "reduce", "mode": "max", "axis": "T", "from": "data"}, "output": conv}, behavior_version=8)


def _dot_net(behavior_version):
    return _net({"a": {"class": "split_dims", "axis": "F", "dims": [2, 3], "from": "data:data6"},
                 "l": {"class": "linear", "n_out": 6, "activation": None, "from": "data:data6"},
                 "b": {"class": "split_dims", "axis": "F", "dims": [2, 3], "from": "l"},
                 "output": {"class": "dot", "from": ["a", "b"], "red1": "F", "red2": "F", "var1": "auto",
                            "var2": "auto"}}, behavior_version)


def test_dot_auto_var_axes_before_behavior_version_14_match_static_axes_of_one_size():
    """RETURNN's DotLayer._auto_var_axes: before version 14 two static axes of the same size are the same
    axis (Dim.is_equal with allow_same_spatial_dim), so a's and b's size-2 axes are common, not an
    outer product; from 14 on only the same dim is."""
    x = np.random.RandomState(1).randn(2, 3, 6).astype(np.float32)
    batch = {"data6": tf.constant(x), "data6:seq_len": tf.constant([3, 2], tf.int32)}
    for bv, n_axes in ((13, 3), (14, 4)):
        net = _dot_net(bv)
        assert len(net.layers["output"].output.dims) == n_axes
        out = net.forward(batch, RunContext(False))
        y, b = out["output"].tensor.numpy(), out["b"].tensor.numpy()
        a = x.reshape(2, 3, 2, 3)
        ref = np.einsum("btif,btif->bti", a, b) if bv < 14 else np.einsum("btif,btjf->btij", a, b)
        np.testing.assert_allclose(y[0], ref[0], rtol=1e-5, atol=1e-5)


def _two_out_dims(behavior_version):
    from returnn.tensor import Dim, DimTypes
    oa, ob = Dim(3, kind=DimTypes.Feature, description="oa"), Dim(3, kind=DimTypes.Feature, description="ob")
    return _net({"a": {"class": "linear", "out_dim": oa, "from": "data"},
                 "b": {"class": "linear", "n_out": 3, "from": "data"},  # engine-made: data's feature dim
                 "c": {"class": "linear", "out_dim": ob, "from": "data"},
                 "output": {"class": "combine", "kind": "mul", "from": ["a", "c"]},
                 "mixed": {"class": "combine", "kind": "mul", "from": ["a", "b"]}}, behavior_version, ["mixed"])


def test_user_dims_of_one_size_match_only_before_behavior_version_16():
    """RETURNN's get_common_data matches any two static axes of one size before version 16; from 16 (its
    simple dim equality) a dim the user made matches no other: every source then needs broadcasting."""
    net = _two_out_dims(15)
    assert [d.description for d in net.layers["output"].output.dims[2:]] == ["oa"]
    assert [d.description for d in net.layers["mixed"].output.dims[2:]] == ["oa"]
    with pytest.raises(NetworkError, match="every source needs broadcasting"):
        _two_out_dims(16)


def test_linear_takes_over_the_input_feature_dim_of_its_size():
    """RETURNN: a layer's default output feature dim is its input's when the sizes agree (no out_dim), so
    from version 16 it still matches a user-made input dim."""
    from returnn.tensor import Dim, DimTypes
    fa = Dim(3, kind=DimTypes.Feature, description="fa")
    old = get_global_config()
    set_global_config(Config({"behavior_version": 16}))
    try:
        net = TFNetwork({"l": {"class": "linear", "n_out": 3, "from": "data"},
                         "m": {"class": "linear", "n_out": 2, "from": "data"},
                         "output": {"class": "combine", "kind": "add", "from": ["data", "l"]}},
                        {"data": Data("data", dims=[Data("x", shape=(None, 3)).dims[0],
                                                    Data("x", shape=(None, 3)).dims[1], fa])}, extra_roots=["m"])
    finally:
        set_global_config(old)
    assert net.layers["l"].output.dims[-1] is fa and net.layers["m"].output.dims[-1] is not fa
    assert net.layers["output"].output.dims[-1] is fa and net.layers["output"].output.batch_ndim == 3


def test_target_that_is_no_data_key_nor_layer_refused_from_behavior_version_1():
    """RETURNN (LayerBase.transform_config_dict) raises DataNotFound for a layer's unknown target, also without a
    loss; older RETURNN ignored the target of a layer without a loss (configs without a behavior_version)."""
    net = {"output": {"class": "linear", "n_out": 2, "target": "nokey", "from": "data"}}
    _net(net)
    with pytest.raises(NetworkError, match="layer 'output': target 'nokey' is not a data key"):
        _net(net, behavior_version=1)
    _net(dict(net, lin={"class": "linear", "n_out": 2, "from": "data"},
              output=dict(net["output"], target="lin")), behavior_version=1)  # a layer's name: that layer


def test_unknown_target_of_a_rec_units_end_refused_where_the_loop_does_not_search():
    """RETURNN makes a template of a rec unit's ``end`` (looking its target up) also where the loop runs over its
    input and never builds ``end`` (returnn_fuzz mutate --train seed 202 #18: built here)."""
    unit = {"output": {"class": "linear", "n_out": 2, "from": "prev:output"},
            "end": {"class": "compare", "kind": "greater", "value": 0, "from": "output", "target": "nokey"}}
    net = {"output": {"class": "rec", "from": [], "size_target": "data", "unit": unit}}
    _net(net)
    with pytest.raises(NetworkError, match="layer 'output/end': target 'nokey' is not a data key"):
        _net(net, behavior_version=1)


def test_remove_refused_with_a_behavior_version():
    """RETURNN 1.20261022 fails on every remove layer (returnn_fuzz mutate seeds 213 #3, 222 #40: built here);
    older RETURNN built it: built without a behavior_version, refused with one."""
    net = {"i": {"class": "cast", "dtype": "int32", "from": "data"},
           "r": {"class": "reduce", "mode": "max", "axis": "F", "from": "i"},
           "s": {"class": "reinterpret_data", "from": "r", "set_sparse": True, "set_sparse_dim": 4},
           "output": {"class": "remove", "symbol": 0, "from": "s"}}
    assert _net(net).layers["output"].output is not None
    with pytest.raises(NetworkError, match="'output'.*refused with a behavior_version: today's RETURNN fails"):
        _net(net, behavior_version=12)


def test_softmax_activation_applied_before_behavior_version_1_refused_after():
    """RETURNN's softmax layer took an 'activation' until September 2021 (applied instead of softmax); since then
    it raises a TypeError. Configs without a behavior_version keep the old effect."""
    net = {"output": {"class": "softmax", "n_out": 2, "activation": "relu", "from": "data"}}
    out = _net(net).forward({"data": tf.ones([1, 2, 3]), "data:seq_len": tf.constant([2])}, RunContext(False),
                            only=["output"])["output"].tensor.numpy()
    assert (out >= 0).all() and not np.allclose(out.sum(-1), 1.0)  # relu, not softmax
    with pytest.raises(NetworkError, match="'output' \\(softmax\\): 'activation' is refused"):
        _net(net, behavior_version=1)



@pytest.mark.parametrize("layer", [
    {"class": "alternating_real_to_complex", "from": "data:data6"},
    {"class": "complex_to_alternating_real", "from": "c"},
    {"class": "batch_median_pooling", "pool_size": 1, "from": "data"},
    {"class": "tile_features", "repetitions": 2, "from": "data"},
    {"class": "fill_unused", "from": "data"},
    {"class": "swap_time_feature", "from": "data"},
    {"class": "flatten_time", "from": "data"},
    {"class": "batch_softmax", "from": "data"},  # returnn_fuzz chain seed 372 #74
])
def test_classes_todays_returnn_fails_on_refused_with_a_behavior_version(layer):
    """Today's RETURNN fails on every use of these classes (checked with RETURNN 1.20261022: returnn_fuzz chain
    seeds 322-336); older RETURNN built them: built without a behavior_version, refused with one."""
    net = {"c": {"class": "cast", "dtype": "complex64", "from": "data"}, "output": layer}
    assert _net(net).layers["output"].output is not None
    with pytest.raises(NetworkError, match="'output'.*refused with a behavior_version: today's RETURNN fails"):
        _net(net, behavior_version=12)
