"""constant, range, length, positional_encoding, dot, gating, hidden (old name of linear) against
numpy references, and in a network (default 'from', references to other layers)."""
import math

from functools import partial

import numpy as np
import pytest
import tensorflow as tf

from data_utils import btf as make_btf, make_layer as make, run_layer as run
from returnn.errors import NetworkError
from returnn.tensor import Data, FeatureDim, SpatialDim, batch_dim
from returnn.tf.layers import LAYER_CLASSES, LayerOutput, RunContext
from returnn.tf.network import TFNetwork

LENS = np.array([5, 3], np.int32)
btf = partial(make_btf, lens=LENS, garbage=np.nan)


def np_pos_enc(positions, channels):
    num = channels // 2
    inc = math.log(1e4) / max(num - 1, 1)
    inv = np.exp(np.arange(num) * -inc)
    scaled = positions[..., None] * inv
    out = np.concatenate([np.sin(scaled), np.cos(scaled)], -1)
    return np.pad(out, [(0, 0)] * (out.ndim - 1) + [(0, channels % 2)])


def test_constant_range_length():
    const = make("constant", {"value": np.array([[1, 2], [3, 4]], "int32")}, [])
    out = run(const, [])
    assert const.output.dtype == "int32" and const.output.batch_shape == (2, 2)
    np.testing.assert_array_equal(out.tensor.numpy(), [[1, 2], [3, 4]])
    assert make("constant", {"value": 0.5, "dtype": "float32"}, []).output.batch_ndim == 0
    rng = make("range", {"limit": 7, "start": 1, "delta": 2}, [])
    np.testing.assert_array_equal(run(rng, []).tensor.numpy(), [1, 3, 5])
    assert rng.output.dims[0].dimension == 3 and rng.output.dtype == "int32"
    data, val, x = btf(4)
    length = make("length", {}, [data])
    np.testing.assert_array_equal(run(length, [val]).tensor.numpy(), LENS)
    assert length.output.dims == (batch_dim,)
    np.testing.assert_array_equal(run(make("length", {"axis": "F"}, [data]), [val]).tensor.numpy(), 4)  # static: a scalar
    with pytest.raises(NetworkError, match="'lay'.*'value'"):
        make("constant", {"value": "abc"}, [])
    with pytest.raises(NetworkError, match="'lay'.*'value' as a list is refused"):  # RETURNN: TypeError
        make("constant", {"value": [[1, 2], [3, 4]]}, [])
    with pytest.raises(NetworkError, match="'lay'.*at most 0 source"):
        make("range", {"limit": 3}, [data])


@pytest.mark.parametrize("n_out", [6, 5])
def test_positional_encoding(n_out):
    data, val, x = btf(4)
    layer = make("positional_encoding", {"n_out": n_out}, [data])
    out = run(layer, [val]).tensor.numpy()
    ref = np_pos_enc(np.arange(5, dtype=np.float32), n_out)
    np.testing.assert_allclose(out[0], ref, atol=1e-5)
    np.testing.assert_allclose(out[1, :3], ref[:3], atol=1e-5)
    added = make("positional_encoding", {"add_to_input": True, "constant": 2}, [data])
    np.testing.assert_allclose(run(added, [val]).tensor.numpy()[0], x[0] + np_pos_enc(np.full([5], 2.0), 4), atol=1e-5)
    offset = Data("off", dims=[batch_dim], dtype="int32")
    shifted = make("positional_encoding", {"n_out": 4, "offset": "off"}, [data, offset])
    out = run(shifted, [val, LayerOutput(tf.constant([0, 10]), offset)]).tensor.numpy()
    np.testing.assert_allclose(out[1, :3], np_pos_enc(np.arange(10, 13, dtype=np.float32), 4), atol=1e-5)


def test_positional_encoding_over_extra_axes_and_refused_channels():
    """RETURNN: an input with more axes ((B, T, S, F); here also time before batch) gets the encoding of the
    positions on its time axis for every S; a (B, T) offset adds per frame; 2 or 3 channels fail in RETURNN."""
    time, s_dim = SpatialDim("t"), SpatialDim("s", 3)
    data = Data("x", dims=[time, batch_dim, s_dim, FeatureDim("f", 4)])
    x = np.random.RandomState(5).randn(5, 2, 3, 4).astype(np.float32)
    val = LayerOutput(tf.constant(x), data, {time: tf.constant(LENS)})
    offset = Data("off", dims=[batch_dim, time], dtype="int32")
    off = np.array([[0, 1, 2, 3, 4], [7, 7, 7, 0, 0]], np.int32)
    layer = make("positional_encoding", {"add_to_input": True, "offset": "off"}, [data, offset])
    assert layer.output.dims == data.dims
    out = run(layer, [val, LayerOutput(tf.constant(off), offset, {time: tf.constant(LENS)})]).tensor.numpy()
    for b in range(2):
        ref = np_pos_enc((np.arange(5) + off[b]).astype(np.float32), 4)  # (T, F)
        np.testing.assert_allclose(out[:, b], x[:, b] + ref[:, None, :], atol=1e-5)
    n_out = make("positional_encoding", {"n_out": 6}, [data])
    assert n_out.output.dims[:3] == data.dims[:3]
    enc = run(n_out, [val]).tensor.numpy()
    np.testing.assert_allclose(enc, np.broadcast_to(np_pos_enc(np.arange(5, dtype=np.float32), 6)[:, None, None],
                                                    (5, 2, 3, 6)), atol=1e-5)
    for channels in (2, 3):
        with pytest.raises(NetworkError, match="'lay'.*%i channels.*ZeroDivisionError" % channels):
            make("positional_encoding", {"n_out": channels}, [data])


def test_dot_attention_style_masks_reduced_time():
    enc_time, dec_time = SpatialDim("enc"), SpatialDim("dec")
    weights_data = Data("w", dims=[batch_dim, dec_time, enc_time], feature_dim_axis=None)
    values_data, values, v = btf(4, time=enc_time)
    w = np.random.RandomState(2).rand(2, 3, 5).astype(np.float32)
    w_val = LayerOutput(tf.constant(w), weights_data, {enc_time: tf.constant(LENS), dec_time: tf.constant([3, 2])})
    layer = make("dot", {"red1": "stag:enc", "red2": "stag:enc", "var1": "stag:dec", "var2": "F"},
                 [weights_data, values_data])
    out = run(layer, [w_val, values])
    assert layer.output.dims[:2] == (batch_dim, dec_time) and layer.output.dim == 4
    for b, n in enumerate(LENS):
        np.testing.assert_allclose(out.tensor.numpy()[b], w[b, :, :n] @ v[b, :n], atol=1e-5)
    # feature-with-feature over (B, T, F) x (B, T', F): the two time axes stay separate (from behavior
    # version 3 the var axes are those not in the other source; before, RETURNN's var2 -1 is the reduced F)
    other, other_val, o = btf(4, seed=3, time=dec_time)
    from returnn.config import Config, get_global_config, set_global_config
    old = get_global_config(raise_exception=False)
    set_global_config(Config({"behavior_version": 3}))
    try:
        sim = make("dot", {"red1": "F", "red2": "F"}, [values_data, other], name="sim")
    finally:
        set_global_config(old)
    with pytest.raises(NetworkError, match="var2 -1 is a reduced axis"):
        make("dot", {"red1": "F", "red2": "F"}, [values_data, other], name="sim0")
    other_val = LayerOutput(tf.constant(o), other, {dec_time: tf.constant([5, 5])})
    res = run(sim, [values, other_val]).tensor.numpy()
    assert sim.output.dims[:3] == (batch_dim, enc_time, dec_time)
    np.testing.assert_allclose(res[0], v[0] @ o[0].T, atol=1e-5)
    # RETURNN's 'reduce' (both sources, i6's segmental configs): the same as red1 = red2
    short = make("dot", {"reduce": "stag:enc", "var1": "stag:dec", "var2": "F"}, [weights_data, values_data], name="r")
    np.testing.assert_allclose(run(short, [w_val, values]).tensor.numpy(), out.tensor.numpy(), atol=1e-6)
    with pytest.raises(NetworkError, match="'reduce' or 'red1'/'red2', not both"):
        make("dot", {"reduce": "F", "red1": "F"}, [values_data, other], name="bad")
    # use_mask False over a dynamic axis: the padded positions as read (goldens dot_no_mask_*: computed, or data's 0)
    nomask = make("dot", {"red1": "stag:enc", "red2": "stag:enc", "var1": "stag:dec", "var2": "F", "use_mask": False},
                  [weights_data, values_data], name="nomask")
    got = run(nomask, [w_val, values]).tensor.numpy()
    for b, n in enumerate([3, 2]):  # the real decoder frames
        np.testing.assert_allclose(got[b, :n], out.tensor.numpy()[b, :n], atol=1e-6)


def test_gating_split_and_two_sources():
    data, val, x = btf(4)
    with pytest.raises(NetworkError, match="needs 'activation'"):  # RETURNN: no default
        make("gating", {}, [data], name="g0")
    layer = make("gating", {"activation": "tanh"}, [data])
    out = run(layer, [val]).tensor.numpy()
    ref = np.tanh(x[..., :2]) / (1 + np.exp(-x[..., 2:]))
    np.testing.assert_allclose(out[0], ref[0], atol=1e-5)
    assert layer.output.dim == 2
    data2, val2, x2 = btf(4, seed=1, time=data.time_dim)
    two = make("gating", {"activation": "identity"}, [data, data2], name="g2")
    np.testing.assert_allclose(run(two, [val, val2]).tensor.numpy()[0], x[0] / (1 + np.exp(-x2[0])), atol=1e-5)
    with pytest.raises(NetworkError, match="'lay'.*even"):
        make("gating", {"activation": "tanh"}, [btf(3)[0]])


def test_network_defaults_refs_and_aliases():
    assert LAYER_CLASSES["hidden"] is LAYER_CLASSES["linear"] and LAYER_CLASSES["forward"] is LAYER_CLASSES["linear"]
    extern = {"data": Data("data", shape=(None, 3)), "classes": Data("classes", dim=4, sparse=True)}
    net = TFNetwork({
        "h": {"class": "hidden", "n_out": 6, "activation": "relu"},
        "pe": {"class": "positional_encoding", "add_to_input": True, "from": "h", "offset": "len"},
        "len": {"class": "length", "from": "data"},
        "two": {"class": "constant", "value": 2.0},
        "scaled": {"class": "combine", "kind": "mul", "from": ["pe", "two"]},
        "output": {"class": "softmax", "loss": "ce", "from": "scaled"},
    }, extern)
    assert net.sources["two"] == [] and net.sources["pe"] == ["h", "len"] and net.order.index("len") < net.order.index("pe")
    batch = {"data": tf.ones([2, 3, 3]), "data:seq_len": tf.constant([3, 2]),
             "classes": tf.constant([[1, 2, 3], [0, 0, 0]]), "classes:seq_len": tf.constant([3, 2])}
    outs = net.forward(batch, RunContext(False))
    h = outs["h"].tensor.numpy()
    ref = 2 * (h + np_pos_enc(np.arange(3)[None] + np.array([3, 2])[:, None], 6))
    np.testing.assert_allclose(outs["scaled"].tensor.numpy(), ref, atol=1e-5)


def test_loss_without_target_reads_no_target_data():
    extern = {"data": Data("data", shape=(None, 3))}
    net = TFNetwork({"sq": {"class": "activation", "activation": "square", "from": "data"},
                     "loss": {"class": "reduce", "mode": "sum", "axes": "F", "from": "sq", "loss": "as_is"}}, extern)
    assert net.required_data_keys(with_targets=True) == ["data"] and net.losses[0].target is None
    x = np.arange(12, dtype=np.float32).reshape(2, 2, 3)
    batch = {"data": tf.constant(x), "data:seq_len": tf.constant([2, 1])}
    values = net.compute_losses(net.forward(batch, RunContext(False)), batch)["loss"]
    assert float(values.loss_sum) == pytest.approx(float((x[0] ** 2).sum() + (x[1, 0] ** 2).sum()))
    assert float(values.norm) == 3.0


@pytest.mark.parametrize("mode", ["logsumexp", "argmax", "argmin"])
def test_reduce_more_modes_are_masked(mode):
    data, val, x = btf(4)
    layer = make("reduce", {"mode": mode, "axes": "T"}, [data])
    out = run(layer, [val]).tensor.numpy()
    for b, n in enumerate(LENS):
        seq = x[b, :n].astype(np.float64)
        ref = {"logsumexp": np.log(np.exp(seq).sum(0)), "argmax": seq.argmax(0), "argmin": seq.argmin(0)}[mode]
        np.testing.assert_allclose(out[b], ref, rtol=1e-5)
    if mode != "logsumexp":
        assert layer.output.dtype == "int32" and layer.output.dims == (batch_dim,) + data.dims[2:]


@pytest.mark.parametrize("kind,fn", [("truediv", np.divide), ("maximum", np.maximum), ("minimum", np.minimum),
                                     ("squared_difference", lambda a, b: (a - b) ** 2), ("-", np.subtract)])
def test_combine_kinds(kind, fn):
    data, val, x = btf(4)
    data2, val2, x2 = btf(4, seed=1, time=data.time_dim)
    out = run(make("combine", {"kind": kind}, [data, data2]), [val, val2]).tensor.numpy()
    np.testing.assert_allclose(out[0], fn(x[0], x2[0]), rtol=1e-5)


def test_length_as_sparse_labels_over_the_axis():
    """length with sparse: the lengths are class indices over the measured axis (RETURNN's
    transducer configs compare step indices with it); with a behavior_version a dynamic axis' sizes
    are today's RETURNN's size data itself, int32 and dense whatever sparse/dtype say."""
    data = Data("x", shape=(None, 3))
    layer = make("length", {"sparse": True}, [data])
    assert layer.output.sparse and layer.output.sparse_dim == data.time_dim
    assert make("length", {"dtype": "float32"}, [data]).output.dtype == "float32"  # RETURNN of 2019
    from returnn.config import Config, get_global_config, set_global_config
    old = get_global_config(raise_exception=False)
    set_global_config(Config({"behavior_version": 12}))
    try:
        today = make("length", {"sparse": True, "dtype": "float32"}, [data])
        static = make("length", {"sparse": True, "axis": "F"}, [data])
    finally:
        set_global_config(old)
    assert not today.output.sparse and today.output.dtype == "int32"
    assert static.output.sparse and static.output.sparse_dim == data.feature_dim_or_sparse_dim
    out = run(layer, [LayerOutput(tf.zeros([2, 5, 3]), data, {data.time_dim: tf.constant([5, 2])})])
    assert out.tensor.numpy().tolist() == [5, 2]
    # add_time_axis: (B, 1); the batch axis and a static axis give scalars (RETURNN)
    lens = LayerOutput(tf.zeros([2, 5, 3]), data, {data.time_dim: tf.constant([5, 2])})
    out = run(make("length", {"add_time_axis": True}, [data]), [lens])
    assert out.tensor.numpy().tolist() == [[5], [2]] and out.data.time_dim_axis == 1
    assert run(make("length", {"axis": "B"}, [data]), [lens]).tensor.numpy() == 2
    assert run(make("length", {"axis": data.time_dim}, [data]), [lens]).tensor.numpy().tolist() == [5, 2]


@pytest.mark.parametrize("batch", [False, True])
def test_variable_dummy_time_axis_is_no_time_axis(batch):
    """RETURNN's variable with add_time_axis: the dummy time axis (size 1) is static, so its output has no time
    axis (RETURNN's default time axis is a dynamic one) and "T" names none (returnn_fuzz chain seed 374 #36)."""
    layer = make("variable", {"shape": [5], "add_time_axis": True, "add_batch_axis": batch}, [])
    assert layer.output.time_dim_axis is None and layer.output.dims[int(batch)].dimension == 1
    with pytest.raises(NetworkError, match="has no t axis"):
        TFNetwork({"v": {"class": "variable", "shape": [5], "add_time_axis": True, "add_batch_axis": batch},
                   "output": {"class": "math_norm", "p": 1, "axis": "T", "from": "v"}},
                  {"data": Data("data", shape=(None, 3))})
