"""Whole sequences and single steps of a rec loop: templates and values with and without the
loop's time axis.

Inside the loop a sub-layer sees one frame: the template of a whole-sequence value without the
loop's time axis (:func:`step_template`), its value at step ``t`` (:class:`FrameReader`), and the
previous step of a whole sequence (:func:`shift_right`). After the loop, the per-step outputs are
stacked back (:func:`stacked_template`, :func:`stack_steps`).
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

import numpy as np
import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim
from returnn.tf.layers.output import LayerOutput


def time_axis_of(data: Data, time_dim: Dim, is_data: bool = False) -> Optional[int]:
    """The axis of the loop's time ``time_dim`` in ``data`` (for data keys: its time axis)."""
    for i, d in enumerate(data.dims):
        if d == time_dim:
            return i
    return data.time_dim_axis if is_data else None


def on_loop_time(data: Data, time_dim: Dim) -> Data:
    """A data key's template with its time axis taken as the loop's time axis (inside a rec
    layer, ``data:KEY`` is read frame by frame along the loop, like RETURNN)."""
    axis = data.time_dim_axis
    if axis is None or data.dims[axis] == time_dim:
        return data
    return data.copy_template_replace_dim_tag(axis, time_dim)


def value_on_loop_time(value: LayerOutput, data: Data) -> LayerOutput:
    """``value`` of a data key as a value of :func:`on_loop_time`'s template ``data``."""
    if data is value.data:
        return value
    axis = value.data.time_dim_axis
    sizes = dict(value.sizes)
    sizes[data.dims[axis]] = value.sizes[value.data.dims[axis]]
    return LayerOutput(value.tensor, data, sizes, value.logits)


def step_template(data: Data, time_dim: Dim, is_data: bool = False) -> Data:
    """``data`` as one frame: without the loop's time axis (unchanged if it has none)."""
    axis = time_axis_of(data, time_dim, is_data)
    return data if axis is None else data.copy_template_excluding_axis(axis)


def stacked_position(step: Data) -> int:
    """Where the time axis goes when frames of ``step`` are stacked: after the batch axis."""
    return 0 if step.batch_dim_axis is None else step.batch_dim_axis + 1


def stacked_template(step: Data, time_dim: Dim) -> Data:
    """The whole-sequence template of per-step values ``step``."""
    pos = stacked_position(step)
    out = step.copy_insert_dim(time_dim, pos)
    return out if out.time_dim_axis == pos else out.copy(time_dim_axis=pos)


def stack_steps(stacked: tf.Tensor, step: Data, time_dim: Dim, sizes: Mapping[Dim, tf.Tensor],
                logits: Optional[tf.Tensor] = None) -> LayerOutput:
    """Time-major ``stacked`` (T, ...) frames of ``step`` as a whole-sequence value."""
    pos = stacked_position(step)
    template = stacked_template(step, time_dim)
    shape = [None if (d.is_batch_dim() or d.dimension is None) else d.dimension for d in template.dims]

    def move(x: tf.Tensor) -> tf.Tensor:
        if pos:
            x = tf.transpose(x, list(range(1, pos + 1)) + [0] + list(range(pos + 1, template.batch_ndim)))
        return tf.ensure_shape(x, shape)

    return LayerOutput(move(stacked), template, dict(sizes), None if logits is None else move(logits))


class FrameReader:
    """Frame ``t`` of a whole-sequence value along the loop's time axis (time-major once, then
    one cheap index per step); values without that axis are returned as they are. Padded
    positions of extern data are zeroed first (a frame has no lengths left to mask them with;
    garbage or NaN there would reach the gradients through the steps past a sequence's end; a
    dataset feeds zero frames there), while a layer's value is read as the layer computed it there
    (``computed_padding``, or one known row: a packed linear layer's value there, packed.py), as
    RETURNN's loop reads it past the end (its TensorArray of the padded tensor). ``raw``: no zeroing at all
    (a beam search, which has no gradients: its step past a sequence's end reads the padded frame
    as RETURNN's does)."""

    def __init__(self, value: LayerOutput, time_dim: Dim, is_data: bool = False, raw: bool = False):
        self.value = value
        self.axis = time_axis_of(value.data, time_dim, is_data)
        if self.axis is None:
            self.template = value.data
            return
        self.template = value.data.copy_template_excluding_axis(self.axis)
        perm = [self.axis] + [a for a in range(value.data.batch_ndim) if a != self.axis]
        known_fill = value.packed is not None and value.packed.fill is not None
        tensor = value.tensor if known_fill or raw else value.as_read()
        self.time_major = tf.transpose(tensor, perm) if self.axis else tensor
        self.logits = None
        if value.logits is not None:
            self.logits = tf.transpose(value.logits, perm) if self.axis else value.logits
        dropped = value.data.dims[self.axis]
        self.sizes = {d: s for d, s in value.sizes.items() if d != dropped}

    def frame(self, t: tf.Tensor, template: Optional[Data] = None) -> LayerOutput:
        if self.axis is None:
            return self.value
        logits = None if self.logits is None else self.logits[t]
        return LayerOutput(self.time_major[t], template or self.template, self.sizes, logits)


def shift_right(value: LayerOutput, axis: int, initial: tf.Tensor) -> LayerOutput:
    """``value`` delayed by one frame on ``axis``: frame 0 is ``initial`` (the value's shape
    without that axis), frame t is the old frame t - 1."""
    first = tf.expand_dims(tf.cast(initial, value.tensor.dtype), axis)
    n = tf.shape(value.tensor)[axis]
    body = tf.gather(value.tensor, tf.range(n - 1), axis=axis)
    return value.with_tensor(tf.concat([first, body], axis=axis))


def initial_value(spec: Any, template: Data, batch: tf.Tensor, extents: Mapping[Dim, tf.Tensor],
                  where: str, layer_value: Optional[LayerOutput] = None) -> tf.Tensor:
    """The value of ``prev:X`` at step 0 from X's ``initial_output`` (None / "zeros" / "ones" / a
    number, True as 1 / a layer's value), shaped like ``template`` ("var" and "apply(0)": the rec
    loop, :mod:`.loop`)."""
    shape = []
    for d in template.dims:
        if d.is_batch_dim():
            shape.append(batch)
        elif d.dimension is not None:
            shape.append(d.dimension)
        elif d in extents:
            shape.append(extents[d])
        else:
            raise NetworkError("%s: cannot make the initial output: size of axis %r unknown" % (where, d.description))
    dtype = tf.as_dtype(template.dtype)
    if layer_value is not None:
        return tf.broadcast_to(tf.cast(layer_value.tensor, dtype), tf.stack(shape) if shape else [])
    if spec is None or (isinstance(spec, str) and spec == "zeros"):
        fill = 0
    elif isinstance(spec, str) and spec == "ones":
        fill = 1
    elif isinstance(spec, (bool, int, float, np.number)):  # True: 1, as RETURNN's number rule gives it
        fill = spec
    else:
        hint = "; keep_over_epoch is an initial_state of recurrent units" if spec == "keep_over_epoch" else ""
        raise NetworkError("%s: invalid initial_output %r (zeros, ones, var, apply(0), a number or a layer%s)"
                           % (where, spec, hint))
    if dtype == tf.string and not isinstance(fill, bool) and fill == 0:  # zeros of strings (RETURNN's tf.zeros): ""
        return tf.zeros(tf.stack(shape) if shape else [], tf.string)
    return tf.fill(tf.stack(shape) if shape else [], tf.cast(fill, dtype)) if shape else tf.cast(fill, dtype)


def dim_extents(values: Mapping[Any, LayerOutput]) -> Dict[Dim, tf.Tensor]:
    """For every dynamic non-batch dim of the values: its padded extent in this batch."""
    out: Dict[Dim, tf.Tensor] = {}
    for v in values.values():
        for i, d in enumerate(v.data.dims):
            if d.is_dynamic() and not d.is_batch_dim() and d not in out:
                out[d] = tf.shape(v.tensor)[i]
    return out


def frame_shape(step: Data, batch: tf.Tensor) -> list:
    """The shape of one frame of ``step`` when no frame exists: the batch size, static sizes, 0 for
    dynamic axes."""
    return [batch if d.is_batch_dim() else (d.dimension if d.dimension is not None else 0) for d in step.dims]


def stacked_sizes(stacked: tf.Tensor, dim: Dim, time_dim: Dim) -> tf.Tensor:
    """The sizes of ``dim`` (made in the loop, e.g. cum_concat's frames so far) over all steps:
    ``(T,)`` when they are one size per step, ``(B, T)`` when per sequence; ``dim.sizes_over`` says
    which axes they run over (see ``LayerOutput.broadcast_mask``)."""
    from returnn.tensor.dim import batch_dim
    if len(stacked.shape) == 1:
        dim.sizes_over = (time_dim,)
        return stacked
    dim.sizes_over = (batch_dim, time_dim)
    return tf.transpose(stacked)
