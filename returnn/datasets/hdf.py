"""HDFDataset: reads RETURNN's HDF layout (see ``/work/shared/HDF_FORMAT.md``).

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
from returnn.errors import DataError
from returnn.util.basic import parse_size

try:
    import h5py
except ImportError:  # pragma: no cover - h5py is a dependency
    h5py = None

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def decode_hdf_string(value: Any) -> str:
    """Decodes one HDF string (bytes or str) as UTF-8 and cuts it at the first NUL."""
    if isinstance(value, str):
        return value.split("\0", 1)[0]
    raw = bytes(value)
    return raw.split(b"\0", 1)[0].decode("utf8", errors="replace")


def is_hdf5_file(path: str) -> bool:
    """Whether ``path`` starts with the HDF5 signature (at offset 0, 512, 1024, ...)."""
    try:
        with open(path, "rb") as f:
            offset = 0
            while True:
                f.seek(offset)
                head = f.read(8)
                if len(head) < 8:
                    return False
                if head == HDF5_SIGNATURE:
                    return True
                offset = 512 if offset == 0 else offset * 2
    except OSError:
        return False


def open_hdf_file(path: str, what: str = "HDFDataset", **h5_options: Any) -> "h5py.File":
    """Opens an HDF5 file for reading (``h5_options`` go to ``h5py.File``, e.g. ``rdcc_nbytes``);
    problems are a DataError naming the file."""
    if h5py is None:  # pragma: no cover
        raise DataError("%s: h5py is not installed, cannot read %s" % (what, path))
    if not os.path.exists(path):
        raise DataError("%s: file not found: %s" % (what, path))
    if os.path.isdir(path):
        raise DataError("%s: %s is a directory, not an HDF file" % (what, path))
    try:
        return h5py.File(path, "r", **h5_options)
    except OSError as exc:
        if not is_hdf5_file(path):
            raise DataError("%s: %s is not an HDF5 file" % (what, path))
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DataError("%s: cannot open %s (truncated or corrupt HDF file?): %s" % (what, path, detail))


def _read_strings(h5: "h5py.File", name: str, path: str) -> List[str]:
    """Reads a 1-D string dataset (fixed bytes or variable-length) as a list of str."""
    try:
        raw = h5[name][...]
    except (OSError, KeyError, ValueError) as exc:
        raise DataError("HDFDataset: %s: cannot read %r: %s" % (path, name, exc))
    if raw.ndim == 2:  # one character per column
        return [decode_hdf_string(b"".join(bytes(c) for c in row)) for row in raw]
    return [decode_hdf_string(v) for v in raw.reshape(-1)]


def _read_rows(ds: "h5py.Dataset", start: int, end: int) -> np.ndarray:
    """Reads ``ds[start:end]`` in one HDF5 read (h5py's fast path for simple slices)."""
    return ds[start:end]


class _HDFFile:
    """One open HDF file: its data infos, h5py datasets per key and offset tables."""

    def __init__(self, path: str):
        self.path = path
        # Without a chunk cache, HDF5 reads just the requested rows of unfiltered chunks instead of
        # whole chunks: random access gets about twice as fast. Compressed data needs the cache.
        self.h5 = open_hdf_file(path, rdcc_nbytes=0)
        try:
            if self._has_filters():
                self.h5.close()
                self.h5 = open_hdf_file(path, rdcc_nbytes=16 << 20)
            self._init_index()
        except DataError:
            self.close()
            raise
        except (OSError, KeyError, ValueError, TypeError) as exc:
            self.close()
            raise DataError("HDFDataset: %s: unreadable file structure: %s" % (path, str(exc).splitlines()[0]))
        self._tags: Optional[np.ndarray] = None

    def _has_filters(self) -> bool:
        """Whether a frames dataset is stored with filters (compression, shuffle, ...)."""
        names = ["inputs"] if "inputs" in self.h5 else []
        if "targets/data" in self.h5:
            names += ["targets/data/" + k for k in self.h5["targets/data"]]
        for name in names:
            obj = self.h5[name]
            if isinstance(obj, h5py.Dataset) and obj.chunks is not None \
                    and obj.id.get_create_plist().get_nfilters() > 0:
                return True
        return False

    def _init_index(self) -> None:
        h5, path = self.h5, self.path
        if "seqLengths" not in h5:
            raise DataError("HDFDataset: %s: no 'seqLengths' dataset (not a RETURNN HDF file?)" % path)
        lengths = np.asarray(h5["seqLengths"][...])
        has_inputs = "inputs" in h5
        has_targets = "targets" in h5
        targets = h5["targets"] if has_targets else None
        target_data = targets["data"] if targets is not None and "data" in targets else None
        target_size = targets["size"] if targets is not None and "size" in targets else None
        if has_targets:
            target_keys = sorted(set(target_data.keys() if target_data is not None else ())
                                 | set(target_size.attrs.keys() if target_size is not None else ()))
        else:
            target_keys = ["classes"]  # RETURNN's dummy key; no data behind it
        expected = ["data"] + target_keys
        if lengths.ndim == 1:
            lengths = np.repeat(lengths[:, None], len(expected), axis=1)
        if lengths.ndim != 2:
            raise DataError("HDFDataset: %s: 'seqLengths' must be 2-D, has shape %s" % (path, lengths.shape))
        n_cols = lengths.shape[1]
        if n_cols == len(expected):
            columns = expected
        elif not has_inputs and n_cols == len(target_keys):
            columns = target_keys
        elif not has_targets and n_cols == 1:
            columns = ["data"]
        else:
            raise DataError("HDFDataset: %s: 'seqLengths' has %i columns, expected %i (inputs + targets %s)"
                            % (path, n_cols, len(expected), ", ".join(target_keys)))
        if lengths.size and lengths.min() < 0:
            raise DataError("HDFDataset: %s: negative sequence length in 'seqLengths'" % path)
        self.num_seqs = int(lengths.shape[0])
        self.datasets: Dict[str, h5py.Dataset] = {}
        self.infos: Dict[str, DataInfo] = {}
        if has_inputs:
            self.datasets["data"] = h5["inputs"]
            self.infos["data"] = self._input_info(h5["inputs"])
        for key in target_keys:
            if target_data is not None and key in target_data:
                self.datasets[key] = target_data[key]
                self.infos[key] = self._target_info(key, target_data[key], target_size)
        self.keys = sorted(self.datasets, key=lambda k: (k != "data", k))
        self.lengths = np.zeros((self.num_seqs, len(self.keys)), dtype=np.int32)
        self.offsets: Dict[str, np.ndarray] = {}
        for i, key in enumerate(self.keys):
            col = lengths[:, columns.index(key)].astype(np.int64)
            self.lengths[:, i] = col
            offsets = np.zeros(self.num_seqs + 1, dtype=np.int64)
            np.cumsum(col, out=offsets[1:])
            frames = int(self.datasets[key].shape[0]) if self.datasets[key].ndim else 0
            if offsets[-1] > frames:
                raise DataError("HDFDataset: %s: key %r has %i frames but 'seqLengths' sums to %i "
                                "(truncated or inconsistent file)" % (path, key, frames, offsets[-1]))
            self.offsets[key] = offsets
        # (key, h5py dataset, offsets) in data key order: what the read loop iterates over.
        self.columns: List[Tuple[str, "h5py.Dataset", np.ndarray]] = [
            (key, self.datasets[key], self.offsets[key]) for key in self.keys]

    def _labels(self, name: str) -> Optional[List[str]]:
        if name not in self.h5:
            return None
        labels = _read_strings(self.h5, name, self.path)
        return labels or None

    def _input_info(self, ds: "h5py.Dataset") -> DataInfo:
        labels = self._labels("labels")
        sparse = ds.ndim == 1 and ds.dtype.kind in "iu"
        if sparse:
            if "inputPattSize" in self.h5.attrs:
                dim = int(np.asarray(self.h5.attrs["inputPattSize"]).reshape(-1)[0])
            elif labels:
                dim = len(labels)
            else:
                raise DataError("HDFDataset: %s: sparse '/inputs' but no 'inputPattSize' attribute" % self.path)
        else:
            dim = int(ds.shape[-1]) if ds.ndim >= 2 else 1
        return DataInfo(dim, sparse, str(ds.dtype), labels=labels, shape=() if ds.ndim <= 1 else ds.shape[1:])

    def _target_info(self, key: str, ds: "h5py.Dataset", size: Optional["h5py.Group"]) -> DataInfo:
        labels = self._labels("targets/labels/%s" % key)
        sparse = ds.ndim == 1 and ds.dtype.kind in "iu"
        dim: Optional[int] = None
        if size is not None and key in size.attrs:
            dim = int(np.asarray(size.attrs[key]).reshape(-1)[0])
        if dim is None:
            if not sparse:
                dim = int(ds.shape[-1]) if ds.ndim >= 2 else 1
            elif labels:
                dim = len(labels)
            else:
                raise DataError("HDFDataset: %s: sparse target %r has no '/targets/size' attribute" % (self.path, key))
        return DataInfo(dim, sparse, str(ds.dtype), labels=labels, shape=() if ds.ndim <= 1 else ds.shape[1:])

    def tag(self, local_idx: int) -> str:
        """Tag of one sequence; all tags of the file are read on first use and kept as bytes."""
        if self._tags is None:
            self._tags = self._read_tags()
        return decode_hdf_string(self._tags[local_idx])

    def _read_tags(self) -> np.ndarray:
        if "seqTags" not in self.h5:
            return np.array([b"seq-%i" % i for i in range(self.num_seqs)])
        try:
            raw = self.h5["seqTags"][...]
        except (OSError, ValueError) as exc:
            raise DataError("HDFDataset: %s: cannot read 'seqTags': %s" % (self.path, exc))
        if raw.ndim == 1 and raw.dtype.kind == "S":
            tags = raw
        elif raw.ndim == 1 and raw.dtype.kind == "O":
            tags = np.array([v.encode("utf8") if isinstance(v, str) else bytes(v) for v in raw.tolist()], dtype=bytes)
        else:
            tags = np.array([t.encode("utf8") for t in _read_strings(self.h5, "seqTags", self.path)], dtype=bytes)
        if len(tags) < self.num_seqs:
            raise DataError("HDFDataset: %s: 'seqTags' has %i entries for %i sequences"
                            % (self.path, len(tags), self.num_seqs))
        return tags

    def read_all(self, key: str) -> np.ndarray:
        """All frames of ``key`` that belong to sequences."""
        return _read_rows(self.datasets[key], 0, int(self.offsets[key][-1]))

    def close(self) -> None:
        """Closes the h5py file."""
        try:
            self.h5.close()
        except Exception:  # pragma: no cover - closing twice or after interpreter teardown
            pass


@register_dataset
class HDFDataset(Dataset):
    """Reads one or several RETURNN HDF files (concatenated in order)."""

    global_options = ("cache_size",)

    def __init__(self, files: Union[str, Sequence[str]] = (), cache_size: Any = 0,
                 use_cache_manager: bool = False, **kwargs: Any):
        super().__init__(**kwargs)
        if isinstance(files, str):
            files = [f.strip() for f in files.split(",") if f.strip()]
        files = [os.fspath(f) for f in files]
        if not files:
            raise DataError("HDFDataset %s: no 'files' given" % self.name)
        self.files = files
        self.cache_size = parse_size(cache_size if cache_size is not None else 0)
        self._use_cache_manager = bool(use_cache_manager)  # accepted for RETURNN configs; no-op here
        self._files: List[_HDFFile] = []
        try:
            for path in files:
                self._files.append(_HDFFile(path))
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
            self._memory = [{k: f.read_all(k) for k in f.keys} for f in self._files]

    def _check_consistent(self, f: _HDFFile) -> None:
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
        return {k: arrays[k][f.offsets[k].item(local):f.offsets[k].item(local + 1)].copy() for k in self._keys}

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
        f: Optional[_HDFFile] = None
        try:
            while pos < count:
                corpus_idx = uniq[pos]
                file_idx = 0 if single else bisect.bisect_right(starts, corpus_idx) - 1
                f = self._files[file_idx]
                first = corpus_idx - starts[file_idx]
                end, limit = pos + 1, starts[file_idx + 1]
                while end < count and uniq[end] == uniq[end - 1] + 1 and uniq[end] < limit:
                    end += 1
                if end == pos + 1:  # a single sequence (the common case in random order)
                    out[corpus_idx] = {key: ds[offsets.item(first):offsets.item(first + 1)]
                                       for key, ds, offsets in f.columns}
                else:
                    last = first + (end - pos - 1)
                    per_key = []
                    for key, ds, offsets in f.columns:
                        start = offsets.item(first)
                        block = ds[start:offsets.item(last + 1)]
                        per_key.append(np.split(block, offsets[first + 1:last + 1] - start))
                    for j in range(end - pos):
                        out[uniq[pos + j]] = {col[0]: parts[j] for col, parts in zip(f.columns, per_key)}
                pos = end
        except (OSError, ValueError, KeyError, RuntimeError) as exc:
            raise DataError("HDFDataset: %s: reading sequence data failed: %s"
                            % (f.path if f is not None else self.files, str(exc).splitlines()[0] if str(exc) else exc))
        return out

    # ---- extras
    def get_all_tags(self) -> List[str]:
        """Tags of all corpus sequences, in corpus order."""
        return [f.tag(i) for f in self._files for i in range(f.num_seqs)]

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
