"""Segmental-model layers against numpy ports of RETURNN's per-window computations: segment_input,
unsegment_input (its inverse arrangement), classes_to_segments, classes_to_length_distribution(_global),
segment_alignment, apply_length_distribution, normalize_length_scores."""
import numpy as np
import pytest
import tensorflow as tf

from returnn.tensor import Data
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork

LENS, W = [5, 3], 3


def _run(net_dict, seed=0):
    rng = np.random.RandomState(seed)
    x = rng.randn(2, 5, 2).astype("float32")
    c = rng.randint(0, 3, (2, 5)).astype("int32")
    c[0, :3] = 1  # a run
    ext = {"data": Data("data", shape=(None, 2)), "classes": Data("classes", dim=4, sparse=True),
           "pairs": Data("pairs", dim=4, sparse=True)}
    pairs = np.stack([rng.randint(0, 4, (2, 5)), rng.randint(0, 2, (2, 5))], -1).reshape(2, 10).astype("int32")
    net = TFNetwork(net_dict, ext)
    lens = tf.constant(LENS)
    batch = {"data": tf.constant(x), "data:seq_len": lens, "classes": tf.constant(c), "classes:seq_len": lens,
             "pairs": tf.constant(pairs), "pairs:seq_len": tf.constant([10, 6])}
    return net.forward(batch, RunContext(False)), x, c, pairs


def _windows():
    return [(b, s, min(s + W, n)) for b, n in enumerate(LENS) for s in range(n)]


def test_segment_input_and_unsegment_input():
    out, x, _, _ = _run({"seg": {"class": "segment_input", "from": "data", "window": W, "is_output_layer": True},
                         "output": {"class": "unsegment_input", "from": "seg"}})
    seg = out["seg"]
    assert seg.tensor.shape == (8, W, 2) and seg.seq_len.numpy().tolist() == [e - s for _, s, e in _windows()]
    for i, (b, s, e) in enumerate(_windows()):
        idx = [k if k < LENS[b] else 0 for k in range(s, s + W)]
        np.testing.assert_array_equal(seg.tensor.numpy()[i], x[b, idx])
    y = out["output"]
    assert y.seq_len.numpy().tolist() == LENS and y.tensor.shape == (2, 5, W * 2)
    segv = seg.tensor.numpy()
    starts = [0, 5]
    for b, n in enumerate(LENS):
        for t in range(n):
            for w in range(W):
                np.testing.assert_array_equal(y.tensor.numpy()[b, t, w * 2:(w + 1) * 2],
                                              segv[(starts[b] + t - w) % 8, w])


def test_classes_to_segments_and_length_distributions():
    out, _, c, _ = _run({
        "seg": {"class": "classes_to_segments", "from": "data:classes", "num_classes": 4, "window": W,
                "is_output_layer": True},
        "len": {"class": "classes_to_length_distribution", "from": "data:classes", "window": W, "is_output_layer": True},
        "glob": {"class": "classes_to_length_distribution_global", "from": "data:classes", "window": W,
                 "weight_falloff": 0.6, "target_smoothing": [1, 2, 1], "is_output_layer": True}})
    for i, (b, s, e) in enumerate(_windows()):
        cls = c[b, s:e]
        onehot = np.zeros((W, 4))
        onehot[np.arange(e - s), cls] = 1
        np.testing.assert_allclose(out["seg"].tensor.numpy()[i], np.cumsum(onehot, 0) / np.arange(1, W + 1)[:, None],
                                   rtol=1e-6)
        changed = np.concatenate([cls[:-1] != cls[1:], [True]])
        idx = np.where(changed)[0]
        counts = np.concatenate([[idx[0] + 1], idx[1:] - idx[:-1]])
        ref = np.zeros(W)
        ref[idx] = counts / (e - s)
        np.testing.assert_allclose(out["len"].tensor.numpy()[i, 0], ref, rtol=1e-6)
        ref = np.zeros(W)
        ref[idx] = (0.4 ** np.arange(W) * 0.6)[:len(idx)]
        ref[e - s - 1] += 1e-4
        ref /= ref.sum()
        kernel = np.array([0.25, 0.5, 0.25])
        mat = sum(np.diag([v] * (W - abs(j - 1)), j - 1) for j, v in enumerate(kernel))
        sub = np.eye(W)
        sub[:e - s, :e - s] = mat[:e - s, :e - s]
        sub /= sub.sum(1, keepdims=True)
        np.testing.assert_allclose(out["glob"].tensor.numpy()[i, 0], ref @ sub, rtol=1e-5, atol=1e-7)


def test_segment_alignment():
    out, _, _, pairs = _run({"output": {"class": "segment_alignment", "from": "data:pairs", "num_classes": 4,
                                        "window": W}})
    p = pairs.reshape(2, 5, 2)
    rows = [(b, s, min(s + W, n)) for b, n in enumerate([5, 3]) for s in range(n)]
    y = out["output"].tensor.numpy()
    assert y.shape == (8, W, 4)
    for i, (b, s, e) in enumerate(rows):
        ended = np.where(p[b, s:e, 1] != 0)[0]
        dist = np.zeros(W)
        if len(ended):
            dist[ended[0]] = 1.0
        dist[e - s - 1] += 1e-4
        dist /= dist.sum()
        padded = np.concatenate([p[b], np.zeros((W - 1, 2), int)])
        onehot = np.eye(4)[padded[s:s + W, 0]]
        np.testing.assert_allclose(y[i], onehot * dist[:, None], rtol=1e-5)


def test_apply_length_distribution_and_normalize_length_scores():
    out, x, _, _ = _run({
        "seg": {"class": "segment_input", "from": "data", "window": W},
        "p": {"class": "activation", "activation": "sigmoid", "from": "seg", "is_output_layer": True},
        "len": {"class": "classes_to_length_distribution", "from": "data:classes", "window": W},
        "app": {"class": "apply_length_distribution", "from": ["p", "len"], "length_model_scale": 2.0,
                "is_output_layer": True},
        "norm": {"class": "normalize_length_scores", "from": "p", "is_output_layer": True}})
    p, dist = out["p"].tensor.numpy(), out["len"].tensor.numpy()
    np.testing.assert_allclose(out["app"].tensor.numpy(), p * np.transpose(dist, [0, 2, 1]) ** 2, rtol=1e-5)
    np.testing.assert_allclose(out["norm"].tensor.numpy(), p ** np.arange(1, W + 1)[None, :, None], rtol=1e-5)
