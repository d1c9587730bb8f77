"""Random losses for the differential check against the real RETURNN (:mod:`returnn_fuzz`,
``--kind loss``): the numbers a training run prints and minimises. A few layers over ``data``
(linear, LSTM, conv, layer norm, batch norm) feed one to three heads with a loss each:

- frame-wise ``softmax`` (or a ``linear`` read with ``input_type: "logits"``) on the aligned
  ``classes``: ``ce`` with its options (label smoothing, focal loss, ``use_fused``), ``mse``,
  ``sampling_loss`` with the full softmax;
- ``linear`` on the dense ``target_dense``: ``mse``, ``l1``, ``mean_l1``;
- a ``softmax`` with a blank on the shorter ``labels``: ``ctc`` (options: ``ctc_opts``,
  ``output_in_log_space`` from a ``log_softmax``);
- a sequence-level ``softmax`` after a mean over time, on ``seq_class``: ``ce``;
- an ``as_is`` loss (a reduce over the features);
- from seed 20 on: ``generic_ce`` on an element-wise activation, ``triplet_loss`` on pooled embeddings
  against the (B, 3) ``triplet`` classes, RETURNN's ``ctc_loss`` layer under an ``as_is`` loss;
- a teacher-forced decoder over ``labels`` (a rec loop with an embedding of ``prev:output``, a state
  and a softmax with a ``ce`` loss inside the loop);

each with ``loss_scale``, ``use_normalized_loss``, ``use_flatten_frames``, and sometimes a
length-0 sequence in the batch. RETURNN (``tests/returnn_goldens/make_loss_goldens.py
--cases-json``) reports per loss its value (sum), error (sum) and norm factor, and the gradient of its
training objective; this engine runs one train step (SGD at rate 1) from the same parameters and
its loss statistics and parameter deltas must be the same (names of the losses included: the
scores are printed under them).
"""
from __future__ import annotations

import json
import os
import random
import re
import sys
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from returnn_side import run_returnn_script

Layer = Dict[str, Any]
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
MAKE_LOSS_GOLDENS = os.path.join(REPO, "tests", "returnn_goldens", "make_loss_goldens.py")
BATCH_LENS = [([7, 5, 4], [3, 2, 1]), ([6, 1, 3], [2, 1, 0]), ([4, 4, 2], [4, 1, 2]), ([5, 0, 3], [1, 0, 2])]


def _maybe(rng: random.Random, opts: Dict[str, Any], key: str, *values: Any, p: float = 0.35) -> None:
    if rng.random() < p:
        opts[key] = rng.choice(values)


def _common(rng: random.Random, layer: Layer) -> Layer:
    """The options every loss takes: scale, normalisation, frame flattening."""
    _maybe(rng, layer, "loss_scale", 0.5, 2.0, 2.0, 0.0)
    _maybe(rng, layer, "only_on_eval", True, p=0.08)
    opts = dict(layer.get("loss_opts") or {})
    _maybe(rng, opts, "use_normalized_loss", True)
    _maybe(rng, opts, "use_flatten_frames", False, p=0.2)
    if "loss_scale" not in layer:  # RETURNN asserts that not both are given
        _maybe(rng, opts, "scale", 0.5, 3.0, p=0.15)
    if opts:
        layer["loss_opts"] = opts
    return layer


def _constraints(rng: random.Random, layer: Layer) -> None:
    """RETURNN's objective terms of a layer besides its loss: L2 of its parameters."""
    _maybe(rng, layer, "L2", 0.01, 0.1, p=0.2)  # (darc1: RETURNN's fails on packed frames; spatial_smoothing
    # needs a 3x3 grid of features)


def _frame_head(rng: random.Random, src: str) -> Layer:
    kind = rng.choice(["ce", "ce", "ce", "mse", "sampling", "ce_logits"])
    if kind == "ce_logits":
        return {"class": "linear", "activation": None, "n_out": 5, "from": src, "loss": "ce", "target": "classes",
                "loss_opts": {"input_type": "logits"}}
    head = {"class": "softmax", "n_out": 5, "from": src, "target": "classes"}
    if kind == "mse":
        head["loss"] = "mse"
    elif kind == "sampling":
        head.update(loss="sampling_loss", loss_opts={"use_full_softmax": True})
    else:
        head["loss"] = "ce"
        opts: Dict[str, Any] = {}
        _maybe(rng, opts, "label_smoothing", 0.1, 0.3)
        if opts.get("label_smoothing"):
            _maybe(rng, opts, "label_smoothing_gaussian", True, p=0.3)
        _maybe(rng, opts, "focal_loss_factor", 1.0, 2.0)
        _maybe(rng, opts, "use_fused", False)
        if opts:
            head["loss_opts"] = opts
    return head


def _dense_head(rng: random.Random, src: str) -> Layer:
    kind = rng.choice(["mse", "l1", "mean_l1", "bin_ce", "ce_soft"])
    if kind == "bin_ce":  # logits against dense targets in 0..1 (a sigmoid of the targets)
        return {"class": "linear", "activation": rng.choice([None, "sigmoid"]), "n_out": 3, "from": src,
                "loss": "bin_ce", "target": "target_prob"}
    if kind == "ce_soft":  # soft (dense) targets: probabilities
        return {"class": "softmax", "n_out": 3, "from": src, "loss": "ce", "target": "target_prob"}
    return {"class": "linear", "activation": rng.choice([None, "tanh"]), "n_out": 3, "from": src,
            "loss": kind, "target": "target_dense"}


def _ctc_head(rng: random.Random, src: str, extended: bool = False, viterbi: bool = False) -> Layer:
    head = {"class": "softmax", "n_out": 4, "from": src, "loss": "ctc", "target": "labels"}
    opts: Dict[str, Any] = {}
    if rng.random() < 0.3:
        head.update({"class": "linear", "activation": "log_softmax"})
        opts["output_in_log_space"] = True
    if viterbi and rng.random() < 0.25:  # the best path only (RETURNN's ctc_loss_viterbi; no ctc_opts)
        opts["use_viterbi"] = True
        _maybe(rng, opts, "beam_width", 1, p=0.5)
    elif extended and rng.random() < 0.25:  # RETURNN's native CTC (greedy error)
        opts.update(use_native=True, beam_width=1)
        _maybe(rng, opts, "ctc_opts", {"zero_infinity": True}, {"label_loop": False}, {"ctc_merge_repeated": False},
               {"grad_wrt_softmax_in": False}, {"logits_normalize": False}, p=0.5)
    else:
        _maybe(rng, opts, "ctc_opts", {"ignore_longer_outputs_than_inputs": True})
    _maybe(rng, opts, "target_collapse_repeated", True, p=0.15)
    if opts:
        head["loss_opts"] = opts
    return head


def _generic_ce_head(rng: random.Random, src: str) -> Layer:
    """RETURNN's generic_ce: an element-wise activation's output on the aligned classes."""
    return {"class": "linear", "activation": rng.choice(["sigmoid", "exp", "softplus"]), "n_out": 5, "from": src,
            "loss": "generic_ce", "target": "classes"}


def _triplet_head(network: Dict[str, Layer], rng: random.Random, src: str) -> Layer:
    """RETURNN's triplet_loss: 3 (multi view: 6) embeddings per sequence against the (B, 3) triplet classes."""
    network["tpool"] = {"class": "reduce", "mode": rng.choice(["mean", "max"]), "axis": "T", "from": src}
    multi = rng.random() < 0.3
    opts: Dict[str, Any] = {"margin": rng.choice([0.5, 1.0, 1.5])}
    if multi:
        opts["multi_view_training"] = True
    return {"class": "linear", "activation": rng.choice([None, "tanh"]), "n_out": 12 if multi else 6,
            "from": "tpool", "loss": "triplet_loss", "target": "triplet", "loss_opts": opts}


def _ctc_layer_head(network: Dict[str, Layer], rng: random.Random, src: str) -> Layer:
    """RETURNN's ctc_loss layer (its native CTC) on the labels, under an as_is loss."""
    head: Layer = {"class": "ctc_loss", "logits": "ctc_logits", "targets": "data:labels", "loss": "as_is"}
    network["ctc_logits"] = {"class": "linear", "activation": None, "n_out": 4, "from": src}
    if rng.random() < 0.3:
        network["ctc_logits"]["activation"] = "log_softmax"
        head["logits_normalized"] = True
    _maybe(rng, head, "label_loop", False, p=0.25)
    _maybe(rng, head, "max_approx", True, p=0.2)
    _maybe(rng, head, "blank_index", 0, p=0.15)
    return head


def _seq_head(network: Dict[str, Layer], rng: random.Random, src: str) -> Layer:
    network["pool"] = {"class": "reduce", "mode": rng.choice(["mean", "max"]), "axis": "T", "from": src}
    return {"class": "softmax", "n_out": 5, "from": "pool", "loss": "ce", "target": "seq_class"}


def _as_is_head(rng: random.Random, src: str) -> Layer:
    head = {"class": "reduce", "mode": rng.choice(["sum", "mean"]), "axis": "F", "from": src, "loss": "as_is"}
    if rng.random() < 0.3:
        head["loss_opts"] = {"as_error": True}
    return head


def _decoder(rng: random.Random) -> Layer:
    """A teacher-forced decoder over ``labels`` with its loss in the loop."""
    state = rng.choice([
        {"class": "rnn_cell", "unit": "LSTMBlock", "n_out": 4, "from": ["emb"]},
        {"class": "linear", "activation": "tanh", "n_out": 4, "from": ["emb", "prev:s"]}])
    unit = {"emb": {"class": "linear", "activation": None, "with_bias": False, "n_out": 3, "from": "prev:output"},
            "s": state,
            "prob": _common(rng, {"class": "softmax", "n_out": 3, "from": "s", "loss": "ce", "target": "labels"}),
            "output": {"class": "choice", "from": "prob", "target": "labels", "beam_size": 2, "initial_output": 0}}
    if rng.random() < 0.3:
        unit["prob"]["loss_opts"] = dict(unit["prob"].get("loss_opts") or {}, label_smoothing=0.1)
    return {"class": "rec", "from": [], "target": "labels", "unit": unit, "max_seq_len": "max_len_from('base:data')"}


def draw(seed: int, index: int) -> Dict[str, Any]:
    """One case: {name, family, network, batch_opts}. From seed 20 on also generic_ce, triplet_loss and
    the ctc_loss layer heads, from seed 40 on the ctc loss's use_viterbi (the draws of earlier seeds stay as
    they were)."""
    extended = seed >= 20
    rng = random.Random("loss/%i/%i" % (seed, index))
    network: Dict[str, Layer] = {}
    src = "data"
    pre = []
    for i in range(rng.choice([0, 1, 1, 2])):
        kind = rng.choice(["linear", "lstm", "conv", "layer_norm", "batch_norm"])
        name = "l%i" % i
        if kind == "linear":
            network[name] = {"class": "linear", "activation": rng.choice(["tanh", "relu"]), "n_out": 4, "from": src}
        elif kind == "lstm":
            network[name] = {"class": "rec", "unit": rng.choice(["nativelstm2", "lstm"]), "n_out": 4, "from": src}
        elif kind == "conv":
            network[name] = {"class": "conv", "filter_size": (3,), "padding": "same", "n_out": 4,
                             "activation": "relu", "from": src}
        else:
            network[name] = {"class": kind, "from": src}
        pre.append(kind)
        _constraints(rng, network[name])
        src = name
    heads = []
    makers = ["frame", "frame", "dense", "ctc", "seq", "as_is", "decoder"]
    if extended:
        makers += ["generic_ce", "triplet", "ctc_layer"]
    for i, kind in enumerate(rng.sample(makers, rng.choice([1, 1, 2, 3]))):
        name = "output" if i == 0 and kind != "decoder" else "%s_out" % kind
        if kind == "decoder":
            network[name] = _decoder(rng)
        elif kind in ("seq", "triplet", "ctc_layer"):
            maker = {"seq": _seq_head, "triplet": _triplet_head, "ctc_layer": _ctc_layer_head}[kind]
            network[name] = _common(rng, maker(network, rng, src))
        else:
            maker = {"frame": _frame_head, "dense": _dense_head, "ctc": _ctc_head, "as_is": _as_is_head,
                     "generic_ce": _generic_ce_head}[kind]
            network[name] = _common(rng, _ctc_head(rng, src, extended, seed >= 40) if kind == "ctc" else maker(rng, src))
        if kind != "decoder":
            _constraints(rng, network[name])
        heads.append(kind)
    # RETURNN's CTC kernel fails on empty label sequences ('Labels length is zero'): none with a ctc head
    lens, label_lens = rng.choice([b for b in BATCH_LENS if "ctc" not in heads or 0 not in b[1]])
    batch_opts: Dict[str, Any] = {"seed": seed * 1000 + index, "lens": lens, "label_lens": label_lens}
    if "triplet" in heads:
        batch_opts["extra"] = ["triplet"]
    return {"name": "fuzzloss_%i_%i" % (seed, index), "family": "loss[%s|%s]" % ("+".join(pre), "+".join(heads)),
            "network": network, "batch_opts": batch_opts}


def run_returnn(cases: List[Dict[str, Any]], out_dir: str, python: str, trace: bool = False) -> Dict[str, str]:
    """Runs the cases in RETURNN (``<case>.npz`` into ``out_dir``); {case: error line} of its failures."""
    path = os.path.join(out_dir, "loss_cases.json")
    with open(path, "w") as f:
        json.dump(cases, f)
    proc = run_returnn_script(python, [MAKE_LOSS_GOLDENS, "--cases-json", path, "--out", out_dir])
    if proc.returncode:
        sys.exit("returnn_fuzz_loss: RETURNN's run failed; its stderr ends:\n%s" % proc.stderr[-3000:])
    return dict(re.findall(r"^FAILED (\S+): (.*)$", proc.stdout, re.M))


def _train_step(meta: Dict[str, Any], arrays: Dict[str, np.ndarray]):
    """This engine's {loss name: [loss_sum, norm, error_sum, error_norm]} of one SGD step at rate 1
    from the golden's parameters, and the parameters after it (tests/test_returnn_losses.py's)."""
    from test_returnn_losses import train_step_stats
    stats, after, _ = train_step_stats(meta, arrays)  # (a non-finite loss, e.g. CTC without a path, is compared)
    return stats, after


def _ours_builds(c: Dict[str, Any]) -> None:
    """This engine trains case ``c`` one step (raises when it cannot)."""
    sys.path.insert(0, os.path.join(REPO, "tests", "returnn_goldens"))
    from make_loss_goldens import extern_data_of, make_batch
    arrays = {}
    for key, (arr, lens) in make_batch(**c["batch_opts"]).items():
        arrays["in:" + key] = arr
        if lens is not None:
            arrays["len:" + key] = lens
    _train_step({"extern_data": extern_data_of(c["batch_opts"]), "network": c["network"], "params": [],
                 "config": c.get("config") or {}}, arrays)  # the draw's behavior_version, as RETURNN's side


def _close(ours: float, ref: float, rtol: float = 1e-4, atol: float = 1e-5) -> bool:
    return bool(np.isclose(ours, ref, rtol=rtol, atol=atol, equal_nan=True))


def verdict(c: Dict[str, Any], out_dir: str, returnn_error: Optional[str]) -> Tuple[str, str]:
    """(verdict, detail) of one loss case (see the module doc)."""
    from returnn.errors import ReturnnError
    from returnn_fuzz import failure_verdict
    meta: Dict[str, Any] = {}
    try:
        if returnn_error is not None:
            _ours_builds(c)
            return "LAX", "RETURNN: " + returnn_error
        with np.load(os.path.join(out_dir, c["name"] + ".npz"), allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        meta = json.loads(str(arrays.pop("meta")))
        stats, after = _train_step(meta, arrays)
    except Exception as exc:  # noqa: BLE001 - our refusal or crash is the finding
        if isinstance(exc, ReturnnError) and returnn_error is None and not meta.get("trained", True) \
                and "no parameter gets a gradient" in str(exc):
            return "BOTH-FAIL", "nothing to train (RETURNN's Updater: 'no single variable to train', or no variables)"
        return failure_verdict(exc, returnn_error)
    losses = meta.get("losses") or {"output": [meta["has_loss"], meta["has_error"]]}
    for key in sorted(set(losses) - set(stats)):  # only_on_eval: RETURNN reports 0 in training, this engine nothing
        if meta["network"].get(key, {}).get("only_on_eval") and not any(
                float(arrays.get("%s:%s" % (what, key), 0.0)) for what in ("loss", "error")):
            del losses[key]
    if sorted(stats) != sorted(losses):
        return "DIFFER", "loss names: ours %s, RETURNN %s" % (sorted(stats), sorted(losses))
    suffix = (lambda key: "") if "losses" not in meta else (lambda key: ":" + key)
    problems = []
    for key, (has_loss, has_error) in sorted(losses.items()):
        loss_sum, norm, error_sum, error_norm = stats[key]
        frames = 1.0 / float(arrays["norm_factor" + suffix(key)]) if float(arrays["norm_factor" + suffix(key)]) else 0.0
        checks = [("loss", loss_sum, float(arrays["loss" + suffix(key)]) if has_loss else 0.0),
                  ("norm", norm if has_loss else 0.0, frames if has_loss else 0.0),
                  ("error", error_sum, float(arrays["error" + suffix(key)]) if has_error else 0.0),
                  ("error norm", error_norm if has_error else 0.0, frames if has_error else 0.0)]
        problems += ["%s %s: ours %.6g, RETURNN %.6g" % (key, what, o, r) for what, o, r in checks if not _close(o, r)]
    for name in meta.get("trainable", meta["params"]):  # (batch_norm's statistics: updated, not trained)
        grad = arrays["param:" + name] - after[name]
        ref = arrays["grad:" + name]
        scale = float(np.abs(ref).max()) if ref.size else 0.0
        if not np.allclose(grad, ref, rtol=1e-3, atol=1e-4 * scale + 1e-5, equal_nan=True):
            problems.append("gradient of %s: max |diff| %.3g (RETURNN's max |g| %.3g)" % (
                name, float(np.abs(grad - ref).max()), scale))
    return ("DIFFER", "; ".join(problems[:4])) if problems else ("AGREE", "")
