"""Random searched decoders for the differential check against the real RETURNN (:mod:`returnn_fuzz`,
``--kind search``): an encoder outside the loop, and a label-synchronous rec loop (attention/LM style)
searched with a ``choice`` (target ``classes``): an embedding of ``prev:output`` (linear without
bias), a state (a linear over its previous value, an ``rnn_cell`` or a ``rec`` unit), optionally
attention (MLP or dot) over the encoder and a ``cum_concat`` history of the state, a softmax over the classes (or
a ``log_softmax`` read with ``input_type="log_prob"``), the choice (beam 1..4, sometimes without
``length_normalization`` or with another exponent, ``prob_scale`` or ``base_beam_score_scale``),
``end`` at label 0 and ``max_seq_len`` from the encoder's length (or, in a few draws, a loop over
the encoder's frames without ``end``), sometimes with ``include_eos``. A ``decide`` after the loop
is compared: the best hypotheses' labels and lengths and the score RETURNN's decide keeps (its
``search_choices.beam_scores``). A few draws teacher-force the choice
(``search: False``: the loop runs over the ``classes`` given), or decide with length normalization.

Both engines run in search mode (RETURNN: ``search_flag``; here ``TFNetwork(search=True)``) with the
same parameters and inputs (make_goldens.py's ``search`` cases). Every draw is reproducible from
(seed, index); the case names carry them.
"""
from __future__ import annotations

import copy
import os
import random
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

Layer = Dict[str, Any]

LENS = [[5, 3, 1], [1, 4, 2], [6, 1, 1], [3, 5, 1], [4, 4, 1]]
STATE_CELLS = ["LSTMBlock", "BasicLSTM", "GRU", "StandardLSTM", "BasicRNN"]
STATE_UNITS = ["lstm", "nativelstm2", "gru", "standardlstm"]
SCORE_TOL = 1e-4


def _state(rng: random.Random, inputs: List[str]) -> Tuple[str, Layer]:
    """The decoder state ``s`` over ``inputs`` (the embedding, maybe ``prev:att``)."""
    n_out = rng.choice([3, 4, 5])
    kind = rng.choice(["linear", "rnn_cell", "rec"])
    if kind == "linear":
        return "lin", {"class": "linear", "activation": rng.choice(["tanh", "relu"]), "n_out": n_out,
                       "from": inputs + ["prev:s"]}
    if kind == "rnn_cell":
        unit = rng.choice(STATE_CELLS)
        return unit, {"class": "rnn_cell", "unit": unit, "n_out": n_out, "from": inputs}
    unit = rng.choice(STATE_UNITS)
    return unit, {"class": "rec", "unit": unit, "n_out": n_out, "from": inputs}


def _attention(network: Dict[str, Layer], unit: Dict[str, Layer], rng: random.Random, enc_dim: int) -> str:
    """Attention of the state over the encoder; returns ``att``. Mostly RETURNN's usual MLP attention
    (``enc_ctx`` outside the loop + the state's projection, tanh, one energy per frame), else a
    ``dot`` of the encoder with the state's projection (RETURNN's templates often refuse that one)."""
    if rng.random() < 0.75:
        ctx_dim = rng.choice([2, 3, 4])
        network["enc_ctx"] = {"class": "linear", "activation": None, "with_bias": False, "n_out": ctx_dim,
                              "from": "enc"}
        unit["att_q"] = {"class": "linear", "activation": None, "with_bias": False, "n_out": ctx_dim, "from": "s"}
        unit["att_in"] = {"class": "combine", "kind": "add", "from": ["base:enc_ctx", "att_q"]}
        unit["att_tanh"] = {"class": "activation", "activation": "tanh", "from": "att_in"}
        unit["att_energy"] = {"class": "linear", "activation": None, "with_bias": False, "n_out": 1,
                              "from": "att_tanh"}
    else:
        unit["att_q"] = {"class": "linear", "activation": None, "with_bias": rng.random() < 0.5, "n_out": enc_dim,
                         "from": "s"}
        unit["att_energy"] = {"class": "dot", "from": ["base:enc", "att_q"], "red1": "F", "red2": "F", "var1": "T",
                              "var2": None}
    unit["att_weights"] = {"class": "softmax_over_spatial", "from": "att_energy"}
    unit["att"] = {"class": "generic_attention", "weights": "att_weights", "base": "base:enc"}
    return "att"


def _history(unit: Dict[str, Layer], rng: random.Random) -> str:
    """``cum_concat`` of the states so far, reduced or attended over; returns the layer's name."""
    hist_dim = {"__dim__": "dec_history", "dimension": None, "kind": "spatial"}  # golden_dims.py marker
    unit["hist"] = {"class": "cum_concat", "from": "s", "out_spatial_dim": hist_dim}
    if rng.random() < 0.5:
        unit["hist_red"] = {"class": "reduce", "mode": rng.choice(["sum", "max", "mean"]), "axis": hist_dim,
                            "from": "hist"}
        return "hist_red"
    unit["hist_energy"] = {"class": "dot", "from": ["hist", "s"], "reduce": "F", "var1": hist_dim, "var2": None,
                           "add_var2_if_empty": False}
    unit["hist_weights"] = {"class": "softmax_over_spatial", "from": "hist_energy", "axis": hist_dim}
    unit["hist_att"] = {"class": "dot", "from": ["hist_weights", "hist"], "reduce": hist_dim, "var1": None,
                        "var2": "F"}
    return "hist_att"


def draw(seed: int, index: int) -> Dict[str, Any]:
    """Case ``index`` of ``seed``: keyword arguments of make_goldens.py's ``case()`` (``search=True``)."""
    rng = random.Random("search/%i/%i" % (seed, index))
    in_dim, n_classes = rng.choice([3, 4, 5]), rng.choice([3, 4, 6])
    teacher = rng.random() < 0.05  # the choice fed its target: the loop runs over the given classes
    extern = {"data": {"dim": in_dim}, "classes": {"dim": n_classes, "sparse": True}}
    if teacher:
        extern["classes"]["available_for_inference"] = True
    enc_dim = rng.choice([3, 4])
    network: Dict[str, Layer] = {}
    if rng.random() < 0.3:
        network["enc"] = {"class": "rec", "unit": rng.choice(["nativelstm2", "lstm"]), "n_out": enc_dim, "from": "data"}
    else:
        network["enc"] = {"class": "linear", "activation": "tanh", "n_out": enc_dim, "from": "data"}
    unit: Dict[str, Layer] = {"emb": {"class": "linear", "activation": None, "with_bias": False,
                                      "n_out": rng.choice([2, 3, 4]), "from": "prev:output"}}
    with_att = rng.random() < 0.6
    state_in = ["emb"] + (["prev:att"] if with_att and rng.random() < 0.5 else [])
    time_sync = rng.random() < 0.15  # a loop over the encoder's frames: each sequence ends at its length
    if time_sync:
        state_in.append("data:source")
    if not with_att and rng.random() < 0.5:  # the encoder's mean (else every sequence decodes the same)
        network["enc_mean"] = {"class": "reduce", "mode": "mean", "axis": "T", "from": "enc"}
        state_in.append("base:enc_mean")
    state_kind, unit["s"] = _state(rng, state_in)
    readout = ["s"]
    if with_att:
        readout.append(_attention(network, unit, rng, enc_dim))
    if rng.random() < 0.3:
        readout.append(_history(unit, rng))
    log_prob = rng.random() < 0.3
    if log_prob:
        unit["prob"] = {"class": "linear", "activation": "log_softmax", "n_out": n_classes, "from": readout}
    else:
        unit["prob"] = {"class": "softmax", "n_out": n_classes, "from": readout}
    choice: Layer = {"class": "choice", "from": "prob", "target": "classes", "beam_size": rng.choice([1, 2, 3, 4])}
    if log_prob:
        choice["input_type"] = "log_prob"
    if rng.random() < 0.3:
        choice["length_normalization"] = False
    elif rng.random() < 0.2:
        choice["length_normalization_exponent"] = rng.choice([0.5, 2.0])
    choice["initial_output"] = rng.choice([0, "zeros"])  # RETURNN needs one for sparse data
    if rng.random() < 0.15:
        choice[rng.choice(["prob_scale", "base_beam_score_scale"])] = rng.choice([0.5, 2.0])
    if teacher:
        choice["search"] = False
        if rng.random() < 0.5:  # RETURNN builds a teacher-forced search only so (see RETURNN_BUG)
            choice["add_to_beam_scores"] = False
    unit["output"] = choice
    if time_sync:
        network["output"] = {"class": "rec", "from": "enc", "target": "classes", "unit": unit}
    else:
        unit["end"] = {"class": "compare", "from": "output", "value": 0}
        max_len = rng.choice(["max_len_from('base:enc')", "max_len_from('base:enc') * 2",
                              "max_len_from('base:enc') + 1", 6])
        network["output"] = {"class": "rec", "from": [], "target": "classes", "max_seq_len": max_len, "unit": unit}
    if rng.random() < 0.15:
        network["output"]["include_eos"] = True
    decide: Layer = {"class": "decide", "from": "output", "is_output_layer": True}
    if rng.random() < 0.1:
        decide["length_normalization"] = True
    network["decision"] = decide
    lens = rng.choice(LENS)
    family = "search[%s%s%s%s%s,beam%i%s]" % (
        "timesync:" if time_sync else "", state_kind, "+att" if with_att else "",
        "+" + readout[-1] if readout[-1].startswith("hist") else "", "+logp" if log_prob else "",
        choice["beam_size"], (",teacher" + ("-noscores" if "add_to_beam_scores" in choice else "")) if teacher else "")
    return dict(name="fuzzsearch_%i_%i" % (seed, index), family=family, network=network, extern=extern,
                config={}, output="decision", lens={"data": lens, "classes": rng.choice(LENS)}, search=True,
                notes="returnn_fuzz --kind search seed %i index %i" % (seed, index))


# ----------------------------------------------------------------------------------------------------------------
# This engine's side
# ----------------------------------------------------------------------------------------------------------------

def _build(meta: Dict[str, Any]):
    """Our network of a search case (Dim markers resolved as ours), built for search."""
    from returnn.config import Config
    from returnn.extern_data import extern_data_from_config
    from returnn.tensor import Dim, batch_dim
    from returnn.tf.network import TFNetwork
    from test_returnn_goldens import golden_dims
    kinds = {"spatial": Dim.Types.Spatial, "feature": Dim.Types.Feature, "unspecified": Dim.Types.Unspecified}
    resolve = golden_dims.make_resolver(lambda name, n, kind: Dim(n, kind=kinds[kind], description=name), batch_dim,
                                        meta["extern_data"], meta["network"])
    extern = extern_data_from_config(Config({"extern_data": resolve(copy.deepcopy(meta["extern_data"]))}))
    return TFNetwork(resolve(copy.deepcopy(meta["network"])), extern, search=True, eval_flag=False,
                     train_flag=False)  # make_goldens: TFNetwork(train_flag=False, search_flag=True)


def _run(net, output: str, batch: Dict[str, Any]):
    """(labels (B, T), lengths (B,), our best scores (B,) or None) of the output layer."""
    import tensorflow as tf
    from returnn.tf.layers import RunContext
    from returnn.tf.layers.rec_net.search import BeamSearchRun
    runs: List[Any] = []
    orig = BeamSearchRun.run

    def run(self):  # the search's final scores (BeamSearchRun.best_scores)
        runs.append(self)
        return orig(self)

    BeamSearchRun.run = run
    try:
        out = net.forward({k: tf.constant(v) for k, v in batch.items()}, RunContext(False), only=[output])[output]
    finally:
        BeamSearchRun.run = orig
    data = out.data
    value = tf.transpose(out.tensor, [data.batch_dim_axis] + [i for i in range(data.batch_ndim)
                                                               if i != data.batch_dim_axis]).numpy()
    lens = out.seq_len
    scores = getattr(runs[-1], "best_scores", None) if runs else None
    return value, None if lens is None else np.asarray(lens), None if scores is None else np.asarray(scores)


def _ours_builds(c: Dict[str, Any]) -> None:
    """This engine builds and searches case ``c`` on random inputs (raises when it cannot)."""
    from test_returnn_goldens import case_config
    meta = {"extern_data": c["extern"], "network": c["network"], "config": c["config"]}
    with case_config(meta):
        net = _build(meta)
        rng = np.random.RandomState(0)
        batch = {}
        for key, spec in c["extern"].items():
            lens = np.array(c["lens"][key], np.int32)
            shape = [3, int(lens.max())]
            batch[key] = (rng.randint(0, spec["dim"], shape).astype(np.int32) if spec.get("sparse")
                          else rng.normal(size=shape + [spec["dim"]]).astype(np.float32))
            batch[key + ":seq_len"] = lens
        _run(net, c["output"], batch)


RETURNN_BUG = ("RETURNN's template of a choice with search False in a search net, where no other choice searches, "
               "has a beam of beam_size (add_to_beam_scores defaults to True there) that its output lacks: "
               "SearchChoices asserts 'without beam' (beam_size > 1; the error shown is then LayerNotFound of its "
               "target, a stray template its reconstruction loop meets) or copy_as_prev_time_frame asserts a beam "
               "(beam_size 1); the layer itself adds scores only where its sources have a beam. Built here as "
               "teacher forcing (as RETURNN with add_to_beam_scores False)")


def returnn_bug(c: Dict[str, Any]) -> Optional[str]:
    """RETURNN_BUG where case ``c``'s rec unit meets it (a choice with ``search: False`` whose
    ``add_to_beam_scores`` is not False, no searching choice beside it), else None."""
    for layer in c["network"].values():
        unit = layer.get("unit") if layer.get("class") == "rec" else None
        if not isinstance(unit, dict):
            continue
        choices = [o for o in unit.values() if isinstance(o, dict) and o.get("class") == "choice"]
        if choices and all(o.get("search") is False for o in choices) and any(
                o.get("add_to_beam_scores") is not False for o in choices):
            return RETURNN_BUG
    return None


def verdict(c: Dict[str, Any], out_dir: str, returnn_error: Optional[str]) -> Tuple[str, str]:
    """(verdict, detail) of one search case (see returnn_fuzz's doc; RBUG: RETURNN fails by
    :data:`RETURNN_BUG`, this engine builds and searches it)."""
    from returnn.tf.returnn_params import returnn_param_shapes, set_returnn_param_values
    from test_returnn_goldens import case_config, load_case
    try:
        if returnn_error is not None:
            _ours_builds(c)
            bug = returnn_bug(c)
            return ("RBUG", bug + " | RETURNN: " + returnn_error) if bug else ("LAX", "RETURNN: " + returnn_error)
        meta, arrays = load_case(os.path.join(out_dir, c["name"] + ".npz"))
        with case_config(meta):
            net = _build(meta)
            shapes = {k: list(v) for k, v in returnn_param_shapes(net).items()}
            if shapes != meta["param_shapes"]:
                return "DIFFER", "parameters differ from RETURNN's: ours %s, RETURNN %s" % (
                    sorted(shapes.items()), sorted(meta["param_shapes"].items()))
            set_returnn_param_values(net, {name: arrays["param:" + name] for name in meta["params"]})
            batch = {}
            for key in meta["extern_data"]:
                batch[key], batch[key + ":seq_len"] = arrays["in:" + key], arrays["len:" + key]
            labels, lens, scores = _run(net, meta["output_layer"], batch)
    except Exception as exc:  # noqa: BLE001 - our refusal or crash is the finding
        from returnn_fuzz import failure_verdict
        return failure_verdict(exc, returnn_error)
    return compare(arrays, labels, lens, scores)


def compare(arrays: Dict[str, np.ndarray], labels: np.ndarray, lens: Optional[np.ndarray],
            scores: Optional[np.ndarray]) -> Tuple[str, str]:
    """AGREE or DIFFER of our decoded hypotheses against RETURNN's (labels, lengths, the chosen scores)."""
    gold, gold_lens = arrays["out"], arrays.get("out_len")
    if gold_lens is None or lens is None:
        return "DIFFER", "lengths: RETURNN %s, ours %s" % (gold_lens, lens)
    if lens.tolist() != gold_lens.tolist():
        return "DIFFER", "lengths: RETURNN %s, ours %s; labels RETURNN %s, ours %s" % (
            gold_lens.tolist(), lens.tolist(), _hyps(gold, gold_lens), _hyps(labels, lens))
    if _hyps(labels, lens) != _hyps(gold, gold_lens):
        return "DIFFER", "labels: RETURNN %s, ours %s" % (_hyps(gold, gold_lens), _hyps(labels, lens))
    if "scores" in arrays and scores is not None:
        gold_scores = arrays["scores"].reshape(-1)
        if gold_scores.shape != scores.shape or not np.allclose(scores, gold_scores, rtol=SCORE_TOL, atol=SCORE_TOL):
            return "DIFFER", "scores: RETURNN %s, ours %s (labels %s)" % (
                gold_scores.tolist(), scores.tolist(), _hyps(gold, gold_lens))
    return "AGREE", ""


def _hyps(values: np.ndarray, lens: np.ndarray) -> List[List[int]]:
    return [values[b, :int(n)].tolist() for b, n in enumerate(lens)]
