"""Generating datasets (12AX, dummy, static): content, determinism, shapes, dims; init_dataset."""
from __future__ import annotations

import numpy as np
import pytest

from returnn.datasets import init_dataset
from returnn.datasets.generating import DummyDataset, RandomDataset, StaticDataset, Task12AXDataset
from returnn.errors import DataError

SYMBOLS = "123ABCXYZ"


def reference_12ax_targets(symbols: str) -> str:
    """RETURNN's 12AX rule (its ``make_output_seq``), written independently: the outer context is the
    last 1/2, the inner one the last A/B since the last X/Y; 'R' for X closing 1..A, Y closing 2..B.
    3, C and Z change nothing."""
    outer, inner, out = "", "", []
    for c in symbols:
        out.append("R" if c in "XY" and (outer, inner, c) in (("1", "A", "X"), ("2", "B", "Y")) else "L")
        if c in "12":
            outer = c
        elif c in "AB":
            inner = c
        elif c in "XY":
            inner = ""
    return "".join(out)


def all_seqs(ds, epoch=1):
    ds.init_seq_order(epoch)
    return [ds.get_seqs([i])[0] for i in range(ds.num_seqs)]


def decode(seq):
    return "".join(SYMBOLS[i] for i in seq["data"].argmax(-1)), "".join("LR"[i] for i in seq["classes"])


@pytest.mark.parametrize("symbols,expected", [
    ("1AX", "LLR"), ("2AX", "LLL"), ("2BY", "LLR"), ("1BY", "LLL"), ("1AY", "LLL"), ("1CX", "LLL"),
    ("1AXBY2AXBY", "LLRLLLLLLR"), ("1AX3AX", "LLRLLR"), ("3AXBY", "LLLLL"), ("2CZBYAX1AX", "LLLLRLLLLR"),
    ("1ACX", "LLLR"), ("1A2BY", "LLLLR"), ("2B1AZX", "LLLLLR"),
])
def test_12ax_rule_examples(symbols, expected):
    """The expected strings are RETURNN's (its make_output_seq, RETURNN 1.20261022)."""
    assert reference_12ax_targets(symbols) == expected
    assert Task12AXDataset.make_targets(symbols) == expected


def test_12ax_generated_targets_follow_rule():
    ds = Task12AXDataset(num_seqs=200)
    counts = {"R1": 0, "R2": 0, "L": 0}
    for epoch in (1, 2):
        for seq in all_seqs(ds, epoch):
            assert seq["data"].dtype == np.float32 and seq["classes"].dtype == np.int32
            assert seq["data"].shape == seq["classes"].shape + (9,) and 10 <= len(seq["classes"]) < 100
            assert (seq["data"].sum(-1) == 1).all()  # one-hot
            symbols, targets = decode(seq)
            assert targets == reference_12ax_targets(symbols), symbols
            for i, t in enumerate(targets):
                if t == "R":
                    counts["R1" if symbols[i] == "X" else "R2"] += 1
                else:
                    counts["L"] += 1
    assert counts["R1"] > 0 and counts["R2"] > 0 and counts["L"] > counts["R1"] + counts["R2"]


def test_12ax_data_description():
    ds = Task12AXDataset(num_seqs=5)
    assert ds.num_outputs == {"data": [9, 2], "classes": [2, 1]}  # RETURNN's: dense one-hot data
    assert ds.get_data_keys() == ["data", "classes"]
    assert not ds.is_data_sparse("data") and ds.get_data_dim("classes") == 2
    assert ds.get_data_dtype("data") == "float32" and ds.get_data_shape("data") == (9,)
    ds.init_seq_order(1)
    assert ds.num_seqs == 5
    for i in range(5):
        lens = ds.get_seq_length(i)
        assert lens["data"] == lens["classes"] == len(ds.get_data(i, "data"))
    with pytest.raises(DataError, match="nope"):
        ds.get_data_dim("nope")


def _as_lists(seqs):
    return [(s["data"].tolist(), s["classes"].tolist()) for s in seqs]


def test_12ax_determinism():
    fixed = Task12AXDataset(num_seqs=20, fixed_random_seed=3)
    e1, e2 = _as_lists(all_seqs(fixed, 1)), _as_lists(all_seqs(fixed, 2))
    assert e1 == e2
    assert e1 == _as_lists(all_seqs(Task12AXDataset(num_seqs=20, fixed_random_seed=3), 5))
    assert e1 != _as_lists(all_seqs(Task12AXDataset(num_seqs=20, fixed_random_seed=4), 1))
    free = Task12AXDataset(num_seqs=20)
    f1, f2 = _as_lists(all_seqs(free, 1)), _as_lists(all_seqs(free, 2))
    assert f1 != f2  # new data every epoch without a fixed seed
    assert f1 == _as_lists(all_seqs(Task12AXDataset(num_seqs=20), 1))  # but reproducible per epoch
    assert f2 == _as_lists(all_seqs(free, 2))


def test_12ax_partition_epoch_shares_generated_data():
    ds = Task12AXDataset(num_seqs=10, partition_epoch=2)
    sub1, sub2 = _as_lists(all_seqs(ds, 1)), _as_lists(all_seqs(ds, 2))
    assert len(sub1) == len(sub2) == 5
    whole = _as_lists(all_seqs(Task12AXDataset(num_seqs=10), 1))
    assert sub1 + sub2 == whole


def test_dummy_dataset_dense():
    ds = DummyDataset(input_dim=4, output_dim=3, num_seqs=7, seq_len=6)
    assert ds.num_outputs == {"data": [4, 2], "classes": [3, 1]}
    assert not ds.is_data_sparse("data") and ds.get_data_shape("data") == (4,)
    seqs = all_seqs(ds)
    assert len(seqs) == 7
    for s in seqs:
        assert s["data"].shape == (6, 4) and s["data"].dtype == np.float32
        assert s["classes"].shape == (6,) and s["classes"].dtype == np.int32
        assert s["classes"].min() >= 0 and s["classes"].max() < 3
        assert np.all(np.abs(s["data"]) <= 1.0)


def test_random_dataset_sparse_and_length_range():
    ds = RandomDataset(input_dim=5, output_dim=2, num_seqs=30, seq_len=(2, 9), input_sparse=True)
    assert ds.num_outputs == {"data": [5, 1], "classes": [2, 1]}
    lens = []
    for s in all_seqs(ds):
        assert s["data"].dtype == np.int32 and s["data"].ndim == 1
        assert s["data"].min() >= 0 and s["data"].max() < 5
        assert len(s["data"]) == len(s["classes"])
        lens.append(len(s["data"]))
    assert min(lens) >= 2 and max(lens) <= 9 and len(set(lens)) > 1


def test_static_dataset_infers_dims_and_dtypes():
    data = [{"data": np.ones((3, 2), dtype=np.float64), "classes": [0, 4, 1]},
            {"data": np.zeros((1, 2), dtype=np.float64), "classes": [2]}]
    ds = StaticDataset(data)
    assert ds.num_outputs == {"data": [2, 2], "classes": [5, 1]}
    assert ds.get_data_dtype("classes") == "int32"
    ds = StaticDataset(data, output_dim=7, tags=["a", "b"])
    assert ds.get_data_dim("classes") == 7
    ds.init_seq_order(1)
    assert [ds.get_tag(0), ds.get_tag(1)] == ["a", "b"]
    assert ds.get_data(1, "classes").tolist() == [2] and ds.get_data(1, "classes").dtype == np.int32
    sparse_in = StaticDataset([{"data": np.array([1, 2]), "classes": np.array([0, 1])}], input_dim=10,
                              output_dim={"classes": [3, 1]})
    assert sparse_in.num_outputs == {"data": [10, 1], "classes": [3, 1]}


@pytest.mark.parametrize("data,match", [
    ([], "empty"),
    ([{"data": np.zeros((2, 2, 2))}], "shape"),
    ([{"data": np.zeros((2, 2)), "classes": [1]}, {"data": np.zeros((1, 2))}], "classes"),
])
def test_static_dataset_errors(data, match):
    with pytest.raises(DataError, match=match):
        StaticDataset(data)


def test_init_dataset():
    ds = init_dataset({"class": "Task12AXDataset", "num_seqs": 4, "fixed_random_seed": 1}, name="dev")
    assert isinstance(ds, Task12AXDataset) and ds.name == "dev" and ds.num_corpus_seqs == 4
    assert init_dataset(ds) is ds
    ds = init_dataset("{'class': 'DummyDataset', 'input_dim': 2, 'output_dim': 3, 'num_seqs': 2}")
    assert isinstance(ds, DummyDataset)
    with pytest.raises(DataError, match="Task12AXDataset") as info:
        init_dataset({"class": "Nope"})
    assert "Nope" in str(info.value) and "DummyDataset" in str(info.value)
    with pytest.raises(DataError, match="bogus_option"):
        init_dataset({"class": "Task12AXDataset", "bogus_option": 1})
    with pytest.raises(DataError, match="class"):
        init_dataset({"num_seqs": 3})
