"""conv and pool with in_spatial_dims on an input of more axes (returnn_common's nn.pool1d over a
feature-like axis of (B, T, F', C), its blstm_cnn_specaug front end): as RETURNN's
ConvLayer.transform_input, the other axes are merged into the batch, in their order, and come first
in the output. numpy references."""
import numpy as np
import tensorflow as tf

from returnn.tensor import Data, Dim, DimTypes, batch_dim
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork

TIME = Dim(None, kind=DimTypes.Spatial, description="time")
SPAT = Dim(5, kind=DimTypes.Spatial, description="spat")
CH = Dim(3, kind=DimTypes.Feature, description="ch")
DATA = Data("data", dims=[batch_dim, TIME, SPAT, CH], feature_dim_axis=3)
LENS = [4, 2]


def _run(layer):
    net = TFNetwork({"output": layer}, {"data": DATA})
    x = np.random.RandomState(0).randn(2, 4, 5, 3).astype("float32")
    out = net.forward({"data": tf.constant(x), "data:seq_len": tf.constant(LENS)}, RunContext(False))["output"]
    return out, x, net


def test_pool_over_one_axis_keeps_the_others_first():
    out, x, _ = _run({"class": "pool", "from": "data", "mode": "max", "pool_size": [2], "padding": "same",
                   "in_spatial_dims": [SPAT]})
    ref = np.stack([x[:, :, i:i + 2].max(axis=2) for i in range(0, 5, 2)], axis=2)  # (B, T, 3, C)
    assert out.data.dims[:2] == (batch_dim, TIME) and out.data.dims[3] == CH
    assert out.tensor.shape == (2, 4, 3, 3) and out.seq_len.numpy().tolist() == LENS
    np.testing.assert_allclose(out.tensor.numpy(), ref, rtol=1e-6)


def test_conv_over_one_axis_keeps_the_others_first():
    out_dim = Dim(2, kind=DimTypes.Feature, description="out")
    out, x, net = _run({"class": "conv", "from": "data", "filter_size": [3], "padding": "valid", "out_dim": out_dim,
                        "in_spatial_dims": [SPAT], "with_bias": False, "activation": None})
    w = net.layers["output"].W.numpy()  # (3, C, 2)
    ref = np.stack([np.einsum("btkc,kco->bto", x[:, :, i:i + 3], w) for i in range(3)], axis=2)
    assert out.data.dims[:2] == (batch_dim, TIME) and out.tensor.shape == (2, 4, 3, 2)
    np.testing.assert_allclose(out.tensor.numpy(), ref, rtol=1e-5, atol=1e-6)
