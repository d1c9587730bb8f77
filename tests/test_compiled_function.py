"""CompiledFunction (returnn/tf/util/compiled.py): the fast call gives what the tf.function gives,
checks the structure and shapes, converts numpy values and never retraces."""
import numpy as np
import pytest
import tensorflow as tf

from returnn.tf.util.compiled import CompiledFunction

SPEC = {"data": tf.TensorSpec([None, None, 3], tf.float32), "data:seq_len": tf.TensorSpec([None], tf.int32)}


def _fn(batch, seed, flags):
    mask = tf.sequence_mask(batch["data:seq_len"], tf.shape(batch["data"])[1])
    total = tf.reduce_sum(tf.where(mask[..., None], batch["data"], 0.0))
    return {"total": total + tf.cast(seed[1], tf.float32), "flags": flags * 2.0}


def _make():
    return CompiledFunction(_fn, [SPEC, tf.TensorSpec([2], tf.int64), tf.TensorSpec([2], tf.float32)])


def test_fast_call_equals_the_tf_function_and_traces_once():
    f = _make()
    rng = np.random.RandomState(0)
    for b, t in [(2, 5), (3, 7), (1, 1)]:
        batch = {"data": tf.constant(rng.randn(b, t, 3).astype(np.float32)),
                 "data:seq_len": tf.constant(rng.randint(1, t + 1, size=b).astype(np.int32))}
        seed, flags = tf.constant([1, b], tf.int64), np.array([0.5, 1.0], np.float32)  # numpy converted
        fast = f(batch, seed, flags)
        slow = f.function(batch, seed, flags)
        np.testing.assert_allclose(fast["total"].numpy(), slow["total"].numpy(), rtol=1e-6)
        np.testing.assert_array_equal(fast["flags"].numpy(), [1.0, 2.0])
    assert f.experimental_get_tracing_count() == 1


def test_inputs_are_checked_and_cast():
    f = _make()
    batch = {"data": np.ones([2, 4, 3], np.float64), "data:seq_len": np.array([4, 2], np.int64)}  # cast like tf.function
    assert f(batch, np.array([0, 0]), np.zeros(2, np.float32))["total"].numpy() == 18.0
    with pytest.raises(TypeError, match="expected keys"):
        f({"data": batch["data"]}, np.array([0, 0]), np.zeros(2, np.float32))
    with pytest.raises(TypeError, match="expected shape"):
        f({"data": np.ones([2, 4, 5], np.float32), "data:seq_len": np.array([4, 2], np.int32)},
          np.array([0, 0]), np.zeros(2, np.float32))
    with pytest.raises(TypeError, match="expected shape"):
        f(batch, np.array([0, 0, 0]), np.zeros(2, np.float32))


def test_variables_are_updated_through_the_fast_call():
    v = tf.Variable(0.0)
    f = CompiledFunction(lambda x: v.assign_add(tf.reduce_sum(x)), [tf.TensorSpec([None], tf.float32)])
    f(np.array([1.0, 2.0], np.float32))
    f(tf.constant([3.0]))
    assert v.numpy() == 6.0
