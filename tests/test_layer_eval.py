"""The eval layer (and combine with kind eval): RETURNN's eval names against numpy references,
layouts (broadcasting, sparse, out_type), train-only code through self.network, bad expressions as
one line, and a config with a SpecAugment-style transform trained through rnn.py."""
from functools import partial

import numpy as np
import pytest
import tensorflow as tf

from data_utils import btf as make_btf, make_layer as make, run_layer as run
from helpers import assert_one_line_error, config_12ax, describe, run_rnn, train_args, write_config
from returnn.config import Config, get_global_config, set_global_config
from returnn.errors import NetworkError
from returnn.tensor import Data, FeatureDim, SpatialDim, batch_dim
from returnn.tf.layers import LayerOutput, RunContext

LENS = np.array([5, 3], np.int32)
btf = partial(make_btf, lens=LENS, garbage=np.nan)


def test_expression_over_two_sources():
    a, va, x = btf(4)
    b, vb, y = btf(4, seed=1, time=a.time_dim)
    layer = make("eval", {"eval": "source(0) * 2.0 + tf.tanh(source(1))"}, [a, b])
    assert layer.output.dims == a.dims and layer.output.dim == 4
    out = run(layer, [va, vb])
    for i, n in enumerate(LENS):
        np.testing.assert_allclose(out.tensor.numpy()[i, :n], x[i, :n] * 2 + np.tanh(y[i, :n]), rtol=1e-6)
    assert out.size("T") is not None
    # combine with kind "eval" is the same layer
    comb = make("combine", {"kind": "eval", "eval": "source(0) - source(1)"}, [a, b])
    np.testing.assert_allclose(run(comb, [va, vb]).tensor.numpy()[0], x[0] - y[0], rtol=1e-6)


def test_sources_broadcast_over_missing_axes():
    a, va, x = btf(3)
    vec = Data("v", dims=[batch_dim, a.feature_dim])
    v = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32)
    layer = make("eval", {"eval": "source(1) * source(0)"}, [a, vec])
    assert layer.output.dims == a.dims  # the source with most axes gives the layout
    out = run(layer, [va, LayerOutput(tf.constant(v), vec)]).tensor.numpy()
    np.testing.assert_allclose(out[0], x[0] * v[0], rtol=1e-6)
    # the same when the smaller source comes first in "from"
    layer = make("eval", {"eval": "source(0) + source(1)"}, [vec, a])
    assert layer.output.dims == a.dims
    out = run(layer, [LayerOutput(tf.constant(v), vec), va]).tensor.numpy()
    np.testing.assert_allclose(out[1, :3], x[1, :3] + v[1], rtol=1e-6)


def test_as_data_gives_placeholder_and_lengths_for_masking():
    a, va, x = btf(2)
    expr = ("tf.where(source(0, as_data=True).get_sequence_mask_broadcast(), source(0, as_data=True).placeholder, "
            "0.0) + tf.cast(source(0, as_data=True).get_sequence_lengths()[:, None, None], tf.float32) * 0")
    out = run(make("eval", {"eval": expr}, [a]), [va]).tensor.numpy()
    ref = x.copy()
    ref[1, 3:] = 0
    np.testing.assert_allclose(out, ref, rtol=1e-6)  # padded frames held NaN: masked
    size_ph = run(make("eval", {"eval": "source(0) * 0 + tf.cast(tf.reduce_max(source(0, as_data=True)"
                                        ".size_placeholder[0]), tf.float32)"}, [a]), [va]).tensor.numpy()
    assert size_ph[0, 0, 0] == 5


def test_sparse_source_and_out_type():
    time = SpatialDim("time")
    classes = Data("c", dims=[batch_dim, time], sparse_dim=FeatureDim("cls", 7))
    labels = np.array([[1, 2, 3, 4, 5], [6, 0, 1, 0, 0]], np.int32)
    val = LayerOutput(tf.constant(labels), classes, {time: tf.constant(LENS)})
    shifted = make("eval", {"eval": "source(0) + 1"}, [classes])
    assert shifted.output.sparse and shifted.output.dim == 7 and shifted.output.dtype == "int32"
    np.testing.assert_array_equal(run(shifted, [val]).tensor.numpy(), labels + 1)
    as_float = make("eval", {"eval": "tf.cast(source(0), tf.float32) / 2",
                             "out_type": {"dtype": "float32", "sparse": False}}, [classes])
    assert not as_float.output.sparse and as_float.output.dtype == "float32" and as_float.output.dim is None
    np.testing.assert_allclose(run(as_float, [val]).tensor.numpy(), labels / 2)
    a, va, x = btf(3)
    doubled = make("eval", {"eval": "tf.concat([source(0), -source(0)], axis=-1)", "out_type": {"dim": 6}}, [a])
    assert doubled.output.dim == 6 and doubled.output.feature_dim_axis == 2
    np.testing.assert_allclose(run(doubled, [va]).tensor.numpy()[0], np.concatenate([x[0], -x[0]], -1), rtol=1e-6)
    by_fn = make("eval", {"eval": "source(0)", "out_type": lambda sources, name, **_: sources[0].output.copy()}, [a])
    assert by_fn.output.dims == a.dims and by_fn.output.name == "lay"
    # RETURNN: sparse with 'dim' None are indices of unknown range; 'sparse' without 'dim' (or n_out) fails
    # there at build ('need dim (num classes) if sparse'), also on a sparse source: refused with a
    # behavior_version; without one, as the RETURNN of 2021 built it (merboldt's transducer configs' position
    # 't'), indices of unknown range
    from returnn.util.basic import BehaviorVersion
    pos = Data("p", dims=[batch_dim, time], dtype="int32")
    previous = BehaviorVersion._forced
    try:
        BehaviorVersion.set(1)
        for source in (pos, classes):
            with pytest.raises(NetworkError, match="'sparse' needs 'dim'"):
                make("eval", {"eval": "source(0) * 2", "out_type": {"sparse": True, "dtype": "int32"}}, [source])
        BehaviorVersion.set(0)
        old = make("eval", {"eval": "source(0) * 2", "out_type": {"sparse": True, "dtype": "int32"}}, [pos])
        assert old.output.sparse and old.output.dim is None and old.output.dims == pos.dims
    finally:
        BehaviorVersion.set(previous)
    idx = make("eval", {"eval": "source(0) * 2", "out_type": {"sparse": True, "dim": None, "dtype": "int32"}}, [pos])
    assert idx.output.sparse and idx.output.dim is None and idx.output.dims == pos.dims
    np.testing.assert_array_equal(run(idx, [LayerOutput(tf.constant(labels), pos, {time: tf.constant(LENS)})])
                                  .tensor.numpy(), labels * 2)


def test_callable_eval_locals_and_bias():
    a, va, x = btf(3)
    layer = make("eval", {"eval": lambda source, scale, **kw: source(0) * scale, "eval_locals": {"scale": 3.0},
                          "with_bias": True, "activation": "relu"}, [a])
    assert [v.shape.as_list() for v in layer.trainable_variables] == [[3]]
    np.testing.assert_allclose(run(layer, [va]).tensor.numpy()[0], np.maximum(x[0] * 3, 0), rtol=1e-6)


def test_train_flag_step_and_config_through_self_network():
    old = get_global_config()
    config = Config()
    config.typed_dict["transform"] = lambda data, network: network.cond_on_train(
        lambda: data.placeholder * 0.0 + tf.cast(network.global_train_step, tf.float32), lambda: data.placeholder)
    set_global_config(config)
    try:
        a, va, x = btf(2)
        layer = make("eval", {"eval": "self.network.get_config().typed_value('transform')(source(0, as_data=True), "
                                      "network=self.network)"}, [a])
        train = layer([va], RunContext(True, tf.constant([3, 17], tf.int64))).tensor.numpy()
        assert np.all(train[0] == 17.0)
        np.testing.assert_allclose(run(layer, [va]).tensor.numpy()[0], x[0])
        flag = make("eval", {"eval": "tf.cast(self.network.train_flag, tf.float32) + source(0) * 0"}, [a])
        assert run(flag, [va], train=True).tensor.numpy()[0, 0, 0] == 1.0
        assert run(flag, [va]).tensor.numpy()[0, 0, 0] == 0.0
    finally:
        set_global_config(old)


def test_tf1_names_and_tfutil_functions_are_available():
    a, va, x = btf(2)
    out = run(make("eval", {"eval": "tf.to_float(source(0) > 0) + where_bc(source(0) > 0, 1.0, 0.0)"}, [a]), [va])
    np.testing.assert_allclose(out.tensor.numpy()[0], 2.0 * (x[0] > 0))


@pytest.mark.parametrize("opts,sources,message", [
    ({"eval": "source(0) +"}, 1, "'lay'.*eval.*syntax error"),
    ({"eval": "source(0)"}, 2, "'lay'.*does not use source.*\\[1\\]"),
    ({"eval": "source(0) + undefined_name"}, 1, "'lay'.*eval failed: NameError"),
    ({"eval": "tf.reduce_sum(source(0))"}, 1, "'lay'.*rank 0.*out_type"),
    ({"eval": 3}, 1, "'lay'.*must be a string or a callable"),
    ({"eval": "source(0)", "out_type": {"bogus": 1}}, 1, "'lay'.*unsupported keys \\['bogus'\\]"),
])
def test_bad_expressions_name_the_layer(opts, sources, message):
    a, va, x = btf(2)
    with pytest.raises(NetworkError, match=message):
        layer = make("eval", opts, [a] * sources)
        run(layer, [va] * sources)


HEAD = '''def transform(data, network):
    """Zeroes a random feature band in training (SpecAugment-like), identity otherwise."""
    import tensorflow as tf
    from TFUtil import where_bc
    x = data.placeholder
    def masked():
        start = tf.random_uniform((), 0, data.dim - 2, dtype=tf.int32)
        band = tf.logical_and(tf.range(data.dim) >= start, tf.range(data.dim) < start + 2)
        return where_bc(band[None, None, :], 0.0, x)
    return network.cond_on_train(masked, lambda: x)'''
NETWORK = '''{
    "input": {"class": "eval", "from": "data", "eval": "tf.one_hot(tf.argmax(source(0), axis=-1), 9)",
              "out_type": {"dim": 9, "sparse": False, "dtype": "float32"}},
    "aug": {"class": "eval", "from": "input",
            "eval": "self.network.get_config().typed_value('transform')(source(0, as_data=True), network=self.network)"},
    "hidden": {"class": "linear", "activation": "tanh", "n_out": 10, "from": "aug"},
    "scaled": {"class": "combine", "kind": "eval", "from": ["hidden", "hidden"], "eval": "source(0) * 0.5 + source(1) * 0.5"},
    "output": {"class": "softmax", "loss": "ce", "from": "scaled"},
}'''
CONFIG = config_12ax(network=NETWORK, num_epochs=2, head=HEAD)


def test_config_with_eval_layers_trains(tmp_path):
    config = write_config(tmp_path / "eval.config", CONFIG)
    proc = run_rnn(train_args(config, tmp_path), timeout=300)
    assert proc.returncode == 0, describe(proc)
    assert "dev: score" in proc.stdout or "epoch 2 score" in proc.stdout, describe(proc)


def test_failing_eval_is_one_line(tmp_path):
    config = write_config(tmp_path / "bad.config", CONFIG.replace("tf.one_hot(", "tf.one_hotx("))
    proc = run_rnn(train_args(config, tmp_path), timeout=300)
    assert_one_line_error(proc, "layer 'input' (eval): eval failed: AttributeError")


def test_out_type_function_takes_a_sources_sequence_lengths_for_its_axis():
    """RETURNN's transducer configs: ``Data(..., size_placeholder={0: src.get_sequence_lengths()})``
    in an ``out_type`` function while the network is built: that axis is the source's time Dim."""
    from returnn.tf.network import TFNetwork
    from returnn.extern_data import data_from_opts

    def out_type(sources, **_):
        enc = sources[0].output
        return Data(name="align", sparse=True, dim=4, size_placeholder={0: enc.get_sequence_lengths()})

    ext = {"data": data_from_opts("data", {"dim": 3}), "classes": data_from_opts("classes", {"dim": 4, "sparse": True})}
    net = TFNetwork({
        "pool": {"class": "pool", "mode": "max", "pool_size": [2], "padding": "same", "from": "data"},
        "output": {"class": "eval", "from": "pool", "out_type": out_type, "is_output_layer": True,
                   "eval": "tf.cast(tf.argmax(source(0, auto_convert=False), axis=-1), tf.int32)"}}, ext)
    out = net.template_of("output")
    assert out.sparse and out.dims[out.time_dim_axis] == net.template_of("pool").get_time_dim_tag()
    x = tf.random.normal([2, 5, 3])
    lengths = tf.constant([5, 0])
    result = net.forward({"data": x, "data:seq_len": lengths}, RunContext(False), only=["output"])["output"]
    assert result.seq_len.numpy().tolist() == [3, 0]
    np.testing.assert_array_equal(result.tensor.numpy()[0], np.argmax(
        np.max(np.pad(x.numpy()[0], [(0, 1), (0, 0)], constant_values=-np.inf).reshape(3, 2, 3), axis=1), axis=-1))
    with pytest.raises(ValueError, match="no value while the network is built"):
        net.template_of("pool").get_sequence_lengths() + 1


def test_new_axes_where_returnns_get_common_data_puts_them():
    """RETURNN's get_common_data: the first source with most axes is the base; another source's new
    axes go where its get_default_new_axis_for_dim_tag puts them: a second time axis right after the
    first (a transducer's joint [B,T,U,F] from [B,T,F] + [B,U,F]: was [B,T,F,U], which reduce_out then
    refused); values as numpy broadcasting, padded frames of both axes excluded."""
    t_lens, u_lens = np.array([4, 2], np.int32), np.array([2, 3], np.int32)
    am, vam, x = make_btf(3, t_lens, seed=1, garbage=0.0)
    lm, vlm, y = make_btf(3, u_lens, seed=2, garbage=0.0)
    lm = Data("lm", dims=[batch_dim, lm.time_dim, am.feature_dim])
    vlm = LayerOutput(vlm.tensor, lm, vlm.sizes)
    vam = LayerOutput(vam.tensor, Data("am", dims=[batch_dim, am.time_dim, am.feature_dim]), vam.sizes)
    bias_data = Data("bias", dims=[am.feature_dim])
    bias = np.array([0.5, -1.0, 2.0], np.float32)
    for cls, opts in (("combine", {"kind": "add"}), ("eval", {"eval": "source(0) + source(1) + source(2)"})):
        layer = make(cls, opts, [bias_data, vam.data, lm])
        assert list(layer.output.dims) == [batch_dim, am.time_dim, lm.time_dim, am.feature_dim], layer.output
        assert layer.output.feature_dim_axis == 3
        out = run(layer, [LayerOutput(tf.constant(bias), bias_data, {}), vam, vlm]).tensor.numpy()
        expected = bias + x[:, :, None, :] + y[:, None, :, :]
        for b in range(2):
            np.testing.assert_allclose(out[b, :t_lens[b], :u_lens[b]], expected[b, :t_lens[b], :u_lens[b]], rtol=1e-6)
    cmp = make("compare", {"kind": "greater"}, [vam.data, Data("u", dims=[batch_dim, lm.time_dim])])
    assert list(cmp.output.dims) == [batch_dim, am.time_dim, lm.time_dim, am.feature_dim]  # a dynamic axis after T
    # a static spatial axis to data without one goes before the features; a feature axis after them
    bf = Data("bf", dims=[batch_dim, am.feature_dim])
    assert bf.get_default_new_axis_for_dim_tag(SpatialDim("s", 5)) == 1
    assert vam.data.get_default_new_axis_for_dim_tag(FeatureDim("g", 2)) == 3
    assert list(bf.copy_add_dim_by_tag(lm.time_dim, unbroadcast=True).dims) == [batch_dim, lm.time_dim, am.feature_dim]


def test_auto_convert_of_a_source_with_more_axes_than_the_output_fails_as_in_returnn():
    """RETURNN's source(i) is ``copy_compatible_to`` the output: a (B,T,F) source of an eval whose
    out_type is (B,) raises "already has more dims than target data" (RETURNN 1.2026, checked: the
    2019 local-attention median config's p_t_in over prev:att_weights); auto_convert=False gives it."""
    a, va, x = btf(3)
    per_seq = {"shape": (), "batch_dim_axis": 0, "dtype": "float32"}
    with pytest.raises(NetworkError, match="'lay'.*source\\(0\\).*more axes than the output"):
        run(make("eval", {"eval": "tf.reduce_sum(source(0), axis=[1, 2])", "out_type": per_seq}, [a]), [va])
    masked = "tf.where(source(0, as_data=True, auto_convert=False).get_sequence_mask_broadcast(), source(0, auto_convert=False), 0.)"
    layer = make("eval", {"eval": "tf.reduce_sum(%s, axis=[1, 2])" % masked, "out_type": per_seq}, [a])
    out = run(layer, [va]).tensor.numpy()
    np.testing.assert_allclose(out, [x[i, :n].sum() for i, n in enumerate(LENS)], rtol=1e-5)  # padding is NaN
