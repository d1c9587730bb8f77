"""Losses and distances as layer outputs: RETURNN's ``loss``, ``sparse_softmax_cross_entropy_with_logits``,
``ctc_loss`` and ``edit_distance``. None of them is a training loss by itself (put ``"loss": "as_is"``
on it, or on a layer reading it).

- ``loss``: ``loss_`` on the ``from`` layer against ``target_`` (a data key, default the network's
  target, or ``layer:NAME``), per frame: the source's shape without its feature axis, float32. As
  RETURNN's LossLayer only gives per-frame values for losses with one value per frame, ``loss_`` is
  ``ce`` here (``loss_opts_`` are the ce loss's options). ``use_error``: the frame error (1.0 where
  the argmax is not the label) instead; ``NAME/loss`` and ``NAME/error`` give both. Padded frames: 0.
- ``sparse_softmax_cross_entropy_with_logits``: ``logits`` (layer) against int ``targets`` (layer)
  over ``axis`` (default the feature axis): the logits' shape without that axis.
- ``ctc_loss``: ``logits`` (B, T, D) against sparse ``targets`` (B, U) (D or D - 1 classes):
  per sequence the negative log-probability of the target over its CTC alignments (``max_approx``:
  of the best alignment only; ``label_loop`` False: RNA topology, each label takes one frame),
  ``blank_index`` (default -1, the last class), ``logits_normalized`` (the logits are
  log-probabilities already: no log-softmax first). Output (B,) float32. As RETURNN's native CTC
  (returnn/tf/ctc_native.py): a sequence without an alignment costs 0 (error signal softmax(logits);
  ``max_approx``: inf), with ``tf_native_ctc_zero_infinity`` / ``behavior_version`` >= 30 0 without
  gradient.
- ``edit_distance``: Levenshtein distance between the sparse ``a`` and ``b`` along
  ``a_spatial_dim``/``b_spatial_dim`` (default their time axes), per remaining position (e.g. (B,)),
  int32, not normalised.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.helpers import check_sources, common_dims
from returnn.tf.layers.options import Option
from returnn.tf.layers.output import align_tensor

NEG_INF = float("-inf")


def _without(data: Data, axis: int, name: str) -> Data:
    return data.copy_template_excluding_axis(axis).copy(name)


def _aligned(value: LayerOutput, out: Data, layer) -> tf.Tensor:
    """``value`` put in ``out``'s axis order: its axes matched by dim tag (others broadcast), or, when
    it has as many axes, one to one by tag, kind and size (RETURNN's ``copy_compatible_to``: e.g. the
    time axis of a target data key on the time axis of the output)."""
    from returnn.tf.layers.cond import match_dims
    common, maps = common_dims([out.dims, value.data.dims])
    if len(common) == len(out.dims):
        return align_tensor(value.tensor, maps[1], len(out.dims))
    axes = match_dims(out.dims, value.data.dims)
    if axes is None:
        raise NetworkError("%s: %s does not fit into %s" % (layer.desc, value.data.short_repr(), out.short_repr()))
    return tf.transpose(value.tensor, axes)


@register_layer
class LossLayer(Layer):
    """See the module docstring."""

    layer_class = "loss"
    sub_output_names = ("loss", "error")
    options = (
        Option("loss_", None, "the loss computed: 'ce'"),
        Option("target_", None, "its target: a data key (default: the network's target) or 'layer:NAME'"),
        Option("loss_opts_", None, "options of that loss (ce's loss_opts)"),
        Option("use_error", False, "the output is the frame error instead of the loss"),
    )

    @staticmethod
    def _target_source(opts: Mapping[str, Any], default_target: str) -> str:
        target = opts.get("target_") or default_target
        if not isinstance(target, str):
            raise NetworkError("layer (loss): 'target_' must be a data key or 'layer:NAME', got %r" % (target,))
        return target[len("layer:"):] if target.startswith("layer:") else "data:" + target

    @classmethod
    def outer_sources(cls, name: str, opts: Mapping[str, Any], default_target: str = "classes",
                      search: bool = False) -> List[str]:
        src = opts.get("from", ["data"])
        return ([src] if isinstance(src, str) else list(src)) + [cls._target_source(opts, default_target)]

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42, **_outer: Any):
        super().__init__(name, opts, sources, seed)
        from returnn.tf.losses import CrossEntropyLoss
        check_sources(self, sources, 2, 2)
        out, target = sources
        if self.opt("loss_") != "ce":
            raise NetworkError("%s: loss_ %r is not supported here (only 'ce': RETURNN's LossLayer gives per-frame "
                               "values only for losses with one value per frame)" % (self.desc, self.opt("loss_")))
        self.loss = CrossEntropyLoss(name, dict(self.opt("loss_opts_") or {}), "target_")
        if out.feature_dim_axis is None or out.sparse:
            raise NetworkError("%s: the source must have a feature axis, got %s" % (self.desc, out.short_repr()))
        self.frames = _without(out, out.feature_dim_axis, name).copy(dtype="float32")
        if target.sparse and target.dim != out.dim:
            raise NetworkError("%s: target %s has %s classes, the source %s" % (self.desc, target.short_repr(),
                                                                                 target.dim, out.dim))
        self.output = self.frames

    def sub_template(self, sub: str) -> Data:
        return self.frames.copy("%s/%s" % (self.layer_name, sub))

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        from returnn.tf.losses import int32_labels
        out, target = sources[0], int32_labels(sources[1])
        ax = out.data.feature_dim_axis
        out_last = out.copy_transpose([a for a in range(out.data.batch_ndim) if a != ax] + [ax])
        rest_shape = tf.shape(out_last.tensor)[:-1]
        if target.data.sparse:
            labels = tf.broadcast_to(_aligned(target, self.frames, self), rest_shape)
        else:
            t_ax = target.data.feature_dim_axis
            t_last = target.copy_transpose([a for a in range(target.data.batch_ndim) if a != t_ax] + [t_ax])
            labels = tf.broadcast_to(_aligned(t_last, self.frames.copy_insert_dim(
                target.data.dims[t_ax], -1), self), tf.shape(out_last.tensor))
        tgt = LayerOutput(labels, target.data.copy(dims=self.frames.dims if target.data.sparse else
                                                   list(self.frames.dims) + [target.data.dims[t_ax]],
                                                   time_dim_axis=None, feature_dim_axis=None if target.data.sparse
                                                   else self.frames.batch_ndim), out.sizes)
        mask = LayerOutput(labels, self.frames, out.sizes).full_mask() if target.data.sparse else \
            LayerOutput(labels[..., 0], self.frames, out.sizes).full_mask()
        if mask is not None:
            mask = tf.broadcast_to(mask, rest_shape)
        loss, wrong = self.loss.frame_values(out_last, tgt, None if mask is None else tf.cast(mask, tf.float32))
        if mask is not None:
            loss, wrong = tf.where(mask, loss, 0.0), tf.where(mask, wrong, 0.0)
        values = {"loss": self.make_output(loss, [out]), "error": self.make_output(wrong, [out])}
        result = values["error" if self.opt("use_error") else "loss"]
        result.sub_outputs = {k: LayerOutput(v.tensor, self.sub_template(k), v.sizes) for k, v in values.items()}
        return result


@register_layer
class SparseSoftmaxCrossEntropyWithLogitsLayer(Layer):
    """See the module docstring."""

    layer_class = "sparse_softmax_cross_entropy_with_logits"
    ref_options = ("logits", "targets")
    default_from = ()
    options = (
        Option("logits", None, "layer with the logits"),
        Option("targets", None, "layer with the int targets"),
        Option("axis", None, "the class axis of the logits (default: its feature axis)"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        for key in self.ref_options:
            if not isinstance(opts.get(key), str):
                raise NetworkError("layer %r (%s): %r must name a layer, got %r" % (name, self.layer_class, key,
                                                                                    opts.get(key)))
        super().__init__(name, opts, sources, seed)
        logits, targets = sources[-2], sources[-1]
        axis = self.opt("axis")
        if axis is None and logits.feature_dim_axis is None:
            raise NetworkError("%s: the logits %s have no feature axis" % (self.desc, logits.short_repr()))
        self.ax = logits.feature_dim_axis if axis is None else self.axis(logits, axis, "axis")
        if "int" not in targets.dtype:
            raise NetworkError("%s: the targets must be int, got %s" % (self.desc, targets.short_repr()))
        if isinstance(axis, Dim) and targets.sparse_dim != axis:
            raise NetworkError("%s: the targets' sparse dim must be the axis %r" % (self.desc, axis))
        if targets.sparse and targets.dim != logits.dims[self.ax].dimension:
            raise NetworkError("%s: targets %s do not match the %s classes of the logits" % (
                self.desc, targets.short_repr(), logits.dims[self.ax].dimension))
        self.output = _without(logits, self.ax, name).copy(dtype="float32")
        if len(common_dims([self.output.dims, targets.dims])[0]) != self.output.batch_ndim:
            # RETURNN's copy_compatible_to matches the targets' axes by dim tag (e.g. a data key with a time axis
            # of its own, not declared the same as the logits' (same_dim_tags_as), fails there)
            raise NetworkError("%s: the targets %s have axes the logits %s do not have" % (
                self.desc, targets.short_repr(), logits.short_repr()))

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        logits, targets = sources[-2], sources[-1]
        n = logits.data.batch_ndim
        perm = [a for a in range(n) if a != self.ax] + [self.ax]
        x = tf.transpose(logits.tensor, perm)
        labels = tf.broadcast_to(_aligned(targets, self.output, self), tf.shape(x)[:-1])
        mask = LayerOutput(labels, self.output, logits.sizes).full_mask()
        if mask is not None:
            labels = tf.where(mask, labels, tf.zeros_like(labels))
        y = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.cast(labels, tf.int32), logits=x)
        return self.make_output(y, [logits])


def _logsumexp(x: tf.Tensor, axis: int) -> tf.Tensor:
    """``reduce_logsumexp`` whose gradient is 0, not NaN, where all values are -inf (unreachable states)."""
    top = tf.stop_gradient(tf.reduce_max(x, axis=axis, keepdims=True))
    top = tf.where(tf.math.is_finite(top), top, 0.0)
    total = tf.reduce_sum(tf.exp(x - top), axis=axis)
    some = total > 0
    return tf.where(some, tf.math.log(tf.where(some, total, 1.0)) + tf.squeeze(top, axis), NEG_INF)


def ctc_scores(logp: tf.Tensor, t_len: tf.Tensor, labels: tf.Tensor, u_len: tf.Tensor, blank: int,
               label_loop: bool = True, use_max: bool = False) -> tf.Tensor:
    """Log-probability (B,) of ``labels`` (B, U) over the alignments to ``logp`` (B, T, V): the sum
    (``use_max``: the best one) over CTC paths (``label_loop`` False: RNA, each label one frame).
    States: blank, l1, blank, ..., lU, blank (as :func:`returnn.tf.layers.align.viterbi_align`)."""
    n_b, n_t = tf.shape(logp)[0], tf.shape(logp)[1]
    n_u = tf.shape(labels)[1]
    n_s = 2 * n_u + 1
    ext = tf.concat([tf.reshape(tf.stack([tf.fill([n_b, n_u], blank), labels], axis=2), [n_b, 2 * n_u]),
                     tf.fill([n_b, 1], blank)], 1)
    s_idx = tf.range(n_s)[None, :]
    is_label = tf.equal(s_idx % 2, 1)
    valid = s_idx < (2 * u_len + 1)[:, None]
    ext_prev2 = tf.concat([tf.fill([n_b, 2], -1), ext[:, :-2]], 1)
    allow_skip = is_label & (s_idx >= 2) & (tf.not_equal(ext, ext_prev2) | (not label_loop))
    allow_self = tf.broadcast_to(tf.logical_not(is_label) | label_loop, [n_b, n_s])
    emit = tf.transpose(tf.gather(logp, ext, axis=2, batch_dims=1), [1, 0, 2])  # (T, B, S)
    neg = tf.fill([n_b, n_s], NEG_INF)
    alpha0 = tf.where(valid & (s_idx < 2), emit[0], neg)
    combine = tf.reduce_max if use_max else _logsumexp

    def body(t, alpha):
        stay = tf.where(allow_self, alpha, neg)
        from1 = tf.concat([neg[:, :1], alpha[:, :-1]], 1)
        from2 = tf.where(allow_skip, tf.concat([neg[:, :2], alpha[:, :-2]], 1), neg)
        new = tf.where(valid, combine(tf.stack([stay, from1, from2], -1), axis=-1) + emit[t], neg)
        return t + 1, tf.where((t < t_len)[:, None], new, alpha)

    _, alpha = tf.while_loop(lambda t, *_: t < n_t, body, [tf.constant(1), alpha0],
                             shape_invariants=[tf.TensorShape([]), tf.TensorShape([None, None])])
    last = 2 * u_len
    ends = tf.stack([tf.gather(alpha, last, batch_dims=1),
                     tf.where(u_len > 0, tf.gather(alpha, tf.maximum(last - 1, 0), batch_dims=1), NEG_INF)], 1)
    score = combine(ends, axis=1)
    return tf.where(t_len > 0, score, tf.where(u_len > 0, NEG_INF, 0.0))


@register_layer
class CtcLossLayer(Layer):
    """See the module docstring."""

    layer_class = "ctc_loss"
    ref_options = ("logits", "targets")
    default_from = ()
    options = (
        Option("logits", None, "layer with the scores (B, T, D) before the softmax"),
        Option("targets", None, "layer with the sparse labels (B, U)"),
        Option("logits_normalized", False, "the logits are log-probabilities already"),
        Option("blank_index", -1, "class index of blank (negative: from the end)"),
        Option("max_approx", False, "the best alignment only (Viterbi) instead of the sum"),
        Option("label_loop", True, "False: RNA topology (each label exactly one frame)"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        for key in self.ref_options:
            if not isinstance(opts.get(key), str):
                raise NetworkError("layer %r (ctc_loss): %r must name a layer, got %r" % (name, key, opts.get(key)))
        super().__init__(name, opts, sources, seed)
        logits, targets = sources[-2], sources[-1]
        if logits.feature_dim_axis is None or logits.time_dim_axis is None or logits.batch_ndim != 3:
            raise NetworkError("%s: logits must be (batch, time, classes), got %s" % (self.desc, logits.short_repr()))
        if not targets.sparse or targets.time_dim_axis is None or targets.batch_ndim != 2:
            raise NetworkError("%s: targets must be sparse (batch, time), got %s" % (self.desc, targets.short_repr()))
        if targets.dim not in (logits.dim, logits.dim - 1):
            raise NetworkError("%s: targets with %i classes do not match logits with %i (with or without blank)"
                               % (self.desc, targets.dim, logits.dim))
        self.blank = int(self.opt("blank_index")) % logits.dim
        self.output = Data(name, dims=[logits.dims[logits.batch_dim_axis]], dtype="float32")

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        logits, targets = (s.copy_as_batch_time_feature() for s in sources[-2:])
        from returnn.tf.ctc_native import native_ctc_loss, zero_infinity_default
        loss = native_ctc_loss(tf.cast(logits.tensor, tf.float32), logits.seq_len, targets.tensor, targets.seq_len,
                               self.blank, label_loop=bool(self.opt("label_loop")),
                               max_approx=bool(self.opt("max_approx")),
                               logits_normalize=not self.opt("logits_normalized"),
                               zero_infinity=zero_infinity_default(), num_labels=targets.data.dim)
        return LayerOutput(loss, self.output)


@register_layer
class EditDistanceLayer(Layer):
    """See the module docstring."""

    layer_class = "edit_distance"
    ref_options = ("a", "b")
    default_from = ()
    options = (
        Option("a", None, "layer with the first label sequences"),
        Option("b", None, "layer with the second label sequences"),
        Option("a_spatial_dim", None, "axis of a (default: its time axis)"),
        Option("b_spatial_dim", None, "axis of b (default: its time axis)"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        for key in self.ref_options:
            if not isinstance(opts.get(key), str):
                raise NetworkError("layer %r (edit_distance): %r must name a layer, got %r" % (name, key, opts.get(key)))
        super().__init__(name, opts, sources, seed)
        a, b = sources[-2], sources[-1]
        self.axes = []
        for key, data in (("a_spatial_dim", a), ("b_spatial_dim", b)):
            if self.opt(key) is None and data.time_dim_axis is None:
                raise NetworkError("%s: %s has no time axis; give %r" % (self.desc, data.short_repr(), key))
            self.axes.append(data.time_dim_axis if self.opt(key) is None else self.axis(data, self.opt(key), key))
        rest_a = a.copy_template_excluding_axis(self.axes[0])
        rest_b = b.copy_template_excluding_axis(self.axes[1])
        dims, maps = common_dims([rest_a.dims, rest_b.dims], layer=self)
        self.maps = maps
        self.output = Data(name, dims=dims, dtype="int32")

    def _flat(self, x: LayerOutput, axis: int, m: List[int]) -> tf.Tensor:
        """(N, T) labels in the common layout of the other axes (broadcast), and the (N,) lengths."""
        n = len(self.output.dims)
        rest = [a for a in range(x.data.batch_ndim) if a != axis]
        t = tf.transpose(x.tensor, rest + [axis])
        t = align_tensor(t, list(m) + [n], n + 1)
        return t

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        a, b = sources[-2], sources[-1]
        n = len(self.output.dims)
        xs, lens = [], []
        for x, axis, m in ((a, self.axes[0], self.maps[0]), (b, self.axes[1], self.maps[1])):
            xs.append(self._flat(x, axis, m))
            size = x.size(axis)
            if size is None:
                size = tf.fill([], tf.shape(x.tensor)[axis])
            rest_data = x.data.copy_template_excluding_axis(axis)
            if len(size.shape):
                size = align_tensor(size, [m[rest_data.dims.index(x.data.dims[x.data.batch_dim_axis])]], n)
            lens.append(size)
        shape = tf.broadcast_dynamic_shape(tf.shape(xs[0])[:-1], tf.shape(xs[1])[:-1])  # also for 0 frames
        flat, flat_lens = [], []
        for x, size in zip(xs, lens):
            x = tf.broadcast_to(x, tf.concat([shape, tf.shape(x)[-1:]], 0))
            flat.append(tf.reshape(x, [-1, tf.shape(x)[-1]]))
            flat_lens.append(tf.reshape(tf.broadcast_to(size, shape), [-1]))
        sparse = [_to_sparse(x, tf.sequence_mask(s, tf.shape(x)[1])) for x, s in zip(flat, flat_lens)]
        dist = tf.edit_distance(sparse[0], sparse[1], normalize=False)
        return self.make_output(tf.reshape(tf.cast(dist, tf.int32), shape), [a, b])


def _to_sparse(labels: tf.Tensor, mask: tf.Tensor) -> tf.SparseTensor:
    indices = tf.where(mask)
    return tf.SparseTensor(indices, tf.cast(tf.gather_nd(labels, indices), tf.int64), tf.cast(tf.shape(labels), tf.int64))
