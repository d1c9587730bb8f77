"""Chunking as RETURNN cuts sequences: the options (``chunking``, ``min_chunk_size``,
``chunking_variance``), their parsing, and the chunk ranges of one sequence.

The options come from the config (RETURNN copies them into the train dataset's options) or from a
dataset's own dict, which wins (:meth:`Dataset.chunk_options`). Dev/eval datasets are not chunked
unless their dict says so, ``chunk_eval`` is set, or ``on_size_limit = "chunk"``, as in RETURNN.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, List, Optional, Tuple

from returnn.errors import ConfigError


@dataclass(frozen=True)
class ChunkOptions:
    """How sequences are cut: chunks of ``size`` frames every ``step`` frames while more than
    ``min_chunk_size`` frames are left; with ``variance`` v > 0 each sequence's size and step
    are scaled by ``1 - r * v``, r uniform in [0, 1) from the dataset's epoch RNG (RETURNN's
    ``chunking_variance``)."""

    size: int
    step: int
    min_chunk_size: int = 0
    variance: float = 0.0

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


def _per_key_value(value: Any, what: str, owner: str) -> Any:
    """A chunk size or step given per data key (``{"data": 50, "classes": 50}``, RETURNN's dict
    form) as one number; keys with different values are not supported here."""
    if hasattr(value, "dict") and hasattr(value, "value"):  # NumbersDict
        value = dict(value.dict, **({} if value.value is None else {"*": value.value}))
    if not isinstance(value, dict):
        return value
    values = set(value.values())
    if len(values) != 1:
        raise ConfigError("%s 'chunking': a %s per data key must be the same for all keys here, got %r"
                          % (owner, what, value))
    return values.pop()


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
    """The three options read and checked together; None when ``chunking`` means no chunking."""
    min_size = parse_min_chunk_size(min_chunk_size, owner)
    var = parse_chunking_variance(variance, owner)
    parsed = parse_chunking(chunking, owner)
    return ChunkOptions(parsed[0], parsed[1], min_size, var) if parsed else None
