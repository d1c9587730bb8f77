"""A choice's ``scheduled_sampling`` (RETURNN's ChoiceLayer): outside search the label is drawn from
the scores of its source and fed back; ``gold_mixin_prob`` takes the target instead with that
probability per sequence and step. Frequencies against the distribution (the RETURNN goldens
fuzzrec_scheduled_sampling_* check the wiring with near one-hot scores); bad values in one line."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork

PROBS = np.array([0.1, 0.2, 0.3, 0.4], "float32")


def _net(scheduled_sampling, search=False):
    unit = {"prob": {"class": "eval", "from": "data:source", "eval": "source(0)"},
            "choice": {"class": "choice", "from": "prob", "target": "classes", "beam_size": 1,
                       "scheduled_sampling": scheduled_sampling},
            "output": {"class": "copy", "from": "choice"}}
    extern = {"data": Data("data", shape=(None, 4)), "classes": Data("classes", dim=4, sparse=True)}
    return TFNetwork({"output": {"class": "rec", "from": "data", "unit": unit}}, extern, search=search)


def _run(net, n=4000, t=3, train=True):
    x = np.tile(PROBS, (n, t, 1))
    gold = np.full((n, t), 0, "int32")
    batch = {"data": tf.constant(x), "data:seq_len": tf.fill([n], t), "classes": tf.constant(gold),
             "classes:seq_len": tf.fill([n], t)}
    return net.forward(batch, RunContext(train, tf.constant([1, 7], tf.int64)))["output"].tensor.numpy()


@pytest.mark.parametrize("gold_prob", [None, 0.5])
def test_labels_are_drawn_from_the_scores_with_the_target_mixed_in(gold_prob):
    spec = True if gold_prob is None else {"gold_mixin_prob": gold_prob}
    y = _run(_net(spec))
    expected = PROBS * (1 - (gold_prob or 0.0))
    expected[0] += gold_prob or 0.0  # the target is label 0
    freq = np.bincount(y.reshape(-1), minlength=4) / y.size
    np.testing.assert_allclose(freq, expected, atol=0.02)
    assert len({tuple(y[:, i]) for i in range(y.shape[1])}) == y.shape[1]  # new draws each step
    again = _run(_net(spec), train=False)  # evaluation samples too (RETURNN: the same branch)
    assert not (again == 0).all()


@pytest.mark.parametrize("value", [{"gold_mixin_prob": 1.5}, {"gold_mix_prob": 0.5}, "yes"])
def test_bad_values_name_the_layer(value):
    with pytest.raises(NetworkError, match="'output/choice'.*scheduled_sampling must be"):
        _net(value)
