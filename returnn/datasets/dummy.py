"""RETURNN's deterministic dummy datasets: ``DummyDataset`` (dense ``data``, sparse ``classes``, both
``seq_len`` frames, default 2), ``DummyDatasetMultipleSequenceLength`` (``data`` and ``classes`` of
different lengths) and ``DummyDatasetMultipleDataKeys`` (any keys, sparse or dense by ``output_dim``).
One implementation, :class:`_RampDataset`: the data is RETURNN's ramp, not random: sequence ``s`` counts
up from ``s`` over the keys in order, dense values ``((i % input_max_value) + input_shift) * input_scale``
(defaults: ``input_max_value`` 10, ``input_shift`` ``-input_max_value / 2``, ``input_scale``
``1 / input_max_value``), sparse ``i % dim``; every epoch holds the same data, as in RETURNN. Random data
of this engine's own is ``RandomDataset`` (:mod:`returnn.datasets.generating`)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import numpy as np

from returnn.datasets.base import DataInfo, register_dataset
from returnn.datasets.generating import InMemoryDataset
from returnn.datasets.options import int_option
from returnn.errors import DataError


class _RampDataset(InMemoryDataset):
    """The ramp data of RETURNN's dummy datasets (see the module docstring)."""

    def __init__(self, keys: Dict[str, List[int]], seq_len: Dict[str, int], num_seqs: int,
                 input_max_value: float = 10.0, input_shift: Optional[float] = None,
                 input_scale: Optional[float] = None, **kwargs: Any):
        super().__init__(**kwargs)
        owner = self.describe()
        self._keys = {k: [int_option(owner, "output_dim" if ndim == 1 or k != "data" else "input_dim", dim, minimum=1),
                          int(ndim)] for k, (dim, ndim) in keys.items()}  # key -> [dim, ndim] (ndim 1: sparse)
        self._lens = {k: int_option(owner, "seq_len", seq_len[k], minimum=0) for k in keys}
        self._n = int_option(owner, "num_seqs", num_seqs, minimum=0)
        self._max = float(input_max_value)
        self._shift = -self._max / 2.0 if input_shift is None else float(input_shift)
        self._scale = 1.0 / self._max if input_scale is None else float(input_scale)
        self._set_seqs([self._seq(s) for s in range(self._n)])

    def data_infos(self) -> Dict[str, DataInfo]:
        return {k: DataInfo(dim, ndim == 1, "int32" if ndim == 1 else "float32") for k, (dim, ndim) in self._keys.items()}

    def _seq(self, seq_idx: int) -> Dict[str, np.ndarray]:
        out, i = {}, seq_idx
        for key, (dim, ndim) in self._keys.items():
            n = self._lens[key]
            if ndim == 1:
                out[key] = (np.arange(i, i + n) % dim).astype(np.int32)
                i += n
            else:
                values = np.arange(i, i + n * dim)
                out[key] = (((values % self._max) + self._shift) * self._scale).astype(np.float32).reshape(n, dim)
                i += n * dim
        return out

    def _prepare_epoch(self, full_epoch: int) -> None:
        pass


@register_dataset
class DummyDataset(_RampDataset):
    """RETURNN's ``DummyDataset``: dense ``data`` (``input_dim``) and sparse ``classes`` (``output_dim``),
    every sequence ``seq_len`` frames long (default 2, as RETURNN), RETURNN's ramp values (module doc)."""

    def __init__(self, input_dim: int, output_dim: int, num_seqs: int, seq_len: int = 2, **kwargs: Any):
        if "input_sparse" in kwargs or isinstance(seq_len, (list, tuple)):
            raise DataError("dataset %s (DummyDataset): DummyDataset is RETURNN's deterministic ramp (seq_len one "
                            "int, dense input); random data with sequence length ranges or sparse input is "
                            "RandomDataset (this engine's own)" % kwargs.get("name", "?"))
        if isinstance(output_dim, dict):  # RETURNN's {key: dim or [dim, ndim]}: the dim of 'classes'
            value = output_dim.get("classes")
            output_dim = value[0] if isinstance(value, (list, tuple)) else value
        super().__init__({"data": [input_dim, 2], "classes": [output_dim, 1]},
                         {"data": seq_len, "classes": seq_len}, num_seqs, **kwargs)


@register_dataset
class DummyDatasetMultipleSequenceLength(_RampDataset):
    """RETURNN's: dense ``data`` and sparse ``classes`` with ``seq_len = {"data": 10, "classes": 20}``."""

    def __init__(self, input_dim: int, output_dim: int, num_seqs: int, seq_len: Optional[Dict[str, int]] = None,
                 **kwargs: Any):
        seq_len = seq_len or {"data": 10, "classes": 20}
        if not isinstance(seq_len, dict) or set(seq_len) != {"data", "classes"}:
            raise DataError("DummyDatasetMultipleSequenceLength: seq_len must be {'data': n, 'classes': m}, got %r"
                            % (seq_len,))
        super().__init__({"data": [int(input_dim), 2], "classes": [int(output_dim), 1]}, seq_len, num_seqs, **kwargs)


@register_dataset
class DummyDatasetMultipleDataKeys(_RampDataset):
    """RETURNN's: the keys of ``output_dim`` (``{key: [dim, ndim]}``, ndim 1 sparse), in
    ``data_keys`` order (default data, classes), each ``seq_len`` long (an int, or per key)."""

    def __init__(self, output_dim: Dict[str, Any], num_seqs: int, seq_len: Any = None,
                 data_keys: Optional[List[str]] = None, **kwargs: Any):
        keys = list(data_keys or ["data", "classes"])
        lens = {k: seq_len if isinstance(seq_len, int) else 20 for k in keys} if not isinstance(seq_len, dict) \
            else dict(seq_len)
        if not isinstance(output_dim, dict) or set(output_dim) != set(keys) or set(lens) != set(keys):
            raise DataError("DummyDatasetMultipleDataKeys: output_dim and seq_len must name the data_keys %s, got %r "
                            "and %r" % (keys, output_dim, seq_len))
        dims = {k: list(output_dim[k]) if isinstance(output_dim[k], (list, tuple)) else [int(output_dim[k]), 2]
                for k in keys}
        super().__init__(dims, lens, num_seqs, **kwargs)
