"""Search in training against the real RETURNN (goldens of tests/returnn_goldens/search_train_goldens.py,
RETURNN's ``construct_extra_net`` as its engine runs ``search_train_network_layers``): all hypotheses
of the searched rec layer with their lengths (a training network searches as long as the rec layer's
target), their beam scores, the decision and its ``search_score`` loss; plain, with ``cheating``
(True, ``"exclusive"``), ``length_normalization``, and a choice fed its target after a searched one."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from returnn.extern_data import data_from_opts
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork
from returnn.tf.returnn_params import set_returnn_param_values

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "returnn_goldens"))
import search_train_goldens as G  # noqa: E402

GOLDEN = json.loads((HERE / "data" / "returnn_goldens" / "search_train.json").read_text())
INPUTS = GOLDEN["inputs"]


@pytest.mark.parametrize("case", GOLDEN["cases"], ids=lambda c: c["case"])
def test_search_in_training_as_returnn(case):
    extern = {"data": data_from_opts("data", {"dim": 2}), "classes": data_from_opts("classes", {"dim": G.V,
                                                                                                 "sparse": True})}
    net = TFNetwork(G.net_dict(case["case"]), extern, search_train_layers=G.SEARCH_TRAIN_LAYERS)
    set_returnn_param_values(net, {k: np.array(v, "float32") for k, v in case["params"].items()})
    batch = {"data": tf.constant(np.array(INPUTS["x"], "float32")), "data:seq_len": tf.constant(INPUTS["x_lens"]),
             "classes": tf.constant(np.array(INPUTS["y"], "int32")), "classes:seq_len": tf.constant(INPUTS["y_lens"])}
    names = ["extra.search:decision"] + (["extra.search:output/t"] if case["case"] == "fed" else [])
    out = net.forward(batch, RunContext(True), only=names)
    losses = net.compute_losses(out, batch, names[:1], train=True)
    rec, dec = out["extra.search:output"], out["extra.search:decision"]
    k = rec.beam.k
    lens, labels, scores = rec.seq_len.numpy(), rec.tensor.numpy(), rec.beam.scores.numpy()
    np.testing.assert_array_equal(lens, case["lens"])
    ref_labels, ref_scores = np.array(case["labels"]), np.array(case["scores"])
    for b in range(len(INPUTS["x_lens"])):
        # the hypotheses by score (those tied within float rounding may come in either order)
        def hyps(lab, sc):
            rows = [(round(float(sc[b, i]), 4), tuple(lab[b * k + i, :lens[b * k + i]])) for i in range(k)]
            return sorted(rows, key=lambda h: (-h[0], h[1]))
        ours, theirs = hyps(labels, scores), hyps(ref_labels, ref_scores)
        assert [h[1] for h in ours] == [h[1] for h in theirs], (b, ours, theirs)
        np.testing.assert_allclose([h[0] for h in ours], [h[0] for h in theirs], atol=2e-4)
        n = dec.seq_len.numpy()[b]
        assert n == case["decided_lens"][b]
        best = max(h[0] for h in theirs)
        assert tuple(dec.tensor.numpy()[b, :n]) in [h[1] for h in theirs if h[0] > best - 1e-3]
    np.testing.assert_allclose(losses["extra.search:decision"].loss_sum.numpy(), case["search_score"], rtol=1e-5)
    if case["case"] == "fed":  # the searched positions of each hypothesis (no ties in these cases)
        t_labels, t_ref = out["extra.search:output/t"].tensor.numpy(), np.array(case["t"])
        for row, n in enumerate(lens):
            np.testing.assert_array_equal(t_labels[row, :n], t_ref[row, :n])
