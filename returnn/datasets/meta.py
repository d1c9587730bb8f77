"""Datasets built from other datasets, with RETURNN's semantics:

* :class:`MetaDataset`: the same sequences, their data keys spread over several datasets (e.g.
  features in one HDF file, alignments in another). Sequences are matched by tag.
* :class:`CombinedDataset`: the union of the sequences of several datasets (multi-task, corpus
  combination); keys a sequence's dataset does not provide are empty.

Sub-datasets are addressed at corpus level (``_corpus_load`` of the sub-dataset), so the parent
alone decides the order.
"""
from __future__ import annotations

import os
import random
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from returnn.datasets.base import DataInfo, Dataset, register_dataset
from returnn.datasets.integrity import tag_positions, unique_tag_positions
from returnn.datasets.text_files import load_seq_list
from returnn.errors import DataError, known_list


def _init_sub(parent: Dataset, key: str, spec: Any, cache_size: Any) -> Dataset:
    from returnn.datasets import init_dataset
    return init_dataset(spec, defaults={"cache_size": cache_size}, name="%s_%s" % (parent.name, key))


def _check_dims(owner: str, infos: Dict[str, DataInfo], data_dims: Optional[Dict[str, Any]]) -> None:
    """``data_dims`` (key -> [dim, ndim]), when given, must agree with the sub-datasets."""
    for key, value in (data_dims or {}).items():
        if key not in infos:
            raise DataError("%s: 'data_dims' names %r, which 'data_map' does not map" % (owner, key))
        dim = value[0] if isinstance(value, (list, tuple)) else value
        info = infos[key]
        ndim = value[1] if isinstance(value, (list, tuple)) and len(value) > 1 else info.ndim
        if int(dim) != info.dim or int(ndim) != info.ndim:
            raise DataError("%s: 'data_dims' says %r is [%s, %s], but its dataset has [%i, %i]"
                            % (owner, key, dim, ndim, info.dim, info.ndim))


def _join_origin(sub: Dataset, origin: str) -> str:
    return "%s, %s" % (sub.describe(), origin) if origin else sub.describe()


def _empty(info: DataInfo) -> np.ndarray:
    return np.zeros((0,) + tuple(info.shape), dtype=info.dtype)


@register_dataset
class MetaDataset(Dataset):
    """``datasets``: key -> dataset dict; ``data_map``: data key -> (dataset key, its data key).

    The sequence list is ``seq_list_file`` (one tag per line, or a literal list, or a dict dataset
    key -> tags / a dict dataset key -> file) or else all tags of the default dataset
    (``seq_order_control_dataset`` or the dataset of ``"data"``); every other dataset must have each
    tag. With ``seq_order_control_dataset``, that dataset's own ``seq_ordering`` and
    ``partition_epoch`` choose the order; otherwise this dataset's own options do.
    ``seq_lens_file`` (a speed-up in RETURNN) is accepted and not needed: lengths are known.
    """

    global_options = ("cache_size",)

    def __init__(self, datasets: Dict[str, Any], data_map: Dict[str, Sequence[str]], seq_list_file: Any = None,
                 seq_order_control_dataset: Optional[str] = None, seq_lens_file: Optional[str] = None,
                 data_dims: Optional[Dict[str, Any]] = None, data_dtypes: Optional[Dict[str, str]] = None,
                 window: int = 1, cache_size: Any = None, **kwargs: Any):
        super().__init__(**kwargs)
        owner = self.describe()
        if not isinstance(datasets, dict) or not isinstance(data_map, dict) or not data_map:
            raise DataError("%s: 'datasets' and 'data_map' must be dicts" % owner)
        if window != 1:
            raise DataError("%s: option 'window' != 1 is not supported (as in RETURNN)" % owner)
        for key, target in data_map.items():
            if not isinstance(target, (list, tuple)) or len(target) != 2 or target[0] not in datasets:
                raise DataError("%s: data_map[%r] must be (dataset key, data key) with a dataset key from "
                                "'datasets' (%s), got %r" % (owner, key, known_list(datasets), target))
        if seq_order_control_dataset is not None and seq_order_control_dataset not in datasets:
            raise DataError("%s: seq_order_control_dataset %r is not in 'datasets' (%s)"
                            % (owner, seq_order_control_dataset, known_list(datasets)))
        if seq_order_control_dataset is None and "data" not in data_map:
            raise DataError("%s: 'data_map' needs a 'data' entry, or set 'seq_order_control_dataset'" % owner)
        self.data_map = {k: (str(v[0]), str(v[1])) for k, v in data_map.items()}
        self.control_key = seq_order_control_dataset
        self.default_key = seq_order_control_dataset or self.data_map["data"][0]
        used = sorted({v[0] for v in self.data_map.values()} | {self.default_key})
        self.datasets: Dict[str, Dataset] = {}
        try:
            for key in used:
                self.datasets[key] = _init_sub(self, key, datasets[key], cache_size)
        except BaseException:
            self.close()
            raise
        self._infos: Dict[str, DataInfo] = {}
        for key, (ds_key, sub_key) in self.data_map.items():
            sub_infos = self.datasets[ds_key].data_infos()
            if sub_key not in sub_infos:
                raise DataError("%s: data_map[%r]: dataset %r has no data key %r (has: %s)"
                                % (owner, key, ds_key, sub_key, known_list(sub_infos)))
            self._infos[key] = sub_infos[sub_key]
        _check_dims(owner, self._infos, data_dims)
        self._seq_list = self._load_seq_lists(seq_list_file)
        self._index = {key: self._match_tags(key) for key in used}
        self._lengths: Optional[np.ndarray] = None

    # ---- sequence list and tag matching
    def _load_seq_lists(self, seq_list_file: Any) -> Dict[str, List[str]]:
        """Dataset key -> tags, all lists of the same length (position = corpus index here). A tag
        twice in one list is an error naming the file and the tag: both entries would be the same
        sequence, where the list meant two."""
        owner = self.describe()
        sources: Dict[str, Any] = {}
        if seq_list_file is None:
            tags = self.datasets[self.default_key].corpus_tags()
            lists: Any = tags
        elif isinstance(seq_list_file, dict):
            lists = {}
            for k, v in seq_list_file.items():
                self.watch_file(v)
                lists[k] = load_seq_list(v, owner)
                sources[k] = v
        else:
            self.watch_file(seq_list_file)
            lists = load_seq_list(seq_list_file, owner)
            if isinstance(lists, dict):
                sources = {k: seq_list_file for k in lists}
            else:
                sources = {k: seq_list_file for k in self.datasets}
        if not isinstance(lists, dict):
            lists = {key: lists for key in self.datasets}
        missing = [k for k in self.datasets if k not in lists]
        if missing:
            raise DataError("%s: seq_list_file has no list for dataset(s) %s" % (owner, known_list(missing)))
        n = len(lists[self.default_key])
        for key in self.datasets:
            if not isinstance(lists[key], list) or len(lists[key]) != n:
                raise DataError("%s: seq_list_file: dataset %r has %i tags, %r has %i"
                                % (owner, key, len(lists[key]), self.default_key, n))
        for key, source in sources.items():
            if key in self.datasets:
                what = ("seq_list_file %s" % source) if isinstance(source, (str, os.PathLike)) else \
                    "seq_list_file (the list for %r)" % key
                unique_tag_positions(lists[key], "%s: %s" % (owner, what), lambda i: "entry %i" % (i + 1))
        return {k: lists[k] for k in self.datasets}

    def _match_tags(self, key: str) -> np.ndarray:
        """Corpus index in dataset ``key`` of each sequence of the list; a missing tag is an error."""
        sub = self.datasets[key]
        position = tag_positions(sub)
        wanted = self._seq_list[key]
        index = np.fromiter((position.get(tag, -1) for tag in wanted), dtype=np.int64, count=len(wanted))
        if len(index) and index.min() < 0:
            missing = np.flatnonzero(index < 0)
            raise DataError("%s: dataset %r has no sequence %r (%i of %i tags missing; sequences are matched by tag)"
                            % (self.describe(), key, wanted[int(missing[0])], len(missing), len(wanted)))
        return index

    # ---- corpus level
    def data_infos(self) -> Dict[str, DataInfo]:
        return self._infos

    def _corpus_num_seqs(self) -> int:
        return len(self._seq_list[self.default_key])

    def _corpus_seq_lengths(self) -> np.ndarray:
        if self._lengths is None:
            keys = self.get_data_keys()
            lengths = np.zeros((self._corpus_num_seqs(), len(keys)), dtype=np.int64)
            for j, key in enumerate(keys):
                ds_key, sub_key = self.data_map[key]
                sub = self.datasets[ds_key]
                col = sub.get_data_keys().index(sub_key)
                sub_lengths = np.asarray(sub._corpus_seq_lengths()).reshape(sub.num_corpus_seqs, -1)
                lengths[:, j] = sub_lengths[self._index[ds_key], col]
            self._lengths = lengths
        return self._lengths

    def _corpus_load(self, corpus_indices: Sequence[int]) -> List[Dict[str, np.ndarray]]:
        idx = np.asarray(corpus_indices, dtype=np.int64)
        out: List[Dict[str, np.ndarray]] = [{} for _ in range(len(idx))]
        for ds_key, sub in self.datasets.items():
            keys = [(k, sk) for k, (dk, sk) in self.data_map.items() if dk == ds_key]
            if not keys:
                continue
            for seq, loaded in zip(out, sub._corpus_load(self._index[ds_key][idx].tolist())):
                for key, sub_key in keys:
                    seq[key] = loaded[sub_key]
        return out

    def _corpus_tag(self, corpus_index: int) -> str:
        return self._seq_list[self.default_key][corpus_index]

    def _prepare_epoch(self, full_epoch: int) -> None:
        for sub in self.datasets.values():
            sub._prepare_epoch(full_epoch)

    def sub_datasets(self) -> List[Dataset]:
        return list(getattr(self, "datasets", {}).values())

    def seq_origin(self, corpus_index: int, key: Optional[str] = None) -> str:
        ds_key = self.data_map[key][0] if key in self.data_map else self.default_key
        sub = self.datasets[ds_key]
        sub_index = int(self._index[ds_key][corpus_index])
        return _join_origin(sub, sub.seq_origin(sub_index, self.data_map[key][1] if key in self.data_map else None))

    def init_seq_order(self, epoch: int = 1) -> None:
        if self.control_key is None:
            super().init_seq_order(epoch)
            return
        epoch = int(epoch or 1)
        control = self.datasets[self.control_key]
        control.init_seq_order(epoch)
        self._prepare_epoch(control._full_epoch(epoch))
        to_here = np.full(control.num_corpus_seqs, -1, dtype=np.int64)
        to_here[self._index[self.control_key]] = np.arange(self._corpus_num_seqs())
        order = to_here[np.asarray(control.seq_order, dtype=np.int64)]
        self._seq_order = self.apply_tag_filter(order[order >= 0])
        self.epoch = epoch

    def close(self) -> None:
        for sub in getattr(self, "datasets", {}).values():
            sub.close()


@register_dataset
class CombinedDataset(Dataset):
    """``datasets``: key -> dataset dict; ``data_map``: (dataset key, its data key) -> data key.

    Each epoch, every sub-dataset orders its own sequences (its ``seq_ordering`` and
    ``partition_epoch`` apply); the union, datasets in sorted key order, is then ordered by this
    dataset's ``seq_ordering`` (``default``: one dataset after the other; ``random_dataset``:
    datasets picked at random (Python's generator, as RETURNN), each keeping its order; any other
    ordering over all sequences, by the length each sub-dataset orders by: RETURNN's
    ``get_estimated_seq_length``) and split by this dataset's ``partition_epoch``.
    """

    global_options = ("cache_size",)

    def __init__(self, datasets: Dict[str, Any], data_map: Dict[Tuple[str, str], str],
                 data_dims: Optional[Dict[str, Any]] = None, data_dtypes: Optional[Dict[str, str]] = None,
                 window: int = 1, cache_size: Any = None, seq_ordering: str = "default", **kwargs: Any):
        self._random_dataset = seq_ordering == "random_dataset"
        super().__init__(seq_ordering="default" if self._random_dataset else seq_ordering, **kwargs)
        owner = self.describe()
        if kwargs.get("seq_order_seq_lens_file") and isinstance(seq_ordering, str) and seq_ordering.split(":")[0] in (
                "sorted", "sorted_reverse", "laplace", "sort_bin_shuffle", "sort_bin_shuffle_x2"):
            raise DataError("%s: seq_order_seq_lens_file with the length ordering %r: RETURNN's CombinedDataset "
                            "cannot map the file's tags (get_all_tags not implemented)" % (owner, seq_ordering))
        if not isinstance(datasets, dict) or not isinstance(data_map, dict) or not data_map:
            raise DataError("%s: 'datasets' and 'data_map' must be dicts" % owner)
        if window != 1:
            raise DataError("%s: option 'window' != 1 is not supported (as in RETURNN)" % owner)
        for source in data_map:
            if not isinstance(source, tuple) or len(source) != 2 or source[0] not in datasets:
                raise DataError("%s: data_map keys must be (dataset key, data key) with a dataset key from "
                                "'datasets' (%s), got %r" % (owner, known_list(datasets), source))
        self.data_map = {(str(s[0]), str(s[1])): str(k) for s, k in data_map.items()}
        self.dataset_keys = sorted({s[0] for s in self.data_map})
        self.datasets: Dict[str, Dataset] = {}
        try:
            for key in self.dataset_keys:
                self.datasets[key] = _init_sub(self, key, datasets[key], cache_size)
        except BaseException:
            self.close()
            raise
        self._infos: Dict[str, DataInfo] = {}
        for (ds_key, sub_key), key in sorted(self.data_map.items()):
            sub_infos = self.datasets[ds_key].data_infos()
            if sub_key not in sub_infos:
                raise DataError("%s: data_map[(%r, %r)]: dataset %r has no data key %r (has: %s)"
                                % (owner, ds_key, sub_key, ds_key, sub_key, known_list(sub_infos)))
            info = sub_infos[sub_key]
            if key in self._infos:
                old = self._infos[key]
                if (old.dim, old.sparse, old.shape) != (info.dim, info.sparse, info.shape):
                    raise DataError("%s: data key %r comes from datasets with different dims (%s vs %s)"
                                    % (owner, key, old, info))
                continue
            self._infos[key] = info
        for key, dtype in (data_dtypes or {}).items():
            if key not in self._infos:
                raise DataError("%s: 'data_dtypes' names %r, which 'data_map' does not map" % (owner, key))
            try:
                info = self._infos[key]
                self._infos[key] = DataInfo(info.dim, info.sparse, str(np.dtype(dtype)), info.labels, info.shape)
            except TypeError:
                raise DataError("%s: data_dtypes[%r]: unknown dtype %r" % (owner, key, dtype))
        _check_dims(owner, self._infos, data_dims)
        self._entries: Optional[np.ndarray] = None  # (n, 2): dataset number, its corpus index
        self._lengths: Optional[np.ndarray] = None

    def _union(self, epoch: int) -> None:
        rows = []
        for d, key in enumerate(self.dataset_keys):
            sub = self.datasets[key]
            sub.init_seq_order(epoch)
            order = np.asarray(sub.seq_order, dtype=np.int64)
            rows.append(np.stack([np.full(len(order), d, dtype=np.int64), order], axis=1))
        self._entries = np.concatenate(rows, axis=0) if rows else np.zeros((0, 2), dtype=np.int64)
        self._lengths = None

    def _ensure_union(self) -> np.ndarray:
        if self._entries is None:
            self._union(self.epoch or 1)
        return self._entries

    def init_seq_order(self, epoch: int = 1) -> None:
        self._union(int(epoch or 1))
        super().init_seq_order(epoch)

    def full_epoch_order(self, full_epoch: int, epoch: Optional[int] = None) -> np.ndarray:
        if not self._random_dataset:
            return super().full_epoch_order(full_epoch, epoch)
        entries = self._ensure_union()
        picks = entries[:, 0].tolist()  # dataset of each position; each keeps its own order
        random.Random(self.random_seed_for_epoch(full_epoch)).shuffle(picks)  # RETURNN's: Python's generator
        picks = np.asarray(picks, dtype=np.int64)
        starts = np.searchsorted(entries[:, 0], np.arange(len(self.dataset_keys)))
        order = np.empty(len(picks), dtype=np.int64)
        for d in range(len(self.dataset_keys)):
            where = np.flatnonzero(picks == d)
            order[where] = starts[d] + np.arange(len(where))
        return order

    # ---- corpus level (the corpus is this epoch's union)
    def data_infos(self) -> Dict[str, DataInfo]:
        return self._infos

    def _corpus_num_seqs(self) -> int:
        return int(len(self._ensure_union()))

    def _ordering_lengths(self) -> np.ndarray:
        """Each sequence's length as its own dataset orders by it (RETURNN's get_estimated_seq_length of the
        sub-dataset: an HDFDataset's 'data')."""
        entries = self._ensure_union()
        out = np.zeros(len(entries), dtype=np.float64)
        for d, ds_key in enumerate(self.dataset_keys):
            rows = np.flatnonzero(entries[:, 0] == d)
            if len(rows):
                out[rows] = np.asarray(self.datasets[ds_key]._ordering_lengths())[entries[rows, 1]]
        return out

    def _corpus_seq_lengths(self) -> np.ndarray:
        entries = self._ensure_union()
        if self._lengths is None:
            keys = self.get_data_keys()
            lengths = np.zeros((len(entries), len(keys)), dtype=np.int64)
            for d, ds_key in enumerate(self.dataset_keys):
                sub = self.datasets[ds_key]
                rows = np.flatnonzero(entries[:, 0] == d)
                sub_keys = sub.get_data_keys()
                sub_lengths = np.asarray(sub._corpus_seq_lengths()).reshape(sub.num_corpus_seqs, -1)
                for (dk, sub_key), key in self.data_map.items():
                    if dk == ds_key:
                        lengths[rows, keys.index(key)] = sub_lengths[entries[rows, 1], sub_keys.index(sub_key)]
            self._lengths = lengths
        return self._lengths

    def _corpus_load(self, corpus_indices: Sequence[int]) -> List[Dict[str, np.ndarray]]:
        entries = self._ensure_union()
        idx = np.asarray(corpus_indices, dtype=np.int64)
        out: List[Dict[str, np.ndarray]] = [{} for _ in range(len(idx))]
        for d, ds_key in enumerate(self.dataset_keys):
            pos = np.flatnonzero(entries[idx, 0] == d)
            if not len(pos):
                continue
            mapping = [(sub_key, key) for (dk, sub_key), key in self.data_map.items() if dk == ds_key]
            loaded = self.datasets[ds_key]._corpus_load(entries[idx[pos], 1].tolist())
            for p, seq in zip(pos.tolist(), loaded):
                for sub_key, key in mapping:
                    out[p][key] = np.asarray(seq[sub_key]).astype(self._infos[key].dtype, copy=False)
        for seq in out:
            for key, info in self._infos.items():
                if key not in seq:
                    seq[key] = _empty(info)
        return out

    def _corpus_tag(self, corpus_index: int) -> str:
        d, sub_index = self._ensure_union()[corpus_index]
        return self.datasets[self.dataset_keys[int(d)]]._corpus_tag(int(sub_index))

    def sub_datasets(self) -> List[Dataset]:
        return list(getattr(self, "datasets", {}).values())

    def seq_origin(self, corpus_index: int, key: Optional[str] = None) -> str:
        d, sub_index = self._ensure_union()[corpus_index]
        ds_key = self.dataset_keys[int(d)]
        sub = self.datasets[ds_key]
        sub_key = next((sk for (dk, sk), k in self.data_map.items() if dk == ds_key and k == key), None)
        return _join_origin(sub, sub.seq_origin(int(sub_index), sub_key))

    def close(self) -> None:
        for sub in getattr(self, "datasets", {}).values():
            sub.close()


@register_dataset
class ConcatDataset(CombinedDataset):
    """``datasets``: a list of dataset dicts with the same data keys and dims; an epoch is all
    sequences of the first (in its own order), then of the second, ... (RETURNN's ConcatDataset)."""

    def __init__(self, datasets: Sequence[Any], cache_size: Any = None, **kwargs: Any):
        name = str(kwargs.get("name") or "ConcatDataset")
        if not isinstance(datasets, (list, tuple)) or not datasets:
            raise DataError("dataset %s (ConcatDataset): 'datasets' must be a non-empty list of dataset dicts" % name)
        if kwargs.get("seq_ordering", "default") != "default":
            raise DataError("dataset %s (ConcatDataset): only seq_ordering 'default' (as in RETURNN); order the "
                            "sub-datasets instead" % name)
        from returnn.datasets import init_dataset
        first = init_dataset(datasets[0], defaults={"cache_size": cache_size}, name="%s_0" % name)
        keys = first.get_data_keys()
        first.close()
        subs = {"%04i" % i: spec for i, spec in enumerate(datasets)}
        super().__init__(datasets=subs, data_map={(k, key): key for k in subs for key in keys},
                         cache_size=cache_size, **kwargs)
