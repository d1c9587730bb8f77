"""RETURNN's weight noise (layer options and config keys ``param_variational_noise``,
``param_dropout``, ``param_dropout_min_ndim``; returnn/tf/layers/param_noise.py), against numpy:
in training a layer computes with its noisy parameters (one draw per step, shared by all frames and
sequences, also over the frames of a rec loop), evaluation reads the plain ones, and the gradient
flows through the noisy value."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from returnn.config import Config, set_global_config
from returnn.errors import NetworkError
from returnn.extern_data import data_from_opts
from returnn.tf.layers.base import RunContext
from returnn.tf.network import TFNetwork

DIM, N_OUT = 40, 50


def _extern(dim=DIM):
    return {"data": data_from_opts("data", {"dim": dim}), "classes": data_from_opts("classes", {"dim": 3, "sparse": True})}


def _onehot_batch(dim=DIM, n_seqs=2):
    """Frames e_0 .. e_{dim-1}, then a zero frame, in every sequence: a linear layer's output rows
    are W_eff[i] + b_eff, the last one b_eff."""
    x = np.concatenate([np.eye(dim), np.zeros((1, dim))]).astype(np.float32)
    x = np.stack([x] * n_seqs)
    return {"data": tf.constant(x), "data:seq_len": tf.constant([dim + 1] * n_seqs)}, x


def _effective(y):
    """(W_eff, b_eff) per sequence of a linear layer's output on :func:`_onehot_batch`."""
    return [(seq[:-1] - seq[-1], seq[-1]) for seq in y]


def _linear_net(extra=None, **opts):
    return TFNetwork(dict({"output": dict({"class": "linear", "n_out": N_OUT, "from": "data", "is_output_layer": True},
                                          **opts)}, **(extra or {})), _extern())


@pytest.fixture
def config():
    """The global config for one test (restored after)."""
    def use(**keys):
        set_global_config(Config(keys))
    yield use
    set_global_config(Config({}))


def _seed(step):
    return tf.constant([11, step], tf.int64)


def _run(net, batch, train, step=0, name="output"):
    """The layer's output of a compiled call (as the engine's steps: weight noise needs tf.function)."""
    return tf.function(lambda: net.forward(batch, RunContext(train, _seed(step)))[name].tensor)().numpy()


def test_eval_reads_plain_parameters():
    net = _linear_net(param_dropout=0.3, param_variational_noise=0.2)
    layer = net.layers["output"]
    batch, x = _onehot_batch()
    y = net.forward(batch, RunContext(False))["output"].tensor.numpy()
    np.testing.assert_allclose(y, x @ layer.W.numpy() + layer.bias.numpy(), atol=1e-6)
    # the train step of a net without the options: the plain parameters too
    net0 = _linear_net()
    y0 = net0.forward(batch, RunContext(True, _seed(3)))["output"].tensor.numpy()
    np.testing.assert_allclose(y0, x @ net0.layers["output"].W.numpy() + net0.layers["output"].bias.numpy(), atol=1e-6)


def test_param_dropout_one_full_shape_mask_per_step():
    p = 0.3
    net = _linear_net(param_dropout=p)
    layer = net.layers["output"]
    layer.bias.assign(np.linspace(1.0, 2.0, N_OUT).astype(np.float32))
    w, b = layer.W.numpy(), layer.bias.numpy()
    batch, _ = _onehot_batch()
    masks = []
    for step in (1, 2):
        y = _run(net, batch, True, step)
        (w_eff, b_eff), (w_eff2, b_eff2) = _effective(y)
        np.testing.assert_allclose(w_eff2, w_eff, atol=1e-6)  # one mask for all sequences (and frames)
        np.testing.assert_allclose(b_eff2, b_eff, atol=1e-6)
        kept = np.abs(w_eff) > 1e-7
        np.testing.assert_allclose(w_eff[kept], w[kept] / (1 - p), rtol=1e-5, atol=1e-6)
        assert abs((~kept).mean() - p) < 0.05  # 2000 entries
        b_kept = np.abs(b_eff) > 1e-7
        np.testing.assert_allclose(b_eff[b_kept], b[b_kept] / (1 - p), rtol=1e-5, atol=1e-6)
        masks.append(kept)
    assert (masks[0] != masks[1]).mean() > 0.2  # a new mask next step


def test_param_dropout_reaches_the_bias_unless_min_ndim_2():
    p = 0.5
    for min_ndim, bias_dropped in ((0, True), (2, False)):
        net = _linear_net(param_dropout=p, param_dropout_min_ndim=min_ndim)
        layer = net.layers["output"]
        layer.bias.assign(np.linspace(1.0, 2.0, N_OUT).astype(np.float32))
        batch, _ = _onehot_batch()
        y = _run(net, batch, True, 5)
        w_eff, b_eff = _effective(y)[0]
        assert (np.abs(w_eff) < 1e-7).mean() > 0.3
        if bias_dropped:
            zero = np.abs(b_eff) < 1e-7
            assert 0 < zero.sum() < N_OUT
            np.testing.assert_allclose(b_eff[~zero], layer.bias.numpy()[~zero] / (1 - p), rtol=1e-5, atol=1e-6)
        else:
            np.testing.assert_allclose(b_eff, layer.bias.numpy(), rtol=1e-6)


def test_variational_noise_one_draw_per_step():
    s = 0.2
    net = _linear_net(param_variational_noise=s)
    w = net.layers["output"].W.numpy()
    batch, _ = _onehot_batch()
    noises = []
    for step in (1, 2):
        y = _run(net, batch, True, step)
        (w_eff, _), (w_eff2, _) = _effective(y)
        np.testing.assert_allclose(w_eff2, w_eff, atol=1e-6)
        noise = w_eff - w
        assert abs(noise.std() - s) < 0.02 and abs(noise.mean()) < 0.02
        noises.append(noise)
    assert np.corrcoef(noises[0].ravel(), noises[1].ravel())[0, 1] < 0.1


def test_config_keys_apply_to_layers_without_the_option(config):
    config(param_dropout=0.4, param_dropout_min_ndim=2)
    net = _linear_net(extra={"plain": {"class": "linear", "n_out": N_OUT, "from": "data", "is_output_layer": True,
                                       "param_dropout": 0.0}})
    batch, _ = _onehot_batch()
    out = {k: _run(net, batch, True, 1, k) for k in ("output", "plain")}
    w_eff, b_eff = _effective(out["output"])[0]
    assert abs((np.abs(w_eff) < 1e-7).mean() - 0.4) < 0.05
    np.testing.assert_allclose(b_eff, net.layers["output"].bias.numpy(), atol=1e-6)  # min_ndim 2
    w_plain, _ = _effective(out["plain"])[0]
    np.testing.assert_allclose(w_plain, net.layers["plain"].W.numpy(), atol=1e-6)  # its own option 0 wins


def test_gradient_flows_through_the_dropped_parameters():
    p = 0.3
    net = _linear_net(param_dropout=p)
    layer = net.layers["output"]
    rng = np.random.RandomState(0)
    x = rng.randn(3, 7, DIM).astype(np.float32)
    g = rng.randn(3, 7, N_OUT).astype(np.float32)
    batch = {"data": tf.constant(x), "data:seq_len": tf.constant([7, 7, 7])}

    @tf.function
    def train_grad():
        with tf.GradientTape() as tape:
            y = net.forward(batch, RunContext(True, _seed(4)))["output"].tensor
            loss = tf.reduce_sum(tf.square(y) * g) / 2
        return y, tape.gradient(loss, layer.W)
    y, grad_w = (t.numpy() for t in train_grad())
    w_eff, _ = _effective(_run(net, _onehot_batch()[0], True, 4))[0]
    scale = np.where(np.abs(w_eff) > 1e-7, 1 / (1 - p), 0.0)
    clean = x.reshape(-1, DIM).T @ (y * g).reshape(-1, N_OUT)  # the gradient wrt the dropped W
    np.testing.assert_allclose(grad_w, scale * clean, rtol=1e-4, atol=1e-4)


def _rec_net(**opts):
    return TFNetwork({"rnn": {"class": "rec", "from": "data", "is_output_layer": True, "unit": {
        "output": dict({"class": "linear", "from": ["prev:output", "data:source"], "n_out": 2}, **opts)}}},
        _extern(3))


def _rec_effective(x, y):
    """(W_eff (2 + 3, 2), b_eff, max residual) of y_t = [y_{t-1}, x_t] @ W_eff + b_eff over all frames."""
    prev = np.concatenate([np.zeros_like(y[:, :1]), y[:, :-1]], axis=1)
    a = np.concatenate([prev, x, np.ones_like(x[..., :1])], axis=-1).reshape(-1, 6)
    sol, *_ = np.linalg.lstsq(a.astype(np.float64), y.reshape(-1, 2).astype(np.float64), rcond=None)
    return sol[:5], sol[5], np.abs(a @ sol - y.reshape(-1, 2)).max()


@pytest.mark.parametrize("opts", [{"param_dropout": 0.5}, {"param_variational_noise": 0.3}])
def test_rec_loop_shares_one_draw_over_its_frames(opts):
    net = _rec_net(**opts)
    sub = net.layers["rnn"].layers["output"]
    assert net.layers["rnn"].plan.in_loop == ["output"]
    rng = np.random.RandomState(1)
    x = (rng.randn(4, 9, 3) * 0.5).astype(np.float32)
    batch = {"data": tf.constant(x), "data:seq_len": tf.constant([9] * 4)}
    run = tf.function(lambda seed: net.forward(batch, RunContext(True, seed))["rnn"].tensor)
    w = sub.W.numpy()  # rows: prev:output, then data:source
    draws = []
    for step in (1, 2):
        y = run(_seed(step)).numpy()
        w_eff, b_eff, residual = _rec_effective(x, y)
        assert residual < 1e-4  # one parameter draw for all frames and sequences
        if "param_dropout" in opts:
            kept = np.abs(w_eff) > 1e-5
            np.testing.assert_allclose(w_eff[kept], w[kept] * 2, rtol=1e-3)
        else:
            assert 0.05 < np.abs(w_eff - w).max() < 1.5
        draws.append(w_eff)
    assert np.abs(draws[0] - draws[1]).max() > 1e-3
    graph = run.get_concrete_function(_seed(1)).graph.as_graph_def()  # the draws are made before the loop
    assert [n.op for n in graph.node if n.op.startswith("StatelessRandom")]
    assert not [n.op for f in graph.library.function for n in f.node_def if n.op.startswith("StatelessRandom")]
    y_eval = net.forward(batch, RunContext(False))["rnn"].tensor.numpy()
    w_eval, b_eval, residual = _rec_effective(x, y_eval)
    assert residual < 1e-4
    np.testing.assert_allclose(w_eval, w, atol=1e-4)


def test_rec_loop_gradient_is_mask_times_clean_gradient():
    p = 0.5
    net = _rec_net(param_dropout=p, param_dropout_min_ndim=2)
    sub = net.layers["rnn"].layers["output"]
    rng = np.random.RandomState(2)
    x = (rng.randn(2, 6, 3) * 0.5).astype(np.float32)
    g = rng.randn(2, 6, 2).astype(np.float32)
    batch = {"data": tf.constant(x), "data:seq_len": tf.constant([6, 6])}

    @tf.function
    def grad(train):
        with tf.GradientTape() as tape:
            y = net.forward(batch, RunContext(train, _seed(8)))["rnn"].tensor
            loss = tf.reduce_sum(y * g)
        return y, tape.gradient(loss, sub.W)
    y, grad_w = (t.numpy() for t in grad(True))
    w_eff, b_eff, residual = _rec_effective(x, y)
    assert residual < 1e-4
    np.testing.assert_allclose(b_eff, sub.bias.numpy(), atol=1e-4)  # min_ndim 2
    w = sub.W.numpy()
    sub.W.assign(w_eff.astype(np.float32))  # the clean path at the dropped weights
    try:
        _, clean = (t.numpy() for t in grad(False))
    finally:
        sub.W.assign(w)
    scale = np.where(np.abs(w_eff) > 1e-5, 1 / (1 - p), 0.0)
    np.testing.assert_allclose(grad_w, scale * clean, rtol=1e-3, atol=1e-5)


def test_lstm_unit_noise_in_training_only():
    net = TFNetwork({"lstm": {"class": "rec", "unit": "nativelstm2", "from": "data", "n_out": 5, "is_output_layer": True,
                              "param_variational_noise": 0.5}}, _extern(3))
    rng = np.random.RandomState(3)
    batch = {"data": tf.constant(rng.randn(2, 5, 3).astype(np.float32)), "data:seq_len": tf.constant([5, 3])}
    run = tf.function(lambda train, seed: net.forward(batch, RunContext(train, seed))["lstm"].tensor)
    plain = TFNetwork({"lstm": {"class": "rec", "unit": "nativelstm2", "from": "data", "n_out": 5,
                                "is_output_layer": True}}, _extern(3))
    for a, b in zip(plain.layers["lstm"].variables, net.layers["lstm"].variables):
        a.assign(b)
    ref = plain.forward(batch, RunContext(False))["lstm"].tensor.numpy()
    np.testing.assert_allclose(run(False, _seed(1)).numpy()[:, :3], ref[:, :3], atol=1e-5)
    y1, y1b, y2 = (run(True, _seed(s)).numpy() for s in (1, 1, 2))
    np.testing.assert_allclose(y1, y1b)  # the step's seed decides the draw
    assert np.abs(y1 - ref)[:, :3].max() > 1e-2 and np.abs(y1 - y2)[:, :3].max() > 1e-2


def test_reuse_params_draws_for_the_reusing_layer_only():
    net = TFNetwork({"a": {"class": "linear", "n_out": N_OUT, "from": "data", "is_output_layer": True},
                     "b": {"class": "linear", "n_out": N_OUT, "from": "data", "is_output_layer": True,
                           "reuse_params": "a", "param_dropout": 0.5}}, _extern())
    batch, _ = _onehot_batch()
    out = {k: _run(net, batch, True, 1, k) for k in ("a", "b")}
    w = net.layers["a"].W.numpy()
    np.testing.assert_allclose(_effective(out["a"])[0][0], w, atol=1e-6)
    w_b = _effective(out["b"])[0][0]
    kept = np.abs(w_b) > 1e-7
    assert 0.4 < (~kept).mean() < 0.6
    np.testing.assert_allclose(w_b[kept], 2 * w[kept], rtol=1e-5, atol=1e-6)


def test_batch_norm_with_weight_noise_refused_in_training_as_returnn_fails(config):
    opts = {"h": {"class": "linear", "n_out": 4, "from": "data", "batch_norm": True, "param_variational_noise": 0.1,
                  "is_output_layer": True}}
    with pytest.raises(NetworkError, match="layer 'h'.*batch norm with param_variational_noise"):
        TFNetwork(opts, _extern())
    TFNetwork(opts, _extern(), train_flag=False)  # RETURNN builds it without the train flag
    config(param_dropout=0.1, param_dropout_min_ndim=4)  # batch-norm parameters (1, 1, F) (version 0): untouched
    TFNetwork({"h": {"class": "batch_norm", "from": "data", "is_output_layer": True}}, _extern())


def test_bad_values_are_refused():
    for opts, match in (({"param_dropout": 1.0}, "param_dropout"), ({"param_variational_noise": -1}, "param_var"),
                        ({"param_dropout": 0.1, "param_dropout_min_ndim": "2"}, "param_dropout_min_ndim")):
        with pytest.raises(NetworkError, match=match):
            _linear_net(**opts)


def test_eager_training_calls_are_refused():
    net = _linear_net(param_dropout=0.1)
    with pytest.raises(NetworkError, match="compiled"):
        net.forward(_onehot_batch()[0], RunContext(True, _seed(1)))


def test_checkpoints_hold_returnn_generator_state_and_read_returnn_ones(tmp_path):
    """RETURNN's training graph with variational noise holds its global random generator's state
    (int64 (3,)), which its checkpoints store: written here for RETURNN, not taken for a parameter."""
    from returnn.tf.checkpoint import CheckpointManager
    from returnn.tf.checkpoint_fit import named_misfit
    from returnn.tf.layers.param_noise import RETURNN_GENERATOR_STATE
    from returnn.tf.returnn_params import network_params
    for opts, holds in (({"param_variational_noise": 0.1}, True), ({"param_dropout": 0.1}, False), ({}, False)):
        net = _linear_net(**opts)
        values = CheckpointManager(str(tmp_path / "model"), network=net).values(1)
        assert (RETURNN_GENERATOR_STATE in values) == holds
        shapes = {name: np.shape(v) for name, v in values.items() if "/" in name and not name.startswith("_")}
        assert named_misfit(dict(shapes, **{RETURNN_GENERATOR_STATE: (3,)}), network_params(net)) is None
