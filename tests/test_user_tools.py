"""tools/plot-learning-curves.py and tools/inspect-checkpoint.py on real files."""
from __future__ import annotations

import importlib.util
import os
import subprocess

import pytest
import tensorflow as tf

from returnn.learning_rate_control import LearningRateControl
from helpers import PYTHON, REPO, child_env

PLOT = os.path.join(REPO, "tools", "plot-learning-curves.py")
INSPECT = os.path.join(REPO, "tools", "inspect-checkpoint.py")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run_tool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON] + list(args), cwd=REPO, env=child_env({"OMP_NUM_THREADS": "1"}),
                          capture_output=True, text=True, timeout=300)


def load_tool(path: str):
    spec = importlib.util.spec_from_file_location(os.path.basename(path).replace("-", "_")[:-3], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_learning_rate_file(path: str, num_epochs: int = 6) -> None:
    control = LearningRateControl("newbob_multi_epoch", default_learning_rate=0.01, filename=path,
                                  multi_num_epochs=2)
    for epoch in range(1, num_epochs + 1):
        control.get_learning_rate_for_epoch(epoch)
        control.set_epoch_error(epoch, {"train_score": 2.0 / epoch, "train_error": 0.5 / epoch,
                                        "dev_score": 2.2 / epoch + 0.1 * epoch, "dev_error": 0.6 / epoch,
                                        "dev_score_output": 2.1 / epoch})
    control.get_learning_rate_for_epoch(num_epochs + 1)  # next epoch: a rate but no scores yet
    control.save()


def assert_png(path: str) -> None:
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == PNG_MAGIC and len(data) > 1000


def test_plot_default_output_next_to_input(tmp_path):
    lr_file = str(tmp_path / "newbob.data")
    write_learning_rate_file(lr_file)
    proc = run_tool(PLOT, lr_file)
    assert proc.returncode == 0, proc.stderr
    out = str(tmp_path / "newbob.png")
    assert_png(out)
    assert "wrote %s (7 epochs, 3 score and 2 error curves)" % out in proc.stdout
    assert "best dev_score: " in proc.stdout


def test_plot_explicit_output_and_scores_missing(tmp_path):
    lr_file = str(tmp_path / "lr")
    control = LearningRateControl("constant", default_learning_rate=0.001, filename=lr_file)
    control.get_learning_rate_for_epoch(1)
    control.save()
    out = str(tmp_path / "plots" / "curves.png")
    proc = run_tool(PLOT, lr_file, "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert_png(out)
    assert "0 score and 0 error curves" in proc.stdout


def test_plot_missing_or_bad_file(tmp_path):
    missing = str(tmp_path / "nope.data")
    proc = run_tool(PLOT, missing)
    assert proc.returncode == 2 and missing in proc.stderr
    bad = tmp_path / "bad.data"
    bad.write_text("{1: EpochData(")
    proc = run_tool(PLOT, str(bad))
    assert proc.returncode == 2 and "cannot parse" in proc.stderr
    assert not (tmp_path / "bad.png").exists()


def test_plot_curve_collection():
    tool = load_tool(PLOT)
    from returnn.learning_rate_control import EpochData

    epochs = {1: EpochData(0.1, {"dev_score": 1.0, "train_score": 2.0, "dev_error": float("nan")}),
              2: EpochData(0.05, {"train_score": 1.5, "devtrain_score": 1.2, "train_error": 0.3}),
              3: EpochData(0.05)}
    lrs, scores, errors = tool.collect_curves(epochs)
    assert lrs == [(1, 0.1), (2, 0.05), (3, 0.05)]
    assert list(scores) == ["train_score", "dev_score", "devtrain_score"]
    assert scores["train_score"] == [(1, 2.0), (2, 1.5)]
    assert errors == {"train_error": [(2, 0.3)]}  # NaN left out
    assert tool.default_output("/x/newbob.data") == "/x/newbob.png"
    assert tool.default_output("/x/lr") == "/x/lr.png"


class _Net(tf.Module):
    def __init__(self):
        super().__init__(name="network")
        self.layers = {"hidden": {"W": tf.Variable(tf.ones([3, 5]), name="W"), "b": tf.Variable(tf.zeros([5]))},
                       "output": {"W": tf.Variable(tf.ones([5, 2]), name="W"), "b": tf.Variable(tf.zeros([2]))}}


class _Optimizer(tf.Module):
    """Adam-like state: a learning rate, a step counter and two slots per network variable."""

    def __init__(self, variables):
        super().__init__(name="optimizer")
        self.learning_rate = tf.Variable(0.001)
        self.iterations = tf.Variable(7, dtype=tf.int64)
        self.slots = {s: [tf.Variable(tf.zeros_like(v)) for v in variables] for s in ("m", "v")}


def write_legacy_checkpoint(prefix: str) -> int:
    """Writes ``prefix`` as earlier versions of the engine did (a TensorFlow object checkpoint)."""
    net = _Net()
    opt = _Optimizer(net.trainable_variables)
    ckpt = tf.train.Checkpoint(network=net, optimizer=opt, global_step=tf.Variable(120, dtype=tf.int64),
                               epoch=tf.Variable(3, dtype=tf.int64))
    ckpt.write(prefix)
    return sum(int(tf.size(v)) for v in net.trainable_variables)


def write_checkpoint(prefix: str) -> int:
    """Writes ``prefix`` as the engine does (epoch 3, global step 120, Adam after 7 updates);
    returns the number of network parameters."""
    from returnn.config import Config
    from returnn.tensor import Data
    from returnn.tf.checkpoint import CheckpointManager
    from returnn.tf.network import TFNetwork
    from returnn.tf.optimizers import create_optimizer
    net = TFNetwork({"hidden": {"class": "linear", "n_out": 5, "from": "data"},
                     "output": {"class": "linear", "n_out": 2, "from": "hidden", "is_output_layer": True}},
                    {"data": Data("data", shape=(None, 3))})
    net.layers["output"].bias.assign(tf.zeros([2]))
    opt = create_optimizer(Config({"adam": True, "learning_rate": 0.001}), net.trainable_variables)
    opt.iterations.assign(7)
    manager = CheckpointManager(prefix.rsplit(".", 1)[0], network=net, optimizer=opt,
                                global_step=tf.Variable(120, dtype=tf.int64))
    manager._write(prefix, 3, 0, None)
    return sum(int(tf.size(v)) for v in net.trainable_variables)


def test_inspect_checkpoint_lists_variables_and_counts(tmp_path):
    prefix = str(tmp_path / "model.003")
    params = write_checkpoint(prefix)
    assert params == 3 * 5 + 5 + 5 * 2 + 2
    for arg in (prefix, prefix + ".index"):
        proc = run_tool(INSPECT, arg)
        assert proc.returncode == 0, proc.stderr
        out = proc.stdout
        assert out.splitlines()[:2] == ["checkpoint %s (epoch 3, global_step 120)" % prefix, "written by this engine"]
        assert "network parameters: 4 variables, 32 values, 128 B" in out
        assert "network parameters: 32\n" in out
        assert "optimizer state values: %i\n" % (2 * 32 + 2 + 2) in out  # slots, beta powers, lr, iterations
        lines = [line.split() for line in out.splitlines()]
        assert ["hidden/W", "[3,", "5]", "float32"] in lines
        assert ["output/b", "[2]", "float32"] in lines
        assert ["hidden/W/Adam", "[3,", "5]", "float32"] in lines
        assert ["output/b/Adam_1", "[2]", "float32"] in lines
        assert ["_engine/optimizer/iterations", "[]", "int64", "=", "7"] in lines
        assert ["_engine/epoch", "[]", "int64", "=", "3"] in lines


def test_inspect_legacy_and_returnn_checkpoints(tmp_path):
    prefix = str(tmp_path / "model.003")
    write_legacy_checkpoint(prefix)
    proc = run_tool(INSPECT, prefix)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[1] == "written by an earlier version of this engine"
    assert ".ATTRIBUTES" not in proc.stdout and "_CHECKPOINTABLE_OBJECT_GRAPH" not in proc.stdout
    assert ["network/layers/hidden/W", "[3,", "5]", "float32"] in [line.split() for line in proc.stdout.splitlines()]
    returnn_prefix = str(tmp_path / "returnn.model.012")  # as RETURNN's Saver writes it: names, global_step
    tf.raw_ops.SaveV2(prefix=returnn_prefix, tensor_names=["global_step", "output/W"], shape_and_slices=["", ""],
                      tensors=[tf.constant(5, tf.int64), tf.ones([3, 2])])
    proc = run_tool(INSPECT, returnn_prefix)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[:2] == ["checkpoint %s (epoch 12 (from its name), global_step 5)" % returnn_prefix,
                                            "written by RETURNN (or another TensorFlow program)"]
    assert "network parameters: 6\n" in proc.stdout


@pytest.mark.parametrize("directory", ["plain", "exp[lr=0.01]"])  # TF reads '[' as a pattern
def test_inspect_show_values(tmp_path, directory):
    (tmp_path / directory).mkdir()
    prefix = str(tmp_path / directory / "model.001")
    write_checkpoint(prefix)
    proc = run_tool(INSPECT, prefix, "--show", "output/b")
    assert proc.returncode == 0, proc.stderr
    assert "output/b:\n[0. 0.]" in proc.stdout
    proc = run_tool(INSPECT, prefix, "--show", "no/such/var")
    assert proc.returncode == 2 and "no/such/var" in proc.stderr


def test_inspect_missing_and_incomplete_checkpoints(tmp_path):
    missing = str(tmp_path / "model.007")
    proc = run_tool(INSPECT, missing)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: no checkpoint at %s (%s.index is missing)" % (missing, missing)
    prefix = str(tmp_path / "model.002")
    write_checkpoint(prefix)
    proc = run_tool(INSPECT, str(tmp_path / "model"))
    assert proc.returncode == 2 and "found: %s" % prefix in proc.stderr
    os.remove(prefix + ".data-00000-of-00001")
    proc = run_tool(INSPECT, prefix + ".index")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "incomplete checkpoint %s" % prefix in proc.stderr


def test_inspect_name_helpers():
    tool = load_tool(INSPECT)
    assert tool.normalize_prefix("/m/model.003.index") == "/m/model.003"
    assert tool.normalize_prefix("/m/model.003.data-00000-of-00001") == "/m/model.003"
    assert tool.normalize_prefix("/m/model.003") == "/m/model.003"
    assert tool.display_name("network/W/.ATTRIBUTES/VARIABLE_VALUE") == "network/W"
    slot = "network/W/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE"
    assert tool.display_name(slot) == "network/W [slot optimizer/m]"
    assert tool.group_of(slot) == "optimizer"
    assert tool.group_of("global_step/.ATTRIBUTES/VARIABLE_VALUE") == "other"
    assert [tool.group_of(k, legacy=False) for k in ("lstm/rec/W_re", "lstm/rec/W_re/Adam", "beta1_power",
                                                     "_engine/optimizer/iterations", "global_step", "_engine/epoch")] \
        == ["network", "optimizer", "optimizer", "optimizer", "other", "other"]
