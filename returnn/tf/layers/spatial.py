"""Sliding windows over spatial axes, shared by ``conv`` and ``pool``.

The input (sources concatenated on the feature axis; sparse inputs refused, as RETURNN) is laid out
channel-last ``(B, s_1, ..., s_n, C)``; ``in_spatial_dims`` picks the axes (default: all spatial
axes; in conv and pool the input's other axes are then merged into the batch and come first in the
output, in their order, as RETURNN's ``transform_input``), ``input_add_feature_dim`` first appends a feature axis of size 1 (so the old feature axis
becomes spatial, e.g. 2-D conv over time x frequency); ``input_expand_dims`` and
``input_split_feature_dim`` add spatial axes as in RETURNN.

Padding per axis, with ``k_eff = (k - 1) * dilation + 1``:

- ``same``: TensorFlow's SAME padding of the tensor, as RETURNN: total
  ``max((ceil(T / s) - 1) * s + k_eff - T, 0)``, half of it (rounded down) left. On a dynamic axis
  ``T`` is the padded length (the batch's longest), so with strides the windows of a sequence
  depend on the batch, as in RETURNN (its ``same_static`` avoids that); without strides the left
  padding is ``(k_eff - 1) // 2``. Sizes ``ceil(L / s)``;
- ``valid``: sizes ``max(0, (L - k_eff) // s + 1)``;
- an int ``p`` (or one per spatial axis): ``p`` zeros on both ends of the padded tensor (``max`` pool:
  -inf; ``avg`` pool: zeros that are counted), then ``valid``: sizes ``max(0, (L + 2p - k_eff) // s + 1)``
  (RETURNN's explicit padding; 0 is ``valid``);
- ``same_static``: sizes as ``same``, but windows that do not depend on the batch: zeros (also for
  ``max``, counted by ``avg``) on a dynamic axis ``k - 1`` in total, ``(k - s) // 2`` of it left; on a
  static axis ``k - 1 - (T + s - 1) % s``, half of it (rounded down) left. RETURNN pads by the filter size ``k`` without its dilation, so dilation
  is refused with it, and so are the windows it does not implement (``k < s`` on a dynamic axis).

Padded input positions are masked before the window op (to 0, or what the layer asks) and output
padded positions are 0.
"""
from __future__ import annotations

from typing import Any, Callable, List, NamedTuple, Optional, Sequence, Tuple

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim, DimTypes
from returnn.tensor.dim_tree import conv_ops
from returnn.tf.layers.dim_shift import shifted_dim, shifted_sizes
from returnn.tf.layers.helpers import check_sources, concat_output, dense_value
from returnn.tf.layers.options import positive_int
from returnn.tf.layers.output import LayerOutput

PADDINGS = ("same", "valid", "same_static")


class AxisWindow(NamedTuple):
    """Window of one spatial axis: size, stride, dilation, the input dim and the output dim."""

    size: int
    stride: int
    dilation: int
    in_dim: Dim
    out_dim: Dim

    @property
    def k_eff(self) -> int:
        return (self.size - 1) * self.dilation + 1


def int_tuple(layer, key: str, value: Any, n: int, default: Optional[int] = None) -> Tuple[int, ...]:
    """An int option given as ``k`` (all axes) or a list of ``n`` ints, each >= 1."""
    if value is None:
        if default is None:
            raise NetworkError("%s: needs option %r" % (layer.desc, key))
        value = default
    items = list(value) if isinstance(value, (list, tuple)) else [value] * n
    if len(items) != n or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in items):
        raise NetworkError("%s: option %r must be an int >= 1 or a list of %i such ints (one per spatial axis), "
                           "got %r" % (layer.desc, key, n, value))
    return tuple(items)


def out_size(size, window: AxisWindow, padding: str, pad: int = 0):
    """Output length for input length ``size`` (int or int tensor); ``pad``: explicit zeros on both ends."""
    if padding in ("same", "same_static"):
        return (size + window.stride - 1) // window.stride
    if isinstance(size, int):
        return max(size + 2 * pad - window.k_eff, -1) // window.stride + 1
    return tf.maximum(size + 2 * pad - window.k_eff, -1) // window.stride + 1


def parse_padding(desc: str, value: Any, n: int) -> Tuple[str, Tuple[int, ...]]:
    """(``same``, ``valid``, ``same_static`` or ``explicit``, the explicit amount per spatial axis) of a
    conv/pool ``padding`` option: a name, an int >= 0 or one int >= 0 per spatial axis (RETURNN reads entry i
    for spatial axis i: further entries of a longer list are unused)."""
    if isinstance(value, str) and value.lower() in PADDINGS:
        return value.lower(), (0,) * n
    items = list(value) if isinstance(value, (list, tuple)) else [value] * n
    if len(items) < n or any(isinstance(v, bool) or not isinstance(v, int) for v in items) or \
            any(v < 0 for v in items[:n]):
        raise NetworkError("%s: padding must be 'same', 'valid', 'same_static', an int >= 0 or a list of at least "
                           "%i such ints (one per spatial axis), got %r" % (desc, n, value))
    items = items[:n]
    return ("explicit" if any(items) else "valid"), tuple(items)


def tf_same_pads(size: int, window: AxisWindow) -> Tuple[int, int]:
    """TensorFlow's SAME padding of a static axis."""
    total = max((out_size(size, window, "same") - 1) * window.stride + window.k_eff - size, 0)
    return total // 2, total - total // 2


class SpatialPlan:
    """Input layout and per-axis windows of a conv/pool layer; built in the layer's ``__init__``."""

    def __init__(self, layer, sources: Sequence[Data], sizes_opt: str, default_stride_is_size: bool):
        check_sources(layer, sources)
        self.layer = layer
        # the input's extents on the window axes before the window padding, set by channel_last_input for finish
        self._lengths: Optional[List[tf.Tensor]] = None
        self.concat_data, self.concat_plan = concat_output(layer, sources)
        data = self.concat_data
        if data.sparse:  # RETURNN asserts dense input in conv and transposed_conv (pool refuses it itself)
            raise NetworkError("%s: input %s is sparse (class indices); RETURNN convolves dense data only: embed "
                               "it first (a linear layer)" % (layer.desc, data.short_repr()))
        if data.feature_dim_axis is None or data.batch_dim_axis is None:
            raise NetworkError("%s: input needs a batch and a feature axis, got %s" % (layer.desc, data.short_repr()))
        in_dim = layer.opt("in_dim") if "in_dim" in layer.known_options else None
        if in_dim is not None:  # RETURNN's transform_input: that axis becomes the feature (channel) axis
            if not isinstance(in_dim, Dim):
                raise NetworkError("%s: 'in_dim' must be a Dim, got %r" % (layer.desc, in_dim))
            if data.feature_dim != in_dim:
                data = self.concat_data = data.copy(feature_dim_axis=layer.axis(data, in_dim, "in_dim"))
        self.reshapes: List[Callable[[tf.Tensor], tf.Tensor]] = []  # shape-only input transforms, in order
        n_given = len(data.get_spatial_batch_axes())
        data = self.data = self._transform_input(data)
        in_spatial = layer.opt("in_spatial_dims")
        if in_spatial is not None:
            axes = [layer.axis(data, a, "in_spatial_dims") for a in in_spatial]
        else:
            axes = data.get_spatial_batch_axes()
            self._check_spatial_dims_defined(n_given, len(axes))
        raw = layer.opt(sizes_opt)
        n = len(raw) if isinstance(raw, (list, tuple)) else len(axes)
        if n != len(axes) or not axes:
            raise NetworkError("%s: %r has %i entries but the input %s has %i spatial axes %s; set "
                               "'in_spatial_dims' or 'input_add_feature_dim'" % (
                                   layer.desc, sizes_opt, n, data.short_repr(), len(axes),
                                   [data.dims[a].description for a in axes]))
        others = [a for a in range(data.batch_ndim) if a not in axes + [data.batch_dim_axis, data.feature_dim_axis]]
        # RETURNN (ConvLayer.transform_input with in_spatial_dims): the other axes are merged into the batch,
        # in their order, and come first in the output (e.g. a 1D pool over a feature-like axis of (B, T, F', C))
        if others and (in_spatial is None or self.reshapes or layer.opt("use_channel_first") or
                       getattr(layer, "layer_class", None) not in ("conv", "pool")):
            raise NetworkError("%s: input axes %s are neither batch, feature nor in_spatial_dims" % (
                layer.desc, [data.dims[a].description for a in others]))
        self.batch_axes = [a for a in range(data.batch_ndim) if a not in axes + [data.feature_dim_axis]]
        self.spatial_axes = axes
        self.perm = self.batch_axes + axes + [data.feature_dim_axis]
        sizes = int_tuple(layer, sizes_opt, raw, len(axes))
        strides_opt = layer.opt("strides")
        strides = sizes if strides_opt is None and default_stride_is_size else \
            int_tuple(layer, "strides", strides_opt, len(axes), 1)
        dilations = int_tuple(layer, "dilation_rate", layer.opt("dilation_rate"), len(axes), 1)
        self.padding, self.pads = parse_padding(layer.desc, layer.opt("padding"), len(axes))
        self.windows: List[AxisWindow] = []
        for i, axis in enumerate(axes):
            in_dim = data.dims[axis]
            window = AxisWindow(sizes[i], strides[i], dilations[i], in_dim, in_dim)
            if self.padding == "same_static":
                self._check_same_static(window)
            new_name = "%s:conv:s%i" % (layer.layer_name, i)  # RETURNN's name of a new axis ('stag:' finds it)
            if window.stride == 1 and (self.padding in ("same", "same_static") or (window.k_eff == 1 and not self.pads[i])):
                out = in_dim  # same positions: keep the dim (and its sizes)
            elif in_dim.is_static():
                size = out_size(in_dim.dimension, window, self.padding, self.pads[i])
                if size < 1:
                    raise NetworkError("%s: static axis %r of size %i is smaller than the window %i" % (
                        layer.desc, in_dim.description, in_dim.dimension, window.k_eff))
                out = Dim(size, kind=DimTypes.Spatial, description=new_name)
            else:  # RETURNN: a new dim per layer, declared the same as its dim math (two such convs share it)
                out = Dim(None, kind=DimTypes.Spatial, description=new_name)
                out.declare_same_as(shifted_dim(in_dim, conv_ops(window.k_eff, window.stride,
                                                                  self.padding in ("valid", "explicit"), self.pads[i])))
            self.windows.append(window._replace(out_dim=out))
        self._declare_out_spatial_dims(layer)

    def _declare_out_spatial_dims(self, layer) -> None:
        """RETURNN's ``out_spatial_dims``: each computed output axis is declared the same as the given Dim."""
        given = layer.opt("out_spatial_dims") if "out_spatial_dims" in layer.known_options else None
        if given is None:
            return
        if not isinstance(given, (list, tuple)) or len(given) != len(self.windows) or \
                not all(isinstance(d, Dim) for d in given):
            raise NetworkError("%s: 'out_spatial_dims' must be %i Dims (one per spatial axis), got %r"
                               % (layer.desc, len(self.windows), given))
        for w, dim in zip(self.windows, given):
            try:
                w.out_dim.declare_same_as(dim)
            except ValueError as exc:
                raise NetworkError("%s: 'out_spatial_dims': %s" % (layer.desc, exc)) from None

    def _check_same_static(self, w: AxisWindow) -> None:
        """The ``same_static`` windows RETURNN implements (module docstring)."""
        desc = "%s: padding 'same_static' on axis %r" % (self.layer.desc, w.in_dim.description)
        if w.dilation > 1:
            raise NetworkError("%s: with dilation_rate > 1 is refused (RETURNN pads by the filter size, without the "
                               "dilation)" % desc)
        if w.in_dim.is_dynamic() and w.size < w.stride:
            raise NetworkError("%s: a window of %i with stride %i is not implemented in RETURNN" % (desc, w.size, w.stride))
        if w.in_dim.is_static() and w.size - 1 - (w.in_dim.dimension + w.stride - 1) % w.stride < 0:
            raise NetworkError("%s: size %i, window %i and stride %i give a negative padding in RETURNN" % (
                desc, w.in_dim.dimension, w.size, w.stride))

    def _check_spatial_dims_defined(self, n_given: int, n_spatial: int) -> None:
        """RETURNN (behavior_version >= 8) without ``in_spatial_dims``: refused when the input has more
        than one spatial axis, or with an input transform (expand, split or add feature dim) when it
        has not exactly one (ConvLayer.transform_input)."""
        layer = self.layer
        transforms = any(layer.opt(k) for k in ("input_expand_dims", "input_split_feature_dim", "input_add_feature_dim"))
        if (n_given == 1 if transforms else n_spatial <= 1):
            return
        from returnn.tf.layers.norm import behavior_version
        if behavior_version() >= 8:
            raise NetworkError("%s: the input %s has %i spatial axes: RETURNN requires 'in_spatial_dims' then "
                               "(from behavior_version 8 on)" % (layer.desc, self.concat_data.short_repr(),
                                                                 n_given if transforms else n_spatial))

    def _transform_input(self, data: Data) -> Data:
        """RETURNN's ``input_expand_dims`` (size-1 spatial axes after the last spatial axis),
        ``input_split_feature_dim`` n (feature F -> spatial F/n, feature n) and
        ``input_add_feature_dim`` (feature axis of size 1 at the end), in that order."""
        layer, name = self.layer, self.layer.layer_name
        for i in range(int(layer.opt("input_expand_dims") or 0)):
            spatial = data.get_spatial_batch_axes()
            pos = spatial[-1] + 1 if spatial else data.batch_ndim
            data = data.copy_insert_dim(Dim(1, kind=DimTypes.Spatial, description="%s:expand%i" % (name, i)), pos)
            self.reshapes.append(lambda t, pos=pos: tf.expand_dims(t, pos))
        split = layer.opt("input_split_feature_dim")
        if split:
            n, axis, size = positive_int(layer.desc, "input_split_feature_dim", split), data.feature_dim_axis, data.dim
            if size % n:
                raise NetworkError("%s: feature dim %i is not a multiple of input_split_feature_dim %i"
                                   % (layer.desc, size, n))
            dims = list(data.dims)
            dims[axis:axis + 1] = [Dim(size // n, kind=DimTypes.Spatial, description="%s:split" % name),
                                   Dim(n, kind=DimTypes.Feature, description="%s:split-feature" % name)]
            data = data.copy(dims=dims, feature_dim_axis=axis + 1)
            self.reshapes.append(lambda t, a=axis, k=size // n: tf.reshape(
                t, tf.concat([tf.shape(t)[:a], [k, n], tf.shape(t)[a + 1:]], 0)))
        if layer.opt("input_add_feature_dim"):
            feat = Dim(1, kind=DimTypes.Feature, description="%s:input-feature" % name)
            data = data.copy_insert_dim(feat, -1).copy_with_feature_axis_at(data.batch_ndim)
            self.reshapes.append(lambda t: t[..., None])
        return data

    def output_data(self, name: str, feature: Dim) -> Data:
        """``(B, out spatial..., feature)``, or ``(B, feature, out spatial...)`` with
        ``use_channel_first``."""
        batch = [self.data.dims[a] for a in self.batch_axes]
        spatial = [w.out_dim for w in self.windows]
        self.out_last = Data(name, dims=batch + spatial + [feature], feature_dim_axis=len(batch) + len(spatial))
        if self.layer.opt("use_channel_first"):
            return Data(name, dims=batch + [feature] + spatial, feature_dim_axis=1)
        return self.out_last

    def channel_last_input(self, x: LayerOutput, fill: Optional[float] = 0.0, pad_fill: Optional[float] = None
                           ) -> Tuple[tf.Tensor, tf.Tensor]:
        """The input ``(B, s..., C)`` with padded positions ``fill`` (None: as they are), padded for
        the windows with ``pad_fill`` (default ``fill``), and the float mask ``(B, s..., 1)`` of the
        positions inside the batch's padded extent and of explicit padding (1; other window padding 0)."""
        x = dense_value(x)
        mask = x.full_mask() if fill is not None else None
        tensor = x.tensor if mask is None else tf.where(mask, x.tensor, tf.cast(fill, x.tensor.dtype))
        for reshape in self.reshapes:
            tensor = reshape(tensor)
        tensor = tf.transpose(tensor, self.perm)
        if len(self.batch_axes) > 1:  # the batch and the other axes merged: one batch axis
            tensor = tf.reshape(tensor, tf.concat([[-1], tf.shape(tensor)[len(self.batch_axes):]], 0))
        explicit = [[0, 0]] + [self._explicit_pads(w, p) for w, p in zip(self.windows, self.pads)] + [[0, 0]]
        value = pad_fill if pad_fill is not None else (fill or 0.0)
        extent = tf.ones_like(tensor[..., :1], dtype=tf.float32)
        if any(any(p) for p in explicit):  # part of the tensor, as in RETURNN (an avg pool counts it)
            tensor = tf.pad(tensor, explicit, constant_values=0.0 if self.padding == "same_static" else value)
            extent = tf.pad(extent, explicit, constant_values=1.0)
        pads = [[0, 0]] + [self._pads(w, tf.shape(tensor)[i + 1]) for i, w in enumerate(self.windows)] + [[0, 0]]
        self._lengths = [tf.shape(tensor)[i + 1] for i in range(len(self.windows))]  # (for finish)
        return tf.pad(tensor, pads, constant_values=value), tf.pad(extent, pads)

    def _explicit_pads(self, w: AxisWindow, pad: int) -> List[int]:
        """The padding RETURNN adds to the tensor itself (explicit, ``same_static``: zeros there, also for
        ``max``) before its VALID window op."""
        if self.padding != "same_static":
            return [pad, pad]
        if w.in_dim.is_dynamic():
            left = (w.size - w.stride) // 2
            return [left, w.size - 1 - left]
        total = w.size - 1 - (w.in_dim.dimension + w.stride - 1) % w.stride
        return [total // 2, total - total // 2]

    def _pads(self, w: AxisWindow, length) -> List[Any]:
        """The window padding of one axis (after the explicit padding) of the tensor of this length."""
        if self.padding == "same_static":
            return [0, 0]
        if w.in_dim.is_static() and self.padding == "same":
            return list(tf_same_pads(w.in_dim.dimension, w))
        if self.padding == "same":
            if w.stride == 1:
                return [(w.k_eff - 1) // 2, w.k_eff - 1 - (w.k_eff - 1) // 2]
            # TF's SAME of the padded tensor (RETURNN runs the op on it): depends on its length
            total = tf.maximum(((length + w.stride - 1) // w.stride - 1) * w.stride + w.k_eff - length, 0)
            return [total // 2, total - total // 2]
        return [0, tf.maximum(w.k_eff - length, 0)]

    def out_sizes(self, x: LayerOutput) -> dict:
        """Sizes of the new dynamic output dims."""
        out = {}
        for axis, w in zip(self.spatial_axes, self.windows):
            if w.out_dim.is_dynamic() and w.out_dim is not w.in_dim and w.out_dim not in x.sizes:
                lens = shifted_sizes(w.out_dim, x.sizes)
                out[w.out_dim] = lens if lens is not None else \
                    out_size(x.sizes[w.in_dim], w, self.padding, self.pads[self.windows.index(w)])
        return out

    def subsample(self, y: tf.Tensor, strided: bool) -> tf.Tensor:
        """Applies the strides by slicing when the op ran with stride 1."""
        if strided or all(w.stride == 1 for w in self.windows):
            return y
        return y[(slice(None),) + tuple(slice(None, None, w.stride) for w in self.windows)]

    def finish(self, layer, y: tf.Tensor, sources: List[LayerOutput], x: LayerOutput) -> LayerOutput:
        """``y`` (channel-last) as the layer output, padded positions as computed (RETURNN does not
        mask them), channel-first if asked."""
        sizes = dict(x.sizes)
        sizes.update(self.out_sizes(x))
        if self.padding in ("valid", "explicit") and self._lengths is not None:
            # a batch shorter than a valid window: no frame (TF's pool gives none; here the op ran on it padded)
            y = y[(slice(None),) + tuple(slice(None, tf.maximum((n - w.k_eff) // w.stride + 1, 0))
                                         for n, w in zip(self._lengths, self.windows))]
        if len(self.batch_axes) > 1:  # the merged axes split again
            extents = tf.stack([tf.shape(x.tensor)[a] for a in self.batch_axes])
            y = tf.reshape(y, tf.concat([extents, tf.shape(y)[1:]], 0))
        if layer.opt("use_channel_first"):
            n = len(self.windows)
            y = tf.transpose(y, [0, n + 1] + list(range(1, n + 1)))
        return layer.make_output(y, sources, sizes)
