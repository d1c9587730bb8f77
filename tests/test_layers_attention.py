"""Attention and sequence-edit layers against numpy: softmax_over_spatial, generic_attention,
dot_attention (per step and per frame), postfix/prefix_in_time, get_last_hidden_state, reduce_out."""
import numpy as np
import pytest
import tensorflow as tf

from data_utils import make_layer as make, run_layer as run
from helpers import outputs
from returnn.errors import NetworkError
from returnn.tensor import Data, FeatureDim, SpatialDim, batch_dim
from returnn.tf.layers import LayerOutput, RunContext
from returnn.tf.network import TFNetwork

ENC_LENS = [4, 2]


def _enc(dim, seed=0, time=None):
    time = time or SpatialDim("enc-time")
    data = Data("enc%i" % dim, dims=[batch_dim, time, FeatureDim("f%i" % dim, dim)])
    x = np.random.RandomState(seed).randn(2, 4, dim).astype("float32")
    x[1, 2:] = np.nan  # padding must not leak
    return data, LayerOutput(tf.constant(x), data, {time: tf.constant(ENC_LENS)}), x


def _np_softmax(e):
    e = e - e.max()
    return np.exp(e) / np.exp(e).sum()


def test_dot_attention_per_step_and_per_frame():
    keys_d, keys, k = _enc(3, 1)
    vals_d, vals, v = _enc(5, 2, time=keys_d.time_dim)
    q_np = np.random.RandomState(3).randn(2, 3).astype("float32")
    q_d = Data("q", dims=[batch_dim, FeatureDim("qf", 3)])
    layer = make("dot_attention", {"base": "v", "base_ctx": "k", "n_out": 5}, [q_d, vals_d, keys_d])
    assert layer.output.batch_shape == (None, 5)
    out = run(layer, [LayerOutput(tf.constant(q_np), q_d), vals, keys]).tensor.numpy()
    for b, n in enumerate(ENC_LENS):
        w = _np_softmax(k[b, :n] @ q_np[b])
        np.testing.assert_allclose(out[b], w @ v[b, :n], atol=1e-5)
    # a query per frame (B, Tq, F)
    qt_d = Data("qt", dims=[batch_dim, SpatialDim("dec"), FeatureDim("qf", 3)])
    layer = make("dot_attention", {"base": "v", "base_ctx": "k"}, [qt_d, vals_d, keys_d])
    qt = np.stack([q_np, -q_np], 1)
    out = run(layer, [LayerOutput(tf.constant(qt), qt_d, {qt_d.dims[1]: tf.constant([2, 2])}), vals, keys]).tensor.numpy()
    for b, n in enumerate(ENC_LENS):
        np.testing.assert_allclose(out[b, 1], _np_softmax(k[b, :n] @ -q_np[b]) @ v[b, :n], atol=1e-5)
    with pytest.raises(NetworkError, match="'lay'.*same feature size"):
        make("dot_attention", {"base": "v", "base_ctx": "k"}, [Data("q", dims=[batch_dim, FeatureDim("x", 4)]),
                                                                 vals_d, keys_d])


def test_softmax_over_spatial_and_generic_attention_in_a_decoder_step():
    """Bahdanau-style step: energies (B, T_enc, 1) from base ctx + a per-step state, softmax over
    the encoder time (padding weight 0), then the weighted sum of the encoder."""
    ctx_d, ctx, c = _enc(1, 4)
    enc_d, enc, e = _enc(6, 5, time=ctx_d.time_dim)
    sm = make("softmax_over_spatial", {}, [ctx_d])
    w = run(sm, [ctx])
    assert sm.output.dims[-1] is ctx_d.time_dim  # RETURNN: the normalised axis moves last
    wn = np.moveaxis(w.tensor.numpy(), -1, 1)
    for b, n in enumerate(ENC_LENS):
        np.testing.assert_allclose(wn[b, :n, 0], _np_softmax(c[b, :n, 0]), atol=1e-6)
        assert (wn[b, n:] == 0).all()
    att = make("generic_attention", {"weights": "w", "base": "e"}, [sm.output, enc_d])
    assert att.output.batch_shape == (None, 6)
    out = run(att, [w, enc]).tensor.numpy()
    for b, n in enumerate(ENC_LENS):
        np.testing.assert_allclose(out[b], wn[b, :n, 0] @ e[b, :n], atol=1e-5)
    scaled = run(make("softmax_over_spatial", {"energy_factor": 0.5}, [ctx_d]), [ctx]).tensor.numpy()
    np.testing.assert_allclose(scaled[0, 0, :4], _np_softmax(0.5 * c[0, :4, 0]), atol=1e-6)


@pytest.mark.parametrize("sparse", [False, True])
def test_postfix_and_prefix_in_time(sparse):
    time = SpatialDim("t")
    if sparse:
        data = Data("x", dims=[batch_dim, time], sparse_dim=FeatureDim("cls", 5))
        x = np.array([[1, 2, 3], [4, 9999, 9999]], "int32")
    else:
        data = Data("x", dims=[batch_dim, time, FeatureDim("f", 2)])
        x = np.arange(12, dtype="float32").reshape(2, 3, 2)
        x[1, 1:] = np.nan
    val = LayerOutput(tf.constant(x), data, {time: tf.constant([3, 1])})
    post = make("postfix_in_time", {"postfix": 4, "repeat": 2}, [data])
    out = run(post, [val])
    assert out.data.time_dim is not time and list(out.seq_len.numpy()) == [5, 3]
    o = out.tensor.numpy()
    np.testing.assert_array_equal(o[0, :5], np.concatenate([x[0], np.full((2,) + x.shape[2:], 4, x.dtype)]))
    np.testing.assert_array_equal(o[1, :3], np.concatenate([x[1, :1], np.full((2,) + x.shape[2:], 4, x.dtype)]))
    pre = run(make("prefix_in_time", {"prefix": 0, "repeat": 1}, [data]), [val])
    assert list(pre.seq_len.numpy()) == [4, 2]
    np.testing.assert_array_equal(pre.tensor.numpy()[0, :4], np.concatenate([np.zeros((1,) + x.shape[2:], x.dtype), x[0]]))


def test_get_last_hidden_state_of_lstm_and_gru():
    extern = {"data": Data("data", shape=(None, 3))}
    net = TFNetwork(outputs({"lstm": {"class": "rec", "unit": "nativelstm2", "n_out": 4, "from": "data"},
                     "bw": {"class": "rec", "unit": "nativelstm2", "n_out": 4, "from": "data", "direction": -1},
                     "gru": {"class": "rnn_cell", "unit": "GRU", "n_out": 2, "from": "data"},
                     "last": {"class": "get_last_hidden_state", "from": "lstm", "n_out": 8},
                     "last_h": {"class": "get_last_hidden_state", "from": "lstm", "key": "h", "n_out": 4},
                     "last_g": {"class": "get_last_hidden_state", "from": ["lstm", "gru"], "n_out": 10},
                     "last_bw": {"class": "get_last_hidden_state", "from": "bw", "key": "h", "n_out": 4}}), extern)
    x = np.random.RandomState(0).randn(2, 5, 3).astype("float32")
    lens = [5, 2]
    x[1, 2:] = np.nan
    outs = net.forward({"data": tf.constant(x), "data:seq_len": tf.constant(lens)}, RunContext(False))
    y, g = outs["lstm"].tensor.numpy(), outs["gru"].tensor.numpy()
    last, last_h = outs["last"].tensor.numpy(), outs["last_h"].tensor.numpy()
    for b, n in enumerate(lens):
        np.testing.assert_allclose(last[b, 4:], y[b, n - 1], atol=1e-5)  # [c, h]: h is the last real output
        np.testing.assert_allclose(last_h[b], y[b, n - 1], atol=1e-5)
        np.testing.assert_allclose(outs["last_g"].tensor.numpy()[b], np.concatenate([last[b], g[b, n - 1]]), atol=1e-5)
        np.testing.assert_allclose(outs["last_bw"].tensor.numpy()[b], outs["bw"].tensor.numpy()[b, 0], atol=1e-5)
    assert np.isfinite(last).all() and not np.allclose(last[:, :4], last[:, 4:])
    with tf.GradientTape() as tape:
        outs = net.forward({"data": tf.constant(np.nan_to_num(x)), "data:seq_len": tf.constant(lens)}, RunContext(False))
        loss = tf.reduce_sum(outs["last"].tensor[:, :4])  # through c only
    assert tape.gradient(loss, net.layers["lstm"].W_re) is not None


def test_reduce_out_maxout():
    data = Data("x", dims=[batch_dim, SpatialDim("t"), FeatureDim("f", 6)])
    x = np.random.RandomState(1).randn(2, 3, 6).astype("float32")
    layer = make("reduce_out", {"mode": "max", "num_pieces": 2}, [data])
    assert layer.output.dim == 3
    out = run(layer, [LayerOutput(tf.constant(x), data, {data.dims[1]: tf.constant([3, 3])})]).tensor.numpy()
    np.testing.assert_allclose(out, x.reshape(2, 3, 3, 2).max(-1))
    with pytest.raises(NetworkError, match="'lay'.*num_pieces"):
        make("reduce_out", {"num_pieces": 4}, [data])


def test_generic_attention_with_heads_and_decoder_time():
    """RETURNN's multi-head form: weights (B, T_enc, H) over values (B, T_enc, H, D); and weights
    with an extra decoder time axis (whole-sequence attention)."""
    enc_time, heads = SpatialDim("enc"), FeatureDim("heads", 2)
    base_d = Data("v", dims=[batch_dim, enc_time, SpatialDim("h", 2), FeatureDim("d", 3)])
    v = np.random.RandomState(0).randn(2, 4, 2, 3).astype("float32")
    v[1, 2:] = np.nan
    base = LayerOutput(tf.constant(v), base_d, {enc_time: tf.constant(ENC_LENS)})
    w_d = Data("w", dims=[batch_dim, enc_time, heads])
    w = np.random.RandomState(1).rand(2, 4, 2).astype("float32")
    w[1, 2:] = np.nan
    layer = make("generic_attention", {"weights": "w", "base": "v"}, [w_d, base_d])
    assert layer.output.batch_shape == (None, 2, 3)
    out = run(layer, [LayerOutput(tf.constant(w), w_d, {enc_time: tf.constant(ENC_LENS)}), base]).tensor.numpy()
    for b, n in enumerate(ENC_LENS):
        np.testing.assert_allclose(out[b], np.einsum("th,thd->hd", w[b, :n], v[b, :n]), atol=1e-5)
    dec = SpatialDim("dec")
    wd_d = Data("wd", dims=[batch_dim, dec, enc_time, FeatureDim("one", 1)])
    e_d = Data("e", dims=[batch_dim, enc_time, FeatureDim("f", 3)])
    e = np.random.RandomState(2).randn(2, 4, 3).astype("float32")
    wd = np.random.RandomState(3).rand(2, 5, 4, 1).astype("float32")
    layer = make("generic_attention", {"weights": "wd", "base": "e"}, [wd_d, e_d])
    assert layer.output.dims[1] is dec and layer.output.dim == 3
    out = run(layer, [LayerOutput(tf.constant(wd), wd_d, {dec: tf.constant([5, 5]), enc_time: tf.constant(ENC_LENS)}),
                      LayerOutput(tf.constant(e), e_d, {enc_time: tf.constant(ENC_LENS)})]).tensor.numpy()
    np.testing.assert_allclose(out[1], np.einsum("st,tf->sf", wd[1, :, :2, 0], e[1, :2]), atol=1e-5)


def test_softmax_over_spatial_window():
    """Local attention: only positions start <= t < start + size get weight (start per sequence)."""
    ctx_d, ctx, c = _enc(1, 4)
    start_d = Data("start", dims=[batch_dim], dtype="int32")
    layer = make("softmax_over_spatial", {"window_start": "start", "window_size": 2}, [ctx_d, start_d])
    w = np.moveaxis(run(layer, [ctx, LayerOutput(tf.constant([1, 0]), start_d)]).tensor.numpy(), -1, 1)
    np.testing.assert_allclose(w[0, 1:3, 0], _np_softmax(c[0, 1:3, 0]), atol=1e-6)
    assert w[0, 0, 0] == 0 and w[0, 3, 0] == 0
    np.testing.assert_allclose(w[1, 0:2, 0], _np_softmax(c[1, 0:2, 0]), atol=1e-6)
    fixed = np.moveaxis(run(make("softmax_over_spatial", {"window_start": 2, "window_size": 5}, [ctx_d]),
                            [ctx]).tensor.numpy(), -1, 1)
    np.testing.assert_allclose(fixed[0, 2:, 0], _np_softmax(c[0, 2:4, 0]), atol=1e-6)
    assert (fixed[1] == 0).all()  # the window lies beyond the sequence: no weight anywhere
    # RETURNN: window_size without window_start has no effect (but needs the time mask); the reverse is an error
    alone = run(make("softmax_over_spatial", {"window_size": 1}, [ctx_d]), [ctx]).tensor.numpy()
    plain = run(make("softmax_over_spatial", {}, [ctx_d]), [ctx]).tensor.numpy()
    np.testing.assert_array_equal(alone, plain)
    with pytest.raises(NetworkError, match="window_size needs use_time_mask"):
        make("softmax_over_spatial", {"window_size": 1, "use_time_mask": False}, [ctx_d])
    with pytest.raises(NetworkError, match="window_start needs window_size"):
        make("softmax_over_spatial", {"window_start": 1}, [ctx_d])


def test_generic_attention_pairs_base_axes_by_size_from_the_last_as_returnn():
    """Search step of a 1-head dot attention (2019 LSTM-decoder configs): weights (B, H_key(1), T, var2(1))
    from a dot layer, base (B, T, H_value(1), V); no dim in common but time: RETURNN pairs the base's
    head with the weights' last size-1 axis and squeezes the other."""
    enc_time = SpatialDim("enc")
    base_d = Data("v", dims=[batch_dim, enc_time, SpatialDim("h_value", 1), FeatureDim("d", 3)])
    w_d = Data("w", dims=[batch_dim, SpatialDim("h_key", 1), enc_time, FeatureDim("var2", 1)])
    layer = make("generic_attention", {"weights": "w", "base": "v"}, [w_d, base_d])
    assert layer.output.dims[1] is base_d.dims[2] and layer.output.batch_shape == (None, 1, 3)
    v = np.random.RandomState(0).randn(2, 4, 1, 3).astype("float32")
    w = np.random.RandomState(1).rand(2, 1, 4, 1).astype("float32")
    v[1, 2:], w[1, :, 2:] = np.nan, np.nan
    out = run(layer, [LayerOutput(tf.constant(w), w_d, {enc_time: tf.constant(ENC_LENS)}),
                      LayerOutput(tf.constant(v), base_d, {enc_time: tf.constant(ENC_LENS)})]).tensor.numpy()
    for b, n in enumerate(ENC_LENS):
        np.testing.assert_allclose(out[b, 0], w[b, 0, :n, 0] @ v[b, :n, 0], atol=1e-5)


def test_softmax_over_spatial_without_axis_needs_a_time_axis():
    """RETURNN asserts a time axis when no 'axis' is given; after a merge_dims of the time axis into the features
    (behavior version 21) the merged dynamic axis is none (returnn_fuzz chain seed 372 #34: taken here)."""
    from returnn.config import Config, get_global_config, set_global_config
    old = get_global_config()
    set_global_config(Config({"behavior_version": 21}))
    try:
        with pytest.raises(NetworkError, match="'output' \\(softmax_over_spatial\\): .*no time axis"):
            TFNetwork(outputs({"m": {"class": "merge_dims", "axes": ["F", "T"], "from": "data"},
                               "output": {"class": "softmax_over_spatial", "from": "m"}}),
                      {"data": Data("data", shape=(None, 3))})
    finally:
        set_global_config(old)
