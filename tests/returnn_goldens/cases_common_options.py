"""Golden cases of options of common layers that the basic families leave out (loaded by
make_goldens.py): combine with a variable of shape [1] (behavior_version 0 and 12), eval with an
out_type shape, reduce over several axes, conv with dilation / strides and 'valid' padding at odd
lengths, pool with 'same' padding, merge_dims / split_dims corner cases; most also with a
length-0 sequence.

Left out because RETURNN itself fails on them: combine with a variable of shape [1] from
behavior_version 11 (RequirementNotSatisfied: the inputs "require broadcasting to" (B, T, F, 1),
"This must be explicitly allowed, e.g. by specifying out_shape"; this engine refuses it too),
pool with dilation and the default strides (= pool_size; TF: "`strides > 1` not supported in
conjunction with `dilation_rate > 1`"; this engine computes it).
An eval's ``source(i)`` is made compatible with an out_type shape that has more axes (RETURNN
inserts size-1 axes), hence ``auto_convert=False`` in eval_out_type_shape_new_axis.
"""
from golden_dims import as_tuple
from make_goldens import LENS_ZERO, case

ODD = {"data": [7, 5, 3]}
ZERO = {"data": LENS_ZERO}
X6 = {"data": {"dim": 6}}


def _both(name, family, network, extern=None, config=None, notes=""):
    """The case with lengths [7, 5, 3] and with [5, 3, 0] (a length-0 sequence)."""
    case(name, family, network, extern=extern, config=config, lens=ODD, notes=notes)
    case(name + "_zero_len", family, network, extern=extern, config=config, lens=ZERO, notes=notes)


# --- combine with a variable of shape [1]
for bv in (0, 10):
    case("combine_variable_shape1_bv%i" % bv, "combine", {
        "v": {"class": "variable", "shape": [1]},
        "output": {"class": "combine", "kind": "mul", "from": ["data", "v"]}}, config={"behavior_version": bv},
        notes="a size-1 variable times (B, T, F)")
case("combine_variable_feature_bv0", "combine", {
    "v": {"class": "variable", "shape": [5]},
    "output": {"class": "combine", "kind": "add", "from": ["data", "v"]}}, config={"behavior_version": 0})
case("combine_variable_not_saveable", "combine", {
    "v": {"class": "variable", "shape": [5], "init": 0.5, "saveable": False},
    "output": {"class": "combine", "kind": "add", "from": ["data", "v"]}},
    notes="not among RETURNN's saveable parameters (the golden's); its init value on both sides")

# --- eval with out_type shape
_both("eval_out_type_shape_keepdims", "eval", {"output": {
    "class": "eval", "from": "data", "eval": "tf.reduce_sum(source(0), axis=-1, keepdims=True)",
    "out_type": {"shape": as_tuple(None, 1)}}})
case("eval_out_type_shape_new_axis", "eval", {"output": {
    "class": "eval", "from": "data",
    "eval": "tf.stack([source(0, auto_convert=False), -source(0, auto_convert=False)], axis=2)",
    "out_type": {"shape": as_tuple(None, 2, 5)}}}, lens=ODD)

# --- reduce over several axes
_both("reduce_mean_time_feature", "reduce", {"output": {"class": "reduce", "mode": "mean", "axes": ["T", "F"],
                                                        "from": "data"}})
_both("reduce_max_batch_time", "reduce", {"output": {"class": "reduce", "mode": "max", "axes": ["B", "T"],
                                                     "from": "data"}})
_both("reduce_sum_except_batch", "reduce", {"output": {"class": "reduce", "mode": "sum", "axes": "except_batch",
                                                       "from": "data"}})
_both("reduce_mean_time_spatial_keep_dims", "reduce", {
    "split": {"class": "split_dims", "axis": "F", "dims": [2, 3], "from": "data"},
    "output": {"class": "reduce", "mode": "mean", "axes": ["T", "dim:2"], "keep_dims": True, "from": "split"}},
    extern=X6)

# --- conv: dilation, strides, 'valid' padding at odd lengths
_both("conv1d_dilation2_valid", "conv", {"output": {"class": "conv", "filter_size": [3], "dilation_rate": [2],
                                                    "padding": "valid", "n_out": 4, "with_bias": True, "from": "data"}})
_both("conv1d_strides3_valid", "conv", {"output": {"class": "conv", "filter_size": [2], "strides": [3],
                                                   "padding": "valid", "n_out": 4, "with_bias": True, "from": "data"}})
_both("conv1d_strides3_same", "conv", {"output": {"class": "conv", "filter_size": [3], "strides": 3, "padding": "same",
                                                  "n_out": 3, "with_bias": True, "from": "data"}},
      notes="TF's SAME padding of the padded tensor: its left padding depends on the longest sequence")
_both("conv1d_strides2_dilation2_same", "conv", {"output": {"class": "conv", "filter_size": [3], "strides": 2,
                                                            "dilation_rate": 2, "padding": "same", "n_out": 3,
                                                            "with_bias": True, "from": "data"}})

# --- pool: 'same' padding
_both("pool1d_avg_same", "pool", {"output": {"class": "pool", "mode": "avg", "pool_size": [3], "padding": "same",
                                             "from": "data"}})
_both("pool1d_max_same_strides2", "pool", {"output": {"class": "pool", "mode": "max", "pool_size": [2], "strides": [2],
                                                      "padding": "same", "from": "data"}})
_both("pool1d_max_valid_dilation2", "pool", {"output": {"class": "pool", "mode": "max", "pool_size": [2],
                                                        "dilation_rate": [2], "strides": [1], "padding": "valid",
                                                        "from": "data"}})

# --- merge_dims / split_dims corner cases
_both("split_dims_time_pad", "merge_dims", {"output": {"class": "split_dims", "axis": "T", "dims": [-1, 2],
                                                       "from": "data"}},
      notes="a dynamic axis split into (T/2, 2): padded to a multiple of 2")
_both("split_dims_feature_minus1", "merge_dims", {"output": {"class": "split_dims", "axis": "F", "dims": [2, -1],
                                                             "from": "data"}}, extern=X6)
_both("merge_dims_keep_order_reversed", "merge_dims", {
    "split": {"class": "split_dims", "axis": "F", "dims": [2, 3], "from": "data"},
    "output": {"class": "merge_dims", "axes": ["dim:3", "dim:2"], "keep_order": True, "from": "split"}}, extern=X6,
    notes="keep_order: merged in the order of 'axes', not the input's")
_both("merge_dims_time_feature", "merge_dims", {"output": {"class": "merge_dims", "axes": ["T", "F"], "from": "data"}},
      notes="a dynamic axis merged with the features")
_both("split_merge_time_roundtrip", "merge_dims", {
    "split": {"class": "split_dims", "axis": "T", "dims": [-1, 2], "from": "data"},
    "lin": {"class": "linear", "activation": "tanh", "n_out": 3, "from": "split"},
    "output": {"class": "merge_dims", "axes": ["dim:2", "F"], "from": "lin"}})

# --- more strided windows at odd lengths
_both("transposed_conv_s3_same", "transposed_conv", {"output": {
    "class": "transposed_conv", "filter_size": [4], "strides": [3], "padding": "same", "n_out": 3, "from": "data"}})
_both("window_stride2_same", "window", {"output": {"class": "window", "window_size": 3, "stride": 2, "padding": "same",
                                                   "from": "data"}})
_both("window_stride2_valid", "window", {"output": {"class": "window", "window_size": 3, "stride": 2,
                                                    "padding": "valid", "from": "data"}})
_both("pool2d_strided_same", "pool", {
    "split": {"class": "split_dims", "axis": "F", "dims": [3, 2], "from": "data"},
    "output": {"class": "pool", "mode": "max", "pool_size": [3, 2], "strides": [2, 2], "padding": "same",
               "from": "split"}}, extern=X6)
_both("conv_time_major_strided_same", "conv", {"output": {
    "class": "conv", "filter_size": [4], "strides": 2, "padding": "same", "n_out": 3, "with_bias": True,
    "from": "data"}}, extern={"data": {"dim": 5, "time_dim_axis": 0, "batch_dim_axis": 1}})
_both("reduce_argmax_time", "reduce", {"output": {"class": "reduce", "mode": "argmax", "axes": "T", "from": "data"}})

# --- combine before behavior_version 11 where a source with a size-1 feature axis also has the other sources'
# feature axis: its size-1 axis broadcasts as any axis (here it took that feature axis a second time: refused)
for bv in (0, 10):
    case("combine_unit_feature_beside_wide_bv%i" % bv, "combine", {
        "e": {"class": "expand_dims", "from": "data", "axis": "F", "dim": 1},
        "output": {"class": "combine", "kind": "add", "from": ["data", "e"]}}, config={"behavior_version": bv})
    case("combine_unit_feature_variable_beside_wide_bv%i" % bv, "combine", {
        "v": {"class": "variable", "shape": [5, 1]},
        "output": {"class": "combine", "kind": "add", "from": ["data", "v"]}}, config={"behavior_version": bv})
