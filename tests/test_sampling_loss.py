"""RETURNN's sampling_loss without use_full_softmax (returnn/tf/sampling.py): sampled softmax and NCE
from the layer's input and W as (classes, input dim); candidates as TensorFlow's unique samplers
draw them, from the step's seed; statistics against the full softmax and TF's samplers; refusals in
one line; parameter names unchanged; a config trained through rnn.py."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from helpers import describe, run_rnn, train_args, write_config
from returnn.config import Config
from returnn.errors import NetworkError
from returnn.extern_data import extern_data_from_config
from returnn.tf import layers as _all_layers  # noqa: F401  (fills the registry)
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork
from returnn.tf.sampling import Sampler, unique_candidates

V = 20
LENS = [5, 0, 3]


def _net(loss_opts, **layer):
    extern = extern_data_from_config(Config({"extern_data": {"data": {"dim": 6}, "classes": {"dim": V, "sparse": True}}}))
    opts = {"class": "softmax", "from": "data", "loss": "sampling_loss", "use_transposed_weights": True,
            "loss_opts": loss_opts}
    opts.update(layer)
    net = TFNetwork({"output": opts}, extern)
    net.check_losses()
    return net


def _batch(garbage: float = 0.0):
    rng = np.random.RandomState(0)
    x = rng.randn(3, 5, 6).astype("float32")
    y = rng.randint(0, V, (3, 5)).astype("int32")
    for b, n in enumerate(LENS):
        x[b, n:], y[b, n:] = garbage, (V - 1 if garbage else 0)
    lens = tf.constant(LENS, tf.int32)
    return {"data": tf.constant(x), "data:seq_len": lens, "classes": tf.constant(y), "classes:seq_len": lens}


def _stepper(net, train: bool):
    @tf.function(autograph=False)
    def step(batch, seed):
        outputs = net.forward(batch, RunContext(train, seed), only=["output"])
        v = net.compute_losses(outputs, batch, ["output"], train)["output"]
        return tf.stack([v.loss_sum, v.norm, v.error_sum, v.error_norm])
    return lambda batch, seed: step(batch, tf.constant(seed, tf.int64)).numpy()


def _full_ce(net, batch) -> float:
    full = _stepper(_copy_params(net, _net({"use_full_softmax": True})), False)
    return float(full(batch, [0, 0])[0])


def _copy_params(src, dst):
    for k, v in src.layers["output"].own_params.items():
        dst.layers["output"].own_params[k].assign(v)
    return dst


@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
def test_all_classes_sampled_is_the_full_cross_entropy(train):
    """uniform, num_sampled = all classes, remove_accidental_hits: every class once, the same logQ
    shift for all: the full softmax cross entropy exactly (padding and a length-0 sequence ignored)."""
    net = _net({"num_sampled": V, "sampler": "uniform", "remove_accidental_hits": True})
    step = _stepper(net, train)
    full = _full_ce(net, _batch())
    got = step(_batch(), [1, 2])
    assert got[0] == pytest.approx(full, rel=1e-5) and got[1] == sum(LENS) and got[3] == sum(LENS)
    np.testing.assert_allclose(step(_batch(1e4), [1, 2]), got, rtol=1e-5)


def test_log_uniform_close_to_the_vocabulary_approaches_the_full_cross_entropy():
    """log_uniform with num_sampled near the vocabulary: many draws, expected counts near 1, so the
    sampled loss is near the full cross entropy; with few samples it is far below it."""
    net = _net({"num_sampled": V})
    full = _full_ce(net, _batch())
    step = _stepper(net, True)
    near = np.mean([step(_batch(), [s, 1])[0] for s in range(5)])
    assert near == pytest.approx(full, rel=0.03)
    few = _copy_params(net, _net({"num_sampled": 2}))
    assert np.mean([_stepper(few, True)(_batch(), [s, 1])[0] for s in range(5)]) < 0.8 * full


def test_seeds_per_step_nce_splits_and_fixed_unigram():
    for opts in ({"num_sampled": 4}, {"num_sampled": 4, "nce_loss": True, "nce_log_norm_term": 1.5},
                 {"num_sampled": 3, "num_splits": 2, "sampler": "fixed_unigram",
                  "sampler_args": {"unigrams": list(range(1, V)), "num_reserved_ids": 1, "distortion": 0.75}}):
        step = _stepper(_net(opts), True)
        a, b, c = step(_batch(), [4, 7]), step(_batch(), [4, 7]), step(_batch(), [4, 8])
        np.testing.assert_array_equal(a, b)  # the same step: the same candidates
        assert a[0] != c[0] and np.isfinite(a).all(), opts


@pytest.mark.parametrize("kind, tf_sampler", [("uniform", tf.random.uniform_candidate_sampler),
                                              ("log_uniform", tf.random.log_uniform_candidate_sampler)])
def test_candidates_follow_tensorflows_sampler(kind, tf_sampler):
    """How often each class is among the candidates, and the mean expected counts, as TF's own
    (stateful) sampler gives them (Monte Carlo, 1500 draws each)."""
    sampler = Sampler(kind, V, {}, "test")
    true = tf.constant([[0], [7]], tf.int64)
    ours = [unique_candidates(sampler, true, 5, tf.constant([s, 3], tf.int64)) for s in range(1500)]
    theirs = [tf_sampler(true, 1, 5, True, V, seed=s) for s in range(1500)]

    def freq(draws):
        counts = np.zeros(V)
        for d in draws:
            counts[d[0].numpy()] += 1
            assert len(set(d[0].numpy().tolist())) == 5  # distinct
        return counts / len(draws)
    np.testing.assert_allclose(freq(ours), freq(theirs), atol=0.05)
    for i in (1, 2):
        assert np.mean([d[i].numpy().mean() for d in ours]) == pytest.approx(
            np.mean([d[i].numpy().mean() for d in theirs]), rel=0.05)


def _tf_learned_unigram_probs(batches, num_sampled: int = 2):
    """TensorFlow's own stateful op, one instance run once per batch of targets: each class's
    probability at that run (its true expected count without unique sampling / num_sampled)."""
    graph = tf.Graph()
    with graph.as_default():
        true = tf.compat.v1.placeholder(tf.int64, [None, 1])
        every = tf.constant([[c] for c in range(V)], tf.int64)
        op = tf.random.learned_unigram_candidate_sampler(tf.concat([true, every], 0), 1, num_sampled, False, V, seed=3)
        with tf.compat.v1.Session(graph=graph) as sess:
            probs = [sess.run(op.true_expected_count, {true: np.array(b)[:, None]})[len(b):, 0] / num_sampled
                     for b in batches]
    return probs


def test_learned_unigram_learns_the_targets_counts_as_tensorflows_op():
    """learned_unigram (was refused): the distribution the draws of a step use is TF's op state at
    that run: weight 1 per class at the start, each target adding 1 after the step's draws (the
    classes of the op's own calls here counted too: it sees all of them as targets)."""
    batches = [[0, 0, 2], [5, 5, 5, 19], [2]]
    want = _tf_learned_unigram_probs(batches)
    sampler = Sampler("learned_unigram", V, {}, "test")
    every = list(range(V))
    for b, probs in zip(batches, want):
        got = sampler.at_split(0).prob(tf.constant(every)).numpy()
        np.testing.assert_allclose(got, probs, rtol=1e-6)
        sampler.update(0, tf.constant(b + every))
    assert sampler.counts[0].numpy().sum() == V + sum(len(b) + V for b in batches)


def test_learned_unigram_in_training_steps_counts_the_real_frames():
    """Through the loss: per split its own counts, 1 + the targets of the real frames of each step
    (padding and the length-0 sequence not counted); the loss finite; the counts no parameter."""
    net = _net({"num_sampled": 4, "num_splits": 2, "sampler": "learned_unigram"})
    step = _stepper(net, True)
    batch = _batch()
    for seed in (1, 2):
        assert np.isfinite(step(batch, [seed, 0])).all()
    y = batch["classes"].numpy()
    real = np.concatenate([y[b, :n] for b, n in enumerate(LENS)])
    half = len(real) // 2
    counts = net.losses[0].loss.sampler.counts
    for split, part in enumerate((real[:half], real[half:])):
        np.testing.assert_array_equal(counts[split].numpy(), 1 + 2 * np.bincount(part, minlength=V))
    assert all(not v.trainable for v in counts)
    assert sorted(v.name for v in net.trainable_variables) == ["W:0", "b:0"]


def test_parameters_and_their_names_unchanged():
    sampled, full = _net({"num_sampled": 4}), _net({"use_full_softmax": True})
    for net in (sampled, full):
        assert sorted(net.layers["output"].own_params) == ["W", "b"]
        assert net.layers["output"].own_params["W"].shape == (V, 6)
    assert [v.name for v in sampled.trainable_variables] == [v.name for v in full.trainable_variables]


def test_refusals_are_one_line():
    cases = [({"num_sampled": 4}, {"use_transposed_weights": False}, "use_transposed_weights True"),
             ({"num_sampled": 4, "sampler": "uniform", "sampler_args": {"seed": 1}}, {}, "sampler_args 'seed'"),
             ({"num_sampled": 4, "sampler": "learned_unigram", "sampler_args": {"unigrams": [1]}}, {},
              "sampler_args 'unigrams'"),
             ({"num_sampled": V + 1}, {}, "num_sampled 21"),
             ({"num_sampled": 4}, {"with_bias": False}, "bias"),
             ({"num_sampled": 4, "remove_accidental_hits": 1}, {}, "remove_accidental_hits")]
    for opts, layer, needle in cases:
        with pytest.raises(NetworkError) as exc:
            _net(opts, **layer)
        assert "\n" not in str(exc.value) and "'output'" in str(exc.value) and needle in str(exc.value), str(exc.value)


CONFIG = '''#!rnn.py
import numpy as np
_rng = np.random.RandomState(0)
_data = [{"data": _rng.randn(n, 6).astype("float32"), "classes": _rng.randint(0, 30, size=n).astype("int32")}
         for n in [7, 0, 5, 9, 4, 6]]
train = {"class": "StaticDataset", "input_dim": 6, "output_dim": 30, "data": _data}
dev = {"class": "StaticDataset", "input_dim": 6, "output_dim": 30, "data": _data[:3]}
num_inputs = 6
num_outputs = 30
batch_size = 30
max_seqs = 3
network = {"output": {"class": "softmax", "from": "data", "loss": "sampling_loss", "use_transposed_weights": True,
                      "dropout": 0.1, "loss_opts": {"num_sampled": 8}}}
learning_rate = 0.05
num_epochs = 2
tf_session_opts = {"intra_op_parallelism_threads": 1, "inter_op_parallelism_threads": 1}
'''


def test_config_with_sampling_loss_trains(tmp_path):
    config = write_config(tmp_path / "c.config", CONFIG)
    proc = run_rnn(train_args(config, tmp_path))
    assert proc.returncode == 0, describe(proc)
    reader = tf.train.load_checkpoint(str(tmp_path / "model.002"))
    shapes = {k: v for k, v in reader.get_variable_to_shape_map().items() if k.startswith("output/")}
    assert shapes.get("output/W") == [30, 6] and shapes.get("output/b") == [30], shapes


def _rec_net(loss_opts, in_loop: bool = False):
    extern = extern_data_from_config(Config({"extern_data": {"data": {"dim": 6}, "classes": {"dim": V, "sparse": True}}}))
    unit = {"h": {"class": "linear", "activation": "tanh", "n_out": 7,
                  "from": ["data:source", "prev:output" if in_loop else "prev:h"]},
            "output": {"class": "softmax", "from": "h", "loss": "sampling_loss",
                       "use_transposed_weights": True, "loss_opts": loss_opts, "target": "classes"}}
    net = TFNetwork({"output": {"class": "rec", "from": "data", "unit": unit, "target": "classes"}}, extern)
    net.check_losses()
    return net


def _rec_loss(net, batch, train=True):
    outputs = net.forward(batch, RunContext(train, tf.constant([4, 5], tf.int64)))
    v = net.compute_losses(outputs, batch, train=train)["output/output"]
    return np.array([float(v.loss_sum), float(v.norm)])


def test_in_a_rec_unit_over_the_stacked_frames():
    """A softmax of a rec unit computed over the loop's stacked outputs (moved out of the loop): its
    sampled loss reads the stacked input; all classes sampled: the full cross entropy of the real
    frames (padding and a length-0 sequence ignored)."""
    net = _rec_net({"num_sampled": V, "sampler": "uniform", "remove_accidental_hits": True})
    full = _rec_net({"use_full_softmax": True})
    for k, v in net.layers["output"].sub_layers().items():
        for name, var in v.own_params.items():
            full.layers["output"].sub_layers()[k].own_params[name].assign(var)
    got, want = _rec_loss(net, _batch()), _rec_loss(full, _batch())
    assert got[1] == sum(LENS) and got[0] == pytest.approx(want[0], rel=1e-5)
    np.testing.assert_allclose(_rec_loss(net, _batch(1e4)), got, rtol=1e-5)
    stepwise = _rec_net({"num_sampled": 4}, in_loop=True)  # its input depends on the previous step's output
    with pytest.raises(NetworkError, match="'output/output'.*sampled loss of a layer computed step by step"):
        _rec_loss(stepwise, _batch())
