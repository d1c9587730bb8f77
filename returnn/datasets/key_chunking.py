"""Chunking per data key, as RETURNN's ``Dataset.iterate_seqs`` cuts when keys differ: per-key chunk
sizes and steps (``chunking = ({"data": 200, "classes": 50}, {"data": 100, "classes": 25})``, targets at
a lower frame rate), keys of different lengths, and RETURNN's custom chunking function.

Per sequence (lengths per key), with the *default key* ``data`` (else the first key by name; the first
key with a positive step if its step is 0):

- a key cut with the default key's step must be as long as it, unless it holds at most one frame:
  such a key comes whole with every chunk (RETURNN's special case); a key with another step must
  give as many chunks as the default key (``(length - max(min, 1)) // step + 1``);
- chunk i of key k is ``[t_k, min(t_k + size_k, length_k))``, ``t_k = i * step_k``, while the
  default key has frames from ``t``; cutting ends when any key has no more than its
  ``min_chunk_size`` frames left after the step (a whole one-frame key with a step ends it after
  the first chunk, as in RETURNN);
- ``chunking_variance`` v: one draw r per sequence scales every key's size and step by
  ``1 - r * v`` (at least 1), keys whose original size is a multiple of the smallest-step key's
  keep that ratio.

Keys the chunking dict does not name (data keys the network does not read, say) are cut like the
default key when as long as it, else come whole.

A function ``chunking(dataset, seq_idx_start, recurrent_net, used_data_keys, **kwargs)`` yields
``(seq_idx, start, end)`` with per-key starts and ends (NumbersDict, dict or int), as RETURNN's
``custom_chunking_func``; the dataset offers RETURNN's ``num_seqs``, ``is_less_than_num_seqs``,
``get_seq_length`` (a NumbersDict) and ``get_tag``.
"""
from __future__ import annotations

import random
from typing import Any, Dict, Iterator, List, Optional, Tuple

from returnn.datasets.chunking import ChunkOptions
from returnn.errors import DataError

KeyRanges = Dict[str, Tuple[int, int]]


def _default_key(keys: List[str], steps: Dict[str, int]) -> str:
    default = "data" if "data" in keys else sorted(keys)[0]
    if steps[default] == 0:
        default = [k for k in sorted(keys) if steps[k] > 0][0]
    return default


def key_chunks(opts: ChunkOptions, lengths: Dict[str, int], rng: Optional[random.Random],
               owner: str = "dataset") -> List[KeyRanges]:
    """The chunks of one sequence, per key ``[start, end)`` (see the module docstring)."""
    keys = list(lengths)
    named = opts.key_sizes or {}
    ref = "data" if "data" in named else sorted(named)[0] if named else None
    size_orig: Dict[str, int] = {}
    step_orig: Dict[str, int] = {}
    for k in keys:
        if k in named:
            size_orig[k], step_orig[k] = named[k], opts.key_steps[k]
        else:  # not named: like the default key
            size_orig[k], step_orig[k] = (named[ref], opts.key_steps[ref]) if ref else (opts.size, opts.step)
    default = _default_key(keys, step_orig)
    size, step = dict(size_orig), dict(step_orig)
    if opts.variance > 0:
        if rng is None:
            raise ValueError("chunking_variance needs the dataset's random generator")
        scale = 1.0 - rng.random() * opts.variance
        for k in keys:
            size[k] = max(int(size_orig[k] * scale), 1)
            step[k] = max(int(step_orig[k] * scale), 1)
        smallest = [k for k in sorted(keys, key=lambda key: (step_orig[key], key)) if step_orig[k] > 0][0]
        for k in keys:
            if size_orig[k] > size_orig[smallest] and size_orig[k] % size_orig[smallest] == 0:
                ratio = size_orig[k] // size_orig[smallest]
                size[k], step[k] = size[smallest] * ratio, step[smallest] * ratio
    minimum = {k: int((opts.key_min or {}).get(k, 0 if opts.key_min else opts.min_chunk_size) or 0) for k in keys}
    whole = []
    for k in keys:
        if step[k] == step[default] and lengths[k] == lengths[default]:
            continue
        if lengths[k] <= 1 or (k not in named and named):
            whole.append(k)
            continue
        if step[k] == step[default]:
            raise DataError("%s: chunking needs the data keys cut alike to be equally long, got lengths %s"
                            % (owner, ", ".join("%s=%i" % kv for kv in sorted(lengths.items()))))
        count = (lengths[k] - (minimum[k] or 1)) // step[k] + 1
        count_default = (lengths[default] - (minimum[default] or 1)) // step[default] + 1
        if count != count_default:
            raise DataError("%s: chunking: key %r gives %i chunks, %r %i (lengths %s, sizes %s, steps %s)"
                            % (owner, k, count, default, count_default, lengths, size, step))
    out: List[KeyRanges] = []
    t = {k: 0 for k in keys}
    while lengths[default] > t[default]:
        out.append({k: (0, lengths[k]) if k in whole else (t[k], min(t[k] + size[k], lengths[k])) for k in keys})
        t = {k: t[k] + step[k] for k in keys}
        if any(lengths[k] - t[k] <= minimum[k] for k in keys):
            break
    return out


def _per_key(value: Any, keys: List[str], what: str) -> Dict[str, int]:
    if isinstance(value, (int,)) and not isinstance(value, bool):
        return {k: int(value) for k in keys}
    get = value.get if hasattr(value, "get") else None
    if get is None:
        raise DataError("chunking function: %s must be an int, a dict or a NumbersDict, got %r" % (what, value))
    out = {}
    for k in keys:
        v = get(k)
        if v is None:
            raise DataError("chunking function: %s %r has no value for data key %r" % (what, value, k))
        out[k] = int(v)
    return out


def function_chunks(func: Any, dataset: Any, keys: List[str]) -> Iterator[Tuple[int, KeyRanges]]:
    """``(seq_idx, {key: (start, end)})`` from RETURNN's custom chunking function."""
    for item in func(dataset=dataset, seq_idx_start=0, recurrent_net=True, used_data_keys=None):
        seq_idx, start, end = item
        starts, ends = _per_key(start, keys, "start"), _per_key(end, keys, "end")
        yield int(seq_idx), {k: (starts[k], ends[k]) for k in keys}
