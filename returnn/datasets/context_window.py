"""RETURNN's ``context_window`` (a config key and a dataset option): each batch entry (a whole sequence
or a chunk) of the named data keys gets extra frames before and after it, taken from the sequence
where it has them and zeros beyond its ends. Frame-wise targets keep their length, so a network that
shrinks its input by the context (convolutions without padding) lines up with them again.

Forms, as RETURNN's Dataset: an int ``n`` is ``{"data": n}``; a dict ``{key: n}`` gives each key a
window of ``n`` frames in total (the frame itself included), ``(n - 1) // 2`` of them before and the
rest after (an even window puts its extra frame after, like a convolution with an even kernel);
a pair ``({key: left}, {key: right})`` gives the frames before and after directly. Keys not named get
no context.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import numpy as np

from returnn.errors import DataError

Context = Dict[str, Tuple[int, int]]  # data key -> (frames before, frames after)


def _count(owner: str, key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise DataError("%s: context_window for key %r must be an int >= 0, got %r" % (owner, key, value))
    return int(value)


def _as_dict(owner: str, value: Any) -> Dict[str, Any]:
    if hasattr(value, "dict") and hasattr(value, "value") and not isinstance(value, dict):  # NumbersDict
        if value.value is not None:
            raise DataError("%s: context_window needs data keys (a NumbersDict without keys is ambiguous), got %r"
                            % (owner, value))
        value = value.dict
    if not isinstance(value, dict):
        raise DataError("%s: context_window must be an int, a dict {data key: frames} or a pair of such dicts, "
                        "got %r" % (owner, value))
    return value


def parse_context_window(value: Any, owner: str) -> Optional[Context]:
    """The per-key (before, after) frame counts of a ``context_window`` value; None when it adds none."""
    if value is None:
        return None
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise DataError("%s: context_window as a pair must be (left dict, right dict), got %r" % (owner, value))
        left, right = (_as_dict(owner, v) for v in value)
        out = {k: (_count(owner, k, left.get(k, 0)), _count(owner, k, right.get(k, 0)))
               for k in list(left) + [k for k in right if k not in left]}
    else:
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            value = {"data": value}
        out = {}
        for key, window in _as_dict(owner, value).items():
            total = max(_count(owner, key, window), 1) - 1
            out[key] = (total // 2, total - total // 2)
    out = {k: v for k, v in out.items() if v != (0, 0)}
    return out or None


def extra_frames(context: Optional[Context], keys: Any) -> np.ndarray:
    """(num_keys,) frames each entry of ``keys`` grows by."""
    if not context:
        return np.zeros(len(keys), dtype=np.int64)
    return np.array([sum(context.get(k, (0, 0))) for k in keys], dtype=np.int64)


def slice_pad_zeros(x: np.ndarray, begin: int, end: int) -> np.ndarray:
    """``x[begin:end]`` along the first axis, where the frames outside ``[0, len(x))`` are zeros."""
    pad_before, pad_after = max(0, -begin), max(0, end - len(x))
    lo, hi = min(max(0, begin), len(x)), max(0, min(len(x), end))
    inner = x[lo:hi] if hi > lo else x[:0]
    if not pad_before and not pad_after:
        return inner
    out = np.zeros((max(0, end - begin),) + x.shape[1:], dtype=x.dtype)
    out[pad_before:pad_before + len(inner)] = inner
    return out


def pop_context_window(spec: Any, config_value: Any, owner: str) -> Tuple[Any, Optional[Context]]:
    """A train/dev/eval/search dataset entry without its ``context_window`` option, and the context
    its batches get: the dataset's own option, else the config key's (RETURNN copies the key into
    each dataset it creates from the config)."""
    value = config_value
    if isinstance(spec, dict) and "context_window" in spec:
        spec = dict(spec)
        value = spec.pop("context_window")
    return spec, parse_context_window(value, owner)
