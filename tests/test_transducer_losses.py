"""RETURNN's returnn.extern transducer losses (RNN-T of warp-transducer, RNA of warp-rna) as TF ops,
against sums over all alignments enumerated in numpy; padded frames/labels, gradients."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import tensorflow as tf

from returnn.extern.HawkAaronWarpTransducer import rnnt_loss
from returnn.extern.WarpRna import rna_loss


def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def rnnt_reference(lp, labels, blank):
    """-log sum over all RNN-T paths (T blanks, one per frame, the last one ending the path; labels
    between them) of the product of their scores, by enumerating where the labels go."""
    num_t, num_u = lp.shape[0], len(labels)
    total = 0.0
    for frames in itertools.combinations_with_replacement(range(num_t), num_u):  # frame of each label, sorted
        logp, u = 0.0, 0
        for t in range(num_t):
            while u < num_u and frames[u] == t:
                logp += lp[t, u, labels[u]]
                u += 1
            logp += lp[t, u, blank]
        total += np.exp(logp)
    return -np.log(total)


def rna_reference(lp, labels, blank):
    """-log sum over all RNA paths (each frame a label or a blank) by enumerating the label frames."""
    num_t, num_u = lp.shape[0], len(labels)
    total = 0.0
    for frames in itertools.combinations(range(num_t), num_u):
        logp, u = 0.0, 0
        for t in range(num_t):
            if u < num_u and frames[u] == t:
                logp += lp[t, u, labels[u]]
                u += 1
            else:
                logp += lp[t, u, blank]
        total += np.exp(logp)
    return -np.log(total)


@pytest.mark.parametrize("blank", [0, 4])
def test_rnnt_and_rna_against_enumerated_alignments(blank):
    rng = np.random.RandomState(3)
    t_lens, u_lens = np.array([4, 3, 2], np.int32), np.array([2, 1, 0], np.int32)
    acts = rng.randn(3, 4, 3, 5).astype(np.float64)
    labels = np.array([[1, 2], [3, 99], [-7, 99]], np.int32)  # padded labels are garbage
    labels = np.where(labels == blank, 2, labels)
    got = rnnt_loss(tf.constant(acts), tf.constant(labels), t_lens, u_lens, blank_label=blank).numpy()
    lp = log_softmax(acts)
    for b in range(3):
        want = rnnt_reference(lp[b, :t_lens[b], :u_lens[b] + 1], labels[b, :u_lens[b]], blank)
        np.testing.assert_allclose(got[b], want, rtol=1e-10)
    # log-probabilities pass the internal log-softmax unchanged (the returnn-experiments configs give them)
    np.testing.assert_allclose(rnnt_loss(tf.constant(lp), labels, t_lens, u_lens, blank).numpy(), got, rtol=1e-10)
    got_rna = rna_loss(tf.constant(lp), tf.constant(labels), t_lens, u_lens, blank_label=blank).numpy()
    for b in range(3):
        want = rna_reference(lp[b, :t_lens[b], :u_lens[b] + 1], labels[b, :u_lens[b]], blank)
        np.testing.assert_allclose(got_rna[b], want, rtol=1e-10)


def test_gradients_finite_and_numeric_in_a_tf_function():
    rng = np.random.RandomState(5)
    acts = tf.Variable(rng.randn(2, 3, 3, 4))
    labels = tf.constant([[1, 2], [3, 0]], tf.int32)
    t_lens, u_lens = tf.constant([3, 2]), tf.constant([2, 1])

    @tf.function
    def loss_and_grad():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(rnnt_loss(acts, labels, t_lens, u_lens, 0))
            loss_rna = tf.reduce_sum(rna_loss(tf.nn.log_softmax(acts), labels, t_lens, u_lens, 0))
        return loss, tape.gradient([loss, loss_rna], acts)

    loss, grad = loss_and_grad()
    grad = grad.numpy()
    assert np.all(np.isfinite(grad))
    assert np.abs(grad[1, 2:]).max() == 0 and np.abs(grad[1, :, 2:]).max() == 0  # padding gets no gradient
    eps, idx = 1e-6, (0, 1, 1, 2)
    bumped = acts.numpy().copy()
    bumped[idx] += eps
    plus = rnnt_loss(bumped, labels, t_lens, u_lens, 0).numpy().sum() + rna_loss(
        tf.nn.log_softmax(bumped), labels, t_lens, u_lens, 0).numpy().sum()
    base = rnnt_loss(acts, labels, t_lens, u_lens, 0).numpy().sum() + rna_loss(
        tf.nn.log_softmax(acts), labels, t_lens, u_lens, 0).numpy().sum()
    np.testing.assert_allclose((plus - base) / eps, grad[idx], rtol=1e-4)
