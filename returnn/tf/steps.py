"""The compiled step functions: train, eval, forward and parameter averaging.

Each is one ``tf.function`` with an input signature (batch and time dims are None), so variable
lengths never retrace. A step returns one float32 vector: per loss layer
``[loss_sum, norm, error_sum, error_norm]``, then the control flags (see :data:`FLAG_NAMES`).
With ``horovod_reduce_type = "grad"`` the flags ride along in the same fused allreduce as the
gradients, so every rank learns of a stop request, an error or a non-finite loss at the same step
for free; with ``"param"`` they are reduced at each parameter sync.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from returnn.distributed.context import DistributedContext
from returnn.errors import ConfigError
from returnn.tf.gradients import GradientOptions, GradientUpdate
from returnn.tf.layers.base import RunContext
from returnn.tf.network import TFNetwork
from returnn.tf.optimizers import Optimizer
from returnn.tf.util.compiled import CompiledFunction

FLAG_NAMES = ("stop", "error", "nonfinite")
NUM_FLAGS = len(FLAG_NAMES)
STATS_PER_LOSS = 4


def batch_signature(network: TFNetwork, keys: Sequence[str]) -> Dict[str, tf.TensorSpec]:
    """TensorSpecs of a batch dict with unknown batch and time dims."""
    sig: Dict[str, tf.TensorSpec] = {}
    for key in keys:
        sig[key] = network.batch_spec(key)
        sig[key + ":seq_len"] = tf.TensorSpec([None], tf.int32, name=key.replace(":", "_") + "_seq_len")
    return sig


class StepFunctions:
    """Builds the step functions of one network/optimizer pair."""

    def __init__(self, network: TFNetwork, optimizer: Optimizer, dist: DistributedContext,
                 gradient_clip: float = 0.0, gradient_clip_global_norm: float = 0.0,
                 gradient_clip_norm: float = 0.0, gradient_noise: float = 0.0, accum_grad_multiple_step: int = 0,
                 gradient_options: Optional[GradientOptions] = None):
        self.network = network
        self.optimizer = optimizer
        self.dist = dist
        self.variables: List[tf.Variable] = list(network.trainable_variables)
        self.gradient_clip = float(gradient_clip or 0.0)
        self.gradient_clip_global_norm = float(gradient_clip_global_norm or 0.0)
        self.gradient_clip_norm = float(gradient_clip_norm or 0.0)
        self.gradient_noise = float(gradient_noise or 0.0)
        # accum_grad_multiple_step = k: gradients are summed over k steps and applied at every k-th
        # (global step mod k == k - 1), as RETURNN does; the sums live in these variables
        self.accum_steps = int(accum_grad_multiple_step or 0)
        self.accum_grads = [tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False, name="accum_grad")
                            for v in self.variables] if self.accum_steps > 1 else []
        # layers with updater_opts: every parameter's gradient processed and applied on its own (updater_opts.py)
        from returnn.tf.updater_opts import LayerUpdates, has_layer_updater_opts
        self.layer_updates = LayerUpdates(self.variables, optimizer, {
            "accum_grad_multiple_step": self.accum_steps, "gradient_noise": self.gradient_noise,
            "gradient_clip": self.gradient_clip, "gradient_clip_norm": self.gradient_clip_norm,
            "gradient_clip_global_norm": self.gradient_clip_global_norm}) if has_layer_updater_opts(self.variables) else None
        # the update of the train step: RETURNN's gradient options, sparse rows, decoupled constraints (gradients.py)
        self.update = self._gradient_update(gradient_options)
        self._reset_updater = None
        self.loss_names = [info.layer for info in network.losses]
        # the losses of training steps: RETURNN computes only_on_eval losses in evaluation only
        self.train_loss_names = [info.layer for info in network.losses if not info.only_on_eval]
        # the names scores are reported under (RETURNN's: an extra net's loss without its prefix when unique)
        from returnn.tf.extra_nets import loss_labels
        labels = loss_labels(self.loss_names)
        self.loss_labels = [labels[n] for n in self.loss_names]
        self.train_loss_labels = [labels[n] for n in self.train_loss_names]
        self.train_keys = network.required_data_keys(with_targets=True)
        self.forward_keys = network.required_data_keys(with_targets=False)
        train_sig = batch_signature(network, self.train_keys)
        seed_spec = tf.TensorSpec([2], tf.int64, name="seed")
        flags_spec = tf.TensorSpec([NUM_FLAGS], tf.float32, name="flags")
        compile_fn = CompiledFunction
        self.train_step = compile_fn(self._train_step, [train_sig, seed_spec, flags_spec])
        self.eval_step = compile_fn(self._eval_step, [train_sig])
        self.forward_step = compile_fn(self._forward_step, [batch_signature(network, self.forward_keys)])
        self.sync_params = compile_fn(self._sync_params, [flags_spec])
        self.dump_keys = network.required_data_keys(False, network.dump_layers) if network.dump_layers else []
        self.dump_step = compile_fn(self._dump_step, [batch_signature(network, self.dump_keys)]) \
            if network.dump_layers else None

    # ---- graph code
    def _loss_stats(self, batch, ctx: RunContext) -> Tuple[tf.Tensor, tf.Tensor]:
        """Per-loss statistics and the objective: losses (training: without only_on_eval ones) plus,
        in training, the constraints (L2, spatial_smoothing, darc1)."""
        names = self.train_loss_names if ctx.train else self.loss_names
        extra = self.network.output_constraint_layers if ctx.train else []
        outputs = self.network.forward(batch, ctx, only=names + extra)
        values = self.network.compute_losses(outputs, batch, names, ctx.train)
        stats, total = [], []
        for info in self.network.losses:
            if info.layer not in names:
                continue
            v = values[info.layer]
            err = v.error_sum if v.error_sum is not None else tf.constant(0.0)
            err_norm = v.error_norm if v.error_norm is not None else tf.constant(0.0)
            stats += [v.loss_sum, v.norm, err, err_norm]
            total.append(info.scale * info.loss.objective(v))
        total_loss = tf.add_n(total) if total else tf.constant(0.0)
        if ctx.train:  # with decouple_constraints, L2 acts on the parameters instead (RETURNN's)
            decoupled = self.update.options.decouple_constraints
            total_loss = total_loss + self.network.constraints(outputs, with_l2=not decoupled)
        return tf.stack([tf.cast(s, tf.float32) for s in stats]) if stats else tf.zeros([0]), total_loss

    def _gradient_update(self, options: Optional[GradientOptions]) -> GradientUpdate:
        """The train step's update (returnn/tf/gradients.py), from ``options`` (default: this
        object's gradient arguments); ``decouple_constraints`` takes each parameter's L2 from its layer."""
        if options is None:
            options = GradientOptions(clip=self.gradient_clip, clip_norm=self.gradient_clip_norm,
                                      clip_global_norm=self.gradient_clip_global_norm, noise=self.gradient_noise,
                                      accum_steps=self.accum_steps)
        if self.layer_updates is not None:
            beyond = [k for k, v in [("gradient_clip_avg_norm", options.clip_avg_norm),
                                     ("gradient_nan_inf_filter", options.nan_inf_filter),
                                     ("grad_norm_to_clip_to_zero", options.norm_to_clip_to_zero),
                                     ("maximize_grad_norm", options.maximize_grad_norm),
                                     ("horovod_avg_grad", options.average_over_ranks),
                                     ("decouple_constraints", options.decouple_constraints),
                                     ("dynamic_learning_rate", options.dynamic_learning_rate is not None)] if v]
            if beyond:
                raise ConfigError("config key%s %s: not implemented together with layers' updater_opts"
                                  % ("s" if len(beyond) > 1 else "", ", ".join(beyond)))
        if options.dynamic_learning_rate is not None and type(self.optimizer).apply is not Optimizer.apply:
            raise ConfigError("config key 'dynamic_learning_rate': not implemented with several optimizers (layers' "
                              "updater_opts, or the optimizer's learning_rate_multiplier)")
        l2 = self.network.l2_of_variables() if options.decouple_constraints else {}
        return GradientUpdate(self.variables, self.optimizer, self.dist, options, l2,
                              accum_grads=self.accum_grads if options.accum_steps == self.accum_steps else None,
                              network=self.network)

    def reset_updater(self) -> None:
        """RETURNN's ``init_optimizer_vars`` (``reset_updater_vars_mod_step``): the optimizer's
        slots, its update count and the accumulated gradients back to their start (compiled once)."""
        if self._reset_updater is None:
            self._reset_updater = tf.function(self.update.reset_state)
        self._reset_updater()

    def _train_step(self, batch, seed, flags):
        if self.layer_updates is None:
            stats, flags = self.update.minimize(lambda: self._loss_stats(batch, RunContext(True, seed)), seed, flags,
                                                FLAG_NAMES.index("nonfinite"))
            return tf.concat([stats, flags], axis=0)
        with tf.GradientTape() as tape:
            stats, loss = self._loss_stats(batch, RunContext(True, seed))
        grads = tape.gradient(loss, self.variables)
        present = [i for i, g in enumerate(grads) if g is not None]  # RETURNN skips the others
        dense = [tf.convert_to_tensor(grads[i]) for i in present]  # IndexedSlices (embeddings) -> dense
        nonfinite = tf.cast(tf.logical_not(tf.math.is_finite(loss)), tf.float32)
        flags = tf.tensor_scatter_nd_max(flags, [[FLAG_NAMES.index("nonfinite")]], [nonfinite])
        if self.dist.reduces_gradients:
            reduced = self.dist.backend.allreduce_sum_graph(dense + [flags])
            dense, flags = reduced[:-1], reduced[-1]
        full: List[Optional[tf.Tensor]] = [None] * len(grads)
        for i, g in zip(present, dense):
            full[i] = g
        self.layer_updates.apply(full, seed)
        return tf.concat([stats, flags], axis=0)

    def _eval_step(self, batch):
        stats, _ = self._loss_stats(batch, RunContext(False))
        return stats

    def _forward_step(self, batch):
        name = self.network.output_layer_name
        return self.network.output_as_frames(self.network.forward(batch, RunContext(False), only=[name])[name])

    def _dump_step(self, batch):
        """Frames and lengths of each hdf_dump layer (see :attr:`TFNetwork.dump_layers`)."""
        names = self.network.dump_layers
        outputs = self.network.forward(batch, RunContext(False), only=names)
        return [self.network.output_as_frames(outputs[n]) for n in names]

    def layers_step(self, names: Sequence[str]):
        """A compiled step giving ``[(values, seq_len)]`` of the layers ``names`` (as the forward step
        gives the output layer's), e.g. several ``search_output_layer`` layers from one search;
        returns ``(step, data keys it reads)``, made once per list of names."""
        key = tuple(names)
        cache = self.__dict__.setdefault("_layers_steps", {})
        if key not in cache:
            keys = self.network.required_data_keys(False, list(key))

            def step(batch):
                outputs = self.network.forward(batch, RunContext(False), only=list(key))
                return [self.network.output_as_frames(outputs[n]) for n in key]
            cache[key] = (CompiledFunction(step, [batch_signature(self.network, keys)]), keys)
        return cache[key]

    def search_layers_step(self, names: Sequence[str]):
        """As :meth:`layers_step`, each layer's ``(values, seq_len, beam scores)``: a value that still has its
        search beam (a searched rec layer with ``keep_beams``) has ``B * K`` rows and its ``(B, K)`` scores,
        else the scores are ``(B, 0)``."""
        from returnn.tf.layers.beam_values import beam_of
        key = tuple(names)
        cache = self.__dict__.setdefault("_search_layers_steps", {})
        if key not in cache:
            keys = self.network.required_data_keys(False, list(key))

            def step(batch):
                outputs = self.network.forward(batch, RunContext(False), only=list(key))
                out = []
                for n in key:
                    values, seq_len = self.network.output_as_frames(outputs[n])
                    beam = beam_of(outputs[n])
                    if beam is not None and beam.k > 1 and not beam.decided:
                        scores = tf.reshape(beam.scores, [-1, beam.k])
                    else:
                        scores = tf.zeros([tf.shape(values)[0], 0], tf.float32)
                    out.append((values, seq_len, tf.cast(scores, tf.float32)))
                return out
            cache[key] = (CompiledFunction(step, [batch_signature(self.network, keys)]), keys)
        return cache[key]

    def _sync_params(self, flags):
        """Averages all network variables over ranks; returns the reduced flags."""
        variables = list(self.network.variables)
        if self.dist.size == 1:
            return flags
        reduced = self.dist.backend.allreduce_sum_graph([v.read_value() for v in variables] + [flags])
        inv = 1.0 / float(self.dist.size)
        for v, total in zip(variables, reduced[:-1]):
            v.assign(tf.cast(tf.cast(total, tf.float32) * inv, v.dtype))
        return reduced[-1]

    # ---- host side helpers
    @staticmethod
    def to_tensors(batch: Dict[str, np.ndarray]) -> Dict[str, tf.Tensor]:
        """Numpy batch -> tensors; the prefetcher calls it in its thread, off the step's clock.
        Equal length vectors (inputs and frame-wise targets) become one tensor, converted once."""
        out: Dict[str, tf.Tensor] = {}
        lengths: Dict[Tuple[str, bytes], tf.Tensor] = {}  # length vectors by content
        for key, value in batch.items():
            if key.endswith(":seq_len"):
                raw = (value.dtype.str, value.tobytes())
                tensor = lengths.get(raw)
                if tensor is None:
                    tensor = lengths[raw] = tf.constant(value)
                out[key] = tensor
            else:
                out[key] = tf.constant(value)  # measured faster than convert_to_tensor
        return out

    def trace(self, with_eval: bool = True, with_forward: bool = True) -> None:
        """Traces the train step and parameter sync, plus the eval and forward steps unless a run
        will not use them, once (cost reported separately from epoch timing)."""
        self.train_step.get_concrete_function()
        self.sync_params.get_concrete_function()
        if with_eval:
            self.eval_step.get_concrete_function()
        if with_forward:
            self.forward_step.get_concrete_function()

    def split_stats(self, vector: np.ndarray, train: bool = True) -> Tuple[np.ndarray, np.ndarray]:
        """Step output -> (loss stats (n_losses, 4), flags); ``train``: of a train step (its losses:
        :attr:`train_loss_names`), else of an eval step (:attr:`loss_names`)."""
        losses = len(self.train_loss_names if train else self.loss_names)
        n = losses * STATS_PER_LOSS
        return vector[:n].reshape(losses, STATS_PER_LOSS), vector[n:n + NUM_FLAGS]
