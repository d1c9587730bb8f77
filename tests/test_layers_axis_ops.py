"""cumsum, seq_len_mask, shift_axis, repeat, tile, range_in_axis, range_from_length against numpy,
with padded frames holding NaN (they must not reach real ones)."""
import numpy as np
import pytest
import tensorflow as tf

from helpers import outputs
from returnn.errors import NetworkError
from returnn.tensor import Data
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork

LENS = [5, 3, 1]


def _extern():
    return {"data": Data("data", shape=(None, 2)), "reps": Data("reps", shape=(None,), dtype="int32"),
            "classes": Data("classes", dim=4, sparse=True)}


def _run(net_dict, seed=0):
    rng = np.random.RandomState(seed)
    x = rng.randn(3, 5, 2).astype("float32")
    reps = rng.randint(0, 3, size=(3, 5)).astype("int32")
    for b, n in enumerate(LENS):
        x[b, n:] = np.nan
        reps[b, n:] = 7
    lens = tf.constant(LENS)
    batch = {"data": tf.constant(x), "data:seq_len": lens, "reps": tf.constant(reps), "reps:seq_len": lens}
    net = TFNetwork(outputs(net_dict), _extern())
    return net, net.forward(batch, RunContext(False)), x, reps


def test_cumsum_forward_and_reverse():
    """Forward: the real frames' sums (padding comes after them, NaN there changes nothing). Reverse:
    over the padded tensor as RETURNN (tf.cumsum): padded frames' values count (golden
    fuzz_cumsum_reverse_after_batch_norm)."""
    _, out, x, _ = _run({"fwd": {"class": "cumsum", "from": "data"}})
    for b, n in enumerate(LENS):
        np.testing.assert_allclose(out["fwd"].tensor.numpy()[b, :n], np.cumsum(x[b, :n], 0), rtol=1e-5)
    net = TFNetwork(outputs({"rev": {"class": "cumsum", "from": "data", "reverse": True,
                                     "additional_left_summand_per_element": 1.0}}), _extern())
    x = np.random.RandomState(1).randn(3, 5, 2).astype("float32")
    for b, n in enumerate(LENS):
        x[b, n:] = 2.0  # what a layer before may leave in padded frames
    out = net.forward({"data": tf.constant(x), "data:seq_len": tf.constant(LENS)}, RunContext(False))
    ref = np.cumsum((x + 1.0)[:, ::-1], 1)[:, ::-1]
    for b, n in enumerate(LENS):
        np.testing.assert_allclose(out["rev"].tensor.numpy()[b, :n], ref[b, :n], rtol=1e-5)


def test_seq_len_mask_with_start_and_window():
    _, out, x, _ = _run({
        "len": {"class": "length", "from": "data"},
        "one": {"class": "eval", "from": "len", "eval": "tf.ones_like(source(0))"},
        "plain": {"class": "seq_len_mask", "from": "data", "mask_value": -1.0},
        "start": {"class": "seq_len_mask", "from": "data", "mask_value": 0.0, "start": "one"},
        "window": {"class": "seq_len_mask", "from": "data", "mask_value": 5.0, "window_start": 1, "window_size": 2}})
    for b, n in enumerate(LENS):
        ref = np.full((5, 2), -1.0, "float32")
        ref[:n] = x[b, :n]
        np.testing.assert_array_equal(out["plain"].tensor.numpy()[b], ref)
        ref = np.zeros((5, 2), "float32")
        ref[1:n] = x[b, 1:n]
        np.testing.assert_array_equal(out["start"].tensor.numpy()[b], ref)
        ref = np.full((5, 2), 5.0, "float32")
        ref[1:min(n, 3)] = x[b, 1:min(n, 3)]
        np.testing.assert_array_equal(out["window"].tensor.numpy()[b], ref)


@pytest.mark.parametrize("amount, pad", [(2, True), (-1, True), (1, False)])
def test_shift_axis(amount, pad):
    _, out, x, _ = _run({"output": {"class": "shift_axis", "from": "data", "axis": "T", "amount": amount,
                                    "pad": pad, "pad_value": 0.5}})
    y, sizes = out["output"].tensor.numpy(), out["output"].seq_len.numpy()
    xt = np.where(np.isnan(x), 99.0, x)
    for b, n in enumerate(LENS):
        if pad:
            ref = np.full((5, 2), 0.5, "float32")
            if amount > 0:
                ref[amount:] = xt[b, :5 - amount]
            else:
                ref[:5 + amount] = xt[b, -amount:]
            expected_len = min(max(n + amount, 0), 5)
        else:
            ref = xt[b, :5 - amount]
            expected_len = min(n, 5 - amount)
        assert sizes[b] == expected_len
        np.testing.assert_array_equal(np.where(np.isnan(y[b]), 99.0, y[b])[:expected_len], ref[:expected_len])


def test_repeat_by_int_and_by_counts():
    _, out, x, reps = _run({"twice": {"class": "repeat", "from": "data", "repetitions": 2, "axis": "T"},
                            "counts": {"class": "repeat", "from": "data", "repetitions": "data:reps", "axis": "T"}})
    for b, n in enumerate(LENS):
        y = out["twice"].tensor.numpy()[b]
        assert out["twice"].seq_len.numpy()[b] == 2 * n
        np.testing.assert_array_equal(y[:2 * n], np.repeat(x[b, :n], 2, axis=0))
        ref = np.repeat(x[b, :n], reps[b, :n], axis=0)
        assert out["counts"].seq_len.numpy()[b] == len(ref)
        np.testing.assert_array_equal(out["counts"].tensor.numpy()[b, :len(ref)], ref)


def test_tile_static_axes_and_refusal_of_dynamic_ones():
    _, out, x, _ = _run({"feat": {"class": "tile", "from": "data", "multiples": {"F": 3}}})
    assert out["feat"].data.dim == 6
    for b, n in enumerate(LENS):
        np.testing.assert_array_equal(out["feat"].tensor.numpy()[b, :n], np.tile(x[b, :n], (1, 3)))
    with pytest.raises(NetworkError, match="tiling the dynamic axis .* \\(multiple 2\\) is refused, as RETURNN asserts"):
        _run({"time": {"class": "tile", "from": "data", "multiples": {"T": 2}}})


def test_tile_by_one_keeps_the_axis():
    """RETURNN: 1 * dim is the dim itself, on any axis (the batch axis too): the output combines with
    the input frame by frame (a new axis would broadcast to an outer product)."""
    _, out, x, _ = _run({"t": {"class": "tile", "from": "data", "multiples": {"F": 1, "B": 1, "T": 1}},
                         "sum": {"class": "combine", "kind": "add", "from": ["t", "data"]}})
    assert out["sum"].tensor.shape == x.shape
    for b, n in enumerate(LENS):
        np.testing.assert_array_equal(out["sum"].tensor.numpy()[b, :n], 2 * x[b, :n])
    with pytest.raises(NetworkError, match="tiling the batch axis .multiple 2. is not supported"):
        _run({"t": {"class": "tile", "from": "data", "multiples": {"B": 2}}})


def test_ranges():
    net, out, x, _ = _run({"r": {"class": "range_in_axis", "from": "data", "axis": "T"},
                           "len": {"class": "length", "from": "data"},
                           "rl": {"class": "range_from_length", "from": "len"},
                           "rf": {"class": "range_in_axis", "from": "data", "axis": "T", "dtype": "float32"},
                           "pos": {"class": "combine", "kind": "add", "from": ["data", "rf"]}})
    assert out["r"].tensor.numpy().tolist() == [0, 1, 2, 3, 4]
    assert out["r"].data.dims[0] is net.extern_data["data"].time_dim
    assert out["rl"].tensor.numpy().tolist() == [0, 1, 2, 3, 4]
    assert out["rl"].seq_len.numpy().tolist() == LENS
    assert out["pos"].tensor.shape == (3, 5, 2)  # broadcast over batch and feature by dim tags
    for b, n in enumerate(LENS):
        np.testing.assert_allclose(out["pos"].tensor.numpy()[b, :n], x[b, :n] + np.arange(n)[:, None], rtol=1e-6)


@pytest.mark.parametrize("layer, message", [
    ({"class": "shift_axis", "from": "data", "axis": "T", "amount": 0}, "'amount' must be a non-zero int"),
    ({"class": "tile", "from": "data", "multiples": 2}, "'multiples' must be a dict"),
    ({"class": "seq_len_mask", "from": "data"}, "'mask_value' must be a number"),
    ({"class": "repeat", "from": "data", "repetitions": -1, "axis": "T"}, "repetitions"),  # (0 is RETURNN's empty axis)
])
def test_bad_options_are_one_line(layer, message):
    with pytest.raises(NetworkError, match=message):
        TFNetwork(outputs({"output": layer}), _extern())


def test_scaled_grad_train_flag_global_step_and_identity():
    net = TFNetwork(outputs({"scaled": {"class": "scaled_grad", "from": "data", "scale": -0.5},
                     "same": {"class": "identity", "from": "data"},
                     "flag": {"class": "train_flag"}, "step": {"class": "global_train_step"}}), _extern())
    x = tf.constant(np.ones((1, 2, 2), "float32"))
    batch = {"data": x, "data:seq_len": tf.constant([2])}
    with tf.GradientTape() as tape:
        tape.watch(x)
        out = net.forward(batch, RunContext(True, tf.constant([0, 7], tf.int64)))
        y = tf.reduce_sum(out["scaled"].tensor * 3.0)
    np.testing.assert_array_equal(out["scaled"].tensor.numpy(), x.numpy())
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), np.full((1, 2, 2), -1.5))
    np.testing.assert_array_equal(out["same"].tensor.numpy(), x.numpy())
    assert bool(out["flag"].tensor.numpy()) and int(out["step"].tensor.numpy()) == 7
    assert not bool(net.forward(batch, RunContext(False))["flag"].tensor.numpy())


def test_range_from_length_of_lengths_per_frame():
    """RETURNN's range_from_length of lengths over (B, T) (returnn_common's test): a range up to their
    maximum (padded frames included, as RETURNN's reduce_max), the new axis' sizes per (B, T)."""
    net, out, _, reps = _run({"rl": {"class": "range_from_length", "from": "data:reps"}})
    assert out["rl"].tensor.numpy().tolist() == list(range(int(reps.max())))
    dim = out["rl"].data.dims[0]
    assert [d.is_batch_dim() for d in dim.sizes_over] == [True, False]
    np.testing.assert_array_equal(out["rl"].sizes[dim].numpy(), reps)
