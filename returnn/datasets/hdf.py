"""HDFDataset: reads RETURNN's HDF layout (see docs/hdf-format.md).

All frames of all sequences of a key are concatenated along axis 0 of one h5py dataset;
``/seqLengths`` marks the boundaries. With ``cache_size = 0`` (default) only per-file offset tables
are held in memory and sequences are sliced from the open files on demand; sequences that are
contiguous in a file are read with one slice per key. ``cache_size > 0`` keeps an LRU cache of
loaded sequences bounded in bytes; ``cache_size = -1`` loads all data into memory at start.

Data keys: ``"data"`` for ``/inputs`` (when present) and one key per ``/targets/data/<key>``. A
file without ``/targets`` has RETURNN's dummy ``classes`` column in ``seqLengths``; as there is no
data for it, it is not exposed as a data key.

The writers (:class:`SimpleHDFWriter`, :func:`dump_dataset_to_hdf`) live in
:mod:`returnn.datasets.hdf_write` and are re-exported here.
"""
from __future__ import annotations

import bisect
import os
from collections import OrderedDict
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from returnn.datasets.base import DataInfo, Dataset, register_dataset
from returnn.datasets.options import size_option
from returnn.errors import DataError
from returnn.datasets.hdf_check import check_hdf_file
from returnn.datasets.integrity import changed_message, stamp_file
from returnn.datasets.hdf_file import (READ_ERRORS, HDFFile, decode_hdf_string, first_line,  # noqa: F401
                                       is_hdf5_file, open_hdf_file, precheck_hdf_file)


@register_dataset
class HDFDataset(Dataset):
    """Reads one or several RETURNN HDF files (concatenated in order)."""

    global_options = ("cache_size",)
    # RETURNN's engine keeps a CachedDataset's batch list while its order stays the same (see BatchOptions.epoch_slices)
    reuses_batch_list = True

    def __init__(self, files: Union[str, Sequence[str]] = (), cache_size: Any = 0,
                 use_cache_manager: bool = False, **kwargs: Any):
        super().__init__(**kwargs)
        if isinstance(files, str):
            files = [f.strip() for f in files.split(",") if f.strip()]
        if not isinstance(files, (list, tuple)) or not all(isinstance(f, (str, os.PathLike)) for f in files):
            raise DataError("%s: option 'files' must be a list of file names, got %r" % (self.describe(), files))
        files = [os.fspath(f) for f in files]
        if not files:
            raise DataError("HDFDataset %s: no 'files' given" % self.name)
        self.files = files
        self.cache_size = size_option(self.describe(), "cache_size", cache_size)
        self._use_cache_manager = bool(use_cache_manager)  # accepted for RETURNN configs; no-op here
        self._files: List[HDFFile] = []
        try:
            for path in files:
                stamp = stamp_file(path)  # before anything reads it: a change from now on is seen
                precheck_hdf_file(path)  # missing, unreadable, not HDF5: said at once
                check_hdf_file(path)  # in a helper process: a crash or hang of libhdf5 becomes an error
                self._files.append(HDFFile(path, stamp=stamp, owner=self.describe()))
                if stamp is not None:
                    self._file_stamps.append(stamp)
                self._check_consistent(self._files[-1])
        except BaseException:
            self.close()
            raise
        first = self._files[0]
        self._infos: Dict[str, DataInfo] = dict(first.infos)
        self._keys = list(first.keys)
        self._file_start_list: List[int] = [0]
        for f in self._files:
            self._file_start_list.append(self._file_start_list[-1] + f.num_seqs)
        self._num_corpus_seqs = self._file_start_list[-1]
        self._lengths = np.concatenate([f.lengths for f in self._files], axis=0)
        for f in self._files:
            f.lengths = None  # the concatenated table is the only copy kept
        self._lru: "OrderedDict[int, Dict[str, np.ndarray]]" = OrderedDict()
        self._lru_bytes = 0
        self._memory: Optional[List[Dict[str, np.ndarray]]] = None
        if self.cache_size < 0:
            self._memory = [{col.key: f.read_all(col) for col in f.columns} for f in self._files]

    def _check_consistent(self, f: HDFFile) -> None:
        first = self._files[0]
        if f is first:
            return
        if f.keys != first.keys:
            raise DataError("HDFDataset: %s has data keys %s, but %s has %s"
                            % (f.path, ", ".join(f.keys), first.path, ", ".join(first.keys)))
        for key in f.keys:
            a, b = first.infos[key], f.infos[key]
            if (a.dim, a.sparse, a.shape, a.dtype) != (b.dim, b.sparse, b.shape, b.dtype):
                raise DataError("HDFDataset: %s: key %r has dim %i (%s, %s, shape %s) but %s has dim %i (%s, %s, shape %s)"
                                % (f.path, key, b.dim, "sparse" if b.sparse else "dense", b.dtype, b.shape,
                                   first.path, a.dim, "sparse" if a.sparse else "dense", a.dtype, a.shape))

    # ---- corpus level
    def data_infos(self) -> Dict[str, DataInfo]:
        return self._infos

    def _corpus_num_seqs(self) -> int:
        return self._num_corpus_seqs

    def _corpus_seq_lengths(self) -> np.ndarray:
        return self._lengths

    def _locate(self, corpus_index: int) -> Tuple[int, int]:
        """(file index, index within that file) of a corpus index."""
        if not 0 <= corpus_index < self._num_corpus_seqs:
            raise DataError("HDFDataset %s: sequence index %i out of range (corpus has %i sequences)"
                            % (self.name, corpus_index, self._num_corpus_seqs))
        file_idx = 0 if len(self._files) == 1 else bisect.bisect_right(self._file_start_list, corpus_index) - 1
        return file_idx, corpus_index - self._file_start_list[file_idx]

    def _corpus_tag(self, corpus_index: int) -> str:
        self._check_open()
        file_idx, local = self._locate(int(corpus_index))
        return self._files[file_idx].tag(local)

    def seq_origin(self, corpus_index: int, key: Optional[str] = None) -> str:
        file_idx, local = self._locate(int(corpus_index))
        return "#%i of file %s" % (local, self._files[file_idx].path)

    def _check_open(self) -> None:
        if not self._files:
            raise DataError("HDFDataset %s: dataset is closed" % self.name)

    def _corpus_load(self, corpus_indices: Sequence[int]) -> List[Dict[str, np.ndarray]]:
        idx = [int(i) for i in corpus_indices]
        self._check_open()
        if self._memory is not None:
            return [self._load_from_memory(i) for i in idx]
        if self.cache_size <= 0:
            loaded = self._load_streaming(idx)
            return [loaded[i] for i in idx]
        result: Dict[int, Dict[str, np.ndarray]] = {}
        missing = []
        for i in idx:
            hit = self._lru.get(i)
            if hit is not None:
                self._lru.move_to_end(i)
                result[i] = {k: v.copy() for k, v in hit.items()}
            elif i not in result:
                missing.append(i)
        if missing:
            for i, seq in self._load_streaming(missing).items():
                result[i] = seq
                self._cache_put(i, seq)
        return [result[i] for i in idx]

    def _load_from_memory(self, corpus_index: int) -> Dict[str, np.ndarray]:
        file_idx, local = self._locate(corpus_index)
        f, arrays = self._files[file_idx], self._memory[file_idx]
        return {c.key: arrays[c.key][c.offsets.item(local):c.offsets.item(local + 1)].copy() for c in f.columns}

    def _cache_put(self, corpus_index: int, seq: Dict[str, np.ndarray]) -> None:
        size = sum(v.nbytes for v in seq.values())
        if size > self.cache_size or corpus_index in self._lru:
            return
        self._lru[corpus_index] = {k: v.copy() for k, v in seq.items()}
        self._lru_bytes += size
        while self._lru_bytes > self.cache_size and self._lru:
            _, old = self._lru.popitem(last=False)
            self._lru_bytes -= sum(v.nbytes for v in old.values())

    def _load_streaming(self, idx: List[int]) -> Dict[int, Dict[str, np.ndarray]]:
        """Reads the given corpus indices. Sequences that are contiguous in one file (after
        sorting) are read with one slice per key. Plain Python: batches are small and the per-
        sequence overhead must stay small next to h5py's own."""
        uniq = sorted(set(idx))
        out: Dict[int, Dict[str, np.ndarray]] = {}
        if uniq and not (0 <= uniq[0] and uniq[-1] < self._num_corpus_seqs):
            self._locate(uniq[0] if uniq[0] < 0 else uniq[-1])  # raises the DataError
        starts, single = self._file_start_list, len(self._files) == 1
        pos, count = 0, len(uniq)
        f: Optional[HDFFile] = None
        touched: List[HDFFile] = []
        try:
            while pos < count:
                corpus_idx = uniq[pos]
                file_idx = 0 if single else bisect.bisect_right(starts, corpus_idx) - 1
                f = self._files[file_idx]
                if not touched or touched[-1] is not f:
                    touched.append(f)
                first = corpus_idx - starts[file_idx]
                end, limit = pos + 1, starts[file_idx + 1]
                while end < count and uniq[end] == uniq[end - 1] + 1 and uniq[end] < limit:
                    end += 1
                if end == pos + 1:
                    out[corpus_idx] = f.read_seq(first)
                else:
                    per_key = f.read_seqs(first, first + (end - pos - 1))
                    for j in range(end - pos):
                        out[uniq[pos + j]] = {col.key: parts[j] for col, parts in zip(f.columns, per_key)}
                pos = end
        except READ_ERRORS as exc:
            for g in touched:
                g.check_unchanged()  # a file changed under us is named as that, not as corrupt
            raise DataError("HDFDataset: %s: reading sequence data failed: %s"
                            % (f.path if f is not None else self.files, first_line(exc)))
        except DataError:
            for g in touched:
                g.check_unchanged()
            raise
        for g in touched:  # (in file order, each once)
            g.check_unchanged()  # after the read: what was read came from the file as it was opened
        return out

    # ---- extras
    def get_all_tags(self) -> List[str]:
        """Tags of all corpus sequences, in corpus order."""
        self._check_open()
        return [f.tag(i) for f in self._files for i in range(f.num_seqs)]

    corpus_tags = get_all_tags

    def close(self) -> None:
        """Closes all file handles and drops caches."""
        for f in self._files:
            f.close()
        self._files = []
        self._lru = OrderedDict()
        self._lru_bytes = 0
        self._memory = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # pragma: no cover
            pass


# The writers, re-exported so ``from returnn.datasets.hdf import SimpleHDFWriter`` works.
from returnn.datasets.hdf_write import SimpleHDFWriter, dump_dataset_to_hdf  # noqa: E402,F401
