"""RETURNN's losses on label sequences: ``ctc`` (:class:`CtcLoss`) and ``edit_distance``
(:class:`EditDistanceLoss`, with ``ctc_decode``). Registered in :data:`returnn.tf.losses.LOSS_CLASSES`."""
from __future__ import annotations

from typing import Any, Dict, Optional

import tensorflow as tf

from returnn.errors import NetworkError, known_list
from returnn.tensor import Data
from returnn.tf import losses
from returnn.tf.layers.options import Option
from returnn.tf.layers.output import LayerOutput
from returnn.tf.losses import Loss, LossValues, refuse_value, safe_log


class CtcLoss(Loss):
    """Connectionist temporal classification, by TensorFlow's CTC kernel as RETURNN's (a target
    without a valid path costs inf; an empty target, where RETURNN's step fails, the all-blank path);
    ``use_native``: RETURNN's native CTC (returnn/tf/ctc_native.py: a target without a path costs 0).

    The output has ``num_labels + 1`` classes; the blank is the LAST index. Uses ``output.logits``
    when present, else RETURNN's ``safe_log(output.tensor)`` (the output is taken to be probabilities).
    ``loss_sum`` is the sum of the per-sequence negative log-likelihoods; ``norm`` is the number
    of target LABELS (sum of the target lengths), RETURNN's norm factor for every loss with a target
    with time axis: the reported score is the loss per label, and ``use_normalized_loss`` divides the
    objective by the labels. The error is the label error rate, as RETURNN's: in training of greedy
    (best-path) decoding, in evaluation of TensorFlow's CTC beam search of ``beam_width`` (greedy for
    ``beam_width`` 1); ``error_sum`` = sum of the edit distances, ``error_norm`` = the same label count.

    ``loss_opts`` (:attr:`options`) and ``ctc_opts`` (:attr:`ctc_options`, the options of TF's or
    RETURNN's native CTC op) as declared below.
    """

    loss_class = "ctc"
    framewise = False
    options = (
        Option("ctc_opts", None, "options of the CTC op (see ctc_options)"),
        Option("beam_width", 100, "the error in evaluation comes from a CTC beam search of this width (1: greedy)"),
        Option("use_native", False, "RETURNN's own CTC op (returnn/tf/ctc_native.py: a target without an "
                                    "alignment costs 0; the target neither clipped nor collapsed for the loss); "
                                    "RETURNN refuses it with beam_width > 1"),
        Option("use_viterbi", False, "the best path only (RETURNN's ctc_loss_viterbi: its log-probability, a target "
                                     "without a path costs inf, 0 with zero_infinity) instead of the full sum; "
                                     "no ctc_opts"),
        Option("focal_loss_factor", 0.0, "not an option of RETURNN's ctc loss", only=(0, 0.0, None)),
        Option("output_in_log_space", False, "the output holds log-probabilities (else probabilities or logits)"),
        Option("target_collapse_repeated", False, "repeated target labels are merged first (for the loss and the "
                                                  "error)"),
        Option("auto_clip_target_len", False, "a target is cut to its output's length - 1 (for the loss and the "
                                              "error; the norm counts the whole targets)"),
    )
    ctc_options = (
        Option("ignore_longer_outputs_than_inputs", False, "a target that needs more frames than the output has "
                                                           "counts 0 (TF's CTC op; else its loss is inf here, where "
                                                           "RETURNN's step fails)"),
        Option("preprocess_collapse_repeated", False, "TF's CTC op: merge repeated target labels"),
        Option("ctc_merge_repeated", True, "TF's CTC op: repeated outputs merge (False: each output label is one "
                                           "target label)"),
        Option("logits_normalize", True, "use_native: log-softmax the input first (False: it is taken as "
                                         "log-probabilities as it is)"),
        Option("grad_wrt_softmax_in", True, "use_native: RETURNN's error signal w.r.t. the input is exp(log-probs) "
                                            "- posteriors (True) or - posteriors (False), whatever logits_normalize"),
        Option("label_loop", None, "use_native: alias of ctc_merge_repeated (RETURNN's native CTC)"),
        Option("blank_index", -1, "use_native: the blank's class (negative: from the end; labels index the "
                                  "classes as they are)"),
        Option("zero_infinity", None, "use_native: a sequence without an alignment costs 0 with no gradient "
                                      "(default: the config's tf_native_ctc_zero_infinity, else behavior_version "
                                      ">= 30)"),
    )
    # ctc_opts RETURNN passes on to one op only (the other fails with a TypeError)
    KERNEL_ONLY = ("ignore_longer_outputs_than_inputs", "preprocess_collapse_repeated")
    NATIVE_ONLY = ("label_loop", "blank_index", "zero_infinity", "logits_normalize", "grad_wrt_softmax_in")

    def __init__(self, layer_name: str, loss_opts: Optional[Dict[str, Any]], target_key: str):
        super().__init__(layer_name, loss_opts, target_key)
        ctc_opts = dict(self.opts.get("ctc_opts") or {})
        known = {o.name: o for o in self.ctc_options}
        unknown = set(ctc_opts) - set(known)
        if unknown:
            raise NetworkError("layer %r: unknown ctc_opts %s (known: %s)"
                               % (layer_name, known_list(unknown), known_list(known)))
        for name, value in ctc_opts.items():
            refuse_value(layer_name, "ctc_opts", known[name], value)
        self.native = bool(self.opts.get("use_native"))
        wrong = sorted(set(ctc_opts) & set(self.KERNEL_ONLY if self.native else self.NATIVE_ONLY))
        if wrong:
            raise NetworkError("layer %r: ctc_opts %s %s (RETURNN passes ctc_opts to %s: a TypeError)" % (
                layer_name, ", ".join(wrong), "need use_native False" if self.native else "need use_native",
                "its native CTC" if self.native else "TensorFlow's ctc_loss"))
        self.viterbi = bool(self.opts.get("use_viterbi"))
        if self.viterbi and ctc_opts:  # RETURNN asserts
            raise NetworkError("layer %r: loss_opts use_viterbi takes no ctc_opts (RETURNN asserts not ctc_opts), got %s"
                               % (layer_name, known_list(ctc_opts)))
        if "label_loop" in ctc_opts and "ctc_merge_repeated" in ctc_opts:  # RETURNN asserts
            raise NetworkError("layer %r: ctc_opts: give label_loop or ctc_merge_repeated (its alias), not both"
                               % layer_name)
        self.ctc_opts = ctc_opts
        self.ignore_longer = bool(ctc_opts.get("ignore_longer_outputs_than_inputs", False))
        self.collapse_inputs = bool(ctc_opts.get("preprocess_collapse_repeated", False))
        self.merge_repeated = bool(ctc_opts.get("ctc_merge_repeated", True))
        self.beam_width = self.opts.get("beam_width", 100)
        if isinstance(self.beam_width, bool) or not isinstance(self.beam_width, int) or self.beam_width < 1:
            raise NetworkError("layer %r: loss_opts beam_width must be an int >= 1, got %r" % (layer_name, self.beam_width))
        if self.opts.get("use_native") and self.beam_width > 1:  # RETURNN asserts this
            raise NetworkError("layer %r: loss_opts use_native needs beam_width 1 (RETURNN: 'use beam_width=1 with "
                               "use_native')" % layer_name)

    def expected_output_dim(self, target_dim: Optional[int]) -> Optional[int]:
        return None if target_dim is None else target_dim + 1  # the blank

    def check_templates(self, output: Data, target: Optional[Data], target_name: Optional[str]) -> None:
        super().check_templates(output, target, target_name)
        if target is not None and (not target.sparse or output.sparse):
            raise NetworkError("layer %r: loss 'ctc' needs a dense output and sparse target labels, got output %s, "
                               "target %r %s" % (self.layer_name, output.short_repr(), target_name, target.short_repr()))

    def compute_btf(self, output: LayerOutput, target: LayerOutput, train: bool = False) -> LossValues:
        if not target.data.sparse or not output.data.have_time_axis() or not target.data.have_time_axis():
            raise NetworkError("layer %r: ctc loss needs a time axis on the output and sparse targets with time"
                               % self.layer_name)
        num_classes = output.data.dim
        blank = num_classes - 1
        if self.opts.get("output_in_log_space"):  # the output holds log-probabilities already
            logits = output.tensor
        else:  # RETURNN: the softmax input when known, else safe_log of the output (probabilities)
            logits = output.logits if output.logits is not None else safe_log(output.tensor)
        lens = target.seq_len
        if self.opts.get("auto_clip_target_len"):  # RETURNN: at most the output's length - 1
            lens = tf.minimum(lens, tf.maximum(output.seq_len - 1, 0))
        labels = tf.where(tf.sequence_mask(lens, tf.shape(target.tensor)[1]), target.tensor, 0)
        if self.opts.get("target_collapse_repeated"):
            labels, lens = collapse_repeated(labels, lens)
        label_mask = tf.sequence_mask(lens, tf.shape(labels)[1])
        time_major = tf.transpose(logits, [1, 0, 2])
        from returnn.tf.ctc_native import native_ctc_loss, zero_infinity_default
        if self.viterbi:  # RETURNN's ctc_loss_viterbi (before use_native): the targets as they are, blank last
            loss = native_ctc_loss(logits, output.seq_len, target.tensor, target.seq_len, blank, max_approx=True,
                                   zero_infinity=zero_infinity_default())
        elif self.native:  # RETURNN's native CTC: the targets as they are (no clipping, no collapsing)
            zero_inf = self.ctc_opts.get("zero_infinity")
            loss = native_ctc_loss(
                logits, output.seq_len, target.tensor, target.seq_len, self.ctc_opts.get("blank_index", -1) % num_classes,
                label_loop=bool(self.ctc_opts.get("label_loop", self.merge_repeated)),
                logits_normalize=bool(self.ctc_opts.get("logits_normalize", True)),
                zero_infinity=zero_infinity_default() if zero_inf is None else bool(zero_inf),
                num_labels=target.data.dim, grad_wrt_softmax_in=bool(self.ctc_opts.get("grad_wrt_softmax_in", True)))
        else:
            loss = ctc_kernel_loss(time_major, output.seq_len, labels, lens, blank, self.ignore_longer,
                                   self.collapse_inputs, self.merge_repeated)
        labels_total = tf.cast(tf.reduce_sum(target.seq_len), tf.float32)
        if train or self.beam_width == 1:
            decoded, _ = tf.nn.ctc_greedy_decoder(time_major, output.seq_len, merge_repeated=True, blank_index=blank)
        else:  # TF's beam search takes the blank as the last class, as here
            decoded, _ = tf.nn.ctc_beam_search_decoder(time_major, output.seq_len, beam_width=self.beam_width)
        dist = tf.edit_distance(tf.cast(decoded[0], tf.int64), _to_sparse(labels, label_mask), normalize=False)
        return LossValues(tf.reduce_sum(loss), labels_total, tf.reduce_sum(dist), labels_total)


class EditDistanceLoss(Loss):
    """Evaluation only (no loss): label error rate = edit distance between the output labels and the
    target, over the target length. The output holds sparse labels, or with ``ctc_decode`` (RETURNN's)
    it is a dense CTC output (target classes + blank, the blank last), decoded by TensorFlow's CTC
    beam search (its default width 100, best path) from its logits (the softmax input when known;
    with ``output_in_log_space`` the output itself; else RETURNN's safe_log of the probabilities)."""

    loss_class = "edit_distance"
    framewise = False
    options = (
        Option("debug_print", False, "RETURNN: print the sequences", noop="a debug print of RETURNN's; the error "
                                                                          "is the same"),
        Option("label_map", None, "{label: label or None}, keys 0..n-1: both sides mapped (None: the label is "
                                  "dropped from the sequence) before comparing (TIMIT's 61 -> 39 phones)"),
        Option("ctc_decode", False, "the output is a dense CTC output (classes + blank), beam-search decoded first"),
        Option("output_in_log_space", False, "with ctc_decode: the dense output holds log-probabilities"),
    )

    def __init__(self, layer_name: str, loss_opts: Optional[Dict[str, Any]], target_key: str):
        super().__init__(layer_name, loss_opts, target_key)
        label_map = self.opts.get("label_map") or {}
        if not isinstance(label_map, dict) or sorted(label_map) != list(range(len(label_map))) or not all(
                v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in label_map.values()):
            raise NetworkError("layer %r: loss 'edit_distance' label_map must map the labels 0..n-1 each to a label or "
                               "None (RETURNN's map_labels), got %r" % (layer_name, label_map))
        self.label_map: Dict[int, Optional[int]] = label_map

    def expected_output_dim(self, target_dim: Optional[int]) -> Optional[int]:
        if target_dim is None:
            return None
        return target_dim + 1 if self.opts.get("ctc_decode") else target_dim  # the blank

    def check_templates(self, output: Data, target: Optional[Data], target_name: Optional[str]) -> None:
        """RETURNN: sparse target labels; sparse output labels of the same classes, or with ctc_decode a
        dense output of the classes and the blank."""
        if target is None:
            return
        decode = bool(self.opts.get("ctc_decode"))
        if not target.sparse or output.sparse == decode or output.dim != self.expected_output_dim(target.dim):
            need = "a dense output of the target's classes + 1 (blank)" if decode else \
                "sparse output labels with the target's classes (a dense output needs ctc_decode)"
            raise NetworkError("layer %r: loss 'edit_distance' needs %s and sparse targets, got output %s, target %r %s"
                               % (self.layer_name, need, output.short_repr(), target_name, target.short_repr()))

    def compute_btf(self, output: LayerOutput, target: LayerOutput, train: bool = False) -> LossValues:
        if not target.data.sparse or not target.data.have_time_axis() or not output.data.have_time_axis():
            raise NetworkError("layer %r: edit_distance needs sparse targets and outputs with a time axis"
                               % self.layer_name)
        if self.opts.get("ctc_decode"):
            if self.opts.get("output_in_log_space"):
                logits = output.tensor
            else:
                logits = output.logits if output.logits is not None else safe_log(output.tensor)
            decoded, _ = tf.nn.ctc_beam_search_decoder(tf.transpose(logits, [1, 0, 2]), output.seq_len)
            hyp_sparse = tf.cast(decoded[0], tf.int64)
        else:
            hyp = output.tensor if output.data.sparse else tf.argmax(output.tensor, axis=-1, output_type=tf.int32)
            hyp_sparse = _to_sparse(hyp, output.sequence_mask())
        ref_sparse = _to_sparse(target.tensor, target.sequence_mask())
        if self.label_map:
            hyp_sparse, ref_sparse = map_labels(hyp_sparse, self.label_map), map_labels(ref_sparse, self.label_map)
        dist = tf.edit_distance(hyp_sparse, ref_sparse, normalize=False)
        return LossValues(tf.constant(0.0), tf.constant(0.0), tf.reduce_sum(dist),
                          tf.cast(tf.reduce_sum(target.seq_len), tf.float32))


def collapse_repeated(labels: tf.Tensor, lens: tf.Tensor):
    """(labels (B, L), lens (B,)) with each run of one repeated label kept once (RETURNN's
    ``sparse_labels(collapse_repeated=True)``)."""
    mask = tf.sequence_mask(lens, tf.shape(labels)[1])
    prev = tf.concat([tf.fill([tf.shape(labels)[0], 1], -1), labels[:, :-1]], axis=1)
    keep = tf.logical_and(mask, tf.not_equal(labels, tf.cast(prev, labels.dtype)))
    new_lens = tf.reduce_sum(tf.cast(keep, lens.dtype), axis=1)
    pos = tf.cumsum(tf.cast(keep, tf.int32), axis=1) - 1  # the new position of each kept label
    rows = tf.broadcast_to(tf.range(tf.shape(labels)[0])[:, None], tf.shape(labels))
    idx = tf.boolean_mask(tf.stack([rows, pos], axis=-1), keep)
    out = tf.scatter_nd(idx, tf.boolean_mask(labels, keep), tf.shape(labels))
    return out, new_lens


def ctc_kernel_loss(logits_tm: tf.Tensor, seq_len: tf.Tensor, labels: tf.Tensor, lens: tf.Tensor, blank: int,
                    ignore_longer: bool, collapse_inputs: bool = False, merge_repeated: bool = True) -> tf.Tensor:
    """Per sequence the CTC loss of time-major ``logits_tm`` (T, B, blank + 1) against ``labels`` (B, L)
    of ``lens``, by TensorFlow's CTC kernel, as RETURNN computes it (``tf.compat.v1.nn.ctc_loss``,
    the blank last): a target with no valid path (e.g. repeated labels without the frames for a blank
    between them) costs inf. Where the kernel fails RETURNN's step, it is computed here: a target of
    length 0 costs the all-blank path; one with more labels than the output has frames costs inf (0 with
    ``ignore_longer``, the kernel's option)."""
    kernel_lens = collapse_repeated(labels, lens)[1] if collapse_inputs else lens  # what the kernel checks
    too_long = kernel_lens > seq_len
    empty = tf.equal(lens, 0)
    # the kernel refuses empty targets: a 1-label stand-in, replaced below (ignored where it has no frames)
    k_labels = tf.pad(labels, [[0, 0], [0, tf.maximum(1 - tf.shape(labels)[1], 0)]])  # a position for it
    k_labels = tf.where(empty[:, None] & tf.equal(tf.range(tf.shape(k_labels)[1])[None, :], 0), 0, k_labels)
    k_lens = tf.where(empty, tf.ones_like(lens), lens)
    sparse = _to_sparse(k_labels, tf.sequence_mask(k_lens, tf.shape(k_labels)[1]))
    # the kernel refuses a batch of no frames ("max time cannot be 0"): one padded frame, no sequence's
    logits_k = tf.pad(logits_tm, [[0, tf.maximum(1 - tf.shape(logits_tm)[0], 0)], [0, 0], [0, 0]])
    loss = tf.compat.v1.nn.ctc_loss(tf.cast(sparse, tf.int32), logits_k, seq_len,
                                    preprocess_collapse_repeated=collapse_inputs, ctc_merge_repeated=merge_repeated,
                                    ignore_longer_outputs_than_inputs=True, time_major=True)
    log_blank = tf.nn.log_softmax(logits_tm, axis=-1)[:, :, blank]  # (T, B)
    frames = tf.transpose(tf.sequence_mask(seq_len, tf.shape(logits_tm)[0]))
    all_blank = tf.reduce_sum(tf.where(frames, -log_blank, 0.0), axis=0)
    loss = tf.where(empty, all_blank, loss)
    return tf.where(too_long & ~empty, tf.zeros_like(loss) if ignore_longer else tf.fill(tf.shape(loss), float("inf")),
                    loss)


def _to_sparse(labels: tf.Tensor, mask: tf.Tensor) -> tf.SparseTensor:
    """(B, T) labels on real frames as a SparseTensor (for tf.edit_distance)."""
    indices = tf.where(mask)
    return tf.SparseTensor(indices, tf.cast(tf.gather_nd(labels, indices), tf.int64), tf.cast(tf.shape(labels), tf.int64))


def map_labels(labels: tf.SparseTensor, label_map: Dict[int, Optional[int]]) -> tf.SparseTensor:
    """RETURNN's ``map_labels`` on label sequences (indices (batch, position)): labels mapped to None
    are removed (the later ones of their sequence move up), the others replaced by their value."""
    dropped = [k for k, v in label_map.items() if v is None]
    if dropped:
        keep = tf.reduce_all(tf.not_equal(labels.values[:, None], tf.constant(dropped, tf.int64)[None, :]), axis=1)
        rows = tf.boolean_mask(labels.indices[:, 0], keep)
        values = tf.boolean_mask(labels.values, keep)
        per_row = tf.math.unsorted_segment_sum(tf.ones_like(rows), rows, labels.dense_shape[0])
        row_start = tf.cumsum(per_row, exclusive=True)
        cols = tf.range(tf.size(rows, out_type=tf.int64), dtype=tf.int64) - tf.gather(row_start, rows)
        labels = tf.SparseTensor(tf.stack([rows, cols], axis=1), values, labels.dense_shape)
    lookup = tf.constant([-1 if label_map[i] is None else label_map[i] for i in range(len(label_map))], tf.int64)
    return tf.SparseTensor(labels.indices, tf.gather(lookup, labels.values), labels.dense_shape)


for _cls in (CtcLoss, EditDistanceLoss):
    losses.LOSS_CLASSES[_cls.loss_class] = _cls
