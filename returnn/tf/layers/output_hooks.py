"""RETURNN's base-layer options that act on a layer's finished output without changing its values:

- ``control_dependencies_on_output``: a function ``(layer) -> list of ops/tensors`` (a config's checks,
  e.g. the 2021-latent-monotonic-attention configs' ``search_checks``); the layer's output is then
  computed only after those ops ran (RETURNN's ``tf.identity`` under ``tf.control_dependencies``);
- ``debug_print_layer_output`` (the option, else the config key of that name): True or a dict of print
  options (``summarize``, default 10): each computation of the output prints the layer's name and its
  values;
- the config key ``debug_print_layer_output_shape``: prints the name, the template and the value's shape.

The function of ``control_dependencies_on_output`` gets a view of the layer as RETURNN's ``LayerBase``
offers it to config code: ``name``, ``output`` (the template with ``placeholder`` and sizes),
``network`` (``train_flag``, ``search_flag``, ``get_config()``, ``get_layer`` of a source), ``sources``
(their values), and ``search_choices`` None outside a search; in a search this engine has no RETURNN ``SearchChoices`` to
give, and a function reaching for them ends the run in one line naming the layer. Applied in RETURNN's
order: after the ``batch_norm`` option, the dependencies, then the prints.
"""
from __future__ import annotations

import sys
from typing import Any, Mapping, Sequence

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tf.layers.options import Option

OPTIONS = (
    Option("control_dependencies_on_output", None, "RETURNN: a function (layer) -> list of ops run before the "
                                                   "layer's output is used (checks); returnn/tf/layers/output_hooks.py"),
    Option("debug_print_layer_output", None, "RETURNN: True or {'summarize': n}: print the layer's name and output "
                                             "values whenever computed (None: the config key)"),
)
_PRINT_KEYS = ("summarize",)


def check(desc: str, opts: Mapping[str, Any]) -> None:
    """One line for a function option RETURNN could not call (the print options: :func:`configure`)."""
    fn = opts.get("control_dependencies_on_output")
    if fn is not None and not callable(fn):
        raise NetworkError("%s: 'control_dependencies_on_output' must be a function (layer) -> list of ops, got %r"
                           % (desc, fn))


def _print_opts(desc: str, spec: Any, where: str) -> Any:
    """None (no print) or the print options of ``spec`` (bool or dict)."""
    if spec is None or spec is False:
        return None
    if spec is True:
        return {"summarize": 10}
    if isinstance(spec, Mapping):
        unknown = sorted(set(spec) - set(_PRINT_KEYS))
        if unknown:
            raise NetworkError("%s: debug_print_layer_output (%s): unknown print option(s) %s (known: %s)"
                               % (desc, where, ", ".join(map(repr, unknown)), ", ".join(_PRINT_KEYS)))
        return dict({"summarize": 10}, **spec)
    raise NetworkError("%s: debug_print_layer_output (%s) must be a bool or a dict, got %r" % (desc, where, spec))


class _LayerView:
    """The layer as RETURNN's ``LayerBase`` offers it to the function (see the module docstring); its
    ``network`` and ``sources`` are the proxies config layer classes get (config_layer.py)."""

    def __init__(self, layer: Any, out: Any, sources: Sequence[Any], train: bool, search: bool):
        from returnn.tf.layers.config_layer import _NetworkProxy, _SourceProxy
        self.name = layer.layer_name
        self.layer_class = layer.layer_class
        self.output = out.data.with_value(out.tensor, out.sizes)
        self.sources = [_SourceProxy(s.data.name, s.data.with_value(s.tensor, s.sizes)) for s in sources]
        self.network = _NetworkProxy(layer.desc, self.sources, train)
        self.network.search_flag = search
        if not search:
            self.search_choices = None

    def __repr__(self) -> str:
        return "<layer %r %s>" % (self.name, self.output.short_repr())


def in_search(layer: Any) -> bool:
    """Whether the layer is built for a search (the search task's network, an ``extra.search:`` net)."""
    from returnn.tf.net_dict import SEARCH_TASK
    return bool(SEARCH_TASK.get()) or layer.layer_name.startswith("extra.search:")


def apply(layer: Any, out: Any, sources: Sequence[Any], ctx: Any) -> Any:
    """``out`` with the dependencies and prints the layer's options (and config keys) ask for."""
    fn = layer.opts.get("control_dependencies_on_output")
    tensor = out.tensor
    if fn is not None:
        view = _LayerView(layer, out, sources, bool(ctx.train), layer.built_for_search)
        try:
            deps = fn(view)
        except Exception as exc:  # noqa: BLE001 - config code: one line naming the layer
            raise NetworkError("%s: control_dependencies_on_output %s failed: %s: %s"
                               % (layer.desc, getattr(fn, "__name__", "function"), type(exc).__name__, exc)) from None
        if not isinstance(deps, (list, tuple)):
            deps = [deps]
        if not all(isinstance(d, (tf.Operation, tf.Tensor, tf.Variable)) for d in deps):
            raise NetworkError("%s: control_dependencies_on_output must return TF ops or tensors, got %r"
                               % (layer.desc, deps))
        if deps:
            with tf.control_dependencies(list(deps)):
                tensor = tf.identity(tensor)
    shape_print, value_print = layer.print_shape, layer.print_opts
    prints = []
    if shape_print:
        prints.append(tf.print(layer.layer_name, "shape:", out.data.short_repr(), tf.shape(tensor),
                               summarize=10, output_stream=sys.stdout))
    if value_print is not None:
        prints.append(tf.print(layer.layer_name, tensor, output_stream=sys.stdout, **value_print))
    if prints:
        with tf.control_dependencies(prints):
            tensor = tf.identity(tensor)
    return out if tensor is out.tensor else out.with_identity(tensor)


def configure(layer: Any) -> None:
    """Sets ``print_opts``, ``print_shape`` and ``built_for_search`` of a new layer (options over config keys)."""
    from returnn.config import get_global_config
    config = get_global_config()
    spec = layer.opts.get("debug_print_layer_output")
    where = "option"
    if spec is None:
        spec, where = config.typed_value("debug_print_layer_output"), "config key"
    layer.print_opts = _print_opts(layer.desc, spec, where)
    layer.print_shape = bool(config.bool("debug_print_layer_output_shape"))
    layer.built_for_search = in_search(layer)
