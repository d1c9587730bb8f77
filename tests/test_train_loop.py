"""The host side of the training steps: batch conversion and step seeds (the loop itself runs in
every engine test: tests/test_engine.py, test_reliability.py, test_distributed*.py)."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from returnn.tf.steps import StepFunctions
from returnn.tf.train_loop import step_seeds


def test_to_tensors_converts_equal_length_vectors_once():
    lens = np.array([5, 3], np.int32)
    batch = {"data": np.zeros((2, 5, 3), np.float32), "data:seq_len": lens,
             "classes": np.ones((2, 5), np.int32), "classes:seq_len": lens.copy(),
             "other": np.ones((2, 4), np.int32), "other:seq_len": np.array([4, 3], np.int32)}
    out = StepFunctions.to_tensors(batch)
    assert sorted(out) == sorted(batch)
    for key, value in batch.items():
        assert out[key].dtype.as_numpy_dtype == value.dtype
        np.testing.assert_array_equal(out[key].numpy(), value)
    assert out["data:seq_len"] is out["classes:seq_len"]
    assert out["other:seq_len"] is not out["data:seq_len"]


def test_to_tensors_keeps_length_vectors_of_other_dtypes_apart():
    # same bytes, different dtypes: [1] as int64 is [1, 0] as int32
    batch = {"a:seq_len": np.array([1], np.int64), "b:seq_len": np.array([1, 0], np.int32)}
    out = StepFunctions.to_tensors(batch)
    assert out["a:seq_len"].dtype == tf.int64 and out["b:seq_len"].dtype == tf.int32
    np.testing.assert_array_equal(out["b:seq_len"].numpy(), [1, 0])


def test_step_seeds_are_epoch_and_global_step():
    seeds = step_seeds(3, 17, 4)
    assert [s.numpy().tolist() for s in seeds] == [[3, 17], [3, 18], [3, 19], [3, 20]]
    assert all(s.dtype == tf.int64 and s.shape == (2,) for s in seeds)
    assert step_seeds(1, 0, 0) == []
