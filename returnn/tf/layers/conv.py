"""``conv`` and ``pool`` over 1, 2 or more spatial axes (layout, padding and lengths: see
:mod:`returnn.tf.layers.spatial`).

Padded frames of the input (positions beyond a sequence's length, inside the batch's padded
extent) take part as RETURNN lets them: with ``use_time_mask`` False (its default) RETURNN
convolves and pools over them *as they are* (zeros from the data, a linear layer's bias, a cumsum's
total, a previous conv's values there), and so does this engine; the outputs' padded frames are
left as computed too (RETURNN does not mask them). ``use_time_mask`` True: padded frames are set to
0 for a convolution; a pool leaves them out as RETURNN masks them (``max``: -inf; ``avg``: 0, still
counted). Window padding (``same``, beyond the batch's padded extent) is TensorFlow's: zeros for a
convolution, ignored by ``max``, not counted by ``avg``; explicit padding (an int) is part of the
tensor, as in RETURNN: zeros for a convolution and ``avg`` (counted), -inf for ``max``.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data
from returnn.tf.activations import get_activation
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.helpers import concat_inputs
from returnn.tf.layers.options import Option, one_of, positive_int
from returnn.tf.layers.spatial import SpatialPlan

WINDOW_OPTIONS = (
    Option("padding", "same", "'same', 'valid', 'same_static', or explicit zeros: an int or one per spatial axis"),
    Option("strides", None, "int or one int per spatial axis"),
    Option("dilation_rate", 1, "int or one int per spatial axis"),
    Option("in_spatial_dims", None, "axis descriptions of the spatial axes to slide over (default: all)"),
    Option("in_dim", None, "Dim: the input's channel axis (RETURNN: made the feature axis; default the feature axis)"),
    Option("input_add_feature_dim", False, "append a feature axis of size 1 first (old feature axis becomes spatial)"),
    Option("input_expand_dims", 0, "add this many spatial axes of size 1 to the input"),
    Option("input_split_feature_dim", None, "n: split the input feature axis F into (spatial F/n, feature n)"),
    Option("use_channel_first", False, "output (B, C, spatial...) instead of (B, spatial..., C)"),
    Option("auto_use_channel_first", None, "RETURNN: channel-first internally on a GPU",
           noop="a layout choice RETURNN makes for GPU speed: the output has the same dims and values; this "
                "engine keeps channel-last, as RETURNN on a CPU"),
)


@register_layer
class ConvLayer(Layer):
    """Convolution: ``filter_size`` (one int per spatial axis), ``n_out`` channels, ``activation``,
    ``with_bias`` (RETURNN's default: True from ``behavior_version`` 10, else False); sparse inputs
    are refused, as RETURNN asserts. Weights ``W``: filter_size + [in, n_out]."""

    layer_class = "conv"
    ref_options = ("filter", "bias")
    options = WINDOW_OPTIONS + (
        Option("out_spatial_dims", None, "Dims of the output's spatial axes (RETURNN: the computed ones are declared "
                                         "the same as these)"),
        Option("filter_size", None, "window size per spatial axis, e.g. [3] or [3, 3]"),
        Option("activation", None, "activation after the convolution"),
        Option("with_bias", None, "add a bias (default: True from behavior_version 10, else False; RETURNN's)"),
        Option("forward_weights_init", "glorot_uniform", "init of the weights (RETURNN init spec)"),
        Option("bias_init", 0.0, "init of the bias (RETURNN init spec)"),
        Option("groups", 1, "grouped convolution: channels in groups (groups = input channels: depthwise)"),
        Option("filter", None, "a layer whose output is the kernel instead of an own parameter W (RETURNN's): its "
                               "axes the filter_size ones, then input channels (/ groups) and n_out, matched by "
                               "dim or size"),
        Option("bias", None, "a layer whose output (the n_out channels) is the bias instead of an own parameter "
                             "(RETURNN's; with_bias must not be False)"),
        Option("filter_perm", None, "RETURNN: transposes the filter layer's output first", only=(None,)),
        Option("pad_seq_len_to_power", None, "RETURNN: dynamic axes padded to a power of this first (default: "
                                             "config conv_pad_seq_len_to_power); no effect but with strides and "
                                             "'same' there (refused)"),
        Option("use_time_mask", False, "padded input frames set to 0 before the convolution (False: they take "
                                       "part as they are, as RETURNN)"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        self.filter_ref = isinstance(opts.get("filter"), str)
        if opts.get("filter") is not None and not self.filter_ref:
            raise NetworkError("%s: 'filter' must name a layer, got %r" % (self.desc, opts.get("filter")))
        self.bias_ref = isinstance(opts.get("bias"), str)
        if opts.get("bias") not in (None, False) and not self.bias_ref:  # RETURNN: a falsy bias is none
            raise NetworkError("%s: 'bias' must name a layer, got %r" % (self.desc, opts.get("bias")))
        self.n_refs = int(self.filter_ref) + int(self.bias_ref)  # the network appends them to the sources, in order
        sources = list(sources)
        self.plan = SpatialPlan(self, sources[:len(sources) - self.n_refs], "filter_size", default_stride_is_size=False)
        n_out = self.require_n_out()
        self.activation = get_activation(self.opt("activation"), name)
        n_in = self.plan.data.dim
        self.groups = positive_int(self.desc, "groups", self.opt("groups"))
        if n_in % self.groups or n_out % self.groups:
            raise NetworkError("%s: groups %i must divide the input (%i) and output (%i) channels"
                               % (self.desc, self.groups, n_in, n_out))
        shape = [w.size for w in self.plan.windows] + [n_in // self.groups, n_out]
        if self.filter_ref:
            self.W = None
            self.filter_perm = self._filter_axes(sources[len(sources) - self.n_refs], shape)
        else:
            self.W = self.weight("W", shape, init_option="forward_weights_init")
        with_bias = self.opt("with_bias")
        if self.bias_ref:
            if with_bias is False:
                raise NetworkError("%s: 'bias' (a layer) with with_bias False (RETURNN asserts)" % self.desc)
            self._check_bias_layer(sources[-1], n_out)
            with_bias = False  # the layer's value is added instead
        if with_bias is None:
            from returnn.tf.layers.norm import behavior_version
            with_bias = behavior_version() >= 10
        self.bias = self.weight("bias", [n_out], 0.0, init_option="bias_init") if with_bias else None
        self.output = self.plan.output_data(name, self.out_feature_dim())
        self._check_pad_to_power()

    def _check_pad_to_power(self) -> None:
        """RETURNN's pad_seq_len_to_power changes nothing here but the windows of a strided 'same'
        conv over a dynamic axis (TF's SAME then follows the longer padded length): refused there."""
        power = self.opt("pad_seq_len_to_power")
        if power is None:
            from returnn.config import get_global_config
            power = get_global_config().float("conv_pad_seq_len_to_power")
        if power is not None and self.plan.padding == "same" and any(
                w.stride > 1 and w.in_dim.is_dynamic() for w in self.plan.windows):
            raise NetworkError("%s: pad_seq_len_to_power (conv_pad_seq_len_to_power) %r with strides and padding "
                               "'same' on a dynamic axis is not supported (RETURNN's windows follow the padded "
                               "length)" % (self.desc, power))

    def _filter_axes(self, data: Data, shape: List[int]) -> List[int]:
        """The axes of the filter layer's output in the kernel's order (filter_size axes, input
        channels, n_out), as RETURNN matches them: input and output channels by their Dims, else by
        size (the last such axis), the rest in order must be filter_size."""
        where = "%s: filter %r %s" % (self.desc, self.opt("filter"), data.short_repr())
        if data.batch_dim_axis is not None or data.get_dynamic_axes() or data.batch_ndim != len(shape):
            raise NetworkError("%s must have %i static axes without batch (filter_size, input channels, n_out)"
                               % (where, len(shape)))
        used: List[int] = []
        for want, dim in ((shape[-1], self.out_feature_dim()), (shape[-2], self.plan.data.feature_dim)):
            same = [i for i, d in enumerate(data.dims) if d == dim and i not in used] if self.groups == 1 or \
                dim is not self.plan.data.feature_dim else []
            sized = [i for i, d in enumerate(data.dims) if d.dimension == want and i not in used]
            if not (same or sized):
                raise NetworkError("%s has no axis of size %i for the channels" % (where, want))
            used.append((same or sized)[-1])
        rest = [i for i in range(data.batch_ndim) if i not in used]
        if [data.dims[i].dimension for i in rest] != shape[:-2]:
            raise NetworkError("%s: its other axes %s must be the filter_size %s" % (
                where, [data.dims[i].dimension for i in rest], shape[:-2]))
        return rest + used[::-1]

    def _check_bias_layer(self, data: Data, n_out: int) -> None:
        """See :func:`check_bias_layer`."""
        check_bias_layer(self, data, n_out)

    def kernel(self, sources: List[LayerOutput]) -> tf.Tensor:
        """The kernel (filter_size..., input channels / groups, n_out): W, or the filter layer's value."""
        if not self.filter_ref:
            return tf.convert_to_tensor(self.W)
        value = sources[len(sources) - self.n_refs].tensor
        return tf.transpose(value, self.filter_perm) if self.filter_perm != sorted(self.filter_perm) else value

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        plan = self.plan
        w = self.kernel(sources)
        bias = bias_value(sources[-1], 2 + len(plan.windows)) if self.bias_ref else self.bias
        sources = sources[:len(sources) - self.n_refs]
        x = concat_inputs(self, plan.concat_data, plan.concat_plan, sources, ctx)
        xt, _ = plan.channel_last_input(x, 0.0 if self.opt("use_time_mask") else None, pad_fill=0.0)
        strides = [win.stride for win in plan.windows]
        dilations = [win.dilation for win in plan.windows]
        strided = all(d == 1 for d in dilations) and self.groups == 1
        if self.groups == 1:
            conv = lambda: tf.nn.convolution(xt, w, strides=strides if strided else 1, padding="VALID",  # noqa: E731
                                             dilations=dilations)
        else:
            conv = lambda: self._grouped(xt, dilations, w)  # noqa: E731
        y = _unless_empty(conv, xt, [win.size for win in plan.windows], strides if strided else [1] * len(strides),
                          dilations, w.shape[-1])
        y = plan.subsample(y, strided)
        if bias is not None:
            y = y + bias
        return plan.finish(self, self.activation(y), sources, x)


    def _grouped(self, xt: tf.Tensor, dilations: List[int], kernel: tf.Tensor) -> tf.Tensor:
        """Grouped convolution with stride 1 (the caller subsamples): group g maps input channels
        ``g*n_in/G ..`` to output channels ``g*n_out/G ..``; depthwise for G = input channels."""
        n_in, n_out, rank = self.plan.data.dim, self.output.dim, len(self.plan.windows)
        if self.groups == n_in and rank <= 2:
            w = tf.reshape(kernel, [win.size for win in self.plan.windows] + [n_in, n_out // n_in])
            x4, w4, dil = (xt[:, :, None], w[:, None], dilations + [1]) if rank == 1 else (xt, w, dilations)
            y = tf.nn.depthwise_conv2d(x4, w4, strides=[1, 1, 1, 1], padding="VALID", dilations=dil)
            return y[:, :, 0] if rank == 1 else y
        xs = tf.split(xt, self.groups, axis=-1)
        ws = tf.split(kernel, self.groups, axis=-1)
        return tf.concat([tf.nn.convolution(x, w, padding="VALID", dilations=dilations) for x, w in zip(xs, ws)], -1)


POOL_MODES = ("max", "avg")


@register_layer
class PoolLayer(Layer):
    """Max/avg pooling: ``mode``, ``pool_size`` (one int per spatial axis), ``padding`` (default
    "valid" as in RETURNN), ``strides`` (default = pool_size)."""

    layer_class = "pool"
    options = WINDOW_OPTIONS + (
        Option("out_spatial_dims", None, "Dims of the output's spatial axes (RETURNN: the computed ones are declared "
                                         "the same as these)"),
        Option("padding", "valid", "'same', 'valid', 'same_static', or explicit padding: an int or one per spatial "
                                   "axis (max: -inf, avg: zeros, counted)"),
        Option("mode", "max", "'max' or 'avg'"),
        Option("pool_size", None, "window size per spatial axis, e.g. [2] or [1, 2]"),
        Option("use_time_mask", False, "True: padded input frames are left out (max: -inf, avg: 0 counted), "
                                        "as RETURNN masks them; False: they take part as zeros (module docstring)"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        if any(s.sparse for s in sources):
            raise NetworkError("%s: pooling sparse data (class indices, no feature axis) is refused, as RETURNN "
                               "asserts a feature axis" % self.desc)
        if any(s.dtype != "float32" for s in sources):  # RETURNN's output template is float32 whatever the input
            raise NetworkError("%s: pooling %s data is refused (RETURNN's output is float32 and asserts its tensor "
                               "matches); cast it to float32 first" % (self.desc, sources[0].dtype))
        mode = str(self.opt("mode")).lower()
        self.mode = one_of(self.desc, "mode", "avg" if mode == "average" else mode, POOL_MODES)
        self.plan = SpatialPlan(self, sources, "pool_size", default_stride_is_size=True)
        if max(w.stride for w in self.plan.windows) > 1 and max(w.dilation for w in self.plan.windows) > 1:
            raise NetworkError("%s: strides > 1 together with dilation_rate > 1 is not supported (RETURNN's tf.nn.pool "
                               "refuses it too)" % self.desc)
        identity = all(w.size == 1 and w.stride == 1 for w in self.plan.windows)  # RETURNN skips tf.nn.pool then
        if self.plan.padding == "same" and max(w.dilation for w in self.plan.windows) > 1 and not identity:
            raise NetworkError("%s: padding 'same' together with dilation_rate > 1 is not supported (RETURNN's tf.nn.pool "
                               "refuses it; use 'same_static' or explicit padding)" % self.desc)
        given = [k for k in ("n_out", "out_type") if self.opts.get(k) is not None]
        if given:  # RETURNN's PoolLayer asserts neither is given (since 2017), even where it matches
            raise NetworkError("%s: %s is refused, as RETURNN's pool asserts (the output keeps the input's channels)"
                               % (self.desc, " and ".join(repr(k) for k in given)))
        self.output = self.plan.output_data(name, self.plan.data.feature_dim)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        plan = self.plan
        x = concat_inputs(self, plan.concat_data, plan.concat_plan, sources, ctx)
        window = [w.size for w in plan.windows]
        dilations = [w.dilation for w in plan.windows]
        strides = [w.stride for w in plan.windows]  # (with dilations > 1: refused in __init__)
        outside = float("-inf") if self.mode == "max" else 0.0  # window padding: ignored / not counted
        fill = outside if self.opt("use_time_mask") else None  # None: padded frames as they are (RETURNN)
        xt, extent = plan.channel_last_input(x, fill, pad_fill=outside)
        y = tf.nn.pool(xt, window, self.mode.upper(), strides=strides, padding="VALID", dilations=dilations)
        count = tf.nn.pool(extent, window, "AVG", strides=strides, padding="VALID", dilations=dilations)
        if self.mode == "avg":
            y = y / tf.maximum(count, 1e-8)
        y = tf.where(count > 0, y, 0.0)
        return plan.finish(self, y, sources, x)


def _unless_empty(conv, xt: tf.Tensor, sizes: List[int], strides: List[int], dilations: List[int], n_out: int):
    """``conv()`` (a VALID convolution of the channel-last ``xt``), or zeros of its shape when it has no
    output position (every sequence of the batch empty): oneDNN's convolution gradient fails on those."""
    spatial = tf.shape(xt)[1:-1]
    out = [tf.maximum((spatial[i] - (k - 1) * d - 1) // s + 1, 0) for i, (k, s, d) in enumerate(zip(sizes, strides,
                                                                                                 dilations))]
    shape = tf.concat([tf.shape(xt)[:1], tf.stack(out), [n_out]], 0)
    return tf.cond(tf.reduce_prod(shape) > 0, conv, lambda: tf.zeros(shape, xt.dtype))


def conv_out_len(length: int, k: int, stride: int = 1, dilation: int = 1, padding: str = "same") -> int:
    """Python-int output length (handy for tests and shape planning)."""
    k_eff = (k - 1) * dilation + 1
    if padding == "same":
        return -(-length // stride)
    return max(0, (length - k_eff) // stride + 1)


__all__: Tuple[str, ...] = ("ConvLayer", "PoolLayer", "conv_out_len", "bias_value")


def bias_value(bias: LayerOutput, rank: int) -> tf.Tensor:
    """A bias layer's value (see :func:`check_bias_layer`) for a channel-last output (B, spatial..., C) of
    ``rank`` axes: (C,) or (1,) (a scalar), with a batch axis (B, 1, ..., C)."""
    b = bias.data.batch_dim_axis
    if b is None:
        return tf.reshape(bias.tensor, [-1])
    value = tf.transpose(bias.tensor, [b] + [i for i in range(bias.data.batch_ndim) if i != b])
    shape = tf.shape(value)
    return tf.reshape(value, tf.concat([shape[:1], tf.ones([rank - 2], tf.int32), [-1]], 0))


def check_bias_layer(layer: Layer, data: Data, n_out: int) -> None:
    """The ``bias`` layer's output of a conv / transposed_conv ``layer`` must be the n_out channels, maybe with
    static size-1 axes that broadcast and a batch axis (one bias per sequence), or a scalar or size-1 axes only
    (one value for every channel; RETURNN adds it made compatible to the output); :func:`bias_value` shapes it for the channel-last output."""
    sizes = [d.dimension for i, d in enumerate(data.dims) if i != data.batch_dim_axis]
    if not sizes and not data.sparse:  # a scalar: RETURNN's copy_compatible_to broadcasts it to every channel
        return
    # size-1 axes only (e.g. a variable of shape (1,)): broadcast to every channel as well
    if data.sparse or any(n not in (1, n_out) for n in sizes) or (n_out != 1 and sizes.count(n_out) > 1) or \
            len(sizes) > len(layer.plan.windows) + 1:
        raise NetworkError("%s: bias %r %s must have at most one static axis of the n_out %i channels (and size-1 "
                           "axes)" % (layer.desc, layer.opt("bias"), data.short_repr(), n_out))
