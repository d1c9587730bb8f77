"""Layers that rearrange axes by naming them (RETURNN semantics): reshape, transpose,
combine_dims (merge_dims in the given order), unflatten_nd.

- ``reshape``: ``in_dims`` (axis descriptions or Dims) are taken out and ``out_dims`` (Dims, or
  descriptions of the input's axes) put in where the first of them was; the values are reshaped in
  row-major order (padding included, as RETURNN: no masking). A dynamic out dim must be one of the
  input's axes, or a dim whose sizes come with the input or with a layer of ``extra_deps``.
- ``transpose``: ``perm`` maps target axis -> source axis (dict of descriptions, or a list of the
  source's dims in the new order); the axes not named keep their relative order.
- ``combine_dims``: RETURNN's deprecated merge_dims that always keeps the order of ``axes``.
- ``unflatten_nd``: ``(B, T, ...)`` whose axis ``in_dim`` holds a flattened N-d grid per sequence
  (``sizes``: ``(B, N)`` ints, the grid's sizes) -> ``(B, T_1, ..., T_N, ...)``, entry
  ``[b, i_1, ..., i_N]`` = flat position ``i_1 * s_2 * ... * s_N + ... + i_N``; positions outside
  a sequence's grid hold its frame 0 (as RETURNN). ``out_dims`` gives the new dims, ``declare_same_sizes_as``
  ``{i: layer}`` takes axis i's dim (and sizes) from that layer's time axis.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence

import numpy as np
import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim, DimTypes
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.helpers import check_sources, concat_inputs, concat_output, relaid
from returnn.tf.layers.options import Option, positive_int
from returnn.tf.layers.shape import MergeDimsLayer


def _as_list(value: Any) -> List[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


@register_layer
class ReshapeLayer(Layer):
    """See the module docstring."""

    layer_class = "reshape"
    no_int_axes = ("in_dims",)  # RETURNN: allow_int=False
    options = (
        Option("in_dims", None, "the input axes to replace (descriptions or Dims)"),
        Option("out_dims", None, "the new axes (Dims, or descriptions of input axes)"),
        Option("extra_deps", None, "layers built first (they may define the sizes of new dynamic dims)"),
    )

    @classmethod
    def outer_sources(cls, name: str, opts: Mapping[str, Any], default_target: str = "classes",
                      search: bool = False) -> List[str]:
        """``from``, then the ``extra_deps`` layers."""
        return _as_list(opts.get("from", "data")) + [d for d in _as_list(opts.get("extra_deps")) if isinstance(d, str)]

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42, **_network_kwargs):
        n_from = len(_as_list(opts.get("from", "data")))
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources[:n_from], 1, 1)
        self.n_from = n_from
        data = sources[0]
        in_axes = [self.axis(data, d, "in_dims") for d in _as_list(self.opt("in_dims"))]
        if not in_axes or len(set(in_axes)) != len(in_axes):
            raise NetworkError("%s: 'in_dims' must name distinct axes, got %r" % (self.desc, self.opt("in_dims")))
        out_dims = []
        for d in _as_list(self.opt("out_dims")):
            out_dims.append(d if isinstance(d, Dim) else data.dims[self.axis(data, d, "out_dims")])
        if not out_dims:
            raise NetworkError("%s: needs 'out_dims'" % self.desc)
        in_static = [data.dims[a].dimension for a in in_axes]
        out_static = [d.dimension for d in out_dims]
        if None not in in_static and None not in out_static and np.prod(in_static) != np.prod(out_static):
            raise NetworkError("%s: in_dims (sizes %s) and out_dims (sizes %s) differ in total size"
                               % (self.desc, in_static, out_static))
        self.known_extent = {d: i for i, d in enumerate(data.dims) if d.is_dynamic()}
        unknown = [d for d in out_dims if d.dimension is None and d not in self.known_extent]
        if len(unknown) > 1:
            raise NetworkError("%s: at most one new dynamic dim in out_dims (its extent is inferred), got %s"
                               % (self.desc, unknown))
        if any(d.is_batch_dim() for d in out_dims) or any(data.dims[a].is_batch_dim() for a in in_axes):
            raise NetworkError("%s: reshaping the batch axis is not supported" % self.desc)
        insert = min(in_axes)
        rest = [a for a in range(data.batch_ndim) if a not in in_axes]
        before = [a for a in rest if a < insert]
        after = [a for a in rest if a > insert]
        self.perm = before + in_axes + after
        self.insert, self.out_dims, self.n_in = len(before), out_dims, len(in_axes)
        self.output = relaid(name, data, [data.dims[a] for a in before] + out_dims + [data.dims[a] for a in after])
        self.new_dynamic = [d for d in out_dims if d.is_dynamic()]

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = self.apply_dropout(sources[0], ctx)
        tensor = tf.transpose(x.tensor, self.perm)
        shape = tf.shape(x.tensor)
        new_shape = []
        for d in self.out_dims:
            if d.dimension is not None:
                new_shape.append(d.dimension)
            elif d in self.known_extent:
                new_shape.append(shape[self.known_extent[d]])
            else:
                new_shape.append(-1)
        moved = tf.shape(tensor)
        tensor = tf.reshape(tensor, tf.concat([moved[:self.insert], tf.stack(new_shape),
                                               moved[self.insert + self.n_in:]], 0))
        sizes = {}
        from returnn.tensor.dim_math import dyn_size_of, dynamic_leaves
        for d in self.new_dynamic:
            for src in sources:
                if d in src.sizes:
                    sizes[d] = src.sizes[d]
                    break
            else:
                known = {k: v for src in reversed(sources) for k, v in src.sizes.items()}
                if d.derived_from_op is not None and all(leaf in known for leaf in dynamic_leaves(d)):
                    sizes[d] = dyn_size_of(d, known.__getitem__)  # RETURNN: a dim-math dim's sizes from its inputs'
                    continue
                raise NetworkError("%s: no sizes known for the new dynamic dim %r (give a layer that has it in "
                                   "'extra_deps')" % (self.desc, d))
        return self.make_output(tensor, sources[:1], sizes)


def transpose_perm(layer: Layer, data: Data, perm: Any) -> List[int]:
    """RETURNN's ``perm`` (target axis -> source axis) as a permutation list (new axis i = old axis perm[i])."""
    if isinstance(perm, (list, tuple)):
        if len(perm) != data.batch_ndim:
            raise NetworkError("%s: 'perm' as a list needs one entry per axis of %s, got %r"
                               % (layer.desc, data.short_repr(), perm))
        pairs = list(enumerate(perm))
    elif isinstance(perm, Mapping):
        pairs = list(perm.items())
    else:
        raise NetworkError("%s: 'perm' must be a dict (target axis -> source axis) or a list of dims, got %r"
                           % (layer.desc, perm))
    mapping = {}
    for target, source in pairs:
        t = target if isinstance(target, int) and not isinstance(target, bool) and 0 <= target < data.batch_ndim \
            else layer.axis(data, target, "perm")
        s = layer.axis(data, source, "perm")
        if t in mapping or s in mapping.values():
            raise NetworkError("%s: 'perm' %r names an axis twice" % (layer.desc, perm))
        mapping[t] = s
    free_targets = [i for i in range(data.batch_ndim) if i not in mapping]
    free_sources = [i for i in range(data.batch_ndim) if i not in mapping.values()]
    mapping.update(zip(free_targets, free_sources))
    return [mapping[i] for i in range(data.batch_ndim)]


@register_layer
class TransposeLayer(Layer):
    """See the module docstring."""

    layer_class = "transpose"
    options = (Option("perm", None, "target axis -> source axis (dict), or the source's dims in the new order"),)

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        self.input, self.plan = concat_output(self, sources)
        self.perm = transpose_perm(self, self.input, self.opt("perm"))
        self.output = self.input.copy_transpose(self.perm).copy(name)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = concat_inputs(self, self.input, self.plan, sources, ctx)
        return self.make_output(tf.transpose(x.tensor, self.perm), sources)


@register_layer
class CombineDimsLayer(MergeDimsLayer):
    """RETURNN's combine_dims: merge_dims of ``axes`` in the order given."""

    layer_class = "combine_dims"
    options = (Option("keep_order", True, "not to be given: RETURNN's combine_dims sets it (given: a TypeError)"),)

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        if "keep_order" in opts:  # RETURNN passes keep_order=True to MergeDimsLayer itself: 'multiple values'
            raise NetworkError("layer %r (combine_dims): takes no 'keep_order' (RETURNN: it always keeps the order; "
                               "given, 'got multiple values for keyword argument keep_order')" % name)
        axes = opts.get("axes")
        from returnn.tf.layers.norm import behavior_version
        # RETURNN before Aug 2021 (its own demo-tf-att-copy: axes "static"): the axes a description names
        # merge in the input's order; today's RETURNN asserts a list (docs/compat.md, "Old config forms")
        self.old_description = isinstance(axes, str) and behavior_version() < 1
        super().__init__(name, opts if self.old_description else dict(opts, keep_order=True, axes=_as_list(axes)),
                         sources, seed)

    def keep_order(self) -> bool:
        return not self.old_description


@register_layer
class UnflattenNdLayer(Layer):
    """See the module docstring."""

    layer_class = "unflatten_nd"
    no_int_axes = ("in_dim",)  # RETURNN: allow_int=False
    options = (
        Option("sizes", None, "layer of the grid sizes per sequence, (B, num_axes) ints"),
        Option("num_axes", None, "number of axes of the grid"),
        Option("in_dim", "T", "the flattened axis"),
        Option("out_dims", None, "Dims of the new axes (default: new dynamic dims)"),
        Option("declare_same_sizes_as", None, "{i: layer}: axis i is that layer's time axis (its dim and sizes)"),
    )

    @classmethod
    def outer_sources(cls, name: str, opts: Mapping[str, Any], default_target: str = "classes",
                      search: bool = False) -> List[str]:
        """``from``, ``sizes``, then the layers of ``declare_same_sizes_as`` by axis."""
        if not isinstance(opts.get("sizes"), str):
            raise NetworkError("layer %r (unflatten_nd): 'sizes' must be a layer name, got %r" % (name, opts.get("sizes")))
        same = opts.get("declare_same_sizes_as") or {}
        if not isinstance(same, Mapping) or not all(isinstance(v, str) for v in same.values()):
            raise NetworkError("layer %r (unflatten_nd): 'declare_same_sizes_as' must be a dict axis -> layer name, "
                               "got %r" % (name, same))
        return _as_list(opts.get("from", "data")) + [opts["sizes"]] + [same[k] for k in sorted(same)]

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42, **_network_kwargs):
        same = dict(opts.get("declare_same_sizes_as") or {})
        n_from = len(sources) - 1 - len(same)
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources[:n_from], 1)
        self.n_from = n_from
        self.input, self.plan = concat_output(self, sources[:n_from])
        sizes = sources[n_from]
        self.n = positive_int(self.desc, "num_axes", self.opt("num_axes"))
        if sizes.batch_dim_axis is None or sizes.batch_ndim != 2 or not sizes.dtype.startswith("int") or \
                sizes.dims[1 - sizes.batch_dim_axis].dimension not in (None, self.n):
            raise NetworkError("%s: 'sizes' must be (batch, %i) ints, got %s" % (self.desc, self.n, sizes.short_repr()))
        data = self.input
        if data.batch_dim_axis is None:
            raise NetworkError("%s: the input needs a batch axis, got %s" % (self.desc, data.short_repr()))
        ax = self.axis(data, self.opt("in_dim"), "in_dim")
        out_dims = self.opt("out_dims")
        if out_dims is not None:
            if same or not isinstance(out_dims, (list, tuple)) or len(out_dims) != self.n or \
                    not all(isinstance(d, Dim) for d in out_dims):
                raise NetworkError("%s: 'out_dims' must be %i Dims (and not with declare_same_sizes_as), got %r"
                                   % (self.desc, self.n, out_dims))
            out_dims = list(out_dims)
        else:
            out_dims = [Dim(None, kind=DimTypes.Spatial, description="%s:unflatten-nd:%i" % (name, i))
                        for i in range(self.n)]
            for k, (i, _) in enumerate(sorted(same.items())):
                if not isinstance(i, int) or not 0 <= i < self.n:
                    raise NetworkError("%s: declare_same_sizes_as key %r is not an axis index < %i" % (self.desc, i, self.n))
                other = sources[n_from + 1 + k]
                if other.time_dim is None:
                    raise NetworkError("%s: declare_same_sizes_as[%r] has no time axis" % (self.desc, i))
                out_dims[i] = other.time_dim
        # (dim, source index) pairs: a list (tf.Module would try to track a dict keyed by Dims)
        self.same_src = [(out_dims[i], n_from + 1 + k) for k, (i, _) in enumerate(sorted(same.items()))]
        self.out_dims = out_dims
        rest = [a for a in range(data.batch_ndim) if a not in (data.batch_dim_axis, ax)]
        self.perm = [data.batch_dim_axis, ax] + rest
        self.output = relaid(name, data, [data.dims[data.batch_dim_axis]] + out_dims + [data.dims[a] for a in rest],
                             time_dim_axis=1)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = concat_inputs(self, self.input, self.plan, sources[:self.n_from], ctx)
        sizes_v = sources[self.n_from]
        grid = tf.cast(sizes_v.tensor, tf.int32)
        if sizes_v.data.batch_dim_axis != 0:
            grid = tf.transpose(grid)
        grid = tf.reshape(grid[:, :self.n], [-1, self.n])  # (B, N)
        tensor = tf.transpose(x.tensor, self.perm)  # (B, T, ...)
        extents = [tf.reduce_max(tf.concat([grid[:, i], [0]], 0)) for i in range(self.n)]
        flat = tf.zeros([tf.shape(grid)[0]] + [1] * self.n, tf.int32)
        inside = tf.ones([tf.shape(grid)[0]] + [1] * self.n, tf.bool)
        stride = tf.ones([tf.shape(grid)[0]], tf.int32)
        for i in reversed(range(self.n)):
            shape = [1] * (self.n + 1)
            shape[i + 1] = -1
            pos = tf.reshape(tf.range(extents[i]), shape)  # broadcast along axis i + 1
            lead = tf.reshape(stride, [-1] + [1] * self.n)
            flat = flat + pos * lead
            inside = inside & (pos < tf.reshape(grid[:, i], [-1] + [1] * self.n))
            stride = stride * grid[:, i]
        flat = tf.where(inside, flat, 0)  # padded positions hold the sequence's frame 0 (RETURNN's unflatten_nd)
        flat = tf.minimum(flat, tf.maximum(tf.shape(tensor)[1] - 1, 0))
        out = tf.gather(tensor, flat, axis=1, batch_dims=1)  # (B, T_1..T_N, ...)
        sizes = {}
        for i, d in enumerate(self.out_dims):
            if not d.is_dynamic():
                continue
            src = next((k for dim, k in self.same_src if dim is d), None)
            if src is not None and d in sources[src].sizes:
                sizes[d] = sources[src].sizes[d]
            else:
                sizes[d] = grid[:, i]
        return self.make_output(out, sources[:self.n_from], sizes)
