"""Data that must stay what it was: files a dataset reads, and sequences with non-finite values.

**Files that change under a running job.** A dataset records a :class:`FileStamp` (device, inode,
size, modification time) of each file it reads, taken *before* it reads it
(:meth:`returnn.datasets.base.Dataset.watch_file`). :func:`check_datasets_unchanged` compares them
with the files now: the engine calls it at the start of every (sub-)epoch and again after the
epoch's training steps and evaluations, before the learning-rate file and the checkpoint are
written; HDF reads check their file after every read and name a change instead of a "corrupt"
file when a read fails. A file truncated, rewritten in place, replaced (``mv``, ``cp``), deleted or
merely touched is a :class:`~returnn.errors.DataError` naming the dataset and the file: an epoch
that may have read changed data is never saved. With several ranks every rank checks its own
files, and all ranks learn the first rank's finding in one small collective, so rank 0 never
saves while another rank saw a change.

**Non-finite data.** When a step reports a non-finite loss, :func:`nonfinite_culprit` looks at
the sequences of that step's batch (reloaded from the dataset) and names the first sequence
whose data holds ``nan``/``inf``: dataset, file and position in it, tag, key and frame.
"""
from __future__ import annotations

import os
from typing import Iterable, Optional, Sequence

import numpy as np

from returnn.errors import DataError


class FileStamp:
    """What a file was when a dataset started reading it: device, inode, size, modification time,
    and also the status change time and the mode. The status change time (``ctime``) is set by the
    kernel on every write, ``chmod``, ``chown``, link or rename and cannot be set back by a user, so a
    rewrite whose modification time was restored by hand (``touch -d``, ``os.utime``, ``cp -p``) or a
    permission change (which a reader running as root would not notice) counts as a change too."""

    __slots__ = ("path", "dev", "ino", "size", "mtime_ns", "ctime_ns", "mode")

    def __init__(self, path: str):
        self.path = os.fspath(path)
        st = os.stat(self.path)
        self.dev, self.ino, self.size, self.mtime_ns = st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns
        self.ctime_ns, self.mode = st.st_ctime_ns, st.st_mode

    def change(self) -> Optional[str]:
        """None while the file is as it was; else what changed (for messages)."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return "deleted"
        except OSError as exc:
            return "no longer readable (%s)" % (exc.strerror or exc)
        if (st.st_dev, st.st_ino) != (self.dev, self.ino):
            return "replaced by another file (inode %i -> %i, %i -> %i bytes)" % (self.ino, st.st_ino, self.size,
                                                                                  st.st_size)
        if st.st_size != self.size:
            return "%s (%i -> %i bytes)" % ("truncated" if st.st_size < self.size else "grown", self.size, st.st_size)
        if st.st_mtime_ns != self.mtime_ns:
            return "modified in place (same size, modification time %s -> %s)" % (_time(self.mtime_ns),
                                                                                   _time(st.st_mtime_ns))
        if st.st_mode != self.mode:
            return "permissions changed (mode %s -> %s)" % (_mode(self.mode), _mode(st.st_mode))
        if st.st_ctime_ns != self.ctime_ns:
            return ("changed with its modification time kept (status change time %s -> %s: rewritten and the time "
                    "set back, or its owner or links changed)" % (_time(self.ctime_ns), _time(st.st_ctime_ns)))
        return None


def _mode(mode: int) -> str:
    import stat
    return "%04o" % stat.S_IMODE(mode)


def _time(ns: int) -> str:
    import time
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ns / 1e9)) + ".%09i" % (ns % 10 ** 9)


def stamp_file(path: str) -> Optional[FileStamp]:
    """The stamp of ``path``; None when it cannot be stat'ed (the reader then names the problem)."""
    try:
        return FileStamp(path)
    except (OSError, TypeError, ValueError):
        return None


def changed_message(owner: str, stamp: FileStamp, change: str) -> str:
    """The one line for a data file that changed while the job runs."""
    return ("%s: data file %s changed while the job runs: %s. Data read from it may mix old and new contents, "
            "so nothing trained on it is saved; restore the file, or start a new run (a new model) on the new data"
            % (owner, stamp.path, change))


def first_change(datasets: Iterable) -> Optional[str]:
    """The message of the first changed file of ``datasets`` (and their sub-datasets), or None."""
    for dataset in datasets:
        found = dataset.changed_file_message()
        if found:
            return found
    return None


def check_datasets_unchanged(datasets: Iterable, dist=None, when: str = "") -> None:
    """Raises a DataError when a file of ``datasets`` changed since it was read. With a
    distributed context of several ranks, every rank must call this at the same point: all
    ranks raise the first rank's message (``when`` says where it was noticed)."""
    message = first_change(datasets)
    if dist is not None and getattr(dist, "size", 1) > 1:
        message = first_rank_message(dist, message)
    if message:
        raise DataError(message + ((" (noticed %s)" % when) if when else ""))


_MAX_MESSAGE = 2000


def first_rank_message(dist, message: Optional[str]) -> Optional[str]:
    """The message of the lowest rank that has one (every rank calls this at the same point):
    one small collective when no rank has one, two when one does. A message from another rank
    is prefixed with that rank."""
    size, rank = int(dist.size), int(dist.rank)
    if size <= 1:
        return message
    backend = dist.backend
    winner = int(backend.allreduce_host(np.array([float(rank if message else size)]), "min")[0])
    if winner >= size:
        return None
    codes = np.zeros(_MAX_MESSAGE, np.float64)
    if rank == winner:
        raw = message.encode("utf8", "surrogateescape")[:_MAX_MESSAGE]
        codes[:len(raw)] = np.frombuffer(raw, np.uint8)
    codes = backend.allreduce_host(codes, "sum")
    text = bytes(int(c) for c in codes if c).decode("utf8", "replace")
    return text if winner == rank else "[rank %i of %i] %s" % (winner, size, text)


# ---- non-finite values in a batch's data
def nonfinite_culprit(dataset, batches: Sequence, keys: Sequence[str]) -> Optional[str]:
    """The first sequence of ``batches`` (BatchSlices of ``dataset``'s current epoch) whose data of
    one of ``keys`` holds nan or inf in the frames the batch used, described with dataset, file,
    tag, key and frame; None when all is finite."""
    infos = dataset.data_infos()
    float_keys = [k for k in keys if k in infos and np.dtype(infos[k].dtype).kind == "f"]
    if not float_keys:
        return None
    for batch in batches:
        seq_idxs = [int(i) for i in batch.seq_idxs]
        if not seq_idxs:
            continue
        seqs = dataset.get_seqs(seq_idxs)
        for j, (seq_idx, seq) in enumerate(zip(seq_idxs, seqs)):
            for key in float_keys:
                starts, ends = batch.ranges_of(key) if hasattr(batch, "ranges_of") else (None, None)
                value = np.asarray(seq[key])
                offset = 0
                if starts is not None:
                    start, end = int(starts[j]), int(ends[j])
                    offset = max(0, start)
                    value = value[offset:(end if end >= 0 else None)]
                bad = ~np.isfinite(value)
                if not bad.any():
                    continue
                frame = int(np.argwhere(bad)[0][0]) + offset if value.ndim else 0
                what = "nan" if np.isnan(value[bad]).any() else "inf"
                return describe_sequence(dataset, seq_idx, key) + ": key %r holds %s (first at frame %i)" \
                    % (key, what, frame)
    return None


def nonfinite_error(error: Exception, dataset, batches: Sequence, keys: Sequence[str], dist=None,
                    earlier: Sequence = ()) -> Exception:
    """The error for a step that reported a non-finite loss: a DataError naming the sequence when
    the data of ``batches`` (this rank's batches of the step) is not finite (every rank learns the
    first rank's finding), else ``error`` itself (the model diverged). When those batches are
    finite, ``earlier`` (this rank's batches of the epoch before them) are looked at too: an
    ``inf`` input through a saturating activation (tanh) gives a finite loss but a nan gradient,
    so the parameters break one step and the loss only the next. All ranks call it at the same
    step."""
    culprit = None
    try:
        found = nonfinite_culprit(dataset, batches, keys)
        if not found and earlier:
            found = nonfinite_culprit(dataset, earlier, keys)
            if found:
                found += " (in an earlier step of this epoch whose loss was still finite: it broke the parameters)"
        culprit = "non-finite input data: %s" % found if found else None
    except DataError as exc:  # the data cannot be read again (e.g. its file changed): say that
        culprit = str(exc)
    if dist is not None and getattr(dist, "size", 1) > 1:
        culprit = first_rank_message(dist, culprit)
    if culprit is None:
        return error
    return DataError("%s Cause: %s" % (str(error).rstrip(), culprit))


def describe_sequence(dataset, seq_idx: int, key: Optional[str] = None) -> str:
    """``dataset train (HDFDataset): sequence 'tag' (#3 of file a.hdf)`` for messages."""
    try:
        tag = dataset.get_tag(seq_idx)
    except Exception:  # noqa: BLE001 - a message must not fail on an unreadable tag
        tag = None
    where = ""
    try:
        where = dataset.seq_origin(dataset.corpus_index(seq_idx), key)
    except Exception:  # noqa: BLE001
        pass
    text = "%s: sequence %s" % (dataset.describe(), ("%r" % tag) if tag is not None else "#%i" % seq_idx)
    return text + (" (%s)" % where if where else "")


def unique_tag_positions(tags: Sequence[str], owner: str, describe_position) -> dict:
    """tag -> position; a tag met twice is a DataError naming both positions (``describe_position(i)``
    says where the i-th tag comes from, e.g. its file)."""
    position: dict = {}
    for i, tag in enumerate(tags):
        first = position.setdefault(tag, i)
        if first != i:
            raise DataError("%s: sequence tag %r occurs twice (%s and %s); sequences are matched by tag here, so "
                            "tags must be unique" % (owner, tag, describe_position(first), describe_position(i)))
    return position


def tag_positions(dataset) -> dict:
    """Tag -> corpus index of ``dataset``, whose tags are keys for the caller (sequences are
    matched by tag): a tag met twice is an error naming the dataset, its file and the tag, where
    a dict would silently keep only one of the two sequences."""
    def where(i: int) -> str:
        origin = ""
        try:
            origin = dataset.seq_origin(i)
        except Exception:  # noqa: BLE001 - only for the message
            pass
        return origin or "sequence #%i" % i
    return unique_tag_positions(dataset.corpus_tags(), dataset.describe(), where)
