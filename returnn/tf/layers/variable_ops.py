"""``variable_read`` and ``variable_assign``: RETURNN's explicit reads and writes of a ``variable``
layer's parameter inside a step.

``{"class": "variable_assign", "var": "v", "value": "x", "op": "assign" | "add"}`` writes ``x`` (in
the variable's axis order, matched by dim tags) into the parameter of the ``variable`` layer ``v``
(or of the layer a ``variable_read`` / ``variable_assign`` named ``v`` reads); its output is a
dummy int32 scalar 0. ``{"class": "variable_read", "var": "v"}`` gives the parameter's current value.
``control_dependencies``: layers that run first. The order of reads and writes inside a step is
the network's order (each layer after the layers it names, ``var`` included), as RETURNN orders
them by control dependencies; a ``variable`` layer itself reads its parameter when it runs.
The assigned parameter is the variable layer's own (checkpoints store the new value).
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data
from returnn.tf.layers import reuse
from returnn.tf.layers.base import LayerOutput, RunContext, register_layer
from returnn.tf.layers.options import Option, one_of
from returnn.tf.layers.random_layers import RefsLayer


def _variable_of(layer, where: str):
    """The tf.Variable a ``var`` option reaches (through reads and assigns) and the variable layer's template."""
    get = reuse.outer_resolver()
    name = layer.opt("var")
    if not isinstance(name, str) or get is None:
        raise NetworkError("%s: 'var' must name a variable layer, got %r" % (where, name))
    try:
        target = get(name)
    except KeyError:
        raise NetworkError("%s: 'var' %r is no layer built before it" % (where, name)) from None
    if isinstance(getattr(target, "tf_var", None), tf.Variable):  # a variable_read / variable_assign
        return target.tf_var, target.var_data
    if getattr(target, "layer_class", None) != "variable" or not isinstance(getattr(target, "var", None), tf.Variable):
        raise NetworkError("%s: 'var' %r must be a variable layer (or a variable_read/variable_assign of one)"
                           % (where, name))
    if target.output.batch_dim_axis is not None or target.output.time_dim_axis is not None:
        raise NetworkError("%s: the variable layer %r must not add batch or time axes" % (where, name))
    return target.var, target.output


class _VariableOpLayer(RefsLayer):
    ref_options = ("var", "control_dependencies")

    def _setup(self, opts: Dict[str, Any], sources: Sequence[Data]) -> None:
        self.refs = self._split_refs(opts, sources)
        self.tf_var, self.var_data = _variable_of(self, self.desc)


@register_layer
class VariableReadLayer(_VariableOpLayer):
    """See the module docstring."""

    layer_class = "variable_read"
    options = (
        Option("var", None, "the variable layer (or a read/assign of it)"),
        Option("control_dependencies", None, "layers that run before the read"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42, **_outer: Any):
        super().__init__(name, opts, sources, seed)
        self._setup(opts, sources)
        template = self.var_data if self.var_data.dtype == self.tf_var.dtype.name else None
        self.output = (template or Data(name, dims=self.var_data.dims, dtype=self.tf_var.dtype.name)).copy(name)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        return LayerOutput(self.tf_var.read_value(), self.output)


@register_layer
class VariableAssignLayer(_VariableOpLayer):
    """See the module docstring."""

    layer_class = "variable_assign"
    ref_options = ("var", "value", "control_dependencies")
    options = (
        Option("var", None, "the variable layer (or a read/assign of it)"),
        Option("value", None, "layer with the new value (the variable's shape)"),
        Option("control_dependencies", None, "layers that run before the assignment"),
        Option("op", "assign", "'assign' or 'add'"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42, **_outer: Any):
        super().__init__(name, opts, sources, seed)
        self._setup(opts, sources)
        one_of(self.desc, "op", self.opt("op"), ("assign", "add"))
        if not isinstance(self.opt("value"), str):
            raise NetworkError("%s: 'value' must name a layer, got %r" % (self.desc, self.opt("value")))
        value = sources[self.refs["value"]]
        from returnn.tf.layers.cond import match_dims
        self.axes = match_dims(self.var_data.dims, value.dims)
        if self.axes is None:
            raise NetworkError("%s: value %s does not have the variable's shape %s"
                               % (self.desc, value.short_repr(), self.var_data.short_repr()))
        self.output = Data(name, dims=(), dtype="int32")

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        value = sources[self.refs["value"]].tensor
        value = tf.cast(tf.transpose(value, self.axes) if self.axes else value, self.tf_var.dtype)
        if self.opt("op") == "assign":
            op = self.tf_var.assign(value, read_value=False)
        else:
            op = self.tf_var.assign_add(value, read_value=False)
        with tf.control_dependencies([op] if op is not None else []):
            return LayerOutput(tf.zeros((), tf.int32), self.output)
