"""Writers for RETURNN's HDF layout (see docs/hdf-format.md).

* :class:`SimpleHDFWriter` appends batches (RETURNN's interface) to resizable datasets.
* :func:`dump_dataset_to_hdf` streams a whole dataset (one epoch's order) into a file.

Both write to a temporary file next to the target and rename it on success, so a crash never
leaves a half-written file under the final name. Tags are variable-length UTF-8 strings, label
lists fixed-length UTF-8 bytes; ``/seqLengths`` is 2-D int32 with column 0 for ``/inputs`` and
one column per target key in sorted order (at least 2 columns, as RETURNN's reader assumes a
``classes`` column).
"""
from __future__ import annotations

import os
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from returnn.datasets.base import Dataset
from returnn.datasets.hdf_file import encode_hdf_string
from returnn.datasets.hdf_output_sink import (  # noqa: F401 (discard_unfinished_outputs: the writers' API)
    OutputSink, discard_unfinished_outputs, drop_unfinished, mark_finished, remove_stale_hdf_temp_files, temp_name,
)
from returnn.errors import DataError, output_write_error

import h5py

ExtraType = Tuple[Optional[int], int, str]  # (dim, ndim, dtype); ndim counts the time axis


def tag_bytes(tags: Sequence[Any], owner: str) -> np.ndarray:
    """Sequence tags as the bytes written to ``/seqTags``: text as UTF-8, where the surrogate
    escapes of bytes that were not UTF-8 in the source (see ``decode_hdf_string``) become those
    bytes again, so a tag is written as it was read. A NUL in a tag is refused: readers cut tags
    there (RETURNN as well), and two tags could become one."""
    out = [encode_hdf_string(t) for t in tags]
    for raw in out:
        if b"\0" in raw:
            raise DataError("%s: sequence tag %r holds a NUL byte, which HDF readers take as the end of the tag"
                            % (owner, raw))
    return np.array(out, dtype=object)


def write_label_list(group: "h5py.Group", name: str, labels: Sequence[str]) -> None:
    """Writes ``labels`` as a 1-D fixed-length bytes dataset (UTF-8)."""
    encoded = [encode_hdf_string(label) for label in labels]
    width = max([len(e) for e in encoded] + [1])
    group.create_dataset(name, data=np.array(encoded, dtype="S%i" % width), dtype="S%i" % width)


def default_labels(key: str, dim: Optional[int]) -> List[str]:
    """Names for a key without labels: ``classes-class-0``, ``classes-class-1``, ..."""
    return ["%s-class-%i" % (key, i) for i in range(int(dim or 0))]


def _size_attr(dim: Optional[int], ndim: int) -> np.ndarray:
    return np.array([int(dim or 0), int(ndim)], dtype=np.int64)


def _chunk_rows(frame_shape: Tuple[int, ...], dtype: Any, target_bytes: int = 1 << 16) -> Tuple[int, ...]:
    """Chunk shape for a resizable frames dataset: about ``target_bytes`` per chunk."""
    row_bytes = int(np.prod(frame_shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    rows = max(1, target_bytes // max(1, row_bytes))
    return (rows,) + tuple(frame_shape)


def _append(ds: "h5py.Dataset", data: np.ndarray) -> None:
    """Appends ``data`` along axis 0 of the resizable dataset ``ds``."""
    n = int(data.shape[0])
    if n == 0:
        return
    old = int(ds.shape[0])
    ds.resize(old + n, axis=0)
    ds[old:old + n] = data


class SimpleHDFWriter:
    """Writes an HDF file batch by batch, like RETURNN's ``SimpleHDFWriter``.

    ``dim`` is the feature dim of the inputs (or the class count for sparse inputs); ``ndim``
    counts the time axis: 1 = sparse inputs ``(B, T)`` of class indices, 2 = dense ``(B, T, dim)``
    (default: 2 if ``dim`` is given, else 1). ``extra_type`` maps extra keys to
    ``(dim, ndim, dtype)``; they are written as ``/targets/data/<key>``. ``extra_labels`` optionally
    names the classes of extra keys.
    """

    def __init__(self, filename: str, dim: Optional[int], ndim: Optional[int] = None,
                 labels: Optional[Sequence[str]] = None, extra_type: Optional[Dict[str, ExtraType]] = None,
                 extra_labels: Optional[Dict[str, Sequence[str]]] = None):
        if ndim is None:
            ndim = 2 if dim is not None else 1
        if labels is not None and dim is not None and len(labels) != dim:
            raise ValueError("SimpleHDFWriter: %i labels for dim %i" % (len(labels), dim))
        self.filename = filename
        self.dim = dim
        self.ndim = int(ndim)
        self.labels = list(labels) if labels is not None else None
        self.tmp_filename = temp_name(filename)
        self._extra_labels = {k: list(v) for k, v in (extra_labels or {}).items()}
        self._init_extra_type = extra_type
        remove_stale_hdf_temp_files(os.path.dirname(self.tmp_filename))
        self._file: Optional[h5py.File] = None
        from returnn.util.safe_files import check_replaceable
        check_replaceable(filename)  # never a device, FIFO or directory at the final name
        self._sink: Optional[OutputSink] = OutputSink(self.tmp_filename)
        try:  # from here on the temporary file exists: any failure (or a stop signal) removes it
            self._start()
        except BaseException:
            self.abort()
            raise

    def _start(self) -> None:
        extra_type = self._init_extra_type
        self._file = h5py.File(self._sink, "w")
        self._inputs: Optional[h5py.Dataset] = None
        self._max_input_class = -1
        self._extra_type: Optional[Dict[str, ExtraType]] = None
        self._extra: Dict[str, h5py.Dataset] = {}
        self._max_extra_class: Dict[str, int] = {}
        f = self._file
        if self.labels:
            write_label_list(f, "labels", self.labels)
        else:  # RETURNN's SimpleHDFWriter writes an empty 'labels' then
            f.create_dataset("labels", (0,), dtype="S5")
        self._tags = f.create_dataset("seqTags", (0,), dtype=h5py.string_dtype("utf-8"), maxshape=(None,),
                                      chunks=(1024,))
        self._seq_lengths: Optional[h5py.Dataset] = None
        if extra_type:
            self._set_extra_type(dict(extra_type))

    # ---- structure
    def _set_extra_type(self, extra_type: Dict[str, ExtraType]) -> None:
        self._extra_type = {k: (v[0], int(v[1]), str(np.dtype(v[2]))) for k, v in extra_type.items()}
        if not self._extra_type:
            return
        targets = self._file.require_group("targets")
        targets.require_group("data")
        size = targets.require_group("size")
        labels = targets.require_group("labels")
        for key, (dim, ndim, _dtype) in sorted(self._extra_type.items()):
            size.attrs[key] = _size_attr(dim, ndim)
            names = self._extra_labels.get(key)
            if names is None:
                names = default_labels(key, dim) if ndim == 1 else []
            write_label_list(labels, key, names)

    def _extra_keys(self) -> List[str]:
        return sorted(self._extra_type or {})

    def _ensure_seq_lengths(self) -> "h5py.Dataset":
        if self._seq_lengths is None:
            cols = 1 + max(1, len(self._extra_keys()))
            self._seq_lengths = self._file.create_dataset("seqLengths", (0, cols), dtype="int32",
                                                          maxshape=(None, cols), chunks=(4096, cols))
        return self._seq_lengths

    def _frames_dataset(self, parent: "h5py.Group", name: str, frame_shape: Tuple[int, ...], dtype: Any
                        ) -> "h5py.Dataset":
        return parent.create_dataset(name, (0,) + frame_shape, dtype=dtype, maxshape=(None,) + frame_shape,
                                     chunks=_chunk_rows(frame_shape, dtype))

    # ---- writing
    def insert_batch(self, inputs: np.ndarray, seq_len: Union[Sequence[int], Dict[Any, Sequence[int]]],
                     seq_tag: Sequence[Union[str, bytes]], extra: Optional[Dict[str, np.ndarray]] = None) -> None:
        """Appends a batch (see :meth:`_insert_batch`). A full disk (or another storage failure) drops
        the temporary file and is one line naming the output file."""
        self._insert_batch(inputs, seq_len, seq_tag, extra)
        self._check_sink()

    def _check_sink(self) -> None:
        """A failed write (see :class:`OutputSink`): the file is dropped, one line names it."""
        if self._sink is not None and self._sink.error is not None:
            error = self._sink.error
            self.abort()
            raise output_write_error(self.filename, error, "output file")

    def _insert_batch(self, inputs: np.ndarray, seq_len: Union[Sequence[int], Dict[Any, Sequence[int]]],
                      seq_tag: Sequence[Union[str, bytes]], extra: Optional[Dict[str, np.ndarray]] = None) -> None:
        """Appends a batch.

        ``inputs``: ``(B, T, dim)`` dense or ``(B, T)`` sparse (padded); ``seq_len``: ``(B,)``
        lengths of the inputs, or a dict ``{0: lengths, key: lengths of extra key}``; ``seq_tag``:
        B tags; ``extra``: key -> padded ``(B, T', ...)`` arrays. An extra key without its own
        lengths uses the input lengths when ``T' == T``, else its full ``T'``.
        """
        if self._file is None:
            raise ValueError("SimpleHDFWriter: insert_batch() after close()")
        inputs = np.asarray(inputs)
        n_batch = len(seq_tag)
        if inputs.ndim != self.ndim + 1 or inputs.shape[0] != n_batch:
            raise ValueError("SimpleHDFWriter: inputs shape %s does not fit %i tags and ndim %i"
                             % (inputs.shape, n_batch, self.ndim))
        lens_by_key = dict(seq_len) if isinstance(seq_len, dict) else {0: seq_len}
        in_lens = np.asarray(lens_by_key[0], dtype=np.int64).reshape(-1)
        if len(in_lens) != n_batch or (n_batch and (in_lens.min() < 0 or in_lens.max() > inputs.shape[1])):
            raise ValueError("SimpleHDFWriter: bad seq_len %s for inputs of shape %s" % (in_lens, inputs.shape))
        extra = {k: np.asarray(v) for k, v in (extra or {}).items()}
        if extra and self._extra_type is None:
            self._set_extra_type({k: (v.shape[-1] if v.ndim > 2 else None, v.ndim - 1, str(v.dtype))
                                  for k, v in extra.items()})
        if set(extra) != set(self._extra_keys()):
            raise ValueError("SimpleHDFWriter: extra keys %s, expected %s" % (sorted(extra), self._extra_keys()))
        # inputs
        frames = np.concatenate([inputs[b, :in_lens[b]] for b in range(n_batch)]) if n_batch else inputs[:0, 0]
        if self._inputs is None:
            self._inputs = self._frames_dataset(self._file, "inputs", tuple(inputs.shape[2:]), inputs.dtype)
        _append(self._inputs, frames.astype(self._inputs.dtype, copy=False))
        if self.ndim == 1 and frames.size:
            self._max_input_class = max(self._max_input_class, int(frames.max()))
        # extras
        rows = [in_lens]
        for key in self._extra_keys():
            value = extra[key]
            dim, ndim, dtype = self._extra_type[key]
            if value.ndim != ndim + 1 or value.shape[0] != n_batch:
                raise ValueError("SimpleHDFWriter: extra %r has shape %s, expected (B, T'%s)"
                                 % (key, value.shape, ", ..." if ndim > 1 else ""))
            if key in lens_by_key:
                lens = np.asarray(lens_by_key[key], dtype=np.int64).reshape(-1)
            elif value.shape[1] == inputs.shape[1]:
                lens = in_lens
            else:
                lens = np.full((n_batch,), value.shape[1], dtype=np.int64)
            part = np.concatenate([value[b, :lens[b]] for b in range(n_batch)]) if n_batch else value[:0, 0]
            if key not in self._extra:
                self._extra[key] = self._frames_dataset(self._file["targets/data"], key, tuple(value.shape[2:]),
                                                        dtype)
            _append(self._extra[key], part.astype(dtype, copy=False))
            if ndim == 1 and part.size:
                self._max_extra_class[key] = max(self._max_extra_class.get(key, -1), int(part.max()))
            rows.append(lens)
        if len(rows) == 1:
            rows.append(np.zeros_like(in_lens))  # RETURNN's dummy 'classes' column: 0 (its SimpleHDFWriter)
        _append(self._ensure_seq_lengths(), np.stack(rows, axis=1).astype(np.int32))
        _append(self._tags, tag_bytes(seq_tag, "SimpleHDFWriter %s" % self.filename))

    def close(self) -> None:
        """Finishes the file and renames it to ``filename``."""
        if self._file is None:
            return
        f = self._file
        try:
            from returnn.interrupts import raise_if_stop_pending
            raise_if_stop_pending()  # a stop signal cleared on the way by C code: nothing is put into place
            if self._inputs is None:
                shape = () if self.ndim == 1 else (int(self.dim or 1),) * (self.ndim - 1)
                self._inputs = self._frames_dataset(f, "inputs", shape, "int32" if self.ndim == 1 else "float32")
            for key in self._extra_keys():
                dim, ndim, dtype = self._extra_type[key]
                if key not in self._extra:
                    shape = () if ndim == 1 else (int(dim or 1),) * (ndim - 1)
                    self._extra[key] = self._frames_dataset(f["targets/data"], key, shape, dtype)
                if dim is None and ndim == 1:
                    f["targets/size"].attrs[key] = _size_attr(self._max_extra_class.get(key, -1) + 1, ndim)
            seq_lengths = self._ensure_seq_lengths()
            dim = self.dim if self.dim is not None else max(self._max_input_class + 1, 1)
            f.attrs["inputPattSize"] = int(dim)
            f.attrs["numDims"] = 1
            f.attrs["numLabels"] = int(dim)
            f.attrs["numSeqs"] = int(seq_lengths.shape[0])
            f.attrs["numTimesteps"] = int(self._inputs.shape[0])
            f.close()
            self._sink.fsync()
            self._check_sink()
        except BaseException:
            self.abort()
            raise
        self._file = None
        self._sink.close()
        self._sink = None
        from returnn.util.safe_files import check_replaceable
        try:
            check_replaceable(self.filename)
        except OSError:
            drop_unfinished(self.tmp_filename)
            raise
        os.replace(self.tmp_filename, self.filename)
        mark_finished(self.tmp_filename)  # renamed into place

    def abort(self) -> None:
        """Drops the temporary file; nothing is written under ``filename``."""
        if self._file is not None:
            try:
                self._file.close()
            except Exception:  # pragma: no cover
                pass
            self._file = None
        if getattr(self, "_sink", None) is not None:
            self._sink.close()
            self._sink = None
        drop_unfinished(self.tmp_filename)

    def __enter__(self) -> "SimpleHDFWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


ProgressFn = Callable[[int, int], None]


def dump_dataset_to_hdf(dataset: Dataset, out_path: str, epoch: int = 1, start_seq: int = 0,
                        end_seq: Optional[int] = None, progress: Optional[ProgressFn] = None,
                        max_chunk_bytes: int = 8 << 20) -> int:
    """Writes sequences ``start_seq .. end_seq`` (inclusive; None = last) of ``epoch`` of
    ``dataset`` to ``out_path`` in RETURNN's HDF layout and returns how many were written.

    Sizes come from the dataset's declared sequence lengths, so the datasets are created with
    their final (contiguous) shape and filled chunk by chunk: memory stays flat. A sequence whose
    data length differs from its declared length is a DataError. ``progress(done, total)`` is
    called after every chunk.
    """
    out_dir = os.path.dirname(os.path.abspath(out_path))
    if not os.path.isdir(out_dir):
        raise DataError("cannot write %s: directory %s does not exist" % (out_path, out_dir))
    if os.path.isdir(out_path):
        raise DataError("cannot write %s: it is a directory" % out_path)
    for path in dataset.data_files():  # never over an input (the same file by device and inode)
        if os.path.exists(out_path) and os.path.samefile(path, out_path):
            raise DataError("the output %s is a data file of %s: writing would replace it; choose another file"
                            % (out_path, dataset.describe()))
    dataset.init_seq_order(epoch)
    n = dataset.num_seqs
    start = max(0, int(start_seq or 0))
    end = n - 1 if end_seq is None else min(int(end_seq), n - 1)
    count = max(0, end - start + 1)
    keys = dataset.get_data_keys()
    infos = {k: dataset.data_infos()[k] for k in keys}
    target_keys = [k for k in keys if k != "data"]
    lengths = np.asarray(dataset.seq_lengths_in_order(), dtype=np.int64)[start:start + count]
    lengths = lengths.reshape(count, len(keys))
    col = {k: i for i, k in enumerate(keys)}
    tmp = temp_name(out_path)
    remove_stale_hdf_temp_files(out_dir)  # what killed dumps left here
    sink: Optional[OutputSink] = None
    try:
        from returnn.util.safe_files import check_replaceable
        check_replaceable(out_path)  # never a device, FIFO or directory at the final name
        sink = OutputSink(tmp)
        with h5py.File(sink, "w") as f:
            out: Dict[str, h5py.Dataset] = {}
            offsets: Dict[str, int] = {k: 0 for k in keys}
            for key in keys:
                info = infos[key]
                total = int(lengths[:, col[key]].sum())
                parent = f if key == "data" else f.require_group("targets/data")
                out[key] = parent.create_dataset("inputs" if key == "data" else key, (total,) + tuple(info.shape),
                                                 dtype=info.dtype)
            _write_dump_meta(f, dataset, infos, target_keys, lengths, col, count)
            tags_ds = f.create_dataset("seqTags", (count,), dtype=h5py.string_dtype("utf-8"))
            frame_bytes = sum(int(np.prod(infos[k].shape, dtype=np.int64)) * np.dtype(infos[k].dtype).itemsize
                              for k in keys) or 1
            seq_bytes = lengths.sum(axis=1) * frame_bytes if count else np.zeros((0,))
            pos = 0
            last_report = 0.0
            while pos < count:
                stop = pos + 1
                acc = int(seq_bytes[pos])
                while stop < count and stop - pos < 1024 and acc + int(seq_bytes[stop]) <= max_chunk_bytes:
                    acc += int(seq_bytes[stop])
                    stop += 1
                epoch_idx = list(range(start + pos, start + stop))
                seqs = dataset.get_seqs(epoch_idx)
                for key in keys:
                    parts = []
                    for j, seq in enumerate(seqs):
                        arr = np.asarray(seq[key])
                        want = int(lengths[pos + j, col[key]])
                        if arr.shape[:1] != (want,) or arr.shape[1:] != tuple(infos[key].shape):
                            raise DataError("dataset %s: sequence %i (%s) key %r has shape %s, but its declared length "
                                            "is %i and frame shape %s" % (dataset.name, epoch_idx[j],
                                                                          dataset.get_tag(epoch_idx[j]), key,
                                                                          arr.shape, want, infos[key].shape))
                        parts.append(arr)
                    block = np.concatenate(parts) if len(parts) > 1 else parts[0]
                    block = np.ascontiguousarray(block, dtype=infos[key].dtype)
                    if block.shape[0]:
                        out[key][offsets[key]:offsets[key] + block.shape[0]] = block
                    offsets[key] += block.shape[0]
                tags_ds[pos:stop] = tag_bytes([dataset.get_tag(i) for i in epoch_idx], dataset.describe())
                pos = stop
                if sink.error is not None:
                    break  # the disk is full: reported below
                if progress is not None and (pos == count or time.monotonic() - last_report > 0.2):
                    last_report = time.monotonic()
                    progress(pos, count)
        sink.fsync()
        sink.close()
        if sink.error is not None:
            raise output_write_error(out_path, sink.error, "output file")
        check_replaceable(out_path)
        from returnn.interrupts import raise_if_stop_pending
        raise_if_stop_pending()  # a stop signal cleared on the way by C code: nothing is put into place
        os.replace(tmp, out_path)
        mark_finished(tmp)  # renamed into place
    except BaseException:
        if sink is not None:
            sink.close()
        drop_unfinished(tmp)
        raise
    if progress is not None and count == 0:
        progress(0, 0)
    return count


def _write_dump_meta(f: "h5py.File", dataset: Dataset, infos: Dict[str, Any], target_keys: List[str],
                     lengths: np.ndarray, col: Dict[str, int], count: int) -> None:
    """Writes ``/seqLengths``, ``/targets/size`` and label lists and the root attributes."""
    if "data" in col:
        first = lengths[:, col["data"]]
    else:  # no inputs: column 0 still exists; use the longest key
        first = lengths.max(axis=1) if lengths.shape[1] else np.zeros((count,), dtype=np.int64)
    columns = [first] + [lengths[:, col[k]] for k in target_keys]
    if len(columns) == 1:
        columns.append(first)  # RETURNN's dummy 'classes' column
    f.create_dataset("seqLengths", data=np.stack(columns, axis=1).astype(np.int32).reshape(count, len(columns)))
    data_info = infos.get("data")
    if data_info is not None:
        labels = data_info.labels or (default_labels("data", data_info.dim) if data_info.sparse else None)
        if labels:
            write_label_list(f, "labels", labels)
    if target_keys:
        size = f.require_group("targets/size")
        labels_group = f.require_group("targets/labels")
        for key in target_keys:
            info = infos[key]
            size.attrs[key] = _size_attr(info.dim, info.ndim)
            write_label_list(labels_group, key, info.labels or default_labels(key, info.dim))
    f.attrs["inputPattSize"] = int(data_info.dim) if data_info is not None else 0
    f.attrs["numDims"] = 1
    main = infos.get("classes") or data_info
    f.attrs["numLabels"] = int(main.dim) if main is not None else 0
    f.attrs["numSeqs"] = int(count)
    f.attrs["numTimesteps"] = int(first.sum()) if count else 0
