"""Shape layers (split_dims, merge_dims, expand_dims, squeeze, cast, reinterpret_data) and
2-D conv/pool against numpy references, incl. sequence lengths and padded frames."""
from functools import partial

import numpy as np
import pytest
import tensorflow as tf

from data_utils import btf as make_btf, make_layer as make, run_layer as run
from returnn.errors import NetworkError
from returnn.tensor import Data, SpatialDim, batch_dim
from returnn.tf.layers import LayerOutput

LENS = np.array([7, 4, 1], np.int32)
btf = partial(make_btf, lens=LENS, t=7)


def test_split_feature_axis():
    data, val, _ = btf(6)
    x = val.tensor.numpy()  # shape layers move values, padding included
    layer = make("split_dims", {"axis": "F", "dims": (2, -1)}, [data])
    out = run(layer, [val])
    assert layer.output.batch_shape == (None, None, 2, 3) and layer.output.feature_dim_axis == 3
    assert layer.output.time_dim == data.time_dim and out.seq_len is val.seq_len
    np.testing.assert_array_equal(out.tensor.numpy(), x.reshape(3, 7, 2, 3))
    assert layer.output.get_axes_from_description("spatial") == [1, 2]


def test_split_time_axis_pads_and_sets_lengths():
    data, val, _ = btf(2)
    x = val.tensor.numpy()  # shape layers move values, padding included
    layer = make("split_dims", {"axis": "T", "dims": (-1, 3)}, [data])
    out = run(layer, [val])
    new_time = layer.output.dims[1]
    assert layer.output.time_dim_axis == 1 and new_time.is_dynamic() and new_time != data.time_dim
    assert out.tensor.shape == (3, 3, 3, 2)
    np.testing.assert_array_equal(out.seq_len.numpy(), [3, 2, 1])
    padded = np.concatenate([x, np.zeros([3, 2, 2], np.float32)], 1)
    np.testing.assert_array_equal(out.tensor.numpy(), padded.reshape(3, 3, 3, 2))
    with pytest.raises(NetworkError, match="'lay'.*cannot split axis of size 6"):
        make("split_dims", {"axis": "F", "dims": (4, -1)}, [btf(6)[0]])
    with pytest.raises(NetworkError, match="'lay'.*'dims'"):
        make("split_dims", {"axis": "F", "dims": (-1, -1)}, [data])


def test_merge_dims_roundtrip_and_lengths():
    data, val, _ = btf(6)
    x = val.tensor.numpy()  # shape layers move values, padding included
    split = make("split_dims", {"axis": "F", "dims": (2, 3)}, [data], name="split")
    merge = make("merge_dims", {"axes": "except_time"}, [split.output], name="merge")
    out = run(merge, [run(split, [val])])
    assert merge.output.batch_shape == (None, None, 6) and merge.output.feature_dim_axis == 2
    np.testing.assert_array_equal(out.tensor.numpy(), x)
    # merging time and feature: (B, T*F) with sizes T*F, real frames first
    mtf = make("merge_dims", {"axes": ["T", "F"]}, [data], name="mtf")
    out = run(mtf, [val])
    assert mtf.output.batch_ndim == 2 and mtf.output.dims[1].is_dynamic()
    np.testing.assert_array_equal(out.seq_len.numpy(), LENS * 6)
    for b, n in enumerate(LENS):
        np.testing.assert_array_equal(out.tensor.numpy()[b, :n * 6], x[b, :n].reshape(-1))
    with pytest.raises(NetworkError, match="'lay'.*batch axis with more than one"):
        make("merge_dims", {"axes": ["B", "T", "F"]}, [data])  # B with one axis: tests/test_layers_structural.py


def test_expand_squeeze_cast():
    data, val, _ = btf(4)
    x = val.tensor.numpy()  # shape layers move values, padding included
    exp = make("expand_dims", {"axis": "F"}, [data], name="exp")
    out = run(exp, [val])
    assert out.tensor.shape == (3, 7, 4, 1) and exp.output.feature_dim_axis == 3
    exp_t = make("expand_dims", {"axis": "spatial", "dim": 2}, [data], name="exp_t")
    out_t = run(exp_t, [val])
    assert out_t.tensor.shape == (3, 7, 2, 4) and exp_t.output.feature_dim_axis == 3
    np.testing.assert_array_equal(out_t.tensor.numpy()[:, :, 1], x)
    sq = make("squeeze", {"axis": "F"}, [exp.output], name="sq")
    np.testing.assert_array_equal(run(sq, [out]).tensor.numpy(), x)
    assert sq.output.dims == data.dims
    with pytest.raises(NetworkError, match="'lay'.*no axis of size 1"):
        make("squeeze", {"axis": "F"}, [data])  # a static axis of size 4
    cast = make("cast", {"dtype": "int32"}, [data], name="c")
    np.testing.assert_array_equal(run(cast, [val]).tensor.numpy(), x.astype(np.int32))
    assert cast.output.dtype == "int32" and not cast.output.sparse
    with pytest.raises(NetworkError, match="'lay'.*dtype"):
        make("cast", {"dtype": "float99"}, [data])


def test_reinterpret_data_sparse_axes_and_size_base():
    data, val, _ = btf(4)
    x = val.tensor.numpy()  # shape layers move values, padding included
    labels = Data("lab", dims=[batch_dim, SpatialDim("lab_time")], dtype="int32")
    lab_val = LayerOutput(tf.constant(np.ones([3, 7], np.int32)), labels, {labels.time_dim: tf.constant(LENS)})
    layer = make("reinterpret_data", {"set_sparse": True, "set_sparse_dim": 10}, [labels])
    assert layer.output.sparse and layer.output.dim == 10
    layer = make("reinterpret_data", {"increase_sparse_dim": 2, "size_base": "x"}, [layer.output, data])
    assert layer.output.dim == 12 and layer.output.time_dim == data.time_dim
    other = LayerOutput(lab_val.tensor, layer.sources[0], {layer.sources[0].time_dim: tf.constant([1, 1, 1])})
    out = run(layer, [other, val])
    assert out.seq_len is val.seq_len
    feat_first = make("reinterpret_data", {"set_axes": {"F": "T", "T": "F"}}, [data])
    assert feat_first.output.feature_dim_axis == 1 and feat_first.output.time_dim_axis == 2
    with pytest.raises(NetworkError, match="'enforce_batch_major' and 'enforce_time_major' exclude each other"):
        make("reinterpret_data", {"enforce_batch_major": True, "enforce_time_major": True}, [data])
    new_t = SpatialDim("new")
    tagged = make("reinterpret_data", {"set_dim_tags": {"T": new_t}}, [data])
    assert run(tagged, [val]).size(new_t) is val.seq_len


def np_conv2d_same(x, w, b):
    """x (T, F, C), w (kt, kf, C, N): stride 1, zero padding (k-1)//2 left, rest right."""
    kt, kf = w.shape[:2]
    xp = np.pad(x, [((kt - 1) // 2, kt - 1 - (kt - 1) // 2), ((kf - 1) // 2, kf - 1 - (kf - 1) // 2), (0, 0)])
    out = np.zeros(x.shape[:2] + (w.shape[3],), np.float32)
    for t in range(x.shape[0]):
        for f in range(x.shape[1]):
            out[t, f] = np.einsum("ijc,ijcn->n", xp[t:t + kt, f:f + kf], w) + b
    return out


@pytest.mark.parametrize("channel_first", [False, True])
def test_conv2d_over_time_and_frequency(channel_first):
    data, val, _ = btf(5, garbage=0.0)
    x = val.tensor.numpy()  # shape layers move values, padding included
    opts = {"filter_size": (3, 2), "padding": "same", "n_out": 4, "input_add_feature_dim": True,
            "use_channel_first": channel_first, "with_bias": True}
    layer = make("conv", opts, [data])
    out = run(layer, [val])
    w, b = layer.W.numpy(), layer.bias.numpy()
    assert w.shape == (3, 2, 1, 4)
    y = out.tensor.numpy()
    if channel_first:
        assert layer.output.feature_dim_axis == 1 and y.shape == (3, 4, 7, 5)
        y = np.transpose(y, [0, 2, 3, 1])
    else:
        assert layer.output.batch_shape == (None, None, 5, 4)
    assert layer.output.time_dim == data.time_dim and out.seq_len is val.seq_len
    for bi, n in enumerate(LENS):
        ref = np_conv2d_same(x[bi, :n, :, None], w, b)
        np.testing.assert_allclose(y[bi, :n], ref, atol=1e-4)
    merged = make("merge_dims", {"axes": "except_time"}, [layer.output], name="m")
    merged_out = run(merged, [out])
    assert merged_out.tensor.shape == ((3, 20, 7) if channel_first else (3, 7, 20))  # merged where F was
    assert merged_out.data.dim == 20 and merged_out.data.time_dim == data.time_dim


def test_conv2d_strided_valid_and_pool2d():
    data, val, _ = btf(6, garbage=0.0)
    x = val.tensor.numpy()  # shape layers move values, padding included
    conv = make("conv", {"filter_size": (3, 3), "strides": (2, 2), "padding": "valid", "n_out": 2,
                         "input_add_feature_dim": True, "with_bias": True}, [data], name="c")
    out = run(conv, [val])
    assert out.tensor.shape[2] == 2 and conv.output.dims[2].dimension == 2
    np.testing.assert_array_equal(out.seq_len.numpy(), [3, 1, 0])
    w, b = conv.W.numpy(), conv.bias.numpy()
    for bi, n in enumerate(LENS):
        full = np.array([[np.einsum("ijc,ijcn->n", x[bi, t:t + 3, f:f + 3, None], w) + b
                          for f in range(0, 4, 2)] for t in range(0, max(n - 2, 0), 2)]).reshape(-1, 2, 2)
        np.testing.assert_allclose(out.tensor.numpy()[bi, :len(full)], full, atol=1e-4)
    pool = make("pool", {"mode": "max", "pool_size": (2, 2), "padding": "same", "input_add_feature_dim": True},
                [data], name="p")
    pout = run(pool, [val])
    assert pout.tensor.shape == (3, 4, 3, 1)
    np.testing.assert_array_equal(pout.seq_len.numpy(), [4, 2, 1])
    for bi, n in enumerate(LENS):
        real = x[bi, :n]
        for t in range(-(-n // 2)):
            for f in range(3):
                np.testing.assert_allclose(pout.tensor.numpy()[bi, t, f, 0], real[2 * t:2 * t + 2, 2 * f:2 * f + 2].max())
    with pytest.raises(NetworkError, match="'c'.*filter_size.*2 entries.*1 spatial"):
        make("conv", {"filter_size": (3, 3), "n_out": 2}, [data], name="c")


def test_avg_pool2d_counts_padded_frames_as_zeros():
    """RETURNN (use_time_mask False): padded frames inside the batch count as zeros (RETURNN takes
    them as they are); window padding beyond the batch's extent is not counted (TF's SAME)."""
    data, val, _ = btf(4, garbage=0.0)
    x = val.tensor.numpy()
    pool = make("pool", {"mode": "avg", "pool_size": (3, 2), "strides": (1, 2), "padding": "same",
                         "input_add_feature_dim": True}, [data])
    out = run(pool, [val])
    assert out.tensor.shape == (3, 7, 2, 1) and out.seq_len is val.seq_len
    for bi, n in enumerate(LENS):
        frames = np.concatenate([x[bi, :n], np.zeros_like(x[bi, n:])])  # padded frames: zeros
        real = np.pad(frames, [(1, 1), (0, 0)], constant_values=np.nan)  # same: 1 left, 1 right in time
        for t in range(n):
            for f in range(2):
                ref = np.nanmean(real[t:t + 3, 2 * f:2 * f + 2])
                np.testing.assert_allclose(out.tensor.numpy()[bi, t, f, 0], ref, rtol=1e-5)


def test_conv_input_split_feature_dim_and_expand_dims():
    data, val, x = btf(6, garbage=0.0)
    split = make("conv", {"filter_size": (1, 2), "padding": "valid", "n_out": 2, "input_split_feature_dim": 2,
                          "with_bias": False}, [data], name="split")
    out = run(split, [val])
    assert split.W.numpy().shape == (1, 2, 2, 2) and out.tensor.shape == (3, 7, 2, 2)  # F 6 -> (3 spatial, 2)
    xs = x.reshape(3, 7, 3, 2)
    ref = np.einsum("btfc,fcn->btn", xs[:, :, 0:2], split.W.numpy()[0])
    np.testing.assert_allclose(out.tensor.numpy()[0, :, 0], ref[0], atol=1e-5)
    expand = make("conv", {"filter_size": (3, 1), "padding": "same", "n_out": 2, "input_expand_dims": 1}, [data],
                  name="expand")
    out = run(expand, [val])
    assert out.tensor.shape == (3, 7, 1, 2) and expand.W.numpy().shape == (3, 1, 6, 2)
    assert out.seq_len is val.seq_len


@pytest.mark.parametrize("groups,n_out,stride,dilation", [(4, 4, 1, 1), (4, 8, 2, 1), (2, 4, 1, 2), (4, 4, 1, 3)])
def test_grouped_and_depthwise_conv_1d(groups, n_out, stride, dilation):
    data, val, _ = btf(4, garbage=0.0)
    clean = val.tensor.numpy()
    layer = make("conv", {"filter_size": (3,), "groups": groups, "n_out": n_out, "padding": "same",
                          "strides": stride, "dilation_rate": dilation, "with_bias": True}, [data])
    out = run(layer, [val])
    w, b = layer.W.numpy(), layer.bias.numpy()  # (3, 4 / groups, n_out)
    assert w.shape == (3, 4 // groups, n_out)
    k_eff = 2 * dilation + 1
    gi, go = 4 // groups, n_out // groups
    for bi, n in enumerate(LENS):
        seq = np.pad(clean[bi, :n], [((k_eff - 1) // 2, k_eff - 1 - (k_eff - 1) // 2), (0, 0)])
        ref = []
        for t in range(0, n, stride):
            frame = np.zeros(n_out, np.float32)
            for g in range(groups):
                window = seq[t:t + k_eff:dilation, g * gi:(g + 1) * gi]  # (3, gi)
                frame[g * go:(g + 1) * go] = np.einsum("ki,kio->o", window, w[:, :, g * go:(g + 1) * go])
            ref.append(frame + b)
        np.testing.assert_allclose(out.tensor.numpy()[bi, :len(ref)], np.array(ref), atol=1e-4)
    with pytest.raises(NetworkError, match="'lay'.*groups 3"):
        make("conv", {"filter_size": (3,), "groups": 3, "n_out": 6}, [data])


def test_depthwise_conv_2d():
    data, val, _ = btf(6, garbage=0.0)
    x = val.tensor.numpy().reshape(3, 7, 3, 2)  # input_split_feature_dim 2: (T, 3 spatial, 2 channels)
    layer = make("conv", {"filter_size": (2, 2), "groups": 2, "n_out": 4, "padding": "valid",
                          "input_split_feature_dim": 2, "with_bias": True}, [data])
    out = run(layer, [val])
    w, b = layer.W.numpy(), layer.bias.numpy()  # (2, 2, 1, 4): channel c feeds outputs 2c, 2c+1
    for bi, n in enumerate(LENS):
        for t in range(n - 1):
            for f in range(2):
                ref = [np.sum(x[bi, t:t + 2, f:f + 2, o // 2] * w[:, :, 0, o]) + b[o] for o in range(4)]
                np.testing.assert_allclose(out.tensor.numpy()[bi, t, f], ref, atol=1e-4)


def test_swap_axes_pool_dilation_and_softmax_on_channel_first():
    data, val, _ = btf(4)
    x = val.tensor.numpy()
    swap = make("swap_axes", {"axis1": "T", "axis2": "F"}, [data], name="swap")
    out = run(swap, [val])
    np.testing.assert_array_equal(out.tensor.numpy(), np.transpose(x, [0, 2, 1]))
    assert swap.output.feature_dim == data.feature_dim and swap.output.time_dim == data.time_dim
    soft = make("activation", {"activation": "softmax"}, [swap.output], name="soft")
    probs = run(soft, [out]).tensor.numpy()  # softmax over the feature axis, which is moved last
    assert soft.output.feature_dim_axis == 2
    np.testing.assert_allclose(probs[0], np.exp(x[0]) / np.exp(x[0]).sum(-1, keepdims=True), rtol=1e-5)
    pool = make("pool", {"mode": "max", "pool_size": (2,), "dilation_rate": 2, "strides": 1}, [data], name="p")
    pout = run(pool, [val])
    np.testing.assert_array_equal(pout.seq_len.numpy(), np.maximum(LENS - 2, 0))
    for bi, n in enumerate(LENS):
        k = max(n - 2, 0)
        ref = np.maximum(x[bi, :k], x[bi, 2:2 + k])
        np.testing.assert_allclose(pout.tensor.numpy()[bi, :len(ref)], ref)
    with pytest.raises(NetworkError, match="strides > 1 together with dilation_rate > 1"):  # TF's pool (RETURNN) too
        make("pool", {"mode": "max", "pool_size": (2,), "dilation_rate": 2, "strides": 2}, [data], name="p2")
    with pytest.raises(NetworkError, match="padding 'same' together with dilation_rate > 1"):  # tf.nn.pool refuses
        make("pool", {"mode": "avg", "pool_size": (3,), "dilation_rate": 2, "strides": 1, "padding": "same"}, [data])
    make("pool", {"mode": "max", "pool_size": (1,), "dilation_rate": 2, "strides": 1, "padding": "same"}, [data])
    assert make("copy", {"batch_norm": True}, [data]).post_bn is not None  # RETURNN's batch norm of the output
    assert make("copy", {"batch_norm": False}, [data]).post_bn is None


@pytest.mark.parametrize("t_max", [5, 7])
def test_strided_same_conv_pads_as_tf_on_the_padded_length(t_max):
    """RETURNN runs TF's SAME on the padded tensor: with strides the left padding follows the
    batch's longest length T (k 3, stride 3: T 5 pads 0 left, T 7 pads 1), not the sequence's."""
    data, val, x = make_btf(2, [t_max, 3], seed=3)
    conv = make("conv", {"filter_size": [3], "strides": 3, "padding": "same", "n_out": 1, "with_bias": False}, [data])
    out = run(conv, [val]).tensor.numpy()
    w = conv.W.numpy()[:, :, 0]  # (3, 2)
    total = max((-(-t_max // 3) - 1) * 3 + 3 - t_max, 0)
    for bi, n in enumerate([t_max, 3]):
        padded = np.concatenate([np.zeros((total // 2, 2)), x[bi, :n], np.zeros((t_max + 3, 2))])
        for t in range(-(-n // 3)):
            np.testing.assert_allclose(out[bi, t, 0], (padded[3 * t:3 * t + 3] * w).sum(), rtol=1e-5, atol=1e-6)


def test_pad_seq_len_to_power_refused_only_where_it_changes_the_windows():
    data, _, _ = make_btf(2, [5, 3])
    make("conv", {"filter_size": [3], "padding": "same", "n_out": 1, "pad_seq_len_to_power": 1.5}, [data])
    make("conv", {"filter_size": [3], "strides": 2, "padding": "valid", "n_out": 1, "pad_seq_len_to_power": 1.5},
         [data])
    with pytest.raises(NetworkError, match="pad_seq_len_to_power.*strides and padding 'same'"):
        make("conv", {"filter_size": [3], "strides": 2, "padding": "same", "n_out": 1, "pad_seq_len_to_power": 1.5},
             [data])
