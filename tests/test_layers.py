"""Layers against numpy references, incl. masking of padded frames and tf.function tracing."""
import numpy as np
import pytest
import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, FeatureDim, SpatialDim, batch_dim
from returnn.tf.activations import get_activation
from data_utils import lo, rebind, sig, spec, value
from returnn.tf.layers import RunContext, get_layer_class
from returnn.tf.layers.conv import conv_out_len

LENS = [5, 3, 1]
B, T, D = 3, 5, 4


def make(cls: str, opts: dict, specs, name: str = "lay", seed: int = 1):
    return get_layer_class(cls, name)(name, dict(opts), list(specs), seed=seed)


def dense(seed=0, lens=LENS, dim=D, t=None):
    rng = np.random.RandomState(seed)
    t = t or max(lens)
    x = rng.randn(len(lens), t, dim).astype(np.float32)
    return x, np.array(lens, np.int32)


def garble(x, lens, value=None, seed=5):
    """Copy of x with padded frames overwritten (random large values, or ``value``)."""
    x = x.copy()
    rng = np.random.RandomState(seed)
    for b, n in enumerate(lens):
        pad = x[b, n:]
        x[b, n:] = value if value is not None else rng.randn(*pad.shape).astype(x.dtype) * 100
    return x


def run(layer, srcs, train=False, seed=(1, 2)):
    """Runs ``layer`` on values re-bound to the templates it was built with."""
    srcs = [rebind(x, data) for x, data in zip(srcs, layer.sources)]
    return layer(srcs, RunContext(train, tf.constant(seed, tf.int64)))


def real_frames_close(a, b, lens, atol=1e-5):
    for i, n in enumerate(lens):
        np.testing.assert_allclose(a[i, :n], b[i, :n], atol=atol, rtol=1e-5)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


# ------------------------------------------------------------------ linear family

def test_linear_matches_numpy_and_concatenates_sources():
    x1, lens = dense(0)
    x2, _ = dense(1, dim=2)
    layer = make("linear", {"n_out": 6, "activation": "relu"}, [spec(4), spec(2)])
    out = run(layer, [lo(x1, lens), lo(x2, lens)])
    w, b = layer.W.numpy(), layer.bias.numpy()
    ref = np.maximum(np.concatenate([x1, x2], -1) @ w + b, 0)
    real_frames_close(out.tensor.numpy(), ref, lens)
    assert sig(layer.output) == (6, False, True, 3) and out.logits is None


def test_linear_without_bias_and_time_less_input():
    x = np.random.RandomState(0).randn(3, 4).astype(np.float32)
    layer = make("linear", {"n_out": 2, "with_bias": False}, [spec(4, has_time=False)])
    out = run(layer, [lo(x, None, has_time=False)])
    assert layer.bias is None and out.seq_len is None and not layer.output.have_time_axis()
    np.testing.assert_allclose(out.tensor.numpy(), x @ layer.W.numpy(), atol=1e-5)


def test_linear_with_transposed_weights():
    """use_transposed_weights: W is stored (n_out, n_in), the map is x @ W.T (RETURNN's LM configs
    share it with an embedding); param_device is accepted."""
    x = np.random.RandomState(0).randn(3, 4).astype(np.float32)
    layer = make("softmax", {"n_out": 5, "use_transposed_weights": True, "param_device": "CPU"},
                 [spec(4, has_time=False)])
    assert layer.W.shape == (5, 4)
    out = run(layer, [lo(x, None, has_time=False)])
    np.testing.assert_allclose(out.logits.numpy(), x @ layer.W.numpy().T + layer.bias.numpy(), atol=1e-5)
    # an option of RETURNN's LayerBase: every layer class takes it (published LMs set it on positional_encoding too)
    for cls, opts in (("positional_encoding", {"add_to_input": True}), ("copy", {}), ("rec", {"n_out": 3})):
        make(cls, dict(opts, param_device="CPU"), [spec(4)])


def test_sparse_input_is_embedding_and_padding_indices_are_ignored():
    idx = np.array([[1, 4, 0, 2, 3], [2, 2, 1, 999, -7], [4, 12345, 0, 0, 0]], np.int32)
    layer = make("linear", {"n_out": 3}, [spec(5, sparse=True)])
    out = run(layer, [lo(idx, LENS, dim=5, sparse=True)]).tensor.numpy()
    ref = np.eye(5, dtype=np.float32)[np.clip(idx, 0, 4)] @ layer.W.numpy() + layer.bias.numpy()
    real_frames_close(out, ref, LENS)


def test_linear_refuses_labels_beside_other_sources():
    """RETURNN's concat_sources asserts "sparse concat not supported" (2017 to today): labels are embedded
    alone. This engine joined them as one-hot vectors."""
    with pytest.raises(NetworkError, match="sparse \\(labels\\) beside other sources"):
        make("linear", {"n_out": 4}, [spec(3, sparse=True), spec(2)])


def test_softmax_sets_logits():
    x, lens = dense(0)
    layer = make("softmax", {"n_out": 5}, [spec(4)])
    out = run(layer, [lo(x, lens)])
    logits = x @ layer.W.numpy() + layer.bias.numpy()
    probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    real_frames_close(out.logits.numpy(), logits, lens)
    real_frames_close(out.tensor.numpy(), probs, lens)


def test_copy_activation_combine_source():
    x1, lens = dense(0)
    x2, _ = dense(1)
    s1, s2 = lo(x1, lens), lo(x2, lens)
    out = run(make("copy", {}, [s1.data, s2.data]), [s1, s2])
    assert out.data.dim == 8
    real = (np.arange(x1.shape[1])[None, :] < np.asarray(lens)[:, None])[:, :, None]
    # padded frames of data as datasets feed them (zeros), what RETURNN's concatenation holds there
    np.testing.assert_allclose(out.tensor.numpy(), np.where(real, np.concatenate([x1, x2], -1), 0.0))
    out = run(make("activation", {"activation": "relu"}, [s1.data]), [s1])
    np.testing.assert_allclose(out.tensor.numpy(), np.maximum(x1, 0), atol=1e-6)
    for kind, ref in [("add", x1 + x2), ("sub", x1 - x2), ("mul", x1 * x2), ("average", (x1 + x2) / 2)]:
        out = run(make("combine", {"kind": kind}, [s1.data, s2.data]), [s1, s2])
        np.testing.assert_allclose(out.tensor.numpy(), ref, atol=1e-6)
    out = run(make("combine", {"kind": "add", "activation": "sigmoid"}, [s1.data, s2.data]), [s1, s2])
    np.testing.assert_allclose(out.tensor.numpy(), sigmoid(x1 + x2), atol=1e-6)
    # features of different sizes: RETURNN's get_common_data gives the outer layout [B,T,4,3] (its
    # default feature axis: the last static one) before behavior_version 4, refuses it from then on
    outer = make("combine", {"kind": "add"}, [spec(4), spec(3)], name="comb")
    assert outer.output.batch_shape == (None, None, 4, 3) and outer.output.dim == 3
    from returnn.config import set_global_config
    old = _bn_config(4)
    try:
        with pytest.raises(NetworkError, match="'comb'.*every source needs broadcasting"):
            make("combine", {"kind": "add"}, [spec(4), spec(3)], name="comb")
    finally:
        set_global_config(old)
    idx = lo(np.array([[1, 2, 3, 0, 0]] * 3, np.int32), lens, dim=4, sparse=True)
    layer = make("source", {"data_key": "classes"}, [idx.data])
    out = run(layer, [idx], train=True)
    assert layer.output.dims == idx.data.dims and out.tensor is idx.tensor


def test_activations_registry():
    x = tf.constant([-2.0, 0.5, 3.0])
    np.testing.assert_allclose(get_activation("abs")(x).numpy(), [2.0, 0.5, 3.0])
    np.testing.assert_allclose(get_activation(None)(x).numpy(), x.numpy())
    np.testing.assert_allclose(get_activation("log_softmax")(x).numpy(), tf.nn.log_softmax(x).numpy())
    with pytest.raises(NetworkError, match="'foo'.*bogus"):
        get_activation("bogus", "foo")
    # a factor, as in RETURNN's attention demos ("2*sigmoid")
    np.testing.assert_allclose(get_activation("2*sigmoid")(x).numpy(), 2 * tf.sigmoid(x).numpy(), rtol=1e-6)
    np.testing.assert_allclose(get_activation("0.5*relu")(x).numpy(), [0.0, 0.25, 1.5])


# ------------------------------------------------------------------ dropout

def test_dropout_deterministic_keep_rate_and_eval_identity():
    x = np.ones([4, 50, 20], np.float32)
    lens = np.array([50, 40, 30, 20], np.int32)
    layer = make("dropout", {"dropout": 0.3, "dropout_noise_shape": {"*": None}}, [spec(20)])
    src = lo(x, lens)
    a = run(layer, [src], train=True, seed=(3, 4)).tensor.numpy()
    b = run(layer, [src], train=True, seed=(3, 4)).tensor.numpy()
    c = run(layer, [src], train=True, seed=(3, 5)).tensor.numpy()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    np.testing.assert_allclose(np.unique(a), [0.0, 1 / 0.7], rtol=1e-6)
    assert abs((a > 0).mean() - 0.7) < 0.03
    np.testing.assert_array_equal(run(layer, [src], train=False).tensor.numpy(), x)


def test_dropout_default_mask_is_shared_by_all_frames_and_sequences():
    """RETURNN's default noise shape: one mask value per feature, the same for every sequence and
    frame of the batch (and for both axes of a 2-D spatial input); a new mask per seed."""
    x = np.ones([4, 50, 64], np.float32)
    lens = np.array([50, 40, 30, 20], np.int32)
    layer = make("dropout", {"dropout": 0.5}, [spec(64)])
    masks = []
    for seed in ((3, 4), (3, 5)):
        out = run(layer, [lo(x, lens)], train=True, seed=seed).tensor.numpy()
        assert set(np.unique(out)) == {0.0, 2.0}
        assert (out == out[:1, :1]).all(), "the mask differs between frames or sequences"
        masks.append(out[0, 0])
    assert not np.array_equal(*masks)
    # a 2-D input (B, T, F', C): shared over T and F', own value per channel
    x4 = np.ones([2, 6, 5, 32], np.float32)
    data = Data("x4", dims=[batch_dim, SpatialDim("time"), SpatialDim("freq", 5), FeatureDim("chan", 32)])
    layer = make("dropout", {"dropout": 0.5}, [data])
    out = run(layer, [value(x4, [6, 4], data)], train=True, seed=(1, 2)).tensor.numpy()
    assert (out == out[:1, :1, :1]).all() and len(np.unique(out[0, 0, 0])) == 2


def test_dropout_option_applies_to_input_of_any_layer():
    x, lens = dense(0)
    plain = make("linear", {"n_out": 3}, [spec(4)], name="l1")
    drop = make("linear", {"n_out": 3, "dropout": 0.5}, [spec(4)], name="l1")
    np.testing.assert_allclose(run(drop, [lo(x, lens)]).tensor.numpy(), run(plain, [lo(x, lens)]).tensor.numpy())
    out = run(drop, [lo(x, lens)], train=True).tensor.numpy()
    ref = run(plain, [lo(x, lens)]).tensor.numpy()
    assert not np.allclose(out, ref)
    # every output frame is (x * mask / keep) @ W + b for some 0/1 mask: check the bias-only case
    zero = run(drop, [lo(np.zeros_like(x), lens)], train=True).tensor.numpy()
    np.testing.assert_allclose(zero, np.broadcast_to(drop.bias.numpy(), zero.shape))


# ------------------------------------------------------------------ reduce

@pytest.mark.parametrize("mode", ["sum", "mean", "max", "min"])
def test_reduce_time_is_masked(mode):
    x, lens = dense(0)
    layer = make("reduce", {"mode": mode, "axes": "T"}, [spec(4)])
    out = run(layer, [lo(garble(x, lens), lens)])
    fn = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}[mode]
    ref = np.stack([fn(x[b, :n], axis=0) for b, n in enumerate(lens)])
    np.testing.assert_allclose(out.tensor.numpy(), ref, atol=1e-5)
    assert out.seq_len is None and sig(layer.output) == (4, False, False, 2)


def test_reduce_feature_and_keep_dims():
    x, lens = dense(0)
    out = run(make("reduce", {"mode": "max", "axis": "F"}, [spec(4)]), [lo(x, lens)])
    np.testing.assert_allclose(out.tensor.numpy(), x.max(-1))  # RETURNN: the reduced axis is removed
    assert out.data.dims == out.data.dims[:2] and out.data.dim is None
    layer = make("reduce", {"mode": "sum", "axes": ["time"], "keep_dims": True}, [spec(4)])
    out = run(layer, [lo(x, lens)])
    # RETURNN: a static engine-made axis of size 1 (no lengths), still the time axis
    assert out.tensor.shape == (3, 1, 4) and out.seq_len is None and layer.output.have_time_axis()
    assert layer.output.dims[1].dimension == 1 and layer.output.dims[1].auto_generated
    with pytest.raises(NetworkError, match="'red'.*axis"):
        make("reduce", {"mode": "sum", "axes": "B"}, [spec(4)], name="red")


# ------------------------------------------------------------------ LSTM

def np_lstm(x, w, w_re, b, forget_bias=1.0):
    h_dim = w_re.shape[0]
    h, c, ys = np.zeros(h_dim), np.zeros(h_dim), []
    for t in range(len(x)):
        z = x[t] @ w + h @ w_re + b
        i, g, f, o = np.split(z, 4)
        c = sigmoid(f + forget_bias) * c + sigmoid(i) * np.tanh(g)
        h = sigmoid(o) * np.tanh(c)
        ys.append(h)
    return np.array(ys).reshape(len(x), h_dim)


@pytest.mark.parametrize("direction", [1, -1])
def test_lstm_matches_numpy_per_sequence(direction):
    x, lens = dense(0)
    layer = make("rec", {"unit": "nativelstm2", "n_out": 3, "direction": direction}, [spec(4)])
    out = run(layer, [lo(garble(x, lens), lens)]).tensor.numpy()
    args = (layer.W.numpy(), layer.W_re.numpy(), layer.bias.numpy(), 0.0)  # RETURNN's NativeLSTM: no forget bias
    for b, n in enumerate(lens):
        seq = x[b, :n]
        ref = np_lstm(seq, *args) if direction == 1 else np_lstm(seq[::-1], *args)[::-1]
        np.testing.assert_allclose(out[b, :n], ref, atol=1e-5)
        np.testing.assert_array_equal(out[b, n:], 0.0)


def test_lstm_units_forget_bias_and_sparse_input():
    # RETURNN's defaults: the native kernels (and names it maps to them) have no forget bias,
    # TensorFlow's LSTM cells add 1.0
    for unit in ["lstm", "NativeLSTM", "nativelstm2", "NativeLstmLowMem", "lstmp", "CudnnLSTM", "lstmblock",
                 "LSTMBlockFused"]:
        assert make("rec", {"unit": unit, "n_out": 2}, [spec(4)]).forget_bias == 0.0
    for unit in ["standardlstm", "basiclstm"]:
        assert make("rec", {"unit": unit, "n_out": 2}, [spec(4)]).forget_bias == 1.0
    idx = np.array([[1, 0, 2, 2, 1], [0, 1, 2, 0, 0], [2, 0, 0, 0, 0]], np.int32)
    layer = make("rec", {"unit": "lstm", "n_out": 2, "unit_opts": {"forget_bias": 0.0}}, [spec(3, sparse=True)])
    layer.bias.assign(np.random.RandomState(0).randn(8).astype(np.float32))
    out = run(layer, [lo(idx, LENS, dim=3, sparse=True)]).tensor.numpy()
    for b, n in enumerate(LENS):
        ref = np_lstm(np.eye(3)[idx[b, :n]], layer.W.numpy(), layer.W_re.numpy(), layer.bias.numpy(), 0.0)
        np.testing.assert_allclose(out[b, :n], ref, atol=1e-5)


def test_lstm_nan_padding_does_not_reach_outputs_or_gradients():
    x, lens = dense(1)
    layer = make("rec", {"unit": "lstm", "n_out": 3}, [spec(4)])
    with tf.GradientTape() as tape:
        out = run(layer, [lo(garble(x, lens, value=np.nan), lens)])
        loss = tf.reduce_sum(out.tensor)
    grads = tape.gradient(loss, layer.trainable_variables)
    assert np.isfinite(out.tensor.numpy()).all()
    assert all(np.isfinite(g.numpy()).all() for g in grads)


def test_rec_errors_name_layer():
    with pytest.raises(NetworkError, match="'enc'.*'gru'.*nativelstm2"):
        make("rec", {"unit": "gru", "n_out": 2}, [spec(4)], name="enc")
    with pytest.raises(NetworkError, match="'enc'.*direction"):
        make("rec", {"unit": "lstm", "n_out": 2, "direction": 2}, [spec(4)], name="enc")
    with pytest.raises(NetworkError, match="'enc'.*n_out"):
        make("rec", {"unit": "lstm"}, [spec(4)], name="enc")


# ------------------------------------------------------------------ conv / pool

def np_conv(x, w, b, stride, dilation, padding):
    k = w.shape[0]
    k_eff = (k - 1) * dilation + 1
    if padding == "same":
        left = (k_eff - 1) // 2
        x = np.pad(x, [(left, k_eff - 1 - left), (0, 0)])
    starts = range(0, len(x) - k_eff + 1, stride)
    return np.array([sum(x[t + j * dilation] @ w[j] for j in range(k)) + b for t in starts]).reshape(-1, w.shape[2])


@pytest.mark.parametrize("k,stride,dilation,padding", [
    (3, 1, 1, "same"), (2, 1, 1, "same"), (3, 2, 1, "same"), (3, 2, 1, "valid"), (2, 1, 2, "same"),
    (3, 1, 2, "valid"), (2, 3, 2, "same"), (4, 1, 1, "valid")])
def test_conv_matches_numpy_per_sequence(k, stride, dilation, padding):
    lens = [7, 4, 2]
    x, lens = dense(0, lens=lens)
    opts = {"filter_size": [k], "strides": stride, "dilation_rate": dilation, "padding": padding, "n_out": 3,
            "with_bias": True}
    layer = make("conv", opts, [spec(4)])
    out = run(layer, [lo(garble(x, lens, value=0.0), lens)])  # zero padding, as from a dataset
    y, out_lens = out.tensor.numpy(), out.seq_len.numpy()
    for b, n in enumerate(lens):
        ref = np_conv(x[b, :n], layer.W.numpy(), layer.bias.numpy(), stride, dilation, padding)
        assert out_lens[b] == len(ref) == conv_out_len(n, k, stride, dilation, padding)
        np.testing.assert_allclose(y[b, :out_lens[b]], ref, atol=1e-5)


@pytest.mark.parametrize("use_time_mask", [False, True])
def test_conv_reads_padded_frames_as_they_are_unless_use_time_mask(use_time_mask):
    """RETURNN convolves the padded tensor as it is (a linear layer's bias, a cumsum's total there)
    unless use_time_mask sets padded frames to 0; its output's padded frames are not masked."""
    lens = [5, 2]
    x, lens = dense(0, lens=lens)
    dirty = garble(x, lens, value=3.0)
    layer = make("conv", {"filter_size": [3], "padding": "same", "n_out": 2, "use_time_mask": use_time_mask,
                          "with_bias": True},
                 [spec(4)])
    y = run(layer, [lo(dirty, lens)]).tensor.numpy()
    w, bias = layer.W.numpy(), layer.bias.numpy()
    seen = garble(x, lens, value=0.0) if use_time_mask else dirty
    ref = np_conv(seen[1], w, bias, 1, 1, "same")  # the whole padded row, zeros only beyond it
    np.testing.assert_allclose(y[1, :2], ref[:2], atol=1e-4)
    if not use_time_mask:
        assert not np.allclose(ref[1], np_conv(x[1, :2], w, bias, 1, 1, "same")[1])  # the padded frame counted


def test_conv_same_stride1_agrees_with_tf_conv1d():
    x, lens = dense(2, lens=[6, 6, 6])
    layer = make("conv", {"filter_size": 4, "padding": "same", "n_out": 2, "with_bias": False}, [spec(4)])
    ref = tf.nn.conv1d(x, layer.W, stride=1, padding="SAME").numpy()
    np.testing.assert_allclose(run(layer, [lo(x, lens)]).tensor.numpy(), ref, atol=1e-5)


def np_pool(x, k, stride, padding, mode, n=None, use_time_mask=False):
    """RETURNN's pool of one padded sequence ``x`` (T, F) whose first ``n`` frames are real: padded
    frames take part as zeros (use_time_mask: left out of max, counted as 0 by avg); window
    padding beyond T is ignored (TF's SAME)."""
    rows = [r for r in x]
    n = len(rows) if n is None else n
    rows = rows[:n] + [(None if mode == "max" else np.zeros_like(r)) if use_time_mask else np.zeros_like(r)
                       for r in rows[n:]]
    if padding == "same":
        left = (k - 1) // 2
        rows = [None] * left + rows + [None] * (k - 1 - left)
    out = []
    for t in range(0, len(rows) - k + 1, stride):
        win = np.array([r for r in rows[t:t + k] if r is not None])
        out.append(np.zeros(x.shape[1]) if not len(win) else win.max(0) if mode == "max" else win.mean(0))
    return np.array(out).reshape(-1, x.shape[1])


@pytest.mark.parametrize("use_time_mask", [False, True])
@pytest.mark.parametrize("mode", ["max", "avg"])
@pytest.mark.parametrize("k,stride,padding", [(2, None, "valid"), (3, None, "same"), (3, 1, "same"), (2, 1, "valid")])
def test_pool_matches_numpy_per_sequence(mode, k, stride, padding, use_time_mask):
    """RETURNN's pooling: padded frames inside the batch take part as they are unless use_time_mask
    (max: left out; avg: counted as 0)."""
    lens = [7, 4, 2]
    x, lens = dense(0, lens=lens)
    x = x - 1.0  # mostly negative values: a padded 0 wins a max window
    opts = {"mode": mode, "pool_size": k, "padding": padding, "use_time_mask": use_time_mask}
    if stride:
        opts["strides"] = stride
    layer = make("pool", opts, [spec(4)])
    # padded frames: zeros as from a dataset (taken as they are), or garbage that use_time_mask leaves out
    out = run(layer, [lo(garble(x, lens, value=1e4 if use_time_mask else 0.0), lens)])
    y, out_lens = out.tensor.numpy(), out.seq_len.numpy()
    for b, n in enumerate(lens):
        ref = np_pool(x[b], k, stride or k, padding, mode, n, use_time_mask)[:out_lens[b]]
        assert out_lens[b] == len(np_pool(x[b, :n], k, stride or k, padding, mode))
        np.testing.assert_allclose(y[b, :out_lens[b]], ref, atol=1e-5)


def test_conv_pool_option_errors():
    with pytest.raises(NetworkError, match="'c1'.*filter_size"):
        make("conv", {"filter_size": [3, 3], "n_out": 2}, [spec(4)], name="c1")
    with pytest.raises(NetworkError, match="'c1'.*padding"):
        make("conv", {"filter_size": 3, "n_out": 2, "padding": "full"}, [spec(4)], name="c1")
    with pytest.raises(NetworkError, match="'p1'.*mode"):
        make("pool", {"mode": "median", "pool_size": 2}, [spec(4)], name="p1")
    with pytest.raises(NetworkError, match="'p1'.*spatial axes"):
        make("pool", {"mode": "max", "pool_size": 2}, [spec(4, has_time=False)], name="p1")  # no spatial axis


# ------------------------------------------------------------------ norm

def test_layer_norm():
    x, lens = dense(0)
    layer = make("layer_norm", {"epsilon": 1e-5}, [spec(4)])
    layer.gamma.assign([1.0, 2.0, 0.5, 1.0])
    layer.beta.assign([0.0, 1.0, 0.0, -1.0])
    ref = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * layer.gamma.numpy() \
        + layer.beta.numpy()
    np.testing.assert_allclose(run(layer, [lo(x, lens)]).tensor.numpy(), ref, atol=1e-5)


def test_batch_norm_train_uses_masked_stats_and_updates_moving_averages():
    x, lens = dense(0)
    x = x * 3 + 2
    layer = make("batch_norm", {"momentum": 0.25, "epsilon": 1e-4, "update_sample_only_in_training": True,
                                "delay_sample_update": True}, [spec(4)])
    assert {v.name for v in layer.trainable_variables} == {"batch_norm_gamma:0", "batch_norm_beta:0"}
    real = np.concatenate([x[b, :n] for b, n in enumerate(lens)])
    mean, var = real.mean(0), real.var(0)
    out = run(layer, [lo(garble(x, lens), lens)], train=True).tensor.numpy()
    real_frames_close(out, (x - mean) / np.sqrt(var + 1e-4), lens, atol=1e-4)
    np.testing.assert_allclose(layer.bn.moving_mean.numpy(), 0.25 * mean, atol=1e-5)
    np.testing.assert_allclose(layer.bn.moving_variance.numpy(), 0.75 + 0.25 * var, atol=1e-5)
    run(layer, [lo(x, lens)], train=True)
    np.testing.assert_allclose(layer.bn.moving_mean.numpy(), 0.75 * 0.25 * mean + 0.25 * mean, atol=1e-5)
    mm, mv = layer.bn.moving_mean.numpy(), layer.bn.moving_variance.numpy()
    ev = run(layer, [lo(x, lens)], train=False).tensor.numpy()
    np.testing.assert_allclose(ev, (x - mm) / np.sqrt(mv + 1e-4), atol=1e-4)
    np.testing.assert_array_equal(layer.bn.moving_mean.numpy(), mm)  # eval does not update (behavior_version 12)


def _bn_config(version):
    from returnn.config import Config, get_global_config, set_global_config
    old = get_global_config()
    set_global_config(Config({"behavior_version": version}))
    return old


@pytest.mark.parametrize("version", [0, 12])
def test_batch_norm_defaults_follow_behavior_version(version):
    from returnn.config import set_global_config
    x, lens = dense(0)
    x = x * 3 + 2
    real = np.concatenate([x[b, :n] for b, n in enumerate(lens)])
    mean, var = real.mean(0), real.var(0)
    old = _bn_config(version)
    try:
        layer = make("batch_norm", {"epsilon": 1e-4, "masked_time": True}, [spec(4)])  # required from version 12
    finally:
        set_global_config(old)
    m = 0.99 if version < 12 else 0.1
    assert layer.bn.momentum == m
    ev = run(layer, [lo(garble(x, lens), lens)], train=False).tensor.numpy()
    if version < 12:  # old RETURNN: evaluation updates the moving statistics and uses them at once
        np.testing.assert_allclose(layer.bn.moving_mean.numpy(), m * mean, atol=1e-5)
        mm, mv = m * mean, 1 + (var - 1) * m
    else:
        np.testing.assert_array_equal(layer.bn.moving_mean.numpy(), 0.0)
        mm, mv = np.zeros(4), np.ones(4)
    real_frames_close(ev, (x - mm) / np.sqrt(mv + 1e-4), lens, atol=1e-4)


def test_batch_norm_use_sample_force_sample_unmasked_and_inits():
    x, lens = dense(0)
    layer = make("batch_norm", {"momentum": 0.5, "epsilon": 1e-4, "use_sample": 0.25, "force_sample": True,
                                "masked_time": False, "update_sample_only_in_training": True,
                                "delay_sample_update": True, "gamma_init": 2.0, "beta_init": 0.5}, [spec(4)])
    g = garble(x, lens, value=0.0)  # padding is part of the statistics without masked_time
    flat = g.reshape(-1, 4)
    mean, var = flat.mean(0), flat.var(0)
    out = run(layer, [lo(g, lens)], train=True).tensor.numpy()
    mix_m, mix_v = 0.75 * mean + 0.25 * 0.0, 0.75 * var + 0.25 * 1.0  # moving stats before the update
    real_frames_close(out, (g - mix_m) / np.sqrt(mix_v + 1e-4) * 2.0 + 0.5, lens, atol=1e-4)
    np.testing.assert_allclose(layer.bn.moving_mean.numpy(), 0.5 * mean, atol=1e-5)
    ev = run(layer, [lo(g, lens)], train=False).tensor.numpy()  # force_sample: the mix in evaluation too
    mix_m, mix_v = 0.75 * mean + 0.25 * 0.5 * mean, 0.75 * var + 0.25 * (0.5 + 0.5 * var)
    real_frames_close(ev, (g - mix_m) / np.sqrt(mix_v + 1e-4) * 2.0 + 0.5, lens, atol=1e-4)
    with pytest.raises(NetworkError, match="'lay'.*param_version"):
        make("batch_norm", {"param_version": 7}, [spec(4)])


def test_batch_norm_fused_path_as_returnn():
    """RETURNN's fused_batch_norm path (param_version 2, masked_time False, use_shift/use_std, use_sample 0): the
    moving variance moves towards the Bessel-corrected batch variance (TF's kernel), evaluation updates nothing
    even where update_sample_only_in_training is False (here: behavior_version 0), epsilon at least 1.001e-5."""
    x, lens = dense(0)
    layer = make("batch_norm", {"momentum": 0.25, "epsilon": 1e-8, "masked_time": False, "param_version": 2},
                 [spec(4)])
    assert layer.bn.fused and not layer.bn.update_only_in_training
    g = garble(x, lens, value=0.0)
    flat = g.reshape(-1, 4)
    mean, var = flat.mean(0), flat.var(0)
    out = run(layer, [lo(g, lens)], train=True).tensor.numpy()
    real_frames_close(out, (g - mean) / np.sqrt(var + 1.001e-5), lens, atol=1e-4)
    np.testing.assert_allclose(layer.bn.moving_mean.numpy(), 0.25 * mean, atol=1e-5)
    np.testing.assert_allclose(layer.bn.moving_variance.numpy(), 0.75 + 0.25 * flat.var(0, ddof=1), atol=1e-5)
    mm, mv = layer.bn.moving_mean.numpy(), layer.bn.moving_variance.numpy()
    ev = run(layer, [lo(g, lens)], train=False).tensor.numpy()
    real_frames_close(ev, (g - mm) / np.sqrt(mv + 1.001e-5), lens, atol=1e-4)
    np.testing.assert_array_equal(layer.bn.moving_mean.numpy(), mm)


# ------------------------------------------------------------------ errors / registry

def test_unknown_option_class_and_activation_errors_name_the_layer():
    with pytest.raises(NetworkError, match="'hidden'.*bogus_opt"):
        make("linear", {"n_out": 2, "bogus_opt": 1}, [spec(4)], name="hidden")
    with pytest.raises(NetworkError, match="'hidden'.*'blstm'.*linear"):
        get_layer_class("blstm", "hidden")
    with pytest.raises(NetworkError, match="'hidden'.*nope"):
        make("linear", {"n_out": 2, "activation": "nope"}, [spec(4)], name="hidden")
    with pytest.raises(NetworkError, match="'hidden'.*kind"):
        make("combine", {"kind": "div"}, [spec(4)], name="hidden")


# ------------------------------------------------------------------ tf.function

def test_stack_in_tf_function_traces_once_and_matches_eager():
    in_spec = spec(4)
    rec = make("rec", {"unit": "nativelstm2", "n_out": 5, "direction": -1, "dropout": 0.2}, [in_spec], name="rec")
    conv = make("conv", {"filter_size": 3, "n_out": 4, "strides": 2, "padding": "same"}, [rec.output], name="conv")
    pool = make("pool", {"mode": "max", "pool_size": 2, "padding": "same"}, [conv.output], name="pool")
    bn = make("batch_norm", {}, [pool.output], name="bn")
    red = make("reduce", {"mode": "mean", "axes": "T"}, [bn.output], name="red")
    out_layer = make("softmax", {"n_out": 3}, [red.output], name="out")
    layers = [rec, conv, pool, bn, red, out_layer]
    variables = [v for lay in layers for v in lay.trainable_variables]

    def forward(x, lens, seed):
        ctx = RunContext(True, seed)
        h = value(x, lens, in_spec)
        for lay in layers:
            h = lay([h], ctx)
        return h.tensor

    @tf.function(input_signature=[tf.TensorSpec([None, None, 4], tf.float32), tf.TensorSpec([None], tf.int32),
                                  tf.TensorSpec([2], tf.int64)])
    def step(x, lens, seed):
        with tf.GradientTape() as tape:
            y = forward(x, lens, seed)
            loss = tf.reduce_sum(y[:, 0])
        return y, tape.gradient(loss, variables)

    n_vars = len([v for lay in layers for v in lay.variables])
    for t, lens in [(5, [5, 3, 1]), (9, [9, 2, 7])]:
        x, lens = dense(t, lens=lens)
        seed = tf.constant([7, t], tf.int64)
        y, grads = step(tf.constant(x), tf.constant(lens), seed)
        np.testing.assert_allclose(y.numpy(), forward(tf.constant(x), tf.constant(lens), seed).numpy(), atol=1e-5)
        assert all(g is not None and np.isfinite(g.numpy()).all() for g in grads)
    assert step.experimental_get_tracing_count() == 1
    assert len([v for lay in layers for v in lay.variables]) == n_vars


def test_dropout_noise_shape_shares_the_mask_along_an_axis():
    """RETURNN's dropout_noise_shape: {"*": None} is plain dropout; {"T": 1} one mask per sequence
    and feature, shared over time."""
    x = np.ones([3, 40, 8], np.float32)
    lens = np.array([40, 30, 20], np.int32)
    for noise, shared in (({"*": None}, False), ({"*": None, "T": 1}, True)):
        layer = make("dropout", {"dropout": 0.5, "dropout_noise_shape": noise}, [spec(8)])
        out = run(layer, [lo(x, lens)], train=True, seed=(5, 6)).tensor.numpy()
        assert set(np.unique(out)) <= {0.0, 2.0}
        same_over_time = (out == out[:, :1]).all()
        assert same_over_time == shared
    with pytest.raises(NetworkError, match="'lay'.*None or 1"):
        make("dropout", {"dropout": 0.5, "dropout_noise_shape": {"T": 2}}, [spec(8)]).forward(
            [lo(x, lens)], RunContext(True, tf.constant([1, 2], tf.int64)))
