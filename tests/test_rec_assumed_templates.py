"""The templates a rec unit assumes for ``prev:x`` before ``x`` is built (returnn/tf/layers/rec_net/assumed.py),
where they decide whether a unit builds at all: a hard-attention decoder of returnn-experiments'
2021-latent-monotonic-attention configs chooses a position ``t`` over the encoder frames made the feature
axis by ``reinterpret_data`` (``set_axes``), and reads ``prev:t`` before ``t`` is built."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from returnn.extern_data import data_from_opts
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork
from returnn.tf.returnn_params import returnn_param_values

X = np.random.RandomState(5).randn(3, 6, 2).astype(np.float32)
X_LENS = np.array([6, 3, 4], np.int32)
STEPS = 4


def _net() -> TFNetwork:
    unit = {
        "t_start": {"class": "eval", "from": ["prev:t", "base:last"], "eval": "tf.minimum(source(0) + 1, source(1))"},
        "s": {"class": "linear", "from": "prev:att", "n_out": 2, "activation": None},
        "energy_in": {"class": "combine", "kind": "add", "from": ["base:data", "s"]},
        "energy": {"class": "linear", "from": "energy_in", "n_out": 1, "activation": None, "with_bias": False},
        "energy1": {"class": "squeeze", "axis": "f", "from": "energy"},
        "t_weights": {"class": "softmax_over_spatial", "from": "energy1", "start": "t_start"},
        # the choice works on the feature axis: the encoder frames become it
        "t_weights1": {"class": "reinterpret_data", "from": "t_weights", "set_axes": {"f": "T"}},
        "t": {"class": "choice", "from": "t_weights1", "beam_size": 1, "initial_output": -1,
              "length_normalization": False},
        "att": {"class": "generic_attention", "weights": "t_weights", "base": "base:data"},
        "end": {"class": "compare", "from": ["t", "base:last"], "kind": "greater_equal"},
        "output": {"class": "copy", "from": "t"}}
    net_dict = {"last": {"class": "eval", "from": "len", "eval": "source(0) - 1"},
                "len": {"class": "length", "from": "data"},
                "output": {"class": "rec", "from": [], "max_seq_len": STEPS, "unit": unit}}
    extern = {"data": data_from_opts("data", {"dim": 2})}
    return TFNetwork(net_dict, extern, search=True, train_flag=False)


def test_prev_of_a_choice_over_reinterpreted_frames_is_one_position_per_sequence():
    net = _net()
    rec = net.layers["output"]
    t = rec.layers["t"].output
    # one label per sequence, over the encoder's frames (RETURNN: the choice's sparse_dim is the input's feature dim)
    assert t.batch_ndim == 1 and t.sparse and t.sparse_dim == net.extern_data["data"].dims[1]
    assert rec.layers["att"].output.dims[-1].dimension == 2  # (B, 2): the attended encoder frames' features
    out = net.forward({"data": tf.constant(X), "data:seq_len": tf.constant(X_LENS)}, RunContext(False),
                      only=["output"])["output"]
    got, got_lens = out.tensor.numpy(), out.seq_len.numpy()
    if got.shape[0] != len(X):  # time-major
        got = got.T
    params = returnn_param_values(net)
    w_s, b_s, w_e = params["output/rec/s/W"], params["output/rec/s/b"], params["output/rec/energy/W"]
    for b, n in enumerate(X_LENS):  # numpy: greedy over the frames from the last chosen position on
        prev_t, att, ref = -1, np.zeros(2, np.float32), []
        for _ in range(STEPS):
            start = min(prev_t + 1, n - 1)
            e = ((X[b, :n] + att @ w_s + b_s) @ w_e)[:, 0]
            e = np.where(np.arange(n) >= start, e, -np.inf)
            w = np.exp(e - e.max())
            w /= w.sum()
            prev_t = int(np.argmax(w))
            att = w @ X[b, :n]
            if prev_t >= n - 1:  # 'end': that frame is not part of the output (RETURNN)
                break
            ref.append(prev_t)
        assert list(got[b, :got_lens[b]]) == ref, b
