"""Normalisation layers: ``layer_norm`` and ``batch_norm``.

``batch_norm`` follows RETURNN's options. Moving statistics (non-trainable ``moving_mean`` /
``moving_variance``, initialised to 0 and 1) move towards the current batch's statistics with
``momentum`` as the weight of the current batch::

    moving = moving + (batch_stat - moving) * momentum

Batch statistics are the mean and biased variance over all real frames (``masked_time``, default)
or over all positions including padding (``masked_time: False``). Training normalises with
``(1 - use_sample) * batch + use_sample * moving`` statistics (default ``use_sample`` 0), evaluation
with the moving ones (unless ``force_sample``). Defaults that RETURNN changed with behavior
version 12 follow the config's ``behavior_version``: before 12, ``momentum`` 0.99, the moving
statistics are also updated in evaluation steps (``update_sample_only_in_training`` False), and the
updated values are used at once (``delay_sample_update`` False); from 12 on, 0.1, training only,
delayed. RETURNN's fused path (``param_version`` 2, ``masked_time`` False, ``use_sample`` 0, shift and
scale, no ``force_sample``) differs: see :meth:`BatchNorm.apply_fused`.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence

import numpy as np
import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.helpers import check_dense, concat_inputs, concat_output, normalize
from returnn.tf.layers.params import Param, reshaped, same
from returnn.tf.layers.options import Option


class _FeatureNorm(Layer):
    """Common part: dense (concatenated) input, output of the same shape, per-feature params."""

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_dense(self, sources)
        self.output, self.plan = concat_output(self, sources)
        if self.output.feature_dim_axis is None:
            raise NetworkError("%s: input needs a feature axis, got %s" % (self.desc, self.output.short_repr()))
        self.n_feat = self.output.dim
        self.check_n_out(self.n_feat)

    def inputs(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        return concat_inputs(self, self.output, self.plan, sources, ctx)

    def per_feature(self, v: tf.Tensor) -> tf.Tensor:
        """A (D,) vector shaped to broadcast on the output's feature axis."""
        shape = [1] * self.output.batch_ndim
        shape[self.output.feature_dim_axis] = -1
        return tf.reshape(v, shape)


@register_layer
class LayerNormLayer(_FeatureNorm):
    """Normalises each position over the feature axis: ``(x - mean) / sqrt(var + epsilon) * gamma + beta``."""

    layer_class = "layer_norm"
    options = (Option("epsilon", 1e-6, "added to the variance"),)

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        self.epsilon = float(self.opt("epsilon"))
        self.gamma = self.weight("scale", [self.n_feat], "ones")
        self.beta = self.weight("bias", [self.n_feat], "zeros")

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = self.inputs(sources, ctx)
        axis = self.output.feature_dim_axis
        y = normalize(x.tensor, axis, self.epsilon) * self.per_feature(self.gamma) + self.per_feature(self.beta)
        return self.make_output(y, sources)


def behavior_version() -> int:
    """The behavior version layers follow: RETURNN's ``BehaviorVersion.get()`` (the config's key, 0 when
    unset, or what config code set with ``BehaviorVersion.set``)."""
    from returnn.util.basic import BehaviorVersion
    try:
        return BehaviorVersion.get()
    except (TypeError, ValueError):
        return 0


# RETURNN's batch-norm options: of the batch_norm layer, and of any layer's 'batch_norm' dict
BATCH_NORM_OPTIONS = (
    Option("momentum", None, "weight of the current batch in the moving statistics (0.99, or 0.1 from "
                                 "behavior_version 12)"),
    Option("epsilon", 1e-3, "added to the variance"),
    Option("use_shift", True, "learn a shift beta"),
    Option("use_std", True, "learn a scale gamma"),
    Option("use_sample", 0.0, "weight of the moving statistics when normalising in training"),
    Option("force_sample", False, "use the use_sample mix in evaluation too"),
    Option("update_sample_only_in_training", None, "update the moving statistics only in training "
                                                       "(default: from behavior_version 12)"),
    Option("delay_sample_update", None, "normalise with the moving statistics before this batch's update "
                                            "(default: from behavior_version 12)"),
    Option("param_version", None, "RETURNN's parameter names and shapes in checkpoints: 0 ('<name>_<name>_output_mean', "
                                      "(1, .., F)), 1 ('mean', (1, .., F)), 2 ('v2_mean', (F,)); default 2 from "
                                      "behavior_version 12, else 0"),
    Option("gamma_init", 1.0, "init of gamma (RETURNN init spec)"),
    Option("beta_init", 0.0, "init of beta (RETURNN init spec)"),
    Option("masked_time", True, "statistics over real frames only (False: padding included); required "
                                "from behavior_version 12, as RETURNN"),
    Option("axes", None, "older RETURNN: the axes that keep own statistics; only the feature axis ('f')"),
    Option("fused", None, "older RETURNN: use TensorFlow's fused batch-norm kernel",
           noop="the fused kernel computes the same normalisation (a speed switch)"),
    Option("fused_bn", None, "older RETURNN: use TensorFlow's fused batch-norm kernel",
           noop="the fused kernel computes the same normalisation (a speed switch)"),
)



class BatchNorm(tf.Module):
    """RETURNN's batch normalisation of one layer's values (see the module docstring): the
    options, the parameters (made as ``owner``'s, RETURNN's names under ``batch_norm/``) and the
    computation. The ``batch_norm`` layer uses it on its input, any layer's ``batch_norm`` option
    on its output (RETURNN's ``LayerBase.batch_norm``)."""

    def __init__(self, owner: Layer, data: Data, opts: Dict[str, Any]):
        super().__init__(name="batch_norm")
        desc = owner.desc
        o = {opt.name: opts.get(opt.name, opt.default) for opt in BATCH_NORM_OPTIONS}
        unknown = sorted(set(opts) - set(o))
        if unknown:
            raise NetworkError("%s: unknown batch_norm option(s) %s" % (desc, ", ".join(map(repr, unknown))))
        new = behavior_version() >= 12
        if new and "masked_time" not in opts:
            raise NetworkError("%s: batch_norm 'masked_time' must be given explicitly from behavior version 12 "
                               "(RETURNN's requirement; True: statistics over real frames only)" % desc)
        self.data, self._owner = data, lambda: owner  # (a function: tf.Module must not track the owner)
        self.momentum = float((0.1 if new else 0.99) if o["momentum"] is None else o["momentum"])
        if not 0.0 <= self.momentum <= 1.0:
            raise NetworkError("%s: momentum must be in [0, 1], got %r" % (desc, self.momentum))
        self.use_sample = float(o["use_sample"])
        if not 0.0 <= self.use_sample <= 1.0:
            raise NetworkError("%s: use_sample must be in [0, 1], got %r" % (desc, self.use_sample))
        if o["param_version"] not in (None, 0, 1, 2):
            raise NetworkError("%s: param_version must be 0, 1 or 2, got %r" % (desc, o["param_version"]))
        self.param_version = (2 if new else 0) if o["param_version"] is None else o["param_version"]
        only_train, delay = o["update_sample_only_in_training"], o["delay_sample_update"]
        self.update_only_in_training = bool(new if only_train is None else only_train)
        self.delay_update = bool(new if delay is None else delay)
        self.force_sample = bool(o["force_sample"])
        self.masked_time = bool(o["masked_time"])
        from returnn.tf.net_dict import TRAIN_NET
        needs_batch_stats = TRAIN_NET.get() or not self.update_only_in_training or (
            self.use_sample != 1 and self.force_sample)
        if self.masked_time and data.time_dim_axis is None and needs_batch_stats and behavior_version() >= 1:
            raise NetworkError("%s: batch norm with masked_time on %s, which has no time axis: RETURNN fails on it "
                               "(its copy_time_flattened; RETURNN of 2018 took it); set masked_time False"
                               % (desc, data.short_repr()))
        self.epsilon = float(o["epsilon"])
        # RETURNN's fused path (TF's fused_batch_norm; see apply_fused)
        self.fused = self.param_version >= 2 and not self.masked_time and bool(o["use_shift"]) and \
            bool(o["use_std"]) and self.use_sample == 0 and not self.force_sample
        if o["axes"] is not None:
            names = o["axes"] if isinstance(o["axes"], (list, tuple)) else [o["axes"]]
            if [owner.axis(data, a, "axes") for a in names] != [data.feature_dim_axis]:
                raise NetworkError("%s: 'axes' %r: only the feature axis (statistics per feature) is supported"
                                   % (desc, o["axes"]))
        dim = data.dim
        if data.feature_dim_axis is None or not dim:
            raise NetworkError("%s: batch norm needs a static feature axis, got %s" % (desc, data.short_repr()))
        from returnn.tf.layers.param_noise import affects
        if TRAIN_NET.get() and affects(owner.param_noise, 1 if self.param_version >= 2 else data.batch_ndim):
            raise NetworkError("%s: batch norm with param_variational_noise / param_dropout (option or config key) in a "
                               "training network: RETURNN fails to build it (its moving statistics become noisy "
                               "tensors it cannot update)" % desc)
        self.moving_mean = owner.variable("batch_norm/mean", np.zeros([dim], np.float32), trainable=False)
        self.moving_variance = owner.variable("batch_norm/variance", np.ones([dim], np.float32), trainable=False)
        self.gamma = owner.weight("batch_norm/gamma", [dim], o["gamma_init"]) if o["use_std"] else None
        self.beta = owner.weight("batch_norm/beta", [dim], o["beta_init"]) if o["use_shift"] else None

    def returnn_params(self) -> List[Param]:
        """RETURNN's ``[rec/]batch_norm/<prefix><mean|variance|gamma|beta>``, by ``param_version``: 0 and
        1 as (1, .., F) (broadcast over the output's other axes), 2 as (F,)."""
        owner = self._owner()
        short = owner.layer_name.rsplit("/", 1)[-1]
        prefix = {0: "%s_%s_" % (short, owner.returnn_data_name()), 1: "", 2: "v2_"}[self.param_version]
        shape = [1] * self.data.batch_ndim
        shape[self.data.feature_dim_axis] = self.data.dim
        out = []
        for key, var in owner.own_params.items():
            if key.startswith("batch_norm/"):
                # in the owner's parameter scope (RETURNN's rec and rnn_cell: rec/batch_norm/...)
                name = owner.param_subscope + "batch_norm/" + prefix + key[len("batch_norm/"):]
                out.append(reshaped(name, var, shape) if self.param_version < 2 else same(name, var))
        return out

    def per_feature(self, v: tf.Tensor) -> tf.Tensor:
        """A (D,) vector shaped to broadcast on the feature axis."""
        shape = [1] * self.data.batch_ndim
        shape[self.data.feature_dim_axis] = -1
        return tf.reshape(v, shape)

    def batch_moments(self, x: LayerOutput):
        """Mean and biased variance, shape (D,), over the real positions of ``x`` (all positions
        without ``masked_time``)."""
        data = x.data
        axes = [a for a in range(data.batch_ndim) if a != data.feature_dim_axis]
        mask = x.full_mask() if self.masked_time else None
        if mask is None:
            return tf.nn.moments(x.tensor, axes=axes)
        b, t = data.batch_dim_axis, data.time_dim_axis
        if b is not None and t is not None and data.dims[t].is_static():
            # RETURNN's copy_time_flattened of a static time axis merges batch and time unmasked: every position
            # counts, also the padding of another dynamic axis
            return tf.nn.moments(x.as_read(), axes=axes)
        if b is not None and t is not None and data.feature_dim_axis is not None and x.size(t) is not None \
                and x.size(t).shape.rank == 1 and getattr(data.dims[t], "sizes_over", None) is None:
            # RETURNN (copy_time_flattened, then tf.nn.moments): the real frames of (batch, time) in
            # batch-major order, other axes as read; the same sums in the same order as RETURNN's
            perm = [b, t] + [a for a in range(data.batch_ndim) if a not in (b, t)]
            value = x.as_read()
            flat = tf.boolean_mask(value if perm == sorted(perm) else tf.transpose(value, perm), x.sequence_mask(t))
            feat = perm.index(data.feature_dim_axis) - 1
            mean, var = tf.nn.moments(flat, axes=[a for a in range(data.batch_ndim - 1) if a != feat])
            some = tf.shape(flat)[0] > 0  # no real frame at all: 0, not RETURNN's NaN statistics
            return tf.where(some, mean, 0.0), tf.where(some, var, 0.0)
        weight = tf.where(mask, tf.ones_like(x.tensor), 0.0)
        count = tf.maximum(tf.reduce_sum(weight, axis=axes), 1.0)
        mean = tf.reduce_sum(weight * tf.where(mask, x.tensor, 0.0), axis=axes) / count
        centered = tf.where(mask, x.tensor - self.per_feature(mean), 0.0)
        var = tf.reduce_sum(tf.square(centered), axis=axes) / count
        return mean, var

    def apply_fused(self, x: LayerOutput, ctx: RunContext) -> tf.Tensor:
        """RETURNN's fused_batch_norm path (param_version 2, masked_time False, use_shift, use_std, use_sample 0,
        no force_sample): training normalises with the batch's statistics and moves the moving ones towards the
        mean and the Bessel-corrected variance (TF's kernel); evaluation uses the moving statistics and updates
        nothing, whatever update_sample_only_in_training says; epsilon at least 1.001e-5 (TF's minimum)."""
        eps = max(self.epsilon, 1.001e-5)
        if ctx.train:
            mean, var = self.batch_moments(x)
            n = tf.cast(tf.size(x.tensor) // max(self.data.dim, 1), tf.float32)
            unbiased = var * n / tf.maximum(n - 1.0, 1.0)
            m = self.momentum
            self.moving_mean.assign_add((tf.stop_gradient(mean) - self.moving_mean.read_value()) * m)
            self.moving_variance.assign_add((tf.stop_gradient(unbiased) - self.moving_variance.read_value()) * m)
        else:
            mean, var = self.moving_mean.read_value(), self.moving_variance.read_value()
        y = (x.tensor - self.per_feature(mean)) * tf.math.rsqrt(self.per_feature(var) + eps)
        return y * self.per_feature(self.gamma) + self.per_feature(self.beta)

    def apply(self, x: LayerOutput, ctx: RunContext) -> tf.Tensor:
        """The normalised values of ``x`` (laid out as ``data``); updates the moving statistics."""
        if self.fused:
            return self.apply_fused(x, ctx)
        update = ctx.train or not self.update_only_in_training
        use_batch = (ctx.train or self.force_sample) and self.use_sample < 1.0
        # values before this batch's update (read first: in a tf.function reads follow program order)
        moving_mean, moving_var = self.moving_mean.read_value(), self.moving_variance.read_value()
        if update or use_batch:
            mean_b, var_b = self.batch_moments(x)
        if update:
            m = self.momentum
            new_mean = self.moving_mean.assign_add((tf.stop_gradient(mean_b) - moving_mean) * m)
            new_var = self.moving_variance.assign_add((tf.stop_gradient(var_b) - moving_var) * m)
            if not self.delay_update:
                moving_mean, moving_var = new_mean, new_var
        if ctx.train or self.force_sample:
            k = self.use_sample
            mean = mean_b if k == 0.0 else moving_mean if k == 1.0 else (1 - k) * mean_b + k * moving_mean
            var = var_b if k == 0.0 else moving_var if k == 1.0 else (1 - k) * var_b + k * moving_var
        else:
            mean, var = moving_mean, moving_var
        y = (x.tensor - self.per_feature(mean)) * tf.math.rsqrt(self.per_feature(var) + self.epsilon)
        if self.gamma is not None:
            y = y * self.per_feature(self.gamma)
        if self.beta is not None:
            y = y + self.per_feature(self.beta)
        return y


@register_layer
class BatchNormLayer(_FeatureNorm):
    """Batch normalisation per feature over all other axes; see the module docstring."""

    layer_class = "batch_norm"
    options = BATCH_NORM_OPTIONS

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        self.bn = BatchNorm(self, self.output, {o.name: self.opts[o.name] for o in BATCH_NORM_OPTIONS
                                                if o.name in self.opts})  # (the defaults: BatchNorm's)

    def returnn_params(self) -> List[Param]:
        return self.bn.returnn_params()

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        return self.make_output(self.bn.apply(self.inputs(sources, ctx), ctx), sources)
