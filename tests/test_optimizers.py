"""Optimizers against the real RETURNN (``tests/data/returnn_optimizers.json``: RETURNN's Updater on a
tiny quadratic, written by ``tests/returnn_goldens/make_optimizer_goldens.py``) and against numpy
re-implementations of TensorFlow's v1 optimizers (RETURNN's) on the same quadratic; config forms and
errors."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from returnn.config import Config
from returnn.errors import ConfigError
from returnn.tf.optimizers import create_optimizer, optimizer_options

STEPS = 6
X0 = [np.array([1.0, -2.0, 0.5], dtype=np.float64), np.array([[0.3, -0.7], [2.0, 0.0]], dtype=np.float64)]
SCALE = [np.array([1.0, 3.0, 0.5]), np.array([[2.0, 1.0], [0.25, 4.0]])]
TARGET = [np.array([0.5, 0.5, -1.0]), np.array([[0.0, 1.0], [-1.0, 0.2]])]


def grads_np(xs):
    """Gradient of 0.5 * sum(scale * (x - target)**2)."""
    return [a * (x - b) for x, a, b in zip(xs, SCALE, TARGET)]


def run_tf(config_dict, steps=STEPS):
    variables = [tf.Variable(x.astype(np.float32)) for x in X0]
    opt = create_optimizer(Config(config_dict), variables)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = tf.add_n([0.5 * tf.reduce_sum(a * tf.square(v - b))
                             for v, a, b in zip(variables, SCALE, TARGET)])
        opt.apply(tape.gradient(loss, variables), variables)

    for _ in range(steps):
        step()
    return opt, [v.numpy().astype(np.float64) for v in variables]


# ---- numpy references: each returns the parameters after STEPS updates

def np_sgd(lr, **_):
    xs = [x.copy() for x in X0]
    for _ in range(STEPS):
        xs = [x - lr * g for x, g in zip(xs, grads_np(xs))]
    return xs


def np_momentum(lr, mu, nesterov=False, **_):
    xs, ms = [x.copy() for x in X0], [np.zeros_like(x) for x in X0]
    for _ in range(STEPS):
        gs = grads_np(xs)
        ms = [mu * m + g for m, g in zip(ms, gs)]
        xs = [x - lr * ((g + mu * m) if nesterov else m) for x, g, m in zip(xs, gs, ms)]
    return xs


def np_adam(lr, b1=0.9, b2=0.999, eps=1e-16, nesterov=False, **_):
    """TensorFlow's v1 AdamOptimizer (RETURNN's): the bias correction in the rate, epsilon added to
    sqrt(v) after it ("epsilon hat"); ``nesterov``: RETURNN's NadamOptimizer (the fused kernel's
    Nesterov form, b1 * m + (1 - b1) * g in place of m)."""
    xs, ms, vs = [x.copy() for x in X0], [np.zeros_like(x) for x in X0], [np.zeros_like(x) for x in X0]
    for t in range(1, STEPS + 1):
        gs = grads_np(xs)
        ms = [b1 * m + (1 - b1) * g for m, g in zip(ms, gs)]
        vs = [b2 * v + (1 - b2) * g * g for v, g in zip(vs, gs)]
        lr_t = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        xs = [x - lr_t * ((b1 * m + (1 - b1) * g) if nesterov else m) / (np.sqrt(v) + eps)
              for x, m, v, g in zip(xs, ms, vs, gs)]
    return xs


def np_adam_eps_inside(lr, b1=0.9, b2=0.999, eps=1e-16):
    """Adam with epsilon added to the bias-corrected sqrt(v_hat) (Keras' form; NOT RETURNN's)."""
    xs, ms, vs = [x.copy() for x in X0], [np.zeros_like(x) for x in X0], [np.zeros_like(x) for x in X0]
    for t in range(1, STEPS + 1):
        gs = grads_np(xs)
        ms = [b1 * m + (1 - b1) * g for m, g in zip(ms, gs)]
        vs = [b2 * v + (1 - b2) * g * g for v, g in zip(vs, gs)]
        xs = [x - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps) for x, m, v in zip(xs, ms, vs)]
    return xs


def np_rmsprop(lr, rho=0.9, eps=1e-16, momentum=0.0, centered=False, **_):
    """TensorFlow's v1 RMSPropOptimizer, which RETURNN uses: ms starts at ones, eps inside the root."""
    xs, ss = [x.copy() for x in X0], [np.ones_like(x) for x in X0]
    moms, mgs = [np.zeros_like(x) for x in X0], [np.zeros_like(x) for x in X0]
    for _ in range(STEPS):
        gs = grads_np(xs)
        ss = [rho * s + (1 - rho) * g * g for s, g in zip(ss, gs)]
        mgs = [rho * m + (1 - rho) * g for m, g in zip(mgs, gs)]
        denom = [s - m * m if centered else s for s, m in zip(ss, mgs)]
        moms = [momentum * m + lr * g / np.sqrt(d + eps) for m, g, d in zip(moms, gs, denom)]
        xs = [x - m for x, m in zip(xs, moms)]
    return xs


def np_adagrad(lr, init=0.1, **_):
    """TensorFlow's v1 AdagradOptimizer: the accumulator starts at ``init``, no epsilon."""
    xs, accs = [x.copy() for x in X0], [np.full_like(x, init) for x in X0]
    for _ in range(STEPS):
        gs = grads_np(xs)
        accs = [a + g * g for a, g in zip(accs, gs)]
        xs = [x - lr * g / np.sqrt(a) for x, g, a in zip(xs, gs, accs)]
    return xs


def np_adadelta(lr, rho=0.95, eps=1e-16, **_):
    """TensorFlow's v1 AdadeltaOptimizer; RETURNN gives it optimizer_epsilon (1e-16) by default."""
    xs = [x.copy() for x in X0]
    acc_g, acc_u = [np.zeros_like(x) for x in X0], [np.zeros_like(x) for x in X0]
    for _ in range(STEPS):
        gs = grads_np(xs)
        new_x, new_g, new_u = [], [], []
        for x, g, ag, au in zip(xs, gs, acc_g, acc_u):
            ag = rho * ag + (1 - rho) * g * g
            upd = np.sqrt(au + eps) / np.sqrt(ag + eps) * g
            au = rho * au + (1 - rho) * upd * upd
            new_x.append(x - lr * upd)
            new_g.append(ag)
            new_u.append(au)
        xs, acc_g, acc_u = new_x, new_g, new_u
    return xs


STUCK = ("adadelta", "adadelta-old-style")  # RETURNN's Adadelta at its epsilon 1e-16: steps of ~1e-8
CASES = [
    ("sgd", {"optimizer": {"class": "sgd"}, "learning_rate": 0.1}, lambda: np_sgd(0.1)),
    ("sgd-default", {"learning_rate": 0.05}, lambda: np_sgd(0.05)),
    ("momentum", {"optimizer": {"class": "momentum", "momentum": 0.8}, "learning_rate": 0.05},
     lambda: np_momentum(0.05, 0.8)),
    ("momentum-nesterov", {"optimizer": {"class": "momentum", "momentum": 0.7, "nesterov": True},
                           "learning_rate": 0.05}, lambda: np_momentum(0.05, 0.7, nesterov=True)),
    ("momentum-use-nesterov", {"optimizer": {"class": "momentum", "momentum": 0.7, "use_nesterov": True},
                               "learning_rate": 0.05}, lambda: np_momentum(0.05, 0.7, nesterov=True)),
    ("momentum-old-style", {"momentum": 0.6, "learning_rate": 0.05}, lambda: np_momentum(0.05, 0.6)),
    ("adam", {"optimizer": {"class": "adam"}, "learning_rate": 0.01}, lambda: np_adam(0.01)),
    ("adam-old-style", {"adam": True, "learning_rate": 0.02}, lambda: np_adam(0.02)),
    ("adam-options", {"optimizer": {"class": "Adam", "beta1": 0.5, "beta2": 0.9, "epsilon": 0.1},
                      "learning_rate": 0.03}, lambda: np_adam(0.03, 0.5, 0.9, 0.1)),
    ("adam-config-epsilon", {"adam": True, "optimizer_epsilon": 0.01, "learning_rate": 0.02},
     lambda: np_adam(0.02, eps=0.01)),
    ("adam-epsilon-1e-3", {"optimizer": {"class": "adam", "epsilon": 1e-3}, "learning_rate": 0.01},
     lambda: np_adam(0.01, eps=1e-3)),
    ("nadam-options", {"optimizer": {"class": "nadam", "beta1": 0.8, "epsilon": 0.05}, "learning_rate": 0.02},
     lambda: np_adam(0.02, 0.8, eps=0.05, nesterov=True)),
    ("nadam", {"optimizer": "nadam", "learning_rate": 0.01}, lambda: np_adam(0.01, nesterov=True)),
    ("nadam-old-style", {"nadam": True, "learning_rate": 0.01}, lambda: np_adam(0.01, nesterov=True)),
    ("rmsprop", {"optimizer": {"class": "rmsprop", "decay": 0.8}, "learning_rate": 0.01},
     lambda: np_rmsprop(0.01, 0.8)),
    ("rmsprop-old-style", {"rmsprop": True, "learning_rate": 0.01}, lambda: np_rmsprop(0.01)),
    ("rmsprop-old-style-decay-momentum", {"rmsprop": 0.7, "momentum": 0.5, "learning_rate": 0.01},
     lambda: np_rmsprop(0.01, 0.7, momentum=0.5)),
    ("rmsprop-centered", {"optimizer": {"class": "rmsprop", "centered": True, "momentum": 0.3, "epsilon": 1e-3},
                          "learning_rate": 0.01}, lambda: np_rmsprop(0.01, momentum=0.3, centered=True, eps=1e-3)),
    ("adagrad", {"optimizer": {"class": "adagrad"}, "learning_rate": 0.1}, lambda: np_adagrad(0.1)),
    ("adagrad-old-style", {"adagrad": True, "learning_rate": 0.2, "optimizer_epsilon": 0.5}, lambda: np_adagrad(0.2)),
    ("adagrad-initial", {"optimizer": {"class": "adagrad", "initial_accumulator_value": 1.0}, "learning_rate": 0.1},
     lambda: np_adagrad(0.1, 1.0)),
    ("lr-multiplier", {"optimizer": {"class": "sgd", "learning_rate_multiplier": 0.5}, "learning_rate": 0.2},
     lambda: np_sgd(0.1)),
    ("adadelta", {"optimizer": {"class": "adadelta"}, "learning_rate": 1.0}, lambda: np_adadelta(1.0)),
    ("adadelta-old-style", {"adadelta": True, "learning_rate": 1.0}, lambda: np_adadelta(1.0)),
    ("adadelta-config-epsilon", {"adadelta": True, "optimizer_epsilon": 1e-6, "learning_rate": 1.0},
     lambda: np_adadelta(1.0, eps=1e-6)),
    ("adadelta-options", {"optimizer": {"class": "adadelta", "rho": 0.9, "epsilon": 1e-3}, "learning_rate": 0.5},
     lambda: np_adadelta(0.5, 0.9, 1e-3)),
]


@pytest.mark.parametrize("name,config,reference", CASES, ids=[c[0] for c in CASES])
def test_optimizer_matches_numpy(name, config, reference):
    opt, got = run_tf(config)
    expected = reference()
    for g, e, x0 in zip(got, expected, X0):
        # the reference moved, so the comparison means something (Adadelta at RETURNN's epsilon 1e-16
        # hardly moves: its first steps are ~sqrt(eps); 1e-6 would move it by ~1e-2)
        assert np.max(np.abs(e - x0)) > (1e-7 if name in STUCK else 1e-3)
        np.testing.assert_allclose(g, e, rtol=2e-5, atol=2e-6)
    assert int(opt.iterations.numpy()) == STEPS


GOLDEN = json.loads((Path(__file__).resolve().parent / "data" / "returnn_optimizers.json").read_text())
GOLDEN_CASES = sorted(GOLDEN["cases"])
# configs the real RETURNN fails on with TF 2.15 (it maps them to Keras optimizers its wrapper cannot
# drive); this engine runs them as the TF 1 RETURNN did: "sgd" as plain gradient descent, the old
# ``nadam = True`` as RETURNN's NadamOptimizer (TF 1's contrib Nadam): compared with those goldens
RETURNN_FAILS = {"sgd": "gradientdescent", "sgd-config-momentum": None, "nadam-old-style": "nadam"}


def test_golden_constants_are_this_files():
    assert GOLDEN["steps"] == STEPS
    for name, ours in (("x0", X0), ("scale", SCALE), ("target", TARGET)):
        for g, o in zip(GOLDEN[name], ours):
            np.testing.assert_array_equal(np.array(g), o)
    assert {n for n in GOLDEN_CASES if "error" in GOLDEN["cases"][n]} == set(RETURNN_FAILS)


@pytest.mark.parametrize("name", GOLDEN_CASES)
def test_optimizer_matches_returnn(name):
    """RETURNN's Updater (TF's v1 optimizers, RETURNN's defaults) from the same config, same quadratic."""
    case = GOLDEN["cases"][name]
    ref = case
    if "error" in case:
        if RETURNN_FAILS[name] is None:
            pytest.skip("RETURNN fails on this config: %s" % case["error"])
        ref = GOLDEN["cases"][RETURNN_FAILS[name]]
        assert ref["config"]["learning_rate"] == case["config"]["learning_rate"]
    opt, got = run_tf(case["config"])
    for g, e, x0 in zip(got, ref["x"], X0):
        e = np.array(e)
        assert np.max(np.abs(e - x0)) > (1e-7 if name in STUCK else 1e-3)
        np.testing.assert_allclose(g, e, rtol=2e-5, atol=2e-6, err_msg="%s (RETURNN: %s)" % (name, ref["optimizer"]))
    assert int(opt.iterations.numpy()) == STEPS


def test_adam_epsilon_is_added_after_bias_correction():
    """With epsilon 0.1 the two Adam forms differ by far more than the tolerance: ours is TF v1's."""
    ref = np.array(GOLDEN["cases"]["adam-options"]["x"][0])
    assert np.max(np.abs(np.array(np_adam(0.03, 0.5, 0.9, 0.1)[0]) - ref)) < 1e-5
    assert np.max(np.abs(np.array(np_adam_eps_inside(0.03, 0.5, 0.9, 0.1)[0]) - ref)) > 1e-3


def test_old_style_momentum_refused_with_adam_like_flags():
    for flag in ("adam", "nadam", "adadelta", "adagrad"):
        with pytest.raises(ConfigError, match="momentum"):
            optimizer_options(Config({flag: True, "momentum": 0.9}))


def test_old_flags_refused_from_behavior_version_2():
    """RETURNN's Updater: only 'optimizer' (or plain SGD) from behavior_version 2 on."""
    for flag, value in (("adam", True), ("rmsprop", True), ("momentum", 0.9)):
        with pytest.raises(ConfigError, match="from behavior_version 2 on"):
            optimizer_options(Config({flag: value, "behavior_version": 2}))
        assert optimizer_options(Config({flag: value, "behavior_version": 1}))["class"] == flag
    assert optimizer_options(Config({"behavior_version": 12})) == {"class": "sgd"}
    assert optimizer_options(Config({"optimizer": {"class": "adam"}, "behavior_version": 12}))["class"] == "adam"


def test_nadam_differs_from_adam_and_nesterov_from_momentum():
    adam, nadam = np_adam(0.01), np_adam(0.01, nesterov=True)
    assert max(np.max(np.abs(a - b)) for a, b in zip(adam, nadam)) > 1e-3
    m, n = np_momentum(0.05, 0.7), np_momentum(0.05, 0.7, nesterov=True)
    assert max(np.max(np.abs(a - b)) for a, b in zip(m, n)) > 1e-3


def test_learning_rate_variable_controls_step():
    variables = [tf.Variable(x.astype(np.float32)) for x in X0]
    opt = create_optimizer(Config({"learning_rate": 0.1}), variables)
    opt.learning_rate.assign(0.0)
    opt.apply([tf.constant(g, tf.float32) for g in grads_np(X0)], variables)
    for v, x in zip(variables, X0):
        np.testing.assert_allclose(v.numpy(), x, rtol=1e-6)
    opt.learning_rate.assign(0.5)
    opt.apply([tf.constant(g, tf.float32) for g in grads_np(X0)], variables)
    for v, x, g in zip(variables, X0, grads_np(X0)):
        np.testing.assert_allclose(v.numpy(), x - 0.5 * g, rtol=1e-6)


def test_slots_are_per_variable_and_tracked():
    variables = [tf.Variable(x.astype(np.float32)) for x in X0]
    opt = create_optimizer(Config({"adam": True}), variables)
    assert [s.shape for s in opt.slots["m"]] == [v.shape for v in variables]
    names = {v.name for v in opt.variables}
    assert len(opt.variables) == 2 + 2 * len(variables)  # lr, iterations, m and v per variable
    assert any("iterations" in n for n in names)


def test_optimizer_options_forms():
    assert optimizer_options(Config({}))["class"] == "sgd"
    assert optimizer_options(Config({"adam": True})) == {"class": "adam"}
    assert optimizer_options(Config({"adam": False, "nadam": True})) == {"class": "nadam"}
    assert optimizer_options(Config({"optimizer": "rmsprop"})) == {"class": "rmsprop"}
    assert optimizer_options(Config({"momentum": 0.9}))["class"] == "momentum"
    # RETURNN's precedence of the old flags: adam, nadam, adadelta, adagrad, rmsprop, momentum
    assert optimizer_options(Config({"rmsprop": True, "adagrad": True}))["class"] == "adagrad"
    assert optimizer_options(Config({"rmsprop": True, "adadelta": True}))["class"] == "adadelta"
    assert optimizer_options(Config({"rmsprop": 0.95, "momentum": 0.9})) == {"class": "rmsprop", "decay": 0.95}


def test_unknown_optimizer_lists_known():
    with pytest.raises(ConfigError) as info:
        create_optimizer(Config({"optimizer": {"class": "yogi"}}), [tf.Variable([1.0])])  # not RETURNN's either
    text = str(info.value)
    assert "unknown class 'yogi'" in text
    for known in ("adam", "nadam", "sgd", "momentum", "rmsprop", "adadelta", "adagrad", "proximaladagrad"):
        assert known in text


def test_bad_optimizer_option_is_config_error():
    with pytest.raises(ConfigError, match="adam"):
        create_optimizer(Config({"optimizer": {"class": "adam", "bogus": 1}}), [tf.Variable([1.0])])
    with pytest.raises(ConfigError, match="optimizer"):
        create_optimizer(Config({"optimizer": {"beta_1": 0.9}}), [tf.Variable([1.0])])


@pytest.mark.parametrize("config,needle", [
    ({"optimizer": {"class": "adam", "learning_rate": 0.1}}, "no 'learning_rate' in the dict"),
    ({"optimizer": {"class": "adam", "beta_1": 0.5}}, "bad option"),  # Keras' name: TF v1 Adam's is beta1
    ({"optimizer": {"class": "adagrad", "epsilon": 0.1}}, "has no 'epsilon'"),
    ({"optimizer": {"class": "sgd"}, "momentum": 0.9}, "Keras' SGD with that momentum"),
])
def test_optimizer_options_returnn_refuses_are_refused(config, needle):
    from returnn.errors import ConfigError
    with pytest.raises(ConfigError, match=needle):
        create_optimizer(Config(dict(config, learning_rate=0.01)), [tf.Variable([1.0])])


@pytest.mark.parametrize("name", ["adam", "momentum", "rmsprop"])
def test_update_of_a_subset_uses_each_variables_own_slots(name):
    """The train step passes only the parameters with a gradient (RETURNN skips the others): each
    is updated with its own slots, as if all had been given with the others' gradients absent."""
    config = {"optimizer": {"class": name}, "learning_rate": 0.1}
    variables = [tf.Variable(x.astype(np.float32)) for x in X0]
    opt = create_optimizer(Config(config), variables)
    g = grads_np([v.numpy().astype(np.float64) for v in variables])[1].astype(np.float32)
    opt.apply([tf.constant(g)], [variables[1]])  # only the second, shape (2, 2): slots of index 1
    alone = [tf.Variable(X0[1].astype(np.float32))]
    create_optimizer(Config(config), alone).apply([tf.constant(g)], alone)
    np.testing.assert_allclose(variables[1].numpy(), alone[0].numpy(), rtol=1e-6)
    np.testing.assert_array_equal(variables[0].numpy(), X0[0].astype(np.float32))  # untouched
