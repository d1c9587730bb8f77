"""loss, sparse_softmax_cross_entropy_with_logits, ctc_loss, edit_distance against numpy (CTC by
enumerating every alignment of short sequences), padded frames of every input garbage."""
import itertools

import numpy as np
import pytest
import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork

LENS, LAB_LENS = [5, 3, 1], [3, 2, 0]


def _run(net_dict, seed=0):
    rng = np.random.RandomState(seed)
    x = rng.randn(3, 5, 4).astype("float32")
    classes = rng.randint(0, 5, (3, 5)).astype("int32")
    labels = rng.randint(0, 4, (3, 3)).astype("int32")
    for b, n in enumerate(LENS):
        x[b, n:] = 1e4
        classes[b, n:] = 99
    for b, n in enumerate(LAB_LENS):
        labels[b, n:] = 77
    data = Data("data", shape=(None, 4))
    extern = {"data": data, "classes": Data("classes", dim=5, sparse=True, same_dim_tags_as={"T": data.time_dim}),
              "labels": Data("labels", dim=4, sparse=True)}
    net = TFNetwork(net_dict, extern)
    lens = tf.constant(LENS)
    batch = {"data": tf.constant(x), "data:seq_len": lens, "classes": tf.constant(classes), "classes:seq_len": lens,
             "labels": tf.constant(labels), "labels:seq_len": tf.constant(LAB_LENS)}
    return net, net.forward(batch, RunContext(False)), x, classes, labels


def _log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def test_loss_layer_ce_per_frame_and_error():
    net, out, x, classes, _ = _run({
        "sm": {"class": "softmax", "from": "data", "n_out": 5},
        "output": {"class": "loss", "from": "sm", "loss_": "ce"},
        "err": {"class": "copy", "from": "output/error", "is_output_layer": True},
        "ls": {"class": "loss", "from": "sm", "loss_": "ce", "target_": "classes", "use_error": True,
               "is_output_layer": True}})
    sm = net.layers["sm"]
    logits = x @ sm.own_params["W"].numpy() + sm.own_params["b"].numpy()
    logp = _log_softmax(logits)
    y, err = out["output"].tensor.numpy(), out["err"].tensor.numpy()
    for b, n in enumerate(LENS):
        np.testing.assert_allclose(y[b, :n], -logp[b, np.arange(n), classes[b, :n]], rtol=1e-5)
        np.testing.assert_array_equal(err[b, :n], (logits[b, :n].argmax(-1) != classes[b, :n]).astype("float32"))
        assert np.all(y[b, n:] == 0)
    np.testing.assert_array_equal(out["ls"].tensor.numpy(), err)
    with pytest.raises(NetworkError, match="only 'ce'"):
        _run({"sm": {"class": "softmax", "from": "data", "n_out": 5},
              "output": {"class": "loss", "from": "sm", "loss_": "mse"}})


def test_sparse_softmax_cross_entropy_with_logits():
    net, out, x, classes, _ = _run({
        "lin": {"class": "linear", "from": "data", "n_out": 5},
        "output": {"class": "sparse_softmax_cross_entropy_with_logits", "logits": "lin", "targets": "data:classes"}})
    lin = net.layers["lin"]
    logp = _log_softmax(x @ lin.own_params["W"].numpy() + lin.own_params["b"].numpy())
    y = out["output"].tensor.numpy()
    for b, n in enumerate(LENS):
        np.testing.assert_allclose(y[b, :n], -logp[b, np.arange(n), classes[b, :n]], rtol=1e-5)


def test_sparse_softmax_cross_entropy_with_logits_targets_of_another_time_axis_are_refused():
    """RETURNN's copy_compatible_to matches the targets' axes by dim tag: a data key with a time axis of its
    own (not declared the same as the logits') fails there; here it was taken frame by frame."""
    with pytest.raises(NetworkError, match="the targets .* have axes the logits .* do not have"):
        TFNetwork({"lin": {"class": "linear", "from": "data", "n_out": 5}, "output": {
            "class": "sparse_softmax_cross_entropy_with_logits", "logits": "lin", "targets": "data:classes"}},
            {"data": Data("data", shape=(None, 4)), "classes": Data("classes", dim=5, sparse=True)})


def _paths(n_t, labels, blank, label_loop):
    """Every frame labelling of n_t frames that collapses to ``labels``."""
    for path in itertools.product(range(5), repeat=n_t):
        if label_loop:
            out, last = [], None
            for p in path:
                if p != blank and p != last:
                    out.append(p)
                last = p
        else:
            out = [p for p in path if p != blank]
        if out == list(labels):
            yield path


@pytest.mark.parametrize("max_approx, label_loop", [(False, True), (True, True), (False, False), (True, False)])
def test_ctc_loss_by_enumeration(max_approx, label_loop):
    net, out, x, _, labels = _run({
        "lin": {"class": "linear", "from": "data", "n_out": 5},
        "output": {"class": "ctc_loss", "logits": "lin", "targets": "data:labels", "max_approx": max_approx,
                   "label_loop": label_loop}})
    lin = net.layers["lin"]
    logp = _log_softmax(x @ lin.own_params["W"].numpy() + lin.own_params["b"].numpy())
    y = out["output"].tensor.numpy()
    for b, (n, u) in enumerate(zip(LENS, LAB_LENS)):
        scores = [sum(logp[b, t, p] for t, p in enumerate(path)) for path in _paths(n, labels[b, :u], 4, label_loop)]
        ref = -(max(scores) if max_approx else np.logaddexp.reduce(scores)) if scores else np.inf
        np.testing.assert_allclose(y[b], ref, rtol=1e-4)


def _levenshtein(a, b):
    d = np.arange(len(b) + 1)
    for i, x in enumerate(a, 1):
        prev, d[0] = d.copy(), i
        for j, y in enumerate(b, 1):
            d[j] = min(prev[j] + 1, d[j - 1] + 1, prev[j - 1] + (x != y))
    return d[-1]


def test_edit_distance_layer():
    _, out, _, classes, labels = _run({"output": {"class": "edit_distance", "a": "data:classes", "b": "data:labels"}})
    y = out["output"]
    assert y.data.dtype == "int32"
    ref = [_levenshtein(classes[b, :n], labels[b, :u]) for b, (n, u) in enumerate(zip(LENS, LAB_LENS))]
    assert y.tensor.numpy().tolist() == ref
