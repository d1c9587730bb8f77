"""``concat``: RETURNN's ConcatLayer, the sources concatenated along one axis each.

``{"class": "concat", "from": [("a", "F"), ("b", "F"), ("data", "T")]}``: every entry of ``from``
is a (layer, axis) pair; the named axes are joined into one new axis (RETURNN's sum of their dims,
or ``out_dim``). The output is RETURNN's template: ``Data.get_common_data`` of the sources, each with its
concat axis replaced by the new dim (its axis order and special axes); each source's axes go where RETURNN's
``copy_compatible_to`` puts them there. A source that lacks one of the other axes is an error unless
``allow_broadcast`` (then it is repeated along it); where RETURNN fails on the layout, refused in one line.

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

from returnn.errors import NetworkError, first_line
from returnn.tensor import Data, Dim
from returnn.tf.layers.dim_shift import given_same_as
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.helpers import check_sources, dropout_sources
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
        else:  # RETURNN: sum(parts), dim math (dynamic: derived from the first dynamic part, so get_common_data
            # takes it as that part: Data.get_common_data), one dim per same parts ('s+f', '2*f')
            out_dim = functools.reduce(operator.add, parts)
        self.parts, self.new = parts, out_dim
        # RETURNN's template: get_common_data of the sources, each with its concat axis replaced by the new dim
        self.output, self.maps, self.out_axis = self._returnn_layout(name, sources, out_dim)

    def _returnn_layout(self, name: str, sources: Sequence[Data], out_dim: Dim) -> Tuple[Data, List[List[int]], int]:
        """RETURNN's template of the concatenation, per source where its ``copy_compatible_to`` puts its axes there
        (with its own part on the new axis), and the new axis; refused in one line where RETURNN fails."""
        from returnn.tf.layers.common_layout import returnn_map
        replaced = [src.copy_template_replace_dim_tag(a, out_dim) for src, a in zip(sources, self.axes)]
        try:
            common = Data.get_common_data(replaced, allow_broadcast_all_sources=True)
        except Exception as exc:  # noqa: BLE001  (RETURNN's error, in one line)
            raise NetworkError("%s: RETURNN's common template of the sources fails: %s"
                               % (self.desc, first_line(exc))) from None
        out_axis = next((i for i, d in enumerate(common.dims) if d == out_dim), None)
        if out_axis is None:  # (a dynamic sum derived from a part another source's axis matches)
            raise NetworkError("%s: the concatenated dim %r is not in RETURNN's common template %s of the sources "
                               "(it takes it for another source's axis), where RETURNN fails"
                               % (self.desc, out_dim.description, common.short_repr()))
        allow = bool(self.opt("allow_broadcast"))
        maps: List[List[int]] = []
        axes = list(self.axes)
        for src, part, axis in zip(sources, self.parts, self.axes):
            ref = common.copy_template_replace_dim_tag(out_axis, part)
            try:
                src.copy_compatible_to(ref, add_dims=allow, check_sparse=False, check_dtype=False)
                m = returnn_map(ref, src)
            except Exception as exc:  # noqa: BLE001
                missing = "" if allow else " (allow_broadcast=True repeats it along the axes it lacks)"
                raise NetworkError("%s: RETURNN cannot bring source %r %s into its template %s: %s%s" % (
                    self.desc, src.name, src.short_repr(), ref.short_repr(), first_line(exc), missing)) from None
            if m[axis] != out_axis and ref.dims[m[axis]] == part:  # (the part's dim twice in the template: on it)
                m = [out_axis if a == axis else (m[axis] if t == out_axis else t) for a, t in enumerate(m)]
            if m[axis] != out_axis:  # RETURNN concatenates the source's axis its map puts there, if of that size
                other = m.index(out_axis) if out_axis in m else None
                if other is None or src.dims[other].dimension is None or \
                        src.dims[other].dimension != part.dimension:
                    raise NetworkError("%s: RETURNN's copy_compatible_to puts the concatenated axis %r of source %r on "
                                       "%r of its template %s, and its concatenation then fails on the shape "
                                       "('Mismatching shape')" % (self.desc, src.dims[axis].description, src.name,
                                                                  ref.dims[m[axis]].description, ref.short_repr()))
                axes[len(maps)] = other
            for a, t in enumerate(m):
                mine, theirs = src.dims[a].dimension, common.dims[t].dimension
                if t != out_axis and mine is not None and theirs is not None and mine != theirs \
                        and not (allow and mine == 1):
                    raise NetworkError("%s: source %r has size %i on the axis %r that RETURNN's template puts on "
                                       "%r (size %i), and its tf.concat fails" % (
                                           self.desc, src.name, mine, src.dims[a].description,
                                           common.dims[t].description, theirs))
            maps.append(m)
        first = sources[0]
        out = Data(name, dims=list(common.dims), dtype=first.dtype, sparse_dim=first.sparse_dim,
                   time_dim_axis=common._time_dim_axis, feature_dim_axis=common._feature_dim_axis)
        self.axes = axes
        return out, maps, out_axis

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
