"""``choice``: the label chosen at each output step of a rec loop.

In training and evaluation (teacher forcing) the choice is its ``target``: the layer's value is
the target's labels, and its ``from`` (the label distribution) only feeds the loss of that layer.
The rec layer then gives this layer the target as its only source. In search, the rec loop does
the choice itself (beam search over the scores of ``from``, see
:mod:`returnn.tf.layers.rec_net.search`); the options below are read there.

Several sources with a list of targets (RETURNN's multi-target choice): one choice of a label per
source; ``NAME/out_0``, ``NAME/out_1``, ... are the labels of each (in training: the targets), the
layer's value is ``out_0``'s. In search, each source is pruned to its ``source_beam_sizes`` best
labels, every combination scores the sum of its labels' log-probabilities, and the beam keeps the
best combinations (RETURNN's ``_prune_and_combine_sources``).

``scheduled_sampling`` (True, or ``{"gold_mixin_prob": p}``), where the choice does not search: as
RETURNN's, the label is drawn from the scores of its one source (``input_type`` prob or log_prob; a
regression choice takes the prediction itself), and with ``gold_mixin_prob`` each sequence takes its
target instead with probability ``p`` (drawn per step); in training and evaluation alike. The rec
layer then gives this layer its target first and the scores second. No gradient through the draw.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.options import Option


@register_layer
class ChoiceLayer(Layer):
    """See the module docstring."""

    layer_class = "choice"
    options = (
        Option("beam_size", 1, "hypotheses kept per sequence in search"),
        Option("input_type", "prob", "what 'from' gives: 'prob', 'log_prob' or 'regression' (a prediction of the "
                                     "target's dense frames: no labels chosen, the value is the target in "
                                     "training, the prediction in search, with beam_size 1)", only=("prob", "log_prob", "regression")),
        Option("length_normalization", True, "search: rank finished hypotheses by score / length"),
        Option("length_normalization_exponent", 1.0, "search: exponent of the length in that division"),
        Option("explicit_search_source", None, "search: a layer this choice also depends on (RETURNN's; "
                                               "custom_score_combine reads it as layer.explicit_search_sources[0])"),
        Option("explicit_search_sources", None, "search: layers (a list or a dict of names) this choice also depends "
                                                "on; custom_score_combine reads them (their values of this step) as "
                                                "layer.explicit_search_sources"),
        Option("search", None, "None: search where the network searches (the search task, extra.search, "
                               "search_train_network_layers); True: also in training (the rec layer then searches "
                               "and gives all hypotheses); False: never (its value is its target, in search its "
                               "score of the target label is added to the hypotheses' scores)"),
        Option("add_to_beam_scores", None, "a choice that does not search (search False) where another one does: "
                                           "its score of its target label is added to the hypotheses' scores (None: "
                                           "where the network searches; False: not, and its 'from' is not built)",
               only=(None, True, False)),
        Option("cheating", False, "search: the reference label kept as the beam's last hypothesis (True; 'exclusive': "
                                  "not also among the others); outside search the reference is fed anyway, so it "
                                  "changes nothing (as in RETURNN); rec_net/search_scores.py",
               only=(False, True, "exclusive", None)),
        Option("scheduled_sampling", False, "where it does not search: sample the label from 'from' (True or "
                                             "{'gold_mixin_prob': p}: the target with probability p)"),
        Option("keep_beams", False, "search: each incoming hypothesis keeps beam_size / beam_in continuations "
                                    "(after the first step its best label), RETURNN's; no effect where the choice "
                                    "does not search"),
        Option("prob_scale", 1.0, "search: factor of the log-probabilities"),
        Option("base_beam_score_scale", 1.0, "search: factor of the previous beam score (RETURNN's)"),
        Option("random_sample_scale", 0.0, "search: factor of Gumbel noise added to the combined scores (RETURNN's "
                                           "sampling; rec_net/search_scores.py)"),
        Option("custom_score_combine", None, "search: a config function (RETURNN's keywords layer, scores_in, "
                                             "scores_base, t, end_flags, batch_dim, scores_beam_in, base_beam_in) "
                                             "giving the combined scores, in place of prob_scale and "
                                             "base_beam_score_scale (rec_net/score_combine.py)"),
        Option("source_beam_sizes", None, "search with several sources: labels kept per source before the "
                                          "combinations are scored (default beam_size each)"),
    )

    @classmethod
    def has_sub_output(cls, opts: Mapping[str, Any], sub: str) -> bool:
        """``out_I`` of a choice with a list of targets (RETURNN's sub-layers of a multi-target choice)."""
        targets = opts.get("target")
        return (isinstance(targets, (list, tuple)) and sub.startswith("out_") and sub[4:].isdigit()
                and int(sub[4:]) < len(targets))

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        self.gold_prob = _gold_mixin_prob(self.desc, self.opt("scheduled_sampling"))
        targets = self.opt("target")
        self.sampling = self.gold_prob is not None and not isinstance(targets, (list, tuple)) and len(sources) == 2
        if self.sampling:  # (the rec layer gives the target, then the scores: rec_net/layer.py)
            self._init_sampling(sources)
            return
        if self.opt("custom_score_combine") is not None and not callable(self.opt("custom_score_combine")):
            raise NetworkError("%s: custom_score_combine must be a function, got %r" % (self.desc, self.opt("custom_score_combine")))
        self.explicit_names = explicit_search_names(self.desc, opts)
        n_from = len(_as_list(opts.get("from", "data")))
        if self.explicit_names and len(sources) == n_from + len(self.explicit_names) and not sources[0].sparse:
            sources = sources[:n_from]  # in search, the rec unit appends them (rec_net/layer.py)
        else:
            self.explicit_names = []  # outside search (RETURNN: none)
        targets = self.opt("target")
        if not sources:
            raise NetworkError("%s: no source" % self.desc)
        if not targets and (sources[0].sparse or self.opt("input_type") == "regression"):
            raise NetworkError("%s: needs a 'target' (the labels in training; without one RETURNN must search)" % self.desc)
        self.targets = list(targets) if isinstance(targets, (list, tuple)) else [targets] if targets else []
        if len(self.targets) > 1 and len(sources) != len(self.targets):
            raise NetworkError("%s: %i targets %s need one source each, got %i" % (
                self.desc, len(self.targets), self.targets, len(sources)))
        if not isinstance(targets, (list, tuple)):
            sources = sources[-1:]
        self.searching = not sources[0].sparse  # in search: built on the label scores, the loop picks the labels
        if self.opt("input_type") == "regression":
            self._init_regression(sources)
            return
        if self.searching:
            parts = []
            for src in sources:
                if src.sparse or src.feature_dim is None or src.feature_dim_axis != src.batch_ndim - 1:
                    raise NetworkError("%s: source %s must be label scores (feature axis last)"
                                       % (self.desc, src.short_repr()))
                dims = [d for i, d in enumerate(src.dims) if i != src.feature_dim_axis]
                parts.append(Data(name, dims=dims, sparse_dim=src.feature_dim))
            beams = self.opt("source_beam_sizes")
            if beams is not None and (not isinstance(beams, (list, tuple)) or len(beams) != len(sources) or not all(
                    isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in beams)):
                raise NetworkError("%s: source_beam_sizes must be one int > 0 per source (%i), got %r"
                                   % (self.desc, len(sources), beams))
        else:
            if not all(src.sparse for src in sources):
                raise NetworkError("%s: the targets %s must be class labels" % (self.desc, self.targets))
            parts = list(sources)
        self.parts = [part.copy("%s/out_%i" % (name, i)) for i, part in enumerate(parts)]
        self.output = parts[0].copy(name)

    def _init_sampling(self, sources: Sequence[Data]) -> None:
        """Scheduled sampling: the target's template; the scores' labels must be the target's."""
        target, scores = sources
        self.targets, self.searching = [self.opt("target")], False
        regression = self.opt("input_type") == "regression"
        if regression:
            if target.sparse or scores.sparse or target.dim != scores.dim:
                raise NetworkError("%s: scheduled_sampling with input_type 'regression' needs a dense prediction of "
                                   "the target's dim, got %s for target %s" % (self.desc, scores.short_repr(),
                                                                               target.short_repr()))
        elif not target.sparse or scores.sparse or scores.feature_dim is None or \
                scores.feature_dim_axis != scores.batch_ndim - 1 or scores.dim != target.dim:
            raise NetworkError("%s: scheduled_sampling samples from label scores (feature axis last, %s labels as "
                               "target %r), got %s" % (self.desc, target.dim, self.targets[0], scores.short_repr()))
        self.parts = [target.copy("%s/out_0" % self.name)]
        self.output = target.copy(self.name)

    def take_target_templates(self, template_of: Callable[[str], Optional[Data]]) -> None:
        """In search, as RETURNN's ``ChoiceLayer.get_out_data_from_opts``: a choice with a
        ``target`` has the target's template (its class dim and dtype), not one made from the
        scores (the same size: RETURNN asserts it): the labels' dim tag is the target's, as in
        training."""
        if not self.searching:
            return
        for i, key in enumerate(self.targets):
            target = template_of(key) if isinstance(key, str) else None
            if target is None or not target.sparse:
                continue
            if target.sparse_dim.dimension != self.parts[i].sparse_dim.dimension:  # RETURNN asserts it
                raise NetworkError("%s: in search, its scores (source %i) have %s labels, its target %r has %s"
                                   % (self.desc, i, self.parts[i].sparse_dim.dimension, key,
                                      target.sparse_dim.dimension))
            self.parts[i] = self.parts[i].copy(sparse_dim=target.sparse_dim, dtype=target.dtype)
        self.output = self.parts[0].copy(self.name)

    def _init_regression(self, sources: Sequence[Data]) -> None:
        """RETURNN's regression choice: a dense prediction fed back as is; with teacher forcing the
        value is the target's frames (dense, as the target)."""
        if len(self.targets) != 1 or len(sources) != 1:
            raise NetworkError("%s: input_type 'regression' takes one source and one target" % self.desc)
        if sources[0].sparse:
            raise NetworkError("%s: input_type 'regression' needs a dense target, %r is sparse %s"
                               % (self.desc, self.targets[0], sources[0].short_repr()))
        self.searching = False
        self.parts = [sources[0].copy("%s/out_0" % self.name)]
        self.output = sources[0].copy(self.name)

    def sub_template(self, sub: str) -> Data:
        if not self.has_sub_output(self.opts, sub):
            raise NetworkError("%s: no sub-output %r (a choice with %i target(s) has %s)" % (
                self.desc, sub, len(self.targets), ", ".join("out_%i" % i for i in range(len(self.parts)))
                if len(self.targets) > 1 else "none"))
        return self.parts[int(sub[4:])]

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        if self.searching:
            raise NetworkError("%s: in search, the choice is made by its rec layer's loop" % self.desc)
        if self.sampling:
            return self._sample(sources, ctx)
        sources = sources if len(self.targets) > 1 else sources[-1:]
        out = sources[0].with_tensor(sources[0].tensor, self.output)
        if len(self.targets) > 1:
            out.sub_outputs = {"out_%i" % i: src.with_tensor(src.tensor, self.parts[i])
                               for i, src in enumerate(sources)}
        return out


    def _sample(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        """RETURNN's scheduled sampling: a label drawn from the scores (log of prob, or log_prob), the
        prediction itself for regression; the target instead where a draw per sequence is < gold_mixin_prob."""
        target, scores = sources
        gold = tf.cast(target.tensor, self.output.dtype)
        if self.opt("input_type") == "regression":
            fed = tf.stop_gradient(tf.cast(scores.tensor, gold.dtype))
        else:
            x = tf.cast(scores.tensor, tf.float32)
            logits = x if self.opt("input_type") == "log_prob" else tf.math.log(tf.maximum(x, 1e-30))
            n = tf.shape(logits)[-1]
            drawn = tf.random.stateless_categorical(tf.reshape(logits, [-1, n]), 1, ctx.layer_seed(self.layer_name, 3))
            fed = tf.cast(tf.reshape(drawn, tf.shape(logits)[:-1]), gold.dtype)
        if self.gold_prob:  # one draw per sequence and step (per label, or per frame of a regression)
            shape = tf.shape(gold) if self.output.sparse else tf.shape(gold)[:-1]
            mix = tf.random.stateless_uniform(shape, ctx.layer_seed(self.layer_name, 5)) < self.gold_prob
            fed = tf.where(mix if self.output.sparse else mix[..., None], gold, fed)
        return target.with_tensor(fed, self.output)


def _gold_mixin_prob(desc: str, value: Any) -> Optional[float]:
    """RETURNN's ``scheduled_sampling``: False/None (off: None), True (0.0) or ``{"gold_mixin_prob": p}``."""
    if value in (False, None, {}):
        return None
    if value is True:
        return 0.0
    if isinstance(value, Mapping) and set(value) <= {"gold_mixin_prob"}:
        p = value.get("gold_mixin_prob", False)
        if p is False or p is None:
            return 0.0
        if isinstance(p, (int, float)) and not isinstance(p, bool) and 0.0 <= p <= 1.0:
            return float(p)
    raise NetworkError("%s: scheduled_sampling must be True or {'gold_mixin_prob': p} with 0 <= p <= 1, got %r"
                       % (desc, value))


def _as_list(value: Any) -> List[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def explicit_search_names(desc: str, opts: Mapping[str, Any]) -> List[str]:
    """The layer names of ``explicit_search_source`` / ``explicit_search_sources`` (a list, or a dict's values
    by sorted key, RETURNN's order of its dependencies)."""
    one, many = opts.get("explicit_search_source"), opts.get("explicit_search_sources")
    if one and many:
        raise NetworkError("%s: give explicit_search_source or explicit_search_sources, not both" % desc)
    names = [one] if one else [many[k] for k in sorted(many)] if isinstance(many, Mapping) else list(many or [])
    if not all(isinstance(n, str) for n in names):
        raise NetworkError("%s: explicit_search_sources must name layers, got %r" % (desc, one or many))
    return names


@register_layer
class DecideLayer(Layer):
    """``decide``: the final labels of a searched rec layer. In the search task the rec layer's
    value is already the best hypothesis per sequence (and the target under teacher forcing), so
    this is its value unchanged; a search in a training network gives all hypotheses with their
    beam (:mod:`returnn.tf.layers.beam_values`): this picks each sequence's best by its score
    (RETURNN's ``DecideLayer``). Configs put ``edit_distance`` or ``search_score`` losses on it."""

    layer_class = "decide"
    options = (
        Option("length_normalization", False, "divide the beam scores by the hypotheses' lengths before picking the "
                                              "best (in the search task the searched rec layer it reads picks its "
                                              "best hypothesis that way)"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        if len(sources) != 1:
            raise NetworkError("%s: needs exactly one source" % self.desc)
        self.output = sources[0].copy(name)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        from returnn.tf.layers.beam_values import decide
        return decide(self.desc, sources[0], self.output, bool(self.opt("length_normalization")))
