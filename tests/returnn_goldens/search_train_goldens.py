"""Golden searches in training from the real RETURNN (PyPI ``returnn``, TF graph mode) for
tests/test_search_train_goldens.py: a training network with ``search_train_network_layers``
(RETURNN's ``construct_extra_net(..., dep_layers_in_extra=True)``, as its engine builds it), whose
decoder (label embedding, an LSTM over them so that no two label orders tie, + encoder mean ->
softmax -> choice -> end at label 0) is searched with
beam 3: plain, with ``cheating`` True and ``"exclusive"``, with ``length_normalization``, and with a
second choice fed its target (``search: False``) after a searched position choice. Recorded: all
hypotheses of the extra net's rec layer (labels, lengths), their beam scores, the decided labels
and the ``search_score`` loss of the decision.

Regenerate from a directory OUTSIDE the repository (so ``import returnn`` is the PyPI package)::

    cd /tmp && /work/main/.bench-venv-returnn/bin/python /work/main/tests/returnn_goldens/search_train_goldens.py

It writes ``tests/data/returnn_goldens/search_train.json``: per case the options, the parameters by
RETURNN's names, the inputs and RETURNN's values.
"""
from __future__ import annotations

import json
import os
import sys

import numpy as np

V, EMB, BEAM, MAX_LEN = 5, 3, 3, 6
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "returnn_goldens", "search_train.json")
X = np.random.RandomState(5).randn(4, 3, 2).astype("float32")
X_LENS = [3, 2, 3, 1]
Y = [[1, 2, 0, 0, 0], [3, 0, 0, 0, 0], [2, 4, 2, 1, 0], [4, 0, 0, 0, 0]]
Y_LENS = [3, 2, 5, 2]


def net_dict(case: str) -> dict:
    """The training network (the same dict for RETURNN and this engine)."""
    choice = {"class": "choice", "from": "prob", "target": "classes", "beam_size": BEAM, "initial_output": 0,
              "length_normalization": case == "length_norm"}
    if case.startswith("cheating"):
        choice["cheating"] = "exclusive" if case == "cheating_exclusive" else True
    unit = {
        "embed": {"class": "linear", "from": "prev:output", "n_out": EMB, "activation": None},
        "acc": {"class": "rnn_cell", "unit": "LSTMBlock", "from": "embed", "n_out": EMB},  # label order matters
        "prob": {"class": "softmax", "from": ["acc", "base:enc"], "target": "classes", "loss": "ce",
                 "loss_only_on_non_search": True},
        "output": choice,
        "end": {"class": "compare", "from": "output", "value": 0}}
    if case == "fed":  # a searched position 't', the output fed its target (RETURNN adds its score)
        unit.update({
            "pos_in": {"class": "linear", "from": "prev:output", "n_out": EMB, "activation": None},
            "pos_prob": {"class": "softmax", "from": ["pos_in", "base:enc"], "n_out": 4},
            "t": {"class": "choice", "from": "pos_prob", "target": None, "beam_size": BEAM,
                  "length_normalization": False, "initial_output": 0, "is_output_layer": True},
            "embed": {"class": "linear", "from": "t", "n_out": EMB, "activation": None},
            "output": dict(choice, search=False)})
    return {
        "enc": {"class": "reduce", "mode": "mean", "axes": "T", "from": "data"},
        "output": {"class": "rec", "from": [], "target": "classes", "max_seq_len": MAX_LEN, "unit": unit,
                   "only_on_search": case == "fed"},
        "decision": {"class": "decide", "from": "output", "loss": "search_score", "only_on_search": True},
    }


CASES = ("plain", "cheating", "cheating_exclusive", "length_norm", "fed")
SEARCH_TRAIN_LAYERS = ["output", "decision"]


def _returnn_case(case: str, seed: int) -> dict:
    import tensorflow as tf
    from returnn.config import Config
    from returnn.tf.network import TFNetwork
    config = Config({"extern_data": {"data": {"dim": 2}, "classes": {"dim": V, "sparse": True}}})
    rng = np.random.RandomState(seed)
    with tf.compat.v1.Graph().as_default():
        net = TFNetwork(config=config, train_flag=True, eval_flag=True)
        d = net_dict(case)
        net.construct_from_dict(d)
        net.construct_extra_net(d, layer_list=SEARCH_TRAIN_LAYERS, search_flag=True, dep_layers_in_extra=True)
        losses, _, _ = net.get_losses_initialized(with_total=True)
        rec = net.get_layer("extra.search:output")
        dec = net.get_layer("extra.search:decision")
        params = {}
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            for var in net.get_params_list():
                name = var.name[:-2]
                value = rng.normal(0, 1.5, size=var.shape.as_list()).astype("float32")
                var.load(value, sess)
                params[name] = value.tolist()
            data, classes = net.extern_data.data["data"], net.extern_data.data["classes"]
            feed = {data.placeholder: X, data.size_placeholder[0]: X_LENS,
                    classes.placeholder: np.array(Y, "int32"), classes.size_placeholder[0]: Y_LENS}
            out = rec.output.copy_as_batch_major()
            fetch = {"labels": out.placeholder, "lens": out.get_sequence_lengths(),
                     "scores": rec.get_search_choices().beam_scores,
                     "decided": dec.output.copy_as_batch_major().placeholder,
                     "decided_lens": dec.output.get_sequence_lengths(),
                     "search_score": losses["decision"].get_loss_value()}
            if case == "fed":
                t_out = net.get_layer("extra.search:output/t").output.copy_as_batch_major()
                fetch["t"] = t_out.placeholder
            values = sess.run(fetch, feed_dict=feed)
    return dict({k: np.asarray(v).tolist() for k, v in values.items()}, case=case, params=params,
                loss_names=sorted(losses))


def main() -> None:
    import returnn
    import tensorflow as tf
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if os.path.abspath(returnn.__file__).startswith(os.path.join(repo, "returnn") + os.sep):
        sys.exit("run from outside the repository: 'import returnn' must be the PyPI package")
    tf.compat.v1.disable_eager_execution()
    cases = [_returnn_case(case, seed) for case in CASES for seed in (1, 2)]
    with open(OUT, "w") as f:
        json.dump({"returnn_version": returnn.__version__, "tf_version": tf.__version__,
                   "inputs": {"x": X.tolist(), "x_lens": X_LENS, "y": Y, "y_lens": Y_LENS}, "cases": cases}, f)
        f.write("\n")


if __name__ == "__main__":
    main()
