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
