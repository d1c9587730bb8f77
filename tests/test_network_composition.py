"""End to end: a config whose layers use named axes (embedding -> split_dims -> 2-D conv over time x feature
-> pool -> merge_dims -> LSTM -> softmax) trains, evaluates and forwards through rnn.py."""
import re

import h5py
import numpy as np

from helpers import TINY_12AX, describe, run_rnn, train_args, write_config

NETWORK = '''network = {
    "emb": {"class": "linear", "n_out": 9, "from": "data"},
    "split": {"class": "split_dims", "axis": "F", "dims": (-1, 1), "from": "emb"},
    "conv": {"class": "conv", "filter_size": (3, 3), "padding": "same", "n_out": 4, "activation": "relu",
             "from": "split"},
    "pool": {"class": "pool", "mode": "max", "pool_size": (1, 3), "padding": "same", "from": "conv"},
    "merge": {"class": "merge_dims", "axes": "except_time", "from": "pool"},
    "lstm": {"class": "rec", "unit": "nativelstm2", "n_out": 8, "from": "merge"},
    "output": {"class": "softmax", "loss": "ce", "from": "lstm"},
}
extern_data = {"data": {"dim": 9}, "classes": {"dim": 2, "sparse": True, "dtype": "int32"}}
'''


def test_conv2d_network_trains_and_forwards(tmp_path):
    text = re.sub(r"network = \{.*?\n\}\n", NETWORK, TINY_12AX, flags=re.S)
    assert "split_dims" in text
    config = write_config(tmp_path / "conv2d.config", text)
    proc = run_rnn(train_args(config, tmp_path))
    assert proc.returncode == 0, describe(proc)
    scores = [float(m) for m in re.findall(r"epoch \d+ score: ([0-9.]+)", proc.stdout + proc.stderr)]
    assert len(scores) == 2 and all(np.isfinite(scores)), describe(proc)
    out_file = tmp_path / "fwd.hdf"
    proc = run_rnn(train_args(config, tmp_path, "++task", "forward", "++forward_batch_size", "400",
                              "++eval", '{"class": "Task12AXDataset", "num_seqs": 10, "fixed_random_seed": 1}', "++output_file",
                              str(out_file)))
    assert proc.returncode == 0, describe(proc)
    with h5py.File(out_file, "r") as f:
        inputs, lens = f["inputs"][...], f["seqLengths"][...]
    lens = lens[:, 0] if lens.ndim == 2 else lens
    assert inputs.shape == (int(lens.sum()), 2)
    np.testing.assert_allclose(inputs.sum(axis=1), 1.0, rtol=1e-4)


def _context_net(over_time: bool) -> dict:
    """A small residual conv net over (time, frequency). ``over_time``: slides over the whole
    sequence, with a time dilation where the per-window variant strides (so every output frame of
    the sequence net equals the per-window net on the 7 frames around it)."""
    first_stride, second_dilation, crop = ((1, 1), (2, 1), 2) if over_time else ((2, 1), (1, 1), 1)
    return {
        "pad": {"class": "pad", "axes": "F", "padding": (1, 1), "from": "data"},
        "c1": {"class": "conv", "filter_size": (3, 3), "padding": "VALID", "n_out": 4, "strides": first_stride,
               "input_add_feature_dim": True, "activation": "relu", "from": "pad"},
        "c2": {"class": "conv", "filter_size": (3, 3), "padding": "valid", "n_out": 4,
               "dilation_rate": second_dilation, "use_channel_first": over_time, "from": "c1"},
        "short_t": {"class": "slice", "axis": "T", "slice_start": crop, "slice_end": -crop, "from": "c1"},
        "short": {"class": "slice", "axis": "s:1", "slice_start": 1, "slice_end": -1, "from": "short_t"},
        "res": {"class": "combine", "kind": "add", "from": ["c2", "short"]},
        "pool": {"class": "pool", "mode": "max", "pool_size": (1, 2), "padding": "valid", "from": "res"},
        "merge": {"class": "merge_dims", "axes": ["s:1", "F"], "keep_order": True, "from": "pool"},
        "output": {"class": "softmax", "n_out": 3, "from": "merge"},
    }


def test_conv_over_time_equals_per_window_network():
    """As RETURNN's ResNet test: dilation over time == striding inside each window."""
    import tensorflow as tf
    from returnn.tensor import Data
    from returnn.tf.layers import RunContext
    from returnn.tf.network import TFNetwork

    extern = {"data": Data("data", shape=(None, 8))}
    seq_net, win_net = TFNetwork(_context_net(True), extern), TFNetwork(_context_net(False), extern)
    frames = np.random.RandomState(3).randn(11, 8).astype(np.float32)
    padded = np.concatenate([frames, np.full([2, 8], 1e4, np.float32)])[None]  # garbage after the end
    seq = seq_net.forward({"data": tf.constant(padded), "data:seq_len": tf.constant([11])}, RunContext(False),
                          only=["output"])["output"]
    windows = np.stack([frames[i:i + 7] for i in range(5)])
    win = win_net.forward({"data": tf.constant(windows), "data:seq_len": tf.constant([7] * 5)}, RunContext(False),
                          only=["output"])["output"]
    assert seq.seq_len.numpy().tolist() == [5] and win.seq_len.numpy().tolist() == [1] * 5
    np.testing.assert_allclose(seq.tensor.numpy()[0, :5], win.tensor.numpy()[:, 0], atol=1e-5)
