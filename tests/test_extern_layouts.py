"""Extern data in any layout (RETURNN's extern_data options batch_dim_axis, time_dim_axis,
feature_dim_axis, dim_tags in any order, several dynamic axes, no batch axis): batches arrive
batch-major ``(B, T, ...)`` (returnn/extern_data.py ``batch_array_axes``) and the network gives the
layers the declared layout. Values against numpy and against the same net on batch-major data;
goldens from the real RETURNN in tests/returnn_goldens/cases_extern_layouts.py."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from helpers import outputs
from returnn.config import Config
from returnn.distributed.backend import LocalBackend
from returnn.distributed.context import DistributedContext
from returnn.errors import ConfigError, NetworkError
from returnn.extern_data import batch_array_axes, extern_data_from_config, size_key
from returnn.tensor import FeatureDim, SpatialDim, batch_dim
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork
from returnn.tf.optimizers import create_optimizer
from returnn.tf.steps import StepFunctions

LENS = np.array([4, 2, 0], np.int32)


def _specs(extern):
    return extern_data_from_config(Config({"extern_data": extern}))


def _net(net_dict, extern, seed=7):
    return TFNetwork(outputs(net_dict), _specs(extern), seed=seed)


def _frames(n_feat=5, t=4, seed=0):
    """(B, T, F) with NaN on padded frames (they must not reach real ones)."""
    x = np.random.RandomState(seed).randn(3, t, n_feat).astype(np.float32)
    for b, n in enumerate(LENS):
        x[b, n:] = np.nan
    return x


def _real(y, lens=LENS, axis=1):
    """The real frames per sequence of a batch-major array."""
    return [np.take(y[b], range(n), axis=axis - 1) for b, n in enumerate(lens)]


@pytest.mark.parametrize("extern,axes,declared", [
    ({"shape": (None, 5)}, [0, 1, 2], "B,T,F"),
    ({"shape": (None, 5), "batch_dim_axis": 1}, [1, 0, 2], "T,B,F"),
    ({"shape": (5, None)}, [0, 2, 1], "B,F,T"),
    ({"dim": 5, "shape": (5, None), "time_dim_axis": 2, "feature_dim_axis": 1}, [0, 2, 1], "B,F,T"),
    ({"shape": (None, 3, 5), "batch_dim_axis": 2}, [2, 0, 1, 3], "T,S,B,F"),
    ({"shape": (5,), "time_dim_axis": None, "batch_dim_axis": 1}, [1, None, 0], "F,B"),
    ({"shape": (5,), "batch_dim_axis": None, "time_dim_axis": None, "feature_dim_axis": 0}, [0], "F"),
])
def test_batch_array_axes_of_layouts(extern, axes, declared):
    data = _specs({"x": extern})["x"]
    roles = []
    for i, dim in enumerate(data.dims):
        roles.append("B" if i == data.batch_dim_axis else "T" if i == data.time_dim_axis else
                     "F" if i == data.feature_dim_axis else "S")
    assert ",".join(roles) == declared
    assert batch_array_axes(data) == axes


def test_time_major_and_feature_major_values_are_the_batch_transposed():
    x = _frames()
    net = _net({"tm": {"class": "copy", "from": "data:tm"}, "fm": {"class": "copy", "from": "data:fm"},
                "bm": {"class": "copy", "from": "data:bm"}},
               {"tm": {"shape": (None, 5), "batch_dim_axis": 1}, "fm": {"shape": (5, None)},
                "bm": {"shape": (None, 5)}})
    batch = {}
    for key in ("tm", "fm", "bm"):
        batch[key], batch[key + ":seq_len"] = tf.constant(x), tf.constant(LENS)
    out = net.forward(batch, RunContext(False))
    np.testing.assert_array_equal(out["tm"].tensor.numpy(), x.transpose(1, 0, 2))
    np.testing.assert_array_equal(out["fm"].tensor.numpy(), x.transpose(0, 2, 1))
    np.testing.assert_array_equal(out["bm"].tensor.numpy(), x)
    for key in ("tm", "fm"):
        np.testing.assert_array_equal(out[key].seq_len.numpy(), LENS)
    assert net.batch_spec("tm").shape.as_list() == net.batch_spec("fm").shape.as_list() == [None, None, 5]


def test_time_major_dim_tags_time_first():
    time, feat = SpatialDim("time"), FeatureDim("feat", 5)
    specs = extern_data_from_config(Config({"extern_data": {"data": {"dim_tags": [time, batch_dim, feat]}}}))
    data = specs["data"]
    assert (data.batch_dim_axis, data.time_dim_axis, data.feature_dim_axis) == (1, 0, 2)
    net = TFNetwork(outputs({"output": {"class": "reduce", "mode": "sum", "axes": "T", "from": "data"}}), specs)
    x = _frames()
    out = net.forward({"data": tf.constant(x), "data:seq_len": tf.constant(LENS)}, RunContext(False))
    ref = np.stack([r.sum(0) for r in _real(np.nan_to_num(x) * (np.arange(4)[None, :, None] < LENS[:, None, None]))])
    np.testing.assert_allclose(out["output"].tensor.numpy(), ref, rtol=1e-6)


@pytest.mark.parametrize("layout", [{"shape": (None, 5), "batch_dim_axis": 1}, {"shape": (5, None)}])
@pytest.mark.parametrize("net_dict", [
    {"output": {"class": "rec", "unit": "nativelstm2", "n_out": 3, "from": "data"}},
    {"output": {"class": "linear", "activation": "tanh", "n_out": 3, "from": "data"}},
    {"output": {"class": "conv", "filter_size": [3], "padding": "same", "n_out": 3, "from": "data"}},
    {"output": {"class": "transposed_conv", "filter_size": [3], "strides": [2], "n_out": 3, "from": "data"}},
    {"output": {"class": "self_attention", "num_heads": 1, "total_key_dim": 2, "n_out": 3, "from": "data"}},
], ids=["nativelstm2", "linear", "conv", "transposed_conv", "self_attention"])
def test_layers_on_other_layouts_equal_batch_major(layout, net_dict):
    """The same net on time-major / feature-major data computes what it computes on (B, T, F)
    (same seed, so same parameters), padded frames included in the input as NaN (zero for conv,
    which does not mask, as RETURNN)."""
    x = _frames()
    if net_dict["output"]["class"] in ("conv", "transposed_conv"):
        x = np.nan_to_num(x)
    batch = {"data": tf.constant(x), "data:seq_len": tf.constant(LENS)}
    ref_net = _net(net_dict, {"data": {"shape": (None, 5)}})
    ref = ref_net.forward(batch, RunContext(False))["output"]
    net = _net(net_dict, {"data": layout})
    for a, b in zip(ref_net.trainable_variables, net.trainable_variables):
        assert a.shape == b.shape
        b.assign(a)
    out = net.forward(batch, RunContext(False))["output"].copy_as_batch_time_feature()
    ref = ref.copy_as_batch_time_feature()
    np.testing.assert_array_equal(out.seq_len.numpy(), ref.seq_len.numpy())
    for o, r in zip(_real(out.tensor.numpy(), out.seq_len.numpy()), _real(ref.tensor.numpy(), ref.seq_len.numpy())):
        np.testing.assert_allclose(o, r, rtol=1e-5, atol=1e-6)


def test_data_without_time_axis_in_feature_batch_layout():
    """(B, 1, F) from the batch (data without a time axis), declared [F, B]."""
    x = np.arange(15, dtype=np.float32).reshape(3, 1, 5)
    net = _net({"output": {"class": "copy", "from": "data"}},
               {"data": {"shape": (5,), "time_dim_axis": None, "batch_dim_axis": 1}})
    out = net.forward({"data": tf.constant(x), "data:seq_len": tf.ones([3], tf.int32)}, RunContext(False))["output"]
    np.testing.assert_array_equal(out.tensor.numpy(), x[:, 0].T)
    assert net.batch_spec("data").shape.as_list() == [None, 1, 5]


def test_combine_batchless_data_broadcasts_over_batch_and_time():
    """RETURNN's test_CombineLayer_time_broadcast(_swapped): a [F] key (no batch axis) plus [B,F,T]."""
    extern = {"in1": {"shape": (5,), "batch_dim_axis": None, "time_dim_axis": None, "feature_dim_axis": 0},
              "in2": {"shape": (5, None), "batch_dim_axis": 0, "time_dim_axis": 2}}
    net = _net({"a": {"class": "combine", "kind": "add", "from": ["data:in1", "data:in2"]},
                "b": {"class": "combine", "kind": "add", "from": ["data:in2", "data:in1"]}}, extern)
    assert net.layers["b"].output.batch_shape == (None, 5, None)
    v = np.arange(5, dtype=np.float32)
    x = _frames()  # batch format (B, T, F) of the [B, F, T] key
    batch = {"in1": tf.constant(v), "in2": tf.constant(x), "in2:seq_len": tf.constant(LENS)}
    out = net.forward(batch, RunContext(False))
    b = out["b"].tensor.numpy()
    np.testing.assert_array_equal(b, x.transpose(0, 2, 1) + v[None, :, None])
    a = out["a"].copy_transpose([out["a"].data.batch_dim_axis, out["a"].data.feature_dim_axis,
                                 out["a"].data.time_dim_axis]).tensor.numpy()
    np.testing.assert_array_equal(a, b)
    with pytest.raises(ConfigError, match="data key 'in1' .*has no batch axis: datasets deliver batches"):
        net.batch_spec("in1")


def test_resize_by_a_batchless_scalar_data_key():
    """RETURNN's test_ResizeLayer_dynamic: the factor is a float data key without batch axis."""
    net = _net({"output": {"class": "resize", "axis": "T", "factor": "data:factor", "kind": "nn", "from": "data"}},
               {"data": {"shape": (None, 3)}, "factor": {"shape": (), "batch_dim_axis": None, "dtype": "float32"}})
    x = np.arange(2 * 5 * 3, dtype=np.float32).reshape(2, 5, 3)
    lens = np.array([5, 4], np.int32)
    for factor in (0.5, 2.0):
        out = net.forward({"data": tf.constant(x), "data:seq_len": tf.constant(lens), "factor": tf.constant(factor)},
                          RunContext(False))["output"]
        assert out.tensor.shape == (2, int(np.ceil(5 * factor)), 3)
        np.testing.assert_array_equal(out.seq_len.numpy(), np.ceil(lens * factor).astype(np.int32))


def test_cond_on_a_bool_scalar_data_key():
    """RETURNN's test_CondLayer_multiple_outputs: ``"cond": {"dim_tags": (), "dtype": "bool"}``."""
    sub = lambda a, b: {"class": "subnetwork", "from": [], "subnetwork": {  # noqa: E731
        "a": {"class": "constant", "value": a, "is_output_layer": True},
        "b": {"class": "constant", "value": b, "is_output_layer": True},
        "output": {"class": "copy", "from": "a"}}}
    net = _net({"cond": {"class": "cond", "from": [], "condition": "data:cond", "true_layer": sub(2, 3),
                         "false_layer": sub(5, 7)},
                "output": {"class": "combine", "kind": "mul", "from": ["cond/a", "cond/b"]}},
               {"cond": {"dim_tags": (), "dtype": "bool", "available_for_inference": True}})
    assert net.extern_data["cond"].batch_ndim == 0 and net.extern_data["cond"].dtype == "bool"
    for flag, want in ((True, 6), (False, 35)):
        assert int(net.forward({"cond": tf.constant(flag)}, RunContext(False))["output"].tensor.numpy()) == want


def test_two_dynamic_axes_fed_directly_and_refused_for_datasets():
    """RETURNN's test_MergeDimsLayer_SplitBatchTimeLayer_two_time_axes: the second dynamic axis's
    sizes come as ``data:size:2``; a dataset cannot deliver them (one length per sequence)."""
    net = _net({"merge_dims": {"class": "merge_dims", "from": "data", "axes": ["B", "T"]},
                "output": {"class": "split_batch_time", "from": "merge_dims", "base": "data"}},
               {"data": {"shape": (None, None, 11)}})
    data = net.extern_data["data"]
    assert size_key("data", data, 1) == "data:seq_len" and size_key("data", data, 2) == "data:size:2"
    x = np.random.RandomState(1).randn(2, 3, 4, 11).astype(np.float32)
    sizes2 = np.array([4, 2], np.int32)
    out = net.forward({"data": tf.constant(x), "data:seq_len": tf.constant([3, 1]), "data:size:2": tf.constant(sizes2)},
                      RunContext(False))
    merged = out["merge_dims"]
    assert merged.tensor.shape == (6, 4, 11)
    np.testing.assert_array_equal(merged.size(1).numpy(), np.repeat(sizes2, 3))
    np.testing.assert_array_equal(out["output"].tensor.numpy(), x)
    with pytest.raises(NetworkError, match="data key 'data' .*no sizes 'data:size:2'"):
        net.forward({"data": tf.constant(x), "data:seq_len": tf.constant([3, 1])}, RunContext(False))
    with pytest.raises(ConfigError, match="data key 'data' .*has 2 dynamic axes: datasets deliver one length"):
        net.batch_spec("data")


@pytest.mark.parametrize("extern,msg", [
    ({"x": {"shape": (None, 3), "batch_dim_axis": None}}, "without a batch axis must have static axes only"),
    ({"x": {"shape": (3,), "batch_dim_axis": "1"}}, "'batch_dim_axis' must be an int or None"),
    ({"x": {"shape": (None, 3), "batch_dim_axis": 3}}, "batch_dim_axis 3 out of range"),
])
def test_extern_layout_errors_are_one_line(extern, msg):
    with pytest.raises(ConfigError, match=msg) as info:
        _specs(extern)
    assert "\n" not in str(info.value) and "entry 'x'" in str(info.value)


def test_train_step_on_time_major_data_equals_batch_major():
    """A compiled train step on time-major / feature-major extern data (the batch is (B, T, F) as
    datasets give it) updates the parameters as on batch-major data."""
    net_dict = {"h": {"class": "rec", "unit": "nativelstm2", "n_out": 4, "from": "data"},
                "output": {"class": "softmax", "loss": "ce", "from": "h", "target": "classes"}}
    rng = np.random.RandomState(3)
    x = rng.randn(3, 5, 3).astype(np.float32)
    y = rng.randint(0, 4, size=(3, 5)).astype(np.int32)
    lens = np.array([5, 3, 1], np.int32)
    batch = {"data": tf.constant(x), "data:seq_len": tf.constant(lens),
             "classes": tf.constant(y), "classes:seq_len": tf.constant(lens)}
    results = []
    for data, classes in (({"shape": (None, 3)}, {"dim": 4, "sparse": True}),
                          ({"shape": (None, 3), "batch_dim_axis": 1},
                           {"dim": 4, "sparse": True, "shape": (None,), "batch_dim_axis": 1}),
                          ({"shape": (3, None)}, {"dim": 4, "sparse": True})):
        net = _net(net_dict, {"data": data, "classes": classes}, seed=5)
        opt = create_optimizer(Config({"optimizer": {"class": "adam"}, "learning_rate": 0.1}), net.trainable_variables)
        steps = StepFunctions(net, opt, DistributedContext(LocalBackend()))
        stats = steps.train_step(batch, np.array([1, 0]), tf.zeros([3]))
        results.append((np.asarray(stats), [v.numpy() for v in net.trainable_variables]))
    for stats, params in results[1:]:
        np.testing.assert_allclose(stats, results[0][0], rtol=1e-5)
        for a, b in zip(params, results[0][1]):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_combine_matches_engine_made_static_axes_as_returnn():
    """RETURNN's test_CombineLayer_broadcast_multiple: a (5,) variable matches the first axis of size 5
    of a (5, 5, 3) one (both axes made by the engine; RETURNN's get_common_data), so no source needs
    broadcasting to axes the other lacks, and the output keeps the bigger source's layout."""
    net = _net({"p1": {"class": "variable", "shape": (5, 5, 3), "add_batch_axis": False},
                "p2": {"class": "variable", "shape": (5,), "add_batch_axis": False},
                "output": {"class": "combine", "kind": "add", "from": ["p1", "p2"]}}, {"data": {"dim": 4}})
    assert net.layers["output"].output.batch_shape == (5, 5, 3) and net.layers["output"].output.dim == 3
    p1 = np.random.RandomState(0).randn(5, 5, 3).astype(np.float32)
    p2 = np.arange(5, dtype=np.float32)
    net.layers["p1"].var.assign(p1)
    net.layers["p2"].var.assign(p2)
    out = net.forward({}, RunContext(False))["output"].tensor.numpy()
    np.testing.assert_array_equal(out, p1 + p2[:, None, None])


def test_step_functions_refuse_data_a_dataset_cannot_deliver():
    net = _net({"output": {"class": "copy", "from": "data"}}, {"data": {"shape": (None, None, 3)}})
    opt = create_optimizer(Config({"learning_rate": 0.1}), net.trainable_variables)
    with pytest.raises(ConfigError, match="data key 'data' .*has 2 dynamic axes") as info:
        StepFunctions(net, opt, DistributedContext(LocalBackend()))
    assert "\n" not in str(info.value)


def test_rnn_py_trains_on_time_major_extern_data(tmp_path):
    """A dataset's batch-major batches on extern data declared time-major (input and target)."""
    from helpers import TINY_12AX, run_rnn, train_args, write_config
    text = TINY_12AX.replace("network = {", 'extern_data = {"data": {"dim": 9, "shape": (None, 9), '
                             '"batch_dim_axis": 1}, "classes": {"dim": 2, "sparse": True, "shape": (None,), '
                             '"batch_dim_axis": 1}}\nnetwork = {')
    text = text.replace('"hidden": {"class": "linear", "activation": "tanh"', '"hidden": {"class": "rec", "unit": "nativelstm2"')
    proc = run_rnn(train_args(write_config(tmp_path / "tm.config", text), tmp_path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "epoch 2 score" in proc.stdout + proc.stderr
