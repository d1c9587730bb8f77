"""The training update (returnn/tf/gradients.py) against the real RETURNN: its Updater's parameters
after a few steps with RETURNN's gradient options (gradient_nan_inf_filter, maximize_grad_norm,
gradient_clip*, grad_norm_to_clip_to_zero, decouple_constraints, accum_grad_multiple_step) and
sparse (embedding) gradients for every optimizer (``tests/data/returnn_gradients.json``, written by
``tests/returnn_goldens/make_gradient_goldens.py``), on one rank here and on two ranks under real
mpirun (the ``multi-*`` cases); plus what the goldens cannot show (noise, the reset of the optimizer,
the dense path for dense gradients)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE / "returnn_goldens"))
from make_gradient_goldens import config_of, loss_terms  # noqa: E402  (the goldens' loss, one formula for both)

from returnn.config import Config  # noqa: E402
from returnn.distributed.backend import LocalBackend  # noqa: E402
from returnn.distributed.context import DistributedContext  # noqa: E402
from returnn.tf.gradients import GradientOptions, GradientUpdate, nan_inf_filter  # noqa: E402
from returnn.tf.optimizers import create_optimizer  # noqa: E402

GOLDENS = json.loads((HERE / "data" / "returnn_gradients.json").read_text())
SINGLE = sorted(n for n in GOLDENS["cases"] if not n.startswith("multi-"))
MULTI = sorted(n for n in GOLDENS["cases"] if n.startswith("multi-"))


def run_update(case, dist, ids=None, dense_scale=None, emb_scale=None, occurrences=None, steps=None):
    """This engine's update on the golden's loss: the parameters [x0, x1, E] after the steps."""
    config = Config(config_of(case))
    xs = [tf.Variable(np.array(x, np.float32), name="x%i" % i) for i, x in enumerate(GOLDENS["x0"])]
    emb = tf.Variable(np.array(GOLDENS["e0"], np.float32), name="E")
    variables = xs + [emb]
    optimizer = create_optimizer(config, variables)
    l2 = {id(v): case["l2"][n] for n, v in zip(("x0", "x1", "E"), variables) if n in case["l2"]}
    update = GradientUpdate(variables, optimizer, dist, GradientOptions.from_config(config), l2)
    ids = case["ids"] if ids is None else ids
    occurrences = occurrences or slice(0, len(ids[0]))
    c, t = GOLDENS["c"][occurrences], GOLDENS["t"][occurrences]
    dense_scale = case["dense_scale"] if dense_scale is None else dense_scale
    emb_scale = case["emb_scale"] if emb_scale is None else emb_scale

    @tf.function
    def step(seed, step_ids):
        def loss_fn():
            return tf.zeros([0]), loss_terms(tf, xs, emb, step_ids, c, t, dense_scale, emb_scale, case["nonfinite"],
                                             case["dense_emb"])
        return update.minimize(loss_fn, seed, tf.zeros([3]), 2)[1]

    for i in range(GOLDENS["steps"] if steps is None else steps):
        step(tf.constant([1, i], tf.int64), tf.constant(ids[i % len(ids)], tf.int32))
    return [v.numpy().astype(np.float64).tolist() for v in variables]


def assert_same(ours, golden, name):
    for a, b, what in zip(ours, golden, ("x0", "x1", "E")):
        np.testing.assert_allclose(np.array(a), np.array(b), rtol=2e-5, atol=1e-6, equal_nan=True,
                                   err_msg="%s: %s" % (name, what))


def local_dist():
    return DistributedContext(LocalBackend())


@pytest.mark.parametrize("name", SINGLE)
def test_update_equals_returnn(name):
    case = GOLDENS["cases"][name]
    assert_same(run_update(case, local_dist()), case["values"], name)


def test_sparse_rows_differ_from_a_dense_update():
    """The goldens tell a sparse update from a dense one (else they would prove nothing): with the
    embedding's gradient made dense, momentum-like optimizers move rows without a gradient."""
    from returnn.tf import gradients
    for name in ("sparse-momentum", "sparse-rmsprop", "sparse-adadelta", "sparse-nadam"):
        case = GOLDENS["cases"][name]
        original = gradients.GradientOptions.keeps_sparse
        gradients.GradientOptions.keeps_sparse = property(lambda self: False)
        try:
            dense = run_update(case, local_dist())
        finally:
            gradients.GradientOptions.keeps_sparse = original
        assert not np.allclose(dense[2], case["values"][2], rtol=1e-4), name
        np.testing.assert_allclose(dense[1], case["values"][1], rtol=2e-5, atol=1e-6)  # x1 (not tied to E): same


def test_sparse_equals_dense_for_sgd_adam_adagrad():
    """For SGD, Adam and Adagrad RETURNN's sparse update is the dense one (rows without gradient do
    not move either way): the dense kernel runs for them, and the goldens agree."""
    for name in ("sparse-sgd", "sparse-adam", "sparse-adagrad", "clip-adam"):
        case = GOLDENS["cases"][name]
        assert_same(run_update(case, local_dist()), case["values"], name)
    assert not create_optimizer(Config({"optimizer": {"class": "adam"}}), [tf.Variable([1.0])]).sparse_differs


def test_nan_inf_filter_is_returnns():
    dense = nan_inf_filter(tf.constant([1.0, np.nan, np.inf, -np.inf]))
    np.testing.assert_array_equal(dense.numpy(), [1.0, 0.0, 0.0, 0.0])
    sparse = nan_inf_filter(tf.IndexedSlices(tf.constant([[np.nan, np.inf], [-np.inf, 2.0]]), tf.constant([0, 3]),
                                             tf.constant([5, 2])))
    np.testing.assert_array_equal(sparse.values.numpy(), np.float32([[0.0, 1e30], [-1e30, 2.0]]))  # RETURNN's


def test_gradient_noise_is_truncated_normal():
    """RETURNN's noise: tf.truncated_normal(stddev=s), never beyond 2 s (the old normal noise was)."""
    var = tf.Variable(tf.zeros([20000]))
    opt = create_optimizer(Config({"learning_rate": 1.0}), [var])
    update = GradientUpdate([var], opt, local_dist(), GradientOptions(noise=0.5))

    @tf.function
    def step(seed):
        return update.minimize(lambda: (tf.zeros([0]), tf.reduce_sum(var * 0.0)), seed, tf.zeros([3]), 2)[1]
    step(tf.constant([1, 0], tf.int64))
    noise = -var.numpy()  # SGD at rate 1 on a zero gradient: minus the noise
    assert np.abs(noise).max() <= 1.0 + 1e-6
    assert noise.std() == pytest.approx(0.5 * 0.8796, rel=0.03)  # a normal truncated at 2 stddev


def test_reset_state_restores_initial_slots():
    var = tf.Variable([[1.0, 2.0], [3.0, 4.0]])
    for opts, slot, start in (({"class": "rmsprop"}, "ms", 1.0), ({"class": "adagrad"}, "accumulator", 0.1),
                              ({"class": "adam"}, "m", 0.0)):
        opt = create_optimizer(Config({"optimizer": opts, "learning_rate": 0.1}), [var])
        opt.apply([tf.constant([[1.0, -1.0], [0.5, 2.0]])], [var])
        assert int(opt.iterations.numpy()) == 1
        opt.reset_state()
        np.testing.assert_allclose(opt.slot(slot, 0).numpy(), np.full((2, 2), start, np.float32))
        assert int(opt.iterations.numpy()) == 0


def test_plain_options_trace_no_extra_ops():
    """Without options and without sparse gradients the step is the plain one: no gradient
    post-processing ops in the traced graph (the dense path stays as fast as before)."""
    var = tf.Variable(tf.ones([4, 3]))
    opt = create_optimizer(Config({"optimizer": {"class": "adam"}, "learning_rate": 0.1}), [var])
    update = GradientUpdate([var], opt, local_dist(), GradientOptions())

    @tf.function
    def step(seed):
        return update.minimize(lambda: (tf.zeros([0]), tf.reduce_sum(tf.square(var))), seed, tf.zeros([3]), 2)[1]
    ops = {op.type for op in step.get_concrete_function(tf.TensorSpec([2], tf.int64)).graph.get_operations()}
    assert "ResourceApplyAdam" in ops
    assert not ops & {"L2Loss", "ClipByValue", "Unique", "UnsortedSegmentSum", "Sqrt", "StatelessTruncatedNormalV2"}


# ---- two ranks under real mpirun

@pytest.mark.parametrize("backend", ["mpi", pytest.param("horovod", marks=pytest.mark.skipif(
    not __import__("importlib").util.find_spec("horovod"), reason="Horovod is not installed"))])
def test_two_ranks_equal_returnn_on_all_occurrences(tmp_path, backend):
    """Each rank has its part of the embedding occurrences; the update of both equals RETURNN's on
    all of them (what its Horovod allreduce, an allgather for sparse gradients, gives it): rows
    touched on any rank, clipping per occurrence, norms counting occurrences, horovod_avg_grad."""
    from helpers import MPIRUN_AS_ROOT, PYTHON, REPO, child_env
    out = str(tmp_path / "probe")
    cmd = ["mpirun", "-np", "2", "--oversubscribe", "--bind-to", "none", "--mca", "btl", "tcp,self", PYTHON,
           os.path.join(REPO, "tests", "gradients_probe.py"), backend, out] + MULTI
    proc = subprocess.run(cmd, cwd=REPO, env=child_env(MPIRUN_AS_ROOT), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ranks = [json.loads(Path("%s.rank%i.json" % (out, r)).read_text()) for r in range(2)]
    for name in MULTI:
        assert ranks[0][name] == ranks[1][name], name  # identical on both ranks
        assert_same(ranks[0][name], GOLDENS["cases"][name]["values"], name)
