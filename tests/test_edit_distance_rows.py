"""The edit-distance row ops (returnn/tf/util/edit_distance_rows.py) against a plain Python
Levenshtein row, written as RETURNN's native kernels state it (NextEditDistanceRowOp,
NextEditDistanceReduceOp with optimal_completion): padded reference frames, length-0 references,
ended hypotheses, a blank label."""
import numpy as np
import tensorflow as tf

from returnn.tf.util.edit_distance_rows import initial_row, next_edit_distance_row, optimal_completion_distances
from test_losses import levenshtein


def ref_next_row(last, a, a_n, ended, b, b_len):
    """One batch entry, the kernel's loop: the new row and the row's last entry repeated after b_len."""
    out = np.zeros_like(last)
    if not ended:
        dist = a_n + 1
        out[0] = dist
        for j in range(1, b_len + 1):
            dist = min(last[j] + 1, dist + 1, last[j - 1] + (a != b[j - 1]))
            out[j] = dist
    else:
        for j in range(0, b_len + 1):
            dist = out[j] = last[j]
    out[b_len + 1:] = dist
    return out


def ref_opt_completion(last, v, a_n, ended, b, b_len, blank=None):
    if ended or v == blank:
        return min(last[:b_len + 1])
    return min(ref_next_row(last, v, a_n, False, b, b_len)[:b_len + 1])


def run_rows(hyps, refs, pad=7, ended_after=None):
    """The rows of hypotheses grown label by label (the ops), with the references padded by ``pad``."""
    n_b = max(len(r) for r in refs)
    b = np.array([list(r) + [pad] * (n_b - len(r)) for r in refs], np.int32)
    b_len = np.array([len(r) for r in refs], np.int32)
    row = initial_row(tf.constant(len(refs)), tf.constant(n_b)).numpy()
    rows = [row]
    for t in range(max(len(h) for h in hyps)):
        a = np.array([h[t] if t < len(h) else pad for h in hyps], np.int32)
        ended = np.array([t >= len(h) for h in hyps])
        row = next_edit_distance_row(row, a, tf.constant(t), ended, b, b_len).numpy()
        rows.append(row)
    return rows, b, b_len


def test_rows_match_levenshtein_of_prefixes():
    rng = np.random.RandomState(3)
    refs = [[1, 2, 3, 2], [], [4], [2, 2, 1, 0, 3, 1]]
    hyps = [[1, 3, 3], [2, 1], [4, 4, 4, 1], [2]]
    for _ in range(3):
        refs.append(list(rng.randint(0, 5, size=rng.randint(0, 7))))
        hyps.append(list(rng.randint(0, 5, size=rng.randint(1, 7))))
    rows, b, b_len = run_rows(hyps, refs)
    for i, (h, r) in enumerate(zip(hyps, refs)):
        for t in range(len(rows)):
            prefix = h[:min(t, len(h))]
            want = [levenshtein(prefix, r[:j]) for j in range(len(r) + 1)]
            got = rows[t][i]
            assert list(got[:len(r) + 1]) == want, (i, t)
            if t == 0:  # RETURNN's start row: range(T_b + 1), the padded positions too
                assert list(got) == list(range(len(got)))
            else:  # after a step, padded frames repeat the last entry
                assert (got[len(r) + 1:] == want[-1]).all(), (i, t)


def test_row_op_equals_kernel_loop_with_garbage_rows():
    """Arbitrary (inconsistent) previous rows and positions: the op follows the kernel, entry by entry."""
    rng = np.random.RandomState(5)
    for _ in range(20):
        batch, n_b = 4, rng.randint(1, 6)
        last = rng.randint(0, 9, size=(batch, n_b + 1)).astype(np.int32)
        a = rng.randint(0, 4, size=batch).astype(np.int32)
        a_n = rng.randint(0, 6, size=batch).astype(np.int32)
        ended = rng.rand(batch) < 0.3
        b = rng.randint(0, 4, size=(batch, n_b)).astype(np.int32)
        b_len = rng.randint(0, n_b + 1, size=batch).astype(np.int32)
        got = next_edit_distance_row(last, a, a_n, ended, b, b_len).numpy()
        for i in range(batch):
            np.testing.assert_array_equal(got[i], ref_next_row(last[i], a[i], a_n[i], ended[i], b[i], b_len[i]))


def test_optimal_completions_equal_kernel_loop():
    rng = np.random.RandomState(7)
    for blank in (None, 2):
        for _ in range(20):
            batch, n_b, n_labels = 3, rng.randint(1, 6), 5
            last = rng.randint(0, 9, size=(batch, n_b + 1)).astype(np.int32)
            a_n = rng.randint(0, 6, size=batch).astype(np.int32)
            ended = rng.rand(batch) < 0.3
            b = rng.randint(0, 6, size=(batch, n_b)).astype(np.int32)  # 5: no label (a padded frame's garbage)
            b_len = rng.randint(0, n_b + 1, size=batch).astype(np.int32)
            got = optimal_completion_distances(last, n_labels, a_n, ended, b, b_len, blank).numpy()
            for i in range(batch):
                want = [ref_opt_completion(last[i], v, a_n[i], ended[i], b[i], b_len[i], blank)
                        for v in range(n_labels)]
                assert list(got[i]) == want, (blank, i, last[i], b[i], b_len[i], a_n[i], ended[i])


def test_optimal_completions_are_prefix_distances():
    """On consistent rows: for label v, min over j of levenshtein(prefix + [v], ref[:j])."""
    refs = [[1, 2, 3], [], [3, 3, 0, 1]]
    hyps = [[1, 3], [2, 2], [3]]
    rows, b, b_len = run_rows(hyps, refs)
    for t in range(len(rows)):
        got = optimal_completion_distances(rows[t], 4, t, np.zeros(3, bool), b, b_len).numpy()
        for i, (h, r) in enumerate(zip(hyps, refs)):
            if t > len(h):
                continue
            prefix = h[:t]
            want = [min(levenshtein(prefix + [v], r[:j]) for j in range(len(r) + 1)) for v in range(4)]
            assert list(got[i]) == want, (i, t)


def test_against_returnn_native_ops():
    """RETURNN's compiled kernels (tests/returnn_goldens/make_edit_distance_op_goldens.py) on inconsistent rows,
    ended hypotheses, length-0 and padded references, with and without a blank."""
    import os
    path = os.path.join(os.path.dirname(__file__), "data", "returnn_native_ops", "edit_distance_rows.npz")
    g = np.load(path)
    n_cases = len({k.split("_")[0] for k in g.files})
    assert n_cases == 8
    for i in range(n_cases):
        c = {k[len("c%i_" % i):]: g[k] for k in g.files if k.startswith("c%i_" % i)}
        row = next_edit_distance_row(c["last"], c["a"], c["a_n"], c["ended"], c["b"], c["b_len"]).numpy()
        np.testing.assert_array_equal(row, c["row"], err_msg="case %i" % i)
        blank = None if int(c["blank"]) < 0 else int(c["blank"])
        opt = optimal_completion_distances(c["last"], c["opt"].shape[1], c["a_n"], c["ended"], c["b"], c["b_len"],
                                           blank).numpy()
        np.testing.assert_array_equal(opt, c["opt"], err_msg="case %i" % i)
