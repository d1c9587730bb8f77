"""``concat``: RETURNN's ConcatLayer, the sources concatenated along one axis each.

``{"class": "concat", "from": [("a", "F"), ("b", "F"), ("data", "T")]}``: every entry of ``from``
is a (layer, axis) pair; the named axes are joined into one new axis (RETURNN's sum of their dims,
or ``out_dim``), all other axes are matched by their dims (the common layout of the sources, as
elsewhere: ``helpers.common_dims``). A source that lacks one of the other axes is an error unless
``allow_broadcast`` (then it is repeated along it).

The network has no general support for (layer, axis) pairs in ``from`` yet, so this class reads
its own ``from`` (``outer_sources``): the network builds the named layers and passes their
templates and values in order.

Dynamic axes (e.g. two time axes): the result's sizes are the sums of the parts' sizes and the
padded tensors are joined as they are, as RETURNN's TF layer does (``tf.concat``): for a sequence
shorter than its part's extent, the frames after its own end up to that extent are padding and
come before the next part's frames, inside the summed length (RETURNN's newer frontend
``rf.concat(handle_dynamic_dims=True)`` packs the real frames instead; its TF layer does not).
"""
from __future__ import annotations

import functools
import operator
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim
from returnn.tf.layers.dim_shift import given_same_as
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.helpers import check_sources, common_dims, dropout_sources
from returnn.tf.layers.options import Option
from returnn.tf.layers.output import align_tensor


def source_axis_pairs(name: str, value: Any) -> List[Tuple[str, Any]]:
    """RETURNN's ``from`` of a concat layer: a list of (layer name, axis) pairs."""
    items = [value] if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str) else value
    if not isinstance(items, (list, tuple)) or not items:
        raise NetworkError("layer %r (concat): 'from' must be a list of (layer, axis) pairs, got %r" % (name, value))
    out = []
    for item in items:
        if not isinstance(item, (list, tuple)) or len(item) != 2 or not isinstance(item[0], str):
            raise NetworkError("layer %r (concat): every 'from' entry must be a (layer, axis) pair, got %r"
                               % (name, item))
        out.append((item[0], item[1]))
    return out


@register_layer
class ConcatLayer(Layer):
    """See the module docstring."""

    layer_class = "concat"
    options = (
        Option("allow_broadcast", False, "sources without some of the other axes are repeated along them"),
    )

    @classmethod
    def outer_sources(cls, name: str, opts: Mapping[str, Any], default_target: str, search: bool = False
                      ) -> List[str]:
        """The layers of the (layer, axis) pairs of ``from``."""
        return [src for src, _ in source_axis_pairs(name, opts.get("from"))]

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42, *,
                 outer_names: Sequence[str] = (), **_network_kwargs: Any):
        super().__init__(name, opts, sources, seed)
        if "from" not in opts:
            raise NetworkError("%s: needs 'from' as (layer, axis) pairs (inside a rec unit this is not supported yet)"
                               % self.desc)
        pairs = source_axis_pairs(name, opts["from"])
        check_sources(self, sources, len(pairs), len(pairs))
        self.axes = [self.axis(src, axis, "from") for src, (_, axis) in zip(sources, pairs)]
        parts = [src.dims[a] for src, a in zip(sources, self.axes)]
        if any(d.is_batch_dim() for d in parts):
            raise NetworkError("%s: cannot concatenate along the batch axis" % self.desc)
        static = None if any(d.dimension is None for d in parts) else sum(d.dimension for d in parts)
        out_dim = self.opts.get("out_dim")
        if out_dim is not None:
            if not isinstance(out_dim, Dim):
                raise NetworkError("%s: 'out_dim' must be a Dim, got %r" % (self.desc, out_dim))
            if out_dim.dimension != static:
                raise NetworkError("%s: out_dim %r does not match the concatenated size %r"
                                   % (self.desc, out_dim, static))
            if static is None:  # RETURNN: the sum of the parts declared the same as the given dim
                out_dim = given_same_as(out_dim, functools.reduce(operator.add, parts))
        elif static is None:  # RETURNN: sum(parts), dim math: derived from the first dynamic part (so
            # get_common_data takes it as that part: Data.get_common_data), one dim per same parts
            out_dim = functools.reduce(operator.add, parts)
        else:
            out_dim = Dim(static, kind=parts[0].kind, description="%s:concat" % name)
        self.parts, self.new = parts, out_dim
        # the common layout: each source with its concat axis as the new dim
        dims_lists = [list(src.dims[:a]) + [out_dim] + list(src.dims[a + 1:]) for src, a in zip(sources, self.axes)]
        dims, self.maps = common_dims(dims_lists)
        self.out_axis = dims.index(out_dim)
        if not self.opt("allow_broadcast"):
            for src, m in zip(sources, self.maps):
                missing = [dims[i].short_repr() for i in range(len(dims)) if i not in m]
                if missing:
                    raise NetworkError("%s: source %r lacks the axes %s of the others (allow_broadcast=True repeats "
                                       "it along them)" % (self.desc, src.name, ", ".join(missing)))
        first = sources[0]
        feat = first.feature_dim_axis
        kwargs = {}
        if feat is not None and feat != self.axes[0]:
            kwargs["feature_dim_axis"] = self.maps[0][feat]
        elif feat is not None and out_dim.is_feature_dim():
            kwargs["feature_dim_axis"] = self.out_axis
        if first.time_dim_axis is not None and first.time_dim_axis != self.axes[0]:
            kwargs["time_dim_axis"] = self.maps[0][first.time_dim_axis]
        elif first.time_dim_axis is not None:
            kwargs["time_dim_axis"] = self.out_axis
        out = Data(name, dims=dims, dtype=first.dtype, sparse_dim=first.sparse_dim)
        self.output = out.copy(**{k: v for k, v in kwargs.items() if v != getattr(out, k)})

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        sources = dropout_sources(self, sources, ctx)
        n = self.output.batch_ndim
        shape = self._common_shape(sources)
        parts = []
        for x, m, a in zip(sources, self.maps, self.axes):
            t = align_tensor(x.tensor, m, n)
            target = tf.tensor_scatter_nd_update(shape, [[self.out_axis]], [tf.shape(x.tensor)[a]])
            parts.append(tf.broadcast_to(t, target))
        sizes = {}
        if self.new.is_dynamic():
            lens = [x.sizes[d] if d.is_dynamic() else tf.constant(d.dimension, tf.int32)
                    for x, d in zip(sources, self.parts)]
            total = lens[0]
            for size in lens[1:]:
                total = total + size
            sizes[self.new] = total
        return self.make_output(tf.concat(parts, self.out_axis) if len(parts) > 1 else parts[0], sources, sizes)

    def _common_shape(self, sources: List[LayerOutput]) -> tf.Tensor:
        """The extents of the common layout (the concat axis' entry is replaced per part)."""
        shape = []
        for pos in range(self.output.batch_ndim):
            for x, m in zip(sources, self.maps):
                if pos in m:
                    shape.append(tf.shape(x.tensor)[m.index(pos)])
                    break
        return tf.stack(shape)
