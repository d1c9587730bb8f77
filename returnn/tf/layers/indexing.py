"""Index-driven layers (RETURNN semantics): slice_nd, scatter_nd, boolean_mask.

- ``slice_nd``: from ``axis`` (default T) of the input, per sequence (and per entry of ``start``)
  the frames ``start .. start + size - 1``: input ``(B, T, F)`` with start ``(B,)`` gives
  ``(B, size, F)``, with start ``(B, T')`` ``(B, T', size, F)``. ``start``: an int or a layer;
  ``size``: an int (static), a layer (per entry), a Dim, or None (up to the end of each sequence,
  at least ``min_size``). Frames beyond the sequence (or the entry's size) are zeros. An int size equal
  to an engine-made static spatial axis of the input (extern data without dim tags) with start ``(B,)``:
  RETURNN's gather takes both as one axis, slice frame ``i`` from that axis' entry ``i`` (a diagonal).
  An input without batch axis (e.g. a variable, or ``(T, F)`` of a range) is sliced per entry of a ``start``
  layer with a batch axis; the output is then the input's axes before the sliced one, start's axes, the
  slice, the input's axes after it (RETURNN's gather order). With an int start and size it is a plain slice
  (the output has no batch axis either).
- ``scatter_nd``: the inverse of gathering: the input (updates) is written into a new axis at the
  indices ``position`` holds along its ``position_axis``; the output is ``position``'s layout with
  that axis replaced by ``out_spatial_dim`` (or ``output_dim_via_time_from``'s time axis), plus
  the input's other axes. Every entry of ``position`` writes, its padded ones too (as RETURNN);
  indices outside the new axis are dropped (``filter_invalid_indices``; without it RETURNN fails
  there on CPU and drops them on GPU). Updates to the same index are summed.
- ``boolean_mask``: the entries of the input where ``mask`` (over the axes ``dims``) is True
  (RETURNN's tf.boolean_mask of the padded tensors: padded positions count where the mask, as read, is True
  there), as one new axis ``out_dim`` (first), followed by
  the input's other axes. The new axis has one size for the whole batch (the count).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim, DimTypes
from returnn.tensor.data import NotSpecified
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.helpers import check_sources, concat_inputs, concat_output, explicit_feature_positions, relaid
from returnn.tf.layers.options import Option
from returnn.tf.layers.output import align_tensor


def _gather_template(name: str, data: Data, start: Optional[Data], dims: List[Dim]) -> Data:
    """RETURNN's template of slice_nd (its gather of the input at start's positions): the time axis by the default
    rule; the feature axis on the input's feature dim where the input sets it explicitly, else on start's where start
    does, else by the default rule (the last static axis: e.g. a static slice after the input's features)."""
    time = Data("t", dims=dims).time_dim_axis
    if data._feature_dim_axis is not NotSpecified:
        return relaid(name, data, dims, time_dim_axis=time)
    special: Dict[str, Any] = {}
    hit = explicit_feature_positions(start, dims)
    if hit:
        special["feature_dim_axis"] = hit[0]
    return Data(name, dims=dims, dtype=data.dtype, sparse_dim=data.sparse_dim, time_dim_axis=time, **special)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _batch_major(x: LayerOutput) -> tf.Tensor:
    """``x``'s tensor with its batch axis first."""
    b = x.data.batch_dim_axis
    if not b:
        return x.tensor
    return tf.transpose(x.tensor, [b] + [i for i in range(x.data.batch_ndim) if i != b])


@register_layer
class SliceNdLayer(Layer):
    """See the module docstring."""

    layer_class = "slice_nd"
    no_int_axes = ("axis",)  # RETURNN: allow_int=False
    ref_options = ("start", "size")
    options = (
        Option("start", None, "first frame: an int or a layer of ints (per sequence, e.g. (B,) or (B,T))"),
        Option("size", None, "number of frames: an int, a layer, a Dim, or None (to the end of the sequence)"),
        Option("min_size", None, "with a size from a layer or None: at least this many frames"),
        Option("axis", "T", "the axis to slice"),
        Option("out_spatial_dim", None, "Dim of the sliced axis"),
    )

    def returnn_data_name(self) -> str:
        """RETURNN's slice_nd is a gather whose output template it keeps: ``<layer>_gather_output``."""
        return "%s_gather_output" % self.layer_name.rsplit("/", 1)[-1]

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        self.start_layer = isinstance(opts.get("start"), str)
        self.size_layer = isinstance(opts.get("size"), str)
        n_refs = int(self.start_layer) + int(self.size_layer)
        own = list(sources[:len(sources) - n_refs])
        super().__init__(name, opts, own, seed)
        check_sources(self, own)
        self.input, self.plan = concat_output(self, own)
        data = self.input
        refs = list(sources[len(own):])
        self.start_data = refs.pop(0) if self.start_layer else None
        self.batchless = data.batch_dim_axis is None
        # an input without batch axis sliced by an int start and size: RETURNN's plain slice (no batch axis)
        self.plain = self.batchless and not self.start_layer
        if self.plain and not (_is_int(opts.get("size")) and opts["size"] >= 0 and
                               _is_int(opts.get("start") or 0) and (opts.get("start") or 0) >= 0):
            raise NetworkError("%s: an input without batch axis (%s) needs a 'start' layer with a batch axis, or an "
                               "int start >= 0 and an int size here" % (self.desc, data.short_repr()))
        if self.batchless and self.start_layer and self.start_data.batch_dim_axis is None:
            raise NetworkError("%s: an input without batch axis (%s) needs a 'start' layer with a batch axis here"
                               % (self.desc, data.short_repr()))
        self.size_data = refs.pop(0) if self.size_layer else None
        start, size, min_size = self.opt("start"), self.opt("size"), self.opt("min_size")
        if start is None:
            start = 0
        if not self.start_layer and not _is_int(start):
            raise NetworkError("%s: 'start' must be an int or a layer name, got %r" % (self.desc, start))
        if self.start_layer and not self.start_data.dtype.startswith("int"):
            raise NetworkError("%s: 'start' must hold ints, got %s" % (self.desc, self.start_data.short_repr()))
        if min_size is not None and not _is_int(min_size):
            raise NetworkError("%s: 'min_size' must be an int, got %r" % (self.desc, min_size))
        self.ax = self.axis(data, self.opt("axis"), "axis")
        self.in_dim = data.dims[self.ax]
        if self.in_dim.is_batch_dim():
            raise NetworkError("%s: cannot slice the batch axis" % self.desc)
        if self.batchless and size is None and not self.in_dim.is_dynamic():
            raise NetworkError("%s: size None on the static axis %r of an input without batch axis is refused (RETURNN "
                               "fails on it: the new axis' sizes stay undefined)" % (self.desc, self.in_dim.description))
        if self.start_layer and not self.in_dim.is_dynamic() and self.ax != 1:
            # RETURNN bounds the gathered positions of a static axis by the input's axis 1 (x.batch_shape[1]):
            # a TypeError where that is dynamic or the batch, positions masked by the wrong size otherwise
            raise NetworkError("%s: a 'start' layer on the static axis %r, which is not axis 1 of the input %s, is "
                               "refused: RETURNN bounds the slice by the size of axis 1 there (a TypeError on a "
                               "dynamic axis, wrong frames on a static one)"
                               % (self.desc, self.in_dim.description, data.short_repr()))
        start_dims = [] if self.start_data is None else [d for d in self.start_data.dims if not d.is_batch_dim()]
        kept = [d for i, d in enumerate(data.dims) if i != self.ax and not d.is_batch_dim()]
        if any(any(d == o for o in kept) for d in start_dims):
            raise NetworkError("%s: 'start' %s shares axes with the input %s (not supported here)"
                               % (self.desc, self.start_data.short_repr(), data.short_repr()))
        self.start_dims = start_dims
        self.static_size: Optional[int] = None
        self.size_dim: Optional[Dim] = None
        if self.size_layer:
            if not self.size_data.dtype.startswith("int"):
                raise NetworkError("%s: 'size' must hold ints, got %s" % (self.desc, self.size_data.short_repr()))
            slice_dim = None
        elif isinstance(size, Dim):
            self.size_dim = size
            slice_dim = size if not min_size else None
            if size.dimension is not None:
                self.static_size = max(size.dimension, min_size or 0)
        elif size is None:
            slice_dim = None
            if not self.start_layer and start == 0 and self.in_dim.is_dynamic() and \
                    self.opt("out_spatial_dim") is not self.in_dim:
                # RETURNN takes the axis' own size tensor as the new axis' sizes: set_tag_on_size_tensor asserts
                raise NetworkError("%s: start 0 and size None on the dynamic axis %r is refused (RETURNN fails on it: "
                                   "the slice's new axis would take that axis' own sizes); a copy layer does this"
                                   % (self.desc, self.in_dim.description))
            if self.in_dim.dimension is not None and not self.start_layer:
                self.static_size = max(self.in_dim.dimension - start, min_size or 0)
        elif _is_int(size) and size >= 0:
            self.static_size = size
            slice_dim = None
        else:
            raise NetworkError("%s: 'size' must be an int, a layer name, a Dim or None, got %r" % (self.desc, size))
        given = self.opt("out_spatial_dim")
        if given is not None:
            if not isinstance(given, Dim) or (given.dimension is not None and given.dimension != self.static_size):
                raise NetworkError("%s: out_spatial_dim %r does not fit the slice size %r"
                                   % (self.desc, given, self.static_size))
            slice_dim = given
        if slice_dim is None:
            slice_dim = Dim(self.static_size, kind=DimTypes.Spatial, description="sliced-time:%s" % name,
                            derived_from=self.in_dim)
        self.slice_dim = slice_dim
        self.start_value = start
        self.diag = self._twin(data, size, given)
        if self.plain:
            dims = [slice_dim if i == self.ax else d for i, d in enumerate(data.dims)]
            self.output = _gather_template(name, data, self.start_data, dims)
            return
        batch = data.dims[data.batch_dim_axis] if not self.batchless else \
            self.start_data.dims[self.start_data.batch_dim_axis]
        before = [d for i, d in enumerate(data.dims[:self.ax]) if i != data.batch_dim_axis]
        after = [d for i, d in enumerate(data.dims) if i > self.ax and i != data.batch_dim_axis]
        dims = [batch] + before + start_dims + [slice_dim] + after
        self.gathered_dims = dims
        if self.diag is not None:
            dims = [d for d in dims if d is not slice_dim]
        if self.batchless:
            # RETURNN's gather: the input's axes before the sliced one, then start's axes (with the batch) as start
            # has them, the slice, then the input's axes after it
            dims = before + list(self.start_data.dims) + [slice_dim] + after
        self.out_perm = [self.gathered_dims.index(d) for d in dims] if self.batchless else None
        if self.batchless:  # the input gets a batch axis first (broadcast)
            self.perm, self.bm_axis = None, self.ax + 1
        else:
            self.perm = [data.batch_dim_axis] + [i for i in range(data.batch_ndim) if i != data.batch_dim_axis]
            self.bm_axis = self.perm.index(self.ax)
        # RETURNN's gather template: the time axis by the default rule (the first dynamic spatial axis; none when
        # the slice has a static size)
        self.output = _gather_template(name, data, self.start_data, dims)

    def _twin(self, data: Data, size: Any, given: Any) -> Optional[Dim]:
        """RETURNN gathers the slice through its gather layer, whose common axes take the new static slice axis
        (engine-made, of an int size) as the same axis as an engine-made static spatial axis of the input of
        that size (extern data without dim tags): each slice frame i then comes from that axis' entry i (a
        diagonal), and the output keeps the input's axis. That axis, or None."""
        if not _is_int(size) or given is not None:
            return None
        twins = [d for i, d in enumerate(data.dims) if i not in (self.ax, data.feature_dim_axis, data.batch_dim_axis)
                 and d.dimension == size and d.auto_generated and d.kind == DimTypes.Spatial]
        if not twins:
            return None
        if self.batchless:
            raise NetworkError("%s: a slice of size %i of an input without batch axis with its engine-made axis %r of "
                               "that size is refused: RETURNN takes them as one axis and fails"
                               % (self.desc, size, twins[0].description))
        if not self.start_layer or self.start_dims:
            raise NetworkError("%s: a slice of size %i with the input's engine-made axis %r of that size %s is refused: "
                               "RETURNN takes them as one axis and fails" % (
                                   self.desc, size, twins[0].description,
                                   "and an int start" if not self.start_layer else "and per-frame starts"))
        return twins[0]

    def _diagonal(self, out: tf.Tensor) -> tf.Tensor:
        """``out`` (the gathered dims) with the slice axis and :attr:`diag` reduced to their diagonal, which
        sits where :attr:`diag` sits in the output."""
        k_ax, t_ax = self.gathered_dims.index(self.slice_dim), self.gathered_dims.index(self.diag)
        rest = [a for a in range(len(self.gathered_dims)) if a not in (k_ax, t_ax)]
        value = tf.linalg.diag_part(tf.transpose(out, rest + [k_ax, t_ax]))  # (rest..., n)
        perm = list(range(len(rest)))
        perm.insert(t_ax - (t_ax > k_ax), len(rest))
        return tf.transpose(value, perm)

    def _start_tensor(self, sources: List[LayerOutput], n_batch: tf.Tensor) -> tf.Tensor:
        """``(B, S...)`` int32 start positions (S: start's own axes)."""
        if not self.start_layer:
            return tf.fill([n_batch], tf.constant(self.start_value, tf.int32))
        value = sources[len(self.sources)]
        start = tf.cast(value.masked(0), tf.int32)
        if value.data.batch_dim_axis is None:
            start = tf.broadcast_to(start[None], tf.concat([[n_batch], tf.shape(start)], 0))
        else:
            start = _batch_major(LayerOutput(start, value.data, value.sizes))
        return start

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = concat_inputs(self, self.input, self.plan, sources[:len(self.sources)], ctx)
        if self.plain:  # frames start .. start + size - 1 of the tensor (zeros beyond its end)
            part = tf.gather(x.tensor, tf.range(self.start_value, tf.minimum(
                self.start_value + self.static_size, tf.shape(x.tensor)[self.ax])), axis=self.ax)
            pads = [[0, 0] for _ in range(self.input.batch_ndim)]
            pads[self.ax] = [0, self.static_size - tf.shape(part)[self.ax]]
            return self.make_output(tf.pad(part, pads), sources)
        if self.batchless:
            start = self._start_tensor(sources, None)  # (B, S...)
            n_batch = tf.shape(start)[0]
            tensor = tf.broadcast_to(x.tensor[None], tf.concat([[n_batch], tf.shape(x.tensor)], 0))
        else:
            tensor = tf.transpose(x.tensor, self.perm)  # batch first
            n_batch = tf.shape(tensor)[0]
            start = self._start_tensor(sources, n_batch)  # (B, S...)
        extent = tf.shape(tensor)[self.bm_axis]
        n_s = len(start.shape) - 1
        if self.in_dim.is_dynamic():
            seq_len = x.sizes[self.in_dim]
            seq_len = tf.broadcast_to(seq_len, [n_batch]) if not len(seq_len.shape) else seq_len
        else:
            seq_len = tf.fill([n_batch], extent)
        seq_len = tf.reshape(seq_len, [-1] + [1] * n_s)  # broadcasts against start
        size = None  # (B, S...) per-entry sizes, if any
        if self.size_layer:
            sv = sources[-1]
            size = tf.cast(sv.masked(0), tf.int32)
            size = size if sv.data.batch_dim_axis is None else _batch_major(LayerOutput(size, sv.data, sv.sizes))
            size = tf.broadcast_to(size, tf.shape(start))
            if self.opt("min_size"):
                size = tf.maximum(size, self.opt("min_size"))
        elif self.size_dim is not None and self.size_dim.is_dynamic():
            known = [s.sizes[self.size_dim] for s in sources if self.size_dim in s.sizes]
            if not known:
                raise NetworkError("%s: the sizes of 'size' %r did not reach this layer" % (self.desc, self.size_dim))
            size = tf.broadcast_to(tf.reshape(known[0], [-1] + [1] * n_s) if len(known[0].shape) else known[0],
                                   tf.shape(start))
            if self.opt("min_size"):
                size = tf.maximum(size, self.opt("min_size"))
        elif self.static_size is None:  # to the end of each sequence
            size = tf.maximum(seq_len - start, self.opt("min_size") or 0)
        n_out = tf.constant(self.static_size) if self.static_size is not None else \
            tf.reduce_max(tf.concat([tf.reshape(size, [-1]), [0]], 0))
        positions = start[..., None] + tf.range(n_out)  # (B, S..., K)
        pad = (positions < 0) | (positions >= seq_len[..., None])
        if size is not None:
            pad = pad | (positions >= (start + size)[..., None])
        index = tf.clip_by_value(positions, 0, tf.maximum(extent - 1, 0))
        shape = tf.shape(tensor)  # one zero frame appended: index 0 exists even when the axis is empty
        tensor = tf.concat([tensor, tf.zeros(tf.concat([shape[:self.bm_axis], [1], shape[self.bm_axis + 1:]], 0),
                                             tensor.dtype)], self.bm_axis)
        out = tf.gather(tensor, index, axis=self.bm_axis, batch_dims=1)
        mask = align_tensor(tf.logical_not(pad), [0] + list(range(self.bm_axis, self.bm_axis + n_s + 1)), len(out.shape))
        out = tf.where(mask, out, tf.zeros_like(out))
        if self.diag is not None:
            out = self._diagonal(out)
        if self.out_perm is not None:
            out = tf.transpose(out, self.out_perm)
        sizes = {}
        if self.slice_dim.is_dynamic() and self.slice_dim not in x.sizes:
            if size is None:
                raise NetworkError("%s: no sizes for the sliced axis" % self.desc)
            if n_s:  # a size per entry of start: sizes over (B, start's axes), see LayerOutput.broadcast_mask
                self.slice_dim.sizes_over = (self.gathered_dims[0],) + tuple(self.start_dims)
            sizes[self.slice_dim] = size
        return self.make_output(out, sources, sizes)


@register_layer
class ScatterNdLayer(Layer):
    """See the module docstring."""

    layer_class = "scatter_nd"
    ref_options = ("position", "output_dim_via_time_from")
    options = (
        Option("position", None, "layer of the indices into the new axis"),
        Option("position_axis", None, "the axis of 'position' that the new axis replaces"),
        Option("output_dim_via_time_from", None, "layer whose time axis is the new axis"),
        Option("out_spatial_dim", None, "Dim of the new axis (instead of output_dim_via_time_from)"),
        Option("filter_invalid_indices", False, "drop indices outside the new axis",
               noop="indices outside the new axis are dropped either way (RETURNN without it: TensorFlow's error on "
                    "CPU, dropped on GPU)"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        if not isinstance(opts.get("position"), str):
            raise NetworkError("layer %r (scatter_nd): 'position' must be a layer name, got %r" % (name, opts.get("position")))
        self.via = isinstance(opts.get("output_dim_via_time_from"), str)
        own = list(sources[:len(sources) - 1 - int(self.via)])
        super().__init__(name, opts, own, seed)
        check_sources(self, own)
        self.input, self.plan = concat_output(self, own)
        pos = sources[len(own)]
        if not (pos.sparse or pos.dtype.startswith("int")):
            raise NetworkError("%s: position must hold ints, got %s" % (self.desc, pos.short_repr()))
        given = self.opt("out_spatial_dim")
        if bool(given is not None) == self.via:
            raise NetworkError("%s: give either out_spatial_dim or output_dim_via_time_from (one of them)" % self.desc)
        if self.via:
            via = sources[-1]
            if via.time_dim is None:
                raise NetworkError("%s: output_dim_via_time_from has no time axis (%s)" % (self.desc, via.short_repr()))
            new = via.time_dim
        elif not isinstance(given, Dim):
            raise NetworkError("%s: out_spatial_dim must be a Dim, got %r" % (self.desc, given))
        else:
            new = given
        self.new = new
        self.pos_axis = self.axis(pos, self.opt("position_axis"), "position_axis")
        if pos.dims[self.pos_axis].is_batch_dim():
            raise NetworkError("%s: position_axis must not be the batch axis" % self.desc)
        data = self.input
        # the updates' axes in the position's layout, then their own other axes
        self.in_map: List[int] = []
        extra = []
        for d in data.dims:
            match = [i for i, p in enumerate(pos.dims) if p == d and i not in self.in_map]
            if match:
                self.in_map.append(match[0])
            else:
                self.in_map.append(pos.batch_ndim + len(extra))
                extra.append(d)
        self.pos = pos
        dims = list(pos.dims) + extra
        dims[self.pos_axis] = new
        time = self.pos_axis if pos.time_dim_axis is None or pos.time_dim_axis == self.pos_axis else pos.time_dim_axis
        self.output = relaid(name, data, dims, time_dim_axis=time)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        n_own = len(self.sources)
        x = concat_inputs(self, self.input, self.plan, sources[:n_own], ctx)
        pos = sources[n_own]
        n_pos, n = self.pos.batch_ndim, self.output.batch_ndim
        pos_t = tf.cast(pos.tensor, tf.int32)
        pos_shape = tf.shape(pos_t)
        if self.new.dimension is not None:
            extent = tf.constant(self.new.dimension)
        elif self.via:
            via = sources[-1]
            extent = tf.shape(via.tensor)[via.data.time_dim_axis]
        else:
            known = [s.sizes[self.new] for s in sources if self.new in s.sizes]
            if not known:
                raise NetworkError("%s: the sizes of out_spatial_dim %r did not reach this layer" % (self.desc, self.new))
            extent = tf.reduce_max(tf.concat([tf.reshape(known[0], [-1]), [0]], 0))
        updates = align_tensor(x.tensor, self.in_map, n)
        extra_axes = [a for a, m in enumerate(self.in_map) if m >= n_pos]
        extra_shape = [tf.shape(x.tensor)[a] for a in extra_axes]
        target = tf.concat([pos_shape, tf.stack(extra_shape)], 0) if extra_axes else pos_shape
        updates = tf.broadcast_to(updates, target)
        # RETURNN's tf.scatter_nd writes every entry of position, its padded ones too (with their updates, e.g. the
        # padded frames of a concat over time); an index outside the new axis is dropped (filter_invalid_indices;
        # else TensorFlow's error on CPU, dropped on GPU: here dropped)
        keep = (pos_t >= 0) & (pos_t < extent)
        pos_t = tf.where(keep, pos_t, 0)
        keep_full = tf.reshape(keep, tf.concat([pos_shape, tf.ones([n - n_pos], tf.int32)], 0))
        updates = tf.where(keep_full, updates, tf.zeros_like(updates))
        grids = []
        for i in range(n_pos):
            if i == self.pos_axis:
                grids.append(pos_t)
            else:
                shape = [1] * n_pos
                shape[i] = -1
                grids.append(tf.broadcast_to(tf.reshape(tf.range(pos_shape[i]), shape), pos_shape))
        indices = tf.stack(grids, axis=-1)
        out_shape = tf.tensor_scatter_nd_update(target, [[self.pos_axis]], [extent])
        out = tf.scatter_nd(indices, updates, out_shape)
        sizes = {}
        if self.new.is_dynamic():
            for s in sources:
                if self.new in s.sizes:
                    sizes[self.new] = s.sizes[self.new]
                    break
        return self.make_output(out, sources[:n_own + 1], sizes)


@register_layer
class BooleanMaskLayer(Layer):
    """See the module docstring."""

    layer_class = "boolean_mask"
    ref_options = ("mask",)
    options = (
        Option("mask", None, "layer of bools over the axes 'dims'"),
        Option("dims", None, "the axes of the mask (Dims or descriptions of the mask's axes)"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        if not isinstance(opts.get("mask"), str):
            raise NetworkError("layer %r (boolean_mask): 'mask' must be a layer name, got %r" % (name, opts.get("mask")))
        super().__init__(name, opts, sources[:-1], seed)
        check_sources(self, sources[:-1], 1, 1)
        data, mask = sources[0], sources[-1]
        if mask.dtype != "bool":
            raise NetworkError("%s: the mask must be bool, got %s" % (self.desc, mask.short_repr()))
        dims_opt = self.opt("dims")
        dims_opt = list(dims_opt) if isinstance(dims_opt, (list, tuple, set)) else [dims_opt]
        mask_axes = [self.axis(mask, d, "dims") for d in dims_opt]
        if sorted(mask_axes) != list(range(mask.batch_ndim)):
            raise NetworkError("%s: 'dims' %r must be exactly the mask's axes %s" % (self.desc, dims_opt, mask.short_repr()))
        self.mask_perm = mask_axes
        self.mask_dims = [mask.dims[a] for a in mask_axes]
        self.x_map = []  # input axes: position in (mask dims..., remaining...)
        rest = []
        for d in data.dims:
            match = [i for i, m in enumerate(self.mask_dims) if m == d]
            if match:
                self.x_map.append(match[0])
            else:
                self.x_map.append(len(self.mask_dims) + len(rest))
                rest.append(d)
        out_dim = self.opts.get("out_dim")
        if out_dim is None:
            out_dim = Dim(None, kind=DimTypes.Spatial, description="%s:mask" % name)
        elif not isinstance(out_dim, Dim) or out_dim.dimension is not None:
            raise NetworkError("%s: out_dim must be a dynamic Dim, got %r" % (self.desc, out_dim))
        out_dim.scalar_sizes = True  # one count for the whole batch
        self.new = out_dim
        self.output = relaid(name, data, [out_dim] + rest, time_dim_axis=0)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = self.apply_dropout(sources[0], ctx)
        mask_v = sources[-1]
        # RETURNN's tf.boolean_mask of the padded tensors: padded frames count where the mask is True there, as read
        # (a layer's computed padding, else data's zero frames: False)
        mask = tf.transpose(mask_v.as_read(), self.mask_perm)
        n_mask = len(self.mask_dims)
        n = n_mask + len(self.output.dims) - 1
        tensor = align_tensor(x.as_read(), self.x_map, n)
        rest_axes = [a for a, m in enumerate(self.x_map) if m >= n_mask]
        if rest_axes:
            shape = tf.concat([tf.shape(mask), tf.stack([tf.shape(x.tensor)[a] for a in rest_axes])], 0)
        else:
            shape = tf.shape(mask)
        tensor = tf.broadcast_to(tensor, shape)
        out = tf.boolean_mask(tensor, mask)
        count = tf.shape(out)[0]
        sizes = {d: s for d, s in x.sizes.items()}
        sizes[self.new] = count
        return self.make_output(out, [], sizes)
