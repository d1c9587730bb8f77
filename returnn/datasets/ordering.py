"""``seq_ordering``: the order of a dataset's sequences in an epoch, as RETURNN computes it.

The same ordering string, epoch and seed give the same order as RETURNN's
``Dataset.get_seq_order_for_epoch``, so a config run through either engine trains on the same
batches (checked against orders RETURNN printed, ``tests/test_seq_ordering.py``):

- ``default``, ``reverse``, ``sorted``, ``sorted_reverse`` (by length, ties in corpus order);
- ``default_every_n:N``: corpus cut into N consecutive parts, read interleaved (the first
  sequence of every part, then the second, ...; ``num_seqs % N`` trailing sequences left out);
- ``random[:nth]``: a permutation; ``random_sample[:nth]``: ``num_seqs`` draws with replacement;
- ``sort_bin_shuffle[_x2][:bins|:.seqs_per_bin[:nth]]``: shuffled, sorted by length, cut into
  bins (default 2; ``.M``: ``max(num_seqs // M, 2)`` bins) that come in random order (``_x2``:
  each bin also shuffled inside);
- ``laplace[:bins|:.seqs_per_bin[:nth]]``: shuffled, cut into bins (same counts), each bin
  sorted by length, every second one longest first.

``nth`` keeps the random order for ``nth`` epochs in a row: the seed is that of full epoch
``(epoch - 1) // nth + 1`` (:func:`seed_for_epoch`). A config may also give a function
``seq_ordering(epoch=..., **kwargs) -> str``.
"""
from __future__ import annotations

from typing import Callable, Optional, Union

import numpy as np

from returnn.errors import DataError

KNOWN = "default, default_every_n:N, reverse, sorted, sorted_reverse, random[:nth], random_sample[:nth], " \
        "sort_bin_shuffle[_x2][:bins|:.per_bin[:nth]], laplace[:bins|:.per_bin[:nth]]"

# Seed of the shuffling for a given ``nth`` (epochs one order is kept for).
SeedFn = Callable[[int], int]


def seed_for_epoch(full_epoch: int, fixed_random_seed: Optional[int], random_seed_offset: int, nth: int = 1) -> int:
    """RETURNN's seed: ``fixed_random_seed`` as it is (the offset is ignored then), else the full
    epoch, counted in blocks of ``nth`` epochs, plus ``random_seed_offset``."""
    if fixed_random_seed is not None:
        return int(fixed_random_seed)
    epoch = max(1, int(full_epoch))
    if nth > 1:
        epoch = (epoch - 1) // nth + 1
    return epoch + int(random_seed_offset)


def compute_seq_order(ordering: str, n: int, get_lengths: Callable[[], np.ndarray], seed: Union[int, SeedFn],
                      name: str = "dataset") -> np.ndarray:
    """Corpus indices (int64) in the order ``ordering`` asks for; ``seed`` is a fixed seed or a
    function of ``nth``. An ordering that cannot be read is a DataError naming ``name``."""
    ordering = ordering or "default"
    kind, args = _parse(ordering, name)
    seed_of: SeedFn = seed if callable(seed) else (lambda nth: int(seed))  # noqa: E731

    def rng(nth: int) -> np.random.RandomState:
        return np.random.RandomState(seed_of(nth) % (2 ** 32))

    if kind == "default":
        return np.arange(n, dtype=np.int64)
    if kind == "reverse":
        return np.arange(n - 1, -1, -1, dtype=np.int64)
    if kind == "default_every_n":
        every = args[0]
        out = np.arange(n // every, dtype=np.int64).repeat(every)
        for i in range(1, every):
            out[i::every] += i * (n // every)
        return out
    if kind in ("sorted", "sorted_reverse"):
        lengths = _lengths(get_lengths, n)
        return np.argsort(-lengths if kind == "sorted_reverse" else lengths, kind="stable").astype(np.int64)
    if kind == "random":
        return rng(args[0]).permutation(n).astype(np.int64)
    if kind == "random_sample":
        return rng(args[0]).randint(0, n, size=n).astype(np.int64) if n else np.zeros((0,), np.int64)
    bins, per_bin, nth = args
    if per_bin:
        bins = max(n // per_bin, 2)
    random = rng(nth)
    shuffled = random.permutation(n).astype(np.int64)
    lengths = _lengths(get_lengths, n)
    if kind == "laplace":
        parts = []
        for i in range(bins):
            part = shuffled[i * n // bins:(i + 1) * n // bins]
            key = -lengths[part] if i % 2 else lengths[part]
            parts.append(part[np.argsort(key, kind="stable")])
        return np.concatenate(parts) if parts else shuffled
    by_length = shuffled[np.argsort(lengths[shuffled], kind="stable")]  # sort_bin_shuffle[_x2]
    parts = []
    for i in random.permutation(bins):
        part = by_length[i * n // bins:(i + 1) * n // bins].copy()
        if kind == "sort_bin_shuffle_x2":
            random.shuffle(part)
        parts.append(part)
    return np.concatenate(parts) if parts else by_length


def check_ordering(ordering: str, name: str) -> None:
    """A DataError naming ``name`` if ``ordering`` cannot be read."""
    _parse(ordering or "default", name)


def resolve_ordering(ordering: Union[str, Callable[..., str]], epoch: int, name: str) -> str:
    """The ordering string of ``epoch``: ``ordering`` itself, or what the config's function gives."""
    if not callable(ordering):
        return ordering
    text = ordering(epoch=epoch)
    if not isinstance(text, str):
        raise DataError("%s: seq_ordering function %s must return a string, got %r"
                        % (name, getattr(ordering, "__name__", ordering), text))
    return text


def _parse(ordering: str, name: str):
    """(kind, args): ``args`` are [every] / [nth] / [bins, seqs per bin (0: bins counts), nth]."""
    parts = ordering.split(":")
    kind, rest = parts[0], parts[1:]

    def number(text: str, what: str, minimum: int = 1) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise DataError("%s: seq_ordering %r: %s must be an integer >= %i, got %r" % (name, ordering, what, minimum, text))
        return value

    if kind in ("default", "reverse", "sorted", "sorted_reverse") and not rest:
        return kind, []
    if kind == "default_every_n" and len(rest) == 1:
        return kind, [number(rest[0], "N")]
    if kind in ("random", "random_sample") and len(rest) <= 1:
        return kind, [number(rest[0], "nth") if rest else 1]
    if kind in ("laplace", "sort_bin_shuffle", "sort_bin_shuffle_x2") and len(rest) <= 2:
        bins, per_bin = 2, 0
        if rest and rest[0].startswith("."):
            per_bin = number(rest[0][1:], "sequences per bin")
        elif rest:
            bins = number(rest[0], "bin count")
        nth = number(rest[1], "nth") if len(rest) > 1 else 1
        return kind, [bins, per_bin, nth]
    raise DataError("%s: unknown seq_ordering %r (known: %s)" % (name, ordering, KNOWN))


def _lengths(get_lengths: Callable[[], np.ndarray], n: int) -> np.ndarray:
    lengths = np.asarray(get_lengths())
    if len(lengths) != n:
        raise DataError("sequence lengths for the ordering: %i lengths for %i sequences" % (len(lengths), n))
    return lengths
