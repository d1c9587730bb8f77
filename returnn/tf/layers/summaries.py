"""RETURNN's monitoring layers, whose values do not feed the model:

- ``image_summary``: its input unchanged. RETURNN also writes the input ((T-dec, T-enc, B, 1),
  e.g. attention weights) as TensorBoard images; that is not done here (``max_outputs`` has no
  effect). The output, and so everything computed from it, is the same.
- ``framewise_statistics``: a scalar 0 (RETURNN's output value too). RETURNN collects frame error
  rate, cross-entropy and label-probability histograms (with and without the silence label) of
  its source for its log; those statistics are not reported here. It builds nothing trainable.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.helpers import check_sources
from returnn.tf.layers.options import Option


@register_layer
class ImageSummaryLayer(Layer):
    """See the module docstring."""

    layer_class = "image_summary"
    options = (
        Option("max_outputs", 3, "RETURNN: images per step in TensorBoard",
               noop="TensorBoard images are not written here; the layer's output is its input either way"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources, 1, 1)
        if self.opts.get("n_out") is not None:
            raise NetworkError("%s: do not set n_out (RETURNN: it is the input's)" % self.desc)
        self.output = sources[0].copy(name)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        return self.make_output(sources[0].tensor, sources)


@register_layer
class FramewiseStatisticsLayer(Layer):
    """See the module docstring."""

    layer_class = "framewise_statistics"
    options = (
        Option("sil_label_idx", None, "RETURNN: the silence label of the statistics",
               noop="the statistics are not reported here; the output is 0 either way"),
        Option("histogram_num_bins", 20, "RETURNN: bins of the label-probability histogram",
               noop="the statistics are not reported here; the output is 0 either way"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources)
        bins = self.opt("histogram_num_bins")
        if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1:  # RETURNN: tf.stack of no bins fails
            raise NetworkError("%s: histogram_num_bins must be an int >= 1, got %r (RETURNN fails on it)"
                               % (self.desc, bins))
        self.output = Data(name, dims=(), dtype="int32")

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        return self.make_output(tf.constant(0, tf.int32))
