"""RETURNN's ``window`` key: each input frame gets its neighbours' features appended.

With ``window = W`` (an even W becomes W + 1, as in RETURNN), frame t of ``data`` becomes the
concatenation of frames t - W//2 ... t + W//2 (zeros beyond the sequence ends), so the feature
dim grows to ``W * dim``. The window is taken over the whole sequence, before chunking.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence

import numpy as np

from returnn.datasets.base import DataInfo, Dataset
from returnn.errors import ConfigError, DataError


def sliding_window(x: np.ndarray, window: int) -> np.ndarray:
    """(T, D) -> (T, window * D), zero-padded at both ends."""
    half = window // 2
    padded = np.concatenate([np.zeros((half,) + x.shape[1:], x.dtype), x, np.zeros((half,) + x.shape[1:], x.dtype)])
    return np.concatenate([padded[i:i + len(x)] for i in range(window)], axis=1)


class WindowedDataset:
    """A dataset whose ``data`` key is windowed; everything else is the wrapped dataset's."""

    def __init__(self, dataset: Dataset, window: int):
        if window < 1:
            raise ConfigError("config key 'window': expected an int >= 1, got %r" % (window,))
        info = dataset.data_infos().get("data")
        if info is None or info.sparse or len(info.shape) != 1:
            raise DataError("config key 'window' needs dense (time, feature) 'data' in dataset %s" % dataset.name)
        object.__setattr__(self, "inner", dataset)
        object.__setattr__(self, "window", window + 1 if window % 2 == 0 else window)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self.inner, name, value)

    def data_infos(self) -> Dict[str, DataInfo]:
        infos = dict(self.inner.data_infos())
        raw = infos["data"]
        infos["data"] = DataInfo(raw.dim * self.window, False, raw.dtype, shape=(raw.dim * self.window,))
        return infos

    def get_data_dim(self, key: str) -> int:
        return self.data_infos()[key].dim if key == "data" else self.inner.get_data_dim(key)

    def get_data_shape(self, key: str) -> tuple:
        return self.data_infos()[key].shape if key == "data" else self.inner.get_data_shape(key)

    @property
    def num_outputs(self) -> Dict[str, List[int]]:
        return {k: [i.dim, i.ndim] for k, i in self.data_infos().items()}

    def get_seqs(self, seq_indices: Sequence[int]) -> List[Dict[str, np.ndarray]]:
        seqs = self.inner.get_seqs(seq_indices)
        return [dict(seq, data=sliding_window(seq["data"], self.window)) for seq in seqs]

    def get_data(self, seq_idx: int, key: str) -> np.ndarray:
        return self.get_seqs([seq_idx])[0][key]
