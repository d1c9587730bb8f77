"""Beam search through a rec sub-network (``task = "search"``).

Every input of the loop is expanded to ``B * K`` rows (K = the choice's ``beam_size``); at step 0
only the first hypothesis of each sequence is alive (the others start at score -inf). Each step
runs the in-loop layers in order; at the ``choice`` layer the scores of all hypotheses plus the
log-probabilities of its source give ``K * V`` candidates per sequence, of which the best K
survive. From there on the step continues with the survivors: every value computed so far in
this step, the previous-step values and the cell states are reordered by their source hypothesis.

A hypothesis ends at the step where the ``end`` layer is true (its length excludes that step
unless ``include_eos``); after that its score is frozen and it keeps one continuation. The loop
stops when all hypotheses ended or after ``max_seq_len`` steps. The result is the best hypothesis
per sequence (by score, divided by its length with ``length_normalization``), traced back
through the stored source-hypothesis indices.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tf.layers.base import LayerOutput, RunContext
from returnn.tf.layers.rec_net import frames
from returnn.tf.layers.rec_net.loop import UnitRun, _invariant, has_state, keep_shape, step_context

NEG_INF = -1e30


def expand_beam(value: LayerOutput, k: int) -> LayerOutput:
    """``value`` with each sequence repeated ``k`` times on the batch axis (also its sizes)."""
    ax = value.data.batch_dim_axis
    if ax is None or k == 1:
        return value
    sizes = {d: (tf.repeat(s, k, axis=0) if len(s.shape) == 1 else s) for d, s in value.sizes.items()}
    logits = None if value.logits is None else tf.repeat(value.logits, k, axis=ax)
    return LayerOutput(tf.repeat(value.tensor, k, axis=ax), value.data, sizes, logits)


def _reorder(x: Any, index: tf.Tensor) -> Any:
    """Batch-first tensors (nested) gathered by ``index`` on axis 0; scalars unchanged."""
    return tf.nest.map_structure(lambda t: tf.gather(t, index) if len(t.shape) else t, x)


def _reorder_value(v: LayerOutput, index: tf.Tensor) -> LayerOutput:
    ax = v.data.batch_dim_axis
    if ax is None:
        return v
    logits = None if v.logits is None else tf.gather(v.logits, index, axis=ax)
    return LayerOutput(tf.gather(v.tensor, index, axis=ax), v.data, v.sizes, logits)


class BeamSearchRun(UnitRun):
    """One beam search of a rec sub-network on a batch."""

    def __init__(self, rec, sources: List[LayerOutput], ctx: RunContext):
        super().__init__(rec, sources, ctx)
        self.choice = rec.search_choice
        opts = rec.unit[self.choice]
        self.k = int(opts.get("beam_size", 1) or 1)
        self.input_type = opts.get("input_type", "prob")
        if self.input_type not in ("prob", "log_prob"):
            raise NetworkError("%s, sub-layer %r: input_type %r is not supported in search (prob, log_prob)"
                               % (rec.desc, self.choice, self.input_type))
        self.prob_scale = float(opts.get("prob_scale", 1.0))
        self.base_scale = float(opts.get("base_beam_score_scale", 1.0))
        self.length_norm = bool(opts.get("length_normalization", True))
        self.length_exp = float(opts.get("length_normalization_exponent", 1.0))
        self.include_eos = bool(rec.opt("include_eos"))

    def max_len(self) -> tf.Tensor:
        """``max_seq_len`` of the rec layer: an int, or an expression with ``max_len_from("base:x")``;
        default: 10 times the longest input of the batch (at least 10 steps)."""
        if self.n_time is not None:
            return self.n_time
        spec = self.rec.opt("max_seq_len")

        def max_len_from(ref: str) -> tf.Tensor:
            value = self.value(ref if ref.startswith(("base:", "data:")) else "base:" + ref)
            size = value.seq_len if value.seq_len is not None else tf.shape(value.tensor)[value.data.time_dim_axis]
            return tf.reduce_max(size)

        if spec is None:
            extents = [tf.cast(e, tf.int32) for e in self.extents.values()]
            return tf.maximum(10 * tf.reduce_max(tf.stack(extents)), 10) if extents else tf.constant(100)
        if isinstance(spec, str):
            try:
                value = eval(spec, {"__builtins__": {}}, {"max_len_from": max_len_from, "tf": tf})  # config code
            except Exception as exc:  # noqa: BLE001 - one line naming the option
                raise NetworkError("%s: max_seq_len %r: %s" % (self.rec.desc, spec, exc)) from None
            return tf.cast(value, tf.int32)
        return tf.constant(int(spec), tf.int32)

    def _expand_inputs(self) -> None:
        self.outer = {k: expand_beam(v, self.k) for k, v in self.outer.items()}
        if self.source is not None:
            self.source = expand_beam(self.source, self.k)
        self.full = {k: expand_beam(v, self.k) for k, v in self.full.items()}
        if self.seq_len is not None:
            self.seq_len = tf.repeat(self.seq_len, self.k, axis=0)
        self._set_known()

    def run(self) -> LayerOutput:
        rec = self.rec
        base_batch = self.batch
        n_max = self.max_len()
        self.run_moved_out()
        self._expand_inputs()
        self.prepare_frames()
        k = self.k
        names = rec.plan.in_loop
        prev0 = {n: self.initial(n, self._prev_template(n)) for n in names if n in rec.plan.prev_used}
        state0 = {n: self.initial_state(n, n_max) for n in names if has_state(rec.layers[n])}
        scores0 = tf.tile(tf.concat([[0.0], tf.fill([k - 1], NEG_INF)], 0)[None], [base_batch, 1])
        ended0 = tf.zeros([self.batch], tf.bool)
        lens0 = tf.zeros([self.batch], tf.int32)
        labels_ta = tf.TensorArray(tf.int32, size=0, dynamic_size=True, element_shape=[None, k])
        src_ta = tf.TensorArray(tf.int32, size=0, dynamic_size=True, element_shape=[None, k])
        offsets = tf.range(base_batch)[:, None] * k
        choice_tmpl = rec.layers[self.choice].output

        def body(t, prev, state, scores, ended, lens, labels_ta, src_ta):
            ctx = step_context(self.ctx, t, self.batch)
            vals: Dict[str, LayerOutput] = {}
            new_state: Dict[str, Any] = {}
            for n in names:
                if n != self.choice:
                    vals[n] = self.step_layer(n, t, prev, state, vals, new_state, ctx)
                    continue
                src = self.step_value(rec.sub_sources[n][0], t, prev, vals)
                logp = src.tensor if self.input_type == "log_prob" else tf.math.log(tf.maximum(src.tensor, 1e-30))
                logp = tf.cast(logp, tf.float32) * self.prob_scale
                n_labels = tf.shape(logp)[-1]
                frozen = tf.concat([tf.zeros_like(logp[:, :1]), tf.fill(tf.shape(logp[:, 1:]), NEG_INF)], 1)
                logp = tf.where(ended[:, None], frozen, logp)
                base = scores  # RETURNN's base_beam_score_scale (the unused beams of step 0 stay out)
                if self.base_scale != 1.0:
                    base = tf.where(scores > NEG_INF / 2, scores * self.base_scale, scores)
                total = base[:, :, None] + tf.reshape(logp, [base_batch, k, n_labels])
                scores, best = tf.math.top_k(tf.reshape(total, [base_batch, k * n_labels]), k)
                src_beam, label = best // n_labels, best % n_labels
                index = tf.reshape(src_beam + offsets, [-1])
                prev, state, new_state = _reorder(prev, index), _reorder(state, index), _reorder(new_state, index)
                vals = {m: _reorder_value(v, index) for m, v in vals.items()}
                ended, lens = tf.gather(ended, index), tf.gather(lens, index)
                labels_ta, src_ta = labels_ta.write(t, label), src_ta.write(t, src_beam)
                vals[n] = LayerOutput(tf.reshape(label, [-1]), choice_tmpl, self.sizes)
                # the beam after this choice, for choice_get_beam_scores / choice_get_src_beams (layers/beam.py)
                vals[n].sub_outputs = {"beam_scores": LayerOutput(tf.reshape(scores, [-1]), choice_tmpl),
                                       "src_beams": LayerOutput(tf.reshape(src_beam, [-1]), choice_tmpl)}
            end = tf.cast(vals["end"].tensor, tf.bool) if "end" in vals else tf.zeros_like(ended)
            end = tf.reshape(end, [-1])
            step_counts = tf.logical_not(ended) if self.include_eos else tf.logical_not(ended | end)
            lens = lens + tf.cast(step_counts, tf.int32)
            ended = ended | end
            for n in state:
                new_state[n] = tf.nest.map_structure(keep_shape, new_state.get(n, state[n]), state[n])
            new_prev = {n: keep_shape(tf.cast(vals[n].tensor, prev[n].dtype), prev[n]) for n in prev}
            return t + 1, new_prev, new_state, scores, ended, lens, labels_ta, src_ta

        def cond(t, prev, state, scores, ended, lens, *_):
            return tf.logical_and(t < n_max, tf.logical_not(tf.reduce_all(ended)))

        loop_vars = (tf.constant(0), prev0, state0, scores0, ended0, lens0, labels_ta, src_ta)
        invariants = (tf.TensorShape([]), tf.nest.map_structure(_invariant, prev0),
                      tf.nest.map_structure(_invariant, state0), tf.TensorShape([None, k]), tf.TensorShape([None]),
                      tf.TensorShape([None]), tf.TensorShape(None), tf.TensorShape(None))
        n_steps, _, _, scores, ended, lens, labels_ta, src_ta = tf.while_loop(
            cond, body, loop_vars, shape_invariants=invariants)
        lens = tf.reshape(lens, [base_batch, k])
        rank = scores
        if self.length_norm:
            rank = scores / tf.pow(tf.cast(tf.maximum(lens, 1), tf.float32), self.length_exp)
        best = tf.argmax(rank, axis=1, output_type=tf.int32)  # (B,)
        labels = _backtrack(labels_ta.stack(), src_ta.stack(), best, n_steps)
        seq_len = tf.gather(lens, best, batch_dims=1)
        if self.seq_len is not None:  # a loop over the source: the source's lengths
            seq_len = tf.reshape(self.seq_len, [base_batch, k])[:, 0]
        self.best_scores = tf.gather(scores, best, batch_dims=1)
        return frames.stack_steps(labels, choice_tmpl, rec.time_dim, {rec.time_dim: seq_len})


def _backtrack(labels: tf.Tensor, src: tf.Tensor, best: tf.Tensor, n_steps: tf.Tensor) -> tf.Tensor:
    """Labels (T, B) of the hypotheses ``best`` (B,) at the last step, following the source
    indices ``src`` (T, B, K) back to step 0."""
    out = tf.TensorArray(tf.int32, size=n_steps, element_shape=[None])

    def body(t, beam, out):
        out = out.write(t, tf.gather(labels[t], beam, batch_dims=1))
        return t - 1, tf.gather(src[t], beam, batch_dims=1), out

    _, _, out = tf.while_loop(lambda t, *_: t >= 0, body, [n_steps - 1, best, out])
    return tf.reshape(out.stack(), [n_steps, tf.shape(best)[0]])
