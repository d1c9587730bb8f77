"""matmul_2d / dense_dot: values and both gradients equal tf.matmul's (both weight-gradient forms, both
input-gradient forms: transpose_b for narrow weights, einsum for wide ones)."""
import numpy as np
import pytest
import tensorflow as tf

from returnn.tf.util.dense import dense_dot, matmul_2d


@pytest.mark.parametrize("k,m", [(7, 3), (3, 7), (5, 5), (130, 129), (129, 7)])
def test_matmul_2d_values_and_gradients_equal_matmul(k, m):
    rng = np.random.RandomState(k * 10 + m)
    x = tf.constant(rng.randn(11, k).astype(np.float32))
    w = tf.constant(rng.randn(k, m).astype(np.float32))
    dy = tf.constant(rng.randn(11, m).astype(np.float32))
    out = []
    for fn in (tf.matmul, matmul_2d):
        with tf.GradientTape() as tape:
            tape.watch([x, w])
            loss = tf.reduce_sum(fn(x, w) * dy)
        out.append([loss.numpy()] + [g.numpy() for g in tape.gradient(loss, [x, w])])
    for a, b in zip(*out):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-4)
    # against numpy: dW = x^T dy, dx = dy W^T
    np.testing.assert_allclose(out[1][2], x.numpy().T @ dy.numpy(), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(out[1][1], dy.numpy() @ w.numpy().T, rtol=1e-5, atol=1e-4)


def test_dense_dot_keeps_leading_axes_in_a_function_with_unknown_shapes():
    w = tf.constant(np.random.RandomState(0).randn(4, 2).astype(np.float32))

    @tf.function(input_signature=[tf.TensorSpec([None, None, 4])])
    def f(x):
        y = dense_dot(x, w)
        assert y.shape.as_list() == [None, None, 2]
        return y

    x = np.random.RandomState(1).randn(3, 5, 4).astype(np.float32)
    np.testing.assert_allclose(f(x).numpy(), x @ w.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("k,m,einsum", [(512, 512, True), (512, 50, False), (40, 512, False)])
def test_input_gradient_of_wide_weights_is_an_einsum(k, m, einsum):
    """The input-gradient form is chosen by the weight's width (faster with oneDNN; dense.py)."""
    w = tf.zeros([k, m])

    @tf.function(input_signature=[tf.TensorSpec([None, k])])
    def grad(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = matmul_2d(x, w)
        return tape.gradient(y, x)

    ops = {op.type for op in grad.get_concrete_function().graph.get_operations()}
    assert ("Einsum" in ops) == einsum
