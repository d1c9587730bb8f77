"""Datasets that stand for another one: ``VariableDataset`` (a new inner dataset per sub-epoch from a
config function) and ``MultiProcDataset`` (RETURNN loads the inner dataset in worker processes for
speed; the sequences, their order and the epochs are the inner dataset's, so here it *is* the inner
dataset: its dict with the MultiProcDataset's own options as defaults, as RETURNN passes them on;
``num_workers``, ``buffer_size`` and ``sharding_method`` only change speed)."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from returnn.datasets.base import DataInfo, Dataset, register_dataset
from returnn.errors import DataError


class DelegatingDataset(Dataset):
    """A dataset whose corpus and epoch order are those of ``self.inner`` (set by subclasses)."""

    inner: Dataset

    def data_infos(self) -> Dict[str, DataInfo]:
        return self.inner.data_infos()

    def _corpus_num_seqs(self) -> int:
        return self.inner._corpus_num_seqs()

    def _corpus_seq_lengths(self) -> np.ndarray:
        return self.inner._corpus_seq_lengths()

    def _corpus_load(self, corpus_indices: Sequence[int]) -> List[Dict[str, np.ndarray]]:
        return self.inner._corpus_load(corpus_indices)

    def _corpus_tag(self, corpus_index: int) -> str:
        return self.inner._corpus_tag(corpus_index)

    def _select(self, epoch: int) -> None:
        """Hook: choose ``self.inner`` for ``epoch``."""

    def sub_datasets(self) -> List[Dataset]:
        return [self.inner] if "inner" in self.__dict__ else []

    def seq_origin(self, corpus_index: int, key: Optional[str] = None) -> str:
        return self.inner.seq_origin(corpus_index, key)

    def init_seq_order(self, epoch: int = 1) -> None:
        epoch = int(epoch or 1)
        self._select(epoch)
        self.inner.init_seq_order(epoch)
        self._seq_order = self.inner.seq_order
        self.epoch = epoch


@register_dataset
class VariableDataset(DelegatingDataset):
    """RETURNN's: ``get_dataset(*, epoch, **_) -> dataset dict`` is called for every (sub-)epoch; the
    last ``dataset_lru_cache_size`` datasets are kept and reused when the dict is the same."""

    def __init__(self, get_dataset: Callable[..., Dict[str, Any]], dataset_lru_cache_size: int = 1,
                 always_same_tags: bool = False, **kwargs: Any):
        super().__init__(**kwargs)
        if not callable(get_dataset):
            raise DataError("%s: option 'get_dataset' must be a function (epoch -> dataset dict), got %r"
                            % (self.describe(), get_dataset))
        self._get_dataset = get_dataset
        self._cache_size = max(1, int(dataset_lru_cache_size))
        self._cache: List[Any] = []  # [(dict, dataset)], most recent last
        self._select(1)

    def _select(self, epoch: int) -> None:
        from returnn.datasets import init_dataset
        spec = self._get_dataset(self=self, epoch=epoch)
        if not isinstance(spec, dict):
            raise DataError("%s: get_dataset must return a dataset dict, got %r" % (self.describe(), spec))
        for i, (known, dataset) in enumerate(self._cache):
            if _same_spec(known, spec):
                self._cache.append(self._cache.pop(i))
                self.inner = dataset
                return
        self.inner = init_dataset(spec, name="%s_epoch%i" % (self.name, epoch))
        self._cache = (self._cache + [(spec, self.inner)])[-self._cache_size:]


def _same_spec(a: Any, b: Any) -> bool:
    """Equality of dataset dicts that may hold numpy arrays (RETURNN compares them made hashable)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_spec(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same_spec(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    try:
        return bool(a == b)
    except Exception:
        return a is b


class MultiProcDataset:
    """RETURNN's ``MultiProcDataset(dataset=..., num_workers=N, buffer_size=M)``: builds the inner
    dataset (see the module docstring)."""

    def __new__(cls, dataset: Dict[str, Any], num_workers: int = 1, buffer_size: int = 1,
                sharding_method: str = "seq_order", name: Optional[str] = None, **kwargs: Any) -> Dataset:
        from returnn.datasets import init_dataset
        if not isinstance(dataset, dict):
            raise DataError("dataset %s (MultiProcDataset): option 'dataset' must be a dataset dict, got %r"
                            % (name or "?", dataset))
        if sharding_method not in ("seq_order", "dedicated"):
            raise DataError("dataset %s (MultiProcDataset): sharding_method must be 'seq_order' or 'dedicated', "
                            "got %r" % (name or "?", sharding_method))
        spec = dict(dataset)
        for key, value in kwargs.items():
            spec.setdefault(key, value)
        return init_dataset(spec, name=name)


register_dataset(MultiProcDataset)  # type: ignore[arg-type]
