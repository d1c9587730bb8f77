"""RETURNN's Data/Tensor and Dim API as config code calls it (returnn/tensor/data_compat.py,
dim_math.py): layout copies that carry the value along, sizes per axis, masks, old and new Dim
constructors and dim math."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from returnn.tensor import Data, Dim, DimensionTag, FeatureDim, SpatialDim, batch_dim
from returnn.tensor.dim_math import dyn_size_of


def btf(values=None, lengths=(3, 1)):
    time, feat = SpatialDim("time"), FeatureDim("feat", 2)
    data = Data("x", dims=(batch_dim, time, feat))
    if values is None:
        values = tf.reshape(tf.range(12, dtype=tf.float32), (2, 3, 2))
    return data.with_value(values, {time: tf.constant(lengths)}), time, feat


def test_layout_copies_move_the_value():
    x, time, feat = btf()
    tb = x.copy_as_time_major()
    assert tb.dims == (time, batch_dim, feat) and tb.time_dim_axis == 0 and tb.feature_dim_axis == 2
    np.testing.assert_array_equal(tb.placeholder.numpy(), np.transpose(x.placeholder.numpy(), (1, 0, 2)))
    np.testing.assert_array_equal(tb.copy_as_batch_major().placeholder.numpy(), x.placeholder.numpy())
    bf = x.copy_as_batch_feature_major()
    assert bf.dims == (batch_dim, feat, time) and bf.placeholder.shape == (2, 2, 3)
    assert x.copy_with_feature_dim_axis(1).dims == (batch_dim, feat, time)  # RETURNN: moves the feature axis
    assert x.copy_move_axis(2, 0).placeholder.shape == (2, 2, 3)
    assert x.copy_transpose([time, batch_dim, feat]).dims == (time, batch_dim, feat)
    assert tb.copy_as_bt_or_tb_major() == tb  # RETURNN: a copy in the same layout
    assert x.copy_template().placeholder is None and x.copy_template().dims == x.dims


def test_sizes_masks_and_axes():
    x, time, feat = btf()
    assert x.get_sequence_lengths().numpy().tolist() == [3, 1]
    assert x.size_placeholder[0].numpy().tolist() == [3, 1]
    assert x.copy_as_time_major().get_sequence_lengths().numpy().tolist() == [3, 1]
    assert x.get_sequence_mask().numpy().tolist() == [[True, True, True], [True, False, False]]
    mask = x.copy_as_time_major().get_sequence_mask_broadcast()
    assert mask.shape == (3, 2, 1) and mask.numpy()[:, 1, 0].tolist() == [True, False, False]
    assert x.get_time_dim_tag() is time and x.time_dim_axis_excluding_batch == 0
    assert x.get_batch_axis(1) == 2 and x.get_batch_axis_excluding_batch(2) == 1
    assert x.get_axis_from_description("F") == 2 and x.dim_tags == x.dims and x.batch_shape == (None, None, 2)
    assert x.is_batch_major() and not x.is_time_major() and x.have_dim_tag(feat, unique=True)
    y = Data("y", shape=(None, 4))
    y.placeholder = tf.zeros((2, 5, 4))
    y.size_placeholder = {0: tf.constant([5, 2])}
    assert y.get_sequence_lengths().numpy().tolist() == [5, 2]


def test_adding_and_removing_axes():
    x, time, feat = btf()
    scalar = Data("s", dims=(feat,))
    scalar.placeholder = tf.ones((2,))
    withb = scalar.copy_add_batch_dim(0)
    assert withb.dims == (batch_dim, feat) and withb.placeholder.shape == (1, 2)
    sp = x.copy_add_spatial_dim(1)
    assert sp.batch_ndim == 4 and sp.placeholder.shape == (2, 1, 3, 2) and sp.dims[2] is time
    assert sp.copy_squeeze_axes([1]).dims == x.dims
    new = Dim(3, kind=Dim.Types.Spatial, description="rep")
    rep = x.copy_add_dim_by_tag(new, unbroadcast=True, axis=1)
    assert rep.placeholder.shape == (2, 3, 3, 2)
    assert x.copy_add_dim_by_tag(new, True, 1).dims == rep.dims  # RETURNN's positional form
    assert x.copy_template_excluding_time_dim().dims == (batch_dim, feat)
    added = x.copy_template_excluding_time_dim().copy_template_adding_time_dim(time_dim_axis=1)
    assert added.batch_ndim == 3 and added.time_dim_axis == 1 and added.dims[1].is_dynamic()


def test_dim_constructors_old_and_new():
    old = DimensionTag(kind=DimensionTag.Types.Spatial, description="time")
    assert old.is_spatial_dim() and old.dimension is None and old.description == "time"
    new = Dim(kind=Dim.Types.Feature, description="f", dimension=5)
    assert new.dimension == 5 and new.size == 5 and new.name == "f" and new.is_feature_dim()
    assert FeatureDim("g", 7).dimension == 7 and SpatialDim("s").is_dynamic()
    assert Dim(3, "three", match_priority=1).dimension == 3
    with pytest.raises(TypeError, match="not supported"):
        Dim(3, "x", wrong_option=1)
    data = Data("d", shape=(None, 5), same_dim_tags_as={"t": old})
    assert data.get_time_dim_tag() is old


def test_dim_math():
    time, feat = SpatialDim("time"), FeatureDim("feat", 6)
    assert (time * 2) is (time * 2) and (time * 2) == time * 2 and (2 * time) is not (time * 2)
    assert (time * 2) // 2 is time and time + 0 is time and feat * 1 is feat
    assert (feat * 2).dimension == 12 and (feat // 4).dimension == 1 and feat.ceildiv_right(4).dimension == 2
    assert (feat - 1).dimension == 5 and (feat + feat).dimension == 12 and (feat / 3).dimension == 2
    assert (time + 1).is_dynamic() and (time + 1).description == "time+1"
    with pytest.raises(ValueError, match="divide"):
        feat / 4
    sizes = {time: np.array([5, 3])}
    assert dyn_size_of(time.ceildiv_right(2), sizes.__getitem__).tolist() == [3, 2]
    assert dyn_size_of((time - 1) * 2, sizes.__getitem__).tolist() == [8, 4]
    x = Data("x", dims=(batch_dim, time.ceildiv_right(2), feat))
    x = x.with_value(tf.zeros((2, 3, 6)), {time: tf.constant([5, 3])})
    assert x.get_sequence_lengths().numpy().tolist() == [3, 2]  # derived from time's sizes


def test_old_constructor_without_batch_axis_has_returnns_time_axis():
    """RETURNN keeps time_dim_axis unspecified when not given, so its first dynamic axis is the time axis also
    without a batch axis (benchmarks/returnn_fuzz_data_api.py: None here before, get_time_dim_tag failed)."""
    x = Data("x", shape=(1, None, 1), dim=1, batch_dim_axis=None)
    assert x.time_dim_axis == 1 and x.feature_dim_axis == 2
    assert x.get_time_dim_tag() is x.dims[1]
    assert Data("y", shape=(None, 3), batch_dim_axis=None).copy_as_time_major().dims[0].is_dynamic()
    assert Data("z", shape=(4, 1), batch_dim_axis=None).time_dim_axis is None  # no dynamic axis: none
