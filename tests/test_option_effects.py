"""Layer options that were accepted and ignored, now with their RETURNN effect (numpy references)
or refused in one line (see tests/test_option_audit.py for the rule)."""
from __future__ import annotations

import contextlib

import numpy as np
import pytest
import tensorflow as tf

from data_utils import btf, lo, make_layer as make, run_layer as run, spec
from returnn.config import Config, get_global_config, set_global_config
from returnn.errors import NetworkError
from returnn.tensor import Data, SpatialDim, batch_dim
from returnn.tf.activations import get_activation

LENS = np.array([5, 3, 1], np.int32)


@contextlib.contextmanager
def behavior_version(version: int):
    old = get_global_config()
    set_global_config(Config({"behavior_version": version}))
    try:
        yield
    finally:
        set_global_config(old)


# ---------------------------------------------------------------- activations (RETURNN's forms)

@pytest.mark.parametrize("spec_,ref", [
    ("tanh+sigmoid", lambda x: np.tanh(x) + 1 / (1 + np.exp(-x))),
    ("1-sigmoid", lambda x: 1 - 1 / (1 + np.exp(-x))),
    ("2*sigmoid", lambda x: 2 / (1 + np.exp(-x))),
    ("relu/2", lambda x: np.maximum(x, 0) / 2),
    ("3+2*tanh", lambda x: 3 + 2 * np.tanh(x)),
    ("neg", lambda x: -x),
    ("erf", lambda x: np.vectorize(__import__("math").erf)(x)),
    ("safe_log", lambda x: np.log(np.maximum(x, 1e-20))),
    ("tf.nn.relu(x) * 2", lambda x: np.maximum(x, 0) * 2),
    ("tanh|square", lambda x: np.tanh(x) ** 2),
    ("none", lambda x: x),
])
def test_activation_forms(spec_, ref):
    x = np.linspace(-2, 2, 9).astype(np.float32)
    np.testing.assert_allclose(get_activation(spec_, "a")(tf.constant(x)).numpy(), ref(x), rtol=1e-5, atol=1e-6)


def test_unknown_activation_names_the_layer():
    with pytest.raises(NetworkError, match="layer 'a'.*'tanhh'"):
        get_activation("tanhh+sigmoid", "a")


# ---------------------------------------------------------------- conv / pool / transposed_conv

def test_conv_bias_default_follows_behavior_version():
    """RETURNN: conv has a bias by default only from behavior_version 10."""
    with behavior_version(0):
        assert make("conv", {"filter_size": [3], "n_out": 2}, [spec(4)]).bias is None
    with behavior_version(10):
        assert make("conv", {"filter_size": [3], "n_out": 2}, [spec(4)]).bias is not None
    with behavior_version(0):
        assert make("conv", {"filter_size": [3], "n_out": 2, "with_bias": True}, [spec(4)]).bias is not None


def test_transposed_conv_out_spatial_dims():
    data, val, _ = btf(3, LENS)
    out_dim = SpatialDim("up")
    layer = make("transposed_conv", {"filter_size": [2], "n_out": 2, "out_spatial_dims": [out_dim]}, [data])
    assert layer.output.dims[1] is out_dim
    out = run(layer, [val])
    np.testing.assert_array_equal(out.sizes[out_dim].numpy(), LENS * 2)
    with pytest.raises(NetworkError, match="'lay'.*out_spatial_dims"):
        make("transposed_conv", {"filter_size": [2], "n_out": 2, "out_spatial_dims": [SpatialDim("s", 3)]}, [data])
