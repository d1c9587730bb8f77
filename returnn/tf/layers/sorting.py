"""Sorting-based layers (RETURNN semantics): top_k, search_sorted.

- ``top_k``: the ``k`` largest values over ``axis`` (one axis, or a list searched jointly as their
  row-major product; the batch axis alone, then the output has no batch axis, but not with a
  dynamic axis left, whose lengths would be per sequence); the other axes are kept, the searched ones replaced by a new last axis
  ``k_dim`` (no feature axis). The positions are the sub-outputs ``NAME/indices`` (one axis) or
  ``NAME/indices0`` ... (one per axis of a list), class indices over that axis. Padded positions
  never win (they count as the dtype's minimum). ``k``: an int or a layer (a scalar, else its
  maximum; then ``k_dim`` is dynamic with those values as sizes).
- ``search_sorted``: for each entry of ``values``, its insertion index into ``sorted_sequence``
  along ``axis`` (``side`` "left" or "right", as ``tf.searchsorted``); all other axes of
  ``sorted_sequence`` must be axes of ``values``, which has exactly one more. Padded entries of the
  sorted sequence count as the dtype's maximum (so they are never before a value, unless the value
  is that maximum, as in RETURNN).
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim, DimTypes
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.helpers import check_sources
from returnn.tf.layers.options import Option, one_of


def _axes_list(value: Any) -> List[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


@register_layer
class TopKLayer(Layer):
    """See the module docstring."""

    layer_class = "top_k"
    no_int_axes = ("axis",)  # RETURNN: allow_int=False
    ref_options = ("k",)
    options = (
        Option("axis", None, "the axis (or list of axes, searched jointly) to take the top k over"),
        Option("k", None, "how many: an int or a layer (scalar, else its maximum)"),
        Option("k_dim", None, "Dim of the new axis of size k"),
        Option("sorted", True, "the values in descending order (False: in any order, as tf.nn.top_k)"),
    )

    @classmethod
    def has_sub_output(cls, opts: Mapping[str, Any], sub: str) -> bool:
        axis = opts.get("axis")
        if isinstance(axis, (list, tuple)):
            return sub in ["indices%i" % i for i in range(len(axis))]
        return sub == "indices"

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        self.k_layer = isinstance(opts.get("k"), str)
        own = list(sources[:-1] if self.k_layer else sources)
        super().__init__(name, opts, own, seed)
        check_sources(self, own, 1, 1)
        data = own[0]
        axis = self.opt("axis")
        if axis is None:
            raise NetworkError("%s: needs 'axis'" % self.desc)
        self.single = not isinstance(axis, (list, tuple))
        self.axes = [self.axis(data, a, "axis") for a in _axes_list(axis)]
        if len(set(self.axes)) != len(self.axes):
            raise NetworkError("%s: 'axis' must name distinct axes, got %r" % (self.desc, axis))
        over_batch = any(data.dims[a].is_batch_dim() for a in self.axes)
        dyn_rest = [data.dims[a] for a in range(data.batch_ndim) if a not in self.axes and data.dims[a].is_dynamic()]
        if over_batch and len(self.axes) > 1:  # RETURNN: the merged axis needs the batch size as a static value
            raise NetworkError("%s: top_k over the batch axis jointly with other axes is refused, as RETURNN fails "
                               "on it (the merged axis has no size)" % self.desc)
        if over_batch and dyn_rest:  # (RETURNN builds it, with lengths per sequence but no sequences left)
            raise NetworkError("%s: top_k over the batch axis keeps the dynamic axis %s, whose lengths are per "
                               "sequence: not supported (reduce or pad it first)" % (self.desc, dyn_rest[0].description))
        k = self.opt("k")
        k_dim = self.opt("k_dim")
        if self.k_layer:
            k_src = sources[-1]
            if not k_src.dtype.startswith("int"):
                raise NetworkError("%s: 'k' must hold ints, got %s" % (self.desc, k_src.short_repr()))
            self.k_per_seq = k_src.batch_ndim > 0
            if k_dim is None:
                k_dim = Dim(None, kind=DimTypes.Spatial, description="%s:topk" % name)
            if not self.k_per_seq:
                k_dim.scalar_sizes = True
        else:
            if isinstance(k, bool) or not isinstance(k, int) or k < 0:  # RETURNN takes 0 (tf's top_k: an empty axis)
                raise NetworkError("%s: 'k' must be an int >= 0 or a layer name, got %r" % (self.desc, k))
            if k_dim is None:
                k_dim = Dim(k, kind=DimTypes.Spatial, description="%s:topk" % name)
            elif k_dim.dimension != k:
                raise NetworkError("%s: k_dim %r does not have size k=%i" % (self.desc, k_dim, k))
        if not isinstance(k_dim, Dim):
            raise NetworkError("%s: 'k_dim' must be a Dim, got %r" % (self.desc, k_dim))
        self.k_dim = k_dim
        self.rest = [a for a in range(data.batch_ndim) if a not in self.axes]
        dims = [data.dims[a] for a in self.rest] + [k_dim]
        time = data.time_dim_axis
        kwargs = {"feature_dim_axis": None}
        if time is not None and time in self.rest:
            kwargs["time_dim_axis"] = self.rest.index(time)
        self.output = Data(name, dims=dims, dtype=data.dtype, **kwargs)
        self.subs = {("indices" if self.single else "indices%i" % i): data.dims[a] for i, a in enumerate(self.axes)}

    def sub_template(self, sub: str) -> Data:
        if sub not in self.subs:
            raise NetworkError("%s: no sub-output %r (known: %s)" % (self.desc, sub, ", ".join(self.subs)))
        return self.output.copy("%s/%s" % (self.layer_name, sub), dtype="int32", sparse_dim=self.subs[sub])

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = self.apply_dropout(sources[0], ctx)
        tensor = x.tensor
        for a in self.axes:  # padded positions never win
            if x.data.dims[a].is_dynamic():
                tensor = tf.where(x.broadcast_mask(a), tensor, tensor.dtype.min)
        tensor = tf.transpose(tensor, self.rest + self.axes)
        shape = tf.shape(tensor)
        n_rest = len(self.rest)
        if len(self.axes) > 1:
            tensor = tf.reshape(tensor, tf.concat([shape[:n_rest], [-1]], 0))
        sizes = {}
        if self.k_layer:
            k_value = sources[-1]
            k_t = tf.cast(k_value.tensor, tf.int32)
            k = tf.reduce_max(k_t) if self.k_per_seq else k_t
            if self.k_dim.is_dynamic():
                sizes[self.k_dim] = k_t
        else:
            k = self.k_dim.dimension
        values, indices = tf.math.top_k(tensor, k=k, sorted=bool(self.opt("sorted")))
        out = self.make_output(values, [x], sizes)
        subs = {}
        if self.single:
            subs["indices"] = indices
        else:
            for i, a in reversed(list(enumerate(self.axes))):
                n = shape[n_rest + i]
                subs["indices%i" % i] = indices % n
                indices = indices // n
        out.sub_outputs = {sub: LayerOutput(v, self.sub_template(sub), out.sizes) for sub, v in subs.items()}
        return out


@register_layer
class SearchSortedLayer(Layer):
    """See the module docstring."""

    layer_class = "search_sorted"
    default_from = ()
    ref_options = ("sorted_sequence", "values")
    options = (
        Option("sorted_sequence", None, "layer sorted along 'axis'"),
        Option("values", None, "layer of the values to look up"),
        Option("axis", "T", "the axis along which sorted_sequence is sorted"),
        Option("side", "left", "'left' or 'right': the index before or after equal entries"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        for key in ("sorted_sequence", "values"):
            if not isinstance(opts.get(key), str):
                raise NetworkError("layer %r (search_sorted): %r must be a layer name, got %r" % (name, key, opts.get(key)))
        super().__init__(name, opts, sources[:-2], seed)
        check_sources(self, sources[:-2], 0, 0)
        sorted_data, values = sources[-2], sources[-1]
        self.side = one_of(self.desc, "side", str(self.opt("side")).lower(), ("left", "right"))
        self.ax = self.axis(sorted_data, self.opt("axis"), "axis")
        self.sorted_batch = [a for a in range(sorted_data.batch_ndim) if a != self.ax]
        self.values_batch = []
        for a in self.sorted_batch:
            dim = sorted_data.dims[a]
            match = [i for i, d in enumerate(values.dims) if d == dim and i not in self.values_batch]
            if not match and dim.dimension is not None:  # as RETURNN: a unique axis of the same static size
                same = [i for i, d in enumerate(values.dims) if d.dimension == dim.dimension and i not in self.values_batch
                        and not any(d == o for o in sorted_data.dims)]
                match = same if len(same) == 1 else []
            if not match:
                raise NetworkError("%s: values %s lack the axis %r of sorted_sequence" % (
                    self.desc, values.short_repr(), sorted_data.dims[a]))
            self.values_batch.append(match[0])
        rest = [i for i in range(values.batch_ndim) if i not in self.values_batch]
        if len(rest) != 1:
            raise NetworkError("%s: values %s need exactly one axis that sorted_sequence %s does not have, got %i"
                               % (self.desc, values.short_repr(), sorted_data.short_repr(), len(rest)))
        self.sorted_perm = self.sorted_batch + [self.ax]
        self.values_perm = self.values_batch + rest
        self.output = values.copy_transpose(self.values_perm).copy(name, dtype="int32", sparse_dim=None)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        sorted_v, values = sources[-2], sources[-1]
        x = sorted_v.tensor
        if sorted_v.data.dims[self.ax].is_dynamic():
            x = tf.where(sorted_v.broadcast_mask(self.ax), x, x.dtype.max)
        x = tf.transpose(x, self.sorted_perm)
        v = tf.transpose(tf.cast(values.tensor, x.dtype), self.values_perm)
        out = tf.searchsorted(x, v, side=self.side, out_type=tf.int32)
        return self.make_output(out, [values])
