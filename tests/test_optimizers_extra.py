"""The rarer optimizer classes (returnn/tf/optimizers_extra.py) on test_optimizers' quadratic: TF's v1
proximal optimizers against the very TF v1 classes RETURNN runs (graph mode, dense and sparse), RETURNN's
custom ones against numpy re-implementations of RETURNN's code; the class names RETURNN fails on.
Whole runs against the real RETURNN: engine-run goldens ``opt_*`` (tests/test_returnn_engine_runs.py)."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from returnn.config import Config
from returnn.errors import ConfigError
from returnn.tf.gradients import deduplicate
from returnn.tf.optimizers import create_optimizer
from returnn.tf.optimizers_extra import RETURNN_FAILS
from test_optimizers import STEPS, X0, grads_np, run_tf


def gathered_term(v, rows):
    """The first parameter's term of the quadratic over the rows ``rows`` (each occurrence counts)."""
    from test_optimizers import SCALE, TARGET
    scale, target = (tf.gather(tf.constant(x, tf.float32), rows) for x in (SCALE[0], TARGET[0]))
    return 0.5 * tf.reduce_sum(scale * tf.square(tf.gather(v, rows) - target))


def tf_v1(make_optimizer, sparse_rows=None):
    """The parameters after STEPS updates of TF's v1 optimizer ``make_optimizer()`` (graph mode) on the
    quadratic; ``sparse_rows``: the first parameter is read through ``tf.gather`` of these rows (a
    sparse gradient, duplicates included)."""
    from test_optimizers import SCALE, TARGET
    with tf.Graph().as_default():
        variables = [tf.compat.v1.Variable(x.astype(np.float32), use_resource=True) for x in X0]
        terms = [0.5 * tf.reduce_sum(a * tf.square(v - b)) for v, a, b in zip(variables, SCALE, TARGET)]
        if sparse_rows is not None:
            rows = tf.constant(sparse_rows)
            terms[0] = gathered_term(variables[0], rows)
        train = make_optimizer().minimize(tf.add_n(terms), var_list=variables)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            for _ in range(STEPS):
                session.run(train)
            return [x.astype(np.float64) for x in session.run(variables)]


def run_sparse(config, rows):
    """:func:`run_tf` with the first parameter read through ``tf.gather(rows)``, its gradient given
    as the train step gives it (``tf.IndexedSlices``, duplicates summed)."""
    from test_optimizers import SCALE, TARGET
    variables = [tf.Variable(x.astype(np.float32)) for x in X0]
    opt = create_optimizer(Config(config), variables)
    rows_t = tf.constant(rows)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            terms = [gathered_term(variables[0], rows_t)] + [
                0.5 * tf.reduce_sum(a * tf.square(v - b)) for v, a, b in zip(variables[1:], SCALE[1:], TARGET[1:])]
            loss = tf.add_n(terms)
        grads = tape.gradient(loss, variables)
        assert isinstance(grads[0], tf.IndexedSlices)
        opt.apply([deduplicate(grads[0])] + grads[1:], variables)

    for _ in range(STEPS):
        step()
    return [v.numpy().astype(np.float64) for v in variables]


PROXIMAL = [
    ("proximaladagrad", {"class": "ProximalAdagradOptimizer", "initial_accumulator_value": 0.3,
                         "l1_regularization_strength": 0.05, "l2_regularization_strength": 0.1},
     lambda: tf.compat.v1.train.ProximalAdagradOptimizer(0.2, 0.3, 0.05, 0.1)),
    ("proximalgradientdescent", {"class": "proximalgradientdescent", "l1_regularization_strength": 0.05,
                                 "l2_regularization_strength": 0.1},
     lambda: tf.compat.v1.train.ProximalGradientDescentOptimizer(0.2, 0.05, 0.1)),
]


@pytest.mark.parametrize("name,opts,reference", PROXIMAL, ids=[c[0] for c in PROXIMAL])
def test_proximal_as_tensorflow_v1(name, opts, reference):
    _, got = run_tf({"optimizer": opts, "learning_rate": 0.2})
    for g, e, x0 in zip(got, tf_v1(reference), X0):
        assert np.max(np.abs(e - x0)) > 1e-3
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,opts,reference", PROXIMAL, ids=[c[0] for c in PROXIMAL])
def test_proximal_sparse_as_tensorflow_v1(name, opts, reference):
    """Rows 0 (twice) and 2 touched: row 1 keeps its value (not shrunk, as TF's sparse kernels)."""
    rows = [0, 2, 0]
    got = run_sparse({"optimizer": opts, "learning_rate": 0.2}, rows)
    want = tf_v1(reference, sparse_rows=rows)
    assert got[0][1] == np.float32(X0[0][1])
    for g, e in zip(got, want):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


# ---- numpy re-implementations of RETURNN's custom optimizers (returnn/tf/updater.py)

def np_custom(kind, lr, beta1=0.9, beta2=0.999, eps=1e-16, decrease_factor=0.1):
    xs = [x.copy() for x in X0]
    ms, vs = [np.zeros_like(x) for x in X0], [np.zeros_like(x) for x in X0]
    for t in range(1, STEPS + 1):
        for i, g in enumerate(grads_np(xs)):
            if kind == "customgradientdescent":
                xs[i] = xs[i] - lr * g
            elif kind == "normalizedsgd":
                xs[i] = xs[i] - lr * g / max(np.sqrt(np.sum(g * g)), 1e-6)
            elif kind == "customadam":
                ms[i] = beta1 * ms[i] + (1 - beta1) * g
                vs[i] = beta2 * vs[i] + (1 - beta2) * g * g
                xs[i] = xs[i] - lr * np.sqrt(1 - beta2 ** t) / (1 - beta1 ** t) * ms[i] / (np.sqrt(vs[i]) + eps)
            elif kind == "gradvariancescaled":
                ms[i] = beta1 * ms[i] + (1 - beta1) * g
                var = (g - ms[i]) ** 2
                vs[i] = beta2 * vs[i] + (1 - beta2) * var
                xs[i] = xs[i] - lr * g * np.minimum(vs[i] / (var + eps), 1.0)
            elif kind == "neuraloptimizer1":
                ms[i] = beta1 * ms[i] + (1 - beta1) * g
                xs[i] = xs[i] - lr * g * np.where(np.sign(ms[i]) == np.sign(g), 1.0, decrease_factor)
    return xs


CUSTOM = [
    ("customgradientdescent", {"optimizer": {"class": "CustomGradientDescentOptimizer"}, "learning_rate": 0.1},
     lambda: np_custom("customgradientdescent", 0.1)),
    ("normalizedsgd", {"optimizer": {"class": "normalizedsgd"}, "learning_rate": 0.1},
     lambda: np_custom("normalizedsgd", 0.1)),
    ("customadam", {"optimizer": {"class": "customadam", "beta1": 0.8}, "learning_rate": 0.05},
     lambda: np_custom("customadam", 0.05, beta1=0.8)),
    ("customadam-epsilon", {"optimizer": {"class": "customadam"}, "optimizer_epsilon": 0.1, "learning_rate": 0.05},
     lambda: np_custom("customadam", 0.05, eps=0.1)),
    ("gradvariancescaled", {"optimizer": {"class": "gradvariancescaled", "beta2": 0.9, "epsilon": 1e-3},
                            "learning_rate": 0.1}, lambda: np_custom("gradvariancescaled", 0.1, beta2=0.9, eps=1e-3)),
    ("neuraloptimizer1", {"optimizer": {"class": "NeuralOptimizer1", "beta1": 0.5, "decrease_factor": 0.3},
                          "learning_rate": 0.1}, lambda: np_custom("neuraloptimizer1", 0.1, beta1=0.5,
                                                                   decrease_factor=0.3)),
]


@pytest.mark.parametrize("name,config,reference", CUSTOM, ids=[c[0] for c in CUSTOM])
def test_custom_as_returnn_code(name, config, reference):
    _, got = run_tf(config)
    for g, e, x0 in zip(got, reference(), X0):
        assert np.max(np.abs(e - x0)) > 1e-3
        np.testing.assert_allclose(g, e, rtol=2e-5, atol=2e-6)


def test_customgradientdescent_sparse_is_gradient_descent():
    rows = [0, 2, 0]
    got = run_sparse({"optimizer": {"class": "customgradientdescent"}, "learning_rate": 0.1}, rows)
    want = tf_v1(lambda: tf.compat.v1.train.GradientDescentOptimizer(0.1), sparse_rows=rows)
    for g, e in zip(got, want):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["normalizedsgd", "customadam", "gradvariancescaled", "neuraloptimizer1"])
def test_custom_sparse_refused(name):
    with pytest.raises(ConfigError, match="sparse gradient.*without summing duplicates"):
        run_sparse({"optimizer": {"class": name}, "learning_rate": 0.1}, [0, 2, 0])


@pytest.mark.parametrize("name", sorted(RETURNN_FAILS) + ["AMSGradOptimizer", "AdagradDAOptimizer"])
def test_classes_returnn_fails_on_are_refused(name):
    with pytest.raises(ConfigError, match="fails in RETURNN 1.20261022 with TensorFlow 2.15"):
        create_optimizer(Config({"optimizer": {"class": name}, "learning_rate": 0.1}), [tf.Variable([1.0])])


@pytest.mark.parametrize("name", ["proximaladagrad", "proximalgradientdescent", "customgradientdescent",
                                  "normalizedsgd", "neuraloptimizer1"])
def test_epsilon_refused_where_the_class_has_none(name):
    with pytest.raises(ConfigError, match="has no 'epsilon'"):
        create_optimizer(Config({"optimizer": {"class": name, "epsilon": 0.1}, "learning_rate": 0.1}),
                         [tf.Variable([1.0])])


def test_proximaladagrad_accumulator_must_be_positive():
    with pytest.raises(ConfigError, match="initial_accumulator_value must be positive"):
        create_optimizer(Config({"optimizer": {"class": "proximaladagrad", "initial_accumulator_value": 0.0},
                                 "learning_rate": 0.1}), [tf.Variable([1.0])])


@pytest.mark.parametrize("name", ["adam", "momentum", "proximaladagrad", "customadam"])
def test_use_locking_accepted_same_update(name):
    """RETURNN passes use_locking to the class (TF's variable locking): the same update (engine-run golden
    opt_use_locking)."""
    base = {"optimizer": {"class": name}, "learning_rate": 0.05}
    locked = {"optimizer": {"class": name, "use_locking": True}, "learning_rate": 0.05}
    for g, e in zip(run_tf(locked)[1], run_tf(base)[1]):
        np.testing.assert_array_equal(g, e)


def test_name_option():
    """RETURNN gives 'name' to the class (its TensorFlow name scope): any scope name trains, another fails
    there ("'hidden/W/Adam 2' is not a valid scope name", checked with RETURNN 1.20261022)."""
    base = run_tf({"optimizer": {"class": "adam"}, "learning_rate": 0.05})[1]
    for g, e in zip(run_tf({"optimizer": {"class": "adam", "name": "my-adam"}, "learning_rate": 0.05})[1], base):
        np.testing.assert_array_equal(g, e)
    with pytest.raises(ConfigError, match="not a valid TensorFlow scope name"):
        create_optimizer(Config({"optimizer": {"class": "adam", "name": "Adam 2"}, "learning_rate": 0.1}),
                         [tf.Variable([1.0])])
