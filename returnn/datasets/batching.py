"""Batching like RETURNN: ``batch_size`` in frames (padded max length x sequences), ``max_seqs``,
``chunking = "size:step"``, and per-rank sharding of the batch list. :class:`BatchOptions` holds a
config's batching options; its :meth:`~BatchOptions.epoch_slices` is the path training, evaluation
and forwarding all take. For networks without any layer that mixes frames, RETURNN packs frames
instead (:func:`generate_packed_batches`).

A :class:`BatchSlices` says which frames of which sequences form a batch; :func:`make_batch_arrays`
turns it into padded numpy arrays plus sequence lengths.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from returnn.datasets.base import Dataset
from returnn.datasets.chunking import ChunkOptions, chunk_options
from returnn.errors import DataError


@dataclass
class BatchSlices:
    """One batch: for each entry, sequence index in the epoch and the frame range [start, end)
    on the time axis of the chunked keys (``end = -1`` means the whole sequence)."""

    seq_idxs: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    packed: bool = False  # all entries concatenated into one row (see generate_packed_batches)

    @property
    def num_seqs(self) -> int:
        return int(len(self.seq_idxs))

    def entries(self) -> List[Tuple[int, int, int]]:
        return list(zip(self.seq_idxs.tolist(), self.starts.tolist(), self.ends.tolist()))


def too_long(dataset: Dataset, lengths: np.ndarray, max_seq_length: Any) -> np.ndarray:
    """(num_seqs,) bool: sequences over ``max_seq_length`` (RETURNN's: an int limits every data key,
    a negative int the key ``classes``, a dict ``{key: limit}`` only those keys; 0/None: no limit)."""
    if not max_seq_length:
        return np.zeros(lengths.shape[0], dtype=bool)
    if isinstance(max_seq_length, dict):
        limits = {k: int(v) for k, v in max_seq_length.items() if v}
    elif int(max_seq_length) < 0:
        limits = {"classes": -int(max_seq_length)}
    else:
        return lengths.max(axis=1) > int(max_seq_length)
    keys = list(dataset.get_data_keys())
    out = np.zeros(lengths.shape[0], dtype=bool)
    for key, limit in limits.items():
        if key in keys:
            out |= lengths[:, keys.index(key)] > limit
    return out


def generate_batches(dataset: Dataset, batch_size: int, max_seqs: int = -1,
                     chunking: Any = None, max_seq_length: Any = 0, min_chunk_size: Any = 0,
                     chunking_variance: Any = 0.0) -> List[BatchSlices]:
    """Cuts the current epoch of ``dataset`` (after ``init_seq_order``) into batches, in order.

    A batch's cost is (longest entry) x (number of entries); it stays <= ``batch_size`` unless a
    single entry alone is longer. ``max_seqs`` (> 0) bounds entries per batch. Sequences longer than
    ``max_seq_length`` (> 0) are skipped, as in RETURNN. ``chunking`` is a config value or
    :class:`ChunkOptions` (then ``min_chunk_size`` and ``chunking_variance`` are its own).
    """
    chunk = chunking if isinstance(chunking, ChunkOptions) else \
        chunk_options(chunking, min_chunk_size, chunking_variance)
    lengths = dataset.seq_lengths_in_order()  # (num_seqs, num_keys)
    if lengths.shape[0] == 0:
        return []
    rng = dataset.epoch_random() if chunk is not None and chunk.variance > 0 else None
    if chunk:
        keys = dataset.get_data_keys()
        data_len = lengths[:, 0]
        unequal = [k for i, k in enumerate(keys) if np.any(lengths[:, i] != data_len)]
        if unequal:
            raise DataError("chunking needs all data keys as long as %r, but %s differ in dataset %s"
                            % (keys[0], ", ".join(repr(k) for k in unequal), dataset.name))
    max_len = lengths.max(axis=1)
    skip = too_long(dataset, lengths, max_seq_length)
    batch_size = int(batch_size)
    max_seqs = int(max_seqs) if max_seqs and int(max_seqs) > 0 else 1 << 62
    batches: List[BatchSlices] = []
    cur_idx: List[int] = []
    cur_start: List[int] = []
    cur_end: List[int] = []
    cur_max = 0

    def flush() -> None:
        nonlocal cur_idx, cur_start, cur_end, cur_max
        if cur_idx:
            batches.append(BatchSlices(np.array(cur_idx, dtype=np.int64), np.array(cur_start, dtype=np.int64),
                                       np.array(cur_end, dtype=np.int64)))
        cur_idx, cur_start, cur_end, cur_max = [], [], [], 0

    for seq_idx in range(lengths.shape[0]):
        length = int(max_len[seq_idx])
        # RETURNN draws a chunk scale for every sequence, skipped ones too
        pieces = chunk.ranges(length, rng) if chunk else [(0, -1)]
        if skip[seq_idx]:
            continue
        for start, end in pieces:
            piece_len = (end - start) if end >= 0 else length
            new_max = max(cur_max, piece_len)
            if cur_idx and (new_max * (len(cur_idx) + 1) > batch_size or len(cur_idx) >= max_seqs):
                flush()
                new_max = piece_len
            cur_idx.append(seq_idx)
            cur_start.append(start)
            cur_end.append(end)
            cur_max = new_max
    flush()
    return batches


def generate_packed_batches(dataset: Dataset, batch_size: int, max_seqs: int = -1) -> Optional[List[BatchSlices]]:
    """RETURNN's batches for a network whose layers all work frame by frame ("not recurrent"):
    the frames of consecutive sequences are concatenated into one row until it holds exactly
    ``batch_size`` frames (a sequence may continue in the next batch); a batch also ends when it
    holds more than ``max_seqs`` (> 0) sequences. Chunking and ``max_seq_length`` do not apply, as
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
            if frames >= batch_size or len(cur) > max_seqs:
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
    ends = batch.ends.tolist()
    ranges = list(zip(batch.starts.tolist(), ends)) if any(e >= 0 for e in ends) else None  # None: whole sequences
    out: Dict[str, np.ndarray] = {}
    for key in keys:
        pieces = [row[key] for row in rows]
        if ranges is not None:
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
    ``chunking_variance``, ``max_seq_length``, ``prefetch_batches``), and the one way an epoch is
    cut into batches."""

    batch_size: int
    max_seqs: int
    chunking: Any  # of train datasets whose dict sets none
    max_seq_length: Any  # int or {data key: limit}, see too_long()
    prefetch: int
    # RETURNN packs frames when no layer mixes frames (its "non-recurrent" network); the engine
    # sets this for its network. Forwarding always keeps whole sequences.
    pack_frames: bool = False
    eval_batch_size: int = 0  # 0: batch_size (RETURNN's eval_batch_size)
    forward_batch_size: int = 0  # 0: eval_batch_size, else batch_size
    min_chunk_size: Any = 0  # see chunk_ranges()
    chunking_variance: Any = 0.0
    eval_chunking: Any = None  # of dev/eval datasets whose dict sets none (see eval_chunking())

    @classmethod
    def from_config(cls, config) -> "BatchOptions":
        """Reads the options from a :class:`returnn.config.Config` (defaults: returnn/config_keys/)."""
        max_seq_length = config.typed_value("max_seq_length")
        if not isinstance(max_seq_length, dict):
            max_seq_length = int(max_seq_length or 0)
        out = cls(batch_size=config.int("batch_size"), max_seqs=config.int("max_seqs"),
                  chunking=config.typed_value("chunking"), max_seq_length=max_seq_length,
                  prefetch=config.int("prefetch_batches"), eval_batch_size=config.int("eval_batch_size"),
                  forward_batch_size=config.int("forward_batch_size"),
                  min_chunk_size=config.typed_value("min_chunk_size"),
                  chunking_variance=config.typed_value("chunking_variance"), eval_chunking=eval_chunking(config))
        chunk_options(out.chunking, out.min_chunk_size, out.chunking_variance)  # errors now, naming the key
        chunk_options(out.eval_chunking)
        return out

    def for_eval(self) -> "BatchOptions":
        """These options with ``eval_batch_size`` (when set) as the batch size: scoring and search."""
        return replace(self, batch_size=self.eval_batch_size or self.batch_size)

    def for_forward(self) -> "BatchOptions":
        """These options with ``forward_batch_size`` (else ``eval_batch_size``) as the batch size."""
        return replace(self, batch_size=self.forward_batch_size or self.eval_batch_size or self.batch_size)

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
        keys line up) and returns those of ``rank`` out of ``size`` (batch i goes to rank i mod size)."""
        if purpose not in ("train", "eval", "forward"):
            raise ValueError("purpose: expected train, eval or forward, got %r" % (purpose,))
        dataset.init_seq_order(epoch)
        if packed and self.pack_frames:
            batches = generate_packed_batches(dataset, self.batch_size, self.max_seqs)
            if batches is not None:
                return shard_batches(batches, rank, size)
        batches = generate_batches(dataset, self.batch_size, self.max_seqs, self.chunk_options(dataset, purpose),
                                   self.max_seq_length)
        return shard_batches(batches, rank, size)


def eval_chunking(config) -> Any:
    """RETURNN's chunking of dev/eval datasets whose dict sets none: the batch size with
    ``on_size_limit = "chunk"``, ``"1"`` when training is frame-wise (``chunking = "1"``), the
    config's chunking with ``chunk_eval``, else none."""
    if config.value("on_size_limit") == "chunk":
        return config.int("batch_size")
    if str(config.typed_value("chunking")) == "1":
        return "1"
    if config.bool("chunk_eval"):
        return config.typed_value("chunking")
    return None
