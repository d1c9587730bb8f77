"""Layers at rec loops (issue 27) against numpy: rec_unstack (declare_rec_time, rec axis),
get_rec_accumulated, rec_last_output (length-0 sequences get the initial output), cum_concat in
the loop and read after it (per-frame sizes of its new axis), slice_nd with a start per frame
(sizes per entry), window and cumsum over the frames so far; LayerOutput masks of sizes that run
over other axes.

Padded frames of the inputs hold NaN (they must not reach real ones); one sequence has length 0.
"""
import numpy as np
import pytest
import tensorflow as tf

from helpers import outputs
from returnn.errors import NetworkError
from returnn.tensor import Data, FeatureDim, SpatialDim, batch_dim
from returnn.tf.layers import LayerOutput, RunContext
from returnn.tf.network import TFNetwork

LENS = [5, 3, 0]


def _run(net_dict, seed=0, extern=None):
    x = np.random.RandomState(seed).randn(3, 5, 3).astype("float32")
    for b, n in enumerate(LENS):
        x[b, n:] = np.nan
    net = TFNetwork(outputs(net_dict), extern or {"data": Data("data", shape=(None, 3))})
    return net, net.forward({"data": tf.constant(x), "data:seq_len": tf.constant(LENS)}, RunContext(False)), x


def _running_sum(x):
    return np.cumsum(np.nan_to_num(x), axis=1)


def test_rec_unstack_declares_the_loop():
    net, out, x = _run({
        "loop": {"class": "rec", "from": [], "unit": {
            "input": {"class": "rec_unstack", "from": "base:data:data", "axis": "T", "declare_rec_time": True},
            "output": {"class": "combine", "kind": "add", "from": ["prev:output", "input"], "need_last": True}}},
        "acc": {"class": "get_rec_accumulated", "from": "loop", "sub_layer": "output"},
        "last": {"class": "rec_last_output", "rec_layer": "loop", "sub_layer_name": "output"}})
    assert net.layers["loop"].output.time_dim == net.extern_data["data"].time_dim
    assert "input" not in net.layers["loop"].plan.in_loop
    ref = _running_sum(x)
    for b, n in enumerate(LENS):
        np.testing.assert_allclose(out["loop"].tensor.numpy()[b, :n], ref[b, :n], rtol=1e-5)
        np.testing.assert_allclose(out["acc"].tensor.numpy()[b, :n], ref[b, :n], rtol=1e-5)
        np.testing.assert_allclose(out["last"].tensor.numpy()[b], ref[b, n - 1] if n else 0.0, rtol=1e-5)
    assert out["loop"].seq_len.numpy().tolist() == LENS


def test_rec_axis_dim_without_from_and_unstack_errors():
    time = SpatialDim("time")
    ext = {"data": Data("data", dims=[batch_dim, time, FeatureDim("f", 3)])}
    net, out, x = _run({"loop": {"class": "rec", "from": [], "axis": time, "unit": {
        "input": {"class": "rec_unstack", "from": "base:data:data"},
        "output": {"class": "combine", "kind": "add", "from": ["prev:output", "input"]}}}}, extern=ext)
    np.testing.assert_allclose(out["loop"].tensor.numpy()[0], _running_sum(x)[0], rtol=1e-5)
    with pytest.raises(NetworkError, match="not the rec loop's time axis"):
        TFNetwork(outputs({"other": {"class": "linear", "n_out": 2, "from": "data"},
                           "loop": {"class": "rec", "from": "data", "unit": {
                               "u": {"class": "rec_unstack", "from": "base:other", "axis": "F"},
                               "output": {"class": "copy", "from": "u"}}}}), ext)
    with pytest.raises(NetworkError, match="inside a rec layer"):
        TFNetwork(outputs({"u": {"class": "rec_unstack", "from": "data"}}), ext)


def test_rec_last_output_initial_output_for_empty_sequences():
    net, out, x = _run({
        "loop": {"class": "rec", "from": "data", "unit": {
            "h": {"class": "combine", "kind": "add", "from": ["prev:h", "data:source"], "initial_output": 2.0,
                  "need_last": True},
            "output": {"class": "copy", "from": "h"}}},
        "last": {"class": "rec_last_output", "rec_layer": "loop", "sub_layer_name": "h"}})
    ref = _running_sum(x) + 2.0
    last = out["last"].tensor.numpy()
    np.testing.assert_allclose(last[0], ref[0, 4], rtol=1e-5)
    np.testing.assert_allclose(last[1], ref[1, 2], rtol=1e-5)
    np.testing.assert_array_equal(last[2], [2.0, 2.0, 2.0])
    assert net.layers["last"].output.batch_shape == (None, 3)


def _self_attention_ref(x, w, prev_feedback):
    """Causal dot self-attention over k = x @ w (or tanh([x, prev]) @ w with feedback), per sequence."""
    out = np.zeros((3, 5, w.shape[1]), "float32")
    for b, n in enumerate(LENS):
        prev, keys = np.zeros(w.shape[1], "float32"), []
        for t in range(n):
            k = np.tanh(np.concatenate([x[b, t], prev]) @ w) if prev_feedback else x[b, t] @ w
            keys.append(k)
            kk = np.array(keys)
            e = kk @ k
            a = np.exp(e - e.max())
            prev = out[b, t] = (a / a.sum()) @ kk
    return out


@pytest.mark.parametrize("feedback", [False, True])
def test_cum_concat_self_attention(feedback):
    new = SpatialDim("history")
    k = {"class": "linear", "activation": None, "with_bias": False, "n_out": 3, "from": "data:source"}
    if feedback:
        k = dict(k, activation="tanh", **{"from": ["data:source", "prev:output"]})
    net, out, x = _run({"loop": {"class": "rec", "from": "data", "unit": {
        "k": k,
        "kk": {"class": "cum_concat", "from": "k", "out_spatial_dim": new},
        "e": {"class": "dot", "from": ["k", "kk"], "red1": "F", "red2": "F", "var1": None, "var2": new},
        "w": {"class": "softmax_over_spatial", "from": "e", "axis": new},
        "output": {"class": "dot", "from": ["w", "kk"], "red1": new, "red2": new, "var1": None, "var2": "F"}}}})
    plan = net.layers["loop"].plan
    assert "kk" in plan.in_loop and (("e" in plan.after_loop) != feedback)
    w = net.layers["loop"].layers["k"].own_params["W"].numpy()
    ref = _self_attention_ref(x, w, feedback)
    for b, n in enumerate(LENS):
        np.testing.assert_allclose(out["loop"].tensor.numpy()[b, :n], ref[b, :n], rtol=1e-4, atol=1e-5)
    if not feedback:  # the history after the loop: sizes t + 1 per frame of the loop
        kk = out["loop"].sub_outputs["kk"]
        assert kk.sizes[new].numpy().tolist() == [1, 2, 3, 4, 5]
    with pytest.raises(NetworkError, match="inside a rec"):
        net2 = TFNetwork(outputs({"c": {"class": "cum_concat", "from": "data"}}),
                         {"data": Data("data", shape=(3,), time_dim_axis=None)})
        net2.forward({"data": tf.zeros([2, 1, 3]), "data:seq_len": tf.constant([1, 1])}, RunContext(False))


def test_slice_nd_with_a_start_per_frame():
    """start (B, T) moved out of a loop: sizes of the slice per sequence and frame."""
    net, out, x = _run({
        "t": {"class": "range_in_axis", "from": "data", "axis": "T"},
        "zero": {"class": "eval", "from": "data", "eval": "tf.zeros_like(source(0, auto_convert=False)[..., 0], tf.int32)",
                 "out_type": {"dtype": "int32", "shape": (None,)}},
        "start": {"class": "combine", "kind": "add", "from": ["zero", "t"]},
        "sl": {"class": "slice_nd", "from": "data", "start": "start", "size": None},
        "mx": {"class": "reduce", "mode": "sum", "axes": "stag:sliced", "from": "sl"}})
    sl = out["sl"].tensor.numpy()
    assert sl.shape[:3] == (3, 5, 5)
    mx = out["mx"].tensor.numpy()
    xs = np.nan_to_num(x)
    for b, n in enumerate(LENS):
        for t in range(n):
            np.testing.assert_allclose(mx[b, t], xs[b, t:n].sum(0), rtol=1e-5, atol=1e-6)


def test_slice_nd_per_frame_renamed_by_reinterpret_keeps_its_sizes_per_frame():
    """i6's segmental models: slice_nd with a start and a size per frame, its axis renamed to the config's
    Dim by reinterpret_data set_dim_tags; a linear and a reduce after it see the sizes per sequence and
    frame (the renamed axis keeps them: a linear made an extra axis)."""
    att_t = SpatialDim("att_t")
    net, out, x = _run({
        "t": {"class": "range_in_axis", "from": "data", "axis": "T"},
        "zero": {"class": "eval", "from": "data", "eval": "tf.zeros_like(source(0, auto_convert=False)[..., 0], tf.int32)",
                 "out_type": {"dtype": "int32", "shape": (None,)}},
        "start": {"class": "combine", "kind": "add", "from": ["zero", "t"]},
        "two": {"class": "eval", "from": "zero", "eval": "source(0) + 2"},
        "seg0": {"class": "slice_nd", "from": "data", "start": "start", "size": "two"},
        "seg": {"class": "reinterpret_data", "from": "seg0", "set_dim_tags": {"stag:sliced-time:seg0": att_t}},
        "lin": {"class": "linear", "from": "seg", "activation": None, "n_out": 4},
        "sum": {"class": "reduce", "mode": "sum", "axes": "stag:att_t", "from": "lin"}})
    lin, total = out["lin"].tensor.numpy(), out["sum"].tensor.numpy()
    assert lin.shape == (3, 5, 2, 4) and net.layers["lin"].output.dims[2] == att_t
    layer = net.layers["lin"]
    w, bias = layer.own_params["W"].numpy(), layer.own_params["b"].numpy()
    xs = np.nan_to_num(x)
    for b, n in enumerate(LENS):
        for t in range(n):
            frames = xs[b, t:min(t + 2, n)]  # the slice's frames inside the sequence
            np.testing.assert_allclose(total[b, t], (frames @ w + bias).sum(0), rtol=1e-5, atol=1e-5)


def test_broadcast_mask_of_sizes_over_another_axis():
    time, hist = SpatialDim("t"), SpatialDim("h")
    hist.sizes_over = (time,)
    data = Data("x", dims=[batch_dim, time, hist])
    value = LayerOutput(tf.ones([2, 3, 3]), data, {time: tf.constant([3, 2]), hist: tf.constant([1, 2, 3])})
    mask = value.broadcast_mask(2).numpy()
    assert mask.shape == (1, 3, 3) and mask[0].tolist() == [[True, False, False], [True, True, False], [True] * 3]
    without_time = Data("y", dims=[batch_dim, hist])  # the time axis reduced: real where any frame is real
    value = LayerOutput(tf.ones([2, 3]), without_time, {hist: tf.constant([1, 2, 3])})
    assert value.broadcast_mask(1).numpy().tolist() == [[True, True, True]]


def test_cum_concat_in_beam_search_with_beam_one_is_greedy():
    new = SpatialDim("hist")
    extern = {"data": Data("data", shape=(None, 2)), "classes": Data("classes", dim=4, sparse=True)}
    net = TFNetwork({
        "enc": {"class": "reduce", "mode": "mean", "axes": "T", "from": "data"},
        "output": {"class": "rec", "from": [], "target": "classes", "max_seq_len": 6, "unit": {
            "emb": {"class": "linear", "activation": None, "n_out": 3, "from": "prev:output"},
            "kk": {"class": "cum_concat", "from": "emb", "out_spatial_dim": new},
            "e": {"class": "dot", "from": ["emb", "kk"], "red1": "F", "red2": "F", "var1": None, "var2": new},
            "w": {"class": "softmax_over_spatial", "from": "e", "axis": new},
            "att": {"class": "dot", "from": ["w", "kk"], "red1": new, "red2": new, "var1": None, "var2": "F"},
            "prob": {"class": "softmax", "from": ["att", "base:enc"], "n_out": 4},
            "output": {"class": "choice", "initial_output": 0, "from": "prob", "target": "classes", "beam_size": 1},
            "end": {"class": "compare", "from": "output", "value": 3}}}}, extern, search=True)
    x = np.random.RandomState(1).randn(2, 3, 2).astype("float32")
    out = net.forward({"data": tf.constant(x), "data:seq_len": tf.constant([3, 2])}, RunContext(False),
                      only=["output"])["output"]
    layers = net.layers["output"].layers
    we, be = (layers["emb"].own_params[k].numpy() for k in ("W", "b"))
    wp, bp = (layers["prob"].own_params[k].numpy() for k in ("W", "b"))
    for b, n in enumerate([3, 2]):
        enc, prev, keys, labels = x[b, :n].mean(0), 0, [], []
        for _ in range(6):
            k = we[prev] + be
            keys.append(k)
            kk = np.array(keys)
            e = kk @ k
            a = np.exp(e - e.max())
            att = (a / a.sum()) @ kk
            prev = int(np.argmax(np.concatenate([att, enc]) @ wp + bp))
            if prev == 3:
                break
            labels.append(prev)
        assert out.tensor.numpy()[b, :out.seq_len.numpy()[b]].tolist() == labels


@pytest.mark.parametrize("in_loop", [True, False], ids=["in_loop", "moved_out"])
def test_window_over_the_frames_so_far(in_loop):
    """RETURNN's recurrent window: in a loop (one frame per step) the output at step t holds frames
    t-2 .. t (zeros before the first); moved out of the loop, the usual window over the sequence
    gives the same real frames."""
    unit = {"r": {"class": "reduce", "mode": "sum", "from": "prev:w", "axes": "except_batch"},
            "x": {"class": "eval", "from": ["data:source", "r"] if in_loop else ["data:source"],
                  "eval": "source(0) + 0 * source(1)" if in_loop else "source(0)"},
            "w": {"class": "window", "from": "x", "window_size": 3, "window_left": 2},
            "output": {"class": "copy", "from": "w"}}
    net, out, x = _run({"output": {"class": "rec", "from": "data", "unit": unit}})
    assert ("w" in net.layers["output"].plan.in_loop) == in_loop
    got = out["output"].tensor.numpy()
    assert got.shape == (3, 5, 3, 3)
    padded = np.concatenate([np.zeros((3, 2, 3), np.float32), x], axis=1)
    for b, n in enumerate(LENS):
        for t in range(n):
            np.testing.assert_allclose(got[b, t], padded[b, t:t + 3], rtol=1e-6)


def _window_unit(**opts):
    return {"r": {"class": "reduce", "mode": "sum", "from": "prev:w", "axes": "except_batch"},
            "x": {"class": "eval", "from": ["data:source", "r"], "eval": "source(0) + 0 * source(1)"},
            "w": dict({"class": "window", "from": "x", "window_size": 3}, **opts),
            "output": {"class": "copy", "from": "w"}}


def test_window_in_a_loop_needs_a_window_into_the_past():
    """With a behavior_version, as today's RETURNN asserts (since Nov 2021)."""
    from returnn.config import Config, get_global_config, set_global_config
    extern = {"data": Data("data", shape=(None, 3))}
    old = get_global_config(raise_exception=False)
    set_global_config(Config({"behavior_version": 12}))
    try:
        for opts, msg in (({}, "set window_right=0"), ({"window_right": 1}, "only reach into the past"),
                          ({"window_left": 3}, "window_left \\+ window_right \\+ 1 must equal")):
            with pytest.raises(NetworkError, match=msg):
                TFNetwork(outputs({"output": {"class": "rec", "from": "data", "unit": _window_unit(**opts)}}), extern)
    finally:
        set_global_config(old)


@pytest.mark.parametrize("opts", [{}, {"window_left": 3}, {"window_right": 1}, {"window_left": 0, "window_right": 2}],
                         ids=["unset", "left_3", "right_1", "centered_other_way"])
def test_window_in_a_loop_of_an_old_config_takes_the_frames_so_far(opts):
    """Without a behavior_version, as RETURNN before Nov 2021 (a published 2022 decoder sets window_left 5 with
    window_size 5): in the loop the last window_size frames, whatever window_left/window_right say."""
    net, out, x = _run({"output": {"class": "rec", "from": "data", "unit": _window_unit(**opts)}})
    assert "w" in net.layers["output"].plan.in_loop
    got = out["output"].tensor.numpy()
    padded = np.concatenate([np.zeros((3, 2, 3), np.float32), x], axis=1)
    for b, n in enumerate(LENS):
        for t in range(n):
            np.testing.assert_allclose(got[b, t], padded[b, t:t + 3], rtol=1e-6)


@pytest.mark.parametrize("in_loop", [True, False], ids=["in_loop", "moved_out"])
def test_cumsum_over_the_frames_so_far(in_loop):
    """RETURNN's recurrent cumsum: in a loop the sum so far is loop state (state + frame, plus
    additional_left_summand_per_element each step); moved out, the usual cumsum over time."""
    unit = {"r": {"class": "reduce", "mode": "sum", "from": "prev:c", "axes": "except_batch"},
            "x": {"class": "eval", "from": ["data:source", "r"] if in_loop else ["data:source"],
                  "eval": "source(0) + 0 * source(1)" if in_loop else "source(0)"},
            "c": {"class": "cumsum", "from": "x", "additional_left_summand_per_element": 0.5},
            "output": {"class": "copy", "from": "c"}}
    net, out, x = _run({"output": {"class": "rec", "from": "data", "unit": unit}})
    assert ("c" in net.layers["output"].plan.in_loop) == in_loop
    got = out["output"].tensor.numpy()
    want = _running_sum(x + 0.5)
    for b, n in enumerate(LENS):
        np.testing.assert_allclose(got[b, :n], want[b, :n], rtol=1e-5)


def test_cumsum_in_a_loop_runs_forward_only():
    unit = {"r": {"class": "reduce", "mode": "sum", "from": "prev:c", "axes": "except_batch"},
            "x": {"class": "eval", "from": ["data:source", "r"], "eval": "source(0) + 0 * source(1)"},
            "c": {"class": "cumsum", "from": "x", "reverse": True},
            "output": {"class": "copy", "from": "c"}}
    with pytest.raises(NetworkError, match="forward only"):
        TFNetwork(outputs({"output": {"class": "rec", "from": "data", "unit": unit}}), {"data": Data("data", shape=(None, 3))})


def test_loop_ended_by_its_end_layer():
    """No source, no target: the 'end' sub-layer ends each sequence (RETURNN's dynamic loop): the
    lengths count the steps before the end (include_eos: the end step too), at most max_seq_len."""
    def run(include_eos, max_seq_len):
        net, out, _ = _run({"loop": {"class": "rec", "from": [], "include_eos": include_eos,
                                     "max_seq_len": max_seq_len, "unit": {
            "s": {"class": "eval", "from": [":i", "base:len"], "out_type": {"dtype": "int32"},
                  "eval": "source(0) + 0 * source(1)"},
            "output": {"class": "cast", "from": "s", "dtype": "float32"},
            "end": {"class": "compare", "kind": "greater_equal", "from": [":i", "base:len"]}}},
            "len": {"class": "length", "from": "data"}})
        return out["loop"]
    for include_eos, max_seq_len in [(False, 20), (True, 20), (False, 2)]:
        out = run(include_eos, max_seq_len)
        lens = np.minimum(np.array(LENS) + include_eos, max_seq_len)
        np.testing.assert_array_equal(out.seq_len.numpy(), lens)
        assert out.tensor.shape[1] == lens.max()
        np.testing.assert_array_equal(out.tensor.numpy()[0, :lens[0]], np.arange(lens[0]))
    with pytest.raises(NetworkError, match="max_seq_len"):
        run(False, None)


def test_rec_last_output_through_a_subnetwork_and_copies():
    """RETURNN's rec_last_output follows a subnetwork (its output layer) and copies of one source to the
    rec layer (returnn_common's nn.Loop in a module: rec_layer is the module's subnetwork)."""
    loop = {"class": "rec", "from": "data", "unit": {
        "h": {"class": "combine", "kind": "add", "from": ["prev:h", "data:source"], "need_last": True},
        "output": {"class": "copy", "from": "h"}}}
    _, out, x = _run({
        "sub": {"class": "subnetwork", "from": "data", "subnetwork": {
            "loop": loop, "c": {"class": "copy", "from": "loop"}, "output": {"class": "copy", "from": "c"}}},
        "last": {"class": "rec_last_output", "rec_layer": "sub", "sub_layer_name": "h"}})
    ref = _running_sum(x)
    np.testing.assert_allclose(out["last"].tensor.numpy()[:2], [ref[0, 4], ref[1, 2]], rtol=1e-5)


@pytest.mark.parametrize("k", [0, 2])
def test_loop_over_a_top_k_axis_of_one_size_for_the_batch(k):
    """A top_k axis of a scalar k has one size for the whole batch: no implicit batch in out_shape
    (RETURNN's dyn_size_ext is a scalar); a loop over it of no frames gives its initial output last."""
    time, kd = SpatialDim("time"), SpatialDim("k")
    feat = FeatureDim("feat", 3)
    _, out, x = _run({
        "k": {"class": "constant", "value": k},
        "top_k": {"class": "top_k", "from": "data", "axis": time, "k": "k", "k_dim": kd},
        "range": {"class": "range_in_axis", "from": "top_k", "axis": kd, "out_shape": {kd}},
        "loop": {"class": "rec", "from": [], "axis": kd, "unit": {
            "u": {"class": "rec_unstack", "from": "base:range", "axis": kd},
            "w": {"class": "eval", "from": "prev:w", "eval": "source(0) * 0.0 + 1.0", "initial_output": "base:data",
                  "need_last": True},
            "output": {"class": "copy", "from": "u"}}},
        "last": {"class": "rec_last_output", "rec_layer": "loop", "sub_layer_name": "w"}},
        extern={"data": Data("data", dims=[batch_dim, time, feat])})
    last = out["last"].tensor.numpy()
    assert last.shape == (3, 5, 3)
    np.testing.assert_array_equal(last[0], x[0] if k == 0 else np.ones((5, 3)))
