"""edit_distance_table and optimal_completions in rec loops (RETURNN's OCD layers): rows and
optimal completions per step against numpy Levenshtein rows, with padded reference frames and a
length-0 reference, RETURNN's prev end flag (the step after a sequence's last frame updates the row
once more with the padding label), blank_idx, a unit loss target 'layer:X' (soft targets) and the
search in training (every hypothesis' rows against its own labels)."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from test_losses import levenshtein
from returnn.errors import NetworkError
from returnn.extern_data import data_from_opts
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork

V = 5
# padded with 0 as datasets pad (the teacher-forced choice gives 0 there: RETURNN reads the padding as is)
Y = np.array([[1, 2, 3, 0, 0], [3, 4, 0, 0, 0], [2, 4, 2, 1, 0], [0, 0, 0, 0, 0]], np.int32)
Y_LENS = np.array([3, 3, 5, 0], np.int32)
TARGET = "layer:base:data:classes"


def _extern():
    return {"data": data_from_opts("data", {"dim": 2}), "classes": data_from_opts("classes", {"dim": V, "sparse": True})}


def _batch():
    return {"data": tf.zeros([4, 3, 2]), "data:seq_len": tf.constant([3, 3, 3, 3]),
            "classes": tf.constant(Y), "classes:seq_len": tf.constant(Y_LENS)}


def _unit(prob_n_out=True, table_opts=None, oc_opts=None, beam=2, soft_output=True):
    prob = {"class": "softmax", "from": "embed", "target": "layer:soft", "loss": "ce"}
    if prob_n_out:
        prob["n_out"] = V
    return {
        "output": {"class": "choice", "from": "prob", "target": "classes", "beam_size": beam, "initial_output": 0},
        "embed": {"class": "linear", "from": "prev:output", "n_out": 3, "activation": None},
        "prob": prob,
        "table": dict({"class": "edit_distance_table", "from": "output", "target": TARGET, "is_output_layer": True},
                      **(table_opts or {})),
        "oc": dict({"class": "optimal_completions", "from": "prev:table", "target": TARGET, "is_output_layer": True},
                   **(oc_opts or {})),
        "soft": {"class": "eval", "eval": "tf.nn.softmax(-20. * tf.cast(source(0), tf.float32))", "from": "oc",
                 "out_type": {"dtype": "float32"}, "is_output_layer": soft_output},
    }


def ref_rows(hyp, ref, n_b, prev_end):
    """RETURNN's rows of hypothesis ``hyp`` (the labels per step, padding included) against ``ref``:
    start range(n_b + 1), a step whose prev end flag is set keeps the row, positions after len(ref)
    repeat the entry at len(ref)."""
    row = np.arange(n_b + 1)
    rows = []
    n_done = 0
    for t, label in enumerate(hyp):
        if not prev_end[t]:
            n_done = t + 1
            full = [levenshtein(hyp[:n_done], ref[:j]) for j in range(len(ref) + 1)]
            row = np.array(full + [full[-1]] * (n_b - len(ref)))
        rows.append(row.copy())
    return rows


def ref_opt(prev_row, t, ended, ref, blank=None):
    """Per label: the least entry of the row it would give (over 0 .. len(ref)); an ended
    hypothesis (or the blank) the least entry of the previous row."""
    out = []
    for v in range(V):
        if ended or v == blank:
            out.append(prev_row[:len(ref) + 1].min())
            continue
        row = [t + 1]
        for j in range(1, len(ref) + 1):
            row.append(min(prev_row[j] + 1, row[-1] + 1, prev_row[j - 1] + (v != ref[j - 1])))
        out.append(min(row))
    return out


def test_teacher_forcing_rows_and_completions():
    net = TFNetwork({"output": {"class": "rec", "from": [], "target": "classes", "unit": _unit()}}, _extern())
    out = net.forward(_batch(), RunContext(True))
    table, oc, soft = (out["output/" + k].tensor.numpy() for k in ("table", "oc", "soft"))
    n_t = Y.shape[1]
    assert table.shape == (4, n_t, n_t + 1) and oc.shape == (4, n_t, V)
    sizes = out["output/table"].sizes[net.layers["output"].layers["table"].row_dim].numpy()
    np.testing.assert_array_equal(sizes, np.repeat((Y_LENS + 1)[:, None], n_t, 1))  # per frame, as stacked
    for b in range(4):
        ref = list(Y[b, :Y_LENS[b]])
        prev_end = [t >= Y_LENS[b] + 1 for t in range(n_t)]  # RETURNN: t >= len + 1 without include_eos
        rows = ref_rows(list(Y[b]), ref, n_t, prev_end)
        for t in range(n_t):
            np.testing.assert_array_equal(table[b, t], rows[t], err_msg="seq %i step %i" % (b, t))
            prev_row = np.arange(n_t + 1) if t == 0 else rows[t - 1]
            np.testing.assert_array_equal(oc[b, t], ref_opt(prev_row, t, prev_end[t], ref), err_msg="%i %i" % (b, t))
    e = np.exp(-20.0 * oc)
    np.testing.assert_allclose(soft, e / e.sum(-1, keepdims=True), rtol=1e-5)
    losses = net.compute_losses(out, _batch(), train=True)
    assert float(losses["output/prob"].norm) == Y_LENS.sum()


def test_blank_idx_keeps_the_row_and_counts_labels():
    unit = _unit(table_opts={"blank_idx": 4}, oc_opts={"blank_idx": 4})
    net = TFNetwork({"output": {"class": "rec", "from": [], "target": "classes", "unit": unit}}, _extern())
    out = net.forward(_batch(), RunContext(True))
    table, oc = out["output/table"].tensor.numpy(), out["output/oc"].tensor.numpy()
    ref = [3, 4, 0]  # seq 1: labels 3, blank, 0
    np.testing.assert_array_equal(table[1, 1], table[1, 0])  # the blank keeps the row
    assert list(table[1, 2][:4]) == [levenshtein([3, 0], ref[:j]) for j in range(4)]  # position 1, not step 2
    np.testing.assert_array_equal(oc[1, 2], ref_opt(table[1, 1], 1, False, ref, blank=4))
    assert oc[1, 2][4] == table[1, 1][:4].min()  # the blank: the least entry of the row
    ref2 = list(Y[2])  # [2, 4, 2, 1, 0]: the blank at step 1 does not count
    assert list(table[2, 3]) == [levenshtein([2, 2, 1], ref2[:j]) for j in range(6)]
    np.testing.assert_array_equal(oc[2, 3], ref_opt(table[2, 2], 2, False, ref2, blank=4))
    assert oc.shape == (4, Y.shape[1], V)


def test_search_in_training_rows_follow_each_hypothesis():
    """Extra search net (beam 3, all hypotheses kept): every hypothesis' rows are the Levenshtein
    rows of its own labels, its optimal completions those of its prefix; the soft targets are the
    loss target of 'prob' (its out_dim from them)."""
    unit = _unit(prob_n_out=False, beam=3, soft_output=False)  # soft: exported as prob's loss target
    net_dict = {"output": {"class": "rec", "from": [], "target": "classes", "max_seq_len": 7, "unit": unit,
                           "only_on_search": True},
                "decision": {"class": "decide", "from": "output", "loss": "edit_distance", "target": "classes",
                             "only_on_search": True}}
    net = TFNetwork(net_dict, _extern(), search_train_layers=["output", "decision"])
    out = net.forward(_batch(), RunContext(True))
    name = [n for n in out if n.endswith("output") and "search" in n][0]
    labels = out[name].tensor.numpy()  # (B*K, T) or (T, B*K)
    if out[name].data.batch_dim_axis != 0:
        labels = labels.T
    table = out[name + "/table"]
    oc = out[name + "/oc"].tensor.numpy()
    tab = table.tensor.numpy()
    if table.data.batch_dim_axis != 0:
        tab, oc = np.swapaxes(tab, 0, 1), np.swapaxes(oc, 0, 1)
    k, n_t = 3, Y.shape[1]
    assert labels.shape == (4 * k, n_t) and tab.shape == (4 * k, n_t, n_t + 1)
    for i in range(4 * k):
        b = i // k
        ref = list(Y[b, :Y_LENS[b]])
        prev_end = [t >= Y_LENS[b] + 1 for t in range(n_t)]
        rows = ref_rows(list(labels[i]), ref, n_t, prev_end)
        for t in range(n_t):
            np.testing.assert_array_equal(tab[i, t], rows[t], err_msg="hyp %i step %i" % (i, t))
            prev_row = np.arange(n_t + 1) if t == 0 else rows[t - 1]
            np.testing.assert_array_equal(oc[i, t], ref_opt(prev_row, t, prev_end[t], ref), err_msg="%i %i" % (i, t))
    losses = net.compute_losses(out, _batch(), train=True)
    prob_loss = [v for n, v in losses.items() if n.endswith("/prob")]
    probs = out[name + "/prob"].tensor.numpy()
    if out[name + "/prob"].data.batch_dim_axis != 0:
        probs = np.swapaxes(probs, 0, 1)
    e = np.exp(-20.0 * oc)
    soft = e / e.sum(-1, keepdims=True)
    mask = np.arange(n_t)[None, :] < np.repeat(Y_LENS, k)[:, None]
    want = -(soft * np.log(probs)).sum(-1)[mask].sum()  # CE against the soft targets, every hypothesis' frames
    np.testing.assert_allclose(float(prob_loss[0].loss_sum), want, rtol=1e-4)
    only = net.forward(_batch(), RunContext(True), only=[info.layer for info in net.losses])  # as the train step
    again = net.compute_losses(only, _batch(), train=True)
    np.testing.assert_allclose(float([v for n, v in again.items() if n.endswith("/prob")][0].loss_sum), want, rtol=1e-4)


def test_refusals():
    unit = _unit()
    unit["table"] = dict(unit["table"], target="classes")
    with pytest.raises(NetworkError, match="classes"):  # a data key: no whole sequence in the loop
        TFNetwork({"output": {"class": "rec", "from": [], "target": "classes", "unit": unit}}, _extern())
    with pytest.raises(NetworkError, match="inside a rec"):
        TFNetwork({"t": {"class": "edit_distance_table", "from": "data:classes", "target": "layer:data:classes",
                         "is_output_layer": True}},
                  _extern())
