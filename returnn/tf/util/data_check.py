"""Checks in the step that fail on the data, not on the config (e.g. a layer's sizes taken from another
input that are longer than its values): the step stops with one line naming the layer, and the engine
names the dataset and the batch's sequences (:func:`returnn.tf.losses.alignment_error`)."""
import re
from typing import Optional

import tensorflow as tf

DATA_CHECK_MARK = "data check failed"


def checked(tensor: tf.Tensor, ok: tf.Tensor, text: str, *values: tf.Tensor) -> tf.Tensor:
    """``tensor`` after the check that the scalar bool ``ok`` holds; else the step fails with ``text``
    (``%s`` in it filled by ``values``, scalars)."""
    check = tf.debugging.Assert(ok, ["%s|%s|" % (DATA_CHECK_MARK, text), *values], summarize=1)
    with tf.control_dependencies([check]):
        return tf.identity(tensor)


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
