"""RETURNN's weight noise: the layer options (and config keys) ``param_variational_noise``,
``param_dropout`` and ``param_dropout_min_ndim``.

RETURNN (``LayerBase.var_creation_scope``) hands a layer, in training only, every floating-point
variable it gets there (its own parameters and those shared with it by ``reuse_params``) as
``param + N(0, s)`` (``param_variational_noise`` s) and then with inverted dropout ``p`` (a mask of
the parameter's full shape, kept values scaled by ``1 / (1 - p)``; ``param_dropout``, only for
parameters of at least ``param_dropout_min_ndim`` dims, RETURNN's layout). The draws are made outside
any loop or cond: one per training step, shared by all frames of a rec loop. Evaluation, forward and
search read the plain parameters. Gradients flow through the noisy value to the parameter.

Here one mechanism serves every layer class: a layer's variables are :class:`ParamVariable`; while
a layer runs in a training step (its call, and the entry points a rec loop calls: ``step``,
``initial_state``, ``prev_initial_output``), every read of one of its variables (``value``,
``read_value``, conversion to a tensor, ``sparse_read``, ``gather_nd``) gives that step's noisy
value of the variable for that layer (:func:`layer_view`). The values are drawn once per step and
layer, in the graph outside any loop or cond, and cached (:class:`StepDraws`). Nothing happens when
the options are 0 or None, or outside training.

Variables RETURNN makes outside ``var_creation_scope`` are exempt (:func:`exempt`); a rec unit's
``initial_output: "var"`` takes the rec layer's settings (:func:`noise_by`), as RETURNN makes it in
the rec layer's scope.
"""
from __future__ import annotations

import contextlib
import threading
import zlib
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Tuple

import tensorflow as tf
from tensorflow.python.ops import control_flow_v2_func_graphs as _cf_graphs
from tensorflow.python.ops import resource_variable_ops

from returnn.errors import NetworkError
from returnn.tf.layers.options import non_negative, rate

_NOISE_BY = "_returnn_noise_by"  # attribute of a variable: the layer whose settings apply to it (None: exempt)
_CONTROL_FLOW_GRAPHS = (_cf_graphs.WhileBodyFuncGraph, _cf_graphs.WhileCondFuncGraph, _cf_graphs.CondBranchFuncGraph)


@dataclass(frozen=True)
class Settings:
    """A layer's effective weight noise: ``noise`` (stddev), ``dropout`` (rate), ``min_ndim``."""

    noise: float
    dropout: float
    min_ndim: int


def layer_settings(desc: str, opts: Any) -> Optional[Settings]:
    """The layer's options, each falling back to the config key of its name when None (RETURNN);
    None when neither noise nor dropout is active."""
    from returnn.config import get_global_config
    config = get_global_config()

    def get(key: str, from_config: Any) -> Any:
        value = opts.get(key)
        return from_config if value is None else value

    noise = non_negative(desc, "param_variational_noise",
                         get("param_variational_noise", config.float("param_variational_noise")))
    dropout = rate(desc, "param_dropout", get("param_dropout", config.float("param_dropout")))
    min_ndim = get("param_dropout_min_ndim", config.int("param_dropout_min_ndim")) or 0
    if isinstance(min_ndim, bool) or not isinstance(min_ndim, int):
        raise NetworkError("%s: 'param_dropout_min_ndim' must be an int, got %r" % (desc, min_ndim))
    if not noise and not dropout:
        return None
    return Settings(noise, dropout, min_ndim)


def affects(settings: Optional[Settings], ndim: int) -> bool:
    """Whether ``settings`` change a floating parameter of ``ndim`` dims (RETURNN's layout)."""
    return settings is not None and (bool(settings.noise) or (bool(settings.dropout) and ndim >= settings.min_ndim))


def exempt(var: tf.Variable) -> tf.Variable:
    """``var`` never gets weight noise (RETURNN makes it outside ``var_creation_scope``)."""
    setattr(var, _NOISE_BY, None)
    return var


def noise_by(var: tf.Variable, layer: Any, key: str) -> tf.Variable:
    """``var`` (of another layer) takes the weight-noise settings of ``layer`` and is read by it
    as its own (RETURNN makes it in that layer's scope, e.g. a rec unit's initial output)."""
    setattr(var, _NOISE_BY, layer)
    layer._own.noise_extra.append((key, var, layer))
    return var


class ParamVariable(resource_variable_ops.ResourceVariable):
    """A layer's parameter: its reads give the substitute the running layer has for it (its noisy
    value in a training step, :func:`layer_view`), else the variable's value."""

    def value(self):
        sub = _substitute(self)
        return super().value() if sub is None else sub

    def read_value(self):
        sub = _substitute(self)
        return super().read_value() if sub is None else tf.identity(sub)

    def read_value_no_copy(self):
        sub = _substitute(self)
        return super().read_value_no_copy() if sub is None else tf.identity(sub)

    def sparse_read(self, indices, name=None):
        sub = _substitute(self)
        return super().sparse_read(indices, name=name) if sub is None else tf.gather(sub, indices, name=name)

    def gather_nd(self, indices, name=None):
        sub = _substitute(self)
        return super().gather_nd(indices, name=name) if sub is None else tf.gather_nd(sub, indices, name=name)

    def plain_value(self) -> tf.Tensor:
        """The variable's value, whatever layer runs."""
        return super().value()


class _State(threading.local):
    def __init__(self):
        super().__init__()
        self.draws: Optional[StepDraws] = None
        self.views: List[Optional[Dict[int, tf.Tensor]]] = []


_STATE = _State()


def _substitute(var: tf.Variable) -> Optional[tf.Tensor]:
    views = _STATE.views
    return views[-1].get(id(var)) if views and views[-1] else None


class StepDraws:
    """The noisy parameters of one training step: per (settings layer, variable) one draw, made
    outside any loop or cond, from the step's seed."""

    def __init__(self, seed: tf.Tensor):
        self.seed = seed
        self.values: Dict[Tuple[int, int], tf.Tensor] = {}
        self.views: Dict[int, Optional[Dict[int, tf.Tensor]]] = {}

    def view(self, layer: Any) -> Optional[Dict[int, tf.Tensor]]:
        """{id(variable): noisy value} for the variables ``layer`` reads as its own (None: none)."""
        if id(layer) not in self.views:
            entries = noise_params(layer)
            self.views[id(layer)] = {id(var): self.draw(key, var, by) for key, var, by in entries} or None
        return self.views[id(layer)]

    def draw(self, key: str, var: tf.Variable, by: Any) -> tf.Tensor:
        if (id(by), id(var)) not in self.values:
            with _outside_control_flow():
                self.values[(id(by), id(var))] = self._noisy(key, var, by)
        return self.values[(id(by), id(var))]

    def _noisy(self, key: str, var: tf.Variable, by: Any) -> tf.Tensor:
        from returnn.tf.layers.helpers import dropout_scale
        settings: Settings = by.param_noise
        x = var.plain_value() if isinstance(var, ParamVariable) else tf.convert_to_tensor(var)
        shape = tf.shape(x)
        with tf.name_scope("param_noise"):
            if settings.noise:
                x = x + tf.random.stateless_normal(shape, self._seed(by, key, 1), stddev=settings.noise, dtype=x.dtype)
            if settings.dropout and returnn_ndim(var) >= settings.min_ndim:
                x = x * dropout_scale(shape, settings.dropout, self._seed(by, key, 2), x.dtype)
        return x

    def _seed(self, by: Any, key: str, kind: int) -> tf.Tensor:
        h = zlib.crc32(("%s/%s:param_noise:%i" % (by.layer_name, key, kind)).encode("utf8")) % (2 ** 31)
        return self.seed + tf.constant([0, h], dtype=tf.int64)


def noise_params(layer: Any) -> List[Tuple[str, tf.Variable, Any]]:
    """(RETURNN name in the layer's scope, variable, layer whose settings apply) for the floating
    variables ``layer`` reads as its own that get weight noise: its own and those it shares
    (``reuse_params``), plus the rec unit variables made in its scope (:func:`noise_by`)."""
    table = layer._own
    if table.noise_entries is not None:
        return table.noise_entries
    own = layer.own_params
    candidates = [(k, v, getattr(v, _NOISE_BY, layer)) for k, v in own.items()]
    candidates += [(k, v, layer) for k, v in layer.params.items() if k not in own]
    candidates += table.noise_extra
    table.noise_entries = [(key, var, by) for key, var, by in candidates
                           if by is not None and by.param_noise is not None and var.dtype.is_floating
                           and affects(by.param_noise, returnn_ndim(var))]
    return table.noise_entries


def returnn_ndim(var: tf.Variable) -> int:
    """The number of dims of the RETURNN parameter ``var`` holds (its layout here may differ)."""
    ndim = getattr(var, "_returnn_ndim", None)
    if ndim is None:
        owner = getattr(var, "_returnn_owner", None)
        params = owner.all_returnn_params() if owner is not None else ()
        ndim = next((len(p.shape) for p in params if any(v is var for v in p.variables)), var.shape.rank)
        setattr(var, "_returnn_ndim", ndim)
    return ndim


@contextlib.contextmanager
def _outside_control_flow() -> Iterator[None]:
    """Ops made in here go to the graph around all loops and conds (RETURNN's default_control_flow_ctx)."""
    if tf.executing_eagerly():
        yield
        return
    graph = tf.compat.v1.get_default_graph()
    outer = graph
    while isinstance(outer, _CONTROL_FLOW_GRAPHS):
        outer = outer.outer_graph
    if outer is graph:
        yield
        return
    with outer.as_default():
        yield


@contextlib.contextmanager
def step_scope(train: bool, seed: tf.Tensor) -> Iterator[None]:
    """A training call's draws (kept by an enclosing one: one draw per step)."""
    if not train or _STATE.draws is not None:
        yield
        return
    _STATE.draws = StepDraws(seed)
    try:
        yield
    finally:
        _STATE.draws = None


@contextlib.contextmanager
def layer_view(layer: Any) -> Iterator[None]:
    """While ``layer`` runs in a training step, its variables read as their noisy values."""
    draws = _STATE.draws
    if draws is None:
        yield
        return
    view = draws.view(layer)
    if view and tf.executing_eagerly():  # eager ops read variables in C, past ParamVariable.value
        raise NetworkError("%s: param_variational_noise / param_dropout apply in compiled (tf.function) training "
                           "steps only, not in an eager call" % layer.desc)
    _STATE.views.append(view)
    try:
        yield
    finally:
        _STATE.views.pop()


def check_variables(layer: Any) -> None:
    """With weight noise, every floating variable of ``layer`` (not of its sub-layers) must be one
    this mechanism reads (made by ``Layer.variable``); else the options are refused."""
    sub_vars = {id(v) for m in layer._flatten(predicate=lambda m: m is not layer and hasattr(m, "layer_name"))
                for v in m.variables}
    for var in layer.variables:
        if var.dtype.is_floating and not isinstance(var, ParamVariable) and id(var) not in sub_vars:
            raise NetworkError("%s: param_variational_noise / param_dropout (option or config key) are not supported "
                               "here: its variable %r is not a layer parameter this engine can make noisy"
                               % (layer.desc, var.name))


# RETURNN's variational noise draws from its global random generator, whose state its training graph
# holds and its checkpoints store under this name (int64 (3,), Philox); this engine draws from the
# step's seed, writes a state there so RETURNN continues training from its checkpoints, and ignores it
# when it reads one
RETURNN_GENERATOR_STATE = "global_random_generator/random_generator/StateVar"


def uses_returnn_generator(network: Any) -> bool:
    """Whether RETURNN's training graph of ``network`` holds :data:`RETURNN_GENERATOR_STATE`: some
    layer makes a parameter noisy with ``param_variational_noise``."""
    from returnn.tf.layers.base import Layer
    layers = network._flatten(predicate=lambda m: isinstance(m, Layer))
    return any(by.param_noise.noise for layer in layers for _, _, by in noise_params(layer))
