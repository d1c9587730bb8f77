"""Chunking as RETURNN cuts sequences: the options (``chunking``, ``min_chunk_size``,
``chunking_variance``), their parsing, and the chunk ranges of one sequence.

The options come from the config (RETURNN copies them into the train dataset's options) or from a
dataset's own dict, which wins (:meth:`Dataset.chunk_options`). Dev/eval datasets are not chunked
unless their dict says so, ``chunk_eval`` is set, or ``on_size_limit = "chunk"``, as in RETURNN.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

from returnn.errors import ConfigError


@dataclass(frozen=True)
class ChunkOptions:
    """How sequences are cut: chunks of ``size`` frames every ``step`` frames while more than
    ``min_chunk_size`` frames are left; with ``variance`` v > 0 each sequence's size and step
    are scaled by ``1 - r * v``, r uniform in [0, 1) from the dataset's epoch RNG (RETURNN's
    ``chunking_variance``).

    RETURNN's per-key form (``chunking = ({"data": 200, "classes": 50}, {"data": 100, "classes": 25})``,
    e.g. targets at a lower frame rate) sets ``key_sizes`` / ``key_steps`` (``key_min``: a per-key
    ``min_chunk_size``); ``size``/``step`` are then those of the first key. A function
    (``func``) is RETURNN's custom chunking: see :mod:`returnn.datasets.key_chunking`."""

    size: int
    step: int
    min_chunk_size: int = 0
    variance: float = 0.0
    key_sizes: Optional[Dict[str, int]] = field(default=None, compare=True)
    key_steps: Optional[Dict[str, int]] = field(default=None, compare=True)
    key_min: Optional[Dict[str, int]] = field(default=None, compare=True)
    func: Optional[Callable[..., Any]] = None

    @property
    def per_key(self) -> bool:
        """Whether keys are cut differently (or by a function): batching then cuts per key."""
        return self.key_sizes is not None or self.func is not None

    def ranges(self, length: int, rng: Optional[random.Random] = None) -> List[Tuple[int, int]]:
        """The [start, end) chunks of a sequence of ``length`` frames. With a variance, one number
        is drawn from ``rng`` per call, as RETURNN draws one per sequence."""
        size, step = self.size, self.step
        if self.variance > 0:
            if rng is None:
                raise ValueError("chunking_variance needs the dataset's random generator")
            scale = 1.0 - rng.random() * self.variance
            size, step = max(int(size * scale), 1), max(int(step * scale), 1)
        return chunk_ranges(length, size, step, self.min_chunk_size)


def chunk_ranges(length: int, size: int, step: int, min_chunk_size: int = 0) -> List[Tuple[int, int]]:
    """RETURNN's chunks of a sequence: [t, min(t + size, length)) for t = 0, step, 2*step, ... as
    long as more than ``min_chunk_size`` frames are left from t (the first chunk always). With
    the default 0 every start inside the sequence gives a chunk, so the end of a sequence also
    comes in shorter trailing chunks (250 frames, 200:100 -> (0, 200), (100, 250), (200, 250)),
    and a sequence of 0 frames gives none."""
    out = []
    start = 0
    while start < length:
        out.append((start, min(start + size, length)))
        start += step
        if length - start <= min_chunk_size:
            break
    return out


def _as_plain(value: Any) -> Any:
    """A NumbersDict as a dict (its broadcast value under ``"*"``), anything else as it is."""
    if hasattr(value, "dict") and hasattr(value, "value") and not isinstance(value, dict):  # NumbersDict
        if not value.dict:
            return value.value
        return dict(value.dict, **({} if value.value is None else {"*": value.value}))
    return value


def _per_key_value(value: Any, what: str, owner: str) -> Any:
    """A chunk size or step given per data key (``{"data": 50, "classes": 50}``, RETURNN's dict
    form) as one number when all keys agree, else the dict (per-key chunking)."""
    value = _as_plain(value)
    if not isinstance(value, dict):
        return value
    values = set(value.values())
    if len(values) == 1:
        return values.pop()
    for key, item in value.items():
        if isinstance(item, bool) or not isinstance(item, int) or item < 0:
            raise ConfigError("%s 'chunking': %s of key %r must be an integer >= 0, got %r" % (owner, what, key, item))
    return dict(value)


def parse_key_chunking(chunking: Any, owner: str = "config key"
                       ) -> Optional[Tuple[Dict[str, int], Dict[str, int]]]:
    """RETURNN's per-key chunking with different values per key: ``({"data": 200, "classes": 50},
    {"data": 100, "classes": 25})`` (or one dict: step = size) -> (sizes, steps); None when every
    key is cut alike (see :func:`parse_chunking`). As RETURNN asserts: both dicts name the same
    keys, sizes are positive, some step is."""
    if isinstance(chunking, dict) or (hasattr(chunking, "dict") and hasattr(chunking, "value")):
        chunking = (chunking, None)
    if not isinstance(chunking, (tuple, list)) or len(chunking) != 2:
        return None
    size, step = (_per_key_value(v, w, owner) for v, w in zip(chunking, ("size", "step")))
    if not isinstance(size, dict) and not isinstance(step, dict):
        return None
    if step in (None, 0):
        step = size
    if not isinstance(size, dict) or not isinstance(step, dict) or sorted(size) != sorted(step):
        raise ConfigError("%s 'chunking': per-key size and step must name the same data keys, got %r"
                          % (owner, chunking))
    if min(size.values()) <= 0 or max(step.values()) <= 0:
        raise ConfigError("%s 'chunking': sizes must be positive and some step too, got %r" % (owner, chunking))
    return dict(size), dict(step)


def parse_chunking(chunking: Any, owner: str = "config key") -> Optional[Tuple[int, int]]:
    """``"200:100"`` -> (200, 100); ``"0"``, ``None``, ``0`` -> None (no chunking). Also RETURNN's
    ``(size, step)`` and per-key dicts: ``{"data": 200}`` or ``({"data": 200}, {"data": 100})``.
    ``owner`` starts error messages (``config key``, or ``dataset dev (HDFDataset): option``)."""
    if isinstance(chunking, dict) or hasattr(chunking, "dict"):
        chunking = (chunking, None)
    if isinstance(chunking, (tuple, list)) and len(chunking) == 2:
        chunking = (_per_key_value(chunking[0], "size", owner), _per_key_value(chunking[1], "step", owner))
        if chunking[1] in (None, 0):
            chunking = (chunking[0], chunking[0])
    if chunking in (None, 0, "0", "", "none", False) or (isinstance(chunking, tuple) and chunking[0] in (None, 0)):
        return None
    if isinstance(chunking, (tuple, list)) and len(chunking) == 2:
        size, step = chunking
    elif isinstance(chunking, int):
        size, step = chunking, chunking
    else:
        text = str(chunking)
        try:
            if ":" in text:
                size, step = (int(v) for v in text.split(":"))
            else:
                size = step = int(text)
        except ValueError:
            raise ConfigError("%s 'chunking': expected 'size:step', got %r" % (owner, chunking)) from None
    try:
        size, step = int(size), int(step)
    except (TypeError, ValueError):
        raise ConfigError("%s 'chunking': expected 'size:step', got %r" % (owner, chunking)) from None
    if size <= 0 or step <= 0:
        raise ConfigError("%s 'chunking': size and step must be positive, got %r" % (owner, chunking))
    return size, step


def parse_min_chunk_size(value: Any, owner: str = "config key") -> int:
    """``min_chunk_size``: an int, or RETURNN's per-key dict (chunking ends when any key has no
    more than its value left; the keys are equally long here, so the largest value counts)."""
    value = _as_plain(value)
    try:
        if isinstance(value, dict):
            value = max([int(v or 0) for v in value.values()] or [0])
        number = int(value or 0)
    except (TypeError, ValueError):
        number = -1
    if number < 0:
        raise ConfigError("%s 'min_chunk_size': expected a frame count >= 0 (or {key: count}), got %r"
                          % (owner, value))
    return number


def parse_chunking_variance(value: Any, owner: str = "config key") -> float:
    """``chunking_variance``: a number >= 0 (0: every chunk as configured)."""
    try:
        number = float(value or 0.0)
    except (TypeError, ValueError):
        number = -1.0
    if not number >= 0.0:  # also NaN
        raise ConfigError("%s 'chunking_variance': expected a number >= 0, got %r" % (owner, value))
    return number


def chunk_options(chunking: Any, min_chunk_size: Any = 0, variance: Any = 0.0,
                  owner: str = "config key") -> Optional[ChunkOptions]:
    """The three options read and checked together; None when ``chunking`` means no chunking.
    ``chunking`` may be any of RETURNN's forms (``Dataset._parse_chunking``): ``"size:step"``, an
    int, ``(size, step)``, per-key dicts or NumbersDicts (alone: step = size), or a function."""
    min_size = parse_min_chunk_size(min_chunk_size, owner)
    var = parse_chunking_variance(variance, owner)
    if callable(chunking) and not isinstance(chunking, type):
        return ChunkOptions(0, 0, min_size, var, func=chunking)
    per_key = parse_key_chunking(chunking, owner)
    if per_key is not None:
        sizes, steps = per_key
        first = sorted(sizes, key=lambda k: (k != "data", k))[0]
        key_min = _as_plain(min_chunk_size)
        key_min = {k: int(v or 0) for k, v in key_min.items()} if isinstance(key_min, dict) else None
        return ChunkOptions(sizes[first], steps[first], min_size, var, key_sizes=sizes, key_steps=steps,
                            key_min=key_min)
    parsed = parse_chunking(chunking, owner)
    return ChunkOptions(parsed[0], parsed[1], min_size, var) if parsed else None
