"""From the loss to the parameter update, as RETURNN's ``Updater`` does it (its
``get_apply_grads_op`` and ``_post_process_grad``): the gradients, their sum over ranks, RETURNN's
gradient options in its order, decoupled constraints and the optimizer's update, all inside the
compiled train step.

Per variable, in RETURNN's order:

1. ``maximize_grad_norm`` f: ``g += d(-f * ||G||) / dvar`` where ``||G||`` is the global norm of
   the step's gradients (a second-order term: the gradient of the gradients' norm);
2. ``accum_grad_multiple_step`` k: ``g`` summed over k steps, applied at every k-th;
3. ``gradient_noise`` s: ``g += truncated_normal(stddev=s)`` (values beyond 2 s redrawn, as
   RETURNN's ``tf.truncated_normal``);
4. ``gradient_clip`` c: each element clipped to ``[-c, c]``;
5. ``gradient_clip_norm`` n: ``g`` scaled to L2 norm at most n;
6. ``gradient_clip_avg_norm`` a: ``g`` scaled to average L2 norm (norm / size) at most a;
7. ``gradient_clip_global_norm`` n: scaled by ``n / max(||G||, n)``, with ``||G||`` the norm of
   the step's gradients before any of these options (RETURNN's: not of the clipped ones);
8. ``gradient_nan_inf_filter``: non-finite entries replaced (see :func:`nan_inf_filter`);
9. ``grad_norm_to_clip_to_zero`` z: ``g = 0`` when ``||G||`` > z or is not finite.

Then ``decouple_constraints``: ``var -= 2 * L2 * var`` for each parameter of a layer with ``L2``
(instead of the L2 term in the loss), before the optimizer's update (RETURNN's; its
``decouple_constraints_factor`` is computed there but not used). ``horovod_avg_grad``: the sum over
ranks divided by their number. ``dynamic_learning_rate``: the optimizer's rate of the step is a
function of the global step (and the epoch's rate), :func:`learning_rate_of_step`.

Sparse gradients: the gradient of an embedding (``tf.gather`` of a parameter's rows: a
``tf.IndexedSlices``, one value row per occurrence) stays sparse as far as RETURNN keeps it sparse
(steps 1, 2, 3, 6 and 9 make it dense there): clipping by value acts on each occurrence, the norms
count each occurrence, and the optimizer gets the touched rows with duplicates summed, as TF's v1
optimizers do. Momentum, RMSProp, Adadelta and Nadam then update only those rows
(:attr:`returnn.tf.optimizers.Optimizer.sparse_differs`); for the others a sparse update equals the
dense one and the dense kernel runs.

With several ranks (``horovod_reduce_type = "grad"``) RETURNN gathers the occurrences of all ranks;
here each rank sums its own into the dense shape and sends, in the same fused allreduce as
everything else, which rows it touched and the two sums of squares the norms need, so the update
is RETURNN's, with one difference: a NaN entry on one rank and a number on another for the same
row give 0 after ``gradient_nan_inf_filter`` here (the sum is filtered), the number in RETURNN.
``maximize_grad_norm`` on several ranks is the gradient of the norm of the summed gradients, summed
over ranks (a second allreduce); RETURNN adds each rank's own term there, so its ranks drift apart.
"""
from __future__ import annotations

import contextlib
import inspect
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import tensorflow as tf

from returnn.config import Config
from returnn.errors import NetworkError

SPARSE_INF = 1e30  # what RETURNN's nan_to_num makes of +-inf in a sparse gradient (its defaults)


@dataclass(frozen=True)
class GradientOptions:
    """RETURNN's gradient keys (0 / False: off)."""

    clip: float = 0.0  # gradient_clip
    clip_norm: float = 0.0  # gradient_clip_norm
    clip_avg_norm: float = 0.0  # gradient_clip_avg_norm
    clip_global_norm: float = 0.0  # gradient_clip_global_norm
    noise: float = 0.0  # gradient_noise
    nan_inf_filter: bool = False  # gradient_nan_inf_filter
    norm_to_clip_to_zero: float = 0.0  # grad_norm_to_clip_to_zero
    maximize_grad_norm: float = 0.0
    accum_steps: int = 0  # accum_grad_multiple_step
    average_over_ranks: bool = False  # horovod_avg_grad
    decouple_constraints: bool = False
    dynamic_learning_rate: Any = None  # a function or {"interval", "decay"}: this step's rate (learning_rate_of_step)

    @classmethod
    def from_config(cls, config: Config) -> "GradientOptions":
        return cls(clip=config.float("gradient_clip"), clip_norm=config.float("gradient_clip_norm"),
                   clip_avg_norm=config.float("gradient_clip_avg_norm"),
                   clip_global_norm=config.float("gradient_clip_global_norm"), noise=config.float("gradient_noise"),
                   nan_inf_filter=config.bool("gradient_nan_inf_filter"),
                   norm_to_clip_to_zero=config.float("grad_norm_to_clip_to_zero"),
                   maximize_grad_norm=config.float("maximize_grad_norm"),
                   accum_steps=config.int("accum_grad_multiple_step") or 0,
                   average_over_ranks=config.bool("horovod_avg_grad"),
                   decouple_constraints=config.bool("decouple_constraints"),
                   dynamic_learning_rate=config.typed_value("dynamic_learning_rate") or None)

    @property
    def accumulates(self) -> bool:
        return self.accum_steps > 1

    @property
    def keeps_sparse(self) -> bool:
        """Whether RETURNN's processing leaves a sparse gradient sparse: accumulation (into a
        variable, also with k = 1), noise (a dense tensor added), maximize_grad_norm (its term
        added), clip_avg_norm and grad_norm_to_clip_to_zero (dense ops) make it dense."""
        return not (self.accum_steps >= 1 or self.noise or self.maximize_grad_norm or self.clip_avg_norm
                    or self.norm_to_clip_to_zero)

    @property
    def needs_global_norm(self) -> bool:
        return bool(self.clip_global_norm or self.norm_to_clip_to_zero or self.maximize_grad_norm)


def dynamic_learning_rate_problem(value: Any) -> Optional[str]:
    """What RETURNN asserts of ``dynamic_learning_rate`` when it builds the step (here: at start-up),
    or None: a function taking ``**kwargs`` and no ``epoch``, or ``{"interval": N, "decay": d}``."""
    if callable(value):
        try:
            params = inspect.signature(value).parameters.values()
        except (TypeError, ValueError):
            return None
        if not any(p.kind == inspect.Parameter.VAR_KEYWORD for p in params):
            return "the function must take **kwargs (RETURNN: 'please specify **kwargs in dynamic_learning_rate for " \
                   "future compatibility')"
        if any(p.name == "epoch" for p in params):
            return "a function with an 'epoch' argument is not supported (RETURNN's TF updater: not supported either)"
        return None
    if isinstance(value, dict):
        if set(value) != {"interval", "decay"}:
            return "a dict takes exactly 'interval' and 'decay' (RETURNN's), got %s" % sorted(value)
        interval, decay = value["interval"], value["decay"]
        if isinstance(interval, bool) or not isinstance(interval, int) or interval < 1:
            return "'interval' must be an int >= 1, got %r" % (interval,)
        if isinstance(decay, bool) or not isinstance(decay, (int, float)):
            return "'decay' must be a number, got %r" % (decay,)
        return None
    return "expected a function (network, global_train_step, learning_rate, **kwargs) or {'interval': N, " \
           "'decay': d}, got %r" % (value,)


def learning_rate_of_step(value: Any, network, global_step: tf.Tensor, learning_rate: tf.Tensor) -> tf.Tensor:
    """RETURNN's ``dynamic_learning_rate`` (its ``Updater.get_current_step_learning_rate``) inside the
    step: ``value(network=, global_train_step=, learning_rate=)`` (``global_train_step`` the int64
    step being computed, from 0), or ``learning_rate * decay ** (global_train_step mod interval)``."""
    if callable(value):
        rate = value(network=network, global_train_step=global_step, learning_rate=learning_rate)
        return tf.cast(tf.convert_to_tensor(rate), tf.float32)
    step_in_interval = tf.math.floormod(global_step, tf.constant(value["interval"], global_step.dtype))
    return learning_rate * tf.pow(tf.constant(float(value["decay"]), tf.float32), tf.cast(step_in_interval, tf.float32))


def nan_inf_filter(g):
    """RETURNN's ``gradient_nan_inf_filter`` (its ``nan_to_num(grad, nan_num=0, inf_num=0)``): NaN and
    +-inf entries become 0; in a sparse gradient RETURNN's nan_to_num drops those arguments, so there
    NaN becomes 0 and +-inf becomes +-1e30."""
    if isinstance(g, tf.IndexedSlices):
        v = g.values
        v = tf.where(tf.math.is_nan(v), tf.zeros_like(v), v)
        v = tf.where(tf.math.is_inf(v), tf.sign(v) * tf.constant(SPARSE_INF, v.dtype), v)
        return tf.IndexedSlices(v, g.indices, g.dense_shape)
    return tf.where(tf.math.is_finite(g), g, tf.zeros_like(g))


def deduplicate(g: tf.IndexedSlices) -> tf.IndexedSlices:
    """Rows of a sparse gradient with duplicate indices summed (TF's v1 optimizers'
    ``_deduplicate_indexed_slices``, the same ops)."""
    unique, positions = tf.unique(g.indices)
    values = tf.math.unsorted_segment_sum(g.values, positions, tf.shape(unique)[0])
    return tf.IndexedSlices(values, unique, g.dense_shape)


def half_squared_sum(g) -> tf.Tensor:
    """``tf.nn.l2_loss``: ``sum(g ** 2) / 2``, of the value rows of a sparse gradient (each
    occurrence, as RETURNN's global norm counts them)."""
    return tf.nn.l2_loss(g.values if isinstance(g, tf.IndexedSlices) else g)


def global_norm_sq(halves: List[tf.Tensor]) -> tf.Tensor:
    """The squared global norm from half squared sums, as RETURNN's ``_GetGlobalInfo._global_norm``
    adds them (before its square root)."""
    return tf.reduce_sum(tf.stack(halves)) * 2.0


def _clip_by_norm_given(g, l2sum: tf.Tensor, clip_norm: float):
    """``tf.clip_by_norm`` (its formula) with the sum of squares given (computed before the reduction)."""
    pred = l2sum > 0
    l2norm = tf.where(pred, tf.sqrt(tf.where(pred, l2sum, tf.ones_like(l2sum))), l2sum)
    values = g.values if isinstance(g, tf.IndexedSlices) else g
    values = values * clip_norm / tf.maximum(l2norm, clip_norm)
    return tf.IndexedSlices(values, g.indices, g.dense_shape) if isinstance(g, tf.IndexedSlices) else values


class _Reduced:
    """A sparse gradient after the reduction over ranks: rows touched on any rank, values summed,
    already clipped by value per occurrence, with the sums of squares the norms need."""

    def __init__(self, slices: tf.IndexedSlices, raw_sq: tf.Tensor, clipped_sq: tf.Tensor):
        self.slices, self.raw_sq, self.clipped_sq = slices, raw_sq, clipped_sq


class GradientUpdate:
    """One training update of ``variables`` by ``optimizer``: built once per step function set,
    run inside the compiled train step by :meth:`minimize`. Every choice (options, which gradients
    exist, which are sparse) is made while tracing, so a run without these options traces the plain
    path: gradients, (allreduce,) optimizer."""

    def __init__(self, variables: Sequence[tf.Variable], optimizer, dist, options: GradientOptions,
                 constraint_l2: Optional[Dict[int, float]] = None, accum_grads: Optional[List[tf.Variable]] = None,
                 network=None):
        self.variables = list(variables)
        self.network = network  # what a dynamic_learning_rate function gets as network=
        self.optimizer = optimizer
        self.dist = dist
        self.options = options
        self.constraint_l2 = dict(constraint_l2 or {})  # id(variable) -> L2 (decouple_constraints)
        # accum_grad_multiple_step: the sums of the gradients (given: variables made by the caller)
        self.accum_grads = [] if not options.accumulates else list(accum_grads) if accum_grads else [
            tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False, name="accum_grad") for v in self.variables]

    @property
    def multi_rank(self) -> bool:
        return bool(self.dist.reduces_gradients and self.dist.size > 1)

    def reset_state(self) -> None:
        """RETURNN's ``init_optimizer_vars``: the optimizer's slots and the accumulated gradients."""
        self.optimizer.reset_state()
        for acc in self.accum_grads:
            acc.assign(tf.zeros_like(acc))

    # ---- the step
    def minimize(self, loss_fn: Callable[[], Tuple[tf.Tensor, tf.Tensor]], seed: tf.Tensor,
                 flags: tf.Tensor, nonfinite_flag: int) -> Tuple[tf.Tensor, tf.Tensor]:
        """Runs ``loss_fn() -> (stats, loss)`` under a tape and updates the variables; returns
        ``(stats, flags)``, the flags (``flags[nonfinite_flag]`` set by a non-finite loss) summed
        over ranks when gradients are."""
        opts = self.options
        maximize = bool(opts.maximize_grad_norm)
        with (tf.GradientTape() if maximize else contextlib.nullcontext()) as outer:
            with tf.GradientTape() as tape:
                stats, loss = loss_fn()
            raw = tape.gradient(loss, self.variables)
            present = [i for i, g in enumerate(raw) if g is not None]  # RETURNN skips the others
            if not present:
                raise NetworkError("no parameter gets a gradient from the training loss (RETURNN: 'no single "
                                   "variable to train')")
            nonfinite = tf.cast(tf.logical_not(tf.math.is_finite(loss)), tf.float32)
            flags = tf.tensor_scatter_nd_max(flags, [[nonfinite_flag]], [nonfinite])
            local = [raw[i] for i in present]
            grads, norm_sq, flags = self._reduce(local, flags)
            term = self._norm_term(local, grads, norm_sq) if maximize else None
        variables = [self.variables[i] for i in present]
        if maximize:
            ext = self._reduce_extension(outer.gradient(term, variables))
            grads = [self._dense(g) + self._dense(e) if e is not None else g for g, e in zip(grads, ext)]
        norm = tf.sqrt(norm_sq) if norm_sq is not None else None
        if opts.accumulates:
            phase = seed[1] % opts.accum_steps
            accums = [self.accum_grads[i] for i in present]
            for acc, g in zip(accums, grads):
                acc.assign(tf.where(tf.equal(phase, 0), self._dense(g), acc + self._dense(g)))

            def apply_accumulated():
                self._apply(self._post_process([a.read_value() for a in accums], norm, seed), variables, seed)
                return tf.constant(True)

            tf.cond(tf.equal(phase, opts.accum_steps - 1), apply_accumulated, lambda: tf.constant(False))
        else:
            self._apply(self._post_process(grads, norm, seed), variables, seed)
        return stats, flags

    @staticmethod
    def _dense(g):
        if isinstance(g, _Reduced):
            g = g.slices
        return tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g

    # ---- over ranks
    def _reduce(self, grads: List, flags: tf.Tensor):
        """Sums gradients (and flags) over ranks in one fused allreduce; returns (gradients, the
        squared global norm of the raw gradients, None when no option needs it, flags). Sparse
        gradients stay sparse where RETURNN keeps them so (:attr:`GradientOptions.keeps_sparse`)."""
        opts = self.options
        keep = opts.keeps_sparse
        if not self.multi_rank:
            norm_sq = global_norm_sq([half_squared_sum(g) for g in grads]) if opts.needs_global_norm else None
            grads = [g if keep or not isinstance(g, tf.IndexedSlices) else tf.convert_to_tensor(g) for g in grads]
            return grads, norm_sq, flags
        scale = float(self.dist.size) if opts.average_over_ranks else 1.0
        send, layout = [], []
        for g in grads:
            if not isinstance(g, tf.IndexedSlices):
                layout.append(("dense", len(send)))
                send.append(g)
                continue
            rows = tf.cast(g.dense_shape[0], tf.int32)
            raw_sq = half_squared_sum(g)  # RETURNN's norms count each occurrence (it gathers them from all ranks)
            if not keep:
                layout.append(("densified", len(send)))
                send += [tf.convert_to_tensor(g), tf.reshape(raw_sq, [1])]
                continue
            values = g.values
            if opts.clip:  # RETURNN clips each gathered occurrence (after averaging: clip(v / n, c) = clip(v, n c) / n)
                values = tf.clip_by_value(values, -opts.clip * scale, opts.clip * scale)
            layout.append(("sparse", len(send)))
            send += [tf.math.unsorted_segment_sum(values, g.indices, rows),
                     tf.math.unsorted_segment_sum(tf.ones_like(g.indices, tf.float32), g.indices, rows),
                     tf.stack([raw_sq, half_squared_sum(values)])]
        reduced = self.dist.backend.allreduce_sum_graph(send + [flags])
        flags = reduced[-1]
        inv = 1.0 / scale
        out, squares = [], []
        for kind, at in layout:
            g = reduced[at] * inv if scale != 1.0 else reduced[at]
            if kind == "dense":
                out.append(g)
                if opts.needs_global_norm:
                    squares.append(half_squared_sum(g))
            elif kind == "densified":
                out.append(g)
                squares.append(reduced[at + 1][0] * (inv * inv))
            else:
                touched, sums = reduced[at + 1], reduced[at + 2] * (inv * inv)
                rows = tf.cast(tf.where(touched > 0)[:, 0], tf.int32)
                slices = tf.IndexedSlices(tf.gather(g, rows), rows, tf.shape(g, out_type=tf.int32))
                out.append(_Reduced(slices, sums[0], sums[1]))
                squares.append(sums[0])
        norm_sq = global_norm_sq(squares) if opts.needs_global_norm else None
        return out, norm_sq, flags

    def _norm_term(self, local: List, reduced: List, norm_sq: tf.Tensor) -> tf.Tensor:
        """What the outer tape differentiates for ``maximize_grad_norm``: ``-f * ||G||`` on one rank
        (RETURNN's term, G the raw gradients); on several, a term whose gradient on each rank is
        that rank's part of the gradient of ``-f * ||G||``, G the (summed or averaged) gradients of
        all ranks: ``sum(stop(G) * g) / (n ||G||)`` for a dense g (n: the ranks when averaging, else
        1), ``sum(v ** 2) / (2 n^2 ||G||)`` over a sparse one's occurrences v."""
        factor = self.options.maximize_grad_norm
        if not self.multi_rank:
            return -factor * tf.sqrt(norm_sq)
        scale = float(self.dist.size) if self.options.average_over_ranks else 1.0
        norm = tf.stop_gradient(tf.sqrt(norm_sq))
        terms = []
        for g, big in zip(local, reduced):
            if isinstance(g, tf.IndexedSlices):
                terms.append(tf.nn.l2_loss(g.values) / (scale * scale))
            else:
                terms.append(tf.reduce_sum(tf.stop_gradient(self._dense(big)) * g) / scale)
        return -factor * tf.math.divide_no_nan(tf.add_n(terms), norm)

    def _reduce_extension(self, ext: List) -> List:
        """The maximize_grad_norm terms summed over ranks (one rank: as they are)."""
        if not self.multi_rank:
            return list(ext)
        idx = [i for i, e in enumerate(ext) if e is not None]
        reduced = self.dist.backend.allreduce_sum_graph([self._dense(ext[i]) for i in idx]) if idx else []
        out: List = [None] * len(ext)
        for i, r in zip(idx, reduced):
            out[i] = r
        return out

    # ---- RETURNN's options, in its order
    def _post_process(self, grads: List, norm: Optional[tf.Tensor], seed: tf.Tensor) -> List:
        opts = self.options
        out = []
        for i, g in enumerate(grads):
            reduced = g if isinstance(g, _Reduced) else None
            if reduced is not None:
                g = reduced.slices
            if opts.noise:  # RETURNN: tf.truncated_normal; the same noise on every rank (seeded by the step)
                g = self._dense(g)
                g = g + tf.random.stateless_truncated_normal(tf.shape(g), seed + [1, i], stddev=opts.noise,
                                                             dtype=g.dtype)
            if opts.clip and reduced is None:  # a reduced sparse one was clipped per occurrence before the sum
                g = tf.clip_by_value(g, -opts.clip, opts.clip)
            if opts.clip_norm:
                if reduced is not None:
                    g = _clip_by_norm_given(g, reduced.clipped_sq * 2.0, opts.clip_norm)
                else:
                    g = tf.clip_by_norm(g, opts.clip_norm)
            if opts.clip_avg_norm:
                g = tf.compat.v1.clip_by_average_norm(self._dense(g), opts.clip_avg_norm)
            if opts.clip_global_norm:
                (g,), _ = tf.clip_by_global_norm([g], opts.clip_global_norm, use_norm=norm)
            if opts.nan_inf_filter:
                g = nan_inf_filter(g)
            if opts.norm_to_clip_to_zero:  # also when the norm is not finite
                g = self._dense(g)
                zero = tf.logical_or(tf.logical_not(tf.math.is_finite(norm)), norm > opts.norm_to_clip_to_zero)
                g = tf.where(zero, tf.zeros_like(g), g)
            if isinstance(g, tf.IndexedSlices):  # the optimizer's own sparse update, else the dense kernel
                if not self.optimizer.sparse_differs:
                    g = tf.convert_to_tensor(g)
                elif reduced is None:  # rows summed over ranks are unique already
                    g = deduplicate(g)
            out.append(g)
        return out

    def rate_of_step(self, step: int, rate: float) -> float:
        """The optimizer's learning rate at global step ``step`` with the epoch's ``rate``: ``rate``, or
        ``dynamic_learning_rate``'s (RETURNN's ``effective_learning_rate`` of an epoch's start)."""
        if self.options.dynamic_learning_rate is None:
            return rate
        return float(learning_rate_of_step(self.options.dynamic_learning_rate, self.network,
                                           tf.constant(step, tf.int64), tf.constant(rate, tf.float32)))

    def _apply(self, grads: List, variables: List[tf.Variable], seed: tf.Tensor) -> None:
        if self.options.decouple_constraints:
            for v in variables:
                l2 = self.constraint_l2.get(id(v))
                if l2:  # RETURNN: var -= var * (L2 * 2), before the gradient update
                    v.assign_sub(v * (l2 * 2.0))
        if self.options.dynamic_learning_rate is None:
            self.optimizer.apply(grads, variables)
            return
        rate = learning_rate_of_step(self.options.dynamic_learning_rate, self.network, seed[1],
                                     tf.convert_to_tensor(self.optimizer.learning_rate))
        self.optimizer.apply(grads, variables, learning_rate=rate)
