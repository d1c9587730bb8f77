"""``initial_state: "keep_over_epoch"`` of ``self_attention`` (context carry-over over training
steps) against the real RETURNN: the steps of tests/returnn_goldens/make_kept_state_goldens.py
(whole sequences with and without ``attention_left_only``, in a rec loop, moved out of it,
``restrict_state_to_last_seq``), here with RETURNN's parameters, compared on the real frames of
each step. The last step starts a new epoch (without the carried keys)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from returnn.tensor import Data
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork
from returnn.tf.returnn_params import set_returnn_param_values

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "returnn_goldens"))
import make_kept_state_goldens as kept  # noqa: E402

GOLDEN = REPO / "tests" / "data" / "returnn_kept_state"


def _epochs():
    """Per step the epoch as this engine counts (RETURNN's epoch step 0 starts a new one)."""
    epoch, out = 0, []
    for _, epoch_step in kept.STEPS:
        epoch += epoch_step == 0
        out.append(epoch)
    return out


@pytest.mark.parametrize("case", sorted(kept.CASES))
def test_kept_keys_and_values_as_returnn(case):
    gold = np.load(GOLDEN / (case + ".npz"))
    net = TFNetwork(kept.CASES[case], {"data": Data("data", shape=(None, kept.IN_DIM))})
    set_returnn_param_values(net, {k[len("param:"):]: gold[k] for k in gold.files if k.startswith("param:")})
    for i, ((x, lens, _), epoch) in enumerate(zip(kept.inputs(case), _epochs())):
        ctx = RunContext(True, tf.constant([epoch, i], tf.int64))
        y = net.forward({"data": tf.constant(x), "data:seq_len": tf.constant(lens)}, ctx)["output"].tensor.numpy()
        for b, n in enumerate(lens):
            np.testing.assert_allclose(y[b, :n], gold["out%i" % i][b, :n], rtol=1e-5, atol=1e-5,
                                       err_msg="%s step %i sequence %i" % (case, i, b))


def test_kept_state_is_no_parameter_and_evaluation_does_not_carry():
    """The carried keys are no parameter (RETURNN saves none); an evaluation step neither reads nor
    stores them; the first step of an epoch has none."""
    net = TFNetwork(kept.CASES["self_att_keep_whole_left"], {"data": Data("data", shape=(None, kept.IN_DIM))})
    assert [v.name for v in net.trainable_variables] == ["output/QKV:0"] or len(net.trainable_variables) == 1
    (x0, l0, _), (x1, l1, _) = kept.inputs("self_att_keep_whole_left")[:2]
    fresh = net.forward({"data": tf.constant(x1), "data:seq_len": tf.constant(l1)}, RunContext(False))["output"]
    net.forward({"data": tf.constant(x0), "data:seq_len": tf.constant(l0)}, RunContext(True, tf.constant([1, 0],
                                                                                                        tf.int64)))
    evaluated = net.forward({"data": tf.constant(x1), "data:seq_len": tf.constant(l1)}, RunContext(False))["output"]
    np.testing.assert_allclose(evaluated.tensor.numpy(), fresh.tensor.numpy())
    carried = net.forward({"data": tf.constant(x1), "data:seq_len": tf.constant(l1)},
                          RunContext(True, tf.constant([1, 1], tf.int64)))["output"]
    assert not np.allclose(carried.tensor.numpy(), fresh.tensor.numpy())
