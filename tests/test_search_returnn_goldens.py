"""Beam search against the real RETURNN: decided labels of a tiny decoder over random score tables,
with and without the choice's length_normalization (RETURNN's: ended hypotheses' scores scaled per
step, so the beam compares score / length), and with a custom_score_combine recombining hypotheses
(tests/returnn_goldens/search_goldens.py made tests/data/returnn_goldens/search_beam.json)."""
import json
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from returnn.tensor import Data
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "returnn_goldens"))
import search_goldens  # noqa: E402

with open(os.path.join(HERE, "data", "returnn_goldens", "search_beam.json")) as _f:
    GOLDEN = json.load(_f)


def _label(case):
    opts = ["beam%i" % case["beam"], "ln" if case["length_norm"] else "noln"]
    opts += ["exp%g" % case["exponent"]] if "exponent" in case else []
    return "-".join(opts + (["recombine"] if case.get("combine") else []))


@pytest.mark.parametrize("case", GOLDEN["cases"], ids=[_label(c) for c in GOLDEN["cases"]])
def test_search_as_returnn(case):
    extern = {"data": Data("data", shape=(None, 2)), "classes": Data("classes", dim=4, sparse=True)}
    combine = search_goldens.recombine if case.get("combine") else None
    net = TFNetwork(search_goldens.net_dict(case["beam"], case["length_norm"], case.get("exponent", 1.0), combine),
                    extern, search=True)
    unit = net.layers["output"].layers
    unit["emb"].W.assign(np.eye(4, dtype="float32"))
    unit["prob"].W.assign(np.array(case["W"], "float32"))
    enc = np.array(case["enc"], "float32")
    x = np.repeat(enc[:, None, :], 3, axis=1)
    out = net.forward({"data": tf.constant(x), "data:seq_len": tf.constant([3] * len(enc))}, RunContext(False),
                      only=["decision"])["decision"]
    values, lens = out.tensor.numpy(), out.seq_len.numpy()
    assert [values[b, :lens[b]].tolist() for b in range(len(enc))] == case["returnn"]


def test_the_goldens_tell_the_options_apart():
    """Each option changes RETURNN's result for some table (else the comparison above could not notice
    it missing): length normalization, its exponent, the recombination (with and without normalization)."""
    by_table = {}
    for case in GOLDEN["cases"]:
        by_table.setdefault(json.dumps(case["W"]), {})[_label(case)] = case["returnn"]
    for a, b in [("beam3-ln", "beam3-noln"), ("beam3-ln", "beam3-ln-exp0.5"), ("beam3-ln", "beam3-ln-recombine"),
                 ("beam3-noln", "beam3-noln-recombine")]:
        assert any(r[a] != r[b] for r in by_table.values()), (a, b)
