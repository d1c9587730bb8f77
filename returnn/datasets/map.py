"""RETURNN's map-style datasets defined in config code: a ``MapDatasetBase`` subclass (``__len__``,
``__getitem__(i) -> {key: array}``, ``data_types``, optionally ``get_seq_len``, ``get_seq_tag``,
``get_seq_order(epoch)``) wrapped by ``MapDatasetWrapper`` (``{"class": "MapDatasetWrapper",
"map_dataset": MyMapDataset}``, a class, a function making one, or an instance).

The epoch's order is the map dataset's ``get_seq_order(epoch)`` when it has one (it then replaces
``seq_ordering`` and ``partition_epoch``, as in RETURNN), else the wrapper's ``seq_ordering``. Lengths
per key (for batching) come from the items themselves, read once; the order sorts by
``get_seq_len`` where the map dataset has it.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from returnn.datasets.base import DataInfo, Dataset, register_dataset
from returnn.errors import DataError


class OptionalNotImplementedError(NotImplementedError):
    """RETURNN's marker of an optional method a map dataset does not have."""


class MapDatasetBase:
    """RETURNN's base class of map datasets (see the module docstring)."""

    def __init__(self, data_types: Optional[Dict[str, Dict[str, Any]]] = None):
        self.data_types = data_types or {}

    def __len__(self) -> int:
        raise NotImplementedError

    def __getitem__(self, seq_idx: int) -> Dict[str, np.ndarray]:
        raise NotImplementedError

    def get_seq_len(self, seq_idx: int) -> int:
        raise OptionalNotImplementedError

    def get_seq_tag(self, seq_idx: int) -> str:
        return "seq-%i" % seq_idx

    def get_seq_order(self, epoch: Optional[int] = None) -> List[int]:
        raise OptionalNotImplementedError


class FromListDataset(MapDatasetBase):
    """RETURNN's: a list of ``{key: array}`` as a map dataset."""

    def __init__(self, data_list: List[Dict[str, Any]], sort_data_key: Optional[str] = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.data_list = data_list
        self.sort_data_key = sort_data_key

    def __len__(self) -> int:
        return len(self.data_list)

    def __getitem__(self, seq_idx: int) -> Dict[str, np.ndarray]:
        return self.data_list[seq_idx]

    def get_seq_len(self, seq_idx: int) -> int:
        if not self.sort_data_key:
            raise OptionalNotImplementedError
        return len(self.data_list[seq_idx][self.sort_data_key])


def _info(key: str, opts: Dict[str, Any], owner: str) -> DataInfo:
    sparse = bool(opts.get("sparse", False))
    shape = opts.get("shape")
    dim = opts.get("dim")
    if dim is None and shape:
        dim = shape[-1]
    if dim is None:
        raise DataError("%s: data_types[%r] needs 'dim' or 'shape'" % (owner, key))
    frame = () if sparse else tuple(shape[1:]) if shape else (int(dim),)
    return DataInfo(int(dim), sparse, opts.get("dtype") or ("int32" if sparse else "float32"), shape=frame)


@register_dataset
class MapDatasetWrapper(Dataset):
    """See the module docstring."""

    def __init__(self, map_dataset: Any, **kwargs: Any):
        super().__init__(**kwargs)
        if isinstance(map_dataset, type) or (callable(map_dataset) and not isinstance(map_dataset, MapDatasetBase)
                                            and not hasattr(map_dataset, "__getitem__")):
            map_dataset = map_dataset()
        if not hasattr(map_dataset, "__getitem__") or not hasattr(map_dataset, "__len__"):
            raise DataError("%s: map_dataset must be a MapDatasetBase (or a class or function making one), got %r"
                            % (self.describe(), map_dataset))
        types = getattr(map_dataset, "data_types", None)
        if not types:
            raise DataError("%s: map_dataset %r needs data_types" % (self.describe(), map_dataset))
        self.map_dataset = map_dataset
        self._infos = {k: _info(k, v, self.describe()) for k, v in types.items()}
        self._lengths: Optional[np.ndarray] = None

    def data_infos(self) -> Dict[str, DataInfo]:
        return self._infos

    def _corpus_num_seqs(self) -> int:
        return len(self.map_dataset)

    def _item(self, i: int) -> Dict[str, np.ndarray]:
        item = self.map_dataset[i]
        out = {}
        for key, info in self._infos.items():
            if key not in item:
                raise DataError("%s: item %i has no key %r" % (self.describe(), i, key))
            out[key] = np.asarray(item[key]).astype(info.dtype, copy=False)
        return out

    def _corpus_seq_lengths(self) -> np.ndarray:
        if self._lengths is None:
            keys = self.get_data_keys()
            self._lengths = np.array([[len(self._item(i)[k]) for k in keys] for i in range(len(self.map_dataset))],
                                     dtype=np.int64).reshape(len(self.map_dataset), len(keys))
        return self._lengths

    def _ordering_lengths(self) -> np.ndarray:
        try:
            return np.array([self.map_dataset.get_seq_len(i) for i in range(len(self.map_dataset))])
        except NotImplementedError:
            return super()._ordering_lengths()

    def _corpus_load(self, corpus_indices: Sequence[int]) -> List[Dict[str, np.ndarray]]:
        return [self._item(i) for i in corpus_indices]

    def _corpus_tag(self, corpus_index: int) -> str:
        return self.map_dataset.get_seq_tag(corpus_index)

    def init_seq_order(self, epoch: int = 1) -> None:
        try:
            order = self.map_dataset.get_seq_order(epoch=epoch)
        except NotImplementedError:
            return super().init_seq_order(epoch)
        self._seq_order = np.asarray(list(order), dtype=np.int64)
        self.epoch = int(epoch or 1)
