"""RETURNN's ``reuse_params``: a layer takes (some of) its parameters from another layer.

Forms (RETURNN's ``ReuseParams.from_config_dict``)::

    "reuse_params": "enc"                                   # every parameter of layer enc
    "reuse_params": {"reuse_layer": "enc", "auto_create_missing": True}
    "reuse_params": {"map": {"W": "enc",                    # W from enc
                             "b": None,                     # b: own (auto_create_missing)
                             "W_re": {"reuse_layer": "x", "custom": fn}}}

Names in ``map`` are RETURNN's parameter names in the layer's scope (``W``, ``b``; ``W_re`` of a
rec layer's ``rec/W_re``). A parameter taken from another layer is the same variable (one
parameter in checkpoints, under the other layer's name; gradients of both layers add up). A
``custom`` function gets ``base_layer``, ``reuse_layer``, ``name``, ``full_name``, ``shape``,
``dtype`` and ``getter`` (``getter(name=..., shape=..., dtype=...)`` makes an own parameter) and
returns a variable or a tensor of other parameters (e.g. ``tf.transpose(reuse_layer.params["W"])``);
a tensor is recomputed in every step, so it follows the variables it reads. Without
``auto_create_missing`` a parameter that no entry provides is an error naming it, as in RETURNN.

The network resolves layer names while it builds (:func:`resolving`); inside a rec unit names are
sub-layers and ``base:x`` layers of the network around it.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tf.layers.reuse_layer_output import layer_output_param, map_entry, returnn_view

_RESOLVERS: List[Callable[[str], Any]] = []
_SOURCES: List[Optional[Mapping[str, Sequence[str]]]] = []  # per resolver: the network's layer -> its source names
_OPTIONS = ("reuse_layer", "map", "custom", "auto_create_missing", "layer_output", "shape")


@contextlib.contextmanager
def resolving(get_layer: Callable[[str], Any], sources: Optional[Mapping[str, Sequence[str]]] = None
              ) -> Iterator[None]:
    """While building layers: ``get_layer(name)`` gives a built layer (or raises KeyError);
    ``sources``: each layer's source names (for :func:`static_value`)."""
    _RESOLVERS.append(get_layer)
    _SOURCES.append(sources)
    try:
        yield
    finally:
        _RESOLVERS.pop()
        _SOURCES.pop()


def static_value(name: str) -> tf.Tensor:
    """The value of the built layer ``name`` of the network being built when it reads no data (e.g. a
    static random layer, a sub-network's copy of it): its layers run once, eagerly, not training;
    KeyError when it reads data or a layer not built."""
    get_layer, sources = _RESOLVERS[-1] if _RESOLVERS else None, _SOURCES[-1] if _SOURCES else None
    if get_layer is None or sources is None or not tf.executing_eagerly():
        raise KeyError(name)
    from returnn.tf.layers.base import RunContext
    done: Dict[str, Any] = {}

    def value(layer_name: str) -> Any:
        if layer_name not in done:
            if layer_name not in sources:
                raise KeyError(layer_name)
            ins = [value(s) for s in sources[layer_name]]
            done[layer_name] = get_layer(layer_name).forward(ins, RunContext(False))
        return done[layer_name]
    return value(name).tensor


def outer_resolver() -> Optional[Callable[[str], Any]]:
    """The resolver of the network being built (a rec unit asks it for ``base:`` layers)."""
    return _RESOLVERS[-1] if _RESOLVERS else None


def referenced_layers(spec: Any) -> List[str]:
    """The layer names a ``reuse_params`` value names (built before the layer)."""
    if isinstance(spec, str):
        return [spec]
    if not isinstance(spec, dict):
        return []
    out = [spec[k] for k in ("reuse_layer", "layer_output") if isinstance(spec.get(k), str)]
    for value in (spec.get("map") or {}).values():
        out += referenced_layers(value) if isinstance(value, (str, dict)) else []
    return out


class ComputedParam:
    """A parameter that a ``custom`` function computes from other parameters: converted to a
    tensor it calls the function again (inside a step: on the current values)."""

    def __init__(self, fn: Callable[[], Any], shape: Sequence[int], dtype: tf.DType):
        self.fn, self.shape, self.dtype = fn, tf.TensorShape(shape), dtype

    def value(self) -> tf.Tensor:
        return tf.convert_to_tensor(self.fn(), dtype=self.dtype)

    def __getitem__(self, item):
        return self.value()[item]

    def numpy(self):
        return self.value().numpy()


tf.register_tensor_conversion_function(ComputedParam, lambda v, dtype=None, name=None, as_ref=False: v.value())


class ReuseParams:
    """One parsed ``reuse_params`` value (or one entry of its ``map``), with layers resolved."""

    def __init__(self, where: str, spec: Any):
        self.where = where
        if isinstance(spec, str):
            spec = {"reuse_layer": spec}
        if not isinstance(spec, dict):
            raise NetworkError("%s: 'reuse_params' must be a layer name or a dict, got %r" % (where, spec))
        unknown = sorted(set(spec) - set(_OPTIONS))
        if unknown:
            raise NetworkError("%s: 'reuse_params': unknown key(s) %s (known: %s)" % (where, unknown, ", ".join(_OPTIONS)))
        self.layer_output = spec.get("layer_output")  # the parameter is this layer's output (reuse_layer_output)
        if self.layer_output is not None and (not isinstance(self.layer_output, str) or set(spec) - {
                "layer_output", "shape"}):
            raise NetworkError("%s: 'reuse_params' 'layer_output' must name a layer, with only 'shape' beside it, got %r"
                               % (where, spec))
        # RETURNN resolves the layer when a parameter asks for it: a layer without parameters may name any
        self._layer_name = spec.get("reuse_layer") or None
        self._layer: Any = None
        self.custom = spec.get("custom")
        if self.custom is not None and not callable(self.custom):
            raise NetworkError("%s: 'reuse_params' 'custom' must be a function, got %r" % (where, self.custom))
        self.auto_create_missing = bool(spec.get("auto_create_missing", False))
        self.shape = spec.get("shape")
        self.map: Optional[Dict[str, ReuseParams]] = None
        if spec.get("map") is not None:
            if not isinstance(spec["map"], dict):
                raise NetworkError("%s: 'reuse_params' 'map' must be a dict, got %r" % (where, spec["map"]))
            self.map = {key: ReuseParams(where, {"auto_create_missing": True} if value is None else value)
                        for key, value in spec["map"].items()}

    @property
    def layer(self) -> Any:
        """The layer whose parameters are shared (resolved on first use), or None."""
        if self._layer is None and self._layer_name is not None:
            self._layer = _resolve(self.where, self._layer_name)
        return self._layer

    def lookup(self, base_layer, name: str, shape: Sequence[int], getter: Callable[..., tf.Variable]) -> Any:
        """The shared parameter ``name`` of ``base_layer``: another layer's variable, a
        :class:`ComputedParam`, or None (``base_layer`` makes its own)."""
        shape = tuple(int(d) for d in shape)
        if self.shape is not None and self.layer_output is None and tuple(getattr(d, "dimension", d) for d in self.shape) != shape:
            raise NetworkError("%s: 'reuse_params' shape %r but parameter %r has shape %s" % (self.where, self.shape, name, shape))
        if self.custom is not None:
            return self._custom(base_layer, name, shape, getter)
        if self.layer_output is not None:  # (a map entry of this engine's name, or every parameter)
            view = returnn_view(base_layer, name, shape)
            if view is None:
                raise NetworkError("%s: 'reuse_params' 'layer_output' for %r: this layer's parameter is kept in "
                                   "another layout here, not known for 'layer_output'" % (self.where, name))
            return layer_output_param(self.where, self.layer_output, self.shape, shape, view[1], _resolve,
                                      ComputedParam)
        if self.map is not None:
            key, convert = map_entry(self.map, base_layer, name, shape)
            if key is not None:
                entry = self.map[key]
                return layer_output_param(self.where, entry.layer_output, entry.shape, shape, convert, _resolve,
                                          ComputedParam)
            if name in self.map:
                return self.map[name].lookup(base_layer, name, shape, getter)
            if not self.auto_create_missing:
                raise NetworkError("%s: 'reuse_params' 'map' has no entry for parameter %r (keys: %s; None makes an "
                                   "own one)" % (self.where, name, ", ".join(sorted(self.map))))
        if self.layer is not None:
            var = self.layer.params.get(name)
            if var is not None:
                if tuple(var.shape) != shape:
                    raise NetworkError("%s: 'reuse_params': parameter %r of layer %r has shape %s, this layer needs %s"
                                       % (self.where, name, self.layer.layer_name, tuple(var.shape), shape))
                return var
            if not self.auto_create_missing:
                raise NetworkError("%s: 'reuse_params': layer %r has no parameter %r (it has: %s)" % (
                    self.where, self.layer.layer_name, name, ", ".join(sorted(self.layer.params)) or "none"))
        return None

    def _custom(self, base_layer, name: str, shape, getter) -> Any:
        def call():
            return self.custom(base_layer=base_layer, reuse_layer=self.layer, name=name, full_name=name, shape=shape,
                               dtype=tf.float32, getter=getter)
        try:
            first = call()
        except Exception as exc:  # noqa: BLE001  (config code)
            raise NetworkError("%s: 'reuse_params' custom function for %r failed: %s: %s"
                               % (self.where, name, type(exc).__name__, exc)) from None
        if isinstance(first, tf.Variable):
            result = first
        else:
            result = ComputedParam(call, tf.convert_to_tensor(first).shape, tf.float32)
        if tuple(result.shape) != shape:
            raise NetworkError("%s: 'reuse_params' custom function gives %r the shape %s, the layer needs %s"
                               % (self.where, name, tuple(result.shape), shape))
        return result


def _resolve(where: str, name: Any) -> Any:
    if not isinstance(name, str):
        raise NetworkError("%s: 'reuse_params': expected a layer name, got %r" % (where, name))
    if not _RESOLVERS:
        raise NetworkError("%s: 'reuse_params' %r: layers cannot be resolved here" % (where, name))
    try:
        return _RESOLVERS[-1](name)
    except KeyError:
        raise NetworkError("%s: 'reuse_params' names layer %r, which is not built before it (unknown layer, or "
                           "a dependency loop)" % (where, name)) from None
