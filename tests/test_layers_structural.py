"""Structural layers of issue 27 against numpy: concat, flatten_batch / unflatten_batch /
split_batch_time, reshape, transpose, combine_dims, unflatten_nd, slice_nd, scatter_nd,
boolean_mask, top_k, search_sorted, weighted_sum, elemwise_prod, batch_softmax, resize, remove,
fold, length variants, gradient, image_summary, framewise_statistics; refusals.

Padded frames of the inputs hold NaN (they must not reach real ones); one sequence has length 0.
"""
import numpy as np
import pytest
import tensorflow as tf

from helpers import outputs
from returnn.errors import NetworkError
from returnn.tensor import Data, Dim, FeatureDim, SpatialDim, batch_dim
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork

LENS = [5, 3, 0]
T = 5


def _extern(**more):
    ext = {"data": Data("data", shape=(None, 3)), "classes": Data("classes", dim=4, sparse=True),
           "other": Data("other", shape=(None, 2))}
    ext.update(more)
    return ext


def _batch(seed=0, lens=LENS, other_lens=(2, 4, 1)):
    rng = np.random.RandomState(seed)
    x = rng.randn(3, T, 3).astype("float32")
    y = rng.randn(3, max(other_lens), 2).astype("float32")
    c = rng.randint(0, 4, size=(3, T)).astype("int32")
    for b, n in enumerate(lens):
        x[b, n:] = np.nan
        c[b, n:] = 3
    for b, n in enumerate(other_lens):
        y[b, n:] = np.nan
    batch = {"data": tf.constant(x), "data:seq_len": tf.constant(lens), "classes": tf.constant(c),
             "classes:seq_len": tf.constant(lens), "other": tf.constant(y), "other:seq_len": tf.constant(other_lens)}
    return batch, x, y, c


def _run(net_dict, extern=None, seed=0, **kw):
    batch, x, y, c = _batch(seed, **kw)
    net = TFNetwork(outputs(net_dict), extern or _extern())
    return net, net.forward(batch, RunContext(False)), x, y, c


def _real(a, lens, axis=1):
    return [np.take(a[b], range(n), axis=axis - 1) for b, n in enumerate(lens)]


# ---- concat
def test_concat_features_and_packed_time():
    net, out, x, y, _ = _run({
        "lin": {"class": "linear", "activation": None, "n_out": 2, "from": "data"},
        "cat": {"class": "concat", "from": [("data", "F"), ("lin", "F")]}})
    assert net.layers["cat"].output.batch_shape == (None, None, 5)
    cat = out["cat"].tensor.numpy()
    for b, n in enumerate(LENS):
        np.testing.assert_array_equal(cat[b, :n, :3], x[b, :n])
        np.testing.assert_allclose(cat[b, :n, 3:], out["lin"].tensor.numpy()[b, :n], rtol=1e-6)
    # along time, features of size 3 and 2 are two different axes: each source lacks one of them
    with pytest.raises(NetworkError, match="allow_broadcast=True repeats it"):
        TFNetwork(outputs({"c": {"class": "concat", "from": [("data", "T"), ("data:other", "T")]}}), _extern())


def test_concat_time_joins_the_padded_parts_as_returnn():
    """RETURNN's TF ConcatLayer: tf.concat of the padded tensors, sizes summed (golden
    fuzz_concat_time_padded: the summed lengths cover the first part's padding)."""
    ext = _extern(other=Data("other", shape=(None, 3)))
    batch, x, _, _ = _batch()
    y = np.random.RandomState(3).randn(3, 4, 3).astype("float32")
    other_lens = [2, 4, 1]
    batch["other"], batch["other:seq_len"] = tf.constant(y), tf.constant(other_lens)
    net = TFNetwork(outputs({"time": {"class": "concat", "from": [("data", "T"), ("data:other", "T")]}}), ext)
    out = net.forward(batch, RunContext(False))["time"]
    np.testing.assert_array_equal(out.seq_len.numpy(), np.array(LENS) + np.array(other_lens))
    np.testing.assert_array_equal(out.tensor.numpy(), np.concatenate([batch["data"].numpy(), y], 1))


def test_concat_needs_pairs():
    with pytest.raises(NetworkError, match="pair"):
        TFNetwork(outputs({"c": {"class": "concat", "from": ["data", "data"]}}), _extern())


# ---- flatten_batch, unflatten_batch, split_batch_time, length
@pytest.mark.parametrize("batch_major", [True, False])
def test_flatten_unflatten_batch(batch_major):
    net, out, x, _, _ = _run({
        "flat": {"class": "flatten_batch", "from": "data", "batch_major": batch_major},
        "back": {"class": "unflatten_batch", "from": "flat"},
        "n": {"class": "length", "from": "flat", "axis": "B"}})
    mask = np.arange(T)[None, :] < np.array(LENS)[:, None]
    ref = x[mask] if batch_major else x.transpose(1, 0, 2)[mask.T]
    np.testing.assert_array_equal(out["flat"].tensor.numpy(), ref)
    assert out["n"].tensor.numpy() == sum(LENS) and net.layers["n"].output.batch_ndim == 0
    back = out["back"].tensor.numpy()
    if not batch_major:
        assert net.layers["back"].output.batch_dim_axis == 1
        back = back.transpose(1, 0, 2)
    np.testing.assert_array_equal(np.where(mask[..., None], back, 0), np.where(mask[..., None], x, 0))
    assert np.all(back[~mask] == 0)


@pytest.mark.parametrize("keep_order_time_first", [False, True])
def test_merge_dims_batch_time_and_split_batch_time(keep_order_time_first):
    axes = {"axes": ["T", "B"], "keep_order": True} if keep_order_time_first else {"axes": ["B", "T"]}
    net, out, x, _, _ = _run({
        "m": dict({"class": "merge_dims", "from": "data"}, **axes),
        "lin": {"class": "linear", "activation": None, "n_out": 2, "from": "m"},
        "split": {"class": "split_batch_time", "from": "lin", "base": "data"},
        "back": {"class": "unflatten_batch", "from": "m"},
        "n": {"class": "length", "from": "m", "axis": "B"}})
    merged = x.transpose(1, 0, 2) if keep_order_time_first else x
    np.testing.assert_array_equal(out["m"].tensor.numpy(), merged.reshape(15, 3))  # padding included
    assert out["n"].tensor.numpy() == 15
    back = out["back"].tensor.numpy()
    np.testing.assert_array_equal(back.transpose(1, 0, 2) if keep_order_time_first else back, x)
    if not keep_order_time_first:
        lin = out["lin"].tensor.numpy().reshape(3, 5, 2)
        assert net.layers["split"].output.time_dim == net.extern_data["data"].time_dim
        np.testing.assert_array_equal(out["split"].tensor.numpy(), lin)
        assert out["split"].seq_len.numpy().tolist() == LENS


def test_split_batch_time_after_flatten_of_static_axis():
    net, out, x, _, _ = _run({
        "sp": {"class": "split_dims", "from": "data", "axis": "F", "dims": [3, 1]},
        "flat": {"class": "flatten_batch", "from": "sp", "axis": "dim:3"},
        "back": {"class": "unflatten_batch", "from": "flat"}})
    np.testing.assert_array_equal(out["flat"].tensor.numpy()[:, :LENS[0], 0], x.transpose(0, 2, 1).reshape(9, T)[:, :5])
    np.testing.assert_array_equal(out["back"].tensor.numpy()[0, :, :5, 0], x[0].T)


def test_length_variants():
    f = FeatureDim("feat", 3)
    time = SpatialDim("t")
    ext = _extern(data=Data("data", dims=[batch_dim, time, f]))
    net, out, x, _, _ = _run({
        "lt": {"class": "length", "from": "data"},
        "lb": {"class": "length", "from": "data", "axis": "B"},
        "lf": {"class": "length", "from": "data", "axis": f},
        "ld": {"class": "length", "from": "data", "axis": time, "add_time_axis": True},
        "ls": {"class": "length", "from": "data:classes", "axis": "sparse_dim"}}, ext)
    assert out["lt"].tensor.numpy().tolist() == LENS
    assert out["lb"].tensor.numpy() == 3 and out["lf"].tensor.numpy() == 3 and out["ls"].tensor.numpy() == 4
    assert out["ld"].tensor.numpy().tolist() == [[n] for n in LENS]


# ---- reshape, transpose, combine_dims, unflatten_nd
def test_reshape_transpose_combine_dims():
    a, b = FeatureDim("a", 1), FeatureDim("b", 3)
    net, out, x, _, _ = _run({
        "r": {"class": "reshape", "from": "data", "in_dims": ["F"], "out_dims": [a, b]},
        "tr": {"class": "transpose", "from": "data", "perm": {"T": "B", "B": "T"}},
        "tl": {"class": "transpose", "from": "r", "perm": [batch_dim, b, a, "T"]},
        "cd": {"class": "combine_dims", "from": "r", "axes": [b, a]}})
    np.testing.assert_array_equal(out["r"].tensor.numpy(), x[:, :, None, :])
    assert net.layers["tr"].output.batch_dim_axis == 1 and net.layers["tr"].output.time_dim_axis == 0
    np.testing.assert_array_equal(out["tr"].tensor.numpy(), x.transpose(1, 0, 2))
    assert net.layers["tl"].output.dims[1] is b and net.layers["tl"].output.feature_dim_axis == 1
    np.testing.assert_array_equal(out["tl"].tensor.numpy(), x[:, :, None, :].transpose(0, 3, 2, 1))
    np.testing.assert_array_equal(out["cd"].tensor.numpy(), x)
    with pytest.raises(NetworkError, match="total size"):
        TFNetwork(outputs({"r": {"class": "reshape", "from": "data", "in_dims": ["F"],
                                 "out_dims": [FeatureDim("x", 2)]}}), _extern())


def test_unflatten_nd():
    ext = _extern(sizes=Data("sizes", shape=(2,), dtype="int32"))
    batch, x, _, _ = _batch()
    grid = np.array([[1, 5], [3, 1], [0, 2]], "int32")  # products 5, 3, 0 = the lengths
    batch["sizes"], batch["sizes:seq_len"] = tf.constant(grid[:, None]), tf.constant([1, 1, 1])
    net = TFNetwork(outputs({"u": {"class": "unflatten_nd", "from": "data", "sizes": "data:sizes", "num_axes": 2}}), ext)
    out = net.forward(batch, RunContext(False))["u"]
    v = out.tensor.numpy()
    assert v.shape == (3, 3, 5, 3)
    for b, (h, w) in enumerate(grid):
        np.testing.assert_array_equal(v[b, :h, :w], x[b, :h * w].reshape(h, w, 3))
        pad = np.ones(v.shape[1:3], bool)
        pad[:h, :w] = False  # outside the sequence's grid: its frame 0, as RETURNN (padding there if it is empty)
        np.testing.assert_array_equal(v[b][pad], np.broadcast_to(x[b, 0], (int(pad.sum()), 3)))
    dims = net.layers["u"].output.dims
    assert out.sizes[dims[1]].numpy().tolist() == [1, 3, 0] and out.sizes[dims[2]].numpy().tolist() == [5, 1, 2]


# ---- slice_nd, scatter_nd, boolean_mask
def test_slice_nd_per_sequence_start():
    _, out, x, _, _ = _run({
        "start": {"class": "range_in_axis", "from": "data", "axis": "B"},
        "to_end": {"class": "slice_nd", "from": "data", "start": "start", "size": None},
        "two": {"class": "slice_nd", "from": "data", "start": "start", "size": 2},
        "fixed": {"class": "slice_nd", "from": "data", "start": 1, "size": None, "min_size": 1}})
    to_end, two = out["to_end"].tensor.numpy(), out["two"].tensor.numpy()
    assert out["to_end"].sizes[out["to_end"].data.dims[1]].numpy().tolist() == [5, 2, 0]
    for b, n in enumerate(LENS):
        np.testing.assert_array_equal(to_end[b, :max(n - b, 0)], x[b, b:n])
        ref = np.zeros((2, 3), "float32")
        k = max(min(n - b, 2), 0)
        ref[:k] = x[b, b:b + k]
        np.testing.assert_array_equal(two[b], ref)
    assert out["fixed"].sizes[out["fixed"].data.dims[1]].numpy().tolist() == [4, 2, 1]
    np.testing.assert_array_equal(out["fixed"].tensor.numpy()[0, :4], x[0, 1:5])
    assert np.all(out["fixed"].tensor.numpy()[2] == 0)


def test_scatter_nd_into_time():
    ts = SpatialDim("ts", 4)
    net, out, x, _, _ = _run({
        "b": {"class": "range_in_axis", "from": "data", "axis": "B"},
        "r": {"class": "range", "limit": 4, "out_spatial_dim": ts},
        "pos": {"class": "combine", "kind": "add", "from": ["b", "r"], "out_shape": {batch_dim, ts}},
        "upd": {"class": "cast", "from": "pos", "dtype": "float32"},
        "out": {"class": "scatter_nd", "from": "upd", "position": "pos", "position_axis": ts,
                "output_dim_via_time_from": "data", "filter_invalid_indices": True}})
    v = out["out"].tensor.numpy()
    assert v.shape == (3, T) and net.layers["out"].output.dims[1] == net.extern_data["data"].time_dim
    for b in range(3):
        ref = np.zeros(T, "float32")
        for i in range(4):
            if b + i < T:
                ref[b + i] += b + i
        np.testing.assert_array_equal(v[b], ref)


def test_boolean_mask():
    _, out, x, _, c = _run({
        "f0": {"class": "gather", "from": "data", "axis": "F", "position": 0},
        "m": {"class": "compare", "from": "f0", "kind": "greater", "value": 0.0},
        "sel": {"class": "boolean_mask", "from": "data", "mask": "m", "dims": ["B", "T"]},
        "n": {"class": "length", "from": "sel", "axis": "T"}})
    mask = (np.nan_to_num(x[..., 0]) > 0) & (np.arange(T)[None, :] < np.array(LENS)[:, None])
    np.testing.assert_array_equal(out["sel"].tensor.numpy(), x[mask])
    assert out["n"].tensor.numpy() == mask.sum()


def test_boolean_mask_takes_padded_frames_where_the_mask_is_true_there():
    """RETURNN's tf.boolean_mask of the padded tensors: a mask True on padded frames (a compare of their zeros, as
    RETURNN reads data) takes those frames too (returnn_fuzz mutate seed 281 #98: real frames only here before)."""
    batch, x, _, _ = _batch()
    read = np.nan_to_num(x, nan=0.0)  # zero padding, as RETURNN's datasets feed
    batch["data"] = tf.constant(read)
    net = TFNetwork(outputs({
        "f0": {"class": "gather", "from": "data", "axis": "F", "position": 0},
        "m": {"class": "compare", "from": "f0", "kind": "greater", "value": -1.0},
        "sel": {"class": "boolean_mask", "from": "data", "mask": "m", "dims": ["B", "T"]}}), _extern())
    out = net.forward(batch, RunContext(False))
    assert (read[..., 0] > -1.0).sum() > sum(LENS)
    np.testing.assert_array_equal(out["sel"].tensor.numpy(), read[read[..., 0] > -1.0])


# ---- top_k, search_sorted
def test_top_k_single_and_joint():
    _, out, x, _, _ = _run({
        "k": {"class": "top_k", "from": "data", "axis": "F", "k": 2},
        "i": {"class": "copy", "from": "k/indices"},
        "j": {"class": "top_k", "from": "data", "axis": ["T", "F"], "k": 3},
        "j0": {"class": "copy", "from": "j/indices0"}, "j1": {"class": "copy", "from": "j/indices1"}})
    for b, n in enumerate(LENS):
        order = np.argsort(-x[b, :n], axis=-1)[:, :2]
        np.testing.assert_array_equal(out["i"].tensor.numpy()[b, :n], order)
        np.testing.assert_array_equal(out["k"].tensor.numpy()[b, :n], np.take_along_axis(x[b, :n], order, -1))
        if n:
            flat = np.argsort(-x[b, :n].reshape(-1))[:3]
            np.testing.assert_array_equal(out["j0"].tensor.numpy()[b], flat // 3)
            np.testing.assert_array_equal(out["j1"].tensor.numpy()[b], flat % 3)


@pytest.mark.parametrize("axis, extern", [(["B", "F"], {"data": Data("data", shape=(4,), time_dim_axis=None)}),
                                          ("B", {"data": Data("data", shape=(None, 4))})])
def test_top_k_over_the_batch_axis_refusals(axis, extern):
    """Jointly with other axes RETURNN fails (the merged axis has no size); with a dynamic axis left its
    lengths would be per sequence with no sequences left: one line each."""
    with pytest.raises(NetworkError, match="top_k over the batch axis"):
        TFNetwork(outputs({"output": {"class": "top_k", "from": "data", "axis": axis, "k": 2}}), extern)


def test_search_sorted():
    ext = {"s": Data("s", shape=(None,)), "v": Data("v", shape=(2,))}
    srt = np.array([[1.0, 2.0, 3.0, np.nan], [0.5, 1.5, np.nan, np.nan]], "float32")
    vals = np.array([[[2.0, 0.0]], [[1.5, 9.0]]], "float32")
    net = TFNetwork(outputs({"left": {"class": "search_sorted", "sorted_sequence": "data:s", "values": "data:v"},
                             "right": {"class": "search_sorted", "sorted_sequence": "data:s", "values": "data:v",
                                       "side": "right"}}), ext)
    out = net.forward({"s": tf.constant(srt), "s:seq_len": tf.constant([3, 2]), "v": tf.constant(vals),
                       "v:seq_len": tf.constant([1, 1])}, RunContext(False))
    assert out["left"].tensor.numpy().tolist() == [[1, 0], [1, 2]]
    assert out["right"].tensor.numpy().tolist() == [[2, 0], [2, 2]]


def test_search_sorted_per_feature_as_returnn_test():
    """RETURNN's test_SearchSortedLayer: sorted (B, T, F), values (B, F, F'): F paired by its size."""
    rng = np.random.RandomState(1)
    srt = np.sort(rng.uniform(0.0, 10.0, size=(2, 10, 3)), axis=1).astype("float32")
    vals = rng.uniform(0.0, 10.0, size=(2, 1, 3, 5)).astype("float32")
    ext = {"s": Data("s", shape=(None, 3)), "v": Data("v", shape=(3, 5), time_dim_axis=None, feature_dim_axis=1)}
    for side in ("left", "right"):
        net = TFNetwork(outputs({"o": {"class": "search_sorted", "sorted_sequence": "data:s", "values": "data:v",
                                       "axis": "T", "side": side}}), ext)
        out = net.forward({"s": tf.constant(srt), "s:seq_len": tf.constant([10, 7]), "v": tf.constant(vals),
                           "v:seq_len": tf.constant([1, 1])}, RunContext(False))["o"]
        assert out.data.batch_shape == (None, 3, 5) and out.data.feature_dim_axis == 1
        for b, n in enumerate([10, 7]):
            for f in range(3):
                ref = np.searchsorted(srt[b, :n, f], vals[b, 0, f], side=side)
                np.testing.assert_array_equal(out.tensor.numpy()[b, f], ref)


# ---- weighted_sum, elemwise_prod, batch_softmax
def test_weighted_sum_elemwise_prod_batch_softmax():
    net, out, x, _, _ = _run({
        "ws": {"class": "weighted_sum", "from": "data", "axes": "F"},
        "wt": {"class": "weighted_sum", "from": "data", "axes": "F", "size": [3], "padding": "same"},
        "ep": {"class": "elemwise_prod", "from": "data", "axes": "F"},
        "bs": {"class": "batch_softmax", "from": "data"}})
    w = net.layers["ws"].w.numpy()
    assert w.shape == (3,) and np.allclose(w, 1 / 3)
    wt = net.layers["wt"].w.numpy()
    xs = np.nan_to_num(x)
    for b, n in enumerate(LENS):
        np.testing.assert_allclose(out["ws"].tensor.numpy()[b, :n], x[b, :n].mean(-1), rtol=1e-5)
        padded = np.pad(xs[b], [(0, 0), (1, 1)])
        ref = sum(wt[i] * padded[:, i:i + 3] for i in range(3))
        np.testing.assert_allclose(out["wt"].tensor.numpy()[b, :n], ref[:n], rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(out["ep"].tensor.numpy()[b, :n], x[b, :n])
        e = np.exp(x[b, :n] - x[b, :n].max()) if n else np.zeros((0, 3))
        np.testing.assert_allclose(out["bs"].tensor.numpy()[b, :n], e / max(e.sum(), 1e-30), rtol=1e-5)
    assert np.all(out["bs"].tensor.numpy()[2] == 0)
    assert sorted(p.name for p in net.layers["ws"].returnn_params()) == ["W"]


@pytest.mark.parametrize("padding", ["same", "valid"])
def test_weighted_sum_over_a_dynamic_axis_is_refused(padding):
    """RETURNN's weighted_sum makes a summed dynamic axis a new dim without sizes: it fails to build."""
    with pytest.raises(NetworkError, match="'wt' \\(weighted_sum\\): the dynamic axis .* is refused"):
        _run({"wt": {"class": "weighted_sum", "from": "data", "axes": "T", "size": [3], "padding": padding}})


# ---- resize, remove, fold
def test_resize_kinds():
    net, out, x, _, _ = _run({
        "nn": {"class": "resize", "from": "data", "axis": "T", "factor": 2, "kind": "nn"},
        "fill": {"class": "resize", "from": "data", "axis": "T", "factor": 3, "kind": "fill", "fill_value": 0.5},
        "lin": {"class": "resize", "from": "data", "axis": "T", "factor": 2, "kind": "linear"}})
    for b, n in enumerate(LENS):
        np.testing.assert_array_equal(out["nn"].tensor.numpy()[b, :2 * n], np.repeat(x[b, :n], 2, 0))
        ref = np.full((n, 3, 3), 0.5, "float32")
        ref[:, 0] = x[b, :n]
        np.testing.assert_array_equal(out["fill"].tensor.numpy()[b, :3 * n], ref.reshape(3 * n, 3))
        lin = out["lin"].tensor.numpy()[b]
        np.testing.assert_allclose(lin[0:2 * n:2], x[b, :n], rtol=1e-6)
        if n > 1:
            np.testing.assert_allclose(lin[1:2 * n - 2:2], (x[b, :n - 1] + x[b, 1:n]) / 2, rtol=1e-5, atol=1e-6)
    assert out["nn"].seq_len.numpy().tolist() == [10, 6, 0]


def test_remove_and_fold():
    _, out, x, _, c = _run({
        "rm": {"class": "remove", "from": "data:classes", "symbol": 0},
        "win": {"class": "window", "from": "data", "window_size": 3},
        "sum": {"class": "fold", "from": "win", "mode": "sum", "in_spatial_dim": "T", "window_dim": "stag:win"},
        "mean": {"class": "fold", "from": "win", "mode": "mean", "in_spatial_dim": "T", "window_dim": "stag:win"}})
    for b, n in enumerate(LENS):
        kept = [v for v in c[b, :n] if v != 0]
        assert out["rm"].seq_len.numpy()[b] == len(kept)
        np.testing.assert_array_equal(out["rm"].tensor.numpy()[b, :len(kept)], kept)
        mean = out["mean"].tensor.numpy()[:, b]  # fold's output is time-major (as RETURNN)
        np.testing.assert_allclose(mean[:n], x[b, :n], rtol=1e-5)
        counts = np.array([min(t + 1, n - 1) - max(t - 1, 0) + 1 for t in range(n)])
        np.testing.assert_allclose(out["sum"].tensor.numpy()[:n, b], x[b, :n] * counts[:, None], rtol=1e-5)


# ---- RETURNN's old fixed-layout layers
def test_fill_unused_swap_time_feature_flatten_time_tile_features():
    net, out, x, _, _ = _run({
        "fill": {"class": "fill_unused", "from": "data", "fill_value": -2.0},
        "swap": {"class": "swap_time_feature", "from": "fill"},
        "flat": {"class": "flatten_time", "from": "fill"},
        "tile": {"class": "tile_features", "from": "data", "repetitions": 2}})
    mask = (np.arange(T)[None, :] < np.array(LENS)[:, None])[..., None]
    filled = np.where(mask, x, -2.0)
    np.testing.assert_array_equal(out["fill"].tensor.numpy(), filled)
    np.testing.assert_array_equal(out["swap"].tensor.numpy(), filled.transpose(0, 2, 1))
    assert net.layers["swap"].output.time_dim.dimension == 3 and net.layers["swap"].output.feature_dim_axis == 2
    np.testing.assert_array_equal(out["flat"].tensor.numpy(), filled.reshape(3, 1, 15))
    assert out["flat"].sizes[net.layers["flat"].output.dims[2]].numpy().tolist() == [15, 9, 0]
    for b, n in enumerate(LENS):
        np.testing.assert_array_equal(out["tile"].tensor.numpy()[b, :n], np.tile(x[b, :n], [1, 2]))


# ---- gradient, monitoring layers, refusals
def test_gradient_in_a_compiled_step():
    net = TFNetwork(outputs({
        "sq": {"class": "eval", "from": "data", "eval": "source(0) * source(0)"},
        "s": {"class": "reduce", "mode": "sum", "axes": ["T", "F"], "from": "sq"},
        "tot": {"class": "reduce", "mode": "sum", "axes": "B", "from": "s"},
        "g": {"class": "gradient", "y": "tot", "x": "data"}}), _extern())
    batch, x, _, _ = _batch()
    fn = tf.function(lambda b: net.forward(b, RunContext(False), only=["g"])["g"].tensor)
    g = fn(batch).numpy()
    for b, n in enumerate(LENS):
        np.testing.assert_allclose(g[b, :n], 2 * x[b, :n], rtol=1e-6)
    with pytest.raises(NetworkError, match="compiled step"):
        net.forward(batch, RunContext(False), only=["g"])


def test_monitoring_layers_and_refusals():
    _, out, x, _, _ = _run({"img": {"class": "image_summary", "from": "data", "max_outputs": 2},
                            "st": {"class": "framewise_statistics", "from": "data", "sil_label_idx": 0}})
    np.testing.assert_array_equal(out["img"].tensor.numpy()[0], x[0])
    assert out["st"].tensor.numpy() == 0
    for cls, extra in (("synthetic_gradient", {"gradient": "data"}), ("tikhonov_regularization", {"meta_loss_scale": 0.1})):
        with pytest.raises(NetworkError, match="not available here.*meta|MetaLosses"):
            TFNetwork(outputs({"x": dict({"class": cls, "from": "data"}, **extra)}), _extern())


def test_fold_unchunk_as_returnn_test():
    """RETURNN's test_FoldLayer_unchunk: windows (B, N, 3) back to frames, 'valid' padding, mean."""
    from data_utils import make_layer, run_layer
    from returnn.tf.layers import LayerOutput
    n_dim, win = SpatialDim("in"), Dim(3, name="win")
    data = Data("src", dims=[batch_dim, n_dim, win])
    x = np.array([[[1, 2, 3], [2, 3, 4], [3, 4, 5]], [[6, 7, 8], [7, 8, 9], [8, 9, 10]],
                  [[11, 12, 13], [12, 13, 14], [13, 14, 15]]], "float32")
    layer = make_layer("fold", {"mode": "mean", "in_spatial_dim": n_dim, "window_dim": win, "padding": "valid"}, [data])
    out = run_layer(layer, [LayerOutput(tf.constant(x), data, {n_dim: tf.constant([3, 2, 1])})])
    assert layer.output.dims[0] is layer.new and layer.output.dims[1].is_batch_dim()
    assert out.tensor.numpy().T.tolist() == [[1, 2, 3, 4, 5], [6, 7, 8, 9, 0], [11, 12, 13, 0, 0]]
    assert out.sizes[layer.new].numpy().tolist() == [5, 4, 3]


# ---- reverse_sequence (a RETURNN fork's class: the backward 2D-LSTM of its ICASSP 2019 configs)
def test_reverse_sequence():
    net, out, x, _, _ = _run({"r": {"class": "reverse_sequence", "from": "data"},
                              "tm": {"class": "reverse_sequence", "from": "data_tm"},
                              "data_tm": {"class": "swap_axes", "axis1": "B", "axis2": "T", "from": "data"}})
    for b, n in enumerate(LENS):  # (padded frames hold NaN: they must stay out of the real ones)
        np.testing.assert_array_equal(out["r"].tensor.numpy()[b, :n], x[b, :n][::-1])
        np.testing.assert_array_equal(out["tm"].tensor.numpy()[:n, b], x[b, :n][::-1])
    assert net.layers["r"].output.dims == net.layers["r"].sources[0].dims
    with pytest.raises(NetworkError, match="'axis' must be a dynamic axis"):
        TFNetwork(outputs({"r": {"class": "reverse_sequence", "from": "data", "axis": "F"}}), _extern())


def test_fold_with_a_stride_has_every_frame_of_its_sizes():
    """A valid fold with stride 2: the sizes (RETURNN's n * 2 + 2) reach one frame past the windows; that frame
    is there, zero (RETURNN's value stops short of its sizes: returnn_fuzz mutate --train seed 212 #4)."""
    from data_utils import make_layer, run_layer
    from returnn.tf.layers import LayerOutput
    n_dim, win = SpatialDim("in"), Dim(3, name="win")
    data = Data("src", dims=[batch_dim, n_dim, win])
    x = np.arange(1, 13, dtype="float32").reshape(2, 2, 3)
    layer = make_layer("fold", {"mode": "sum", "in_spatial_dim": n_dim, "window_dim": win, "padding": "valid",
                                "stride": 2}, [data])
    out = run_layer(layer, [LayerOutput(tf.constant(x), data, {n_dim: tf.constant([2, 1])})])
    assert out.sizes[layer.new].numpy().tolist() == [6, 4]
    assert out.tensor.numpy().T.tolist() == [[1, 2, 3 + 4, 5, 6, 0], [7, 8, 9, 0, 0, 0]]
