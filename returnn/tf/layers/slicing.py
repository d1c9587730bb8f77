"""Layers that cut, pad or window one axis: slice, pad, window, time_chunking, time_unchunking.

Dynamic axes keep exact per-sequence sizes: a slice of a sequence shorter than the slice has the
size of what is left (>= 0), padding on the right of a dynamic axis goes right after each
sequence's end (RETURNN's ``handle_dynamic_dims``), windows see zeros beyond a sequence's end.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim, DimTypes
from returnn.tf.layers import window_frames
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tensor.dim_tree import conv_ops
from returnn.tf.layers.dim_shift import math_or_given, shifted_sizes
from returnn.tensor.dim_math import returnn_description
from returnn.tf.layers.norm import behavior_version
from returnn.tf.layers.options import Option, one_of, positive_int
from returnn.tf.layers.shape import _ShapeLayer
from returnn.tf.util.data_check import checked


def _int(layer: Layer, key: str, value: Any, allow_none: bool = True) -> Any:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise NetworkError("%s: %r must be an int, got %r" % (layer.desc, key, value))
    return value


@register_layer
class SliceLayer(_ShapeLayer):
    """``x[start:end:step]`` on ``axis`` (start >= 0, end may be negative; a negative step on a dynamic axis
    (no end >= 0): RETURNN's slice of the padded tensor, sizes by its dim math, checked in the step to fit it). A non-negative end on a dynamic axis gives a static axis of ``ceil((end - start) /
    step)`` frames (RETURNN's slice-end dim), whatever the lengths."""

    layer_class = "slice"
    options = (
        Option("axis", None, "axis description, e.g. 'T' or 'F'"),
        Option("slice_start", None, "first index (>= 0)"),
        Option("slice_end", None, "end index (exclusive; negative: from the end)"),
        Option("slice_step", None, "step (negative on a dynamic axis: the padded tensor reversed)"),
        Option("out_dim", None, "Dim for the new axis"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        data = self.input
        self.ax = self.axis(data, self.opt("axis"), "axis")
        self.start = _int(self, "slice_start", self.opt("slice_start")) or 0
        self.end = _int(self, "slice_end", self.opt("slice_end"))
        self.step = _int(self, "slice_step", self.opt("slice_step")) or 1
        if self.start < 0 or self.step == 0:
            raise NetworkError("%s: slice_start must be >= 0 and slice_step not 0 (as RETURNN)" % self.desc)
        old = data.dims[self.ax]
        if old.is_batch_dim():
            raise NetworkError("%s: cannot slice the batch axis" % self.desc)
        if self.step < 0 and old.is_dynamic() and self.end is not None and self.end >= 0 and self.end != self.start:
            # RETURNN declares the static size end - start, which the reversed slice of the padded tensor does not
            # have (negative, or more than its 0 frames): it fails
            raise NetworkError("%s: a negative slice_step with slice_end %i on the dynamic axis %r: RETURNN declares "
                               "the size %i (and fails); use reverse_sequence" % (
                                   self.desc, self.end, old.description, self.end - self.start))
        size = len(range(old.dimension)[self.opt("slice_start"):self.end:self.step]) if old.is_static() else None
        if size is not None and size != _returnn_static_size(old.dimension, self.start, self.end, self.step):
            raise NetworkError("%s: x[%s:%s:%s] of the axis %r (size %i) has %i entries, RETURNN's slice declares %i "
                               "(and fails)" % (self.desc, self.opt("slice_start"), self.end, self.step,
                                                old.description, old.dimension, size,
                                                _returnn_static_size(old.dimension, self.start, self.end, self.step)))
        new = self.opt("out_dim")
        self.static_end = old.is_dynamic() and self.end is not None and self.end >= 0
        if self.static_end:
            # RETURNN: a non-negative end makes a static axis of ceil((end - start) / step), whatever the lengths
            size = -(-(self.end - self.start) // self.step)
            if size < 0:  # (a step may round end - start = -1 up to 0: then an empty axis)
                raise NetworkError("%s: slice_end %i, slice_start %i, slice_step %i: RETURNN's slice declares a negative "
                                   "size (and fails)" % (self.desc, self.end, self.start, self.step))
        if old.is_dynamic() and (self.end is None or self.end < 0) and (new is None or isinstance(new, Dim)):
            # RETURNN's dim math (its description too): old.sub_left(start), then - (-end), then ceildiv by the step;
            # a given out_dim is declared the same as it
            if isinstance(new, Dim) and new.dimension is not None:
                raise NetworkError("%s: out_dim %r does not have size %r" % (self.desc, new, size))
            new = math_or_given(new, old, [("sub_left", self.start), ("sub_right", -(self.end or 0)),
                                           ("ceildiv", abs(self.step))])
        elif not isinstance(new, Dim):  # named as RETURNN's dim math ('stag:' finds it)
            desc = returnn_description("%s:slice-end" % name, stride=abs(self.step)) if self.end is not None and \
                self.end >= 0 else returnn_description(old.description, -self.start, self.end or 0, abs(self.step))
            # RETURNN: a non-negative end makes an engine-made (auto_generated) dim, which its common layout
            # matches as such (e.g. size 1 broadcasting before behavior_version 11)
            new = Dim(size, kind=old.kind or DimTypes.Spatial, description=desc,
                      derived_from=None if self.static_end else old,
                      auto_generated=self.end is not None and self.end >= 0)
        elif new.dimension != size:
            raise NetworkError("%s: out_dim %r does not have size %r" % (self.desc, new, size))
        if self.start == 0 and self.end is None and self.step == 1:
            new = old
        self.new = new
        self.output = data.copy_template_replace_dim_tag(self.ax, new).copy(name)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = self.inputs(sources, ctx)
        index = [slice(None)] * self.input.batch_ndim
        index[self.ax] = slice(self.opt("slice_start"), self.end, self.step)
        sizes = {}
        if self.new.is_dynamic() and self.new is not self.input.dims[self.ax] and self.new not in x.sizes:
            length = x.sizes[self.input.dims[self.ax]]
            end = length if self.end is None else (
                tf.minimum(length, self.end) if self.end >= 0 else length + self.end)
            lens = shifted_sizes(self.new, x.sizes)
            step = abs(self.step)  # a negative step (no end): the padded tensor reversed from start, as RETURNN's,
            # with its dim math's sizes (length - start) / |step|: shorter sequences then start with padding
            sizes[self.new] = lens if lens is not None else tf.maximum(end - self.start + step - 1, 0) // step
        # a static end (or a reversed dynamic axis) reads padded frames as real ones: as they are where a layer
        # computed them, else zero frames (RETURNN's datasets pad with zeros)
        reversed_dynamic = self.step < 0 and self.input.dims[self.ax].is_dynamic()  # padded frames become real ones
        value = (x.as_read() if self.static_end or reversed_dynamic else x.tensor)[tuple(index)]
        if self.step < 0 and self.new in sizes:  # RETURNN's sizes of the padded tensor's reversed slice may exceed
            # its frames (e.g. x[1::-2] of 7 frames: 1 frame, sizes up to 3): stop there, not read beyond
            frames, most = tf.shape(value)[self.ax], tf.reduce_max(tf.concat([sizes[self.new], [0]], 0))
            value = checked(value, most <= frames, "%s: the reversed slice of the padded tensor has %%s frames, RETURNN's "
                            "sizes of it reach %%s (its dim math); use reverse_sequence" % self.desc, frames, most)
        if self.static_end:  # RETURNN's static size; a batch shorter than the end gets zero frames up to it
            missing = self.new.dimension - tf.shape(value)[self.ax]
            pads = [[0, 0]] * self.input.batch_ndim
            pads[self.ax] = [0, missing]
            value = tf.pad(value, tf.stack([tf.stack(p) for p in pads]))
        return self.make_output(value, sources, sizes)


def _returnn_static_size(n: int, start: int, end: Optional[int], step: int) -> int:
    """The size RETURNN's slice declares for a static axis of size ``n`` (its dim arithmetic:
    start off the left, a non-negative end as the end, a negative one off the right, then the
    ceil-division by ``|step|``); where it differs from the slice's real length, RETURNN fails."""
    size = n - start
    if end is not None:
        size = end - start if end >= 0 else size + end
    return -(-size // abs(step))


@register_layer
class PadLayer(_ShapeLayer):
    """Pads ``axes`` by ``padding`` (int, (left, right), or one pair per axis) with ``value``
    (``mode`` constant), or by TF's reflect/symmetric, or RETURNN's replication (one axis: the
    tensor's first and last entries repeated); ``out_dims``: the padded axes' new Dims.

    As RETURNN: ``handle_dynamic_dims`` (default from behavior version 21) puts the right padding of
    a dynamic axis after each sequence's end (constant mode only; other modes are refused there);
    without it the tensor is padded as it is, so a shorter sequence's new frames are the old padded
    frames (RETURNN's behaviour before version 21)."""

    layer_class = "pad"
    options = (
        Option("axes", None, "axis description(s)"),
        Option("padding", None, "int, (left, right), or a list of (left, right) per axis"),
        Option("value", 0, "pad value (mode constant)"),
        Option("mode", "constant", "constant, reflect, symmetric or replication"),
        Option("handle_dynamic_dims", None, "right padding of a dynamic axis goes after each sequence's end "
                                            "(None: from behavior version 21, as RETURNN)"),
        Option("out_dims", None, "Dim (or one per axis) of the padded axes in the output"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        data = self.input
        axes = self.opt("axes")  # RETURNN: one axis per entry (get_axis_from_description, never several)
        self.pad_axes = [self.axis(data, a, "axes") for a in (axes if isinstance(axes, (list, tuple)) else [axes])]
        if not self.pad_axes:
            raise NetworkError("%s: 'axes' %r match no axis" % (self.desc, self.opt("axes")))
        padding = self.opt("padding")
        if isinstance(padding, int) and not isinstance(padding, bool):
            pairs = [(padding, padding)] * len(self.pad_axes)
        elif isinstance(padding, (list, tuple)) and padding and isinstance(padding[0], (list, tuple)):
            pairs = [tuple(p) for p in padding]
        elif isinstance(padding, (list, tuple)) and len(padding) == 2:
            pairs = [tuple(padding)] * len(self.pad_axes)
        else:
            pairs = []
        if len(pairs) != len(self.pad_axes) or any(len(p) != 2 or any(
                isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in p) for p in pairs):
            raise NetworkError("%s: 'padding' must be an int, (left, right) or one pair per axis, got %r"
                               % (self.desc, padding))
        self.pairs = pairs
        self.mode = str(self.opt("mode")).lower()
        if any(left or right for left, right in pairs):  # RETURNN: no padding at all is the input, in any mode
            one_of(self.desc, "mode", self.mode, ("constant", "reflect", "symmetric", "replication"))
        if self.mode == "replication" and len(pairs) != 1 and any(left or right for left, right in pairs):
            raise NetworkError("%s: mode 'replication' pads one axis only (as RETURNN), got axes %r"
                               % (self.desc, self.opt("axes")))
        handle = self.opt("handle_dynamic_dims")
        self.handle_dynamic = behavior_version() >= 21 if handle is None else bool(handle)
        dims = list(data.dims)
        self.new: Dict[int, Dim] = {}
        given = self.opt("out_dims")
        given = [given] * len(pairs) if isinstance(given, Dim) else given
        if given is not None and (not isinstance(given, (list, tuple)) or len(given) != len(pairs)):
            raise NetworkError("%s: 'out_dims' must be a Dim or one Dim per padded axis, got %r" % (self.desc, given))
        for i, (a, (left, right)) in enumerate(zip(self.pad_axes, pairs)):
            old = data.dims[a]
            if old.is_batch_dim():  # RETURNN: zero padding there is tf.pad's no-op; other padding fails its template
                if left or right:
                    raise NetworkError("%s: cannot pad the batch axis" % self.desc)
                continue
            if old.is_dynamic() and self.mode != "constant" and self.handle_dynamic and any(r for _, r in pairs):
                raise NetworkError("%s: mode %r with right padding of a dynamic axis needs handle_dynamic_dims False "
                                   "(RETURNN: not implemented)" % (self.desc, self.mode))
            if left or right or given is not None:
                size = None if old.is_dynamic() else old.dimension + left + right
                mine = given_dim(self, "out_dims", given[i] if given is not None else None, size)
                new = math_or_given(mine, old, [("add_left", left), ("add_right", right)]) if old.is_dynamic() else \
                    mine or Dim(size, kind=old.kind, description="%s:pad" % name, derived_from=old)
                dims[a] = self.new[a] = new
        self._check_float_value(data, pairs)
        self.output = data.copy(name, dims=dims, time_dim_axis=data.time_dim_axis,
                                feature_dim_axis=data.feature_dim_axis)

    def _check_float_value(self, data: Data, pairs: List[Tuple[int, int]]) -> None:
        """RETURNN hands a float ``value`` to TensorFlow for an int or bool input: tf.pad raises a TypeError
        for a non-zero one, and so does the masking of a right-padded dynamic axis for any."""
        value = self.opt("value")
        if self.mode != "constant" or not isinstance(value, float) or data.dtype.startswith("float") \
                or data.dtype.startswith("complex") or not any(left or right for left, right in pairs):
            return
        masks = self.handle_dynamic and any(data.dims[a].is_dynamic() and right
                                            for a, (_, right) in zip(self.pad_axes, pairs))
        if value != 0 or masks:
            raise NetworkError("%s: 'value' %r is a float, the input is %s (RETURNN: TypeError from TensorFlow, "
                               "which takes no float for it; give an int)" % (self.desc, value, data.dtype))

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = self.inputs(sources, ctx)
        if not any(left or right for left, right in self.pairs):  # RETURNN: the input as it is (no masking)
            return self.make_output(x.tensor, sources)
        value = self.opt("value")
        tensor = x.tensor
        sizes = {}
        for a, (left, right) in zip(self.pad_axes, self.pairs):
            old = self.input.dims[a]
            if old.is_batch_dim():  # (zero padding there, __init__)
                continue
            if old.is_dynamic() and self.handle_dynamic and self.mode == "constant" and any(r for _, r in self.pairs):
                # RETURNN masks (with value) only what comes after the sequences where some axis is padded on the
                # right; the left padding of mode replication/reflect reads the padded frames as they are
                tensor = tf.where(x.broadcast_mask(a), tensor, tf.cast(value, tensor.dtype))
            if a in self.new and self.new[a].is_dynamic() and self.new[a] not in x.sizes:
                # (a shift that cancels out is the axis the input was cut from, with its own sizes: RETURNN's
                # 1 + ((-1+time)+-1) + 1 is time; else its sizes from that axis's, dim_shift)
                lens = shifted_sizes(old, x.sizes, [("add_left", left), ("add_right", right)])
                sizes[self.new[a]] = lens if lens is not None else x.sizes[old] + left + right
        paddings = [[0, 0]] * self.input.batch_ndim
        for a, pair in zip(self.pad_axes, self.pairs):
            paddings[a] = list(pair)
        if self.mode == "constant":
            tensor = tf.pad(tensor, paddings, constant_values=tf.cast(value, tensor.dtype))
        elif self.mode == "replication":
            (a,), ((left, right),) = self.pad_axes, self.pairs
            n = tf.shape(tensor)[a]
            first, last = tf.gather(tensor, [0], axis=a), tf.gather(tensor, [n - 1], axis=a)
            tensor = tf.concat([tf.repeat(first, left, axis=a), tensor, tf.repeat(last, right, axis=a)], axis=a)
        else:
            tensor = tf.pad(tensor, paddings, mode=self.mode.upper())
        return self.make_output(tensor, sources, sizes)


def given_dim(layer: Layer, key: str, dim: Any, size: Optional[int]) -> Optional[Dim]:
    """A Dim the config gives for a new axis (``out_dim``-like options), checked against the size the
    layer computes (None: dynamic); None when not given."""
    if dim is None:
        return None
    if not isinstance(dim, Dim) or dim.dimension != size:
        raise NetworkError("%s: %r must be a %s Dim, got %r" % (
            layer.desc, key, "dynamic" if size is None else "static size-%i" % size, dim))
    return dim


def _window_sides(size: int, left: Any, right: Any) -> Tuple[int, int]:
    """RETURNN's defaults: right = size // 2, left = the rest."""
    if right is None:
        right = size - left - 1 if left is not None else size // 2
    if left is None:
        left = size - right - 1
    return left, right


@register_layer
class WindowLayer(_ShapeLayer):
    """Adds a window axis of ``window_size`` right after ``axis`` (default T): output frame t holds
    input frames ``t - window_left .. t + window_right`` (as RETURNN: a shorter sequence's windows
    read its padded frames as they are, zeros only beyond the padded tensor); ``valid``
    keeps only full windows; ``stride`` keeps every n-th window."""

    layer_class = "window"
    options = (
        Option("window_size", None, "window length"),
        Option("window_dim", None, "Dim of the window axis (instead of window_size)"),
        Option("window_left", None, "frames to the left (default: window_size - 1 - window_right)"),
        Option("window_right", None, "frames to the right (default: window_size // 2)"),
        Option("axis", "T", "axis to slide over"),
        Option("padding", "same", "'same' or 'valid'"),
        Option("stride", 1, "keep every n-th window"),
        Option("out_spatial_dim", None, "Dim of the output's axis in place of the slid-over one"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        data = self.input
        if data.batch_dim_axis is None:  # RETURNN's template: copy_as_batch_major asserts a batch axis
            raise NetworkError("%s: an input without batch axis (%s) is refused, as RETURNN's window asserts one "
                               "(e.g. after a boolean_mask over the batch)" % (self.desc, data.short_repr()))
        wdim = self.opt("window_dim")
        size = wdim.dimension if isinstance(wdim, Dim) else positive_int(self.desc, "window_size", self.opt("window_size"))
        if isinstance(wdim, Dim) and self.opt("window_size") and self.opt("window_size") != wdim.dimension:
            raise NetworkError("%s: window_size %r contradicts window_dim %r (RETURNN declares its window of window_size "
                               "the same as window_dim and asserts their sizes agree)" % (
                                   self.desc, self.opt("window_size"), wdim))
        self.size = size
        self.stride = positive_int(self.desc, "stride", self.opt("stride"))
        self.padding = one_of(self.desc, "padding", str(self.opt("padding")).lower(), ("same", "valid"))
        self.window_dim = wdim if isinstance(wdim, Dim) else Dim(size, kind=DimTypes.Spatial, description="%s:window" % name)
        self.left, self.right = 0, 0
        axis = self.opt("axis")
        in_loop = data.time_dim_axis is None and (axis is None or (isinstance(axis, str) and axis.upper() in ("T", "TIME"))
                                                  or (isinstance(axis, Dim) and "single" in axis.description.lower()))
        if in_loop and behavior_version() < 1 and self.padding == "same":
            # RETURNN before Nov 2021 (a984d0c0): its recurrent variant took the last window_size frames whatever
            # window_left/window_right said (a published 2022 decoder sets window_left 5 with window_size 5)
            self._init_step_mode(name, old_config=True)
            return
        if self.padding == "valid" and (self.opt("window_left") is not None or self.opt("window_right") is not None):
            raise NetworkError("%s: window_left/window_right do not go with padding 'valid' (RETURNN asserts they are "
                               "unset; valid windows start at each frame)" % self.desc)
        if self.padding == "same":
            self.left, self.right = _window_sides(size, self.opt("window_left"), self.opt("window_right"))
            if self.left < 0 or self.right < 0 or self.left + self.right + 1 != size:
                raise NetworkError("%s: window_left + window_right + 1 must equal window_size" % self.desc)
        if in_loop:
            self._init_step_mode(name)
            return
        self.ax = self.axis(data, axis, "axis")
        old = data.dims[self.ax]
        if self.padding == "same" and self.stride == 1:
            self.out_dim = given_dim(self, "out_spatial_dim", self.opt("out_spatial_dim"), old.dimension) or old
        else:
            if old.is_batch_dim():  # RETURNN: its new dim derived from the batch has no value (sanity_check fails)
                raise NetworkError("%s: a window over the batch axis needs padding 'same' and stride 1 (RETURNN "
                                   "cannot size the new axis otherwise)" % self.desc)
            n = None
            if old.is_static():
                n = (old.dimension + self.stride - 1) // self.stride if self.padding == "same" else \
                    max(old.dimension - size, -1) // self.stride + 1
            given = given_dim(self, "out_spatial_dim", self.opt("out_spatial_dim"), n)
            # RETURNN's dim math (ConvLayer.calc_out_dim): the axis of a conv of that size and stride, which a pad
            # undoes; a given out_spatial_dim is declared the same as it
            self.out_dim = math_or_given(given, old, conv_ops(size, self.stride, self.padding == "valid")) if old.is_dynamic() else \
                given or Dim(n, kind=old.kind or DimTypes.Spatial, description="%s:%s" % (name, old.description),
                             derived_from=old)
        dims = list(data.dims)
        dims[self.ax] = self.out_dim
        dims.insert(self.ax + 1, self.window_dim)
        self.perm: Optional[List[int]] = None  # from the order forward() computes in (dims) to the output's
        if behavior_version() >= 18:
            self.output = self._returnn_order_from_bv18(name, data)
            self.perm = [dims.index(d) for d in self.output.dims]
            return
        out = data.copy(name, dims=dims)
        if data.time_dim_axis is not None:
            out = out.copy(time_dim_axis=data.time_dim_axis + (data.time_dim_axis > self.ax))
        if isinstance(data._feature_dim_axis, int) and not (data.feature_dim_axis == self.ax and self.out_dim is not old):
            out = out.copy(feature_dim_axis=data.feature_dim_axis + (data.feature_dim_axis > self.ax))
        # else RETURNN's default feature axis on the new layout (the last static axis: the window axis when the
        # feature axis itself is windowed)
        self.output = out

    def _returnn_order_from_bv18(self, name: str, data: Data) -> Data:
        """RETURNN from behavior version 18: the batch-major input with the slid-over axis moved to
        the front (before the batch), then the window axis at the front (stride 1) or right after
        it; a time or feature axis set explicitly stays on its dim, a default one is the default
        of the new layout."""
        order = [data.batch_dim_axis] if data.batch_dim_axis is not None else []
        order += [i for i in range(data.batch_ndim) if i not in order]
        order.remove(self.ax)
        dims = [self.out_dim] + [data.dims[i] for i in order]
        dims.insert(0 if self.stride == 1 else 1, self.window_dim)
        special = {}
        for key, axis in (("time_dim_axis", data._time_dim_axis), ("feature_dim_axis", data._feature_dim_axis)):
            special[key] = axis if not isinstance(axis, int) else \
                dims.index(self.out_dim if axis == self.ax else data.dims[axis])
        return Data(name, dims=dims, dtype=data.dtype, sparse_dim=data.sparse_dim,
                    batch_dim_axis=next((i for i, d in enumerate(dims) if d.is_batch_dim()), None), **special)

    step_mode = False  # inside a rec loop over its time axis: a window over the frames so far (below)

    def _init_step_mode(self, name: str, old_config: bool = False) -> None:
        """RETURNN's recurrent variant: in a rec loop (one frame per step, the loop's time axis
        meant) the output at step t holds the frames t - window_size + 1 .. t (zeros before the
        first), the window axis after the batch axis; only windows into the past (``old_config``:
        without a behavior_version, window_left/window_right not looked at, as RETURNN before Nov 2021)."""
        if old_config:
            pass
        elif self.opt("window_left") is None and self.opt("window_right") is None:
            raise NetworkError("%s: inside a rec loop, set window_right=0 or window_left=window_size-1 (RETURNN asserts "
                               "it)" % self.desc)
        elif (self.opt("window_right") not in (None, 0)) or self.opt("window_left") not in (None, self.size - 1):
            raise NetworkError("%s: inside a rec loop the window can only reach into the past (window_right 0, "
                               "window_left window_size - 1), as in RETURNN (which took the last window_size frames "
                               "whatever these say before Nov 2021: configs without a behavior_version get that)"
                               % self.desc)
        if self.stride != 1 or self.padding != "same":
            raise NetworkError("%s: inside a rec loop the window can only reach into the past (window_right 0, stride 1, "
                               "padding 'same'), as in RETURNN" % self.desc)
        data = self.input
        self.step_mode = True
        self.pos = 0 if data.batch_dim_axis is None else data.batch_dim_axis + 1
        self.output = data.copy_insert_dim(self.window_dim, self.pos).copy(name)

    def initial_state(self, batch: tf.Tensor, n_time: tf.Tensor) -> tf.Tensor:
        """The window before the first frame: zeros."""
        shape = [batch if d.is_batch_dim() else d.dimension for d in self.output.dims]
        return tf.zeros(tf.stack(shape), tf.as_dtype(self.output.dtype))

    def step(self, sources: List[LayerOutput], state: tf.Tensor, ctx: RunContext, t: tf.Tensor):
        """One loop step: the window moves by this step's frame."""
        frame = tf.expand_dims(tf.cast(self.inputs(sources, ctx).tensor, state.dtype), self.pos)
        rest = tf.gather(state, tf.range(1, self.size), axis=self.pos)
        window = tf.concat([rest, frame], axis=self.pos)
        return self.make_output(window, sources), window

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        if self.step_mode:
            raise NetworkError("%s: a window over the loop's frames runs only inside a rec layer's unit" % self.desc)
        x = self.inputs(sources, ctx)
        tensor = x.tensor  # RETURNN's windowed_nd: padded frames as they are, zeros only beyond the tensor
        pads = [[0, 0]] * self.input.batch_ndim
        pads[self.ax] = [self.left, self.right]
        tensor = tf.pad(tensor, pads)
        if self.padding == "valid" and self.stride == 1:  # RETURNN's frames of a batch shorter than the window too
            frames = window_frames.valid_frames(tensor, self.size, self.ax)
        else:
            frames = tf.signal.frame(tensor, self.size, self.stride, axis=self.ax)
        sizes = {}
        old = self.input.dims[self.ax]
        if self.out_dim is not old and self.out_dim.is_dynamic() and self.out_dim not in x.sizes:
            lens = x.sizes[old]
            shifted = shifted_sizes(self.out_dim, x.sizes)
            sizes[self.out_dim] = shifted if shifted is not None else \
                (lens + self.stride - 1) // self.stride if self.padding == "same" else \
                tf.maximum(lens - self.size, -1) // self.stride + 1
        if self.perm is not None and self.perm != sorted(self.perm):  # RETURNN's order from behavior version 18
            frames = tf.transpose(frames, self.perm)
        return self.make_output(frames, sources, sizes)


@register_layer
class TimeChunkingLayer(_ShapeLayer):
    """Cuts the time axis into chunks of ``chunk_size`` every ``chunk_step`` frames and folds them
    into the batch: ``(B, T, ...)`` -> ``(chunk_size, B * N, ...)`` (time-major, as RETURNN's) with
    ``N = max(ceil((T - size) / step), 0) + 1``; chunk ``n`` of sequence ``b`` is row ``b * N + n``
    and has ``clip(L_b - n * step, 0, size)`` real frames. Undo with ``time_unchunking``."""

    layer_class = "time_chunking"
    no_int_axes = ("axis",)  # RETURNN: allow_int=False
    options = (
        Option("chunk_size", None, "frames per chunk"),
        Option("chunk_step", None, "frames between chunk starts"),
        Option("axis", "T", "the axis cut into chunks (the chunk axis becomes the output's time axis)"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        data = self.input
        self.size = positive_int(self.desc, "chunk_size", self.opt("chunk_size"))
        self.step = positive_int(self.desc, "chunk_step", self.opt("chunk_step"))
        if data.batch_dim_axis is None:
            raise NetworkError("%s: input must have a batch axis, got %s" % (self.desc, data.short_repr()))
        ax = self.axis(data, self.opt("axis"), "axis")
        if ax == data.batch_dim_axis:
            raise NetworkError("%s: cannot chunk the batch axis" % self.desc)
        refuse_non_float32(self.desc, data)
        rest = [i for i in range(data.batch_ndim) if i not in (data.batch_dim_axis, ax)]
        kept_dynamic = [data.dims[i].description for i in rest if data.dims[i].is_dynamic()]
        if kept_dynamic:
            raise NetworkError("%s: chunking %r while the input keeps the dynamic axis %r is refused (its lengths stay "
                               "those of the unchunked batch)" % (self.desc, data.dims[ax].description, kept_dynamic[0]))
        self.perm = [data.batch_dim_axis, ax] + rest  # RETURNN chunks any layout (e.g. time-major)
        data = data.copy_transpose(self.perm)
        self.in_dim = data.dims[1]
        self.chunk_dim = Dim(None, kind=DimTypes.Spatial, description="%s:chunk" % name, derived_from=self.in_dim)
        self.chunk_dim.chunk_step = self.step  # read by time_unchunking
        self.chunk_dim.chunk_size = self.size
        # RETURNN's layout: (chunk, chunked batch, the rest in the input's order)
        self.output = data.copy_template_replace_dim_tag(1, self.chunk_dim).copy_move_axis(1, 0).copy(
            name, time_dim_axis=0)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = self.inputs(sources, ctx)
        tensor = tf.transpose(x.masked(0), self.perm) if self.perm != sorted(self.perm) else x.masked(0)
        length = tf.shape(tensor)[1]
        n = tf.maximum(-(-(length - self.size) // self.step), 0) + 1
        pads = [[0, 0]] * self.input.batch_ndim
        pads[1] = [0, (n - 1) * self.step + self.size - length]
        frames = tf.signal.frame(tf.pad(tensor, pads), self.size, self.step, axis=1)  # (B, N, C, ...)
        shape = tf.shape(frames)
        frames = tf.reshape(frames, tf.concat([[-1], shape[2:]], 0))  # (B * N, C, ...)
        frames = tf.transpose(frames, [1, 0] + list(range(2, self.input.batch_ndim)))
        starts = tf.range(n) * self.step
        sizes = tf.clip_by_value(_time_lengths(x, self.in_dim, tf.shape(tensor)[0])[:, None] - starts[None, :],
                                 0, self.size)
        return self.make_output(frames, sources, {self.chunk_dim: tf.reshape(sizes, [-1])})


@register_layer
class TimeUnchunkingLayer(_ShapeLayer):
    """Inverse of ``time_chunking`` (``chunking_layer``): ``(C, B * N, ...)`` (the chunk and batch axes anywhere)
    -> ``(T, B, ...)`` (time-major, as RETURNN's); frames covered by several chunks are the mean over those
    chunks."""

    layer_class = "time_unchunking"
    ref_options = ("chunking_layer",)
    options = (Option("chunking_layer", None, "the time_chunking layer to undo"),)

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        if not isinstance(opts.get("chunking_layer"), str):
            raise NetworkError("layer %r (time_unchunking): needs 'chunking_layer' (a layer name)" % name)
        super().__init__(name, opts, sources[:-1], seed)
        data = self.input
        chunk_dim = next((d for d in sources[-1].dims if hasattr(d, "chunk_step")), None)
        if chunk_dim is None or chunk_dim not in data.dims or data.batch_dim_axis is None:
            raise NetworkError("%s: input must have the batch and chunk axes of the time_chunking layer %r"
                               % (self.desc, opts["chunking_layer"]))
        refuse_non_float32(self.desc, data)
        chunk_ax = data.dims.index(chunk_dim)
        # (chunked batch, chunk, the rest in the input's order) here; RETURNN's output: (time, batch, the rest)
        self.perm = [data.batch_dim_axis, chunk_ax] + [
            i for i in range(data.batch_ndim) if i not in (data.batch_dim_axis, chunk_ax)]
        data = data.copy_transpose(self.perm)
        self.chunk_size = chunk_dim.chunk_size
        self.step = chunk_dim.chunk_step
        self.time_dim = chunk_dim.derived_from
        self.output = data.copy_template_replace_dim_tag(1, self.time_dim).copy_move_axis(1, 0).copy(
            name, time_dim_axis=0)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = self.inputs(sources[:-1], ctx).copy_transpose(self.perm)
        if self.time_dim.is_dynamic():
            lens = x.sizes[self.time_dim]
        else:  # a static time axis: its number of chunks is static too
            t, size = self.time_dim.dimension, self.chunk_size
            n_chunks = max(-(-(t - size) // self.step), 0) + 1
            lens = _time_lengths(x, self.time_dim, tf.shape(x.tensor)[0] // n_chunks)
        batch = tf.shape(lens)[0]
        frames = x.masked(0)
        mask = tf.cast(x.broadcast_mask(1), frames.dtype)
        rank = self.input.batch_ndim
        perm = [0] + list(range(3, rank + 1)) + [1, 2]  # (B, ..., N, C) for overlap_and_add

        def fold(t: tf.Tensor) -> tf.Tensor:
            t = tf.reshape(t, tf.concat([[batch, -1], tf.shape(t)[1:]], 0))
            return tf.signal.overlap_and_add(tf.transpose(t, perm), self.step)

        total = fold(frames)
        count = fold(mask * tf.ones_like(frames))
        y = tf.where(count > 0, total / tf.maximum(count, 1e-8), 0.0)
        inv = [rank - 1, 0] + list(range(1, rank - 1))  # (T, B, ...)
        y = tf.transpose(y, inv)[:tf.reduce_max(lens)]
        return self.make_output(y, sources[:-1])


def _time_lengths(x: LayerOutput, time_dim: Dim, batch: tf.Tensor) -> tf.Tensor:
    """Each sequence's length on ``time_dim``: its sizes, or a static axis's size for all ``batch``."""
    if time_dim.is_dynamic():
        return x.sizes[time_dim]
    return tf.fill([batch], tf.constant(time_dim.dimension, tf.int32))


def refuse_non_float32(desc: str, data: Data) -> None:
    """RETURNN's native (un)chunking ops take float32 only (a TypeError for other data, sparse labels too)."""
    if data.dtype != "float32":
        raise NetworkError("%s: needs float32 input (RETURNN's native chunking op takes no other), got %s %s"
                           % (desc, data.dtype, data.short_repr()))
