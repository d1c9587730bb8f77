"""Training keys of RETURNN configs: accum_grad_multiple_step, pretrain, get_network with #config,
cleanup_old_models, calculate_exp_loss, start_epoch."""
from __future__ import annotations

import math
import re
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from helpers import TINY_12AX, describe, run_rnn, train_args, write_config
from returnn.config import Config
from returnn.distributed.backend import LocalBackend
from returnn.distributed.context import DistributedContext
from returnn.learning_rate_file import read_learning_rate_file
from returnn.extern_data import extern_data_from_config
from returnn.tf.network import TFNetwork
from returnn.tf.model_cleanup import epochs_to_keep
from returnn.tf.optimizers import create_optimizer
from returnn.tf.steps import StepFunctions

NET = {"hidden": {"class": "linear", "activation": "tanh", "n_out": 5},
       "output": {"class": "softmax", "loss": "ce", "from": ["hidden"]}}


def make_steps(optimizer: dict, learning_rate: float, accum: int):
    data = extern_data_from_config(Config({"extern_data": {"data": {"dim": 3}, "classes": {"dim": 4, "sparse": True}}}))
    network = TFNetwork(NET, data, seed=7)
    opt = create_optimizer(Config({"optimizer": optimizer, "learning_rate": learning_rate}), network.trainable_variables)
    assert type(opt).__name__.lower() == optimizer["class"]
    return network, StepFunctions(network, opt, DistributedContext(LocalBackend()), accum_grad_multiple_step=accum)


def batch(x, y):
    return {"data": tf.constant(x), "data:seq_len": tf.constant([x.shape[1]] * len(x), tf.int32),
            "classes": tf.constant(y), "classes:seq_len": tf.constant([x.shape[1]] * len(x), tf.int32)}


@pytest.mark.parametrize("optimizer,accum_lr", [({"class": "sgd"}, 0.1), ({"class": "adam"}, 0.1)])
def test_accum_grad_multiple_step_equals_a_bigger_batch(optimizer, accum_lr):
    """Two steps of 2 sequences with accumulation = one step of all 4 at the same rate: as in
    RETURNN, gradients are summed over the steps and each step's loss is summed over its frames."""
    rng = np.random.RandomState(0)
    x = rng.randn(4, 6, 3).astype(np.float32)
    y = rng.randint(0, 4, size=(4, 6)).astype(np.int32)
    flags = tf.zeros([3])
    big_net, big = make_steps(optimizer, 0.1, 0)
    big.train_step(batch(x, y), np.array([1, 0]), flags)
    acc_net, acc = make_steps(optimizer, accum_lr, 2)
    before = [v.numpy().copy() for v in acc_net.trainable_variables]
    acc.train_step(batch(x[:2], y[:2]), np.array([1, 0]), flags)
    for a, b in zip(before, acc_net.trainable_variables):  # first step of the cycle only accumulates
        np.testing.assert_array_equal(a, b.numpy())
    acc.train_step(batch(x[2:], y[2:]), np.array([1, 1]), flags)
    for a, b in zip(big_net.trainable_variables, acc_net.trainable_variables):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    assert int(acc.optimizer.iterations.numpy()) == 1


def checkpoint_values(prefix, layer):
    """The parameters of ``layer`` in a checkpoint (RETURNN's names ``layer/...``, no optimizer slots)."""
    from returnn.tf.checkpoint_fit import stored_params
    reader = tf.train.load_checkpoint(str(prefix))
    keys = sorted(k for k in stored_params(reader.get_variable_to_shape_map()) if k.startswith(layer + "/"))
    return {k: reader.get_tensor(k) for k in keys}


def tiny(extra: str, network: str = None, epochs: int = 3) -> str:
    text = TINY_12AX.replace("num_epochs = 2", "num_epochs = %i" % epochs)
    if network is not None:
        start = text.index("network = {")
        end = text.index("}\n", text.index('"output"')) + 2
        text = text[:start] + textwrap.dedent(network) + text[end:]
    return text + textwrap.dedent(extra)


def test_pretrain_grows_network_and_carries_params(tmp_path):
    config = write_config(tmp_path / "pretrain.config", tiny("""
        pretrain = {"repetitions": 1, "construction_algo": "from_output"}
        pretrain_learning_rate = 0.005
        """, network="""
        from Pretrain import WrapEpochValue
        network = {
            "hidden_0": {"class": "linear", "activation": "tanh", "n_out": 8,
                         "trainable": WrapEpochValue(lambda epoch: epoch == 1)},
            "hidden_1": {"class": "linear", "activation": "tanh", "n_out": 8, "from": ["hidden_0"]},
            "output": {"class": "softmax", "loss": "ce", "from": ["hidden_1"]},
        }
        """))
    proc = run_rnn(train_args(config, tmp_path))
    assert proc.returncode == 0, describe(proc)
    out = proc.stdout
    assert "network for epoch 2: layers hidden_0, hidden_1, output; parameters copied: 4" in out, out[-3000:]
    assert "network for epoch 3" not in out  # the last pretrain net is the final one: no rebuild
    # RETURNN's names (get_epoch_model_filename): pretrain epochs 1 and 2 save <model>.pretrain.NNN
    model = tmp_path / "model"
    assert sorted(p.name for p in tmp_path.glob("model.*.index")) == [
        "model.003.index", "model.pretrain.001.index", "model.pretrain.002.index"]
    assert checkpoint_values("%s.pretrain.001" % model, "hidden_1") == {}
    assert checkpoint_values("%s.pretrain.002" % model, "hidden_1")
    first, second, third = (checkpoint_values(name % model, "hidden_0")
                            for name in ("%s.pretrain.001", "%s.pretrain.002", "%s.003"))
    assert first and first.keys() == second.keys() == third.keys()
    for key in first:  # trained in epoch 1, frozen afterwards: carried over unchanged
        np.testing.assert_array_equal(first[key], second[key])
        np.testing.assert_array_equal(first[key], third[key])
    rates = {e: d.learning_rate for e, d in read_learning_rate_file(str(tmp_path / "model.lr.data")).items()}
    assert rates == {1: 0.005, 2: 0.005, 3: 0.01}  # pretrain rate, then learning_rate again
    # load_epoch finds a pretrain epoch's model by RETURNN's name too (its get_existing_models)
    evaluated = run_rnn(train_args(config, tmp_path, "++task", "eval", "++load_epoch", "1"))
    assert evaluated.returncode == 0 and "loaded checkpoint %s.pretrain.001 (epoch 1)" % model in evaluated.stdout, \
        describe(evaluated)


def test_get_network_with_config_overrides_subset_copy_cleanup_and_exp_loss(tmp_path):
    config = write_config(tmp_path / "getnet.config", tiny("""
        def get_network(epoch, **kwargs):
            net = {
                "hidden": {"class": "linear", "activation": "tanh", "n_out": 4 if epoch == 1 else 8,
                           "trainable": epoch == 1},
                "output": {"class": "softmax", "loss": "ce", "from": ["hidden"]},
            }
            if epoch >= 2:
                net["#copy_param_mode"] = "subset"
                net["#config"] = {"learning_rate": 0.002, "batch_size": 200}
            return net
        calculate_exp_loss = True
        learning_rate_control = "newbob"
        learning_rate_control_error_measure = "dev_score_output:exp"
        cleanup_old_models = {"keep_last_n": 1, "keep_best_n": 1, "keep": []}
        save_epoch1_initial_model = True
        """, network="", epochs=4))
    proc = run_rnn(train_args(config, tmp_path))
    assert proc.returncode == 0, describe(proc)
    out = proc.stdout
    assert "epoch 2: config key 'batch_size': 400 -> 200 (#config)" in out, out[-3000:]
    assert "partly copied: 3" in out  # hidden W, hidden b, output W grew; output b kept its shape
    lr_file = read_learning_rate_file(str(tmp_path / "model.lr.data"))
    assert lr_file[1].learning_rate == 0.01 and lr_file[2].learning_rate == 0.002
    for data in lr_file.values():  # RETURNN: a score of two values (cost:output, cost:output:exp) is named per key
        assert data.error["dev_score_output:exp"] == pytest.approx(math.exp(data.error["dev_score_output"]), rel=1e-6)
        assert "dev_score" not in data.error and "dev_error" in data.error
    for line in (line for line in out.splitlines() if line.startswith("epoch ") and " score: " in line):
        assert re.search(r"score: output \S+ exp \S+ error: \S+ ", line), line  # RETURNN's format_score
    kept = {e for e in range(1, 5) if (tmp_path / ("model.%03d.index" % e)).exists()}
    expected = set()
    for epoch in range(1, 5):  # cleanup runs after every save, on the checkpoints left by then
        scores = {e: lr_file[e].error for e in range(1, epoch + 1)}
        expected = epochs_to_keep(sorted(expected | {epoch}), scores, 1, 1, [])
    assert kept == expected and 4 in kept and len(kept) < 4, (kept, expected)
    assert "cleanup_old_models: deleted the checkpoints of epochs" in out
    # save_epoch1_initial_model: <model>.000 holds the epoch-1 network before training; as in RETURNN
    # (its get_existing_models counts from epoch 1) it is no epoch checkpoint: never cleaned up or resumed from
    from returnn.tf.checkpoint import list_epoch_checkpoints
    initial = tf.train.load_checkpoint(str(tmp_path / "model.000"))
    assert initial.get_tensor("hidden/W").shape == (9, 4) and int(initial.get_tensor("global_step")) == 0
    assert (tmp_path / "model.000.index").exists() and 0 not in list_epoch_checkpoints(str(tmp_path / "model"))


def test_start_epoch_restarts_from_the_given_epoch(tmp_path):
    config = write_config(tmp_path / "t.config", tiny("", epochs=2))
    proc = run_rnn(train_args(config, tmp_path))
    assert proc.returncode == 0, describe(proc)
    again = run_rnn(train_args(config, tmp_path, "++num_epochs", "3", "++start_epoch", "2"))
    assert again.returncode == 0, describe(again)
    assert "start training at epoch 2" in again.stdout and "start epoch 3 " in again.stdout
    missing = run_rnn(train_args(config, tmp_path / "none", "++start_epoch", "5"))
    assert missing.returncode == 2 and "start_epoch" in missing.stderr
    # RETURNN (get_epoch_model): 'load' with a start_epoch, whatever its value, is a new training from epoch 1
    # with load's parameters, before the checkpoints of 'model' (RETURNN: 'start training at epoch 1')
    loaded = run_rnn(train_args(config, tmp_path, "++num_epochs", "3", "++start_epoch", "3",
                                "++load", str(tmp_path / "model.001")))
    assert loaded.returncode == 0, describe(loaded)
    assert "start training at epoch 1" in loaded.stdout and "loaded the parameters of %s/model.001" % tmp_path \
        in loaded.stdout, describe(loaded)
    epochs = read_learning_rate_file(str(tmp_path / "model.lr.data"))
    assert [epochs[e].meta["global_train_step"] for e in (1, 2)] == [0, epochs[1].meta["epoch_num_train_steps"]]


def test_target_is_the_default_loss_target():
    data = extern_data_from_config(Config({"extern_data": {"data": {"dim": 3}, "labels": {"dim": 6, "sparse": True}}}))
    network = TFNetwork({"output": {"class": "softmax", "loss": "ce"}}, data, default_target="labels")
    assert [info.target for info in network.losses] == ["labels"]
    assert network.layers["output"].output.dim == 6  # n_out inferred from the default target
    with pytest.raises(Exception, match="classes"):
        TFNetwork({"output": {"class": "softmax", "loss": "ce", "n_out": 6}}, data)  # RETURNN's default: 'classes'


def test_sliding_window_matches_manual_concatenation():
    from returnn.datasets.windowing import sliding_window
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    out = sliding_window(x, 3)
    pad = np.zeros((1, 3), np.float32)
    xp = np.concatenate([pad, x, pad])
    np.testing.assert_array_equal(out, np.stack([np.concatenate([xp[t], xp[t + 1], xp[t + 2]]) for t in range(4)]))


def test_window_trains_with_windowed_input_dim(tmp_path):
    text = tiny("window = 2\n", epochs=1).replace(  # even -> 3, as RETURNN
        'train = {"class": "Task12AXDataset", "num_seqs": 40}',
        'train = {"class": "DummyDataset", "input_dim": 9, "output_dim": 2, "num_seqs": 20, "seq_len": 7}').replace(
        'dev = {"class": "Task12AXDataset", "num_seqs": 10, "fixed_random_seed": 1}',
        'dev = {"class": "DummyDataset", "input_dim": 9, "output_dim": 2, "num_seqs": 4, "seq_len": 5}')
    assert "DummyDataset" in text
    config = write_config(tmp_path / "w.config", text)
    proc = run_rnn(train_args(config, tmp_path, "++log_verbosity", "5"))
    assert proc.returncode == 0, describe(proc)
    reader = tf.train.load_checkpoint(str(tmp_path / "model.001"))
    assert reader.get_variable_to_shape_map()["hidden/W"] == [27, 8]  # 9 features x window 3


def test_pretrain_resume_equals_uninterrupted_run(tmp_path):
    """Resuming after pretrain epoch 1 rebuilds the epoch-1 network, restores it and grows it as the
    uninterrupted run did: the final parameters are the same."""
    text = tiny('pretrain = "default"\n', network="""
        network = {
            "hidden_0": {"class": "linear", "activation": "tanh", "n_out": 8},
            "hidden_1": {"class": "linear", "activation": "tanh", "n_out": 8, "from": ["hidden_0"]},
            "output": {"class": "softmax", "loss": "ce", "from": ["hidden_1"]},
        }
        """).replace('"dropout": 0.3', '"dropout": 0.0')
    config = write_config(tmp_path / "p.config", text)
    straight = run_rnn(train_args(config, tmp_path / "a"))
    assert straight.returncode == 0, describe(straight)
    first = run_rnn(train_args(config, tmp_path / "b", "++num_epochs", "1"))
    assert first.returncode == 0, describe(first)
    resumed = run_rnn(train_args(config, tmp_path / "b"))
    assert resumed.returncode == 0, describe(resumed)
    assert "start training at epoch 2" in resumed.stdout and "network for epoch 2" in resumed.stdout
    for layer in ("hidden_0", "hidden_1", "output"):
        a = checkpoint_values(tmp_path / "a" / "model.003", layer)
        b = checkpoint_values(tmp_path / "b" / "model.003", layer)
        assert a and a.keys() == b.keys()
        for key in a:
            np.testing.assert_allclose(a[key], b[key], rtol=1e-6, atol=1e-7, err_msg=key)


def test_meta_global_train_step_counts_from_zero_after_import_model_train_epoch1(tmp_path):
    """RETURNN (Engine.init_network_from_config): a new training from import_model_train_epoch1 sets its
    step count (the learning-rate file's ':meta:global_train_step') to 0, while the imported global step
    lives on in the network (checkpoints, dynamic learning rates). Observed with RETURNN importing a
    checkpoint of global step 7 (ff_newbob's config, 6 steps per epoch): meta 0, 6, 12; model.001 step 13,
    model.003 step 25. A resumed run reads the step of the checkpoint it continues (25 there)."""
    config = write_config(tmp_path / "t.config", tiny("", epochs=1))
    first = run_rnn(train_args(config, tmp_path / "a"))
    assert first.returncode == 0, describe(first)
    imported = int(tf.train.load_checkpoint(str(tmp_path / "a" / "model.001")).get_tensor("global_step"))
    assert imported > 0
    second = run_rnn(train_args(config, tmp_path / "b", "++num_epochs", "2", "++import_model_train_epoch1",
                                str(tmp_path / "a" / "model.001")))
    assert second.returncode == 0, describe(second)
    epochs = read_learning_rate_file(str(tmp_path / "b" / "model.lr.data"))
    steps = epochs[1].meta["epoch_num_train_steps"]
    assert [epochs[e].meta["global_train_step"] for e in (1, 2)] == [0, steps]
    stored = int(tf.train.load_checkpoint(str(tmp_path / "b" / "model.002")).get_tensor("global_step"))
    assert stored == imported + steps + epochs[2].meta["epoch_num_train_steps"]
    third = run_rnn(train_args(config, tmp_path / "b", "++num_epochs", "3", "++import_model_train_epoch1",
                               str(tmp_path / "a" / "model.001")))
    assert third.returncode == 0, describe(third)
    assert read_learning_rate_file(str(tmp_path / "b" / "model.lr.data"))[3].meta["global_train_step"] == stored
