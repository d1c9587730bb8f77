"""1-D convolution and pooling over time.

Padded input frames are masked before the operation, so they never influence real frames.
``"same"`` padding is done explicitly and symmetrically (left ``(k_eff-1)//2``, rest right, as TF
does for stride 1), and strides are applied by subsampling that stride-1 result; so output frame
``t'`` is centred on input frame ``t' * stride`` independently of how long the batch is.
New lengths: ``same``: ``ceil(L / s)``; ``valid``: ``max(0, (L - k_eff) // s + 1)``,
with ``k_eff = (k - 1) * dilation + 1``. Output padded frames are 0.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tf.activations import get_activation
from returnn.tf.layers.base import Layer, LayerOutput, OutputSpec, RunContext, concat_sources, concat_specs, \
    register_layer
from returnn.tf.layers.basic import check_sources, masked_tensor, zero_padded

PADDINGS = ("same", "valid")


def _single_int(layer_name: str, opt: str, value: Any, default: Optional[int] = None) -> int:
    """An int option given as ``k`` or ``[k]`` (1-D only)."""
    if value is None:
        if default is None:
            raise NetworkError("layer %r: needs option %r" % (layer_name, opt))
        return default
    if isinstance(value, (list, tuple)):
        if len(value) != 1:
            raise NetworkError("layer %r: option %r must be an int or a 1-element list (1-D over time), got %r"
                               % (layer_name, opt, value))
        value = value[0]
    try:
        out = int(value)
    except (TypeError, ValueError):
        raise NetworkError("layer %r: option %r must be an int, got %r" % (layer_name, opt, value))
    if out < 1:
        raise NetworkError("layer %r: option %r must be >= 1, got %r" % (layer_name, opt, value))
    return out


def _padding(layer_name: str, value: Any) -> str:
    padding = str(value).lower()
    if padding not in PADDINGS:
        raise NetworkError("layer %r: padding must be 'same' or 'valid', got %r" % (layer_name, value))
    return padding


def out_seq_len(seq_len: tf.Tensor, k_eff: int, stride: int, padding: str) -> tf.Tensor:
    """Output lengths for input lengths ``seq_len`` (see module docstring)."""
    if padding == "same":
        return (seq_len + stride - 1) // stride
    return tf.maximum(seq_len - k_eff, -1) // stride + 1


def pad_time(x: tf.Tensor, k_eff: int, padding: str, value: Any = 0) -> tf.Tensor:
    """Pads axis 1 of ``x`` so that a VALID window of size ``k_eff`` gives the wanted output frames.

    For ``valid``, pads on the right only if T < k_eff (then all output lengths are 0).
    """
    rank = len(x.shape)
    if padding == "same":
        left = (k_eff - 1) // 2
        right = k_eff - 1 - left
        pads = [[0, 0], [left, right]] + [[0, 0]] * (rank - 2)
    else:
        right = tf.maximum(k_eff - tf.shape(x)[1], 0)
        pads = [[0, 0], [0, right]] + [[0, 0]] * (rank - 2)
    return tf.pad(x, pads, constant_values=value)


def _dense_input(sources: List[LayerOutput], layer_name: str) -> LayerOutput:
    x = concat_sources(sources, layer_name)
    if x.spec.sparse:
        tensor = tf.one_hot(masked_tensor(x, 0), x.spec.dim, dtype=tf.float32)
        x = LayerOutput(tensor, x.seq_len, OutputSpec(dim=x.spec.dim))
    return x


def _check_time(layer: Layer, specs: Sequence[OutputSpec]) -> OutputSpec:
    check_sources(layer.layer_name, layer.layer_class, specs)
    spec = concat_specs(specs, layer.layer_name)
    if not spec.has_time or not all(s.has_time for s in specs):
        raise NetworkError("layer %r (%s): input needs a time axis" % (layer.layer_name, layer.layer_class))
    return spec


@register_layer
class ConvLayer(Layer):
    """1-D convolution over time: ``filter_size``, ``padding``, ``strides``, ``dilation_rate``,
    ``n_out``, ``activation``, ``with_bias``. Sparse inputs are used as one-hot."""

    layer_class = "conv"
    extra_options = frozenset({"filter_size", "padding", "strides", "dilation_rate", "auto_use_channel_first"})

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[OutputSpec], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        spec = _check_time(self, sources)
        n_out = self.require_n_out()
        self.filter_size = _single_int(name, "filter_size", opts.get("filter_size"))
        self.stride = _single_int(name, "strides", opts.get("strides"), 1)
        self.dilation = _single_int(name, "dilation_rate", opts.get("dilation_rate"), 1)
        self.padding = _padding(name, opts.get("padding", "same"))
        self.k_eff = (self.filter_size - 1) * self.dilation + 1
        self.activation = get_activation(opts.get("activation"), name)
        self.W = self.weight("W", [self.filter_size, spec.dim, n_out])
        self.bias = self.weight("bias", [n_out], "zeros") if opts.get("with_bias", True) else None
        self.out_spec = OutputSpec(dim=n_out, sparse=False, has_time=True)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = self.apply_dropout(_dense_input(sources, self.layer_name), ctx)
        xt = pad_time(masked_tensor(x, 0.0), self.k_eff, self.padding)
        if self.dilation == 1:
            y = tf.nn.convolution(xt, self.W, strides=self.stride, padding="VALID")
        else:
            y = tf.nn.convolution(xt, self.W, padding="VALID", dilations=self.dilation)
            if self.stride > 1:
                y = y[:, ::self.stride]
        if self.bias is not None:
            y = y + self.bias
        y = self.activation(y)
        seq_len = out_seq_len(x.seq_len, self.k_eff, self.stride, self.padding)
        return LayerOutput(zero_padded(y, seq_len), seq_len, self.out_spec)


POOL_MODES = ("max", "avg")


@register_layer
class PoolLayer(Layer):
    """Max/avg pooling over time: ``mode``, ``pool_size``, ``padding`` (default "valid" as in
    RETURNN), ``strides`` (default = pool_size).

    Only real frames take part: max ignores padding, avg divides by the number of real frames in
    the window (like TF's SAME-padding avg pool at the borders). A window without any real frame
    gives 0.
    """

    layer_class = "pool"
    extra_options = frozenset({"mode", "pool_size", "padding", "strides", "dilation_rate", "use_channel_first"})

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[OutputSpec], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        spec = _check_time(self, sources)
        self.mode = str(opts.get("mode", "max")).lower()
        if self.mode == "average":
            self.mode = "avg"
        if self.mode not in POOL_MODES:
            raise NetworkError("layer %r (pool): unknown mode %r (known: avg, max)" % (name, opts.get("mode")))
        self.pool_size = _single_int(name, "pool_size", opts.get("pool_size"))
        self.stride = _single_int(name, "strides", opts.get("strides"), self.pool_size)
        if _single_int(name, "dilation_rate", opts.get("dilation_rate"), 1) != 1:
            raise NetworkError("layer %r (pool): dilation_rate != 1 is not supported" % name)
        self.padding = _padding(name, opts.get("padding", "valid"))
        self.out_spec = OutputSpec(dim=spec.dim, sparse=False, has_time=True)

    def _frames(self, x: tf.Tensor, value: Any) -> tf.Tensor:
        x = pad_time(x, self.pool_size, self.padding, value)
        return tf.signal.frame(x, self.pool_size, self.stride, axis=1)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = self.apply_dropout(_dense_input(sources, self.layer_name), ctx)
        frames = self._frames(masked_tensor(x, 0.0), 0.0)  # (B, N, k, D)
        mask_f = self._frames(tf.cast(x.mask(), tf.float32), 0.0)[:, :, :, None]  # (B, N, k, 1)
        mask = mask_f > 0.5
        count = tf.reduce_sum(mask_f, axis=2)  # (B, N, 1)
        if self.mode == "max":
            y = tf.reduce_max(tf.where(mask, frames, float("-inf")), axis=2)
            y = tf.where(count > 0, y, 0.0)
        else:
            y = tf.reduce_sum(tf.where(mask, frames, 0.0), axis=2) / tf.maximum(count, 1.0)
        seq_len = out_seq_len(x.seq_len, self.pool_size, self.stride, self.padding)
        return LayerOutput(zero_padded(y, seq_len), seq_len, self.out_spec)


def conv_out_len(length: int, k: int, stride: int = 1, dilation: int = 1, padding: str = "same") -> int:
    """Python-int counterpart of :func:`out_seq_len` (handy for tests and shape planning)."""
    k_eff = (k - 1) * dilation + 1
    if padding == "same":
        return -(-length // stride)
    return max(0, (length - k_eff) // stride + 1)


__all__: Tuple[str, ...] = ("ConvLayer", "PoolLayer", "out_seq_len", "conv_out_len")
