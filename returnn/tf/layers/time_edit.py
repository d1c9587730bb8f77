"""Layers that add frames to a sequence or read a recurrent layer's final state.

- ``postfix_in_time`` / ``prefix_in_time``: ``repeat`` frames of ``postfix`` / ``prefix`` (a
  number, or a layer without time axis broadcast to the frame shape) after each sequence's own
  last frame / before its first. The time axis is a new dim whose sizes are the old ones +
  ``repeat`` (prefix_in_time's ``size_base``: that layer's time dim and sizes instead, RETURNN's). ``axis`` another
  static axis (e.g. the features): ``repeat`` entries of the number appended / put
  before, the axis a new static dim.
- ``get_last_hidden_state``: the final state of recurrent sources (LSTM: ``key`` ``"*"`` gives
  ``[c, h]`` concatenated as RETURNN's LSTM state tuple, ``"c"`` or ``"h"`` one of them (RETURNN's
  named tuple takes no int keys); GRU and plain RNN cells, ``nativelstmlowmem`` (its ``c``): ``"*"``
  or None); several sources are concatenated (``combine: "concat"``) or
  added (``"add"``). Output ``(B, n_out)``.
- ``reverse_sequence`` (not in RETURNN's release: the class of the RETURNN fork its 2D-LSTM paper configs
  use, e.g. the backward 2D-LSTM's ``encoder_reversed``): each sequence's real frames along ``axis``
  (default the time axis) in reverse order, padded frames left after them (``tf.reverse_sequence``).
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim
from returnn.tensor.dim import batch_dim
from returnn.tensor.dim_math import returnn_description
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.dim_shift import given_same_as, shifted_dim, shifted_sizes
from returnn.tf.layers.helpers import check_sources, concat_inputs, concat_output
from returnn.tf.layers.options import Option, constant_fits, one_of, positive_int
from returnn.tf.layers.output import align_tensor
from returnn.tf.util.data_check import checked


class _InTimeLayer(Layer):
    """Shared by postfix/prefix: ``value_key`` names the option with the frame value."""

    value_key = ""
    at_end = True
    options = (Option("repeat", 1, "number of frames to add"),
               Option("axis", "T", "the axis to extend (RETURNN's option): the time axis, or a static axis (with a "
                                   "number as the value)"),
               Option("out_dim", None, "Dim of the extended axis (declared the same as the axis plus 'repeat', as "
                                       "RETURNN)"))

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        self.value_layer = isinstance(opts.get(self.value_key), str)
        self.size_base = sources[-1] if isinstance(opts.get("size_base"), str) else None  # (prefix_in_time's)
        own = list(sources[:len(sources) - self.value_layer - (self.size_base is not None)])
        super().__init__(name, opts, own, seed)
        check_sources(self, own, 1, 1)
        data = own[0]
        if opts.get("size_base") is not None and self.size_base is None:
            raise NetworkError("%s: 'size_base' must be a layer name, got %r" % (self.desc, opts["size_base"]))
        self.ax = data.time_dim_axis
        if self.opt("axis") not in ("T", "t"):  # RETURNN's any axis: the time axis, or a static one
            self.ax = self.axis(data, self.opt("axis"), "axis")
            if self.ax != data.time_dim_axis and (data.dims[self.ax].is_batch_dim() or data.dims[self.ax].is_dynamic()
                                                  or self.value_layer):
                raise NetworkError("%s: 'axis' %r: only the input's time axis or a static axis (with a number as %s) is "
                                   "supported here" % (self.desc, self.opt("axis"), self.value_key))
        if self.ax is None:
            raise NetworkError("%s: the input %s has no time axis" % (self.desc, data.short_repr()))
        repeat = self.opt("repeat")  # RETURNN: 0 adds nothing (prefix_in_time asserts repeat >= 0)
        self.repeat = 0 if repeat == 0 and isinstance(repeat, int) and not isinstance(repeat, bool) else \
            positive_int(self.desc, "repeat", repeat)
        value = self.opts.get(self.value_key, 0.0)
        if self.value_layer:
            v = sources[-1]
            if v.have_time_axis():
                raise NetworkError("%s: %s layer %r must have no time axis" % (self.desc, self.value_key, v.name))
        elif isinstance(value, bool) or not isinstance(value, (int, float)):
            raise NetworkError("%s: %r must be a number or a layer name, got %r" % (self.desc, self.value_key, value))
        else:  # RETURNN: tf.constant(value, dtype=the data's dtype)
            constant_fits(self.desc, self.value_key, value, data.dtype)
        old = data.dims[self.ax]
        # (a static time axis, e.g. of fixed-length extern data, stays static: RETURNN's dim math old + repeat)
        self.shift_ops = [("add_right" if self.at_end else "add_left", self.repeat)]  # RETURNN: in + n, n + in
        given = self.opt("out_dim")
        if given is not None and (not isinstance(given, Dim) or given.dimension != (
                None if old.dimension is None else old.dimension + self.repeat)):
            raise NetworkError("%s: out_dim %r does not fit the extended axis %r plus %i" % (
                self.desc, given, old.description, self.repeat))
        if self.size_base is not None:  # RETURNN: the size_base's time dim, the frames as they are (no out_dim)
            if given is not None or self.size_base.time_dim_axis is None:
                raise NetworkError("%s: size_base needs a time axis (%s) and no out_dim (RETURNN asserts both)"
                                   % (self.desc, self.size_base.short_repr()))
            self.time = self.size_base.dims[self.size_base.time_dim_axis]
        elif old.is_dynamic() and not old.is_batch_dim():  # RETURNN's dim math: merges with the cuts of old
            self.time = given_same_as(given, shifted_dim(old, self.shift_ops))  # (dim_shift)
        elif given is not None:
            self.time = given
        else:
            # described as RETURNN's dim math (``time+1``, prefix ``1+time``), which 'stag:' descriptions search
            desc = returnn_description(old.description, 0 if self.at_end else self.repeat,
                                       self.repeat if self.at_end else 0)
            self.time = Dim(None if old.dimension is None else old.dimension + self.repeat, kind=old.kind,
                            description=desc, derived_from=old)
        self.output = data.copy_template_replace_dim_tag(self.ax, self.time).copy(name)

    def _value(self, x: LayerOutput, sources: List[LayerOutput], shape: tf.Tensor) -> tf.Tensor:
        """The added frames' value broadcast to ``shape``."""
        if self.value_layer:
            v = sources[-1]
            return tf.broadcast_to(tf.cast(tf.expand_dims(v.tensor, self.ax), x.tensor.dtype), shape)
        return tf.fill(shape, tf.cast(self.opt(self.value_key) or 0, x.tensor.dtype))

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = sources[0]
        seq_len = x.size(self.ax)
        shape = tf.tensor_scatter_nd_update(tf.shape(x.tensor), [[self.ax]], [self.repeat])
        added = self._value(x, sources, shape)
        if seq_len is None:  # a static time axis: every frame real, no lengths
            parts = [x.tensor, added] if self.at_end else [added, x.tensor]
            return self.make_output(tf.concat(parts, axis=self.ax), [x])
        sizes = {}
        if self.size_base is not None:  # its sizes for the prefix and the input's frames (one padded tensor)
            lens = sources[-1].size(self.size_base.time_dim_axis)
            sizes[self.time] = lens
            out = tf.concat([added, x.tensor], axis=self.ax)
            if lens is not None:
                frames, most = tf.shape(out)[self.ax], tf.reduce_max(tf.concat([tf.reshape(lens, [-1]), [0]], 0))
                out = checked(out, most <= frames, "%s: size_base's sizes reach %%s, the prefix and the input have %%s "
                              "frames" % self.desc, most, frames)
            return self.make_output(out, [x], sizes)
        if self.time not in x.sizes:
            lens = shifted_sizes(x.data.dims[self.ax], x.sizes, self.shift_ops)
            sizes[self.time] = seq_len + self.repeat if lens is None else lens
        if not self.at_end:
            out = tf.concat([added, x.tensor], axis=self.ax)
            return self.make_output(out, [x], sizes)
        padded = tf.concat([x.masked(0), tf.zeros_like(added)], axis=self.ax)
        real = tf.sequence_mask(seq_len, maxlen=tf.shape(padded)[self.ax])  # (B, T') or (T',)
        if len(real.shape) == 1:
            real = align_tensor(real, [self.ax], x.data.batch_ndim)
        else:
            real = align_tensor(real, [x.data.batch_dim_axis, self.ax], x.data.batch_ndim)
        full_shape = tf.shape(padded)
        out = tf.where(tf.broadcast_to(real, full_shape), padded, self._value(x, sources, full_shape))
        return self.make_output(out, [x], sizes)


@register_layer
class PostfixInTimeLayer(_InTimeLayer):
    """See the module docstring."""

    layer_class = "postfix_in_time"
    no_int_axes = ("axis",)  # RETURNN: allow_int=False
    value_key = "postfix"
    ref_options = ("postfix",)
    options = (Option("postfix", 0.0, "the added frames' value: a number or a layer"),)


@register_layer
class PrefixInTimeLayer(_InTimeLayer):
    """See the module docstring."""

    layer_class = "prefix_in_time"
    no_int_axes = ("axis",)  # RETURNN: allow_int=False
    value_key = "prefix"
    at_end = False
    ref_options = ("prefix", "size_base")
    options = (Option("prefix", 0.0, "the added frames' value: a number or a layer"),
               Option("size_base", None, "a layer whose time dim (and sizes) the output takes (RETURNN's: the frames "
                                         "are the prefix and the input's, as they are)"))


STATE_KEYS = {"*": None, "c": 0, "h": 1, None: None}


@register_layer
class GetLastHiddenStateLayer(Layer):
    """See the module docstring."""

    layer_class = "get_last_hidden_state"
    options = (
        Option("key", "*", "'*' (all of the state), 'c' or 'h' (LSTMs), None (other cells)"),
        Option("combine", "concat", "several sources: 'concat' or 'add'"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources)
        self.key = one_of(self.desc, "key", self.opt("key"), tuple(STATE_KEYS))
        self.combine = one_of(self.desc, "combine", self.opt("combine"), ("concat", "add"))
        n_out = self.require_n_out()
        self.output = Data(name, dims=[batch_dim, self.out_feature_dim()])
        self.n_out = n_out

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        parts = []
        for i, src in enumerate(sources):
            if src.last_state is None:
                raise NetworkError("%s: source %r has no hidden state (use a recurrent layer)"
                                   % (self.desc, self.sources[i].name))
            state = list(src.last_state())
            # RETURNN: an LSTM's state is a named tuple (key '*', 'c' or 'h'), another one a tensor (key '*' or None)
            if (self.key is None and len(state) > 1) or (self.key in ("c", "h") and len(state) == 1):
                raise NetworkError("%s: key %r for the state of %r (%s): RETURNN takes %s" % (
                    self.desc, self.key, self.sources[i].name, "(c, h)" if len(state) > 1 else "one tensor",
                    "'*', 'c' or 'h'" if len(state) > 1 else "'*' or None"))
            if STATE_KEYS[self.key] is not None:
                state = [state[STATE_KEYS[self.key]]]
            parts.append(tf.concat(state, -1) if len(state) > 1 else state[0])
        out = tf.concat(parts, -1) if self.combine == "concat" else tf.add_n(parts)
        if out.shape[-1] is not None and out.shape[-1] != self.n_out:
            raise NetworkError("%s: the state has size %i, n_out is %i" % (self.desc, out.shape[-1], self.n_out))
        return self.make_output(out)


@register_layer
class ReverseSequenceLayer(Layer):
    """See the module docstring."""

    layer_class = "reverse_sequence"
    options = (Option("axis", "T", "the dynamic axis reversed within each sequence's length"),)

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources)
        self.output, self.plan = concat_output(self, sources)
        self.ax = self.axis(self.output, self.opt("axis"), "axis")
        if not self.output.dims[self.ax].is_dynamic() or self.output.batch_dim_axis is None:
            raise NetworkError("%s: 'axis' must be a dynamic axis of an input with batch axis, got %s"
                               % (self.desc, self.output.short_repr()))

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = concat_inputs(self, self.output, self.plan, sources, ctx)
        lens = x.sizes[self.output.dims[self.ax]]
        return self.make_output(tf.reverse_sequence(x.tensor, tf.cast(lens, tf.int64), seq_axis=self.ax,
                                                    batch_axis=self.output.batch_dim_axis), sources)
