"""Golden loss values from the real RETURNN (PyPI package ``returnn``, TF backend, graph mode): for one
small network per loss (``ce`` with its options, ``mse``, ``ctc``, ``as_is``, ``edit_distance``,
``sampling_loss``), what RETURNN's ``LossHolder`` reports on one batch: the loss value (summed over
the batch, before ``loss_scale``), the error value (summed), the norm factor (RETURNN divides both by
it for the reported scores: ``1 / sum(target lengths)`` for targets with a time axis) and the gradient
of the training objective (``network.get_objective()``: with ``use_normalized_loss`` the loss times
the norm factor). ``tests/test_returnn_losses.py`` builds the same network with this engine, sets
the same parameters by RETURNN's names, runs one train step on the batch and compares.

RETURNN runs with the train flag on (its CTC error is then greedy decoding; in evaluation it decodes
with a beam search of ``beam_width``).

Regenerate (from a directory OUTSIDE the repository, so that ``import returnn`` is the PyPI package)::

    cd /tmp && DISABLE_CUDA=1 /work/main/.bench-venv-returnn/bin/python \\
        /work/main/tests/returnn_goldens/make_loss_goldens.py

Writes ``tests/data/returnn_losses/<case>.npz`` (``--out DIR`` elsewhere), byte-reproducible, with
  ``meta``          0-d unicode string, JSON: case, network, extern_data, loss_layer, params (RETURNN names),
                    has_loss (false when RETURNN's loss value is None: edit_distance, as_is as_error),
                    has_error, returnn_version, tf_version;
  ``in:KEY``, ``len:KEY``  the batch (float32 features or int32 labels, padded with zeros) and lengths;
  ``param:NAME``    the parameters (RETURNN's own initialisation, graph seed 1);
  ``grad:NAME``     the gradient of RETURNN's objective at those parameters;
  ``loss``, ``error``, ``norm_factor``, ``objective``  float32 scalars (``loss``/``error`` 0 when None).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DEFAULT_OUT = os.path.join(REPO, "tests", "data", "returnn_losses")

B = 3
LENS = [7, 5, 4]  # data, classes, target_dense (frame-wise)
LABEL_LENS = [3, 2, 1]  # labels (CTC / edit distance targets)
HYP_LENS = [2, 3, 0]  # hyp (a sparse output for edit_distance)
EXTERN_DATA = {
    "data": {"dim": 4},
    "classes": {"dim": 5, "sparse": True},
    "target_dense": {"dim": 3},
    "labels": {"dim": 3, "sparse": True},
    "hyp": {"dim": 3, "sparse": True},
    "seq_class": {"dim": 5, "sparse": True, "shape": ()},
    "target_prob": {"dim": 3},  # frame-wise probabilities (soft ce targets, bin_ce targets)
}


def softmax_net(loss, target="classes", loss_opts=None, n_out=5, extra=None):
    out = {"class": "softmax", "from": "data", "n_out": n_out, "loss": loss, "target": target}
    if loss_opts is not None:
        out["loss_opts"] = loss_opts
    out.update(extra or {})
    return {"output": out}


CASES = {
    "ce": softmax_net("ce"),
    "ce_label_smoothing": softmax_net("ce", loss_opts={"label_smoothing": 0.1}),
    "ce_label_smoothing_normalized": softmax_net("ce", loss_opts={"label_smoothing": 0.2,
                                                                  "use_normalized_loss": True}),
    "ce_focal": softmax_net("ce", loss_opts={"focal_loss_factor": 2.0}),
    "ce_label_smoothing_gaussian": softmax_net("ce", loss_opts={"label_smoothing": 0.3,
                                                                "label_smoothing_gaussian": True}),
    "ce_not_fused": softmax_net("ce", loss_opts={"use_fused": False}),
    "ce_scale": softmax_net("ce", extra={"loss_scale": 0.5}),
    "ce_dense_target": softmax_net("ce", target="target_dense", n_out=3),
    "ce_no_time": {"pool": {"class": "reduce", "mode": "mean", "axis": "T", "from": "data"},
                   "output": {"class": "softmax", "from": "pool", "n_out": 5, "loss": "ce", "target": "seq_class"}},
    "mse_dense": {"output": {"class": "linear", "activation": None, "from": "data", "n_out": 3, "loss": "mse",
                             "target": "target_dense"}},
    "mse_sparse": softmax_net("mse"),
    "l1_dense": {"output": {"class": "linear", "activation": "tanh", "from": "data", "n_out": 3, "loss": "l1",
                            "target": "target_dense"}},
    "mean_l1_dense": {"output": {"class": "linear", "activation": None, "from": "data", "n_out": 3, "loss": "mean_l1",
                                 "target": "target_dense", "loss_opts": {"use_normalized_loss": True}}},
    "mse_normalized": {"output": {"class": "linear", "activation": "tanh", "from": "data", "n_out": 3, "loss": "mse",
                                  "target": "target_dense", "loss_opts": {"use_normalized_loss": True}}},
    "ctc": softmax_net("ctc", target="labels", n_out=4),
    "ctc_normalized": softmax_net("ctc", target="labels", n_out=4, loss_opts={"use_normalized_loss": True}),
    "ctc_sigmoid_output": {"output": {"class": "linear", "activation": "sigmoid", "from": "data", "n_out": 4,
                                      "loss": "ctc", "target": "labels"}},
    "as_is": {"output": {"class": "linear", "activation": "relu", "from": "data", "n_out": 2, "loss": "as_is"}},
    "as_is_as_error": {"output": {"class": "linear", "activation": "relu", "from": "data", "n_out": 2,
                                  "loss": "as_is", "loss_opts": {"as_error": True}},
                       "other": {"class": "softmax", "from": "data", "n_out": 5, "loss": "ce", "target": "classes"}},
    "edit_distance": {"output": {"class": "copy", "from": "data:hyp", "loss": "edit_distance", "target": "labels"},
                      "other": {"class": "softmax", "from": "data", "n_out": 5, "loss": "ce", "target": "classes"}},
    "sampling_loss_full_softmax": softmax_net("sampling_loss", loss_opts={"use_full_softmax": True}),
    "ctc_target_collapse_repeated": softmax_net("ctc", target="labels", n_out=4,
                                                loss_opts={"target_collapse_repeated": True}),
    "ctc_auto_clip_target_len": softmax_net("ctc", target="labels", n_out=4, loss_opts={"auto_clip_target_len": True}),
}
# RETURNN's remaining losses: generic_ce (an element-wise activation's cross entropy, RETURNN's error signal),
# triplet_loss (a sparse target (B, 3) without time axis: anchor, same, different class). (deep_clustering:
# RETURNN's own fails on this TensorFlow when the network is built, a while_loop shape invariant)
TRIPLET_NET = {"pool": {"class": "reduce", "mode": "mean", "axis": "T", "from": "data"}}
CASES.update({
    "generic_ce_sigmoid": {"output": {"class": "linear", "activation": "sigmoid", "from": "data", "n_out": 5,
                                      "loss": "generic_ce", "target": "classes"}},
    "generic_ce_exp_normalized_scaled": {"output": {
        "class": "linear", "activation": "exp", "from": "data", "n_out": 5, "loss": "generic_ce", "target": "classes",
        "loss_scale": 0.5, "loss_opts": {"use_normalized_loss": True}}},
    "triplet_loss": dict(TRIPLET_NET, output={"class": "linear", "activation": "tanh", "from": "pool", "n_out": 6,
                                              "loss": "triplet_loss", "target": "triplet",
                                              "loss_opts": {"margin": 0.8}}),
    "triplet_loss_multi_view": dict(TRIPLET_NET, output={
        "class": "linear", "activation": None, "from": "pool", "n_out": 12, "loss": "triplet_loss",
        "target": "triplet", "loss_opts": {"margin": 1.5, "multi_view_training": True}}),
    # RETURNN's ctc_loss layer (its native CTC) under an as_is loss: a sequence without a path costs 0 with the
    # error signal softmax(logits) (zero_infinity: none), an empty one the all-blank path
    "ctc_loss_layer_no_path": {"lin": {"class": "linear", "activation": None, "from": "data", "n_out": 4},
                               "output": {"class": "ctc_loss", "logits": "lin", "targets": "data:labels",
                                          "loss": "as_is"}},
})
CASES["ctc_loss_layer_no_path_zero_infinity"] = CASES["ctc_loss_layer_no_path"]
# the ctc loss by RETURNN's native CTC: the targets neither clipped nor collapsed (only for the error)
CASES["ctc_use_native_no_path"] = softmax_net("ctc", target="labels", n_out=4, loss_opts={
    "use_native": True, "beam_width": 1, "auto_clip_target_len": True})
CASES["ctc_use_native_zero_infinity_rna"] = softmax_net("ctc", target="labels", n_out=4, loss_opts={
    "use_native": True, "beam_width": 1, "ctc_opts": {"zero_infinity": True, "label_loop": False}})
CASES["generic_ce_conv_softplus"] = {"output": {"class": "conv", "filter_size": (3,), "padding": "same", "n_out": 5,
                                                "activation": "softplus", "from": "data", "loss": "generic_ce",
                                                "target": "classes"}}
CASES["generic_ce_combine_no_activation"] = {
    "a": {"class": "linear", "activation": "sigmoid", "from": "data", "n_out": 5},
    "b": {"class": "linear", "activation": "exp", "from": "data", "n_out": 5},
    "output": {"class": "combine", "kind": "add", "from": ["a", "b"], "loss": "generic_ce", "target": "classes"}}
CASES["triplet_loss_frames"] = {"output": {"class": "linear", "activation": "tanh", "from": "data", "n_out": 6,
                                           "loss": "triplet_loss", "target": "triplet_frames",
                                           "loss_opts": {"margin": 1.0}}}
CASES["ctc_loss_layer_rna_no_path"] = {"lin": CASES["ctc_loss_layer_no_path"]["lin"],
                                       "output": dict(CASES["ctc_loss_layer_no_path"]["output"], label_loop=False)}
# a target that names a layer (no "layer:"): RETURNN tries it as a layer first (LayerBase.transform_config_dict)
CASES["mse_target_names_a_layer"] = {
    "teacher": {"class": "linear", "activation": "tanh", "from": "data", "n_out": 3},
    "output": {"class": "linear", "activation": None, "from": "data", "n_out": 3, "loss": "mse", "target": "teacher"}}
# RETURNN's native CTC error signal: exp(log-probs) - posteriors (grad_wrt_softmax_in) or - posteriors, whatever
# logits_normalize (a linear output in "log space": not normalized)
CASES["ctc_use_native_unnormalized_grad_softmax_in"] = {"output": {
    "class": "linear", "activation": None, "from": "data", "n_out": 4, "loss": "ctc", "target": "labels",
    "loss_opts": {"use_native": True, "beam_width": 1, "output_in_log_space": True,
                  "ctc_opts": {"logits_normalize": False}}}}
CASES["ctc_use_native_normalize_no_grad_softmax_in"] = softmax_net("ctc", target="labels", n_out=4, loss_opts={
    "use_native": True, "beam_width": 1, "ctc_opts": {"grad_wrt_softmax_in": False}})
# the best path only (RETURNN's ctc_loss_viterbi): its error signal softmax - onehot(best path); beam search error
# in eval; a sequence without a path (zero_infinity) costs 0 with no gradient, an empty target the all-blank path
CASES["ctc_use_viterbi"] = softmax_net("ctc", target="labels", n_out=4, loss_opts={"use_viterbi": True})
CASES["ctc_use_viterbi_no_path_zero_infinity"] = softmax_net("ctc", target="labels", n_out=4, loss_opts={
    "use_viterbi": True, "beam_width": 1})
# without zero_infinity a sequence without a path costs inf, and RETURNN's error signal on its frames is
# softmax - onehot(0) (fast_viterbi's alignment there is its mask index 0): for the loss and the ctc_loss layer
CASES["ctc_use_viterbi_no_path"] = CASES["ctc_use_viterbi_no_path_zero_infinity"]
CASES["ctc_loss_layer_viterbi_no_path"] = {"lin": CASES["ctc_loss_layer_no_path"]["lin"],
                                           "output": dict(CASES["ctc_loss_layer_no_path"]["output"], max_approx=True)}
# more config keys per case
CASE_CONFIGS = {"ctc_loss_layer_no_path_zero_infinity": {"tf_native_ctc_zero_infinity": True},
                "ctc_use_viterbi_no_path_zero_infinity": {"tf_native_ctc_zero_infinity": True}}
# extern data keys only some cases have (drawn after the others by make_batch's ``extra``)
EXTRA_EXTERN = {"triplet": {"dim": 5, "sparse": True, "shape": (3,), "time_dim_axis": None},
                "triplet_frames": {"dim": 5, "sparse": True, "shape": (None, 3)}}
# cases on another batch than the default one (make_batch's keyword arguments): label sequences with repeated
# labels, as long as their frames (without collapsing or clipping, the first has no CTC path)
CASE_BATCHES = {name: {"seed": 0, "lens": [3, 5, 4], "label_lens": [3, 4, 2]}
                for name in ("ctc_target_collapse_repeated", "ctc_auto_clip_target_len")}
CASE_BATCHES.update({name: {"extra": ["triplet"]} for name in ("triplet_loss", "triplet_loss_multi_view")})
CASE_BATCHES["triplet_loss_frames"] = {"extra": ["triplet_frames"]}
# the first sequence has no CTC path (3 frames, 3 labels with a repeat), the last an empty target
CASE_BATCHES.update({name: {"seed": 0, "lens": [3, 5, 4], "label_lens": [3, 4, 0]} for name in (
    "ctc_loss_layer_no_path", "ctc_loss_layer_no_path_zero_infinity", "ctc_use_native_no_path",
    "ctc_use_native_unnormalized_grad_softmax_in", "ctc_use_native_normalize_no_grad_softmax_in",
    "ctc_use_viterbi_no_path_zero_infinity", "ctc_use_viterbi_no_path", "ctc_loss_layer_viterbi_no_path")})
CASE_BATCHES["ctc_loss_layer_rna_no_path"] = {"seed": 0, "lens": [3, 5, 2], "label_lens": [3, 4, 3]}
CASE_BATCHES["ctc_use_native_zero_infinity_rna"] = {"seed": 0, "lens": [3, 5, 2], "label_lens": [3, 4, 3]}


def make_batch(seed=42, lens=None, label_lens=None, extra=()):
    """{key: (array, lengths)}: random features / labels, zero padding (as RETURNN's datasets);
    ``lens``/``label_lens`` (per sequence) instead of LENS / LABEL_LENS (the differential check's draws);
    ``extra``: keys of EXTRA_EXTERN too."""
    import numpy as np
    rng = np.random.RandomState(seed)
    lens = LENS if lens is None else lens
    label_lens = LABEL_LENS if label_lens is None else label_lens
    batch = {}

    def pad(seqs, dtype):
        lens = np.array([len(s) for s in seqs], np.int32)
        shape = (len(seqs), max(1, lens.max())) + np.shape(seqs[0])[1:]
        arr = np.zeros(shape, dtype)
        for i, s in enumerate(seqs):
            arr[i, :len(s)] = s
        return arr, lens

    batch["data"] = pad([rng.randn(n, 4).astype(np.float32) for n in lens], np.float32)
    batch["classes"] = pad([rng.randint(0, 5, n) for n in lens], np.int32)
    batch["target_dense"] = pad([rng.randn(n, 3).astype(np.float32) for n in lens], np.float32)
    batch["labels"] = pad([rng.randint(0, 3, n) for n in label_lens], np.int32)
    batch["hyp"] = pad([rng.randint(0, 3, n) for n in HYP_LENS], np.int32)
    batch["seq_class"] = (rng.randint(0, 5, B).astype(np.int32), None)
    logits = [rng.randn(n, 3) for n in lens]  # drawn last: the other keys as before
    batch["target_prob"] = pad([(np.exp(x) / np.exp(x).sum(-1, keepdims=True)).astype(np.float32) for x in logits],
                               np.float32)
    if "triplet" in extra:  # (B, 3) class labels: anchor, same, different; the last anchor 0 (RETURNN's mask:
        # 0 is "the same" as any label)
        anchor = rng.randint(0, 5, B)
        anchor[-1] = 0
        diff = (anchor + 1 + rng.randint(0, 4, B)) % 5
        batch["triplet"] = (np.stack([anchor, anchor, diff], axis=1).astype(np.int32), None)
    if "triplet_frames" in extra:  # (B, T, 3) per frame, as long as data
        frames = []
        for n in lens:
            anchor = rng.randint(0, 5, n)
            frames.append(np.stack([anchor, anchor, (anchor + 1 + rng.randint(0, 4, n)) % 5], axis=1))
        batch["triplet_frames"] = pad(frames, np.int32)
    return batch


def extern_data_of(batch_opts=None):
    """EXTERN_DATA and the EXTRA_EXTERN keys of ``batch_opts``' ``extra``."""
    extern = json.loads(json.dumps(EXTERN_DATA))
    for key in (batch_opts or {}).get("extra", ()):
        extern[key] = json.loads(json.dumps(EXTRA_EXTERN[key]))
    return extern


def run_case(name, network, batch_opts=None, config=None):
    """The golden arrays of one case; ``batch_opts``: :func:`make_batch`'s keyword arguments,
    ``config``: more config keys (the differential check's draws)."""
    import numpy as np
    import tensorflow as tf
    import returnn
    from returnn.config import Config, set_global_config
    from returnn.tf.network import TFNetwork
    from returnn.util import BehaviorVersion

    network = json.loads(json.dumps(network))
    extra_config = dict(config or {})
    extern_data = extern_data_of(batch_opts)
    config = Config(dict(extern_data=json.loads(json.dumps(extern_data)), network=network, task="train",
                         **extra_config))
    set_global_config(config)
    # as BehaviorVersion.set (make_goldens.py's run_case): the draw's behavior_version, else 0, for each case anew
    BehaviorVersion._reset((extra_config.get("behavior_version"), 0))
    batch = make_batch(**(batch_opts or {}))
    with tf.compat.v1.Graph().as_default() as graph:
        tf.compat.v1.set_random_seed(1)
        net = TFNetwork(config=config, train_flag=True)
        net.construct_from_dict(network)
        params = [p for p in net.get_saveable_params_list() if p.name.split(":")[0] != "global_step"]
        names = [p.name.split(":")[0] for p in params]
        objective = net.get_objective()
        scalars = {"objective": tf.convert_to_tensor(objective)}
        has = {}  # every loss: its value (sum), error (sum) and norm factor, under RETURNN's loss name
        for key, holder in sorted(net.losses_dict.items()):
            loss, error = holder.get_loss_value(), holder.get_error_value()
            scalars["norm_factor:" + key] = tf.convert_to_tensor(holder.get_norm_factor())
            has[key] = [loss is not None, error is not None]
            if loss is not None:
                scalars["loss:" + key] = loss
            if error is not None:
                scalars["error:" + key] = error
        grads, trained = [], False
        if params:
            raw = tf.gradients(objective, params)
            trained = any(g is not None for p, g in zip(params, raw) if p in net.get_trainable_params())
            grads = [tf.zeros_like(p) if g is None else tf.convert_to_tensor(g) for p, g in zip(params, raw)]
        feed = {}
        used = set()
        for key, (arr, lens) in batch.items():
            if key not in net.extern_data.data:
                continue
            data = net.extern_data.data[key]
            if data.placeholder is None:
                continue
            used.add(key)
            feed[data.placeholder] = arr
            if data.time_dim_axis is not None:
                feed[data.size_placeholder[data.time_dim_axis_excluding_batch]] = lens
        sess_cfg = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1,
                                            device_count={"GPU": 0})
        with tf.compat.v1.Session(graph=graph, config=sess_cfg) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            before = sess.run(params)
            values = sess.run(scalars, feed)
            grad_values = sess.run(grads, feed)
    main = has.get("output", [False, False])
    meta = {"case": name, "network": network, "extern_data": extern_data, "loss_layer": "output", "params": names,
            "has_loss": main[0], "has_error": main[1],
            "returnn_version": getattr(returnn, "__long_version__", returnn.__version__), "tf_version": tf.__version__}
    if sorted(has) != ["output"] or extra_config or batch_opts:  # the differential check's draws
        meta.update(losses=has, config=extra_config, batch_opts=batch_opts or {},
                    trainable=sorted(p.name.split(":")[0] for p in net.get_trainable_params()),
                    trained=trained)  # False: RETURNN's Updater fails ('no single variable to train') or has no variables
    arrays = {"meta": np.array(json.dumps(meta, sort_keys=True))}
    for key, (arr, lens) in batch.items():
        arrays["in:" + key] = arr
        if lens is not None:
            arrays["len:" + key] = lens
    arrays["objective"] = np.float32(values["objective"])
    for key in ("loss", "error", "norm_factor"):  # the main loss ("output") as before
        arrays[key] = np.float32(values.get(key + ":output", 0.0))
    if "losses" in meta:  # every loss under its name
        for key in has:
            for what in ("loss", "error", "norm_factor"):
                arrays["%s:%s" % (what, key)] = np.float32(values.get("%s:%s" % (what, key), 0.0))
    for name_, p0, g in zip(names, before, grad_values):
        arrays["param:" + name_] = p0
        arrays["grad:" + name_] = g
    return arrays


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=DEFAULT_OUT, help="output directory (default: %(default)s)")
    parser.add_argument("--only", nargs="+", metavar="CASE", help="only these cases")
    parser.add_argument("--cases-json", metavar="FILE", help="the cases of this JSON list ({name, network, "
                        "batch_opts, config}; benchmarks/returnn_fuzz_loss.py writes them) instead of CASES; a case "
                        "RETURNN fails on is reported as 'FAILED name: error' and skipped")
    args = parser.parse_args(argv)
    sys.path.insert(0, HERE)
    from make_goldens import _check_real_returnn, write_npz
    _check_real_returnn()
    os.environ.setdefault("DISABLE_CUDA", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    tf.compat.v1.disable_eager_execution()
    os.makedirs(args.out, exist_ok=True)
    if args.cases_json:
        with open(args.cases_json) as f:
            for c in json.load(f):
                try:
                    arrays = run_case(c["name"], c["network"], c.get("batch_opts"), c.get("config"))
                except Exception as exc:  # noqa: BLE001 - RETURNN's own failure is a verdict of the check
                    print("FAILED %s: %s: %s" % (c["name"], type(exc).__name__,
                                                 (str(exc).strip().splitlines() or [""])[0][:300]), flush=True)
                    continue
                write_npz(os.path.join(args.out, c["name"] + ".npz"), arrays)
                print("wrote %s" % c["name"], flush=True)
        return
    for name in args.only or list(CASES):
        arrays = run_case(name, CASES[name], CASE_BATCHES.get(name), CASE_CONFIGS.get(name))
        path = os.path.join(args.out, name + ".npz")
        write_npz(path, arrays)
        print("wrote %s (loss %.6g, error %.6g, norm factor 1/%.6g, objective %.6g)" % (
            path, arrays["loss"], arrays["error"], 1.0 / arrays["norm_factor"], arrays["objective"]), flush=True)


if __name__ == "__main__":
    main()
