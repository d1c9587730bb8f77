"""RETURNN's Python API that published configs call from their own code, against RETURNN's values
(tests/data/returnn_tfutil_functions.json, from tests/returnn_goldens/make_tfutil_goldens.py): transducer
configs' linear alignments (targetb_linear), random warping of their data augmentation, the schedules of
returnn.util.math, and module paths configs import from."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from returnn.tf.util.basic import (create_random_warp_flow_2d, dense_image_warp, gaussian_blur_2d,
                                   get_linear_alignment_out_to_in_indices, get_rnnt_linear_aligned_output)

GOLDEN = json.loads((Path(__file__).parent / "data" / "returnn_tfutil_functions.json").read_text())


def _align(case):
    a = case["args"]
    b = len(a["input_lens"])
    out, lens = get_rnnt_linear_aligned_output(
        tf.constant(a["input_lens"], tf.int32), tf.constant(np.array(a["targets"], np.int32).reshape(b, -1)),
        tf.constant(a["target_lens"], tf.int32), a["blank_label_idx"], pad_value=a["pad_value"],
        targets_consume_time=a["targets_consume_time"])
    idx = get_linear_alignment_out_to_in_indices(tf.constant(a["input_lens"], tf.int32),
                                                 tf.constant(a["target_lens"], tf.int32), pad_value=-1)
    return out, lens, idx


@pytest.mark.parametrize("graph", [False, True])
def test_linear_alignments_as_returnn(graph):
    """40 random batches (lengths 0 included, RNN-T and RNA forms): the same labels, lengths and indices."""
    for case in GOLDEN["alignment"]:
        out, lens, idx = (tf.function(lambda: _align(case))() if graph else _align(case))
        np.testing.assert_array_equal(np.asarray(out).reshape(np.shape(case["out"])), case["out"], err_msg=str(case["args"]))
        np.testing.assert_array_equal(lens, case["out_lens"])
        np.testing.assert_array_equal(np.asarray(idx).reshape(np.shape(case["indices"])), case["indices"])


def test_linear_alignment_examples():
    """RETURNN's documented examples: in 4, [a, b, c] -> [B, a, B, b, B, c, B]; in 0 -> [a, b, c]."""
    out, lens = get_rnnt_linear_aligned_output([4, 0], [[1, 2, 3], [1, 2, 3]], [3, 3], blank_label_idx=9)
    assert np.asarray(lens).tolist() == [7, 3]
    assert np.asarray(out).tolist() == [[9, 1, 9, 2, 9, 3, 9], [1, 2, 3, 0, 0, 0, 0]]
    assert np.asarray(get_linear_alignment_out_to_in_indices([7, 3, 2], [3, 3, 3])).tolist() == [
        [1, 3, 5], [0, 1, 2], [0, 1, 1]]


def test_warp_and_blur_as_returnn():
    for case in GOLDEN["warp"]:
        image, flow = tf.constant(case["image"], tf.float32), tf.constant(case["flow"], tf.float32)
        np.testing.assert_allclose(dense_image_warp(image, flow), case["warped"], rtol=1e-5, atol=1e-5)
        std = tuple(case["blur_std"]) if isinstance(case["blur_std"], list) else case["blur_std"]
        np.testing.assert_allclose(gaussian_blur_2d(flow, kernel_std=std), case["blurred"], rtol=1e-5, atol=1e-6)


def test_zero_flow_keeps_the_image_and_random_flow_is_smooth():
    image = tf.random.normal([2, 40, 12, 1])
    np.testing.assert_allclose(dense_image_warp(image, tf.zeros([2, 40, 12, 2])), image, atol=1e-6)
    tf.random.set_seed(3)
    flow = create_random_warp_flow_2d(tf.shape(image)[:-1], std=4.0, scale=10.0)
    assert flow.shape == (2, 40, 12, 2) and np.isfinite(flow).all()
    # blurred and resized up from a 4 x 1 grid: neighbouring frames differ far less than the flow varies
    assert np.abs(np.diff(flow, axis=1)).mean() < 0.2 * np.abs(flow).mean()
    warped = dense_image_warp(image, flow)
    assert warped.shape == image.shape and not np.allclose(warped, image)


def test_util_math_schedules():
    from returnn.util.math import PiecewiseLinear, StepFunction, ceil_div, next_power_of_two
    f = PiecewiseLinear({0: 1e-4, 10: 1e-3, 20: 1e-5})
    np.testing.assert_allclose([f(-5), f(0), f(5), f(10), f(15), f(30)], [1e-4, 1e-4, 5.5e-4, 1e-3, 5.05e-4, 1e-5])
    g = PiecewiseLinear({1: 0.0, 3: 1.0}, kw_name="epoch", ignore_other_kwargs=True)
    assert g(epoch=2, global_train_step=100) == 0.5
    with pytest.raises(TypeError):
        PiecewiseLinear({1: 0.0, 3: 1.0})(2, extra=1)
    s = StepFunction({0: "a", 10: "b", 20: "c"})
    assert [s(-1), s(4), s(5), s(6), s(16), s(99)] == ["a", "a", "a", "b", "c", "c"]  # a tie takes the lower
    assert [ceil_div(7, 2), ceil_div(8, 2), next_power_of_two(5), next_power_of_two(8), next_power_of_two(1)] == [
        4, 4, 8, 8, 1]


def test_module_paths_configs_import():
    from returnn.datasets.basic import init_dataset
    from returnn.datasets.util.vocabulary import BytePairEncoding, Vocabulary
    from returnn.tensor import Data
    from returnn.tf.network import CannotHandleUndefinedSourcesException
    from returnn.errors import NetworkError
    assert callable(init_dataset) and issubclass(BytePairEncoding, Vocabulary)
    assert issubclass(CannotHandleUndefinedSourcesException, NetworkError)
    assert Data("x", shape=(None, 3)).undefined is False


def test_old_module_name_in_config_code(tmp_path):
    from returnn.config import Config
    path = tmp_path / "c.config"
    path.write_text("def f():\n    from TFUtil import get_rnnt_linear_aligned_output, dense_image_warp\n"
                    "    return get_rnnt_linear_aligned_output\n"
                    "from returnn.util.math import PiecewiseLinear\nlr = PiecewiseLinear({1: 0.1, 3: 0.3})(2)\n")
    config = Config()
    config.load_file(str(path))
    assert config.typed_value("f")() is get_rnnt_linear_aligned_output
    assert abs(config.typed_value("lr") - 0.2) < 1e-12


def test_get_initializer_as_get_variable_takes_it():
    """TFUtil.get_initializer in config layer classes: tf.compat.v1.get_variable(initializer=...)."""
    from returnn.tf.util.basic import get_initializer
    np.testing.assert_array_equal(get_initializer(0.5)([2, 3]), np.full((2, 3), 0.5, np.float32))
    glorot = np.asarray(get_initializer("glorot_uniform", seed=3)([30, 50]))
    assert np.abs(glorot).max() <= np.sqrt(6.0 / 80) and glorot.std() > 0.05
    np.testing.assert_array_equal(glorot, get_initializer("glorot_uniform", seed=3)([30, 50]))
    with tf.Graph().as_default():
        var = tf.compat.v1.get_variable("w", shape=(4, 2), initializer=get_initializer(
            "variance_scaling_initializer(scale=2.0)", seed=1))
        assert var.shape == (4, 2)
    with pytest.raises(ValueError, match="eval_local_ns"):
        get_initializer("layer.foo", eval_local_ns={"layer": None})
