"""RETURNN's marked dims (``returnn.tensor.marked_dim``): markers around a :class:`Dim` in a layer's
``out_shape`` set. Configs that returnn_common serialized import them
(``from returnn.tensor.marked_dim import ImplicitDynSizeDim, ImplicitSparseDim``) and name, beside the
output's explicit dims, the dims it has only implicitly:

- ``ImplicitSparseDim(d)``: ``d`` is the output's sparse dim (class indices into ``d``), not one of its axes;
- ``ImplicitDynSizeDim(d)``: an axis' sequence lengths vary over ``d`` which is not an axis (a batch-less
  ``range_over_dim`` of the time axis: its lengths are per sequence of the batch);
- ``OptionalDim(d)``: ``d`` may be an axis of the output or not.

The check: :func:`out_shape_problems` (RETURNN's ``Data.verify_out_shape``).
"""
from __future__ import annotations

from typing import Any, Iterable, List, Sequence, Tuple

from returnn.tensor.dim import Dim


class MarkedDim:
    """A dim with a marker; equal to another of the same class around an equal dim."""

    def __init__(self, tag: Dim):
        if not isinstance(tag, Dim):
            raise TypeError("%s expects a Dim, got %r" % (type(self).__name__, tag))
        self.tag = tag

    def __repr__(self) -> str:
        return "%s(%r)" % (type(self).__name__, self.tag)

    def _eq_tuple(self) -> Tuple[Any, Dim]:
        return type(self), self.tag

    def __hash__(self) -> int:
        return hash(self._eq_tuple())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MarkedDim) and self._eq_tuple() == other._eq_tuple()

    def __ne__(self, other: object) -> bool:
        return not self == other


class ImplicitDim(MarkedDim):
    """A dim the output has implicitly (not as an axis)."""


class ImplicitSparseDim(ImplicitDim):
    """The output's sparse dim (``Data.sparse_dim``), not one of its axes."""


class ImplicitDynSizeDim(ImplicitDim):
    """A dim the sequence lengths of one of the output's axes vary over, not one of its axes."""


class OptionalDim(MarkedDim):
    """A dim the output may have as an axis or not."""


def out_shape_problems(data: Any, out_shape: Iterable[Any], optional: Sequence[Dim] = ()) -> List[str]:
    """What does not hold of ``out_shape`` (a set of dims and marked dims) for ``data`` (a
    :class:`returnn.tensor.Data`), as RETURNN's ``Data.verify_out_shape``: each of the output's dims and
    each dim it has implicitly (its sparse dim when not an axis; the batch when it has a dynamic axis but
    no batch axis, the axis' lengths being per sequence, not one for the batch: ``scalar_sizes``) named once, marked or not; an
    ``ImplicitDim`` must be implicit; an ``OptionalDim`` and the ``optional`` dims may be missing (and
    imply nothing)."""
    out_shape = list(out_shape)
    dims = list(data.dims)
    implicit: List[Dim] = []
    if data.sparse_dim is not None and not any(data.sparse_dim == o for o in dims):
        implicit.append(data.sparse_dim)
    # (a dim of one size for the whole batch, e.g. top_k's with a scalar k: no implicit batch)
    dynamic = [o for o in dims if o.dimension is None and not o.is_batch_dim() and not any(o == d for d in optional)
               and not getattr(o, "scalar_sizes", False)]
    if dynamic and not any(o.is_batch_dim() for o in dims):
        from returnn.tensor.dim import batch_dim
        implicit.append(batch_dim)
    # RETURNN: the dims the lengths of an axis vary over (Dim.dyn_size_ext), when not axes; this engine
    # knows them for the batch only, another one named as ImplicitDynSizeDim is taken so when there is a
    # dynamic axis
    implicit += [d.tag for d in out_shape if isinstance(d, ImplicitDynSizeDim) and dynamic
                 and not any(d.tag == o for o in dims + implicit)]
    remaining = dims + implicit
    problems = []
    for d in out_shape:
        tag = d.tag if isinstance(d, MarkedDim) else d
        if isinstance(d, ImplicitDim) and not any(tag == o for o in implicit):
            problems.append("%r is not an implicit dim of it" % d)
            continue
        found = [i for i, o in enumerate(remaining) if tag == o]
        if not found:
            if not isinstance(d, OptionalDim):
                problems.append("%s is not in it" % tag.short_repr())
            continue
        del remaining[found[0]]
    remaining = [o for o in remaining if not any(o == d for d in optional)]
    if remaining:
        problems.append("missing in 'out_shape': %s" % ", ".join(o.short_repr() for o in remaining))
    return problems
