"""``choice``: the label chosen at each output step of a rec loop.

In training and evaluation (teacher forcing) the choice is its ``target``: the layer's value is
the target's labels, and its ``from`` (the label distribution) only feeds the loss of that layer.
The rec layer then gives this layer the target as its only source. In search, the rec loop does
the choice itself (beam search over the scores of ``from``, see
:mod:`returnn.tf.layers.rec_net.search`); the options below are read there.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence

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
        Option("input_type", "prob", "what 'from' gives: 'prob', 'log_prob' or 'regression'"),
        Option("length_normalization", True, "search: rank finished hypotheses by score / length"),
        Option("length_normalization_exponent", 1.0, "search: exponent of the length in that division"),
        Option("explicit_search_source", None, "RETURNN: the layer whose search beam this one follows",
               noop="a rec unit searches with exactly one choice here, so its beam is the only one to follow"),
        Option("explicit_search_sources", None, "RETURNN: the layers whose search beams this one follows",
               noop="a rec unit searches with exactly one choice here, so its beam is the only one to follow"),
        Option("search", None, "None: search in the search task only (True: also in training, False: never; "
                               "both only where they agree with None here)"),
        Option("cheating", False, "RETURNN: keep the reference label in the beam", only=(False,)),
        Option("scheduled_sampling", False, "only False is supported"),
        Option("prob_scale", 1.0, "search: factor of the log-probabilities"),
        Option("base_beam_score_scale", 1.0, "search: factor of the previous beam score (RETURNN's)"),
        Option("random_sample_scale", 0.0, "only 0 is supported"),
        Option("custom_score_combine", None, "not supported"),
        Option("source_beam_sizes", None, "not supported"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        for key, ok in (("scheduled_sampling", False), ("random_sample_scale", 0.0), ("custom_score_combine", None),
                        ("source_beam_sizes", None)):
            if self.opt(key) not in (ok, None):
                raise NetworkError("%s: option %r is not supported (got %r)" % (self.desc, key, self.opt(key)))
        if not self.opt("target"):
            raise NetworkError("%s: needs a 'target' (the labels in training)" % self.desc)
        if not sources:
            raise NetworkError("%s: no source" % self.desc)
        target = sources[-1]
        if not target.sparse:  # in search: built on the label scores, the loop picks the labels
            if target.feature_dim is None or target.feature_dim_axis != target.batch_ndim - 1:
                raise NetworkError("%s: source %s must be label scores (feature axis last)"
                                   % (self.desc, target.short_repr()))
            dims = [d for i, d in enumerate(target.dims) if i != target.feature_dim_axis]
            self.output = Data(name, dims=dims, sparse_dim=target.feature_dim)
            self.searching = True
            if self.opt("search") is False:
                raise NetworkError("%s: search False in a search network (RETURNN then feeds the target) is not "
                                   "supported here" % self.desc)
            return
        self.searching = False
        if self.opt("search") is True:
            raise NetworkError("%s: search True outside the search task (RETURNN then searches in training) is "
                               "not supported here" % self.desc)
        self.output = target.copy(name)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        if self.searching:
            raise NetworkError("%s: in search, the choice is made by its rec layer's loop" % self.desc)
        target = sources[-1]
        return target.with_tensor(target.tensor, self.output)


@register_layer
class DecideLayer(Layer):
    """``decide``: the final labels of a searched rec layer. The rec layer's value in search is
    already the best hypothesis per sequence (and the target under teacher forcing), so this is
    its value unchanged; configs put ``edit_distance`` losses on it."""

    layer_class = "decide"
    options = (
        Option("length_normalization", False, "RETURNN: divide the beam scores by the lengths before picking the "
                                              "best (the rec layer's search already picked it by the choice's "
                                              "length_normalization)", only=(False,)),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        if len(sources) != 1:
            raise NetworkError("%s: needs exactly one source" % self.desc)
        self.output = sources[0].copy(name)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        return sources[0].with_tensor(sources[0].tensor, self.output)
