"""RETURNN training keys that change what is trained, through the engine: use_last_best_model,
reset_updater_vars_mod_step, decouple_constraints, learning_rate_growth (rates and RETURNN's
get_last_best_epoch against the real RETURNN: tests/data/returnn_gradients.json), maximize_grad_norm
and gradient_nan_inf_filter in a real run (RETURNN's demos set them)."""
from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from helpers import TINY_12AX, describe, run_rnn, train_args, write_config
from returnn.config import Config
from returnn.distributed.backend import LocalBackend
from returnn.distributed.context import DistributedContext
from returnn.extern_data import extern_data_from_config
from returnn.learning_rate_control import LearningRateControl
from returnn.tf.gradients import GradientOptions
from returnn.tf.network import TFNetwork
from returnn.tf.optimizers import create_optimizer
from returnn.tf.steps import StepFunctions

GOLDENS = json.loads((Path(__file__).parent / "data" / "returnn_gradients.json").read_text())


# ---- learning-rate control (goldens from RETURNN's LearningRateControl)

@pytest.mark.parametrize("name", sorted(GOLDENS["lr_cases"]))
def test_learning_rate_growth_equals_returnn(name):
    case = GOLDENS["lr_cases"][name]
    control = LearningRateControl.from_config(Config(dict(case["config"], learning_rate=1.0)))
    rates = []
    for epoch, score in enumerate(GOLDENS["scores"], 1):
        rates.append(control.get_learning_rate_for_epoch(epoch))
        control.set_epoch_error(epoch, {"dev_score": score, "train_score": score + 1.0})
    rates.append(control.get_learning_rate_for_epoch(len(GOLDENS["scores"]) + 1))
    np.testing.assert_allclose(rates, case["rates"], rtol=1e-12)


def test_last_best_epoch_equals_returnn():
    control = LearningRateControl.from_config(Config({"learning_rate": 1.0}))
    for epoch, score in enumerate(GOLDENS["scores"], 1):
        control.get_learning_rate_for_epoch(epoch)
        control.set_epoch_error(epoch, {"dev_score": score})
    for last, opts, expected in GOLDENS["last_best"]:
        assert control.last_best_epoch(last_epoch=last, **opts) == expected, (last, opts)


# ---- the engine

def _params(prefix):
    from returnn.tf.checkpoint_fit import stored_params
    reader = tf.train.load_checkpoint(str(prefix))
    return {k: reader.get_tensor(k) for k in stored_params(reader.get_variable_to_shape_map())}


def _stored(prefix, key):
    return tf.train.load_checkpoint(str(prefix)).get_tensor(key)


def test_use_last_best_model_goes_back_to_the_best_epoch(tmp_path):
    """RETURNN's use_last_best_model: epoch 3 (a huge rate) is worse than epoch 2, so epoch 4 starts
    from model.002 with a fresh optimizer; at rate 0 it keeps those parameters, and the global step
    continues from model.002's (RETURNN restores it with the model)."""
    config = write_config(tmp_path / "best.config", TINY_12AX.replace("num_epochs = 2", "num_epochs = 4") + textwrap.dedent("""
        learning_rates = [0.01, 0.01, 50.0, 0.0]
        use_last_best_model = {"min_score_dist": 0.01}
        """))
    proc = run_rnn(train_args(config, tmp_path, "++log_verbosity", "4"))
    assert proc.returncode == 0, describe(proc)
    match = re.search(r"Last epoch 3 \(score: [0-9.]+\) is not the optimal model but epoch (\d) has better score", proc.stdout)
    assert match, proc.stdout[-3000:]
    best = int(match.group(1))
    assert "loaded the parameters of %s.%03d" % (tmp_path / "model", best) in proc.stdout
    assert proc.stdout.count("is not the optimal model") == 1  # epochs 2, 3 start from the last model
    fourth, chosen, third = (_params("%s.%03d" % (tmp_path / "model", e)) for e in (4, best, 3))
    for key in fourth:
        np.testing.assert_array_equal(fourth[key], chosen[key])
    assert any(not np.array_equal(fourth[k], third[k]) for k in fourth)
    from returnn.tf.checkpoint_format import GLOBAL_STEP_KEY, ITERATIONS_KEY
    steps_per_epoch = int(_stored("%s.001" % (tmp_path / "model"), GLOBAL_STEP_KEY))
    assert int(_stored("%s.004" % (tmp_path / "model"), GLOBAL_STEP_KEY)) == (best + 1) * steps_per_epoch
    assert int(_stored("%s.004" % (tmp_path / "model"), ITERATIONS_KEY)) == steps_per_epoch  # fresh optimizer


def test_use_last_best_model_modulo_and_filter_score(tmp_path):
    """modulo 2: epochs 3 is not looked at (odd), unless the last score is above filter_score."""
    text = TINY_12AX.replace("num_epochs = 2", "num_epochs = 4") + "learning_rates = [0.01, 0.01, 50.0, 0.0]\n"
    plain = write_config(tmp_path / "a.config", text + "use_last_best_model = {'modulo': 2}\n")
    proc = run_rnn(train_args(plain, tmp_path / "a"))
    assert proc.returncode == 0, describe(proc)
    assert "Last epoch 3" in proc.stdout  # epoch 4: even
    text5 = text.replace("num_epochs = 4", "num_epochs = 3").replace("[0.01, 0.01, 50.0, 0.0]", "[0.01, 50.0, 0.0]")
    odd = write_config(tmp_path / "b.config", text5 + "use_last_best_model = {'modulo': 2}\n")
    proc = run_rnn(train_args(odd, tmp_path / "b"))
    assert proc.returncode == 0, describe(proc)
    assert "is not the optimal model" not in proc.stdout  # epoch 3 is odd
    filtered = write_config(tmp_path / "c.config", text5 + "use_last_best_model = {'modulo': 2, 'filter_score': 2.0}\n")
    proc = run_rnn(train_args(filtered, tmp_path / "c"))
    assert proc.returncode == 0, describe(proc)
    assert "Last epoch 2" in proc.stdout  # epoch 2's score is above filter_score: looked at anyway, epoch 1 is below


def test_use_last_best_model_options_checked_at_startup(tmp_path):
    from helpers import assert_one_line_error
    config = write_config(tmp_path / "c.config", TINY_12AX + "use_last_best_model = {'modulus': 5}\n")
    assert_one_line_error(run_rnn(train_args(config, tmp_path)), "use_last_best_model", "modulus")


def test_reset_updater_vars_mod_step(tmp_path):
    """The optimizer starts again before steps 0, 3, 6, ... of each epoch: Adam's update count at
    the epoch's end is the steps since the last reset."""
    from returnn.tf.checkpoint_format import GLOBAL_STEP_KEY, ITERATIONS_KEY
    config = write_config(tmp_path / "r.config", TINY_12AX + "reset_updater_vars_mod_step = 3\n")
    proc = run_rnn(train_args(config, tmp_path))
    assert proc.returncode == 0, describe(proc)
    steps = int(_stored("%s.001" % (tmp_path / "model"), GLOBAL_STEP_KEY))
    assert steps > 3
    for epoch in (1, 2):
        assert int(_stored("%s.%03d" % (tmp_path / "model", epoch), ITERATIONS_KEY)) == (steps - 1) % 3 + 1


def _network_steps(options: GradientOptions, learning_rate: float):
    data = extern_data_from_config(Config({"extern_data": {"data": {"dim": 6, "sparse": True},
                                                            "classes": {"dim": 4, "sparse": True}}}))
    net = {"emb": {"class": "linear", "activation": None, "n_out": 5, "with_bias": False, "L2": 0.05},
           "hidden": {"class": "linear", "activation": "tanh", "n_out": 5, "from": "emb", "L2": 0.1},
           "output": {"class": "softmax", "loss": "ce", "from": "hidden"}}
    network = TFNetwork(net, data, seed=3)
    opt = create_optimizer(Config({"optimizer": {"class": "sgd"}, "learning_rate": learning_rate}),
                           network.trainable_variables)
    return network, StepFunctions(network, opt, DistributedContext(LocalBackend()), gradient_options=options)


def _batch():
    lens = tf.constant([4, 3], tf.int32)
    return {"data": tf.constant([[1, 2, 2, 5], [0, 3, 1, 0]]), "data:seq_len": lens,
            "classes": tf.constant([[0, 1, 2, 3], [3, 2, 1, 0]]), "classes:seq_len": lens}


def test_decouple_constraints_decays_parameters_instead_of_the_loss():
    """decouple_constraints: each parameter of a layer with L2 loses 2 * L2 of itself per step, and
    the L2 term is not in the loss (at rate 0 only the decay acts); RETURNN's Updater."""
    for decoupled in (True, False):  # coupled (default): at rate 0 nothing moves
        network, steps = _network_steps(GradientOptions(decouple_constraints=decoupled), 0.0)
        params = [(name, v) for name, layer in network.layers.items() for v in layer.trainable_variables]
        before = [v.numpy().copy() for _, v in params]
        steps.train_step(_batch(), tf.constant([1, 0], tf.int64), tf.zeros([3]))
        for (name, v), old in zip(params, before):
            l2 = {"emb": 0.05, "hidden": 0.1}.get(name, 0.0) if decoupled else 0.0
            np.testing.assert_allclose(v.numpy(), old * (1 - 2 * l2), rtol=1e-6, err_msg=name)


def test_embedding_gradient_reaches_the_optimizer_as_rows():
    """A linear layer on a sparse input gathers from its W itself (RETURNN's embedding_lookup), so
    the optimizer gets the rows (Momentum: rows without gradient keep their momentum and value)."""
    data = extern_data_from_config(Config({"extern_data": {"data": {"dim": 6, "sparse": True},
                                                            "classes": {"dim": 4, "sparse": True}}}))
    net = {"emb": {"class": "linear", "activation": None, "n_out": 5, "with_bias": False},
           "output": {"class": "softmax", "loss": "ce", "from": "emb"}}
    network = TFNetwork(net, data, seed=3)
    opt = create_optimizer(Config({"optimizer": {"class": "momentum", "momentum": 0.9}, "learning_rate": 0.5}),
                           network.trainable_variables)
    steps = StepFunctions(network, opt, DistributedContext(LocalBackend()))
    emb = network.layers["emb"].trainable_variables[0]
    steps.train_step(_batch(), tf.constant([1, 0], tf.int64), tf.zeros([3]))  # rows 0, 1, 2, 3, 5
    after_first = emb.numpy().copy()
    lens = tf.constant([2], tf.int32)
    steps.train_step({"data": tf.constant([[4, 4]]), "data:seq_len": lens, "classes": tf.constant([[1, 2]]),
                      "classes:seq_len": lens}, tf.constant([1, 1], tf.int64), tf.zeros([3]))  # row 4 only
    changed = [r for r in range(6) if not np.array_equal(emb.numpy()[r], after_first[r])]
    assert changed == [4]  # dense: rows 0-3 and 5 would move by their momentum


def test_gradient_options_in_a_run(tmp_path):
    """The demos' keys run through rnn.py: maximize_grad_norm (second-order gradients in the step,
    demo-tf-maxgradnorm-lstm), gradient_nan_inf_filter with gradient_noise (demo-tf-attention),
    clip_avg_norm, grad_norm_to_clip_to_zero, decouple_constraints, learning_rate_growth."""
    config = write_config(tmp_path / "g.config", TINY_12AX.replace('"dropout": 0.3', '"dropout": 0.3, "L2": 0.01')
                          + textwrap.dedent("""
        maximize_grad_norm = 1e-3
        gradient_nan_inf_filter = True
        gradient_noise = 0.01
        gradient_clip_avg_norm = 1.0
        grad_norm_to_clip_to_zero = 100.0
        decouple_constraints = True
        learning_rate_control = "newbob"
        learning_rate_growth = 1.1
        """))
    proc = run_rnn(train_args(config, tmp_path))
    assert proc.returncode == 0, describe(proc)
    assert "epoch 2 score:" in proc.stdout


def test_dynamic_learning_rate_in_a_run(tmp_path):
    """A published config's Noam warm-up (dynamic_learning_rate with TF ops of global_train_step):
    the step's rate comes from the function, traced into the compiled step (goldens of the rates'
    effect: tests/test_gradients.py dynamic-lr-*)."""
    config = write_config(tmp_path / "d.config", TINY_12AX + textwrap.dedent("""
        def dynamic_learning_rate(*, network, global_train_step, learning_rate, **kwargs):
            from returnn.tf.compat import v1 as tf
            n = tf.cast(global_train_step, tf.float32) + 1.0
            return learning_rate * tf.minimum(tf.pow(n, -0.5), n * tf.pow(4.0, -1.5))
        """))
    proc = run_rnn(train_args(config, tmp_path))
    assert proc.returncode == 0, describe(proc)
    assert "epoch 2 score:" in proc.stdout


@pytest.mark.parametrize("value,needle", [
    ("lambda network, global_train_step, learning_rate: learning_rate", "**kwargs"),
    ("lambda epoch, **kwargs: 0.1", "'epoch'"),
    ("{'interval': 10, 'decay': 0.9, 'start': 3}", "interval"),
    ("{'interval': 0, 'decay': 0.9}", "'interval'"),
])
def test_dynamic_learning_rate_checked_at_startup(tmp_path, value, needle):
    from helpers import assert_one_line_error
    config = write_config(tmp_path / "c.config", TINY_12AX + "dynamic_learning_rate = %s\n" % value)
    assert_one_line_error(run_rnn(train_args(config, tmp_path)), "dynamic_learning_rate", needle)
