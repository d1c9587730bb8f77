"""Losses against hand-computed values (ctc: by enumerating all alignments in numpy)."""
import itertools

import numpy as np
import pytest
import tensorflow as tf

from returnn.errors import NetworkError
from data_utils import spec, value
from returnn.tensor import Data, SpatialDim, batch_dim
from returnn.tf.losses import LOSS_CLASSES, get_loss_class


def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def output(logits, lens, with_logits=True, has_time=True):
    probs = np.exp(log_softmax(logits)).astype(np.float32)
    return value(tf.constant(probs), None if lens is None else tf.constant(lens, tf.int32),
                       spec(logits.shape[-1], has_time=has_time),
                       logits=tf.constant(logits.astype(np.float32)) if with_logits else None)


def sparse_target(labels, lens, dim, has_time=True):
    return value(tf.constant(labels, tf.int32), None if lens is None else tf.constant(lens, tf.int32),
                       spec(dim, sparse=True, has_time=has_time))


def compute(name, out, tgt, train=True, **opts):
    """The loss values of one batch, as a training step computes them (``train``)."""
    values = get_loss_class(name, "output")("output", opts, "classes").compute(out, tgt, train=train)
    as_np = {k: (None if v is None else float(v.numpy())) for k, v in vars(values).items()}
    return as_np


LOGITS = np.array([
    [[2.0, 0.5, -1.0], [0.1, 0.2, 0.3], [1.0, 3.0, 0.0], [0.0, 0.0, 5.0]],
    [[0.5, 1.5, 0.0], [9.0, 9.0, 9.0], [9.0, 9.0, 9.0], [9.0, 9.0, 9.0]],
], np.float32)
LABELS = np.array([[0, 2, 1, 0], [0, 77, -3, 5]], np.int32)  # padded labels are garbage
LENS = [4, 1]


@pytest.mark.parametrize("with_logits", [True, False])
def test_ce_masked_sum_and_frame_error(with_logits):
    vals = compute("ce", output(LOGITS, LENS, with_logits), sparse_target(LABELS, LENS, 3))
    lp = log_softmax(LOGITS.astype(np.float64))
    expected = -(lp[0, 0, 0] + lp[0, 1, 2] + lp[0, 2, 1] + lp[0, 3, 0] + lp[1, 0, 0])
    assert vals["loss_sum"] == pytest.approx(expected, rel=1e-5)
    assert vals["norm"] == 5.0 and vals["error_norm"] == 5.0
    # argmax per real frame: [0, 2, 1, 2] vs [0, 2, 1, 0] -> 1 wrong; seq 2: argmax 1 vs 0 -> wrong
    assert vals["error_sum"] == 2.0


@pytest.mark.parametrize("with_logits", [True, False])
def test_ce_output_with_more_padding_than_the_target(with_logits):
    """An output of the target's lengths with more padded frames (reinterpret_data's size_base keeps an
    upsampled axis's extra frames, as RETURNN): the same loss as on the real frames alone."""
    longer = np.concatenate([LOGITS, np.full([2, 2, 3], 7.0, np.float32)], axis=1)
    vals = compute("ce", output(longer, LENS, with_logits), sparse_target(LABELS, LENS, 3))
    assert vals == compute("ce", output(LOGITS, LENS, with_logits), sparse_target(LABELS, LENS, 3))


def test_mse_target_with_more_padding_than_the_output():
    out = np.arange(2 * 3 * 2, dtype=np.float32).reshape(2, 3, 2)
    tgt = np.ones([2, 5, 2], np.float32)
    vals = compute("mse", value(tf.constant(out), tf.constant([3, 1]), spec(2)),
                   value(tf.constant(tgt), tf.constant([3, 1]), spec(2)))
    expected = ((out[0] - 1) ** 2).mean(-1).sum() + ((out[1, 0] - 1) ** 2).mean()
    assert vals == {"loss_sum": pytest.approx(expected), "norm": 4.0, "error_sum": 4.0, "error_norm": 4.0}


def test_ce_uses_the_logits_of_a_softmax_output_far_below_the_probability_floor():
    """A label with probability e^-40 (below float32 softmax resolution): the loss is the exact 40
    from the logits, and its gradient is the full softmax gradient, not the zero of a clipped log."""
    logits = tf.Variable(np.array([[[0.0, 40.0, 0.0]]], np.float32))
    lens = np.array([1], np.int32)
    target = sparse_target(np.array([[0]]), lens, 3)
    with tf.GradientTape() as tape:
        out = value(tf.nn.softmax(logits), tf.constant(lens), spec(3), logits=logits)
        values = get_loss_class("ce", "output")("output", {}, "classes").compute(out, target)
    np.testing.assert_allclose(values.loss_sum.numpy(), 40.0, rtol=1e-5)
    grad = tape.gradient(values.loss_sum, logits).numpy()[0, 0]
    np.testing.assert_allclose(grad, [-1.0, 1.0, 0.0], atol=1e-5)


def test_ce_label_smoothing():
    ls = 0.2
    vals = compute("ce", output(LOGITS, LENS), sparse_target(LABELS, LENS, 3), label_smoothing=ls)
    lp = log_softmax(LOGITS.astype(np.float64))
    expected = 0.0
    best = -((1 - ls) * np.log(1 - ls) + 2 * (ls / 2) * np.log(ls / 2))  # RETURNN subtracts the best value
    for b, t in [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0)]:
        q = np.full(3, ls / 2) + (1 - ls - ls / 2) * np.eye(3)[LABELS[b, t]]  # 1 - ls on the label, ls/(V-1) else
        expected -= (q * lp[b, t]).sum() + best
    assert vals["loss_sum"] == pytest.approx(expected, rel=1e-5)


def test_ce_focal_loss_input_type_and_upper_bound():
    vals = compute("ce", output(LOGITS, LENS), sparse_target(LABELS, LENS, 3), focal_loss_factor=2.0)
    lp = log_softmax(LOGITS.astype(np.float64))
    frames = [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0)]
    expected = sum(-lp[b, t, LABELS[b, t]] * (1 - np.exp(lp[b, t, LABELS[b, t]])) ** 2 for b, t in frames)
    assert vals["loss_sum"] == pytest.approx(expected, rel=1e-5)
    logits_out = value(tf.constant(LOGITS), LENS, spec(3))  # the output holds logits, not probabilities
    vals = compute("ce", logits_out, sparse_target(LABELS, LENS, 3), input_type="logits")
    assert vals["loss_sum"] == pytest.approx(sum(-lp[b, t, LABELS[b, t]] for b, t in frames), rel=1e-5)
    vals = compute("ce", output(LOGITS, LENS), sparse_target(LABELS, LENS, 3), fake_upper_bound=1.0)
    assert vals["loss_sum"] == pytest.approx(sum(min(-lp[b, t, LABELS[b, t]], 1.0) for b, t in frames), rel=1e-5)
    with pytest.raises(NetworkError, match="'output'.*input_type"):
        compute("ce", output(LOGITS, LENS), sparse_target(LABELS, LENS, 3), input_type="log")


def test_ce_without_time_axis_and_soft_targets():
    logits = LOGITS[:, 0]
    vals = compute("ce", output(logits, None, has_time=False), sparse_target(np.array([0, 0]), None, 3, has_time=False))
    lp = log_softmax(logits.astype(np.float64))
    assert vals["loss_sum"] == pytest.approx(-(lp[0, 0] + lp[1, 0]), rel=1e-5)
    assert vals["norm"] == 2.0 and vals["error_sum"] == 1.0
    soft = np.array([[0.5, 0.5, 0.0], [0.0, 0.25, 0.75]], np.float32)
    tgt = value(tf.constant(soft), None, spec(3, has_time=False))
    vals = compute("ce", output(logits, None, has_time=False), tgt)
    assert vals["loss_sum"] == pytest.approx(-(soft * lp).sum(), rel=1e-5)


def test_mse_masked():
    out = np.arange(2 * 3 * 2, dtype=np.float32).reshape(2, 3, 2)
    tgt = np.ones_like(out)
    tgt[1, 1:] = np.nan  # padding of the target is garbage
    vals = compute("mse", value(tf.constant(out), tf.constant([3, 1]), spec(2)),
                   value(tf.constant(tgt), tf.constant([3, 1]), spec(2)))
    # real frames: seq 0 all 3 frames, seq 1 frame 0; RETURNN's mse: the mean over the features per frame
    expected = ((out[0] - 1) ** 2).mean(-1).sum() + ((out[1, 0] - 1) ** 2).mean()
    # RETURNN's default frame error: argmax of the output (1) against the target's (0): every real frame
    assert vals == {"loss_sum": pytest.approx(expected), "norm": 4.0, "error_sum": 4.0, "error_norm": 4.0}


# ------------------------------------------------------------------ ctc

def ctc_collapse(path, blank):
    out = []
    prev = None
    for s in path:
        if s != prev and s != blank:
            out.append(s)
        prev = s
    return out


def ctc_nll_bruteforce(logits, label):
    """-log sum over all length-T paths that collapse to ``label`` (blank = last class)."""
    lp = log_softmax(logits.astype(np.float64))
    n_time, n_cls = lp.shape
    total = 0.0
    for path in itertools.product(range(n_cls), repeat=n_time):
        if ctc_collapse(path, n_cls - 1) == list(label):
            total += np.exp(sum(lp[t, s] for t, s in enumerate(path)))
    return -np.log(total)


def levenshtein(a, b):
    d = np.arange(len(b) + 1)
    for i, x in enumerate(a, 1):
        prev, d[0] = d[0], i
        for j, y in enumerate(b, 1):
            prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (x != y))
    return d[len(b)]


CTC_LOGITS = np.array([
    # seq 0: 4 frames, greedy path [0, 2, 0, 1] -> "0 0 1"
    [[2.0, 0.0, 0.5], [0.0, 0.3, 1.0], [1.5, 0.2, 0.1], [0.1, 1.2, 0.3]],
    # seq 1: 3 real frames, greedy path [1, 1, 2] -> "1"; frame 3 is padding (garbage)
    [[0.2, 1.0, 0.1], [0.0, 2.0, 1.0], [0.3, 0.1, 0.9], [50.0, -50.0, 7.0]],
    # seq 2: 2 real frames, greedy path [2, 2] -> ""
    [[0.0, 0.1, 3.0], [0.5, 0.0, 0.7], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]],
], np.float32)
CTC_OUT_LENS = [4, 3, 2]
CTC_LABELS = np.array([[0, 1], [1, 1], [0, 9]], np.int32)  # seq 1: "1 1" needs a blank in between
CTC_LABEL_LENS = [2, 2, 1]


@pytest.mark.parametrize("with_logits", [True, False])
def test_ctc_against_enumerated_alignments_and_label_error(with_logits):
    out = output(CTC_LOGITS, CTC_OUT_LENS, with_logits)
    vals = compute("ctc", out, sparse_target(CTC_LABELS, CTC_LABEL_LENS, 2))
    expected = sum(ctc_nll_bruteforce(CTC_LOGITS[b, :n], CTC_LABELS[b, :m])
                   for b, (n, m) in enumerate(zip(CTC_OUT_LENS, CTC_LABEL_LENS)))
    assert vals["loss_sum"] == pytest.approx(expected, rel=1e-4)
    assert vals["norm"] == float(sum(CTC_LABEL_LENS))  # RETURNN's norm: the target labels, not the frames
    greedy = [ctc_collapse(CTC_LOGITS[b, :n].argmax(-1), 2) for b, n in enumerate(CTC_OUT_LENS)]
    assert greedy == [[0, 0, 1], [1], []]
    errors = sum(levenshtein(g, CTC_LABELS[b, :m]) for b, (g, m) in enumerate(zip(greedy, CTC_LABEL_LENS)))
    assert errors == 3
    assert vals["error_sum"] == errors and vals["error_norm"] == float(sum(CTC_LABEL_LENS))


def test_ctc_ignores_padding_and_has_gradient_in_tf_function():
    garbled = CTC_LOGITS.copy()
    garbled[1, 3] = [-9.0, 9.0, 0.0]
    garbled[2, 2:] = 4.0
    a = compute("ctc", output(CTC_LOGITS, CTC_OUT_LENS), sparse_target(CTC_LABELS, CTC_LABEL_LENS, 2))
    b = compute("ctc", output(garbled, CTC_OUT_LENS), sparse_target(CTC_LABELS, CTC_LABEL_LENS, 2))
    assert a == pytest.approx(b)
    loss = get_loss_class("ctc", "out")("out", {}, "classes")

    @tf.function(input_signature=[tf.TensorSpec([None, None, 3]), tf.TensorSpec([None], tf.int32),
                                  tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None], tf.int32)])
    def grad(logits, lens, labels, label_lens):
        with tf.GradientTape() as tape:
            tape.watch(logits)
            out = value(tf.nn.softmax(logits), lens, spec(3), logits=logits)
            values = loss.compute(out, value(labels, label_lens, spec(2, sparse=True)))
        return values.loss_sum, tape.gradient(values.loss_sum, logits)

    loss_sum, g = grad(tf.constant(CTC_LOGITS), tf.constant(CTC_OUT_LENS), tf.constant(CTC_LABELS),
                       tf.constant(CTC_LABEL_LENS))
    assert float(loss_sum) == pytest.approx(a["loss_sum"], rel=1e-5)
    g = g.numpy()
    assert np.isfinite(g).all() and np.abs(g[1, 3]).max() == 0.0 and np.abs(g[0]).max() > 0
    np.testing.assert_allclose(g.sum(-1), 0.0, atol=1e-5)  # d/dlogits of a log-softmax based loss


def test_loss_registry_errors():
    assert set(LOSS_CLASSES) >= {"ce", "mse", "ctc"}
    with pytest.raises(NetworkError, match="layer 'x': unknown loss 'y' \\(known: as_is, bin_ce, bleu, ce, ctc, edit_distance, "):
        get_loss_class("y", "x")
    with pytest.raises(NetworkError, match="'x'.*focal"):
        get_loss_class("ce", "x")("x", {"focal": 1}, "classes")
    # RETURNN's loss classes that are not here say why (RASR's, via_layer's fast_bw source)
    with pytest.raises(NetworkError, match="layer 'out': loss 'via_layer' is not available here: .*fast_bw"):
        get_loss_class("via_layer", "out")
    with pytest.raises(NetworkError, match="loss 'sprint' is not available here: it needs RASR"):
        get_loss_class("sprint", "out")


def test_as_is_and_edit_distance():
    per_frame = Data("loss", dims=[batch_dim, SpatialDim("time")])  # (B, T): one loss value per frame
    out = value(tf.constant([[1.0, 2.0, 50.0], [3.0, 40.0, 40.0]]), [2, 1], per_frame)
    vals = compute("as_is", out, None)
    assert (vals["loss_sum"], vals["norm"], vals["error_sum"]) == (6.0, 3.0, None)
    vals = compute("as_is", out, None, as_error=True)
    assert (vals["loss_sum"], vals["error_sum"], vals["error_norm"]) == (0.0, 6.0, 3.0)
    vals = compute("edit_distance", output(LOGITS, LENS), sparse_target(LABELS, LENS, 3))
    hyp = [np.argmax(LOGITS[0], -1)[:4], np.argmax(LOGITS[1], -1)[:1]]
    ref = [LABELS[0, :4], LABELS[1, :1]]
    assert vals["error_sum"] == sum(_levenshtein(list(h), list(r)) for h, r in zip(hyp, ref))
    assert vals["error_norm"] == 5.0 and vals["loss_sum"] == 0.0


def _levenshtein(a, b):
    d = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        prev, d[0] = d[0], i
        for j, y in enumerate(b, 1):
            prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (x != y))
    return d[len(b)]


def test_ctc_ignore_longer_outputs_than_inputs_and_option_checks():
    """RETURNN's ctc_opts: a target longer than the output counts 0 instead of a huge loss."""
    import numpy as np
    import pytest
    from data_utils import lo
    from returnn.errors import NetworkError
    from returnn.tf.losses import CtcLoss
    logits = np.random.RandomState(0).randn(2, 3, 4).astype("float32")

    def loss(opts, n):
        out = lo(logits[:n], [3, 2][:n])
        target = lo(np.array([[1, 2, 0, 0], [1, 2, 1, 2]], "int32")[:n], [2, 4][:n], dim=3, sparse=True)
        return float(CtcLoss("ctc", opts, "classes").compute_btf(out, target).loss_sum)

    ignore = {"beam_width": 1, "ctc_opts": {"ignore_longer_outputs_than_inputs": True}}
    assert loss({}, 2) > loss({}, 1) + 100  # the infeasible second sequence
    assert loss(ignore, 2) == pytest.approx(loss({}, 1), rel=1e-5)
    with pytest.raises(NetworkError, match="'ctc'.*unknown ctc_opts nope"):
        CtcLoss("ctc", {"ctc_opts": {"nope": 1}}, "classes")


def test_sampling_loss_is_the_full_softmax_cross_entropy():
    import numpy as np
    import pytest
    from data_utils import lo
    from returnn.tf.losses import CrossEntropyLoss, SamplingLoss
    logits = np.random.RandomState(0).randn(2, 3, 5).astype("float32")
    out = lo(logits, [3, 2])
    out.logits = out.tensor
    target = lo(np.array([[1, 2, 4], [0, 3, 999]], "int32"), [3, 2], dim=5, sparse=True)
    full = SamplingLoss("out", {"num_sampled": 3, "use_full_softmax": True, "nce_loss": False}, "data")
    assert float(full.compute(out, target).loss_sum) == pytest.approx(
        float(CrossEntropyLoss("out", {}, "data").compute(out, target).loss_sum))
    with pytest.raises(NetworkError, match="'out'.*num_sampled must be an int >= 1"):
        SamplingLoss("out", {"num_sampled": 0}, "data")


def test_ctc_output_in_log_space_equals_logits():
    """output_in_log_space: the output holds log-probabilities (e.g. a log_softmax layer); the loss
    equals the one from the same network's logits; RETURNN's native-CTC ctc_opts are accepted."""
    import numpy as np
    import pytest
    import tensorflow as tf
    from data_utils import lo
    from returnn.tf.losses import CtcLoss
    logits = np.random.RandomState(2).randn(2, 4, 4).astype("float32")
    target = lo(np.array([[1, 2], [0, 0]], "int32"), [2, 1], dim=3, sparse=True)
    ref = lo(logits, [4, 3])
    ref.logits = ref.tensor
    log_probs = lo(tf.nn.log_softmax(logits).numpy(), [4, 3])
    opts = {"output_in_log_space": True, "use_native": True, "beam_width": 1,
            "ctc_opts": {"logits_normalize": False, "grad_wrt_softmax_in": True}}
    assert float(CtcLoss("ctc", opts, "classes").compute_btf(log_probs, target).loss_sum) == pytest.approx(
        float(CtcLoss("ctc", {}, "classes").compute_btf(ref, target).loss_sum), rel=1e-5)


@pytest.mark.parametrize("name", sorted(LOSS_CLASSES))
def test_objective_is_the_frame_sum_unless_use_normalized_loss(name):
    """RETURNN's Loss option for every loss: the training objective is loss_sum (what L2 weighs
    against), divided by norm only with use_normalized_loss; anything but a bool is one line."""
    from returnn.tf.losses import LossValues
    values = LossValues(tf.constant(12.0), tf.constant(4.0))
    cls = get_loss_class(name, "output")
    base = {"use_full_softmax": True} if name == "sampling_loss" else {}
    if name == "expected_loss":  # its inner loss is required (tests/test_search_train.py)
        base = {"loss": {"class": "bleu"}, "loss_kind": "error"}
    if name == "triplet_loss":  # its margin is required (RETURNN's positional argument)
        base = {"margin": 1.0}
    assert float(cls("output", dict(base), "classes").objective(values)) == 12.0
    assert float(cls("output", dict(base, use_normalized_loss=True), "classes").objective(values)) == 3.0
    with pytest.raises(NetworkError, match=r"^layer 'output': loss_opts use_normalized_loss must be True or False, "
                                           r"got 'yes'$"):
        cls("output", dict(base, use_normalized_loss="yes"), "classes")
    # RETURNN's Loss option scale (every loss): a factor in the objective, 0 leaves the loss out
    assert float(cls("output", dict(base, scale=0.5), "classes").objective(values)) == 6.0
    assert float(cls("output", dict(base, scale=2, use_normalized_loss=True), "classes").objective(values)) == 6.0
    assert float(cls("output", dict(base, scale=0), "classes").objective(values)) == 0.0
    with pytest.raises(NetworkError, match=r"^layer 'output': loss_opts scale must be a number, got 'x'$"):
        cls("output", dict(base, scale="x"), "classes")


def test_safe_log_value_is_exactly_log_max_and_gradient_identity():
    """RETURNN's safe_log: log(max(p, eps)) for every p (also p < 0, where a stop_gradient trick
    rounds to log(0) = -inf), with the gradient of log going through (maximum_with_identity_grad)."""
    from returnn.tf.losses import safe_log
    p = tf.constant([-0.9, 0.0, 1e-30, 0.5], tf.float32)
    with tf.GradientTape() as tape:
        tape.watch(p)
        y = safe_log(p)
    np.testing.assert_allclose(y.numpy(), np.log(np.maximum(p.numpy(), np.float32(1e-20))), rtol=1e-6)
    np.testing.assert_allclose(tape.gradient(y, p).numpy(), 1.0 / np.maximum(p.numpy(), np.float32(1e-20)),
                               rtol=1e-6)


def test_ctc_error_in_evaluation_comes_from_beam_search_as_in_returnn():
    """Two frames with p(a) = 0.4, p(blank) = 0.6: the best path is blank blank (""), the best
    labelling is "a" (0.64 > 0.36). Training decodes greedily, evaluation with a beam search."""
    probs = np.array([[[0.4, 0.6], [0.4, 0.6]]], np.float32)
    out = value(np.log(probs), [2], spec(2, name="o"))
    out = out.with_tensor(out.tensor, logits=out.tensor)
    target = value(np.array([[0]], np.int32), [1], spec(1, sparse=True, name="t", time=SpatialDim("labels")))
    loss = get_loss_class("ctc", "l")("l", {}, "classes")
    assert float(loss.compute(out, target, train=True).error_sum) == 1.0  # "" against "a"
    assert float(loss.compute(out, target, train=False).error_sum) == 0.0
    greedy = get_loss_class("ctc", "l")("l", {"beam_width": 1}, "classes")
    assert float(greedy.compute(out, target, train=False).error_sum) == 1.0
    with pytest.raises(NetworkError, match="use_native needs beam_width 1"):
        get_loss_class("ctc", "l")("l", {"use_native": True}, "classes")


def test_losses_without_cost_report_only_their_error():
    """RETURNN's edit_distance and as_is with as_error have no cost: no score, only the error."""
    from returnn.tf.reporting import ScoreAccumulator, step_costs
    stats = np.array([[0.0, 0.0, 3.0, 10.0], [2.0, 4.0, 1.0, 4.0]])
    acc = ScoreAccumulator(["dist", "output"])
    acc.add(stats)
    assert acc.scores() == {"error_dist": 0.3, "score_output": 0.5, "error_output": 0.25}
    assert step_costs(["dist", "output"], stats) == "error:dist 0.3, cost:output 0.5, error:output 0.25"
    out = value(np.ones((1, 2, 1), np.float32), [2], spec(1, name="o"))
    assert compute("as_is", out, None, as_error=True)["norm"] == 0.0


@pytest.mark.parametrize("name", ["ce", "mse", "ctc", "edit_distance"])
def test_uint8_sparse_labels_as_int32(name):
    """Class indices stored as uint8 (RETURNN's enwik8 demo declares ``"dtype": "uint8"``): the losses
    read them as int32 labels, as RETURNN does; same values as with int32 labels."""
    labels = np.array([[0, 2, 1, 0], [0, 1, 2, 2]], np.int32)
    if name == "ctc":  # class 2 is the blank of a 3-class CTC output: not a label (TF's CTC kernel refuses it)
        labels = np.minimum(labels, 1)
    template = spec(3, sparse=True)
    uint8 = value(tf.constant(labels.astype(np.uint8)), LENS, template.copy(dtype="uint8"))
    out = output(LOGITS, LENS)
    expected = compute(name, out, sparse_target(labels, LENS, 3))
    got = compute(name, out, uint8)
    assert got == pytest.approx(expected) and got["norm"] is not None


@pytest.mark.parametrize("in_log_space", [False, True])
def test_edit_distance_ctc_decode(in_log_space):
    """RETURNN's edit_distance with ctc_decode (its TIMIT CTC demo): a dense output of the classes + blank
    (last) is CTC-decoded (repeats merged, blanks dropped) before the edit distance to the target;
    padded frames are not decoded. Peaked scores make the beam search's best path the argmax path."""
    blank = 3
    paths = np.array([[1, 1, blank, 1, 0, 0], [2, blank, 2, 2, 1, 1]])  # argmax per frame
    lens = [5, 3]  # seq 1: the frames after 3 are padding (their 1s must not count)
    logits = np.full(paths.shape + (4,), -8.0, np.float32)
    for b, t in np.ndindex(paths.shape):
        logits[b, t, paths[b, t]] = 8.0
    labels = np.array([[1, 1, 2], [2, 0, 0]], np.int32)
    label_lens = [3, 1]
    probs = np.exp(log_softmax(logits)).astype(np.float32)
    out_tensor = log_softmax(logits).astype(np.float32) if in_log_space else probs
    out = value(tf.constant(out_tensor), lens, spec(4))  # no logits known: safe_log of the probabilities
    opts = {"ctc_decode": True, "output_in_log_space": in_log_space}
    vals = compute("edit_distance", out, sparse_target(labels, label_lens, 3), **opts)
    decoded = [[1, 1, 0], [2, 2]]  # seq 0: 1 1 _ 1 0 -> 1 1 0; seq 1: 2 _ 2 -> 2 2
    expected = sum(_levenshtein(d, list(labels[b, :label_lens[b]])) for b, d in enumerate(decoded))
    assert vals["error_sum"] == expected == 1 + 1
    assert vals["error_norm"] == 4.0 and vals["loss_sum"] == 0.0 and vals["norm"] == 0.0
    loss = get_loss_class("edit_distance", "out")("out", opts, "classes")
    assert loss.expected_output_dim(3) == 4
    with pytest.raises(NetworkError, match="dense output of the target's classes \\+ 1"):
        loss.check_templates(spec(3), spec(3, sparse=True), "classes")
    with pytest.raises(NetworkError, match="needs ctc_decode"):
        get_loss_class("edit_distance", "out")("out", {}, "classes").check_templates(spec(4), spec(3, sparse=True),
                                                                                  "classes")


def test_edit_distance_label_map_maps_and_drops_labels_on_both_sides():
    """RETURNN's label_map (TIMIT's 61 -> 39 phones): labels mapped to None leave the sequence, the
    others are replaced, in the output and in the target, before the edit distance."""
    label_map = {0: 0, 1: 1, 2: 1, 3: None, 4: 2}
    hyp = np.array([[0, 3, 2, 4, 3], [3, 3, 4, 0, 0], [3, 4, 1, 1, 1]], np.int32)
    ref = np.array([[0, 1, 4, 3, 2], [1, 9, 9, 9, 9], [2, 3, 3, 4, 4]], np.int32)
    hyp_lens, ref_lens = [4, 2, 3], [5, 1, 4]

    def mapped(seq):
        return [label_map[x] for x in seq if label_map[x] is not None]
    expected = sum(_levenshtein(mapped(hyp[b, :hyp_lens[b]]), mapped(ref[b, :ref_lens[b]])) for b in range(3))
    unmapped = sum(_levenshtein(list(hyp[b, :hyp_lens[b]]), list(ref[b, :ref_lens[b]])) for b in range(3))
    hyp_spec, ref_spec = spec(5, sparse=True, time=SpatialDim("hyp-time")), spec(5, sparse=True)
    vals = compute("edit_distance", value(tf.constant(hyp), hyp_lens, hyp_spec), value(tf.constant(ref), ref_lens, ref_spec),
                   label_map=label_map)
    assert vals["error_sum"] == expected == 1 + 1 + 2 and unmapped > expected  # 0 1 2|0 1 2 1; -|1; 2 1|1 2
    assert vals["error_norm"] == 10.0  # the target's labels before mapping, as RETURNN's norm
    with pytest.raises(NetworkError, match="'out'.*label_map must map the labels 0..n-1"):
        get_loss_class("edit_distance", "out")("out", {"label_map": {0: 0, 2: 1}}, "classes")


def test_ctc_paths_as_returnn_kernel():
    """CTC per sequence as RETURNN's (TF's CTC kernel): no valid path (repeated labels without the
    frames for a blank between them) costs inf; where RETURNN's kernel fails the step, here an empty
    target costs the all-blank path and a target longer than its frames inf (0 when ignored)."""
    from returnn.tf.losses_ctc import collapse_repeated, ctc_kernel_loss
    rng = np.random.RandomState(3)
    logits = rng.randn(4, 4, 4).astype(np.float32)  # (T, B, 3 labels + blank)
    labels = tf.constant([[1, 1, 2], [2, 0, 0], [0, 0, 0], [1, 2, 0]], tf.int32)
    lens, frames = tf.constant([3, 1, 0, 2]), tf.constant([3, 4, 2, 1])
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    loss = ctc_kernel_loss(tf.constant(logits), frames, labels, lens, 3, ignore_longer=False).numpy()
    assert np.isinf(loss[0]) and np.isinf(loss[3])
    assert loss[2] == pytest.approx(-log_probs[:2, 2, 3].sum(), rel=1e-5)  # the all-blank path of 2 frames
    # one label in 4 frames: the sum over its paths (blanks around one run of the label)
    paths = [(-1,) * a + (2,) * r + (-1,) * (4 - a - r) for a in range(4) for r in range(1, 5 - a)]
    probs = [np.prod([np.exp(log_probs[t, 1, 3 if c < 0 else c]) for t, c in enumerate(p)]) for p in paths]
    assert loss[1] == pytest.approx(-np.log(sum(probs)), rel=1e-5)
    ignored = ctc_kernel_loss(tf.constant(logits), frames, labels, lens, 3, ignore_longer=True).numpy()
    assert np.isinf(ignored[0]) and ignored[3] == 0.0  # no path: still inf; too long: ignored
    # ctc_merge_repeated False: each output label is one target label (one label in 2 frames: "x _" or "_ x")
    one = ctc_kernel_loss(tf.constant(logits[:2, 1:2]), tf.constant([2]), tf.constant([[2]]), tf.constant([1]), 3,
                          ignore_longer=False, merge_repeated=False).numpy()
    p = np.exp(log_probs[:2, 1])
    assert one[0] == pytest.approx(-np.log(p[0, 2] * p[1, 3] + p[0, 3] * p[1, 2]), rel=1e-5)
    collapsed, new_lens = collapse_repeated(tf.constant([[1, 1, 2, 2, 2, 1], [3, 3, 0, 0, 0, 0]]), tf.constant([6, 3]))
    assert new_lens.numpy().tolist() == [3, 2] and collapsed.numpy()[:, :3].tolist() == [[1, 2, 1], [3, 0, 0]]
