"""masked_computation and unmask: packing frames by a mask (numpy reference), unmasking, the unit
on the packed frames, and inside rec loops (outputs and LSTM states kept where the mask is False,
checked against the same LSTM run over the packed frames outside the loop)."""
import numpy as np
import pytest
import tensorflow as tf

from helpers import outputs
from returnn.errors import NetworkError
from returnn.tensor import Data
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork

LENS = [6, 4, 1]
MASK = np.array([[1, 0, 1, 1, 0, 1],
                 [0, 0, 1, 1, 1, 1],  # frames 4, 5 are padding (length 4): never kept
                 [0, 1, 1, 1, 1, 1]], bool)  # only frame 0 is real: nothing kept


def _extern():
    return {"data": Data("data", shape=(None, 3)), "flag": Data("flag", shape=(None,), dtype="int32"),
            "classes": Data("classes", dim=5, sparse=True)}


def _batch(seed=0):
    rng = np.random.RandomState(seed)
    x = rng.randn(3, 6, 3).astype("float32")
    y = rng.randint(0, 5, size=(3, 6)).astype("int32")
    for b, n in enumerate(LENS):
        x[b, n:] = np.nan  # padded frames must not reach real ones
        y[b, n:] = 10 ** 6
    flag = MASK.astype("int32")
    lens = tf.constant(LENS)
    return {"data": tf.constant(x), "data:seq_len": lens, "flag": tf.constant(flag), "flag:seq_len": lens,
            "classes": tf.constant(y), "classes:seq_len": lens}, x, y


def _packed_reference(x):
    """numpy: per sequence the real frames where MASK holds."""
    return [x[b, :n][MASK[b, :n]] for b, n in enumerate(LENS)]


MASK_LAYER = {"mask": {"class": "compare", "from": "data:flag", "value": 1, "kind": "equal"}}


def test_masked_copy_packs_the_kept_frames_and_unmask_repeats_the_last_one():
    net = TFNetwork(outputs(dict(MASK_LAYER, **{
        "packed": {"class": "masked_computation", "from": "data", "mask": "mask", "unit": {"class": "copy"}},
        "labels": {"class": "masked_computation", "from": "data:classes", "mask": "mask", "unit": {"class": "copy"}},
        "packed_c": {"class": "copy", "from": "packed"},  # RETURNN unmasks no masked_computation outside loops
        "back": {"class": "unmask", "from": "packed_c", "mask": "mask"}})), _extern())
    batch, x, y = _batch()
    out = net.forward(batch, RunContext(False))
    packed = out["packed"]
    ref = _packed_reference(x)
    sizes = packed.seq_len.numpy()
    assert sizes.tolist() == [len(r) for r in ref] == [4, 2, 0]
    assert packed.data.time_dim is not net.extern_data["data"].time_dim  # a new axis
    for b, r in enumerate(ref):
        np.testing.assert_array_equal(packed.tensor.numpy()[b, :len(r)], r)
    labels = out["labels"]
    assert labels.data.sparse and labels.tensor.dtype == tf.int32
    for b, n in enumerate(LENS):
        np.testing.assert_array_equal(labels.tensor.numpy()[b, :sizes[b]], y[b, :n][MASK[b, :n]])
    # unmask: frame t takes the packed frame of the last kept position <= t, zeros before the first
    back = out["back"].tensor.numpy()
    assert out["back"].data.time_dim is net.extern_data["flag"].time_dim  # the mask's
    np.testing.assert_array_equal(out["back"].seq_len.numpy(), LENS)
    for b, n in enumerate(LENS):
        last = np.zeros(3, "float32")
        for t in range(n):
            if MASK[b, t]:
                last = x[b, t]
            np.testing.assert_array_equal(back[b, t], last)


def test_unmask_of_a_masked_computation_outside_loops_refused():
    """RETURNN's unmask asks its source for the initial output of the rec layer around it: a masked_computation
    outside loops has none (AttributeError; before March 2022 an assert), at every version (returnn_fuzz chain
    seed 327); a layer after it has its zeros."""
    with pytest.raises(NetworkError, match="'back' \\(unmask\\): unmasking a masked_computation outside a rec loop"):
        TFNetwork(outputs(dict(MASK_LAYER, **{
            "packed": {"class": "masked_computation", "from": "data", "mask": "mask", "unit": {"class": "copy"}},
            "back": {"class": "unmask", "from": "packed", "mask": "mask"}})), _extern())


def test_unit_runs_on_the_packed_frames_only():
    """An LSTM unit outside loops sees only the kept frames, as if the others never existed."""
    net = TFNetwork(outputs(dict(MASK_LAYER, **{
        "m": {"class": "masked_computation", "from": "data", "mask": "mask",
              "unit": {"class": "rec", "unit": "nativelstm2", "n_out": 4}},
        "ref_in": {"class": "masked_computation", "from": "data", "mask": "mask", "unit": {"class": "copy"}},
        "ref": {"class": "rec", "unit": "nativelstm2", "n_out": 4, "from": "ref_in"}})), _extern())
    for a, b in zip(net.layers["m/output"].trainable_variables, net.layers["ref"].trainable_variables):
        a.assign(b)
    batch, _, _ = _batch()
    out = net.forward(batch, RunContext(False))
    sizes = out["ref"].seq_len.numpy()
    for b, n in enumerate(sizes):
        np.testing.assert_allclose(out["m"].tensor.numpy()[b, :n], out["ref"].tensor.numpy()[b, :n], atol=1e-6)


def _loop_net(extra_unit=None):
    unit = {
        "mask": {"class": "compare", "from": "data:flag", "value": 1, "kind": "equal"},
        "lm": {"class": "masked_computation", "from": "data:source", "mask": "mask", "unit": {
            "class": "subnetwork", "from": "data", "subnetwork": {
                "lin": {"class": "linear", "activation": "tanh", "n_out": 5, "from": "data"},
                "lstm": {"class": "rec", "unit": "nativelstm2", "n_out": 4, "from": "lin"},
                "output": {"class": "copy", "from": "lstm"}}}},
        "lm_out": {"class": "unmask", "from": "lm", "mask": "mask"},
        "output": {"class": "linear", "activation": None, "n_out": 2, "from": ["lm_out", "prev:output"]},
    }
    unit.update(extra_unit or {})
    return {
        "loop": {"class": "rec", "from": "data", "unit": unit},
        # the same sub-network once over the packed frames, outside any loop
        "mask": {"class": "compare", "from": "data:flag", "value": 1, "kind": "equal"},
        "ref_lm": {"class": "masked_computation", "from": "data", "mask": "mask", "unit": {
            "class": "subnetwork", "from": "data", "subnetwork": {
                "lin": {"class": "linear", "activation": "tanh", "n_out": 5, "from": "data"},
                "lstm": {"class": "rec", "unit": "nativelstm2", "n_out": 4, "from": "lin"},
                "output": {"class": "copy", "from": "lstm"}}}},
        "ref_lm_c": {"class": "copy", "from": "ref_lm"},
        "ref": {"class": "unmask", "from": "ref_lm_c", "mask": "mask"},
    }


def test_inside_a_loop_the_unit_keeps_output_and_state_where_the_mask_is_false():
    net = TFNetwork(outputs(_loop_net()), _extern())
    rec = net.layers["loop"]
    assert {"lm/lin", "lm/lstm", "lm/output", "lm"} <= set(rec.plan.in_loop)
    for name in ("lin", "lstm"):
        for a, b in zip(rec.layers["lm/" + name].trainable_variables, net.layers["ref_lm/" + name].trainable_variables):
            assert a.shape == b.shape
            a.assign(b)
    batch, _, _ = _batch()
    out = net.forward(batch, RunContext(False))
    loop_lm = out["loop/lm_out"].tensor.numpy()
    ref = out["ref"].tensor.numpy()
    for b, n in enumerate(LENS):
        np.testing.assert_allclose(loop_lm[b, :n], ref[b, :n], atol=1e-5)
    # the values really change where the mask is True and stay otherwise (not all equal / zero)
    assert np.abs(loop_lm[0, 0]).sum() > 0 and np.array_equal(loop_lm[0, 1], loop_lm[0, 0])
    assert not np.allclose(loop_lm[0, 2], loop_lm[0, 0])
    assert np.all(loop_lm[2, 0] == 0)  # no kept frame yet: the initial output


def test_prev_mask_inside_a_loop_and_gradients():
    """``mask: prev:...`` as in transducer configs; the loss gradient reaches the unit's weights."""
    unit = {
        "emit": {"class": "compare", "from": "data:flag", "value": 1, "kind": "equal"},
        "lm": {"class": "masked_computation", "from": "data:source", "mask": "prev:emit",
               "unit": {"class": "rec", "unit": "nativelstm2", "n_out": 4}},
        "output": {"class": "softmax", "from": ["lm"], "target": "classes", "loss": "ce"},
    }
    net = TFNetwork(outputs({"loop": {"class": "rec", "from": "data", "unit": unit}}), _extern())
    batch, _, _ = _batch()
    with tf.GradientTape() as tape:
        out = net.forward(batch, RunContext(True))
        loss = tf.reduce_sum(out["loop/lm"].masked(0.0))
    lstm = net.layers["loop"].layers["lm/output"]
    grads = tape.gradient(loss, lstm.trainable_variables)
    assert all(g is not None and np.isfinite(g.numpy()).all() for g in grads)
    lm = out["loop/lm"].tensor.numpy()
    prev_emit = np.concatenate([np.zeros((3, 1), bool), MASK[:, :-1]], axis=1)
    for b, n in enumerate(LENS):
        for t in range(1, n):
            if not prev_emit[b, t]:
                np.testing.assert_array_equal(lm[b, t], lm[b, t - 1])
            else:
                assert not np.allclose(lm[b, t], lm[b, t - 1])
    assert np.all(lm[:, 0] == 0)  # prev:emit is False at step 0: the initial output


@pytest.mark.parametrize("layer, message", [
    ({"class": "masked_computation", "from": "data", "unit": {"class": "copy"}}, "'mask' must name a bool layer"),
    ({"class": "masked_computation", "from": "data", "mask": "mask", "unit": "copy"}, "'unit' must be a layer dict"),
    ({"class": "masked_computation", "from": "data", "mask": "data:flag", "unit": {"class": "copy"}},
     r"layer 'm' \(masked_computation\): 'mask' must be a bool \(batch, time\) layer"),
    # RETURNN: a name is not among the input's dim tags, no out_spatial_dim is made, its assert fails (fuzz s174)
    ({"class": "masked_computation", "from": "data", "mask": "mask", "unit": {"class": "copy"}, "in_spatial_dim": "T"},
     "'in_spatial_dim' outside a rec loop must be a Dim, got 'T'"),
])
def test_bad_masked_computation_is_one_line(layer, message):
    with pytest.raises(NetworkError, match=message):
        TFNetwork(outputs(dict(MASK_LAYER, m=layer)), _extern())


def _transducer_like(search: bool, beam: int = 1) -> TFNetwork:
    unit = {
        "emb": {"class": "linear", "activation": None, "n_out": 4, "from": "prev:output"},
        "emit": {"class": "compare", "from": "output", "value": 0, "kind": "not_equal"},
        "lm": {"class": "masked_computation", "from": "emb", "mask": "prev:emit",
               "unit": {"class": "rec", "unit": "nativelstm2", "n_out": 5}},
        "prob": {"class": "softmax", "from": ["lm", "data:source"], "n_out": 5, "target": "classes", "loss": "ce"},
        "output": {"class": "choice", "initial_output": 0, "from": "prob", "target": "classes", "beam_size": beam},
    }
    return TFNetwork(outputs({"loop": {"class": "rec", "from": "data", "unit": unit}}), _extern(), seed=3, search=search)


def test_search_through_a_masked_unit_agrees_with_teacher_forcing():
    """Beam 1 picks, at every step, the argmax of the teacher-forced network fed its own labels:
    the kept LSTM states of search and training agree."""
    batch, _, _ = _batch()
    found = _transducer_like(True, 1).forward(batch, RunContext(False), only=["loop"])["loop"]
    labels = found.tensor.numpy()
    assert found.seq_len.numpy().tolist() == LENS
    assert (labels[0, :6] == 0).any() and (labels[0, :6] != 0).any()  # both branches of the mask occur
    forced = dict(batch, classes=tf.constant(np.where(labels >= 0, labels, 0).astype("int32")))
    prob = _transducer_like(False).forward(forced, RunContext(False))["loop/prob"].tensor.numpy()
    for b, n in enumerate(LENS):
        assert prob[b, :n].argmax(-1).tolist() == labels[b, :n].tolist()
    wide = _transducer_like(True, 3).forward(batch, RunContext(False), only=["loop"])["loop"]
    assert wide.seq_len.numpy().tolist() == LENS


def test_masked_from_without_mask_and_unmask_skip_initial():
    """The unit over an already packed sequence (masked_from, mask None); unmask with skip_initial
    takes the input's first frame as the value before the first kept frame."""
    net = TFNetwork(outputs(dict(MASK_LAYER, **{
        "packed": {"class": "masked_computation", "from": "data", "mask": "mask", "unit": {"class": "copy"}},
        "start": {"class": "prefix_in_time", "from": "packed", "prefix": 7.0},
        "lm": {"class": "masked_computation", "from": [], "mask": None, "masked_from": "start",
               "unit": {"class": "copy", "from": "data"}},
        "back": {"class": "unmask", "from": "lm", "mask": "mask", "skip_initial": True}})), _extern())
    batch, x, _ = _batch()
    back = net.forward(batch, RunContext(False))["back"].tensor.numpy()
    for b, n in enumerate(LENS):
        last = np.full(3, 7.0, "float32")
        for t in range(n):
            if MASK[b, t]:
                last = x[b, t]
            np.testing.assert_array_equal(back[b, t], last)


def test_in_a_loop_labels_where_the_mask_is_false_are_not_embedded():
    """RNA configs (jotix16/returnn_template_project): the previous label, blank included, is
    reinterpreted without the blank class and embedded in a masked_computation that only emits
    ('prev:output_emit'); where the mask is False the out-of-range blank must not reach the
    embedding (a gather error on CPU; RETURNN on GPU reads zeros), and the output is the last kept one."""
    extern = {"data": Data("data", shape=(None, 3)), "classes": Data("classes", dim=5, sparse=True)}
    unit = {
        "emit": {"class": "compare", "from": "data:classes", "value": 4, "kind": "not_equal"},
        "prev_non_blank": {"class": "reinterpret_data", "from": "prev:label", "set_sparse_dim": 4},
        "label": {"class": "copy", "from": "data:classes", "initial_output": 0},
        "embed": {"class": "masked_computation", "from": "prev_non_blank", "mask": "prev:emit",
                  "unit": {"class": "linear", "activation": None, "n_out": 2}},
        "output": {"class": "copy", "from": ["embed", "data:source"]}}
    net = TFNetwork(outputs({"loop": {"class": "rec", "from": "data", "unit": unit}}), extern)
    labels = np.array([[1, 4, 4, 2, 0], [4, 3, 4, 4, 4]], np.int32)  # 4: blank, outside the 4 classes
    batch = {"data": tf.constant(np.random.RandomState(0).randn(2, 5, 3).astype(np.float32)),
             "data:seq_len": tf.constant([5, 4]), "classes": tf.constant(labels),
             "classes:seq_len": tf.constant([5, 4])}
    emb = net.forward(batch, RunContext(False))["loop"].tensor.numpy()[..., :2]
    lin = net.layers["loop"].layers["embed/output"] if "embed/output" in net.layers["loop"].layers \
        else net.layers["loop"].layers["embed"]
    w, bias = lin.W.numpy(), lin.bias.numpy()
    np.testing.assert_allclose(emb[0, 1], w[1] + bias, rtol=1e-5)  # prev label 1 emitted
    np.testing.assert_allclose(emb[0, 2], emb[0, 1])  # prev was blank: kept
    np.testing.assert_allclose(emb[0, 3], emb[0, 1])
    np.testing.assert_allclose(emb[0, 4], w[2] + bias, rtol=1e-5)
    np.testing.assert_array_equal(emb[1, :2], 0)  # no label kept yet: the initial output
    np.testing.assert_allclose(emb[1, 2], w[3] + bias, rtol=1e-5)


def test_plain_unit_reading_base_data_in_a_subnetwork_is_packed():
    """returnn_common's boolean_mask (random_frame_drop): a masked_computation in a subnetwork whose plain
    unit reads 'base:data:data' (RETURNN's get_layer of the masked layer's network: the network around)
    gets those frames packed by the mask, as a unit reading its 'from'."""
    net = TFNetwork(outputs({"sub": {"class": "subnetwork", "from": [], "subnetwork": {
        "sum": {"class": "reduce", "from": "base:data:data", "mode": "sum", "axis": "F"},
        "mask": {"class": "compare", "from": "sum", "value": 0.0, "kind": "greater"},
        "output": {"class": "masked_computation", "mask": "mask", "from": [],
                   "unit": {"class": "copy", "from": "base:data:data"}}}}}), _extern())
    batch, x, _ = _batch()
    out = net.forward(batch, RunContext(False))["sub"]
    for b, n in enumerate(LENS):
        ref = x[b, :n][x[b, :n].sum(axis=-1) > 0]
        assert int(out.seq_len[b]) == len(ref)
        np.testing.assert_allclose(out.tensor.numpy()[b, :len(ref)], ref, rtol=1e-6)


def test_a_mask_with_more_axes_than_the_batch_in_a_loop_is_refused():
    """RETURNN's MaskedComputationLayer inside a rec loop asserts a bool mask of shape () per step: a reduce with
    keep_dims gives (batch, 1), refused here in one line as well (it was reshaped to (batch,) and built: LAX in
    returnn_fuzz mutate --train seed 95)."""
    net = {"output": {"class": "rec", "from": "data", "optimize_move_layers_out": False, "unit": {
        "red": {"class": "reduce", "mode": "sum", "axis": "F", "from": "data:source", "keep_dims": True},
        "mask": {"class": "compare", "kind": "greater", "value": 0.0, "from": "red"},
        "masked": {"class": "masked_computation", "from": "data:source", "mask": "mask",
                   "unit": {"class": "rnn_cell", "unit": "LSTMBlock", "n_out": 4, "from": "data"}},
        "unmask": {"class": "unmask", "from": "masked", "mask": "mask"},
        "output": {"class": "linear", "activation": "tanh", "n_out": 3, "from": "unmask"}}}}
    with pytest.raises(NetworkError, match="sub-layer 'masked': its masked_computation's mask 'mask' must be a bool "
                                           "\\(batch,\\) layer"):
        TFNetwork(net, _extern())
