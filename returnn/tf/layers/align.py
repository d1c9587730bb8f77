"""``forced_align``: the best (Viterbi) alignment of a label sequence to frame-wise label scores.

``{"class": "forced_align", "from": "ctc", "align_target": "data:bpe", "topology": "ctc",
"input_type": "prob"}``: input ``(B, T, V)`` (probabilities or log-probabilities, ``input_type``)
whose last class is blank (``blank_idx``, default -1), and the labels ``(B, U)`` of
``align_target`` (without blank unless ``blank_included``). The states of one sequence are
blank, l1, blank, l2, ..., lU, blank; every frame emits the label of its state. Topology
``"ctc"``: a label may repeat over frames, and two equal labels in a row need a blank between
them; ``"rna"`` (RNA): each label takes exactly one frame, nothing else restricted. A path starts
in the first blank or the first label and ends in the last label or the last blank.

Output ``(B, T)`` int32, sparse over the input's classes: the label of each frame on the best
path (0 on padded frames, and on every frame of a sequence that has no path, e.g. more labels
than frames). ``"NAME/scores"`` is ``(B,)``: the best path's summed log-probability (-inf
without a path). No gradient flows through the alignment. ``"prob"`` scores are taken as
``log(max(p, 1e-20))`` (RETURNN's safe_log); among equal-scored paths the one RETURNN's fast_viterbi keeps
(skips before single steps before loops, the last label before the last blank).
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data
from returnn.tensor.dim import batch_dim
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.helpers import check_sources
from returnn.tf.layers.options import Option, one_of
from returnn.tf.util.basic import safe_log

NEG_INF = float("-inf")


@register_layer
class ForcedAlignLayer(Layer):
    """See the module docstring."""

    layer_class = "forced_align"
    ref_options = ("align_target",)
    sub_output_names = ("scores",)
    options = (
        Option("align_target", None, "layer or 'data:KEY' with the label sequences (sparse, with a time axis)"),
        Option("topology", None, "'ctc' or 'rna'"),
        Option("input_type", None, "'prob' or 'log_prob'"),
        Option("blank_idx", -1, "class index of blank in the input (negative: from the end)"),
        Option("blank_included", False, "whether the align target's classes include blank"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        if not isinstance(opts.get("align_target"), str):
            raise NetworkError("layer %r (forced_align): 'align_target' must name a layer or data key, got %r"
                               % (name, opts.get("align_target")))
        super().__init__(name, opts, sources[:-1], seed)
        check_sources(self, sources[:-1], 1, 1)
        data, target = sources[0], sources[-1]
        self.label_loop = one_of(self.desc, "topology", self.opt("topology"), ("ctc", "rna")) == "ctc"
        self.log_input = one_of(self.desc, "input_type", self.opt("input_type"), ("prob", "log_prob")) == "log_prob"
        if data.sparse or data.feature_dim_axis is None or data.time_dim_axis is None or data.batch_ndim != 3:
            raise NetworkError("%s: the input must be (batch, time, classes) scores, got %s" % (self.desc,
                                                                                                 data.short_repr()))
        if not target.sparse or target.time_dim_axis is None or target.batch_ndim != 2:
            raise NetworkError("%s: 'align_target' must be sparse labels (batch, time), got %s"
                               % (self.desc, target.short_repr()))
        n_classes = data.dim
        expected = n_classes if self.opt("blank_included") else n_classes - 1
        if target.dim != expected:
            raise NetworkError("%s: the input has %i classes, so 'align_target' must have %i (blank %s), got %i"
                               % (self.desc, n_classes, expected,
                                  "included" if self.opt("blank_included") else "not included", target.dim))
        blank = self.opt("blank_idx")
        if not self.opt("blank_included") and blank != -1:  # RETURNN asserts: blank is then the last class
            raise NetworkError("%s: blank_idx %r without blank_included: the labels exclude blank, so it must be the "
                               "last class (-1), as RETURNN asserts" % (self.desc, blank))
        if not isinstance(blank, int) or isinstance(blank, bool) or not -n_classes <= blank < n_classes:
            raise NetworkError("%s: blank_idx %r is no class index of %i classes" % (self.desc, blank, n_classes))
        self.blank = blank % n_classes
        self.output = Data(name, dims=(batch_dim, data.dims[data.time_dim_axis]), dtype="int32",
                           sparse_dim=data.dims[data.feature_dim_axis])

    def sub_template(self, sub: str) -> Data:
        if sub != "scores":
            raise NetworkError("%s: no sub-layer %r (known: 'scores')" % (self.desc, sub))
        return Data("%s/scores" % self.layer_name, dims=(batch_dim,), dtype="float32")

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        src, target = sources[0], sources[-1].copy_as_batch_time_feature()
        x = src.copy_as_batch_time_feature()
        if self.log_input:
            logp = tf.stop_gradient(tf.cast(x.tensor, tf.float32))
        elif src.data.time_dim_axis == 0 and src.data.batch_dim_axis == 1:
            # RETURNN takes safe_log of its time-major copy: log(max(p, 1e-20)), or the log_softmax of a
            # softmax's input where that copy is the softmax itself (no transpose in between)
            logp = tf.transpose(tf.stop_gradient(safe_log(tf.cast(src.tensor, tf.float32))), [1, 0, 2])
        else:
            logp = tf.stop_gradient(safe_log(tf.cast(x.tensor, tf.float32)))
        t_len, u_len = x.seq_len, target.seq_len
        labels = tf.where(target.sequence_mask(), tf.cast(target.tensor, tf.int32), 0)
        n_b = tf.shape(logp)[0]
        alignment, best = tf.cond(  # no frame in the whole batch (all sequences empty): nothing to align
            tf.shape(logp)[1] > 0, lambda: viterbi_align(logp, t_len, labels, u_len, self.blank, self.label_loop),
            lambda: (tf.zeros([n_b, 0], tf.int32), tf.zeros([n_b], tf.float32)))
        out = self.make_output(alignment, [x])
        out.sub_outputs = {"scores": LayerOutput(best, self.sub_template("scores"))}
        return out


def viterbi_align(logp: tf.Tensor, t_len: tf.Tensor, labels: tf.Tensor, u_len: tf.Tensor, blank: int,
                  label_loop: bool) -> "tuple[tf.Tensor, tf.Tensor]":
    """``logp`` (B, T, V), ``labels`` (B, U) -> (alignment (B, T) int32, best path score (B,))."""
    n_b, n_t = tf.shape(logp)[0], tf.shape(logp)[1]
    n_u = tf.shape(labels)[1]
    n_s = 2 * n_u + 1
    blanks = tf.fill([n_b, n_u], blank)
    blanks1 = tf.fill([n_b, 1], blank)
    ext = tf.concat([tf.reshape(tf.stack([blanks, labels], axis=2), [n_b, 2 * n_u]), blanks1], 1)  # (B, S)
    s_idx = tf.range(n_s)[None, :]  # (1, S)
    is_label = tf.equal(s_idx % 2, 1)
    valid = s_idx < (2 * u_len + 1)[:, None]  # (B, S)
    ext_prev2 = tf.concat([tf.fill([n_b, 2], -1), ext[:, :-2]], 1)
    allow_skip = is_label & (s_idx >= 2) & (tf.not_equal(ext, ext_prev2) | (not label_loop))
    allow_self = tf.logical_not(is_label) | label_loop
    emit = tf.transpose(tf.gather(logp, ext, axis=2, batch_dims=1), [1, 0, 2])  # (T, B, S)
    neg = tf.fill([n_b, n_s], NEG_INF)
    alpha0 = tf.where(valid & (s_idx < 2), emit[0], neg)  # a path starts in the first blank or label
    bps = tf.TensorArray(tf.int32, size=n_t, element_shape=[None, None])
    bps = bps.write(0, tf.zeros([n_b, n_s], tf.int32))

    def body(t, alpha, bps):
        stay = tf.where(tf.broadcast_to(allow_self, [n_b, n_s]), alpha, neg)
        from1 = tf.concat([neg[:, :1], alpha[:, :-1]], 1)
        from2 = tf.where(allow_skip, tf.concat([neg[:, :2], alpha[:, :-2]], 1), neg)
        # RETURNN's fast_viterbi keeps the first best edge, its CTC automaton's edges ordered by their source
        # state: on equal scores the skip (back by 2) wins over back by 1 over the loop
        cands = tf.stack([from2, from1, stay], axis=-1) + emit[t][:, :, None]  # (B, S, 3)
        step = 2 - tf.argmax(cands, axis=-1, output_type=tf.int32)  # back by 2, 1 or 0 states
        new = tf.where(valid, tf.reduce_max(cands, axis=-1), neg)
        active = (t < t_len)[:, None]
        return t + 1, tf.where(active, new, alpha), bps.write(t, tf.where(active, step, 0))

    _, alpha, bps = tf.while_loop(lambda t, *_: t < n_t, body, [tf.constant(1), alpha0, bps],
                                  shape_invariants=[tf.TensorShape([]), tf.TensorShape([None, None]),
                                                    tf.TensorShape(None)])
    last = 2 * u_len  # the final blank; the final label is one before it
    # the final label before the final blank on equal scores (its edges into RETURNN's end state come first)
    end_scores = tf.stack([tf.where(u_len > 0, tf.gather(alpha, tf.maximum(last - 1, 0), batch_dims=1), NEG_INF),
                           tf.gather(alpha, last, batch_dims=1)], 1)
    best = tf.reduce_max(end_scores, axis=1)
    state = tf.maximum(last - 1 + tf.argmax(end_scores, axis=1, output_type=tf.int32), 0)
    bp = bps.stack()  # (T, B, S)
    out = tf.TensorArray(tf.int32, size=n_t, element_shape=[None])

    def back(t, state, out):
        out = out.write(t, tf.gather(ext, state, batch_dims=1))
        return t - 1, tf.maximum(state - tf.gather(bp[t], state, batch_dims=1), 0), out  # no path: any state

    _, _, out = tf.while_loop(lambda t, *_: t >= 0, back, [n_t - 1, state, out])
    alignment = tf.transpose(tf.reshape(out.stack(), [n_t, n_b]))  # (B, T)
    found = tf.math.is_finite(best)[:, None] & tf.sequence_mask(t_len, n_t)
    return tf.where(found, alignment, 0), best
