"""Checkpoints: save/restore of network, optimizer state and epoch; resume equals an uninterrupted
run; incomplete checkpoints are skipped, damaged ones refused; no temporary files."""
from __future__ import annotations

import os
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf

from helpers import TINY_12AX, describe, lines_matching, nonempty_lines, run_rnn, train_args, write_config
from returnn.config import Config
from returnn.errors import DataError
from returnn.tf.checkpoint import (
    CheckpointManager, checkpoint_files, epoch_prefix, is_complete, list_epoch_checkpoints,
)
from returnn.tf import checkpoint_format as fmt
from returnn.tf.optimizers import create_optimizer

FINISHED_RE = r"train epoch (\d+), finished after (\d+) steps, .*"


# ---------------------------------------------------------------- in-process

def Net(seed):
    """A network of one linear layer 'l' (parameters l/W, l/b); ``w``, ``b`` are its variables."""
    from returnn.tensor import Data
    from returnn.tf.network import TFNetwork
    net = TFNetwork({"l": {"class": "linear", "n_out": 2, "from": "data", "is_output_layer": True}},
                    {"data": Data("data", shape=(None, 3))}, seed=seed)
    rng = np.random.RandomState(seed)
    net.w, net.b = net.layers["l"].W, net.layers["l"].bias
    net.w.assign(rng.randn(3, 2).astype(np.float32))
    net.b.assign(rng.randn(2).astype(np.float32))
    return net


def make_state(seed=0):
    net = Net(seed)
    opt = create_optimizer(Config({"adam": True, "learning_rate": 0.1}), [net.w, net.b])
    return net, opt


def train_steps(net, opt, n):
    for _ in range(n):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.square(net.w)) + tf.reduce_sum(net.b)
        opt.apply(tape.gradient(loss, [net.w, net.b]), [net.w, net.b])


def state_values(net, opt):
    return [v.numpy().copy() for v in (net.w, net.b)] + [v.numpy().copy() for v in opt.variables]


def test_save_restore_network_optimizer_and_epoch(tmp_path):
    model = str(tmp_path / "m" / "model")
    net, opt = make_state()
    train_steps(net, opt, 3)
    manager = CheckpointManager(model, network=net, optimizer=opt)
    assert manager.save(3) == epoch_prefix(model, 3) == model + ".003"
    saved = state_values(net, opt)
    train_steps(net, opt, 2)
    opt.learning_rate.assign(0.5)
    assert not all(np.array_equal(a, b) for a, b in zip(saved, state_values(net, opt)))
    other_net, other_opt = make_state(seed=1)
    other = CheckpointManager(model, network=other_net, optimizer=other_opt)
    assert other.restore(model + ".003") == 3
    for a, b in zip(saved, state_values(other_net, other_opt)):
        np.testing.assert_array_equal(a, b)
    assert int(other_opt.iterations.numpy()) == 3
    assert np.any(other_opt.slots["m"][0].numpy() != 0)
    # Continuing from the restored state equals continuing from the original.
    ref_net, ref_opt = make_state()
    train_steps(ref_net, ref_opt, 5)
    train_steps(other_net, other_opt, 2)
    for a, b in zip(state_values(ref_net, ref_opt)[:2], state_values(other_net, other_opt)[:2]):
        np.testing.assert_array_equal(a, b)


def test_save_leaves_no_temp_files_and_overwrites(tmp_path):
    model = str(tmp_path / "model")
    net, opt = make_state()
    manager = CheckpointManager(model, network=net, optimizer=opt)
    manager.save(1)
    net.w.assign(net.w + 1.0)
    manager.save(1)
    manager.save(2)
    names = sorted(os.listdir(tmp_path))
    assert names == ["model.001.data-00000-of-00001", "model.001.index", "model.001.meta",
                     "model.002.data-00000-of-00001", "model.002.index", "model.002.meta"]
    reader = tf.train.load_checkpoint(model + ".001")
    np.testing.assert_array_equal(reader.get_tensor("l/W"), net.w.numpy())  # RETURNN's names
    from tensorflow.core.protobuf import meta_graph_pb2  # the .meta RETURNN's load wants: valid, no graph
    meta = meta_graph_pb2.MetaGraphDef.FromString((tmp_path / "model.001.meta").read_bytes())
    assert list(meta.meta_info_def.tags) == [fmt.META_TAG] and not meta.graph_def.node


def test_resume_point_refuses_damaged_newest_checkpoint(tmp_path):
    model = str(tmp_path / "model")
    net, opt = make_state()
    manager = CheckpointManager(model, network=net, optimizer=opt)
    for epoch in (1, 2, 3):
        manager.save(epoch)
    (tmp_path / "model.unrelated.index").write_text("x")
    assert list_epoch_checkpoints(model) == [1, 2, 3]
    assert manager.find_resume_point() == (model + ".003", 3)
    with open(model + ".003.data-00000-of-00001", "r+b") as f:  # emptied data file (issue 13)
        f.truncate(0)
    with pytest.raises(DataError, match=re.escape(model + ".003") + " cannot be read"):
        manager.find_resume_point()
    os.remove(model + ".003.data-00000-of-00001")  # data missing
    assert not is_complete(model + ".003")
    with pytest.raises(DataError, match=re.escape(model + ".003") + " is damaged"):
        manager.find_resume_point()
    os.remove(model + ".003.index")  # no index: a checkpoint that never was
    assert manager.find_resume_point() == (model + ".002", 2)
    assert list_epoch_checkpoints(model) == [1, 2]


def test_interrupted_checkpoint_used_when_newest(tmp_path):
    model = str(tmp_path / "model")
    net, opt = make_state()
    manager = CheckpointManager(model, network=net, optimizer=opt)
    manager.save(1)
    train_steps(net, opt, 2)
    interrupted = manager.save_interrupted(1, 2)  # epoch 1 done, 2 steps of epoch 2
    assert manager.find_resume_point() == (interrupted, 1)
    assert manager.restore(interrupted) == 1 and manager.epoch_step == 2
    manager.save(2)
    assert manager.find_resume_point() == (model + ".002", 2)
    manager.remove_interrupted()
    assert checkpoint_files(interrupted) == []


# ---------------------------------------------------------------- end-to-end

def compare_checkpoints(a, b):
    """Asserts both checkpoints hold the same variables with equal values; returns the names."""
    ra, rb = tf.train.load_checkpoint(a), tf.train.load_checkpoint(b)
    names = sorted(ra.get_variable_to_shape_map())
    assert names == sorted(rb.get_variable_to_shape_map())
    for name in names:
        va, vb = ra.get_tensor(name), rb.get_tensor(name)
        if np.asarray(va).dtype.kind in "SOU":  # run state strings (e.g. the batch-order digest)
            assert np.array_equal(va, vb), name
        else:
            np.testing.assert_allclose(va, vb, rtol=1e-6, atol=1e-7, err_msg=name)
    return names


def max_diff(a, b):
    """The largest difference between the network parameters of two checkpoints."""
    from returnn.tf.checkpoint_fit import stored_params
    ra, rb = tf.train.load_checkpoint(a), tf.train.load_checkpoint(b)
    names = list(stored_params(ra.get_variable_to_shape_map()))
    assert names
    return max(float(np.max(np.abs(ra.get_tensor(k) - rb.get_tensor(k)))) for k in names)


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    """Three epochs of the tiny config (with dropout) in one go."""
    d = tmp_path_factory.mktemp("straight")
    config = write_config(d / "tiny.config", TINY_12AX)
    proc = run_rnn(train_args(config, d, "++num_epochs", "3"))
    assert proc.returncode == 0, describe(proc)
    return {"dir": d, "config": config, "proc": proc}


def test_resume_gives_same_parameters_as_uninterrupted(straight, tmp_path):
    config = straight["config"]
    first = run_rnn(train_args(config, tmp_path, "++num_epochs", "2"))
    assert first.returncode == 0, describe(first)
    assert not (tmp_path / "model.003.index").exists()
    second = run_rnn(train_args(config, tmp_path, "++num_epochs", "3"))
    assert second.returncode == 0, describe(second)
    assert "start training at epoch 3" in second.stdout
    assert [m.group(1) for m in lines_matching(FINISHED_RE, second.stdout)] == ["3"]
    names = compare_checkpoints(str(straight["dir"] / "model.003"), str(tmp_path / "model.003"))
    # The comparison covered the optimizer state and the step counter, not only the weights.
    assert any(n.endswith("/Adam") for n in names) and any(n.endswith("/Adam_1") for n in names)
    assert "global_step" in names and "_engine/optimizer/iterations" in names and "_engine/run_state" in names
    reader = tf.train.load_checkpoint(str(tmp_path / "model.003"))
    steps = sum(int(m.group(2)) for m in lines_matching(FINISHED_RE, straight["proc"].stdout))
    assert int(reader.get_tensor("global_step")) == int(reader.get_tensor("_engine/optimizer/iterations")) == steps
    assert int(reader.get_tensor("_engine/epoch")) == 3
    # Controls: epoch 3 changed the weights, and dropout is active (without it the result differs),
    # so the equality above includes reproducible dropout masks.
    assert max_diff(str(tmp_path / "model.002"), str(tmp_path / "model.003")) > 1e-4
    no_dropout = write_config(tmp_path / "nodrop.config", TINY_12AX.replace('"dropout": 0.3', '"dropout": 0.0'))
    proc = run_rnn(train_args(no_dropout, tmp_path / "nodrop", "++num_epochs", "3"))
    assert proc.returncode == 0, describe(proc)
    assert max_diff(str(straight["dir"] / "model.003"), str(tmp_path / "nodrop" / "model.003")) > 1e-4


def _copy_checkpoints(src, dst, keep):
    dst.mkdir(parents=True, exist_ok=True)
    for path in src.iterdir():
        if path.name.startswith("model.") and keep(path.name):
            shutil.copy(path, dst / path.name)


def test_resume_refuses_checkpoint_without_data_until_start_epoch_given(straight, tmp_path):
    src = straight["dir"]
    _copy_checkpoints(src, tmp_path, lambda n: not n.startswith("model.003.data") and not n.endswith(".log"))
    assert (tmp_path / "model.003.index").exists()
    proc = run_rnn(train_args(straight["config"], tmp_path, "++num_epochs", "3"))
    lines = nonempty_lines(proc.stderr)
    assert proc.returncode == 2 and len(lines) == 1, describe(proc)
    assert str(tmp_path / "model.003") + " is damaged" in lines[0] and "start_epoch" in lines[0]
    assert (tmp_path / "model.003.index").exists()  # nothing overwritten
    proc = run_rnn(train_args(straight["config"], tmp_path, "++num_epochs", "3", "++start_epoch", "3"))
    assert proc.returncode == 0, describe(proc)
    assert "start training at epoch 3" in proc.stdout
    compare_checkpoints(str(src / "model.003"), str(tmp_path / "model.003"))
    assert not [n for n in os.listdir(tmp_path) if "tmp" in n.lower()]


def test_model_path_with_glob_characters_resumes(tmp_path):
    """TF reads checkpoint prefixes as patterns: ``exp[lr=0.01]/model`` must still resume (issue 13)."""
    config = write_config(tmp_path / "tiny.config", TINY_12AX.replace("num_epochs = 2", "num_epochs = 1"))
    exp = tmp_path / "exp[lr=0.01]*?"
    first = run_rnn(train_args(config, exp))
    assert first.returncode == 0, describe(first)
    second = run_rnn(train_args(config, exp, "++num_epochs", "2"))
    assert second.returncode == 0, describe(second)
    assert "start training at epoch 2" in second.stdout, describe(second)
    assert sorted(p.name for p in exp.iterdir() if p.name.endswith(".index")) == ["model.001.index", "model.002.index"]
    proc = run_rnn([config, "++task", "eval", "++model", exp / "model", "++learning_rate_file", tmp_path / "lr"])
    assert proc.returncode == 0 and "loaded checkpoint %s.002 (epoch 2)" % (exp / "model") in proc.stdout, describe(proc)


def test_resume_ignores_checkpoint_without_index(straight, tmp_path):
    _copy_checkpoints(straight["dir"], tmp_path, lambda n: n != "model.003.index" and n.count(".") >= 2
                      and not n.endswith(".log"))
    assert (tmp_path / "model.003.data-00000-of-00001").exists()
    proc = run_rnn(train_args(straight["config"], tmp_path, "++num_epochs", "2"))
    assert proc.returncode == 0, describe(proc)
    assert "is already trained (num_epochs = 2, checkpoint of epoch 2 found)" in proc.stdout
    assert "Finished training in epoch 2." in proc.stdout


def test_load_epoch_for_eval_and_missing_epoch(straight, tmp_path):
    d = straight["dir"]
    base = [straight["config"], "++task", "eval", "++model", d / "model", "++learning_rate_file", tmp_path / "lr"]
    proc = run_rnn(base + ["++load_epoch", "1"])
    assert proc.returncode == 0, describe(proc)
    assert "loaded checkpoint %s.001 (epoch 1)" % (d / "model") in proc.stdout
    assert lines_matching(r"epoch 1 dev: score \S+ error \S+", proc.stdout)
    proc = run_rnn(base + ["++load_epoch", "7"])
    assert proc.returncode == 2, describe(proc)
    lines = nonempty_lines(proc.stderr)
    assert len(lines) == 1 and "model.007" in lines[0]


def test_resume_with_changed_network_is_one_line_error(straight, tmp_path):
    _copy_checkpoints(straight["dir"], tmp_path, lambda n: n.count(".") >= 2 and not n.endswith(".log"))
    wider = write_config(tmp_path / "wider.config", TINY_12AX.replace('"n_out": 8', '"n_out": 16'))
    proc = run_rnn(train_args(wider, tmp_path, "++num_epochs", "4"))
    assert proc.returncode == 2, describe(proc)
    lines = nonempty_lines(proc.stderr)
    assert len(lines) == 1 and "model.003" in lines[0], describe(proc)
