"""Chunking per data key and the per-key batching options, against chunks and batches that RETURNN
itself cut (``data/returnn_key_chunking.json``, from the PyPI package: ``StaticDataset`` with
``data`` at twice the frame rate of ``classes``, ``iterate_seqs(used_data_keys=["data", "classes"])``
and ``_generate_batches``; entries ``[corpus index, data start, data end, classes start, classes end]``).

Forms: ``chunking = ({"data": 8, "classes": 4}, {"data": 4, "classes": 2})``, one dict (step = size),
per-key ``min_chunk_size``, ``chunking_variance`` keeping the keys' ratio, a one-frame key that comes
whole, ``batch_size = {key: frames}``, ``max_seq_length`` checked on the chunk (as RETURNN), and a
chunking function (RETURNN's ``custom_chunking_func``).
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from returnn.config import Config
from returnn.datasets.batching import BatchOptions, generate_batches, make_batch_arrays
from returnn.datasets.chunking import chunk_options
from returnn.datasets.generating import StaticDataset
from returnn.errors import ConfigError, DataError
from returnn.util.basic import NumbersDict

with open(os.path.join(os.path.dirname(__file__), "data", "returnn_key_chunking.json")) as _f:
    GOLDEN = json.load(_f)


def make_dataset(pairs, **kwargs):
    seqs = [{"data": np.arange(a * 2, dtype=np.float32).reshape(a, 2), "classes": np.arange(b, dtype=np.int32)}
            for a, b in pairs]
    return StaticDataset(seqs, output_dim={"classes": 3}, **kwargs)


def as_chunking(value):
    return value[0] if len(value) == 1 else tuple(value) if isinstance(value, list) else value


def entries(ds, batches):
    out = []
    for b in batches:
        (ds_, de), (cs, ce) = b.ranges_of("data"), b.ranges_of("classes")
        out.append([[ds.corpus_index(i), int(a), int(b_), int(c), int(d)]
                    for i, a, b_, c, d in zip(b.seq_idxs.tolist(), ds_, de, cs, ce)])
    return out


@pytest.mark.parametrize("case", GOLDEN["chunks"], ids=lambda c: "%s-m%s-v%s-e%i" % (
    c["chunking"], c["min_chunk_size"], c["variance"], c["epoch"]))
def test_per_key_chunks_as_returnn(case):
    ds = make_dataset(case["pairs"], seq_ordering="random")
    ds.init_seq_order(case["epoch"])
    opts = chunk_options(as_chunking(case["chunking"]), case["min_chunk_size"], case["variance"])
    batches = generate_batches(ds, 10 ** 6, -1, opts)
    assert sum(entries(ds, batches), []) == case["chunks"]


@pytest.mark.parametrize("case", GOLDEN["batches"], ids=lambda c: "bs%s-msl%s-%s" % (
    c["batch_size"], c["max_seq_length"], c["chunking"]))
def test_per_key_batch_size_and_max_seq_length_as_returnn(case):
    ds = make_dataset([(20, 10), (17, 9), (8, 4), (3, 2), (12, 6)])
    ds.init_seq_order(1)
    chunking = as_chunking(case["chunking"]) if case["chunking"] else None
    batches = generate_batches(ds, case["batch_size"], -1, chunking, max_seq_length=case["max_seq_length"])
    got = entries(ds, batches)
    if chunking is None:  # whole sequences: RETURNN's ranges are the full lengths
        got = [[[i, 0, len(ds.get_data(ds.seq_order.tolist().index(i), "data")),
                 0, len(ds.get_data(ds.seq_order.tolist().index(i), "classes"))] for i, *_ in b] for b in got]
    assert got == case["batches"]


def test_per_key_chunks_fill_the_batch_arrays():
    ds = make_dataset([(20, 10), (9, 5)])
    ds.init_seq_order(1)
    (batch,) = generate_batches(ds, 10 ** 6, -1, ({"data": 8, "classes": 4}, {"data": 4, "classes": 2}))
    arrays = make_batch_arrays(ds, batch)
    (ds_, de), (cs, ce) = batch.ranges_of("data"), batch.ranges_of("classes")
    for j, i in enumerate(batch.seq_idxs.tolist()):
        np.testing.assert_array_equal(arrays["classes"][j, :ce[j] - cs[j]], ds.get_data(i, "classes")[cs[j]:ce[j]])
        np.testing.assert_array_equal(arrays["data"][j, :de[j] - ds_[j]], ds.get_data(i, "data")[ds_[j]:de[j]])
        assert arrays["classes:seq_len"][j] == ce[j] - cs[j] and arrays["data:seq_len"][j] == de[j] - ds_[j]


def test_per_key_chunk_counts_must_agree():
    ds = make_dataset([(17, 9)])
    ds.init_seq_order(1)
    with pytest.raises(DataError, match="'classes' gives 5 chunks, 'data' 4"):
        generate_batches(ds, 1000, -1, ({"data": 8, "classes": 4}, {"data": 4, "classes": 2}),
                         min_chunk_size={"data": 2, "classes": 1})


def test_per_key_forms_from_the_config():
    opts = BatchOptions.from_config(Config({
        "batch_size": NumbersDict({"data": 12}), "max_seq_length": {"classes": 3},
        "chunking": (NumbersDict({"data": 8, "classes": 4}), NumbersDict({"data": 4, "classes": 2}))}))
    ds = make_dataset([(20, 10), (17, 9)])
    slices = opts.epoch_slices(ds, 1, "train")
    assert all(int(e - s) <= 3 for b in slices for s, e in zip(*b.ranges_of("classes")))
    with pytest.raises(ConfigError, match="same data keys"):
        chunk_options(({"data": 8, "classes": 4}, {"data": 4}))


def test_chunking_function():
    """RETURNN's custom chunking: a function of the dataset yielding (seq_idx, start, end)."""
    def halves(dataset, seq_idx_start, recurrent_net, used_data_keys, **_kwargs):
        s = seq_idx_start
        while dataset.is_less_than_num_seqs(s):
            length = dataset.get_seq_length(s)
            half = NumbersDict({k: length[k] // 2 for k in length.keys()})
            yield s, NumbersDict.constant_like(0, length), half
            yield s, half, length
            s += 1

    ds = make_dataset([(20, 10), (8, 4)])
    ds.init_seq_order(1)
    got = entries(ds, generate_batches(ds, 10 ** 6, -1, halves))
    assert got == [[[0, 0, 10, 0, 5], [0, 10, 20, 5, 10], [1, 0, 4, 0, 2], [1, 4, 8, 2, 4]]]


def test_chunking_cuts_only_the_keys_the_network_reads():
    """RETURNN chunks and counts only its network's used_data_keys: a dataset key the network does not read
    (here 'aux', of its own length) is left out of the chunks; whole sequences count every key
    (returnn_fuzz --kind batches, the aux cases: this engine refused "keys cut alike" or cut aux too; the
    expected batches are RETURNN 1.20261022's generate_batches with used_data_keys {data, classes})."""
    seqs = [{"data": np.zeros((5, 2), np.float32), "classes": np.zeros(5, np.int32), "aux": np.zeros(n, np.int32)}
            for n in (3, 9)]
    ds = StaticDataset(seqs, output_dim={"classes": 3, "aux": 3})
    ds.init_seq_order(1)
    with pytest.raises(DataError, match="cut alike"):
        generate_batches(ds, 4, -1, "2:2")
    got = generate_batches(ds, 4, -1, "2:2", used_keys=["data", "classes"])
    assert [b.entries() for b in got] == [[(0, 0, 2), (0, 2, 4)], [(0, 4, 5), (1, 0, 2)], [(1, 2, 4), (1, 4, 5)]]
    whole = generate_batches(ds, 10, -1, None, used_keys=["data", "classes"])  # aux's 9 frames count: one each
    assert [b.seq_idxs.tolist() for b in whole] == [[0], [1]]
