"""Dynamic axes that are another axis plus or minus ints, as RETURNN's dim math builds them: a valid
conv, pool or window cuts ``in.sub_left(l).sub_right(r)``, a slice ``sub_left(start)`` and
``sub_right(-end)``, a pad ``left + in + right``, postfix_in_time ``in + n``, prefix_in_time
``n + in``, a fold adds its window sides.

RETURNN keeps the result as a tree of additions and folds a new int into an int term at most two
levels down on that side (its ``_MathFindMatchingAdditive``): ``2 + ((-1+time)+-1)`` is
``(1+time)+-1``, ``(time+2)+-1`` is ``time+1``, ``1 + ((-1+time)+-1) + 1`` is ``time`` again.
Its per-sequence sizes evaluate the tree, an addition with a negative int clipped at 0, so
``(-1+time)+1`` is ``relu(T-1)+1`` while ``-1+(time+1)`` is ``relu(T)``. Here a tree is an
int, :data:`ROOT` (the axis the shifts start from) or ``("+", left, right)``; a static dim
that is no plain int (a fold's ``(window_dim - 1) // 2``) is ``("dim", size)``, never merged.
The same tree on the same root is the same Dim (RETURNN caches dim math per base).
"""
from __future__ import annotations

import re
from typing import Any, Mapping, Optional, Sequence, Tuple, Union

import tensorflow as tf

from returnn.tensor import Dim

ROOT = "root"
Tree = Union[int, str, Tuple[Any, ...]]
Ops = Sequence[Tuple[str, Any]]  # ("add_left" | "add_right" | "sub_left" | "sub_right", int or ("dim", size))


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


def apply(tree: Tree, ops: Ops) -> Tree:
    """``tree`` after ``ops`` in order."""
    for kind, c in ops:
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


def tree_of(dim: Dim) -> Tuple[Dim, Tree]:
    """(root axis, tree) of ``dim`` (``dim`` itself and :data:`ROOT` when it is no shifted axis)."""
    return getattr(dim, "_shift_of", None) or (dim, ROOT)


def description(tree: Tree, root: Dim) -> str:
    """RETURNN's description of the dim-math dim (``(-1+time)+-1``), which 'stag:' searches."""
    if isinstance(tree, int):
        return str(tree)
    if tree == ROOT:
        return root.description or ""
    if tree[0] == "dim":
        return str(tree[1])
    parts = [description(t, root) for t in tree[1:]]
    return "+".join("(%s)" % p if not isinstance(t, int) and re.search("[+\\-/ ]", p) else p
                    for t, p in zip(tree[1:], parts))


def shifted_dim(old: Dim, ops: Ops, desc: Optional[str] = None) -> Dim:
    """The axis ``old`` after ``ops``: its root axis when they cancel, else one Dim per (root, tree)."""
    root, tree = tree_of(old)
    tree = apply(tree, ops)
    if tree == ROOT:
        return root
    if isinstance(tree, int):
        raise ValueError("dim math of %r gives the static size %i" % (old.description, tree))
    cache = root.__dict__.setdefault("_shift_dims", {})
    if tree not in cache:
        new = Dim(None, kind=old.kind or Dim.Types.Spatial, description=desc or description(tree, root),
                  derived_from=old)
        new._shift_of = (root, tree)
        cache[tree] = new
    return cache[tree]


def mark_shifted(dim: Dim, old: Dim, ops: Ops) -> None:
    """A Dim the config gave for ``old`` after ``ops`` (RETURNN declares it the same as its dim math): later
    shifts and sizes see through it."""
    root, tree = tree_of(old)
    tree = apply(tree, ops)
    if not hasattr(dim, "_shift_of") and isinstance(tree, tuple):
        dim._shift_of = (root, tree)


def _evaluate(tree: Tree, lens: tf.Tensor) -> Any:
    if isinstance(tree, int):
        return tree
    if tree == ROOT:
        return lens
    if tree[0] == "dim":
        return tree[1]
    a, b = _evaluate(tree[1], lens), _evaluate(tree[2], lens)
    out = a + b
    if any(isinstance(t, int) and t < 0 for t in (a, b)):
        out = tf.maximum(out, 0)  # RETURNN: an addition with a negative static operand clipped at 0
    return out


def shifted_sizes(dim: Dim, sizes: Mapping[Dim, tf.Tensor], ops: Ops = ()) -> Optional[tf.Tensor]:
    """Per-sequence sizes of ``dim`` after ``ops`` from its root axis's sizes as RETURNN evaluates its dim math;
    None when ``sizes`` lacks the root's."""
    root, tree = tree_of(dim)
    if root not in sizes:
        return None
    out = _evaluate(apply(tree, ops), sizes[root])
    return tf.convert_to_tensor(out) if not isinstance(out, int) else tf.fill(tf.shape(sizes[root]), out)
