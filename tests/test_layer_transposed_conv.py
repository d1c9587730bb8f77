"""transposed_conv against a numpy reference per sequence (lengths, padding modes, output_padding,
remove_padding, NaN in padded input frames), 2-D, and in a network that upsamples back to the
frame rate after a strided conv."""
import numpy as np
import pytest
import tensorflow as tf

from data_utils import btf, make_layer as make, run_layer as run
from helpers import config_12ax, describe, run_rnn, train_args, write_config
from returnn.errors import NetworkError
from returnn.tensor import Data, FeatureDim, SpatialDim, batch_dim
from returnn.tf.layers import LayerOutput
from returnn.tf.layers.transposed_conv import transposed_length

LENS = np.array([4, 2], np.int32)


def np_transposed_conv_1d(x, w, s, padding, length):
    """x: (n, c_in), w: (k, c_out, c_in); output of ``length`` frames, cropped as TensorFlow."""
    n, k = len(x), w.shape[0]
    full = np.zeros(((n - 1) * s + k, w.shape[1]))
    for t in range(n):
        for j in range(k):
            full[t * s + j] += w[j] @ x[t]
    before = max((n - 1) * s + k - length, 0) // 2 if padding == "same" else 0
    out = np.zeros((length, w.shape[1]))
    part = full[before:before + length]
    out[:len(part)] = part
    return out


@pytest.mark.parametrize("k,s,padding,output_padding,remove", [
    (3, 3, "same", None, 0), (4, 2, "valid", None, 0), (2, 3, "valid", None, 0), (3, 2, "same", 1, 0),
    (5, 2, "valid", None, 1),
])
def test_matches_numpy_per_sequence(k, s, padding, output_padding, remove):
    data, val, x = btf(3, LENS, garbage=np.nan)
    layer = make("transposed_conv", {"filter_size": [k], "strides": [s], "padding": padding, "n_out": 2,
                                     "output_padding": output_padding, "remove_padding": remove,
                                     "with_bias": False}, [data])
    out = run(layer, [val])
    y = out.tensor.numpy()
    sizes = out.size(1).numpy()
    w = layer.W.numpy()
    for b, n in enumerate(LENS):
        full_len = transposed_length(int(n), k, s, padding, output_padding, 0)
        ref = np_transposed_conv_1d(x[b, :n], w, s, padding, full_len)
        ref = ref[remove:full_len - remove]
        assert sizes[b] == len(ref)
        np.testing.assert_allclose(y[b, :len(ref)], ref, rtol=1e-5, atol=1e-5)
        # padded frames as RETURNN computes them (no masking), from the zero-padded input of the batch's extent
        padded = np.where(np.arange(x.shape[1])[:, None] < n, x[b], 0.0)
        full_t = transposed_length(x.shape[1], k, s, padding, output_padding, 0)
        ref_t = np_transposed_conv_1d(padded, w, s, padding, full_t)[remove:full_t - remove]
        np.testing.assert_allclose(y[b, len(ref):], ref_t[len(ref):y.shape[1]], rtol=1e-5, atol=1e-5)


def test_two_spatial_axes_static_and_bias():
    time, freq = SpatialDim("t"), SpatialDim("f", 3)
    data = Data("x", dims=[batch_dim, time, freq, FeatureDim("c", 2)])
    x = np.random.RandomState(0).randn(2, 4, 3, 2).astype(np.float32)
    val = LayerOutput(tf.constant(x), data, {time: tf.constant(LENS)})
    layer = make("transposed_conv", {"filter_size": [2, 2], "n_out": 3, "activation": "relu"}, [data])
    assert layer.output.dims[2].dimension == 6 and layer.output.dim == 3
    y = run(layer, [val]).tensor.numpy()
    w, b = layer.W.numpy(), layer.bias.numpy()
    ref = np.zeros((4 * 2, 6, 3))
    for t in range(4):
        for f in range(3):
            for i in range(2):
                for j in range(2):
                    ref[t * 2 + i, f * 2 + j] += w[i, j] @ x[0, t, f]
    np.testing.assert_allclose(y[0], np.maximum(ref + b, 0), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(y[1, 4:], 0.0)


def test_bad_options_name_the_layer():
    data, val, x = btf(3, LENS)
    with pytest.raises(NetworkError, match="'lay'.*remove_padding"):
        make("transposed_conv", {"filter_size": [3], "n_out": 2, "remove_padding": -1}, [data])
    with pytest.raises(NetworkError, match="'lay'.*filter_size"):
        make("transposed_conv", {"n_out": 2}, [data])


NETWORK = '''{
    "embed": {"class": "linear", "from": "data", "n_out": 6, "activation": None},
    "conv": {"class": "conv", "from": "embed", "filter_size": [3], "strides": [3], "padding": "same", "n_out": 8,
             "activation": "relu"},
    "up": {"class": "transposed_conv", "from": "conv", "filter_size": [3], "strides": [3], "n_out": 8,
           "activation": "relu"},
    "frames": {"class": "reinterpret_data", "from": "up", "size_base": "data"},
    "output": {"class": "softmax", "loss": "ce", "from": "frames"},
}'''
CONFIG = config_12ax(network=NETWORK, num_epochs=1)


def test_upsampling_back_to_frame_rate_trains(tmp_path):
    config = write_config(tmp_path / "up.config", CONFIG)
    proc = run_rnn(train_args(config, tmp_path), timeout=300)
    assert proc.returncode == 0, describe(proc)
    # forwarding with a 'valid' conv (up to 2 frames fewer than the data): one line, no half-written file
    short = write_config(tmp_path / "short.config", config_12ax(network=NETWORK.replace('"same"', '"valid"'),
                                                                 num_epochs=1))
    out = tmp_path / "fwd.hdf"
    proc = run_rnn(train_args(short, tmp_path, "++task", "forward", "++eval", "config:dev", "++forward_batch_size",
                              "400", "++output_file", str(out), "++load", str(tmp_path / "model.001")), timeout=300)
    assert proc.returncode == 2, describe(proc)
    assert "the output has a sequence of" in proc.stderr.strip().splitlines()[-1], describe(proc)
    assert not out.exists() and "Traceback" not in proc.stderr


def test_size_base_longer_than_the_values_is_one_line(tmp_path):
    """A 'valid' conv of stride 3 and back: up to 2 frames fewer than the data's sequences. RETURNN fails in its
    loss (the output's and the target's flattened frames differ); here the step stops with one line naming the
    loss's layer, the dataset and the sequences."""
    config = write_config(tmp_path / "short.config", config_12ax(network=NETWORK.replace('"same"', '"valid"'),
                                                                 num_epochs=1))
    proc = run_rnn(train_args(config, tmp_path), timeout=300)
    assert proc.returncode == 2, describe(proc)
    last = proc.stderr.strip().splitlines()[-1]
    assert "layer 'output': loss 'ce'" in last and "the output's values only" in last and "dataset" in last, last
    assert "Traceback" not in proc.stderr


def test_size_base_longer_than_values_of_equal_extent_trains(tmp_path):
    """A language model's shift (published 2019 cross-sentence LM, prev_cco_transfo_24): input and target cut by
    one frame, each given the data's sizes by size_base. RETURNN keeps the values (masks cut at their extent) and
    trains, its loss's two flattenings equal (returnn_fuzz --kind published #116, CRASH before: the step stopped
    at reinterpret_data)."""
    net = """{
    "x": {"class": "slice", "axis": "T", "slice_end": -1, "from": "data"},
    "x2": {"class": "reinterpret_data", "from": "x", "size_base": "data"},
    "y": {"class": "slice", "axis": "T", "slice_start": 1, "from": "data:classes"},
    "y2": {"class": "reinterpret_data", "from": "y", "size_base": "data", "register_as_extern_data": "shifted"},
    "lin": {"class": "linear", "from": "x2", "n_out": 6, "activation": "tanh"},
    "output": {"class": "softmax", "loss": "ce", "target": "shifted", "from": "lin"},
}"""
    config = write_config(tmp_path / "shift.config", config_12ax(network=net, num_epochs=1))
    proc = run_rnn(train_args(config, tmp_path), timeout=300)
    assert proc.returncode == 0, describe(proc)


def test_size_base_output_added_to_a_shorter_value_is_one_line(tmp_path):
    """The upsampled frames (up to 2 more than the data's) added to a value of the data's frames: RETURNN fails on
    the shapes; here one line naming the combine layer (was TensorFlow's shape error with a traceback)."""
    net = NETWORK.replace('"output": {"class": "softmax", "loss": "ce", "from": "frames"},',
                          '"res": {"class": "combine", "kind": "add", "from": ["frames", "emb2"]},\n'
                          '    "emb2": {"class": "linear", "from": "data", "n_out": 8, "activation": None},\n'
                          '    "output": {"class": "softmax", "loss": "ce", "from": "res"},')
    config = write_config(tmp_path / "res.config", config_12ax(network=net, num_epochs=1))
    proc = run_rnn(train_args(config, tmp_path), timeout=300)
    assert proc.returncode == 2, describe(proc)
    last = proc.stderr.strip().splitlines()[-1]
    assert "layer 'res' (combine): its sources have" in last and "Traceback" not in proc.stderr, last
