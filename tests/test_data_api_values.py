"""RETURNN's further Data methods for config code carry the value along (returnn/tensor/data_layout.py,
data_compatible.py, data_query.py), checked against numpy: copy_swap_axes, copy_split_feature_dim,
copy_with_feature_last, copy_as_time_batch_major, copy_as_batch_spatial_major, copy_compatible_to (transposed,
broadcast or repeated axes), get_dim; and Dim.is_equal / get_common_data on dims of a config."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from returnn.tensor import Data, Dim, FeatureDim, SpatialDim, batch_dim


def btf():
    time, feat = SpatialDim("time"), FeatureDim("feat", 6)
    values = np.arange(2 * 3 * 6, dtype=np.float32).reshape((2, 3, 6))
    return Data("x", dims=(batch_dim, time, feat)).with_value(tf.constant(values), {time: tf.constant([3, 1])}), \
        values, time, feat


def test_swap_split_and_feature_last_move_the_value():
    x, values, time, feat = btf()
    swapped = x.copy_swap_axes(0, 2)
    assert swapped.dims == (feat, time, batch_dim)
    np.testing.assert_array_equal(swapped.placeholder.numpy(), np.transpose(values, (2, 1, 0)))
    split = x.copy_split_feature_dim(2)
    assert split.batch_shape == (None, None, 3, 2) and split.feature_dim_axis == 3 and split.time_dim_axis == 1
    np.testing.assert_array_equal(split.placeholder.numpy(), values.reshape((2, 3, 3, 2)))
    last = x.copy_swap_axes(1, 2).copy_with_feature_last()
    assert last.dims == (batch_dim, time, feat)
    np.testing.assert_array_equal(last.placeholder.numpy(), values)
    tbm = x.copy_as_time_batch_major()
    assert tbm.dims == (time, batch_dim, feat)
    np.testing.assert_array_equal(tbm.placeholder.numpy(), np.transpose(values, (1, 0, 2)))
    # a value's sizes are known: its dynamic axes come right after the batch axis
    fbt = x.copy_swap_axes(1, 2).copy_swap_axes(0, 1)
    assert fbt.copy_as_batch_spatial_major().dims == (batch_dim, time, feat)
    assert x.get_dim(1).numpy() == 3 and x.get_dim(2) == 6


def test_copy_compatible_to_transposes_and_broadcasts():
    x, values, time, feat = btf()
    extra = SpatialDim("extra", 4)
    target = Data("t", dims=(time, batch_dim, extra, feat))
    out = x.copy_compatible_to(target)
    assert out.batch_shape == (None, None, 1, 6) and out.dims[:2] == (time, batch_dim) and out.dims[3] == feat
    np.testing.assert_array_equal(out.placeholder.numpy(), np.transpose(values, (1, 0, 2))[:, :, None, :])
    out = x.copy_compatible_to(target, unbroadcast=True)
    assert out.dims == (time, batch_dim, extra, feat)
    np.testing.assert_array_equal(out.placeholder.numpy(),
                                  np.repeat(np.transpose(values, (1, 0, 2))[:, :, None, :], 4, axis=2))
    labels = Data("y", dims=(time, batch_dim), sparse_dim=feat)
    assert labels.copy_compatible_to(Data("l", dims=(batch_dim, time), sparse_dim=feat)).dims == (batch_dim, time)


def test_dim_is_equal_options_and_common_data():
    time, feat = SpatialDim("time"), FeatureDim("feat", 3)
    other_feat = FeatureDim("other", 3)
    assert not feat.is_equal(other_feat)
    assert feat.is_equal(other_feat, allow_same_feature_dim=True) and feat.is_equal(other_feat, ignore_feature_dim=True)
    assert not time.is_equal(SpatialDim("time"))  # the user's dims: only themselves (or declared the same)
    a = Data("a", dims=(batch_dim, time, feat))
    b = Data("b", dims=(batch_dim, SpatialDim("spatial", 5)))
    common = Data.get_common_data([a, b])
    assert common.batch_shape == (None, None, 5, 3) and common.dims[1] == time and common.dims[3] == feat
    assert Data.get_common_data([]) is None and Dim.get_uniq_collection([feat, feat, other_feat]) == [feat, other_feat]


def test_eval_sets_the_lengths_of_its_out_type_dim():
    """An eval function gives the lengths of a dynamic dim its out_type made (RETURNN's
    ``self.output.set_dynamic_size(1, seq_lens)`` or ``self.output.size_placeholder[0] = seq_lens``; published
    chunkwise-attention configs); before, the output had no lengths for it."""
    from data_utils import btf as make_btf, make_layer, run_layer
    a, va, x = make_btf(2, [3, 1])
    new_time = SpatialDim("first-two")

    def out_type(sources, name, **_):
        return Data("%s_output" % name, dims=(batch_dim, new_time, sources[0].output.feature_dim))

    for setter in ("self.output.set_dynamic_size(1, lens)", "self.output.size_placeholder.__setitem__(0, lens)"):
        def f(self, source, **_):
            lens = tf.minimum(source(0, as_data=True).get_sequence_lengths(), 2)
            eval(setter)  # noqa: S307
            return source(0)[:, :2]
        out = run_layer(make_layer("eval", {"eval": f, "out_type": out_type}, [a]), [va])
        assert out.data.dims[1] is new_time and out.size(1).numpy().tolist() == [2, 1]
        np.testing.assert_array_equal(out.tensor.numpy()[0], x[0, :2])
        np.testing.assert_array_equal(out.tensor.numpy()[1, :1], x[1, :1])


def test_verify_out_shape():
    """RETURNN's ``Data.verify_out_shape`` (returnn_common's and published RF configs' checks)."""
    import pytest
    from returnn.tensor.marked_dim import ImplicitSparseDim
    time, classes = SpatialDim("time"), FeatureDim("classes", 3)
    labels = Data("y", dims=(batch_dim, time), sparse_dim=classes)
    labels.verify_out_shape({batch_dim, time, ImplicitSparseDim(classes)})
    labels.verify_out_shape({batch_dim, time}, allow_missing_implicit_dims=True)
    with pytest.raises(ValueError, match="missing in 'out_shape': classes"):
        labels.verify_out_shape({batch_dim, time})
    with pytest.raises(TypeError, match="expects a set"):
        labels.verify_out_shape([batch_dim, time])


def test_copy_masked_and_num_elements():
    x, values, time, feat = btf()
    masked = x.copy_masked(-1.0)
    ref = values.copy()
    ref[1, 1:] = -1.0  # lengths [3, 1]
    np.testing.assert_array_equal(masked.placeholder.numpy(), ref)
    np.testing.assert_array_equal(x.copy_masked(0.0, dims=[feat]).placeholder.numpy(), values)  # static: no mask
    assert int(x.num_elements()) == (3 + 1) * 6 and Data("s", dims=(FeatureDim("f", 3), SpatialDim("s", 4))).num_elements() == 12


def test_copy_compatible_to_dims_permutes_and_adds():
    """RETURNN's copy_compatible_to_dims / copy_compatible_to_dims_raw (74 + 10 uses in the mirrored configs)."""
    x, values, time, feat = btf()
    extra = SpatialDim("extra", 2)
    out = x.copy_compatible_to_dims([feat, extra, batch_dim, time])
    assert out.batch_shape == (6, 1, None, None) and out.dims[0] is feat and out.dims[3] is time
    assert out.time_dim_axis == 3 and out.feature_dim_axis == 0
    ref = np.transpose(values, (2, 0, 1))[:, None]
    np.testing.assert_array_equal(out.placeholder.numpy(), ref)
    raw = x.copy_compatible_to_dims_raw([feat, extra, batch_dim, time], unbroadcast=True)
    np.testing.assert_array_equal(raw.numpy(), np.repeat(ref, 2, axis=1))
    assert x.copy_compatible_to_dims([batch_dim, time, feat]).dims == x.dims


def test_sanity_check_version_and_size_dtype():
    import pytest
    x, values, time, feat = btf()
    x.sanity_check()
    assert x.version == 1 and x.size_dtype == "int32"
    with pytest.raises(ValueError, match="sanity_check: the value's shape"):
        x.with_value(tf.zeros((2, 3, 5))).sanity_check()


def test_axis_descriptions_take_allow_int():
    """RETURNN's ``get_axis_from_description(axis, allow_int=...)`` (published self-attention configs pass it;
    before: a TypeError)."""
    import pytest
    from returnn.tensor.axes import AxisError
    x, values, time, feat = btf()
    assert x.get_axis_from_description(1, allow_int=True) == 1 and x.get_axes_from_description("T", allow_int=False) == [1]
    with pytest.raises(AxisError, match="allow_int=False"):
        x.get_axes_from_description(["F", 0], allow_int=False)


def test_dim_types_time_is_spatial():
    """``DimensionTag(kind=DimensionTag.Types.Time, ...)`` (published self-attention configs; an AttributeError
    before)."""
    from returnn.tensor import DimensionTag
    tag = DimensionTag(kind=DimensionTag.Types.Time, description="query-chunk")
    assert tag.is_spatial_dim() and DimensionTag.Types.Types == ("batch", "spatial", "feature")
