"""Layers that change the length of an axis by its contents or a factor (RETURNN semantics):
resize, remove, fold.

- ``resize``: ``axis`` scaled by ``factor`` (an int, a float, or a scalar layer): lengths
  ``L * factor`` (int) or ``ceil(L * factor)``; ``kind`` "nn"/"nearest_neighbor", "linear",
  "cubic" (TensorFlow's v1 image resizing along that axis, as RETURNN) or "fill" (each frame
  followed by ``factor - 1`` frames of ``fill_value``; ``fill_dropout`` drops filled frames at
  random, one pattern for the whole batch, as RETURNN also outside training). The output is
  batch-major with the resized axis second. Padded frames are interpolated as they are where a layer before
  computed them (``computed_padding``, as RETURNN, e.g. a batch norm's shift), else as zero frames.
- ``remove``: sparse ``(B, T)`` labels without the label ``symbol`` (negative: counted from the
  number of classes); the kept labels move to the front, the new lengths are their counts.
- ``fold``: the inverse of ``window``: ``(in_spatial_dim, window_dim, ...)`` frames added (mode
  "sum") or averaged ("mean", over the real frames that overlap) back onto one axis of length
  ``in * stride`` ("same" padding) or ``in * stride + window_left + window_right`` ("valid"),
  which comes first in the output (as RETURNN).
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim, DimTypes
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.dim_shift import math_or_given, shifted_sizes
from returnn.tf.layers.helpers import check_sources, concat_inputs, concat_output, relaid
from returnn.tf.layers.options import Option, one_of, positive_int

RESIZE_KINDS = ("nn", "nearest_neighbor", "linear", "cubic", "fill")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@register_layer
class ResizeLayer(Layer):
    """See the module docstring."""

    layer_class = "resize"
    ref_options = ("factor",)
    options = (
        Option("factor", None, "out length = in length * factor: an int, a float or a scalar layer (a static axis: an "
                               "int only, as RETURNN)"),
        Option("axis", None, "the axis to resize"),
        Option("kind", "nn", "'nn', 'linear', 'cubic' or 'fill'"),
        Option("fill_value", None, "kind 'fill': the value of the new frames"),
        Option("fill_dropout", None, "kind 'fill': drop filled frames with this probability"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        self.factor_layer = isinstance(opts.get("factor"), str)
        own = list(sources[:-1] if self.factor_layer else sources)
        super().__init__(name, opts, own, seed)
        check_sources(self, own)
        self.input, self.plan = concat_output(self, own)
        data = self.input
        if data.batch_dim_axis is None:
            raise NetworkError("%s: the input needs a batch axis, got %s" % (self.desc, data.short_repr()))
        factor = self.opt("factor")
        if self.factor_layer:
            fac = sources[-1]
            if fac.batch_ndim != 0 or fac.dtype not in ("int32", "float32"):
                raise NetworkError("%s: factor must be a scalar int32 or float32, got %s" % (self.desc, fac.short_repr()))
            self.int_factor = fac.dtype == "int32"
        elif _is_int(factor) and factor >= 1:
            self.int_factor = True
        elif isinstance(factor, float) and factor > 0:
            self.int_factor = False
        else:
            raise NetworkError("%s: 'factor' must be an int >= 1, a float > 0 or a layer name, got %r" % (self.desc, factor))
        self.kind = one_of(self.desc, "kind", self.opt("kind"), RESIZE_KINDS)
        self.fill_dropout = self.opt("fill_dropout")
        if self.kind == "fill":
            if self.factor_layer or not _is_int(factor) or factor < 2:
                raise NetworkError("%s: kind 'fill' needs an int factor >= 2, got %r" % (self.desc, factor))
            fill = self.opt("fill_value")
            if data.sparse:
                if not _is_int(fill):
                    raise NetworkError("%s: sparse input: fill_value must be a class index, got %r" % (self.desc, fill))
                if fill < 0:
                    fill += data.dim
            elif isinstance(fill, bool) or not isinstance(fill, (int, float)):
                raise NetworkError("%s: kind 'fill' needs a number fill_value, got %r" % (self.desc, fill))
            self.fill_value = fill
        if self.fill_dropout and (self.kind != "fill" or not 0 < float(self.fill_dropout) < 1):
            raise NetworkError("%s: fill_dropout (a rate in (0, 1)) is for kind 'fill' only" % self.desc)
        self.ax = self.axis(data, self.opt("axis"), "axis")
        old = data.dims[self.ax]
        if old.is_batch_dim():
            raise NetworkError("%s: cannot resize the batch axis" % self.desc)
        self.old = old
        if old.dimension is not None and (self.factor_layer or not _is_int(factor) or self.fill_dropout):
            # RETURNN: a new axis of unknown size without sizes there; its tensor check fails ('dynamic dim undefined')
            raise NetworkError("%s: the static axis %r resized by %s is refused, as RETURNN fails on it (the new axis "
                               "has no sizes: 'dynamic dim undefined'); only an int factor resizes a static axis"
                               % (self.desc, old.description, "fill_dropout" if self.fill_dropout else
                                  "a factor layer" if self.factor_layer else "the float factor %r" % factor))
        if self.int_factor and not self.factor_layer and not self.fill_dropout:
            size = None if old.dimension is None else old.dimension * factor
        elif not self.factor_layer and not self.fill_dropout and old.dimension is not None:
            size = int(math.ceil(old.dimension * factor))
        else:
            size = None
        new = self.opts.get("out_dim")
        if new is not None and (not isinstance(new, Dim) or new.dimension != size):
            raise NetworkError("%s: out_dim %r does not fit the resized size %r" % (self.desc, new, size))
        if size is None and self.int_factor and not self.factor_layer and not self.fill_dropout:
            new = math_or_given(new, old, [("mul", factor)])  # RETURNN: ``tag * factor``, dim math (two such share it)
        self.new = new or Dim(size, kind=old.kind, description="%s_resize" % name, derived_from=old)
        rest = [a for a in range(data.batch_ndim) if a not in (data.batch_dim_axis, self.ax)]
        self.perm = [data.batch_dim_axis, self.ax] + rest
        out = data.copy_transpose(self.perm).copy_template_replace_dim_tag(1, self.new).copy(name)
        if data.time_dim_axis == self.ax and out.time_dim_axis != 1:
            out = out.copy(time_dim_axis=1)
        self.output = out

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        own = sources[:-1] if self.factor_layer else sources
        x = concat_inputs(self, self.input, self.plan, own, ctx)
        # padded frames as RETURNN interpolates them: what a layer before computed there, else zero frames
        value = x.as_read() if self.kind in ("linear", "cubic") else x.tensor
        value = tf.transpose(value, self.perm)  # (B, T, rest...)
        shape = tf.shape(value)
        flat = tf.reshape(value, tf.stack([shape[0], shape[1], 1, tf.reduce_prod(shape[2:])]))  # (B, T, 1, C)
        factor = tf.cast(sources[-1].tensor, tf.int32 if self.int_factor else tf.float32) if self.factor_layer \
            else self.opt("factor")
        if self.int_factor:
            new_len = shape[1] * factor
        else:
            new_len = tf.cast(tf.math.ceil(tf.cast(shape[1], tf.float32) * factor), tf.int32)
        sizes = {}
        if self.kind == "fill":
            fill = tf.fill(tf.stack([shape[0], shape[1], factor - 1, tf.shape(flat)[3]]),
                           tf.cast(self.fill_value, flat.dtype))
            y = tf.concat([flat, fill], axis=2)  # (B, T, factor, C)
        else:
            image = flat if flat.dtype.is_floating else tf.cast(flat, tf.float32)
            op = {"linear": tf.raw_ops.ResizeBilinear, "cubic": tf.raw_ops.ResizeBicubic}.get(
                self.kind, tf.raw_ops.ResizeNearestNeighbor)  # TF's v1 image resizing (RETURNN's)
            y = tf.cond(  # TF's resize refuses an empty image (every sequence of the batch empty)
                tf.size(image) > 0,
                lambda: op(images=image, size=tf.stack([new_len, 1]), align_corners=False, half_pixel_centers=False),
                lambda: tf.zeros(tf.stack([shape[0], new_len, 1, tf.shape(image)[3]]), tf.float32))
            y = tf.cast(y, flat.dtype)
        y = tf.reshape(y, tf.concat([[shape[0], new_len], shape[2:]], 0))
        if self.old.is_dynamic():
            lens = x.sizes[self.old]
            sizes[self.new] = lens * factor if self.int_factor else \
                tf.cast(tf.math.ceil(tf.cast(lens, tf.float32) * factor), tf.int32)
        if self.fill_dropout:
            keep = tf.random.stateless_uniform(tf.stack([shape[1], factor - 1]), ctx.layer_seed(self.layer_name)) \
                >= float(self.fill_dropout)
            keep = tf.reshape(tf.concat([tf.ones([shape[1], 1], tf.bool), keep], 1), [-1])  # (T * factor,)
            kept = tf.reshape(tf.boolean_mask(y, tf.broadcast_to(keep[None], tf.stack([shape[0], new_len]))),
                              tf.concat([[shape[0], -1], shape[2:]], 0))
            if self.old.is_dynamic():
                real = tf.sequence_mask(sizes[self.new], maxlen=new_len) & keep[None]
                sizes[self.new] = tf.reduce_sum(tf.cast(real, tf.int32), axis=1)
            else:
                sizes[self.new] = tf.fill([shape[0]], tf.reduce_sum(tf.cast(keep, tf.int32)))
            y = kept
        return self.make_output(y, own, sizes)


@register_layer
class RemoveLayer(Layer):
    """See the module docstring."""

    layer_class = "remove"
    no_int_axes = ("axis",)  # RETURNN: allow_int=False
    options = (
        Option("symbol", None, "the label to remove (negative: counted from the number of classes)"),
        Option("axis", "T", "the axis to remove it from"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources, 1, 1)
        data = sources[0]
        if not data.sparse or data.batch_ndim != 2 or data.batch_dim_axis is None:
            raise NetworkError("%s: the input must be sparse (batch, time) labels, got %s" % (self.desc, data.short_repr()))
        symbol = self.opt("symbol")
        if not _is_int(symbol):
            raise NetworkError("%s: 'symbol' must be an int, got %r" % (self.desc, symbol))
        self.symbol = symbol + data.dim if symbol < 0 else symbol
        self.ax = self.axis(data, self.opt("axis"), "axis")
        old = data.dims[self.ax]
        if old.is_batch_dim():
            raise NetworkError("%s: 'axis' must not be the batch axis" % self.desc)
        new = self.opts.get("out_dim")
        if new is not None and not isinstance(new, Dim):
            raise NetworkError("%s: out_dim must be a Dim, got %r" % (self.desc, new))
        self.new = new or Dim(None, kind=old.kind, description="%s_removed_items" % name, derived_from=old)
        self.perm = [data.batch_dim_axis, self.ax]
        self.output = data.copy_transpose(self.perm).copy_template_replace_dim_tag(1, self.new).copy(name)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = sources[0]
        seqs = tf.transpose(x.tensor, self.perm)  # (B, T)
        real = tf.transpose(x.broadcast_mask(self.ax), self.perm) if x.data.dims[self.ax].is_dynamic() \
            else tf.ones_like(seqs, tf.bool)
        keep = tf.logical_and(tf.not_equal(seqs, self.symbol), tf.broadcast_to(real, tf.shape(seqs)))
        lens = tf.reduce_sum(tf.cast(keep, tf.int32), axis=1)
        pos = tf.cumsum(tf.cast(keep, tf.int32), axis=1, exclusive=True)
        n_batch = tf.shape(seqs)[0]
        rows = tf.broadcast_to(tf.range(n_batch)[:, None], tf.shape(seqs))
        index = tf.boolean_mask(tf.stack([rows, pos], -1), keep)
        out = tf.scatter_nd(index, tf.boolean_mask(seqs, keep),
                            tf.stack([n_batch, tf.reduce_max(tf.concat([lens, [0]], 0))]))
        return self.make_output(out, sources, {self.new: lens})


@register_layer
class FoldLayer(Layer):
    """See the module docstring."""

    layer_class = "fold"
    no_int_axes = ("in_spatial_dim", "window_dim")  # RETURNN: allow_int=False
    options = (
        Option("mode", None, "'sum' or 'mean' over overlapping frames"),
        Option("in_spatial_dim", None, "the axis of window positions"),
        Option("window_dim", None, "the window axis"),
        Option("out_spatial_dim", None, "Dim of the new axis"),
        Option("padding", "same", "'same' or 'valid', as the window layer had"),
        Option("window_left", None, "frames left of the centre (default as window)"),
        Option("window_right", None, "frames right of the centre"),
        Option("stride", 1, "the window layer's stride"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources, 1, 1)
        data = sources[0]
        self.mode = one_of(self.desc, "mode", self.opt("mode"), ("sum", "mean"))
        self.padding = one_of(self.desc, "padding", str(self.opt("padding")).lower(), ("same", "valid"))
        # RETURNN takes stride 0 too (every frame's window at 0; "same": no output frames), not a negative one
        self.stride = 0 if self.opt("stride") == 0 and self.opt("stride") is not False else positive_int(
            self.desc, "stride", self.opt("stride"))
        self.in_ax = self.axis(data, self.opt("in_spatial_dim"), "in_spatial_dim")
        self.win_ax = self.axis(data, self.opt("window_dim"), "window_dim")
        if self.in_ax == self.win_ax:
            raise NetworkError("%s: in_spatial_dim and window_dim must be different axes" % self.desc)
        self.in_dim, self.win_dim = data.dims[self.in_ax], data.dims[self.win_ax]
        if self.win_dim.dimension is None:
            raise NetworkError("%s: the window axis must be static here, got %r" % (self.desc, self.win_dim))
        w = self.win_dim.dimension
        left, right = self.opt("window_left"), self.opt("window_right")
        if left is None and right is None:
            left = (w - 1) // 2
        if left is None:
            left = (w - 1) - right
        if right is None:
            right = (w - 1) - left
        self.left, self.right = left, right
        # RETURNN's sides: an int as given, else a dim of the window (``(window_dim - 1) // 2`` ...)
        self.int_sides = (self.opt("window_left") is not None, self.opt("window_right") is not None)
        self.extra = 0 if self.padding == "same" else left + right
        size = None if self.in_dim.dimension is None else self.in_dim.dimension * self.stride + self.extra
        new = self.opt("out_spatial_dim")
        if new is not None and (not isinstance(new, Dim) or (new.dimension is not None and new.dimension != size)):
            raise NetworkError("%s: out_spatial_dim %r does not fit the folded size %r" % (self.desc, new, size))
        if self.in_dim.is_dynamic():  # RETURNN's dim math: ``in * stride`` (``* 1``: the axis itself)
            new = math_or_given(new, self.in_dim, [("mul", self.stride)] + self._side_ops())
        self.new = new or Dim(size, kind=DimTypes.Spatial, description="%s:fold" % name, derived_from=self.in_dim)
        self.rest = [a for a in range(data.batch_ndim) if a not in (self.in_ax, self.win_ax)]
        special = {"time_dim_axis": 0} if data.time_dim_axis == self.in_ax else {}
        self.output = relaid(name, data, [self.new] + [data.dims[a] for a in self.rest], **special)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = self.apply_dropout(sources[0], ctx)
        ones = tf.ones_like(x.tensor)
        mask = None
        for ax in (self.in_ax, self.win_ax):
            if x.data.dims[ax].is_dynamic():
                m = x.broadcast_mask(ax)
                mask = m if mask is None else tf.logical_and(mask, m)
        value = x.tensor if mask is None else tf.where(mask, x.tensor, tf.zeros_like(x.tensor))
        perm = [self.in_ax, self.win_ax] + self.rest
        value = tf.transpose(value, perm)  # (N, W, rest...)
        shape = tf.shape(value)
        n_in, w = shape[0], shape[1]
        index = tf.reshape(tf.range(n_in)[:, None] * self.stride + tf.range(w)[None, :], [-1, 1])
        sizes = {}
        if self.in_dim.is_dynamic():
            lens = self._valid_sizes(x)
            if self.new is not self.in_dim:
                sizes[self.new] = lens
            length = tf.reduce_max(tf.concat([tf.reshape(lens, [-1]), [0]], 0))
        else:
            length = self.new.dimension
        # the windows reach n_in * stride + w - stride frames; the new axis (RETURNN's dim math: n_in * stride + the
        # sides) can be longer by stride - 1 (a valid window dropped them): those frames are zeros, as no window
        # covers them (RETURNN's value stops short of its own sizes there)
        extent = tf.maximum(n_in * self.stride + w - self.stride, length + (self.left if self.padding == "same" else 0))
        out = tf.scatter_nd(index, tf.reshape(value, tf.concat([[-1], shape[2:]], 0)), tf.concat([[extent], shape[2:]], 0))
        if self.mode == "mean":
            count = ones if mask is None else tf.cast(tf.broadcast_to(mask, tf.shape(ones)), ones.dtype)
            count = tf.reshape(tf.transpose(count, perm), tf.concat([[-1], shape[2:]], 0))
            count = tf.scatter_nd(index, count, tf.concat([[extent], shape[2:]], 0))
            out = out / tf.maximum(count, 1.0)
        if self.padding == "same":
            out = out[self.left:]
        out = out[:length]
        return self.make_output(out, sources, sizes)

    def _valid_sizes(self, x: LayerOutput) -> tf.Tensor:
        """Sizes of the new axis: RETURNN's dim math ``window_left + in + window_right`` (dim_shift): an int side
        merges with an int term of the input axis's (after a valid window ``2 + ((-1+time)+-1)`` is ``(1+time)+-1``:
        its sizes are ``time``'s, not the cut ones plus 2); a side that is a dim of the window (the default) is
        added as it is."""
        lens = shifted_sizes(self.in_dim, x.sizes, [("mul", self.stride)] + self._side_ops())
        return x.sizes[self.in_dim] * self.stride + self.extra if lens is None else lens

    def _side_ops(self) -> List[Tuple[str, Any]]:
        """Valid padding: ``window_left + x + window_right`` (RETURNN's dim math; see :meth:`_valid_sizes`)."""
        if self.padding != "valid":
            return []
        sides = [side if given else ("dim", side) for side, given in zip((self.left, self.right), self.int_sides)]
        return [("add_left", sides[0]), ("add_right", sides[1])]
