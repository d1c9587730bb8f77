"""Beam search inside the training network (RETURNN's ``search_train_network_layers`` and
``extra.search:``): the searched layers share the trained layers' parameters, give all hypotheses
of the beam with their scores (B * K rows), ``decide`` picks the best, losses on them are computed
over all hypotheses (targets repeated), and a choice fed its target (``search: False``) adds its
score of the target label. Values against a numpy beam search of the same decoder."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from test_losses import levenshtein
from returnn.errors import NetworkError
from returnn.extern_data import data_from_opts
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork
from returnn.tf.returnn_params import returnn_param_shapes, returnn_param_values

V, EMB, MAX_LEN = 5, 3, 6
X = np.random.RandomState(3).randn(3, 4, 2).astype(np.float32)
X_LENS = np.array([4, 2, 3], np.int32)
Y = np.array([[1, 2, 0, 0, 0], [3, 0, 0, 0, 0], [2, 4, 2, 1, 0]], np.int32)
Y_LENS = np.array([3, 2, 5], np.int32)


def _extern():
    return {"data": data_from_opts("data", {"dim": 2}), "classes": data_from_opts("classes", {"dim": V, "sparse": True})}


def _decoder(beam, **choice_opts):
    unit = {
        "embed": {"class": "linear", "from": "prev:output", "n_out": EMB, "activation": None},
        "prob": {"class": "softmax", "from": ["embed", "base:enc"], "target": "classes", "loss": "ce",
                 "loss_only_on_non_search": True},
        "output": dict({"class": "choice", "from": "prob", "target": "classes", "beam_size": beam,
                        "length_normalization": False, "initial_output": 0}, **choice_opts),
        "end": {"class": "compare", "from": "output", "value": 0}}
    # no 'target' on the rec layer: the search ends by 'end' (with one, a search in training runs as long as the
    # target, RETURNN's known sequence length: tests/test_search_train_goldens.py)
    return {"class": "rec", "from": [], "max_seq_len": MAX_LEN, "unit": unit}


def _net(beam, extra=None, layers=("output", "decision"), **choice_opts):
    net_dict = {
        "enc": {"class": "reduce", "mode": "mean", "axes": "T", "from": "data"},
        "output": _decoder(beam, **choice_opts),
        "decision": {"class": "decide", "from": "output", "loss": "search_score", "only_on_search": True}}
    net_dict.update(extra or {})
    return TFNetwork(net_dict, _extern(), search_train_layers=list(layers))


def _batch():
    return {"data": tf.constant(X), "data:seq_len": tf.constant(X_LENS),
            "classes": tf.constant(Y), "classes:seq_len": tf.constant(Y_LENS)}


def _log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


class NumpyDecoder:
    """The decoder of :func:`_decoder` in numpy, from the network's parameters."""

    def __init__(self, net):
        p = returnn_param_values(net)
        self.we, self.be = p["output/rec/embed/W"], p["output/rec/embed/b"]
        self.wp, self.bp = p["output/rec/prob/W"], p["output/rec/prob/b"]

    def logp(self, prev: int, enc: np.ndarray) -> np.ndarray:
        embed = self.we[prev] + self.be
        return _log_softmax(np.concatenate([embed, enc]) @ self.wp + self.bp)

    def beam_search(self, enc, k, max_len=MAX_LEN):
        """RETURNN's search: top-k of (hypothesis score + label log-prob) per step, a hypothesis that
        ended continues with label 0 at no cost; stops when all ended. Returns the k final hypotheses
        (score, labels, length), best first."""
        hyps = [(0.0, [], False)]
        for _ in range(max_len):
            cands = []
            for score, labels, ended in hyps:
                if ended:
                    cands.append((score, labels + [0], True))
                    continue
                lp = self.logp(labels[-1] if labels else 0, enc)
                cands += [(score + lp[v], labels + [v], v == 0) for v in range(V)]
            hyps = sorted(cands, key=lambda c: -c[0])[:k]  # stable: ties by (hypothesis, label) as top_k
            if all(e for _, _, e in hyps):
                break
        return [(s, labels, labels.index(0) if 0 in labels else len(labels)) for s, labels, _ in hyps]


def _enc():
    return np.stack([X[b, :n].mean(0) for b, n in enumerate(X_LENS)])


def _run(net, names, train=True):
    out = net.forward(_batch(), RunContext(train), only=names)
    return out, net.compute_losses(out, _batch(), names, train=train)


def test_parameters_shared_and_dependencies_rebuilt_in_the_extra_net():
    net = _net(2)
    assert sorted(returnn_param_shapes(net)) == ["output/rec/embed/W", "output/rec/embed/b", "output/rec/prob/W",
                                                 "output/rec/prob/b"]
    main_vars = {id(v) for v in net.layers["output"].layers["prob"].trainable_variables}
    extra_vars = {id(v) for v in net.layers["extra.search:output"].layers["prob"].trainable_variables}
    assert main_vars == extra_vars and len(main_vars) == 2
    # RETURNN's dep_layers_in_extra: what the listed layers read is built in the extra net too
    assert [n for n in net.order if n.startswith("extra.search:")] == \
        ["extra.search:enc", "extra.search:output", "extra.search:decision"]
    assert net.layers["extra.search:output"].search and not net.layers["output"].search
    # the teacher-forced loss, the search score; not the in-loop loss of the search (loss_only_on_non_search)
    assert sorted(info.layer for info in net.losses) == ["extra.search:decision", "output/prob"]
    # a training network only: eval/forward/search tasks build no extra net
    plain = TFNetwork({"enc": {"class": "reduce", "mode": "mean", "axes": "T", "from": "data"},
                       "output": _decoder(2)}, _extern(), search_train_layers=["output"], train_flag=False)
    assert not any(n.startswith("extra.") for n in plain.order)
    with pytest.raises(NetworkError, match="search_train_network_layers.*'nope'"):
        _net(2, layers=("nope",))


def test_beam_one_is_greedy_argmax():
    net = _net(1)
    out, losses = _run(net, ["extra.search:decision"])
    ref = NumpyDecoder(net)
    dec = out["extra.search:decision"]
    labels, lens = dec.tensor.numpy(), dec.seq_len.numpy()
    total = 0.0
    for b, enc in enumerate(_enc()):
        greedy, prev, score = [], 0, 0.0
        for _ in range(MAX_LEN):
            lp = ref.logp(prev, enc)
            prev = int(np.argmax(lp))
            score += lp[prev]
            if prev == 0:
                break
            greedy.append(prev)
        assert list(labels[b, :lens[b]]) == greedy
        total += score
    # search_score: minus the chosen hypotheses' scores; norm: their frames (RETURNN's, without target)
    np.testing.assert_allclose(losses["extra.search:decision"].loss_sum.numpy(), -total, rtol=1e-5)
    assert losses["extra.search:decision"].norm.numpy() == lens.sum()


def test_all_hypotheses_with_scores_and_decide_takes_the_best():
    k = 3
    net = _net(k)
    out, _ = _run(net, ["extra.search:decision"])
    ref = NumpyDecoder(net)
    rec, dec = out["extra.search:output"], out["extra.search:decision"]
    assert rec.beam.k == k and rec.tensor.shape[0] == len(X) * k
    labels, lens, scores = rec.tensor.numpy(), rec.seq_len.numpy(), rec.beam.scores.numpy()
    for b, enc in enumerate(_enc()):
        hyps = ref.beam_search(enc, k)
        for i, (score, hyp, length) in enumerate(hyps):
            row = b * k + i
            assert lens[row] == length
            assert list(labels[row, :length]) == hyp[:length]
            np.testing.assert_allclose(scores[b, i], score, rtol=1e-5)
        best = int(np.argmax([h[0] for h in hyps]))
        assert dec.seq_len.numpy()[b] == hyps[best][2]
        assert list(dec.tensor.numpy()[b, :hyps[best][2]]) == hyps[best][1][:hyps[best][2]]
    assert dec.tensor.shape[1] == dec.seq_len.numpy().max()  # cut to the longest kept hypothesis (RETURNN)


def test_decide_with_length_normalization():
    k = 3
    net = _net(k, extra={"decision_norm": {"class": "decide", "from": "output", "length_normalization": True,
                                           "only_on_search": True, "is_output_layer": True}},
               layers=("output", "decision", "decision_norm"))
    out, _ = _run(net, ["extra.search:decision_norm"])
    ref = NumpyDecoder(net)
    dec = out["extra.search:decision_norm"]
    for b, enc in enumerate(_enc()):
        hyps = ref.beam_search(enc, k)
        with np.errstate(divide="ignore"):  # a hypothesis of length 0: -inf (RETURNN divides too)
            best = int(np.argmax([s / length for s, _, length in hyps]))
        assert dec.seq_len.numpy()[b] == hyps[best][2]
        assert list(dec.tensor.numpy()[b, :hyps[best][2]]) == hyps[best][1][:hyps[best][2]]


def _levenshtein(a, b) -> int:
    return int(levenshtein(a, b))


def test_losses_over_all_hypotheses_with_the_target_repeated():
    """A loss on a beamed layer (here edit_distance on a copy of the searched output) compares every
    hypothesis with its sequence's target (RETURNN extends the target with the beam)."""
    k = 2
    net = _net(k, extra={"hyps": {"class": "copy", "from": "output", "loss": "edit_distance", "target": "classes",
                                  "only_on_search": True}}, layers=("output", "hyps"))
    out, losses = _run(net, ["extra.search:hyps"], train=False)
    rec = out["extra.search:hyps"]
    assert rec.beam is not None and rec.beam.k == k
    labels, lens = rec.tensor.numpy(), rec.seq_len.numpy()
    errors = sum(_levenshtein(list(labels[r, :lens[r]]), list(Y[r // k, :Y_LENS[r // k]])) for r in range(len(lens)))
    value = losses["extra.search:hyps"]
    assert value.error_sum.numpy() == errors and value.error_norm.numpy() == k * Y_LENS.sum()


def test_search_score_gradient_is_finite_and_reaches_the_shared_parameters():
    net = _net(3)
    with tf.GradientTape() as tape:
        out, losses = _run(net, ["extra.search:decision"])
        loss = losses["extra.search:decision"].loss_sum
    grads = [tf.convert_to_tensor(g) if g is not None else None for g in tape.gradient(loss, net.trainable_variables)]
    assert all(g is not None and np.all(np.isfinite(g.numpy())) for g in grads)
    shared = net.layers["output"].layers["prob"].trainable_variables  # the teacher-forced decoder's, one set
    by_id = {id(v): g for v, g in zip(net.trainable_variables, grads)}
    assert all(np.abs(by_id[id(v)].numpy()).sum() > 0 for v in shared)


def test_choice_fed_its_target_in_search_adds_its_scores():
    """RETURNN's search: False on a choice in a search network: its value is the target, and its
    log-probability of the target label is added to the hypotheses' scores (after the searched
    choice, here a position 't' over 4 values chosen from the previous label)."""
    k = 2
    unit = {
        "pos_in": {"class": "linear", "from": "prev:output", "n_out": EMB, "activation": None},
        "pos_prob": {"class": "softmax", "from": ["pos_in", "base:enc"], "n_out": 4},
        "t": {"class": "choice", "from": "pos_prob", "target": None, "beam_size": k, "length_normalization": False,
              "initial_output": 0},
        "embed": {"class": "linear", "from": "t", "n_out": EMB, "activation": None},
        "prob": {"class": "softmax", "from": ["embed", "base:enc"], "target": "classes"},
        "output": {"class": "choice", "from": "prob", "target": "classes", "search": False, "beam_size": k,
                   "length_normalization": False, "initial_output": 0},
        "end": {"class": "compare", "from": "output", "value": 0}}
    net = TFNetwork({
        "enc": {"class": "reduce", "mode": "mean", "axes": "T", "from": "data"},
        "output": {"class": "rec", "from": [], "max_seq_len": MAX_LEN, "unit": unit,
                   "only_on_search": True},
        "decision": {"class": "decide", "from": "output", "loss": "search_score", "only_on_search": True}},
        _extern(), search_train_layers=["output", "decision"])
    out, _ = _run(net, ["extra.search:decision"])
    p = returnn_param_values(net)
    rec = out["extra.search:output"]
    labels, lens, scores = rec.tensor.numpy(), rec.seq_len.numpy(), rec.beam.scores.numpy()

    def layer(name, x):
        return _log_softmax(x @ p["output/rec/%s/W" % name] + p["output/rec/%s/b" % name])

    n_steps = max(list(Y[b, :Y_LENS[b]]).index(0) for b in range(len(Y))) + 1  # the batch's loop runs until all end
    for b, enc in enumerate(_enc()):
        target = list(Y[b, :Y_LENS[b]])
        hyps = [(0.0, [])]  # (score, positions); the labels are the target's
        for step in range(n_steps):
            prev = (target + [0] * n_steps)[step - 1] if step else 0
            if step and prev == 0:  # ended: they go on with label 0 at no cost, sorted again by the searched choice
                hyps = sorted([(s, ts + [0]) for s, ts in hyps], key=lambda c: -c[0])
                continue
            pos_lp = layer("pos_prob", np.concatenate([p["output/rec/pos_in/W"][prev] + p["output/rec/pos_in/b"], enc]))
            cands = [(s + pos_lp[t], ts + [t]) for s, ts in hyps for t in range(4)]
            hyps = sorted(cands, key=lambda c: -c[0])[:k]
            hyps = [(s + layer("prob", np.concatenate([p["output/rec/embed/W"][ts[-1]] + p["output/rec/embed/b"], enc]))[
                target[step]], ts) for s, ts in hyps]
        length = target.index(0)
        for i, (score, _) in enumerate(hyps):
            assert lens[b * k + i] == length and list(labels[b * k + i, :length]) == target[:length]
            np.testing.assert_allclose(scores[b, i], score, rtol=1e-5)
        np.testing.assert_array_equal(out["extra.search:output/t"].tensor.numpy()[b * k:(b + 1) * k, :length],
                                      [ts[:length] for _, ts in hyps])


def test_softmax_over_spatial_start_masks_earlier_positions():
    """RETURNN's ``start`` (hard-attention decoders: attention from the last chosen position on)."""
    net = TFNetwork({
        "energy": {"class": "linear", "from": "data", "n_out": 1, "activation": None},
        "len": {"class": "length", "from": "data"},
        "first": {"class": "eval", "from": "len", "eval": "source(0) - 2"},  # (B,): 2, 0, 1
        "arg": {"class": "reduce", "mode": "argmax", "axes": "T", "from": "data", "is_output_layer": True},
        "output": {"class": "softmax_over_spatial", "from": "energy", "start": "first"}},
        _extern())
    out = net.forward(_batch(), RunContext(False), only=["output", "energy", "first"])
    # (softmax_over_spatial's output has the normalised axis last, as RETURNN's: (B, 1, T))
    e, w, first = out["energy"].tensor.numpy()[..., 0], out["output"].tensor.numpy()[:, 0], out["first"].tensor.numpy()
    for b, n in enumerate(X_LENS):
        keep = np.arange(n) >= first[b]
        ref = np.where(keep, np.exp(e[b, :n] - e[b, :n][keep].max()), 0.0)
        np.testing.assert_allclose(w[b, :n], ref / ref.sum(), rtol=1e-5, atol=1e-7)
    assert list(first) == [2, 0, 1]
    # reduce argmax over a dynamic axis: labels of that axis (RETURNN's sparse_dim, also when dynamic)
    assert net.layers["arg"].output.sparse_dim is net.extern_data["data"].dims[1]


def _cheating_search(dec, enc, ref, k, exclusive, n_steps):
    """RETURNN's beam_search with gold targets: top-k, then the last entry is the reference label
    continuing the last hypothesis (the only one in the first step); "exclusive": that candidate is
    kept out of the top-k."""
    hyps = [(0.0, [], False)]
    for step in range(n_steps):
        gold = ref[step] if step < len(ref) else 0
        cands = []
        for i, (score, labels, ended) in enumerate(hyps):
            lp = np.full(V, -1e30) if ended else dec.logp(labels[-1] if labels else 0, enc)
            if ended:
                lp[0] = 0.0
            cands += [(score + lp[v], labels + [v], ended or v == 0, i, v) for v in range(V)]
        src = len(hyps) - 1
        gold_cand = next(c for c in cands if c[3] == src and c[4] == gold)
        pool = [c for c in cands if not (exclusive and c is gold_cand)]
        top = sorted(pool, key=lambda c: -c[0])[:k - 1] + [gold_cand]
        hyps = [(s, labels, e) for s, labels, e, _, _ in top]
    return [(s, labels, labels.index(0) if 0 in labels else len(labels)) for s, labels, _ in hyps]


@pytest.mark.parametrize("exclusive", [False, True])
def test_cheating_keeps_the_reference_as_the_last_hypothesis(exclusive):
    k = 3
    net = _net(k, cheating="exclusive" if exclusive else True)
    out, _ = _run(net, ["extra.search:decision"])
    dec = NumpyDecoder(net)
    rec = out["extra.search:output"]
    labels, lens, scores = rec.tensor.numpy(), rec.seq_len.numpy(), rec.beam.scores.numpy()
    n_steps = labels.shape[1]
    dropped = 0
    for b, enc in enumerate(_enc()):
        ref = list(Y[b, :Y_LENS[b]])
        hyps = _cheating_search(dec, enc, ref, k, exclusive, n_steps)
        plain = dec.beam_search(enc, k - 1)
        dropped += all(h[1][:h[2]] != ref[:ref.index(0)] for h in plain)  # the reference not found without cheating
        for i, (score, hyp, length) in enumerate(hyps):
            row = b * k + i
            assert lens[row] == length and list(labels[row, :length]) == hyp[:length]
            np.testing.assert_allclose(scores[b, i], score, rtol=1e-5)
        assert hyps[-1][1][:hyps[-1][2]] == ref[:ref.index(0)]  # the reference, as the beam's last hypothesis
        if exclusive:
            assert sum(h[1][:h[2]] == ref[:ref.index(0)] for h in hyps) == 1
    assert dropped >= 2


def test_random_sample_scale_samples_the_label_distribution():
    """RETURNN's random_sample_scale: Gumbel noise on the scores before top-k; with beam 1 the chosen
    label is a sample of the distribution (here of the first step, over many equal sequences)."""
    n = 2000
    net = _net(1, random_sample_scale=1.0, base_beam_score_scale=0.0)
    x = np.tile(X[:1], [n, 1, 1])
    batch = {"data": tf.constant(x), "data:seq_len": tf.constant([X_LENS[0]] * n),
             "classes": tf.constant(np.tile(Y[:1], [n, 1])), "classes:seq_len": tf.constant([Y_LENS[0]] * n)}
    out = net.forward(batch, RunContext(True), only=["extra.search:decision"])["extra.search:output"]
    first = out.tensor.numpy()[:, 0]
    p = np.exp(NumpyDecoder(net).logp(0, X[0, :X_LENS[0]].mean(0)))
    freq = np.bincount(first, minlength=V) / n
    np.testing.assert_allclose(freq, p, atol=0.04)
    assert len(set(first)) >= 3  # sampled, not the argmax
    with pytest.raises(NetworkError, match="random_sample_scale must be a number"):
        _run(_net(1, random_sample_scale="x"), ["extra.search:decision"])


SEARCH_TRAIN_CONFIG = '#!rnn.py\ntask = "train"\ntrain = {"class": "CopyTaskDataset", "nsymbols": 6, "num_seqs": 24, "minlen": 2, "maxlen": 4}\ndev = {"class": "CopyTaskDataset", "nsymbols": 6, "num_seqs": 8, "minlen": 2, "maxlen": 4, "fixed_random_seed": 3}\nnum_outputs = {"data": [6, 1], "classes": [6, 1]}\nbatch_size = 100\nmax_seqs = 6\nEOS = 6\nnetwork = {\n    "encoder": {"class": "linear", "from": "data", "activation": "tanh", "n_out": 8},\n    "target_eos_": {"class": "reinterpret_data", "from": "data:classes", "increase_sparse_dim": 1},\n    "target_eos": {"class": "postfix_in_time", "postfix": EOS, "from": "target_eos_",\n                   "register_as_extern_data": "target_eos"},\n    "output": {"class": "rec", "from": [], "target": "target_eos", "max_seq_len": "max_len_from(\'base:encoder\') + 3",\n               "unit": {\n        "embed": {"class": "linear", "from": "prev:output", "n_out": 8, "activation": None},\n        "s": {"class": "rnn_cell", "unit": "LSTMBlock", "from": ["embed", "prev:att"], "n_out": 8},\n        "att": {"class": "dot_attention", "from": "s", "base": "base:encoder", "base_ctx": "base:encoder"},\n        "prob": {"class": "softmax", "from": ["s", "att"], "target": "target_eos", "loss": "ce",\n                 "loss_only_on_non_search": True},\n        "output": {"class": "choice", "from": "prob", "target": "target_eos", "beam_size": 3, "initial_output": 0,\n                   "length_normalization": False, "cheating": True},\n        "end": {"class": "compare", "from": "output", "value": EOS}}},\n    "decision": {"class": "decide", "from": "output", "loss": "search_score", "loss_scale": 0.1,\n                 "only_on_search": True},\n    "decision_ed": {"class": "copy", "from": "decision", "target": "target_eos", "loss": "edit_distance",\n                    "only_on_search": True},\n}\nsearch_train_network_layers = ["output", "decision", "decision_ed"]\n\n\ndef construction(idx, net_dict):\n    if idx > 0:\n        return None\n    net_dict["#config"] = {"search_train_network_layers": []}  # the first epoch trains with teacher forcing only\n    return net_dict\n\n\npretrain = {"construction_algo": construction, "repetitions": 1}\nadam = True\nlearning_rate = 0.01\nnum_epochs = 2\nlog_verbosity = 4\ntf_session_opts = {"intra_op_parallelism_threads": 1, "inter_op_parallelism_threads": 1}\n'


def test_training_run_with_search_train_network_layers(tmp_path):
    """rnn.py trains a copy task whose decoder also searches in training (beam 3, cheating, a
    search_score loss, an edit distance of the decision), with the first (pretrain) epoch's #config
    switching it off (as returnn-experiments' mbleu config does): finite scores, RETURNN's score
    names, the parameters carried into the second epoch's network (shared by the searched layers)."""
    import math
    import re
    from helpers import describe, run_rnn, train_args, write_config
    config = write_config(tmp_path / "search_train.config", SEARCH_TRAIN_CONFIG)
    proc = run_rnn(train_args(config, tmp_path), timeout=900)
    assert proc.returncode == 0, describe(proc)
    epoch1 = next(line for line in proc.stdout.splitlines() if line.startswith("epoch 1 score"))
    epoch2 = next(line for line in proc.stdout.splitlines() if line.startswith("epoch 2 score"))
    # RETURNN's format_score: several losses listed by layer ("score: decision X output Y error: ...")
    scores = re.search(r"score: (.*) error: ", epoch2)
    assert "decision" not in epoch1 and scores and "decision " in scores.group(1), epoch2
    assert re.search(r"error: .*decision_ed \S+", epoch2), epoch2
    values = [float(v) for v in scores.group(1).split()[1::2]]
    assert values and all(math.isfinite(v) for v in values), epoch2
    assert "parameters copied: 9, partly copied: 0, new: none" in proc.stdout, describe(proc)


# BLEU of RETURNN's compute_bleu (1.20261022) for these (reference, hypothesis) pairs
BLEU_CASES = [([1, 2, 3, 4], [1, 2, 3, 4], 1.0), ([1, 2, 3, 4], [1, 2, 3], 0.7165313363075256), ([1, 2, 3, 4], [], 0.0),
              ([1, 2, 1, 2, 1], [2, 1, 2, 1, 2, 1, 2], 0.6147881746292114), ([3, 3, 3], [3, 3, 3, 3, 3], 0.3976353704929352),
              ([1, 2, 3, 4, 5, 6], [6, 5, 4, 3, 2, 1], 0.12703318893909454),
              ([1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 9, 4, 5, 6, 9, 8], 0.27054113149642944)]


@pytest.mark.parametrize("ref,hyp,bleu", BLEU_CASES)
def test_sentence_bleu_as_returnn(ref, hyp, bleu):
    from returnn.util.bleu import compute_bleu
    assert compute_bleu([ref], [hyp]) == pytest.approx(bleu, rel=1e-6)


def _bleu(ref, hyp):
    from returnn.util.bleu import compute_bleu
    return float(compute_bleu([list(ref)], [list(hyp)]))


@pytest.mark.parametrize("inner", ["bleu", "edit_distance"])
def test_expected_loss_over_the_beam(inner):
    """RETURNN's expected_loss (mbleu configs): per sequence, the hypotheses' errors minus their mean,
    weighted by the softmax of their scores, summed, divided by the beam size; gradient through the
    scores to the shared parameters. Also the 'bleu' loss (an error only) of the decision."""
    k = 3
    net = _net(k, extra={
        "min_risk": {"class": "copy", "from": "output", "loss": "expected_loss", "target": "classes",
                     "only_on_search": True, "loss_opts": {"loss": {"class": inner}, "loss_kind": "error"}},
        "decision_bleu": {"class": "decide", "from": "output", "loss": "bleu", "target": "classes",
                          "only_on_search": True}},
        layers=("output", "min_risk", "decision_bleu"))
    names = ["extra.search:min_risk", "extra.search:decision_bleu"]
    with tf.GradientTape() as tape:
        out, losses = _run(net, names)
        objective = losses["extra.search:min_risk"].loss_sum
    rec = out["extra.search:min_risk"]
    labels, lens, scores = rec.tensor.numpy(), rec.seq_len.numpy(), rec.beam.scores.numpy()
    total = 0.0
    for b in range(len(X)):
        ref = Y[b, :Y_LENS[b]]
        hyps = [labels[b * k + i, :lens[b * k + i]] for i in range(k)]
        err = np.array([-_bleu(ref, h) if inner == "bleu" else _levenshtein(list(h), list(ref)) for h in hyps])
        w = np.exp(scores[b] - np.log(np.exp(scores[b]).sum()))
        total += ((err - err.mean()) * w).sum() / k
    value = losses["extra.search:min_risk"]
    np.testing.assert_allclose(value.loss_sum.numpy(), total, rtol=1e-4, atol=1e-6)
    assert value.norm.numpy() == k * Y_LENS.sum()
    grads = tape.gradient(objective, net.layers["output"].layers["prob"].trainable_variables)
    assert all(g is not None and np.all(np.isfinite(tf.convert_to_tensor(g).numpy())) for g in grads)
    assert any(np.abs(tf.convert_to_tensor(g).numpy()).sum() > 0 for g in grads)
    dec = out["extra.search:decision_bleu"]
    bleu = sum(_bleu(Y[b, :Y_LENS[b]], dec.tensor.numpy()[b, :dec.seq_len.numpy()[b]]) for b in range(len(X)))
    value = losses["extra.search:decision_bleu"]
    np.testing.assert_allclose(value.error_sum.numpy(), -bleu, rtol=1e-5)
    assert value.error_norm.numpy() == Y_LENS.sum() and value.norm.numpy() == 0


def test_expected_loss_options_refused_in_one_line():
    from returnn.tf.losses import get_loss_class
    cls = get_loss_class("expected_loss", "x")
    with pytest.raises(NetworkError, match="'x'.*loss_kind = 'value' is not supported"):
        cls("x", {"loss": {"class": "bleu"}, "loss_kind": "value"}, "classes")
    with pytest.raises(NetworkError, match="'x'.*needs loss_opts 'loss_kind'"):
        cls("x", {"loss": {"class": "bleu"}}, "classes")
    with pytest.raises(NetworkError, match="'x'.*class 'bleu' or 'edit_distance'.*'ce'"):
        cls("x", {"loss": {"class": "ce"}, "loss_kind": "error"}, "classes")


def test_back_prop_false_search_in_training_has_no_gradient():
    """RETURNN's back_prop False on a rec layer (the latent-attention configs' extra.search decoder):
    the search runs the same, nothing it gives carries a gradient."""
    net = _net(2)
    frozen = TFNetwork({
        "enc": {"class": "reduce", "mode": "mean", "axes": "T", "from": "data"},
        "output": dict(_decoder(2), back_prop=False),
        "decision": {"class": "decide", "from": "output", "loss": "search_score", "only_on_search": True}},
        _extern(), search_train_layers=["output", "decision"])
    for a, b in zip(frozen.trainable_variables, net.trainable_variables):
        a.assign(b)
    with tf.GradientTape() as tape:
        out, losses = _run(frozen, ["extra.search:decision"])
    grads = tape.gradient(losses["extra.search:decision"].loss_sum, frozen.trainable_variables)
    assert all(g is None for g in grads)
    ref, _ = _run(net, ["extra.search:decision"])
    np.testing.assert_array_equal(out["extra.search:decision"].tensor.numpy(), ref["extra.search:decision"].tensor.numpy())


def test_eval_reads_search_choices_beam_scores():
    """RETURNN's ``self.sources[0].search_choices.beam_scores`` in eval code (the latent-monotonic-
    attention configs' search_score: the chosen hypothesis' score over its length): set on a
    ``decide``'s value ((B, 1), the chosen score), None on other layers (the rec layer's own search
    choices are its choice layer's); ``get_search_choices()`` reaches the beam of any value of the search."""
    k = 3
    per_frame = "(source(0, auto_convert=False), tf.squeeze(self.sources[0].search_choices.beam_scores, axis=1) / " \
                "tf.cast(source(0, auto_convert=False, as_data=True).get_sequence_lengths(), tf.float32))[-1]"
    scalar = {"dtype": "float32", "sparse": False, "shape": (), "dim": None, "batch_dim_axis": 0, "time_dim_axis": None}
    all_scores = "(source(0, auto_convert=False), self.sources[0].get_search_choices().beam_scores)[-1]"
    on_rec = "(source(0, auto_convert=False), self.sources[0].search_choices.beam_scores)[-1]"
    beam_type = {"dtype": "float32", "shape": (k,), "dim": k, "batch_dim_axis": 0, "time_dim_axis": None}
    extra = {
        "extra.search:score": {"class": "eval", "from": "extra.search:decision", "out_type": scalar,
                               "eval": per_frame, "is_output_layer": True},
        "extra.search:all_scores": {"class": "eval", "from": "extra.search:output", "out_type": beam_type,
                                    "eval": all_scores, "is_output_layer": True},
        "extra.search:none_on_rec": {"class": "eval", "from": "extra.search:output", "out_type": scalar,
                                     "eval": on_rec, "is_output_layer": True}}
    net = _net(k, extra=extra, layers=("output", "decision"))
    out, _ = _run(net, ["extra.search:score", "extra.search:all_scores"])
    ref = NumpyDecoder(net)
    for b, enc in enumerate(_enc()):
        hyps = ref.beam_search(enc, k)
        best = max(hyps, key=lambda h: h[0])
        with np.errstate(divide="ignore"):
            np.testing.assert_allclose(out["extra.search:score"].tensor.numpy()[b], best[0] / np.float32(best[2]),
                                       rtol=1e-5)
        np.testing.assert_allclose(out["extra.search:all_scores"].tensor.numpy()[b], [h[0] for h in hyps], rtol=1e-5)
    del extra["extra.search:score"], extra["extra.search:all_scores"]
    net = _net(k, extra=extra)
    with pytest.raises(NetworkError, match="AttributeError.*'NoneType'.*beam_scores"):
        _run(net, ["extra.search:none_on_rec"])
