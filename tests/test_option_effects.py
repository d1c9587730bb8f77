"""Layer options that were accepted and ignored, now with their RETURNN effect (numpy references)
or refused in one line (see tests/test_option_audit.py for the rule)."""
from __future__ import annotations

import contextlib

import numpy as np
import pytest
import tensorflow as tf

from data_utils import btf, lo, make_layer as make, run_layer as run, spec
from returnn.config import Config, get_global_config, set_global_config
from returnn.errors import NetworkError
from returnn.tensor import Data, FeatureDim, SpatialDim, batch_dim
from returnn.tf.activations import get_activation
from returnn.tf.layers import LayerOutput

LENS = np.array([5, 3, 1], np.int32)


@contextlib.contextmanager
def behavior_version(version: int):
    old = get_global_config()
    set_global_config(Config({"behavior_version": version}))
    try:
        yield
    finally:
        set_global_config(old)


# ---------------------------------------------------------------- activations (RETURNN's forms)

@pytest.mark.parametrize("spec_,ref", [
    ("tanh+sigmoid", lambda x: np.tanh(x) + 1 / (1 + np.exp(-x))),
    ("1-sigmoid", lambda x: 1 - 1 / (1 + np.exp(-x))),
    ("2*sigmoid", lambda x: 2 / (1 + np.exp(-x))),
    ("relu/2", lambda x: np.maximum(x, 0) / 2),
    ("3+2*tanh", lambda x: 3 + 2 * np.tanh(x)),
    ("neg", lambda x: -x),
    ("erf", lambda x: np.vectorize(__import__("math").erf)(x)),
    ("safe_log", lambda x: np.log(np.maximum(x, 1e-20))),
    ("tf.nn.relu(x) * 2", lambda x: np.maximum(x, 0) * 2),
    ("none", lambda x: x),
])
def test_activation_forms(spec_, ref):
    x = np.linspace(-2, 2, 9).astype(np.float32)
    np.testing.assert_allclose(get_activation(spec_, "a")(tf.constant(x)).numpy(), ref(x), rtol=1e-5, atol=1e-6)


def test_activation_layer_opts_are_keywords_of_the_function():
    """RETURNN's activation layer 'opts': act_func(x, **opts) (chunked-AED configs: safe_log with eps 1e-10)."""
    data, val, x = btf(3, LENS)
    x = np.abs(x) * 1e-12  # below both eps: the clamp shows which eps applies
    val = val.with_tensor(tf.constant(x))
    layer = make("activation", {"activation": "safe_log", "opts": {"eps": 1e-10}}, [data])
    out = run(layer, [val]).tensor.numpy()
    np.testing.assert_allclose(out[0, :5], np.log(np.maximum(x[0, :5], 1e-10)), rtol=1e-5)
    np.testing.assert_allclose(out[0, :5], np.log(1e-10), rtol=1e-6)  # every frame clamped
    default = run(make("activation", {"activation": "safe_log"}, [data]), [val]).tensor.numpy()
    np.testing.assert_allclose(default[0, :5], np.log(np.maximum(x[0, :5], 1e-20)), rtol=1e-5)
    leaky = run(make("activation", {"activation": "leaky_relu", "opts": {"alpha": 0.5}}, [data]),
                [val.with_tensor(tf.constant(-np.ones_like(x)))]).tensor.numpy()
    np.testing.assert_allclose(leaky[0, :5], -0.5)
    with pytest.raises(NetworkError, match="'lay'.*'opts'.*'nope'"):
        make("activation", {"activation": "safe_log", "opts": {"nope": 1}}, [data])
    with pytest.raises(NetworkError, match="'lay'.*plain activation"):
        make("activation", {"activation": "softmax", "opts": {"axis": 0}}, [data])
    with pytest.raises(NetworkError, match="'lay'.*'opts'"):
        make("activation", {"activation": "gelu", "opts": {"approximate": True}}, [data])


def test_unknown_activation_names_the_layer():
    with pytest.raises(NetworkError, match="layer 'a'.*'tanhh'"):
        get_activation("tanhh+sigmoid", "a")


# ---------------------------------------------------------------- conv / pool / transposed_conv

def test_conv_bias_default_follows_behavior_version():
    """RETURNN: conv has a bias by default only from behavior_version 10."""
    with behavior_version(0):
        assert make("conv", {"filter_size": [3], "n_out": 2}, [spec(4)]).bias is None
    with behavior_version(10):
        assert make("conv", {"filter_size": [3], "n_out": 2}, [spec(4)]).bias is not None
    with behavior_version(0):
        assert make("conv", {"filter_size": [3], "n_out": 2, "with_bias": True}, [spec(4)]).bias is not None


def test_transposed_conv_out_spatial_dims():
    data, val, _ = btf(3, LENS)
    out_dim = SpatialDim("up")
    layer = make("transposed_conv", {"filter_size": [2], "n_out": 2, "out_spatial_dims": [out_dim]}, [data])
    assert layer.output.dims[1] is out_dim
    out = run(layer, [val])
    np.testing.assert_array_equal(out.sizes[out_dim].numpy(), LENS * 2)
    with pytest.raises(NetworkError, match="'lay'.*out_spatial_dims"):
        make("transposed_conv", {"filter_size": [2], "n_out": 2, "out_spatial_dims": [SpatialDim("s", 3)]}, [data])


# ---------------------------------------------------------------- rec with cell units, rnn_cell

def np_gru(x, n, layer):
    """TensorFlow's GRU cell over one sequence x (T, F) with the layer's weights."""
    wg, wc = layer.W_gates.numpy(), layer.W_candidate.numpy()
    ug, uc = layer.W_re_gates.numpy(), layer.W_re_candidate.numpy()
    bg, bc = layer.b_gates.numpy(), layer.b_candidate.numpy()
    h, out = np.zeros(n), []
    for frame in x:
        g = 1 / (1 + np.exp(-(frame @ wg + h @ ug + bg)))
        r, u = g[:n], g[n:]
        c = np.tanh(frame @ wc + (r * h) @ uc + bc)
        h = u * h + (1 - u) * c
        out.append(h)
    return np.array(out)


@pytest.mark.parametrize("direction", [1, -1])
def test_rec_gru_unit_over_sequences_both_directions(direction):
    from returnn.tf.layers.rec_step import RecStepLayer
    data, val, x = btf(3, LENS)
    layer = make("rec", {"unit": "gru", "n_out": 4, "direction": direction}, [data])
    assert isinstance(layer, RecStepLayer) and [p.name for p in layer.returnn_params()] == [
        "rec/gru_cell/gates/kernel", "rec/gru_cell/gates/bias", "rec/gru_cell/candidate/kernel",
        "rec/gru_cell/candidate/bias"]
    y = run(layer, [val]).tensor.numpy()
    for b, n in enumerate(LENS):
        seq = x[b, :n] if direction == 1 else x[b, :n][::-1]
        ref = np_gru(seq, 4, layer)
        np.testing.assert_allclose(y[b, :n], ref if direction == 1 else ref[::-1], atol=1e-5)
        np.testing.assert_array_equal(y[b, n:], 0.0)


def test_rec_max_seq_len_and_unroll():
    """RETURNN: max_seq_len only with unroll on its TensorFlow cells (the input must fit); LSTM kernels refuse it."""
    data, val, _ = btf(3, LENS)
    with pytest.raises(NetworkError, match="'lay'.*'max_seq_len'"):
        make("rec", {"unit": "nativelstm2", "n_out": 2, "max_seq_len": 9}, [data])
    with pytest.raises(NetworkError, match="'lay'.*max_seq_len.*unroll"):
        make("rec", {"unit": "gru", "n_out": 2, "max_seq_len": 9}, [data])
    run(make("rec", {"unit": "gru", "n_out": 2, "max_seq_len": 5, "unroll": True}, [data]), [val])
    with pytest.raises(tf.errors.InvalidArgumentError, match="max_seq_len >= seq_len"):
        run(make("rec", {"unit": "gru", "n_out": 2, "max_seq_len": 4, "unroll": True}, [data]), [val])


def test_rnn_cell_weights_init_and_unit_opts():
    data, _, _ = btf(3, LENS)
    layer = make("rnn_cell", {"unit": "GRU", "n_out": 2, "weights_init": "zeros"}, [data])
    assert not layer.W_gates.numpy().any() and not layer.W_re_candidate.numpy().any()
    layer = make("rnn_cell", {"unit": "LSTMBlock", "n_out": 2, "weights_init": "zeros",
                              "forward_weights_init": "ones"}, [data])
    assert (layer.W.numpy() == 1).all() and not layer.W_re.numpy().any()
    with pytest.raises(NetworkError, match="'lay'.*forget_bias"):
        make("rnn_cell", {"unit": "GRU", "n_out": 2, "unit_opts": {"forget_bias": 1.0}}, [data])
    with pytest.raises(NetworkError, match="'lay'.*'unroll'"):
        make("rnn_cell", {"unit": "GRU", "n_out": 2, "unroll": True}, [data])


# ---------------------------------------------------------------- attention, choice, search

def test_softmax_over_spatial_use_time_mask():
    """None/True: padded positions get weight 0; False (RETURNN): their energies take part as they are."""
    data, val, x = btf(1, LENS, garbage=0.5)
    energies = np.where(np.arange(5)[None, :, None] < LENS[:, None, None], x, 0.5)
    # (the output's normalised axis is last, as RETURNN's: back to (B, T, 1) here)
    masked = np.moveaxis(run(make("softmax_over_spatial", {}, [data]), [val]).tensor.numpy(), -1, 1)
    full = np.moveaxis(run(make("softmax_over_spatial", {"use_time_mask": False}, [data]), [val]).tensor.numpy(), -1, 1)
    for b, n in enumerate(LENS):
        e = np.exp(energies[b, :, 0])
        np.testing.assert_allclose(masked[b, :n, 0], e[:n] / e[:n].sum(), rtol=1e-5)
        np.testing.assert_allclose(full[b, :n, 0], e[:n] / e.sum(), rtol=1e-5)
    with pytest.raises(NetworkError, match="'lay'.*use_time_mask"):
        make("softmax_over_spatial", {"use_time_mask": False, "window_start": 0, "window_size": 2}, [data])


def test_choice_options_refused_where_not_implemented():
    labels = spec(4, sparse=True)
    scores = spec(4)
    for cheating in (True, "exclusive"):  # search: tests/test_search_train.py
        make("choice", {"target": "classes", "cheating": cheating}, [scores])
        make("choice", {"target": "classes", "cheating": cheating}, [labels])  # training: the target, as RETURNN
    with pytest.raises(NetworkError, match="'lay'.*'cheating'"):
        make("choice", {"target": "classes", "cheating": "always"}, [labels])
    # search True / False and decide's length_normalization: tests/test_search_train.py


def test_base_beam_score_scale():
    """RETURNN's base_beam_score_scale multiplies the previous beam scores: 10 makes the first step
    dominate, so the search keeps following label 1 (0.6 at step 0) instead of ending via label 2."""
    from test_rec_search import EMB, EOS, _search
    from returnn.tf.network import TFNetwork

    def net(scale):
        extern = {"data": Data("data", shape=(None, 2)), "classes": Data("classes", dim=4, sparse=True)}
        return TFNetwork({
            "enc": {"class": "reduce", "mode": "mean", "axes": "T", "from": "data"},
            "output": {"class": "rec", "from": [], "target": "classes", "max_seq_len": 8, "unit": {
                "emb": EMB, "prob": {"class": "softmax", "from": ["emb", "base:enc"], "n_out": 4, "with_bias": False},
                "output": {"class": "choice", "initial_output": 0, "from": "prob", "target": "classes", "beam_size": 2,
                           "length_normalization": False, "base_beam_score_scale": scale},
                "end": {"class": "compare", "from": "output", "value": EOS}}},
        }, extern, search=True)

    assert _search(net(1.0), [0.0]) == [[2]]
    assert _search(net(10.0), [0.0]) == [[1] * 8]


# ---------------------------------------------------------------- reduce, squeeze, pad, window

def test_reduce_use_time_mask_false_counts_padding_as_zeros():
    data, val, x = btf(2, LENS)
    x = x - 2.0  # negative: a padded 0 wins a max
    val = val.with_tensor(tf.constant(np.where(np.arange(5)[None, :, None] < LENS[:, None, None], x, 1e4)))
    zeros = np.where(np.arange(5)[None, :, None] < LENS[:, None, None], x, 0.0)
    for mode, ref_masked, ref_full in (
            ("mean", lambda b, n: x[b, :n].mean(0), lambda b, n: zeros[b].mean(0)),
            ("max", lambda b, n: x[b, :n].max(0), lambda b, n: zeros[b].max(0))):
        masked = run(make("reduce", {"mode": mode, "axes": "T"}, [data]), [val]).tensor.numpy()
        full = run(make("reduce", {"mode": mode, "axes": "T", "use_time_mask": False}, [data]), [val]).tensor.numpy()
        for b, n in enumerate(LENS):
            np.testing.assert_allclose(masked[b], ref_masked(b, n), rtol=1e-5)
            np.testing.assert_allclose(full[b], ref_full(b, n), rtol=1e-5)


def test_enforce_batch_dim_axis_reduce_and_squeeze():
    """RETURNN: int axes count with the batch axis moved to enforce_batch_dim_axis (0 by default for
    reduce with int axes); the output keeps that layout."""
    time = SpatialDim("t")
    feat = Data("x", dims=[time, batch_dim, SpatialDim("one", 1), FeatureDim("f", 3)])
    x = np.random.RandomState(0).randn(4, 2, 1, 3).astype(np.float32)  # (T, B, 1, F)
    val = LayerOutput(tf.constant(x), feat, {time: tf.constant([4, 4])})
    red = make("reduce", {"mode": "sum", "axes": 3}, [feat])  # (B, T, 1, F) layout: axis 3 is F
    np.testing.assert_allclose(run(red, [val]).tensor.numpy(), x.transpose(1, 0, 2, 3).sum(3), rtol=1e-5)
    red = make("reduce", {"mode": "sum", "axes": 3, "enforce_batch_dim_axis": 1}, [feat])  # own layout
    np.testing.assert_allclose(run(red, [val]).tensor.numpy(), x.sum(3), rtol=1e-5)
    sq = make("squeeze", {"axis": 2, "enforce_batch_dim_axis": 0}, [feat])
    assert sq.output.batch_dim_axis == 0
    np.testing.assert_allclose(run(sq, [val]).tensor.numpy(), x[:, :, 0].transpose(1, 0, 2))


def test_pad_out_dims_and_window_out_spatial_dim():
    data, val, _ = btf(2, LENS)
    new = SpatialDim("padded")
    pad = make("pad", {"axes": "T", "padding": (1, 2), "out_dims": [new]}, [data])
    assert pad.output.dims[1] is new
    np.testing.assert_array_equal(run(pad, [val]).sizes[new].numpy(), LENS + 3)
    with pytest.raises(NetworkError, match="'lay'.*'out_dims'"):
        make("pad", {"axes": "F", "padding": 1, "out_dims": SpatialDim("s", 3)}, [data])
    out = SpatialDim("strided")
    win = make("window", {"window_size": 3, "stride": 2, "out_spatial_dim": out}, [data])
    assert win.output.dims[1] is out
    np.testing.assert_array_equal(run(win, [val]).sizes[out].numpy(), (LENS + 1) // 2)


def test_hdf_dump_name_as_is_without_dump_per_run():
    """RETURNN: without dump_per_run the file name is taken as it is and all dataset runs go into it
    (here one: a second dataset is refused); with it, the name is filled in per run."""
    data, _, _ = btf(2, LENS)
    layer = make("hdf_dump", {"filename": "out-{dataset_name}.hdf"}, [data])
    assert layer.filename("dev", 1) == "out-{dataset_name}.hdf"
    with pytest.raises(NetworkError, match="'lay'.*dump_per_run"):
        layer.filename("eval", 1)
    assert make("hdf_dump", {"filename": "out-{dataset_name}.hdf", "dump_per_run": True}, [data]).filename(
        "dev", 1) == "out-dev.hdf"
    with pytest.raises(NetworkError, match="'lay'.*dump_per_run"):
        make("hdf_dump", {"filename": lambda **kw: "x.hdf"}, [data])


# ---------------------------------------------------------------- compare / eval: broadcasting, out_shape

def test_allow_broadcast_all_sources_and_out_shape():
    """RETURNN: sources that all need broadcasting ([B,T1,F] + [B,T2,F]) are refused from
    behavior_version 4, unless allow_broadcast_all_sources (False: always refused) or out_shape."""
    a, b = spec(3, name="a", time=SpatialDim("time:a")), spec(3, name="b", time=SpatialDim("time:b"))
    for cls, extra in (("compare", {}), ("eval", {"eval": "source(0) + source(1)"})):
        with behavior_version(4):
            with pytest.raises(NetworkError, match="'lay'.*broadcast"):
                make(cls, dict(extra), [a, b])
            make(cls, dict(extra, allow_broadcast_all_sources=True), [a, b])
        with behavior_version(0):
            make(cls, dict(extra), [a, b])
            with pytest.raises(NetworkError, match="'lay'.*broadcast"):
                make(cls, dict(extra, allow_broadcast_all_sources=False), [a, b])
    with behavior_version(4):
        dims = make("eval", {"eval": "source(0) + source(1)", "allow_broadcast_all_sources": True}, [a, b]).output.dims
        make("eval", {"eval": "source(0) + source(1)", "out_shape": set(dims)}, [a, b])
        with pytest.raises(NetworkError, match="'lay'.*out_shape"):
            make("eval", {"eval": "source(0) + source(1)", "out_shape": set(dims[:-1])}, [a, b])


def test_combine_with_two_new_static_axes_of_one_size():
    """RETURNN's get_common_data adds a source's missing axes one by one and the second of one size meets the first:
    a variable of shape [1, 1] gives one axis (goldens fuzz_combine_variable_shape1x1_*); of shape [3, 3] RETURNN
    then fails, refused here in one line."""
    from returnn.tf.network import TFNetwork
    extern = {"data": Data("data", shape=(None, 5))}
    with behavior_version(12):
        for shape, ndim in (([1, 1], 4), ([1, 3], 5)):
            net = TFNetwork({"v": {"class": "variable", "shape": shape}, "output": {
                "class": "combine", "kind": "add", "from": ["data", "v"], "allow_broadcast_all_sources": True}}, extern)
            assert net.layers["output"].output.batch_ndim == ndim
        with pytest.raises(NetworkError, match="'output'.*'v:var0'.*'v:var1'.*size 3"):
            TFNetwork({"v": {"class": "variable", "shape": [3, 3]}, "output": {
                "class": "combine", "kind": "add", "from": ["data", "v"], "allow_broadcast_all_sources": True}}, extern)


def test_valid_conv_and_slice_from_two_are_two_axes():
    """RETURNN's dim math keeps each side's cut: a valid conv of size 3 ('(-1+time)+-1') and a crop of one frame on
    each side are one axis (golden combine_valid_conv_and_crop), a slice from 2 ('-2+time') another one, which
    RETURNN then fails to match: refused in one line (here one axis before)."""
    from returnn.tf.network import TFNetwork
    extern = {"data": Data("data", shape=(None, 6))}
    conv = {"class": "conv", "from": "data", "filter_size": [3], "padding": "valid", "n_out": 6, "activation": None}
    net = {"conv": conv, "crop": {"class": "slice", "from": "data", "axis": "T", "slice_start": 1, "slice_end": -1},
           "output": {"class": "combine", "kind": "add", "from": ["conv", "crop"]}}
    assert TFNetwork(net, extern).layers["output"].output.batch_ndim == 3
    net["crop"] = {"class": "slice", "from": "data", "axis": "T", "slice_start": 2}
    with pytest.raises(NetworkError, match="'output'.*both derive from"):
        TFNetwork(net, extern)


def test_rec_subnetwork_axis_back_prop_unit_opts():
    from returnn.tf.network import TFNetwork
    extern = {"data": Data("data", shape=(None, 3))}

    def net(search=False, **opts):
        return TFNetwork({"output": dict({"class": "rec", "from": "data", "unit": {
            "output": {"class": "linear", "activation": "tanh", "from": ["prev:output", "data:source"], "n_out": 2}}},
            **opts)}, extern, search=search)

    net(axis="T", back_prop=True, unit_opts={})
    with pytest.raises(NetworkError, match="'output'.*'axis'"):
        net(axis="F")
    # back_prop False (a transducer config sets it by task): the same values, no gradient through the loop
    from returnn.tf.layers import RunContext
    x = {"data": tf.constant(np.random.RandomState(0).randn(2, 4, 3).astype("float32")),
         "data:seq_len": tf.constant([4, 2])}
    for back_prop in (True, False):
        trained = net(back_prop=back_prop)
        with tf.GradientTape() as tape:
            total = tf.reduce_sum(trained.forward(x, RunContext(True))["output"].tensor)
        assert [g is None for g in tape.gradient(total, trained.trainable_variables)] == [not back_prop] * 2
    net(back_prop=False).forward(x, RunContext(False))
    frozen, plain = net(search=True, back_prop=False), net(search=True)
    for a, b in zip(frozen.layers["output"].trainable_variables, plain.layers["output"].trainable_variables):
        b.assign(a)
    np.testing.assert_allclose(frozen.forward(x, RunContext(False))["output"].tensor.numpy(),
                               plain.forward(x, RunContext(False))["output"].tensor.numpy())
    with pytest.raises(NetworkError, match="'output'.*'unit_opts'"):
        net(unit_opts={"x": 1})


def np_rhn(x, layer, mask=None):
    """RETURNN's RHN cell over one sequence x (T, F) with the layer's weights (mask: (H,) dropout scale)."""
    w, b = layer.W.numpy(), layer.bias.numpy()
    n = layer.n_hidden
    s, out = np.zeros(n), []
    for frame in x:
        for i, wi in enumerate(layer.W_depth):
            z = (s if mask is None else s * mask) @ wi.numpy() + (frame @ w + b if i == 0 else 0)
            s = s + 1 / (1 + np.exp(-z[n:])) * (np.tanh(z[:n]) - s)
        out.append(s)
    return np.array(out)


def test_rhn_dropout_is_one_mask_per_sequence_and_unit(monkeypatch):
    """RETURNN's RHN dropout (training): the state is scaled before each depth by one mask per
    sequence and unit, the same at every frame; evaluation uses none."""
    from returnn.tf.layers import rnn_cell
    data, val, x = btf(3, LENS)
    layer = make("rec", {"unit": "rhn", "n_out": 4, "unit_opts": {"depth": 2, "dropout": 0.5}}, [data])
    masks = np.array([[2, 0, 2, 0], [0, 2, 2, 0], [2, 2, 0, 0]], np.float32)
    monkeypatch.setattr(rnn_cell, "dropout_scale", lambda shape, rate, seed: tf.constant(masks))
    evaluated, trained = run(layer, [val]).tensor.numpy(), run(layer, [val], train=True).tensor.numpy()
    for b, n in enumerate(LENS):
        np.testing.assert_allclose(evaluated[b, :n], np_rhn(x[b, :n], layer), atol=1e-5)
        np.testing.assert_allclose(trained[b, :n], np_rhn(x[b, :n], layer, masks[b]), atol=1e-5)
    # RETURNN's dropout_seed (its own mask stream; ours come from the step seed): accepted (test_rec_rhn_nan)
    make("rec", {"unit": "rhn", "n_out": 4, "unit_opts": {"dropout": 0.5, "dropout_seed": 1}}, [data])
    with pytest.raises(NetworkError, match="'lay'.*unit_opts"):
        make("rec", {"unit": "rhn", "n_out": 4, "unit_opts": {"dropout_sed": 1}}, [data])


def test_constant_shape_fills_a_scalar_and_names_the_axes():
    from returnn.tf.layers import RunContext
    feat = FeatureDim("f", 3)
    layer = make("constant", {"value": 2.0, "shape": [feat, 2]}, [])
    assert layer.output.dims[0] is feat and layer.output.batch_shape == (3, 2)
    np.testing.assert_array_equal(layer([], RunContext(False)).tensor.numpy(), np.full((3, 2), 2.0))
    with pytest.raises(NetworkError, match="'lay'.*shape"):
        make("constant", {"value": np.array([1.0, 2.0]), "shape": [3]}, [])
