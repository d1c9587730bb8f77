"""RETURNN's segmental-model layers: windows over time folded into the batch, and length targets.

A sequence of length L gives L windows, one starting at each frame s, covering frames
``[s, min(s + window, L))``; the windows of all sequences form a new batch of N = sum(L) entries
(sequence-major, then start frame), each a sequence of ``min(window, L - s)`` frames.

- ``segment_input``: the frames of each window ``(N, window, F)`` (positions past the sequence's end
  hold its frame 0, as RETURNN's).
- ``unsegment_input``: the inverse arrangement of ``segment_input``'s output: back to one entry per
  sequence (a window of one frame ends a sequence), frame t holding the frames at t of the windows
  that started at t, t - 1, ..., t - window + 1 (features ``window * F``, in that order; windows
  before a sequence's start come from the entries before, as RETURNN's).
- ``classes_to_segments``: per window position the relative class frequencies up to it
  ``(N, window, num_classes)``.
- ``classes_to_length_distribution``: per window ``(N, 1, window)``: at the last frame of each run of
  equal classes, the run's length over the window's length.
- ``classes_to_length_distribution_global``: per window the distribution of segment ends: the k-th
  class change gets ``weight_falloff (1 - weight_falloff)^k`` (from ``min_length`` on), plus 1e-4 at
  the window's last frame, normalised, optionally smoothed with the kernel ``target_smoothing``;
  ``(N, 1, window)`` (``broadcast_axis`` "feature": ``(N, window, 1)``).
- ``segment_alignment``: input pairs (class, segment end) over time -> ``(N, window, num_classes)``:
  the class one-hot times the end distribution of the window (first end 1, plus 1e-4 at its last frame).
- ``apply_length_distribution``: ``from`` [scores, length distribution]: scores times the
  distribution (its batch, feature, time axes in that order) ** ``length_model_scale``.
- ``normalize_length_scores``: ``p`` -> ``p ** (t + 1)`` along the time axis.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence

import numpy as np
import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim, DimTypes
from returnn.tensor.dim import batch_dim
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.helpers import check_sources, concat_inputs, concat_output
from returnn.tf.layers.options import Option, one_of, positive_int


def windows(sizes: tf.Tensor, n_time: tf.Tensor, window: int):
    """(batch index, start, end) of every window (N,) each, in sequence-major order."""
    pos = tf.cast(tf.where(tf.sequence_mask(sizes, n_time)), tf.int32)  # (N, 2)
    b, s = pos[:, 0], pos[:, 1]
    return b, s, tf.minimum(s + window, tf.gather(sizes, b))


class _WindowLayer(Layer):
    """One source with a time axis, batch-major; the output is a new batch of windows."""

    options = (Option("window", 15, "frames per window"),)

    def _setup(self, sources: Sequence[Data], sparse: bool) -> Data:
        check_sources(self, sources)
        self.in_data, self.plan = concat_output(self, sources)
        data = self.in_data
        if data.time_dim_axis is None or data.batch_dim_axis is None or (sparse and not data.sparse):
            raise NetworkError("%s: the input must be %s(batch, time, ...), got %s"
                               % (self.desc, "sparse " if sparse else "", data.short_repr()))
        self.window = positive_int(self.desc, "window", self.opt("window"))
        self.w_dim = Dim(None, kind=DimTypes.Spatial, description="%s:window" % self.layer_name)
        return data

    def _input(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = concat_inputs(self, self.in_data, self.plan, sources, ctx).copy_as_batch_time_feature()
        return x.with_tensor(x.masked(0))


@register_layer
class SegmentInputLayer(_WindowLayer):
    """See the module docstring."""

    layer_class = "segment_input"

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        data = self._setup(sources, False)
        rest = [d for i, d in enumerate(data.dims) if i not in (data.batch_dim_axis, data.time_dim_axis)]
        self.output = Data(name, dims=[batch_dim, self.w_dim] + rest, dtype=data.dtype, sparse_dim=data.sparse_dim)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = self._input(sources, ctx)
        b, s, e = windows(x.seq_len, tf.shape(x.tensor)[1], self.window)
        frames = s[:, None] + tf.range(self.window)  # (N, W)
        frames = tf.where(frames >= tf.gather(x.seq_len, b)[:, None], 0, frames)
        y = tf.gather_nd(x.tensor, tf.stack([tf.broadcast_to(b[:, None], tf.shape(frames)), frames], -1))
        return LayerOutput(y, self.output, {self.w_dim: e - s})


@register_layer
class UnsegmentInputLayer(Layer):
    """See the module docstring."""

    layer_class = "unsegment_input"

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources, 1, 1)
        data = sources[0]
        if data.time_dim_axis is None or data.feature_dim_axis is None or data.batch_ndim != 3:
            raise NetworkError("%s: the input must be windows (batch, window, feature), got %s"
                               % (self.desc, data.short_repr()))
        self.t_dim = Dim(None, kind=DimTypes.Spatial, description="%s:time" % name)
        # window * F features: the window's extent is known per batch only (scalar sizes)
        self.f_dim = Dim(None, kind=DimTypes.Feature, description="%s:window-feature" % name)
        self.output = Data(name, dims=[batch_dim, self.t_dim, self.f_dim], dtype=data.dtype, feature_dim_axis=2)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = sources[0].copy_as_batch_time_feature()
        sizes = x.seq_len
        n, w = tf.shape(x.tensor)[0], tf.shape(x.tensor)[1]
        ends = tf.cast(tf.reshape(tf.where(tf.equal(sizes, 1)), [-1]), tf.int32) + 1  # a window of 1 ends a sequence
        starts = tf.concat([[0], ends[:-1]], 0)
        lens = ends - starts
        t = tf.range(tf.reduce_max(tf.concat([lens, [0]], 0)))  # no window at all: 0, not the int minimum
        src = (starts[:, None, None] + t[None, :, None] - tf.range(w)[None, None, :]) % n  # (B', T, W)
        y = tf.gather_nd(tf.transpose(x.tensor, [1, 0, 2]), tf.stack([tf.broadcast_to(tf.range(w), tf.shape(src)),
                                                                      src], -1))  # (B', T, W, F)
        shape = tf.shape(y)
        y = tf.reshape(y, [shape[0], shape[1], shape[2] * shape[3]])
        y = tf.where(tf.sequence_mask(lens, shape[1])[:, :, None], y, tf.zeros_like(y))
        return LayerOutput(y, self.output, {self.t_dim: lens, self.f_dim: shape[2] * shape[3]})


@register_layer
class ClassesToSegmentsLayer(_WindowLayer):
    """See the module docstring."""

    layer_class = "classes_to_segments"
    options = (Option("num_classes", None, "classes of the input"),)

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        self._setup(sources, True)
        self.n = positive_int(self.desc, "num_classes", self.opt("num_classes"))
        feat = Dim(self.n, kind=DimTypes.Feature, description="%s:classes" % name)
        self.output = Data(name, dims=[batch_dim, self.w_dim, feat])

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = self._input(sources, ctx)
        b, s, e = windows(x.seq_len, tf.shape(x.tensor)[1], self.window)
        frames = s[:, None] + tf.range(self.window)
        inside = frames < e[:, None]
        labels = tf.gather_nd(x.tensor, tf.stack([tf.broadcast_to(b[:, None], tf.shape(frames)),
                                                  tf.where(inside, frames, 0)], -1))
        onehot = tf.one_hot(labels, self.n) * tf.cast(inside, tf.float32)[..., None]
        y = tf.cumsum(onehot, axis=1) / tf.cast(tf.range(1, self.window + 1), tf.float32)[None, :, None]
        return LayerOutput(y, self.output, {self.w_dim: e - s})


class _LengthTargetLayer(_WindowLayer):
    """Per window one length distribution over the window's frames: (N, 1, window)."""

    def _length_template(self, name: str, sources: Sequence[Data], feature_last: bool = True) -> None:
        self._setup(sources, True)
        self.one = Dim(None, kind=DimTypes.Spatial, description="%s:one" % name)
        w = Dim(self.window, kind=DimTypes.Feature, description="%s:window" % name)
        if feature_last:
            self.output = Data(name, dims=[batch_dim, self.one, w], time_dim_axis=1, feature_dim_axis=2)
        else:
            one = Dim(1, kind=DimTypes.Feature, description="%s:one-feature" % name)
            w_t = Dim(self.window, kind=DimTypes.Spatial, description="%s:window" % name)
            self.output = Data(name, dims=[batch_dim, w_t, one], time_dim_axis=1, feature_dim_axis=2)
            self.one = None

    def _windows(self, x: LayerOutput):
        """(labels (N, W) with -1 past the window's end, changed (N, W) bool: the last frame of a run, size (N,))."""
        b, s, e = windows(x.seq_len, tf.shape(x.tensor)[1], self.window)
        frames = s[:, None] + tf.range(self.window + 1)
        inside = frames < e[:, None]
        labels = tf.gather_nd(x.tensor, tf.stack([tf.broadcast_to(b[:, None], tf.shape(frames)),
                                                  tf.where(inside, frames, 0)], -1))
        labels = tf.where(inside, labels, -1)
        changed = tf.not_equal(labels[:, :-1], labels[:, 1:]) & inside[:, :-1]
        return labels[:, :-1], changed, e - s

    def _finish(self, y: tf.Tensor) -> LayerOutput:
        if self.one is None:
            return LayerOutput(y[:, :, None], self.output, {})
        return LayerOutput(y[:, None, :], self.output, {self.one: tf.ones([tf.shape(y)[0]], tf.int32)})


@register_layer
class ClassesToLengthDistributionLayer(_LengthTargetLayer):
    """See the module docstring."""

    layer_class = "classes_to_length_distribution"
    options = (Option("scale", 1.0, "RETURNN: unused", noop="RETURNN's layer reads it nowhere"),)

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        self._length_template(name, sources)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        labels, changed, size = self._windows(self._input(sources, ctx))
        k = tf.range(self.window)[None]
        # the run length ending at k: k minus the previous run end (-1 before the first)
        ends = tf.where(changed, k, -1)
        last_end = tf.scan(lambda acc, col: tf.maximum(acc, col), tf.transpose(ends), initializer=tf.fill(
            [tf.shape(ends)[0]], -1))  # (W, N): the latest run end up to and including k
        last_end = tf.transpose(last_end)
        prev_end = tf.concat([tf.fill([tf.shape(ends)[0], 1], -1), last_end[:, :-1]], 1)
        y = tf.where(changed, tf.cast(k - prev_end, tf.float32) / tf.cast(size[:, None], tf.float32), 0.0)
        return self._finish(y)


@register_layer
class ClassesToLengthDistributionGlobalLayer(_LengthTargetLayer):
    """See the module docstring."""

    layer_class = "classes_to_length_distribution_global"
    options = (
        Option("weight_falloff", 1.0, "the k-th segment end gets weight_falloff * (1 - weight_falloff) ** k"),
        Option("target_smoothing", None, "odd-length kernel smoothing the distribution"),
        Option("min_length", 1, "no segment end before this frame"),
        Option("broadcast_axis", "time", "'time': (N, 1, window); 'feature': (N, window, 1)"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        axis = one_of(self.desc, "broadcast_axis", self.opt("broadcast_axis"), ("time", "feature"))
        self._length_template(name, sources, axis == "time")
        w = self.window
        smooth = self.opt("target_smoothing")
        self.smoothing = None
        if smooth is not None:
            if len(smooth) % 2 != 1:
                raise NetworkError("%s: target_smoothing needs an odd length, got %r" % (self.desc, smooth))
            kernel = np.asarray(smooth, np.float32) / float(sum(smooth))
            centre = len(kernel) // 2
            mat = np.zeros((w, w), np.float32)
            for i, v in enumerate(kernel):
                mat += np.diag([v] * (w - abs(i - centre)), i - centre)
            subs = []
            for i in range(w):
                sub = np.eye(w, dtype=np.float32)
                sub[:i + 1, :i + 1] = mat[:i + 1, :i + 1]
                subs.append(sub / sub.sum(axis=1, keepdims=True))
            self.smoothing = np.stack(subs)  # (size - 1 -> matrix)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        labels, changed, size = self._windows(self._input(sources, ctx))
        w, falloff = self.window, float(self.opt("weight_falloff"))
        end_dist = tf.pow(1.0 - falloff, tf.range(0.0, float(w))) * falloff  # by the end's rank
        rank = tf.cumsum(tf.cast(changed, tf.int32), axis=1, exclusive=True)
        y = tf.where(changed, tf.gather(end_dist, tf.minimum(rank, w - 1)), 0.0)
        min_len = int(self.opt("min_length"))
        if min_len > 1:
            y *= tf.concat([tf.zeros([min_len - 1]), tf.ones([w - min_len + 1])], 0)
        y += tf.cast(tf.equal(tf.range(w)[None], size[:, None] - 1), tf.float32) * 1e-4
        y = y / tf.reduce_sum(y, axis=1, keepdims=True)
        if self.smoothing is not None:
            y = tf.einsum("nw,nwv->nv", y, tf.gather(tf.constant(self.smoothing), size - 1))
        return self._finish(y)


@register_layer
class SegmentAlignmentLayer(_WindowLayer):
    """See the module docstring."""

    layer_class = "segment_alignment"
    options = (Option("num_classes", None, "classes of the input"),)

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        self._setup(sources, True)
        self.n = positive_int(self.desc, "num_classes", self.opt("num_classes"))
        self.w_static = Dim(self.window, kind=DimTypes.Spatial, description="%s:window" % name)
        self.w_dyn = Dim(None, kind=DimTypes.Spatial, description="%s:window-size" % name)
        feat = Dim(self.n, kind=DimTypes.Feature, description="%s:classes" % name)
        self.output = Data(name, dims=[batch_dim, self.w_dyn, feat])

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = self._input(sources, ctx)
        pairs = tf.reshape(x.tensor, [tf.shape(x.tensor)[0], -1, 2])  # (B, T/2, (class, end))
        sizes = x.seq_len // 2
        w = self.window
        b, s, e = windows(sizes, tf.shape(pairs)[1], w)
        frames = s[:, None] + tf.range(w)  # the one-hot part is not cut at the window's end (RETURNN's)
        padded = tf.pad(pairs, [[0, 0], [0, w - 1], [0, 0]])
        picked = tf.gather_nd(padded, tf.stack([tf.broadcast_to(b[:, None], tf.shape(frames)), frames], -1))
        onehot = tf.one_hot(picked[..., 0], self.n)
        inside = frames < e[:, None]
        ended = tf.not_equal(picked[..., 1], 0) & inside
        first = ended & tf.equal(tf.cumsum(tf.cast(ended, tf.int32), axis=1), 1)
        dist = tf.cast(first, tf.float32) + tf.cast(tf.equal(tf.range(w)[None], (e - s)[:, None] - 1), tf.float32) * 1e-4
        dist = dist / tf.reduce_sum(dist, axis=1, keepdims=True)
        return LayerOutput(onehot * dist[..., None], self.output, {self.w_dyn: tf.fill(tf.shape(b), w)})


@register_layer
class ApplyLengthDistributionLayer(Layer):
    """See the module docstring."""

    layer_class = "apply_length_distribution"
    options = (Option("length_model_scale", 1.0, "exponent of the length distribution"),)

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources, 2, 2)
        dist = sources[1]
        if None in (dist.batch_dim_axis, dist.feature_dim_axis, dist.time_dim_axis) or dist.batch_ndim != 3:
            raise NetworkError("%s: the length distribution must be (batch, time, feature), got %s"
                               % (self.desc, dist.short_repr()))
        self.output = sources[0].copy(name)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x, dist = sources
        d = dist.data
        first = [d.batch_dim_axis, d.feature_dim_axis] if x.data.batch_dim_axis == 0 else \
            [d.feature_dim_axis, d.batch_dim_axis]
        mod = tf.transpose(dist.tensor, first + [d.time_dim_axis])
        scale = float(self.opt("length_model_scale"))
        if scale != 1.0:
            mod = tf.pow(mod, scale)
        return self.make_output(x.tensor * mod, [x])


@register_layer
class NormalizeLengthScoresLayer(Layer):
    """See the module docstring."""

    layer_class = "normalize_length_scores"

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources, 1, 1)
        if sources[0].time_dim_axis is None or sources[0].batch_dim_axis is None:
            raise NetworkError("%s: the input needs batch and time axes, got %s" % (self.desc, sources[0].short_repr()))
        self.output = sources[0].copy(name)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = sources[0]
        t_ax = x.data.time_dim_axis
        steps = tf.cast(tf.range(tf.shape(x.tensor)[t_ax]), tf.float32) + 1.0
        shape = [1] * x.data.batch_ndim
        shape[t_ax] = -1
        return self.make_output(tf.exp(tf.math.log(x.tensor) * tf.reshape(steps, shape)), [x])
