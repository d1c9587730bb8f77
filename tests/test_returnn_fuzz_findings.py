"""Build-time rules the differential check against the real RETURNN (benchmarks/returnn_fuzz.py)
found missing: where RETURNN refuses a net, this engine refuses it too (one line), instead of
building something RETURNN never builds; and dims RETURNN derives the same way are one axis."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from returnn.config import Config, get_global_config, set_global_config
from returnn.errors import NetworkError
from returnn.tensor import Data
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork


def _net(layers, behavior_version=None, dim=6):
    old = get_global_config()
    set_global_config(Config({"behavior_version": behavior_version} if behavior_version is not None else {}))
    try:
        return TFNetwork(layers, {"data": Data("data", shape=(None, dim))})
    finally:
        set_global_config(old)


@pytest.mark.parametrize("first", [
    {"class": "pool", "mode": "max", "pool_size": [2], "padding": "valid", "from": "data"},
    {"class": "split_dims", "axis": "T", "dims": [2, -1], "from": "data"},
    {"class": "conv", "filter_size": [3], "strides": 2, "n_out": 6, "padding": "same", "from": "data"},
])
def test_combining_an_axis_with_one_derived_from_it_is_refused(first):
    """RETURNN's get_common_data takes the time axis and its pooled/split version as one axis
    (derived_matches), then fails; here it was an outer product of both axes."""
    with pytest.raises(NetworkError, match="both derive from .* RETURNN takes them as one axis"):
        _net({"l0": first, "output": {"class": "combine", "kind": "add", "from": ["l0", "data"]}})


def test_two_equal_strided_convs_and_two_equal_upsamplings_share_their_axis():
    """RETURNN: a conv's output axis is its own dim, declared the same as its dim math (``ceildiv_right``), so two
    equal strided convs share it; a transposed conv's is the dim math itself (one per formula)."""
    conv = {"class": "conv", "filter_size": [2], "strides": 2, "n_out": 6, "padding": "same", "from": "data"}
    net = _net({"a": conv, "b": dict(conv), "output": {"class": "combine", "kind": "add", "from": ["a", "b"]}})
    a, b = net.layers["a"].output.dims[1], net.layers["b"].output.dims[1]
    assert a is not b and a == b and a.description == "a:conv:s0"
    assert net.layers["output"].output.batch_ndim == 3
    up = {"class": "transposed_conv", "filter_size": [2], "strides": [2], "n_out": 6, "from": "data"}
    net = _net({"a": up, "b": dict(up), "output": {"class": "combine", "kind": "add", "from": ["a", "b"]}})
    assert net.layers["a"].output.dims[1] is net.layers["b"].output.dims[1]
    assert net.layers["output"].output.batch_ndim == 3


def test_merge_dims_keep_order_follows_the_behavior_version():
    """RETURNN: keep_order defaults to True from behavior version 6 (merged in the order given) and
    must be True there; before, the axes merge in the input's order."""
    layers = {"s": {"class": "split_dims", "axis": "F", "dims": [2, 3], "from": "data"},
              "output": {"class": "merge_dims", "axes": ["dim:3", "dim:2"], "from": "s"}}
    x = np.arange(2 * 4 * 6, dtype="float32").reshape(2, 4, 6)
    batch = {"data": tf.constant(x), "data:seq_len": tf.constant([4, 3])}
    old = _net(layers, 0).forward(batch, RunContext(False))["output"].tensor.numpy()
    np.testing.assert_array_equal(old, x)  # input order: (2, 3) merged back as it was
    new = _net(layers, 6).forward(batch, RunContext(False))["output"].tensor.numpy()
    np.testing.assert_array_equal(new, x.reshape(2, 4, 2, 3).transpose(0, 1, 3, 2).reshape(2, 4, 6))
    with pytest.raises(NetworkError, match="keep_order False is not allowed from behavior version 6"):
        _net({"output": dict(layers["output"], keep_order=False, **{"from": "data"})}, 6)
    with pytest.raises(NetworkError, match="must be a list, to have a well defined order"):
        _net({"output": {"class": "merge_dims", "axes": "static", "from": "data"}}, 6)


def test_combine_dims_with_a_description_of_several_axes_in_old_configs():
    """RETURNN's combine_dims before Aug 2021 (its demo-tf-att-copy: axes "static") merged the axes a
    description names in the input's order; today's RETURNN asserts a list: so from behavior version 1."""
    layers = {"s": {"class": "split_dims", "axis": "F", "dims": [2, 3], "from": "data"},
              "output": {"class": "combine_dims", "axes": "static", "from": "s"}}
    x = np.arange(2 * 4 * 6, dtype="float32").reshape(2, 4, 6)
    batch = {"data": tf.constant(x), "data:seq_len": tf.constant([4, 3])}
    net = _net(layers, 0)
    assert net.layers["output"].output.dim == 6
    np.testing.assert_array_equal(net.forward(batch, RunContext(False))["output"].tensor.numpy(), x)
    with pytest.raises(NetworkError, match="'static' matches 2 axes; with keep_order each must be one axis"):
        _net(layers, 1)


def test_activation_layer_needs_an_activation_and_gather_a_position_inside_the_axis():
    with pytest.raises(NetworkError, match="needs 'activation'"):
        _net({"output": {"class": "activation", "activation": None, "from": "data"}})
    with pytest.raises(NetworkError, match="position -1 is outside the axis"):
        _net({"output": {"class": "gather", "position": -1, "axis": "T", "from": "data"}})
    with pytest.raises(NetworkError, match="position 6 is outside the axis"):
        _net({"output": {"class": "gather", "position": 6, "axis": "F", "from": "data"}})


def test_axis_rules_of_the_behavior_version():
    """RETURNN: an axis as an int is refused from behavior version 5, one picked by its position
    among others ('s:0', 'dyn:0', 'static:0') from 7; before, both work."""
    int_axis = {"output": {"class": "slice", "axis": -1, "slice_end": -1, "from": "data"}}
    assert _net(int_axis, 4).layers["output"].output.dim == 5
    with pytest.raises(NetworkError, match="axis -1 as an int is not allowed from behavior version 5"):
        _net(int_axis, 5)
    ordered = {"output": {"class": "reduce", "mode": "max", "axes": ["s:0"], "from": "data"}}
    assert _net(ordered, 6).layers["output"].output.batch_ndim == 2
    with pytest.raises(NetworkError, match="'s:0' depends on the order of the axes"):
        _net(ordered, 7)


def test_window_sides_do_not_go_with_valid_padding():
    with pytest.raises(NetworkError, match="window_left/window_right do not go with padding 'valid'"):
        _net({"output": {"class": "window", "window_size": 3, "window_left": 0, "padding": "valid", "from": "data"}})


def test_shift_axis_without_pad_and_size_adjustment_is_refused_on_a_dynamic_axis():
    """RETURNN keeps the old lengths over the shortened axis (longer than it); with the sizes
    adjusted or with padding both engines agree (goldens)."""
    layer = {"class": "shift_axis", "axis": "T", "amount": -1, "pad": False, "adjust_size_info": False, "from": "data"}
    with pytest.raises(NetworkError, match="pad False with adjust_size_info False on the dynamic axis"):
        _net({"output": layer})
    assert _net({"output": dict(layer, axis="F")}).layers["output"].output.dim == 5


def test_shift_axis_without_pad_of_split_dims_remainder_is_refused():
    """RETURNN keeps the remainder's lengths in the first shift of it (its size tensor is tied to no dim tag):
    without pad they exceed the shortened axis; a second shift adjusts them (golden
    fuzz_split_dims_rem_shift_axis_twice)."""
    split = {"class": "split_dims", "axis": "T", "dims": [-1, 2], "from": "data"}
    shift = {"class": "shift_axis", "axis": "T", "amount": -1, "pad": False, "from": "l0"}
    with pytest.raises(NetworkError, match="whose lengths RETURNN keeps"):
        _net({"l0": split, "output": shift})
    _net({"l0": split, "a": dict(shift, pad=True), "output": dict(shift, **{"from": "a"})})


@pytest.mark.parametrize("act", ["tanh", "leaky_relu", "reciprocal", "square/abs", "softmax"])
def test_activation_on_class_indices_needs_an_int32_result(act):
    """RETURNN applies the activation to the int32 indices and keeps the sparse template: relu, abs, square,
    sign, '1-abs' run (goldens fuzz_activation_sparse_*); functions without an int32 kernel or result fail."""
    data = Data("data", shape=(None,), sparse=True, dim=7, dtype="int32")
    with pytest.raises(NetworkError, match="does not map int32 to int32"):
        TFNetwork({"output": {"class": "activation", "activation": act, "from": "data"}}, {"data": data})
    assert TFNetwork({"output": {"class": "activation", "activation": "relu", "from": "data"}},
                     {"data": data}).layers["output"].output.sparse


@pytest.mark.parametrize("unit", ["standardlstm", "basiclstm", "vanillalstm", "layernormvariantslstm"])
def test_rec_tensorflow_cell_unit_on_an_input_without_time_is_refused(unit):
    """RETURNN runs an input without time axis as one step (native units: goldens fuzz_rec_one_step_*); its
    TensorFlow-cell units then expect a rec loop and fail."""
    mean = {"class": "reduce", "mode": "mean", "axis": "T", "from": "data"}
    with pytest.raises(NetworkError, match="runs it as a TensorFlow cell"):
        _net({"m": mean, "output": {"class": "rec", "unit": unit, "n_out": 3, "from": "m"}})
    out = _net({"m": mean, "output": {"class": "rec", "unit": "nativelstm2", "n_out": 3, "from": "m"}})
    assert out.layers["output"].output.batch_shape == (None, 3)


def test_slice_nd_int_start_with_a_size_of_an_engine_made_axis_is_refused():
    """RETURNN's gather takes the slice axis and the input's engine-made static axis of that size as one; with a
    per-sequence start that is a diagonal (golden fuzz_slice_nd_size_of_static_axis_diagonal), with an int
    start its template and tensor differ in rank (it fails)."""
    data = Data("data", shape=(None, 2, 3))
    with pytest.raises(NetworkError, match="RETURNN takes them as one axis and fails"):
        TFNetwork({"output": {"class": "slice_nd", "from": "data", "start": 1, "size": 2}}, {"data": data})
    net = TFNetwork({"output": {"class": "slice_nd", "from": "data", "start": 1, "size": 3}}, {"data": data})
    assert net.layers["output"].output.batch_shape == (None, 3, 2, 3)


def test_slice_end_before_start_on_a_dynamic_axis_is_refused():
    """RETURNN's slice declares a static axis of end - start frames for a non-negative end (golden
    fuzz_slice_end_static_on_time_broadcast): negative, it fails."""
    with pytest.raises(NetworkError, match="declares a negative size"):
        _net({"output": {"class": "slice", "axis": "T", "slice_start": 3, "slice_end": 2, "from": "data"}})
    assert _net({"output": {"class": "slice", "axis": "T", "slice_start": 1, "slice_end": 4,
                            "from": "data"}}).layers["output"].output.batch_shape == (None, 3, 6)


def test_shift_axis_with_pad_and_size_adjustment_is_refused_on_a_static_axis():
    """RETURNN declares the static axis |amount| shorter, pads the tensor back to its size and fails."""
    layer = {"class": "shift_axis", "axis": "F", "amount": -1, "from": "data"}
    with pytest.raises(NetworkError, match="pad with adjust_size_info on the static axis"):
        _net({"output": layer})
    assert _net({"output": dict(layer, adjust_size_info=False)}).layers["output"].output.dim == 6
    assert _net({"output": dict(layer, pad=False)}).layers["output"].output.dim == 5


def test_softmax_over_spatial_time_mask_on_a_static_axis_and_dct_without_time_are_refused():
    """RETURNN asserts a dynamic axis for use_time_mask True, and DCT asserts that its input's sizes are the time
    axis' only (merge_dims of B and T leaves none)."""
    with pytest.raises(NetworkError, match="use_time_mask True on the static axis"):
        _net({"output": {"class": "softmax_over_spatial", "axis": "F", "use_time_mask": True, "from": "data"}})
    _net({"output": {"class": "softmax_over_spatial", "axis": "F", "from": "data"}})
    with pytest.raises(NetworkError, match="only dynamic axis must be its time axis"):
        _net({"m": {"class": "merge_dims", "axes": ["B", "T"], "keep_order": False, "from": "data"},
              "output": {"class": "dct", "from": "m"}}, behavior_version=0)
    _net({"output": {"class": "dct", "from": "data"}})


def test_rec_loop_rules_found_by_the_rec_fuzzer():
    """A cumsum's initial_output is its running sum's start in a rec loop (goldens
    fuzzrec_cumsum_*); elsewhere RETURNN adds it to the whole sum: so here for a number, 'zeros' or 'ones'
    (golden cumsum_initial_output_outside_loop), other forms refused. A layer reading a
    per-frame value and a base: layer over the loop's own time is computed over the whole sequence
    where that builds (as RETURNN moves it out: the frames pair up by the shared time axis; golden
    fuzzrec_attention_energies_moved_out), else in the loop (golden
    fuzzrec_attention_query_of_frame); an output then without the loop's time axis is refused, as
    RETURNN does."""
    with pytest.raises(NetworkError, match="'initial_output' 'var' on a sum that is not over a rec loop's frames"):
        _net({"output": {"class": "cumsum", "from": "data", "initial_output": "var"}})
    enc = {"class": "linear", "activation": "tanh", "n_out": 6, "from": "data"}
    unit = {"q": {"class": "linear", "activation": None, "n_out": 6, "from": "data:source"},
            "c": {"class": "combine", "kind": "add", "from": ["base:enc", "q"]},
            "output": {"class": "reduce", "mode": "max", "axis": "T", "from": "c"}}
    with pytest.raises(NetworkError, match="the output computed over the whole sequence has no loop time axis"):
        _net({"enc": enc, "output": {"class": "rec", "from": "data", "unit": unit}})


def test_batch_norm_masked_time_is_required_from_behavior_version_12():
    """RETURNN's BehaviorVersion.require: batch_norm's masked_time must be given from version 12
    (the layer and the batch_norm option of any layer); before, it defaults to True."""
    bn = {"class": "batch_norm", "from": "data"}
    assert _net({"output": bn}, 11).layers["output"].bn.masked_time is True
    with pytest.raises(NetworkError, match="batch_norm 'masked_time' must be given explicitly from behavior version 12"):
        _net({"output": bn}, 12)
    with pytest.raises(NetworkError, match="'masked_time' must be given explicitly"):
        _net({"output": {"class": "linear", "n_out": 3, "batch_norm": True, "from": "data"}}, 12)
    _net({"output": dict(bn, masked_time=False)}, 12)
    _net({"output": {"class": "linear", "n_out": 3, "batch_norm": {"masked_time": True}, "from": "data"}}, 12)


def test_dot_axis_rules_of_the_behavior_version():
    """RETURNN's dot: before behavior version 3 the defaults red1 -1, red2 -2, var1 -2, var2 -1;
    from 3 the reduced axes must be given, no int axes, var1/var2 both or neither; var axes never
    reduced ones."""
    with pytest.raises(NetworkError, match="var2 -1 is a reduced axis"):
        _net({"output": {"class": "dot", "from": ["data", "data"], "reduce": "F"}}, 0)
    with pytest.raises(NetworkError, match="the reduced axes must be given"):
        _net({"output": {"class": "dot", "from": ["data", "data"], "red1": "F"}}, 3)
    with pytest.raises(NetworkError, match="give both var1 and var2 or neither"):
        _net({"output": {"class": "dot", "from": ["data", "data"], "reduce": "F", "var1": None}}, 12)
    with pytest.raises(NetworkError, match="var1 'T' is a reduced axis"):
        _net({"output": {"class": "dot", "from": ["data", "data"], "reduce": "T", "var1": "T", "var2": None}}, 12)
    with pytest.raises(NetworkError, match="axes as ints are not allowed from behavior version 3"):
        _net({"output": {"class": "dot", "from": ["data", "data"], "red1": -1, "red2": -1}}, 3)
    # the old defaults: a (B, T, F) x (B, F, T') product reduces a's F with b's -2 (F), var a's T, b's T'
    net = _net({"t": {"class": "swap_axes", "axis1": "T", "axis2": "F", "from": "data"},
                "output": {"class": "dot", "from": ["data", "t"]}}, 0)
    x = np.random.RandomState(0).normal(size=(2, 3, 6)).astype("float32")
    out = net.forward({"data": tf.constant(x), "data:seq_len": tf.constant([3, 3], tf.int32)}, RunContext(False))
    np.testing.assert_allclose(out["output"].tensor.numpy(), x @ x.transpose(0, 2, 1), rtol=1e-5, atol=1e-5)


def test_sparse_and_no_op_refusals():
    """RETURNN asserts a feature axis for pool and dense data for expand_dims 'F', and refuses a
    swap_axes of an axis with itself; here they had been built (pooling class indices)."""
    def sparse_net(layer):
        old = get_global_config()
        set_global_config(Config({}))
        try:
            return TFNetwork({"output": dict(layer, **{"from": "data"})},
                             {"data": Data("data", shape=(None,), dtype="int32", sparse=True, dim=7)})
        finally:
            set_global_config(old)
    with pytest.raises(NetworkError, match="pooling sparse data"):
        sparse_net({"class": "pool", "mode": "max", "pool_size": [2]})
    with pytest.raises(NetworkError, match="on sparse data"):
        sparse_net({"class": "expand_dims", "axis": "F"})
    with pytest.raises(NetworkError, match="are the same axis"):
        _net({"output": {"class": "swap_axes", "axis1": "T", "axis2": "T", "from": "data"}})


def test_combine_of_sparse_sources_keeps_indices_or_is_refused():
    """RETURNN combines class indices (golden fuzz_combine_sparse_*): the result is sparse with the
    first largest source's class dim. Dense floats with sparse sources, or kinds and activations that give
    no indices (RETURNN: a dtype error or floats in an int template), are refused here."""
    old = get_global_config()
    set_global_config(Config({}))
    extern = {"data": Data("data", shape=(None,), dtype="int32", sparse=True, dim=7),
              "feat": Data("feat", shape=(None, 7))}
    try:
        net = TFNetwork({"output": {"class": "combine", "kind": "sub", "from": ["data", "data"]}}, extern)
        assert net.layers["output"].output.sparse_dim is extern["data"].sparse_dim
        for opts, match in (({"from": ["data", "data:feat"]}, r"sources of different dtypes data int32, feat float32"),
                            ({"from": ["data", "data"], "kind": "truediv"}, r"only kinds .* \(got kind 'truediv'"),
                            ({"from": ["data", "data"], "activation": "relu"}, "activation 'relu'")):
            with pytest.raises(NetworkError, match=match):
                TFNetwork({"output": dict({"class": "combine"}, **opts)}, extern)
    finally:
        set_global_config(old)


def test_self_attention_on_labels_and_float_masks_of_ints_are_refused():
    """RETURNN asserts a feature axis in self_attention and fails in tf.where on a float mask_value
    for int data; both had been built here (labels embedded as one-hot, the mask value cast)."""
    old = get_global_config()
    set_global_config(Config({}))
    extern = {"data": Data("data", shape=(None,), dtype="int32", sparse=True, dim=7)}
    try:
        with pytest.raises(NetworkError, match="is sparse .*RETURNN attends over dense frames only"):
            TFNetwork({"output": {"class": "self_attention", "num_heads": 1, "total_key_dim": 4, "n_out": 4,
                                  "from": "data"}}, extern)
        with pytest.raises(NetworkError, match="'mask_value' -5.0 is a float, the input .* holds int32"):
            TFNetwork({"output": {"class": "seq_len_mask", "mask_value": -5.0, "axis": "T", "from": "data"}}, extern)
        TFNetwork({"output": {"class": "seq_len_mask", "mask_value": -5, "axis": "T", "from": "data"}}, extern)
    finally:
        set_global_config(old)


@pytest.mark.parametrize("first", [
    {"class": "merge_dims", "axes": ["B", "T"], "keep_order": False, "from": "data"},
    {"class": "flatten_batch", "from": "data"},
])
def test_combining_a_merged_batch_with_the_plain_batch_is_refused(first):
    """RETURNN extends the plain batch to the merged one (its BatchInfo); here the combine was built as if
    both batch axes were one and failed when run ((B*T, 1, F) times (B, T, F))."""
    with pytest.raises(NetworkError, match="batch axes hold different axes"):
        _net({"l0": first, "output": {"class": "combine", "kind": "mul", "from": ["l0", "data"]}}, behavior_version=0)


@pytest.mark.parametrize("behavior_version, refused", [(0, False), (10, False), (11, True), (21, True)])
def test_size_one_feature_axis_broadcasts_only_before_behavior_version_11(behavior_version, refused):
    """RETURNN's get_common_data matches a feature axis of size 1 to another one (broadcast_matches) only
    before behavior version 11; from then on (B, T, F6) + (F1) needs all sources broadcast (refused)."""
    net = {"v": {"class": "variable", "shape": [1]}, "output": {"class": "combine", "kind": "add", "from": ["data", "v"]}}
    if refused:
        with pytest.raises(NetworkError, match="broadcast"):
            _net(net, behavior_version=behavior_version)
    else:
        assert _net(net, behavior_version=behavior_version).layers["output"].output.batch_shape == (None, None, 6)


@pytest.mark.parametrize("opts, what", [
    ({"factor": 1.5}, "the float factor 1.5"), ({"factor": 2.0}, "the float factor 2.0"),
    ({"factor": 2, "kind": "fill", "fill_value": 0.0, "fill_dropout": 0.5}, "fill_dropout")])
def test_resize_of_a_static_axis_by_a_non_int_factor_refused(opts, what):
    """RETURNN gives such a resize a new axis of unknown size without sizes, which its tensor check refuses
    ('dynamic dim undefined'; mutate seed 278 #26: factor 1.5 on the feature axis); an int factor is taken."""
    with pytest.raises(NetworkError, match="static axis .* resized by %s is refused" % what):
        _net({"output": dict({"class": "resize", "axis": "F", "kind": "nn", "from": "data"}, **opts)})
    assert _net({"output": {"class": "resize", "axis": "F", "factor": 2, "kind": "nn", "from": "data"}}) \
        .layers["output"].output.dims[1].dimension == 12  # (the resized axis moves after the batch)
    _net({"output": {"class": "resize", "axis": "T", "factor": 1.5, "kind": "nn", "from": "data"}})  # dynamic: sizes


def _loop(unit, **rec_opts):
    return _net({"output": dict({"class": "rec", "from": "data", "unit": unit}, **rec_opts)}, dim=4)


def test_loop_reading_a_moved_out_running_sum_as_cur_and_prev_refused():
    """RETURNN moves a cumsum with an initial_output that reads nothing of the loop out of it (kept in it here:
    the same sums) and then refuses reading it both per frame and as prev: ('currently cannot use both cur + prev
    frame'; rec seed 92 #84). With optimize_move_layers_out False, or one of the two reads, it builds."""
    unit = {"s0": {"class": "cumsum", "from": "data:source", "initial_output": "zeros"},
            "output": {"class": "linear", "activation": None, "n_out": 4, "from": ["s0", "prev:output", "prev:s0"]}}
    with pytest.raises(NetworkError, match="reads 's0' .* both as 's0' and as 'prev:s0'"):
        _loop(unit)
    _loop(unit, optimize_move_layers_out=False)
    _loop(dict(unit, output=dict(unit["output"], **{"from": ["s0", "prev:output"]})))


def test_moved_out_running_sum_with_initial_output_var_refused():
    """RETURNN's initial_output 'var' asserts a fully static shape, which the moved-out sum (with the time axis)
    lacks (rec seed 93 #66); in the loop (it reads the loop's output) it is taken."""
    unit = {"s0": {"class": "cumsum", "from": "data:source", "initial_output": "var"},
            "output": {"class": "linear", "activation": None, "n_out": 4, "from": ["s0", "prev:output"]}}
    with pytest.raises(NetworkError, match="sub-layer 's0' .* initial_output 'var' fails"):
        _loop(unit)
    _loop(unit, optimize_move_layers_out=False)
    _loop(dict(unit, s0=dict(unit["s0"], **{"from": "prev:output"})))
    # read by nothing of the loop: RETURNN moves it after the loop (rec seed 94 #72)
    after = {"s1": {"class": "linear", "activation": "tanh", "n_out": 4, "from": ["data:source", "prev:s1"]},
             "s2": {"class": "cumsum", "from": "s1", "initial_output": "var"}, "output": {"class": "copy", "from": "s2"}}
    with pytest.raises(NetworkError, match="sub-layer 's2' .* initial_output 'var' fails"):
        _loop(after)
    _loop(dict(after, s1=dict(after["s1"], **{"from": ["data:source", "prev:output"]})))  # read in the loop: taken
