"""RETURNN's simplifications of dim math whose operands are dims: a sum finds a matching term (its
``_MathFindMatchingAdditive``), a product a matching factor (``_math_find_matching_mult``).

``T + T`` is ``2*T``, ``2*T + T`` is ``3*T``, ``(1 + T) + T`` is ``1+2*T``; ``T - U`` is ``T + (-1*U)``, so
``(T - U) + U`` is ``T`` and ``T - T`` the constant 0; ``3 * (2*T)`` is ``6*T``. The search looks at the
added side's outer terms at most two levels down, as RETURNN's; ``T*2 + T`` stays as it is (only a left
factor matches). A term of the form ``k*x`` is a product whose left operand is an int (or a dim) and whose
right operand is ``x``; a dim-math tree (:mod:`returnn.tensor.dim_tree`) shows its top node the same way
(:func:`~returnn.tensor.dim_tree.node_op`).
"""
from __future__ import annotations

from typing import Any, List, Optional, Tuple

Operand = Any  # a Dim or an int


def op_of(x: Operand) -> Optional[Tuple[str, List[Operand]]]:
    """RETURNN's ``derived_from_op`` of ``x`` as (kind, [operands]), None for an int or a dim without dim math."""
    op = None if isinstance(x, int) else getattr(x, "derived_from_op", None)
    if op is None:
        return None
    if op[0] == "tree":
        from returnn.tensor.dim_tree import node_op
        return node_op(x)
    return op[0], list(op[1])


def constant(value: int, spatial: bool = True) -> "Dim":  # noqa: F821
    """RETURNN's constant static dim (``T - T`` is one of size 0, spatial; an int operand of dim math is one of
    no kind)."""
    from returnn.tensor.dim import Dim, DimTypes
    out = Dim(value, kind=DimTypes.Spatial if spatial else DimTypes.Unspecified,
              description="unnamed_%sdim_%i" % ("spatial_" if spatial else "", value), auto_generated=True)
    out._constant = True
    return out


def _int(x: Operand) -> Optional[int]:
    """``x`` as an int when it is one or a constant dim."""
    if isinstance(x, int):
        return x
    return x.dimension if getattr(x, "_constant", False) else None


def _same(a: Operand, b: Operand) -> bool:
    if _int(a) is not None or _int(b) is not None:
        return _int(a) is not None and _int(a) == _int(b)
    return a == b


def _plus(a: Operand, b: Operand) -> Operand:
    from returnn.tensor.dim_math import bin_op
    if _int(a) is not None and _int(b) is not None:
        return _int(a) + _int(b)
    return bin_op("add", a, b)


def _times(factor: Operand, x: Operand) -> Operand:
    """``factor * x``; a zero factor is the constant 0."""
    from returnn.tensor.dim_math import bin_op
    if _int(factor) == 0:
        return 0
    if _int(factor) is not None and _int(x) is not None:
        return _int(factor) * _int(x)
    return bin_op("mul", _int(factor) if _int(factor) is not None else factor, x)


def _check(candidate: Operand, other: Operand, right: bool) -> Optional[Operand]:
    """What ``candidate + other`` (``right``) or ``other + candidate`` becomes, if a term matches."""
    if _int(other) is not None:
        return _int(candidate) + _int(other) if _int(candidate) is not None else None
    if _int(candidate) is None and candidate == other:
        return _times(2, candidate)
    c_op = op_of(candidate)
    if c_op and c_op[0] == "mul" and _same(c_op[1][1], other):  # k*x + x
        return _times(_plus(c_op[1][0], 1) if right else _plus(1, c_op[1][0]), c_op[1][1])
    o_op = op_of(other)
    if not o_op or o_op[0] != "mul":
        return None
    o_base, o_x = o_op[1]
    if _same(candidate, o_x):  # x + k*x
        return _times(_plus(1, o_base) if right else _plus(o_base, 1), candidate)
    if c_op and c_op[0] == "mul" and _same(c_op[1][1], o_x):  # j*x + k*x
        return _times(_plus(c_op[1][0], o_base) if right else _plus(o_base, c_op[1][0]), o_x)
    return None


def additive(left: Operand, right: Operand) -> Optional[Operand]:
    """``left + right`` simplified as RETURNN's (None: no term matches). The search starts at the dim on the left
    (``Dim.__add__``), else at the right one (``Dim.__radd__``); a result that is an int is a constant dim."""
    from returnn.tensor.dim_math import bin_op, generic
    start, other, to_right = (left, right, True) if not isinstance(left, int) else (right, left, False)
    cur, history = start, []
    for depth in range(3):
        res = _check(cur, other, to_right)
        if res is not None:
            if depth > 0 and _int(res) == 0:
                res = history.pop()
            for h in reversed(history):
                a, b = (h, res) if to_right else (res, h)
                if _int(a) is not None and _int(b) is not None:
                    res = _int(a) + _int(b)
                elif _int(a) is not None or _int(b) is not None:
                    res = bin_op("add", _int(a) if _int(a) is not None else a, _int(b) if _int(b) is not None else b)
                else:
                    res = generic("add", a, b)
            return constant(res) if isinstance(res, int) else res
        c_op = op_of(cur)
        if not c_op or c_op[0] != "add":
            return None
        history.append(c_op[1][0 if to_right else 1])
        cur = c_op[1][1 if to_right else 0]
    return None


def multiplicative(left: Operand, right: Operand) -> Optional[Operand]:
    """``left * right`` simplified as RETURNN's (None: no factor matches): ``(a*b) * c`` is ``a * (b*c)``, and
    ``k * (j*x)`` is ``(k*j) * x`` for ints ``k`` and ``j``."""
    from returnn.tensor.dim_math import bin_op
    if not isinstance(left, int):
        c_op = op_of(left)
        if c_op and c_op[0] == "mul":
            inner = _times(c_op[1][1], right)
            res = _times(c_op[1][0], inner)
            return constant(res) if isinstance(res, int) else res
        return None
    c_op = op_of(right)
    if c_op and c_op[0] == "mul" and _int(c_op[1][0]) is not None:
        return bin_op("mul", left * _int(c_op[1][0]), c_op[1][1])
    return None
