"""Output dims a layer leaves undefined, filled as RETURNN's ``LayerBase._post_init_output`` fills
them: an ``out_type`` given by shape (``"shape": (None,)``) makes fresh dynamic axes; RETURNN gives
each the matching dim of, in this order, the ``size_target`` data (when the network evaluates: tasks
train, eval, search), else the ``target`` data (training networks only), then the sources.

The network says which data lead for the layer it is building (:func:`leading`), the layer asks
(:func:`leading_data`) and fills its fresh axes (:func:`fill_dynamic`).
"""
from __future__ import annotations

import contextlib
from typing import Dict, Iterator, List, Sequence

from returnn.tensor import Data, Dim

_LEADING: Dict[str, List[Data]] = {}


@contextlib.contextmanager
def leading(name: str, data: Sequence[Data]) -> Iterator[None]:
    """While layer ``name`` is built: ``data`` give its undefined dims before its sources do."""
    previous = _LEADING.get(name)
    _LEADING[name] = list(data)
    try:
        yield
    finally:
        if previous is None:
            _LEADING.pop(name, None)
        else:
            _LEADING[name] = previous


def leading_data(name: str) -> List[Data]:
    """The data whose dims come first for layer ``name`` (see :func:`leading`)."""
    return list(_LEADING.get(name, ()))


def _dynamic(dims: Sequence[Dim]) -> List[Dim]:
    return [d for d in dims if d.is_dynamic() and not d.is_batch_dim()]


def fill_dynamic(new: Data, positions: Sequence[int], candidates: Sequence[Sequence[Dim]]) -> Data:
    """``new`` with its fresh dynamic axes at ``positions`` replaced, in order, by the dynamic dims
    of ``candidates`` (each a dim list, in order; dims ``new`` has already and repeats skipped);
    axes left without a candidate stay fresh."""
    pool: List[Dim] = []
    for dims in candidates:
        for d in _dynamic(dims):
            if d not in pool and d not in new.dims:
                pool.append(d)
    dims = list(new.dims)
    for pos, dim in zip(positions, pool):
        dims[pos] = dim
    return new.copy(dims=dims)
