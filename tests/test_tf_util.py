"""returnn.tf.util.basic (old ``TFUtil``) against numpy references."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from returnn.tf.util import basic as tfu


def test_where_bc_broadcasts_size_one_axes_and_scalars():
    cond = np.array([[True], [False]])  # (2, 1)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(tfu.where_bc(cond, x, -1.0).numpy(), np.where(cond, x, -1.0))
    np.testing.assert_array_equal(tfu.where_bc(cond, 0, x).numpy(), np.where(cond, 0.0, x))
    cond2 = np.array([True, False])  # lower rank: axes appended at the end, as RETURNN does
    np.testing.assert_array_equal(tfu.where_bc(cond2, x, 0.0).numpy(), np.where(cond2[:, None], x, 0.0))


def test_nd_indices_and_gather_nd():
    idx = np.array([[2, 0], [1, 1], [0, 2]], dtype=np.int32)  # (batch=3, n=2)
    values = np.arange(9).reshape(3, 3)
    nd = tfu.nd_indices(tf.constant(idx)).numpy()
    assert nd.shape == (3, 2, 2)
    np.testing.assert_array_equal(nd[..., 0], [[0, 0], [1, 1], [2, 2]])
    np.testing.assert_array_equal(tf.gather_nd(values, nd).numpy(), np.take_along_axis(values, idx, axis=1))
    swapped = tfu.nd_indices(tf.constant(idx), indices_batch_major=False).numpy()
    np.testing.assert_array_equal(swapped[..., 1], nd[..., 0])


def test_tile_transposed_and_expand_dims_unbroadcast():
    x = tf.constant([1, 2, 3])
    np.testing.assert_array_equal(tfu.tile_transposed(x, 0, 2).numpy(), [1, 1, 2, 2, 3, 3])
    y = tfu.expand_dims_unbroadcast(x, 0, 2).numpy()
    np.testing.assert_array_equal(y, [[1, 2, 3], [1, 2, 3]])
    np.testing.assert_array_equal(tfu.expand_dims_unbroadcast(x, -1, 2).numpy(), [[1, 1], [2, 2], [3, 3]])


def test_shapes_static_and_dynamic():
    @tf.function(input_signature=[tf.TensorSpec([None, 4])])
    def shapes(x):
        dims = tfu.get_shape(x)
        assert isinstance(dims[1], int) and dims[1] == 4 and isinstance(dims[0], tf.Tensor)
        assert tfu.get_shape_dim(x, 1) == 4
        return dims[0] * 10 + tfu.get_shape_dim(x, 0)

    assert int(shapes(tf.zeros([3, 4]))) == 33
    with pytest.raises(ValueError):
        tfu.check_input_dim(tf.zeros([2, 3]), 1, 4)
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.function(lambda x: tfu.check_input_dim(x, 0, 5), input_signature=[tf.TensorSpec([None])])(tf.zeros([3]))


def test_safe_log_exp_values_and_finite_gradients():
    x = tf.constant([0.0, 1e-30, 0.5, 2.0])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tfu.safe_log(x)
    np.testing.assert_allclose(y.numpy(), np.log(np.maximum(x.numpy(), 1e-20)), rtol=1e-5)
    assert np.all(np.isfinite(tape.gradient(y, x).numpy()))
    big = tfu.safe_exp(tf.constant([1000.0, -1000.0, 1.0])).numpy()
    assert np.all(np.isfinite(big)) and big[1] > 0 and big[2] == pytest.approx(np.e, rel=1e-6)

    @tf.function
    def log_of_softmax(z):  # graph mode: log(softmax) is computed as log_softmax (no -inf)
        return tfu.safe_log(tf.nn.softmax(z))

    out = log_of_softmax(tf.constant([[0.0, -200.0]])).numpy()
    np.testing.assert_allclose(out, [[0.0, -200.0]], atol=1e-5)


def test_flatten_with_seq_len_mask_keeps_only_real_frames():
    x = np.arange(2 * 3 * 2).reshape(2, 3, 2)
    lengths = np.array([2, 3])
    flat = tfu.flatten_with_seq_len_mask(tf.constant(x), tf.constant(lengths), time_major=False).numpy()
    np.testing.assert_array_equal(flat, np.concatenate([x[0, :2], x[1, :3]]))
    tm = tfu.flatten_with_seq_len_mask(tf.constant(x.transpose(1, 0, 2)), tf.constant(lengths), time_major=True)
    np.testing.assert_array_equal(tm.numpy(), flat)


def test_dropout_keep_prob_and_noise_shape():
    x = tf.ones([200, 50])
    y = tfu.dropout(x, keep_prob=0.8, noise_shape=[None, 1], seed=3).numpy()
    rows = y[:, 0]
    assert set(np.unique(y)) <= {0.0, 1.25}
    np.testing.assert_array_equal(y, np.repeat(rows[:, None], 50, axis=1))  # mask shared over axis 1
    assert 0.6 < np.mean(rows > 0) < 0.95
    assert tfu.dropout(x, keep_prob=1.0) is x


def test_dot_matrix_triangular_optional_ops():
    a, b = np.random.RandomState(0).randn(2, 3, 4), np.random.RandomState(1).randn(4, 5)
    np.testing.assert_allclose(tfu.dot(tf.constant(a), tf.constant(b)).numpy(), a @ b, rtol=1e-6)
    np.testing.assert_allclose(tfu.dot(tf.constant(a), tf.constant(b.T), transpose_b=True).numpy(), a @ b, rtol=1e-6)
    np.testing.assert_array_equal(tfu.matrix_triangular((3, 3), lower=True).numpy(), np.tril(np.ones((3, 3))))
    assert tfu.optional_add(None, 2, None, 3) == 5 and tfu.optional_add(None) is None
    assert tfu.optional_mul(2, None, 4) == 8


def test_numbers_dict_semantics():
    from returnn.util.basic import NumbersDict
    d = NumbersDict({"data": 10, "classes": 4})
    assert (d + 1).dict == {"data": 11, "classes": 5}
    assert (d + NumbersDict({"data": 1, "extra": 2})).dict == {"data": 11, "classes": 4, "extra": 2}
    assert (d * NumbersDict(3)).dict == {"data": 30, "classes": 12}
    assert d.max_value() == 10 and d.min_value() == 4
    assert NumbersDict(5)["anything"] == 5
    assert d > 9 and not d > 10
    assert NumbersDict.max([d, NumbersDict({"data": 12, "classes": 1})]).dict == {"data": 12, "classes": 4}


def test_config_tf_where_with_vector_condition_selects_rows():
    """TF1's tf.where(cond (B,), x (B, T, F), y) picks whole rows (SpecAugment code in RETURNN's
    2019 LibriSpeech configs relies on it); TF2's broadcasting where stays for the rest."""
    import numpy as np
    import tensorflow as real_tf
    from returnn.tf.compat import tf_with_v1_names
    tf = tf_with_v1_names()
    x, y = np.ones((2, 3, 4), "float32"), np.zeros((2, 3, 4), "float32")
    out = tf.where(real_tf.constant([True, False]), x, y).numpy()
    assert (out[0] == 1).all() and (out[1] == 0).all()
    out = tf.where(real_tf.constant([True, False, True, False]), x, y).numpy()  # TF2: broadcast on the last axis
    assert (out[..., 0] == 1).all() and (out[..., 1] == 0).all()
    assert tf.where(real_tf.constant([[False, True]])).numpy().tolist() == [[0, 1]]
