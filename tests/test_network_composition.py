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
extern_data = {"data": {"dim": 9, "sparse": True}, "classes": {"dim": 2, "sparse": True, "dtype": "int32"}}
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
    proc = run_rnn(train_args(config, tmp_path, "++task", "forward", "++output_file", str(out_file)))
    assert proc.returncode == 0, describe(proc)
    with h5py.File(out_file, "r") as f:
        inputs, lens = f["inputs"][...], f["seqLengths"][...]
    lens = lens[:, 0] if lens.ndim == 2 else lens
    assert inputs.shape == (int(lens.sum()), 2)
    np.testing.assert_allclose(inputs.sum(axis=1), 1.0, rtol=1e-4)
