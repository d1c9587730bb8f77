"""Batch prefetching: same batches as inline loading, producer errors reach the consumer at the
failing batch, and no producer thread outlives the iteration."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from returnn.datasets.batching import generate_batches, make_batch_arrays
from returnn.datasets.generating import StaticDataset
from returnn.datasets.prefetch import BatchPrefetcher, ProducerError

KEYS = ["data", "classes"]


def make_dataset(n=40, seed=0, **kwargs):
    rng = np.random.RandomState(seed)
    seqs = []
    for _ in range(n):
        t = rng.randint(1, 15)
        seqs.append({"data": rng.randn(t, 3).astype(np.float32), "classes": rng.randint(0, 4, size=t)})
    return StaticDataset(seqs, output_dim=4, **kwargs)


class FailingDataset(StaticDataset):
    """Raises in ``_corpus_load`` on its ``fail_at``-th call (one call per batch)."""

    def __init__(self, *args, fail_at=3, **kwargs):
        super().__init__(*args, **kwargs)
        self.fail_at, self.calls = fail_at, 0

    def _corpus_load(self, corpus_indices):
        self.calls += 1
        if self.calls == self.fail_at:
            raise ValueError("disk on fire while reading batch %i" % self.calls)
        return super()._corpus_load(corpus_indices)


def prefetch_threads():
    return [t for t in threading.enumerate() if t.name == "batch-prefetch" and t.is_alive()]


def slices_for(ds, epoch=1, batch_size=40, chunking=None):
    ds.init_seq_order(epoch)
    return generate_batches(ds, batch_size, 4, chunking=chunking)


def run_guarded(fn):
    """Runs ``fn`` in a helper thread so a hang fails the test instead of blocking the suite."""
    result = {}

    def target():
        try:
            result["value"] = fn()
        except BaseException as exc:  # noqa: BLE001
            result["error"] = exc
    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(60)
    assert not t.is_alive(), "iteration hangs"
    if "error" in result:
        raise result["error"]
    return result["value"]


def assert_same_batches(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert sorted(x) == sorted(y)
        for k in x:
            assert x[k].dtype == y[k].dtype
            np.testing.assert_array_equal(x[k], y[k])


@pytest.mark.parametrize("chunking", [None, "5:3"])
def test_prefetch_gives_same_batches_in_same_order(chunking):
    ds = make_dataset(seq_ordering="random")
    slices = slices_for(ds, 2, chunking=chunking)
    assert len(slices) > 10
    inline = list(BatchPrefetcher(ds, slices, KEYS, num_prefetch=0))
    threaded = run_guarded(lambda: list(BatchPrefetcher(ds, slices, KEYS, num_prefetch=8)))
    tiny_queue = run_guarded(lambda: list(BatchPrefetcher(ds, slices, KEYS, num_prefetch=1)))
    direct = [make_batch_arrays(ds, sl, KEYS) for sl in slices]
    assert_same_batches(inline, direct)
    assert_same_batches(threaded, direct)
    assert_same_batches(tiny_queue, direct)
    assert not prefetch_threads()


@pytest.mark.parametrize("num_prefetch", [1, 8])
def test_producer_error_raised_at_failing_batch(num_prefetch):
    base = make_dataset()
    ds = FailingDataset([{k: v for k, v in s.items()} for s in base._seqs], output_dim=4, fail_at=3)
    slices = slices_for(ds)
    assert len(slices) > 6
    got = []

    def consume():
        with pytest.raises(ProducerError) as info:
            for batch in BatchPrefetcher(ds, slices, KEYS, num_prefetch=num_prefetch):
                got.append(batch)
        return info.value
    err = run_guarded(consume)
    assert len(got) == 2  # the two good batches, then the error: not deferred to the end
    assert "disk on fire while reading batch 3" in str(err)
    assert isinstance(err.original, ValueError)
    assert "disk on fire" in err.tb_text and "_corpus_load" in err.tb_text
    assert ds.calls == 3  # the producer stopped at the failure
    assert not prefetch_threads()


def test_inline_error_is_the_original():
    base = make_dataset()
    ds = FailingDataset([dict(s) for s in base._seqs], output_dim=4, fail_at=2)
    got = []
    with pytest.raises(ValueError, match="disk on fire while reading batch 2"):
        for batch in BatchPrefetcher(ds, slices_for(ds), KEYS, num_prefetch=0):
            got.append(batch)
    assert len(got) == 1


@pytest.mark.parametrize("num_prefetch", [1, 2, 8])
def test_no_thread_left_after_break(num_prefetch):
    ds = make_dataset(n=60)
    slices = slices_for(ds, batch_size=20)

    def consume():
        for i, _ in enumerate(BatchPrefetcher(ds, slices, KEYS, num_prefetch=num_prefetch)):
            if i == 1:
                break
        return True
    run_guarded(consume)
    assert not prefetch_threads()


def test_no_thread_left_after_explicit_close():
    ds = make_dataset(n=60)
    prefetcher = BatchPrefetcher(ds, slices_for(ds, batch_size=20), KEYS, num_prefetch=2)
    it = iter(prefetcher)
    next(it)
    assert prefetch_threads()  # the producer runs while the consumer holds the iterator
    prefetcher.close()
    assert not prefetch_threads()
    it.close()


def test_iterating_twice_gives_the_batches_again():
    ds = make_dataset()
    slices = slices_for(ds)
    prefetcher = BatchPrefetcher(ds, slices, KEYS, num_prefetch=4)
    first = run_guarded(lambda: list(prefetcher))
    second = run_guarded(lambda: list(prefetcher))
    assert_same_batches(first, second)
    assert len(first) == len(slices)

    def partial_then_full():
        for i, _ in enumerate(prefetcher):
            if i == 0:
                break
        return list(prefetcher)
    assert_same_batches(run_guarded(partial_then_full), first)
    assert not prefetch_threads()


def test_empty_slice_list():
    ds = make_dataset()
    assert run_guarded(lambda: list(BatchPrefetcher(ds, [], KEYS, num_prefetch=8))) == []
    assert list(BatchPrefetcher(ds, [], KEYS, num_prefetch=0)) == []
    assert not prefetch_threads()


@pytest.mark.parametrize("num_prefetch", [1, 3])
def test_producer_stays_at_most_num_prefetch_batches_ahead(num_prefetch):
    ds = make_dataset(n=60)
    slices = slices_for(ds, batch_size=10)
    assert len(slices) > num_prefetch + 4
    loaded = []

    def make_batch(dataset, sl, keys):
        loaded.append(sl)
        return make_batch_arrays(dataset, sl, keys)

    def consume():
        ahead = []
        for taken, _ in enumerate(BatchPrefetcher(ds, slices, KEYS, num_prefetch=num_prefetch,
                                                  make_batch=make_batch), start=1):
            for _ in range(50):  # give the producer time to run ahead as far as it may
                if len(loaded) >= min(len(slices), taken + num_prefetch):
                    break
                threading.Event().wait(0.002)
            ahead.append(len(loaded) - taken)
        return ahead
    ahead = run_guarded(consume)
    # the batch just taken freed a slot: at most num_prefetch more may be loaded, and they are
    assert max(ahead) == num_prefetch
    assert all(a <= num_prefetch for a in ahead)
    assert not prefetch_threads()
