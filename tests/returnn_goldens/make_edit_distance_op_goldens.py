"""Records RETURNN's native edit-distance ops (``NextEditDistanceRowOp``, ``NextEditDistanceReduceOp``
with ``optimal_completion``, compiled for CPU) on random rows: inconsistent previous rows, ended
hypotheses, length-0 and padded references (garbage labels there), without and with a blank label.

Run with the real RETURNN (its venv), from outside the repository::

    cd /tmp && DISABLE_CUDA=1 /work/main/.bench-venv-returnn/bin/python \\
        /work/main/tests/returnn_goldens/make_edit_distance_op_goldens.py \\
        /work/main/tests/data/returnn_native_ops/edit_distance_rows.npz

``tests/test_edit_distance_rows.py`` compares returnn/tf/util/edit_distance_rows.py with it.
"""
import sys

import numpy as np
import tensorflow as tf
from returnn.tf.native_op import next_edit_distance_reduce, next_edit_distance_row

N_LABELS = 5


def main(out: str) -> None:
    tf.compat.v1.disable_eager_execution()
    sess = tf.compat.v1.Session()
    rng = np.random.RandomState(11)
    cases = {}
    for i in range(8):
        batch, n_b = 4, rng.randint(1, 6)
        last = rng.randint(0, 9, size=(batch, n_b + 1)).astype(np.int32)
        a = rng.randint(0, N_LABELS, size=batch).astype(np.int32)
        a_n = rng.randint(0, 6, size=batch).astype(np.int32)
        ended = rng.rand(batch) < 0.3
        b = rng.randint(0, N_LABELS + 1, size=(batch, n_b)).astype(np.int32)
        b_len = rng.randint(0, n_b + 1, size=batch).astype(np.int32)
        b_len[0] = 0
        blank = [None, 2][i % 2]
        row = next_edit_distance_row(tf.constant(last), tf.constant(a), tf.constant(a_n), tf.constant(ended),
                                     tf.constant(b), tf.constant(b_len))
        opt = next_edit_distance_reduce(tf.constant(last), tf.expand_dims(tf.range(N_LABELS), 0), tf.constant(a_n),
                                        tf.constant(ended), tf.constant(b), tf.constant(b_len),
                                        optimal_completion=True, a_blank_idx=blank)
        values = dict(last=last, a=a, a_n=a_n, ended=ended, b=b, b_len=b_len,
                      blank=np.int32(-1 if blank is None else blank), row=sess.run(row), opt=sess.run(opt))
        cases.update(("c%i_%s" % (i, k), v) for k, v in values.items())
    np.savez(out, **cases)


if __name__ == "__main__":
    main(sys.argv[1])
