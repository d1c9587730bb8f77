"""Layer options of RETURNN's own test nets against numpy: ``dropout_axis`` (RETURNN's
_ConcatInputLayer: the mask varies along the given axes only), conv ``filter`` (another layer's
output as the kernel), linear ``grad_filter`` (gradients of the input filtered by their norm)."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from data_utils import lo, make_layer as make, rebind, spec
from helpers import outputs
from returnn.config import Config
from returnn.errors import NetworkError
from returnn.extern_data import extern_data_from_config
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork
from returnn.tf.returnn_params import returnn_param_shapes


def _run(layer, srcs, train=False, seed=(1, 2)):
    srcs = [rebind(x, data) for x, data in zip(srcs, layer.sources)]
    return layer(srcs, RunContext(train, tf.constant(seed, tf.int64)))


# ---- dropout_axis
@pytest.mark.parametrize("axes,varies", [(["T", "F"], (False, True, True)), ("F", (False, False, True)),
                                         ("T", (False, True, False)), (["B", "T", "F"], (True, True, True))])
def test_dropout_axis_mask_varies_along_the_given_axes_only(axes, varies):
    """RETURNN's test_DropoutLayer_axis: the noise shape is the input's shape on dropout_axis, 1 elsewhere."""
    x = np.ones([4, 30, 16], np.float32)
    lens = np.array([30, 20, 10, 5], np.int32)
    layer = make("dropout", {"dropout": 0.5, "dropout_axis": axes}, [spec(16)])
    out = _run(layer, [lo(x, lens)], train=True, seed=(3, 4)).tensor.numpy()
    assert set(np.unique(out)) == {0.0, 2.0}
    for axis, vary in enumerate(varies):
        same = (out == np.take(out, [0], axis=axis)).all()
        assert same != vary, "axis %i: mask %s" % (axis, "shared" if same else "varies")
    np.testing.assert_array_equal(_run(layer, [lo(x, lens)], train=False).tensor.numpy(), x)


def test_dropout_axis_on_a_linear_input_and_errors():
    x = np.random.RandomState(0).randn(2, 5, 4).astype(np.float32)
    lens = np.array([5, 3], np.int32)
    lin = make("linear", {"n_out": 4, "dropout": 0.5, "dropout_axis": ["T", "F"], "activation": None,
                          "with_bias": False}, [spec(4)])
    lin.W.assign(np.eye(4, dtype=np.float32))  # the output is the dropped-out input
    out = _run(lin, [lo(x, lens)], train=True, seed=(7, 8)).tensor.numpy()
    mask = out / x
    assert set(np.unique(np.round(mask, 5))) == {0.0, 2.0}
    np.testing.assert_allclose(mask[0, :3], mask[1, :3], rtol=1e-5)  # no noise along the batch (real frames)
    assert not (mask[0] == mask[0, :1]).all()  # but along time
    with pytest.raises(NetworkError, match="'lay'.*either dropout_axis .* or dropout_noise_shape"):
        make("dropout", {"dropout": 0.5, "dropout_axis": "T", "dropout_noise_shape": {"*": None}}, [spec(4)])
    with pytest.raises(NetworkError, match="'lay'.*not the int 1"):
        make("dropout", {"dropout": 0.5, "dropout_axis": [1]}, [spec(4)])
    with pytest.raises(NetworkError, match="'lay'.*option 'dropout_axis'"):
        make("dropout", {"dropout": 0.5, "dropout_axis": "stag:nothing"}, [spec(4)])
    make("dropout", {"dropout": 0.0, "dropout_axis": [1]}, [spec(4)])  # RETURNN: not read without dropout


def test_dropout_axis_in_a_network_trains():
    specs = extern_data_from_config(Config({"num_inputs": 4, "num_outputs": 9}))
    net = TFNetwork(outputs({"drop": {"class": "dropout", "dropout": 0.3, "dropout_axis": ["T", "F"], "from": "data:data"},
                             "output": {"class": "softmax", "loss": "ce", "from": "drop"}}), specs)
    x = np.random.RandomState(1).randn(3, 6, 4).astype(np.float32)
    batch = {"data": tf.constant(x), "data:seq_len": tf.constant([6, 4, 0]),
             "classes": tf.zeros([3, 6], tf.int32), "classes:seq_len": tf.constant([6, 4, 0])}
    out = net.forward(batch, RunContext(True, tf.constant([1, 2], tf.int64)))["drop"].tensor.numpy()
    np.testing.assert_array_equal(out[0] == 0, out[1] == 0)


# ---- grad_filter
@pytest.mark.parametrize("cls,opts", [("linear", {"activation": "tanh"}), ("softmax", {}),
                                      ("linear", {"activation": None, "with_bias": False})])
def test_grad_filter_drops_the_gradient_of_sequences_over_the_threshold(cls, opts):
    """RETURNN's filter_grad: per sequence, max over its frames and features of grad ** 2 at the
    pre-activation values; >= grad_filter: that sequence's gradient is zero (in W and the input)."""
    rng = np.random.RandomState(0)
    x = rng.randn(3, 4, 5).astype(np.float32)
    lens = np.array([4, 3, 2], np.int32)
    scale = tf.constant([1.0, 50.0, 0.5])[:, None, None]  # sequence 1's gradient is large
    grads = {}
    for flt in (None, 2.0):
        layer = make(cls, dict(opts, n_out=3, grad_filter=flt), [spec(5)])
        layer.W.assign(np.random.RandomState(1).randn(5, 3).astype(np.float32) * 0.3)
        xt = tf.constant(x)
        with tf.GradientTape() as tape:
            tape.watch(xt)
            out = _run(layer, [lo(xt, lens)])
            pre = out.logits if out.logits is not None else out.tensor
            mask = tf.sequence_mask(lens, 4, tf.float32)[:, :, None]
            loss = tf.reduce_sum(pre * mask * scale)  # d loss / d pre-activation = scale (real frames)
        gx, gw = tape.gradient(loss, [xt, layer.W])
        grads[flt] = (gx.numpy(), gw.numpy(), out.tensor.numpy())
    gx, gw, y = grads[None]
    fx, fw, fy = grads[2.0]
    np.testing.assert_allclose(fy, y, rtol=1e-6)  # forward unchanged
    if cls == "linear" and opts.get("activation") is None:  # the loss gradient at the pre-activation is scale
        np.testing.assert_array_equal(fx[1], 0.0)
        np.testing.assert_allclose(fx[[0, 2]], gx[[0, 2]], rtol=1e-6)
        keep = np.array([1.0, 0.0, 1.0])[:, None, None]
        ref_w = np.einsum("btf,bto->fo", x * (np.arange(4)[None, :, None] < lens[:, None, None]),
                          np.broadcast_to(keep * np.array([1.0, 50.0, 0.5])[:, None, None], (3, 4, 3)))
        np.testing.assert_allclose(fw, ref_w, rtol=1e-5)
    else:
        np.testing.assert_array_equal(fx[1], 0.0)
        assert np.abs(fx[0]).sum() > 0 and np.abs(gx[1]).sum() > 0


def test_grad_filter_errors_and_packed_frames():
    with pytest.raises(NetworkError, match="'lay'.*grad_filter must be a number"):
        make("linear", {"n_out": 3, "grad_filter": "x"}, [spec(5)])
    assert make("linear", {"n_out": 3}, [spec(5)]).packs and not make("linear", {"n_out": 3, "grad_filter": 1.0},
                                                                      [spec(5)]).packs


# ---- conv filter
def _filter_net(filter_shape, conv_opts=None, dim=4):
    specs = extern_data_from_config(Config({"extern_data": {"data": {"dim": dim}}}))
    opts = {"class": "conv", "filter_size": [3], "padding": "same", "n_out": 5, "with_bias": False, "from": "data"}
    opts.update(conv_opts or {})
    net = {"f": {"class": "variable", "shape": filter_shape}, "output": dict(opts, filter="f")}
    return TFNetwork(net, specs), TFNetwork({"output": opts}, specs)


@pytest.mark.parametrize("shape,perm", [((3, 4, 5), (0, 1, 2)), ((5, 3, 4), (1, 2, 0)), ((4, 5, 3), (2, 0, 1))])
def test_conv_filter_layer_is_the_kernel(shape, perm):
    """The filter layer's value, its axes matched by size (filter_size, input, n_out), is the kernel:
    the same output as a conv whose W is that value transposed; no W of its own."""
    with_filter, plain = _filter_net(shape)
    kernel = np.random.RandomState(0).randn(*shape).astype(np.float32)
    with_filter.layers["f"].var.assign(kernel)
    plain.layers["output"].W.assign(kernel.transpose(perm))
    assert with_filter.layers["output"].W is None
    assert sorted(returnn_param_shapes(with_filter)) == ["f/f"]
    x = np.random.RandomState(1).randn(3, 6, 4).astype(np.float32)
    batch = {"data": tf.constant(x), "data:seq_len": tf.constant([6, 4, 0])}
    a = with_filter.forward(batch, RunContext(False))["output"]
    b = plain.forward(batch, RunContext(False))["output"]
    np.testing.assert_allclose(a.tensor.numpy(), b.tensor.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(a.seq_len.numpy(), [6, 4, 0])


def test_conv_filter_layer_gets_the_gradient_and_errors():
    with_filter, _ = _filter_net((3, 4, 5))
    x = tf.constant(np.random.RandomState(1).randn(2, 5, 4).astype(np.float32))
    with tf.GradientTape() as tape:
        out = with_filter.forward({"data": x, "data:seq_len": tf.constant([5, 3])}, RunContext(True, tf.constant([1, 2], tf.int64)))
        loss = tf.reduce_sum(out["output"].masked(0.0))
    grad = tape.gradient(loss, with_filter.layers["f"].var)
    assert grad is not None and np.abs(grad.numpy()).sum() > 0
    with pytest.raises(NetworkError, match="filter 'f' .*other axes \\[2\\] must be the filter_size \\[3\\]"):
        _filter_net((2, 4, 5))
    with pytest.raises(NetworkError, match="filter 'f' .*no axis of size 4 for the channels"):
        _filter_net((3, 3, 5))
    with pytest.raises(NetworkError, match="filter_perm"):
        _filter_net((3, 4, 5), {"filter_perm": {"a": "b"}})
    with pytest.raises(NetworkError, match="'filter' must name a layer"):
        TFNetwork({"output": {"class": "conv", "filter_size": [3], "n_out": 5, "filter": 3, "from": "data"}},
                  extern_data_from_config(Config({"extern_data": {"data": {"dim": 4}}})))


# ---- RETURNN's rec options of a sub-network unit, given with a cell unit (it ignores them there)
@pytest.mark.parametrize("unit", ["gru", "nativelstm2"])
def test_rec_subnet_only_options_change_nothing_with_a_cell_unit(unit):
    x = np.random.RandomState(0).normal(size=[2, 5, 3]).astype(np.float32)
    lens = np.array([5, 2], np.int32)
    plain = make("rec", {"unit": unit, "n_out": 4}, [spec(3)])
    extra = make("rec", {"unit": unit, "n_out": 4, "include_eos": True, "back_prop": False, "cheating": True,
                         "optimize_move_layers_out": False, "use_global_rec_step_offset": True, "debug": True, "axis": "T",
                         **({"input_projection": False} if unit == "gru" else {})}, [spec(3)])
    assert sorted(extra.params) == sorted(plain.params)
    for key, var in extra.params.items():
        var.assign(plain.params[key])
    np.testing.assert_allclose(_run(extra, [lo(x, lens)]).tensor.numpy(), _run(plain, [lo(x, lens)]).tensor.numpy())


def test_eval_kind_other_than_eval_and_conv_bias_errors():
    with pytest.raises(NetworkError, match="'kind' = 'add' is not supported"):
        make("eval", {"eval": "source(0)", "kind": "add"}, [spec(3)])
    with pytest.raises(NetworkError, match="'bias' must name a layer"):
        make("conv", {"filter_size": [2], "n_out": 2, "bias": 1.0}, [spec(3)])
    with pytest.raises(NetworkError, match="input_projection False .* not supported"):
        make("rec", {"unit": "nativelstm2", "n_out": 2, "input_projection": False}, [spec(8)])
    with pytest.raises(NetworkError, match="needs 'nr_of_channels'"):  # RETURNN: a required argument
        make("split_concatenated_multichannel", {}, [spec(4)])
    with pytest.raises(NetworkError, match="'axis' 'F': only the input's time axis"):
        make("rec", {"unit": "gru", "n_out": 2, "axis": "F"}, [spec(3)])
    with pytest.raises(NetworkError, match="padding must be 'same' or 'valid'"):
        make("transposed_conv", {"filter_size": [2], "n_out": 2, "padding": 1}, [spec(3)])


def test_need_last_outside_a_rec_unit_changes_nothing():
    """RETURNN's LayerBase takes need_last anywhere; only a rec unit's sub-layers use it."""
    x = np.arange(12, dtype=np.float32).reshape([2, 2, 3])
    layer = make("copy", {"need_last": True}, [spec(3)])
    np.testing.assert_array_equal(_run(layer, [lo(x, np.array([2, 1], np.int32))]).tensor.numpy(), x)
