"""The per-sequence sizes of dim-math dims (:mod:`returnn.tensor.dim_tree`) as TF tensors, and config dims
declared the same as a layer's dim math."""
from __future__ import annotations

from typing import Mapping, Optional

import tensorflow as tf

from returnn.tensor import Dim
from returnn.tensor.dim_tree import Ops, apply, description, evaluate, shifted_dim, tree_of  # noqa: F401


def mark_shifted(dim: Dim, old: Dim, ops: Ops) -> None:
    """A Dim the config gave for ``old`` after ``ops`` (RETURNN declares it the same as its dim math): later
    shifts and sizes see through it."""
    root, tree = tree_of(old)
    tree = apply(tree, ops)
    if not hasattr(dim, "_shift_of") and isinstance(tree, tuple):
        dim._shift_of = (root, tree)


def shifted_sizes(dim: Dim, sizes: Mapping[Dim, tf.Tensor], ops: Ops = ()) -> Optional[tf.Tensor]:
    """Per-sequence sizes of ``dim`` after ``ops`` from its root axis's sizes as RETURNN evaluates its dim math;
    None when ``sizes`` lacks the root's."""
    root, tree = tree_of(dim)
    if root not in sizes:
        return None
    out = evaluate(apply(tree, ops), sizes[root], tf.maximum)
    return tf.convert_to_tensor(out) if not isinstance(out, int) else tf.fill(tf.shape(sizes[root]), out)
