"""``unmask`` inside a rec unit of a ``masked_computation`` with ``masked_from`` (transducer
decoders): the masked computation runs once over the already packed sequence ``masked_from``
(``(B, T', ...)``, outside the loop), and per step ``unmask`` takes its frame ``k - 1``, where
``k`` counts the steps so far whose mask was True (this one included); before the first such
step the value is zeros (RETURNN's initial output of the masked layer). Outside the loop (its mask
moved out too) it is the plain :class:`returnn.tf.layers.masked.UnmaskLayer` over the sequence.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence, Tuple

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.masked import UnmaskLayer, _batch_time_first, _bt_mask


@register_layer
class UnmaskInUnitLayer(UnmaskLayer):
    """See the module docstring."""

    layer_class = "_unmask_in_unit"

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        mask = sources[-1]
        self.step_mode = mask.time_dim_axis is None
        if not self.step_mode:
            super().__init__(name, opts, sources, seed)
            return
        Layer.__init__(self, name, opts, sources[:-1], seed)
        if mask.dtype != "bool" or mask.batch_ndim != 1 or mask.batch_dim_axis is None:
            raise NetworkError("%s: 'mask' must be a bool (batch,) layer in the loop, got %s"
                               % (self.desc, mask.short_repr()))
        self.mask = mask
        if len(self.sources) != 1:
            raise NetworkError("%s: needs one source (the masked_computation)" % self.desc)
        data = self.sources[0]
        if data.batch_dim_axis is None or data.time_dim_axis is None:
            raise NetworkError("%s: the masked_computation %s has no batch and time axis (its masked_from's)"
                               % (self.desc, data.short_repr()))
        self.ax = data.time_dim_axis
        self.output = data.copy_template_excluding_axis(self.ax).copy(name)

    def initial_state(self, batch: tf.Tensor, n_time: Any = None) -> Tuple[tf.Tensor]:
        """The number of kept frames so far, minus one: -1 at the start."""
        return (-tf.ones(tf.stack([batch]), tf.int32),)

    def step(self, sources: List[LayerOutput], state: Tuple[tf.Tensor], ctx: RunContext, t: Any = None
             ) -> Tuple[LayerOutput, Tuple[tf.Tensor]]:
        x, mask = sources[0], sources[-1]
        pos = state[0] + tf.cast(tf.reshape(tf.cast(mask.tensor, tf.bool), [-1]), tf.int32)
        x_bt, perm = _batch_time_first(x, self.ax)  # (B, T', ...)
        x_bt = tf.where(_bt_mask(x, self.ax, x_bt), x_bt, tf.zeros_like(x_bt))
        idx = tf.clip_by_value(pos, 0, tf.maximum(tf.shape(x_bt)[1] - 1, 0))
        y = tf.gather(x_bt, idx, batch_dims=1)  # (B, ...) in perm order without the time axis
        y = tf.where(tf.reshape(pos >= 0, [-1] + [1] * (len(y.shape) - 1)), y, tf.zeros_like(y))
        rest = [a for a in perm if a != self.ax]  # the output's axes in y's order
        y = tf.transpose(y, [rest.index(a) for a in sorted(rest)]) if rest != sorted(rest) else y
        return self.make_output(y, [x]), (pos,)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        if self.step_mode:
            raise NetworkError("%s: runs only inside a rec loop" % self.desc)
        return super().forward(sources, ctx)


def check_step_masks(desc: str, unit: Mapping[str, Any], layers: Dict[str, Layer], in_loop: Sequence[str]) -> None:
    """RETURNN's MaskedComputationLayer in a loop asserts a bool mask of shape () per step (batch only): a
    sub-layer of a masked_computation run in the loop whose mask, computed in the loop too, is anything else
    (e.g. a reduce with keep_dims: (batch, 1)) is refused in one line."""
    from returnn.tf.subnetwork import MASKED_BY
    for sub in in_loop:
        ref = unit[sub].get(MASKED_BY) if isinstance(unit.get(sub), Mapping) else None
        if not isinstance(ref, str):
            continue
        name = ref[len("prev:"):] if ref.startswith("prev:") else ref
        if name not in in_loop or name not in layers:
            continue
        data = layers[name].output
        if data.dtype != "bool" or data.batch_ndim != 1 or data.batch_dim_axis is None:
            raise NetworkError("%s, sub-layer %r: its masked_computation's mask %r must be a bool (batch,) layer in "
                               "the loop (RETURNN asserts), got %s" % (desc, sub.split("/")[0], ref, data.short_repr()))
