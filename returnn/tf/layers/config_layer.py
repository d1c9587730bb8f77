"""Layer classes defined in a config with RETURNN's API, run on this engine's layer API.

A config writes (RETURNN's way)::

    from returnn.tf.layers.basic import LayerBase, register_layer_class

    class AddOneLayer(LayerBase):
        layer_class = "add_one"

        def __init__(self, amount=1.0, **kwargs):
            super().__init__(**kwargs)
            w = self.add_param(tf.Variable(amount, name="w"))
            self.output.placeholder = self.sources[0].output.placeholder + w

        @classmethod
        def get_out_data_from_opts(cls, name, sources, **kwargs):
            return sources[0].output.copy_template(name="%s_output" % name)

    register_layer_class(AddOneLayer)   # then {"class": "add_one", "from": "data", "amount": 2.0}

RETURNN computes in ``__init__`` on placeholders; layers here compute in ``forward`` on the values
of a compiled step. :func:`register_layer_class` registers an adapter (:class:`ConfigLayer`) that

- builds the template with the class's ``get_out_data_from_opts(name=, network=, sources=, **opts)``
  (its ``transform_config_dict`` runs first, with ``get_layer`` giving the ``from`` layers);
- runs the class's ``__init__`` once at construction, eagerly, on zeros shaped like the sources
  (batch 1, dynamic axes 2 frames) to create its variables, then in every ``forward`` with
  ``self.sources[i].output.placeholder`` (and the sizes) bound to the current values; the variables
  the second run asks for (``tf.Variable``, ``tf.compat.v1.get_variable``, Keras layers: anything
  going through TF's variable creator) are the first run's, in creation order. They are the
  layer's parameters, named ``<layer>/<variable name>`` in checkpoints;
- takes ``self.output.placeholder`` (and ``self.output.size_placeholder`` for new dynamic axes) as
  the layer's value, moved into the template's axis order.

What of RETURNN's ``LayerBase`` is provided: ``name``, ``network`` (``train_flag`` a Python bool,
``search_flag``, ``get_config()``, ``get_layer(name)`` for the ``from`` layers,
``is_inside_rec_layer()``), ``output`` (the template, with ``placeholder``/``size_placeholder``),
``sources`` (each with ``name`` and ``output`` carrying its value), ``input_data`` (on
``_ConcatInputLayer``: the sources' values concatenated along the feature axis, with the layer's
input ``dropout`` in training), ``params``, ``add_param``, ``var_creation_scope``,
``get_absolute_name_scope_prefix``, ``kwargs``, ``target``, ``loss``, ``layer_class``,
``get_out_data_from_opts`` (RETURNN's default: ``out_type``, else the sources' template with an
``n_out``/``out_dim`` feature axis), ``transform_config_dict``, ``_rec_previous_layer`` (None: a
class with own loop state runs here only moved out of a rec loop, over the whole sequence, where
RETURNN does not ask it for that state either). Not provided (an error when a class overrides them):
``get_losses``/``_get_loss_value`` (own losses), ``get_rec_initial_extra_outputs`` (own loop state)
of a layer that stays in a rec loop. The layer's ``loss``, ``L2``, ``is_output_layer`` and other base options work as
on any layer here.
"""
from __future__ import annotations

import contextlib
import inspect
from typing import Any, Dict, List, Optional, Sequence, Type

import numpy as np
import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim, FeatureDim
from returnn.tensor.data import NotSpecified
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.options import Option
from returnn.tf.layers.rnn_cell import is_step_template

# LayerBase keyword arguments the adapter passes itself (not layer options of the config class)
_OWN_ARGS = ("self", "name", "network", "output", "sources")


class _NetworkProxy:
    """What RETURNN's ``TFNetwork`` gives a custom layer (see the module docstring)."""

    def __init__(self, layer_desc: str, sources: Sequence["_SourceProxy"], train: bool,
                 refs: Optional[Dict[str, "_SourceProxy"]] = None):
        self._desc, self._sources, self.train_flag = layer_desc, list(sources), train
        self._refs = dict(refs or {})  # layers named by options the class resolves with get_layer
        self.search_flag = False

    def get_config(self):
        from returnn.config import get_global_config
        return get_global_config()

    def get_layer(self, name: str) -> "_SourceProxy":
        if isinstance(name, str) and name in self._refs:
            return self._refs[name]
        for src in self._sources:
            if src.name == name or src.name == "data:" + name or (name == "data" and src.name == "data:data"):
                return src
        raise NetworkError("%s: get_layer(%r): a layer class of the config reaches the layers of its 'from' and of its "
                           "options that its transform_config_dict resolves (%s)"
                           % (self._desc, name, ", ".join([s.name for s in self._sources] + list(self._refs)) or "none"))

    def is_inside_rec_layer(self) -> bool:
        return False

    def get_absolute_name_scope_prefix(self) -> str:
        return ""


class _SourceProxy:
    """A source layer as RETURNN's custom layers see it: ``name`` and ``output``."""

    def __init__(self, name: str, output: Data):
        self.name, self.output = name, output

    def __repr__(self) -> str:
        return "<source %r %s>" % (self.name, self.output.short_repr())


class LayerBase:
    """RETURNN's ``LayerBase`` for layer classes defined in configs (see the module docstring)."""

    layer_class: Optional[str] = None
    recurrent = False
    _rec_previous_layer = None  # RETURNN's: None outside a rec loop step (a class with loop state runs only there)

    def __init__(self, name: str, network: _NetworkProxy, output: Data, sources: Sequence[_SourceProxy] = (),
                 **kwargs: Any):
        self.name = name
        self.network = network
        self.output = output
        self.sources = list(sources)
        self.kwargs = dict(kwargs)
        self.target = kwargs.get("target")
        self.loss = kwargs.get("loss")
        self.params: Dict[str, tf.Variable] = {}
        self.rec_vars_outputs: Dict[str, tf.Tensor] = {}
        self.output_before_activation = None

    # ---- parameters
    def add_param(self, param: Any, custom_update: Any = None, trainable: Optional[bool] = None,
                  saveable: Optional[bool] = None, axes_split_info: Any = None,
                  non_critical_for_restore: bool = False) -> Any:
        if custom_update is not None:
            raise NetworkError("layer %r: add_param(custom_update=...) is not supported here" % self.name)
        if isinstance(param, tf.Variable):
            self.params[param.name.split(":")[0].split("/")[-1]] = param
        return param

    def var_creation_scope(self, **_kwargs: Any):
        return contextlib.nullcontext()

    def get_absolute_name_scope_prefix(self) -> str:
        return self.name + "/"

    # ---- class methods
    @classmethod
    def transform_config_dict(cls, d: Dict[str, Any], network: Any, get_layer: Any) -> None:
        """RETURNN resolves ``from`` here; the engine has done that already."""

    @classmethod
    def get_out_data_from_opts(cls, name: str, sources: Sequence[_SourceProxy] = (), out_type: Any = None,
                               n_out: Any = NotSpecified, out_dim: Optional[Dim] = None, network: Any = None,
                               **kwargs: Any) -> Data:
        """RETURNN's default: ``out_type`` (a dict of Data options, or a function), else the first
        source's template with a feature axis of ``n_out``/``out_dim``."""
        if callable(out_type):
            return out_type(name=name, sources=sources, n_out=n_out, network=network, **kwargs)
        opts = dict(out_type or {})
        if n_out is not NotSpecified and n_out is not None:
            opts.setdefault("dim", n_out)
        if out_dim is not None:
            opts.setdefault("dim", out_dim.dimension)
        if any(k in opts for k in ("shape", "dims", "dim_tags")) or not sources:
            return Data("%s_output" % name, **opts)
        base = sources[0].output.copy_template(name="%s_output" % name)
        if opts.get("sparse"):
            return base.copy(sparse_dim=out_dim or FeatureDim("%s:sparse" % name, opts.get("dim")), dtype="int32")
        dim = opts.get("dim", base.dim)
        if base.feature_dim_axis is not None and (out_dim is not None or dim != base.dim):
            new = out_dim or FeatureDim("%s:feature-dense" % name, dim)
            base = base.copy_template_replace_dim_tag(base.feature_dim_axis, new)
        elif base.feature_dim_axis is None and base.sparse:
            new = out_dim or FeatureDim("%s:feature-dense" % name, dim)
            base = base.copy(sparse_dim=None, dtype=opts.get("dtype", "float32")).copy_insert_dim(new, axis=-1)
        return base.copy(dtype=opts["dtype"]) if "dtype" in opts else base


class _ConcatInputLayer(LayerBase):
    """RETURNN's: ``self.input_data`` is the sources' values concatenated along the feature axis (with
    the layer's ``dropout`` in training, applied by the engine before ``__init__`` runs)."""

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        outputs = [s.output for s in self.sources]
        if len(outputs) == 1:
            self.input_data = outputs[0]
        else:
            first = outputs[0]
            feature = first.feature_dim_axis
            values = [o.copy_transpose([o.get_axis_from_description(d) if d != first.dims[feature] else
                                        o.feature_dim_axis for d in first.dims]).placeholder for o in outputs]
            total = sum(o.dim for o in outputs)
            template = first.copy_template_replace_dim_tag(feature, FeatureDim("%s:concat" % self.name, total))
            self.input_data = template.with_value(tf.concat(values, axis=feature), first.dyn_sizes)


def _options_of(user_cls: type) -> List[Option]:
    """The keyword arguments of the class's ``__init__`` chain (up to LayerBase) as layer options."""
    seen: Dict[str, Option] = {}
    for klass in user_cls.__mro__:
        if klass in (LayerBase, _ConcatInputLayer, object) or "__init__" not in klass.__dict__:
            continue
        for p in inspect.signature(klass.__dict__["__init__"]).parameters.values():
            if p.name in _OWN_ARGS or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL) or p.name in seen:
                continue
            if p.name in Layer.options_by_name:
                continue
            default = None if p.default is inspect.Parameter.empty else p.default
            seen[p.name] = Option(p.name, default, "option of the config's layer class %s" % user_cls.__name__)
    return list(seen.values())


class ConfigLayer(Layer):
    """The adapter (see the module docstring); one subclass per registered config class."""

    user_class: Type[LayerBase] = LayerBase
    layer_class = "config_layer"
    # options whose values name layers (the class's transform_config_dict resolves them with get_layer),
    # and the one it makes its 'from' (see _layer_options)
    ref_options: tuple = ()
    from_option: Optional[str] = None
    # replaces the base option (whose check wants a dict): RETURNN's get_out_data_from_opts reads it
    options = (Option("out_type", None, "dict of Data options or a function giving the output template (RETURNN's "
                                        "get_out_data_from_opts reads it)"),)

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        cls = self.user_class
        # own loop state only matters where the layer runs step by step (RETURNN asks for it there only)
        methods = ("get_losses", "_get_loss_value") + (("get_rec_initial_extra_outputs",)
                                                        if is_step_template(sources) else ())
        for method in methods:
            if getattr(cls, method, None) is not None and method in _own_methods(cls):
                raise NetworkError("%s: the config's layer class %s defines %s, which is not supported here"
                                   % (self.desc, cls.__name__, method))
        self.raw_opts = {k: v for k, v in opts.items() if k not in ("class", "from", "sources")}
        # the sources: the 'from' layers, then those of the options the class resolves (see ref_options)
        self.ref_names = [opts[k] for k in self.ref_options if isinstance(opts.get(k), str)]
        self.n_from = len(sources) - len(self.ref_names)
        network, templates = self._proxies(list(sources), train=False)
        try:
            d = self._transformed(network, templates)
            out = cls.get_out_data_from_opts(name=name, network=network, sources=templates, **d)
        except NetworkError:
            raise
        except Exception as exc:
            raise NetworkError("%s: %s.get_out_data_from_opts failed: %s: %s" % (self.desc, cls.__name__,
                                                                                type(exc).__name__, exc)) from exc
        if not isinstance(out, Data):
            raise NetworkError("%s: %s.get_out_data_from_opts must return a Data, got %r" % (self.desc, cls.__name__, out))
        self.output = out.copy(name)
        self.output.placeholder = None
        # first run: eager, on zeros, to create the variables
        self._recorded: List[tf.Variable] = []
        values = [self._dummy(s) for s in sources]
        self._run(values, RunContext(False), record=True)
        self.config_variables = list(self._recorded)  # tracked by tf.Module
        for var in self._recorded:
            key = var.name.split(":")[0]
            base, i = key, 1
            while key in self.own_params:
                key, i = "%s_%i" % (base, i), i + 1
            self.own_params[key] = var

    @staticmethod
    def _dummy(data: Data) -> LayerOutput:
        shape = [1 if d.is_batch_dim() else 2 if d.dimension is None else d.dimension for d in data.dims]
        batch = 1
        sizes = {d: tf.fill([batch], 2) for d in data.dims if d.is_dynamic()}
        return LayerOutput(tf.zeros(shape, dtype=data.dtype), data, sizes)

    def _proxies(self, values: Sequence[Any], train: bool) -> "tuple[_NetworkProxy, List[_SourceProxy]]":
        """The network proxy and the sources the class sees (the 'from' layers; or the layer its
        transform_config_dict makes its 'from', see ``from_option``)."""
        def data(v: Any) -> Data:  # a template (construction) or a value
            return v if isinstance(v, Data) else v.data.with_value(v.tensor, v.sizes)
        own = [_SourceProxy(d.name, d) for d in map(data, values[:self.n_from])]
        refs = {n: _SourceProxy(n, data(v)) for n, v in zip(self.ref_names, values[self.n_from:])}
        sources = own
        if self.from_option is not None and isinstance(self.opts.get(self.from_option), str):
            sources = [refs[self.opts[self.from_option]]]
        return _NetworkProxy(self.desc, own, train=train, refs=refs), sources

    def _transformed(self, network: _NetworkProxy, sources: List[_SourceProxy]) -> Dict[str, Any]:
        """The layer's options after the class's ``transform_config_dict`` (layer names resolved)."""
        d = dict(self.raw_opts, sources=sources)
        self.user_class.transform_config_dict(d, network=network, get_layer=network.get_layer)
        d.pop("sources", None)
        return d

    def _run(self, values: Sequence[LayerOutput], ctx: RunContext, record: bool) -> Any:
        cls = self.user_class
        network, proxies = self._proxies(values, train=bool(ctx.train))
        sizes: Dict[Dim, Any] = {}
        for v in values:
            sizes.update(v.sizes)
        output = self.output.with_value(None, sizes)
        replay = iter(self._recorded)
        trainable = self.trainable

        def creator(next_creator, **kwargs):
            if record:
                kwargs["trainable"] = kwargs.get("trainable") is not False and trainable
                var = next_creator(**kwargs)
                self._recorded.append(var)
                return var
            try:
                return next(replay)
            except StopIteration:
                raise NetworkError("%s: the config's layer class %s creates more variables than at construction "
                                   "(variables must not depend on the input values)" % (self.desc, cls.__name__))
        try:
            opts = self._transformed(network, proxies)
            with tf.variable_creator_scope(creator):
                inst = cls(name=self.layer_name, network=network, output=output, sources=proxies, **opts)
        except NetworkError:
            raise
        except Exception as exc:
            raise NetworkError("%s: %s.__init__ failed: %s: %s" % (self.desc, cls.__name__, type(exc).__name__, exc)
                               ) from exc
        return inst

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        if issubclass(self.user_class, _ConcatInputLayer):
            sources = [self.apply_dropout(s, ctx, salt=i) if i < self.n_from else s for i, s in enumerate(sources)]
        inst = self._run(sources, ctx, record=False)
        out = inst.output
        if out.placeholder is None:
            raise NetworkError("%s: the config's layer class %s did not set self.output.placeholder"
                               % (self.desc, self.user_class.__name__))
        value = tf.convert_to_tensor(out.placeholder)
        if out.dims != self.output.dims:  # same axes in another order: into the template's order
            try:
                perm = [next(i for i, d in enumerate(out.dims) if d == want) for want in self.output.dims]
            except StopIteration:
                raise NetworkError("%s: the output %s set in __init__ does not have the axes of the template %s"
                                   % (self.desc, out.short_repr(), self.output.short_repr())) from None
            value = tf.transpose(value, perm)
        sizes = {}
        for dim in self.output.dims:
            if dim.is_dynamic():
                size = out._size_of(dim)
                if size is None:
                    raise NetworkError("%s: no sizes for the output axis %s: set self.output.size_placeholder"
                                       % (self.desc, dim.short_repr()))
                sizes[dim] = size
        return self.make_output(tf.cast(value, self.output.dtype), sources, sizes)


def _own_methods(cls: type) -> set:
    out = set()
    for klass in cls.__mro__:
        if klass in (LayerBase, _ConcatInputLayer, object):
            break
        out.update(klass.__dict__)
    return out


_MARK = "\x00option:"


def _layer_options(user_cls: type, names: Sequence[str]) -> "tuple[tuple, Optional[str]]":
    """Which options the class's ``transform_config_dict`` resolves with ``get_layer`` (RETURNN's way
    to give a layer more inputs than its 'from'), and which option it makes its 'from': found by
    running it once on marker values (config code, trusted; an exception ends the run early)."""
    if "transform_config_dict" not in _own_methods(user_cls):
        return (), None
    asked: List[str] = []

    def get_layer(name: Any) -> _SourceProxy:
        if isinstance(name, str) and name.startswith(_MARK):
            asked.append(name[len(_MARK):])
        return _SourceProxy(str(name), Data("probe", shape=(None, 1)))
    probe = _NetworkProxy("probe", [], train=False)
    probe.get_layer = get_layer  # type: ignore[method-assign]
    d: Dict[str, Any] = {n: _MARK + n for n in names}
    d["from"] = _MARK + "from"
    try:
        user_cls.transform_config_dict(d, network=probe, get_layer=get_layer)
    except Exception:  # noqa: BLE001  (the markers are no real values; what was asked so far counts)
        pass
    from_value = d.get("from")
    from_option = from_value[len(_MARK):] if isinstance(from_value, str) and from_value.startswith(_MARK) else None
    from_option = from_option if from_option in names else None
    refs = [a for a in asked if a in names] + ([from_option] if from_option else [])
    return tuple(dict.fromkeys(refs)), from_option


def register_layer_class(user_cls: Type[LayerBase]) -> Type[LayerBase]:
    """RETURNN's ``register_layer_class``: ``{"class": user_cls.layer_class}`` builds it (see the module
    docstring). Returns the class, so it works as a decorator too."""
    if not isinstance(user_cls, type) or not issubclass(user_cls, LayerBase):
        raise TypeError("register_layer_class: expected a LayerBase subclass, got %r" % (user_cls,))
    if not user_cls.layer_class:
        raise TypeError("register_layer_class: %s has no layer_class name" % user_cls.__name__)
    options = tuple(_options_of(user_cls))
    ref_options, from_option = _layer_options(user_cls, [o.name for o in options])
    adapter = type("ConfigLayer_%s" % user_cls.__name__, (ConfigLayer,), {
        "user_class": user_cls, "layer_class": user_cls.layer_class,
        "options": options, "ref_options": ref_options, "from_option": from_option,
        "__doc__": "The config's layer class %s (see returnn/tf/layers/config_layer.py)." % user_cls.__name__,
        "__module__": user_cls.__module__})  # the config's class: its options are its __init__ arguments
    register_layer(adapter)
    return user_cls


def auto_register_layer_classes(vars_values: Any) -> None:
    """RETURNN's ``auto_register_layer_classes``: registers every LayerBase subclass with a
    ``layer_class`` name among ``vars_values`` (a list of values, a module, or a module's file name,
    which is imported: config code names it, as it would import it)."""
    import inspect
    if isinstance(vars_values, str):
        vars_values = _import_file(vars_values)
    if inspect.ismodule(vars_values):
        vars_values = list(vars(vars_values).values())
    for v in vars_values:
        if isinstance(v, type) and issubclass(v, LayerBase) and v is not LayerBase and v.layer_class:
            register_layer_class(v)


def _import_file(filename: str) -> Any:
    """The module of a Python file named by config code (RETURNN's ``generic_import_module``)."""
    import importlib.util
    import os
    import sys
    if not os.path.isfile(filename):
        raise ImportError("auto_register_layer_classes: no Python file %r" % filename)
    name = os.path.splitext(os.path.basename(filename))[0]
    spec = importlib.util.spec_from_file_location(name, filename)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module


def get_concat_sources_data_template(sources: Sequence[Any], name: Optional[str] = None) -> Data:
    """RETURNN's helper: the template of the sources concatenated along the feature axis."""
    outputs = [s.output for s in sources]
    first = outputs[0].copy_template(name=name or outputs[0].name)
    if len(outputs) == 1:
        return first
    total = int(np.sum([o.dim for o in outputs]))
    return first.copy_template_replace_dim_tag(first.feature_dim_axis, FeatureDim("%s:concat" % (name or "concat"),
                                                                                    total))
