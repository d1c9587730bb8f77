"""``compare`` (elementwise comparisons to bool) and ``switch`` (elementwise choice by a bool).

``compare``: ``x0 kind x1 kind ... kind value`` as a chain (all must hold), sources broadcast
over the axes some of them lack (matched by dim tags, as ``combine``); ``kind`` is ``equal``,
``not_equal``, ``less``, ``less_equal``, ``greater``, ``greater_equal`` or ``==``, ``!=``,
``<>``, ``<``, ``<=``, ``>``, ``>=``. The output is bool, without a sparse dim.

``switch``: ``where(condition, true_from, false_from)``: ``condition`` is a bool layer (a Python
bool is refused, as by RETURNN, which resolves it as a layer name); ``true_from``/``false_from`` are
layers or constants (both constants: the condition's shape, the dtype of the constant ``true_from``,
as RETURNN).

Also here: ``scaled_grad`` (gradient times ``scale``), ``print`` (prints each step), ``train_flag``
and ``global_train_step`` (scalars of the running step).
"""
from __future__ import annotations

import functools
from typing import Any, Dict, List, Sequence

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.common_layout import check_broadcast, common_dims, layer_layout, returnn_common_order
from returnn.tf.layers.helpers import check_sources
from returnn.tf.layers.options import Option, one_of
from returnn.tf.layers.output import align_tensor
from returnn.tf.util.data_check import same_extents

COMPARE_OPS = {"equal": tf.equal, "not_equal": tf.not_equal, "less": tf.less, "less_equal": tf.less_equal,
               "greater": tf.greater, "greater_equal": tf.greater_equal}
COMPARE_ALIASES = {"==": "equal", "!=": "not_equal", "<>": "not_equal", "<": "less", "<=": "less_equal",
                   ">": "greater", ">=": "greater_equal"}


def _common_template(layer, sources: Sequence[Data], dtype: str):
    """Union of the sources' dims (the source with most axes first) and per source its positions."""
    name = layer.layer_name
    base = max(sources, key=lambda s: s.batch_ndim)
    dims, maps = returnn_common_order(base, *common_dims([base.dims] + [s.dims for s in sources]))
    dims, tmaps, theirs = layer_layout(layer, sources, dims, maps[1:])
    check_broadcast(layer, [s.dims for s in sources], dims, tmaps)
    if theirs is not None:  # RETURNN's template's special axes (as it set them, or by its default rule)
        return Data(name, dims=dims, dtype=dtype, time_dim_axis=theirs._time_dim_axis,
                    feature_dim_axis=theirs._feature_dim_axis), tmaps
    feat = None if base.feature_dim_axis is None or base.sparse else maps[0][base.feature_dim_axis]
    time = None if base.time_dim_axis is None else maps[0][base.time_dim_axis]
    return Data(name, dims=dims, dtype=dtype, time_dim_axis=time, feature_dim_axis=feat), tmaps


def _common_shape(tensors: List[tf.Tensor]) -> tf.Tensor:
    """The broadcast shape of ``tensors`` (all of one rank)."""
    return functools.reduce(tf.broadcast_dynamic_shape, [tf.shape(t) for t in tensors])


def _aligned(values: List[LayerOutput], maps: List[List[int]], n: int, dtype=None) -> List[tf.Tensor]:
    out = []
    for v, m in zip(values, maps):
        t = align_tensor(v.tensor, m, n)
        out.append(t if dtype is None else tf.cast(t, dtype))
    return out


@register_layer
class CompareLayer(Layer):
    """See the module docstring."""

    layer_class = "compare"
    keeps_source_data_name = True  # RETURNN's get_common_data of one source
    options = (
        Option("kind", "equal", "comparison: equal, not_equal, less, less_equal, greater, greater_equal (or ==, <, ...)"),
        Option("value", None, "a constant compared last in the chain"),
        Option("allow_broadcast_all_sources", None, "True: sources may all need broadcasting; False: refused; None: "
                                                    "refused from behavior_version 4 (RETURNN's)"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources)
        kind = COMPARE_ALIASES.get(self.opt("kind"), self.opt("kind"))
        self.op = COMPARE_OPS[one_of(self.desc, "kind", kind, tuple(COMPARE_OPS))]
        self.value = self.opt("value")
        if self.value is None and len(sources) < 2:
            raise NetworkError("%s: needs two sources, or one and 'value'" % self.desc)
        _check_compare_dtypes(self.desc, sources, self.value)
        self.output, self.maps = _common_template(self, sources, "bool")

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        xs = same_extents(self.desc, _aligned(sources, self.maps, self.output.batch_ndim), self.output.dims)
        result = None
        for a, b in zip(xs, xs[1:] + ([None] if self.value is not None else [])):
            b = tf.cast(self.value, a.dtype) if b is None else tf.cast(b, a.dtype)
            r = self.op(a, b)
            result = r if result is None else tf.logical_and(result, r)
        return self.make_output(tf.broadcast_to(result, _common_shape(xs)), sources)


def _check_compare_dtypes(desc: str, sources: Sequence[Data], value: Any) -> None:
    """RETURNN's compare applies the TF op to neighbouring sources (and the last one and ``value``) as
    they are: sources of different dtypes, or a float value with an int or bool source (an int one with
    a bool source), are a TypeError there; refused here in one line (casting would compute something)."""
    for a, b in zip(sources, sources[1:]):
        if a.dtype != b.dtype:
            raise NetworkError("%s: sources of different dtypes (%s, %s) are refused, as RETURNN's TF op does; "
                               "cast one first" % (desc, a.dtype, b.dtype))
    last = tf.as_dtype(sources[-1].dtype)
    if value is None or isinstance(value, bool):
        return
    if (isinstance(value, float) and (last.is_integer or last.is_bool)) or (isinstance(value, int) and last.is_bool):
        raise NetworkError("%s: value %r with a %s source is refused, as RETURNN's TF op does"
                           % (desc, value, last.name))


def _constant_dtype(value: Any) -> str:
    """RETURNN's dtype of a Python constant (``Data.template_from_constant``)."""
    return "bool" if isinstance(value, bool) else "int32" if isinstance(value, int) else "float32"


@register_layer
class SwitchLayer(Layer):
    """See the module docstring."""

    layer_class = "switch"
    ref_options = ("condition", "true_from", "false_from")
    default_from = ()
    options = (
        Option("condition", None, "bool layer"),
        Option("true_from", None, "layer or constant where the condition holds"),
        Option("false_from", None, "layer or constant elsewhere"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        refs = [k for k in self.ref_options if isinstance(opts.get(k), str)]
        if len(sources) != len(refs):
            raise NetworkError("layer %r (switch): give the inputs as 'condition', 'true_from', 'false_from', "
                               "not 'from'" % name)
        super().__init__(name, opts, [], seed)
        self.refs = dict(zip(refs, sources))
        cond = self.opt("condition")
        if not isinstance(cond, str):  # RETURNN: get_layer(condition) asserts a str (a callable it would call
            # in transform_config_dict, giving a bool: config code, not supported here)
            raise NetworkError("%s: condition must be a layer name, got %r (RETURNN refuses a Python bool too)"
                               % (self.desc, cond))
        if self.refs["condition"].dtype != "bool":
            raise NetworkError("%s: condition %r must be bool, got %s" % (self.desc, cond,
                                                                         self.refs["condition"].short_repr()))
        for key in ("true_from", "false_from"):
            if key not in self.refs and not isinstance(self.opt(key), (int, float)):
                raise NetworkError("%s: %s must be a layer name or a number, got %r" % (self.desc, key,
                                                                                      self.opt(key)))
        value_refs = [k for k in ("true_from", "false_from") if k in self.refs]
        # RETURNN: the dtype of true_from (else false_from) when a layer, else of the constant true_from:
        # bool, int32 or float32 by its Python type
        dtype = self.refs[value_refs[0]].dtype if value_refs else _constant_dtype(self.opt("true_from"))
        self._check_value_dtypes(dtype, value_refs)
        self.order = value_refs + ["condition"]  # RETURNN's get_common_data([true, false, condition])
        self.output, self.maps = _common_template(self, [self.refs[k] for k in self.order], dtype)

    def _check_value_dtypes(self, dtype: str, value_refs: List[str]) -> None:
        """RETURNN converts a constant with ``tf.constant(value, dtype)`` of the output's dtype (a float into an
        int or bool dtype, an int into bool: TypeError) and asserts a layer's dtype is the output's
        (``copy_compatible_to``); refused here in one line instead of cast."""
        out = tf.as_dtype(dtype)
        for key in ("true_from", "false_from"):
            if key in value_refs:
                if self.refs[key].dtype != dtype:
                    raise NetworkError("%s: %s has dtype %s, the output %s (true_from's): refused as RETURNN "
                                       "asserts; cast one first" % (self.desc, key, self.refs[key].dtype, dtype))
                continue
            value = self.opt(key)
            if isinstance(value, bool):
                continue
            if (isinstance(value, float) and (out.is_integer or out.is_bool)) or (isinstance(value, int) and out.is_bool):
                raise NetworkError("%s: %s %r cannot be a constant of the output's dtype %s (RETURNN's tf.constant: "
                                   "TypeError)" % (self.desc, key, value, dtype))

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        by_key = dict(zip([k for k in self.ref_options if k in self.refs], sources))
        aligned = same_extents(self.desc, _aligned([by_key[k] for k in self.order], self.maps,
                                                    self.output.batch_ndim), self.output.dims)
        values = dict(zip(self.order, aligned))
        dtype = tf.as_dtype(self.output.dtype)

        def pick(key):
            return tf.cast(values[key] if key in values else tf.constant(self.opt(key)), dtype)

        result = tf.where(values["condition"], pick("true_from"), pick("false_from"))
        return self.make_output(tf.broadcast_to(result, _common_shape(list(values.values()))), sources)


@register_layer
class ScaledGradLayer(Layer):
    """``scaled_grad``: the input unchanged; the gradient flowing back through it times ``scale``
    (0 stops it, -1 reverses it as in gradient-reversal training)."""

    layer_class = "scaled_grad"
    options = (Option("scale", None, "factor on the gradient"),)

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources, 1, 1)
        if not isinstance(self.opt("scale"), (int, float)) or isinstance(self.opt("scale"), bool):
            raise NetworkError("%s: 'scale' must be a number, got %r" % (self.desc, self.opt("scale")))
        self.output = sources[0].copy(name)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = sources[0].tensor
        scale = tf.cast(self.opt("scale"), x.dtype)
        y = tf.stop_gradient(x) + scale * (x - tf.stop_gradient(x)) if x.dtype.is_floating else x
        return self.make_output(y, sources)


@register_layer
class PrintLayer(Layer):
    """``print``: the input unchanged; each step prints its shape and first values to stderr."""

    layer_class = "print"
    options = (Option("summarize", 3, "values printed per axis"),
               Option("extra_print_args", (), "more values printed after the layer's (RETURNN's)"))

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources, 1, 1)
        self.output = sources[0].copy(name)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = sources[0].tensor
        extra = list(self.opt("extra_print_args") or ())
        op = tf.print("layer %r:" % self.layer_name, *extra, tf.shape(x), x, summarize=int(self.opt("summarize")),
                      output_stream="file:///dev/stderr")
        with tf.control_dependencies([op]):
            return self.make_output(tf.identity(x), sources)


class _StepValueLayer(Layer):
    """A scalar of the running step, without sources."""

    default_from = ()

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources, 0, 0)
        self.output = Data(name, dims=(), dtype=self.dtype)


@register_layer
class TrainFlagLayer(_StepValueLayer):
    """``train_flag``: True in training steps, False in evaluation, forward and search."""

    layer_class = "train_flag"
    dtype = "bool"

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        return self.make_output(tf.constant(bool(ctx.train)))


@register_layer
class GlobalTrainStepLayer(_StepValueLayer):
    """``global_train_step``: the number of the training step (int64; 0 outside training)."""

    layer_class = "global_train_step"
    dtype = "int64"

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        return self.make_output(ctx.global_step)
