"""Dims computed from another axis with ints, as RETURNN's dim math builds them: a valid
conv, pool or window cuts ``in.sub_left(l).sub_right(r)``, a slice ``sub_left(start)`` and
``sub_right(-end)``, a pad ``left + in + right``, postfix_in_time ``in + n``, prefix_in_time
``n + in``, a fold adds its window sides; a strided conv or pool divides ``ceildiv_right(stride)``,
a transposed conv or a resize multiplies ``in * factor``.

RETURNN keeps the result as a tree of operations and simplifies as it builds it. It folds a new int
into an int term at most two levels down on that side (its ``_MathFindMatchingAdditive``):
``2 + ((-1+time)+-1)`` is ``(1+time)+-1``, ``(time+2)+-1`` is ``time+1``, ``1 + ((-1+time)+-1) + 1``
is ``time`` again. ``(x*a)*b`` is ``x*(a*b)``, ``ceildiv(x*n, n)`` is ``x`` and
``ceildiv(ceildiv(x, a), b)`` is ``ceildiv(x, a*b)``: a pool of stride 2 after an upsampling by 2 is
the axis before it. Its per-sequence sizes evaluate the tree, an addition with a negative int clipped
at 0, so ``(-1+time)+1`` is ``relu(T-1)+1`` while ``-1+(time+1)`` is ``relu(T)``.

Here a tree is an int, :data:`ROOT` (the axis the operations start from), ``("+", left, right)``,
``("*", tree, int)`` or a division ``("/^" | "//" | "/", tree, int)`` (ceildiv, floordiv, exact); a
static dim that is no plain int (a fold's ``(window_dim - 1) // 2``) is ``("dim", size)``, never merged.
A config's dim math of a dynamic dim with an int (``time - 1``, ``time.ceildiv_right(2)``) is such a tree
too (:func:`returnn.tensor.dim_math.bin_op`), so it is the same Dim as a layer's equal computation. The same tree on the same root is the
same Dim (RETURNN caches dim math per base); it derives from the dim the operations were first applied
to (RETURNN's ``derived_from_tag``).
"""
from __future__ import annotations

import re
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

ROOT = "root"
Tree = Union[int, str, Tuple[Any, ...]]
Ops = Sequence[Tuple[str, Any]]  # ("add_left" | "add_right" | "sub_left" | "sub_right", int or ("dim", size));
# ("mul" | "ceildiv" | "floordiv" | "truediv", int)


def _node(left: Tree, right: Tree) -> Tree:
    if isinstance(left, int) and isinstance(right, int):
        return left + right  # (RETURNN: the sum of two constants is a constant)
    return ("+", left, right)


def _add(tree: Tree, c: Any, right: bool) -> Tree:
    """``tree + c`` (``right``) or ``c + tree``, RETURNN's search for an int term to fold ``c`` into."""
    if isinstance(c, int) and c == 0:
        return tree
    if isinstance(c, int):
        cur, history = tree, []
        for depth in range(3):
            if isinstance(cur, int):
                res: Tree = cur + c
                if depth > 0 and res == 0:
                    res = history.pop()
                for h in reversed(history):
                    res = _node(h, res) if right else _node(res, h)
                return res
            if not (isinstance(cur, tuple) and cur[0] == "+"):
                break
            history.append(cur[1] if right else cur[2])
            cur = cur[2] if right else cur[1]
    return _node(tree, c) if right else _node(c, tree)


def _mul(tree: Tree, c: int) -> Tree:
    """``tree * c`` (RETURNN's ``__mul__``: ``x * 1`` is ``x``, ``(x*a)*b`` is ``x*(a*b)``)."""
    if c == 1:
        return tree
    if isinstance(tree, int):
        return tree * c
    if isinstance(tree, tuple) and tree[0] == "*":
        return _mul(tree[1], tree[2] * c)
    return ("*", tree, c)


_DIVS = {"ceildiv": "/^", "floordiv": "//", "truediv": "/"}  # op -> node


def _div(tree: Tree, c: int, kind: str) -> Tree:
    """``tree`` divided by ``c`` (RETURNN's ``ceildiv_right``, ``__floordiv__``, ``div_right``): of ``x * c`` it is
    ``x``; a division of the same kind by ``a`` before it becomes one by ``a * c``."""
    node = _DIVS[kind]
    if c == 1:
        return tree
    if isinstance(tree, int):
        return -(-tree // c) if node == "/^" else tree // c
    if isinstance(tree, tuple) and tree[0] == "*" and tree[2] == c:
        return tree[1]
    if isinstance(tree, tuple) and tree[0] == node:
        return _div(tree[1], tree[2] * c, kind)
    return (node, tree, c)


def apply(tree: Tree, ops: Ops) -> Tree:
    """``tree`` after ``ops`` in order."""
    for kind, c in ops:
        if kind == "mul":
            tree = _mul(tree, c)
            continue
        if kind in _DIVS:
            tree = _div(tree, c, kind)
            continue
        if kind in ("sub_right", "sub_left"):
            if c == 0:
                continue
            inner = 2 if kind == "sub_right" else 1  # RETURNN: (x + c) - c is x, (c + x).sub_left(c) is x
            if isinstance(tree, tuple) and tree[0] == "+" and isinstance(tree[inner], int) and tree[inner] == c:
                tree = tree[3 - inner]
                continue
            c = -c
        tree = _add(tree, c, right=kind in ("add_right", "sub_right"))
    return tree


def tree_of(dim: "Dim") -> Tuple["Dim", Tree]:  # noqa: F821
    """(root axis, tree) of ``dim`` (``dim`` itself and :data:`ROOT` when it is no shifted axis)."""
    base = dim.get_same_base()
    return getattr(dim, "_shift_of", None) or getattr(base, "_shift_of", None) or (base, ROOT)


def description(tree: Tree, root: "Dim") -> str:  # noqa: F821
    """RETURNN's description of the dim-math dim (``(-1+time)+-1``), which 'stag:' searches."""
    if isinstance(tree, int):
        return str(tree)
    if tree == ROOT:
        return root.description or ""
    if tree[0] == "dim":
        return str(tree[1])
    parts = [description(t, root) for t in tree[1:]]
    if tree[0] != "+":
        inner = "%s%s%s" % (_bracketed(tree[1], parts[0]), "/" if tree[0] == "/^" else tree[0], parts[1])
        return "\u2308%s\u2309" % inner if tree[0] == "/^" else inner
    return "+".join(_bracketed(t, p) for t, p in zip(tree[1:], parts))


def shifted_dim(old: "Dim", ops: Ops) -> "Dim":  # noqa: F821
    """The axis ``old`` after ``ops``: its root axis when they cancel (``old`` itself when it is the root),
    else one Dim per (root, tree)."""
    root, start = tree_of(old)
    tree = apply(start, ops)
    if tree == ROOT:
        return old if start == ROOT else root
    if isinstance(tree, int):
        raise ValueError("dim math of %r gives the static size %i" % (old.description, tree))
    return _tree_dim(root, tree, old)


def _tree_dim(root: "Dim", tree: Tree, old: "Dim") -> "Dim":  # noqa: F821
    """The one Dim of ``tree`` on ``root`` (made from ``old`` the first time)."""
    from returnn.tensor.dim import Dim
    cache = root.__dict__.setdefault("_shift_dims", {})
    if tree not in cache:
        new = Dim(None, kind=old.kind or Dim.Types.Spatial, description=description(tree, root),
                  derived_from=old)
        new._shift_of = (root, tree)
        new.derived_from_op = ("tree", [root])  # sizes: evaluate(tree, root's sizes), see dim_math.dyn_size_of
        cache[tree] = new
    return cache[tree]


_KINDS = {"+": "add", "*": "mul", "/^": "ceildiv", "//": "floordiv", "/": "truediv"}


def node_op(dim: "Dim") -> Optional[Tuple[str, List[Any]]]:  # noqa: F821
    """RETURNN's ``derived_from_op`` of a dim-math dim as (kind, [operands]): its tree's top node, each operand an
    int, the root axis or the Dim of the sub-tree (``(-1+time)+-1`` is ``add`` of ``[-1+time, -1]``); None for the
    root axis itself."""
    root, tree = tree_of(dim)
    if not isinstance(tree, tuple) or tree[0] == "dim":
        return None

    def operand(t: Tree) -> Any:
        if isinstance(t, int):
            return t
        if t == ROOT:
            return root
        return t[1] if t[0] == "dim" else _tree_dim(root, t, root)
    return _KINDS[tree[0]], [operand(t) for t in tree[1:]]


def bracketed(desc: str) -> str:
    """RETURNN's ``_get_description(brackets=True)``: an operand's description with ``+``, ``-``, ``/`` or a space
    in brackets."""
    return "(%s)" % desc if re.search("[+\\-/ ]", desc) else desc


def _bracketed(tree: Tree, desc: str) -> str:
    """:func:`bracketed` of a tree operand (an int as it is)."""
    return desc if isinstance(tree, int) else bracketed(desc)


def conv_ops(k_eff: int, stride: int, valid: bool, pad: int = 0) -> Ops:
    """RETURNN's ``ConvLayer.calc_out_dim`` as dim math (conv, pool, window): ``pad + in + pad``, less the
    window's sides when valid (``sub_left((k-1)//2)``, then the rest), then ``ceildiv_right(stride)``."""
    cut = k_eff - 1
    ops = [("add_left", pad), ("add_right", pad)] if pad else []
    if valid:
        ops += [("sub_left", cut // 2), ("sub_right", cut - cut // 2)]
    return ops + [("ceildiv", stride)]


def evaluate(tree: Tree, lens: Any, maximum: Callable[[Any, Any], Any]) -> Any:
    """The sizes of ``tree`` from its root's sizes ``lens`` (``maximum``: numpy's or TensorFlow's)."""
    if isinstance(tree, int):
        return tree
    if tree == ROOT:
        return lens
    if tree[0] == "dim":
        return tree[1]
    a, b = evaluate(tree[1], lens, maximum), evaluate(tree[2], lens, maximum)
    if tree[0] == "*":
        return a * b
    if tree[0] == "/^":
        return -(-a // b)
    if tree[0] in ("//", "/"):
        return a // b
    out = a + b
    if any(isinstance(t, int) and t < 0 for t in (a, b)):
        out = maximum(out, 0)  # RETURNN: an addition with a negative static operand clipped at 0
    return out
