"""The sequence-based Dataset API.

A dataset holds ``num_corpus_seqs`` sequences (the corpus). Each epoch, :meth:`Dataset.init_seq_order`
picks the order (``seq_ordering``) and, with ``partition_epoch = P``, the part of that order the
(sub-)epoch uses. Afterwards sequences are addressed by their index ``0 .. num_seqs-1`` in that order.

Subclasses implement the corpus-level methods (``_corpus_*``); choosing and partitioning the
epoch's order lives here, once, and the orders themselves in :mod:`returnn.datasets.ordering`.
"""
from __future__ import annotations

import os
import random
from typing import Any, Dict, List, Optional, Sequence, Tuple, Type

import numpy as np

from returnn.datasets.chunking import chunk_options
from returnn.datasets.integrity import FileStamp, changed_message, stamp_file
from returnn.datasets.options import int_option, optional_int_option, str_option
from returnn.datasets.ordering import check_ordering, compute_seq_order, resolve_ordering, seed_for_epoch
from returnn.datasets.text_files import load_seq_list, parse_literal, read_text
from returnn.errors import DataError, known_list
from returnn.util.numbers_dict import NumbersDict


class DataInfo:
    """What one data key holds: feature dim, sparse (class indices) or dense, dtype, label names."""

    def __init__(self, dim: int, sparse: bool, dtype: str, labels: Optional[List[str]] = None,
                 shape: Optional[Sequence[int]] = None):
        self.dim = int(dim)
        self.sparse = bool(sparse)
        self.dtype = str(np.dtype(dtype))
        self.labels = labels
        # Shape of one frame (without time): () for sparse, (dim,) for dense.
        self.shape = tuple(shape) if shape is not None else (() if sparse else (self.dim,))

    @property
    def ndim(self) -> int:
        """RETURNN's ndim: counts the time axis (1 = sparse indices, 2 = dense (T, dim))."""
        return 1 + len(self.shape)

    def __repr__(self) -> str:
        return "DataInfo(dim=%i, sparse=%s, dtype=%s)" % (self.dim, self.sparse, self.dtype)


class Dataset:
    """Base class. Options are RETURNN's dataset options; unknown ones are an error naming them."""

    # frames added around each batch entry per data key (RETURNN's context_window; the engine sets it on
    # the datasets it cuts batches of: returnn/datasets/context_window.py)
    context_window: Optional[Dict[str, Tuple[int, int]]] = None

    def __init__(self, name: Optional[str] = None, seq_ordering: str = "default", partition_epoch: int = 1,
                 fixed_random_seed: Optional[int] = None, random_seed_offset: int = 0,
                 seq_list_filter_file: Optional[str] = None, estimated_num_seqs: Optional[int] = None,
                 repeat_epoch: int = 1, unique_seq_tags: bool = False, chunking: Any = None,
                 min_chunk_size: Any = None, chunking_variance: Any = None, window: Any = None,
                 context_window: Any = None, shuffle_frames_of_nseqs: Any = None,
                 seq_order_seq_lens_file: Optional[str] = None, **unknown: Any):
        self.name = str(name or self.__class__.__name__)
        self._file_stamps: List[FileStamp] = []  # the files this dataset read, as they were (watch_file)
        if unknown:
            raise DataError("%s: unknown option(s) %s" % (self.describe(), known_list(unknown)))
        owner = self.describe()
        # RETURNN's batching options of a dataset dict; the config's keys are their defaults (None: not set here)
        self.chunk_settings = {key: value for key, value in (("chunking", chunking), ("min_chunk_size", min_chunk_size),
                                                             ("chunking_variance", chunking_variance))
                               if value is not None}
        chunk_options(chunking, min_chunk_size, chunking_variance, owner + ": option")  # checked now
        _check_unsupported(owner, window=window, context_window=context_window,
                           shuffle_frames_of_nseqs=shuffle_frames_of_nseqs)
        # a string, or a function of the epoch giving one (RETURNN allows both)
        self.seq_ordering = seq_ordering if callable(seq_ordering) else \
            str_option(owner, "seq_ordering", seq_ordering or "default")
        if not callable(self.seq_ordering):
            check_ordering(self.seq_ordering, owner)
        self.partition_epoch = int_option(owner, "partition_epoch", partition_epoch or 1, minimum=1)
        self.fixed_random_seed = optional_int_option(owner, "fixed_random_seed", fixed_random_seed)
        self.random_seed_offset = int_option(owner, "random_seed_offset", random_seed_offset or 0)
        optional_int_option(owner, "estimated_num_seqs", estimated_num_seqs, minimum=0)
        # RETURNN's: every (sub-)epoch's order N times in a row; not together with partition_epoch
        self.repeat_epoch = int_option(owner, "repeat_epoch", repeat_epoch or 1, minimum=1)
        if self.repeat_epoch > 1 and self.partition_epoch > 1:
            raise DataError("%s: repeat_epoch and partition_epoch cannot be combined (as in RETURNN)" % owner)
        if not isinstance(unique_seq_tags, (bool, int, np.integer)):
            raise DataError("%s: option 'unique_seq_tags' must be True or False, got %r" % (owner, unique_seq_tags))
        self.unique_seq_tags = bool(unique_seq_tags)  # a tag met again in the epoch's order is left out
        self._tag_filter: Optional[set] = None
        if seq_list_filter_file is not None:
            self.watch_file(str_option(owner, "seq_list_filter_file", seq_list_filter_file))
            tags = load_seq_list(seq_list_filter_file, owner)
            if not isinstance(tags, list):
                raise DataError("%s: seq_list_filter_file must hold a list of sequence tags" % owner)
            self._tag_filter = set(tags)
        # RETURNN's: the lengths the ordering sorts by, {tag: length} from a file (read as a literal, never run)
        self.seq_order_seq_lens_file = None if seq_order_seq_lens_file is None else \
            str_option(owner, "seq_order_seq_lens_file", seq_order_seq_lens_file)
        self._file_lengths: Optional[np.ndarray] = None
        self.epoch: Optional[int] = None
        self._seq_order: np.ndarray = np.zeros((0,), dtype=np.int64)

    def describe(self) -> str:
        """``dataset <name> (<class>)`` for messages."""
        cls = self.__class__.__name__
        return "dataset %s" % cls if self.name == cls else "dataset %s (%s)" % (self.name, cls)

    # ---- the files behind the data (see returnn/datasets/integrity.py)
    def watch_file(self, path: Any) -> None:
        """Records ``path`` as a file this dataset reads; call it *before* reading the file, so a
        change during the read is seen too. A file that cannot be stat'ed is left to the reader."""
        if not isinstance(path, (str, os.PathLike)):
            return
        stamps = self.__dict__.setdefault("_file_stamps", [])
        stamp = stamp_file(os.fspath(path))
        if stamp is not None and all(s.path != stamp.path for s in stamps):
            stamps.append(stamp)

    def sub_datasets(self) -> List["Dataset"]:
        """Datasets this one reads from (their files count as this one's)."""
        return []

    def data_files(self) -> List[str]:
        """Every file this dataset (and its sub-datasets) read, as given."""
        out = [s.path for s in self.__dict__.get("_file_stamps", [])]
        for sub in self.sub_datasets():
            out += [p for p in sub.data_files() if p not in out]
        return out

    def changed_file_message(self) -> Optional[str]:
        """The one-line message for the first file of this dataset (or a sub-dataset) that changed
        since it was read; None while all are as they were."""
        for stamp in self.__dict__.get("_file_stamps", []):
            change = stamp.change()
            if change:
                return changed_message(self.describe(), stamp, change)
        for sub in self.sub_datasets():
            found = sub.changed_file_message()
            if found:
                return found
        return None

    def check_files_unchanged(self) -> None:
        """Raises the DataError of :meth:`changed_file_message`, if any."""
        message = self.changed_file_message()
        if message:
            raise DataError(message)

    def seq_origin(self, corpus_index: int, key: Optional[str] = None) -> str:
        """Where a corpus sequence (of data key ``key``) comes from, for messages (e.g. ``#3 of
        file a.hdf``); empty when there is nothing to say beyond the dataset."""
        return ""

    # ---- to implement in subclasses (corpus level)
    def data_infos(self) -> Dict[str, DataInfo]:
        """Data keys -> :class:`DataInfo`."""
        raise NotImplementedError

    def _corpus_num_seqs(self) -> int:
        raise NotImplementedError

    def _corpus_seq_lengths(self) -> np.ndarray:
        """int array (num_corpus_seqs, len(data_keys)) of lengths, keys in :meth:`get_data_keys` order."""
        raise NotImplementedError

    def _corpus_load(self, corpus_indices: Sequence[int]) -> List[Dict[str, np.ndarray]]:
        """Loads the sequences with the given corpus indices (in that order)."""
        raise NotImplementedError

    def _corpus_tag(self, corpus_index: int) -> str:
        return "seq-%i" % corpus_index

    def _prepare_epoch(self, full_epoch: int) -> None:
        """Hook for datasets that generate data per epoch (called before ordering)."""

    # ---- data description
    def get_data_keys(self) -> List[str]:
        """Data keys, 'data' first, then sorted."""
        keys = list(self.data_infos())
        return sorted(keys, key=lambda k: (k != "data", k))

    def get_data_dim(self, key: str) -> int:
        return self._info(key).dim

    def is_data_sparse(self, key: str) -> bool:
        return self._info(key).sparse

    def get_data_dtype(self, key: str) -> str:
        return self._info(key).dtype

    def get_data_shape(self, key: str) -> tuple:
        """Shape of one frame (without the time axis)."""
        return self._info(key).shape

    @property
    def num_outputs(self) -> Dict[str, List[int]]:
        """RETURNN's ``num_outputs`` form: key -> [dim, ndim]."""
        return {k: [i.dim, i.ndim] for k, i in self.data_infos().items()}

    @property
    def labels(self) -> Dict[str, List[str]]:
        """RETURNN's ``labels``: data key -> its label list (the keys that have one)."""
        return {k: list(i.labels) for k, i in self.data_infos().items() if i.labels}

    def _info(self, key: str) -> DataInfo:
        infos = self.data_infos()
        if key not in infos:
            raise DataError("dataset %s: no data key %r (has: %s)" % (self.name, key, known_list(infos)))
        return infos[key]

    # ---- epoch level
    @property
    def num_corpus_seqs(self) -> int:
        return self._corpus_num_seqs()

    def init_seq_order(self, epoch: int = 1) -> None:
        """Chooses the sequences and their order for ``epoch`` (1-based)."""
        epoch = int(epoch or 1)
        full_epoch = self._full_epoch(epoch)
        self._prepare_epoch(full_epoch)
        order = self.full_epoch_order(full_epoch, epoch)
        if self.unique_seq_tags:
            order = self._first_of_each_tag(order)
        part = (epoch - 1) % self.partition_epoch
        start, end = partition_bounds(len(order), self.partition_epoch, part)
        order = self.apply_tag_filter(order[start:end])
        self._seq_order = np.tile(order, self.repeat_epoch) if self.repeat_epoch > 1 else order
        self.epoch = epoch

    def _first_of_each_tag(self, order: np.ndarray) -> np.ndarray:
        """``order`` without the sequences whose tag came earlier in it (``unique_seq_tags``)."""
        seen: set = set()
        kept = []
        for i in order.tolist():
            tag = self._corpus_tag(i)
            if tag not in seen:
                seen.add(tag)
                kept.append(i)
        return np.array(kept, dtype=np.int64)

    def apply_tag_filter(self, order: np.ndarray) -> np.ndarray:
        """Keeps the sequences whose tags are in ``seq_list_filter_file`` (after partitioning, as
        RETURNN); none left is an error."""
        if self._tag_filter is None:
            return order
        kept = np.array([i for i in order.tolist() if self._corpus_tag(i) in self._tag_filter], dtype=np.int64)
        if len(order) and not len(kept):
            raise DataError("%s: no sequence left after seq_list_filter_file (filter tags e.g. %s; dataset tags "
                            "e.g. %s)" % (self.describe(), sorted(self._tag_filter)[:2],
                                          [self._corpus_tag(i) for i in order[:2].tolist()]))
        return kept

    def epoch_random(self) -> random.Random:
        """RETURNN's random generator of the current epoch (its ``rnd_seq_drop``, e.g. for
        ``chunking_variance``): Python's ``random.Random``, seeded as the epoch's order is."""
        return random.Random(self.random_seed_for_epoch(self._full_epoch(int(self.epoch or 1))))

    def _full_epoch(self, epoch: int) -> int:
        """The full epoch a (sub-)epoch of ``partition_epoch`` belongs to."""
        return (epoch - 1) // self.partition_epoch + 1

    def random_seed_for_epoch(self, full_epoch: int, nth: int = 1) -> int:
        """Seed for generating/shuffling: ``fixed_random_seed`` if set, else the full epoch (in
        blocks of ``nth``) plus ``random_seed_offset``, as RETURNN (:func:`seed_for_epoch`)."""
        return seed_for_epoch(full_epoch, self.fixed_random_seed, self.random_seed_offset, nth)

    def full_epoch_order(self, full_epoch: int, epoch: Optional[int] = None) -> np.ndarray:
        """Corpus indices of a whole (un-partitioned) epoch, in ``seq_ordering`` order; ``epoch``
        (the sub-epoch, default the full epoch's first) is what a ``seq_ordering`` function gets."""
        n = self._corpus_num_seqs()
        epoch = epoch if epoch is not None else (full_epoch - 1) * self.partition_epoch + 1
        ordering = resolve_ordering(self.seq_ordering, epoch, self.describe())
        return compute_seq_order(ordering, n, self._lengths_for_ordering,
                                 lambda nth: self.random_seed_for_epoch(full_epoch, nth), self.name)

    def _lengths_for_ordering(self) -> np.ndarray:
        """What length-based orderings sort by: ``seq_order_seq_lens_file``'s lengths when given
        (they win, as in RETURNN), else :meth:`_ordering_lengths`."""
        if not self.seq_order_seq_lens_file:
            return self._ordering_lengths()
        if self._file_lengths is None:
            self._file_lengths = self._lengths_from_file(self.seq_order_seq_lens_file)
        return self._file_lengths

    def _ordering_lengths(self) -> np.ndarray:
        lengths = np.asarray(self._corpus_seq_lengths())
        return lengths[:, 0] if lengths.ndim == 2 else lengths

    def _lengths_from_file(self, path: str) -> np.ndarray:
        """``seq_order_seq_lens_file``: a dict literal ``{tag: length}`` (gzipped too) -> the
        corpus sequences' lengths; a missing tag or a non-number is a DataError naming the file."""
        what = "%s: seq_order_seq_lens_file" % self.describe()
        self.watch_file(path)
        table = parse_literal(read_text(path, what), path, what, keys="sequence tag")
        if not isinstance(table, dict):
            raise DataError("%s: %s must hold a dict {sequence tag: length}, got a %s" % (what, path, type(table).__name__))
        out = np.zeros(self._corpus_num_seqs(), dtype=np.float64)
        for i in range(len(out)):
            tag = self._corpus_tag(i)
            value = table.get(tag)
            if value is None:
                raise DataError("%s: %s has no length for sequence %r" % (what, path, tag))
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise DataError("%s: %s: length of %r must be a number, got %r" % (what, path, tag, value))
            out[i] = value
        return out

    @property
    def num_seqs(self) -> int:
        """Number of sequences in the current (sub-)epoch."""
        return int(len(self._seq_order))

    def corpus_index(self, seq_idx: int) -> int:
        """Corpus index of the ``seq_idx``-th sequence of the current epoch."""
        return int(self._seq_order[seq_idx])

    @property
    def seq_order(self) -> np.ndarray:
        """Corpus indices of the current epoch in order."""
        return self._seq_order

    def seq_lengths_in_order(self) -> np.ndarray:
        """int array (num_seqs, len(data_keys)): lengths of the epoch's sequences, in order."""
        lengths = np.asarray(self._corpus_seq_lengths(), dtype=np.int64)
        if lengths.ndim == 1:
            lengths = lengths[:, None]
        return lengths[self._seq_order]

    def get_seq_length(self, seq_idx: int) -> NumbersDict:
        """Length per data key of one sequence (a NumbersDict, as RETURNN's; compares equal to a dict)."""
        row = np.asarray(self._corpus_seq_lengths())[self.corpus_index(seq_idx)]
        return NumbersDict(dict(zip(self.get_data_keys(), (int(v) for v in np.atleast_1d(row)))))

    # ---- RETURNN's names, for config code (chunking functions, seq_ordering functions, hooks)
    def is_less_than_num_seqs(self, n: int) -> bool:
        return n < self.num_seqs

    def get_corpus_seq_idx(self, seq_idx: int) -> int:
        return self.corpus_index(seq_idx)

    def have_corpus_seq_idx(self) -> bool:
        return True

    def get_current_epoch(self) -> Optional[int]:
        return self.epoch

    def load_seqs(self, start: int, end: int) -> None:
        """RETURNN's explicit loading; sequences are read on demand here."""

    def initialize(self) -> None:
        """RETURNN's two-step construction; datasets here are ready after ``__init__``."""

    def get_seqs(self, seq_indices: Sequence[int]) -> List[Dict[str, np.ndarray]]:
        """Loads several sequences of the current epoch; datasets batch the reads where they can."""
        return self._corpus_load([self.corpus_index(i) for i in seq_indices])

    def get_data(self, seq_idx: int, key: str) -> np.ndarray:
        """Data of one sequence for one key: (T,) for sparse, (T, dim) for dense."""
        return self.get_seqs([seq_idx])[0][key]

    def get_tag(self, seq_idx: int) -> str:
        """Sequence tag (name) of one sequence."""
        return self._corpus_tag(self.corpus_index(seq_idx))

    def corpus_tags(self) -> List[str]:
        """Tags of all corpus sequences, in corpus order."""
        return [self._corpus_tag(i) for i in range(self.num_corpus_seqs)]

    def close(self) -> None:
        """Releases file handles."""


def _check_unsupported(owner: str, window: Any, context_window: Any, shuffle_frames_of_nseqs: Any) -> None:
    """RETURNN dataset options accepted only at their no-op values here, each refused in one line."""
    if window not in (None, 0, 1):
        raise DataError("%s: option 'window' is supported on the train/dev/eval datasets themselves (or as the "
                        "config key 'window'), not on a dataset inside another one" % owner)
    if context_window not in (None, 0, {}):
        raise DataError("%s: option 'context_window' is supported on the train/dev/eval/search datasets themselves "
                        "(or as the config key 'context_window'), not on a dataset inside another one (RETURNN "
                        "adds the context when it cuts batches, which only the outer dataset does)" % owner)
    if shuffle_frames_of_nseqs not in (None, 0):
        raise DataError("%s: option 'shuffle_frames_of_nseqs' is not supported (RETURNN's own HDF and "
                        "generating datasets do not implement it either)" % owner)


def partition_bounds(n: int, num_parts: int, part: int) -> "tuple[int, int]":
    """[start, end) of part ``part`` when ``n`` sequences are split into ``num_parts`` consecutive
    parts; as in RETURNN, the first ``n % num_parts`` parts get one sequence more."""
    base, extra = divmod(n, num_parts)
    start = part * base + min(part, extra)
    return start, start + base + (1 if part < extra else 0)


DATASET_CLASSES: Dict[str, Type[Dataset]] = {}


def register_dataset(cls: Type[Dataset]) -> Type[Dataset]:
    """Class decorator: makes ``cls`` available as ``{"class": cls.__name__}``."""
    DATASET_CLASSES[cls.__name__] = cls
    return cls
