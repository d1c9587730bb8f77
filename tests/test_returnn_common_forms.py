"""Forms of the config code rwth-i6/returnn_common serializes (benchmarks/returnn_common_nets.py): its
``from returnn.tensor.marked_dim import ImplicitDynSizeDim, ImplicitSparseDim`` and the marked dims in
``out_shape``, ``extern_data`` entries with ``'version': 1``, dim math with ``div_left`` and negative
terms, ``Dim.copy(match_priority=...)`` (RETURNN: same as the dim, first to match)."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from returnn.config import load_config_from_args
from returnn.errors import ConfigError, NetworkError
from returnn.extern_data import extern_data_from_config, size_key
from returnn.tensor import Data, Dim, batch_dim
from returnn.tensor.axes import resolve_axis
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork

CONFIG = """#!rnn.py
from returnn.tensor import Dim, batch_dim, single_step_dim
from returnn.tensor.marked_dim import ImplicitDynSizeDim, ImplicitSparseDim

use_tensorflow = True
behavior_version = 16

time_dim = Dim(description='time', dimension=None, kind=Dim.Types.Spatial)
input_dim = Dim(description='input', dimension=4, kind=Dim.Types.Feature)
classes_dim = Dim(description='classes', dimension=5, kind=Dim.Types.Feature)
extern_data = {
  'data': {'dim_tags': [batch_dim, time_dim, input_dim], 'dtype': 'float32', 'version': %(version)s,
           'available_for_inference': True},
  'classes': {'dim_tags': [batch_dim, time_dim], 'sparse_dim': classes_dim, 'dtype': 'int32', 'version': 1},
}
network = {
  'range': {'class': 'range_in_axis', 'from': 'data:data', 'axis': time_dim, 'dtype': 'float32',
            'out_shape': {ImplicitDynSizeDim(batch_dim), time_dim}},
  'labels': {'class': 'copy', 'from': 'data:classes', 'out_shape': %(labels_shape)s},
  'output': {'class': 'combine', 'kind': 'add', 'from': ['data:data', 'range'],
             'out_shape': {batch_dim, time_dim, input_dim}},
}
"""


def _net(tmp_path, version: int = 1, labels_shape: str = "{batch_dim, time_dim, ImplicitSparseDim(classes_dim)}"):
    path = tmp_path / "rc.config"
    path.write_text(CONFIG % dict(version=version, labels_shape=labels_shape))
    config = load_config_from_args([str(path)])
    extern = extern_data_from_config(config)
    net = TFNetwork(dict(config.typed_value("network"), labels=dict(config.typed_value("network")["labels"],
                                                                     is_output_layer=True)), extern)
    return net, extern


def test_marked_dims_in_out_shape(tmp_path):
    """RETURNN's verify_out_shape: a batch-less range over the time axis has the batch implicitly (its
    lengths are per sequence), a sparse copy its sparse dim; both named marked as returnn_common writes them.
    The old code had no returnn.tensor.marked_dim (the config failed at its import) and took no markers."""
    net, extern = _net(tmp_path)
    x = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    batch = {"data": tf.constant(x), size_key("data", extern["data"], 1): tf.constant([3, 2]),
             "classes": tf.zeros([2, 3], tf.int32), size_key("classes", extern["classes"], 1): tf.constant([3, 2])}
    out = net.forward(batch, RunContext(False), only=["output"])["output"]
    np.testing.assert_allclose(np.asarray(out.tensor)[:, :2], x[:, :2] + np.arange(2)[None, :, None])
    # RETURNN: an implicit dim left out of out_shape is missing; a marker of a dim that is an axis is wrong
    with pytest.raises(NetworkError, match="missing in 'out_shape': classes"):
        _net(tmp_path, labels_shape="{batch_dim, time_dim}")
    with pytest.raises(NetworkError, match="is not an implicit dim"):
        _net(tmp_path, labels_shape="{batch_dim, ImplicitSparseDim(time_dim), ImplicitSparseDim(classes_dim)}")


def test_extern_data_version(tmp_path):
    """'version': 1 is RETURNN's Tensor with its default axes (as this engine's); 2 (no default axes) is
    refused in one line. The old code refused the key whatever its value."""
    _, extern = _net(tmp_path)
    assert extern["data"].feature_dim_axis == 2
    with pytest.raises(ConfigError, match="'version' 2 is not supported"):
        _net(tmp_path, version=2)


def test_dim_math_of_returnn_common():
    """RETURNN: ``a.div_left(b)`` is a / b (b the left factor: the dim per head); the old code computed
    b / a ('does not divide exactly'). A term ``window * -1`` of a sum is kept (size -3), the old code
    refused it. ``Dim.copy()`` is the same dim unless same_as_self=False (the old code: never)."""
    key, heads = Dim(21, description="key"), Dim(3, description="heads")
    assert key.div_left(heads).dimension == 7 and Dim(7, description="a").ceildiv_left(2).dimension == 4
    assert (heads * key.div_left(heads)).div_left(heads) is key.div_left(heads)
    window, time = Dim(3, description="window"), Dim(None, description="time")
    assert (window * -1).dimension == -3
    assert (window.ceildiv_right(2) + (-1) + window // 2).dimension == 2
    padded = window.ceildiv_right(2) + (-1) + time + (window // 2)
    assert padded.dimension is None
    assert window.copy() == window and window.copy(match_priority=1) == window
    assert window.copy(same_as_self=False, description="other") != window
    with pytest.raises(ValueError, match="needs a new description"):
        window.copy(same_as_self=False)


def test_match_priority_picks_the_axis():
    """RETURNN's get_axis_from_description: of two equal axes the one of the higher match_priority (a
    square weight [in.copy(match_priority=1), in]); the old code found the axis not unique."""
    feat = Dim(4, description="in")
    data = Data("w", dims=[feat.copy(match_priority=1), feat])
    assert resolve_axis(data, feat) == 0
    with pytest.raises(Exception, match="not unique"):
        resolve_axis(Data("w", dims=[feat.copy(), feat]), feat)
    assert batch_dim.match_priority == 0


VARIABLE_CONFIG = """#!rnn.py
from returnn.tensor import Dim, batch_dim

behavior_version = 16
time_dim = Dim(description='time', dimension=None, kind=Dim.Types.Spatial)
in_dim = Dim(description='in', dimension=3, kind=Dim.Types.Feature)
extern_data = {'data': {'dim_tags': [batch_dim, time_dim, in_dim], 'dtype': 'float32', 'version': 1}}
network = {
  'Parameter.initial': {'class': 'random', 'shape': (in_dim, in_dim.copy(match_priority=1)), 'distribution': 'normal',
                        'stddev': 0.5, 'dtype': 'float32', 'static': True, 'shape_deps': []},
  'weight': {'class': 'variable', 'shape': [in_dim.copy(match_priority=1), in_dim], 'param_name': 'param',
             'dtype': 'float32', 'init_by_layer': %(init)r},
  'sub': {'class': 'subnetwork', 'from': [], 'subnetwork': {'output': {'class': 'copy', 'from': 'base:Parameter.initial'}}},
  'output': {'class': 'dot', 'from': ['data:data', 'weight'], 'reduce': in_dim,
             'out_shape': {batch_dim, time_dim, in_dim}},
}
"""


@pytest.mark.parametrize("init", ["Parameter.initial", "sub"])
def test_variable_of_dims_initialized_by_a_layer(tmp_path, init):
    """returnn_common's parameters: RETURNN's variable layer with a shape of Dims, its initial value a static
    random layer's (init_by_layer, the random value's axes matched to the shape by dim, the higher
    match_priority first: here transposed; also through a sub-network's copy of it, as returnn_common's
    deep-copied modules); the dot reduces the weight's axis of match_priority 1. The old code refused Dims
    in 'shape' and init_by_layer."""
    path = tmp_path / "var.config"
    path.write_text(VARIABLE_CONFIG % dict(init=init))
    config = load_config_from_args([str(path)])
    extern = extern_data_from_config(config)
    layers = dict(config.typed_value("network"))
    layers["Parameter.initial"] = dict(layers["Parameter.initial"], is_output_layer=True)
    net = TFNetwork(layers, extern)
    x = np.random.RandomState(0).normal(size=(2, 3, 3)).astype(np.float32)
    batch = {"data": tf.constant(x), size_key("data", extern["data"], 1): tf.constant([3, 3])}
    res = net.forward(batch, RunContext(False), only=["output", "Parameter.initial"])
    init = np.asarray(res["Parameter.initial"].tensor)
    weight = np.asarray(tf.convert_to_tensor(net.layers["weight"].var))
    np.testing.assert_allclose(weight, init.T)
    assert [d.match_priority for d in net.layers["weight"].output.dims] == [1, 0]
    np.testing.assert_allclose(np.asarray(res["output"].tensor), x @ weight, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("ref", ["split/0", "base:split/0"])
def test_sub_output_of_a_layer_in_a_sub_network(ref):
    """RETURNN: a sub-network's layer reads a split's part as 'split/0' (returnn_common's self-attention:
    'base:split/0' from the nested dot_attention); the old code took 'self_att' as the layer with the
    sub-output 'split/0' of the flattened name 'self_att/split/0' ("unknown layer")."""
    time, feat = Dim(None, description="time"), Dim(6, description="f", kind="feature")
    a, b = Dim(2, description="a", kind="feature"), Dim(4, description="b", kind="feature")
    extern = {"data": Data("data", dims=[batch_dim, time, feat])}
    inner = {"split": {"class": "split", "from": "data", "axis": feat, "out_dims": (a, b)}}
    if ref.startswith("base:"):
        inner["inner"] = {"class": "subnetwork", "from": [], "subnetwork": {"output": {"class": "copy", "from": ref}}}
        inner["output"] = {"class": "copy", "from": "inner"}
    else:
        inner["output"] = {"class": "copy", "from": ref}
    net = TFNetwork({"s": {"class": "subnetwork", "from": "data", "subnetwork": inner},
                     "output": {"class": "copy", "from": "s"}}, extern)
    x = np.arange(2 * 3 * 6, dtype=np.float32).reshape(2, 3, 6)
    out = net.forward({"data": tf.constant(x), size_key("data", extern["data"], 1): tf.constant([3, 2])},
                      RunContext(False), only=["output"])["output"]
    np.testing.assert_allclose(np.asarray(out.tensor), x[..., :2])


def _run(layers, extern, x, lens, names=("output",)):
    net = TFNetwork(layers, extern)
    batch = {"data": tf.constant(x), size_key("data", extern["data"], 1): tf.constant(lens)}
    return net, net.forward(batch, RunContext(False), only=list(names))


def test_conv_in_dim_out_spatial_dims_and_merge_dims_out_dim():
    """RETURNN's conv takes 'in_dim' (the channel axis) and 'out_spatial_dims' (the computed output axes
    declared the same as these); merge_dims declares its merged dim the same as 'out_dim' (returnn_common
    gives all three, e.g. its conformer's frontend). The old code refused in_dim/out_spatial_dims and made a
    merged dim of its own (the out_shape naming out_dim then failed)."""
    time, feat, chan = Dim(None, description="time"), Dim(3, description="f", kind="feature"), \
        Dim(2, description="c", kind="feature")
    out_time = time.ceildiv_right(2)
    extern = {"data": Data("data", dims=[batch_dim, time, feat])}
    layers = {
        "conv": {"class": "conv", "from": "data", "in_dim": feat, "out_dim": chan, "filter_size": [3],
                 "padding": "same", "strides": 2, "in_spatial_dims": [time], "out_spatial_dims": [out_time],
                 "with_bias": True, "out_shape": {batch_dim, out_time, chan}},
        "output": {"class": "merge_dims", "from": "conv", "axes": [out_time, chan], "out_dim": Dim(None, description="m"),
                   "is_output_layer": True}}
    x = np.random.RandomState(1).normal(size=(2, 5, 3)).astype(np.float32)
    net, res = _run(layers, extern, x, [5, 3], ("conv", "output"))
    assert net.layers["conv"].output.dims[1] == out_time
    w = np.asarray(tf.convert_to_tensor(net.layers["conv"].own_params["W"]))
    b = np.asarray(tf.convert_to_tensor(net.layers["conv"].own_params["bias"]))
    xp = np.pad(x, [(0, 0), (1, 1), (0, 0)])
    ref = np.stack([np.einsum("bkf,kfc->bc", xp[:, 2 * t:2 * t + 3], w) + b for t in range(3)], 1)
    np.testing.assert_allclose(np.asarray(res["conv"].tensor), ref, rtol=1e-5, atol=1e-5)
    assert res["conv"].sizes[out_time].numpy().tolist() == [3, 2]
    with pytest.raises(NetworkError, match="'out_spatial_dims': cannot declare"):
        TFNetwork({"output": dict(layers["conv"], out_spatial_dims=[Dim(4, description="four")], out_shape=None)},
                  extern)
    static = {"data": Data("data", dims=[batch_dim, Dim(4, description="s"), feat])}
    s_dim, m_dim = static["data"].dims[1], static["data"].dims[1] * feat
    net = TFNetwork({"output": {"class": "merge_dims", "from": "data", "axes": [s_dim, feat], "out_dim": m_dim,
                                "out_shape": {batch_dim, m_dim}}}, static)
    assert net.layers["output"].output.dims[1] == m_dim


def test_length_and_range_of_a_dim_math_axis():
    """RETURNN's length and range_in_axis read any dim: a dim-math dim of the source's axes (returnn_common's
    relative positional encoding: range over time + -1, the length of time.ceildiv_right(4)), and
    range_in_axis takes no source for a static Dim. The old code found no such axis in the source."""
    time, feat = Dim(None, description="time"), Dim(4, description="f", kind="feature")
    shorter, quarter = time + (-1), time.ceildiv_right(4)
    extern = {"data": Data("data", dims=[batch_dim, time, feat])}
    layers = {"len": {"class": "length", "from": "data", "axis": quarter, "is_output_layer": True},
              "range": {"class": "range_in_axis", "from": "data", "axis": shorter, "is_output_layer": True},
              "static": {"class": "range_in_axis", "from": [], "axis": feat, "is_output_layer": True},
              "output": {"class": "copy", "from": "data"}}
    x = np.zeros((2, 9, 4), np.float32)
    _, res = _run(layers, extern, x, [9, 5], ("len", "range", "static"))
    assert np.asarray(res["len"].tensor).tolist() == [3, 2]
    assert np.asarray(res["range"].tensor).tolist() == list(range(8))
    assert res["range"].sizes[shorter].numpy().tolist() == [8, 4]
    assert np.asarray(res["static"].tensor).tolist() == [0, 1, 2, 3]


def test_constant_filled_to_dims_of_shape_deps():
    """RETURNN's constant: a scalar filled to a shape of batch and dynamic Dims, their sizes from the layers
    of 'shape_deps' (also 'base:' ones of a sub-network: list-valued layer options are mapped there);
    'sparse_dim' makes the values class indices (returnn_common's ones_like, zeros, prev_target_seq). The
    old code refused shape_deps and sparse_dim (and did not map lists of layers in sub-networks)."""
    from returnn.tensor.marked_dim import ImplicitSparseDim
    time, feat, classes = Dim(None, description="time"), Dim(2, description="f", kind="feature"), \
        Dim(5, description="classes")
    extern = {"data": Data("data", dims=[batch_dim, time, feat])}
    layers = {"sub": {"class": "subnetwork", "from": [], "subnetwork": {
        "output": {"class": "constant", "value": 3, "shape": [batch_dim, time], "shape_deps": ["base:data"],
                   "sparse_dim": classes, "out_shape": {batch_dim, time, ImplicitSparseDim(classes)}}}},
        "output": {"class": "copy", "from": "sub"}}
    net, res = _run(layers, extern, np.zeros((2, 4, 2), np.float32), [4, 2])
    out = res["output"]
    assert out.data.sparse_dim == classes and np.asarray(out.tensor).tolist() == [[3] * 4] * 2
    assert out.sizes[time].numpy().tolist() == [4, 2]


def test_rec_lstm_in_dim():
    """RETURNN's rec layer takes 'in_dim' (its input's feature axis; returnn_common's LSTM gives it): here
    it must be the input's feature axis (one line otherwise). The old code refused the option."""
    time, feat, out = Dim(None, description="time"), Dim(3, description="f", kind="feature"), \
        Dim(4, description="o", kind="feature")
    extern = {"data": Data("data", dims=[batch_dim, time, feat])}
    net = TFNetwork({"output": {"class": "rec", "unit": "nativelstm2", "from": "data", "in_dim": feat, "out_dim": out,
                                "axis": time}}, extern)
    assert net.layers["output"].output.feature_dim == out
    with pytest.raises(NetworkError, match="'in_dim' .* must be the feature axis"):
        TFNetwork({"output": {"class": "rec", "unit": "nativelstm2", "from": "data", "in_dim": out, "out_dim": out,
                              "axis": time}}, extern)


@pytest.mark.parametrize("flag", [True, False])
def test_cond_in_a_sub_network(flag):
    """RETURNN resolves a cond's condition and branches in the network around the cond, also in a
    sub-network (returnn_common's specaugment: a cond on a constant or train_flag in its module); the old
    code left those names unmapped when it flattened the sub-network ('unknown layer')."""
    time, feat = Dim(None, description="time"), Dim(2, description="f", kind="feature")
    extern = {"data": Data("data", dims=[batch_dim, time, feat])}
    branch = {"class": "subnetwork", "from": [], "subnetwork": {
        "scaled": {"class": "eval", "from": "base:data", "eval": "source(0) * 2."},
        "output": {"class": "copy", "from": "scaled"}}}
    inner = {"flag": {"class": "constant", "value": flag, "shape": (), "dtype": "bool"},
             "cond": {"class": "cond", "from": [], "condition": "flag", "true_layer": branch,
                      "false_layer": {"class": "copy", "from": "data"}},
             "output": {"class": "copy", "from": "cond"}}
    x = np.arange(2 * 3 * 2, dtype=np.float32).reshape(2, 3, 2)
    _, res = _run({"sub": {"class": "subnetwork", "from": "data", "subnetwork": inner},
                   "output": {"class": "copy", "from": "sub"}}, extern, x, [3, 2])
    np.testing.assert_allclose(np.asarray(res["output"].tensor), x * 2 if flag else x)


def test_reshape_into_a_dim_math_dim_with_data_extra_deps():
    """returnn_common's window: a reshape into a dim-math dim (time * 2 here) with 'extra_deps':
    ['base:data:data']; RETURNN computes its sizes from the data's. The old code failed on the data key
    among extra_deps when it ran only the needed layers (KeyError: a CRASH) and then knew no sizes for the
    new dim."""
    time, feat = Dim(None, description="time"), Dim(4, description="f", kind="feature")
    two = Dim(2, description="two", kind="feature")
    merged, double = Dim(None, description="merged"), time * 2
    extern = {"data": Data("data", dims=[batch_dim, time, feat])}
    layers = {"merge": {"class": "merge_dims", "from": "data", "axes": [time, feat], "out_dim": merged},
              "output": {"class": "reshape", "from": "merge", "in_dims": [merged], "out_dims": [double, two],
                         "extra_deps": ["data:data"]}}
    x = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    _, res = _run(layers, extern, x, [3, 2])
    out = res["output"]
    np.testing.assert_allclose(np.asarray(out.tensor), x.reshape(2, 6, 2))
    assert out.sizes[double].numpy().tolist() == [6, 4]


def test_cond_branch_reads_a_sub_output():
    """RETURNN: a cond branch's layer reads another's sub-output ('split/0', as returnn_common's
    self-attention in a cond does); the old code dropped the split from the branch and found
    'output/split/0' nowhere ('unknown layer')."""
    time, feat = Dim(None, description="time"), Dim(6, description="f", kind="feature")
    a, b = Dim(2, description="a", kind="feature"), Dim(4, description="b", kind="feature")
    extern = {"data": Data("data", dims=[batch_dim, time, feat])}
    branch = {"class": "subnetwork", "from": [], "subnetwork": {
        "split": {"class": "split", "from": "base:data", "axis": feat, "out_dims": (a, b)},
        "output": {"class": "copy", "from": "split/0"}}}
    layers = {"flag": {"class": "constant", "value": True, "shape": (), "dtype": "bool"},
              "output": {"class": "cond", "from": [], "condition": "flag", "true_layer": branch,
                         "false_layer": {"class": "slice", "from": "data", "axis": feat, "slice_end": 2, "out_dim": a}}}
    x = np.arange(2 * 3 * 6, dtype=np.float32).reshape(2, 3, 6)
    _, res = _run(layers, extern, x, [3, 2])
    np.testing.assert_allclose(np.asarray(res["output"].tensor), x[..., :2])


def test_rec_builds_a_need_last_sub_layer_read_by_rec_last_output():
    """RETURNN's rec cell builds the sub-layers with need_last (returnn_common's loop state read after the
    loop by rec_last_output) even when the unit's output does not read them; the old code did not build them
    ("no sub-layer 'acc'")."""
    time, feat = Dim(None, description="time"), Dim(2, description="f", kind="feature")
    extern = {"data": Data("data", dims=[batch_dim, time, feat])}
    layers = {"loop": {"class": "rec", "from": "data", "unit": {
        "acc": {"class": "combine", "kind": "add", "from": ["prev:acc", "data:source"], "need_last": True},
        "output": {"class": "copy", "from": "data:source"}}},
        "output": {"class": "rec_last_output", "rec_layer": "loop", "sub_layer_name": "acc"}}
    x = np.arange(2 * 3 * 2, dtype=np.float32).reshape(2, 3, 2)
    _, res = _run(layers, extern, x, [3, 2])
    np.testing.assert_allclose(np.asarray(res["output"].tensor), np.stack([x[0, :3].sum(0), x[1, :2].sum(0)]))


def test_in_dim_of_every_layer_class():
    """'in_dim' is an option of RETURNN's LayerBase (returnn_common writes it on batch_norm, the zoneout cell, ...):
    the input's feature dim; RETURNN makes another axis the feature axis, refused here in one line. The old code
    refused the option on every class without its own in_dim."""
    time, feat = Dim(None, description="time"), Dim(3, description="f", kind="feature")
    extern = {"data": Data("data", dims=[batch_dim, time, feat])}
    for opts in ({"class": "batch_norm", "masked_time": True}, {"class": "rec", "unit": "zoneoutlstm", "n_out": 4},
                 {"class": "copy"}):
        net = TFNetwork({"output": dict(opts, **{"from": "data", "in_dim": feat})}, extern)
        assert net.layers["output"].output.feature_dim_axis == 2
        with pytest.raises(NetworkError, match="'in_dim' .* must be the feature dim of the input here"):
            TFNetwork({"output": dict(opts, **{"from": "data", "in_dim": time})}, extern)


def test_max_seq_len_via_refusals():
    """RETURNN's rec option max_seq_len_via (the most steps from a layer's value; values: goldens
    rc_loop_max_seq_len_via_*) asserts a scalar layer and no max_seq_len with it; its cell units assert no
    max_seq_len. One line each here (the old code refused the option as unknown)."""
    time, feat = Dim(None, description="time"), Dim(2, description="f", kind="feature")
    extern = {"data": Data("data", dims=[batch_dim, time, feat])}
    unit = {"add": {"class": "eval", "from": "prev:add", "eval": "source(0) + 1.0", "initial_output": "base:init"},
            "end": {"class": "compare", "kind": "greater_equal", "from": "add", "value": 3.0},
            "output": {"class": "copy", "from": "add"}}
    # (an 'end' of one flag per sequence: RETURNN asserts its shape (), see test_rec_unit_refusals)
    base = {"init": {"class": "reduce", "mode": "max", "axis": ["T", "F"], "from": "data"},
            "len": {"class": "length", "from": "data"}, "limit": {"class": "constant", "value": 5}}
    loop = {"class": "rec", "from": [], "unit": unit, "axis": Dim(None, description="loop")}
    net = TFNetwork(dict(base, output=dict(loop, max_seq_len_via="limit")), extern)
    assert loop["axis"] in net.layers["output"].output.dims
    for opts, match in (({"max_seq_len_via": "len"}, "max_seq_len_via 'len' must be a scalar int32"),
                        ({"max_seq_len_via": "limit", "max_seq_len": 4}, "are exclusive")):
        with pytest.raises(NetworkError, match=match):
            TFNetwork(dict(base, output=dict(loop, **opts)), extern)
    with pytest.raises(NetworkError, match="max_seq_len_via"):
        TFNetwork(dict(base, output={"class": "rec", "unit": "nativelstm2", "n_out": 3, "from": "data",
                                     "max_seq_len_via": "limit"}), extern)
