"""Layer base class, the tensor bundle that flows between layers, and the layer registry.

Tensors are batch-major: dense ``(B, T, D)`` float32, sparse ``(B, T)`` int32 class indices, or
``(B, D)`` once the time axis is reduced away. Every layer knows its output shape statically
(:class:`OutputSpec`), so variables are created eagerly in ``__init__`` (deterministically from a
seed) and the compiled step never creates variables.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, replace
from typing import Any, Dict, List, Optional, Sequence, Type

import numpy as np
import tensorflow as tf

from returnn.errors import NetworkError, known_list


@dataclass(frozen=True)
class OutputSpec:
    """Static description of a layer output."""

    dim: int
    sparse: bool = False
    has_time: bool = True

    @property
    def dtype(self) -> tf.DType:
        return tf.int32 if self.sparse else tf.float32


@dataclass
class LayerOutput:
    """A layer's output at run time.

    ``logits`` is set by layers whose output is an activation of a linear map (softmax), so losses
    can use the numerically stable form. ``seq_len`` is ``(B,)`` int32, or None without time axis.
    """

    tensor: tf.Tensor
    seq_len: Optional[tf.Tensor]
    spec: OutputSpec
    logits: Optional[tf.Tensor] = None

    def mask(self) -> tf.Tensor:
        """(B, T) bool, True on real frames."""
        return tf.sequence_mask(self.seq_len, maxlen=tf.shape(self.tensor)[1])

    def with_tensor(self, tensor: tf.Tensor, spec: Optional[OutputSpec] = None, seq_len=None) -> "LayerOutput":
        return LayerOutput(tensor, self.seq_len if seq_len is None else seq_len, spec or self.spec)


class RunContext:
    """Per-call information for layers: training or not, and the seed for stateless dropout.

    ``seed`` is an int64 tensor of shape (2,) that changes every step; layers derive their own
    seeds from it with :meth:`layer_seed` so dropout masks are reproducible given the step.
    """

    def __init__(self, train: bool, seed: Optional[tf.Tensor] = None):
        self.train = train
        self.seed = seed if seed is not None else tf.constant([0, 0], dtype=tf.int64)

    def layer_seed(self, layer_name: str, salt: int = 0) -> tf.Tensor:
        h = (zlib.crc32(layer_name.encode("utf8")) + salt * 7919) % (2 ** 31)
        return self.seed + tf.constant([0, h], dtype=tf.int64)


# Options every layer accepts (handled by the base class or by the network/engine).
COMMON_OPTIONS = frozenset({
    "class", "from", "n_out", "activation", "with_bias", "dropout", "L2", "trainable", "target", "loss",
    "loss_opts", "loss_scale", "is_output_layer", "only_on_eval", "loss_only_on_non_search", "register_as_extern_data",
    "reuse_params", "forward_weights_init", "bias_init", "spatial_smoothing", "darc1", "out_type", "sources",
})


class Layer(tf.Module):
    """Base layer. Subclasses set ``layer_class``, declare ``extra_options``, compute their
    :class:`OutputSpec` in ``__init__`` and implement :meth:`forward`.

    ``sources`` are the :class:`OutputSpec` of the inputs, in ``"from"`` order.
    """

    layer_class = ""
    extra_options: frozenset = frozenset()

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[OutputSpec], seed: int = 42):
        super().__init__(name=_tf_name(name))
        self.layer_name = name
        self.opts = opts
        self.source_specs = list(sources)
        unknown = set(opts) - COMMON_OPTIONS - self.extra_options
        if unknown:
            raise NetworkError("layer %r (%s): unknown option(s) %s" % (name, self.layer_class, known_list(unknown)))
        self.dropout = float(opts.get("dropout", 0.0) or 0.0)
        self.l2 = float(opts.get("L2", 0.0) or 0.0)
        self.trainable = bool(opts.get("trainable", True))
        self._rng = np.random.RandomState((zlib.crc32(name.encode("utf8")) + int(seed) * 1000003) % (2 ** 32))
        self.out_spec: OutputSpec = OutputSpec(dim=0)

    # ---- helpers for subclasses
    def option(self, key: str, default: Any = None) -> Any:
        return self.opts.get(key, default)

    def require_n_out(self) -> int:
        n_out = self.opts.get("n_out")
        if n_out is None:
            raise NetworkError("layer %r (%s): needs 'n_out'" % (self.layer_name, self.layer_class))
        return int(n_out)

    def weight(self, name: str, shape: Sequence[int], init: str = "glorot_uniform") -> tf.Variable:
        """Creates a weight variable, initialised from this layer's seeded RNG."""
        if init == "zeros":
            value = np.zeros(shape, dtype=np.float32)
        elif init == "ones":
            value = np.ones(shape, dtype=np.float32)
        else:
            fan_in = int(np.prod(shape[:-1])) if len(shape) > 1 else int(shape[0])
            fan_out = int(shape[-1])
            limit = np.sqrt(6.0 / max(1, fan_in + fan_out))
            value = self._rng.uniform(-limit, limit, size=shape).astype(np.float32)
        return tf.Variable(value, name=name, trainable=self.trainable)

    def l2_variables(self) -> List[tf.Variable]:
        """Variables the layer's ``L2`` option applies to (weights, not biases by default)."""
        return [v for v in self.trainable_variables if "bias" not in v.name and "beta" not in v.name
                and "gamma" not in v.name]

    def apply_dropout(self, x: LayerOutput, ctx: RunContext) -> LayerOutput:
        """Dropout on a dense input, in training only (inverted: scaled by 1/keep)."""
        if not self.dropout or not ctx.train or x.spec.sparse:
            return x
        keep = 1.0 - self.dropout
        noise = tf.random.stateless_uniform(tf.shape(x.tensor), seed=ctx.layer_seed(self.layer_name))
        return x.with_tensor(tf.where(noise < keep, x.tensor / keep, tf.zeros_like(x.tensor)))

    # ---- to implement
    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        raise NotImplementedError

    def __call__(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        return self.forward(sources, ctx)


def _tf_name(name: str) -> str:
    clean = "".join(c if (c.isalnum() or c in "_.-") else "_" for c in name)
    if not clean or not clean[0].isalpha():
        clean = "l_" + clean
    return clean


LAYER_CLASSES: Dict[str, Type[Layer]] = {}


def register_layer(cls: Type[Layer]) -> Type[Layer]:
    """Class decorator: makes ``cls`` available as ``{"class": cls.layer_class}``."""
    LAYER_CLASSES[cls.layer_class] = cls
    return cls


def get_layer_class(name: str, layer_name: str) -> Type[Layer]:
    """Registry lookup; an unknown class is an error naming the layer and listing the known ones."""
    from returnn.tf import layers as _all  # noqa: F401  (imports register the classes)
    if name not in LAYER_CLASSES:
        raise NetworkError("layer %r: unknown layer class %r (known: %s)" % (layer_name, name, known_list(LAYER_CLASSES)))
    return LAYER_CLASSES[name]


def concat_sources(sources: List[LayerOutput], layer_name: str) -> LayerOutput:
    """Concatenates dense sources on the feature axis (the usual meaning of several 'from')."""
    if len(sources) == 1:
        return sources[0]
    if any(s.spec.sparse for s in sources):
        raise NetworkError("layer %r: cannot concatenate sparse sources" % layer_name)
    dim = sum(s.spec.dim for s in sources)
    tensor = tf.concat([s.tensor for s in sources], axis=-1)
    return LayerOutput(tensor, sources[0].seq_len, replace(sources[0].spec, dim=dim))


def concat_specs(specs: Sequence[OutputSpec], layer_name: str) -> OutputSpec:
    """Static counterpart of :func:`concat_sources`."""
    if len(specs) == 1:
        return specs[0]
    if any(s.sparse for s in specs):
        raise NetworkError("layer %r: cannot concatenate sparse sources" % layer_name)
    return OutputSpec(dim=sum(s.dim for s in specs), sparse=False, has_time=specs[0].has_time)
