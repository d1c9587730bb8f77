"""Layer references as RETURNN resolves them: sub-outputs ``split/0`` inside rec units (and
``prev:split/0``), ``(layer, axis)`` pairs in ``from`` (concat's), ``base:sub/x`` from a rec unit
inside a subnetwork, ``data:0`` in subnetworks without ``concat_sources``, ``masked_computation``
with ``masked_from: "base:..."`` in a rec loop (transducer decoders), ``prev:masked/x``."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from returnn.errors import NetworkError
from returnn.extern_data import data_from_opts
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork


def _extern(dim=3):
    return {"data": data_from_opts("data", {"dim": dim}), "data_masked": data_from_opts("data_masked", {"dim": dim})}


def _run(net, x, lens, name="output", **extra):
    batch = {"data": tf.constant(x), "data:seq_len": tf.constant(lens, tf.int32)}
    for key, (value, value_lens) in extra.items():
        batch[key], batch[key + ":seq_len"] = tf.constant(value), tf.constant(value_lens, tf.int32)
    return net.forward(batch, RunContext(False))[name].tensor.numpy()


def test_split_parts_and_their_prev_inside_a_rec_unit():
    net = TFNetwork({"output": {"class": "rec", "from": "data", "unit": {
        "input": {"class": "linear", "activation": "tanh", "n_out": 5, "from": ["data:source", "prev:split/1"]},
        "split": {"class": "split", "from": "input", "size_splits": [2, 3]},
        "output": {"class": "copy", "from": ["split/0", "prev:split/0"]}}}}, _extern())
    rec = net.layers["output"]
    assert set(rec.plan.in_loop) >= {"input", "split", "split/0", "split/1"}
    x = np.random.RandomState(0).randn(2, 4, 3).astype(np.float32)
    y = _run(net, x, [4, 4])
    w, b = rec.layers["input"].W.numpy(), rec.layers["input"].bias.numpy()
    for s in range(2):
        p1, p0 = np.zeros(3), np.zeros(2)
        for t in range(4):
            h = np.tanh(np.concatenate([x[s, t], p1]) @ w + b)
            np.testing.assert_allclose(y[s, t], np.concatenate([h[:2], p0]), rtol=1e-5, atol=1e-6)
            p0, p1 = h[:2], h[2:]


def test_unknown_sub_output_in_a_rec_unit_is_an_error():
    with pytest.raises(NetworkError, match="split/7|no part"):
        TFNetwork({"output": {"class": "rec", "from": "data", "unit": {
            "split": {"class": "split", "from": "data:source", "size_splits": [1, 2]},
            "output": {"class": "copy", "from": ["split/7"]}}}}, _extern())


def test_layer_axis_pairs_in_from():
    """RETURNN's ConcatLayer sources: the network resolves the names and passes 'from' to the layer."""
    net = TFNetwork({"a": {"class": "linear", "activation": "tanh", "n_out": 2, "from": "data"},
                     "output": {"class": "concat", "from": [("a", "F"), ("data", "F")]}}, _extern())
    x = np.random.RandomState(1).randn(2, 3, 3).astype(np.float32)
    y = _run(net, x, [3, 3])
    assert y.shape == (2, 3, 5)
    np.testing.assert_allclose(y[..., 2:], x)
    with pytest.raises(NetworkError, match="for concat layers only"):
        TFNetwork({"output": {"class": "linear", "n_out": 2, "from": [("data", "F")]}}, _extern())


def test_base_sub_layer_from_a_rec_unit_in_a_subnetwork():
    """RETURNN's test_reclayer_subnetwork_base_subnet: base:base:sub/reduce from a rec unit of sub2."""
    net = TFNetwork({
        "sub": {"class": "subnetwork", "from": [], "subnetwork": {
            "linear": {"class": "eval", "eval": "source(0) * 0.9", "from": "base:data:data"},
            "output": {"class": "copy", "from": "linear"},
            "reduce": {"class": "reduce", "mode": "mean", "axis": "T", "from": "linear"}}},
        "sub2": {"class": "subnetwork", "from": [], "subnetwork": {
            "output": {"class": "copy", "from": "rec"},
            "rec": {"class": "rec", "from": "base:data:data", "unit": {
                "add": {"class": "combine", "kind": "add", "from": ["data:source", "prev:add", "base:base:sub/reduce"]},
                "output": {"class": "copy", "from": "add"}}}}},
        "output": {"class": "copy", "from": "sub2"}}, _extern(1))
    x = np.random.RandomState(2).randn(2, 3, 1).astype(np.float32)
    y = _run(net, x, [3, 3])
    ref = np.cumsum(x + 0.9 * x.mean(1, keepdims=True), axis=1)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)


def test_data_index_references_in_a_subnetwork_without_concat_sources():
    net = TFNetwork({
        "a": {"class": "linear", "activation": None, "n_out": 2, "from": "data"},
        "output": {"class": "subnetwork", "from": ["data", "a"], "concat_sources": False, "subnetwork": {
            "output": {"class": "combine", "kind": "add", "from": ["data:1", "data:a"]}}}}, _extern())
    x = np.random.RandomState(3).randn(2, 3, 3).astype(np.float32)
    a = net.layers["a"]
    np.testing.assert_allclose(_run(net, x, [3, 3]), 2 * (x @ a.W.numpy() + a.bias.numpy()), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("own_mask", ["mask", None])
def test_masked_computation_from_a_packed_base_sequence_in_a_rec_loop(own_mask):
    """A transducer decoder's shape: the masked unit runs once over base:data:data_masked (the frames
    the mask keeps, packed); in the loop, unmask takes its frame of the steps where the mask held. With
    masked_from the masked_computation's own mask may be None (RETURNN; i6's transducer configs)."""
    net = TFNetwork({"output": {"class": "rec", "from": "data", "unit": {
        "mask": {"class": "eval", "from": ["data:source", ":i"], "out_type": {"dtype": "bool", "shape": ()},
                 "eval": "tf.fill([tf.shape(source(0, auto_convert=False))[0]], tf.equal(tf.reshape(source(1), []) % 2, 1))"},
        "masked": {"class": "masked_computation", "from": "data:source" if own_mask else [], "mask": own_mask,
                   "masked_from": "base:data:data_masked",
                   "unit": {"class": "linear", "activation": None, "n_out": 2, "from": "data"}},
        "unmask": {"class": "unmask", "from": "masked", "mask": "mask"},
        "output": {"class": "combine", "kind": "add", "from": ["unmask", "prev:output"]}}}}, _extern())
    rec = net.layers["output"]
    assert "masked/output" in rec.plan.out_of_loop and "unmask" in rec.plan.in_loop
    rng = np.random.RandomState(4)
    x, xm = rng.randn(2, 4, 3).astype(np.float32), rng.randn(2, 2, 3).astype(np.float32)
    y = _run(net, x, [4, 4], data_masked=(xm, [2, 2]))
    lin = rec.layers["masked/output"]
    proj = xm @ lin.W.numpy() + lin.bias.numpy()
    for s in range(2):
        acc = np.zeros(2)
        for t in range(4):
            k = (t + 1) // 2 - 1  # kept steps so far (odd t), minus one
            acc = acc + (proj[s, k] if k >= 0 else 0.0)
            np.testing.assert_allclose(y[s, t], acc, rtol=1e-5, atol=1e-5)


def test_prev_of_a_masked_computation_sub_layer():
    net = TFNetwork({"output": {"class": "rec", "from": "data", "unit": {
        "m0": {"class": "reduce", "mode": "max", "axis": "F", "from": "data:source"},
        "mask": {"class": "compare", "from": "m0", "kind": "greater", "value": 0.0},
        "masked": {"class": "masked_computation", "from": "data:source", "mask": "mask",
                   "unit": {"class": "subnetwork", "from": "data", "subnetwork": {
                       "a": {"class": "linear", "activation": "tanh", "n_out": 2, "from": "data"},
                       "output": {"class": "copy", "from": "a"}}}},
        "output": {"class": "combine", "kind": "add", "from": ["masked", "prev:masked/a"]}}}}, _extern())
    x = np.random.RandomState(5).randn(1, 5, 3).astype(np.float32)
    y = _run(net, x, [5])
    lin = net.layers["output"].layers["masked/a"]
    a, prev = np.zeros(2), np.zeros(2)
    for t in range(5):
        prev = a
        if x[0, t].max() > 0:
            a = np.tanh(x[0, t] @ lin.W.numpy() + lin.bias.numpy())
        np.testing.assert_allclose(y[0, t], a + prev, rtol=1e-5, atol=1e-5)
