"""RETURNN's eval namespace beyond tf: TFUtil functions configs call in eval strings (py_print,
softmax_cross_entropy_over_size, move_axis, ...), the full Data API on ``source(i, as_data=True)``,
and ``self.network.get_rec_step_index()`` inside loops."""
from __future__ import annotations

from functools import partial

import numpy as np
import pytest
import tensorflow as tf

from data_utils import btf as make_btf, make_layer as make, run_layer as run
from returnn.errors import NetworkError
from returnn.tf.layers import RunContext

LENS = np.array([4, 2], np.int32)
btf = partial(make_btf, lens=LENS)


def test_py_print_prints_when_the_step_runs(capfd):
    a, va, x = btf(2)
    layer = make("eval", {"eval": "py_print(source(0), ['lengths', source(0, as_data=True).get_sequence_lengths()])"},
                 [a])
    step = tf.function(lambda t: run(layer, [va.with_tensor(t)]).tensor)
    out = step(va.tensor).numpy()
    np.testing.assert_allclose(out[0, :4], x[0, :4], rtol=1e-6)
    assert "[lengths][4 2]" in capfd.readouterr().out.replace("'", "")


def test_tf_util_names_in_eval():
    a, va, x = btf(3)
    expr = "swapaxes(move_axis(source(0), 2, 1), 1, 2) + l1_normalized(source(0)) * 0 + identity(0.0)"
    out = run(make("eval", {"eval": expr}, [a]), [va])
    np.testing.assert_allclose(out.tensor.numpy()[0, :4], x[0, :4], rtol=1e-6)
    from returnn.tf.util.basic import slice_pad_zeros
    padded = slice_pad_zeros(tf.constant(x), begin=-1, end=2, axis=1).numpy()
    assert padded.shape == (2, 3, 3) and np.all(padded[:, 0] == 0)
    np.testing.assert_allclose(padded[:, 1:], x[:, :2])


def test_softmax_cross_entropy_over_size_masks_the_axis():
    from returnn.tf.util.basic import softmax_cross_entropy_over_size
    a, va, x = btf(3)
    data = a.with_value(va.tensor, va.sizes).copy_as_batch_feature_major()  # (B, F, T): T is the last dynamic axis
    labels = data.with_value(tf.one_hot(tf.zeros((2, 3), tf.int32), tf.shape(va.tensor)[1]), va.sizes)
    ce = softmax_cross_entropy_over_size(data, labels).numpy()  # (B, F)
    for b, n in enumerate(LENS):
        logits = x[b, :n].T  # (F, n)
        ref = -(logits[:, 0] - np.log(np.exp(logits).sum(-1)))
        np.testing.assert_allclose(ce[b], ref, rtol=1e-5)


def test_as_data_has_the_data_api_and_rec_step_index_outside_a_loop_fails():
    a, va, x = btf(2)
    out = run(make("eval", {"eval": "source(0, as_data=True).copy_as_time_major().copy_as_batch_major().placeholder"
                                    " + tf.cast(source(0, as_data=True).time_dimension(), tf.float32) * 0"}, [a]), [va])
    np.testing.assert_allclose(out.tensor.numpy()[1, :2], x[1, :2], rtol=1e-6)
    layer = make("eval", {"eval": "source(0) + tf.cast(self.network.get_rec_step_index(), tf.float32)"}, [a])
    with pytest.raises(NetworkError, match="not inside a rec loop"):
        run(layer, [va])
    inside = layer([va], RunContext(False, tf.constant([1, 2], tf.int64), step=tf.constant(3)))
    np.testing.assert_allclose(inside.tensor.numpy()[0, :4], x[0, :4] + 3, rtol=1e-6)


def test_eval_reaches_the_config_and_tfutils_modules():
    """RETURNN's eval names include what its TFUtil imports (tf_compat, numpy, ...: a transducer
    config calls tf_compat.v1.log), and self.network._config is the config (local-attention configs
    call a config function through it)."""
    from returnn.config import Config, get_global_config, set_global_config
    a, va, x = btf(2)
    old = get_global_config()
    set_global_config(Config({"double_it": lambda t: t * 2.0}))
    try:
        expr = "self.network._config.typed_dict['double_it'](source(0)) + tf_compat.v1.log(numpy.float32(1.0))"
        out = run(make("eval", {"eval": expr}, [a]), [va])
    finally:
        set_global_config(old)
    np.testing.assert_allclose(out.tensor.numpy()[0, :4], 2 * x[0, :4], rtol=1e-6)
