"""self_attention and relative_positional_encoding against numpy references (padded frames hold
NaN and must not reach real frames), bad options as one line, and a conformer-style block
trained through rnn.py."""
from functools import partial

import numpy as np
import pytest
import tensorflow as tf

from data_utils import btf as make_btf, make_layer as make, run_layer as run
from helpers import config_12ax, describe, run_rnn, train_args, write_config
from returnn.errors import NetworkError
from returnn.tensor import Data, FeatureDim, SpatialDim, batch_dim
from returnn.tf.layers import LayerOutput, RunContext

LENS = np.array([6, 4], np.int32)
btf = partial(make_btf, lens=LENS, garbage=np.nan)


def np_pos_enc(positions, channels):
    num = channels // 2
    inv = np.exp(np.arange(num) * -(np.log(1e4) / max(num - 1, 1)))
    scaled = positions[..., None] * inv
    return np.concatenate([np.sin(scaled), np.cos(scaled)], -1)


def np_softmax(e):
    e = e - e.max(-1, keepdims=True)
    p = np.exp(e)
    return p / p.sum(-1, keepdims=True)


def np_self_attention(x, lens, w, heads, key_dim, value_dim, shift=None, left_only=False):
    b, t, _ = x.shape
    kh, vh = key_dim // heads, value_dim // heads
    y = (x @ w).reshape(b, t, heads, 2 * kh + vh).transpose(0, 2, 1, 3)
    q, k, v = y[..., :kh] * kh ** -0.5, y[..., kh:2 * kh], y[..., 2 * kh:]
    energy = q @ k.transpose(0, 1, 3, 2)
    if shift is not None:
        energy = energy + np.einsum("bhqd,qkd->bhqk", q, shift)
    if left_only:
        mask = np.tril(np.ones([t, t], bool))[None, None]
    else:
        mask = (np.arange(t)[None, :] < lens[:, None])[:, None, None, :]
    energy = np.where(mask, energy, -np.inf)
    out = np_softmax(energy) @ v
    return out.transpose(0, 2, 1, 3).reshape(b, t, value_dim)


def clean(x):
    x = x.copy()
    for i, n in enumerate(LENS):
        x[i, n:] = 0
    return x


@pytest.mark.parametrize("left_only", [False, True])
def test_self_attention_matches_numpy(left_only):
    data, val, x = btf(5)
    layer = make("self_attention", {"num_heads": 2, "total_key_dim": 4, "n_out": 6,
                                    "attention_left_only": left_only}, [data])
    assert layer.output.dims[:2] == data.dims[:2] and layer.output.dim == 6
    assert [v.shape.as_list() for v in layer.trainable_variables] == [[5, 14]]
    out = run(layer, [val]).tensor.numpy()
    ref = np_self_attention(clean(x), LENS, layer.qkv.numpy(), 2, 4, 6, left_only=left_only)
    for i, n in enumerate(LENS):
        np.testing.assert_allclose(out[i, :n], ref[i, :n], rtol=1e-4, atol=1e-5)
    # training with attention dropout: still finite on real frames, and differs from inference
    drop = make("self_attention", {"num_heads": 2, "total_key_dim": 4, "n_out": 6, "attention_dropout": 0.5,
                                   "attention_left_only": left_only}, [data])
    train = run(drop, [val], train=True).tensor.numpy()
    assert np.isfinite(train[1, :4]).all() and not np.allclose(train[0, :6], run(drop, [val]).tensor.numpy()[0, :6])


def test_time_major_input():
    data, val, x = btf(4)
    tm = Data("tm", dims=[data.dims[1], data.dims[0], data.dims[2]])
    tm_val = LayerOutput(tf.transpose(val.tensor, [1, 0, 2]), tm, dict(val.sizes))
    layer = make("self_attention", {"num_heads": 1, "total_key_dim": 2, "n_out": 2}, [tm])
    assert layer.output.batch_dim_axis == 0 and layer.output.time_dim_axis == 1
    out = run(layer, [tm_val]).tensor.numpy()
    ref = np_self_attention(clean(x), LENS, layer.qkv.numpy(), 1, 2, 2)
    np.testing.assert_allclose(out[1, :4], ref[1, :4], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("fixed", [False, True])
def test_relative_positional_encoding_as_key_shift(fixed):
    data, val, x = btf(5)
    rel = make("relative_positional_encoding", {"n_out": 5, "clipping": 2, "fixed": fixed}, [data], name="rel")
    assert rel.output.batch_dim_axis is None and rel.output.batch_ndim == 3 and rel.output.dim == 5
    enc = run(rel, [val])
    # fixed, 5 channels: sin and cos of the positions 0..4 at 2 timescales, and a zero channel
    table = np.pad(np_pos_enc(np.arange(5.0), 4), [(0, 0), (0, 1)]) if fixed else rel.matrix.numpy()
    index = np.clip(np.arange(6)[None, :] - np.arange(6)[:, None], -2, 2) + 2
    np.testing.assert_allclose(enc.tensor.numpy(), table[index], rtol=1e-5, atol=1e-6)
    att = make("self_attention", {"num_heads": 2, "total_key_dim": 10, "n_out": 4, "key_shift": "rel"},
               [data, rel.output])
    out = run(att, [val, enc]).tensor.numpy()
    ref = np_self_attention(clean(x), LENS, att.qkv.numpy(), 2, 10, 4, shift=table[index])
    if fixed:  # RETURNN's get_positional_encoding divides by channels // 2 - 1: 2 or 3 channels fail there
        with pytest.raises(NetworkError, match="'rel'.*3 channels"):
            make("relative_positional_encoding", {"n_out": 3, "clipping": 2, "fixed": True}, [data], name="rel")
    for i, n in enumerate(LENS):
        np.testing.assert_allclose(out[i, :n], ref[i, :n], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("opts,message", [
    ({"num_heads": 3, "total_key_dim": 4, "n_out": 6}, "total_key_dim 4 is not divisible by num_heads 3"),
    ({"num_heads": 2, "total_key_dim": 4, "n_out": 5}, "n_out 5 is not divisible by num_heads 2"),
    ({"total_key_dim": 4, "n_out": 4}, "num_heads"),
    ({"num_heads": 2, "total_key_dim": 4, "n_out": 4, "initial_state": "var"},
     "initial_state 'var' is not supported"),
])
def test_bad_options_name_the_layer(opts, message):
    data, val, x = btf(4)
    with pytest.raises(NetworkError, match="'lay'.*" + message):
        make("self_attention", opts, [data])


def test_needs_time_axis():
    vec = Data("v", dims=[batch_dim, FeatureDim("f", 4)])
    # one frame (no time axis) is a step only where a rec unit builds it in its loop
    with pytest.raises(NetworkError, match="'lay'.*needs an input with a time axis"):
        make("self_attention", {"num_heads": 1, "total_key_dim": 2, "n_out": 2}, [vec])
    from returnn.tf.layers.rnn_cell import building_loop_step
    with building_loop_step(True):
        layer = make("self_attention", {"num_heads": 1, "total_key_dim": 2, "n_out": 2}, [vec])
    with pytest.raises(NetworkError, match="'lay'.*only inside a rec loop"):
        layer.forward([LayerOutput(tf.zeros([3, 4]), vec)], RunContext(False))
    static = Data("s", dims=[batch_dim, SpatialDim("t", 5), FeatureDim("f", 4)], time_dim_axis=1)
    assert not make("self_attention", {"num_heads": 1, "total_key_dim": 2, "n_out": 2}, [static]).step_mode
    with pytest.raises(NetworkError, match="'lay'.*needs an input with a time axis"):
        make("relative_positional_encoding", {"n_out": 2}, [vec])
    data = Data("x", dims=[batch_dim, SpatialDim("t"), FeatureDim("f", 4)])
    wrong = Data("w", dims=[batch_dim, SpatialDim("t2"), FeatureDim("g", 2)])
    with pytest.raises(NetworkError, match="'lay'.*key_shift 'w' must be"):
        make("self_attention", {"num_heads": 1, "total_key_dim": 2, "n_out": 2, "key_shift": "w"}, [data, wrong])


NETWORK = '''{
    "emb": {"class": "linear", "activation": None, "n_out": 16, "from": "data"},
    "ln": {"class": "layer_norm", "from": "emb"},
    "rel_pos": {"class": "relative_positional_encoding", "from": "ln", "n_out": 4, "clipping": 8},
    "att": {"class": "self_attention", "from": "ln", "num_heads": 4, "total_key_dim": 16, "n_out": 16,
            "key_shift": "rel_pos", "attention_dropout": 0.1},
    "res": {"class": "combine", "kind": "add", "from": ["emb", "att"]},
    "output": {"class": "softmax", "loss": "ce", "from": "res"},
}'''
CONFIG = config_12ax(network=NETWORK, num_epochs=2, num_seqs=60)


def test_conformer_style_block_trains_and_resumes(tmp_path):
    config = write_config(tmp_path / "att.config", CONFIG)
    proc = run_rnn(train_args(config, tmp_path), timeout=300)
    assert proc.returncode == 0, describe(proc)
    assert "epoch 2 score" in proc.stdout, describe(proc)
    proc = run_rnn(train_args(config, tmp_path, "++num_epochs", "3"), timeout=300)
    assert proc.returncode == 0 and "epoch 3 score" in proc.stdout and "epoch 1 score" not in proc.stdout, \
        describe(proc)
