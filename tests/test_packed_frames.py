"""Frame-wise layers and losses on the real frames only (returnn/tf/layers/packed.py): values and
gradients against numpy and against the padded computation, with NaN in the padded frames."""
import numpy as np
import pytest
import tensorflow as tf

from data_utils import btf, make_layer, run_layer, spec, value
from returnn.tf.layers import RunContext
from returnn.tf.layers.packed import frame_index, pack
from returnn.tf.losses import CrossEntropyLoss, MeanSquaredErrorLoss

LENS = np.array([5, 2, 4], np.int32)


def relu(x):
    return np.maximum(x, 0.0)


def _params(layer):
    return layer.W.numpy(), layer.bias.numpy()


def test_frame_index_lists_the_real_frames_in_order():
    index = frame_index(tf.constant(LENS), tf.constant(6, tf.int64)).numpy()
    expected = [b * 6 + t for b, n in enumerate(LENS) for t in range(n)]
    np.testing.assert_array_equal(index, expected)


def test_linear_chain_runs_packed_and_matches_numpy():
    data, val, x = btf(4, LENS, garbage=np.nan)
    l1 = make_layer("linear", {"n_out": 6, "activation": "relu"}, [data], name="l1")
    l2 = make_layer("softmax", {"n_out": 3}, [l1.output], name="l2")
    assert l1.packs and l2.packs
    h = run_layer(l1, [val])
    y = run_layer(l2, [h])
    assert h.packed is not None and y.packed.index is h.packed.index  # one gather for the chain
    w1, b1 = _params(l1)
    w2, b2 = _params(l2)
    ref_h = relu(x @ w1 + b1)
    ref_logits = ref_h @ w2 + b2
    ref_y = np.exp(ref_logits) / np.exp(ref_logits).sum(-1, keepdims=True)
    mask = np.arange(x.shape[1])[None, :] < LENS[:, None]
    out = y.tensor.numpy()
    np.testing.assert_allclose(out[mask], ref_y[mask], rtol=1e-5, atol=1e-6)
    # padding: what a zero input frame gives (as unpacked), not NaN: a log of the softmax stays finite
    np.testing.assert_allclose(h.tensor.numpy()[~mask], np.broadcast_to(relu(b1), (int((~mask).sum()), 6)))
    np.testing.assert_allclose(y.logits.numpy()[~mask], np.broadcast_to(b2, (int((~mask).sum()), 3)), rtol=1e-6)
    np.testing.assert_allclose(out[~mask], np.broadcast_to(np.exp(b2) / np.exp(b2).sum(), (int((~mask).sum()), 3)),
                               rtol=1e-5)
    np.testing.assert_allclose(y.packed.values.numpy(), ref_y[mask], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(y.packed.logits.numpy(), ref_logits[mask], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(y.logits.numpy()[mask], ref_logits[mask], rtol=1e-5, atol=1e-5)


def test_other_layouts_are_not_packed():
    assert not make_layer("linear", {"n_out": 3}, [spec(4, has_time=False)]).packs
    tm = spec(4).copy_transpose([1, 0, 2])
    assert not make_layer("linear", {"n_out": 3}, [tm]).packs
    assert not make_layer("linear", {"n_out": 3}, [spec(4), spec(2)]).packs


@pytest.mark.parametrize("noise", [None, {"*": None}])
def test_dropout_on_packed_rows_is_the_padded_mask(noise):
    data, val, x = btf(64, LENS, garbage=np.nan)
    opts = {"n_out": 8, "dropout": 0.5}
    if noise:
        opts["dropout_noise_shape"] = noise
    layer = make_layer("linear", opts, [data])
    ctx = RunContext(True, tf.constant([3, 4], tf.int64))
    packed_in = val.with_tensor(val.tensor, packed=pack(val))
    dropped = layer.apply_dropout(packed_in, ctx)
    plain = layer.apply_dropout(val, ctx)  # the padded path, same seed
    mask = np.arange(x.shape[1])[None, :] < LENS[:, None]
    np.testing.assert_array_equal(dropped.packed.values.numpy(), plain.tensor.numpy()[mask])
    np.testing.assert_array_equal(dropped.tensor.numpy()[mask], plain.tensor.numpy()[mask])
    kept = dropped.packed.values.numpy() != 0
    assert 0.3 < kept.mean() < 0.7
    if noise is None:  # shared by all frames: one mask per feature
        assert np.all(kept == kept[:1])
    else:
        assert not np.all(kept == kept[:1])


def _ce_reference(logits, labels, mask):
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    frame = -np.take_along_axis(logp, labels[..., None], -1)[..., 0]
    wrong = (logits.argmax(-1) != labels).astype(np.float32)
    return frame[mask].sum(), wrong[mask].sum(), mask.sum()


def test_ce_and_mse_on_packed_rows_match_numpy_and_the_padded_gradient():
    data, val, x = btf(4, LENS, garbage=np.nan)
    t_max = x.shape[1]
    labels = np.random.RandomState(1).randint(0, 3, size=(len(LENS), t_max)).astype(np.int32)
    target = value(labels, LENS, spec(3, sparse=True, time=data.time_dim, name="t"))
    layer = make_layer("softmax", {"n_out": 3}, [data])
    mask = np.arange(t_max)[None, :] < LENS[:, None]
    w, b = _params(layer)
    with tf.GradientTape(persistent=True) as tape:
        out = run_layer(layer, [val])
        assert out.packed is not None
        ce = CrossEntropyLoss("lay", {}, "classes").compute(out, target)
        # the padded computation of the same loss, for the gradient
        plain = out.with_tensor(out.tensor, logits=out.logits)
        ce_plain = CrossEntropyLoss("lay", {}, "classes").compute(plain, target)
    loss, errors, frames = _ce_reference(x @ w + b, labels, mask)
    np.testing.assert_allclose(ce.loss_sum.numpy(), loss, rtol=1e-5)
    assert ce.error_sum.numpy() == errors and ce.norm.numpy() == frames == ce.error_norm.numpy()
    np.testing.assert_allclose(ce_plain.loss_sum.numpy(), loss, rtol=1e-5)
    for grad, grad_plain in zip(tape.gradient(ce.loss_sum, [layer.W, layer.bias]),
                                tape.gradient(ce_plain.loss_sum, [layer.W, layer.bias])):
        assert np.all(np.isfinite(grad.numpy()))
        np.testing.assert_allclose(grad.numpy(), grad_plain.numpy(), rtol=1e-4, atol=1e-6)
    soft = np.random.RandomState(2).rand(len(LENS), t_max, 3).astype(np.float32)
    dense_target = value(np.where(mask[..., None], soft, np.nan), LENS, spec(3, time=data.time_dim, name="d"))
    mse = MeanSquaredErrorLoss("lay", {}, "d").compute(out, dense_target)
    ref = x @ w + b
    probs = np.exp(ref) / np.exp(ref).sum(-1, keepdims=True)
    np.testing.assert_allclose(mse.loss_sum.numpy(), ((probs - soft) ** 2).mean(-1)[mask].sum(), rtol=1e-5)


def test_packed_target_with_other_padding():
    """A target padded further than the output (same lengths) is read at the right frames."""
    data, val, x = btf(4, LENS, garbage=np.nan)
    layer = make_layer("softmax", {"n_out": 3}, [data])
    out = run_layer(layer, [val])
    labels = np.random.RandomState(3).randint(0, 3, size=(len(LENS), x.shape[1] + 3)).astype(np.int32)
    target = value(labels, LENS, spec(3, sparse=True, name="t2"))
    ce = CrossEntropyLoss("lay", {}, "classes").compute(out, target)
    w, b = _params(layer)
    mask = np.arange(x.shape[1])[None, :] < LENS[:, None]
    loss, _, _ = _ce_reference(x @ w + b, labels[:, :x.shape[1]], mask)
    np.testing.assert_allclose(ce.loss_sum.numpy(), loss, rtol=1e-5)


def test_gradient_to_an_unpacked_source_is_zero_on_padding():
    data, val, x = btf(4, LENS, garbage=0.0)
    layer = make_layer("linear", {"n_out": 5, "activation": "tanh"}, [data])
    src = tf.Variable(val.tensor)
    with tf.GradientTape() as tape:
        out = run_layer(layer, [val.with_tensor(tf.convert_to_tensor(src))])
        total = tf.reduce_sum(out.packed.values ** 2)
    grad = tape.gradient(total, src).numpy()
    w, b = _params(layer)
    h = np.tanh(x @ w + b)
    ref = (2 * h * (1 - h ** 2)) @ w.T
    mask = np.arange(x.shape[1])[None, :] < LENS[:, None]
    np.testing.assert_allclose(grad[mask], ref[mask], rtol=1e-4, atol=1e-5)
    assert np.all(grad[~mask] == 0.0)


@pytest.mark.parametrize("has_time", [True, False])
def test_input_dropout_shared_by_all_frames_folds_into_the_weights(has_time):
    """Default noise shape: the mask is one factor per input feature, applied to W's rows; the
    output and the gradients equal dropout applied to the input."""
    if has_time:
        data, val, x = btf(64, LENS, garbage=np.nan)
    else:
        x = np.random.RandomState(4).randn(3, 64).astype(np.float32)
        data = spec(64, has_time=False)
        val = value(x, None, data)
    layer = make_layer("linear", {"n_out": 7, "activation": "tanh", "dropout": 0.3}, [data])
    ctx = RunContext(True, tf.constant([5, 6], tf.int64))
    assert layer._folds_dropout(val, ctx)
    with tf.GradientTape() as tape:
        out = layer([val], ctx)
        total = tf.reduce_sum(out.packed.values if has_time else out.tensor)
    g_w, g_b = tape.gradient(total, [layer.W, layer.bias])
    dropped = layer.apply_dropout(val, ctx).tensor.numpy()  # the explicit mask, same seed
    mask = np.arange(x.shape[1])[None, :] < LENS[:, None] if has_time else np.ones(x.shape[:1], bool)
    w, b = _params(layer)
    xd = np.where(mask[..., None], dropped, 0.0)
    assert 0.5 < (xd[mask] != 0).mean() < 0.9
    h = np.tanh(xd @ w + b)
    np.testing.assert_allclose(out.tensor.numpy()[mask], h[mask], rtol=1e-5, atol=1e-5)
    dh = (1 - h ** 2) * mask[..., None]
    np.testing.assert_allclose(g_w.numpy(), xd.reshape(-1, 64).T @ dh.reshape(-1, 7), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(g_b.numpy(), dh.reshape(-1, 7).sum(0), rtol=1e-4, atol=1e-4)
    own = make_layer("linear", {"n_out": 7, "dropout": 0.3, "dropout_noise_shape": {"*": None}}, [data])
    assert not own._folds_dropout(val, ctx) and not layer._folds_dropout(val, RunContext(False))



def test_time_sizes_without_batch_axis_are_not_packed():
    """Sizes given as one scalar for the whole batch (e.g. a time axis made by a range layer)."""
    data, val, x = btf(4, [4, 4])
    scalar = val.with_tensor(val.tensor, sizes={data.time_dim: tf.constant(3, tf.int32)})
    layer = make_layer("linear", {"n_out": 2}, [data])
    out = run_layer(layer, [scalar])
    assert out.packed is None
    w, b = _params(layer)
    np.testing.assert_allclose(out.tensor.numpy()[:, :3], (x @ w + b)[:, :3], rtol=1e-5, atol=1e-5)
