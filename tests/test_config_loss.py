"""Loss classes defined in configs with RETURNN's API (``Loss`` subclass with ``class_name``,
``get_value``/``get_error``, registered in ``_LossClassDict``), run by returnn/tf/config_loss.py:
values against numpy on padded batches (a length-0 sequence included), in compiled steps, the
registry rule, one-line errors, and a config trained through rnn.py whose score is checked."""
from __future__ import annotations

import copy
import textwrap

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

LOSSES = '''
import tensorflow as tf
from TFNetworkLayer import Loss, _LossClassDict
from returnn.tf.util.basic import safe_log


class WeightedCE(Loss):
    class_name = "weighted_ce_cfg"

    def __init__(self, weight=1.0, **kwargs):
        super().__init__(**kwargs)
        self.weight = weight

    def get_value(self):
        ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=self.target_flat,
                                                            logits=self.output_before_softmax_flat)
        return self.reduce_func(ce * self.weight)


class ProbCE(Loss):
    """On the probabilities (output_flat); its own error; norm: sequences (custom_norm_factor)."""
    class_name = "prob_ce_cfg"
    _check_output_before_softmax = False

    def get_value(self):
        idx = tf.stack([tf.range(tf.shape(self.target_flat)[0]), self.target_flat], axis=1)
        return self.reduce_func(-safe_log(tf.gather_nd(self.output_flat, idx)))

    def get_error(self):
        return None


class Unregistered(Loss):
    class_name = "unregistered_cfg"


_LossClassDict["weighted_ce_cfg"] = WeightedCE
_LossClassDict["prob_ce_cfg"] = ProbCE
'''

LENS = [4, 0, 2]


@pytest.fixture(scope="module", autouse=True)
def registered(tmp_path_factory):
    path = tmp_path_factory.mktemp("cfg") / "losses.py"
    path.write_text(LOSSES)
    Config().load_file(str(path))


def _net(loss: str, loss_opts=None, flatten=True):
    extern = extern_data_from_config(Config({"extern_data": {"data": {"dim": 3}, "classes": {"dim": 5, "sparse": True}}}))
    opts = dict(loss_opts or {})
    if not flatten:
        opts["use_flatten_frames"] = False
    net = TFNetwork({"output": {"class": "softmax", "from": "data", "loss": loss, "loss_opts": opts}}, extern)
    return net, extern


def _batch(garbage: float, lens=LENS):
    rng = np.random.RandomState(1)
    x = rng.randn(len(lens), max(lens), 3).astype("float32")
    y = rng.randint(0, 5, size=(len(lens), max(lens))).astype("int32")
    for b, n in enumerate(lens):
        x[b, n:], y[b, n:] = garbage, (4 if garbage else 0)
    seq = np.array(lens, np.int32)
    return {"data": tf.constant(x), "data:seq_len": tf.constant(seq), "classes": tf.constant(y),
            "classes:seq_len": tf.constant(seq)}, x, y


def _reference(net, x, y, lens):
    """Per-frame CE, probabilities and argmax errors of the real frames (numpy)."""
    w = net.layers["output"].own_params["W"].numpy()
    b = net.layers["output"].own_params["b"].numpy()
    frames = [(x[i, t], y[i, t]) for i, n in enumerate(lens) for t in range(n)]
    logits = np.array([f @ w + b for f, _ in frames], "float64")
    labels = np.array([lab for _, lab in frames])
    log_p = logits - logits.max(-1, keepdims=True)
    log_p -= np.log(np.exp(log_p).sum(-1, keepdims=True))
    ce = -log_p[np.arange(len(labels)), labels]
    wrong = (logits.argmax(-1) != labels).astype("float64")
    return ce, wrong


def _stats(net, batch, train: bool):
    ctx = RunContext(train, tf.constant([3, 4], tf.int64))

    @tf.function(autograph=False)
    def step(batch):
        outputs = net.forward(batch, ctx, only=["output"])
        v = net.compute_losses(outputs, batch, ["output"], train)["output"]
        info = net.losses[0]
        return (v.loss_sum, v.norm, v.error_sum if v.error_sum is not None else tf.constant(-1.0),
                info.loss.objective(v))
    return [float(t) for t in step(batch)]


@pytest.mark.parametrize("flatten", [True, False], ids=["flatten", "merged"])
@pytest.mark.parametrize("train", [False, True], ids=["eval", "train"])
def test_weighted_ce_against_numpy_padding_and_empty_sequence_ignored(flatten, train):
    net, _ = _net("weighted_ce_cfg", {"weight": 2.5, "use_normalized_loss": True}, flatten=flatten)
    net.check_losses()
    batch, x, y = _batch(0.0)
    ce, wrong = _reference(net, x, y, LENS)
    loss, norm, err, objective = _stats(net, batch, train)
    assert norm == sum(LENS)
    assert loss == pytest.approx(2.5 * ce.sum(), rel=1e-5)
    assert err == pytest.approx(wrong.sum())  # RETURNN's default get_error: argmax frame errors
    assert objective == pytest.approx(2.5 * ce.sum() / sum(LENS), rel=1e-5)  # use_normalized_loss
    garbage, _, _ = _batch(1e4)  # other values on the padded frames: the same numbers
    assert _stats(net, garbage, train) == pytest.approx([loss, norm, err, objective], rel=1e-5)


def test_probabilities_own_error_custom_norm_factor_and_scale():
    net, _ = _net("prob_ce_cfg", {"custom_norm_factor": 0.25, "scale": 3.0})
    batch, x, y = _batch(1e4)
    ce, _ = _reference(net, x, y, LENS)
    loss, norm, err, objective = _stats(net, batch, True)
    assert loss == pytest.approx(ce.sum(), rel=1e-4)
    assert norm == pytest.approx(4.0) and err == -1.0  # get_error None: no error reported
    assert objective == pytest.approx(3.0 * ce.sum(), rel=1e-4)  # scale, not normalized


def test_registry_rule_and_one_line_errors():
    with pytest.raises(NetworkError, match=r"unknown loss 'unregistered_cfg'.*_LossClassDict\['unregistered_cfg'\]"):
        _net("unregistered_cfg")
    with pytest.raises(NetworkError) as exc:
        _net("weighted_ce_cfg", {"wieght": 2.0})
    assert "\n" not in str(exc.value) and "'output'" in str(exc.value) and "wieght" in str(exc.value)
    with pytest.raises(NetworkError, match="custom_inv_norm_factor"):
        _net("weighted_ce_cfg", {"custom_inv_norm_factor": "data"})
    from returnn.tf.layers.basic import get_loss_class
    assert get_loss_class("weighted_ce_cfg").__name__ == "WeightedCE" and get_loss_class("ce") is not None


CONFIG = '''#!rnn.py
import numpy as np
import tensorflow as tf
from returnn.tf.layers.base import Loss
from returnn.tf.layers.basic import _LossClassDict


class WeightedCE(Loss):
    class_name = "my_weighted_ce"

    def __init__(self, weight=1.0, **kwargs):
        super().__init__(**kwargs)
        self.weight = weight

    def get_value(self):
        ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=self.target_flat,
                                                            logits=self.output_before_softmax_flat)
        return self.reduce_func(ce * self.weight)


_LossClassDict["my_weighted_ce"] = WeightedCE
_rng = np.random.RandomState(0)
_lengths = %(lens)r
_data = [{"data": _rng.randn(n, 3).astype("float32"), "classes": _rng.randint(0, 4, size=n).astype("int32")}
         for n in _lengths]
train = {"class": "StaticDataset", "input_dim": 3, "output_dim": 4, "data": _data}
dev = {"class": "StaticDataset", "input_dim": 3, "output_dim": 4, "data": _data}
num_inputs = 3
num_outputs = 4
batch_size = 1000
max_seqs = 10
network = {"output": {"class": "softmax", "from": "data", "loss": "my_weighted_ce", "loss_opts": {"weight": 2.5}}}
learning_rate = 0.0
num_epochs = 1
log_verbosity = 5
tf_session_opts = {"intra_op_parallelism_threads": 1, "inter_op_parallelism_threads": 1}
'''


def test_config_loss_trains_through_rnn_py_and_reports_its_score(tmp_path):
    """One epoch (one batch: padded, with a length-0 sequence) at learning rate 0: the train and dev
    scores are the weighted CE of the initial parameters per frame, as numpy computes it."""
    lens = [5, 0, 3, 4]
    config = write_config(tmp_path / "c.config", CONFIG % {"lens": lens})
    proc = run_rnn(train_args(config, tmp_path))
    assert proc.returncode == 0, describe(proc)
    reader = tf.train.load_checkpoint(str(tmp_path / "model.001"))
    w, b = reader.get_tensor("output/W"), reader.get_tensor("output/b")
    rng = np.random.RandomState(0)
    frames, labels = [], []
    for n in lens:
        x, y = rng.randn(n, 3).astype("float32"), rng.randint(0, 4, size=n)
        frames.append(x), labels.append(y)
    logits = np.concatenate(frames).astype("float64") @ w + b
    y = np.concatenate(labels)
    log_p = logits - logits.max(-1, keepdims=True)
    log_p -= np.log(np.exp(log_p).sum(-1, keepdims=True))
    score = 2.5 * -log_p[np.arange(len(y)), y].mean()
    error = (logits.argmax(-1) != y).mean()
    from returnn.learning_rate_control import read_learning_rate_file
    entry = read_learning_rate_file(str(tmp_path / "model.lr.data"))[1]
    scores = {k: v for k, v in entry.error.items()}
    assert scores["dev_score"] == pytest.approx(score, rel=1e-5), (scores, proc.stdout[-2000:])
    assert scores["train_score"] == pytest.approx(score, rel=1e-5), scores
    assert scores["dev_error"] == pytest.approx(error, rel=1e-5), scores
