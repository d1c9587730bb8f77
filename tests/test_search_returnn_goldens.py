"""Beam search against the real RETURNN: decided labels of a tiny decoder over random score tables,
with and without the choice's length_normalization (RETURNN's: ended hypotheses' scores scaled per
step, so the beam compares score / length) and the decide's (the final pick by score / length), with a
custom_score_combine recombining hypotheses, and a time-synchronous loop over sequences of different
lengths (each ends at its length, one step later without include_eos) (tests/returnn_goldens/search_goldens.py made tests/data/returnn_goldens/search_beam.json)."""
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
    opts = (["timesync"] if case.get("kind") == "time_sync" else []) + ["beam%i" % case["beam"]]
    opts += ["ln" if case["length_norm"] else "noln"] + (["exp%g" % case["exponent"]] if "exponent" in case else [])
    opts += ["eos"] if case.get("include_eos") else []
    opts += ["decideln"] if case.get("decide_norm") else []
    return "-".join(opts + (["recombine"] if case.get("combine") else []))


@pytest.mark.parametrize("case", GOLDEN["cases"], ids=[_label(c) for c in GOLDEN["cases"]])
def test_search_as_returnn(case):
    extern = {"data": Data("data", shape=(None, 2)), "classes": Data("classes", dim=4, sparse=True)}
    net = TFNetwork(search_goldens.case_net_dict(case), extern, search=True)
    unit = net.layers["output"].layers
    unit["emb"].W.assign(np.eye(4, dtype="float32"))
    unit["prob"].W.assign(np.array(case["W"], "float32"))
    x, lens = search_goldens.case_inputs(case)
    out = net.forward({"data": tf.constant(x), "data:seq_len": tf.constant(lens)}, RunContext(False),
                      only=["decision"])["decision"]
    values, out_lens = out.tensor.numpy(), out.seq_len.numpy()
    assert [values[b, :out_lens[b]].tolist() for b in range(len(lens))] == case["returnn"]


def test_the_goldens_tell_the_options_apart():
    """Each option changes RETURNN's result for some table (else the comparison above could not notice
    it missing): length normalization, its exponent, the recombination (with and without normalization)."""
    by_table = {}
    for case in GOLDEN["cases"]:
        by_table.setdefault(json.dumps(case["W"]), {})[_label(case)] = case["returnn"]
    for a, b in [("beam3-ln", "beam3-noln"), ("beam3-ln", "beam3-ln-exp0.5"), ("beam3-ln", "beam3-ln-recombine"),
                 ("beam3-noln", "beam3-noln-recombine"), ("timesync-beam1-ln", "timesync-beam3-ln"),
                 ("beam3-noln", "beam3-noln-decideln"), ("beam3-ln", "beam3-ln-decideln")]:
        assert any(a in r and r[a] != r[b] for r in by_table.values()), (a, b)
