"""Golden beam searches from the real RETURNN (PyPI ``returnn``, TF graph mode) for
tests/test_search_returnn_goldens.py: a tiny decoder (label embedding + encoder mean -> softmax ->
choice -> end at label 3) searched with several beam sizes, with and without the choice's
``length_normalization`` (also another exponent), with the ``decide``'s ``length_normalization``, and
with a ``custom_score_combine`` that recombines hypotheses of equal label strings (an
``explicit_search_sources`` layer), over random score tables; and a time-synchronous decoder (the
loop over its input frames, sequences of different lengths with garbage in the padded frames), with
and without ``include_eos``.

Regenerate from a directory OUTSIDE the repository (so ``import returnn`` is the PyPI package)::

    cd /tmp && /work/main/.bench-venv-returnn/bin/python /work/main/tests/returnn_goldens/search_goldens.py

It writes ``tests/data/returnn_goldens/search_beam.json``: the cases (beam size, options, the softmax
weights ``W`` (6, 4) by RETURNN's layout: 4 rows for the embedded previous label (the embedding is the
identity), 2 for the encoder mean; the encoder frames ``enc`` per sequence) and RETURNN's decided labels.
"""
from __future__ import annotations

import json
import os
import sys

import numpy as np

EOS = 3
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "returnn_goldens", "search_beam.json")


def net_dict(beam: int, length_norm: bool, exponent: float = 1.0, combine=None, decide_norm: bool = False) -> dict:
    """The searched network (the same dict for RETURNN and this engine); ``decide_norm``: the decide
    picks by score / length (its ``length_normalization``)."""
    choice = {"class": "choice", "from": "prob", "target": "classes", "beam_size": beam,
              "length_normalization": length_norm, "initial_output": 0}
    if exponent != 1.0:
        choice["length_normalization_exponent"] = exponent
    if combine is not None:
        choice.update(explicit_search_sources=["prev:hist"], custom_score_combine=combine)
    return {
        "enc": {"class": "reduce", "mode": "mean", "axes": "T", "from": "data"},
        "output": {"class": "rec", "from": [], "target": "classes", "max_seq_len": 6, "unit": {
            "emb": {"class": "linear", "from": "prev:output", "n_out": 4, "activation": None, "with_bias": False},
            "prob": {"class": "softmax", "from": ["emb", "base:enc"], "n_out": 4, "with_bias": False},
            "output": choice,
            # the label string so far as a number (base 4), label 0 skipped
            "hist": {"class": "eval", "from": ["prev:hist", "output"], "initial_output": 0,
                     "eval": "tf.where(tf.not_equal(source(1), 0), source(0) * 4 + source(1), source(0))",
                     "out_type": {"shape": (), "dtype": "int32", "sparse": False, "dim": None}},
            "end": {"class": "compare", "from": "output", "value": EOS}}},
        "decision": {"class": "decide", "from": "output", "is_output_layer": True, "length_normalization": decide_norm},
    }


def recombine(layer, scores_in, scores_base, base_beam_in, batch_dim, **_kwargs):
    """custom_score_combine: hypotheses with equal strings keep one (the first best) with the
    log-sum-exp of their scores (TF1-compatible ops only, for RETURNN's graph mode)."""
    import tensorflow as tf
    hist = tf.reshape(layer.explicit_search_sources[0].output.placeholder, (batch_dim, -1))[:, :base_beam_in]
    base = tf.squeeze(scores_base, -1)
    same = tf.equal(hist[:, :, None], hist[:, None, :])
    neg = tf.fill(tf.shape(same), float("-inf"))
    merged = tf.reduce_logsumexp(tf.where(same, tf.broadcast_to(base[:, None, :], tf.shape(same)), neg), 2)
    idx = tf.range(tf.shape(base)[1])
    better = tf.logical_and(same, tf.logical_or(
        base[:, None, :] > base[:, :, None],
        tf.logical_and(tf.equal(base[:, None, :], base[:, :, None]), idx[None, None, :] < idx[None, :, None])))
    new_base = tf.where(tf.reduce_any(better, 2), tf.fill(tf.shape(merged), float("-inf")), merged)
    return scores_in + new_base[:, :, None]


def net_dict_time_sync(beam: int, length_norm: bool, include_eos: bool) -> dict:
    """A loop over the input frames (no ``end`` layer: each sequence ends at its length)."""
    return {
        "output": {"class": "rec", "from": "data", "include_eos": include_eos, "unit": {
            "emb": {"class": "linear", "from": "prev:output", "n_out": 4, "activation": None, "with_bias": False},
            "prob": {"class": "softmax", "from": ["emb", "data:source"], "n_out": 4, "with_bias": False},
            "output": {"class": "choice", "from": "prob", "target": "classes", "beam_size": beam,
                       "length_normalization": length_norm, "initial_output": 0}}},
        "decision": {"class": "decide", "from": "output", "is_output_layer": True},
    }


def make_time_sync_cases(n_tables: int = 6, seed: int = 3) -> list:
    rng = np.random.RandomState(seed)
    cases = []
    for _ in range(n_tables):
        weights = rng.normal(0, 2, size=(6, 4)).astype("float32")
        x = rng.normal(0, 1, size=(3, 5, 2)).astype("float32")
        x[1, 3:] = 50.0 * rng.normal(0, 1, size=(2, 2))  # garbage in the padded frames
        x[2, 2:] = -50.0 * rng.normal(0, 1, size=(3, 2))
        for beam in (1, 3):
            for length_norm in (True, False):
                for include_eos in (False, True):
                    cases.append({"kind": "time_sync", "W": weights.tolist(), "x": x.tolist(), "lens": [5, 3, 2],
                                  "beam": beam, "length_norm": length_norm, "include_eos": include_eos})
    return cases


def case_net_dict(case: dict) -> dict:
    """The network of a case (either kind)."""
    if case.get("kind") == "time_sync":
        return net_dict_time_sync(case["beam"], case["length_norm"], case["include_eos"])
    return net_dict(case["beam"], case["length_norm"], case.get("exponent", 1.0),
                    recombine if case.get("combine") else None, bool(case.get("decide_norm")))


def case_inputs(case: dict):
    """The input frames (B, T, 2) and lengths of a case."""
    if case.get("kind") == "time_sync":
        return np.array(case["x"], "float32"), list(case["lens"])
    enc = np.array(case["enc"], "float32")
    return np.repeat(enc[:, None, :], 3, axis=1), [3] * len(enc)


def make_cases(n_tables: int = 6, seed: int = 7) -> list:
    rng = np.random.RandomState(seed)
    cases = []
    for _ in range(n_tables):
        probs = rng.dirichlet(np.ones(4) * 0.7, size=4)
        weights = np.concatenate([np.log(probs + 1e-4), rng.normal(0, 2, size=(2, 4))], 0).astype("float32")
        enc = rng.normal(0, 1, size=(4, 2)).astype("float32")
        common = {"W": weights.tolist(), "enc": enc.tolist()}
        for beam in (2, 3):
            for length_norm in (True, False):
                cases.append(dict(common, beam=beam, length_norm=length_norm))
        cases.append(dict(common, beam=3, length_norm=True, exponent=0.5))
        cases.append(dict(common, beam=3, length_norm=True, combine=True))
        cases.append(dict(common, beam=3, length_norm=False, combine=True))
        cases.append(dict(common, beam=3, length_norm=False, decide_norm=True))
        cases.append(dict(common, beam=3, length_norm=True, decide_norm=True))
    return cases


def _returnn_search(case: dict) -> list:
    import tensorflow as tf
    from returnn.config import Config
    from returnn.tf.network import TFNetwork
    x, lens = case_inputs(case)
    config = Config({"extern_data": {"data": {"dim": 2}, "classes": {"dim": 4, "sparse": True}}})
    with tf.compat.v1.Graph().as_default():
        net = TFNetwork(config=config, train_flag=False, eval_flag=False, search_flag=True)
        net.construct_from_dict(case_net_dict(case))
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            for var in tf.compat.v1.global_variables():
                if var.name.endswith("emb/W:0"):
                    var.load(np.eye(4, dtype="float32"), sess)
                elif var.name.endswith("prob/W:0"):
                    var.load(np.array(case["W"], "float32"), sess)
            data = net.extern_data.data["data"]
            out = net.layers["decision"].output
            values, out_lens = sess.run([out.get_placeholder_as_batch_major(), out.get_sequence_lengths()],
                                        feed_dict={data.placeholder: x, data.size_placeholder[0]: lens})
    return [values[b, :out_lens[b]].tolist() for b in range(len(lens))]


def main() -> None:
    import returnn
    import tensorflow as tf
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if os.path.abspath(returnn.__file__).startswith(os.path.join(repo, "returnn") + os.sep):
        sys.exit("run from outside the repository: 'import returnn' must be the PyPI package")
    tf.compat.v1.disable_eager_execution()
    cases = make_cases() + make_time_sync_cases()
    for case in cases:
        case["returnn"] = _returnn_search(case)
    with open(OUT, "w") as f:
        json.dump({"returnn_version": returnn.__version__, "tf_version": tf.__version__, "cases": cases}, f)
        f.write("\n")


if __name__ == "__main__":
    main()
