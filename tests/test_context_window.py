"""RETURNN's ``context_window``: extra frames around each batch entry (whole sequence or chunk) of
the named keys, zeros beyond the sequence; frame-wise targets keep their length (issue 27: the
ResNet/LACE hybrid configs of returnn-experiments set it)."""
from __future__ import annotations

import numpy as np
import pytest

from returnn.datasets.batching import BatchOptions, generate_batches, make_batch_arrays
from returnn.datasets.context_window import parse_context_window, pop_context_window, slice_pad_zeros
from returnn.datasets.generating import StaticDataset
from returnn.errors import DataError
from tests.helpers import describe, run_rnn, train_args, write_config


def _dataset(lengths):
    """'data' (T, 2): frame t of seq i holds (i + 1, t + 1), so zeros are padding; 'classes' (T,)."""
    seqs = [{"data": np.stack([np.full(n, i + 1), np.arange(1, n + 1)], axis=1).astype(np.float32),
             "classes": (np.arange(n) % 3).astype(np.int32)} for i, n in enumerate(lengths)]
    return StaticDataset(seqs, output_dim=3)


def _reference(x: np.ndarray, begin: int, end: int) -> np.ndarray:
    """x[begin:end] with zeros outside [0, len(x)), frame by frame."""
    return np.stack([x[t] if 0 <= t < len(x) else np.zeros_like(x[0]) for t in range(begin, end)]) \
        if end > begin else x[:0]


@pytest.mark.parametrize("value,expected", [
    (None, None), (1, None), (0, None), (3, {"data": (1, 1)}), (4, {"data": (1, 2)}), (337, {"data": (168, 168)}),
    ({"data": 5, "classes": 1}, {"data": (2, 2)}), (({"data": 3}, {"data": 0, "x": 2}), {"data": (3, 0), "x": (0, 2)}),
])
def test_forms_as_returnn(value, expected):
    assert parse_context_window(value, "t") == expected


@pytest.mark.parametrize("value", ["3", -1, {"data": 2.5}, ({"data": 1},), [1, 2, 3]])
def test_bad_values_are_one_line_errors(value):
    with pytest.raises(DataError, match="context_window"):
        parse_context_window(value, "dataset train")


@pytest.mark.parametrize("begin,end", [(-2, 3), (0, 5), (3, 7), (-1, 6), (5, 5), (4, 9), (-3, -1)])
def test_slice_pad_zeros_matches_frame_by_frame(begin, end):
    x = np.arange(1, 11, dtype=np.float32).reshape(5, 2)
    np.testing.assert_array_equal(slice_pad_zeros(x, begin, end), _reference(x, begin, end))


def test_whole_sequences_get_context_targets_keep_length():
    dataset = _dataset([5, 0, 3])
    dataset.init_seq_order(1)
    context = {"data": (2, 1)}
    (batch,) = generate_batches(dataset, 1000, context=context)
    arrays = make_batch_arrays(dataset, batch)
    assert arrays["data:seq_len"].tolist() == [8, 3, 6] and arrays["classes:seq_len"].tolist() == [5, 0, 3]
    for i, n in enumerate([5, 0, 3]):
        full = dataset.get_seqs([i])[0]["data"]
        expected = _reference(full, -2, n + 1) if n else np.zeros((3, 2), np.float32)
        np.testing.assert_array_equal(arrays["data"][i, :n + 3], expected)
        assert not arrays["data"][i, n + 3:].any()  # padding of the batch


def test_chunks_take_their_context_from_the_sequence():
    dataset = _dataset([7])
    dataset.init_seq_order(1)
    batches = generate_batches(dataset, 1000, max_seqs=1, chunking="3:3", context={"data": (1, 1)})
    full = dataset.get_seqs([0])[0]["data"]
    got = [make_batch_arrays(dataset, b) for b in batches]
    assert [(int(b.starts[0]), int(b.ends[0])) for b in batches] == [(0, 3), (3, 6), (6, 7)]
    for arrays, (s, e) in zip(got, [(0, 3), (3, 6), (6, 7)]):
        np.testing.assert_array_equal(arrays["data"][0], _reference(full, s - 1, e + 1))
        assert arrays["classes:seq_len"].tolist() == [e - s]


def test_budget_and_max_seq_length_count_the_context():
    dataset = _dataset([4, 4, 4])
    dataset.init_seq_order(1)
    assert [b.num_seqs for b in generate_batches(dataset, 12, context={"data": (1, 1)})] == [2, 1]
    assert generate_batches(dataset, 100, max_seq_length=5, context={"data": (1, 1)}) == []


def test_config_key_and_dataset_option():
    spec, context = pop_context_window({"class": "X", "context_window": 5}, 3, "dataset train")
    assert spec == {"class": "X"} and context == {"data": (2, 2)}  # the dataset's own wins
    assert pop_context_window({"class": "X"}, 3, "dataset dev")[1] == {"data": (1, 1)}
    with pytest.raises(DataError, match="not on a dataset inside another one"):
        StaticDataset([{"data": np.zeros((2, 1), np.float32)}], context_window=3)


def test_epoch_slices_use_the_datasets_context_and_do_not_pack():
    dataset = _dataset([3, 2])
    dataset.context_window = {"data": (1, 1)}
    options = BatchOptions(batch_size=100, max_seqs=-1, chunking=None, max_seq_length=0, prefetch=1,
                           pack_frames=True)
    (batch,) = options.epoch_slices(dataset, 1, "train", packed=True)
    assert not batch.packed and make_batch_arrays(dataset, batch)["data:seq_len"].tolist() == [5, 4]


def test_training_with_a_valid_conv_that_removes_the_context(tmp_path):
    """The hybrid CNN form: a conv without padding shrinks data (T + 4) back to the T targets."""
    config = write_config(tmp_path / "ctx.config", """#!rnn.py
import numpy
_rng = numpy.random.RandomState(1)
_seqs = [{"data": _rng.randn(n, 3).astype("float32"), "classes": _rng.randint(0, 4, size=(n,)).astype("int32")}
         for n in (6, 1, 4, 9)]
train = {"class": "StaticDataset", "data": _seqs, "output_dim": 4}
dev = {"class": "StaticDataset", "data": _seqs[:2], "output_dim": 4}
context_window = 5
extern_data = {"data": {"dim": 3}, "classes": {"dim": 4, "sparse": True}}
network = {
    "conv": {"class": "conv", "from": "data", "filter_size": (5,), "padding": "valid", "n_out": 8,
             "activation": "relu"},
    "output": {"class": "softmax", "from": "conv", "loss": "ce"},
}
batch_size = 100
num_epochs = 1
learning_rate = 0.01
""")
    proc = run_rnn(train_args(config, tmp_path))
    assert proc.returncode == 0, describe(proc)
    assert "dev: score" in proc.stdout, describe(proc)
