"""The training objective against the real RETURNN: each ``tests/data/returnn_objective/<case>.npz``
holds RETURNN's demo encoder-decoder (``L2`` on the encoder, ``ce`` loss), one batch, the parameters,
the gradient of RETURNN's objective and the parameters after a few of its Adam steps (written by
``tests/returnn_goldens/make_objective_goldens.py``, which runs the PyPI RETURNN; its docstring
describes the format). Here our train step runs on the same batch from the same parameters.

RETURNN minimises the loss summed over the batch's frames plus ``L2 * sum(p ** 2)`` (per-frame
average only with ``loss_opts`` ``use_normalized_loss``): a per-frame average by default scales the
loss gradient by 1 / frames against the ``L2`` term, which the gradient comparison catches.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from returnn.config import Config
from returnn.distributed.backend import LocalBackend
from returnn.distributed.context import DistributedContext
from returnn.extern_data import extern_data_from_config
from returnn.tf.network import TFNetwork
from returnn.tf.optimizers import create_optimizer
from returnn.tf.returnn_params import returnn_param_values, set_returnn_param_values
from returnn.tf.steps import StepFunctions

GOLDEN_DIR = Path(__file__).resolve().parent / "data" / "returnn_objective"
FILES = sorted(GOLDEN_DIR.glob("*.npz"))


def load_case(path: Path):
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    return json.loads(str(arrays.pop("meta"))), arrays


def train(meta, arrays, optimizer: dict, learning_rate: float, steps: int):
    """Our network from the golden's parameters after ``steps`` train steps on its batch: (RETURNN
    name -> value, the last step's loss stats)."""
    extern = extern_data_from_config(Config({"extern_data": copy.deepcopy(meta["extern_data"])}))
    network = TFNetwork(copy.deepcopy(meta["network"]), extern)
    set_returnn_param_values(network, {n: arrays["param:" + n] for n in meta["params"]}, where="golden")
    opt = create_optimizer(Config({"optimizer": optimizer, "learning_rate": learning_rate}),
                           network.trainable_variables)
    fns = StepFunctions(network, opt, DistributedContext(LocalBackend()))
    batch = {}
    for key in meta["extern_data"]:
        batch[key] = tf.constant(arrays["in:" + key])
        batch[key + ":seq_len"] = tf.constant(arrays["len:" + key])
    stats = None
    for step in range(steps):
        stats, flags = fns.split_stats(fns.train_step(batch, np.array([1, step]), tf.zeros([3])).numpy())
        assert not flags.any(), flags
    return returnn_param_values(network), stats


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_objective_gradient_as_returnn(path):
    """One SGD step at rate 1 moves each parameter by minus the objective's gradient: it must be
    RETURNN's (summed loss against L2, or the per-frame average when the case asks for it)."""
    meta, arrays = load_case(path)
    after, stats = train(meta, arrays, {"class": "sgd"}, 1.0, 1)
    np.testing.assert_allclose(stats[0, :2], [arrays["loss_sum"], arrays["frames"]], rtol=1e-5)
    for name in meta["params"]:
        grad = arrays["param:" + name] - after[name]
        ref = arrays["grad:" + name]
        scale = float(np.abs(ref).max())
        np.testing.assert_allclose(grad, ref, rtol=1e-4, atol=1e-5 * scale + 1e-7,
                                   err_msg="%s: gradient of %s (RETURNN's largest |g| %.4g)" % (path.stem, name, scale))


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_adam_steps_as_returnn(path):
    """RETURNN's own optimizer config (adam, its default epsilon) for a few steps: same parameters."""
    meta, arrays = load_case(path)
    after, _ = train(meta, arrays, meta["optimizer"], meta["learning_rate"], meta["adam_steps"])
    for name in meta["params"]:
        ours = after[name] - arrays["param:" + name]
        ref = arrays["adam:" + name] - arrays["param:" + name]
        np.testing.assert_allclose(ours, ref, rtol=1e-3, atol=1e-3 * meta["learning_rate"],
                                   err_msg="%s: Adam update of %s" % (path.stem, name))
