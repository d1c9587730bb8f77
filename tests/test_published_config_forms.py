"""Forms of published RETURNN configs found by benchmarks/published_configs.py (issue 27) that failed
here, each checked on a small network."""
from __future__ import annotations

import numpy as np

from helpers import outputs
from returnn.tensor import Data
from returnn.tf.network import TFNetwork
from returnn.tf.returnn_params import returnn_param_shapes, returnn_param_values


def test_transposed_conv_sharing_its_kernel_is_saved_once():
    """The conformer hybrid configs upsample with 1-D transposed convs that share one kernel
    (reuse_params): RETURNN's names list the kernel once, under its owner, in RETURNN's 2-D layout."""
    extern = {"data": Data("data", shape=(None, 4))}
    net = TFNetwork(outputs({
        "up": {"class": "transposed_conv", "from": "data", "filter_size": [3], "strides": [3], "n_out": 4},
        "up2": {"class": "transposed_conv", "from": "data", "filter_size": [3], "strides": [3], "n_out": 4,
                "reuse_params": "up"},
        "output": {"class": "combine", "kind": "add", "from": ["up", "up2"]}}), extern)
    # RETURNN's dim math: both upsample the same time axis by the same formula, so one axis (added elementwise)
    assert net.layers["up"].output.dims[1] is net.layers["up2"].output.dims[1]
    assert net.layers["output"].output.batch_ndim == 3
    shapes = returnn_param_shapes(net)
    assert [name for name in shapes if "W_native_transposed_conv" in name] == ["up/W_native_transposed_conv"]
    assert shapes["up/W_native_transposed_conv"] == (3, 1, 4, 4)
    value = returnn_param_values(net)["up/W_native_transposed_conv"]
    np.testing.assert_array_equal(value[:, 0], net.layers["up"].W.numpy())
    assert net.layers["up2"].W is net.layers["up"].W


def test_new_conv_and_pool_axes_have_returnn_names():
    """RETURNN names an axis a conv or pool layer makes '<layer>:conv:s<i>' (i: its spatial axes'
    index); configs address it so (the factored hybrid configs: 'stag:conv0p:conv:s1')."""
    extern = {"data": Data("data", shape=(None, 8, 1))}
    net = TFNetwork(outputs({
        "conv0p": {"class": "pool", "from": "data", "mode": "max", "padding": "same", "pool_size": (1, 2),
                   "strides": (1, 2), "in_spatial_dims": ["T", "dim:8"]},
        "output": {"class": "merge_dims", "from": "conv0p", "axes": ["stag:conv0p:conv:s1", "dim:1"]}}), extern)
    pooled = net.layers["conv0p"].output
    assert [d.description for d in pooled.dims if d.dimension == 4] == ["conv0p:conv:s1"]
    assert pooled.dims[pooled.time_dim_axis] is net.extern_data["data"].dims[1]  # stride 1, same: the input axis
    assert net.layers["output"].output.dims[-1].dimension == 4


def test_rec_unit_with_location_aware_attention_settles_its_prev_shapes():
    """Tacotron2's decoder (returnn-experiments 2021-tts-asr-librispeech100h): 'prev:accum_att_weights'
    is padded along the encoder axis and 'prev:att0' feeds an LSTM cell before either is built. The
    assumed templates follow the sources' axes (a linear with n_out over 'base:' frames keeps them; a
    generic_attention is its base without the attended axis), so the unit builds at once and trains."""
    import tensorflow as tf
    from returnn.config import Config
    from returnn.extern_data import extern_data_from_config
    from returnn.tensor import SpatialDim
    from returnn.tf.layers import RunContext
    dec = SpatialDim("dec")
    extern = extern_data_from_config(Config({"extern_data": {
        "data": {"dim": 3}, "target": {"dim": 4, "shape": (None, 4), "same_dim_tags_as": {"t": dec}}}}))
    unit = {
        "s": {"class": "rnn_cell", "unit": "LSTMBlock", "from": ["prev:target_frame", "prev:att0"], "n_out": 5},
        "target_frame": {"class": "copy", "from": "data:target"},
        "pad": {"class": "pad", "axes": "s:0", "padding": ((2, 2),), "from": ["prev:accum_att_weights"], "value": 0},
        "conv": {"class": "conv", "filter_size": (5,), "padding": "valid", "n_out": 2, "from": ["pad"],
                 "activation": None},
        "loc": {"class": "linear", "activation": None, "with_bias": False, "n_out": 6, "from": ["conv"]},
        "s_tr": {"class": "linear", "activation": None, "n_out": 6, "from": ["s"]},
        "energy_in": {"class": "combine", "kind": "add", "from": ["base:enc_ctx", "s_tr", "loc"], "n_out": 6},
        "energy": {"class": "linear", "activation": "tanh", "n_out": 1, "with_bias": False, "from": ["energy_in"]},
        "att_weights": {"class": "softmax_over_spatial", "from": ["energy"]},
        "accum_att_weights": {"class": "combine", "kind": "add", "from": ["prev:accum_att_weights", "att_weights"]},
        "att0": {"class": "generic_attention", "base": "base:encoder", "weights": "att_weights"},
        "output": {"class": "linear", "activation": None, "from": ["s", "att0"], "n_out": 4, "target": "target",
                   "loss": "mse"}}
    net = TFNetwork(outputs({
        "encoder": {"class": "linear", "activation": "tanh", "n_out": 7, "from": "data"},
        "enc_ctx": {"class": "linear", "activation": None, "n_out": 6, "from": "encoder"},
        "output": {"class": "rec", "from": [], "target": "target", "unit": unit}}), extern)
    rec = net.layers["output"]
    assert rec.sub_layers()["att0"].output.dim == 7
    rng = np.random.RandomState(0)
    batch = {"data": tf.constant(rng.randn(2, 5, 3).astype(np.float32)), "data:seq_len": tf.constant([5, 3]),
             "target": tf.constant(rng.randn(2, 4, 4).astype(np.float32)), "target:seq_len": tf.constant([4, 2])}
    out = net.forward(batch, RunContext(True))
    loss = net.compute_losses(out, batch)["output/output"]
    assert np.isfinite(float(loss.loss_sum)) and float(loss.norm) == 6


def test_rec_unit_with_split_head_attention_still_builds():
    """The attention configs of returnn-experiments (2018-asr-attention & co.): 'prev:att' is a
    merge_dims of a generic_attention over a split_dims base (heads, features), read by the LSTM cell
    before it is built; the first assumptions ((batch, feature)) settle in rounds as before."""
    import tensorflow as tf
    from returnn.config import Config
    from returnn.extern_data import extern_data_from_config
    from returnn.tf.layers import RunContext
    extern = extern_data_from_config(Config({"extern_data": {
        "data": {"dim": 3}, "classes": {"dim": 6, "sparse": True}}}))
    unit = {
        "target_embed": {"class": "linear", "activation": None, "with_bias": False, "from": ["output"], "n_out": 4,
                         "initial_output": 0},
        "s": {"class": "rnn_cell", "unit": "LSTMBlock", "from": ["prev:target_embed", "prev:att"], "n_out": 5},
        "s_tr": {"class": "linear", "activation": None, "with_bias": False, "from": ["s"], "n_out": 6},
        "energy_in": {"class": "combine", "kind": "add", "from": ["base:enc_ctx", "s_tr"], "n_out": 6},
        "energy_tanh": {"class": "activation", "activation": "tanh", "from": ["energy_in"]},
        "energy": {"class": "linear", "activation": None, "with_bias": False, "from": ["energy_tanh"], "n_out": 1},
        "att_weights": {"class": "softmax_over_spatial", "from": ["energy"]},
        "att0": {"class": "generic_attention", "weights": "att_weights", "base": "base:enc_value"},
        "att": {"class": "merge_dims", "axes": "except_batch", "from": ["att0"]},
        "readout": {"class": "linear", "activation": "tanh", "from": ["s", "prev:target_embed", "att"], "n_out": 5},
        "output_prob": {"class": "softmax", "from": ["readout"], "target": "classes", "loss": "ce"},
        "output": {"class": "choice", "target": "classes", "beam_size": 2, "from": ["output_prob"],
                   "initial_output": 0}}
    net = TFNetwork(outputs({
        "encoder": {"class": "linear", "activation": "tanh", "n_out": 7, "from": "data"},
        "enc_ctx": {"class": "linear", "activation": None, "n_out": 6, "from": "encoder"},
        "enc_value": {"class": "split_dims", "axis": "F", "dims": (1, 7), "from": "encoder"},
        "output": {"class": "rec", "from": [], "target": "classes", "unit": unit}}), extern)
    assert net.layers["output"].sub_layers()["att"].output.dim == 7
    rng = np.random.RandomState(0)
    batch = {"data": tf.constant(rng.randn(2, 5, 3).astype(np.float32)), "data:seq_len": tf.constant([5, 3]),
             "classes": tf.constant(rng.randint(0, 6, (2, 4)).astype(np.int32)),
             "classes:seq_len": tf.constant([4, 2])}
    out = net.forward(batch, RunContext(True))
    assert np.isfinite(float(net.compute_losses(out, batch)["output/output_prob"].loss_sum))


def test_training_feeds_only_the_data_keys_of_built_layers():
    """jotix16's RNA config has an unused eval layer on 'data:bpe', a key its training extern_data does
    not declare (only search does): RETURNN does not build the layer, so training needs no 'bpe'."""
    from returnn.config import Config
    from returnn.extern_data import extern_data_from_config
    extern = extern_data_from_config(Config({"extern_data": {"data": {"dim": 3}, "classes": {"dim": 4, "sparse": True}}}))
    net = TFNetwork({
        "unused": {"class": "copy", "from": "data:bpe"},
        "output": {"class": "softmax", "from": "data", "target": "classes", "loss": "ce"}}, extern)
    assert "unused" not in net.layers
    assert net.required_data_keys(with_targets=True) == ["data", "classes"]


def test_embedding_of_a_label_outside_the_sparse_dim_is_a_zero_row():
    """The 2020 RNA configs prefix the targets (dim 1030) with the blank index 1030 and embed them with a
    linear layer: TensorFlow's gather on GPU (where RETURNN ran them) gives a zero row; so here on any
    device (was an InvalidArgumentError on CPU). The gradient stays sparse rows of W."""
    import tensorflow as tf
    from returnn.tf.layers import RunContext
    net = TFNetwork(outputs({"prefixed": {"class": "prefix_in_time", "from": "data:classes", "prefix": 5},
                             "output": {"class": "linear", "activation": None, "from": "prefixed", "n_out": 3}}),
                    {"classes": Data("classes", dim=5, sparse=True), "data": Data("data", shape=(None, 2))})
    labels = np.array([[1, 4, 2], [3, 0, 0]], np.int32)
    batch = {"classes": tf.constant(labels), "classes:seq_len": tf.constant([3, 1])}
    layer = net.layers["output"]
    with tf.GradientTape() as tape:
        out = net.forward(batch, RunContext(False), only=["output"])["output"]
        loss = tf.reduce_sum(out.masked(0.0))
    y, w, b = out.tensor.numpy(), layer.W.numpy(), layer.bias.numpy()
    np.testing.assert_allclose(y[:, 0], np.tile(b, (2, 1)), rtol=1e-6)  # the prefix 5: no row of W
    np.testing.assert_allclose(y[0, 1:4], w[labels[0]] + b, rtol=1e-6)
    np.testing.assert_allclose(y[1, 1], w[3] + b, rtol=1e-6)
    grad = tape.gradient(loss, layer.W)
    assert isinstance(grad, tf.IndexedSlices)
    np.testing.assert_allclose(tf.convert_to_tensor(grad).numpy().sum(-1), [0, 3, 3, 3, 3])


def test_rec_unit_reads_prev_of_a_switch_before_it_is_built():
    """The many-to-one speech translation configs (2019-e2e-speech-to-text-comparison): 'att' is a switch
    on a per-sequence condition (B,) between two attention contexts, read as 'prev:att' by the LSTM
    before it is built: its assumed template is the values' (B, F), not the condition's (B,)."""
    import tensorflow as tf
    from returnn.tf.layers import RunContext
    unit = {
        "s": {"class": "rnn_cell", "unit": "LSTMBlock", "from": ["data:source", "prev:att"], "n_out": 4},
        "att_a": {"class": "linear", "activation": None, "from": "s", "n_out": 3, "is_output_layer": True},
        "att_b": {"class": "linear", "activation": "tanh", "from": "s", "n_out": 3, "is_output_layer": True},
        "att": {"class": "switch", "condition": "base:long", "true_from": "att_a", "false_from": "att_b",
                "is_output_layer": True},
        "output": {"class": "copy", "from": "att"}}
    net = TFNetwork(outputs({
        "len": {"class": "length", "from": "data"},
        "long": {"class": "compare", "from": "len", "kind": "greater", "value": 3},
        "output": {"class": "rec", "from": "data", "unit": unit}}), {"data": Data("data", shape=(None, 2))})
    assert net.layers["output"].sub_layers()["att"].output.dim == 3
    x = np.random.RandomState(0).randn(2, 5, 2).astype(np.float32)
    out = net.forward({"data": tf.constant(x), "data:seq_len": tf.constant([5, 3])}, RunContext(False))
    a, b, att = (out["output/" + n].tensor.numpy() for n in ("att_a", "att_b", "att"))
    np.testing.assert_allclose(att[0, :5], a[0, :5], rtol=1e-6)  # length 5 > 3: true_from
    np.testing.assert_allclose(att[1, :3], b[1, :3], rtol=1e-6)
