"""Networks of many parametric layer families and rec units, both ways between the real RETURNN
and this engine (tests/returnn_checkpoints/returnn_units.py runs in RETURNN's venv): RETURNN loads
our checkpoint and we load its one, with the same names, values and outputs. Skips, saying why,
without the real RETURNN (see tests/test_returnn_checkpoints.py)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Dict

import numpy as np
import pytest

from helpers import REPO, child_env, describe
from returnn_interop import (  # noqa: F401  (need_returnn: the module's autouse fixture)
    RETURNN_PYTHON, TIMEOUT, checkpoint_values, need_returnn, our_network)

pytestmark = pytest.mark.returnn_interop
UNITS_SCRIPT = REPO / "tests" / "returnn_checkpoints" / "returnn_units.py"

# ---------------------------------------------------------------- many layer families, both ways

OUT = {"is_output_layer": True}
UNITS_EXTERN = {"data": {"dim": 5}, "classes": {"dim": 6, "sparse": True, "available_for_inference": True}}
UNITS_BV12 = {
    "lstm": dict(OUT, **{"class": "rec", "unit": "nativelstm2", "n_out": 6, "from": "data"}),
    "std": dict(OUT, **{"class": "rec", "unit": "standardlstm", "n_out": 5, "from": "data"}),
    "gru": dict(OUT, **{"class": "rec", "unit": "GRU", "n_out": 4, "from": "data"}),
    "lstmp": dict(OUT, **{"class": "rec", "unit": "lstmp", "n_out": 3, "from": "data"}),
    "block": dict(OUT, **{"class": "rec", "unit": "lstmblock", "n_out": 3, "from": "data"}),
    "cudnn": dict(OUT, **{"class": "rec", "unit": "cudnnlstm", "n_out": 3, "from": "data"}),
    "lnlstm": dict(OUT, **{"class": "rec", "unit": "layernormvariantslstm", "n_out": 3, "from": "data",
                           "unit_opts": {"cell_norm": True}}),
    "conv": dict(OUT, **{"class": "conv", "filter_size": (3,), "padding": "same", "n_out": 4, "with_bias": True,
                         "activation": "relu", "from": "data"}),
    "bn": dict(OUT, **{"class": "batch_norm", "masked_time": True, "from": "conv"}),
    "bn1": dict(OUT, **{"class": "batch_norm", "param_version": 1, "masked_time": True, "from": "data"}),
    "ln": dict(OUT, **{"class": "layer_norm", "from": "lstm"}),
    "att": dict(OUT, **{"class": "self_attention", "num_heads": 2, "total_key_dim": 4, "n_out": 6, "from": "ln"}),
    "tconv": dict(OUT, **{"class": "transposed_conv", "filter_size": (2,), "strides": (2,), "n_out": 3,
                          "from": "att"}),
    "sub": dict(OUT, **{"class": "subnetwork", "from": "data", "subnetwork": {
        "a": {"class": "linear", "activation": "tanh", "n_out": 3, "from": "data"},
        "output": {"class": "linear", "activation": None, "n_out": 2, "from": "a"}}}),
    "scoped": dict(OUT, **{"class": "linear", "activation": None, "n_out": 2, "from": "data", "name_scope": "other"}),
    "shared": dict(OUT, **{"class": "linear", "activation": None, "n_out": 2, "from": "data",
                           "reuse_params": "scoped"}),
    "var": dict(OUT, **{"class": "variable", "shape": (3,), "add_batch_axis": False}),
    "cells": dict(OUT, **{"class": "rec", "from": "data", "unit": {
        "c1": {"class": "rnn_cell", "unit": "LSTMBlock", "from": ["data:source", "prev:c2"], "n_out": 3},
        "c2": {"class": "rnn_cell", "unit": "BasicLSTM", "from": "c1", "n_out": 3},
        "output": {"class": "copy", "from": ["c1", "c2"]}}}),
    "enc_k": {"class": "linear", "activation": "tanh", "n_out": 5, "from": ["att", "std"]},
    "dec": {"class": "rec", "from": [], "target": "classes", "unit": {
        "emb": {"class": "linear", "activation": None, "with_bias": False, "from": "output", "n_out": 4,
                "initial_output": 0},
        "s": {"class": "rnn_cell", "unit": "GRU", "from": ["prev:emb", "prev:ctx"], "n_out": 5},
        "q": {"class": "linear", "activation": None, "from": "s", "n_out": 5},
        "ctx": {"class": "dot_attention", "from": "q", "base": "base:gru", "base_ctx": "base:enc_k"},
        "h": {"class": "rec", "unit": "nativelstm2", "from": ["s", "ctx"], "n_out": 4},
        "prob": {"class": "softmax", "from": ["h", "ctx"], "target": "classes", "is_output_layer": True},
        "output": {"class": "choice", "from": "prob", "target": "classes", "beam_size": 3, "initial_output": 0}}},
    "dec_prob": dict(OUT, **{"class": "copy", "from": "dec/prob"}),
}
UNITS_BV0 = {  # behavior_version 0: batch_norm's param_version 0 names and shapes, conv without bias by default
    "conv": dict(OUT, **{"class": "conv", "filter_size": (3,), "padding": "same", "n_out": 4, "from": "data"}),
    "bn": dict(OUT, **{"class": "batch_norm", "from": "conv"}),
    "lstm": dict(OUT, **{"class": "rec", "unit": "lstm", "n_out": 3, "from": "bn"}),
    "basic": dict(OUT, **{"class": "rec", "unit": "basiclstm", "n_out": 3, "from": "conv"}),
}
UNITS_NOISE = {  # weight noise: RETURNN's checkpoint then holds its global random generator's state too
    "lin": dict(OUT, **{"class": "linear", "activation": "tanh", "n_out": 4, "from": "data",
                        "param_variational_noise": 0.075}),
    "lstm": dict(OUT, **{"class": "rec", "unit": "nativelstm2", "n_out": 3, "from": "lin", "param_dropout": 0.1}),
}
UNIT_CASES = {"bv12": (UNITS_BV12, {"behavior_version": 12}), "bv0": (UNITS_BV0, {}),
              "noise": (UNITS_NOISE, {"behavior_version": 12, "param_variational_noise": 0.05})}


def units_inputs() -> Dict[str, np.ndarray]:
    rng = np.random.RandomState(3)
    lens, class_lens = np.array([7, 5, 3], np.int32), np.array([4, 3, 2], np.int32)
    x = rng.normal(size=(3, 7, 5)).astype("float32") * (np.arange(7)[None, :, None] < lens[:, None, None])
    c = rng.randint(0, 6, size=(3, 4)).astype("int32") * (np.arange(4)[None] < class_lens[:, None])
    return {"data": x, "data:seq_len": lens, "classes": c, "classes:seq_len": class_lens}


def our_outputs(net, inputs, names):
    """{layer: (value, {axis: sizes})} in RETURNN's order: batch, spatial axes, feature."""
    import tensorflow as tf
    from returnn.tf.layers import RunContext
    outs = net.forward({k: tf.constant(v) for k, v in inputs.items()}, RunContext(False), only=list(names))
    res = {}
    for name in names:
        out = outs[name].copy_as_batch_time_feature()
        sizes = {i: np.asarray(out.size(i)) for i in range(out.data.batch_ndim) if out.data.dims[i].is_dynamic()}
        res[name] = (out.tensor.numpy(), sizes)
    return res


def assert_same_output(ours, theirs: np.ndarray, sizes: Dict[int, np.ndarray], where: str) -> None:
    value, our_sizes = ours
    assert value.shape == theirs.shape, (where, value.shape, theirs.shape)
    mask = np.ones(value.shape, bool)
    for axis, size in sizes.items():
        np.testing.assert_array_equal(our_sizes[axis], size, err_msg=where)
        shape = [1] * value.ndim
        shape[0], shape[axis] = value.shape[0], value.shape[axis]
        mask &= (np.arange(value.shape[axis])[None] < size[:, None]).reshape(shape)
    np.testing.assert_allclose(np.where(mask, value, 0), np.where(mask, theirs, 0), atol=1e-5, rtol=0, err_msg=where)


def test_units_checkpoint_files_both_ways(tmp_path):
    """Ours -> RETURNN: our checkpoint of random parameters has every parameter RETURNN's network
    has, and RETURNN's outputs after loading it are ours. RETURNN -> ours: RETURNN's saved
    checkpoint (random values, batch-norm statistics too) loads here, parameter by parameter equal
    by name, with RETURNN's outputs."""
    import tensorflow as tf
    from returnn.tf.checkpoint import CheckpointManager
    from returnn.tf.returnn_params import returnn_param_shapes, returnn_param_values, set_returnn_param_values
    inputs = units_inputs()
    np.savez(tmp_path / "inputs.npz", **inputs)
    spec, ours = {"inputs": str(tmp_path / "inputs.npz"), "cases": []}, {}
    for name, (net_dict, config) in UNIT_CASES.items():
        layers = [k for k, v in net_dict.items() if v.get("is_output_layer")]
        with our_network(net_dict, config, UNITS_EXTERN) as net:
            rng = np.random.RandomState(5)
            set_returnn_param_values(net, {k: ((np.abs(rng.normal(size=s)) + 0.5) if "variance" in k else
                                               rng.normal(size=s) * 0.5).astype("float32")
                                           for k, s in returnn_param_shapes(net).items()})
            CheckpointManager(str(tmp_path / ("ours_" + name)), network=net,
                              global_step=tf.Variable(0, dtype=tf.int64)).save(1)
            ours[name] = our_outputs(net, inputs, layers)
        spec["cases"].append({"name": name, "network": net_dict, "extern_data": UNITS_EXTERN, "config": config,
                              "layers": layers, "ours": str(tmp_path / ("ours_%s.001" % name)),
                              "returnn": str(tmp_path / ("returnn_%s.001" % name))})
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    proc = subprocess.run([str(RETURNN_PYTHON), str(UNITS_SCRIPT), str(tmp_path / "spec.json"),
                           str(tmp_path / "out.npz")], cwd=str(tmp_path), env=child_env({"DISABLE_CUDA": "1"}),
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, describe(proc)
    with np.load(tmp_path / "out.npz") as z:
        res = {k: z[k] for k in z.files}
    for name, (net_dict, config) in UNIT_CASES.items():
        assert str(res[name + "/missing"]) == "", "RETURNN's parameters missing in our checkpoint: %s" % res[
            name + "/missing"]
        layers = [k for k, v in net_dict.items() if v.get("is_output_layer")]
        sizes = {layer: {int(k.rsplit("/", 1)[1]): v for k, v in res.items()
                         if k.startswith("%s/size/%s/" % (name, layer))} for layer in layers}
        for layer in layers:
            assert_same_output(ours[name][layer], res["%s/ours/%s" % (name, layer)], sizes[layer],
                               "%s: RETURNN's output of %r over our checkpoint" % (name, layer))
        with our_network(net_dict, config, UNITS_EXTERN) as net:
            prefix = str(tmp_path / ("returnn_%s.001" % name))
            CheckpointManager(str(tmp_path / "x"), network=net).restore(prefix, params_only=True)
            values, stored = returnn_param_values(net), checkpoint_values(Path(prefix))
            saved = [n for n in str(res[name + "/params"]).split("\n") if n != "global_step"]
            assert sorted(values) == sorted(saved), "names: only ours %s, only RETURNN's %s" % (
                sorted(set(values) - set(saved)), sorted(set(saved) - set(values)))
            for param, value in values.items():
                np.testing.assert_array_equal(value, stored[param], err_msg="%s: %s" % (name, param))
            theirs = our_outputs(net, inputs, layers)
        for layer in layers:
            assert_same_output(theirs[layer], res["%s/returnn/%s" % (name, layer)], sizes[layer],
                               "%s: our output of %r over RETURNN's checkpoint" % (name, layer))
