"""Layers that work along one axis (RETURNN semantics): cumsum, seq_len_mask, shift_axis, repeat,
tile, range_in_axis, range_from_length.

- ``cumsum``: running sum over ``axis`` (default T), ``reverse`` from the end, plus
  ``additional_left_summand_per_element``; over the padded tensor as RETURNN sums it: a reverse sum
  adds a shorter sequence's padded frames as they are (0 from zero-padded data; a layer before may
  leave other values there, e.g. a batch_norm's shift, which RETURNN adds too). In a rec loop over its time axis (RETURNN's
  recurrent variant) the sum so far is loop state, starting from zeros.
- ``seq_len_mask``: ``mask_value`` at positions of ``axis`` outside the sequence (the input's own
  lengths, or ``seq_len_source``'s), before ``start`` (a layer, per sequence), or outside
  ``[window_start, window_start + window_size)``.
- ``shift_axis``: shifts the values along ``axis`` by ``amount`` frames (> 0 to later positions),
  filling ``pad_value``; without ``pad`` the axis gets shorter. ``adjust_size_info``: lengths
  follow (+amount with padding on the right shift, -amount on a left shift, clipped); without it
  and without ``pad`` on a dynamic axis: refused (RETURNN keeps lengths longer than the axis); with ``pad``
  and ``adjust_size_info`` on a static axis: refused (RETURNN declares it shorter, and fails). RETURNN
  keeps the lengths of split_dims' padded remainder axis too, in the first shift_axis that reads it (its
  size tensor is tied to no dim tag, so the shift's new tag takes it over and the adjusted sizes, same-named,
  count as already set); a later shift of that output adjusts (``Dim.untied_sizes``).
- ``repeat``: each position of ``axis`` ``repetitions`` times (an int, or an int layer with one
  count per position); a new axis whose sizes are the summed counts of real positions.
- ``tile``: the whole axis repeated, ``multiples = {axis: n}`` (static axes; dynamic ones are refused, as RETURNN
  asserts; n = 1 keeps the axis itself, as RETURNN's 1 * dim, also the batch axis, which is not tiled otherwise).
- ``range_in_axis``: ``0 .. n-1`` over ``axis`` of the input, shaped as that one axis.
- ``range_from_length``: from lengths ``(B,)`` a range over a new dynamic axis with those sizes;
  lengths straight from a ``length`` layer give that layer's axis itself (RETURNN finds the dim
  whose size tensor they are), e.g. the data's time axis. Lengths of other axes (e.g. one per frame,
  ``(B, T)``) are the new axis' sizes per position of those axes (``sizes_over``), the range up to
  their maximum.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim, DimTypes
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.dim_shift import math_or_given
from returnn.tf.layers.helpers import check_sources
from returnn.tf.layers.options import Option, constant_fits, positive_int
from returnn.tf.layers.output import align_tensor
from returnn.tf.layers.rnn_cell import is_step_template


def _new_dim(name: str, old: Dim, size: Any, tag: str) -> Dim:
    return Dim(size, kind=old.kind if not old.is_batch_dim() else DimTypes.Spatial,
               description="%s:%s" % (name, tag), derived_from=old)


def _positions(x: LayerOutput, ax: int) -> tf.Tensor:
    """``0 .. n-1`` along axis ``ax``, shaped to broadcast against ``x``."""
    return align_tensor(tf.range(tf.shape(x.tensor)[ax]), [ax], x.data.batch_ndim)


def _per_seq(value: LayerOutput, like: LayerOutput) -> tf.Tensor:
    """A ``(B,)`` (or scalar) value shaped to broadcast against ``like`` (batch axis kept)."""
    t = value.tensor
    if len(t.shape) == 0:
        return t
    return align_tensor(t, [like.data.batch_dim_axis], like.data.batch_ndim)


@register_layer
class CumsumLayer(Layer):
    """See the module docstring."""

    layer_class = "cumsum"
    options = (
        Option("axis", "T", "axis to sum over"),
        Option("reverse", False, "sum from the end"),
        Option("additional_left_summand_per_element", None, "a number added to every element first"),
    )

    step_mode = False  # inside a rec loop over its time axis: the running sum as loop state (below)
    start = None  # outside that: the initial_output added to the whole sum
    # in a rec loop the sum starts from the layer's initial_output (RETURNN's state); such a layer
    # stays in the loop (the loop's initial value machinery gives that start)
    state_from_initial_output = True

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources, 1, 1)
        self.output = sources[0].copy(name)
        # RETURNN: x = additional_left_summand_per_element + x
        constant_fits(self.desc, "additional_left_summand_per_element",
                      self.opt("additional_left_summand_per_element"), sources[0].dtype)
        axis = self.opt("axis")
        if is_step_template(sources) and sources[0].time_dim_axis is None and (
                (isinstance(axis, str) and axis.upper() in ("T", "TIME")) or
                (isinstance(axis, Dim) and "single" in axis.description.lower())):
            # RETURNN's recurrent variant: the sum over the loop's frames so far, state + this frame
            if self.opt("reverse"):
                raise NetworkError("%s: inside a rec loop the sum runs forward only (RETURNN asserts not reverse)"
                                   % self.desc)
            self.step_mode = True
            return
        init = self.opt("initial_output")
        # RETURNN adds its initial output to the whole sum (a cumsum moved out of a rec loop gives the loop's numbers)
        self.start = {"zeros": 0.0, "ones": 1.0}.get(init, init) if isinstance(init, str) else init
        if self.start is not None and (isinstance(self.start, (bool, str)) or not isinstance(self.start, (int, float))):
            raise NetworkError("%s: 'initial_output' %r on a sum that is not over a rec loop's frames: only a number, "
                               "'zeros' or 'ones' here (RETURNN adds it to the whole sum)" % (self.desc, init))
        self.ax = self.axis(sources[0], axis, "axis")

    def initial_state(self, batch: tf.Tensor, n_time: tf.Tensor) -> tf.Tensor:
        """The sum before the first frame without an initial_output: zeros (RETURNN's default); with
        one, the rec loop gives that value instead (``state_from_initial_output``)."""
        shape = [batch if d.is_batch_dim() else d.dimension for d in self.output.dims]
        return tf.zeros(tf.stack(shape), tf.as_dtype(self.output.dtype))

    def step(self, sources: List[LayerOutput], state: tf.Tensor, ctx: RunContext, t: tf.Tensor):
        """One loop step: the previous sum plus this frame."""
        total = state + tf.cast(self._summand(self.apply_dropout(sources[0], ctx).tensor), state.dtype)
        return self.make_output(total, sources), total

    def _summand(self, value: tf.Tensor) -> tf.Tensor:
        extra = self.opt("additional_left_summand_per_element")
        return value if extra is None else value + tf.cast(extra, value.dtype)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        if self.step_mode:
            raise NetworkError("%s: a sum over the loop's frames runs only inside a rec layer's unit" % self.desc)
        x = self.apply_dropout(sources[0], ctx)
        value = self._summand(x.tensor)  # padded frames as they are (RETURNN's tf.cumsum of the padded tensor)
        total = tf.cumsum(value, axis=self.ax, reverse=bool(self.opt("reverse")))
        if self.start:
            total = total + tf.cast(self.start, total.dtype)
        return self.make_output(total, [x])


@register_layer
class SeqLenMaskLayer(Layer):
    """See the module docstring."""

    layer_class = "seq_len_mask"
    ref_options = ("seq_len_source", "start", "window_start", "window_size")
    options = (
        Option("mask_value", None, "value at masked positions"),
        Option("axis", "T", "a dynamic axis"),
        Option("seq_len_source", None, "layer whose lengths of that axis to use"),
        Option("start", None, "layer (B,): positions before it are masked"),
        Option("window_start", None, "int or layer (B,): first unmasked position"),
        Option("window_size", None, "int or layer (B,): number of unmasked positions from window_start"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        self.refs = [k for k in self.ref_options if isinstance(opts.get(k), str)]
        own = list(sources[:len(sources) - len(self.refs)])
        super().__init__(name, opts, own, seed)
        check_sources(self, own, 1, 1)
        if not isinstance(self.opt("mask_value"), (int, float)) or isinstance(self.opt("mask_value"), bool):
            raise NetworkError("%s: 'mask_value' must be a number, got %r" % (self.desc, self.opt("mask_value")))
        if isinstance(self.opt("mask_value"), float) and own[0].dtype.startswith(("int", "uint")):
            raise NetworkError("%s: 'mask_value' %r is a float, the input %s holds %s (RETURNN's tf.where fails on "
                               "the two dtypes): give an int" % (self.desc, self.opt("mask_value"),
                                                                 own[0].short_repr(), own[0].dtype))
        self.ax = self.axis(own[0], self.opt("axis"), "axis")
        if not own[0].dims[self.ax].is_dynamic():  # RETURNN's get_sequence_mask... asserts a dynamic axis
            raise NetworkError("%s: 'axis' %r is the static axis %s; RETURNN masks a dynamic axis only"
                               % (self.desc, self.opt("axis"), own[0].dims[self.ax]))
        if self.opt("window_start") is not None and self.opt("window_size") is None:
            raise NetworkError("%s: 'window_start' needs 'window_size'" % self.desc)
        self.output = own[0].copy(name)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = sources[0]
        refs = dict(zip(self.refs, sources[len(sources) - len(self.refs):]))
        if "seq_len_source" in refs:
            src = refs["seq_len_source"]
            lengths = src.size(src.data.time_dim_axis) if src.data.time_dim_axis is not None else src.tensor
            mask = _positions(x, self.ax) < align_tensor(tf.cast(lengths, tf.int32), [x.data.batch_dim_axis],
                                                         x.data.batch_ndim)
        elif x.data.dims[self.ax].is_dynamic():
            mask = x.broadcast_mask(self.ax)
        else:
            mask = tf.ones_like(_positions(x, self.ax), tf.bool)
        pos = _positions(x, self.ax)

        def value(key: str) -> tf.Tensor:
            if key in refs:
                return tf.cast(_per_seq(refs[key], x), tf.int32)
            return tf.constant(int(self.opt(key)), tf.int32)

        if self.opt("start") is not None:
            mask = tf.logical_and(mask, pos >= value("start"))
        if self.opt("window_start") is not None:
            begin = value("window_start")
            mask = tf.logical_and(mask, tf.logical_and(pos >= begin, pos < begin + value("window_size")))
        fill = tf.cast(self.opt("mask_value"), x.tensor.dtype)
        return self.make_output(tf.where(tf.broadcast_to(mask, tf.shape(x.tensor)), x.tensor, fill), [x])


@register_layer
class ShiftAxisLayer(Layer):
    """See the module docstring."""

    layer_class = "shift_axis"
    options = (
        Option("axis", None, "axis to shift along"),
        Option("amount", None, "frames to shift (> 0: to later positions, < 0: to earlier ones)"),
        Option("pad", True, "fill the freed positions (keeps the extent)"),
        Option("pad_value", 0, "value of the freed positions"),
        Option("adjust_size_info", True, "lengths follow the shift"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources, 1, 1)
        amount = self.opt("amount")
        if not isinstance(amount, int) or isinstance(amount, bool) or amount == 0:
            raise NetworkError("%s: 'amount' must be a non-zero int, got %r" % (self.desc, amount))
        data = sources[0]
        self.ax = self.axis(data, self.opt("axis"), "axis")
        self.amount = amount
        old = data.dims[self.ax]
        self.new = None
        if old.is_batch_dim():  # RETURNN shifts the rows (sequences) as they are; no sizes follow (none are per row)
            if not self.opt("pad"):
                raise NetworkError("%s: pad False on the batch axis is refused (a shorter batch than the sizes of the "
                                   "other axes)" % self.desc)
            self.output = data.copy(name)
            return
        if old.is_dynamic() and not self.opt("pad") and not self.opt("adjust_size_info"):
            # RETURNN keeps the old lengths over the shortened axis: the longest sequences exceed it
            raise NetworkError("%s: pad False with adjust_size_info False on the dynamic axis %r is refused: RETURNN "
                               "keeps the old lengths, longer than the shortened axis" % (self.desc, old.description))
        if old.is_static() and self.opt("pad") and self.opt("adjust_size_info"):
            raise NetworkError("%s: pad with adjust_size_info on the static axis %r is refused: RETURNN declares it %i "
                               "shorter but pads it back (and fails on the mismatch); set adjust_size_info False"
                               % (self.desc, old.description, abs(amount)))
        # RETURNN keeps the lengths of a dim whose sizes are untied (split_dims' remainder) the first time
        self.keep_sizes = bool(self.opt("adjust_size_info") and old.is_dynamic() and old.untied_sizes
                               and old.sizes_tied_by in (None, name))
        if self.keep_sizes:
            if not self.opt("pad"):
                raise NetworkError("%s: pad False on %r, whose lengths RETURNN keeps (its sizes are not tied to a dim "
                                   "tag, as split_dims' remainder), is refused: they exceed the shortened axis"
                                   % (self.desc, old.description))
            old.sizes_tied_by = name
        if self.opt("adjust_size_info") or not self.opt("pad"):
            size = None if old.dimension is None else (old.dimension if self.opt("pad") else
                                                        max(0, old.dimension - abs(amount)))
            self.new = _new_dim(name, old, size, "shift_axis")
            if old.is_dynamic() and not self.keep_sizes:
                # RETURNN's layer sets the adjusted sizes with a fresh dim tag, derived from nothing: it is no
                # version of the input's axis (a combine with the input broadcasts the two)
                self.new.derived_from = None
            data = data.copy_template_replace_dim_tag(self.ax, self.new)
        self.output = data.copy(name)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = sources[0]
        n = tf.shape(x.tensor)[self.ax]
        k = tf.minimum(abs(self.amount), n)
        begin = [0] * x.data.batch_ndim
        size = [-1] * x.data.batch_ndim
        if self.amount > 0:
            size[self.ax] = n - k
        else:
            begin[self.ax] = k
        shifted = tf.slice(x.tensor, tf.stack(begin), tf.stack(size))
        if self.opt("pad"):
            pads = [[0, 0]] * x.data.batch_ndim
            pads[self.ax] = [k, 0] if self.amount > 0 else [0, k]
            shifted = tf.pad(shifted, tf.stack([tf.stack(p) for p in pads]),
                             constant_values=tf.cast(self.opt("pad_value"), x.tensor.dtype))
        sizes = {}
        if self.new is not None and self.new.is_dynamic():
            old_sizes = x.size(self.ax)
            delta = self.amount if (self.amount < 0 or self.opt("pad")) else 0
            if not self.opt("adjust_size_info") or self.keep_sizes:
                delta = 0  # (with pad: the lengths stay; without pad refused in __init__)
            sizes[self.new] = tf.clip_by_value(old_sizes + delta, 0, tf.shape(shifted)[self.ax])
        return self.make_output(shifted, [x], sizes)


@register_layer
class RepeatLayer(Layer):
    """See the module docstring."""

    layer_class = "repeat"
    no_int_axes = ("axis",)  # RETURNN: allow_int=False
    ref_options = ("repetitions",)
    options = (
        Option("repetitions", None, "int, or layer of int counts (one per position of the axis)"),
        Option("axis", None, "axis whose positions are repeated (required: RETURNN's get_out_data_from_opts "
                             "has no default, a TypeError without it)"),
        Option("out_dim", None, "Dim of the new axis"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        self.reps_layer = isinstance(opts.get("repetitions"), str)
        own = list(sources[:-1] if self.reps_layer else sources)
        super().__init__(name, {k: v for k, v in opts.items() if k != "out_dim"}, own, seed)
        check_sources(self, own, 1, 1)
        data = own[0]
        if self.opt("axis") is None:
            raise NetworkError("%s: needs 'axis' (RETURNN has no default for it)" % self.desc)
        self.ax = self.axis(data, self.opt("axis"), "axis")
        old = data.dims[self.ax]
        # without a batch axis (RETURNN adds a broadcast one): a static axis repeated an int number of times
        self.batchless = data.batch_dim_axis is None and not self.reps_layer and old.dimension is not None
        if (data.batch_dim_axis is None and not self.batchless) or self.ax == data.batch_dim_axis:
            raise NetworkError("%s: needs a non-batch 'axis', and a batch axis unless it is a static axis repeated "
                               "an int number of times" % self.desc)
        static = None
        if not self.reps_layer:
            reps = self.opt("repetitions")  # RETURNN takes 0 (tf.repeat: an empty axis), not a negative count
            self.reps = 0 if reps == 0 and reps is not False else positive_int(self.desc, "repetitions", reps)
            static = None if old.dimension is None else old.dimension * self.reps
        out_dim = opts.get("out_dim")
        if not self.reps_layer and old.is_dynamic():  # RETURNN's dim math ``tag * repetitions`` (``* 1``: the tag)
            self.new = math_or_given(out_dim if isinstance(out_dim, Dim) else None, old, [("mul", self.reps)])
        elif isinstance(out_dim, Dim):
            self.new = out_dim
        elif not self.reps_layer and self.reps == 1:
            self.new = old
        else:
            self.new = _new_dim(name, old, static, "repeat")
        # RETURNN's layout: batch-major, the repeated axis right after the batch axis (first without one)
        lead = [] if self.batchless else [data.batch_dim_axis]
        self.out_perm = lead + [self.ax] + [i for i in range(data.batch_ndim) if i not in lead + [self.ax]]
        self.output = data.copy_transpose(self.out_perm).copy_template_replace_dim_tag(len(lead), self.new).copy(name)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = sources[0]
        if self.batchless:
            return self.make_output(tf.transpose(tf.repeat(x.tensor, self.reps, axis=self.ax), self.out_perm), [x])
        b = x.data.batch_dim_axis
        perm = [b, self.ax] + [i for i in range(x.data.batch_ndim) if i not in (b, self.ax)]
        x_bt = tf.transpose(x.tensor, perm)  # (B, T, ...)
        n_b, n_t = tf.shape(x_bt)[0], tf.shape(x_bt)[1]
        real = x.sequence_mask(self.ax) if x.data.dims[self.ax].is_dynamic() else tf.ones([n_b, n_t], tf.bool)
        if len(real.shape) == 1:
            real = tf.broadcast_to(real[None], [n_b, n_t])
        if self.reps_layer:
            r = sources[-1].copy_as_batch_time_feature().tensor
            counts = tf.broadcast_to(tf.cast(tf.reshape(r, [tf.shape(r)[0], -1])[:, :n_t], tf.int32), [n_b, n_t])
        else:
            counts = tf.fill([n_b, n_t], self.reps)
        counts = tf.where(real, tf.maximum(counts, 0), 0)
        lengths = tf.reduce_sum(counts, axis=1)
        n_new = tf.reduce_max(tf.concat([lengths, [0]], 0))
        # position j of the output takes the frame i with ends[i-1] <= j < ends[i]
        ends = tf.cumsum(counts, axis=1)  # (B, T)
        j = tf.broadcast_to(tf.range(n_new)[None], [n_b, n_new])
        src = tf.minimum(tf.searchsorted(ends, j, side="right"), n_t - 1)
        y = tf.gather(x_bt, src, batch_dims=1)  # (B, T', ...): the output's layout (out_perm)
        # RETURNN: each sequence's frames beyond its new length are zeros (its one zero frame appended and repeated)
        inside = tf.reshape(j < lengths[:, None], tf.concat([[n_b, n_new], tf.ones([tf.rank(y) - 2], tf.int32)], 0))
        y = tf.where(inside, y, tf.zeros_like(y))
        sizes = {self.new: lengths} if self.new.is_dynamic() else {}
        return self.make_output(y, [x], sizes)


@register_layer
class TileLayer(Layer):
    """See the module docstring."""

    layer_class = "tile"
    options = (
        Option("multiples", None, "{axis: n}: how often each axis is repeated as a whole"),
        Option("out_dims", None, "{axis: Dim} for the new axes"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources, 1, 1)
        multiples = self.opt("multiples")
        if not isinstance(multiples, dict) or not multiples:
            raise NetworkError("%s: 'multiples' must be a dict {axis: n}, got %r" % (self.desc, multiples))
        data = sources[0]
        self.mult: Dict[int, int] = {}
        out_dims = self.opt("out_dims") or {}
        for key, n in multiples.items():
            ax = self.axis(data, key, "multiples")
            n = positive_int(self.desc, "multiples", n)
            old = data.dims[ax]
            if n == 1:  # RETURNN: 1 * dim is the dim itself (also the batch axis); out_dims declared the same
                if isinstance(out_dims.get(key), Dim):
                    old.declare_same_as(out_dims[key])
                continue
            if ax == data.batch_dim_axis:
                raise NetworkError("%s: tiling the batch axis (multiple %i) is not supported (RETURNN asserts: not "
                                   "implemented)" % (self.desc, n))
            if old.is_dynamic():
                raise NetworkError("%s: tiling the dynamic axis %r (multiple %i) is refused, as RETURNN asserts (not "
                                   "implemented there)" % (self.desc, old.description, n))
            self.mult[ax] = n
            new = out_dims.get(key) if isinstance(out_dims.get(key), Dim) else _new_dim(
                name, old, None if old.dimension is None else old.dimension * self.mult[ax], "tile%i" % ax)
            data = data.copy_template_replace_dim_tag(ax, new)
        self.output = data.copy(name)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        multiples = [1] * self.output.batch_ndim
        for ax, n in self.mult.items():
            multiples[ax] = n
        return self.make_output(tf.tile(sources[0].tensor, multiples), sources)


@register_layer
class RangeInAxisLayer(Layer):
    """See the module docstring."""

    layer_class = "range_in_axis"
    options = (
        Option("axis", None, "axis of the input (or 'sparse_dim')"),
        Option("dtype", "int32", "dtype of the values"),
        Option("sparse", False, "the values are class indices over that axis"),
        Option("unbroadcast", False, "not supported (RETURNN: do not use)"),
        Option("keepdims", False, "not supported (RETURNN: do not use)"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources, 0, 1)
        for key in ("unbroadcast", "keepdims"):
            if self.opt(key):
                raise NetworkError("%s: option %r is not supported" % (self.desc, key))
        if not sources:  # RETURNN: 'from': [] with a static Dim as axis (returnn_common's range_over_dim)
            axis = self.opt("axis")
            if not isinstance(axis, Dim) or axis.dimension is None:
                raise NetworkError("%s: without a source 'axis' must be a static Dim, got %r" % (self.desc, axis))
            self.ax, self.dim = None, axis
            self.output = Data(name, dims=[axis], dtype=str(self.opt("dtype")),
                               sparse_dim=axis if self.opt("sparse") else None, feature_dim_axis=None)
            return
        data = sources[0]
        if self.opt("axis") == "sparse_dim":
            if data.sparse_dim is None:
                raise NetworkError("%s: the input %s is not sparse" % (self.desc, data.short_repr()))
            self.ax, self.dim = None, data.sparse_dim
        else:
            axis = self.opt("axis")
            from returnn.tensor.dim_math import dynamic_leaves
            leaves = dynamic_leaves(axis) if isinstance(axis, Dim) and axis.derived_from_op is not None else []
            # RETURNN ranges over any dim: a dim-math dim of the input's axes (returnn_common's relative positions
            # over time + time - 1) has the sizes computed from theirs, its extent their maximum
            self.math = leaves and not any(d == axis for d in data.dims) and all(
                any(d == x for x in data.dims) for d in leaves)
            if self.math:
                self.ax, self.dim = None, axis
            else:
                self.ax = self.axis(data, axis, "axis")
                self.dim = data.dims[self.ax]
        self.output = Data(name, dims=[self.dim], dtype=str(self.opt("dtype")),
                           sparse_dim=self.dim if self.opt("sparse") else None, feature_dim_axis=None,
                           batch_dim_axis=0 if self.dim.is_batch_dim() else None)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        if not sources:
            return self.make_output(tf.range(self.dim.dimension, dtype=tf.as_dtype(self.output.dtype)), [])
        x = sources[0]
        if getattr(self, "math", False):
            from returnn.tensor.dim_math import dyn_size_of
            sizes = tf.convert_to_tensor(dyn_size_of(self.dim, lambda d: x.sizes[d]))
            n = tf.reduce_max(sizes) if sizes.shape.rank else sizes
            return self.make_output(tf.range(n, dtype=tf.as_dtype(self.output.dtype)), [x], {self.dim: sizes})
        n = self.dim.dimension if self.ax is None else tf.shape(x.tensor)[self.ax]
        return self.make_output(tf.range(n, dtype=tf.as_dtype(self.output.dtype)), [x])


@register_layer
class RangeFromLengthLayer(Layer):
    """See the module docstring."""

    layer_class = "range_from_length"
    options = (
        Option("dtype", "int32", "dtype of the values"),
        Option("sparse", False, "the values are class indices over the new axis"),
        Option("out_spatial_dim", None, "Dim of the new axis"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources, 1, 1)
        data = sources[0]
        if data.dtype not in ("int32", "int64"):
            raise NetworkError("%s: the input must be lengths (int32/int64), got %s" % (self.desc, data.short_repr()))
        out_dim = self.opt("out_spatial_dim")
        known = getattr(data, "length_of_dim", None)  # lengths straight from a length layer: that dim, as RETURNN
        if known is not None:
            self.dim = known
            if isinstance(out_dim, Dim) and out_dim != known:
                known.declare_same_as(out_dim)
        else:
            self.dim = out_dim if isinstance(out_dim, Dim) else Dim(None, kind=DimTypes.Spatial,
                                                                     description="%s:length" % name)
        if data.batch_ndim == 0:  # one length for all sequences (e.g. the batch size): scalar sizes
            self.dim.scalar_sizes = True
        elif not (data.batch_ndim == 1 and data.batch_dim_axis == 0):  # RETURNN: lengths of any axes (its
            self.dim.sizes_over = tuple(data.dims)  # dyn_size_ext), e.g. (B, T): a length per frame
        self.output = Data(name, dims=[self.dim], dtype=str(self.opt("dtype")),
                           sparse_dim=self.dim if self.opt("sparse") else None, feature_dim_axis=None,
                           batch_dim_axis=None)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        lengths = tf.cast(sources[0].tensor, tf.int32)
        n = tf.reduce_max(tf.concat([tf.reshape(lengths, [-1]), [0]], 0))
        return self.make_output(tf.range(n, dtype=tf.as_dtype(self.output.dtype)), [sources[0]],
                                {self.dim: lengths})
