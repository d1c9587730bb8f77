"""Produces padded batches in a background thread so data loading overlaps the compiled step.

The queue is bounded (``prefetch_batches``). An exception in the producer is handed to the
consumer with its traceback at the next ``get``; closing the iterator stops and joins the thread,
so no producer outlives its epoch. Batch order and content are exactly those of the slice list.
"""
from __future__ import annotations

import os
import queue
import sys
import threading
import time
import traceback
from typing import Callable, Dict, Iterator, List, Optional, Sequence

import numpy as np

from returnn.datasets.base import Dataset
from returnn.datasets.batching import BatchSlices, make_batch_arrays

Batch = Dict[str, np.ndarray]


class ProducerError(RuntimeError):
    """Raised in the consumer when the producer failed; carries the producer's traceback text."""

    def __init__(self, exc: BaseException, tb_text: str):
        super().__init__("%s: %s" % (type(exc).__name__, exc))
        self.original = exc
        self.tb_text = tb_text


_DONE = object()


class BatchPrefetcher:
    """Iterates padded batches for ``slices``; with ``num_prefetch`` = 0 it loads inline.

    ``wait_time`` accumulates the seconds the consumer spent blocked waiting for data.
    """

    def __init__(self, dataset: Dataset, slices: Sequence[BatchSlices], keys: Sequence[str],
                 num_prefetch: int = 8, make_batch: Optional[Callable[[Dataset, BatchSlices, Sequence[str]], Batch]] = None,
                 transform: Optional[Callable[[Batch], Dict]] = None):
        self.dataset = dataset
        self.slices = list(slices)
        self.keys = list(keys)
        self.num_prefetch = max(0, int(num_prefetch))
        self.make_batch = make_batch or make_batch_arrays
        # Applied to each batch in the producer, e.g. the engine's conversion to framework tensors,
        # so that work also overlaps the step instead of happening inside it.
        self.transform = transform
        self.wait_time = 0.0
        self._channel: Optional[_Channel] = None
        self._thread: Optional[threading.Thread] = None

    def _load(self, sl: BatchSlices):
        batch = self.make_batch(self.dataset, sl, self.keys)
        return self.transform(batch) if self.transform is not None else batch

    def __len__(self) -> int:
        return len(self.slices)

    def _produce(self, channel: "_Channel") -> None:
        """Thread body. Gets its own channel, so a thread left over from an earlier iteration can
        never feed or stop a later one."""
        _lower_thread_priority()
        try:
            for i, sl in enumerate(self.slices):
                if i >= self.num_prefetch:
                    channel.free.get()  # a slot: the consumer took a batch (or close() woke us)
                if channel.stop.is_set():
                    return
                channel.items.put(self._load(sl))
            channel.items.put(_DONE)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            channel.items.put(ProducerError(exc, "".join(traceback.format_exception(*sys.exc_info()))))

    def __iter__(self) -> Iterator[Batch]:
        if self.num_prefetch == 0:
            for sl in self.slices:
                t0 = time.perf_counter()
                batch = self._load(sl)
                self.wait_time += time.perf_counter() - t0
                yield batch
            return
        self.close()  # a previous iteration's producer, if any
        channel = self._channel = _Channel()
        thread = threading.Thread(target=self._produce, args=(channel,), name="batch-prefetch", daemon=True)
        self._thread = thread
        thread.start()
        get, free, clock = channel.items.get, channel.free.put, time.perf_counter
        try:
            while True:
                t0 = clock()
                try:
                    item = get(timeout=0.5)
                except queue.Empty:
                    if thread.is_alive() or not channel.items.empty():
                        continue
                    raise RuntimeError("batch prefetch thread ended without delivering its batches") from None
                free(None)
                self.wait_time += clock() - t0
                if item is _DONE:
                    return
                if isinstance(item, ProducerError):
                    raise item
                yield item
        finally:
            self.close()

    def close(self) -> None:
        """Stops the producer and waits for it."""
        thread, self._thread = self._thread, None
        if thread is not None:
            self._channel.stop.set()
            self._channel.free.put(None)  # wakes a producer waiting for a slot
            thread.join(timeout=30)


class _Channel:
    """Producer -> consumer: ``items`` (batches, then ``_DONE`` or a :class:`ProducerError`);
    consumer -> producer: one token in ``free`` per batch taken, so at most ``num_prefetch``
    batches wait. ``queue.SimpleQueue`` is implemented in C: its ``get``/``put`` cost the loop
    between two steps a few microseconds, where ``queue.Queue``'s Python conditions cost tens."""

    def __init__(self):
        self.items: "queue.SimpleQueue" = queue.SimpleQueue()
        self.free: "queue.SimpleQueue" = queue.SimpleQueue()
        self.stop = threading.Event()


def _lower_thread_priority(niceness: int = 10) -> None:
    """Makes the calling thread yield the CPU to the training step when cores are short (Linux
    schedules threads individually; elsewhere, or without permission, nothing happens)."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), niceness)
    except (AttributeError, OSError):
        pass


def producer_only_rate(dataset: Dataset, slices: List[BatchSlices], keys: Sequence[str]) -> float:
    """Batches per second the producer makes alone (no consumer work), for benchmarks."""
    t0 = time.perf_counter()
    for sl in slices:
        make_batch_arrays(dataset, sl, keys)
    return len(slices) / max(1e-9, time.perf_counter() - t0)
