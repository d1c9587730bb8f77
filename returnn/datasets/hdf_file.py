"""One RETURNN-layout HDF file opened for reading (see docs/hdf-format.md).

:class:`HDFFile` checks the file's structure when it opens it, so a damaged or foreign file is one
:class:`DataError` naming the file and the object, never a traceback:

* ``/seqLengths``, ``/inputs``, ``/targets/data/<key>`` must be datasets (not groups) of integer
  or float dtype; the declared sizes must fit in the file (a flipped byte that claims terabytes is
  reported, not allocated).
* Any integer dtype of 1-D frames is sparse and read as int32; any float dtype, and integer frames
  with a feature axis, are dense and read as float32 (1-D floats get a feature axis of 1). That is
  what the compiled step takes. Class indices outside ``[0, dim)`` are an error naming file, key
  and sequence.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from returnn.datasets.base import DataInfo
from returnn.datasets.integrity import FileStamp, changed_message, stamp_file
from returnn.errors import DataError

try:
    import h5py
except ImportError:  # pragma: no cover - h5py is a dependency
    h5py = None

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
# What h5py/numpy raise on damaged files (besides the checks below).
READ_ERRORS = (OSError, KeyError, ValueError, TypeError, RuntimeError, IndexError, OverflowError,
               NotImplementedError, MemoryError)
SPARSE_DTYPE = np.dtype("int32")
DENSE_DTYPE = np.dtype("float32")
_MAX_DIM = 2 ** 31 - 1


def first_line(exc: BaseException) -> str:
    """The first line of an exception's text (or its type name)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def decode_hdf_string(value: Any) -> str:
    """Decodes one HDF string (bytes or str) and cuts it at the first NUL (HDF5's end of a
    null-terminated string, as RETURNN reads tags). Losslessly: bytes that are not UTF-8 become
    surrogate escapes (``errors="surrogateescape"``), so different bytes always give different
    text, and :func:`encode_hdf_string` gives the bytes back."""
    if isinstance(value, str):
        return value.split("\0", 1)[0]
    raw = bytes(value)
    return raw.split(b"\0", 1)[0].decode("utf8", errors="surrogateescape")


def encode_hdf_string(text: Any) -> bytes:
    """The bytes of a string read by :func:`decode_hdf_string` (its inverse)."""
    if isinstance(text, (bytes, np.bytes_)):
        return bytes(text)
    return str(text).encode("utf8", errors="surrogateescape")


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
    precheck_hdf_file(path, what)
    try:
        return h5py.File(path, "r", **h5_options)
    except READ_ERRORS as exc:
        raise DataError("%s: cannot open %s (truncated or corrupt HDF file?): %s" % (what, path, first_line(exc)))


def precheck_hdf_file(path: str, what: str = "HDFDataset") -> None:
    """What can be said without the HDF5 library: missing, a directory, unreadable, no HDF5
    signature."""
    if not os.path.exists(path):
        raise DataError("%s: file not found: %s" % (what, path))
    if os.path.isdir(path):
        raise DataError("%s: %s is a directory, not an HDF file" % (what, path))
    if not os.path.isfile(path):
        raise DataError("%s: %s is not a regular file" % (what, path))
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise DataError("%s: cannot read %s: %s" % (what, path, exc.strerror or first_line(exc)))
    if not is_hdf5_file(path):
        raise DataError("%s: %s is not an HDF5 file" % (what, path))


class Column:
    """How one data key is read: the h5py dataset, its per-sequence offsets, and the conversion
    to what the engine takes (dtype, frame shape, class index bound)."""

    __slots__ = ("key", "ds", "offsets", "dtype", "frame_shape", "bound", "unsigned", "needs_fix")

    def __init__(self, key: str, ds: "h5py.Dataset", offsets: np.ndarray, dtype: np.dtype,
                 frame_shape: Optional[Tuple[int, ...]], bound: Optional[int]):
        self.key, self.ds, self.offsets = key, ds, offsets
        self.dtype = dtype
        self.frame_shape = frame_shape  # None: keep the stored shape
        self.bound = bound  # sparse: class indices must be in [0, bound)
        # Range check in one pass: viewed as unsigned, a negative index is huge, so max() < bound
        # covers both ends. Booleans are always in range of a dim >= 2.
        kind = ds.dtype.kind
        if bound is None or (kind == "b" and bound >= 2):
            self.bound = None
        self.unsigned = np.dtype("u%i" % ds.dtype.itemsize) if kind in "iu" else None
        self.needs_fix = self.bound is not None or ds.dtype != dtype or frame_shape is not None

    def read(self, first: int, last: int, tag: Callable[[int], str], path: str) -> np.ndarray:
        """Frames of the file's sequences ``first..last`` (inclusive), converted and checked."""
        start = self.offsets.item(first)
        try:
            block = self.ds[start:self.offsets.item(last + 1)]
        except READ_ERRORS as exc:
            raise DataError("HDFDataset: %s: reading key %r failed (corrupt file?): %s" % (path, self.key, first_line(exc)))
        return self.fix(block, start, tag, path) if self.needs_fix else block

    def fix(self, block: np.ndarray, start: int, tag: Callable[[int], str], path: str) -> np.ndarray:
        """Converts rows read from frame ``start`` on; checks class indices."""
        if self.bound is not None and block.size and (
                block.view(self.unsigned).max() >= self.bound if self.unsigned is not None
                else block.min() < 0 or block.max() >= self.bound):
            bad = int(np.flatnonzero((block < 0) | (block >= self.bound))[0])
            seq = int(np.searchsorted(self.offsets, start + bad, side="right")) - 1
            raise DataError("HDFDataset: %s: key %r, sequence %s: class index %i outside [0, %i) (dim of %r)"
                            % (path, self.key, tag(seq), int(block[bad]), self.bound, self.key))
        if block.dtype != self.dtype:
            block = block.astype(self.dtype)
        if self.frame_shape is not None:
            block = block.reshape((-1,) + self.frame_shape)
        return block


class HDFFile:
    """One open HDF file: data infos, a :class:`Column` per key, lengths and tags."""

    def __init__(self, path: str, stamp: Optional[FileStamp] = None, owner: str = "HDFDataset"):
        self.path = path
        self.owner = owner
        # the file as it was before it was opened (returnn/datasets/integrity.py)
        self.stamp = stamp if stamp is not None else stamp_file(path)
        self._tags: Optional[np.ndarray] = None
        # Without a chunk cache, HDF5 reads just the requested rows of unfiltered chunks instead of
        # whole chunks: random access gets about twice as fast. Compressed data needs the cache.
        self.h5 = open_hdf_file(path, rdcc_nbytes=0)
        self.size = os.path.getsize(path)
        try:
            if self._has_filters():
                self.h5.close()
                self.h5 = open_hdf_file(path, rdcc_nbytes=16 << 20)
            self._init_index()
        except DataError:
            self.close()
            raise
        except READ_ERRORS as exc:
            self.close()
            raise DataError("HDFDataset: %s: unreadable file structure: %s" % (path, first_line(exc)))

    def check_unchanged(self) -> None:
        """A DataError when the file is no longer what was opened (truncated, rewritten, replaced)."""
        change = self.stamp.change() if self.stamp is not None else None
        if change:
            raise DataError(changed_message(self.owner, self.stamp, change))

    # ---- structure checks
    def _error(self, text: str) -> DataError:
        return DataError("HDFDataset: %s: %s" % (self.path, text))

    def _dataset(self, name: str) -> "h5py.Dataset":
        obj = self.h5[name]
        if not isinstance(obj, h5py.Dataset):
            raise self._error("'/%s' is a %s, expected a dataset" % (name, _kind(obj)))
        return obj

    def _group(self, name: str) -> Optional["h5py.Group"]:
        if name not in self.h5:
            return None
        obj = self.h5[name]
        if not isinstance(obj, h5py.Group):
            raise self._error("'/%s' is a %s, expected a group" % (name, _kind(obj)))
        return obj

    def _check_size(self, ds: "h5py.Dataset", name: str, rows: Optional[int] = None) -> None:
        """Refuses to read more bytes than the file can hold (``rows`` of ``ds``, default all)."""
        row_items = int(np.prod(ds.shape[1:], dtype=np.float64)) if ds.ndim > 1 else 1
        num_rows = (ds.shape[0] if ds.ndim else 1) if rows is None else rows
        nbytes = float(num_rows) * row_items * ds.dtype.itemsize
        filtered = ds.chunks is not None and ds.id.get_create_plist().get_nfilters() > 0
        limit = (1000.0 if filtered else 2.0) * self.size + (1 << 20)
        if nbytes > limit:
            raise self._error("'/%s' declares %.0f bytes of data but the file has %i bytes (corrupt file?)"
                              % (name, nbytes, self.size))

    def _frames(self, name: str) -> "h5py.Dataset":
        ds = self._dataset(name)
        if ds.ndim < 1:
            raise self._error("'/%s' is a scalar, expected frames (frames[, dim])" % name)
        if ds.dtype.kind not in "iubf":
            raise self._error("'/%s' has dtype %s, expected integers (sparse) or floats (dense)" % (name, ds.dtype))
        return ds

    def _has_filters(self) -> bool:
        """Whether a frames dataset is stored with filters (compression, shuffle, ...)."""
        names = ["inputs"] if "inputs" in self.h5 else []
        data = self._group("targets/data") if self._group("targets") is not None else None
        if data is not None:
            names += ["targets/data/" + k for k in data]
        for name in names:
            obj = self.h5[name]
            if isinstance(obj, h5py.Dataset) and obj.chunks is not None \
                    and obj.id.get_create_plist().get_nfilters() > 0:
                return True
        return False

    def _read_lengths(self) -> np.ndarray:
        if "seqLengths" not in self.h5:
            raise self._error("no 'seqLengths' dataset (not a RETURNN HDF file?)")
        ds = self._dataset("seqLengths")
        if ds.dtype.kind not in "iu":
            raise self._error("'seqLengths' has dtype %s, expected integers" % ds.dtype)
        if ds.ndim not in (1, 2):
            raise self._error("'seqLengths' must be 2-D, has shape %s" % (ds.shape,))
        self._check_size(ds, "seqLengths")
        lengths = np.asarray(ds[...])
        if lengths.size and lengths.min() < 0:
            raise self._error("negative sequence length in 'seqLengths'")
        if lengths.size and lengths.max() > _MAX_DIM:
            raise self._error("sequence length %i in 'seqLengths' is implausible (corrupt file?)" % lengths.max())
        return lengths.astype(np.int64)

    # ---- index
    def _init_index(self) -> None:
        lengths = self._read_lengths()
        has_inputs = "inputs" in self.h5
        targets = self._group("targets")
        target_data = self._group("targets/data") if targets is not None else None
        target_size = self._group("targets/size") if targets is not None else None
        if targets is not None:
            target_keys = sorted(set(target_data.keys() if target_data is not None else ())
                                 | set(target_size.attrs.keys() if target_size is not None else ()))
        else:
            target_keys = ["classes"]  # RETURNN's dummy key; no data behind it
        expected = ["data"] + target_keys
        if lengths.ndim == 1:
            lengths = np.repeat(lengths[:, None], len(expected), axis=1)
        n_cols = lengths.shape[1]
        if n_cols == len(expected):
            columns = expected
        elif not has_inputs and n_cols == len(target_keys):
            columns = target_keys
        elif targets is None and n_cols == 1:
            columns = ["data"]
        else:
            raise self._error("'seqLengths' has %i columns, expected %i (inputs + targets %s)"
                              % (n_cols, len(expected), ", ".join(target_keys)))
        self.num_seqs = int(lengths.shape[0])
        datasets: Dict[str, "h5py.Dataset"] = {}
        self.infos: Dict[str, DataInfo] = {}
        if has_inputs:
            datasets["data"] = self._frames("inputs")
            self.infos["data"] = self._input_info(datasets["data"])
        for key in target_keys:
            if target_data is not None and key in target_data:
                datasets[key] = self._frames("targets/data/" + key)
                self.infos[key] = self._target_info(key, datasets[key], target_size)
        self.keys = sorted(datasets, key=lambda k: (k != "data", k))
        self.lengths = np.zeros((self.num_seqs, len(self.keys)), dtype=np.int32)
        # Column objects in data key order: what the read loop iterates over.
        self.columns: List[Column] = []
        for i, key in enumerate(self.keys):
            col = lengths[:, columns.index(key)]
            self.lengths[:, i] = col
            offsets = np.zeros(self.num_seqs + 1, dtype=np.int64)
            np.cumsum(col, out=offsets[1:])
            ds, name = datasets[key], ("inputs" if key == "data" else "targets/data/" + key)
            if offsets[-1] > ds.shape[0]:
                raise self._error("key %r has %i frames but 'seqLengths' sums to %i (truncated or inconsistent file)"
                                  % (key, ds.shape[0], offsets[-1]))
            self._check_size(ds, name, rows=int(offsets[-1]))
            info = self.infos[key]
            frame_shape = info.shape if ds.ndim == 1 and not info.sparse else None
            self.columns.append(Column(key, ds, offsets, np.dtype(info.dtype), frame_shape,
                                       info.dim if info.sparse else None))

    def _labels(self, name: str) -> Optional[List[str]]:
        if name not in self.h5:
            return None
        ds = self._dataset(name)
        self._check_size(ds, name)
        labels = read_strings(ds, name, self.path)
        return labels or None

    def _dim_attr(self, value: Any, what: str) -> int:
        try:
            dim = int(np.asarray(value).reshape(-1)[0])
        except READ_ERRORS:
            raise self._error("%s must be an integer dim, got %r" % (what, value))
        if not 0 < dim <= _MAX_DIM:
            raise self._error("%s is %i, expected a dim in [1, 2**31)" % (what, dim))
        return dim

    def _info(self, ds: "h5py.Dataset", labels: Optional[List[str]], sparse_dim: Callable[[], Optional[int]],
              what: str) -> DataInfo:
        """Sparse (int32 class indices) when ``ds`` is 1-D integers, else dense float32."""
        if ds.ndim == 1 and ds.dtype.kind in "iub":
            dim = sparse_dim() or (len(labels) if labels else None)
            if dim is None:
                raise self._error("sparse %s has no dim (%s)" % (what, "no '/targets/size' attribute"
                                                                 if what != "'/inputs'" else "no 'inputPattSize'"))
            return DataInfo(dim, True, SPARSE_DTYPE.name, labels=labels, shape=())
        shape = tuple(int(d) for d in ds.shape[1:]) or (1,)
        if shape[-1] < 1:
            raise self._error("dense %s has feature dim 0" % what)
        return DataInfo(shape[-1], False, DENSE_DTYPE.name, labels=labels, shape=shape)

    def _input_info(self, ds: "h5py.Dataset") -> DataInfo:
        attrs = self.h5.attrs
        return self._info(ds, self._labels("labels"), lambda: self._dim_attr(attrs["inputPattSize"], "'inputPattSize'")
                          if "inputPattSize" in attrs else None, "'/inputs'")

    def _target_info(self, key: str, ds: "h5py.Dataset", size: Optional["h5py.Group"]) -> DataInfo:
        labels = self._labels("targets/labels/%s" % key) if self._group("targets/labels") is not None else None
        return self._info(ds, labels, lambda: self._dim_attr(size.attrs[key], "'/targets/size' of %r" % key)
                          if size is not None and key in size.attrs else None, "target %r" % key)

    # ---- reading
    def tag(self, local_idx: int) -> str:
        """Tag of one sequence; all tags of the file are read on first use and kept as bytes."""
        if self._tags is None:
            try:
                self._tags = self._read_tags()
            except DataError:
                self.check_unchanged()
                raise
            self.check_unchanged()
        return decode_hdf_string(self._tags[local_idx])

    def _read_tags(self) -> np.ndarray:
        try:
            if "seqTags" not in self.h5:
                return np.array([b"seq-%i" % i for i in range(self.num_seqs)])
            ds = self._dataset("seqTags")
            self._check_size(ds, "seqTags")
            if ds.dtype.kind not in "SOUa" and not h5py.check_string_dtype(ds.dtype):
                raise self._error("'seqTags' has dtype %s, expected strings" % ds.dtype)
            raw = ds[...]
            if raw.ndim == 1 and raw.dtype.kind == "S":
                tags = raw
            elif raw.ndim == 1 and raw.dtype.kind == "O":
                tags = np.array([encode_hdf_string(v) for v in raw.tolist()], dtype=bytes)
            else:
                tags = np.array([encode_hdf_string(t) for t in read_strings(ds, "seqTags", self.path)], dtype=bytes)
        except READ_ERRORS as exc:
            raise self._error("cannot read 'seqTags': %s" % first_line(exc))
        if len(tags) < self.num_seqs:
            raise self._error("'seqTags' has %i entries for %i sequences" % (len(tags), self.num_seqs))
        return tags

    def safe_tag(self, local_idx: int) -> str:
        """``'tag' (#i in file)`` for messages; works when the tags themselves are unreadable."""
        try:
            return "%r (#%i in file)" % (self.tag(local_idx), local_idx)
        except DataError:
            return "#%i in file" % local_idx

    def read_seq(self, local: int) -> Dict[str, np.ndarray]:
        """Key -> frames of one sequence of this file (the common case in random order). The
        caller checks :meth:`check_unchanged` after its reads (once per batch, not per sequence)."""
        return {col.key: col.read(local, local, self.safe_tag, self.path) for col in self.columns}

    def read_seqs(self, first: int, last: int) -> List[List[np.ndarray]]:
        """Per column, the frames of sequences ``first..last`` (inclusive) of this file."""
        out = []
        for col in self.columns:
            block = col.read(first, last, self.safe_tag, self.path)
            start = col.offsets.item(first)
            out.append(np.split(block, col.offsets[first + 1:last + 1] - start) if last > first else [block])
        return out

    def read_all(self, col: Column) -> np.ndarray:
        """All frames of one column that belong to sequences."""
        return col.read(0, self.num_seqs - 1, self.safe_tag, self.path) if self.num_seqs else \
            col.fix(col.ds[0:0], 0, self.safe_tag, self.path)

    def close(self) -> None:
        """Closes the h5py file."""
        try:
            self.h5.close()
        except Exception:  # pragma: no cover - closing twice or after interpreter teardown
            pass


def read_strings(ds: "h5py.Dataset", name: str, path: str) -> List[str]:
    """Reads a 1-D string dataset (fixed bytes or variable-length) as a list of str."""
    try:
        raw = ds[...]
        if raw.ndim == 2:  # one character per column
            return [decode_hdf_string(b"".join(bytes(c) for c in row)) for row in raw]
        return [decode_hdf_string(v) for v in raw.reshape(-1)]
    except READ_ERRORS as exc:
        raise DataError("HDFDataset: %s: cannot read %r: %s" % (path, name, first_line(exc)))


def _kind(obj: Any) -> str:
    if isinstance(obj, h5py.Group):
        return "group"
    if isinstance(obj, h5py.Dataset):
        return "dataset"
    return type(obj).__name__
