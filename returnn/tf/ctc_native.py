"""RETURNN's native CTC (``returnn.tf.native_op.ctc_loss`` and ``ctc_loss_viterbi``, what its
``ctc_loss`` layer computes) on TensorFlow ops: the full sum by TensorFlow's CTC kernel
(:func:`returnn.tf.losses_ctc.ctc_kernel_loss`) when the blank is the last class and no label can be
it; else (RETURNN's automaton takes a label of the blank's class as it is), RNA and the best path by
:func:`returnn.tf.layers.loss_layers.ctc_scores`.

Where they differ from TensorFlow's kernel: a sequence without any alignment (its labels, plus one
blank between equal neighbours with ``label_loop``, need more frames than it has) costs 0 in the
full sum, with the error signal ``softmax(logits)`` on its frames (RETURNN's Baum-Welch finds no
path; 0 with normalized input); the best path costs inf there (and for a sequence of no frames).
``zero_infinity`` (RETURNN's config ``tf_native_ctc_zero_infinity``, default ``behavior_version >=
30``): such a sequence costs 0 with no gradient."""
from __future__ import annotations

from typing import Optional

import tensorflow as tf


def zero_infinity_default() -> bool:
    """RETURNN's default of the native CTC's ``zero_infinity``: the config's
    ``tf_native_ctc_zero_infinity`` when set, else ``behavior_version >= 30``."""
    from returnn.config import get_global_config
    from returnn.util.basic import BehaviorVersion
    value = get_global_config().bool("tf_native_ctc_zero_infinity")
    return BehaviorVersion.get() >= 30 if value is None else bool(value)


def has_valid_path(labels: tf.Tensor, lens: tf.Tensor, seq_len: tf.Tensor, label_loop: bool) -> tf.Tensor:
    """(B,) bool: some alignment of ``labels`` (B, U) of ``lens`` fits into ``seq_len`` frames (one label
    a frame; with ``label_loop`` one blank frame between two equal neighbouring labels)."""
    need = lens
    if label_loop:
        mask = tf.sequence_mask(lens, tf.shape(labels)[1])[:, 1:]
        repeats = tf.logical_and(tf.equal(labels[:, 1:], labels[:, :-1]), mask)
        need = need + tf.reduce_sum(tf.cast(repeats, lens.dtype), axis=1)
    return tf.cast(seq_len, need.dtype) >= need


def _exp_log_probs(logits: tf.Tensor, logits_normalize: bool) -> tf.Tensor:
    """exp of the log-probabilities the CTC scores: softmax(logits), or exp(logits) when taken as they are."""
    return tf.nn.softmax(logits, axis=-1) if logits_normalize else tf.exp(logits)


def _with_signal(loss: tf.Tensor, logits: tf.Tensor, signal: tf.Tensor, frames: tf.Tensor) -> tf.Tensor:
    """``loss`` (B,) unchanged in value, its gradient w.r.t. ``logits`` plus ``signal`` on the real ``frames``."""
    signal = tf.stop_gradient(tf.where(frames[:, :, None], signal, 0.0))
    term = tf.reduce_sum(signal * logits, axis=[1, 2])
    return loss + (term - tf.stop_gradient(term))


def native_ctc_loss(logits: tf.Tensor, seq_len: tf.Tensor, labels: tf.Tensor, lens: tf.Tensor, blank: int, *,
                    label_loop: bool = True, max_approx: bool = False, logits_normalize: bool = True,
                    zero_infinity: bool = False, num_labels: Optional[int] = None,
                    grad_wrt_softmax_in: Optional[bool] = None) -> tf.Tensor:
    """Per sequence (B,) RETURNN's native CTC loss of batch-major ``logits`` (B, T, D) against ``labels``
    (B, U) of ``lens`` (see the module docstring); ``logits_normalize`` False: the logits are taken as
    log-probabilities as they are (not normalized again); ``num_labels``: the labels' classes (the
    kernel only when they are fewer than D). ``grad_wrt_softmax_in`` (default ``logits_normalize``, the
    loss's gradient): RETURNN's error signal w.r.t. the logits is ``exp(log_probs) - bw`` (True) or ``-bw``
    (False), ``bw`` the Baum-Welch posteriors (0 without a path; best path: one-hot of the alignment, of
    class 0 on every frame without a path)."""
    from returnn.tf.layers.loss_layers import ctc_scores
    from returnn.tf.losses_ctc import ctc_kernel_loss
    labels = tf.where(tf.sequence_mask(lens, tf.shape(labels)[1]), tf.cast(labels, tf.int32), 0)
    lens = tf.cast(lens, tf.int32)
    seq_len = tf.cast(seq_len, tf.int32)
    valid = has_valid_path(labels, lens, seq_len, label_loop)
    frames = tf.sequence_mask(seq_len, tf.shape(logits)[1])  # (B, T)
    # a sequence without a path: no gradient through the score (the kernel's error signal there is not ours)
    x = tf.where(valid[:, None, None], logits, tf.stop_gradient(logits))
    inf = tf.fill(tf.shape(lens), float("inf"))
    dim = logits.shape[-1]
    if label_loop and not max_approx and blank == dim - 1 and num_labels is not None and num_labels < dim:
        loss = ctc_kernel_loss(tf.transpose(x, [1, 0, 2]), seq_len, labels, lens, blank, True)
        if not logits_normalize:  # the kernel normalizes: its loss minus the log-normalizers
            lse = tf.where(frames, tf.reduce_logsumexp(x, axis=-1), 0.0)
            loss = loss - tf.reduce_sum(lse, axis=1)
    else:
        logp = x if not logits_normalize else tf.nn.log_softmax(x, axis=-1)
        logp = tf.where(frames[:, :, None], logp, 0.0)
        loss = -ctc_scores(logp, seq_len, labels, lens, blank, label_loop, max_approx)
    gws = logits_normalize if grad_wrt_softmax_in is None else bool(grad_wrt_softmax_in)
    if max_approx:
        loss = tf.where(valid & (seq_len > 0), loss, inf)
        if zero_infinity:
            return tf.where(valid, loss, tf.zeros_like(loss))
        # without a path, RETURNN's fast_viterbi aligns every frame to its mask index 0 (the gradient above is 0)
        onehot = tf.one_hot(tf.zeros(tf.shape(logits)[:2], tf.int32), dim, dtype=logits.dtype)
        no_path = (_exp_log_probs(logits, logits_normalize) if gws else 0.0) - onehot
        return _with_signal(loss, logits, tf.where(valid[:, None, None], tf.zeros_like(logits), no_path), frames)
    loss = tf.where(valid, loss, tf.zeros_like(loss))
    # RETURNN's error signal minus the gradient above: with a path, exp(log_probs) (grad_wrt_softmax_in) minus
    # softmax(logits) (logits_normalize); without one (the gradient above is 0), exp(log_probs) unless zero_infinity
    if gws == logits_normalize and (zero_infinity or not gws):
        return loss
    zeros = tf.zeros_like(logits)
    probs = _exp_log_probs(logits, logits_normalize)
    returnn_part = probs if gws else zeros  # RETURNN's signal besides -bw
    with_path = returnn_part - (probs if logits_normalize else zeros)
    no_path = zeros if zero_infinity else returnn_part
    return _with_signal(loss, logits, tf.where(valid[:, None, None], with_path, no_path), frames)
