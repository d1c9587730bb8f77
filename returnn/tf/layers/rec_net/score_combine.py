"""RETURNN's ``custom_score_combine`` of a ``choice`` in beam search (see
:mod:`returnn.tf.layers.rec_net.search`).

At the choice, instead of ``prob_scale * scores_in + base_beam_score_scale * scores_base`` the config's
function gives the combined scores, called as RETURNN calls it, with keyword arguments:

- ``layer``: the choice as config code sees a layer (:class:`ChoiceView`): ``name``, ``output`` (the
  template: ``layer.output.dim`` is the label count), ``network`` (``get_config()``,
  ``get_rec_step_index()``, ...), ``sources`` and ``explicit_search_sources`` (a list, or a dict as the
  config gave it) whose ``output.placeholder`` is their value in this step, ``(batch * beam,)`` rows
  in the order of the hypotheses the step started with (``prev:x`` is x of each hypothesis' last step);
- ``scores_in``: the log-scores of the choice's source, ``(batch, base_beam_in, dim)`` (a hypothesis
  that ended may only continue with label 0 at score 0, RETURNN's ``filter_ended_scores``);
- ``scores_base``: the beam scores so far, ``(batch, base_beam_in, 1)``;
- ``t`` (the step, int32 scalar), ``end_flags`` (``(batch, base_beam_in)``, the hypotheses that ended),
  ``batch_dim`` (scalar), ``scores_beam_in`` (the beam size), ``base_beam_in`` (1 in the first step,
  where only one hypothesis per sequence exists, else the beam size; as RETURNN, int32 scalars).

It returns ``(batch, base_beam_in, dim)`` combined scores, of which the beam keeps the best. The
transducer configs recombine hypotheses with it: those with equal label strings (an explicit
search source) keep one, with the max or the log-sum-exp of their scores.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Union

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tf.layers.base import LayerOutput, RunContext
from returnn.tf.layers.eval_layer import DataValue, NetworkView, SourceView


class ChoiceView:
    """A searching ``choice`` as RETURNN's ``custom_score_combine`` sees its ``layer`` argument."""

    def __init__(self, layer: Any, ctx: Optional[RunContext], sources: List[SourceView],
                 explicit: Union[List[SourceView], Dict[str, SourceView]]):
        self.name = layer.layer_name
        self.output = layer.output
        self.network = NetworkView(ctx)
        self.sources = sources
        self.explicit_search_sources = explicit
        self.input_type = layer.opt("input_type")
        self.length_normalization = bool(layer.opt("length_normalization"))
        self.cheating = layer.opt("cheating")  # RETURNN's ChoiceLayer keeps the option as given (False, True, "exclusive")
        self.search_flag = True

    def __repr__(self) -> str:
        return "<choice %r (search)>" % self.name


def choice_view(layer: Any, ctx: Optional[RunContext], source_values: Mapping[str, LayerOutput],
                explicit_values: Mapping[str, LayerOutput]) -> ChoiceView:
    """The :class:`ChoiceView` of ``layer`` with its sources' and explicit search sources' step values
    (by reference name); a dict ``explicit_search_sources`` keeps its keys."""
    sources = [SourceView(n, DataValue(v)) for n, v in source_values.items()]
    views = {n: SourceView(n, DataValue(v)) for n, v in explicit_values.items()}
    spec = layer.opt("explicit_search_sources")
    explicit: Union[List[SourceView], Dict[str, SourceView]] = \
        {k: views[v] for k, v in spec.items()} if isinstance(spec, Mapping) else [views[n] for n in layer.explicit_names]
    return ChoiceView(layer, ctx, sources, explicit)


def custom_combine(fn: Callable[..., Any], view: ChoiceView, logp: tf.Tensor, scores: tf.Tensor, ended: tf.Tensor,
                   t: tf.Tensor, base_batch: tf.Tensor, k: int, pad_value: float) -> tf.Tensor:
    """The combined scores ``(B, K, V)`` of ``fn`` (see the module docstring) from this step's log-scores
    ``logp`` ``(B * K, V)`` (ended rows filtered already), the beam scores ``scores`` ``(B, K)`` and
    the end flags ``ended`` ``(B * K,)``; in the first step the rows of the hypotheses that do not
    exist yet are ``pad_value``."""
    n_labels = tf.shape(logp)[-1]
    base_beam_in = tf.where(t > 0, tf.constant(k), tf.constant(1))
    scores_in = tf.reshape(logp, [base_batch, k, n_labels])[:, :base_beam_in]
    scores_base = scores[:, :base_beam_in, None]
    end_flags = tf.reshape(ended, [base_batch, k])[:, :base_beam_in]
    out = fn(layer=view, scores_in=scores_in, scores_base=scores_base, t=t, end_flags=end_flags,
             batch_dim=base_batch, scores_beam_in=tf.constant(k), base_beam_in=base_beam_in)
    if not isinstance(out, tf.Tensor) or out.shape.rank not in (None, 3):
        raise NetworkError("%s: custom_score_combine must return a tensor (batch, base_beam_in, dim), got %r"
                           % (view.name, out))
    out = tf.cast(out, tf.float32)
    out = tf.pad(out, [[0, 0], [0, k - tf.shape(out)[1]], [0, 0]], constant_values=pad_value)
    return tf.reshape(out, [base_batch, k, n_labels])
