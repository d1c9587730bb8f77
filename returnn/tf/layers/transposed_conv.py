"""``transposed_conv`` (RETURNN's TransposedConvLayer): upsampling over 1 or 2 spatial axes.

Per spatial axis with input length ``n``, filter ``k``, stride ``s`` (default: ``k``), the output
length is (as Keras' ``deconv_output_length``, which RETURNN uses)::

    output_padding None:  valid: n * s + max(k - s, 0)      same: n * s
    output_padding p:     (n - 1) * s + k - 2 * pad + p      (pad = k // 2 for same, 0 for valid)

minus ``2 * remove_padding`` (frames cut at both ends). Sequence lengths follow the same formula (at least 0);
input padding is zeroed first (what RETURNN's datasets feed); output positions beyond a sequence's length
hold what RETURNN computes there (the bias, contributions of the last frames), no masking. Weights
``W``: filter_size + [n_out, n_in] (TensorFlow's transposed layout, as RETURNN).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim, DimTypes
from returnn.tf.activations import get_activation
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.conv import WINDOW_OPTIONS, bias_value, check_bias_layer
from returnn.tf.layers.dim_shift import given_same_as, shifted_dim
from returnn.tf.layers.helpers import concat_inputs, dense_value
from returnn.tf.layers.options import Option
from returnn.tf.layers.params import Param, reshaped
from returnn.tf.layers.spatial import SpatialPlan


def transposed_length(n: Any, k: int, s: int, padding: str, output_padding: Optional[int], remove: int) -> Any:
    """Output length for input length ``n`` (int or int tensor); see the module docstring."""
    if output_padding is None:
        if padding == "valid":
            length = n * s + max(k - s, 0)
        else:
            length = n * s
    else:
        pad = k // 2 if padding == "same" else 0
        length = (n - 1) * s + k - 2 * pad + output_padding
    return length - 2 * remove


def _dim_math(k: int, s: int, padding: str, output_padding: Optional[int], remove: int) -> List[Tuple[str, int]]:
    """:func:`transposed_length` as RETURNN's dim math (``calc_transposed_conv_out_length``): ``in * s``, plus
    the window's excess over the stride, less ``remove_padding`` on both sides."""
    if output_padding is None:
        extra = max(k - s, 0) if padding == "valid" else 0
    else:
        extra = k - s - 2 * (k // 2 if padding == "same" else 0) + output_padding
    return [("mul", s), ("add_right", extra), ("sub_left", remove), ("sub_right", remove)]


def _per_axis(layer: Layer, key: str, value: Any, n: int, allow_none: bool) -> List[Any]:
    items = list(value) if isinstance(value, (list, tuple)) else [value] * n
    ok = len(items) == n and all((v is None and allow_none) or (isinstance(v, int) and not isinstance(v, bool)
                                                                 and v >= 0) for v in items)
    if not ok:
        raise NetworkError("%s: option %r must be an int >= 0%s or a list of %i (one per spatial axis), got %r"
                           % (layer.desc, key, " or None" if allow_none else "", n, value))
    return items


@register_layer
class TransposedConvLayer(Layer):
    """See the module docstring."""

    layer_class = "transposed_conv"
    ref_options = ("bias",)
    options = WINDOW_OPTIONS + (
        Option("padding", "same", "'same' or 'valid'"),
        Option("filter_size", None, "window size per spatial axis, e.g. [3]"),
        Option("remove_padding", 0, "frames to cut at both ends of each spatial axis (int or list)"),
        Option("output_padding", None, "extra output frames per axis (int, None or list); see module docstring"),
        Option("activation", None, "activation after the transposed convolution"),
        Option("with_bias", True, "add a bias"),
        Option("forward_weights_init", "glorot_uniform", "init of the weights (RETURNN init spec)"),
        Option("bias_init", 0.0, "init of the bias (RETURNN init spec)"),
        Option("bias", None, "a layer whose output (the n_out channels) is the bias instead of an own parameter "
                             "(RETURNN's; with_bias must not be False)"),
        Option("out_spatial_dims", None, "Dims of the output's spatial axes, one per input spatial axis (a static one "
                                         "must have the computed length)"),
        Option("use_time_mask", False, "padded input frames set to 0 first (else as they are where a layer before "
                                       "computed them, as RETURNN)"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        self.bias_ref = isinstance(opts.get("bias"), str)
        if opts.get("bias") not in (None, False) and not self.bias_ref:  # RETURNN: a falsy bias is none
            raise NetworkError("%s: 'bias' must name a layer, got %r" % (self.desc, opts.get("bias")))
        all_sources, sources = sources, list(sources)[:len(sources) - int(self.bias_ref)]  # the bias layer appended
        for key in ("dilation_rate", "use_channel_first"):
            if self.opt(key) not in (1, False, None):
                raise NetworkError("%s: option %r is not supported" % (self.desc, key))
        if str(self.opt("padding")).lower() not in ("same", "valid") or not isinstance(self.opt("padding"), str):
            raise NetworkError("%s: padding must be 'same' or 'valid' (RETURNN's transposed_conv), got %r"
                               % (self.desc, self.opt("padding")))
        for key in ("filter_size", "strides"):  # RETURNN takes len() of both: an int is a TypeError there
            if isinstance(self.opt(key), int):
                raise NetworkError("%s: %r must be a list, one int per spatial axis (RETURNN's transposed_conv), got %r"
                                   % (self.desc, key, self.opt(key)))
        self.plan = SpatialPlan(self, sources, "filter_size", default_stride_is_size=True)
        windows = self.plan.windows
        if len(windows) > 2:
            raise NetworkError("%s: 1-D or 2-D only, got %i spatial axes" % (self.desc, len(windows)))
        self.remove = _per_axis(self, "remove_padding", self.opt("remove_padding"), len(windows), False)
        self.out_pad = _per_axis(self, "output_padding", self.opt("output_padding"), len(windows), True)
        n_out = self.require_n_out()
        n_in = self.plan.data.dim
        self.activation = get_activation(self.opt("activation"), name)
        self.W = self.weight("W_native_transposed_conv", [w.size for w in windows] + [n_out, n_in], init_option="forward_weights_init")
        if self.bias_ref and not self.opt("with_bias"):
            raise NetworkError("%s: 'bias' (a layer) with with_bias False (RETURNN asserts)" % self.desc)
        if self.bias_ref:
            check_bias_layer(self, list(all_sources)[-1], n_out)
        self.bias = self.weight("bias", [n_out], 0.0, init_option="bias_init") \
            if self.opt("with_bias") and not self.bias_ref else None
        self.out_dims: List[Dim] = []
        for i, w in enumerate(windows):
            args = (w.size, w.stride, self.plan.padding, self.out_pad[i], self.remove[i])
            if w.in_dim.is_static():
                size = transposed_length(w.in_dim.dimension, *args)
                if size < 1:
                    raise NetworkError("%s: output length %i of axis %r is < 1" % (self.desc, size,
                                                                                 w.in_dim.description))
                out = Dim(size, kind=DimTypes.Spatial, description="%s:%s" % (name, w.in_dim.description))
            else:
                out = shifted_dim(w.in_dim, _dim_math(*args))
            self.out_dims.append(out)
        given = self.opt("out_spatial_dims")
        if given is not None:
            if not isinstance(given, (list, tuple)) or len(given) != len(windows) or \
                    not all(isinstance(d, Dim) and d.dimension == o.dimension for d, o in zip(given, self.out_dims)):
                raise NetworkError("%s: 'out_spatial_dims' must be %i Dims of sizes %s, got %r" % (
                    self.desc, len(windows), [o.dimension for o in self.out_dims], given))
            self.out_dims = [given_same_as(d, o) for d, o in zip(given, self.out_dims)]
        batch = self.plan.data.dims[self.plan.data.batch_dim_axis]
        self.output = Data(name, dims=[batch] + self.out_dims + [self.out_feature_dim()],
                           feature_dim_axis=len(self.out_dims) + 1)

    def returnn_params(self) -> List[Param]:
        """RETURNN runs a 1-D transposed convolution as a 2-D one: its kernel is (k, 1, n_out, n_in)."""
        params = super().returnn_params()  # none of its own with reuse_params: the owner's layer lists W
        if self.W.shape.rank == 3:
            params = [reshaped(p.name, self.W, [self.W.shape[0], 1] + list(self.W.shape[1:]))
                      if p.variables[0] is self.W else p for p in params]
        return params

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        plan = self.plan
        bias = bias_value(sources[-1], 2 + len(plan.windows)) if self.bias_ref else self.bias
        sources = sources[:len(sources) - int(self.bias_ref)]
        x = dense_value(concat_inputs(self, plan.concat_data, plan.concat_plan, sources, ctx))
        # RETURNN reads the padded frames as they are (a layer before may have computed values there) unless
        # use_time_mask; extern data's count as zero frames
        tensor = x.masked(0.0) if self.opt("use_time_mask") else x.as_read()
        for reshape in plan.reshapes:
            tensor = reshape(tensor)
        xt = tf.transpose(tensor, plan.perm)  # (B, spatial..., C_in)
        shape = tf.shape(xt)
        full = []  # output lengths before remove_padding
        for i, w in enumerate(plan.windows):
            full.append(transposed_length(shape[i + 1], w.size, w.stride, plan.padding, self.out_pad[i], 0))
        out_shape = tf.stack([shape[0]] + full + [self.output.dim])
        y = tf.nn.conv_transpose(xt, self.W, out_shape, strides=[w.stride for w in plan.windows],
                                 padding=plan.padding.upper())
        if any(self.remove):
            y = y[(slice(None),) + tuple(slice(r, -r if r else None) for r in self.remove)]
        if bias is not None:
            y = y + bias
        sizes = dict(x.sizes)
        for i, (w, out) in enumerate(zip(plan.windows, self.out_dims)):
            if out.is_dynamic():
                # (RETURNN's dim math: a length minus the removed frames is at least 0)
                sizes[out] = tf.maximum(transposed_length(x.sizes[w.in_dim], w.size, w.stride, plan.padding,
                                                          self.out_pad[i], self.remove[i]), 0)
        # padded output frames as RETURNN computes them (no masking) from the zero-padded input (bias, neighbours)
        return self.make_output(self.activation(y), sources, sizes)
