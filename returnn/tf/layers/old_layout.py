"""RETURNN's old layers for a fixed (batch, time, feature) layout (its segmental-model and signal
modules), with its semantics:

- ``fill_unused``: padded frames (of the time axis) set to ``fill_value``.
- ``swap_time_feature``: ``(B, T, F)`` -> ``(B, F, T)``: the old feature axis becomes the time axis
  (every sequence has all ``F`` frames), the old time axis the feature axis (keeping its sizes;
  its padded positions hold what the input held there).
- ``flatten_time``: ``(B, T, D)`` -> ``(B, 1, T * D)``: each sequence as one frame of all its values,
  padding included after its real ``L * D`` values (the sizes of the new feature axis).
- ``tile_features``: the feature axis repeated ``repetitions`` times (``(B, T, F * r)``).
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim, DimTypes
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.helpers import check_sources, concat_inputs, concat_output
from returnn.tf.layers.options import Option, positive_int


class _BatchTimeFeature(Layer):
    """One (feature-concatenated) dense input of (batch, time, feature), moved batch-major."""

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources)
        self.input, self.plan = concat_output(self, sources)
        data = self.input
        axes = (data.batch_dim_axis, data.time_dim_axis, data.feature_dim_axis)
        if data.batch_ndim != 3 or None in axes or data.sparse:
            raise NetworkError("%s: the input must be dense (batch, time, feature), got %s" % (self.desc, data.short_repr()))
        self.perm = list(axes)
        self.btf = data.copy_transpose(self.perm)

    def inputs(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = concat_inputs(self, self.input, self.plan, sources, ctx)
        return x.copy_transpose(self.perm)


@register_layer
class FillUnusedMemoryLayer(Layer):
    """See the module docstring."""

    layer_class = "fill_unused"
    options = (Option("fill_value", 0.0, "the value of padded frames"),)

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources)
        self.input, self.plan = concat_output(self, sources)
        if self.input.time_dim_axis is None:
            raise NetworkError("%s: the input needs a time axis, got %s" % (self.desc, self.input.short_repr()))
        self.output = self.input.copy(name)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = concat_inputs(self, self.input, self.plan, sources, ctx)
        if not x.data.time_dim.is_dynamic():
            return self.make_output(x.tensor, sources)
        fill = tf.cast(float(self.opt("fill_value")), x.tensor.dtype)
        return self.make_output(tf.where(x.broadcast_mask(), x.tensor, fill), sources)


@register_layer
class SwapTimeFeatureLayer(_BatchTimeFeature):
    """See the module docstring."""

    layer_class = "swap_time_feature"

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        batch, time, feat = self.btf.dims
        self.new_time = Dim(feat.dimension, kind=DimTypes.Spatial, description="%s:time" % name)
        self.output = Data(name, dims=[batch, self.new_time, time], dtype=self.btf.dtype, time_dim_axis=1,
                           feature_dim_axis=2)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = self.inputs(sources, ctx)
        return self.make_output(tf.transpose(x.tensor, [0, 2, 1]), sources)


@register_layer
class FlattenTimeLayer(_BatchTimeFeature):
    """See the module docstring."""

    layer_class = "flatten_time"

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        batch, time, feat = self.btf.dims
        if feat.dimension is None:
            raise NetworkError("%s: the feature axis must be static, got %s" % (self.desc, self.btf.short_repr()))
        self.time = time
        one = Dim(1, kind=DimTypes.Spatial, description="%s:time" % name)
        size = None if time.dimension is None else time.dimension * feat.dimension
        self.flat = Dim(size, kind=DimTypes.Feature, description="%s:time*feature" % name)
        self.output = Data(name, dims=[batch, one, self.flat], dtype=self.btf.dtype, time_dim_axis=1,
                           feature_dim_axis=2)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = self.inputs(sources, ctx)
        out = tf.reshape(x.tensor, [tf.shape(x.tensor)[0], 1, -1])
        sizes = {}
        if self.flat.is_dynamic():
            sizes[self.flat] = x.sizes[self.time] * self.btf.dims[2].dimension
        return self.make_output(out, sources, sizes)


@register_layer
class TileFeaturesLayer(_BatchTimeFeature):
    """See the module docstring."""

    layer_class = "tile_features"
    options = (Option("repetitions", 1, "how often the features are repeated"),)

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        self.reps = positive_int(self.desc, "repetitions", self.opt("repetitions"))
        batch, time, feat = self.btf.dims
        if feat.dimension is None:
            raise NetworkError("%s: the feature axis must be static, got %s" % (self.desc, self.btf.short_repr()))
        new = Dim(feat.dimension * self.reps, kind=DimTypes.Feature, description="%s:feature" % name)
        self.check_n_out(new.dimension)
        self.output = Data(name, dims=[batch, time, new], dtype=self.btf.dtype, time_dim_axis=1, feature_dim_axis=2)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = self.inputs(sources, ctx)
        return self.make_output(tf.tile(x.tensor, [1, 1, self.reps]), sources)
