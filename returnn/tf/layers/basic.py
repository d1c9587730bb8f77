"""Basic layers: linear, softmax, copy, dropout, activation, combine, source, reduce.

Also shared helpers for other layer modules: masking of padded frames and the projection of
(possibly sparse) sources by one weight matrix (a sparse source is an embedding lookup).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import tensorflow as tf

from returnn.errors import NetworkError, known_list
from returnn.tf.activations import get_activation
from returnn.tf.layers.base import (
    Layer, LayerOutput, OutputSpec, RunContext, concat_sources, concat_specs, register_layer,
)


# ---------------------------------------------------------------- helpers

def masked_tensor(x: LayerOutput, value: float = 0.0) -> tf.Tensor:
    """``x.tensor`` with padded frames replaced by ``value`` (unchanged without time axis)."""
    if not x.spec.has_time or x.seq_len is None:
        return x.tensor
    mask = x.mask()
    if not x.spec.sparse:
        mask = mask[:, :, None]
    return tf.where(mask, x.tensor, tf.cast(value, x.tensor.dtype))


def zero_padded(tensor: tf.Tensor, seq_len: tf.Tensor) -> tf.Tensor:
    """Sets padded frames of a dense (B, T, D) tensor to 0."""
    mask = tf.sequence_mask(seq_len, maxlen=tf.shape(tensor)[1])
    return tf.where(mask[:, :, None], tensor, tf.zeros_like(tensor))


def dense_matmul(x: tf.Tensor, w: tf.Tensor) -> tf.Tensor:
    """``x @ w`` on the last axis of ``x`` for any rank (shapes may be unknown)."""
    n_out = tf.shape(w)[-1]
    flat = tf.reshape(x, [-1, tf.shape(x)[-1]])
    out = tf.matmul(flat, w)
    return tf.reshape(out, tf.concat([tf.shape(x)[:-1], [n_out]], axis=0))


def check_sources(layer_name: str, layer_class: str, specs: Sequence[OutputSpec], n_min: int = 1) -> None:
    """Raises if there are fewer than ``n_min`` sources."""
    if len(specs) < n_min:
        raise NetworkError("layer %r (%s): needs at least %i source(s) in 'from'" % (layer_name, layer_class, n_min))


def dense_source_spec(layer: Layer, specs: Sequence[OutputSpec]) -> OutputSpec:
    """Spec of the feature-concatenated sources of a layer that needs dense input."""
    check_sources(layer.layer_name, layer.layer_class, specs)
    spec = concat_specs(specs, layer.layer_name)
    if spec.sparse:
        raise NetworkError("layer %r (%s): sparse input not supported" % (layer.layer_name, layer.layer_class))
    return spec


def dropout_sources(layer: Layer, sources: List[LayerOutput], ctx: RunContext) -> List[LayerOutput]:
    """Applies the layer's input dropout to each dense source (each with its own seed)."""
    if not layer.dropout or not ctx.train:
        return sources
    out = []
    for i, src in enumerate(sources):
        if src.spec.sparse:
            out.append(src)
            continue
        keep = 1.0 - layer.dropout
        noise = tf.random.stateless_uniform(tf.shape(src.tensor), seed=ctx.layer_seed(layer.layer_name, salt=i))
        out.append(src.with_tensor(tf.where(noise < keep, src.tensor / keep, tf.zeros_like(src.tensor))))
    return out


def project_sources(sources: List[LayerOutput], w: tf.Tensor) -> tf.Tensor:
    """Sum over sources of ``source @ w[rows of that source]``, i.e. the linear map of the
    feature-concatenation. A sparse source selects rows by gather (= one-hot times W); its padded
    frames are mapped to index 0 so garbage indices cannot fail. Padded frames of dense sources
    are zeroed first (so NaN/inf garbage cannot reach the weight gradient). Sources without time axis are
    broadcast over time when others have one.
    """
    offset = 0
    parts = []
    for src in sources:
        rows = w[offset:offset + src.spec.dim]
        offset += src.spec.dim
        if src.spec.sparse:
            parts.append(tf.gather(rows, masked_tensor(src, 0)))
        else:
            parts.append(dense_matmul(masked_tensor(src, 0.0), rows))
    any_time = any(s.spec.has_time for s in sources)
    total = None
    for src, part in zip(sources, parts):
        if any_time and not src.spec.has_time:
            part = part[:, None, :]
        total = part if total is None else total + part
    return total


def first_seq_len(sources: Sequence[LayerOutput]) -> Optional[tf.Tensor]:
    """seq_len of the first source with a time axis (None if none has one)."""
    for src in sources:
        if src.spec.has_time:
            return src.seq_len
    return None


# ---------------------------------------------------------------- layers

@register_layer
class LinearLayer(Layer):
    """``activation(concat(sources) @ W + b)``; sparse sources are embedded (row lookup in W)."""

    layer_class = "linear"
    default_activation: Optional[str] = None

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[OutputSpec], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(name, self.layer_class, sources)
        n_out = self.require_n_out()
        self.activation_name = opts.get("activation", self.default_activation)
        self.activation = get_activation(self.activation_name, name)
        n_in = sum(s.dim for s in sources)
        self.W = self.weight("W", [n_in, n_out])
        self.bias = self.weight("bias", [n_out], "zeros") if opts.get("with_bias", True) else None
        self.out_spec = OutputSpec(dim=n_out, sparse=False, has_time=any(s.has_time for s in sources))

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        sources = dropout_sources(self, sources, ctx)
        x = project_sources(sources, self.W)
        if self.bias is not None:
            x = x + self.bias
        y = self.activation(x)
        logits = x if self.activation_name in ("softmax", "log_softmax") else None
        return LayerOutput(y, first_seq_len(sources), self.out_spec, logits=logits)


@register_layer
class SoftmaxLayer(LinearLayer):
    """Linear layer with default activation ``softmax``; ``logits`` holds the pre-softmax values."""

    layer_class = "softmax"
    default_activation = "softmax"


@register_layer
class CopyLayer(Layer):
    """Identity, or feature-concatenation of several sources."""

    layer_class = "copy"

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[OutputSpec], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(name, self.layer_class, sources)
        self.out_spec = concat_specs(sources, name)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = concat_sources(sources, self.layer_name)
        out = self.apply_dropout(x, ctx)
        return LayerOutput(out.tensor, x.seq_len, self.out_spec, logits=x.logits if out is x else None)


@register_layer
class DropoutLayer(CopyLayer):
    """Copy layer whose purpose is the ``dropout`` option (applied in training only)."""

    layer_class = "dropout"


@register_layer
class ActivationLayer(Layer):
    """Applies ``activation`` to the (concatenated) dense input."""

    layer_class = "activation"

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[OutputSpec], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        spec = dense_source_spec(self, sources)
        self.activation_name = opts.get("activation")
        self.activation = get_activation(self.activation_name, name)
        self.out_spec = spec

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = self.apply_dropout(concat_sources(sources, self.layer_name), ctx)
        logits = x.tensor if self.activation_name in ("softmax", "log_softmax") else None
        return LayerOutput(self.activation(x.tensor), x.seq_len, self.out_spec, logits=logits)


COMBINE_KINDS = ("add", "sub", "mul", "average")


@register_layer
class CombineLayer(Layer):
    """Elementwise ``kind`` (add, sub, mul, average) of sources with equal feature dim,
    followed by the optional ``activation``. Sources without time axis broadcast over time."""

    layer_class = "combine"
    extra_options = frozenset({"kind"})

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[OutputSpec], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(name, self.layer_class, sources)
        self.kind = opts.get("kind", "add")
        if self.kind not in COMBINE_KINDS:
            raise NetworkError("layer %r (combine): unknown kind %r (known: %s)" % (name, self.kind, known_list(COMBINE_KINDS)))
        dims = {s.dim for s in sources}
        if len(dims) != 1 or any(s.sparse for s in sources):
            raise NetworkError("layer %r (combine): sources must be dense with equal dims, got %s"
                               % (name, [s.dim for s in sources]))
        self.activation = get_activation(opts.get("activation"), name)
        self.out_spec = OutputSpec(dim=sources[0].dim, has_time=any(s.has_time for s in sources))

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        sources = dropout_sources(self, sources, ctx)
        any_time = self.out_spec.has_time
        xs = [s.tensor[:, None, :] if any_time and not s.spec.has_time else s.tensor for s in sources]
        y = xs[0]
        for x in xs[1:]:
            if self.kind in ("add", "average"):
                y = y + x
            elif self.kind == "sub":
                y = y - x
            else:
                y = y * x
        if self.kind == "average":
            y = y / float(len(xs))
        return LayerOutput(self.activation(y), first_seq_len(sources), self.out_spec)


@register_layer
class SourceLayer(Layer):
    """Outputs the data entry ``data_key`` unchanged (the network passes it as the only source)."""

    layer_class = "source"
    extra_options = frozenset({"data_key"})

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[OutputSpec], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        if len(sources) != 1:
            raise NetworkError("layer %r (source): expects the data %r as single source, got %i"
                               % (name, opts.get("data_key", "data"), len(sources)))
        self.data_key = opts.get("data_key", "data")
        self.out_spec = sources[0]

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = self.apply_dropout(sources[0], ctx)
        return LayerOutput(x.tensor, sources[0].seq_len, self.out_spec)


REDUCE_MODES = ("sum", "mean", "avg", "max", "min")
_AXIS_NAMES = {"t": "T", "time": "T", "stag:time": "T", "f": "F", "feature": "F", "stag:feature": "F"}


def _parse_axes(value: Any, layer_name: str) -> List[str]:
    items = value if isinstance(value, (list, tuple)) else [value]
    out = []
    for item in items:
        key = _AXIS_NAMES.get(str(item).lower())
        if key is None:
            raise NetworkError("layer %r (reduce): unknown axis %r (known: T, time, F, feature)" % (layer_name, item))
        if key not in out:
            out.append(key)
    return out


@register_layer
class ReduceLayer(Layer):
    """Reduces over time (masked: only real frames count) and/or features.

    Reducing ``T`` gives a ``(B, D)`` output without time axis (``keep_dims``: ``(B, 1, D)`` with
    length 1). Reducing ``F`` keeps a feature axis of size 1 (dense outputs always have one).
    For ``max``/``min`` over an empty sequence the result is 0; ``mean`` of an empty sequence is 0.
    """

    layer_class = "reduce"
    extra_options = frozenset({"mode", "axes", "axis", "keep_dims"})

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[OutputSpec], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(name, self.layer_class, sources)
        spec = concat_specs(sources, name)
        if spec.sparse:
            raise NetworkError("layer %r (reduce): sparse input not supported" % name)
        self.mode = opts.get("mode", "sum")
        if self.mode not in REDUCE_MODES:
            raise NetworkError("layer %r (reduce): unknown mode %r (known: %s)" % (name, self.mode, known_list(REDUCE_MODES)))
        if "axes" in opts and "axis" in opts:
            raise NetworkError("layer %r (reduce): give either 'axes' or 'axis', not both" % name)
        axes_opt = opts.get("axes", opts.get("axis"))
        if axes_opt is None:
            raise NetworkError("layer %r (reduce): needs 'axes'" % name)
        self.axes = _parse_axes(axes_opt, name)
        if "T" in self.axes and not spec.has_time:
            raise NetworkError("layer %r (reduce): input has no time axis to reduce" % name)
        self.keep_dims = bool(opts.get("keep_dims", False))
        dim = 1 if "F" in self.axes else spec.dim
        has_time = spec.has_time and ("T" not in self.axes or self.keep_dims)
        self.out_spec = OutputSpec(dim=dim, sparse=False, has_time=has_time)

    def _reduce(self, x: tf.Tensor, axis: int, keepdims: bool) -> tf.Tensor:
        fn = {"sum": tf.reduce_sum, "mean": tf.reduce_mean, "avg": tf.reduce_mean,
              "max": tf.reduce_max, "min": tf.reduce_min}[self.mode]
        return fn(x, axis=axis, keepdims=keepdims)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = self.apply_dropout(concat_sources(sources, self.layer_name), ctx)
        y = x.tensor
        seq_len = x.seq_len if x.spec.has_time else None
        if "T" in self.axes:
            y = self._reduce_time(x)
            if self.keep_dims:
                y = y[:, None, :]
                seq_len = tf.ones_like(x.seq_len)
            else:
                seq_len = None
        if "F" in self.axes:
            y = self._reduce(y, axis=-1, keepdims=True)
        return LayerOutput(y, seq_len, self.out_spec)

    def _reduce_time(self, x: LayerOutput) -> tf.Tensor:
        mask = x.mask()[:, :, None]
        length = tf.cast(x.seq_len, tf.float32)[:, None]
        if self.mode == "sum":
            return tf.reduce_sum(tf.where(mask, x.tensor, 0.0), axis=1)
        if self.mode in ("mean", "avg"):
            return tf.reduce_sum(tf.where(mask, x.tensor, 0.0), axis=1) / tf.maximum(length, 1.0)
        fill = float("-inf") if self.mode == "max" else float("inf")
        y = self._reduce(tf.where(mask, x.tensor, fill), axis=1, keepdims=False)
        return tf.where(length > 0, y, 0.0)
