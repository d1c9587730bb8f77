"""Checks in the step that fail on the data, not on the config (e.g. a layer's sizes taken from another
input that are longer than its values): the step stops with one line naming the layer, and the engine
names the dataset and the batch's sequences (:func:`returnn.tf.losses.alignment_error`)."""
import re
from typing import List, Optional, Sequence

import tensorflow as tf

DATA_CHECK_MARK = "data check failed"


def checked(tensor: tf.Tensor, ok: tf.Tensor, text: str, *values: tf.Tensor) -> tf.Tensor:
    """``tensor`` after the check that the scalar bool ``ok`` holds; else the step fails with ``text``
    (``%s`` in it filled by ``values``, scalars)."""
    with tf.control_dependencies([_check_op(ok, text, *values)]):
        return tf.identity(tensor)


def _check_op(ok: tf.Tensor, text: str, *values: tf.Tensor) -> tf.Operation:
    """The Assert op of a data check (its text marked for :func:`failed_check`)."""
    return tf.debugging.Assert(ok, ["%s|%s|" % (DATA_CHECK_MARK, text), *values], summarize=1)


def failed_check(exc: Exception) -> Optional[str]:
    """The text of the data check that ``exc`` (a step's InvalidArgumentError) reports, values filled in;
    None when it is not one."""
    text = str(getattr(exc, "message", None) or exc)
    m = re.search(re.escape(DATA_CHECK_MARK) + r"\|(.*?)\|\]?((?: \[-?\d+\])*)", text, re.S)
    if m is None:
        return None
    values = tuple(re.findall(r"\[(-?\d+)\]", m.group(2)))
    line = m.group(1).replace("\\'", "'").replace('\\"', '"')  # TF's message escapes quotes
    try:
        return line % values
    except TypeError:
        return line


def same_extents(desc: str, tensors: List[tf.Tensor], dims: Sequence) -> List[tf.Tensor]:
    """``tensors`` (aligned to ``dims``; static size 1 where one broadcasts) after the check that on each dynamic
    axis all that have it have one padded extent. They differ where one value is longer than its sizes
    (reinterpret_data's size_base after upsampling keeps the extra frames, as RETURNN, which fails there too):
    one line naming the layer, not TensorFlow's shape error."""
    checks = []
    for axis, dim in enumerate(dims):
        if dim.dimension is not None or dim.is_batch_dim():
            continue
        have = [t for t in tensors if t.shape.rank == len(dims) and t.shape[axis] != 1]
        extents = [tf.shape(t)[axis] for t in have]
        for other in extents[1:]:
            checks.append(_check_op(tf.equal(extents[0], other), "%s: its sources have %%s and %%s frames on the axis %r "
                                    "(one value longer than its sizes, e.g. reinterpret_data's size_base after "
                                    "upsampling?); RETURNN fails here too" % (desc, dim.description),
                                    extents[0], other))
    if not checks:
        return tensors
    with tf.control_dependencies(checks):
        return [tf.identity(t) for t in tensors]
