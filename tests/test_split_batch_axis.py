"""split_dims of the batch axis taking a search's hypotheses apart, as the published 2022-approx-recombination
decoder config does (``get_scores``: choice_get_beam_scores of its ``extra.search:output``, ``split_scores``:
split_dims over "B" with dims (-1, beam), then the log-sum-exp per sequence as an ``as_is`` loss). Today's
RETURNN asserts on that split (its output batch loses the beam, the template keeps it); the RETURNN of 2021
(the config's) reshaped the ``B * K`` scores to ``(B, K)``, and its loss normalised by the batch size of the
value (B). The reference: RETURNN's beam scores of the same searched decoder and parameters
(tests/data/returnn_goldens/search_train.json, tests/returnn_goldens/search_train_goldens.py)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from returnn.config import Config, get_global_config, set_global_config
from returnn.errors import NetworkError
from returnn.extern_data import data_from_opts
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork
from returnn.tf.returnn_params import set_returnn_param_values

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "returnn_goldens"))
import search_train_goldens as G  # noqa: E402

GOLDEN = json.loads((HERE / "data" / "returnn_goldens" / "search_train.json").read_text())
INPUTS = GOLDEN["inputs"]


def _net_dict(case: str) -> dict:
    d = G.net_dict(case)
    del d["decision"]
    d["extra.search:output"] = dict(d["output"])
    d.update({
        "get_scores": {"class": "choice_get_beam_scores", "from": "extra.search:output"},
        "split_scores": {"class": "split_dims", "axis": "B", "dims": [-1, G.BEAM], "from": "get_scores"},
        "denominator_score": {"class": "eval", "from": "split_scores", "loss": "as_is",
                              "eval": "tf.math.reduce_logsumexp(source(0, auto_convert=False), axis=1, keepdims=False)",
                              "out_type": {"batch_dim_axis": 0, "dim": None, "dtype": "float32", "shape": (),
                                           "sparse": False, "time_dim_axis": None}}})
    return d


def _run(case: dict, behavior_version=None):
    extern = {"data": data_from_opts("data", {"dim": 2}),
              "classes": data_from_opts("classes", {"dim": G.V, "sparse": True})}
    old = get_global_config()
    set_global_config(Config({} if behavior_version is None else {"behavior_version": behavior_version}))
    try:
        net = TFNetwork(_net_dict(case["case"]), extern)
        set_returnn_param_values(net, {k: np.array(v, "float32") for k, v in case["params"].items()})
        batch = {"data": tf.constant(np.array(INPUTS["x"], "float32")), "data:seq_len": tf.constant(INPUTS["x_lens"]),
                 "classes": tf.constant(np.array(INPUTS["y"], "int32")),
                 "classes:seq_len": tf.constant(INPUTS["y_lens"])}
        out = net.forward(batch, RunContext(True), only=["denominator_score"])
        return out, net.compute_losses(out, batch, ["denominator_score"], train=True)
    finally:
        set_global_config(old)


@pytest.mark.parametrize("case", [c for c in GOLDEN["cases"] if c["case"] in ("plain", "cheating_exclusive")],
                         ids=lambda c: "%s-%s" % (c["case"], c["params"]["output/rec/embed/b"][0]))
def test_split_of_the_beam_scores_as_returnn_2021(case):
    out, losses = _run(case)
    split = out["split_scores"]
    assert split.data.batch_ndim == 2 and split.data.dims[1].dimension == G.BEAM
    assert getattr(split, "beam", None) is None  # the beam is taken apart: B rows
    ref = np.array(case["scores"])  # RETURNN's (B, K), best first
    np.testing.assert_allclose(np.sort(split.tensor.numpy(), axis=1), np.sort(ref, axis=1), atol=2e-4)
    lse = np.log(np.exp(ref).sum(axis=1))
    loss = losses["denominator_score"]
    np.testing.assert_allclose(loss.loss_sum.numpy(), lse.sum(), rtol=1e-4)
    assert float(loss.norm.numpy()) == len(INPUTS["x_lens"])  # RETURNN 2021: the value's batch size, B


def test_split_of_the_beam_refused_with_a_behavior_version():
    case = next(c for c in GOLDEN["cases"] if c["case"] == "plain")
    with pytest.raises(NetworkError, match="'split_scores' \\(split_dims\\): splitting the batch axis of a search's "
                                           "hypotheses \\(a beam\\) is refused from behavior version 1"):
        _run(case, behavior_version=1)


@pytest.mark.parametrize("dims, match", [([2, 3], "only int 'dims' with one -1"), ([-1, -1], "only int 'dims'")])
def test_batch_split_forms_refused(dims, match):
    with pytest.raises(NetworkError, match="'output' \\(split_dims\\): splitting the batch axis: " + match):
        TFNetwork({"output": {"class": "split_dims", "axis": "B", "dims": dims, "from": "data"}},
                  {"data": data_from_opts("data", {"shape": (4,)})})


def test_batch_split_of_dynamic_axes_refused():
    with pytest.raises(NetworkError, match="'output' \\(split_dims\\): splitting the batch axis of .* with dynamic axes"):
        TFNetwork({"output": {"class": "split_dims", "axis": "B", "dims": [-1, 2], "from": "data"}},
                  {"data": data_from_opts("data", {"dim": 3})})
