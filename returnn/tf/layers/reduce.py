"""``reduce``: sum/mean/max/min (any/all of bools) over any axes but the batch axis, masked on dynamic axes.

Only real positions count (``use_time_mask`` None, RETURNN's default, or True): ``mean`` divides by
their number, ``max``/``min``/``logsumexp``/``argmax``/``argmin`` ignore padding; over an empty
sequence ``mean`` gives 0, ``max`` and ``logsumexp`` the dtype's lowest value, ``min`` its highest
(RETURNN's replacement values; ``argmax``/``argmin``: 0). With
``use_time_mask`` False the padded positions take part as RETURNN lets them: as the layer before
computed them there (e.g. a linear layer's bias), zeros for data (what datasets pad with), ``mean`` over
the padded length. Reduced axes are removed, or with ``keep_dims`` replaced by a static engine-made axis of size 1
(RETURNN's, also for a dynamic axis: before behavior version 11 it broadcasts against another axis). Integer ``axes`` count in a layout whose batch axis is at
``enforce_batch_dim_axis`` (default 0 when an axis is an int, as RETURNN), and the output keeps that
layout.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim
from returnn.tf.layers import param_noise
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.helpers import check_dense, concat_inputs, concat_output
from returnn.tf.layers.options import Option, one_of
from returnn.tf.layers.shape import batch_axis_perm

REDUCE_MODES = ("sum", "mean", "avg", "max", "min", "logsumexp", "argmax", "argmin", "any", "all")


def _has_int(axes: Any) -> bool:
    """Whether an axes option holds an int (RETURNN then fixes the batch axis at 0 first)."""
    if isinstance(axes, bool):
        return False
    if isinstance(axes, int):
        return True
    return isinstance(axes, (list, tuple)) and any(_has_int(a) for a in axes)


@register_layer
class ReduceLayer(Layer):
    """Reduces ``axes`` (RETURNN axis descriptions) with ``mode``."""

    layer_class = "reduce"
    options = (
        Option("mode", "sum", "one of sum, mean (avg), max, min, logsumexp, argmax, argmin, any, all (bool input)"),
        Option("axes", None, "axis description(s) to reduce, e.g. 'T', 'F', ['T', 'F'], 'spatial'"),
        Option("axis", None, "same as 'axes'"),
        Option("keep_dims", False, "keep reduced axes with size 1"),
        Option("enforce_batch_dim_axis", None, "move the batch axis here first (default: 0 when an axis is an int)"),
        Option("use_time_mask", None, "None/True: padded positions are left out; False: they take part (as computed)"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_dense(self, sources)
        self.concat_data, self.plan = concat_output(self, sources)
        data = self.concat_data
        self.mode = one_of(self.desc, "mode", self.opt("mode"), REDUCE_MODES)
        if opts.get("axes") is not None and opts.get("axis") is not None:
            raise NetworkError("%s: give either 'axes' or 'axis', not both" % self.desc)
        axes_opt = opts.get("axes", opts.get("axis"))
        if axes_opt is None:
            raise NetworkError("%s: needs 'axes'" % self.desc)
        if self.mode in ("any", "all") and data.dtype != "bool":  # RETURNN: tf.reduce_any/all, a TypeError
            raise NetworkError("%s: mode %r needs a bool input, got %s" % (self.desc, self.mode, data.dtype))
        self.use_mask = self.opt("use_time_mask") is not False
        enforce = self.opt("enforce_batch_dim_axis")
        self.perm = batch_axis_perm(self, data, 0 if enforce is None and _has_int(axes_opt) else enforce)
        if self.perm is not None:  # the input in RETURNN's enforce_batch_dim_axis layout
            data = data.copy_transpose(self.perm)
        self.in_data = data
        self.red_axes = sorted(self.axes(data, axes_opt, "axes"))
        if data.batch_dim_axis in self.red_axes and any(
                data.dims[a].is_dynamic() and a not in self.red_axes for a in range(data.batch_ndim)):
            raise NetworkError("%s: reducing the batch axis needs every dynamic axis reduced too (axes %r of %s)"
                               % (self.desc, axes_opt, data.short_repr()))
        if not self.red_axes:
            raise NetworkError("%s: axes %r match no axis of %s" % (self.desc, axes_opt, data.short_repr()))
        self.keep_dims = bool(self.opt("keep_dims"))
        self.arg = self.mode in ("argmax", "argmin")
        if self.keep_dims and self.use_mask and len(self.red_axes) == 2 and data.batch_dim_axis in self.red_axes \
                and data.time_dim_axis in self.red_axes and data.dims[data.time_dim_axis].is_dynamic():
            # RETURNN flattens batch and time for the mask there: "not yet implemented otherwise"
            raise NetworkError("%s: keep_dims over the batch and the time axis with the time mask is refused, as "
                               "RETURNN asserts (set use_time_mask False or drop keep_dims)" % self.desc)
        if self.keep_dims and self.use_mask and self.mode in ("mean", "avg") and data.batch_dim_axis in self.red_axes \
                and any(data.dims[a].is_dynamic() for a in self.red_axes):
            # RETURNN keeps the batch axis in the sizes' layout there: its mean over all positions is scaled
            # per sequence by (padded length / length), a (batch, 1, ..) value, no mean
            raise NetworkError("%s: mode mean with keep_dims over the batch and a dynamic axis with the time mask is "
                               "refused: RETURNN scales the mean per sequence there (set use_time_mask False or drop "
                               "keep_dims)" % self.desc)
        if self.arg and len(self.red_axes) != 1:
            raise NetworkError("%s: %s reduces exactly one axis" % (self.desc, self.mode))
        self.kept: Dict[int, Dim] = {}
        if self.keep_dims:
            dims = list(data.dims)
            for a in self.red_axes:
                # RETURNN: a new engine-made static axis of size 1, also for a dynamic axis
                dims[a] = Dim(1, kind=data.dims[a].kind, description="%s:keep-dim-%i" % (name, a), auto_generated=True)
                self.kept[a] = dims[a]
            self.output = data.copy(name, dims=dims, time_dim_axis=data.time_dim_axis,
                                    feature_dim_axis=data.feature_dim_axis)
            if self.arg:  # RETURNN: the labels of the reduced axis, the kept size-1 axis in its place
                self.output = self.output.copy(dtype="int32", sparse_dim=data.dims[self.red_axes[0]],
                                               feature_dim_axis=None)
        else:
            out = data.copy(name)
            for a in reversed(self.red_axes):
                out = out.copy_template_excluding_axis(a)
            if self.arg:
                reduced = data.dims[self.red_axes[0]]
                out = out.copy(dtype="int32", sparse_dim=reduced)  # RETURNN: labels of the reduced axis, also a dynamic one
            self.output = out

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = concat_inputs(self, self.concat_data, self.plan, sources, ctx)
        if self.perm is not None:
            x = LayerOutput(tf.transpose(x.tensor, self.perm), self.in_data, x.sizes)
        mask = None
        for a in self.red_axes:
            if x.data.dims[a].is_dynamic():
                m = x.broadcast_mask(a)
                mask = m if mask is None else tf.logical_and(mask, m)
        tensor = x.tensor
        if not self.use_mask and mask is not None:  # RETURNN's use_time_mask False: padding as it is read, counted
            tensor, mask = x.as_read(), None
        y = self._reduce(tensor, mask)
        if mask is not None and self.mode in ("mean", "avg"):
            # (a padded size 0, e.g. a batch of empty sequences: 0 where RETURNN's mean of nothing is nan)
            y = tf.math.multiply_no_nan(y, self._mean_correction(x, tensor))
        return self.make_output(y, sources)

    def _mean_correction(self, x: LayerOutput, tensor: tf.Tensor) -> tf.Tensor:
        """RETURNN's masked mean: the mean over all positions (padding as 0) times, per dynamic reduced
        axis, (its padded size / its real size, at least 1), summed over the other reduced axes its sizes
        have (e.g. the batch); this float order gives RETURNN's roundings (a search_sorted or compare
        after a mean sees its ties)."""
        axes = self.red_axes
        factor = None
        for a in axes:
            if not x.data.dims[a].is_dynamic():
                continue
            mask = tf.cast(x.broadcast_mask(a), tf.float32)
            over = [b for b in axes if b == a or mask.shape[b] != 1]
            size_all = tf.reduce_prod(tf.gather(tf.shape(tensor), over))
            real = tf.reduce_sum(mask, axis=over, keepdims=True)
            f = tf.cast(size_all, tf.float32) / tf.maximum(real, 1.0)
            factor = f if factor is None else factor * f
        factor = tf.reduce_max(factor, axis=axes, keepdims=self.keep_dims)  # size 1 there: only drops them
        return tf.cast(factor, tensor.dtype)

    def _reduce(self, x: tf.Tensor, mask) -> tf.Tensor:
        axes, keep = self.red_axes, self.keep_dims
        if mask is None:
            if self.arg:
                return self._arg(x)
            fn = {"sum": tf.reduce_sum, "mean": tf.reduce_mean, "avg": tf.reduce_mean, "max": tf.reduce_max,
                  "min": tf.reduce_min, "logsumexp": tf.reduce_logsumexp, "any": tf.reduce_any,
                  "all": tf.reduce_all}[self.mode]
            return fn(x, axis=axes, keepdims=keep)
        if self.mode in ("any", "all"):  # RETURNN's replacement of padded positions: False for any, True for all
            return {"any": tf.reduce_any, "all": tf.reduce_all}[self.mode](
                tf.where(mask, x, self.mode == "all"), axis=axes, keepdims=keep)
        if self.mode == "sum":
            return tf.reduce_sum(tf.where(mask, x, 0.0), axis=axes, keepdims=keep)
        if self.mode in ("mean", "avg"):  # scaled by forward's _mean_correction, as RETURNN
            return tf.reduce_mean(tf.where(mask, x, tf.zeros_like(x)), axis=axes, keepdims=keep)
        # RETURNN's replacement of padded positions: the dtype's lowest (max, logsumexp) or highest (min)
        # value, so that over an empty sequence these give that value
        fill = x.dtype.min if self.mode in ("max", "logsumexp", "argmax") else x.dtype.max
        fn = {"max": tf.reduce_max, "min": tf.reduce_min, "logsumexp": tf.reduce_logsumexp}.get(self.mode)
        if self.arg:
            return self._arg(tf.where(mask, x, fill))
        return fn(tf.where(mask, x, fill), axis=axes, keepdims=keep)

    def _arg(self, x: tf.Tensor) -> tf.Tensor:
        fn = tf.argmax if self.mode == "argmax" else tf.argmin
        y = fn(x, axis=self.red_axes[0], output_type=tf.int32)
        return tf.expand_dims(y, self.red_axes[0]) if self.keep_dims else y


@register_layer
class AccumulateMeanLayer(Layer):
    """RETURNN's ``accumulate_mean``: a non-trainable ``mean`` (shape: the feature axis) that each
    training step moves towards the batch's mean over all real frames (batch and time)::

        mean = (1 - exp_average) * mean + exp_average * batch_mean

    The output is the accumulated mean before this step's update (in evaluation: unchanged).
    Initial value: ``initial_value``, else ``1 / dim`` with ``is_prob_distribution``, else 0."""

    layer_class = "accumulate_mean"
    updates_in_training = True
    options = (
        Option("exp_average", None, "weight of the batch mean in the exponential average"),
        Option("axes", "bt", "the axes to average: batch and time (RETURNN's default 'bt')"),
        Option("initial_value", None, "initial value of every entry"),
        Option("is_prob_distribution", None, "the input is a distribution: default initial value 1 / dim"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_dense(self, sources)
        self.concat_data, self.plan = concat_output(self, sources)
        data = self.concat_data
        if str(self.opt("axes")).lower() not in ("bt", "tb", "['b', 't']", "['t', 'b']"):
            raise NetworkError("%s: only axes 'bt' (batch and time) are supported, got %r" % (self.desc,
                                                                                         self.opt("axes")))
        if data.batch_ndim != 3 or data.time_dim_axis is None or data.batch_dim_axis is None \
                or data.feature_dim_axis is None:
            raise NetworkError("%s: input must be (batch, time, feature), got %s" % (self.desc, data.short_repr()))
        try:
            self.alpha = float(self.opt("exp_average"))
        except (TypeError, ValueError):
            raise NetworkError("%s: needs 'exp_average' (a number in (0, 1])" % self.desc) from None
        init = self.opt("initial_value")
        if init is None:
            init = 1.0 / data.dim if self.opt("is_prob_distribution") else 0.0
        # RETURNN names it "mean_1" (its graph already holds a "mean" in the layer scope): checkpoints match
        self.mean = self.variable("mean_1", tf.fill([data.dim], float(init)), trainable=False)
        param_noise.exempt(self.mean)  # RETURNN makes it with tf.Variable: never noisy
        self.output = Data(name, dims=[data.feature_dim])

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = concat_inputs(self, self.concat_data, self.plan, sources, ctx).copy_as_batch_time_feature()
        value = self.mean.read_value()
        if ctx.train:
            mask = tf.cast(x.sequence_mask(), x.tensor.dtype)[:, :, None]
            batch_mean = tf.reduce_sum(tf.where(mask > 0, x.tensor, 0.0), axis=[0, 1]) / \
                tf.maximum(tf.reduce_sum(mask), 1.0)
            self.mean.assign((1.0 - self.alpha) * value + self.alpha * tf.stop_gradient(batch_mean))
        return LayerOutput(value, self.output)


@register_layer
class ReduceOutLayer(Layer):
    """``reduce_out``: max-out (or sum/mean) over groups of ``num_pieces`` consecutive features:
    ``(..., F)`` -> ``(..., F / num_pieces)``."""

    layer_class = "reduce_out"
    options = (
        Option("mode", "max", "max, sum or mean over each group"),
        Option("num_pieces", None, "group size (divides the feature size)"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_dense(self, sources)
        self.concat_data, self.plan = concat_output(self, sources)
        data = self.concat_data
        self.mode = one_of(self.desc, "mode", self.opt("mode"), ("max", "sum", "mean"))
        pieces = self.opt("num_pieces")
        if isinstance(pieces, bool) or not isinstance(pieces, int) or pieces < 1 or data.dim is None \
                or data.dim % pieces:
            raise NetworkError("%s: num_pieces must be an int dividing the feature size %r, got %r"
                               % (self.desc, data.dim, pieces))
        if data.feature_dim_axis != data.batch_ndim - 1:
            raise NetworkError("%s: the feature axis must be last, got %s" % (self.desc, data.short_repr()))
        self.pieces = pieces
        from returnn.tf.layers.helpers import new_feature_dim
        out_dim = new_feature_dim(name, data.dim // pieces)
        self.check_n_out(out_dim.dimension)
        self.output = data.copy_template_replace_dim_tag(data.feature_dim_axis, out_dim).copy(name)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = concat_inputs(self, self.concat_data, self.plan, sources, ctx)
        t = x.tensor
        shape = tf.shape(t)
        groups = tf.reshape(t, tf.concat([shape[:-1], [self.concat_data.dim // self.pieces, self.pieces]], 0))
        fn = {"max": tf.reduce_max, "sum": tf.reduce_sum, "mean": tf.reduce_mean}[self.mode]
        return self.make_output(fn(groups, axis=-1), [x])
