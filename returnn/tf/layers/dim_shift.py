"""The per-sequence sizes of dim-math dims (:mod:`returnn.tensor.dim_tree`) as TF tensors, and config dims
declared the same as a layer's dim math."""
from __future__ import annotations

from typing import Mapping, Optional

import tensorflow as tf

from returnn.tensor import Dim
from returnn.tensor.dim_tree import Ops, apply, description, evaluate, shifted_dim, tree_of  # noqa: F401


def math_or_given(given: Optional[Dim], old: Dim, ops: Ops) -> Dim:
    """The axis ``old`` after ``ops`` (RETURNN's dim math), or ``given`` declared the same as it
    (:func:`given_same_as`)."""
    return given_same_as(given, shifted_dim(old, ops))


def given_same_as(given: Optional[Dim], math: Dim) -> Dim:
    """A dynamic Dim the config gave for the axis ``math`` is declared the same as it (RETURNN's
    ``out_dim_.declare_same_as(out_dim)``), so it equals the same computation elsewhere, and is the axis; one
    ``math`` derives from (the input axis itself) is taken as it is. Without one: ``math``."""
    if given is None:
        return math
    if given.is_dynamic() and math.is_dynamic() and given != math and tree_of(math)[0] != given:
        given.declare_same_as(math)
    return given


def shifted_sizes(dim: Dim, sizes: Mapping[Dim, tf.Tensor], ops: Ops = ()) -> Optional[tf.Tensor]:
    """Per-sequence sizes of ``dim`` after ``ops`` from its root axis's sizes as RETURNN evaluates its dim math;
    None when ``sizes`` lacks the root's."""
    root, tree = tree_of(dim)
    if root not in sizes:
        return None
    out = evaluate(apply(tree, ops), sizes[root], tf.maximum)
    return tf.convert_to_tensor(out) if not isinstance(out, int) else tf.fill(tf.shape(sizes[root]), out)
