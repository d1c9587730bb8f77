"""Beam search through rec sub-networks: greedy equivalence, a known best path, different
lengths per sequence, and the search task end to end."""
import numpy as np
import pytest
import tensorflow as tf

from returnn.tensor import Data
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork

EOS = 3
# the previous label as a one-hot vector (its weights set to the identity where the tests fix the weights): RETURNN
# concatenates no labels with other sources
EMB = {"class": "linear", "activation": None, "with_bias": False, "from": "prev:output", "n_out": 4}


def _set_weights(unit, prob_w):
    unit["emb"].W.assign(np.eye(4, dtype="float32"))
    unit["prob"].W.assign(prob_w.astype("float32"))


def _net(beam, length_norm=False, max_len=8):
    extern = {"data": Data("data", shape=(None, 2)), "classes": Data("classes", dim=4, sparse=True)}
    return TFNetwork({
        "enc": {"class": "reduce", "mode": "mean", "axes": "T", "from": "data"},
        "output": {"class": "rec", "from": [], "target": "classes", "max_seq_len": max_len, "unit": {
            "emb": EMB, "prob": {"class": "softmax", "from": ["emb", "base:enc"], "n_out": 4, "with_bias": False},
            "output": {"class": "choice", "initial_output": 0, "from": "prob", "target": "classes", "beam_size": beam,
                       "length_normalization": length_norm},
            "end": {"class": "compare", "from": "output", "value": EOS}}},
    }, extern, search=True)


# label -> next-label probabilities: greedy follows 1 -> 1 -> ...; the best ended path is 0 -> 2 -> EOS
P = np.array([[0.0001, 0.6, 0.3998, 0.0001],
              [0.0001, 0.4, 0.2999, 0.3],
              [0.0001, 0.0001, 0.0098, 0.99],
              [0.25, 0.25, 0.25, 0.25]])
# the encoder feature e adds e * U to the logits: with e = 1 label 1 leads to the end at once
U = np.array([[0, 0, 0, 0], [0, 0, 0, 9.0], [0, 0, 0, 0], [0, 0, 0, 0]], "float32")


def _search(net, enc_values):
    # rows: previous label (one-hot), then the 2 encoder features
    _set_weights(net.layers["output"].layers, np.concatenate([np.log(P), np.zeros((1, 4)), U[1:2]], 0))
    x = np.zeros((len(enc_values), 3, 2), "float32")
    x[:, :, 1] = np.asarray(enc_values)[:, None]
    out = net.forward({"data": tf.constant(x), "data:seq_len": tf.constant([3] * len(enc_values))},
                      RunContext(False), only=["output"])["output"]
    labels, lens = out.tensor.numpy(), out.seq_len.numpy()
    return [list(labels[b, :n]) for b, n in enumerate(lens)]


def _greedy(max_len, e=0.0):
    prev, out = 0, []
    for _ in range(max_len):
        nxt = int(np.argmax(np.log(P[prev]) + e * U[1]))
        if nxt == EOS:
            break
        out.append(nxt)
        prev = nxt
    return out


def test_beam_one_is_greedy_and_wider_beam_finds_best_path():
    assert _search(_net(1), [0.0]) == [_greedy(8)] == [[1] * 8]
    assert _search(_net(2), [0.0]) == [[2]]  # log .3998 + log .99 beats 0.6 followed by 1 -> 1 ...
    assert _search(_net(4), [0.0, 0.0]) == [[2], [2]]


def test_different_lengths_and_max_seq_len():
    assert _search(_net(1, max_len=3), [0.0]) == [[1, 1, 1]]  # never ends: cut at max_seq_len
    # the second sequence ends at once (empty hypothesis), the first runs on: lengths differ per sequence
    assert _search(_net(1), [0.0, 1.0, 0.5]) == [_greedy(8), _greedy(8, 1.0), _greedy(8, 0.5)]
    assert _search(_net(2), [0.0, 1.0]) == [[2], []]


ENC_DEC = """
train = {"class": "TaskNumberBaseConvertDataset", "num_seqs": 200}
dev = {"class": "TaskNumberBaseConvertDataset", "num_seqs": 20, "fixed_random_seed": 42}
extern_data = {"data": {"sparse": True, "dim": 8}, "classes": {"sparse": True, "dim": 2}}
network = {
    "input_embed": {"class": "linear", "activation": None, "from": "data", "n_out": 16},
    "input": {"class": "rec", "unit": "nativelstm2", "from": "input_embed", "n_out": 16},
    "input_last": {"class": "get_last_hidden_state", "from": "input", "n_out": 32},
    "output": {"class": "rec", "from": [], "max_seq_len": "max_len_from('base:input') * 3", "unit": {
        "output_embed": {"class": "linear", "activation": None, "from": "output", "n_out": 8},
        "s": {"class": "rec", "unit": "nativelstm2", "from": ["prev:output_embed", "base:input_last"], "n_out": 16},
        "prob": {"class": "softmax", "from": "s", "target": "classes0", "loss": "ce"},
        "output": {"class": "choice", "initial_output": 0, "from": "prob", "target": "classes0", "beam_size": 3},
        "end": {"class": "compare", "from": "output", "value": 2}}, "target": "classes0"},
    "target_with_eos_": {"class": "reinterpret_data", "from": "data:classes", "increase_sparse_dim": 1},
    "target_with_eos": {"class": "postfix_in_time", "postfix": 2, "from": "target_with_eos_",
                        "register_as_extern_data": "classes0"},
}
batch_size = 2000
max_seqs = 20
optimizer = {"class": "adam"}
learning_rate = 0.01
num_epochs = 2
"""


@pytest.mark.parametrize("fmt", ["txt", "py"])
def test_search_task_end_to_end(tmp_path, fmt):
    """RETURNN's encoder-decoder demo (smaller): train with teacher forcing, then task search
    writes one hypothesis per dev sequence and prints the edit distance to the targets."""
    import ast
    from helpers import describe, run_rnn, train_args, write_config
    cfg = write_config(tmp_path / "encdec.config", ENC_DEC.replace(
        'network = {', 'network = {\n    "decision": {"class": "decide", "from": "output", "is_output_layer": True},'))
    proc = run_rnn(train_args(cfg, tmp_path), timeout=600)
    assert proc.returncode == 0 and "epoch 2 score" in proc.stdout, describe(proc)
    out = tmp_path / ("hyps." + fmt)
    proc = run_rnn(train_args(cfg, tmp_path, "++task", "search", "++search_output_file", str(out),
                              "++search_output_file_format", fmt, "++search_data", "dev",
                              "++search_output_layer", "decision"), timeout=600)
    assert proc.returncode == 0, describe(proc)
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("search epoch 2 dev: 20 sequences, edit distance")]
    assert line and "hypotheses in %s" % out in line[0], describe(proc)
    text = out.read_text()
    if fmt == "py":
        hyps = ast.literal_eval(text)
    else:
        hyps = dict(enumerate(text.splitlines()))  # RETURNN's txt: one hypothesis a line, no tag
    assert len(hyps) == 20 and all(set(h.split()) <= {"0", "1"} for h in hyps.values())


def test_decide_with_edit_distance_on_the_searched_output():
    """A 'decision' layer (decide + edit_distance, as RETURNN's attention configs) gives the
    searched labels and their label error rate against the target."""
    extern = {"data": Data("data", shape=(None, 2)), "classes": Data("classes", dim=4, sparse=True)}
    net_dict = {
        "enc": {"class": "reduce", "mode": "mean", "axes": "T", "from": "data"},
        "output": {"class": "rec", "from": [], "target": "classes", "max_seq_len": 8, "unit": {
            "emb": EMB, "prob": {"class": "softmax", "from": ["emb", "base:enc"], "n_out": 4, "with_bias": False},
            "output": {"class": "choice", "initial_output": 0, "from": "prob", "target": "classes", "beam_size": 2,
                       "length_normalization": False},
            "end": {"class": "compare", "from": "output", "value": EOS}}},
        "decision": {"class": "decide", "from": "output", "loss": "edit_distance", "target": "classes"}}
    net = TFNetwork(dict(net_dict), extern, search=True)
    _set_weights(net.layers["output"].layers, np.concatenate([np.log(P), np.zeros((1, 4)), U[1:2]], 0))
    batch = {"data": tf.zeros([1, 3, 2]), "data:seq_len": tf.constant([3])}
    out = net.forward(batch, RunContext(False), only=["decision"])["decision"]
    assert list(out.tensor.numpy()[0, :int(out.seq_len[0])]) == [2]
    train_net = TFNetwork(dict(net_dict), extern)  # teacher forcing: the decision is the target
    batch.update({"classes": tf.constant([[1, 2]]), "classes:seq_len": tf.constant([2])})
    values = train_net.compute_losses(train_net.forward(batch, RunContext(False)), batch)["decision"]
    assert float(values.error_sum) == 0.0 and float(values.error_norm) == 2.0


def _regression_net(search, beam=1, include_eos=False):
    """A Tacotron-like decoder: x_t = 0.5 x_{t-1} + enc (fed back through the regression choice),
    ending where sigmoid(x_t[0] - 1.5) > 0.5."""
    extern = {"data": Data("data", shape=(None, 2)), "target": Data("target", shape=(None, 2))}
    net = TFNetwork({
        "enc": {"class": "reduce", "mode": "mean", "axes": "T", "from": "data"},
        "output": {"class": "rec", "from": [], "target": "target", "max_seq_len": 6, "include_eos": include_eos,
                   "unit": {
                       "pred": {"class": "linear", "activation": None, "from": ["prev:choice", "base:enc"], "n_out": 2,
                                "with_bias": False, "loss": "mse", "target": "target"},
                       "choice": {"class": "choice", "initial_output": 0, "from": "pred", "input_type": "regression", "target": "target",
                                  "beam_size": beam},
                       "stop": {"class": "linear", "activation": "sigmoid", "from": "pred", "n_out": 1},
                       "end_compare": {"class": "compare", "from": "stop", "kind": "greater", "value": 0.5},
                       "end": {"class": "squeeze", "from": "end_compare", "axis": "F"},
                       "output": {"class": "copy", "from": "choice"}}},
    }, extern, search=search)
    unit = net.layers["output"].layers
    unit["pred"].W.assign(np.concatenate([0.5 * np.eye(2), np.eye(2)], 0).astype("float32"))
    if search:  # in training nothing reads the stop layer: it is not built
        unit["stop"].W.assign(np.array([[1.0], [0.0]], "float32"))
        unit["stop"].bias.assign(np.array([-1.5], "float32"))
    return net


def _regression_ref(e0, max_len=6, include_eos=False):
    x, frames = np.zeros(2), []
    for _ in range(max_len):
        x = 0.5 * x + np.array([e0, 0.0])
        if x[0] - 1.5 > 0:
            return frames + ([x] if include_eos else [])
        frames.append(x)
    return frames


@pytest.mark.parametrize("include_eos", [False, True])
def test_regression_choice_feeds_its_prediction_back_in_search(include_eos):
    """RETURNN's regression choice in search (Tacotron decoding): beam 1, the prediction is the
    choice's value, fed back through prev:, the loop ends at 'end' (or max_seq_len)."""
    net = _regression_net(True, include_eos=include_eos)
    enc = [1.0, 3.0, 0.2]  # ends after 2 frames, at once, never (cut at max_seq_len 6)
    x = np.zeros((3, 4, 2), "float32")
    x[:, :, 0] = np.asarray(enc)[:, None]
    out = net.forward({"data": tf.constant(x), "data:seq_len": tf.constant([4, 2, 4])}, RunContext(False),
                      only=["output"])["output"]
    assert out.data.dtype == "float32" and not out.data.sparse and out.data.dim == 2
    lens = out.seq_len.numpy()
    for b, e0 in enumerate(enc):
        ref = _regression_ref(e0, include_eos=include_eos)
        assert lens[b] == len(ref)
        np.testing.assert_allclose(out.tensor.numpy()[b, :lens[b]], np.array(ref).reshape(-1, 2), rtol=1e-5)
    assert lens.tolist() == ([3, 1, 6] if include_eos else [2, 0, 6])


def test_regression_choice_in_training_is_the_target_and_search_needs_beam_one():
    net = _regression_net(False)
    x = np.zeros((1, 3, 2), "float32")
    target = np.arange(8, dtype="float32").reshape(1, 4, 2)
    out = net.forward({"data": tf.constant(x), "data:seq_len": tf.constant([3]), "target": tf.constant(target),
                       "target:seq_len": tf.constant([4])}, RunContext(False), only=["output"])["output"]
    np.testing.assert_allclose(out.tensor.numpy(), target)  # teacher forcing: the output copies the choice
    from returnn.errors import NetworkError
    with pytest.raises(NetworkError, match="regression choice searches with beam_size 1"):
        net = _regression_net(True, beam=2)
        net.forward({"data": tf.constant(x), "data:seq_len": tf.constant([3])}, RunContext(False), only=["output"])


@pytest.mark.parametrize("fmt", ["txt", "py"])
def test_dense_search_output_is_written_as_frames(tmp_path, fmt):
    """RETURNN writes a dense search output (a regression decoder's frames) as numpy prints the array
    of the real frames: ``str`` in txt, ``repr`` with every element in py (vs_returnn_tasks' goldens
    search_dense_*); labels stay label lists."""
    from returnn.tf.search_task import _hypothesis, hypothesis_text, write_hypotheses
    values = np.arange(12, dtype="float32").reshape(2, 3, 2) / 4
    hyps = [_hypothesis(values, np.array([2, 0]), row) for row in range(2)]
    assert [h.shape for h in hyps] == [(2, 2), (0, 2)]
    assert _hypothesis(np.array([[3, 1, 2]], "int32"), np.array([2]), 0) == [3, 1]
    texts = [("a", hypothesis_text(hyps[0], ["x"])), ("b", hypothesis_text(hyps[1], None))]
    assert texts[0][1] is hyps[0] and texts[1][1] is hyps[1]
    path = str(tmp_path / ("out." + fmt))
    write_hypotheses(path, texts, fmt)
    text = open(path).read()
    if fmt == "py":
        assert text == ("{\n'a': array([[0.  , 0.25],\n       [0.5 , 0.75]], dtype=float32),\n"
                        "'b': array([], shape=(0, 2), dtype=float32),\n}\n")
        big = np.zeros((1, 1001), "float32")  # all elements, not numpy's summary of big arrays
        write_hypotheses(path, [("a", big)], fmt)
        assert "..." not in open(path).read()
    else:
        assert text == "[[0.   0.25]\n [0.5  0.75]]\n[]\n"


@pytest.mark.parametrize("beam", [0, 2])
def test_search_exports_in_loop_frames_with_the_encoder_lengths(beam):
    """An in-loop layer with is_output_layer over the encoder frames (Tacotron's accumulated attention
    weights) is read from outside after the search with the encoder's lengths per sequence (beam 0:
    a regression choice; else a label search with that beam)."""
    extern = {"data": Data("data", shape=(None, 2)), "target": Data("target", shape=(None, 2)),
              "classes": Data("classes", dim=3, sparse=True)}
    if beam:
        pred = {"class": "softmax", "from": ["prev:choice"], "n_out": 3}
        choice = {"class": "choice", "initial_output": 0, "from": "pred", "target": "classes", "beam_size": beam}
    else:
        pred = {"class": "linear", "activation": None, "from": ["prev:choice"], "n_out": 2}
        choice = {"class": "choice", "initial_output": 0, "from": "pred", "input_type": "regression", "target": "target"}
    net = TFNetwork({
        "enc_energy": {"class": "linear", "activation": None, "from": "data", "n_out": 1},
        "output": {"class": "rec", "from": [], "target": "classes" if beam else "target", "max_seq_len": 3, "unit": {
            "pred": pred,
            "choice": choice,
            "q": {"class": "linear", "activation": None, "from": "prev:choice", "n_out": 1},
            "energy": {"class": "combine", "kind": "add", "from": ["base:enc_energy", "q"]},
            "att_w": {"class": "softmax_over_spatial", "from": "energy", "is_output_layer": True},
            "output": {"class": "copy", "from": "choice"}}},
    }, extern, search=True)
    x = np.random.RandomState(0).randn(2, 5, 2).astype("float32")
    outs = net.forward({"data": tf.constant(x), "data:seq_len": tf.constant([5, 2])}, RunContext(False),
                       only=["output", "output/att_w"])
    att = outs["output/att_w"]
    enc_time = net.layers["enc_energy"].output.time_dim
    assert att.sizes[enc_time].numpy().tolist() == [5, 2] and outs["output"].seq_len.numpy().tolist() == [3, 3]
    w = att.tensor.numpy()  # (B, T_dec, T_enc, 1): each step's weights sum to 1 over the real encoder frames
    t_axis = att.data.dims.index(enc_time)
    np.testing.assert_allclose(np.sum(np.nan_to_num(att.masked(0.0).numpy()), axis=t_axis), 1.0, rtol=1e-5)
    assert w.shape[t_axis] == 5


def test_run_search_of_a_dense_output_reports_no_edit_distance():
    """A regression decoder's search output (dense frames) is no label sequence: run_search gives the
    frames per sequence (real frames only) and no edit distance, although the data has the target."""
    from types import SimpleNamespace
    from returnn.config import Config
    from returnn.datasets import init_dataset
    from returnn.datasets.batching import BatchOptions
    from returnn.tf.search_task import run_search
    data = [{"data": np.zeros((3, 2), "float32"), "classes": np.array([1, 2], "int32")},
            {"data": np.zeros((2, 2), "float32"), "classes": np.array([0], "int32")}]
    dataset = init_dataset({"class": "StaticDataset", "data": data, "output_dim": {"data": [2, 2], "classes": [3, 1]}})
    frames = np.arange(2 * 3 * 4, dtype="float32").reshape(2, 3, 4)

    def forward_step(batch):
        n = len(batch["data:seq_len"])
        return tf.constant(frames[:n]), tf.constant([3, 1][:n])

    steps = SimpleNamespace(forward_step=forward_step, forward_keys=["data"], to_tensors=lambda b: b)
    results, stats = run_search(steps, dataset, BatchOptions.from_config(Config({"batch_size": 100})), 1, "classes")
    assert stats == {}
    hyps = dict(results)
    np.testing.assert_array_equal(hyps["seq-0"], frames[0])
    np.testing.assert_array_equal(hyps["seq-1"], frames[1, :1])


def test_unit_layers_built_only_for_their_loss_are_not_built_in_search():
    """RETURNN computes no losses of a rec unit in search: a layer there only for its loss (a transducer's
    full-sum loss over the whole target) is not built in decoding; a loss layer the choice reads is."""
    extern = {"data": Data("data", shape=(None, 2)), "classes": Data("classes", dim=4, sparse=True)}

    def net(search):
        unit = {"emb": EMB, "prob": {"class": "softmax", "from": ["emb", "base:enc"], "n_out": 4, "loss": "ce"},
                "fullsum": {"class": "eval", "from": ["prob", "base:data:classes"], "loss": "as_is",
                            "eval": "tf.reduce_sum(source(0, auto_convert=False), -1)", "out_type": {"shape": ()}},
                "output": {"class": "choice", "initial_output": 0, "from": "prob", "target": "classes", "beam_size": 2},
                "end": {"class": "compare", "from": "output", "value": EOS}}
        return TFNetwork({"enc": {"class": "reduce", "mode": "mean", "axes": "T", "from": "data"},
                          "output": {"class": "rec", "from": [], "target": "classes", "max_seq_len": 4, "unit": unit}},
                         extern, search=search)

    searched = net(True).layers["output"].layers
    assert "fullsum" not in searched and "prob" in searched and searched["prob"].opt("loss") is None
    trained = net(False).layers["output"].layers
    assert "fullsum" in trained and trained["prob"].opt("loss") == "ce"
