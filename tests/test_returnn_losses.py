"""Losses against the real RETURNN: each ``tests/data/returnn_losses/<case>.npz`` holds a small network
with one loss (``ce`` and its options, ``mse``, ``ctc``, ``as_is``, ``edit_distance``,
``sampling_loss``), a batch, the parameters, and what RETURNN's LossHolder reports: the loss and
error values (sums), the norm factor both are divided by, and the gradient of RETURNN's objective
(written by ``tests/returnn_goldens/make_loss_goldens.py``; its docstring describes the format).

Here one train step (SGD at rate 1, from the same parameters) gives this engine's
``[loss_sum, norm, error_sum, error_norm]`` of the layer and minus the objective's gradient:
``loss_sum = RETURNN's loss``, ``norm = error_norm = 1 / RETURNN's norm factor`` (so the reported
scores are RETURNN's), ``error_sum = RETURNN's error``, and the same gradient (which catches the
``use_normalized_loss`` scaling).
"""
from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from returnn.config import Config, get_global_config, set_global_config
from returnn.distributed.backend import LocalBackend
from returnn.distributed.context import DistributedContext
from returnn.tf.steps import FLAG_NAMES
from returnn.extern_data import extern_data_from_config
from returnn.tf.network import TFNetwork
from returnn.tf.optimizers import create_optimizer
from returnn.tf.returnn_params import returnn_param_values, set_returnn_param_values
from returnn.tf.steps import StepFunctions

GOLDEN_DIR = Path(__file__).resolve().parent / "data" / "returnn_losses"
FILES = sorted(GOLDEN_DIR.glob("*.npz"))


def load_case(path: Path):
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    return json.loads(str(arrays.pop("meta"))), arrays


def train_step_stats(meta, arrays):
    """One SGD step at rate 1 from the golden's parameters: ({loss name: [loss_sum, norm, error_sum,
    error_norm]} of this engine's train step, the parameters after it, the step's flags). Also the
    differential check's (benchmarks/returnn_fuzz_loss.py)."""
    previous = get_global_config()
    set_global_config(Config(copy.deepcopy(meta.get("config") or {})))  # e.g. tf_native_ctc_zero_infinity
    try:
        return _train_step_stats(meta, arrays)
    finally:
        set_global_config(previous)


def _train_step_stats(meta, arrays):
    extern = extern_data_from_config(Config({"extern_data": copy.deepcopy(meta["extern_data"])}))
    network = TFNetwork(copy.deepcopy(meta["network"]), extern)
    if meta["params"]:
        set_returnn_param_values(network, {n: arrays["param:" + n] for n in meta["params"]}, where="golden")
    opt = create_optimizer(Config({"optimizer": {"class": "sgd"}, "learning_rate": 1.0}), network.trainable_variables)
    fns = StepFunctions(network, opt, DistributedContext(LocalBackend()))
    batch = {}
    for key in fns.train_keys:
        value = arrays["in:" + key]
        if ("len:" + key) in arrays:
            batch[key + ":seq_len"] = tf.constant(arrays["len:" + key])
        else:  # no time axis: fed as (B, 1, ...)
            value = value[:, None]
            batch[key + ":seq_len"] = tf.ones([value.shape[0]], tf.int32)
        batch[key] = tf.constant(value)
    stats, flags = fns.split_stats(fns.train_step(batch, np.array([1, 0]), tf.zeros([3])).numpy())
    return dict(zip(fns.train_loss_names, stats.tolist())), returnn_param_values(network), flags


def one_step(meta, arrays):
    """Our loss stats of the golden's loss layer and the parameters after one SGD step at rate 1."""
    stats, after, flags = train_step_stats(meta, arrays)
    # the non-finite flag exactly when RETURNN's objective is not finite (a best-path CTC without a path)
    nonfinite = FLAG_NAMES.index("nonfinite")
    assert bool(flags[nonfinite]) == (not np.isfinite(arrays["objective"])), flags
    assert not np.delete(flags, nonfinite).any(), flags
    return stats[meta["loss_layer"]], after


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_loss_as_returnn(path):
    meta, arrays = load_case(path)
    (loss_sum, norm, error_sum, error_norm), after = one_step(meta, arrays)
    frames = 1.0 / float(arrays["norm_factor"])
    what = "%s: %%s" % path.stem
    if meta["has_loss"]:
        np.testing.assert_allclose(loss_sum, arrays["loss"], rtol=1e-5, err_msg=what % "loss value (sum)")
        np.testing.assert_allclose(norm, frames, rtol=1e-6, err_msg=what % "norm (1 / RETURNN's norm factor)")
    else:
        assert loss_sum == 0.0, what % "RETURNN has no loss value here"
    if meta["has_error"]:
        np.testing.assert_allclose(error_sum, arrays["error"], rtol=1e-5, err_msg=what % "error value (sum)")
        np.testing.assert_allclose(error_norm, frames, rtol=1e-6, err_msg=what % "error norm")
    else:
        assert error_norm == 0.0, what % "RETURNN reports no error here"
    for name in meta["params"]:
        grad = arrays["param:" + name] - after[name]
        ref = arrays["grad:" + name]
        scale = float(np.abs(ref).max())
        np.testing.assert_allclose(grad, ref, rtol=1e-4, atol=1e-5 * scale + 1e-6,
                                   err_msg=what % ("gradient of %s (RETURNN's largest |g| %.4g)" % (name, scale)))
