"""``cum_concat``: RETURNN's CumConcatLayer, all frames of a rec loop so far, as a new axis.

Inside a ``rec`` unit, at step ``t`` the output is the input of steps ``0 .. t`` along a new axis
``out_spatial_dim`` (after the batch axis): ``(B, t + 1, ...)``. The layer always runs in the loop
(``stays_in_loop``; RETURNN moves it out and emulates the same with per-frame sizes): its state is a
buffer of the loop's length, filled one frame per step, and the output is that buffer with the
new axis' size ``t + 1`` for the whole batch (positions after ``t`` hold zeros). Seen from outside
the loop (the stacked steps, e.g. a self-attention after the loop: ``(B, T, T', ...)``) the new
axis' sizes are per frame of the loop, ``t + 1`` (the rec loop stacks them), as in RETURNN.

``axis`` may only be RETURNN's single-step dim (None here: the loop's step). Without ``out_spatial_dim``
(RETURNN's 2021 branch frithjof-self-attention named the axis itself) a new Dim, only without a
behavior_version: released RETURNN requires it.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim, DimTypes
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.helpers import check_sources, concat_inputs, concat_output
from returnn.tf.layers.options import Option


@register_layer
class CumConcatLayer(Layer):
    """See the module docstring."""

    layer_class = "cum_concat"
    stays_in_loop = True  # rec units keep it in the loop (its state accumulates the frames)
    options = (
        Option("out_spatial_dim", None, "Dim of the new axis of the frames so far"),
        Option("axis", None, "RETURNN: only its single-step dim (the loop's step)"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources)
        axis = self.opt("axis")
        if axis is not None and not (isinstance(axis, Dim) and "single" in axis.description.lower()):
            raise NetworkError("%s: 'axis' may only be the single-step dim (the loop's step), got %r" % (self.desc, axis))
        self.input, self.plan = concat_output(self, sources)
        data = self.input
        if any(d.is_dynamic() for d in data.dims):
            raise NetworkError("%s: runs inside a rec loop on one frame per step (no dynamic axes), got %s"
                               % (self.desc, data.short_repr()))
        self.step_mode = True
        dim = self.opt("out_spatial_dim")
        if dim is None:
            from returnn.tf.layers.norm import behavior_version
            if behavior_version() >= 1:  # released RETURNN requires it (new_dim, since 2021-11 out_spatial_dim)
                raise NetworkError("%s: needs 'out_spatial_dim' (a dynamic Dim; RETURNN: a required argument, only "
                                   "its 2021 branch frithjof-self-attention made one); not with a behavior_version"
                                   % self.desc)
            dim = Dim(None, kind=DimTypes.Spatial, description="%s:cum-concat" % name)
        elif not isinstance(dim, Dim) or dim.dimension is not None:
            raise NetworkError("%s: out_spatial_dim must be a dynamic Dim, got %r" % (self.desc, dim))
        self.new = dim
        self.pos = 0 if data.batch_dim_axis is None else data.batch_dim_axis + 1
        self.output = data.copy_insert_dim(dim, self.pos).copy(name)

    def initial_state(self, batch: tf.Tensor, n_time: tf.Tensor):
        """The frames so far: zeros of the output's shape, the new axis as long as the loop."""
        shape = [batch if d.is_batch_dim() else (n_time if d is self.new else d.dimension) for d in self.output.dims]
        return tf.zeros(tf.stack(shape), tf.as_dtype(self.output.dtype))

    def step(self, sources: List[LayerOutput], state, ctx: RunContext, t: tf.Tensor):
        x = concat_inputs(self, self.input, self.plan, sources, ctx)
        frame = tf.expand_dims(tf.cast(x.tensor, state.dtype), self.pos)
        at_t = tf.one_hot(t, tf.shape(state)[self.pos], on_value=True, off_value=False, dtype=tf.bool)
        at_t = tf.reshape(at_t, [-1 if i == self.pos else 1 for i in range(len(self.output.dims))])
        buffer = tf.where(at_t, frame, state)
        return self.make_output(buffer, sources, {self.new: t + 1}), buffer

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        raise NetworkError("%s: runs only inside a rec layer's unit (RETURNN: 'must be used inside a RecLayer')"
                           % self.desc)
