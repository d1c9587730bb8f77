"""RETURNN's ``NumpyDumpDataset``: sequences as text files written by ``tools/dump-dataset.py
--type=numpy``: ``<prefix><i>.data<postfix>`` (T x num_inputs numbers) and ``<prefix><i>.targets<postfix>``
(T class indices), i = start_seq, start_seq + 1, ... up to ``end_seq`` (default: while both files
exist); gzipped with a ``.gz`` postfix (the default ``.txt.gz``). ``seq_ordering = "sorted"`` is read
as ``default``, as RETURNN does; files are read once and kept."""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from returnn.datasets.base import DataInfo, Dataset, register_dataset
from returnn.datasets.options import int_option, optional_int_option
from returnn.errors import DataError


@register_dataset
class NumpyDumpDataset(Dataset):
    """See the module docstring."""

    def __init__(self, prefix: str, postfix: str = ".txt.gz", start_seq: int = 0, end_seq: Optional[int] = None,
                 num_inputs: Optional[int] = None, num_outputs: Optional[int] = None, **kwargs: Any):
        if kwargs.get("seq_ordering") == "sorted":
            kwargs["seq_ordering"] = "default"
        super().__init__(**kwargs)
        owner = self.describe()
        if not num_inputs or not num_outputs:
            raise DataError("%s: needs num_inputs and num_outputs" % owner)
        self.num_in = int_option(owner, "num_inputs", num_inputs, minimum=1)
        self.num_out = int_option(owner, "num_outputs", num_outputs, minimum=1)
        self.data_fmt, self.targets_fmt = prefix + "%i.data" + postfix, prefix + "%i.targets" + postfix
        start = int_option(owner, "start_seq", start_seq, minimum=0)
        end = optional_int_option(owner, "end_seq", end_seq, minimum=start + 1)
        i = start
        while (end is None or i < end) and os.path.exists(self.data_fmt % i) and os.path.exists(self.targets_fmt % i):
            i += 1
        if i == start or (end is not None and i != end):
            raise DataError("%s: missing %s (or its targets file)" % (owner, self.data_fmt % i))
        self.file_indices = list(range(start, i))
        for idx in self.file_indices:  # read lazily, kept once read: stamped now, before any read
            self.watch_file(self.data_fmt % idx)
            self.watch_file(self.targets_fmt % idx)
        self._seqs: Dict[int, Dict[str, np.ndarray]] = {}

    def data_infos(self) -> Dict[str, DataInfo]:
        return {"data": DataInfo(self.num_in, False, "float32"), "classes": DataInfo(self.num_out, True, "int32")}

    def _corpus_num_seqs(self) -> int:
        return len(self.file_indices)

    def _read(self, i: int) -> Dict[str, np.ndarray]:
        if i not in self._seqs:
            idx = self.file_indices[i]
            try:
                data = np.loadtxt(self.data_fmt % idx, ndmin=2).astype(np.float32)
                targets = np.loadtxt(self.targets_fmt % idx, ndmin=1).astype(np.int32)
            except (OSError, ValueError, EOFError) as exc:
                self.check_files_unchanged()  # a file changed since the start is named as that
                raise DataError("%s: cannot read sequence file %i: %s" % (self.describe(), idx, exc)) from None
            if data.shape[1] != self.num_in:
                raise DataError("%s: %s has %i columns, num_inputs is %i"
                                % (self.describe(), self.data_fmt % idx, data.shape[1], self.num_in))
            self._seqs[i] = {"data": data, "classes": targets}
        return self._seqs[i]

    def _corpus_seq_lengths(self) -> np.ndarray:
        return np.array([[len(self._read(i)["data"]), len(self._read(i)["classes"])]
                         for i in range(len(self.file_indices))], dtype=np.int64).reshape(-1, 2)

    def _corpus_load(self, corpus_indices: Sequence[int]) -> List[Dict[str, np.ndarray]]:
        return [self._read(i) for i in corpus_indices]

    def seq_origin(self, corpus_index: int, key: Optional[str] = None) -> str:
        idx = self.file_indices[int(corpus_index)]
        return "file %s" % ((self.targets_fmt if key == "classes" else self.data_fmt) % idx)
