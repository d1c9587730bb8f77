"""Choice options of beam search (rec_net/score_combine.py, choice.py): RETURNN's custom_score_combine
with explicit_search_sources recombining hypotheses of equal label strings, checked against a numpy
beam search over fixed score tables; a choice without target in search."""
import shutil

import numpy as np
import pytest
import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork

V, K = 4, 3  # labels (0: blank, no part of the string), beam


def recombine(mode, explicit_key=None):
    """A transducer config's recombination: hypotheses with equal strings (the explicit search source,
    their previous step's) keep one, the first best, scored by the max or the log-sum-exp of the group."""
    calls = []

    def fn(layer, scores_in, scores_base, base_beam_in, batch_dim, t, end_flags, scores_beam_in, **kwargs):
        assert not kwargs
        src = layer.explicit_search_sources[explicit_key] if explicit_key else layer.explicit_search_sources[0]
        hist = tf.reshape(src.output.placeholder, (batch_dim, -1))[:, :base_beam_in]  # (B, beam_in)
        base = tf.squeeze(scores_base, -1)
        same = tf.equal(hist[:, :, None], hist[:, None, :])
        group = tf.where(same, tf.broadcast_to(base[:, None, :], tf.shape(same)), float("-inf"))
        merged = tf.reduce_logsumexp(group, 2) if mode == "lse" else tf.reduce_max(group, 2)
        idx = tf.range(tf.shape(base)[1])
        better = same & ((base[:, None, :] > base[:, :, None]) |
                         ((base[:, None, :] == base[:, :, None]) & (idx[None, None, :] < idx[None, :, None])))
        new_base = tf.where(tf.reduce_any(better, 2), float("-inf"), merged)
        calls.append((layer.output.dim, end_flags.dtype, scores_beam_in))
        return scores_in + new_base[:, :, None]

    fn.calls = calls
    return fn


def _net(combine, explicit, target=None, strings=False):
    extern = {"data": Data("data", shape=(None, V)), "classes": Data("classes", dim=V, sparse=True)}
    # the label string so far (blanks skipped): a number (base V), or a string as the transducer configs' out_str
    hist = {"class": "eval", "from": ["prev:hist", "output"], "initial_output": 0,
            "eval": "tf.where(tf.not_equal(source(1), 0), source(0) * %i + source(1), source(0))" % V,
            "out_type": {"shape": (), "dtype": "int32"}}
    if strings:  # initial_output None: RETURNN's zeros, the empty string
        hist = {"class": "eval", "from": ["prev:hist", "output"], "initial_output": None,
                "eval": "source(0) + tf.where(tf.not_equal(source(1), 0), tf.strings.as_string(source(1)), '')",
                "out_type": {"shape": (), "dtype": "string"}}
    return TFNetwork({"output": {"class": "rec", "from": "data", "unit": {
        "output": {"class": "choice", "from": "data:source", "input_type": "log_prob", "target": target,
                   "beam_size": K, "length_normalization": False, "explicit_search_sources": explicit,
                   "custom_score_combine": combine},
        "hist": hist,
    }}}, extern, search=True)


def _run(net, logp):
    out = net.forward({"data": tf.constant(logp), "data:seq_len": tf.constant([logp.shape[1]] * len(logp))},
                      RunContext(False), only=["output"])["output"]
    return out.tensor.numpy().tolist()


def numpy_search(logp, mode=None):
    """RETURNN's beam search with the recombination above: one hypothesis at first; per step the
    groups of equal strings recombined (mode None: not), then the K best of (hypothesis, label)
    (ties: the lower flat index first, as top_k); the best at the end (no length normalization)."""
    hyps = [((), 0, 0.0)]  # labels, string as a number, score
    for frame in logp:
        base = np.array([s for _, _, s in hyps])
        if mode:
            for i, (_, h, _) in enumerate(hyps):
                group = [j for j, (_, g, _) in enumerate(hyps) if g == h]
                best = min(group, key=lambda j: (-base[j], j))
                if i != best:
                    continue
                scores = np.array([hyps[j][2] for j in group])
                base[i] = np.logaddexp.reduce(scores) if mode == "lse" else scores.max()
                for j in group:
                    if j != best:
                        base[j] = -np.inf
        cand = (base[:, None] + frame[None, :]).reshape(-1)
        order = sorted(range(len(cand)), key=lambda c: (-cand[c], c))[:K]
        hyps = [(hyps[c // V][0] + (c % V,), hyps[c // V][1] * V + c % V if c % V else hyps[c // V][1], cand[c])
                for c in order]
    return list(max(enumerate(hyps), key=lambda ih: (ih[1][2], -ih[0]))[1][0])


def _tables(seed, n=3, T=5):
    rng = np.random.RandomState(seed)
    x = rng.uniform(0, 3, size=(n, T, V)).astype("float32")
    x[:, :, 0] += 1.0  # blank likely: many alignments of one string
    return (x - np.log(np.exp(x).sum(-1, keepdims=True))).astype("float32")


@pytest.mark.parametrize("mode,strings", [("lse", False), ("max", False), ("lse", True)])
def test_recombination_matches_numpy_beam_search(mode, strings):
    logp = _tables(0)
    fn = recombine(mode)
    got = _run(_net(fn, ["prev:hist"], strings=strings), logp)
    want = [numpy_search(seq, mode) for seq in logp]
    assert got == want
    assert fn.calls and fn.calls[0][0] == V and fn.calls[0][1] == tf.bool
    # the recombination matters for these tables: with the log-sum-exp another string wins than without or with max
    strings = lambda hyps: [[lab for lab in h if lab] for h in hyps]  # noqa: E731
    other = [numpy_search(seq, "max" if mode == "lse" else "lse") for seq in logp]
    assert strings(other) != strings(want)
    if mode == "lse":
        assert strings([numpy_search(seq) for seq in logp]) != strings(want)


def test_without_recombination_is_plain_search_and_dict_sources():
    logp = _tables(5)

    def plain(layer, scores_in, scores_base, **kwargs):
        assert set(layer.explicit_search_sources) == {"h"}
        return scores_in + scores_base

    assert _run(_net(plain, {"h": "prev:hist"}), logp) == [numpy_search(seq) for seq in logp]
    assert _run(_net(recombine("lse", "h"), {"h": "prev:hist"}), logp) == [numpy_search(seq, "lse") for seq in logp]


def test_choice_without_target_in_search_takes_the_labels_of_its_source():
    net = _net(None, None)
    tmpl = net.layers["output"].layers["output"].output
    assert tmpl.sparse and tmpl.dim == V
    logp = _tables(1)
    assert _run(net, logp) == [numpy_search(seq) for seq in logp]


def test_choice_without_target_outside_search_is_refused():
    extern = {"data": Data("data", shape=(None, V)), "classes": Data("classes", dim=V, sparse=True)}
    with pytest.raises(NetworkError, match="without 'target' needs search"):
        TFNetwork({"output": {"class": "rec", "from": "data", "unit": {
            "output": {"class": "choice", "from": "data:source", "input_type": "log_prob", "target": None,
                       "beam_size": K}}}}, extern)


def test_custom_score_combine_must_return_a_tensor():
    with pytest.raises(NetworkError, match="custom_score_combine must return a tensor"):
        _run(_net(lambda **kw: 0.0, ["prev:hist"]), _tables(1))


RECOMBINE_OP = r"""
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>
using namespace tensorflow;

REGISTER_OP("RecombineLse").Input("hyps: string").Input("scores: float32").Output("out: float32")
.SetShapeFn([](::tensorflow::shape_inference::InferenceContext* c) { c->set_output(0, c->input(1)); return Status::OK(); });

// per row: hypotheses with equal strings keep one (the first best) with the log-sum-exp of their scores
class RecombineLseOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    auto hyps = ctx->input(0).tensor<string, 2>();
    auto scores = ctx->input(1).tensor<float, 2>();
    Tensor* out_t;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, ctx->input(1).shape(), &out_t));
    auto out = out_t->tensor<float, 2>();
    const int n = ctx->input(1).dim_size(0), k = ctx->input(1).dim_size(1);
    for (int b = 0; b < n; ++b) {
      std::map<std::string, std::vector<int> > groups;
      for (int i = 0; i < k; ++i) groups[hyps(b, i)].push_back(i);
      for (const auto& g : groups) {
        int best = g.second[0];
        for (int i : g.second) if (scores(b, i) > scores(b, best)) best = i;
        float sum = 0.f;
        for (int i : g.second) sum += std::exp(scores(b, i) - scores(b, best));
        for (int i : g.second) out(b, i) = i == best ? scores(b, best) + std::log(sum) : -std::numeric_limits<float>::infinity();
      }
    }
  }
};
REGISTER_KERNEL_BUILDER(Name("RecombineLse").Device(DEVICE_CPU), RecombineLseOp);
"""


@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None, reason="no C++ compiler (g++/c++)")
def test_recombination_by_a_compiled_op_of_the_config(tmp_path, monkeypatch):
    """As the 2020 transducer configs decode: the recombination is a C++ op the config compiles with
    OpCodeCompiler, over the hypotheses' label strings (a string explicit search source)."""
    monkeypatch.setenv("RETURNN_CACHE_DIR", str(tmp_path))
    from returnn.tf.util.basic import OpCodeCompiler  # as configs import it (TFUtil)
    op = OpCodeCompiler(base_name="RecombineLse", code_version=1, code=RECOMBINE_OP,
                        use_cuda_if_available=False).load_tf_module().recombine_lse

    def fn(layer, scores_in, scores_base, base_beam_in, batch_dim, **_):
        hyps = tf.reshape(layer.explicit_search_sources[0].output.placeholder, (batch_dim, -1))[:, :base_beam_in]
        return scores_in + op(hyps, tf.squeeze(scores_base, -1))[:, :, None]

    logp = _tables(0)
    assert _run(_net(fn, ["prev:hist"], strings=True), logp) == [numpy_search(seq, "lse") for seq in logp]
