"""Transducer losses behind RETURNN's ``returnn.extern`` modules, in TensorFlow ops (RETURNN compiles
native kernels for them; here the sums over all alignments are loops of TF ops, their gradients by
autodiff):

- :func:`rnnt_loss` (``returnn.extern.HawkAaronWarpTransducer.rnnt_loss``, warp-transducer): RNN-T,
  a label keeps the frame, a blank moves to the next frame; the path ends with a blank in the last
  frame after all labels. The scores get a log-softmax first, as warp-transducer applies its softmax
  internally (log-probabilities pass unchanged).
- :func:`rna_loss` (``returnn.extern.WarpRna.rna_loss``): RNA, every frame emits a label or a blank
  (labels need as many frames), scores taken as given (log-probabilities).

Both take scores ``(B, T, U+1, V)`` batch-major, labels ``(B, U)``, the lengths ``(B,)``, and return the
negative log-probability of the labels per sequence ``(B,)``. Padded frames and labels do not count.
Impossible grid points hold :data:`LOG_ZERO` (finite, so no gradient is 0 * inf), so a sequence without
any alignment (RNA labels longer than the frames) costs about ``-LOG_ZERO``.
"""
from __future__ import annotations

import tensorflow as tf

LOG_ZERO = -1e30  # log(0) in the sums over alignments


def _label_and_blank_scores(log_probs: tf.Tensor, labels: tf.Tensor, label_lengths: tf.Tensor, blank_label
                            ) -> tuple:
    """(blank (B, T, U+1), label (B, T, U+1): the score of label u at grid point (t, u), LOG_ZERO at u >= U_b)."""
    num_u = tf.shape(log_probs)[2]
    labels = tf.cast(labels, tf.int32)
    valid = tf.sequence_mask(label_lengths, tf.shape(labels)[1])
    labels = tf.where(valid, labels, 0)
    blank = log_probs[..., blank_label]
    shape = tf.shape(log_probs)
    index = tf.broadcast_to(labels[:, None, :], [shape[0], shape[1], shape[2] - 1])
    lab = tf.gather(log_probs[:, :, :-1, :], index, axis=3, batch_dims=3)  # (B, T, U)
    lab = tf.where(valid[:, None, :], lab, tf.constant(LOG_ZERO, log_probs.dtype))
    lab = tf.pad(lab, [[0, 0], [0, 0], [0, 1]], constant_values=LOG_ZERO)
    return blank, tf.ensure_shape(lab, [None, None, None]), num_u


def _logaddexp(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
    m = tf.maximum(a, b)
    return m + tf.math.log(tf.exp(a - m) + tf.exp(b - m))


def rnnt_loss(acts: tf.Tensor, labels: tf.Tensor, input_lengths: tf.Tensor, label_lengths: tf.Tensor,
              blank_label: int = 0) -> tf.Tensor:
    """RNN-T negative log-likelihood per sequence (see the module doc). The forward variables are
    computed one anti-diagonal ``t + u = n`` of the (T, U+1) grid at a time (all t of it at once)."""
    log_probs = tf.nn.log_softmax(acts, axis=-1)
    blank, lab, num_u = _label_and_blank_scores(log_probs, labels, label_lengths, blank_label)
    n_batch, num_t = tf.shape(log_probs)[0], tf.shape(log_probs)[1]
    log_zero = tf.constant(LOG_ZERO, log_probs.dtype)
    flat_blank = tf.reshape(blank, [n_batch, -1])  # index t * (U+1) + u
    flat_lab = tf.reshape(lab, [n_batch, -1])
    t_idx = tf.range(num_t)

    def at(flat: tf.Tensor, t: tf.Tensor, u: tf.Tensor) -> tf.Tensor:
        """flat[b, t, u] for the (T,) positions t, u; LOG_ZERO outside the grid."""
        ok = (t >= 0) & (t < num_t) & (u >= 0) & (u < num_u)
        idx = tf.where(ok, t * num_u + u, 0)
        vals = tf.gather(flat, idx, axis=1)
        return tf.where(ok[None, :], vals, log_zero)

    alpha0 = tf.where(tf.equal(t_idx, 0)[None, :], tf.zeros([n_batch, num_t], log_probs.dtype), log_zero)
    diagonals = tf.TensorArray(log_probs.dtype, size=num_t + num_u - 1, clear_after_read=False)
    diagonals = diagonals.write(0, alpha0)

    def body(n, alpha, diags):
        u = n - t_idx
        from_blank = tf.pad(alpha[:, :-1], [[0, 0], [1, 0]], constant_values=LOG_ZERO) + at(flat_blank,
                                                                                                  t_idx - 1, u)
        from_label = alpha + at(flat_lab, t_idx, u - 1)
        new = _logaddexp(from_blank, from_label)
        new = tf.where(((u >= 0) & (u < num_u))[None, :], new, log_zero)
        return n + 1, new, diags.write(n, new)

    _, _, diagonals = tf.while_loop(lambda n, *_: n < num_t + num_u - 1, body,
                                    (tf.constant(1), alpha0, diagonals))
    all_alpha = diagonals.stack()  # (T+U, B, T): diagonal n, batch, t
    last_t = tf.maximum(tf.cast(input_lengths, tf.int32) - 1, 0)
    last_u = tf.cast(label_lengths, tf.int32)
    b_idx = tf.range(n_batch)
    final_alpha = tf.gather_nd(all_alpha, tf.stack([last_t + last_u, b_idx, last_t], axis=1))
    final_blank = tf.gather_nd(blank, tf.stack([b_idx, last_t, last_u], axis=1))
    return -(final_alpha + final_blank)


def rna_loss(log_probs: tf.Tensor, labels: tf.Tensor, input_lengths: tf.Tensor, label_lengths: tf.Tensor,
             blank_label: int = 0) -> tf.Tensor:
    """RNA negative log-likelihood per sequence (see the module doc): one step per frame."""
    blank, lab, num_u = _label_and_blank_scores(log_probs, labels, label_lengths, blank_label)
    n_batch, num_t = tf.shape(log_probs)[0], tf.shape(log_probs)[1]
    log_zero = tf.constant(LOG_ZERO, log_probs.dtype)
    alpha0 = tf.where(tf.equal(tf.range(num_u), 0)[None, :], tf.zeros([n_batch, num_u], log_probs.dtype), log_zero)
    steps = tf.TensorArray(log_probs.dtype, size=num_t + 1, clear_after_read=False).write(0, alpha0)

    def body(t, alpha, steps):
        stay = alpha + blank[:, t]
        emit = tf.pad((alpha + lab[:, t])[:, :-1], [[0, 0], [1, 0]], constant_values=LOG_ZERO)
        new = _logaddexp(stay, emit)
        return t + 1, new, steps.write(t + 1, new)

    _, _, steps = tf.while_loop(lambda t, *_: t < num_t, body, (tf.constant(0), alpha0, steps))
    all_alpha = steps.stack()  # (T+1, B, U+1): after t frames
    b_idx = tf.range(n_batch)
    final = tf.gather_nd(all_alpha, tf.stack([tf.cast(input_lengths, tf.int32), b_idx,
                                              tf.cast(label_lengths, tf.int32)], axis=1))
    return -final
