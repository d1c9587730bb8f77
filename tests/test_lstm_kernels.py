"""LSTM kernels: every kernel equals a numpy LSTM per sequence (outputs) and the autodiff reference
kernel (gradients), with padding of any content ignored."""
import numpy as np
import pytest
import tensorflow as tf

from returnn.tf.lstm_kernels import KERNELS, default_kernel_name, get_kernel, loop_lstm


def sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def np_lstm_from_proj(x_proj, w_re, forget_bias):
    """One sequence (T, 4H) of input projections -> (T, H); gate order (i, g, f, o)."""
    n = w_re.shape[0]
    h, c, out = np.zeros(n), np.zeros(n), []
    for z_x in x_proj:
        z = z_x + h @ w_re
        i, g, f, o = z[:n], z[n:2 * n], z[2 * n:3 * n], z[3 * n:]
        c = sigmoid(f + forget_bias) * c + sigmoid(i) * np.tanh(g)
        h = sigmoid(o) * np.tanh(c)
        out.append(h)
    return np.array(out).reshape(len(x_proj), n)


def random_case(seed=0, batch=4, time=7, hidden=5, garbage=100.0):
    rng = np.random.RandomState(seed)
    lens = np.array([time, 3, 0, time - 1][:batch], dtype=np.int32)
    x = rng.randn(batch, time, 4 * hidden).astype(np.float32)
    for b, n in enumerate(lens):
        x[b, n:] = garbage  # large but finite pre-activations on padded frames
    w_re = (0.5 * rng.randn(hidden, 4 * hidden)).astype(np.float32)
    return x, lens, w_re


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_kernel_matches_numpy_per_sequence_and_zeroes_padding(name):
    x, lens, w_re = random_case()
    y = get_kernel(name)(tf.constant(x), tf.constant(lens), tf.constant(w_re), 0.7).numpy()
    assert y.shape == (4, 7, 5)
    for b, n in enumerate(lens):
        np.testing.assert_allclose(y[b, :n], np_lstm_from_proj(x[b, :n], w_re, 0.7), rtol=1e-4, atol=1e-5)
        assert np.all(y[b, n:] == 0.0)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_kernel_gradients_equal_autodiff_reference_and_ignore_padding(name):
    x, lens, w_re = random_case(seed=1)
    rng = np.random.RandomState(2)
    dy = rng.randn(4, 7, 5).astype(np.float32)

    def grads(kernel, x_np):
        xt, wt = tf.constant(x_np), tf.constant(w_re)
        with tf.GradientTape() as tape:
            tape.watch([xt, wt])
            loss = tf.reduce_sum(kernel(xt, tf.constant(lens), wt, 1.0) * dy)
        return [g.numpy() for g in tape.gradient(loss, [xt, wt])]

    dx, dw = grads(get_kernel(name), x)
    dx_ref, dw_ref = grads(loop_lstm, x)
    np.testing.assert_allclose(dx, dx_ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(dw, dw_ref, rtol=1e-4, atol=1e-5)
    for b, n in enumerate(lens):
        assert np.all(dx[b, n:] == 0.0)
    # Other padding content changes nothing.
    x2 = x.copy()
    for b, n in enumerate(lens):
        x2[b, n:] = -3.0
    dx2, dw2 = grads(get_kernel(name), x2)
    np.testing.assert_allclose(dx2, dx, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dw2, dw, rtol=1e-5, atol=1e-6)


def test_fused_kernel_in_tf_function_traces_once_for_any_shape():
    kernel = get_kernel("fused")
    w = tf.constant(random_case()[2])
    traces = []

    @tf.function(input_signature=[tf.TensorSpec([None, None, 20]), tf.TensorSpec([None], tf.int32)])
    def step(x, lens):
        traces.append(1)
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = kernel(x, lens, w, 1.0)
        return y, tape.gradient(tf.reduce_sum(y), x)

    for batch, time in [(2, 3), (5, 1), (3, 9)]:
        x = np.random.RandomState(time).randn(batch, time, 20).astype(np.float32)
        lens = np.full([batch], time, np.int32)
        y, _ = step(x, lens)
        np.testing.assert_allclose(y.numpy()[0], np_lstm_from_proj(x[0], w.numpy(), 1.0), rtol=1e-4, atol=1e-5)
    assert len(traces) == 1


def test_default_kernel_is_registered():
    assert default_kernel_name("CPU") in KERNELS
    assert get_kernel() is KERNELS[default_kernel_name("CPU")]


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_time_major_kernel_equals_batch_major_values_and_gradients(name):
    x, lens, w_re = random_case(seed=3)
    dy = np.random.RandomState(4).randn(4, 7, 5).astype(np.float32)
    kernel = get_kernel(name)

    def run(time_major):
        xt, wt = tf.constant(x.transpose(1, 0, 2) if time_major else x), tf.constant(w_re)
        with tf.GradientTape() as tape:
            tape.watch([xt, wt])
            y = kernel(xt, tf.constant(lens), wt, 0.3, time_major=time_major)
            if time_major:
                y = tf.transpose(y, [1, 0, 2])
            loss = tf.reduce_sum(y * dy)
        dx, dw = tape.gradient(loss, [xt, wt])
        dx = dx.numpy().transpose(1, 0, 2) if time_major else dx.numpy()
        return y.numpy(), dx, dw.numpy()

    for a, b in zip(run(False), run(True)):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    y_tm = run(True)[0]
    for b, n in enumerate(lens):
        np.testing.assert_allclose(y_tm[b, :n], np_lstm_from_proj(x[b, :n], w_re, 0.3), rtol=1e-4, atol=1e-5)
        assert np.all(y_tm[b, n:] == 0.0)


def np_lstm_state(x_proj, w_re, forget_bias, h0, c0, peep=None):
    """One sequence from the state (h0, c0), optionally with peepholes (w_i, w_f, w_o) as
    TensorFlow's LSTMCell: outputs (T, H) and the final (h, c)."""
    n = w_re.shape[0]
    h, c, out = h0.astype(np.float64), c0.astype(np.float64), []
    w_i, w_f, w_o = peep if peep is not None else (0.0, 0.0, 0.0)
    for z_x in x_proj:
        z = z_x + h @ w_re
        i, g, f, o = z[:n], z[n:2 * n], z[2 * n:3 * n], z[3 * n:]
        c = sigmoid(f + forget_bias + w_f * c) * c + sigmoid(i + w_i * c) * np.tanh(g)
        h = sigmoid(o + w_o * c) * np.tanh(c)
        out.append(h)
    return np.array(out).reshape(len(x_proj), n), h, c


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_kernel_from_initial_state_matches_numpy(name):
    x, lens, w_re = random_case(seed=5)
    rng = np.random.RandomState(6)
    h0, c0 = rng.randn(4, 5).astype(np.float32), rng.randn(4, 5).astype(np.float32)
    y = get_kernel(name)(tf.constant(x), tf.constant(lens), tf.constant(w_re), 0.4,
                         initial=(tf.constant(h0), tf.constant(c0))).numpy()
    for b, n in enumerate(lens):
        ref, _, _ = np_lstm_state(x[b, :n], w_re, 0.4, h0[b], c0[b])
        np.testing.assert_allclose(y[b, :n], ref, rtol=1e-4, atol=1e-5)
        assert np.all(y[b, n:] == 0.0)


@pytest.mark.parametrize("peepholes", [False, True])
def test_lstm_sequence_final_state_and_gradients_equal_autodiff_reference(peepholes):
    """lstm_sequence from an initial state (the fused kernel, or the loop with peepholes): outputs and
    final states as numpy; gradients of outputs and final states w.r.t. input, weights and the
    initial state as the autodiff reference loop."""
    from returnn.tf.lstm_kernels import loop_lstm_with_state, lstm_sequence
    x, lens, w_re = random_case(seed=7)
    x_tm = x.transpose(1, 0, 2)
    rng = np.random.RandomState(8)
    h0, c0 = rng.randn(4, 5).astype(np.float32), rng.randn(4, 5).astype(np.float32)
    peep = tuple(rng.randn(5).astype(np.float32) for _ in range(3)) if peepholes else None
    dy, dh, dc = rng.randn(7, 4, 5), rng.randn(4, 5), rng.randn(4, 5)

    def run(fn):
        args = [tf.constant(v) for v in (x_tm, w_re, h0, c0)]
        with tf.GradientTape() as tape:
            tape.watch(args)
            y, (h, c) = fn(*args)
            loss = tf.reduce_sum(y * dy) + tf.reduce_sum(h * dh) + tf.reduce_sum(c * dc)
        return [y.numpy(), h.numpy(), c.numpy()] + [g.numpy() for g in tape.gradient(loss, args)]

    def ours(xt, w, h, c):
        return lstm_sequence(xt, tf.constant(lens), w, 0.2, (h, c), peep, final=True)

    def reference(xt, w, h, c):
        y, hf, cf = loop_lstm_with_state(xt, tf.constant(lens), w, 0.2, True, (h, c), peep)
        return y, (hf, cf)

    got, want = run(ours), run(reference)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    for b, n in enumerate(lens):
        ref, hf, cf = np_lstm_state(x[b, :n], w_re, 0.2, h0[b], c0[b], peep)
        np.testing.assert_allclose(got[0][:n, b], ref, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(got[1][b], hf, rtol=1e-4, atol=1e-5)  # empty sequence: the initial state
        np.testing.assert_allclose(got[2][b], cf, rtol=1e-4, atol=1e-5)
