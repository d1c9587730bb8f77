"""Batching like RETURNN: ``batch_size`` in frames (padded max length x sequences), ``max_seqs``,
``chunking = "size:step"``, and per-rank sharding of the batch list. :class:`BatchOptions` holds a
config's batching options; its :meth:`~BatchOptions.epoch_slices` is the path training, evaluation
and forwarding all take. For networks without any layer that mixes frames, RETURNN packs frames
instead (:func:`generate_packed_batches`).

A :class:`BatchSlices` says which frames of which sequences form a batch; :func:`make_batch_arrays`
turns it into padded numpy arrays plus sequence lengths.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from returnn.datasets.base import Dataset
from returnn.datasets.chunking import ChunkOptions, chunk_options
from returnn.datasets.context_window import Context, extra_frames, slice_pad_zeros
from returnn.datasets.key_chunking import function_chunks, key_chunks
from returnn.errors import DataError


@dataclass
class BatchSlices:
    """One batch: for each entry, sequence index in the epoch and the frame range [start, end)
    on the time axis of the chunked keys (``end = -1`` means the whole sequence). ``key_ranges``
    gives other ranges for some keys (per-key chunking: ``{key: (starts, ends)}``)."""

    seq_idxs: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    packed: bool = False  # all entries concatenated into one row (see generate_packed_batches)
    key_ranges: Optional[Dict[str, Tuple[np.ndarray, np.ndarray]]] = None
    context: Optional[Context] = None  # frames added before/after each entry per key (context_window)

    @property
    def num_seqs(self) -> int:
        return int(len(self.seq_idxs))

    def entries(self) -> List[Tuple[int, int, int]]:
        return list(zip(self.seq_idxs.tolist(), self.starts.tolist(), self.ends.tolist()))

    def ranges_of(self, key: str) -> Tuple[np.ndarray, np.ndarray]:
        """(starts, ends) of ``key``'s frames per entry."""
        if self.key_ranges and key in self.key_ranges:
            return self.key_ranges[key]
        return self.starts, self.ends


def per_key_limits(keys: Sequence[str], value: Any, what: str) -> np.ndarray:
    """RETURNN's ``NumbersDict`` limit per data key (float array; inf: no limit): an int limits
    every key, a dict ``{key: limit}`` (or NumbersDict) only those keys (its broadcast value the rest)."""
    out = np.full(len(keys), np.inf)
    if hasattr(value, "dict") and hasattr(value, "value") and not isinstance(value, dict):  # NumbersDict
        if value.value is not None:
            out[:] = float(value.value)
        value = value.dict
    if isinstance(value, dict):
        for key, limit in value.items():
            if key in keys and limit:
                out[list(keys).index(key)] = float(limit)
        return out
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise DataError("%s: expected a number or {data key: number}, got %r" % (what, value)) from None
    if number:
        out[:] = number
    return out


def max_seq_length_limits(keys: Sequence[str], max_seq_length: Any) -> np.ndarray:
    """RETURNN's ``max_seq_length``: an int limits every data key, a negative int the key ``classes``,
    a dict ``{key: limit}`` only those keys; 0/None: no limit."""
    if not max_seq_length:
        return np.full(len(keys), np.inf)
    if not isinstance(max_seq_length, dict) and not hasattr(max_seq_length, "dict") and float(max_seq_length) < 0:
        max_seq_length = {"classes": -int(max_seq_length)}
    return per_key_limits(keys, max_seq_length, "config key 'max_seq_length'")


def too_long(dataset: Dataset, lengths: np.ndarray, max_seq_length: Any) -> np.ndarray:
    """(num_seqs,) bool: sequences over ``max_seq_length`` (see :func:`max_seq_length_limits`)."""
    limits = max_seq_length_limits(dataset.get_data_keys(), max_seq_length)
    return np.any(lengths > limits[None, :], axis=1)


def generate_batches(dataset: Dataset, batch_size: Any, max_seqs: int = -1,
                     chunking: Any = None, max_seq_length: Any = 0, min_chunk_size: Any = 0,
                     chunking_variance: Any = 0.0, context: Optional[Context] = None, min_seq_length: Any = 0,
                     max_pad_size: Any = None, used_keys: Optional[Sequence[str]] = None,
                     seq_drop: float = 0.0) -> List[BatchSlices]:
    """Cuts the current epoch of ``dataset`` (after ``init_seq_order``) into batches, in order.

    A batch's cost is (longest entry) x (number of entries), per data key; it stays <= ``batch_size``
    (an int for every key, or RETURNN's ``{key: frames}``) unless a single entry alone is longer.
    ``max_seqs`` (> 0) bounds entries per batch. Entries (whole sequences, or chunks) longer than
    ``max_seq_length`` are skipped, as in RETURNN (which checks the chunk, not the sequence).
    ``chunking`` is a config value or :class:`ChunkOptions` (then ``min_chunk_size`` and
    ``chunking_variance`` are its own); per-key chunking: :mod:`returnn.datasets.key_chunking`. With a
    variance, the epoch's generator also gives one number per kept chunk (RETURNN's ``seq_drop`` test,
    made even with ``seq_drop = 0``) between the sequences' scales.
    ``context`` (RETURNN's ``context_window``) lengthens each entry of its keys before the budget and
    ``max_seq_length`` are checked, as in RETURNN. RETURNN's training options: entries shorter than
    ``min_seq_length`` in some key are skipped too (an int: every key, a dict: those keys);
    ``max_pad_size`` ends a batch before an entry that would make its padded frames (longest x entries
    - real frames) exceed it in some key. With chunking, only the data keys in ``used_keys`` (the ones
    the network reads; None: all) are cut and counted, as RETURNN's ``used_data_keys``; whole sequences
    count every key. ``seq_drop`` (RETURNN's, training of a recurrent network): an entry within the length
    limits is left out when its number from the epoch's generator is below it.
    """
    chunk = chunking if isinstance(chunking, ChunkOptions) else \
        chunk_options(chunking, min_chunk_size, chunking_variance)
    lengths = dataset.seq_lengths_in_order()  # (num_seqs, num_keys)
    if lengths.shape[0] == 0:
        return []
    keys = dataset.get_data_keys()
    if chunk is not None and used_keys is not None and any(k in used_keys for k in keys):
        cols = [i for i, k in enumerate(keys) if k in used_keys]
        lengths, keys = lengths[:, cols], [keys[i] for i in cols]
    limits = per_key_limits(keys, batch_size, "config key 'batch_size'")
    max_lens = max_seq_length_limits(keys, max_seq_length)
    max_seqs = int(max_seqs) if max_seqs and int(max_seqs) > 0 else 1 << 62
    rng = dataset.epoch_random() if (chunk is not None and chunk.variance > 0) or seq_drop > 0 else None
    # RETURNN's seq_drop test: one number per entry within the length limits (also with seq_drop 0, where it
    # only matters as a draw between the chunk scales of chunking_variance)
    keep = None if rng is None else (lambda: rng.random() >= seq_drop)
    by_key = chunk is not None and (chunk.per_key or bool(np.any(lengths != lengths[:, :1])))
    max_pad = None if max_pad_size is None else (
        np.full(len(keys), float(max_pad_size)) if isinstance(max_pad_size, (int, float))
        else per_key_limits(keys, max_pad_size, "config key 'max_pad_size'"))
    builder = _BatchBuilder(keys, limits, max_seqs, by_key, context, _min_lengths(keys, min_seq_length), max_pad)
    if chunk is not None and chunk.func is not None:
        for seq_idx, ranges in function_chunks(chunk.func, dataset, keys):
            builder.add(seq_idx, ranges, max_lens, keep=keep)
        return builder.finish()
    for seq_idx in range(lengths.shape[0]):
        row = lengths[seq_idx]
        if chunk is None:
            builder.add(seq_idx, None, max_lens, row, keep=keep)
        elif by_key:
            for ranges in key_chunks(chunk, dict(zip(keys, row.tolist())), rng, dataset.describe()):
                builder.add(seq_idx, ranges, max_lens, keep=keep)
        else:  # RETURNN draws a chunk scale for every sequence, skipped ones too
            for start, end in chunk.ranges(int(row[0]), rng):
                builder.add(seq_idx, {k: (start, end) for k in keys[:1]}, max_lens, np.full(len(keys), end - start),
                            keep=keep)
    return builder.finish()


class _BatchBuilder:
    """Collects entries into batches: each entry's length per key, the batch's longest per key
    times the entry count against the per-key budget, ``max_seqs``; entries over ``max_seq_length``
    are left out."""

    def __init__(self, keys: Sequence[str], limits: np.ndarray, max_seqs: int, by_key: bool,
                 context: Optional[Context] = None, min_lens: Optional[np.ndarray] = None,
                 max_pad: Optional[np.ndarray] = None):
        self.keys, self.limits, self.max_seqs, self.by_key = list(keys), limits, max_seqs, by_key
        self.min_lens = np.zeros(len(self.keys)) if min_lens is None else min_lens
        self.max_pad = max_pad  # per key (inf: none), or None
        self.frames = np.zeros(len(self.keys))  # real frames of the current batch
        self.context, self.extra = context, extra_frames(context, keys)
        self.batches: List[BatchSlices] = []
        self.entries: List[Tuple[int, Optional[Dict[str, Tuple[int, int]]]]] = []
        self.cur_max = np.zeros(len(self.keys))

    def add(self, seq_idx: int, ranges: Optional[Dict[str, Tuple[int, int]]], max_lens: np.ndarray,
            piece: Optional[np.ndarray] = None, keep: Optional[Callable[[], bool]] = None) -> bool:
        """Adds an entry (False: left out, outside the length limits, or ``keep()``, asked for an entry
        within them, said no: RETURNN's seq_drop)."""
        if piece is None:
            piece = np.array([ranges[k][1] - ranges[k][0] for k in self.keys])
        piece = piece + self.extra
        if np.any(piece > max_lens) or np.any(piece < self.min_lens):
            return False
        if keep is not None and not keep():
            return False
        new_max = np.maximum(self.cur_max, piece)
        count = len(self.entries) + 1
        if self.entries and (np.any(new_max * count > self.limits) or len(self.entries) >= self.max_seqs or (
                self.max_pad is not None and np.any(new_max * count - self.frames - piece > self.max_pad))):
            self.flush()
            new_max = piece
        self.frames = self.frames + piece
        self.entries.append((seq_idx, ranges))
        self.cur_max = new_max
        return True

    def flush(self) -> None:
        if not self.entries:
            return
        idx = np.array([i for i, _ in self.entries], dtype=np.int64)
        if self.entries[0][1] is None:  # whole sequences
            minus = np.full(len(idx), -1, dtype=np.int64)
            batch = BatchSlices(idx, np.zeros(len(idx), dtype=np.int64), minus, context=self.context)
        else:
            first = self.keys[0]
            starts = np.array([r[first][0] for _, r in self.entries], dtype=np.int64)
            ends = np.array([r[first][1] for _, r in self.entries], dtype=np.int64)
            key_ranges = None
            if self.by_key:
                key_ranges = {k: (np.array([r[k][0] for _, r in self.entries], dtype=np.int64),
                                  np.array([r[k][1] for _, r in self.entries], dtype=np.int64))
                              for k in self.keys[1:]}
            batch = BatchSlices(idx, starts, ends, key_ranges=key_ranges, context=self.context)
        self.batches.append(batch)
        self.entries = []
        self.cur_max = np.zeros(len(self.keys))
        self.frames = np.zeros(len(self.keys))

    def finish(self) -> List[BatchSlices]:
        """The batches; RETURNN drops a last batch whose entries all have no frames (its _generate_batches
        yields the last batch only if it holds a frame; earlier batches are yielded as they fill up)."""
        if self.entries and not np.any(self.cur_max > 0):
            self.entries, self.cur_max = [], np.zeros(len(self.keys))
        self.flush()
        return self.batches


def _min_lengths(keys: Sequence[str], min_seq_length: Any) -> np.ndarray:
    """RETURNN's ``min_seq_length`` per key (0: none)."""
    if not min_seq_length:
        return np.zeros(len(keys))
    limits = per_key_limits(keys, min_seq_length, "config key 'min_seq_length'")
    return np.where(np.isinf(limits), 0, limits)


def generate_packed_batches(dataset: Dataset, batch_size: int, max_seqs: int = -1) -> Optional[List[BatchSlices]]:
    """RETURNN's batches for a network whose layers all work frame by frame ("not recurrent"):
    the frames of consecutive sequences are concatenated into one row until it holds exactly
    ``batch_size`` frames (a sequence may continue in the next batch); a batch also ends when it
    spans more than ``max_seqs`` (> 0) sequences (RETURNN's ``Batch.get_num_seqs``: last index - first
    index + 1, so sequences without frames in between count). Chunking and ``max_seq_length`` do not apply, as
    in RETURNN. None when the data keys differ in length (frames do not line up)."""
    lengths = dataset.seq_lengths_in_order()  # (num_seqs, num_keys)
    if lengths.shape[0] and np.any(lengths != lengths[:, :1]):
        return None
    batch_size = max(1, int(batch_size))
    max_seqs = int(max_seqs) if max_seqs and int(max_seqs) > 0 else 1 << 62
    batches: List[BatchSlices] = []
    cur: List[Tuple[int, int, int]] = []
    frames = 0
    for seq_idx in range(lengths.shape[0]):
        length, start = int(lengths[seq_idx, 0]), 0
        while start < length:
            n = min(length - start, batch_size - frames)
            cur.append((seq_idx, start, start + n))
            frames += n
            start += n
            if frames >= batch_size or cur[-1][0] - cur[0][0] + 1 > max_seqs:  # RETURNN: the seq index span
                batches.append(_packed(cur))
                cur, frames = [], 0
    if cur:
        batches.append(_packed(cur))
    return batches


def _packed(entries: List[Tuple[int, int, int]]) -> BatchSlices:
    idx, starts, ends = (np.array(v, dtype=np.int64) for v in zip(*entries))
    return BatchSlices(idx, starts, ends, packed=True)


def shard_batches(batches: Sequence[BatchSlices], rank: int, size: int) -> List[BatchSlices]:
    """Batch i of the epoch goes to rank i mod size."""
    if size <= 1:
        return list(batches)
    return list(batches[rank::size])


def make_batch_arrays(dataset: Dataset, batch: BatchSlices, keys: Optional[Sequence[str]] = None
                      ) -> Dict[str, np.ndarray]:
    """Loads and pads one batch.

    Returns ``{key: (B, T_max[, dim]) array, key + ":seq_len": (B,) int32}`` for each key. Padding
    is zeros. Sequences are read once per batch through :meth:`Dataset.get_seqs`.
    """
    keys = list(keys) if keys is not None else dataset.get_data_keys()
    idxs = batch.seq_idxs.tolist()
    unique = sorted(set(idxs))  # read in index order (datasets can read contiguous ranges in one slice)
    seqs = dataset.get_seqs(unique)
    by_idx = dict(zip(unique, seqs))
    rows = [by_idx[idx] for idx in idxs]  # a sequence may fill several entries (chunks)
    out: Dict[str, np.ndarray] = {}
    for key in keys:
        starts, ends = batch.ranges_of(key)
        ranges = list(zip(starts.tolist(), ends.tolist())) if np.any(ends >= 0) else None  # None: whole sequences
        pieces = [row[key] for row in rows]
        if batch.context and key in batch.context:  # the entry's frames and its context, zeros beyond the sequence
            before, after = batch.context[key]
            bounds = ranges or [(0, -1)] * len(pieces)
            pieces = [slice_pad_zeros(p, s - before, (e if e >= 0 else len(p)) + after)
                      for p, (s, e) in zip(pieces, bounds)]
        elif ranges is not None:
            pieces = [p[s:e] if e >= 0 else p for p, (s, e) in zip(pieces, ranges)]
        if batch.packed:  # one row: the entries' frames concatenated
            out[key] = np.concatenate(pieces)[None]
            out[key + ":seq_len"] = np.array([out[key].shape[1]], dtype=np.int32)
            continue
        lens = [len(p) for p in pieces]
        padded = np.zeros((len(pieces), max(lens)) + pieces[0].shape[1:], dtype=pieces[0].dtype)
        for j, piece in enumerate(pieces):
            padded[j, :lens[j]] = piece
        out[key] = padded
        out[key + ":seq_len"] = np.array(lens, dtype=np.int32)
    return out


@dataclass
class BatchOptions:
    """The batching options of a config (``batch_size``, ``max_seqs``, ``chunking``, ``min_chunk_size``,
    ``chunking_variance``, ``max_seq_length``, ``min_seq_length``, ``max_pad_size``, ``prefetch_batches``),
    and the one way an epoch is cut into batches."""

    batch_size: Any  # frames: an int, or RETURNN's {data key: frames} (see per_key_limits())
    max_seqs: int
    chunking: Any  # of train datasets whose dict sets none
    max_seq_length: Any  # int or {data key: limit}, see max_seq_length_limits()
    prefetch: int
    # RETURNN packs frames when no layer mixes frames (its "non-recurrent" network); the engine
    # sets this for its network (fit_network). Forwarding always keeps whole sequences.
    pack_frames: bool = False
    forward_batch_size: int = 0  # 0: batch_size (task forward refuses 0, as RETURNN)
    min_chunk_size: Any = 0  # see chunk_ranges()
    chunking_variance: Any = 0.0
    eval_chunking: Any = None  # of dev/eval datasets whose dict sets none (see eval_chunking())
    min_seq_length: Any = 0  # training only, as RETURNN's engine passes it (see generate_batches())
    max_pad_size: Any = None  # (as min_seq_length)
    shuffle_batches: bool = False  # see epoch_slices()
    seq_drop: float = 0.0  # training of a recurrent network (see generate_batches(), _train_batches())
    seq_drop_freq: float = 10.0
    used_keys: Optional[List[str]] = None  # data keys the network reads (fit_network; see generate_batches())
    inc_seq_length: int = 0  # growth of max_seq_length per train epoch (see start_train_epoch())
    base_max_seq_length: Any = 0  # the config's max_seq_length, which inc_seq_length grows from
    # the train batch list kept while the order stays the same: (dataset, order, batches, shuffling generator)
    _kept: Any = field(default=None, repr=False, compare=False)
    # with inc_seq_length: id(dev dataset) -> (its order, the limit its kept batch list was cut with)
    _dev_cuts: Dict[int, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_config(cls, config) -> "BatchOptions":
        """Reads the options from a :class:`returnn.config.Config` (defaults: returnn/config_keys/)."""
        max_seq_length = _frames(config.typed_value("max_seq_length"), "max_seq_length")
        out = cls(batch_size=_frames(config.typed_value("batch_size"), "batch_size"), max_seqs=config.int("max_seqs"),
                  chunking=config.typed_value("chunking"), max_seq_length=max_seq_length,
                  prefetch=config.int("prefetch_batches"),
                  forward_batch_size=_frames(config.typed_value("forward_batch_size"), "forward_batch_size"),
                  min_chunk_size=config.typed_value("min_chunk_size"),
                  chunking_variance=config.typed_value("chunking_variance"), eval_chunking=eval_chunking(config),
                  min_seq_length=config.typed_value("min_seq_length") or 0,
                  max_pad_size=config.typed_value("max_pad_size"), shuffle_batches=config.bool("shuffle_batches"),
                  seq_drop=config.float("seq_drop"), seq_drop_freq=config.float("seq_drop_freq"))
        out.base_max_seq_length = max_seq_length
        out.inc_seq_length = _seq_length_growth(config)
        from returnn.errors import ConfigError
        if out.seq_drop > 1.0:  # RETURNN: assert seq_drop <= 1.0 when it cuts the first train epoch
            raise ConfigError("config key 'seq_drop': %r is above 1 (a probability; RETURNN asserts seq_drop <= 1)"
                              % out.seq_drop)
        if out.seq_drop_freq == 0:  # RETURNN: epoch % seq_drop_freq in every train epoch
            raise ConfigError("config key 'seq_drop_freq': 0 (RETURNN computes epoch %% seq_drop_freq every epoch: "
                              "ZeroDivisionError)")
        chunk_options(out.chunking, out.min_chunk_size, out.chunking_variance)  # errors now, naming the key
        chunk_options(out.eval_chunking)
        return out

    def start_train_epoch(self, epoch: int) -> Optional[int]:
        """RETURNN's ``inc_seq_length``: train epoch ``epoch`` (and the dev scoring after it) limits the
        lengths at ``max_seq_length + epoch * inc_seq_length`` (RETURNN adds it before each epoch, and
        ``(start_epoch - 1)`` times when training starts later); the kept train batches are cut anew.
        Returns the new limit where it grew."""
        if not self.inc_seq_length:
            return None
        limit = self.base_max_seq_length + epoch * self.inc_seq_length
        if limit == self.max_seq_length:
            return None
        self.max_seq_length, self._kept = limit, None
        return limit

    def fit_network(self, network: Any) -> None:
        """What the network decides about its batches: frames packed when no layer is recurrent (RETURNN's
        batching for frame-wise networks), and chunks of the data keys it reads (RETURNN's used_data_keys)."""
        self.pack_frames = not network.recurrent
        self.used_keys = network.required_data_keys(with_targets=True)

    def for_eval(self, dataset_key: Optional[str] = None) -> "BatchOptions":
        """These options for scoring (``dataset_key``: the dataset's config key) and search (None): the batch
        size is ``batch_size``, as in RETURNN's TF engine (its ``eval_batch_size`` is read only by its frontend
        engines: no effect here either). ``max_seq_length`` applies only to the dataset ``dev``, as RETURNN's
        ``Engine.eval_model`` passes it (``eval`` and ``eval_datasets`` are scored whole; its search refuses
        a ``max_seq_length`` and keeps every sequence, as here)."""
        return replace(self, max_seq_length=self.max_seq_length if dataset_key == "dev" else 0)

    def for_forward(self) -> "BatchOptions":
        """These options with ``forward_batch_size`` (else ``batch_size``) as the batch size; every
        sequence is forwarded (RETURNN's ``forward_to_hdf`` passes no ``max_seq_length``)."""
        return replace(self, batch_size=self.forward_batch_size or self.batch_size, max_seq_length=0)

    def chunk_options(self, dataset: Dataset, purpose: str) -> Optional[ChunkOptions]:
        """How ``dataset``'s sequences are cut for ``purpose`` (``train``, ``eval`` or ``forward``):
        its own dict's ``chunking`` / ``min_chunk_size`` / ``chunking_variance`` where set, else
        the config's (RETURNN copies them into each dataset's options); dev/eval sets default to no
        chunking (see :func:`eval_chunking`); forwarding and search always see whole sequences."""
        if purpose == "forward":
            return None
        own = dataset.chunk_settings
        default = self.chunking if purpose == "train" else self.eval_chunking
        return chunk_options(own.get("chunking", default), own.get("min_chunk_size", self.min_chunk_size),
                             own.get("chunking_variance", self.chunking_variance))

    def epoch_slices(self, dataset: Dataset, epoch: int, purpose: str, rank: int = 0,
                     size: int = 1, packed: bool = False) -> List[BatchSlices]:
        """Orders ``dataset`` for ``epoch``, cuts it into batches (chunked as :meth:`chunk_options`
        says for ``purpose``; frames packed when ``packed`` and :attr:`pack_frames`, if the data
        keys line up and the dataset has no ``context_window``) and returns those of ``rank`` out of ``size`` (batch i goes to rank i mod size)."""
        if purpose not in ("train", "eval", "forward"):
            raise ValueError("purpose: expected train, eval or forward, got %r" % (purpose,))
        dataset.init_seq_order(epoch)
        if purpose == "eval" and self.inc_seq_length and self.max_seq_length:
            self.max_seq_length = self._dev_limit(dataset)
        if purpose == "train" and getattr(dataset, "reuses_batch_list", False):
            return shard_batches(self._train_batches(dataset, packed, epoch), rank, size)
        return shard_batches(self._cut(dataset, purpose, packed), rank, size)

    def _dev_limit(self, dataset: Dataset) -> Any:
        """The length limit of the dev set's batches with ``inc_seq_length``: RETURNN cuts them anew only
        where the dataset's order changed (not an HDFDataset's fixed order), so those keep the limit of
        the epoch they were first cut in."""
        order = np.asarray(dataset.seq_order)
        kept = self._dev_cuts.get(id(dataset))
        if kept is not None and getattr(dataset, "reuses_batch_list", False) and np.array_equal(kept[0], order):
            return kept[1]
        self._dev_cuts[id(dataset)] = (order.copy(), self.max_seq_length)
        return self.max_seq_length

    def _train_batches(self, dataset: Dataset, packed: bool, epoch: int) -> List[BatchSlices]:
        """RETURNN's engine keeps the batch list of a dataset that caches it (HDFDataset) while the
        dataset's order stays the same as in the epoch before: its chunks with ``chunking_variance``
        and its ``seq_drop`` drops stay those of the list's first epoch (with ``seq_drop``, an epoch
        divisible by ``seq_drop_freq`` cuts anew), and ``shuffle_batches`` shuffles a copy of that list
        from its second epoch on (RETURNN's BatchSetGenerator: Python's generator seeded 1234 when the
        list is made; the first epoch is not shuffled). Other datasets are cut anew every epoch."""
        order = np.asarray(dataset.seq_order)
        kept = self._kept
        if self.seq_drop > 0 and epoch % self.seq_drop_freq == 0:
            kept = None
        if kept is not None and kept[0] is dataset and np.array_equal(kept[1], order):
            batches = list(kept[2])
            if self.shuffle_batches:
                kept[3].shuffle(batches)
            return batches
        batches = self._cut(dataset, "train", packed)
        self._kept = (dataset, order.copy(), batches, random.Random(1234))
        return list(batches)

    def _cut(self, dataset: Dataset, purpose: str, packed: bool) -> List[BatchSlices]:
        """The current epoch of ``dataset`` cut into batches (see :meth:`epoch_slices`)."""
        context = getattr(dataset, "context_window", None)
        if packed and self.pack_frames and not context:
            batches = generate_packed_batches(dataset, scalar_budget(self.batch_size), self.max_seqs)
            if batches is not None:
                return batches
        train = purpose == "train"  # (RETURNN's engine passes min_seq_length and max_pad_size only in training)
        return generate_batches(dataset, self.batch_size, self.max_seqs, self.chunk_options(dataset, purpose),
                                self.max_seq_length, context=context, min_seq_length=self.min_seq_length if train else 0,
                                max_pad_size=self.max_pad_size if train else None, used_keys=self.used_keys,
                                seq_drop=self.seq_drop if train and not self.pack_frames else 0.0)


def _seq_length_growth(config) -> int:
    """RETURNN's ``inc_seq_length`` as it takes effect: added to ``max_seq_length`` before every train
    epoch only where both are ints (not bools) and ``max_seq_length`` is set (not 0): its first addition
    makes any other number a float, which it then no longer grows."""
    inc, limit = config.typed_value("inc_seq_length"), config.typed_value("max_seq_length")
    if all(isinstance(x, int) and not isinstance(x, bool) for x in (inc, limit)) and limit:
        return inc
    return 0


def eval_chunking(config) -> Any:
    """RETURNN's chunking of dev/eval datasets whose dict sets none: the batch size with
    ``on_size_limit = "chunk"``, ``"1"`` when training is frame-wise (``chunking = "1"``), the
    config's chunking with ``chunk_eval``, else none. RETURNN reads the value for them as a string
    (``config.value``) and parses 'size:step' or a number: a per-key or (size, step) form fails there
    ('invalid literal for int()'), refused here in one line."""
    if config.value("on_size_limit") == "chunk":
        _as_string_chunking(config.typed_value("batch_size"), "on_size_limit = 'chunk'", "batch_size")
        return scalar_budget(_frames(config.typed_value("batch_size"), "batch_size"))
    if str(config.typed_value("chunking")) == "1":
        return "1"
    if config.bool("chunk_eval"):
        return _as_string_chunking(config.typed_value("chunking"), "chunk_eval", "chunking")
    return None


def _as_string_chunking(value: Any, option: str, key: str) -> Any:
    """``value`` if RETURNN's dev/eval datasets can take it as their chunking (a number or a string)."""
    if value is None or isinstance(value, (int, str)):
        return value
    from returnn.errors import ConfigError
    raise ConfigError("config key %r = %s: with %s RETURNN reads it as a string for the dev/eval chunking "
                      "(only 'size:step' or a number; it fails on %s)" % (key, _short_repr(value), option,
                                                                          type(value).__name__))


def _short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _frames(value: Any, key: str) -> Any:
    """A frame count of the config key ``key``: an int, or RETURNN's per-key form (a dict or
    NumbersDict, kept as it is: see :func:`per_key_limits`)."""
    if isinstance(value, dict) or (hasattr(value, "dict") and hasattr(value, "value")):
        return value
    if value is None:
        return 0
    if isinstance(value, float) and not value.is_integer() and key == "max_seq_length":
        return value  # RETURNN compares lengths with it as it is
    from returnn.config import Config
    return Config({key: value}).int(key, 0)  # the config's int reading and its error naming the key


def scalar_budget(value: Any) -> int:
    """One frame count for what needs one (packed frames, ``on_size_limit = "chunk"``): an int as it
    is; of a per-key form the smallest limit."""
    if isinstance(value, dict) or (hasattr(value, "dict") and hasattr(value, "value")):
        limits = [v for v in (dict(value) if isinstance(value, dict) else
                              dict(value.dict, **({} if value.value is None else {"*": value.value}))).values() if v]
        return int(min(limits)) if limits else 0
    return int(value or 0)
