"""Indexing layers and parameters as layer outputs.

- ``gather``: ``from`` indexed on ``axis`` by ``position`` (an int, or a layer of integer indices);
  every axis both have (besides ``axis``; e.g. the batch; also a static spatial axis of one size, not
  a user-made one from behavior_version 16) is gathered per entry (RETURNN's ``batch_dims``, these axes first); ``axis`` is replaced by the position's other axes. Padded index positions gather too (as RETURNN);
  an index outside the axis gives zeros (RETURNN on GPU; on CPU TensorFlow fails there). On the batch axis
  (a position layer only) the position's batch axis replaces it: rows of other sequences, their lengths those of
  the position's sequences (as RETURNN).
- ``gather_nd`` (RETURNN's old layer): ``position`` (B, ...) indexes the time axis of ``from``
  (B, T, ...) per sequence; ``gather`` on ``"T"`` with only the batch axis gathered per entry.
- ``variable``: a trainable parameter of ``shape`` (ints or static Dims, RETURNN's; ``init``, ``dtype``
  float32, or int32/int64, never trained (e.g. returnn_common's random state variables); or
  ``init_by_layer``: the initial value is that layer's, e.g. returnn_common's static ``random`` layer, a layer
  that reads no data, computed once when the variable is made, its axes matched to ``shape`` by dim); ``add_batch_axis``
  repeats it per sequence (first axis), ``add_time_axis`` adds a time axis of size 1 after it (engine-made,
  as RETURNN's dummy time: before behavior version 11 it broadcasts into another source's axis, e.g. data's T).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np
import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim, DimTypes
from returnn.tensor.dim import batch_dim
from returnn.tensor.data import NotSpecified
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.helpers import check_sources, explicit_feature_positions
from returnn.tf.layers.initializers import initial_value
from returnn.tf.layers.options import Option
from returnn.tf.layers.params import Param


@register_layer
class GatherLayer(Layer):
    """See the module docstring."""

    layer_class = "gather"
    no_int_axes = ("axis",)  # RETURNN: allow_int=False
    ref_options = ("position",)
    options = (
        Option("position", None, "index: an int, or a layer of integer indices"),
        Option("axis", None, "axis of 'from' to index (RETURNN axis description)"),
        Option("clip_to_valid", False, "positions clipped to 0 .. the axis length - 1 (per sequence on a dynamic "
                                       "axis; a length-0 sequence gathers zeros), as RETURNN"),
    )
    default_axis = None

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        self.pos_layer = isinstance(opts.get("position"), str)
        own = list(sources[:-1] if self.pos_layer else sources)
        super().__init__(name, opts, own, seed)
        check_sources(self, own, 1, 1)
        data = own[0]
        axis_opt = self.opt("axis") if self.opt("axis") is not None else self.default_axis
        if axis_opt is None:
            raise NetworkError("%s: needs 'axis'" % self.desc)
        self.ax = self.axis(data, axis_opt, "axis")
        if data.dims[self.ax].is_batch_dim() and not self.pos_layer:
            raise NetworkError("%s: an int position on the batch axis is refused (a position layer gathers there)"
                               % self.desc)
        self.clip = bool(self.opt("clip_to_valid"))
        dynamic = data.dims[self.ax].is_dynamic()
        if self.clip and dynamic and (data.batch_dim_axis is None or (self.pos_layer and sources[-1].batch_dim_axis is None)):
            raise NetworkError("%s: clip_to_valid on the dynamic axis %r needs a batch axis in 'from' and 'position' "
                               "(RETURNN's clipped position gets the lengths' batch axis)" % (
                                   self.desc, data.dims[self.ax].description))
        if not self.pos_layer:
            if isinstance(self.opt("position"), bool) or not isinstance(self.opt("position"), int):
                raise NetworkError("%s: 'position' must be an int or a layer name, got %r"
                                   % (self.desc, self.opt("position")))
            size = data.dims[self.ax].dimension
            if not self.clip and (self.opt("position") < 0 or (size is not None and self.opt("position") >= size)):
                # RETURNN's tf.gather: an index error on CPU (zeros on GPU), no counting from the end
                raise NetworkError("%s: position %i is outside the axis %r (0 .. %s)" % (
                    self.desc, self.opt("position"), data.dims[self.ax].description,
                    "its length - 1" if size is None else size - 1))
            dims = [d for i, d in enumerate(data.dims) if i != self.ax]
        else:
            pos = sources[-1]
            if not (pos.sparse or pos.dtype.startswith("int")):
                raise NetworkError("%s: position %r must hold integer indices, got %s"
                                   % (self.desc, pos.name, pos.short_repr()))
            dims = self._plan(data, pos)
        feat = data.feature_dim_axis
        kwargs = {}
        if data._feature_dim_axis is NotSpecified:
            # RETURNN's template: by the default rule (the last static axis), unless position sets its feature axis
            hit = explicit_feature_positions(sources[-1] if self.pos_layer else None, dims)
            if hit:
                kwargs["feature_dim_axis"] = hit[-1]
        elif feat is not None and feat != self.ax:  # an explicit feature axis stays the feature axis
            kwargs["feature_dim_axis"] = [i for i, d in enumerate(dims) if d is data.dims[feat]][-1]
        self.output = Data(name, dims=dims, dtype=data.dtype, sparse_dim=data.sparse_dim, **kwargs)

    def _common_axes(self, data: Data, pos: Data) -> List[Tuple[int, int]]:
        """The axes of ``data`` (besides the gathered one) that ``pos`` has too, each gathered per entry, with
        their axis in ``pos`` (RETURNN's GatherLayer: all such axes, in the input's order; each axis of ``pos``
        takes the first free equal axis, else the first free static spatial axis of its size (allow_same_spatial_dim;
        from behavior_version 16 not for a dim the user made))."""
        from returnn.tf.layers.helpers import _user_made
        from returnn.tf.layers.norm import behavior_version

        def loose(d: Dim, p: Dim) -> bool:
            return d.dimension is not None and d.dimension == p.dimension and \
                d.kind == p.kind == DimTypes.Spatial and not (
                    behavior_version() >= 16 and (_user_made(d) or _user_made(p)))

        pairs: Dict[int, int] = {}
        for j, p in enumerate(pos.dims):
            free = [i for i in range(data.batch_ndim) if i not in pairs]
            found = [i for i in free if data.dims[i] == p] or [i for i in free if loose(data.dims[i], p)]
            if found:
                pairs[found[0]] = j
        return [(i, pairs[i]) for i in sorted(pairs) if i != self.ax]

    def _plan(self, data: Data, pos: Data) -> List[Dim]:
        """RETURNN's layout: the common axes, the input's other axes before the gathered one (as many as it
        has axes before it beyond the common ones), the position's other axes, the input's remaining axes."""
        pairs = self._common_axes(data, pos)
        common, common_pos = [i for i, _ in pairs], [j for _, j in pairs]
        rest_in = [i for i in range(data.batch_ndim) if i not in common and i != self.ax]
        rest_pos = [j for j in range(pos.batch_ndim) if j not in common_pos]
        self.batch_dims = len(common)
        k = max(self.batch_dims, self.ax) - self.batch_dims
        self.params_perm = common + rest_in[:k] + [self.ax] + rest_in[k:]
        self.index_perm = common_pos + rest_pos
        self.gather_axis = self.batch_dims + k
        return ([data.dims[i] for i in common + rest_in[:k]] + [pos.dims[j] for j in rest_pos]
                + [data.dims[i] for i in rest_in[k:]])

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = sources[0]
        if not self.pos_layer:
            n = tf.shape(x.tensor)[self.ax]
            index = tf.minimum(tf.constant(int(self.opt("position"))), n - 1)
            if self.clip:
                if x.size(self.ax) is not None:  # per sequence: RETURNN's position clipped to 0 .. each length - 1
                    # (tf.clip_by_value's order: the upper bound first, so an empty sequence reads its frame 0)
                    return self.make_output(self._per_sequence(x, tf.maximum(tf.minimum(index, x.size(self.ax) - 1),
                                                                             0)), [x])
                index = tf.maximum(index, 0)
            return self.make_output(tf.gather(x.tensor, index, axis=self.ax), [x])
        tensor = x.tensor
        if self.params_perm != sorted(self.params_perm):
            tensor = tf.transpose(tensor, self.params_perm)
        # RETURNN gathers at every entry of position, its padded ones too (their frames are read later, e.g. by a
        # reverse cumsum); an index outside the axis gives zeros (TensorFlow's gather on GPU; an error on CPU)
        index = tf.cast(sources[-1].tensor, tf.int32)
        if self.index_perm != sorted(self.index_perm):
            index = tf.transpose(index, self.index_perm)
        if self.clip:
            index = self._clipped(index, x, sources[-1].data)
        return self.make_output(_gather_or_zeros(tensor, index, self.gather_axis, self.batch_dims), sources)

    def _clipped(self, index: tf.Tensor, x: LayerOutput, pos: Data) -> tf.Tensor:
        """``index`` (in the order ``index_perm`` of the position's axes) clipped to 0 .. length - 1 of the
        gathered axis: its static size, or each sequence's length (RETURNN's tf.clip_by_value bounds above
        first: an empty sequence reads its padded frame 0)."""
        size = x.size(self.ax)
        if size is None:
            return tf.clip_by_value(index, 0, tf.shape(x.tensor)[self.ax] - 1)
        where = [pos.dims[j].is_batch_dim() for j in self.index_perm].index(True)
        shape = [1] * where + [-1] + [1] * (len(self.index_perm) - where - 1)
        return tf.maximum(tf.minimum(index, tf.reshape(tf.cast(size, index.dtype), shape) - 1), 0)

    def _per_sequence(self, x: LayerOutput, index: tf.Tensor) -> tf.Tensor:
        """``x`` at ``index`` (B,) on the gathered axis, per sequence (-1: zeros), the axis removed."""
        b, nd = x.data.batch_dim_axis, x.data.batch_ndim
        perm = [b] + [i for i in range(nd) if i != b]
        out = _gather_or_zeros(tf.transpose(x.tensor, perm), index, perm.index(self.ax), 1)
        order = [i for i in perm if i != self.ax]
        return tf.transpose(out, [order.index(i) for i in range(nd) if i != self.ax])


def _gather_or_zeros(tensor: tf.Tensor, index: tf.Tensor, axis: int, batch_dims: int) -> tf.Tensor:
    """``tf.gather`` where an index outside ``axis`` gives zeros (RETURNN on GPU; on CPU TensorFlow fails
    there): the gather reads a zero frame appended to the axis instead."""
    n = tf.shape(tensor)[axis]
    pads = [[0, 0]] * len(tensor.shape)
    pads[axis] = [0, 1]
    index = tf.where((index >= 0) & (index < n), index, n)
    return tf.gather(tf.pad(tensor, pads), index, axis=axis, batch_dims=batch_dims)


@register_layer
class GatherNdLayer(GatherLayer):
    """See the module docstring."""

    layer_class = "gather_nd"
    default_axis = "T"
    no_int_axes = ()

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        if not isinstance(opts.get("position"), str):  # RETURNN's gather_nd resolves position with get_layer
            raise NetworkError("layer %r (gather_nd): 'position' must name a layer, got %r" % (name, opts.get("position")))
        super().__init__(name, opts, sources, seed)

    def _common_axes(self, data: Data, pos: Data) -> List[Tuple[int, int]]:
        """RETURNN's GatherNdLayer: only the batch axis is gathered per entry."""
        both = data.batch_dim_axis is not None and pos.batch_dim_axis is not None
        return [(data.batch_dim_axis, pos.batch_dim_axis)] if both else []


VARIABLE_DTYPES = ("float32", "int32", "int64")


@register_layer
class VariableLayer(Layer):
    """See the module docstring."""

    layer_class = "variable"
    default_from = ()
    ref_options = ("init_by_layer",)
    options = (
        Option("shape", None, "shape of the parameter (list of ints or static Dims)"),
        Option("dtype", "float32", "its dtype"),
        Option("init", 0.0, "initial value (RETURNN init spec)"),
        Option("add_batch_axis", False, "repeat the parameter over the batch (first axis)"),
        Option("add_time_axis", False, "add a time axis of size 1 after the batch axis"),
        Option("init_by_layer", None, "a layer that reads no data (e.g. a static random layer) whose value is "
                                      "the initial value"),
        Option("param_name", None, "RETURNN's name of the parameter in the layer's scope (default: the layer's name)"),
        Option("saveable", True, "False: the parameter is not stored in checkpoints (starts from init when loaded)"),
        Option("non_critical_for_restore", False, "True: a checkpoint without the parameter is no error"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        n_init = 1 if self.opt("init_by_layer") is not None else 0
        check_sources(self, sources, n_init, n_init)
        shape = self.opt("shape")
        if not isinstance(shape, (list, tuple)) or not all(
                (isinstance(n, int) and not isinstance(n, bool) and n > 0)
                or (isinstance(n, Dim) and n.dimension is not None and n.dimension > 0) for n in shape):
            raise NetworkError("%s: 'shape' must be a list of positive ints or static Dims, got %r" % (self.desc, shape))
        # RETURNN: an int is a new axis (the last one the feature axis), a Dim is that axis
        dims = [n if isinstance(n, Dim) else Dim(n, kind=DimTypes.Feature if i == len(shape) - 1 else DimTypes.Spatial,
                                                 description="%s:var%i" % (name, i), auto_generated=True)
                for i, n in enumerate(shape)]
        sizes = [d.dimension for d in dims]
        param_name = self.opt("param_name") or name.rsplit("/", 1)[-1]
        if not isinstance(param_name, str):
            raise NetworkError("%s: 'param_name' must be a str, got %r" % (self.desc, param_name))
        dtype = self.opt("dtype")
        if dtype not in VARIABLE_DTYPES:
            raise NetworkError("%s: 'dtype' must be one of %s, got %r" % (self.desc, ", ".join(VARIABLE_DTYPES), dtype))
        # an integer parameter gets no gradient: it is never trained (RETURNN's random state variables)
        trainable = None if dtype.startswith("float") else False
        if self.opt("init_by_layer") is not None:
            value = self._value_of_init_layer(sources[0], dims)
        else:
            try:
                value = initial_value(self.opt("init"), sizes, self._rng)
            except ValueError as exc:
                raise NetworkError("%s: option 'init': %s" % (self.desc, exc)) from None
        self.var = self.variable(param_name, np.asarray(value).astype(dtype), trainable=trainable)
        self.with_batch = bool(self.opt("add_batch_axis"))
        self.with_time = bool(self.opt("add_time_axis"))
        if self.with_time:
            # engine-made as RETURNN's dummy time (auto_generated): before behavior version 11 it broadcasts
            dims = [Dim(1, kind=DimTypes.Spatial, description="%s:dummy-time" % name, auto_generated=True)] + dims
        if self.with_batch:
            dims = [batch_dim] + dims
        # no time axis (RETURNN's default: a dynamic axis only), the dummy time axis is a static one
        self.output = Data(name, dims=dims, dtype=dtype, time_dim_axis=None)

    def _value_of_init_layer(self, init: Data, dims: List[Dim]) -> Any:
        """RETURNN's init_by_layer: the layer's value (``copy_compatible_to`` the variable's dims: its axes
        matched by dim, the higher match_priority first), computed here once; a layer that reads no data only."""
        from returnn.tf.layers import reuse
        try:
            value = reuse.static_value(self.opt("init_by_layer"))
        except KeyError:
            value = None
        if value is None or init.batch_dim_axis is not None or any(d.dimension is None for d in init.dims):
            raise NetworkError("%s: 'init_by_layer' %r must be a layer that reads no data, with static axes only "
                               "(e.g. a static random layer), got %s" % (self.desc, self.opt("init_by_layer"),
                                                                        init.short_repr()))
        perm: List[int] = []
        for d in dims:  # RETURNN's copy_compatible_to: the same Dim object, else the equal axis of top match_priority
            axes = [a for a in range(len(init.dims)) if a not in perm and init.dims[a] == d]
            same = [a for a in axes if init.dims[a] is d]
            top = max((init.dims[a].match_priority for a in axes), default=0)
            axes = same or [a for a in axes if init.dims[a].match_priority == top]
            if len(axes) != 1:
                raise NetworkError("%s: 'init_by_layer' %s does not have the axes of 'shape' %s"
                                   % (self.desc, init.short_repr(), [x.short_repr() for x in dims]))
            perm.append(axes[0])
        if len(perm) != len(init.dims):
            raise NetworkError("%s: 'init_by_layer' %s does not have the axes of 'shape' %s"
                               % (self.desc, init.short_repr(), [x.short_repr() for x in dims]))
        return tf.transpose(value, perm).numpy()

    def returnn_params(self) -> List[Param]:
        return [dataclasses.replace(p, saveable=bool(self.opt("saveable")), critical=not self.opt("non_critical_for_restore"))
                for p in super().returnn_params()]

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        value = tf.convert_to_tensor(self.var)
        if self.with_time:
            value = value[None]
        if self.with_batch:
            if ctx.batch_size is None:
                raise NetworkError("%s: add_batch_axis needs the batch size (run it inside a network)" % self.desc)
            value = tf.broadcast_to(value[None], tf.concat([[ctx.batch_size], tf.shape(value)], 0))
        return self.make_output(value)
