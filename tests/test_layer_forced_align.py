"""forced_align against a brute-force search over all frame labelings (CTC and RNA topologies),
padded frames and labels, sequences without a path, and the layer in a network with NAME/scores."""
import itertools

import numpy as np
import pytest
import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork

V = 4  # 3 labels + blank (last)
BLANK = V - 1


def _collapse(path, label_loop):
    out, prev = [], None
    for s in path:
        if s != BLANK and not (label_loop and s == prev):
            out.append(s)
        prev = s
    return out


def _brute_force(logp, labels, label_loop):
    best, best_path = -np.inf, None
    for path in itertools.product(range(V), repeat=len(logp)):
        if _collapse(path, label_loop) == list(labels):  # CTC: a real repetition needs a blank between
            score = sum(logp[t, s] for t, s in enumerate(path))
            if score > best:
                best, best_path = score, list(path)
    return best, best_path


@pytest.mark.parametrize("topology", ["ctc", "rna"])
def test_viterbi_alignment_equals_brute_force(topology):
    t_lens, labels = [5, 4, 3, 2], [[0, 1], [1, 1], [2], [0, 1, 2]]  # the last has more labels than frames
    u_lens = [len(lab) for lab in labels]
    rng = np.random.RandomState(1)
    logits = rng.randn(4, 5, V).astype("float32") * 2
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    x = np.where(np.arange(5)[None, :, None] < np.array(t_lens)[:, None, None], np.exp(logp), np.nan)  # probs
    y = np.full((4, 3), 10 ** 6, "int32")
    for b, lab in enumerate(labels):
        y[b, :len(lab)] = lab
    extern = {"data": Data("data", shape=(None, V)), "classes": Data("classes", dim=V - 1, sparse=True)}
    net = TFNetwork({"align": {"class": "forced_align", "from": "data", "align_target": "data:classes",
                               "topology": topology, "input_type": "prob", "is_output_layer": True},
                     "scores": {"class": "copy", "from": "align/scores", "is_output_layer": True}}, extern)
    out = net.forward({"data": tf.constant(x, tf.float32), "data:seq_len": tf.constant(t_lens),
                       "classes": tf.constant(y), "classes:seq_len": tf.constant(u_lens)}, RunContext(False))
    align, scores = out["align"].tensor.numpy(), out["scores"].tensor.numpy()
    assert out["align"].data.sparse_dim.dimension == V
    for b, n in enumerate(t_lens):
        ref_score, ref_path = _brute_force(logp[b, :n], labels[b], topology == "ctc")
        if ref_path is None:
            assert scores[b] == -np.inf and (align[b, :n] == 0).all()
            continue
        np.testing.assert_allclose(scores[b], ref_score, rtol=1e-5)
        assert align[b, :n].tolist() == ref_path
    assert scores[3] == -np.inf  # 3 labels in 2 frames


def test_rna_differs_from_ctc_on_repeated_labels():
    """RNA emits each label in exactly one frame; CTC lets a label last several frames."""
    logp = np.log(np.full((1, 4, V), 1e-3, "float32"))
    logp[0, :, 0] = 0.0  # label 0 is certain on every frame
    extern = {"data": Data("data", shape=(None, V)), "classes": Data("classes", dim=V - 1, sparse=True)}
    results = {}
    for topology in ("ctc", "rna"):
        net = TFNetwork({"output": {"class": "forced_align", "from": "data", "align_target": "data:classes",
                                    "topology": topology, "input_type": "log_prob"}}, extern)
        out = net.forward({"data": tf.constant(logp), "data:seq_len": tf.constant([4]),
                           "classes": tf.constant([[0]]), "classes:seq_len": tf.constant([1])}, RunContext(False))
        results[topology] = out["output"].tensor.numpy()[0].tolist()
    assert results["ctc"] == [0, 0, 0, 0]
    assert results["rna"].count(0) == 1 and results["rna"].count(BLANK) == 3


@pytest.mark.parametrize("opts, message", [
    ({"topology": "hmm", "input_type": "prob"}, "'topology' must be one of"),
    ({"topology": "ctc", "input_type": "logits"}, "'input_type' must be one of"),
    ({"topology": "ctc", "input_type": "prob", "blank_included": True}, "must have 4"),
])
def test_bad_options_are_one_line(opts, message):
    extern = {"data": Data("data", shape=(None, V)), "classes": Data("classes", dim=V - 1, sparse=True)}
    with pytest.raises(NetworkError, match=message):
        TFNetwork({"output": dict({"class": "forced_align", "from": "data", "align_target": "data:classes"}, **opts)},
                  extern)


def test_alignment_as_the_target_of_a_framewise_loss():
    """``"target": "layer:align"`` trains a frame-wise softmax on the Viterbi alignment of a CTC output."""
    extern = {"data": Data("data", shape=(None, 2)), "classes": Data("classes", dim=V - 1, sparse=True)}
    net = TFNetwork({
        "ctc": {"class": "softmax", "from": "data", "loss": "ctc", "target": "classes"},
        "align": {"class": "forced_align", "from": "ctc", "align_target": "data:classes", "topology": "ctc",
                  "input_type": "prob"},
        "output": {"class": "softmax", "from": "data", "loss": "ce", "target": "layer:align"}}, extern)
    assert net.layers["output"].output.dim == V  # n_out from the alignment's classes
    rng = np.random.RandomState(0)
    batch = {"data": tf.constant(rng.randn(2, 6, 2).astype("float32")), "data:seq_len": tf.constant([6, 4]),
             "classes": tf.constant([[0, 2], [1, 0]]), "classes:seq_len": tf.constant([2, 1])}
    outs = net.forward(batch, RunContext(False))
    losses = net.compute_losses(outs, batch)
    align = outs["align"].tensor.numpy()
    prob = outs["output"].tensor.numpy()
    ref = -sum(np.log(prob[b, t, align[b, t]]) for b, n in enumerate([6, 4]) for t in range(n))
    np.testing.assert_allclose(losses["output"].loss_sum.numpy(), ref, rtol=1e-4)
    assert float(losses["output"].norm.numpy()) == 10


CTC_CONFIG = """
task = "train"
train = {"class": "TaskNumberBaseConvertDataset", "input_base": 2, "output_base": 8, "num_seqs": 40,
         "min_input_seq_len": 6, "max_input_seq_len": 12}
dev = {"class": "TaskNumberBaseConvertDataset", "input_base": 2, "output_base": 8, "num_seqs": 12,
       "min_input_seq_len": 6, "max_input_seq_len": 12, "fixed_random_seed": 1}
num_epochs = 1
batch_size = 200
learning_rate = 0.01
optimizer = {"class": "adam"}
network = {
    "emb": {"class": "linear", "activation": "tanh", "n_out": 8, "from": "data"},
    "ctc": {"class": "softmax", "from": "emb", "loss": "ctc", "target": "classes"},
    "align": {"class": "forced_align", "from": "ctc", "align_target": "data:classes", "topology": "ctc",
              "input_type": "prob"},
    "dump": {"class": "hdf_dump", "from": "align", "filename": DUMP_DIR + "/align-{dataset_name}.hdf",
             "dump_per_run": True, "is_output_layer": True},
}
"""


def test_alignments_dumped_to_hdf_in_forward_and_eval(tmp_path):
    """A CTC model's Viterbi alignments of the dev set, written by hdf_dump under the dev set's tags:
    each collapses to the sequence's labels."""
    import h5py
    from helpers import describe, run_rnn, train_args, write_config
    from returnn.datasets.generating import TaskNumberBaseConvertDataset

    config = write_config(tmp_path / "ctc.config", "DUMP_DIR = %r\n" % str(tmp_path / "dumps") + CTC_CONFIG)
    proc = run_rnn(train_args(config, tmp_path))
    assert proc.returncode == 0, describe(proc)
    assert not (tmp_path / "dumps").exists()  # training writes no dumps
    dev = TaskNumberBaseConvertDataset(input_base=2, output_base=8, num_seqs=12, min_input_seq_len=6,
                                       max_input_seq_len=12, fixed_random_seed=1)
    dev.init_seq_order(1)
    by_tag = {dev.get_tag(i): (dev.get_data(i, "data"), dev.get_data(i, "classes")) for i in range(dev.num_seqs)}
    DEV = {"class": "TaskNumberBaseConvertDataset", "input_base": 2, "output_base": 8, "num_seqs": 12,  # noqa: N806
           "min_input_seq_len": 6, "max_input_seq_len": 12, "fixed_random_seed": 1}
    for task in ("forward", "eval"):
        # RETURNN's task forward runs the 'eval' dataset (here the dev set's dict again), eval the dev set
        name = "eval" if task == "forward" else "dev"
        target = tmp_path / "dumps" / ("align-%s.hdf" % name)
        if target.exists():
            target.unlink()
        extra = ["++eval", repr(DEV), "++output_file", str(tmp_path / "fwd.hdf")] if task == "forward" else []
        proc = run_rnn(train_args(config, tmp_path, "++task", task, "++load_epoch", "1", "++forward_batch_size", "200",
                                  *extra))
        assert proc.returncode == 0, describe(proc)
        assert "dumped dump of %s to" % name in proc.stdout + proc.stderr
        with h5py.File(target, "r") as f:
            inputs = f["inputs"][...]
            lens = f["seqLengths"][...]
            tags = [t.decode() if isinstance(t, bytes) else t for t in f["seqTags"][...]]
        lens = lens[:, 0] if lens.ndim == 2 else lens
        assert sorted(tags) == sorted(by_tag) and inputs.ndim == 1
        offsets = np.concatenate([[0], np.cumsum(lens)])
        for i, tag in enumerate(tags):
            frames, labels = by_tag[tag]
            path = inputs[offsets[i]:offsets[i + 1]]
            assert len(path) == len(frames)
            collapsed = [int(s) for j, s in enumerate(path) if s != 8 and (j == 0 or s != path[j - 1])]
            assert collapsed == labels.tolist()
