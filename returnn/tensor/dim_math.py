"""Arithmetic on dims, as RETURNN's dim math: ``time * 2``, ``2 * time``, ``time + 1``, ``time - 1``,
``time // 2``, ``time.ceildiv_right(2)``, ``a + b`` of two dims, ...

A result is a new :class:`~returnn.tensor.dim.Dim` whose static size is computed when the operands
are static, and whose ``derived_from_op`` records ``(kind, inputs)`` so its per-sequence sizes can
be computed from its inputs' (:func:`dyn_size_of`). The same operation on the same dim gives the
same Dim object (cached on the operand's base, as RETURNN does), so ``time // 2`` written twice in
a config names one axis. Simplifications as RETURNN: ``x + 0``, ``x * 1``, ``x // 1`` are ``x``;
``(x * n) // n`` is ``x``.

Kinds: ``add``, ``sub``, ``mul``, ``floordiv``, ``truediv`` (exact division), ``ceildiv``, ``truediv_left`` and
``ceildiv_left`` (RETURNN's ``div_left``/``ceildiv_left``: divided by a left factor); inputs are
Dims or ints, in the order of the operation (``2 * time``: ``mul`` of ``[2, time]``).
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

Operand = Union["Dim", int]  # noqa: F821


def _static(x: Any) -> Optional[int]:
    if isinstance(x, int) and not isinstance(x, bool):
        return x
    return x.dimension


def _ceildiv(a: Any, b: Any) -> Any:
    return -(-a // b)


_OPS = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "floordiv": lambda a, b: a // b,
    "truediv": lambda a, b: a // b,
    "ceildiv": _ceildiv,
    "truediv_left": lambda a, b: a // b,
    "ceildiv_left": _ceildiv,
}
_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "floordiv": "//", "truediv": "/", "ceildiv": "/^", "truediv_left": " /l ",
           "ceildiv_left": " /^l "}
_DIVS = ("floordiv", "truediv", "ceildiv", "truediv_left", "ceildiv_left")


def _desc(x: Operand) -> str:
    return str(x) if isinstance(x, int) else x.description


def _operand_desc(x: Operand) -> str:
    """RETURNN's ``_get_description(brackets=True)`` of an operand (an int as it is)."""
    from returnn.tensor.dim_tree import bracketed
    return str(x) if isinstance(x, int) else bracketed(x.description)


def bin_op(kind: str, left: Operand, right: Operand) -> "Dim":  # noqa: F821
    """``left <kind> right`` as a Dim (one of them is a Dim); cached on the Dim operand's base."""
    from returnn.tensor.dim import Dim, DimTypes
    if not isinstance(left, Dim) and not isinstance(right, Dim):
        raise TypeError("dim math needs a Dim operand, got %r and %r" % (left, right))
    for x in (left, right):
        if not isinstance(x, (Dim, int)) or isinstance(x, bool):
            raise TypeError("dim math: operands must be Dims or ints, got %r" % (x,))
    from returnn.tensor import dim_match
    if kind == "mul":
        res = dim_match.multiplicative(left, right)
        if res is not None:
            return res
    tree = _tree_op(kind, left, right)
    if tree is not None:
        from returnn.tensor.dim_tree import shifted_dim
        return shifted_dim(tree[0], [tree[1]])
    if kind == "sub" and isinstance(left, Dim):  # RETURNN's sub_right: (a + b) - b is a, else a + (-b)
        op = dim_match.op_of(left)
        if op and op[0] == "add" and _same(op[1][1], right):
            return op[1][0]
        return bin_op("add", left, -right)
    if kind == "add":
        res = dim_match.additive(left, right)
        if res is not None:
            return res
    return generic(kind, left, right)


def generic(kind: str, left: Operand, right: Operand) -> "Dim":  # noqa: F821
    """``left <kind> right`` as a Dim of its own (cached), after RETURNN's plain simplifications."""
    from returnn.tensor.dim import Dim, DimTypes
    # RETURNN's simplifications
    if kind in ("add", "sub") and right == 0 and isinstance(right, int):
        return left
    if kind == "add" and left == 0 and isinstance(left, int):
        return right
    if kind == "mul" and isinstance(right, int) and right == 1:
        return left
    if kind == "mul" and isinstance(left, int) and left == 1:
        return right
    if kind in _DIVS and isinstance(right, int) and right == 1:
        return left
    if kind in ("floordiv", "truediv", "ceildiv") and isinstance(left, Dim) and left.derived_from_op \
            and left.derived_from_op[0] == "mul" and _same(left.derived_from_op[1][1], right):
        return left.derived_from_op[1][0]
    if kind in ("truediv_left", "ceildiv_left") and isinstance(left, Dim) and left.derived_from_op \
            and left.derived_from_op[0] == "mul" and _same(left.derived_from_op[1][0], right):
        return left.derived_from_op[1][1]  # (n * x) /l n
    anchor = left if isinstance(left, Dim) else right
    key = (kind, "right" if anchor is left else "left", _key(right if anchor is left else left))
    cache = anchor.get_same_base().__dict__.setdefault("_math_cache", {})
    if key in cache:
        return cache[key]
    a, b = _static(left), _static(right)
    size = None
    if a is not None and b is not None:
        if kind in ("truediv", "truediv_left") and a % b:
            raise ValueError("dim math: %s / %s does not divide exactly" % (_desc(left), _desc(right)))
        size = _OPS[kind](a, b)
    # a negative static size (RETURNN's ``window * -1``, a term of a sum such as a window's padded time) is kept
    # as RETURNN keeps it; a layer's axis of negative size fails where the axis is made
    negative, size = (size, None) if size is not None and size < 0 else (None, size)
    # RETURNN's _get_merged_dim_kind: feature if a feature dim takes part, else spatial
    kinds = {x.kind for x in (left, right) if isinstance(x, Dim) and not x.is_batch_dim()}
    out = Dim(size, kind=DimTypes.Feature if DimTypes.Feature in kinds else DimTypes.Spatial,
              description="%s%s%s" % (_operand_desc(left), _SYMBOL[kind], _operand_desc(right)),
              derived_from=_representative([x for x in (left, right) if isinstance(x, Dim)]), auto_generated=True)
    out.derived_from_op = (kind, [left, right])
    if negative is not None:
        out.dimension = negative
    cache[key] = out
    return out


_TREE_OPS = {"add": "add_right", "sub": "sub_right", "mul": "mul", "ceildiv": "ceildiv", "floordiv": "floordiv",
             "truediv": "truediv"}


def _tree_op(kind: str, left: Operand, right: Operand) -> Optional[Tuple["Dim", Tuple[str, int]]]:  # noqa: F821
    """A dynamic dim with an int: (dim, op) of RETURNN's simplifying dim math (:mod:`returnn.tensor.dim_tree`)."""
    if isinstance(right, int) and not isinstance(left, int) and left.dimension is None and kind in _TREE_OPS:
        return left, (_TREE_OPS[kind], right)
    if kind == "add" and isinstance(left, int) and not isinstance(right, int) and right.dimension is None:
        return right, ("add_left", left)
    return None


def _representative(dims: List["Dim"]) -> "Dim":  # noqa: F821
    """RETURNN's ``_representative_tag``: the dim a dim-math result derives from (its
    ``derived_from_tag``): of the user's dims if any, the first dynamic one, else the first of a
    known kind, else the first."""
    from returnn.tensor.dim import DimTypes
    dims = [d for d in dims if not d.auto_generated] or dims
    return next((d for d in dims if d.dimension is None), None) or next(
        (d for d in dims if d.kind != DimTypes.Unspecified), dims[0])


def _key(x: Operand) -> Any:
    return ("int", x) if isinstance(x, int) else ("dim", id(x.get_same_base()))


def _same(a: Operand, b: Operand) -> bool:
    if isinstance(a, int) or isinstance(b, int):
        return isinstance(a, int) and isinstance(b, int) and a == b
    return a == b


def dynamic_leaves(dim: "Dim") -> List["Dim"]:  # noqa: F821
    """The dynamic dims without dim math that the sizes of ``dim`` are computed from (``dim`` itself when it
    has no ``derived_from_op``)."""
    op = getattr(dim, "derived_from_op", None)
    if op is None:
        return [dim] if dim.dimension is None else []
    out: List[Any] = []
    for x in op[1]:
        if not isinstance(x, int):
            out += [d for d in dynamic_leaves(x) if not any(d is o for o in out)]
    return out


def dyn_size_of(dim: "Dim", sizes_of: Callable[["Dim"], Any]) -> Any:  # noqa: F821
    """Per-sequence sizes of ``dim``: ``sizes_of(d)`` for a dim with sizes of its own, else computed
    from its ``derived_from_op`` inputs (works on numpy arrays and TF tensors alike; a static
    operand is its size)."""
    op = getattr(dim, "derived_from_op", None)
    if op is None:
        return sizes_of(dim)
    kind, inputs = op
    if kind == "tree":  # returnn.tensor.dim_tree: evaluated from its root's sizes
        from returnn.tensor.dim_tree import evaluate, tree_of
        root, tree = tree_of(dim)
        lens = root.dimension if root.dimension is not None else dyn_size_of(root, sizes_of)
        return evaluate(tree, lens, _maximum)
    values = [x if isinstance(x, int) else (x.dimension if x.dimension is not None else dyn_size_of(x, sizes_of))
              for x in inputs]
    return _OPS[kind](values[0], values[1])


def _maximum(a: Any, b: Any) -> Any:
    """``maximum`` of numpy arrays and ints, or of TF tensors."""
    if type(a).__module__.startswith("numpy") or isinstance(a, int):
        import numpy
        return numpy.maximum(a, b)
    import tensorflow as tf
    return tf.maximum(a, b)


def returnn_description(base: str, left: int = 0, right: int = 0, stride: int = 1) -> str:
    """RETURNN's description of the dim-math dim ``ceildiv(left + base + right, stride)`` (signed ``left`` and
    ``right``: a pad's ``2+time``, a slice's ``-1+time`` and ``time+-2``, a valid conv's ``(-1+time)+-1``, a
    strided one's ``⌈(time+-1)/2⌉``), which ``stag:NAME`` axis descriptions search (RETURNN's _get_description)."""
    from returnn.tensor.dim_tree import bracketed as br
    desc = base
    if left:
        desc = "%i+%s" % (left, br(desc))
    if right:
        desc = "%s+%i" % (br(desc), right)
    if stride != 1:
        desc = "\u2308%s/%i\u2309" % (br(desc), stride)
    return desc


def returnn_product_description(dims: Sequence[Any]) -> str:
    """RETURNN's description of the product of ``dims`` (its merge_dims axis, by dim math): the factors' descriptions
    joined by ``*``, one with ``+``, ``-``, ``/`` or a space bracketed, an unnamed static one as its size."""
    from returnn.tensor.dim_tree import bracketed

    def one(d: Any) -> str:
        desc = d.description or ""
        if desc.startswith("unnamed_") and d.dimension is not None:
            return str(d.dimension)
        return bracketed(desc)
    return "*".join(one(d) for d in dims)

