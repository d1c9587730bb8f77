"""Beam search through a rec sub-network (``task = "search"``).

Every input of the loop is expanded to ``B * K`` rows (K = the choice's ``beam_size``); at step 0
only the first hypothesis of each sequence is alive (the others start at score -inf). Each step
runs the in-loop layers in order; at the ``choice`` layer the scores of all hypotheses plus the
log-probabilities of its source give ``K * V`` candidates per sequence, of which the best K
survive. From there on the step continues with the survivors: every value computed so far in
this step, the previous-step values and the cell states are reordered by their source hypothesis.

A hypothesis ends at the step where the ``end`` layer is true (its length excludes that step
unless ``include_eos``; a loop over its source without ``end`` ends each sequence at the source's length,
as RETURNN: that step still chooses without ``include_eos``); after that its score is frozen and it keeps
one continuation. The loop
stops when all hypotheses ended or after ``max_seq_len`` steps. The result is the best hypothesis
per sequence by score, traced back through the stored source-hypothesis indices; so are the frames
of in-loop layers with ``is_output_layer`` (readable from outside as ``REC/NAME``, as in RETURNN).
With the choice's ``length_normalization`` (RETURNN's), at each step t > 0 the score of a hypothesis
that ended is multiplied by ((t + 1) / t) ** ``length_normalization_exponent``, so the beam (and the
final pick) compares score / length ** exponent, the length counting the end step.

A choice with ``input_type="regression"`` (Tacotron-style decoders) chooses nothing: as in RETURNN
it needs ``beam_size`` 1, its value is its source (the prediction, fed back through ``prev:``), the
scores stay 0, and the loop's output is the predicted frames up to ``end``.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Set

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tf.layers.base import LayerOutput, RunContext
from returnn.tf.layers.beam_values import Beam, repeat_batch
from returnn.tf.layers.rec_net import frames, layer_targets
from returnn.tf.layers.rec_net.search_scores import (
    add_fed_scores, check_cheating, fed_choices, gumbel_noise, log_scores, reference_frame, top_k_cheating,
)
from returnn.tf.layers.rec_net.loop import (
    UnitRun, _invariant, has_logits, has_state, keep_shape, step_context, with_derived_sizes,
)
from returnn.tf.layers.rec_net.score_combine import choice_view, custom_combine

NEG_INF = -1e30
CHOICE_SUB = "\0choice:"  # key prefix of the choice's own sub-outputs (out_I) among the traced-back values
LOGITS_SUB = "\0logits:"  # key prefix of an exported layer's logits (softmax: its loss reads them)


expand_beam = repeat_batch  # each sequence of a value repeated k times on the batch axis (also its sizes)


def _reorder(x: Mapping[str, Any], index: tf.Tensor, batchless: Set[str]) -> Dict[str, Any]:
    """Per sub-layer, batch-first tensors (nested) gathered by ``index`` on axis 0; scalars and the values of
    the ``batchless`` sub-layers (no batch axis) unchanged."""
    return {n: v if n in batchless else tf.nest.map_structure(lambda t: tf.gather(t, index) if len(t.shape) else t, v)
            for n, v in x.items()}


def _reorder_value(v: LayerOutput, index: tf.Tensor) -> LayerOutput:
    ax = v.data.batch_dim_axis
    if ax is None:
        return v
    logits = None if v.logits is None else tf.gather(v.logits, index, axis=ax)
    out = LayerOutput(tf.gather(v.tensor, index, axis=ax), v.data, v.sizes, logits)
    out.computed_padding = v.computed_padding
    return out


def _reorder_step(index: tf.Tensor, batchless: Set[str], prev, state, new_state, vals, ended, lens):
    """Everything of the step so far, its hypotheses reordered by ``index`` (flat rows) at a choice."""
    prev, state, new_state = (_reorder(x, index, batchless) for x in (prev, state, new_state))
    vals = {m: _reorder_value(v, index) for m, v in vals.items()}
    return prev, state, new_state, vals, tf.gather(ended, index), tf.gather(lens, index)


def _ended_and_normalized(logp: tf.Tensor, scores: tf.Tensor, ended: tf.Tensor, t: tf.Tensor, k: int,
                          length_norm: bool, length_exp: float):
    """A choice's label log-scores ``(B * K, V)`` with an ended hypothesis allowed label 0 at score 0 only, and
    the beam scores ``(B, K)`` with RETURNN's length normalization of the ended ones (module docstring)."""
    frozen = tf.concat([tf.zeros_like(logp[:, :1]), tf.fill(tf.shape(logp[:, 1:]), NEG_INF)], 1)
    logp = tf.where(ended[:, None], frozen, logp)
    if length_norm:
        steps = tf.cast(t, tf.float32)
        scale = tf.pow((steps + 1.0) / tf.maximum(steps, 1.0), length_exp)
        scores = tf.where(tf.reshape(ended, [tf.shape(scores)[0], k]), scores * scale, scores)
    return logp, scores


def _base_scaled(scores: tf.Tensor, scale: float) -> tf.Tensor:
    """RETURNN's base_beam_score_scale on the beam scores (the unused beams of step 0 stay out)."""
    return scores if scale == 1.0 else tf.where(scores > NEG_INF / 2, scores * scale, scores)


class BeamSearchRun(UnitRun):
    """One beam search of a rec sub-network on a batch."""

    def __init__(self, rec, sources: List[LayerOutput], ctx: RunContext):
        super().__init__(rec, sources, ctx)
        self.choice = rec.search_choice
        opts = rec.unit[self.choice]
        self.k = int(opts.get("beam_size", 1) or 1)
        self.input_type = opts.get("input_type", "prob")
        if self.input_type not in ("prob", "log_prob", "regression"):
            raise NetworkError("%s, sub-layer %r: input_type %r is not supported in search (prob, log_prob, "
                               "regression)" % (rec.desc, self.choice, self.input_type))
        self.regression = self.input_type == "regression"
        if self.regression and self.k != 1:  # RETURNN asserts it: a prediction is no distribution to search
            raise NetworkError("%s, sub-layer %r: a regression choice searches with beam_size 1, got %i"
                               % (rec.desc, self.choice, self.k))
        self.prob_scale = float(opts.get("prob_scale", 1.0))
        self.base_scale = float(opts.get("base_beam_score_scale", 1.0))
        self.length_norm = bool(opts.get("length_normalization", True))
        self.length_exp = float(opts.get("length_normalization_exponent", 1.0))
        self.include_eos = bool(rec.opt("include_eos"))
        targets = opts.get("target")
        self.multi = isinstance(targets, (list, tuple)) and len(targets) > 1  # a choice per source (choice.py)
        self.source_beams = [int(b) for b in (opts.get("source_beam_sizes") or [self.k] * len(targets or ()))]
        # search in a training network: the value holds all k final hypotheses (beam_values.py), and the
        # in-loop layers with a loss are exported too (their losses are computed over all hypotheses)
        self.keep_beams = bool(getattr(rec, "keep_beams", False))
        # RETURNN's step past a sequence's end (a loop over its source: without include_eos, the step at its length
        # still chooses, and its score counts) reads the padded frame as it is; no gradients here (unlike keep_beams)
        self.raw_frames = not self.keep_beams
        self.fed = fed_choices(rec, self.choice)  # choices fed their target that add their scores (search_scores.py)
        # a search in training as long as its target (RETURNN's known sequence length): the loop runs the target's
        # frames, every hypothesis has the target's length
        # a loop over its source without 'end' ends each sequence at the source's length too (RETURNN's seq_lens)
        self.fixed_length = (not rec.n_from and rec.length_key is not None) or (
            (bool(rec.n_from) or getattr(rec, "length_source", None) is not None) and "end" not in rec.unit)
        check_cheating("%s, sub-layer %r" % (rec.desc, self.choice), opts)
        self.sample_scale = float(opts.get("random_sample_scale") or 0.0)  # RETURNN's Gumbel noise (search_scores.py)
        self.cheating = opts.get("cheating") or False  # the reference kept as the beam's last hypothesis
        # RETURNN's keep_beams: each incoming hypothesis keeps beam_size / beam_in continuations (after the first
        # step, beam_in = beam_size: its best label each), instead of the best beam_size of all
        self.expand_each = bool(opts.get("keep_beams"))
        if self.expand_each and self.cheating:
            raise NetworkError("%s, sub-layer %r: keep_beams with cheating is not supported here" % (rec.desc, self.choice))
        self.custom = opts.get("custom_score_combine")  # RETURNN's: replaces prob_scale, base_beam_score_scale
        self.n_explicit = len(rec.layers[self.choice].explicit_names)  # its explicit search sources (after 'from')
        # choices that search before the last one in each step (a factored decoder): plain ones (_earlier_choice_opts)
        self.earlier = {n: _earlier_choice_opts(rec, n, self.k) for n in getattr(rec, "earlier_choices", [])}
        if self.earlier and self.regression:
            raise NetworkError("%s, sub-layer %r: a regression choice with other searching choices is not supported "
                               "here" % (rec.desc, self.choice))
        # with all hypotheses kept: the sub-layers reading no choice are given without the beam (one row per
        # sequence, as RETURNN), where the loop's length does not depend on a choice (else RETURNN fails)
        self.beam_free: Set[str] = set()
        if self.keep_beams:
            free = rec.beam_free_subs()
            self.beam_free = free if self.fixed_length or "end" in free else set()

    def _outer_sizes(self, template, base_batch: tf.Tensor, k: int, per_hyp: bool) -> Dict[Any, tf.Tensor]:
        """The sizes of the other dynamic axes of an exported in-loop layer (e.g. attention weights over
        the encoder frames), per sequence (per hypothesis when ``per_hyp``)."""
        return {d: self.sizes[d] if per_hyp else _debeam(self.sizes[d], base_batch, k) for d in template.dims
                if d.is_dynamic() and d != self.rec.time_dim and d in self.sizes}

    def _expand_inputs(self) -> None:
        self.outer = {k: expand_beam(v, self.k) for k, v in self.outer.items()}
        if self.source is not None:
            self.source = expand_beam(self.source, self.k)
        if self.source_whole is not None:
            self.source_whole = expand_beam(self.source_whole, self.k)
        self.full = {k: expand_beam(v, self.k) for k, v in self.full.items()}
        if self.seq_len is not None:
            self.seq_len = tf.repeat(self.seq_len, self.k, axis=0)
        self._set_known()

    def _extend(self, logp: tf.Tensor, scores: tf.Tensor, ended: tf.Tensor, t: tf.Tensor, co: Dict[str, Any]):
        """A plain choice's step (:func:`_earlier_choice_opts`): the best ``k`` of all continuations of the
        hypotheses' scores ``(B, K)`` by the label log-scores ``logp`` ``(B * K, V)`` (an ended hypothesis keeps
        label 0 at score 0; with the length normalization its score is scaled first). Returns the new scores,
        the source beams and labels ``(B, K)`` and the flat rows to reorder by."""
        k, base_batch = self.k, tf.shape(scores)[0]
        n_labels = tf.shape(logp)[-1]
        logp, scores = _ended_and_normalized(logp, scores, ended, t, k, co["length_norm"], co["length_exp"])
        base = _base_scaled(scores, co["base_scale"])
        total = base[:, :, None] + tf.reshape(logp, [base_batch, k, n_labels])
        scores, best = tf.math.top_k(tf.reshape(total, [base_batch, k * n_labels]), k)
        src_beam, label = best // n_labels, best % n_labels
        return scores, src_beam, label, tf.reshape(src_beam + tf.range(base_batch)[:, None] * k, [-1])

    def run(self) -> LayerOutput:
        rec = self.rec
        base_batch = self.batch
        n_max = self.max_len()
        self.run_moved_out()
        self._expand_inputs()
        self.prepare_frames()
        k = self.k
        names = rec.plan.in_loop
        batchless = rec.batchless_subs()  # no batch axis, so no beam: the choice's reordering leaves them
        keep_last = self.keep_last(names)
        prev0 = {n: self.initial(n, self._prev_template(n)) for n in names if n in rec.plan.prev_used or n in keep_last}
        state0 = {n: self.initial_state(n, n_max) for n in names if has_state(rec.layers[n])}
        scores0 = tf.tile(tf.concat([[0.0], tf.fill([k - 1], NEG_INF)], 0)[None], [base_batch, 1])
        ended0 = tf.zeros([self.batch], tf.bool)
        lens0 = tf.zeros([self.batch], tf.int32)
        labels_ta = tf.TensorArray(tf.int32, size=0, dynamic_size=True, element_shape=[None, k])
        src_ta = tf.TensorArray(tf.int32, size=0, dynamic_size=True, element_shape=[None, k])
        offsets = tf.range(base_batch)[:, None] * k
        choice_tmpl = rec.layers[self.choice].output
        # in-loop layers with is_output_layer (readable from outside as REC/NAME, RETURNN's rule; in search no layer
        # runs after the loop): their frames per step, (B, K, ...), traced back along the best hypothesis
        exported = [n for n in names if n != self.choice and (rec.unit[n].get("is_output_layer") or n == "output" or (
            self.keep_beams and rec.unit[n].get("loss")))]  # 'output': the rec layer's value when another choice searches
        if self.keep_beams:  # their losses' targets that are layers of the unit (layer_targets.py), along the beam too
            exported += [n for n in layer_targets.exported_targets(rec.unit, exported) if n in names]
        templates = {n: rec.layers[n].output for n in exported}
        with_logits = [n for n in exported if has_logits(rec.layers[n]) and self.keep_beams]  # for their losses
        templates.update((LOGITS_SUB + n, rec.layers[n].output.copy(dtype="float32")) for n in with_logits)
        if self.regression:  # the prediction fed back: the loop's frames (no labels)
            templates[CHOICE_SUB + "value"] = choice_tmpl
        if self.multi:  # the choice's labels per source (its out_I)
            templates.update((CHOICE_SUB + "out_%i" % i, part) for i, part in enumerate(rec.layers[self.choice].parts))
        outs0 = {n: tf.TensorArray(tf.as_dtype(tmpl.dtype), size=0, dynamic_size=True, infer_shape=False)
                 for n, tmpl in templates.items()}

        def body(t, prev, state, scores, ended, lens, labels_ta, src_ta, outs):
            ctx = step_context(self.ctx, t, self.batch)
            ctx.prev_end = ended  # RETURNN's prev end flag (reordered with the beam at the choice)
            vals: Dict[str, LayerOutput] = {}
            new_state: Dict[str, Any] = {}
            step_src = None  # the beams of this step so far: (B, K) rows of the step's start of each hypothesis
            for n in names:
                if n in self.earlier:  # an earlier choice extends the beam as the last one does, without its options
                    co = self.earlier[n]
                    logp = tf.cast(log_scores(self.step_value(rec.sub_sources[n][0], t, prev, vals), co["input_type"]),
                                   tf.float32) * co["prob_scale"]
                    scores, src_beam, label, index = self._extend(logp, scores, ended, t, co)
                    prev, state, new_state, vals, ended, lens = _reorder_step(
                        index, batchless, prev, state, new_state, vals, ended, lens)
                    ctx.prev_end = ended
                    step_src = src_beam if step_src is None else tf.gather(step_src, src_beam, batch_dims=1)
                    tmpl = rec.layers[n].output
                    vals[n] = LayerOutput(tf.reshape(label, [-1]), tmpl, self.sizes)
                    vals[n].sub_outputs = {"beam_scores": LayerOutput(tf.reshape(scores, [-1]), tmpl),
                                           "src_beams": LayerOutput(tf.reshape(src_beam, [-1]), tmpl)}
                    continue
                if n != self.choice:
                    vals[n] = self.step_layer(n, t, prev, state, vals, new_state, ctx)
                    continue
                if self.regression:  # RETURNN: the source as is, beam 1, the scores unchanged
                    src = self.step_value(rec.sub_sources[n][0], t, prev, vals)
                    zeros = tf.zeros([base_batch, 1], tf.int32)
                    labels_ta, src_ta = labels_ta.write(t, zeros), src_ta.write(t, zeros)
                    vals[n] = LayerOutput(tf.cast(src.tensor, tf.as_dtype(choice_tmpl.dtype)), choice_tmpl, self.sizes)
                    vals[n].sub_outputs = {"beam_scores": LayerOutput(tf.reshape(scores, [-1]), choice_tmpl),
                                           "src_beams": LayerOutput(tf.reshape(zeros, [-1]), choice_tmpl),
                                           "value": vals[n]}
                    continue
                logps, src_values = [], {}
                from_names = rec.sub_sources[n][:len(rec.sub_sources[n]) - self.n_explicit]
                for name in (from_names if self.multi else from_names[:1]):
                    src = src_values[name] = self.step_value(name, t, prev, vals)
                    lp = log_scores(src, self.input_type)
                    logps.append(tf.cast(lp, tf.float32) * (1.0 if self.custom else self.prob_scale))
                if self.multi:  # several sources: the combinations of each one's best labels
                    logp, pruned = _combine_sources(logps, self.source_beams)
                else:
                    logp = logps[0]
                n_labels = tf.shape(logp)[-1]
                logp, scores = _ended_and_normalized(logp, scores, ended, t, k, self.length_norm, self.length_exp)
                if self.custom:  # the config's combination (rec_net/score_combine.py)
                    explicit = {e: self.step_value(e, t, prev, vals) for e in rec.sub_sources[n][len(from_names):]}
                    view = choice_view(rec.layers[n], ctx, src_values, explicit)
                    total = custom_combine(self.custom, view, logp, scores, ended, t, base_batch, k, NEG_INF)
                else:
                    total = _base_scaled(scores, self.base_scale)[:, :, None] + tf.reshape(logp, [base_batch, k, n_labels])
                    if self.sample_scale:
                        total = gumbel_noise(total, self.sample_scale, ctx.layer_seed(rec.layers[n].layer_name))
                if self.cheating:
                    reference = reference_frame(self.value("data:" + rec.unit[n]["target"]), t)
                    scores, best = top_k_cheating(tf.reshape(total, [base_batch, k, n_labels]), k, reference, t,
                                                  self.cheating == "exclusive")
                elif self.expand_each:
                    scores, best = _expand_each(tf.reshape(total, [base_batch, k, n_labels]), t, k)
                else:
                    scores, best = tf.math.top_k(tf.reshape(total, [base_batch, k * n_labels]), k)
                src_beam, label = best // n_labels, best % n_labels
                index = tf.reshape(src_beam + offsets, [-1])
                prev, state, new_state, vals, ended, lens = _reorder_step(
                    index, batchless, prev, state, new_state, vals, ended, lens)
                ctx.prev_end = ended
                subs = {}
                if self.multi:  # the label of each source: the combination's index into its kept labels
                    per_source = _combined_labels(tf.reshape(label, [-1]), index, pruned, self.source_beams)
                    subs = {"out_%i" % i: LayerOutput(lab, rec.layers[n].parts[i], self.sizes)
                            for i, lab in enumerate(per_source)}
                    label = tf.reshape(per_source[0], [base_batch, k])
                whole_step = src_beam if step_src is None else tf.gather(step_src, src_beam, batch_dims=1)
                labels_ta, src_ta = labels_ta.write(t, label), src_ta.write(t, whole_step)
                vals[n] = LayerOutput(tf.reshape(label, [-1]), choice_tmpl, self.sizes)
                # the beam after this choice, for choice_get_beam_scores / choice_get_src_beams (layers/beam.py)
                vals[n].sub_outputs = {"beam_scores": LayerOutput(tf.reshape(scores, [-1]), choice_tmpl),
                                       "src_beams": LayerOutput(tf.reshape(src_beam, [-1]), choice_tmpl), **subs}
            for fed in self.fed:
                scores = add_fed_scores(fed, scores, self.step_value(fed.scores_from, t, prev, vals),
                                        vals[fed.name].tensor, ended, base_batch, k, NEG_INF)
            if self.fixed_length:  # RETURNN: a hypothesis ends after its target's length (its 'end' is not read)
                end = t >= self.seq_len - (1 if self.include_eos else 0)
            else:
                end = tf.cast(vals["end"].tensor, tf.bool) if "end" in vals else tf.zeros_like(ended)
            end = tf.reshape(end, [-1])
            # RETURNN's need_last: where the hypothesis has ended (its 'end' ORed with the previous one's; with
            # include_eos the previous step's; a fixed length's end step), the layer keeps its previous frame
            past_end = end if self.fixed_length else ended if self.include_eos else ended | end
            for n in keep_last:
                vals[n] = self._kept_last(vals[n], prev[n], t, past_end)
            step_counts = tf.logical_not(ended) if self.include_eos else tf.logical_not(ended | end)
            lens = lens + tf.cast(step_counts, tf.int32)
            ended = ended | end
            for n in state:
                new_state[n] = tf.nest.map_structure(keep_shape, new_state.get(n, state[n]), state[n])
            new_prev = {n: keep_shape(tf.cast(vals[n].tensor, prev[n].dtype), prev[n]) for n in prev}
            outs = {n: ta.write(t, _by_beam(_step_frame(n, vals, self.choice), base_batch, k)) for n, ta in outs.items()}
            return t + 1, new_prev, new_state, scores, ended, lens, labels_ta, src_ta, outs

        def cond(t, prev, state, scores, ended, lens, *_):
            return tf.logical_and(t < n_max, tf.logical_not(tf.reduce_all(ended)))

        loop_vars = (tf.constant(0), prev0, state0, scores0, ended0, lens0, labels_ta, src_ta, outs0)
        invariants = (tf.TensorShape([]), tf.nest.map_structure(_invariant, prev0),
                      tf.nest.map_structure(_invariant, state0), tf.TensorShape([None, k]), tf.TensorShape([None]),
                      tf.TensorShape([None]), tf.TensorShape(None), tf.TensorShape(None),
                      {n: tf.TensorShape(None) for n in outs0})
        n_steps, _, _, scores, ended, lens, labels_ta, src_ta, outs = tf.while_loop(
            cond, body, loop_vars, shape_invariants=invariants)
        lens = tf.reshape(lens, [base_batch, k])
        final_scores = scores  # RETURNN's final beam scores: the length normalization finished over the loop's steps
        if self.length_norm:
            n_norm = tf.reduce_max(tf.concat([tf.reshape(lens, [-1]), [0]], 0)) + (0 if self.include_eos else 1)
            final_scores = scores / tf.cast(n_norm, scores.dtype)
        if rec.decide_length_norm and not self.keep_beams:  # RETURNN's decide picks by score / hypothesis length
            hyp_lens = lens if self.seq_len is None else tf.reshape(self.seq_len, [base_batch, k])
            final_scores = final_scores / tf.cast(hyp_lens, scores.dtype)
        best = tf.argmax(final_scores, axis=1, output_type=tf.int32)  # (B,)
        self.best_scores = tf.gather(final_scores, best, batch_dims=1)
        # the hypotheses given out: all k (in a training network), else each sequence's best
        final = tf.tile(tf.range(k)[None], [base_batch, 1]) if self.keep_beams else best[:, None]  # (B, K')
        n_out = k if self.keep_beams else 1
        beams = _backtrack(src_ta.stack(), final, n_steps)  # (T, B, K'): their beam at each step

        seq_len = tf.reshape(tf.gather(lens, final, batch_dims=1), [-1])
        if self.seq_len is not None:  # a loop over the source: the source's lengths
            seq_len = self.seq_len if self.keep_beams else tf.reshape(self.seq_len, [base_batch, k])[:, 0]
        # RETURNN's frames: as many as the longest hypothesis given out has (without include_eos the loop's last
        # step, where the last one ended, is none)
        n_frames = tf.reduce_max(tf.concat([seq_len, [0]], 0))

        def resolved(x: tf.Tensor, template) -> tf.Tensor:  # (T, B, K, ...) -> (T, B * K', ...)
            x = x[:n_frames]
            if template.batch_dim_axis is None:  # frames without batch axis (T, ...): one for all hypotheses
                return x
            x = tf.gather(x, beams[:n_frames], axis=2, batch_dims=2)
            return tf.reshape(x, tf.concat([tf.shape(x)[:1], [base_batch * n_out], tf.shape(x)[3:]], 0))
        sizes = {rec.time_dim: seq_len}
        free_sizes = {rec.time_dim: _debeam(seq_len, base_batch, n_out)}  # of the beam-free sub-layers: (B,)

        def one_row(n: str, x: tf.Tensor) -> tf.Tensor:  # the frames (T, B, ...) of a beam-free sub-layer
            return x[:n_frames] if templates[n].batch_dim_axis is None else x[:n_frames, :, 0]

        def stacked_value(n: str, x: tf.Tensor, logits: Optional[tf.Tensor]) -> LayerOutput:
            free = n in self.beam_free
            x = one_row(n, x) if free else resolved(x, templates[n])
            outer = self._outer_sizes(templates[n], base_batch, k, self.keep_beams and not free)
            return frames.stack_steps(x, templates[n], rec.time_dim, with_derived_sizes(
                {**outer, **(free_sizes if free else sizes)}, templates[n]), logits)

        logits = {n[len(LOGITS_SUB):]: outs.pop(n).stack() for n in list(outs) if n.startswith(LOGITS_SUB)}
        logits = {n: one_row(n, x) if n in self.beam_free else resolved(x, templates[n]) for n, x in logits.items()}
        stacked = {n: stacked_value(n, ta.stack(), logits.get(n)) for n, ta in outs.items()}  # (T, B * K', ...)
        main = stacked.pop(CHOICE_SUB + "value") if self.regression else \
            frames.stack_steps(resolved(labels_ta.stack(), choice_tmpl), choice_tmpl, rec.time_dim, sizes)
        main.sub_outputs = {n[len(CHOICE_SUB):]: stacked.pop(n) for n in list(stacked) if n.startswith(CHOICE_SUB)}
        if "output" in stacked:  # another choice searched (e.g. hard attention's position): its labels as its own
            stacked[self.choice] = main
            main = stacked["output"]
        self.exported = {n: LayerOutput(v.tensor, rec.sub_template(n), v.sizes, v.logits) for n, v in stacked.items()}
        for v in self.exported.values():  # the steps past a hypothesis' end are computed (RETURNN stacks them
            v.computed_padding = True  # unmasked; a need_last layer's repeat its last frame there)
        if self.keep_beams:
            if self.length_norm:  # RETURNN's final step of the length normalization: over the loop's steps
                steps = tf.reduce_max(tf.concat([seq_len, [0]], 0)) + (0 if self.include_eos else 1)
                scores = scores / tf.cast(steps, scores.dtype)
            self.beam = Beam(k, scores, rec.layer_name)
        return main


def _earlier_choice_opts(rec, name: str, k: int) -> Dict[str, Any]:
    """The options of a searching choice before the loop's last one (``rec.earlier_choices``): its source's
    scores, ``prob_scale``, ``base_beam_score_scale`` and the length normalization; the same ``beam_size``. Its
    other search options are refused in one line (not supported here for such a choice)."""
    opts = rec.unit[name]
    where = "%s, sub-layer %r" % (rec.desc, name)
    if int(opts.get("beam_size", 1) or 1) != k:
        raise NetworkError("%s: the searching choices of one loop need one beam_size here (got %r and %i)"
                           % (where, opts.get("beam_size"), k))
    bad = [key for key in ("custom_score_combine", "cheating", "keep_beams", "random_sample_scale",
                           "explicit_search_sources", "source_beam_sizes") if opts.get(key)]
    if isinstance(opts.get("target"), (list, tuple)) and len(opts["target"]) > 1:
        bad.append("target (a list)")
    if opts.get("input_type", "prob") not in ("prob", "log_prob"):
        bad.append("input_type %r" % opts.get("input_type"))
    if bad:
        raise NetworkError("%s: a searching choice before the loop's last one (%r) with %s is not supported here"
                           % (where, rec.search_choice, ", ".join(bad)))
    return {"input_type": opts.get("input_type", "prob"), "prob_scale": float(opts.get("prob_scale", 1.0)),
            "base_scale": float(opts.get("base_beam_score_scale", 1.0)),
            "length_norm": bool(opts.get("length_normalization", True)),
            "length_exp": float(opts.get("length_normalization_exponent", 1.0))}


def _expand_each(total: tf.Tensor, t: tf.Tensor, k: int):
    """RETURNN's ``beam_search`` with ``keep_beams``: (scores, flat indices) (B, k) as ``tf.math.top_k`` of
    ``total`` (B, k, V), where each incoming hypothesis keeps its best label (at step 0 the one hypothesis
    there is, RETURNN's beam_in 1, its k best)."""
    n_labels = tf.shape(total)[2]
    first_scores, first_best = tf.math.top_k(tf.reshape(total, [tf.shape(total)[0], -1]), k)
    each_scores, each_label = tf.math.top_k(total, 1)  # (B, k, 1)
    each_best = tf.range(k)[None, :] * n_labels + each_label[:, :, 0]
    return tf.where(t > 0, each_scores[:, :, 0], first_scores), tf.where(t > 0, each_best, first_best)


def _debeam(size: tf.Tensor, base_batch: tf.Tensor, k: int) -> tf.Tensor:
    """Sizes over the expanded batch (B * K,) as (B,) (the hypotheses of a sequence share them)."""
    return tf.reshape(size, [base_batch, k])[:, 0] if len(size.shape) == 1 and k > 1 else size


def _combine_sources(logps: List[tf.Tensor], beams: List[int]):
    """RETURNN's ``_prune_and_combine_sources``: each source's ``beams[i]`` best log-probabilities
    (rows: hypotheses), summed over all combinations: ((rows, prod(beams)) scores, last source
    fastest; per source its kept (values, labels))."""
    pruned = [tf.math.top_k(lp, b) for lp, b in zip(logps, beams)]
    n = len(logps)
    combined = None
    for i, (values, _) in enumerate(pruned):
        shape = [-1] + [beams[i] if j == i else 1 for j in range(n)]
        part = tf.reshape(values, shape)
        combined = part if combined is None else combined + part
    total = 1
    for b in beams:
        total *= b
    return tf.reshape(combined, [-1, total]), pruned


def _combined_labels(ids: tf.Tensor, src_rows: tf.Tensor, pruned, beams: List[int]) -> List[tf.Tensor]:
    """RETURNN's ``_get_combined_labels``: the label of each source for the combination ``ids``
    (rows: surviving hypotheses, continuing the hypotheses ``src_rows``)."""
    per_source = []
    for b in reversed(beams):  # the last source varies fastest
        per_source.append(ids % b)
        ids = ids // b
    per_source.reverse()
    return [tf.gather(tf.gather(labels, src_rows), i[:, None], batch_dims=1)[:, 0]
            for (_, labels), i in zip(pruned, per_source)]


def _by_beam(value: LayerOutput, batch: tf.Tensor, k: int) -> tf.Tensor:
    """A step's batch-first frames (B * K, ...) as (B, K, ...); frames without batch axis as they are."""
    x = value.tensor
    if value.data.batch_dim_axis is None:
        return x
    if value.data.batch_dim_axis not in (0, None):
        x = tf.transpose(x, [value.data.batch_dim_axis] + [a for a in range(len(x.shape)) if a != value.data.batch_dim_axis])
    return tf.reshape(x, tf.concat([[batch, k], tf.shape(x)[1:]], 0))


def _step_frame(key: str, vals: Mapping[str, LayerOutput], choice: str) -> LayerOutput:
    """The step's value stored under ``key``: an in-loop layer's, its logits, or a choice sub-output."""
    if key.startswith(CHOICE_SUB):
        return vals[choice].sub_outputs[key[len(CHOICE_SUB):]]
    if key.startswith(LOGITS_SUB):
        value = vals[key[len(LOGITS_SUB):]]
        return LayerOutput(tf.cast(value.logits, tf.float32), value.data, value.sizes)
    return vals[key]


def _backtrack(src: tf.Tensor, final: tf.Tensor, n_steps: tf.Tensor) -> tf.Tensor:
    """The beams (T, B, K') of the hypotheses ``final`` (B, K') at the last step, at each step,
    following the source indices ``src`` (T, B, K) back to step 0."""
    out = tf.TensorArray(tf.int32, size=n_steps, element_shape=[None, None])

    def body(t, beam, out):
        out = out.write(t, beam)
        return t - 1, tf.gather(src[t], beam, batch_dims=1), out

    _, _, out = tf.while_loop(lambda t, *_: t >= 0, body, [n_steps - 1, final, out])
    return tf.reshape(out.stack(), [n_steps, tf.shape(final)[0], tf.shape(final)[1]])
