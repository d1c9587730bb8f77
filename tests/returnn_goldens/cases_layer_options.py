"""Golden cases of layer options from RETURNN's own test nets (loaded by make_goldens.py): conv with
``filter`` (another layer's output as the kernel, RETURNN's test_ConvLayer_custom_filter_no_dim_tags),
matched to the kernel's axes by size. ``dropout_axis``, ``grad_filter`` and ``updater_opts`` act in
training only (tests/test_layer_returnn_options.py, tests/test_updater_opts.py)."""
from make_goldens import LENS_LONG, case

L = {"data": LENS_LONG}

case("conv1d_filter_layer", "conv_filter", {
    "conv_h_filter": {"class": "variable", "shape": (6, 1, 15), "init": "glorot_uniform"},
    "output": {"class": "conv", "filter_size": (6,), "strides": 2, "n_out": 15, "padding": "valid",
               "filter": "conv_h_filter", "from": "data"}}, extern={"data": {"shape": (None, 1)}},
    lens={"data": [9, 7, 6]}, notes="RETURNN's test_ConvLayer_custom_filter_no_dim_tags")
case("conv1d_filter_layer_same", "conv_filter", {
    "f": {"class": "variable", "shape": (3, 5, 4)},
    "output": {"class": "conv", "filter_size": [3], "padding": "same", "n_out": 4, "with_bias": False,
               "filter": "f", "from": "data"}}, lens=L)
case("conv1d_filter_layer_permuted", "conv_filter", {
    "f": {"class": "variable", "shape": (4, 3, 5)},
    "output": {"class": "conv", "filter_size": [3], "padding": "same", "n_out": 4, "with_bias": True,
               "filter": "f", "from": "data"}}, lens=L,
    notes="the filter's axes (n_out 4, filter_size 3, input 5) matched by size")
