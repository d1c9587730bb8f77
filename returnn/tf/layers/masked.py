"""Frames selected by a mask, and back: the whole-sequence parts of RETURNN's ``masked_computation``.

A ``masked_computation`` layer (``mask``, ``unit``, ``from``) is flattened into plain layers
before the network is built (:mod:`returnn.tf.subnetwork`). Outside a rec loop, its input goes
through ``_masked_pack`` and its unit runs on the packed frames; ``unmask`` undoes the packing.
Inside a rec loop the unit runs every step and the loop keeps its outputs and states where the
mask is False (:mod:`returnn.tf.layers.rec_net.loop`); ``unmask`` there is a copy.

- ``_masked_pack``: input ``(B, T, ...)`` and a bool mask ``(B, T)`` (on the same time axis) ->
  ``(B, T', ...)``, the frames where the mask is True (and the frame is real), in order; ``T'`` is
  a new dynamic dim (``out_spatial_dim`` when given) whose sizes are the per-sequence counts.
  Padded frames of the output hold zeros.
- ``unmask``: input ``(B, T', ...)`` (packed by that mask) and the mask ``(B, T)`` ->
  ``(B, T, ...)``: each frame takes the packed frame of the last True position up to and
  including it; frames before the first True one hold zeros (RETURNN's initial output). With
  ``skip_initial`` the input's frame 0 is that initial value (an input with a start frame, as after
  ``prefix_in_time``): frame t takes input frame ``(kept frames up to t)``.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.helpers import check_sources
from returnn.tf.layers.options import Option


def _check_mask(layer: Layer, mask: Data) -> None:
    if mask.dtype != "bool" or mask.batch_dim_axis is None or mask.time_dim_axis is None or mask.batch_ndim != 2:
        raise NetworkError("%s: 'mask' must be a bool (batch, time) layer, got %s" % (layer.desc, mask.short_repr()))


def _mask_bt(mask: LayerOutput) -> tf.Tensor:
    """The mask as ``(B, T)``, False on padded frames."""
    m = tf.logical_and(mask.tensor, mask.sequence_mask(mask.data.time_dim_axis))
    return m if mask.data.batch_dim_axis == 0 else tf.transpose(m)


def _batch_time_first(x: LayerOutput, ax: int) -> Tuple[tf.Tensor, List[int]]:
    """``x``'s tensor with batch then axis ``ax`` first; the permutation used."""
    b = x.data.batch_dim_axis
    perm = [b, ax] + [i for i in range(x.data.batch_ndim) if i not in (b, ax)]
    return tf.transpose(x.tensor, perm), perm


def _inverse(perm: Sequence[int]) -> List[int]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return inv


class _MaskedLayer(Layer):
    """Shared: the ``mask`` reference (its value comes last in ``sources``) and the masked axis."""

    ref_options = ("mask",)
    options = (Option("mask", None, "bool (batch, time) layer: True on the frames to keep"),)

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        if not isinstance(opts.get("mask"), str):
            raise NetworkError("layer %r (%s): 'mask' must name a layer, got %r"
                               % (name, self.layer_class, opts.get("mask")))
        super().__init__(name, opts, sources[:-1], seed)
        if self.layer_class == "_masked_pack" and "/_packed" in name:  # errors name the config's layer
            self.desc = "layer %r (masked_computation)" % name[:name.rindex("/_packed")]
        check_sources(self, sources[:-1], 1, 1)
        self.mask = sources[-1]
        _check_mask(self, self.mask)

    def _as_is(self, x: LayerOutput) -> LayerOutput:
        """``x`` unchanged as this layer's output (an input without the masked axis)."""
        out = x.with_tensor(x.tensor, self.output)
        out.computed_padding = x.computed_padding
        return out

    def _axis_of(self, data: Data, dim: Dim, key: str) -> int:
        """The axis of ``data`` that ``dim`` names, else its time axis."""
        for i, d in enumerate(data.dims):
            if d == dim:
                return i
        if data.time_dim_axis is None or data.batch_dim_axis is None:
            raise NetworkError("%s: the input %s has no %s axis" % (self.desc, data.short_repr(), key))
        return data.time_dim_axis


@register_layer
class MaskedPackLayer(_MaskedLayer):
    """See the module docstring (the input side of ``masked_computation`` outside loops)."""

    layer_class = "_masked_pack"
    options = (
        Option("in_spatial_dim", None, "the masked axis of the input (default: the mask's time axis)"),
        Option("out_spatial_dim", None, "Dim of the packed axis (default: a new one)"),
        Option("keep_without_axis", False, "an input without the masked axis passes as it is (the unit's other "
                                           "references, as RETURNN's masked_computation resolves them)"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        data = self.sources[0]
        in_dim = self.opt("in_spatial_dim")
        in_dim = in_dim if in_dim is not None else self.mask.dims[self.mask.time_dim_axis]
        self.ax = None
        if self.opt("keep_without_axis") and in_dim not in data.dims:  # RETURNN: such a reference as it is
            self.output = data.copy(name)
            return
        self.ax = self._axis_of(data, in_dim, "time")
        out_dim = self.opt("out_spatial_dim")
        if out_dim is not None and not isinstance(out_dim, Dim):
            raise NetworkError("%s: 'out_spatial_dim' must be a Dim, got %r" % (self.desc, out_dim))
        self.time = out_dim or Dim(None, kind=Dim.Types.Spatial, description="%s:masked-time" % name)
        self.output = data.copy_template_replace_dim_tag(self.ax, self.time).copy(name)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x, mask = sources[0], sources[-1]
        if self.ax is None:
            return self._as_is(x)
        m = _mask_bt(mask)  # (B, T)
        x_bt, perm = _batch_time_first(x, self.ax)
        pos = tf.cumsum(tf.cast(m, tf.int32), axis=1)  # 1-based position in T' of each kept frame
        sizes = tf.reduce_sum(tf.cast(m, tf.int32), axis=1)
        n_new = tf.reduce_max(tf.concat([sizes, [0]], 0))
        target = tf.where(m, pos - 1, n_new)  # dropped frames go to one extra row, cut off below
        batch_idx = tf.broadcast_to(tf.range(tf.shape(m)[0])[:, None], tf.shape(m))
        idx = tf.stack([batch_idx, target], axis=-1)  # (B, T, 2)
        shape = tf.concat([[tf.shape(x_bt)[0], n_new + 1], tf.shape(x_bt)[2:]], 0)
        packed = tf.scatter_nd(idx, x_bt, shape)[:, :n_new]
        return self.make_output(tf.transpose(packed, _inverse(perm)), [x], {self.time: sizes})


@register_layer
class UnmaskLayer(_MaskedLayer):
    """See the module docstring (``unmask`` outside loops; inside a rec unit it becomes a copy)."""

    layer_class = "unmask"
    options = (Option("skip_initial", False, "the input's first frame is the initial value (e.g. the state after a "
                                             "prefix_in_time start symbol): frame t takes input frame (number of kept "
                                             "frames up to t), no zeros"),)

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        data = self.sources[0]
        if data.batch_dim_axis is None or data.time_dim_axis is None:
            raise NetworkError("%s: the input %s has no batch and time axis" % (self.desc, data.short_repr()))
        self.ax = data.time_dim_axis
        self.time = self.mask.dims[self.mask.time_dim_axis]
        self.output = data.copy_template_replace_dim_tag(self.ax, self.time).copy(name)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x, mask = sources[0], sources[-1]
        if self.ax is None:
            return self._as_is(x)
        m = _mask_bt(mask)  # (B, T)
        x_bt, perm = _batch_time_first(x, self.ax)
        x_bt = tf.where(_bt_mask(x, self.ax, x_bt), x_bt, tf.zeros_like(x_bt))  # no garbage from padding
        idx = tf.cumsum(tf.cast(m, tf.int32), axis=1)  # 0: before the first kept frame
        if self.opt("skip_initial"):
            src = x_bt
        else:
            src = tf.concat([tf.zeros_like(x_bt[:, :1]), x_bt], axis=1)
        idx = tf.minimum(idx, tf.shape(src)[1] - 1)
        y = tf.gather(src, idx, batch_dims=1)  # (B, T, ...)
        return self.make_output(tf.transpose(y, _inverse(perm)), [x, mask],
                                {self.time: mask.size(mask.data.time_dim_axis)})


@register_layer
class UnmaskOutsideLoopLayer(Layer):
    """An ``unmask`` of a ``masked_computation`` outside rec loops (see ``expand_subnetworks``): refused
    when built, as RETURNN fails on it then (its unmask asks for the initial output of a rec layer)."""

    layer_class = "_unmask_outside_loop"

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        raise NetworkError("layer %r (unmask): unmasking a masked_computation outside a rec loop is refused (RETURNN "
                           "fails on it: the initial output needs a rec layer around)" % name)


def _bt_mask(x: LayerOutput, ax: int, x_bt: tf.Tensor) -> tf.Tensor:
    """The sequence mask of axis ``ax`` of ``x`` as ``(B, T, 1, ...)`` for ``x_bt``."""
    m = x.sequence_mask(ax)  # (B, T)
    return tf.reshape(m, tf.concat([tf.shape(m), tf.ones_like(tf.shape(x_bt)[2:])], 0))
