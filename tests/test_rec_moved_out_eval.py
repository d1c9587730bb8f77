"""Which rec-unit layers reading a per-frame value and a ``base:`` layer over the loop's own time
still run over the whole sequence (RETURNN moves them out of the loop): an ``eval`` (its code sees
the stacked values: a full-sum transducer loss over the log-probs and ``base:encoder``; RETURNN
1.20261022 lists it under "Output layers moved out of loop"), and the readers of a layer that is in
the loop anyway (a gather of the encoder frame at ``:i``: what reads it stays as planned, e.g. the
joint network of a transducer after the loop), and a gather_nd of the encoder frame at a per-frame
position (``prev:t``). The rec layer tries such layers over the whole sequence first and moves
them into the loop only where that fails, as RETURNN."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from returnn.tensor import Data
from returnn.tf.layers import RunContext
from returnn.tf.layers.rec_net.deps import analyse_unit, frame_and_whole_readers, read_by, with_readers
from returnn.tf.network import TFNetwork

X = np.random.RandomState(4).normal(size=(3, 5, 4)).astype("float32")
LENS = np.array([5, 2, 0], np.int32)
SUM_EVAL = ("tf.reduce_sum(tf.where(source(0, as_data=True, auto_convert=False).get_sequence_mask_broadcast(), "
            "source(0, auto_convert=False), 0.), axis=[1, 2]) + 0. * tf.reduce_sum(source(1, auto_convert=False))")
SCALAR = {"shape": (), "batch_dim_axis": 0, "time_dim_axis": None}


def _unit():
    return {"am": {"class": "copy", "from": "data:source"},
            "x": {"class": "linear", "activation": "tanh", "n_out": 3, "from": "am"},
            "loss": {"class": "eval", "from": ["x", "base:enc"], "out_type": SCALAR, "eval": SUM_EVAL,
                     "is_output_layer": True},
            "output": {"class": "copy", "from": "x"}}


def test_eval_over_frames_and_base_layer_runs_on_the_whole_sequence():
    net = TFNetwork({"enc": {"class": "linear", "activation": None, "n_out": 2, "from": "data"},
                     "output": {"class": "rec", "from": "data", "unit": _unit()}},
                    {"data": Data("data", shape=(None, 4))})
    rec = net.layers["output"]
    assert "loss" not in rec.in_loop
    out = net.forward({"data": tf.constant(X), "data:seq_len": tf.constant(LENS)}, RunContext(False),
                      only=["output/loss"])
    params = {p.name: p.variables[0].numpy() for p in rec.layers["x"].all_returnn_params()}
    x = np.tanh(X @ params["W"] + params["b"])
    ref = [x[b, :n].sum() for b, n in enumerate(LENS)]  # (B,): all real frames, the length-0 sequence 0
    np.testing.assert_allclose(out["output/loss"].tensor.numpy(), ref, rtol=1e-5, atol=1e-5)


def test_candidates_for_the_loop_are_the_frame_and_whole_readers_outside_it():
    """The layers the rec layer first builds over the whole sequence and moves into the loop only
    where that fails (RecSubnetLayer._build_outside_loop): read a per-frame value and a base: layer
    over the loop's time, and are not in the loop anyway (a gather at :i is)."""
    unit = {"win": {"class": "gather_nd", "from": "base:encwin", "position": ":i"},
            "q": {"class": "linear", "activation": None, "n_out": 3, "from": "data:source"},
            "e": {"class": "dot", "from": ["win", "q"], "red1": "F", "red2": "F", "var1": "static:0", "var2": None},
            "output": {"class": "linear", "activation": None, "n_out": 2, "from": ["e", "base:lm"]}}
    plan = analyse_unit(unit, "output", has_source=True, teacher_forcing=True)
    assert "win" in plan.in_loop
    assert frame_and_whole_readers(plan, {"encwin"}) == []
    unit["energy"] = {"class": "combine", "kind": "add", "from": ["base:encwin", "q"]}
    plan = analyse_unit(unit, "output", has_source=True, teacher_forcing=True)
    assert frame_and_whole_readers(plan, {"encwin"}) == ["energy"]
    # a gather_nd of the encoder frame at a position of the previous step (a transducer's prev:t)
    del unit["energy"]
    unit.update({"dt": {"class": "constant", "value": 1, "dtype": "int32"},
                 "t": {"class": "combine", "kind": "add", "from": ["prev:t", "dt"]}})
    unit["win"] = {"class": "gather_nd", "from": "base:encwin", "position": "prev:t"}
    plan = analyse_unit(unit, "output", has_source=True, teacher_forcing=True)
    assert "win" not in plan.in_loop and frame_and_whole_readers(plan, {"encwin"}) == ["win"]
    assert with_readers(plan, ["win"]) == ["win", "e", "output"]
    assert set(read_by(plan, "e")) == {"win", "q", "e", "t", "dt"}
