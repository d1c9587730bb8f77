"""RETURNN's older signal-processing layers on ``(B, T, F)`` frames (batch-major, feature last).

- ``alternating_real_to_complex``: features ``[re_0, im_0, re_1, im_1, ...]`` -> complex64 ``F / 2``;
  ``complex_to_alternating_real`` the inverse (``2 F`` real features).
- ``complex_linear_projection`` (Variani et al. 2016): alternating real/imaginary input, complex
  weights ``clp_kernel`` (2, F/2, nr_of_filters) -> ``safe_log(|W x|)`` per filter.
- ``split_concatenated_multichannel``: features of ``nr_of_channels`` channels side by side -> channels
  as batch entries: ``(B * C, T, F / C)``, entry ``b * C + c`` is channel ``c`` of sequence ``b``.
- ``batch_median_pooling``: the median (the ``ceil(pool_size / 2)``-th largest) over groups of
  ``pool_size`` consecutive batch entries -> ``(B / pool_size, T, F)``; each group's time sizes are
  its first entry's (RETURNN's).
- ``first_t_frames_noise_estimator``: the mean of the first ``nr_of_frames`` frames (-1: all),
  repeated over time; as RETURNN's, frames past a shorter sequence's end count as zeros.
- ``signal_masking``: ``signal * mask`` (a float mask on a complex signal is made complex).

Padded frames of the inputs enter as zeros (RETURNN computes on the padded tensor: zeros from its
datasets). ``parametric_wiener_filter`` needs i6's ``tfSi6Proc`` package: not available here.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Sequence

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim, DimTypes
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.helpers import check_sources, concat_inputs, concat_output
from returnn.tf.layers.options import Option, positive_int


class _FramesLayer(Layer):
    """Sources concatenated, as ``(B, T, F)`` with padded frames zero."""

    def _frames_input(self, sources: Sequence[Data]) -> Data:
        check_sources(self, sources)
        self.in_data, self.plan = concat_output(self, sources)
        data = self.in_data
        if data.sparse or data.batch_ndim != 3 or None in (data.batch_dim_axis, data.time_dim_axis,
                                                           data.feature_dim_axis):
            raise NetworkError("%s: the input must be dense (batch, time, feature), got %s"
                               % (self.desc, data.short_repr()))
        self.btf = [data.batch_dim_axis, data.time_dim_axis, data.feature_dim_axis]
        return data

    def _btf(self, data: Data, feat: Dim, dtype: str = None, batch: Dim = None, time: Dim = None) -> Data:
        dims = [batch or data.dims[self.btf[0]], time or data.dims[self.btf[1]], feat]
        return Data(self.layer_name, dims=dims, dtype=dtype or data.dtype, time_dim_axis=1, feature_dim_axis=2)

    def _value(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = concat_inputs(self, self.in_data, self.plan, sources, ctx).copy_transpose(self.btf)
        return x.with_tensor(x.masked(0))

    def _feature(self, n: int, suffix: str) -> Dim:
        self.check_n_out(n)
        out_dim = self.opts.get("out_dim")
        if out_dim is not None:
            if not isinstance(out_dim, Dim) or out_dim.dimension != n:
                raise NetworkError("%s: out_dim %r must be a Dim of size %i" % (self.desc, out_dim, n))
            return out_dim
        return Dim(n, kind=DimTypes.Feature, description="%s:%s" % (self.layer_name, suffix))


@register_layer
class AlternatingRealToComplexLayer(_FramesLayer):
    """See the module docstring."""

    layer_class = "alternating_real_to_complex"

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        data = self._frames_input(sources)
        if data.dim % 2:
            raise NetworkError("%s: needs an even feature dim, got %s" % (self.desc, data.short_repr()))
        self.output = self._btf(data, self._feature(data.dim // 2, "complex"), "complex64")

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = self._value(sources, ctx)
        y = tf.complex(tf.cast(x.tensor[..., 0::2], tf.float32), tf.cast(x.tensor[..., 1::2], tf.float32))
        return self.make_output(y, [x])


@register_layer
class ComplexToAlternatingRealLayer(_FramesLayer):
    """See the module docstring."""

    layer_class = "complex_to_alternating_real"

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        data = self._frames_input(sources)
        self.output = self._btf(data, self._feature(2 * data.dim, "real"), "float32")

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = self._value(sources, ctx)
        pair = tf.stack([tf.math.real(x.tensor), tf.math.imag(x.tensor)], axis=-1)
        shape = tf.shape(x.tensor)
        return self.make_output(tf.reshape(pair, [shape[0], shape[1], 2 * self.in_data.dim]), [x])


@register_layer
class ComplexLinearProjectionLayer(_FramesLayer):
    """See the module docstring."""

    layer_class = "complex_linear_projection"
    options = (
        Option("nr_of_filters", None, "output features (filters)"),
        Option("clp_weights_init", "glorot_uniform", "init of clp_kernel (RETURNN init spec)"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        data = self._frames_input(sources)
        n = positive_int(self.desc, "nr_of_filters", self.opt("nr_of_filters"))
        self.kernel = self.weight("clp_kernel", [2, data.dim // 2, n], "glorot_uniform", init_option="clp_weights_init")
        self.output = self._btf(data, self._feature(n, "clp"), "float32")

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        from returnn.tf.losses import safe_log
        x = self._value(sources, ctx)
        re, im = x.tensor[..., 0::2], x.tensor[..., 1::2]
        k_re, k_im = self.kernel[0], self.kernel[1]
        out_re = tf.einsum("btf,fp->btp", re, k_re) - tf.einsum("btf,fp->btp", im, k_im)
        out_im = tf.einsum("btf,fp->btp", im, k_re) + tf.einsum("btf,fp->btp", re, k_im)
        return self.make_output(safe_log(tf.sqrt(out_re ** 2 + out_im ** 2)), [x])


@register_layer
class SplitConcatMultiChannelLayer(_FramesLayer):
    """See the module docstring."""

    layer_class = "split_concatenated_multichannel"
    options = (Option("nr_of_channels", None, "channels whose features are concatenated (required, as in RETURNN)"),)

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        data = self._frames_input(sources)
        if self.opt("nr_of_channels") is None:  # RETURNN: a required argument (TypeError without it)
            raise NetworkError("%s: needs 'nr_of_channels'" % self.desc)
        self.channels = positive_int(self.desc, "nr_of_channels", self.opt("nr_of_channels"))
        if data.dim % self.channels:
            raise NetworkError("%s: feature dim %i is no multiple of nr_of_channels %i"
                               % (self.desc, data.dim, self.channels))
        self.time = Dim(None, kind=DimTypes.Spatial, description="%s:time" % name)
        self.output = self._btf(data, self._feature(data.dim // self.channels, "channel"), time=self.time)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = self._value(sources, ctx)
        c = self.channels
        shape = tf.shape(x.tensor)
        y = tf.reshape(x.tensor, [shape[0], shape[1], c, self.in_data.dim // c])
        y = tf.reshape(tf.transpose(y, [0, 2, 1, 3]), [shape[0] * c, shape[1], self.in_data.dim // c])
        return LayerOutput(y, self.output, {self.time: tf.repeat(x.seq_len, c)})


@register_layer
class BatchMedianPoolingLayer(_FramesLayer):
    """See the module docstring."""

    layer_class = "batch_median_pooling"
    options = (Option("pool_size", 1, "batch entries per group (also the stride)"),)

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        data = self._frames_input(sources)
        self.pool = positive_int(self.desc, "pool_size", self.opt("pool_size"))
        self.time = Dim(None, kind=DimTypes.Spatial, description="%s:time" % name)
        self.output = self._btf(data, data.dims[self.btf[2]], time=self.time)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = self._value(sources, ctx)
        p = self.pool
        shape = tf.shape(x.tensor)
        groups = tf.reshape(tf.transpose(x.tensor, [1, 2, 0])[..., :(shape[0] // p) * p],
                            [shape[1], shape[2], shape[0] // p, p])
        median = tf.math.top_k(groups, k=int(math.ceil(p / 2.0))).values[..., -1]
        return LayerOutput(tf.transpose(median, [2, 0, 1]), self.output, {self.time: x.seq_len[::p][:shape[0] // p]})


@register_layer
class NoiseEstimationByFirstTFramesLayer(_FramesLayer):
    """See the module docstring."""

    layer_class = "first_t_frames_noise_estimator"
    options = (Option("nr_of_frames", None, "frames averaged from the start (-1: all)"),)

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        data = self._frames_input(sources)
        n = self.opt("nr_of_frames")
        if n != -1:
            positive_int(self.desc, "nr_of_frames", n)
        self.output = self._btf(data, data.dims[self.btf[2]])

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = self._value(sources, ctx)
        n = self.opt("nr_of_frames")
        head = x.tensor if n == -1 else x.tensor[:, :n]
        noise = tf.reduce_mean(head, axis=1, keepdims=True)
        return self.make_output(tf.tile(noise, [1, tf.shape(x.tensor)[1], 1]), [x])


@register_layer
class SignalMaskingLayer(Layer):
    """See the module docstring."""

    layer_class = "signal_masking"
    ref_options = ("signal", "mask")
    default_from = ()
    options = (
        Option("signal", None, "layer with the signal"),
        Option("mask", None, "layer with the mask (same shape)"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        for key in ("signal", "mask"):
            if not isinstance(opts.get(key), str):
                raise NetworkError("layer %r (signal_masking): %r must name a layer, got %r" % (name, key, opts.get(key)))
        super().__init__(name, opts, sources, seed)
        signal, mask = sources[-2], sources[-1]
        if signal.dtype != mask.dtype and not (signal.dtype == "complex64" and mask.dtype == "float32"):
            raise NetworkError("%s: mask dtype %s with signal dtype %s is not supported (RETURNN's)"
                               % (self.desc, mask.dtype, signal.dtype))
        if [d.dimension for d in signal.dims] != [d.dimension for d in mask.dims]:
            raise NetworkError("%s: signal %s and mask %s must have the same shape"
                               % (self.desc, signal.short_repr(), mask.short_repr()))
        first = [a for a in (signal.batch_dim_axis, signal.time_dim_axis) if a is not None]
        last = [signal.feature_dim_axis] if signal.feature_dim_axis is not None else []
        perm = first + [a for a in range(signal.batch_ndim) if a not in first + last] + last
        self.output = signal.copy(name).copy_transpose(perm)  # as LayerOutput.copy_as_batch_time_feature

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        signal, mask = sources[-2].copy_as_batch_time_feature(), sources[-1].copy_as_batch_time_feature()
        y = signal.tensor * tf.cast(mask.tensor, signal.tensor.dtype)
        return self.make_output(y, [signal])
