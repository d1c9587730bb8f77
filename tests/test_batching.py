"""Batching: frame budget, max_seqs, chunking, padding, sharding, seq_ordering, partition_epoch."""
from __future__ import annotations

import json
import os
from collections import Counter

import numpy as np
import pytest

from returnn.config import Config
from returnn.datasets.batching import (
    BatchOptions, generate_batches, generate_packed_batches, make_batch_arrays, shard_batches,
)
from returnn.datasets.chunking import chunk_ranges, parse_chunking
from returnn.datasets.generating import StaticDataset
from returnn.errors import ConfigError, DataError


def make_dataset(lengths, target_lengths=None, **kwargs):
    """Dense 'data' (T, 3) whose frame t of seq i holds (i, t, 1); sparse 'classes' = (i + t) % 5."""
    seqs = []
    for i, n in enumerate(lengths):
        t = np.arange(n)
        data = np.stack([np.full(n, i), t, np.ones(n)], axis=1).astype(np.float32)
        m = n if target_lengths is None else target_lengths[i]
        seqs.append({"data": data, "classes": ((i + np.arange(m)) % 5).astype(np.int32)})
    return StaticDataset(seqs, output_dim=5, **kwargs)


def random_lengths(n, seed, low=1, high=30):
    return np.random.RandomState(seed).randint(low, high + 1, size=n).tolist()


# ---------------------------------------------------------------- budget

@pytest.mark.parametrize("seed,batch_size,max_seqs", [(0, 60, -1), (1, 60, 3), (2, 100, 5), (3, 25, 2),
                                                      (4, 1000, 7), (5, 10, -1)])
def test_frame_budget_max_seqs_and_coverage(seed, batch_size, max_seqs):
    lengths = random_lengths(50, seed)
    ds = make_dataset(lengths)
    ds.init_seq_order(1)
    batches = generate_batches(ds, batch_size, max_seqs)
    seen = Counter()
    for b in batches:
        lens = [lengths[ds.corpus_index(i)] for i in b.seq_idxs]
        assert b.num_seqs >= 1
        if b.num_seqs > 1:
            assert max(lens) * b.num_seqs <= batch_size
        if max_seqs > 0:
            assert b.num_seqs <= max_seqs
        assert np.all(b.ends == -1) and np.all(b.starts == 0)
        seen.update(b.seq_idxs.tolist())
    assert seen == Counter(range(50))  # every sequence exactly once
    # Batches keep the epoch order and are greedy: the next sequence would not have fitted.
    flat = np.concatenate([b.seq_idxs for b in batches])
    assert flat.tolist() == list(range(50))
    for b, nxt in zip(batches, batches[1:]):
        lens = [lengths[ds.corpus_index(i)] for i in b.seq_idxs] + [lengths[ds.corpus_index(nxt.seq_idxs[0])]]
        full = max_seqs > 0 and b.num_seqs >= max_seqs
        assert full or max(lens) * len(lens) > batch_size


def test_long_sequence_alone_and_max_seq_length():
    lengths = [5, 50, 5, 5, 80, 3]
    ds = make_dataset(lengths)
    ds.init_seq_order(1)
    batches = generate_batches(ds, 20, -1)
    as_lists = [b.seq_idxs.tolist() for b in batches]
    assert [1] in as_lists and [4] in as_lists
    assert sorted(sum(as_lists, [])) == list(range(6))
    batches = generate_batches(ds, 20, -1, max_seq_length=40)
    assert sorted(np.concatenate([b.seq_idxs for b in batches]).tolist()) == [0, 2, 3, 5]


def test_max_seq_length_per_key():
    """RETURNN's forms: {key: limit} limits only those keys; a negative int limits 'classes'."""
    ds = make_dataset([50, 50, 50, 50], target_lengths=[4, 10, 12, 3])
    ds.init_seq_order(1)
    kept = lambda msl: sorted(np.concatenate([b.seq_idxs for b in generate_batches(ds, 1000, -1, max_seq_length=msl)]
                                             ).tolist())  # noqa: E731
    assert kept({"classes": 9}) == [0, 3]  # the 50 frames of 'data' do not count
    assert kept(-10) == [0, 1, 3]
    assert kept({"data": 60}) == [0, 1, 2, 3] and kept(60) == [0, 1, 2, 3]


def test_budget_uses_longest_key():
    # classes longer than data: the cost must count the longer key.
    ds = make_dataset([4, 4, 4, 4], target_lengths=[4, 10, 4, 4])
    ds.init_seq_order(1)
    for b in generate_batches(ds, 20, -1):
        longest = max(max(ds.get_seq_length(i).values()) for i in b.seq_idxs)
        assert b.num_seqs == 1 or longest * b.num_seqs <= 20


# ---------------------------------------------------------------- chunking

# Chunks as RETURNN cuts them (checked against RETURNN's Dataset.iterate_seqs, PyPI package).
@pytest.mark.parametrize("length,size,step,min_chunk,expected", [
    (10, 4, 2, 0, [(0, 4), (2, 6), (4, 8), (6, 10), (8, 10)]),
    (250, 200, 100, 0, [(0, 200), (100, 250), (200, 250)]),
    (250, 200, 100, 50, [(0, 200), (100, 250)]),
    (150, 200, 100, 0, [(0, 150), (100, 150)]),
    (150, 200, 100, 50, [(0, 150)]),
    (200, 200, 100, 50, [(0, 200), (100, 200)]),
    (301, 200, 100, 0, [(0, 200), (100, 300), (200, 301), (300, 301)]),
    (301, 200, 100, 50, [(0, 200), (100, 300), (200, 301)]),
    (11, 5, 5, 0, [(0, 5), (5, 10), (10, 11)]),
    (5, 10, 5, 0, [(0, 5)]),
    (10, 10, 10, 0, [(0, 10)]),
    (1, 3, 1, 0, [(0, 1)]),
    (0, 3, 1, 0, []),
])
def test_chunk_ranges_as_returnn(length, size, step, min_chunk, expected):
    assert chunk_ranges(length, size, step, min_chunk) == expected


@pytest.mark.parametrize("size,step,min_chunk", [(7, 3, 0), (5, 5, 0), (10, 1, 0), (4, 2, 0), (20, 20, 0),
                                                 (7, 3, 2), (10, 4, 5)])
def test_chunk_ranges_properties(size, step, min_chunk):
    for length in range(1, 60):
        chunks = chunk_ranges(length, size, step, min_chunk)
        # a chunk every `step` frames while more than `min_chunk` frames are left (the first always)
        assert [s for s, _ in chunks] == [0] + [t for t in range(step, length, step) if length - t > min_chunk]
        covered = np.zeros(length, dtype=int)
        for s, e in chunks:
            assert e == min(s + size, length)
            covered[s:e] += 1
        if step <= size:
            assert covered.min() >= 1  # every frame covered


def test_min_chunk_size_from_the_config():
    from returnn.config import Config
    from returnn.datasets.chunking import parse_min_chunk_size
    assert BatchOptions.from_config(Config({"min_chunk_size": 10})).min_chunk_size == 10
    assert parse_min_chunk_size({"data": 5, "classes": 2}) == 5
    with pytest.raises(ConfigError, match="min_chunk_size"):
        parse_min_chunk_size(-1)


@pytest.mark.parametrize("spec,expected", [("200:100", (200, 100)), ("50", (50, 50)), (30, (30, 30)),
                                           ((6, 2), (6, 2)), ("0", None), (None, None), (0, None), ("", None),
                                           ({"data": 50, "classes": 50}, (50, 50)), ((40, None), (40, 40)),
                                           (({"data": 50, "classes": 50}, {"data": 25, "classes": 25}), (50, 25))])
def test_parse_chunking(spec, expected):
    assert parse_chunking(spec) == expected


@pytest.mark.parametrize("spec", ["a:b", "10:0", "-5:2", "1:2:3", {"data": 100, "classes": 25}])
def test_parse_chunking_errors(spec):
    with pytest.raises(ConfigError, match="chunking"):
        parse_chunking(spec)


def test_chunked_batches_cover_every_frame_within_budget():
    lengths = random_lengths(20, 7, 1, 40)
    ds = make_dataset(lengths)
    ds.init_seq_order(1)
    batches = generate_batches(ds, 30, 4, chunking="10:5")
    pieces = {}
    for b in batches:
        sizes = b.ends - b.starts
        assert np.all(b.ends >= 0) and np.all(sizes <= 10)
        assert b.num_seqs <= 4
        assert b.num_seqs == 1 or sizes.max() * b.num_seqs <= 30
        for i, s, e in b.entries():
            pieces.setdefault(i, []).append((s, e))
        arrays = make_batch_arrays(ds, b)
        for j, (i, s, e) in enumerate(b.entries()):
            n = e - s
            assert arrays["data:seq_len"][j] == n and arrays["classes:seq_len"][j] == n
            np.testing.assert_array_equal(arrays["data"][j, :n, 1], np.arange(s, e))
            np.testing.assert_array_equal(arrays["data"][j, :n, 0], ds.corpus_index(i))
    assert sorted(pieces) == list(range(20))
    for i, chunks in pieces.items():
        assert sorted(chunks) == chunk_ranges(lengths[ds.corpus_index(i)], 10, 5)


def test_chunking_needs_equal_lengths():
    ds = make_dataset([4, 5], target_lengths=[4, 3])
    ds.init_seq_order(1)
    with pytest.raises(DataError, match="classes"):
        generate_batches(ds, 100, -1, chunking="2:2")


# ---------------------------------------------------------------- padding

def test_make_batch_arrays_padding_and_lengths():
    lengths = [3, 7, 1, 5]
    ds = make_dataset(lengths, target_lengths=[2, 9, 1, 4])
    ds.init_seq_order(1)
    (batch,) = generate_batches(ds, 1000, -1)
    arrays = make_batch_arrays(ds, batch)
    assert set(arrays) == {"data", "data:seq_len", "classes", "classes:seq_len"}
    assert arrays["data"].shape == (4, 7, 3) and arrays["data"].dtype == np.float32
    assert arrays["classes"].shape == (4, 9) and arrays["classes"].dtype == np.int32
    assert arrays["data:seq_len"].tolist() == lengths
    assert arrays["classes:seq_len"].tolist() == [2, 9, 1, 4]
    for j in range(4):
        n, m = lengths[j], arrays["classes:seq_len"][j]
        np.testing.assert_array_equal(arrays["data"][j, :n], ds.get_data(j, "data"))
        assert np.all(arrays["data"][j, n:] == 0)
        np.testing.assert_array_equal(arrays["classes"][j, :m], ds.get_data(j, "classes"))
        assert np.all(arrays["classes"][j, m:] == 0)
    only = make_batch_arrays(ds, batch, keys=["classes"])
    assert set(only) == {"classes", "classes:seq_len"}


# ---------------------------------------------------------------- sharding

@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_shard_batches_i_mod_n(size):
    ds = make_dataset(random_lengths(40, 3))
    ds.init_seq_order(1)
    batches = generate_batches(ds, 50, -1)
    shards = [shard_batches(batches, r, size) for r in range(size)]
    for r, shard in enumerate(shards):
        assert [id(b) for b in shard] == [id(b) for i, b in enumerate(batches) if i % size == r]
    assert sum(len(s) for s in shards) == len(batches)
    options = BatchOptions.from_config(Config({"batch_size": 50}))
    via = [options.epoch_slices(ds, 1, "forward", rank=r, size=size) for r in range(size)]
    for shard, other in zip(shards, via):
        assert [b.seq_idxs.tolist() for b in shard] == [b.seq_idxs.tolist() for b in other]


def test_batch_options_from_config_and_epoch_slices():
    """The engine's path: options read from a config; chunking applies only where asked for."""
    config = Config({"batch_size": 30, "max_seqs": 4, "chunking": "10:5", "max_seq_length": {"data": 35, "classes": 38},
                     "prefetch_batches": 3})
    options = BatchOptions.from_config(config)
    assert (options.batch_size, options.max_seqs, options.max_seq_length, options.prefetch) == \
        (30, 4, {"data": 35, "classes": 38}, 3)
    assert BatchOptions.from_config(Config()) == BatchOptions(1000, -1, None, 0, 8)
    lengths = random_lengths(20, 7, 1, 40)
    ds = make_dataset(lengths)
    chunked = options.epoch_slices(ds, 1, "train")
    ds.init_seq_order(1)
    assert [b.entries() for b in chunked] == [b.entries() for b in generate_batches(ds, 30, 4, "10:5",
                                                                                   {"data": 35, "classes": 38})]
    whole = options.epoch_slices(ds, 1, "forward")
    assert all(np.all(b.ends == -1) for b in whole)
    kept = sorted(i for b in whole for i in b.seq_idxs.tolist())
    assert kept == [i for i in range(20) if lengths[ds.corpus_index(i)] <= 38]


# ---------------------------------------------------------------- seq_ordering

def _order(ds, epoch):
    ds.init_seq_order(epoch)
    return ds.seq_order.tolist()


def test_sorted_orderings():
    lengths = random_lengths(30, 11)
    ds = make_dataset(lengths, seq_ordering="sorted")
    order = _order(ds, 1)
    assert sorted(order) == list(range(30))
    assert [lengths[i] for i in order] == sorted(lengths)
    ds = make_dataset(lengths, seq_ordering="sorted_reverse")
    assert [lengths[i] for i in _order(ds, 1)] == sorted(lengths, reverse=True)
    assert _order(make_dataset(lengths, seq_ordering="reverse"), 1) == list(range(29, -1, -1))
    assert _order(make_dataset(lengths), 3) == list(range(30))


def test_random_ordering_deterministic_per_epoch_and_seed():
    lengths = random_lengths(40, 12)
    a, b = make_dataset(lengths, seq_ordering="random"), make_dataset(lengths, seq_ordering="random")
    assert _order(a, 1) == _order(b, 1)
    assert sorted(_order(a, 1)) == list(range(40))
    assert _order(a, 1) != _order(a, 2)
    assert _order(a, 2) == _order(b, 2)
    assert _order(a, 1) != list(range(40))
    fixed = make_dataset(lengths, seq_ordering="random", fixed_random_seed=5)
    assert _order(fixed, 1) == _order(fixed, 2)
    every3 = make_dataset(lengths, seq_ordering="random:3")  # RETURNN: one order for 3 epochs in a row
    assert _order(every3, 1) == _order(every3, 3) == _order(a, 1)
    assert _order(every3, 4) == _order(every3, 6) == _order(a, 2)
    offset = make_dataset(lengths, seq_ordering="random", random_seed_offset=3)
    assert _order(offset, 1) != _order(a, 1)


def _assert_alternating_bins(order, lengths, bin_sizes):
    assert sorted(order) == list(range(len(lengths)))
    pos = 0
    for b, size in enumerate(bin_sizes):
        lens = [lengths[i] for i in order[pos:pos + size]]
        assert lens == (sorted(lens, reverse=True) if b % 2 else sorted(lens)), (b, lens)
        pos += size
    assert pos == len(lengths)


def test_laplace_ordering_bins_sorted_alternately():
    lengths = np.random.RandomState(0).permutation(np.arange(1, 31)).tolist()  # distinct lengths
    ds = make_dataset(lengths, seq_ordering="laplace:3")
    o1, o2 = _order(ds, 1), _order(ds, 2)
    _assert_alternating_bins(o1, lengths, [10, 10, 10])
    _assert_alternating_bins(o2, lengths, [10, 10, 10])
    assert o1 != o2  # bins are drawn at random per epoch
    assert o1 == _order(make_dataset(lengths, seq_ordering="laplace:3"), 1)
    # Not simply globally sorted: bins are random subsets.
    assert [lengths[i] for i in o1[:10]] != sorted(lengths)[:10]
    ds = make_dataset(lengths, seq_ordering="laplace:.6")  # 6 sequences per bin -> 5 bins
    _assert_alternating_bins(_order(ds, 1), lengths, [6] * 5)


@pytest.mark.parametrize("ordering, n_bins", [("sort_bin_shuffle:3", 3), ("sort_bin_shuffle:.10", 3),
                                              ("sort_bin_shuffle", 2), ("sort_bin_shuffle_x2:3", 3)])
def test_sort_bin_shuffle_orderings(ordering, n_bins):
    """RETURNN's sort_bin_shuffle: all sorted by length, cut into bins of neighbouring lengths, the
    bins in random order (x2: each bin shuffled inside too)."""
    lengths = np.random.RandomState(1).permutation(np.arange(1, 31)).tolist()
    o1, o2 = _order(make_dataset(lengths, seq_ordering=ordering), 1), _order(make_dataset(lengths, seq_ordering=ordering), 2)
    assert sorted(o1) == list(range(30)) and o1 != o2
    size = 30 // n_bins
    bins = [sorted(lengths[i] for i in o1[b * size:(b + 1) * size]) for b in range(n_bins)]
    assert sorted(bins) == [sorted(lengths)[b * size:(b + 1) * size] for b in range(n_bins)]
    inside = [[lengths[i] for i in o1[b * size:(b + 1) * size]] for b in range(n_bins)]
    assert all(x == sorted(x) for x in inside) == (not ordering.startswith("sort_bin_shuffle_x2"))


def test_unknown_ordering_is_an_error():
    with pytest.raises(DataError, match="seq_ordering"):
        make_dataset([1, 2], seq_ordering="shuffled").init_seq_order(1)
    with pytest.raises(DataError):
        make_dataset([1, 2], seq_ordering="laplace:0").init_seq_order(1)


# ---------------------------------------------------------------- partition_epoch

@pytest.mark.parametrize("ordering,n,parts", [("random", 31, 3), ("default", 10, 4), ("sorted", 7, 7),
                                              ("laplace:3", 20, 2)])
def test_partition_epoch_covers_full_epoch_once(ordering, n, parts):
    lengths = random_lengths(n, 21)
    ds = make_dataset(lengths, seq_ordering=ordering, partition_epoch=parts)
    whole = make_dataset(lengths, seq_ordering=ordering)
    for full_epoch in (1, 2):
        subs = [_order(ds, (full_epoch - 1) * parts + p + 1) for p in range(parts)]
        assert all(subs), subs
        assert max(map(len, subs)) - min(map(len, subs)) <= 1
        assert sum(subs, []) == _order(whole, full_epoch)  # sub-epochs = the full epoch, split in order
        assert sorted(sum(subs, [])) == list(range(n))
        ds.init_seq_order(full_epoch * parts)
        assert ds.num_seqs == len(subs[-1])
    if ordering == "random":
        assert _order(ds, 1) != _order(ds, parts + 1)


@pytest.mark.parametrize("n,parts,sizes", [(10, 4, [3, 3, 2, 2]), (9, 3, [3, 3, 3]), (2, 3, [1, 1, 0]),
                                           (7, 1, [7])])
def test_partition_sizes_like_returnn(n, parts, sizes):
    ds = make_dataset(random_lengths(n, 5), partition_epoch=parts)
    got = []
    for epoch in range(1, parts + 1):
        ds.init_seq_order(epoch)
        got.append(ds.num_seqs)
    assert got == sizes


@pytest.mark.parametrize("keys,expected", [
    ({}, (40, 40, 40)),
    ({"eval_batch_size": 15}, (40, 40, 40)),
    ({"eval_batch_size": 15, "forward_batch_size": 25}, (40, 40, 25)),
    ({"forward_batch_size": 25}, (40, 40, 25)),
])
def test_eval_and_forward_batch_size(keys, expected):
    """forward_batch_size bounds the batches of forward (else batch_size); eval_batch_size has no effect:
    RETURNN's TF engine scores dev/eval sets and searches with batch_size (Engine.eval_model, search) and
    never reads eval_batch_size (only its PyTorch/JAX/frontend engines do); training keeps batch_size."""
    options = BatchOptions.from_config(Config(dict(keys, batch_size=40, prefetch_batches=2)))
    ds = make_dataset(random_lengths(30, 11, 1, 12))
    for opts, budget in zip((options, options.for_eval(), options.for_forward()), expected):
        assert (opts.batch_size, opts.max_seqs, opts.prefetch) == (budget, -1, 2)
        batches = opts.epoch_slices(ds, 1, "forward")
        ds.init_seq_order(1)
        assert [b.entries() for b in batches] == [b.entries() for b in generate_batches(ds, budget, -1)]
    assert options.batch_size == 40  # for_eval/for_forward return copies


def test_last_batch_without_frames_is_dropped_as_in_returnn():
    """RETURNN's _generate_batches yields its last batch only if it holds a frame: a trailing batch of
    sequences of length 0 is not trained on; one in the middle is (returnn_fuzz --kind batches,
    fuzzbatch_1_19). Lengths 6, 0, 2, 0 with max_seqs 1: RETURNN's batches [0], [1], [2]."""
    ds = StaticDataset([{"data": np.ones((n, 2), np.float32), "classes": np.zeros(n, np.int32)}
                        for n in [6, 0, 2, 0]], output_dim=3)
    ds.init_seq_order(1)
    assert [b.seq_idxs.tolist() for b in generate_batches(ds, 20, max_seqs=1)] == [[0], [1], [2]]
    assert [b.seq_idxs.tolist() for b in generate_batches(ds, 20, max_seqs=2)] == [[0, 1], [2, 3]]


with open(os.path.join(os.path.dirname(__file__), "data", "returnn_batch_limits.json")) as _f:
    RETURNN_BATCH_LIMITS = json.load(_f)


@pytest.mark.parametrize("case", RETURNN_BATCH_LIMITS, ids=lambda c: "-".join(
    "%s%s" % (k, c[k]) for k in ("min_seq_length", "max_pad_size", "max_seqs", "chunking") if k in c))
def test_min_seq_length_and_max_pad_size_as_returnn(case):
    """RETURNN's training options min_seq_length and max_pad_size (refused before; the batches RETURNN's
    generate_batches cuts: tests/returnn_goldens/make_batch_limits.py)."""
    ds = StaticDataset([{"data": np.zeros((a, 2), np.float32), "classes": np.zeros(b, np.int32)}
                        for a, b in case["lengths"]], output_dim=3)
    config = Config({k: case[k] for k in ("min_seq_length", "max_pad_size", "max_seqs", "chunking",
                                          "chunking_variance") if k in case})
    config.typed_dict.setdefault("batch_size", 40)
    opts = BatchOptions.from_config(config)
    got = [[list(e) for e in b.entries()] for b in opts.epoch_slices(ds, 1, "train")]
    whole = [[[i, s, e] if e >= 0 else [i, 0, len(ds.get_seqs([i])[0]["data"])] for i, s, e in b] for b in got]
    assert whole == case["batches"]


def test_max_seq_length_only_in_training_and_on_dev():
    """RETURNN's TF engine passes max_seq_length to generate_batches in training and, of the scored datasets, only
    for the one named 'dev' (Engine.eval_model: max_seq_length if dataset_name == "dev" else sys.maxsize);
    forward_to_hdf passes none (every sequence is written), search refuses one. This engine dropped the long
    sequences everywhere: the scores of 'eval' / eval_datasets and the forwarded HDF lacked them (returnn_fuzz
    --kind batches, the eval cases with max_seq_length: DIFFER)."""
    ds = StaticDataset([{"data": np.zeros((n, 2), np.float32), "classes": np.zeros(n, np.int32)} for n in (3, 9)],
                       output_dim=3)
    opts = BatchOptions.from_config(Config({"batch_size": 100, "max_seq_length": 5}))
    kept = lambda o, purpose: [i for b in o.epoch_slices(ds, 1, purpose) for i in b.seq_idxs.tolist()]
    assert kept(opts, "train") == [0]
    assert kept(opts.for_eval("dev"), "eval") == [0]
    assert kept(opts.for_eval("eval"), "eval") == [0, 1]
    assert kept(opts.for_eval("other_set"), "eval") == [0, 1]
    assert kept(opts.for_eval(), "forward") == [0, 1]  # search
    assert kept(opts.for_forward(), "forward") == [0, 1]


@pytest.mark.parametrize("keys,needle", [({"seq_drop": 1.5}, "seq_drop': 1.5 is above 1"),
                                         ({"seq_drop_freq": 0}, "seq_drop_freq': 0")])
def test_seq_drop_values_returnn_fails_on_are_refused(keys, needle):
    """RETURNN asserts seq_drop <= 1 when it cuts the first train epoch and computes epoch % seq_drop_freq
    every train epoch (ZeroDivisionError for 0): one line here, at start-up."""
    from returnn.errors import ConfigError
    with pytest.raises(ConfigError, match=needle):
        BatchOptions.from_config(Config(dict(keys, batch_size=40)))
