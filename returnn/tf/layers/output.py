"""The run-time value that flows between layers: a tensor, its :class:`Data` template and the
per-sequence sizes of its dynamic axes.

``sizes`` maps each dynamic :class:`Dim` of ``data.dims`` to an int32 tensor of shape ``(B,)``
(or ``()`` when the size does not depend on the sequence). Values on padded positions (index >=
size) are garbage unless a layer documents otherwise; use :meth:`LayerOutput.masked` before an
operation that mixes positions.
"""
from __future__ import annotations

import copy

from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

import tensorflow as tf

from returnn.tensor import Data, Dim
from returnn.tf.layers.packed import PackedFrames


class LayerOutput:
    """``tensor`` described by ``data``; ``logits`` is set by layers whose output is a softmax of a
    linear map, so losses can use the numerically stable form."""

    def __init__(self, tensor: tf.Tensor, data: Data, sizes: Optional[Mapping[Dim, tf.Tensor]] = None,
                 logits: Optional[tf.Tensor] = None, packed: Optional[PackedFrames] = None):
        self.tensor = tensor
        self.data = data
        self.logits = logits
        # frame-wise layers: the same value as rows of its real frames (see packed.py)
        self.packed = packed
        # padded frames that hold what the layer computes there, as RETURNN (set by Layer.make_output; not for
        # extern data, whose padded frames count as zero frames, what datasets pad with, whatever the tensor holds):
        # a linear layer projects them as they are (e.g. an activation's exp(0), a norm's shift), else a zero frame
        self.computed_padding = False
        # a linear/softmax layer with a sampled loss: its input for the loss (returnn/tf/sampling.py)
        self.sampling_inputs: Any = None
        # a rec sub-network's value also carries each sub-layer's whole sequence (by sub-layer name)
        self.sub_outputs: Dict[str, "LayerOutput"] = {}
        # recurrent layers: a function giving the final state tensors (each (B, D)), for get_last_hidden_state
        self.last_state: Optional[Callable[[], Sequence[tf.Tensor]]] = None
        # the search beam of a value outside a searched rec loop (returnn/tf/layers/beam_values.py)
        self.beam: Any = None
        # All given sizes are kept (also of dims not in ``data``: e.g. time_unchunking needs the
        # sizes of the time axis that time_chunking folded into the batch).
        self.sizes: Dict[Dim, tf.Tensor] = dict(sizes or {})
        for dim in data.dims:
            if dim.is_dynamic() and dim not in self.sizes:
                raise ValueError("%s: no sizes given for dynamic dim %r" % (data.name, dim))

    # ---- sizes and masks
    def _axis(self, axis: Union[int, Dim, str, None]) -> int:
        if axis is None:
            axis = self.data.time_dim_axis
            if axis is None:
                raise ValueError("%s has no time axis" % self.data.short_repr())
        if isinstance(axis, int):
            return axis % self.data.batch_ndim
        return self.data.get_axis_from_description(axis)

    def size(self, axis: Union[int, Dim, str, None] = None) -> Optional[tf.Tensor]:
        """Per-sequence sizes of a dynamic axis (default: time), or None for a static axis."""
        dim = self.data.dims[self._axis(axis)]
        return self.sizes.get(dim) if dim.is_dynamic() else None

    def lengths(self, axis: Union[int, Dim, str, None] = None) -> tf.Tensor:
        """Per-sequence sizes of ``axis`` (default: time); a static axis (e.g. fixed-length extern data)
        has its full size for every sequence (RETURNN's ``get_sequence_lengths``)."""
        axis = self._axis(axis)
        size = self.size(axis)
        if size is not None:
            return size
        if self.data.batch_dim_axis is None:
            return tf.constant(self.data.dims[axis].dimension, tf.int32)
        return tf.fill([tf.shape(self.tensor)[self.data.batch_dim_axis]], tf.constant(self.dim_value(axis), tf.int32))

    @property
    def seq_len(self) -> Optional[tf.Tensor]:
        """Sizes of the time axis (None without a dynamic time axis)."""
        return None if self.data.time_dim_axis is None else self.size()

    def dim_value(self, axis: int) -> Any:
        """Size of ``axis`` in this batch: the static int, else the tensor's dynamic shape."""
        static = self.data.dims[axis].dimension
        return static if static is not None else tf.shape(self.tensor)[axis]

    def sequence_mask(self, axis: Union[int, Dim, str, None] = None) -> tf.Tensor:
        """``(B, T)`` bool, True on real positions of ``axis`` (default: time); ``(T,)`` if the
        sizes are scalar."""
        axis = self._axis(axis)
        return tf.sequence_mask(self.size(axis), maxlen=tf.shape(self.tensor)[axis])


    def broadcast_mask(self, axis: Union[int, Dim, str, None] = None) -> tf.Tensor:
        """The mask of ``axis`` reshaped to broadcast against :attr:`tensor`."""
        axis = self._axis(axis)
        mask = self.sequence_mask(axis)
        over = getattr(self.data.dims[axis], "sizes_over", None)
        if over is not None and len(over) == len(mask.shape) - 1:
            # sizes per position of other axes (e.g. cum_concat's frames so far, per loop frame)
            where = [next((i for i, d in enumerate(self.data.dims) if d == o), None) for o in over]
            lost = [k for k, w in enumerate(where) if w is None]
            if lost:  # that axis is gone (e.g. reduced): a position is real if it is real for any of it
                mask = tf.reduce_any(mask, axis=lost)
            return align_tensor(mask, [w for w in where if w is not None] + [axis], self.data.batch_ndim)
        if len(mask.shape) == 1:
            return align_tensor(mask, [axis], self.data.batch_ndim)
        batch_axis = self.data.batch_dim_axis
        if batch_axis is None:  # e.g. the (T, F) of a rec loop reading nothing with a batch axis (RETURNN asserts
            # that a mask's sizes have no axes the value lacks, its issue 721)
            from returnn.errors import NetworkError
            raise NetworkError("%r %s: a value without batch axis over an axis of per-sequence lengths (e.g. the output "
                               "of a rec loop that reads nothing with a batch axis) cannot be masked by them; RETURNN "
                               "refuses that too" % (self.data.name, self.data.short_repr()))
        return align_tensor(mask, [batch_axis, axis], self.data.batch_ndim)

    def full_mask(self) -> Optional[tf.Tensor]:
        """Bool mask of all dynamic axes together (None when there are none)."""
        out = None
        for axis in self.data.get_dynamic_axes():
            m = self.broadcast_mask(axis)
            out = m if out is None else tf.logical_and(out, m)
        return out

    def masked(self, value: Any = 0) -> tf.Tensor:
        """:attr:`tensor` with every padded position (of any dynamic axis) set to ``value``."""
        mask = self.full_mask()
        if mask is None:
            return self.tensor
        return tf.where(mask, self.tensor, tf.cast(value, self.tensor.dtype))

    def as_read(self) -> tf.Tensor:
        """:attr:`tensor` as RETURNN's layers read it: padded positions as the layer before computed
        them (:attr:`computed_padding`), else (extern data) as zero frames, what its datasets feed."""
        if self.computed_padding or self._per_sequence_without_batch():
            return self.tensor  # batch-less over per-sequence lengths: no sequences of its own, real up to the longest
        return self.masked(0)

    def _per_sequence_without_batch(self) -> bool:
        """No batch axis, but a dynamic axis with per-sequence sizes (the (T, F) of a rec loop that reads
        nothing with a batch axis, as RETURNN builds it)."""
        return self.data.batch_dim_axis is None and any(
            len(self.sizes[d].shape) == 1 and getattr(d, "sizes_over", None) is None
            for d in self.data.dims if d.is_dynamic() and d in self.sizes)

    # ---- derived values
    def with_tensor(self, tensor: tf.Tensor, data: Optional[Data] = None,
                    sizes: Optional[Mapping[Dim, tf.Tensor]] = None, logits: Optional[tf.Tensor] = None,
                    packed: Optional[PackedFrames] = None) -> "LayerOutput":
        """Another value with these sizes (plus ``sizes``); ``data`` defaults to this template."""
        merged = dict(self.sizes)
        merged.update(sizes or {})
        return LayerOutput(tensor, data or self.data, merged, logits, packed)

    def with_identity(self, tensor: tf.Tensor) -> "LayerOutput":
        """The same value as another tensor (an identity after control dependencies or prints): all else kept
        (sub-layers' values, state, beam, packed rows)."""
        out = copy.copy(self)
        out.tensor = tensor
        return out

    def with_normalised(self, tensor: tf.Tensor) -> "LayerOutput":
        """A new value of the same shape computed from this one (the batch_norm option on a layer's output):
        the layer's sub-layers' values, final state and beam stay (RETURNN normalises the output only); its
        padded frames are computed ones (RETURNN normalises them too: a layer reading them sees those)."""
        out = self.with_tensor(tensor)
        out.sub_outputs, out.last_state, out.beam = self.sub_outputs, self.last_state, self.beam
        out.computed_padding = True
        return out

    def copy_transpose(self, perm: Sequence[int]) -> "LayerOutput":
        perm = list(perm)
        if perm == list(range(len(perm))):
            return self
        logits = None if self.logits is None else tf.transpose(self.logits, perm)
        return LayerOutput(tf.transpose(self.tensor, perm), self.data.copy_transpose(perm), self.sizes, logits)

    def copy_as_batch_time_feature(self) -> "LayerOutput":
        """Batch axis first, then time (if any), the feature axis last (if any), others between."""
        data = self.data
        first = [a for a in (data.batch_dim_axis, data.time_dim_axis) if a is not None]
        last = [data.feature_dim_axis] if data.feature_dim_axis is not None else []
        middle = [a for a in range(data.batch_ndim) if a not in first and a not in last]
        return self.copy_transpose(first + middle + last)


def align_tensor(tensor: tf.Tensor, axis_map: Sequence[int], out_ndim: int) -> tf.Tensor:
    """``tensor`` with its axes moved to the positions ``axis_map`` (axis ``i`` goes
    to ``axis_map[i]``) and size-1 axes inserted for the other positions of an ``out_ndim`` result,
    so it broadcasts against tensors of the common layout (see ``helpers.common_dims``); an axis mapped to -1
    is of size 1 and squeezed (``helpers.merge_added_axes``)."""
    if any(p < 0 for p in axis_map):
        tensor = tf.squeeze(tensor, [i for i, p in enumerate(axis_map) if p < 0])
        axis_map = [p for p in axis_map if p >= 0]
    order: List[int] = sorted(range(len(axis_map)), key=lambda i: axis_map[i])
    if order != list(range(len(order))):
        tensor = tf.transpose(tensor, order)
    present = sorted(axis_map)
    for pos in range(out_ndim):
        if pos not in present:
            tensor = tf.expand_dims(tensor, pos)
    return tensor


def lengths_along(outputs: Sequence[LayerOutput], dim: Dim) -> tf.Tensor:
    """:meth:`LayerOutput.lengths` of ``dim`` from the first of ``outputs`` that has it (full lengths for
    a static ``dim``)."""
    return next(o for o in outputs if dim in o.data.dims).lengths(dim)
