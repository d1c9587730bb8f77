"""Products of inputs: ``dot`` (contraction over named axes) and ``gating`` (GLU-style)."""
from __future__ import annotations

import string
from typing import Any, Dict, List, Sequence, Tuple

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim, DimTypes
from returnn.tf.activations import get_activation
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.helpers import check_sources, common_dims, dropout_sources, new_feature_dim
from returnn.tf.layers.options import Option


def _axis_list(value: Any) -> List[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


@register_layer
class DotLayer(Layer):
    """``sum over red1/red2`` of ``a * b`` (two sources). When the config names ``var1``/``var2``
    (RETURNN's own axes of each source; ``None`` = none, a ``?`` suffix = if present), every other
    non-reduced axis is common and the common axes of ``a`` and ``b`` are paired in order (e.g. the
    size-1 head axes of two split_dims). Otherwise the axes are matched by dim tags. Shared axes
    come first, then ``a``'s own, then ``b``'s own axes. Padded positions of reduced dynamic axes
    do not count. A sparse source reduced by its sparse dim (given as that Dim) picks the other's
    entries of its indices (RETURNN's gather, an embedding lookup)."""

    layer_class = "dot"
    options = (
        Option("reduce", None, "axis description(s) reduced in both sources (RETURNN's shorthand for red1 = red2)"),
        Option("red1", -1, "axis description(s) of the first source to reduce"),
        Option("red2", -2, "axis description(s) of the second source to reduce (paired with red1)"),
        Option("var1", None, "the first source's own axes (given: the other non-reduced axes pair up in order)"),
        Option("var2", None, "the second source's own axes (given: the other non-reduced axes pair up in order)"),
        Option("add_var2_if_empty", None, "add a size-1 axis when the second source has no own axes (None: before "
                                          "behavior version 3 only, as RETURNN, which refuses it from then on)"),
        Option("use_mask", True, "reduced dynamic axes without their padded positions (False: summed as read "
                                 "there, RETURNN's: a layer's computed padding, data's zero frames)"),
        Option("debug", False, "RETURNN: print the axes it reduces and keeps",
               noop="a debug print of RETURNN's; the value is the same"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources, 2, 2)
        a, b = sources
        red1, red2 = self.opt("red1"), self.opt("red2")
        if self.opts.get("reduce") is not None:
            if "red1" in self.opts or "red2" in self.opts:
                raise NetworkError("%s: give 'reduce' or 'red1'/'red2', not both (RETURNN asserts it)" % self.desc)
            red1 = red2 = self.opts["reduce"]
        self.one_hot = [x.sparse for x in (a, b)]
        if (a.sparse or b.sparse) and not self._by_sparse_dim(a, b, red1, red2):
            a, b = self._index_views(a, b)
        elif a.sparse or b.sparse:
            a, b = self._one_hot_views(a, b, red1, red2)
        self.views = (a, b)
        var1, var2 = self._var_options(red1, red2)
        self.red_a = [x for d in _axis_list(red1) for x in self.axes(a, d, "red1")]
        self.red_b = [x for d in _axis_list(red2) for x in self.axes(b, d, "red2")]
        if not self.red_a or not self.red_b:  # RETURNN's get_out_data_from_opts raises on it
            raise NetworkError("%s: reduce axis red1 %r, red2 %r not found in the sources %s, %s"
                               % (self.desc, red1, red2, a.short_repr(), b.short_repr()))
        if len(self.red_a) != len(self.red_b) or any(
                a.dims[i].dimension != b.dims[j].dimension for i, j in zip(self.red_a, self.red_b)):
            raise NetworkError("%s: red1 %s and red2 %s must pair axes of equal size" % (
                self.desc, [a.dims[i].short_repr() for i in self.red_a], [b.dims[j].short_repr() for j in self.red_b]))
        rest_a = [i for i in range(a.batch_ndim) if i not in self.red_a]
        rest_b = [j for j in range(b.batch_ndim) if j not in self.red_b]
        from returnn.tf.layers.norm import behavior_version
        if var1 != "auto":
            dims, (map_a, map_b) = self._pair_common(a, b, rest_a, rest_b, var1, var2)
        elif behavior_version() < 14:  # RETURNN: static axes of one size count as the same axis there
            dims, (map_a, map_b) = self._pair_axes(a, b, rest_a, rest_b, *_loose_var_axes(a, b, rest_a, rest_b))
        else:
            dims, (map_a, map_b) = common_dims([[a.dims[i] for i in rest_a], [b.dims[j] for j in rest_b]], strict=True)
        shared = set(map_a) & set(map_b)
        letters = iter(string.ascii_letters)
        common = {pos: next(letters) for pos in range(len(dims))}
        red = [next(letters) for _ in self.red_a]
        sub_a, sub_b = [""] * a.batch_ndim, [""] * b.batch_ndim
        for i, pos in zip(rest_a, map_a):
            sub_a[i] = common[pos]
        for j, pos in zip(rest_b, map_b):
            sub_b[j] = common[pos]
        for k, (i, j) in enumerate(zip(self.red_a, self.red_b)):
            sub_a[i] = sub_b[j] = red[k]
        order = [p for p in map_a if p in shared] + [p for p in map_a if p not in shared] + \
            [p for p in map_b if p not in shared]
        self.equation = "%s,%s->%s" % ("".join(sub_a), "".join(sub_b), "".join(common[p] for p in order))
        out_dims = [dims[p] for p in order]
        if any(self.one_hot):
            self._check_sparse_layout([i for i, p in zip(rest_a, map_a) if p not in shared],
                                      [j for j, p in zip(rest_b, map_b) if p not in shared])
        add_var2 = self.opt("add_var2_if_empty")
        if add_var2 and behavior_version() >= 3:
            raise NetworkError("%s: add_var2_if_empty is not allowed from behavior version 3 (RETURNN)" % self.desc)
        add_var2 = behavior_version() < 3 if add_var2 is None else bool(add_var2)
        self.expand = not [p for p in map_b if p not in shared] and add_var2
        if self.expand:
            out_dims.append(Dim(1, kind=DimTypes.Spatial, description="%s:dot-var2" % name))
        self.output = Data(name, dims=out_dims, dtype=a.dtype)

    @staticmethod
    def _by_sparse_dim(a: Data, b: Data, red1: Any, red2: Any) -> bool:
        """Whether RETURNN's dot reduces a sparse source's sparse dim (``red1 == a.sparse_dim`` or
        ``red2 == b.sparse_dim``, its gather); otherwise it multiplies the sparse sources' indices as they are."""
        return any(x.sparse and isinstance(red, Dim) and red == x.sparse_dim for x, red in ((a, red1), (b, red2)))

    def _index_views(self, a: Data, b: Data) -> Tuple[Data, Data]:
        """RETURNN's dot reducing other axes than a sparse dim: the sparse sources' indices are multiplied as
        plain int tensors (its matmul; the output is dense, of the first dense source's dtype, else ``b``'s).
        Its matmul needs one dtype: an int index beside float values is refused, as RETURNN fails there."""
        if a.dtype != b.dtype:
            raise NetworkError("%s: a sparse source reduced by other axes than its sparse dim multiplies its %s indices "
                               "with the other source's %s values (RETURNN's matmul of two dtypes fails); reduce "
                               "its sparse dim (an embedding lookup)" % (self.desc, (a if a.sparse else b).dtype,
                                                                         (b if a.sparse else a).dtype))
        self.one_hot = [False, False]
        return tuple(x.copy(sparse_dim=None, dtype=x.dtype) if x.sparse else x  # type: ignore[return-value]
                     for x in (a, b))

    def _one_hot_views(self, a: Data, b: Data, red1: Any, red2: Any) -> Tuple[Data, Data]:
        """RETURNN's dot reducing the sparse dim of one source (given as that Dim): a gather of the other's entries
        (an embedding lookup). Here the sparse source becomes a one-hot view with its sparse dim as a last axis
        (the sum over it picks the same entries); other sparse forms are refused."""
        views = []
        for x, other, red, key in ((a, b, red1, "red1"), (b, a, red2, "red2")):
            if not x.sparse:
                views.append(x)
                continue
            reds = _axis_list(red)
            if other.sparse or len(reds) != 1 or not isinstance(reds[0], Dim) or reds[0] != x.sparse_dim:
                raise NetworkError("%s: a sparse source %s only with its sparse dim as %s and a dense other source (an "
                                   "embedding lookup, as RETURNN), got %s %r" % (self.desc, x.short_repr(), key, key, red))
            if x.sparse_dim.dimension is None:
                raise NetworkError("%s: the sparse dim of %s has no static size (not supported here)"
                                   % (self.desc, x.short_repr()))
            views.append(Data(x.name, dims=list(x.dims) + [x.sparse_dim], dtype=other.dtype))
        return views[0], views[1]

    def _check_sparse_layout(self, var_a: List[int], var_b: List[int]) -> None:
        """RETURNN gathers the dense source's entries in its axis order (reduced axis after or before its own axes)
        and then reshapes (not transposes) the result to (shared, a's own, b's own): where the dense source's
        reduced axis comes before its own axes (a sparse first source) or after them (a sparse second one), both
        sources with own axes (``var_a``, ``var_b``), its values land in the wrong places; refused."""
        if not var_a or not var_b:
            return
        if self.one_hot[0] and self.red_b[0] > min(var_b) or self.one_hot[1] and self.red_a[0] < min(var_a):
            dense = "second" if self.one_hot[0] else "first"
            raise NetworkError("%s: the dense %s source's reduced axis %s its own axes: RETURNN's sparse dot then "
                               "reshapes the gathered entries into the wrong order (a RETURNN bug); put the reduced "
                               "axis %s (e.g. a transpose layer)" % (
                                   self.desc, dense, "after" if self.one_hot[0] else "before",
                                   "first" if self.one_hot[0] else "last"))

    def _var_options(self, red1: Any, red2: Any):
        """(var1, var2) by RETURNN's rules: before behavior version 3 the defaults red1 -1, red2 -2,
        var1 -2, var2 -1 (ints allowed); from 3 the reduced axes must be given, no ints, and var1
        and var2 both given or both left out (then, as with "auto", the axes not found in the other
        source: ("auto", "auto"))."""
        from returnn.tf.layers.norm import behavior_version
        given = {k: self.opts[k] for k in ("var1", "var2") if k in self.opts}
        if behavior_version() < 3 and "auto" not in given.values():
            return given.get("var1", -2), given.get("var2", -1)
        if behavior_version() >= 3:
            if self.opts.get("reduce") is None and ("red1" not in self.opts or "red2" not in self.opts):
                raise NetworkError("%s: the reduced axes must be given ('reduce' or 'red1' and 'red2') from behavior "
                                   "version 3 (RETURNN: there is no default)" % self.desc)
            values = [red1, red2] + list(given.values())
            if any(isinstance(v, int) and not isinstance(v, bool) for x in values for v in _axis_list(x)):
                raise NetworkError("%s: axes as ints are not allowed from behavior version 3 (RETURNN's dot: by tag or "
                                   "special name)" % self.desc)
        if len(given) == 2 and "auto" not in given.values():
            return given["var1"], given["var2"]
        if any(v != "auto" for v in given.values()):
            raise NetworkError("%s: give both var1 and var2 or neither (%s given; RETURNN asserts it from behavior "
                               "version 3)" % (self.desc, " and ".join("%s %r" % kv for kv in given.items())))
        return "auto", "auto"

    def _var_axes(self, data: Data, value: Any, key: str, rest: List[int]) -> List[int]:
        from returnn.tf.layers.norm import behavior_version
        out: List[int] = []
        for desc in _axis_list(value):
            if desc is None:
                continue
            optional = isinstance(desc, str) and desc.endswith("?")
            if optional and behavior_version() >= 1:
                raise NetworkError("%s: %s %r: an optional axis ('?' suffix) is no RETURNN axis form (only its 2021 "
                                   "branch frithjof-self-attention had it); not with a behavior_version" % (
                                       self.desc, key, desc))
            if optional:
                desc = desc[:-1]
                if not data.has_axis(desc):
                    continue
            found = self.axes(data, desc, key)
            if any(i not in rest for i in found):
                raise NetworkError("%s: %s %r is a reduced axis (RETURNN asserts var and reduced axes apart)"
                                   % (self.desc, key, desc))
            out += [i for i in found if i not in out]
        return out

    def _pair_common(self, a: Data, b: Data, rest_a: List[int], rest_b: List[int], var1: Any, var2: Any):
        """Union dims and maps when var1/var2 are given: common axes paired in order."""
        var_a, var_b = self._var_axes(a, var1, "var1", rest_a), self._var_axes(b, var2, "var2", rest_b)
        return self._pair_axes(a, b, rest_a, rest_b, var_a, var_b)

    def _pair_axes(self, a: Data, b: Data, rest_a: List[int], rest_b: List[int], var_a: List[int], var_b: List[int]):
        """Union dims and maps of the var axes ``var_a``, ``var_b`` and the other (common) axes."""
        common_a = [i for i in rest_a if i not in var_a]
        common_b = [j for j in rest_b if j not in var_b]
        by_dim: List[int] = []  # the same dims in another order (e.g. after a transpose): paired by dim
        for i in common_a:
            by_dim += [j for j in common_b if b.dims[j] == a.dims[i] and j not in by_dim][:1]
        if len(by_dim) == len(common_a) == len(common_b):
            common_b = by_dim
        if len(common_a) != len(common_b) or any(
                a.dims[i].dimension != b.dims[j].dimension and not (a.dims[i].is_dynamic() and b.dims[j].is_dynamic())
                for i, j in zip(common_a, common_b)):
            raise NetworkError("%s: the common axes (neither reduced nor var) %s and %s do not pair up" % (
                self.desc, [a.dims[i].short_repr() for i in common_a], [b.dims[j].short_repr() for j in common_b]))
        dims = [a.dims[i] for i in common_a] + [a.dims[i] for i in var_a] + [b.dims[j] for j in var_b]
        pos_a = {i: k for k, i in enumerate(common_a)}
        pos_a.update({i: len(common_a) + k for k, i in enumerate(var_a)})
        pos_b = {j: k for k, j in enumerate(common_b)}
        pos_b.update({j: len(common_a) + len(var_a) + k for k, j in enumerate(var_b)})
        return dims, ([pos_a[i] for i in rest_a], [pos_b[j] for j in rest_b])

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        a, b = [LayerOutput(tf.one_hot(x.tensor, x.data.sparse_dim.dimension, dtype=view.dtype), view, x.sizes)
                if hot else x for x, view, hot in zip(dropout_sources(self, sources, ctx), self.views, self.one_hot)]
        if not self.opt("use_mask"):  # RETURNN sums the padded positions too, as they are read (computed, data's zeros)
            return self._output(tf.einsum(self.equation, a.as_read(), b.as_read()), sources)
        ta, tb = a.tensor, b.tensor
        for x, axes, which in ((a, self.red_a, 0), (b, self.red_b, 1)):
            for axis in axes:
                if x.data.dims[axis].is_dynamic():
                    value = ta if which == 0 else tb
                    masked = tf.where(x.broadcast_mask(axis), value, tf.zeros_like(value))
                    ta, tb = (masked, tb) if which == 0 else (ta, masked)
        return self._output(tf.einsum(self.equation, ta, tb), sources)

    def _output(self, y: tf.Tensor, sources: List[LayerOutput]) -> LayerOutput:
        if self.expand:
            y = y[..., None]
        return self.make_output(y, sources)


def _loose_var_axes(a: Data, b: Data, rest_a: List[int], rest_b: List[int]) -> Tuple[List[int], List[int]]:
    """RETURNN's dot var axes ("auto") before behavior version 14: the axes of each source that match
    none of the other's, where two non-batch axes of the same static size match whatever their tags
    (Dim.is_equal with treat_feature_as_spatial, allow_same_spatial_dim, undefined_matches)."""
    def same(x: Dim, y: Dim) -> bool:
        return x == y or (not x.is_batch_dim() and not y.is_batch_dim() and x.dimension is not None
                          and x.dimension == y.dimension)
    var_a = [i for i in rest_a if not any(same(a.dims[i], b.dims[j]) for j in rest_b)]
    var_b = [j for j in rest_b if not any(same(b.dims[j], a.dims[i]) for i in rest_a)]
    return var_a, var_b


@register_layer
class GatingLayer(Layer):
    """``activation(a) * gate_activation(b)``: with one source its feature axis is split in two
    halves (a, b); with two sources a and b are the sources."""

    layer_class = "gating"
    options = (
        Option("activation", None, "activation of the first half (required: RETURNN's GatingLayer has no default)"),
        Option("gate_activation", "sigmoid", "activation of the gate (second half)"),
        Option("out_dim", None, "Dim of the output feature axis"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources, 1, 2)
        if "activation" not in opts:  # RETURNN (since 2017): GatingLayer.__init__ takes it without a default
            raise NetworkError("%s: needs 'activation' (e.g. \"tanh\"; RETURNN's gating layer has no default)" % self.desc)
        self.act = get_activation(self.opt("activation"), name)
        self.gate = get_activation(self.opt("gate_activation"), name)
        x = sources[0]
        if any(s.sparse or s.feature_dim_axis is None for s in sources):
            raise NetworkError("%s: sources must be dense with a feature axis" % self.desc)
        if len(sources) == 2:
            if sources[1].dim != x.dim:
                raise NetworkError("%s: both sources need the same feature dim, got %s" % (
                    self.desc, [s.dim for s in sources]))
            dims, self.maps = common_dims([s.dims for s in sources])
            self.output = Data(name, dims=dims, feature_dim_axis=self.maps[0][x.feature_dim_axis])
        else:
            if x.dim % 2:
                raise NetworkError("%s: the feature dim %i must be even to split in two" % (self.desc, x.dim))
            out = self.opt("out_dim") if isinstance(self.opt("out_dim"), Dim) else new_feature_dim(name, x.dim // 2)
            self.output = x.copy_template_replace_dim_tag(x.feature_dim_axis, out).copy(name)
        self.check_n_out(self.output.dim)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        from returnn.tf.layers.output import align_tensor
        sources = dropout_sources(self, sources, ctx)
        if len(sources) == 2:
            n = self.output.batch_ndim
            a, b = (align_tensor(s.tensor, m, n) for s, m in zip(sources, self.maps))
        else:
            a, b = tf.split(sources[0].tensor, 2, axis=sources[0].data.feature_dim_axis)
        return self.make_output(self.act(a) * self.gate(b), sources)
