"""The data model: dim tags, templates, RETURNN axis descriptions, sizes and masks, extern_data."""
import numpy as np
import pytest
import tensorflow as tf

from helpers import outputs
from returnn.config import Config
from returnn.errors import ConfigError, NetworkError
from returnn.extern_data import extern_data_from_config
from returnn.tensor import AxisError, Data, Dim, FeatureDim, SpatialDim, batch_dim
from returnn.tf.layers import LayerOutput, RunContext, get_layer_class
from returnn.tf.layers.helpers import common_dims
from returnn.tf.network import TFNetwork


def image_data():
    """(B, T, F=40, C=3) channel-last, plus its dims."""
    time, freq, chan = SpatialDim("time"), SpatialDim("freq", 40), FeatureDim("channel", 3)
    return Data("img", dims=[batch_dim, time, freq, chan]), time, freq, chan


# ------------------------------------------------------------------ Dim

def test_dim_equality_is_identity_plus_same_as():
    a, b = SpatialDim("time"), SpatialDim("time")
    assert a == a and a != b and FeatureDim("f", 3) != FeatureDim("f", 3)
    b.declare_same_as(a)
    assert a == b and b.get_same_base() is a
    c = SpatialDim("other")
    c.declare_same_as(b)
    assert c == a and {a: 1}[c] == 1  # equal dims hash equally: usable as dict keys
    assert batch_dim == Dim(None, kind=Dim.Types.Batch)
    with pytest.raises(ValueError):
        FeatureDim("x", 3).declare_same_as(FeatureDim("y", 4))
    assert a.is_dynamic() and not batch_dim.is_dynamic() and FeatureDim("f", 3).is_static()


# ------------------------------------------------------------------ Data special axes

def test_old_style_construction_and_default_axes():
    dense = Data("data", shape=(None, 40))
    assert dense.batch_shape == (None, None, 40) and dense.shape == (None, 40)
    assert (dense.batch_dim_axis, dense.time_dim_axis, dense.feature_dim_axis) == (0, 1, 2)
    assert dense.dim == 40 and not dense.sparse and dense.dtype == "float32"
    assert dense.dims[1].description == "time:var:extern_data:data"
    sparse = Data("classes", dim=10, sparse=True)
    assert sparse.batch_shape == (None, None) and sparse.dim == 10 and sparse.dtype == "int32"
    assert sparse.feature_dim_axis is None and sparse.sparse_dim.dimension == 10
    no_time = Data("x", shape=(5,), time_dim_axis=None)
    assert no_time.time_dim_axis is None and no_time.feature_dim_axis == 1
    time_major = Data("tm", shape=(None, 8), batch_dim_axis=1)
    assert (time_major.batch_dim_axis, time_major.time_dim_axis, time_major.feature_dim_axis) == (1, 0, 2)
    with pytest.raises(ValueError):
        Data("bad", sparse=True)  # sparse without 'dim'
    unknown = Data("align", dim=None, sparse=True)  # RETURNN: "dim": None, class count not known
    assert unknown.sparse and unknown.sparse_dim.dimension is None and unknown.batch_shape == (None, None)


def test_feature_axis_prefers_last_static_and_explicit_axes_follow_transposes():
    data, time, freq, chan = image_data()
    assert data.feature_dim_axis == 3 and data.time_dim_axis == 1
    assert data.get_spatial_batch_axes() == [1, 2]
    first = data.copy_move_axis(3, 1)  # (B, C, T, F): the feature dim stays C (default would pick F)
    assert first.dims == (batch_dim, chan, time, freq) and first.feature_dim_axis == 1
    assert data.copy(dims=first.dims).feature_dim_axis == 3
    explicit = first.copy_with_feature_dim_axis(1)
    assert explicit.feature_dim == chan and explicit.get_spatial_batch_axes() == [2, 3]
    back = explicit.copy_transpose([0, 2, 3, 1])
    assert back.feature_dim == chan and back.feature_dim_axis == 3
    dropped = explicit.copy_template_excluding_axis(2)
    assert dropped.dims == (batch_dim, chan, freq) and dropped.feature_dim_axis == 1
    added = data.copy_insert_dim(FeatureDim("one", 1), -1).copy_with_feature_dim_axis(4)
    assert added.get_spatial_batch_axes() == [1, 2, 3]  # the old feature axis became spatial


# ------------------------------------------------------------------ axis descriptions

@pytest.mark.parametrize("desc,axes", [
    ("B", [0]), ("batch", [0]), ("T", [1]), ("time", [1]), ("t?", [1]), ("F", [3]), ("feature", [3]),
    ("spatial", [1, 2]), ("s:0", [1]), ("s:1", [2]), ("s:-1", [2]), ("spatial:1", [2]),
    ("dyn", [1]), ("dyn:0", [1]), ("static", [2, 3]), ("static:0", [2]), ("static:-1", [3]),
    ("dim:40", [2]), ("dim:3", [3]), ("except_time", [2, 3]), ("except_batch", [1, 2, 3]),
    ("except_batch:0", [1]), ("spatial_except_time", [2]), ("*", [0, 1, 2, 3]),
    ("stag:freq", [2]), ("stag:TIME", [1]), ("tag:channel", [3]), ("stag-single:0:freq", [2]),
    ("BT", [0, 1]), ("tf", [1, 3]), (-1, [3]), (2, [2]), (["T", "F", "T"], [1, 3]), (None, []), ("", []),
])
def test_axis_descriptions(desc, axes):
    data, *_ = image_data()
    assert data.get_axes_from_description(desc) == axes


def test_axis_by_dim_object_and_errors():
    data, time, freq, chan = image_data()
    assert data.get_axis_from_description(freq) == 2 and data.get_dim_tag_from_description("s:0") is time
    other = SpatialDim("other", 40)
    assert data.get_axes_from_description(other) == [] and not data.has_axis(other)
    other.declare_same_as(freq)
    assert data.get_axis_from_description(other) == 2
    sparse = Data("classes", dim=5, sparse=True)
    for bad, msg in [("stag:nope", "no dim tag"), ("s:5", "only 2"), ("dim:7", "no axes of size 7"),
                     ("weird", "unknown axis"), (9, "out of range"), ("spatial", "not unique")]:
        with pytest.raises(AxisError, match=msg):
            data.get_axis_from_description(bad)
    with pytest.raises(AxisError, match="axis 'F' not found"):  # one axis asked for: none is an error
        sparse.get_axis_from_description("F")
    assert sparse.get_axes_from_description(["F", "T"]) == [1]  # RETURNN: 'F' names no axis of sparse data
    two = Data("two", dims=[batch_dim, SpatialDim("a", 4), SpatialDim("a", 4)], feature_dim_axis=None)
    with pytest.raises(AxisError, match="more than one"):
        two.get_axis_from_description("stag:a")
    assert two.get_axis_from_description("stag-single:-1:a") == 2
    # a dim named after a layer inside a rec unit matches without the unit's path, as RETURNN names it
    # by the layer's own name there ("sliced-time:segments0"; the i6 segmental transducer configs)
    sliced = Data("s", dims=[batch_dim, SpatialDim("sliced-time:output/segments0"), FeatureDim("f", 3)])
    assert sliced.get_axis_from_description("stag:sliced-time:segments") == 1
    assert sliced.get_axis_from_description("stag:output/segments0") == 1
    with pytest.raises(AxisError, match="no dim tag"):
        sliced.get_axis_from_description("stag:sliced-time:output/segments1")


# ------------------------------------------------------------------ values: sizes and masks

def test_sizes_masks_and_transpose():
    data, time, freq, chan = image_data()
    x = tf.constant(np.random.RandomState(0).randn(2, 5, 40, 3).astype(np.float32))
    lens = tf.constant([5, 2])
    val = LayerOutput(x, data, {time: lens})
    assert val.seq_len is lens and val.size("T") is lens and val.size(freq) is None
    np.testing.assert_array_equal(val.sequence_mask().numpy(), [[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]])
    assert val.broadcast_mask(time).shape == (2, 5, 1, 1)
    masked = val.masked(0.0).numpy()
    np.testing.assert_array_equal(masked[1, 2:], 0.0)
    np.testing.assert_array_equal(masked[1, :2], x.numpy()[1, :2])
    tm = val.copy_transpose([1, 0, 3, 2])  # time-major, channel before freq
    assert tm.data.time_dim_axis == 0 and tm.data.batch_dim_axis == 1 and tm.data.feature_dim == chan
    assert tm.broadcast_mask(time).shape == (5, 2, 1, 1)
    np.testing.assert_array_equal(tm.masked(0.0).numpy(), np.transpose(masked, [1, 0, 3, 2]))
    with pytest.raises(ValueError, match="no sizes"):
        LayerOutput(x, data, {})


def test_common_dims_match_by_tag_then_static_dims_by_kind_and_size():
    time, feat = SpatialDim("time"), FeatureDim("f", 4)
    other_time, other_feat = SpatialDim("time2"), FeatureDim("g", 4)
    dims, maps = common_dims([[batch_dim, time, feat], [batch_dim, feat], [batch_dim, other_time, other_feat]])
    # another dynamic axis is another axis (RETURNN: the time axes of two data keys broadcast)
    assert dims == [batch_dim, time, feat, other_time] and maps == [[0, 1, 2], [0, 2], [0, 3, 2]]
    dims, maps = common_dims([[batch_dim, feat], [batch_dim, time, FeatureDim("h", 5)]])
    assert len(dims) == 4 and maps == [[0, 1], [0, 2, 3]]


# ------------------------------------------------------------------ layers on non-standard layouts

def _layer(cls, opts, sources, name="lay"):
    return get_layer_class(cls, name)(name, dict(opts), list(sources), seed=3)


def test_linear_on_time_major_input_and_broadcast_source():
    data, time, freq, chan = image_data()
    tm = Data("tm", dims=[time, batch_dim, FeatureDim("f", 3)])
    vec = Data("vec", dims=[batch_dim, FeatureDim("v", 2)])
    layer = _layer("linear", {"n_out": 4}, [tm, vec])
    assert layer.output.dims[:2] == (time, batch_dim) and layer.output.dim == 4
    x = np.random.RandomState(1).randn(5, 2, 3).astype(np.float32)
    v = np.random.RandomState(2).randn(2, 2).astype(np.float32)
    lens = tf.constant([5, 3])
    out = layer([LayerOutput(tf.constant(x), tm, {time: lens}), LayerOutput(tf.constant(v), vec)], RunContext(False))
    w, b = layer.W.numpy(), layer.bias.numpy()
    ref = x @ w[:3] + (v @ w[3:])[None] + b
    np.testing.assert_allclose(out.tensor.numpy()[:3], ref[:3], atol=1e-5)
    np.testing.assert_allclose(out.tensor.numpy()[:, 0], ref[:, 0], atol=1e-5)
    assert out.seq_len is lens


def test_reduce_by_axis_names_masks_dynamic_axes():
    data, time, freq, chan = image_data()
    x = np.random.RandomState(3).randn(2, 5, 40, 3).astype(np.float32)
    lens = np.array([5, 2], np.int32)
    val = LayerOutput(tf.constant(x), data, {time: tf.constant(lens)})
    layer = _layer("reduce", {"mode": "max", "axes": ["T", "stag:freq"]}, [data])
    out = layer([val], RunContext(False))
    assert layer.output.dims == (batch_dim, chan)
    ref = np.stack([x[b, :n].max(axis=(0, 1)) for b, n in enumerate(lens)])
    np.testing.assert_allclose(out.tensor.numpy(), ref)
    with pytest.raises(NetworkError, match="'lay'.*'axes'.*stag:nope"):
        _layer("reduce", {"mode": "max", "axes": "stag:nope"}, [data])


def test_option_declarations_errors_and_validation():
    data = Data("data", shape=(None, 4))
    with pytest.raises(NetworkError, match="'lay'.*'n_ot'.*did you mean 'n_out'"):
        _layer("linear", {"n_ot": 3}, [data])
    for bad in [0, -3, "x", 2 ** 40, 2.5, True]:
        with pytest.raises(NetworkError, match="layer 'lay' \\(linear\\): 'n_out' must be an int"):
            _layer("linear", {"n_out": bad}, [data])
    for bad in [1.0, 1.5, -0.1, "0.1"]:
        with pytest.raises(NetworkError, match="layer 'lay' \\(linear\\): 'dropout' must be a number in \\[0, 1\\)"):
            _layer("linear", {"n_out": 2, "dropout": bad}, [data])
    with pytest.raises(NetworkError, match="'L2' must be a number >= 0"):
        _layer("linear", {"n_out": 2, "L2": -1}, [data])
    with pytest.raises(NetworkError, match="'activation'"):  # copy takes no activation (as in RETURNN)
        _layer("copy", {"activation": "relu"}, [data])
    from returnn.tf.layers.options import options_help
    assert "n_out (default None): output feature dim" in options_help(get_layer_class("linear", "x"))


def test_l2_covers_all_trainable_parameters_as_in_returnn():
    data = Data("data", shape=(None, 4))
    assert sorted(v.name for v in _layer("linear", {"n_out": 2, "L2": 0.1}, [data]).l2_variables()) == \
        ["W:0", "b:0"]
    assert sorted(v.name for v in _layer("rec", {"n_out": 2}, [data]).l2_variables()) == ["W:0", "W_re:0", "b:0"]
    assert sorted(v.name for v in _layer("batch_norm", {}, [data]).l2_variables()) == \
        ["batch_norm_beta:0", "batch_norm_gamma:0"]
    assert _layer("linear", {"n_out": 2, "trainable": False}, [data]).l2_variables() == []


def test_network_l2_loss_value():
    from returnn.tf.network import TFNetwork
    net = TFNetwork(outputs({"h": {"class": "linear", "n_out": 3, "L2": 0.01, "from": "data", "bias_init": 0.5},
                     "output": {"class": "softmax", "n_out": 2, "from": "h", "L2": 0.1}}),
                    {"data": Data("data", shape=(None, 4))})
    h, out = net.layers["h"], net.layers["output"]
    ref = 0.01 * (np.sum(h.W.numpy() ** 2) + np.sum(h.bias.numpy() ** 2)) \
        + 0.1 * (np.sum(out.W.numpy() ** 2) + np.sum(out.bias.numpy() ** 2))
    np.testing.assert_allclose(net.l2_loss().numpy(), ref, rtol=1e-5)


# ------------------------------------------------------------------ extern_data

def _config(**values):
    config = Config()
    for k, v in values.items():
        config.set(k, v)
    return config


def test_extern_data_dict_entries():
    time = SpatialDim("time")
    specs = extern_data_from_config(_config(extern_data={
        "data": {"dim": 40, "shape": (None, 40), "available_for_inference": True},
        "classes": {"dim": 10025, "sparse": True, "dtype": "int32", "same_dim_tags_as": {"t": time}},
        "align": {"dim": 5, "sparse": True, "dim_tags": [batch_dim, time], "available_for_inference": False},
        "seq_feat": {"shape": (7,), "time_dim_axis": None},
    }))
    assert specs["data"].dim == 40 and not specs["data"].sparse and specs["data"].batch_shape == (None, None, 40)
    assert specs["classes"].sparse and specs["classes"].dim == 10025 and specs["classes"].time_dim is time
    assert specs["align"].time_dim == specs["classes"].time_dim and not specs["align"].available_for_inference
    assert specs["seq_feat"].time_dim_axis is None and specs["seq_feat"].dim == 7
    specs = extern_data_from_config(_config(num_inputs=3, num_outputs={
        "classes": {"dim": 12, "sparse": True}, "feat": [6, 2], "lab": [4, 1]}))
    assert (specs["classes"].dim, specs["classes"].sparse) == (12, True)
    assert (specs["feat"].dim, specs["feat"].sparse, specs["lab"].sparse, specs["data"].dim) == (6, False, True, 3)


@pytest.mark.parametrize("value,msg", [
    ({"data": {"dim": 0}}, "'dim' must be an int >= 1"),
    ({"data": {"dim": "x"}}, "'dim' must be an int >= 1"),
    ({"data": {"dims": 3}}, "entry 'data'"),
    ({"data": {"dim": 3, "bogus": 1}}, "unknown option.*bogus"),
    ({"data": {"sparse": True}}, "needs 'dim' or 'shape'"),
    ({"data": {"shape": "abc"}}, "'shape' must be a tuple"),
    ({"data": 40}, "must be a dict"),
    ({"data": {"dim": 3, "same_dim_tags_as": {"t": "x"}}}, "must be a Dim"),
    ([1, 2], "must be a dict of data keys"),
])
def test_extern_data_errors_are_one_line(value, msg):
    with pytest.raises(ConfigError, match=msg):
        extern_data_from_config(_config(extern_data=value))


def test_extern_data_dim_none_given_takes_returnn_default_shape():
    """RETURNN: 'dim': None without a shape is a time axis (sparse: indices without a class dim, e.g.
    a transducer config's relative_t positions), dense with a feature axis of unknown size too."""
    specs = extern_data_from_config(_config(extern_data={
        "relative_t": {"dim": None, "sparse": True, "available_for_inference": False},
        "feat": {"dim": None}}))
    rel = specs["relative_t"]
    assert rel.sparse and rel.dim is None and rel.batch_shape == (None, None) and rel.time_dim_axis == 1
    assert rel.dtype == "int32" and not rel.available_for_inference
    feat = specs["feat"]
    assert not feat.sparse and feat.batch_shape == (None, None, None) and feat.feature_dim_axis == 2


def test_network_on_shared_time_tags_feeds_sizes_per_key():
    time = SpatialDim("time")
    specs = extern_data_from_config(_config(extern_data={
        "data": {"dim": 3, "same_dim_tags_as": {"t": time}},
        "classes": {"dim": 4, "sparse": True, "same_dim_tags_as": {"t": time}}}))
    net = TFNetwork(outputs({"emb": {"class": "linear", "n_out": 2, "from": "data:classes"},  # (labels: embedded alone)
                             "output": {"class": "softmax", "loss": "ce", "from": ["data", "emb"]}}), specs)
    assert net.layers["output"].output.time_dim is time and net.layers["output"].output.dim == 4
    batch = {"data": tf.zeros([2, 3, 3]), "data:seq_len": tf.constant([3, 1]),
             "classes": tf.constant([[1, 2, 3], [0, 0, 0]]), "classes:seq_len": tf.constant([3, 1])}
    outs = net.forward(batch, RunContext(False))
    assert outs["output"].tensor.shape == (2, 3, 4)
    losses = net.compute_losses(outs, batch)
    assert float(losses["output"].norm) == 4.0
    assert net.batch_spec("data").shape.as_list() == [None, None, 3]
    assert net.batch_spec("classes").shape.as_list() == [None, None]


def test_out_dim_names_the_output_feature_axis():
    data = Data("data", shape=(None, 4))
    hidden = FeatureDim("hidden", 6)
    lin = _layer("linear", {"out_dim": hidden}, [data])
    assert lin.output.feature_dim is hidden and lin.W.shape == (4, 6)
    red = _layer("reduce", {"mode": "max", "axes": hidden}, [lin.output])  # address the axis by its Dim
    assert red.output.dims == lin.output.dims[:2]
    with pytest.raises(NetworkError, match="'lay'.*n_out 5 does not match out_dim"):
        _layer("linear", {"out_dim": hidden, "n_out": 5}, [data])
    with pytest.raises(NetworkError, match="'lay'.*needs 'n_out' or 'out_dim'"):
        _layer("rec", {}, [data])
    conv = _layer("conv", {"out_dim": hidden, "filter_size": (3,)}, [data])
    assert conv.output.feature_dim is hidden


def test_rec_on_time_major_input_equals_batch_major():
    time = SpatialDim("time")
    feat = FeatureDim("f", 3)
    bm, tm = Data("bm", dims=[batch_dim, time, feat]), Data("tm", dims=[time, batch_dim, feat])
    x = np.random.RandomState(4).randn(2, 5, 3).astype(np.float32)
    lens = tf.constant([5, 2])
    ref = _layer("rec", {"n_out": 4}, [bm])([LayerOutput(tf.constant(x), bm, {time: lens})], RunContext(False))
    layer = _layer("rec", {"n_out": 4}, [tm])
    out = layer([LayerOutput(tf.constant(np.transpose(x, [1, 0, 2])), tm, {time: lens})], RunContext(False))
    assert layer.output.dims[:2] == (batch_dim, time) and out.seq_len is lens
    np.testing.assert_allclose(out.tensor.numpy(), ref.tensor.numpy(), atol=1e-6)


def test_dataset_check_accepts_any_dim_where_extern_data_says_none():
    """extern_data {"dim": None, "sparse": True} (indices of unknown range, the latent-attention
    alignments): a dataset of any dim matches (it was a TypeError formatting the mismatch); a real
    mismatch is one line."""
    from returnn.config import Config
    from returnn.datasets import init_dataset
    from returnn.errors import DataError
    from returnn.extern_data import check_dataset_matches, extern_data_from_config
    config = Config({"extern_data": {"data": {"dim": 3}, "align": {"dim": None, "shape": (None,), "sparse": True}}})
    specs = extern_data_from_config(config)
    dataset = init_dataset({"class": "StaticDataset", "data": [{"data": np.zeros((2, 3), "float32"),
                                                                   "align": np.array([0, 5], "int32")}],
                            "output_dim": {"data": [3, 2], "align": [7, 1]}})
    check_dataset_matches(specs, dataset, "train", config)
    bad = extern_data_from_config(Config({"extern_data": {"data": {"dim": 4}}}))
    with pytest.raises(DataError, match="input dim mismatch: config extern_data\\['data'\\] says 4, but dataset train"):
        check_dataset_matches(bad, dataset, "train", Config({"extern_data": {"data": {"dim": 4}}}))
