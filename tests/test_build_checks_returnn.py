"""Networks RETURNN refuses when it builds them, refused here too with one line naming the layer
(found by benchmarks/returnn_fuzz.py, verdict LAX; each refusal checked against RETURNN 1.20261022)."""
import numpy as np
import pytest
import tensorflow as tf

from helpers import outputs
from returnn.errors import NetworkError
from returnn.tensor import Data, Dim, batch_dim
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork


def _build_and_run(net_dict, outs=("output",)):
    net = TFNetwork(outputs(net_dict), {"data": Data("data", shape=(None, 3))})
    batch = {"data": tf.constant(np.ones((2, 4, 3), np.float32)), "data:seq_len": tf.constant([4, 2])}
    return net.forward(batch, RunContext(False))


def test_replaced_time_axis_by_a_static_dim_is_no_time_axis():
    """RETURNN's copy_template_replace_dim_tag keeps only explicit special axes: the default time
    axis, once a static dim (a slice to a static size), is gone; an explicit one stays."""
    data = Data("x", shape=(None, 3))
    static = Dim(2, kind=Dim.Types.Spatial, description="static")
    assert data.copy_template_replace_dim_tag(1, static).time_dim_axis is None
    explicit = data.copy(time_dim_axis=1)
    assert explicit.copy_template_replace_dim_tag(1, static).time_dim_axis == 1


@pytest.mark.parametrize("net, match", [
    ({"s": {"class": "slice", "axis": "T", "slice_end": 2, "from": "data"},  # 'T' resolves no more
      "output": {"class": "pad", "axes": "T", "padding": [1, 1], "from": "s"}}, "'output' \\(pad\\).*no t axis"),
    ({"s": {"class": "slice", "axis": "T", "slice_start": 0, "slice_end": 1, "from": "data"},
      "output": {"class": "reduce", "mode": "sum", "axis": "T", "from": "s"}}, "'output' \\(reduce\\).*no t axis"),
    # RETURNN's LayerBase asserts an explicit n_out equals the output dim, for every layer
    ({"output": {"class": "merge_dims", "axes": "static", "from": "data", "n_out": 5}},
     "'output' \\(merge_dims\\): n_out 5 does not match the output dim"),
    # RETURNN's merge target axis is min() of the merged axes (an error on none)
    ({"m": {"class": "merge_dims", "axes": ["B", "T"], "from": "data"},
      "output": {"class": "merge_dims", "axes": "spatial", "from": "m", "keep_order": False}},
     "'output' \\(merge_dims\\): 'axes' 'spatial' match no axis"),
    ({"m": {"class": "merge_dims", "axes": ["B", "T"], "from": "data"},
      "output": {"class": "merge_dims", "axes": ["spatial"], "from": "m"}}, "'output' \\(merge_dims\\).*match no axis"),
    # RETURNN's slice_nd bounds the positions of a static axis by x.batch_shape[1] (None here: TypeError)
    ({"start": {"class": "range_in_axis", "from": "data", "axis": "B"},
      "output": {"class": "slice_nd", "from": "data", "start": "start", "size": 2, "axis": "F"}},
     "'output' \\(slice_nd\\): a 'start' layer on the static axis"),
    # TensorFlow's range (RETURNN's RangeLayer) fails where start never reaches limit by delta
    ({"output": {"class": "range", "limit": 3, "delta": -1, "from": []}}, "'output' \\(range\\): start 0 never reaches"),
    ({"output": {"class": "range", "start": 3, "limit": 1, "from": []}}, "'output' \\(range\\): start 3 never reaches"),
    ({"output": {"class": "reduce", "mode": "argmax", "axis": "T", "from": "data", "n_out": 2}},
     "'output' \\(reduce\\): n_out 2 does not match"),
    ({"output": {"class": "reduce", "mode": "max", "axes": ["B", "T"], "from": "data", "keep_dims": True}},
     "'output' \\(reduce\\): keep_dims over the batch and the time axis"),
    # RETURNN's mean there is scaled per sequence, a (batch, 1, 1) value (DIFFER, returnn_fuzz mutate seed 240 #5)
    ({"output": {"class": "reduce", "mode": "mean", "axes": ["B", "T", "F"], "from": "data", "keep_dims": True}},
     "'output' \\(reduce\\): mode mean with keep_dims over the batch and a dynamic axis"),
    ({"sub": {"class": "subnetwork", "from": "data", "n_out": 15,
              "subnetwork": {"output": {"class": "linear", "n_out": 4, "from": "data"}}},
      "output": {"class": "copy", "from": "sub"}}, "'sub' \\(copy\\): n_out 15 does not match the output dim 4"),
    ({"output": {"class": "linear", "with_bias": False, "bias_init": 0.5, "n_out": 2, "from": "data"}},
     "'output' \\(linear\\): bias_init 0.5 with with_bias False"),
    ({"output": {"class": "gather_nd", "position": 2, "from": "data"}}, "'output' \\(gather_nd\\): 'position' must name"),
    ({"output": {"class": "softmax_over_spatial", "energy_factor": -0.5, "axis": "T", "from": "data"}},
     "negative energy_factor -0.5 with the time mask is refused"),
    ({"output": {"class": "rec", "unit": "standardlstm", "n_out": 2, "unroll": True, "from": "data"}},
     "'unroll' of a TensorFlow cell needs 'max_seq_len'"),
 *[({"output": {"class": "rec", "unit": unit, "n_out": 2, "unroll": True, "from": "data"}},
    "'unroll' of a TensorFlow cell needs 'max_seq_len'") for unit in ("vanillalstm", "layernormvariantslstm")],
    ({"output": {"class": "length", "axis": -1, "from": "data"}}, "axis -1 as an int is refused"),
 *[({"output": {"class": "transposed_conv", "filter_size": [2], "n_out": 2, "from": "data", **opt}},
    "'output' \\(transposed_conv\\): '%s' must be a list" % key)
   for key, opt in (("strides", {"strides": 2}), ("filter_size", {"filter_size": 2}))],
    # RETURNN's window over the batch: its new axis derived from the batch has no value (padding 'same' with
    # stride 1 keeps the batch dim and builds)
 *[({"output": {"class": "window", "window_size": 2, "axis": "B", "from": "data", **opt}},
    "'output' \\(window\\): a window over the batch axis needs padding 'same' and stride 1")
   for opt in ({"padding": "valid"}, {"stride": 2})],
    # RETURNN's slice_nd with start 0 and no size gives its new axis the input axis' own size tensor (an assert)
 *[({"output": {"class": "slice_nd", "from": "data", "size": None, **opt}},
    "'output' \\(slice_nd\\): start 0 and size None on the dynamic axis") for opt in ({"start": 0}, {})],
    # RETURNN's dot raises where a reduce description matches no axis of a source (here F of a (B, T) value)
    ({"n": {"class": "math_norm", "p": 2, "axis": "F", "from": "data"},
      "output": {"class": "dot", "from": ["n", "n"], "reduce": "F", "var1": "T"}},
     "'output' \\(dot\\): reduce axis red1 'F', red2 'F' not found in the sources"),
    # RETURNN's length of the batch axis is its int32 batch size whatever the dtype (its Tensor check raises)
    ({"output": {"class": "length", "from": "data", "axis": "B", "dtype": "float32"}},
     "'output' \\(length\\): dtype 'float32' of the batch axis' length is refused"),
    # RETURNN declares its window of window_size the same as window_dim: their sizes must agree (mutate seed 159)
    ({"output": {"class": "window", "window_size": 2, "window_dim": Dim(3, description="win"), "from": "data"}},
     "'output' \\(window\\): window_size 2 contradicts window_dim"),
    # RETURNN stacks one comparison per bin: no bins is an IndexError (LAX, returnn_fuzz mutate seed 247 #83)
    ({"sm": {"class": "softmax", "from": "data", "n_out": 6},
      "output": {"class": "framewise_statistics", "sil_label_idx": 0, "from": "sm", "histogram_num_bins": -1}},
     "'output' \\(framewise_statistics\\): histogram_num_bins must be an int >= 1"),
])
def test_returnn_refuses_at_build(net, match):
    with pytest.raises(NetworkError, match=match):
        _build_and_run(net)


@pytest.mark.parametrize("layer, match", [
    # RETURNN's get_activation_function: no TF function 'linear' ('invalid activation function')
    ({"class": "activation", "activation": "linear", "from": "data"}, "'output'.*unknown activation 'linear'"),
    ({"class": "linear", "activation": "linear", "n_out": 2, "from": "data"}, "'output'.*unknown activation 'linear'"),
    ({"class": "activation", "activation": "relu|tanh", "from": "data"}, "'output'.*unknown activation 'relu\\|tanh'"),
    ({"class": "activation", "activation": "gelu_tanh", "from": "data"}, "'output'.*unknown activation"),
    # its 'a, b = s.split("+", 2)' takes one operator of a kind only
    ({"class": "activation", "activation": "1+2+sigmoid", "from": "data"}, "'output'.*one '\\+' only"),
])
def test_activation_returnn_does_not_know(layer, match):
    with pytest.raises(NetworkError, match=match):
        _build_and_run({"output": layer})


@pytest.mark.parametrize("cond", [True, False])
def test_switch_condition_python_bool(cond):
    """RETURNN's SwitchLayer resolves a non-callable condition with get_layer, which asserts a str."""
    with pytest.raises(NetworkError, match="'output' \\(switch\\): condition must be a layer name"):
        _build_and_run({"output": {"class": "switch", "condition": cond, "true_from": "data", "false_from": 1.0}})


_CONCAT_T = {"class": "concat", "from": [["data", "T"], ["data", "T"]]}


@pytest.mark.parametrize("kind", ["combine", "compare"])
def test_concat_on_time_is_derived_from_time(kind):
    """RETURNN's concat dim is sum(parts) (dim math, derived from the first dynamic part): its
    get_common_data takes it as the time axis (derived_matches), then cannot map the sources onto it
    (at every behavior_version)."""
    layer = {"class": kind, "from": ["c", "data"], **({"kind": "add"} if kind == "combine" else {"kind": "less"})}
    with pytest.raises(NetworkError, match="'output' \\(%s\\): the sources' axes .* both derive from" % kind):
        _build_and_run({"c": _CONCAT_T, "output": layer})


def test_concat_of_the_same_parts_is_one_dim():
    """RETURNN's dim math keeps one dim per sum of the same parts: two such concats combine."""
    out = _build_and_run({"c1": _CONCAT_T, "c2": dict(_CONCAT_T),
                          "output": {"class": "combine", "kind": "add", "from": ["c1", "c2"]}})
    assert out["c1"].data.dims == out["output"].data.dims
    np.testing.assert_allclose(out["output"].tensor.numpy(), 2 * out["c1"].tensor.numpy())


def _unit(**layers):
    return {"output": {"class": "rec", "from": "data", "unit": {
        "s0": {"class": "activation", "activation": "tanh", "from": "data:source"}, **layers}}}


def test_rec_loop_reads_a_moved_out_layer_and_its_prev():
    """RETURNN's loop reads a layer moved out before it per frame or as prev:, not both (in one
    layer or two); read both ways by a layer after the loop is fine."""
    with pytest.raises(NetworkError, match="'output' \\(rec\\): the loop reads 's0'.*both"):
        _build_and_run(_unit(output={"class": "linear", "n_out": 3, "from": ["s0", "prev:output", "prev:s0"]}))
    with pytest.raises(NetworkError, match="'output' \\(rec\\): the loop reads 's0'.*both"):
        _build_and_run(_unit(a={"class": "linear", "n_out": 3, "from": ["s0", "prev:output"]},
                             b={"class": "linear", "n_out": 3, "from": ["prev:s0", "prev:output"]},
                             output={"class": "combine", "kind": "add", "from": ["a", "b"]}))
    _build_and_run(_unit(o={"class": "linear", "n_out": 3, "from": ["prev:s0", "prev:o"]},
                         output={"class": "combine", "kind": "add", "from": ["o", "s0"]}))


def test_pad_axes_one_axis_per_entry():
    """RETURNN's PadLayer resolves each entry of 'axes' with get_axis_from_description: 'spatial'
    with two spatial axes (after a window) is refused, not both padded."""
    with pytest.raises(NetworkError, match="'output' \\(pad\\): option 'axes': axis 'spatial' not unique"):
        _build_and_run({"w": {"class": "window", "window_size": 3, "from": "data"},
                        "output": {"class": "pad", "axes": "spatial", "padding": [1, 1], "from": "w"}})


_LIN = {"class": "linear", "n_out": 3, "from": "data"}


@pytest.mark.parametrize("unit, match", [
    ({"b": {"class": "copy", "from": "base:lin"},  # RETURNN: _check_output_template_shape asserts
      "output": {"class": "linear", "n_out": 3, "from": ["b", "prev:output"]}}, "sub-layer 'b' reads only base:"),
    ({"output": {"class": "linear", "n_out": 3, "from": "base:lin"}}, "sub-layer 'output' reads only base:"),
])
def test_rec_unit_layer_of_base_layers_over_the_loop_time(unit, match):
    """RETURNN's per-step template of a sub-layer reading only base: layers keeps their time axis,
    the loop's own here; a layer reducing it first is fine."""
    with pytest.raises(NetworkError, match="'output' \\(rec\\): " + match):
        _build_and_run({"lin": _LIN, "output": {"class": "rec", "from": "data", "unit": unit}})
    _build_and_run({"lin": _LIN, "output": {"class": "rec", "from": "data", "unit": {
        "b": {"class": "copy", "from": "base:lin"}, "r": {"class": "reduce", "mode": "sum", "axis": "T", "from": "b"},
        "output": {"class": "linear", "n_out": 3, "from": ["r", "prev:output"]}}}})


_WITH_CLASSES = {"data": Data("data", shape=(None, 3)), "classes": Data("classes", shape=(None,), sparse=True, dim=5)}


@pytest.mark.parametrize("layer, key, fixed", [
    ({"class": "prefix_in_time", "from": "data:classes"}, "'prefix' 0.0", {"prefix": 0}),  # RETURNN's default 0.0
    ({"class": "postfix_in_time", "postfix": 1.5, "from": "data:classes"}, "'postfix' 1.5", {"postfix": 1}),
    ({"class": "cumsum", "additional_left_summand_per_element": 1.0, "from": "data:classes"},
     "'additional_left_summand_per_element' 1.0", {"additional_left_summand_per_element": 1}),
])
def test_float_constant_for_int_data(layer, key, fixed):
    """RETURNN puts the number into a tensor of the data's dtype: TensorFlow refuses a float for int32."""
    with pytest.raises(NetworkError, match="'output' \\(%s\\): %s is a float but the data is int32"
                       % (layer["class"], key)):
        TFNetwork(outputs({"output": layer}), _WITH_CLASSES)
    TFNetwork(outputs({"output": dict(layer, **fixed)}), _WITH_CLASSES)


@pytest.mark.parametrize("extern, layer, match", [
    # RETURNN's pool output template is float32 whatever the input: an int tensor fails its dtype assertion
    ({"dim": 3, "dtype": "int32", "shape": (None, 3)}, {"class": "pool", "mode": "max", "pool_size": (2,)},
     "'output' \\(pool\\): pooling int32 data is refused"),
    # its native Chunking/UnChunking ops take float32 only (TypeError), sparse labels too
    ({"dim": 3, "sparse": True}, {"class": "time_chunking", "chunk_size": 3, "chunk_step": 2},
     "'output' \\(time_chunking\\): needs float32 input"),
    ({"dim": 3, "dtype": "int32", "shape": (None, 3)}, {"class": "time_chunking", "chunk_size": 3, "chunk_step": 2},
     "'output' \\(time_chunking\\): needs float32 input"),
])
def test_int_data_into_float32_only_layers(extern, layer, match):
    with pytest.raises(NetworkError, match=match):
        TFNetwork(outputs({"output": dict(layer, **{"from": "data"})}), {"data": Data("data", **extern)})


@pytest.mark.parametrize("extra", [{"n_out": 3}, {"out_type": {"dim": 3}}])
def test_pool_refuses_n_out_and_out_type(extra):
    """RETURNN's PoolLayer asserts neither n_out nor out_type is given, even one that matches (returnn_fuzz mutate
    seed 286 #89 LAX)."""
    pool = dict({"class": "pool", "mode": "max", "pool_size": (2,), "from": "data"}, **extra)
    with pytest.raises(NetworkError, match="'output' \\(pool\\): '%s' is refused, as RETURNN's pool" % list(extra)[0]):
        TFNetwork(outputs({"output": pool}), {"data": Data("data", shape=(None, 3))})


def test_float32_pool_and_chunking_still_build():
    for layer in ({"class": "pool", "mode": "max", "pool_size": (2,)},
                  {"class": "time_chunking", "chunk_size": 3, "chunk_step": 2}):
        out = _build_and_run({"output": dict(layer, **{"from": "data"})})["output"]
        assert out.tensor.dtype == tf.float32


@pytest.mark.parametrize("layer", [
    {"class": "gather", "from": "data", "axis": -1, "position": 0},
    {"class": "softmax_over_spatial", "from": "data", "axis": -1},
    {"class": "split", "from": "data", "axis": -1, "num_splits": 1},
    {"class": "top_k", "from": "data", "axis": -1, "k": 1},
    {"class": "repeat", "from": "data", "axis": -1, "repetitions": 2},
])
def test_int_axis_refused_where_returnn_never_takes_one(layer):
    """RETURNN reads these axis options with allow_int=False: an int is an error at every behavior version."""
    with pytest.raises(NetworkError, match="'output'.*option 'axis': axis -1 as an int is refused"):
        _build_and_run({"output": layer})


@pytest.mark.parametrize("unit, refused", [
    *[(u, True) for u in ("gru", "standardlstm", "basiclstm", "rhn", "layernormvariantslstm", "vanillalstm",
                          "zoneoutlstm", "basicrnn", "nativelstmlowmem")],
    *[(u, False) for u in ("lstm", "lstmp", "nativelstm", "nativelstm2", "lstmblock", "cudnnlstm")]])
def test_rec_unit_sparse_input(unit, refused):
    """RETURNN's whole-sequence rec layer embeds class indices only in its native LSTM ops (their input projection);
    its TensorFlow cells assert a dense input, as NativeLstmLowMem ("not supported") (checked with RETURNN
    1.20261022, returnn_fuzz chain seed 332)."""
    extern = {"data": Data("data", shape=(None,), dim=7, sparse=True)}
    net_dict = {"output": {"class": "rec", "unit": unit, "n_out": 4, "from": "data"}}
    if refused:
        with pytest.raises(NetworkError, match="'output' \\(rec\\): unit '%s' takes no sparse input" % unit):
            TFNetwork(net_dict, extern)
    else:
        TFNetwork(net_dict, extern)


def test_rec_loop_over_a_static_time_axis_refused():
    """RETURNN's rec loop over its source's static time axis (fixed-length extern data) asserts ('fixed_seq_len
    ... without dim tag'); its plain recurrent units run over such an axis (goldens static_time_rec_*)."""
    static = Dim(6, kind=Dim.Types.Spatial, description="static-time")
    data = Data("data", dims=[batch_dim, static, Dim(5, kind=Dim.Types.Feature, description="feat")], time_dim_axis=1)
    with pytest.raises(NetworkError, match="'output' \\(rec\\): a loop over the static axis 'static-time'"):
        TFNetwork({"output": {"class": "rec", "from": "data", "unit": {
            "h": {"class": "linear", "activation": "tanh", "n_out": 3, "from": ["data:source", "prev:h"]},
            "output": {"class": "copy", "from": "h"}}}}, {"data": data})


def test_prefix_postfix_in_time_axes_are_named_as_returnns_dim_math():
    """RETURNN's postfix_in_time axis is ``in_dim + repeat`` (described ``time+1``), prefix_in_time's
    ``repeat + in_dim`` (``2+time``); 'stag:' finds them by that description only, so 'stag:time' after a
    split_dims of the time axis (no 'time' left in the names) fails there (checked with RETURNN 1.20261022,
    returnn_fuzz chain seed 366 #40); it was found here in the old name 'l1:postfix_in_time-time'."""
    split = {"l0": {"class": "split_dims", "axis": "T", "dims": [2, -1], "from": "data"}}
    net = TFNetwork(outputs(dict(split, post={"class": "postfix_in_time", "postfix": 0.0, "from": "l0"},
                                 pre={"class": "prefix_in_time", "repeat": 2, "from": "data"},
                                 output={"class": "cumsum", "axis": "stag:l0_split_dims1_rem+1", "from": "post"})),
                    {"data": Data("data", shape=(None, 3))})
    assert net.layers["post"].output.dims[2].description == "l0_split_dims1_rem+1"
    assert net.layers["pre"].output.dims[1].description == "2+" + net.extern_data["data"].dims[1].description
    with pytest.raises(NetworkError, match="'output' \\(cumsum\\): option 'axis': axis 'stag:time': no dim tag"):
        TFNetwork(dict(split, post={"class": "postfix_in_time", "postfix": 0.0, "from": "l0"},
                       output={"class": "cumsum", "axis": "stag:time", "from": "post"}),
                  {"data": Data("data", shape=(None, 3))})


@pytest.mark.parametrize("tail, sources, refused", [
    ("f2_f3", ["tail", "data"], True),  # returnn_fuzz chain seed 367 #49 (reshape to (1, 6) features)
    ("f2_f3", ["data", "tail"], True),
    ("split", ["tail", "data"], True),  # split_dims of the feature axis: both parts feature-kind
    ("s2_f3", ["tail", "data"], False),  # a spatial extra axis: the other source is broadcast
    ("f2_f3", ["tail", "tail2"], False),  # both have it
])
def test_concat_of_sources_where_only_some_have_an_extra_feature_kind_axis(tail, sources, refused):
    """RETURNN's concatenated sources (copy, linear, ... of several sources) take a common template that drops
    feature-kind axes besides the feature axis (get_common_data ignore_feature_dim): where only some sources have
    such an axis its tf.concat fails at build time (checked with RETURNN 1.20261022); built here before."""
    feat = Dim(6, kind=Dim.Types.Feature, description="feat")
    time = Dim(None, kind=Dim.Types.Spatial, description="time")
    kinds = {"f2_f3": (Dim.Types.Feature, Dim.Types.Feature), "s2_f3": (Dim.Types.Spatial, Dim.Types.Feature)}
    if tail == "split":
        tail_layer = {"class": "split_dims", "axis": "F", "dims": [2, 3], "from": "data"}
    else:
        k0, k1 = kinds[tail]
        tail_layer = {"class": "reshape", "in_dims": [feat], "from": "data",
                      "out_dims": [Dim(2, kind=k0, description="a"), Dim(3, kind=k1, description="b")]}
    net = {"tail": tail_layer, "tail2": {"class": "activation", "activation": "tanh", "from": "tail"},
           "output": {"class": "copy", "from": sources}}
    extern = {"data": Data("data", dims=[batch_dim, time, feat])}
    if refused:
        with pytest.raises(NetworkError, match="'output' \\(copy\\): (source .* has the feature-kind axis|RETURNN's "
                                               "concatenation of its sources fails .*tf.concat fails)"):
            TFNetwork(net, extern)
    else:
        TFNetwork(net, extern)


def test_positional_encoding_sparse_offset_refused():
    """RETURNN copies the offset onto the dense output's axes with check_sparse (asserts for a sparse offset, checked
    with RETURNN 1.20261022: returnn_fuzz mutate seed 199 #7); the same offset dense builds."""
    def net(sparse):
        return {"lin": {"class": "linear", "activation": None, "n_out": 8, "from": "data"},
                "off": {"class": "range_in_axis", "from": "data", "axis": "T", "sparse": sparse},
                "output": {"class": "positional_encoding", "add_to_input": True, "offset": "off", "from": "lin"}}
    with pytest.raises(NetworkError, match="'output' \\(positional_encoding\\): offset must be dense"):
        _build_and_run(net(True))
    assert _build_and_run(net(False))["output"].tensor.shape == (2, 4, 8)


@pytest.mark.parametrize("shape, out_shape", [([5, 5], None), ([5, 5, 3], None), ([5, 3], (None, None, 5, 3)),
                                              ([3, 5], (None, None, 3, 5)), ([5], (None, None, 5))])
def test_combine_two_axes_of_one_source_on_one_common_axis_refused(shape, out_shape):
    """RETURNN's get_common_data looks an axis new to the (B, T, 5) data (a constant's second axis of size 5) up among
    the common axes once more, where its loose equality (same size) takes the data's features, onto which the
    constant's first axis is mapped already: RETURNN fails ("cannot match the axes", mutate seed 258 #44, checked
    with RETURNN 1.20261022 at behavior_version 0 and 21); the other shapes build with RETURNN's layout."""
    net = {"c": {"class": "constant", "value": 2.5, "shape": shape},
           "output": {"class": "combine", "kind": "mul", "from": ["data", "c"]}}
    extern = {"data": Data("data", shape=(None, 5))}
    if out_shape is None:
        with pytest.raises(NetworkError, match="'output' \\(combine\\): the axis .*two axes on one"):
            TFNetwork(net, extern)
    else:
        assert TFNetwork(net, extern).layers["output"].output.batch_shape == out_shape


_MASK = {"r": {"class": "reduce", "mode": "max", "axis": "F", "from": "data"},
         "m": {"class": "compare", "from": "r", "kind": "greater", "value": 0.0}}
_LSTM = {"class": "rec", "unit": "lstm", "from": "data", "n_out": 3}


@pytest.mark.parametrize("net, refused", [
    ({"output": dict(_LSTM, name_scope="")}, True),
    ({"output": dict(_LSTM, name_scope="/")}, True),
    ({"output": {"class": "rnn_cell", "unit": "LSTMBlock", "from": "data", "n_out": 3, "name_scope": ""}}, True),
    ({"output": {"class": "rec", "from": "data", "name_scope": "", "unit": {
        "output": {"class": "linear", "from": ["data:source", "prev:output"], "n_out": 3}}}}, True),
    (dict(_MASK, output={"class": "masked_computation", "from": "data", "mask": "m", "name_scope": "",
                         "unit": dict(_LSTM)}), True),
    ({"output": dict(_LSTM, name_scope="x")}, False),
    ({"output": {"class": "subnetwork", "from": "data", "subnetwork": {"output": dict(_LSTM, name_scope="")}}}, False),
    (dict(_MASK, output={"class": "masked_computation", "from": "data", "mask": "m", "name_scope": "",
                         "unit": {"class": "linear", "from": "data", "n_out": 3}}), False),
])
def test_rec_layer_params_in_the_root_scope_refused(net, refused):
    """RETURNN's rec and rnn_cell layers keep the variables under their scope's name plus '/': in the root scope
    ("" at the top level, "/", a masked_computation's "" given to its unit) none, so RETURNN neither trains nor saves
    them (mutate seed 265 #29: its parameter list was empty; checked with RETURNN 1.20261022). One line here; in a
    subnetwork's scope, or for other layers in the root scope, RETURNN keeps them."""
    extern = {"data": Data("data", shape=(None, 5))}
    if refused:
        with pytest.raises(NetworkError, match="its parameters are in the root scope"):
            TFNetwork(net, extern)
    else:
        TFNetwork(net, extern)


def test_window_of_an_input_without_batch_axis_refused():
    """RETURNN's window template is batch-major (copy_as_batch_major asserts a batch axis): a boolean_mask over
    (B, T) leaves none, and RETURNN fails (chain seed 390 #40, checked with RETURNN 1.20261022)."""
    net = {"red": {"class": "reduce", "mode": "sum", "axis": "F", "from": "data"},
           "mask": {"class": "compare", "kind": "greater", "value": 0.0, "from": "red"},
           "tail": {"class": "boolean_mask", "from": "data", "mask": "mask", "dims": [batch_dim, "T"]},
           "output": {"class": "window", "window_size": 4, "window_right": 1, "from": "tail"}}
    with pytest.raises(NetworkError, match="'output' \\(window\\): an input without batch axis"):
        TFNetwork(net, {"data": Data("data", shape=(None, 3))})
