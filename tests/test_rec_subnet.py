"""rec layers whose unit is a dict: per-step loop vs. whole sequences, prev:, initial outputs,
cells, self-attention in the loop, sub-layer losses and references, one-line errors."""
import numpy as np
import pytest
import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork

LENS = [5, 3, 1]


def _extern(dim=4, classes=3):
    return {"data": Data("data", shape=(None, dim)), "classes": Data("classes", dim=classes, sparse=True)}


def _batch(dim=4, classes=3, seed=0, lens=LENS):
    rng = np.random.RandomState(seed)
    n_t = max(lens)
    x = rng.randn(len(lens), n_t, dim).astype("float32")
    y = rng.randint(0, classes, size=(len(lens), n_t)).astype("int32")
    for b, n in enumerate(lens):
        x[b, n:] = np.nan  # padded frames must not reach real ones
        y[b, n:] = 10 ** 6
    return {"data": tf.constant(x), "data:seq_len": tf.constant(lens), "classes": tf.constant(y),
            "classes:seq_len": tf.constant(lens)}, x, y


def _real(a, lens=LENS):
    """The real frames of (B, T, ...) as one list per sequence."""
    return [a[b, :n] for b, n in enumerate(lens)]


def _assert_real_close(a, b, lens=LENS, atol=1e-5):
    for x, y in zip(_real(a, lens), _real(b, lens)):
        np.testing.assert_allclose(x, y, atol=atol)


def test_explicit_rnn_matches_numpy():
    net = TFNetwork({"rnn": {"class": "rec", "from": "data", "unit": {
        "output": {"class": "linear", "activation": "tanh", "from": ["prev:output", "data:source"], "n_out": 6}}},
        "output": {"class": "softmax", "loss": "ce", "from": "rnn"}}, _extern())
    rec = net.layers["rnn"]
    assert rec.plan.in_loop == ["output"] and rec.output.dim == 6 and rec.output.time_dim is net.extern_data["data"].time_dim
    batch, x, _ = _batch()
    out = net.forward(batch, RunContext(False))["rnn"].tensor.numpy()
    w, b = rec.layers["output"].W.numpy(), rec.layers["output"].bias.numpy()
    for s, n in enumerate(LENS):
        h = np.zeros(6, "float32")
        for t in range(n):
            h = np.tanh(np.concatenate([h, x[s, t]]) @ w + b)
            np.testing.assert_allclose(out[s, t], h, atol=1e-5)


def test_initial_output_and_step_index():
    net = TFNetwork({"acc": {"class": "rec", "from": "data", "is_output_layer": True, "unit": {
        "i": {"class": "cast", "from": ":i", "dtype": "float32"},
        "output": {"class": "combine", "kind": "add", "from": ["prev:output", "data:source"], "initial_output": 1},
        "with_i": {"class": "combine", "kind": "add", "from": ["output", "i"], "is_output_layer": True}}}}, _extern())
    batch, x, _ = _batch()
    outs = net.forward(batch, RunContext(False))
    ref = 1 + np.cumsum(np.nan_to_num(x), axis=1)
    _assert_real_close(outs["acc"].tensor.numpy(), ref)
    _assert_real_close(outs["acc/with_i"].tensor.numpy(), ref + np.arange(5)[None, :, None])


UNIT_LSTM = {
    "emb": {"class": "linear", "activation": None, "from": "data:classes", "n_out": 5},
    "s": {"class": "rnn_cell", "unit": "LSTMBlock", "from": ["prev:emb", "data:source"], "n_out": 7},
    "s2": {"class": "rec", "unit": "nativelstm2", "from": ["s"], "n_out": 6},
    "att": {"class": "self_attention", "from": ["s2", "prev:s"], "num_heads": 2, "total_key_dim": 4, "n_out": 4,
            "attention_left_only": True},
    "prob": {"class": "softmax", "from": ["att", "s"], "target": "classes", "loss": "ce"},
    "output": {"class": "choice", "initial_output": 0, "from": "prob", "target": "classes", "beam_size": 3},
    "end": {"class": "compare", "from": "output", "value": 0},
}


@pytest.mark.parametrize("cell", ["LSTMBlock", "GRU", "BasicRNN"])
def test_step_loop_equals_whole_sequence(cell):
    """The same unit run step by step (optimize_move_layers_out False) and moved out of the loop
    (cells over whole sequences, causal self-attention): same outputs, loss and gradients."""
    unit = dict(UNIT_LSTM, s=dict(UNIT_LSTM["s"], unit=cell))
    results = []
    # the unit has 'end' and a target-fed choice: its loop runs along the classes' time axis, the layers moved out
    # of it read data:source along the data's (RETURNN): the two data keys share their time axis here
    extern = _extern()
    extern["classes"] = Data("classes", dims=extern["data"].dims[:2], sparse_dim=extern["classes"].sparse_dim)
    for move_out in (True, False):
        net = TFNetwork({"dec": {"class": "rec", "from": "data", "unit": unit, "optimize_move_layers_out": move_out,
                                 "is_output_layer": True}},
                        extern)
        rec = net.layers["dec"]
        if move_out:
            assert rec.plan.in_loop == []  # teacher forcing: nothing depends on the loop
        else:
            assert set(rec.plan.in_loop) == set(unit) - {"end"}  # 'end' is built in search only
        batch, _, y = _batch()
        with tf.GradientTape() as tape:
            outs = net.forward(batch, RunContext(False))
            loss = net.compute_losses(outs, batch)["dec/prob"].loss_sum
        grads = tape.gradient(loss, net.trainable_variables)
        assert all(g is not None for g in grads)
        results.append((outs["dec/prob"].tensor.numpy(), outs["dec"].tensor.numpy(), float(loss),
                        [np.asarray(tf.convert_to_tensor(g)) for g in grads]))
        _assert_real_close(outs["dec"].tensor.numpy(), y)  # the choice is the target
    (p1, o1, l1, g1), (p2, o2, l2, g2) = results
    _assert_real_close(p1, p2)
    assert l1 == pytest.approx(l2, rel=1e-5) and np.isfinite(l1)
    for a, b in zip(g1, g2):
        np.testing.assert_allclose(a, b, atol=1e-4)


def test_registered_target_and_loop_length_from_target():
    """A decoder without 'from' runs over the target's time axis; the target can be a layer
    registered as data (register_as_extern_data), here the labels shifted by one."""
    net = TFNetwork({
        "enc": {"class": "reduce", "mode": "mean", "axes": "T", "from": "data"},
        "shifted": {"class": "combine", "kind": "add", "from": "data:classes", "eval": None} if False else
                   {"class": "copy", "from": "data:classes", "register_as_extern_data": "labels"},
        "output": {"class": "rec", "from": [], "target": "labels", "unit": {
            "emb": {"class": "linear", "activation": None, "from": "output", "n_out": 5},
            "s": {"class": "rnn_cell", "unit": "GRU", "from": ["prev:emb", "base:enc"], "n_out": 6},
            "prob": {"class": "softmax", "from": "s", "target": "labels", "loss": "ce"},
            "output": {"class": "choice", "initial_output": 0, "from": "prob", "target": "labels", "beam_size": 2}}},
    }, _extern())
    assert [info.layer for info in net.losses] == ["output/prob"]
    assert net.required_data_keys(with_targets=True) == ["data", "classes"]
    batch, _, y = _batch()
    outs = net.forward(batch, RunContext(True), only=["output/prob"])
    assert outs["output/prob"].tensor.shape[:2] == (3, 5)
    losses = net.compute_losses(outs, batch)
    assert float(losses["output/prob"].norm) == sum(LENS)


def test_prev_of_layer_without_n_out_follows_its_source():
    """RETURNN's explicit LSTM demo: prev:c of an eval layer takes the shape of its first source."""
    net = TFNetwork({"lstm": {"class": "rec", "from": "data", "is_output_layer": True, "unit": {
        "input": {"class": "copy", "from": ["prev:output", "data:source"]},
        "input_gate": {"class": "linear", "from": "input", "activation": "sigmoid", "n_out": 3},
        "cell_in": {"class": "linear", "from": "input", "activation": "tanh", "n_out": 3},
        "c": {"class": "eval", "from": ["input_gate", "cell_in", "prev:c"], "eval": "source(0) * source(1) + source(2)"},
        "output": {"class": "eval", "from": ["input_gate", "c"], "eval": "source(0) * source(1)"}}}}, _extern())
    batch, _, _ = _batch()
    out = net.forward(batch, RunContext(False))["lstm"].tensor.numpy()
    assert out.shape == (3, 5, 3) and all(np.isfinite(r).all() for r in _real(out))


@pytest.mark.parametrize("unit, message", [
    ({"output": {"class": "nope", "from": "data:source"}}, "layer 'r/output': unknown layer class 'nope'"),
    ({"output": {"class": "copy", "from": ["prev:output", "x"]},
      "x": {"class": "linear", "from": "data:source", "n_out": 2}}, "sub-layer 'output'"),
    ({"a": {"class": "copy", "from": "prev:output"}, "output": {"class": "copy", "from": "a"}},
     "cannot tell the shape of 'prev:output'"),
])
def test_bad_units_one_line(unit, message):
    with pytest.raises(NetworkError) as e:
        TFNetwork({"r": {"class": "rec", "from": "data", "unit": unit, "is_output_layer": True}}, _extern())
    assert message in str(e.value) and "\n" not in str(e.value)


ATT_UNIT = {
    "s": {"class": "rnn_cell", "unit": "LSTMBlock", "from": ["prev:emb", "prev:att"], "n_out": 3},
    "emb": {"class": "linear", "activation": None, "from": "output", "n_out": 2},
    "s_tr": {"class": "linear", "activation": None, "with_bias": False, "from": "s", "n_out": 3},
    "energy_in": {"class": "combine", "kind": "add", "from": ["base:ctx", "s_tr", "feedback"], "n_out": 3},
    "feedback": {"class": "linear", "activation": None, "with_bias": False, "from": "prev:accum", "n_out": 3},
    "energy": {"class": "linear", "activation": "tanh", "from": "energy_in", "n_out": 1},
    "weights": {"class": "softmax_over_spatial", "from": "energy"},
    "accum": {"class": "combine", "kind": "add", "from": ["prev:accum", "weights"]},
    "att": {"class": "generic_attention", "weights": "weights", "base": "base:enc"},
    "prob": {"class": "softmax", "from": ["s", "att"], "target": "classes", "loss": "ce"},
    "output": {"class": "choice", "initial_output": 0, "from": "prob", "target": "classes", "beam_size": 2},
}


def test_attention_gradients_match_finite_differences():
    """Gradients through the step loop (attention weights, accumulated weights, the cell state)
    agree with central finite differences on tiny shapes."""
    net = TFNetwork({"enc": {"class": "linear", "activation": "tanh", "from": "data", "n_out": 3},
                     "ctx": {"class": "linear", "activation": None, "from": "enc", "n_out": 3},
                     "dec": {"class": "rec", "from": [], "target": "classes", "unit": ATT_UNIT, "is_output_layer": True}},
                    _extern())
    rec = net.layers["dec"]
    assert {"s", "att", "weights", "accum"} <= set(rec.plan.in_loop) and rec.plan.after_loop == ["prob"]
    batch, _, _ = _batch(lens=[3, 2], seed=3)
    batch["data"] = tf.where(tf.math.is_nan(batch["data"]), 0.0, batch["data"])  # finite sums for differences
    # decoder lengths differ from the encoder's; padded labels are garbage
    batch["classes"] = tf.constant([[0, 1, 2, 1], [2, 9, 9, 9]])
    batch["classes:seq_len"] = tf.constant([4, 1])

    def loss_value():
        outs = net.forward(batch, RunContext(False))
        return net.compute_losses(outs, batch)["dec/prob"].loss_sum

    checks = [(rec.layers["s"].W_re, (1, 5)), (rec.layers["energy"].W, (2, 0)), (rec.layers["feedback"].W, (0, 1)),
              (net.layers["ctx"].W, (1, 2)), (net.layers["enc"].W, (3, 0))]
    with tf.GradientTape() as tape:
        loss = loss_value()
    grads = tape.gradient(loss, [v for v, _ in checks])
    eps = 1e-2
    for (var, idx), grad in zip(checks, grads):
        old = var.numpy()
        vals = []
        for sign in (1, -1):
            new = old.copy()
            new[idx] += sign * eps
            var.assign(new)
            vals.append(float(loss_value()))
        var.assign(old)
        numeric = (vals[0] - vals[1]) / (2 * eps)
        assert float(grad.numpy()[idx]) == pytest.approx(numeric, rel=2e-2, abs=2e-3), var.name


def test_rec_subnet_config_trains_and_resumes(tmp_path):
    """RETURNN's explicit-LSTM demo unit through rnn.py; a second run continues from the checkpoint."""
    from helpers import describe, run_rnn, train_args, write_config
    cfg = write_config(tmp_path / "rec.config", '''
train = {"class": "Task12AXDataset", "num_seqs": 100}
dev = {"class": "Task12AXDataset", "num_seqs": 20, "fixed_random_seed": 42}
num_inputs = 9
num_outputs = 2
network = {
    "lstm": {"class": "rec", "from": "data", "unit": {
        "input": {"class": "copy", "from": ["prev:output", "data:source"]},
        "input_gate": {"class": "linear", "from": "input", "activation": "sigmoid", "n_out": 10},
        "forget_gate": {"class": "linear", "from": "input", "activation": "sigmoid", "n_out": 10},
        "output_gate": {"class": "linear", "from": "input", "activation": "sigmoid", "n_out": 10},
        "cell_in": {"class": "linear", "from": "input", "activation": "tanh", "n_out": 10},
        "c": {"class": "eval", "from": ["input_gate", "cell_in", "forget_gate", "prev:c"],
              "eval": "source(0) * source(1) + source(2) * source(3)"},
        "output": {"class": "eval", "from": ["output_gate", "c"], "eval": "source(0) * source(1)"}}},
    "output": {"class": "softmax", "loss": "ce", "from": "lstm"}}
batch_size = 2000
max_seqs = 20
optimizer = {"class": "adam"}
learning_rate = 0.01
num_epochs = 1
''')
    proc = run_rnn(train_args(cfg, tmp_path), timeout=300)
    assert proc.returncode == 0 and "epoch 1 score" in proc.stdout, describe(proc)
    proc = run_rnn(train_args(cfg, tmp_path, "++num_epochs", "2"), timeout=300)
    assert proc.returncode == 0 and "epoch 2 score" in proc.stdout and "epoch 1 score" not in proc.stdout, describe(proc)


def test_subnetwork_and_variable_inside_a_unit():
    """A subnetwork sub-layer (RETURNN's LM-fusion configs) is flattened inside the unit, its
    cells keep their own state; a variable sub-layer has no 'from' (no data:source needed)."""
    net = TFNetwork({"dec": {"class": "rec", "from": [], "target": "classes", "is_output_layer": True, "unit": {
        "v": {"class": "variable", "shape": [3]},
        "lm": {"class": "subnetwork", "from": ["prev:output"], "subnetwork": {
            "input": {"class": "linear", "n_out": 4, "activation": None},
            "lstm": {"class": "rnn_cell", "unit": "LSTMBlock", "n_out": 5, "from": ["input"]},
            "output": {"class": "linear", "from": ["lstm", "base:v"], "n_out": 3}}},
        "prob": {"class": "softmax", "from": ["lm"], "target": "classes", "loss": "ce"},
        "output": {"class": "choice", "initial_output": 0, "from": "prob", "target": "classes", "beam_size": 2}}}}, _extern())
    rec = net.layers["dec"]
    assert {"lm/input", "lm/lstm", "lm/output", "lm", "v"} <= set(rec.layers)
    batch, _, _ = _batch()
    outs = net.forward(batch, RunContext(False))
    assert outs["dec/prob"].tensor.shape[:2] == (3, 5) and np.isfinite(_real(outs["dec/prob"].tensor.numpy())[0]).all()
    search = TFNetwork({"dec": dict(net.net_dict["dec"])}, _extern(), search=True)
    out = search.forward({"data": batch["data"], "data:seq_len": batch["data:seq_len"]}, RunContext(False))["dec"]
    assert out.tensor.shape[0] == 3


def test_get_last_hidden_state_of_a_cell_inside_the_loop():
    """Inside a unit, get_last_hidden_state of an rnn_cell is its state after this step ([c, h])."""
    net = TFNetwork({"r": {"class": "rec", "from": "data", "is_output_layer": True, "unit": {
        "s": {"class": "rnn_cell", "unit": "LSTMBlock", "from": ["data:source", "prev:s_state"], "n_out": 3,
              "is_output_layer": True},
        "s_state": {"class": "get_last_hidden_state", "from": "s", "n_out": 6},
        "output": {"class": "copy", "from": "s_state"}}}}, _extern())
    batch, _, _ = _batch()
    out = net.forward(batch, RunContext(False))["r"].tensor.numpy()
    h = net.forward(batch, RunContext(False))["r/s"].tensor.numpy()
    _assert_real_close(out[..., 3:], h)  # the h part of [c, h] is the cell's output
    assert not np.allclose(_real(out[..., :3])[0], _real(h)[0])


def test_get_last_hidden_state_of_prev_cell():
    """RETURNN's local-attention configs read get_last_hidden_state of 'prev:s': the cell state
    entering the step (zero at step 0)."""
    net = TFNetwork({"r": {"class": "rec", "from": "data", "is_output_layer": True, "unit": {
        "prev_state": {"class": "get_last_hidden_state", "from": "prev:s", "n_out": 6},
        "s": {"class": "rnn_cell", "unit": "LSTMBlock", "from": ["data:source", "prev_state"], "n_out": 3,
              "is_output_layer": True},
        "output": {"class": "copy", "from": "prev_state"}}}}, _extern())
    batch, _, _ = _batch()
    outs = net.forward(batch, RunContext(False))
    prev_state, h = outs["r"].tensor.numpy(), outs["r/s"].tensor.numpy()
    assert (prev_state[:, 0] == 0).all()
    np.testing.assert_allclose(prev_state[0, 1:5, 3:], h[0, 0:4], atol=1e-6)  # h of the step before


def test_prev_of_a_merge_dims_of_a_head_split_attention_is_assumed_built_on_its_sources():
    """i6's segmental decoders: the LSTM reads prev:att, att = merge_dims (except_time) of a dot over the
    encoder frames of heads-split values; att needs the LSTM (query), so its template is assumed before
    it is built: the dot and merge_dims built on their sources' templates (1 head x 4 features), not the
    first source's (the values with their frame and head axes, which the LSTM refused)."""
    from returnn.tensor import Dim
    heads = Dim(1, kind=Dim.Types.Spatial, description="heads")
    net = TFNetwork({
        "enc_val": {"class": "split_dims", "axis": "F", "dims": (1, -1), "from": "data"},
        "val": {"class": "reinterpret_data", "from": "enc_val", "set_dim_tags": {"dim:1": heads}},
        "enc_ctx": {"class": "linear", "activation": None, "n_out": 3, "from": "data"},
        "output": {"class": "rec", "from": [], "target": "classes", "max_seq_len": 4, "unit": {
            "lm": {"class": "rec", "unit": "nativelstm2", "n_out": 5, "from": ["prev:att"]},
            "query": {"class": "linear", "activation": None, "n_out": 3, "from": "lm"},
            "e_in": {"class": "combine", "kind": "add", "from": ["base:enc_ctx", "query"]},
            "e0": {"class": "linear", "activation": None, "with_bias": False, "n_out": 1, "from": "e_in"},
            "e": {"class": "reinterpret_data", "from": "e0", "set_dim_tags": {"f": heads}},
            "w": {"class": "softmax_over_spatial", "from": "e"},
            "att0": {"class": "dot", "from": ["base:val", "w"], "reduce": "T", "var1": "f", "var2": None},
            "att": {"class": "merge_dims", "axes": "except_time", "from": "att0"},
            "output": {"class": "softmax", "from": ["att", "lm"], "target": "classes", "loss": "ce"}}}},
        _extern())
    lm = net.layers["output"].layers["lm"]
    assert lm.own_params["W"].shape[0] == 4  # prev:att: (batch, 1 head x 4 features)
    batch, x, _ = _batch()
    out = net.forward(batch, RunContext(True))["output"].tensor.numpy()
    assert out.shape[0] == 3 and out.shape[-1] == 3 and np.all(np.isfinite(out[0]))


def test_prev_of_a_compare_is_assumed_bool():
    """i6's segmental transducer decoders: a switch built before the compare whose prev: is its condition
    (segment_starts0 on prev:output_is_not_blank, a compare of the chosen label) assumes that compare's
    template: bool as the compare gives it, not its source's labels."""
    from returnn.tensor import Data as _Data
    extern = {"data": _Data("data", shape=(None, 2)), "classes": _Data("classes", dim=4, sparse=True)}
    net = TFNetwork({
        "enc": {"class": "reduce", "mode": "mean", "axes": "T", "from": "data"},
        "output": {"class": "rec", "from": [], "target": "classes", "max_seq_len": 5, "unit": {
            "starts": {"class": "switch", "condition": "prev:not_blank", "true_from": ":i", "false_from": "prev:starts",
                       "initial_output": 0, "is_output_layer": True},
            "emb": {"class": "linear", "from": "prev:output_", "n_out": 4, "activation": None},
            "prob": {"class": "softmax", "from": ["emb", "base:enc"], "n_out": 4},
            "output": {"class": "choice", "from": "prob", "target": "classes", "beam_size": 2, "initial_output": 0},
            "output_": {"class": "copy", "from": "output", "initial_output": 0},
            "not_blank": {"class": "compare", "from": "output_", "kind": "not_equal", "value": 0, "initial_output": True},
            "end": {"class": "compare", "from": "output", "value": 3}}},
    }, extern, search=True)
    unit = net.layers["output"].layers
    assert unit["not_blank"].output.dtype == "bool" and unit["starts"].output.dtype == "int32"
    x = np.zeros((2, 3, 2), "float32")
    starts = net.forward({"data": tf.constant(x), "data:seq_len": tf.constant([3, 3])}, RunContext(False),
                         only=["output"])
    assert "output" in starts
