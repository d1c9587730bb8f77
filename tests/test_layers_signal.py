"""Signal-processing layers (stft, istft, multichannel STFTs, mel_filterbank, dct, complex conversions,
complex_linear_projection, split_concatenated_multichannel, batch_median_pooling,
first_t_frames_noise_estimator, signal_masking) against numpy; padded input frames hold NaN or
garbage, which must not reach real output frames."""
import numpy as np
import pytest
import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork

LENS = [30, 17, 0]


def _run(net_dict, dim=1, lens=LENS, seed=0, dtype="float32"):
    rng = np.random.RandomState(seed)
    x = rng.randn(len(lens), max(lens), dim).astype(dtype)
    for b, n in enumerate(lens):
        x[b, n:] = 1e4
    net = TFNetwork(net_dict, {"data": Data("data", shape=(None, dim))})
    out = net.forward({"data": tf.constant(x), "data:seq_len": tf.constant(lens)}, RunContext(False))
    return net, out, x


def _hann(n):
    return 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n) / n)


def _stft(sig, size, shift, fft, window):
    n = max((len(sig) - size) // shift + 1, 0)
    return np.array([np.fft.rfft(sig[i * shift:i * shift + size] * window, fft) for i in range(n)]).reshape(
        n, fft // 2 + 1)


def test_stft_against_numpy_and_lengths():
    _, out, x = _run({"output": {"class": "stft", "from": "data", "frame_shift": 4, "frame_size": 8, "fft_size": 16}})
    y = out["output"]
    assert y.data.dtype == "complex64" and y.data.dim == 9
    assert y.seq_len.numpy().tolist() == [(n - 8) // 4 + 1 if n >= 8 else 0 for n in LENS]
    for b, n in enumerate(LENS):
        ref = _stft(x[b, :n, 0], 8, 4, 16, _hann(8))
        np.testing.assert_allclose(y.tensor.numpy()[b, :len(ref)], ref, atol=1e-4)


def test_abs_of_stft_is_real_and_feeds_a_log_mel_front_end():
    """RETURNN's activation layer: 'abs' / 'angle' of a complex64 input is float32 (the chunked-AED
    front end: stft -> abs -> power -> mel_filterbank -> safe_log with opts)."""
    net_dict = {"stft": {"class": "stft", "from": "data", "frame_shift": 4, "frame_size": 8, "fft_size": 16},
                "abs": {"class": "activation", "from": "stft", "activation": "abs", "is_output_layer": True},
                "angle": {"class": "activation", "from": "stft", "activation": "angle", "is_output_layer": True},
                "power": {"class": "eval", "from": "abs", "eval": "source(0) ** 2"},
                "mel": {"class": "mel_filterbank", "from": "power", "fft_size": 16, "nr_of_filters": 4,
                        "sampling_rate": 8000, "is_output_layer": True},
                "output": {"class": "activation", "from": "mel", "activation": "safe_log", "opts": {"eps": 1e-10}}}
    net, out, x = _run(net_dict)
    assert [net.layers[k].output.dtype for k in ("abs", "angle", "power", "mel", "output")] == ["float32"] * 5
    ref = _stft(x[0, :30, 0], 8, 4, 16, _hann(8))
    np.testing.assert_allclose(out["abs"].tensor.numpy()[0, :len(ref)], np.abs(ref), atol=1e-4)
    np.testing.assert_allclose(np.cos(out["angle"].tensor.numpy()[0, :len(ref)]), np.cos(np.angle(ref)), atol=1e-3)
    mel = out["mel"].tensor.numpy()[0, :len(ref)]
    np.testing.assert_allclose(out["output"].tensor.numpy()[0, :len(ref)], np.log(np.maximum(mel, 1e-10)), rtol=1e-4)


def test_istft_inverts_stft_inside_the_overlap():
    _, out, x = _run({"stft": {"class": "stft", "from": "data", "frame_shift": 4, "frame_size": 8},
                      "output": {"class": "istft", "from": "stft", "frame_shift": 4, "frame_size": 8}})
    y = out["output"]
    assert y.data.dim == 1 and y.seq_len.numpy().tolist() == [28, 16, 4]  # RETURNN: n * shift + (size - shift)
    for b, n in enumerate(LENS[:2]):  # samples covered by two frames are reconstructed exactly
        np.testing.assert_allclose(y.tensor.numpy()[b, 4:y.seq_len.numpy()[b] - 4, 0], x[b, 4:y.seq_len.numpy()[b] - 4, 0],
                                   atol=1e-4)


@pytest.mark.parametrize("window, pad", [("hanning", False), ("blackman", True), ("ones", False)])
def test_multichannel_stft_channel_order_and_frames(window, pad):
    _, out, x = _run({"output": {"class": "multichannel_stft_layer", "from": "data", "frame_shift": 4, "frame_size": 8,
                                 "fft_size": 8, "nr_of_channels": 2, "window": window, "pad_last_frame": pad}}, dim=2)
    y = out["output"]
    win = {"hanning": _hann(8), "blackman": np.blackman(8), "ones": np.ones(8)}[window]
    frames = [((n - 8 - 1) // 4 + 2) if pad else max((n - 8) // 4 + 1, 0) for n in LENS]
    assert y.seq_len.numpy().tolist() == frames and y.data.dim == 10
    for b, n in enumerate(LENS[:2]):
        for c in range(2):
            sig = np.concatenate([x[b, :n, c], np.zeros(8)])
            ref = _stft(sig, 8, 4, 8, win)[:frames[b]]
            np.testing.assert_allclose(y.tensor.numpy()[b, :frames[b], c * 5:(c + 1) * 5], ref, atol=1e-4)


def test_multiresolution_stft_concatenates_cut_resolutions():
    _, out, x = _run({"output": {"class": "multichannel_multiresolution_stft_layer", "from": "data", "frame_shift": 4,
                                 "frame_sizes": [8, 12], "fft_sizes": [8, 16], "nr_of_channels": 1}})
    y = out["output"].tensor.numpy()
    assert y.shape[-1] == 5 + 9
    sig = np.concatenate([x[0, :30, 0], np.full([4], 1e-7)])
    ref = _stft(sig, 12, 4, 16, _hann(12))[:y.shape[1]]
    np.testing.assert_allclose(y[0, :, 5:], ref, atol=1e-4)


def test_mel_filterbank_and_dct():
    from returnn.tf.layers.stft import mel_matrix
    net_dict = {"mel": {"class": "mel_filterbank", "from": "data", "fft_size": 16, "nr_of_filters": 4,
                        "sampling_rate": 8000, "is_output_layer": True},
                "output": {"class": "dct", "from": "mel", "norm": "ortho"}}
    _, out, x = _run(net_dict, dim=9)
    m = mel_matrix(0, 4000.0, 8000.0, 16, 4)
    assert m.shape == (9, 4) and np.all(m >= 0) and np.all(m.sum(0) > 0)
    mel = x[0, :30] @ m
    np.testing.assert_allclose(out["mel"].tensor.numpy()[0, :30], mel, rtol=1e-4, atol=1e-3)
    n = np.arange(4)
    basis = np.cos(np.pi * n[:, None] * (2 * n[None, :] + 1) / 8) * np.sqrt(2 / 4)
    basis[0] /= np.sqrt(2)
    np.testing.assert_allclose(out["output"].tensor.numpy()[0, :30], mel @ basis.T, rtol=1e-4, atol=1e-2)


def test_alternating_complex_round_trip_and_projection():
    net_dict = {"c": {"class": "alternating_real_to_complex", "from": "data", "is_output_layer": True},
                "r": {"class": "complex_to_alternating_real", "from": "c", "is_output_layer": True},
                "clp": {"class": "complex_linear_projection", "from": "data", "nr_of_filters": 3, "is_output_layer": True}}
    net, out, x = _run(net_dict, dim=6)
    c = out["c"].tensor.numpy()
    np.testing.assert_array_equal(c[0, :30], x[0, :30, 0::2] + 1j * x[0, :30, 1::2])
    np.testing.assert_array_equal(out["r"].tensor.numpy()[0, :30], x[0, :30])
    k = net.layers["clp"].kernel.numpy()
    ref = np.log(np.maximum(np.abs(c[0, :30] @ (k[0] + 1j * k[1])), 1e-20))
    np.testing.assert_allclose(out["clp"].tensor.numpy()[0, :30], ref, rtol=1e-4, atol=1e-5)
    with pytest.raises(NetworkError, match="even"):
        _run({"output": {"class": "alternating_real_to_complex", "from": "data"}}, dim=5)


def test_split_channels_median_noise_and_masking():
    lens = [6, 4, 5, 2]
    net_dict = {"split": {"class": "split_concatenated_multichannel", "from": "data", "nr_of_channels": 2,
                          "is_output_layer": True},
                "med": {"class": "batch_median_pooling", "from": "data", "pool_size": 2, "is_output_layer": True},
                "noise": {"class": "first_t_frames_noise_estimator", "from": "data", "nr_of_frames": 3,
                          "is_output_layer": True},
                "output": {"class": "signal_masking", "signal": "data", "mask": "noise"}}
    _, out, x = _run(net_dict, dim=4, lens=lens)
    xz = np.where(np.arange(6)[None, :, None] < np.array(lens)[:, None, None], x, 0)
    split = out["split"]
    assert split.seq_len.numpy().tolist() == [6, 6, 4, 4, 5, 5, 2, 2]
    np.testing.assert_array_equal(split.tensor.numpy()[3], xz[1, :, 2:])
    med = out["med"]
    assert med.seq_len.numpy().tolist() == [6, 5]
    np.testing.assert_array_equal(med.tensor.numpy()[1], np.maximum(xz[2], xz[3]))  # ceil(2/2)=1st largest
    noise = out["noise"].tensor.numpy()
    np.testing.assert_allclose(noise[3, 0], xz[3, :3].mean(0), rtol=1e-6)
    np.testing.assert_allclose(out["output"].tensor.numpy()[0, :6], x[0, :6] * noise[0, :6], rtol=1e-6)
