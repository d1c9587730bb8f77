"""Layer base class, the per-call run context and the layer registry.

How a layer is written (see docs/architecture.md, "Writing a layer"):

- ``layer_class`` (the config name) and ``options`` (:class:`Option` tuples: name, default, doc);
- ``__init__(name, opts, sources, seed)``: ``sources`` are the :class:`Data` templates of the
  inputs in ``"from"`` order. Compute ``self.output`` (a :class:`Data`), create variables with
  :meth:`Layer.weight` (eagerly, seeded), raise :class:`NetworkError` via ``self.desc``;
- ``forward(sources, ctx)``: ``sources`` are :class:`LayerOutput` values; return
  :meth:`Layer.make_output` ``(tensor, sources, {new_dim: sizes})``.
"""
from __future__ import annotations

import functools
import re
import types
import zlib
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Type

import numpy as np
import tensorflow as tf

from returnn.errors import NetworkError, known_list
from returnn.tensor import AxisError, Data, Dim
from returnn.tf.layers import output_hooks, param_noise
from returnn.tf.layers.initializers import initial_value
from returnn.tf.layers.base_options import BASE_OPTIONS
from returnn.tf.layers.options import (check_in_dim, check_unknown, declared_options, non_negative,
                                      positive_int, rate)
from returnn.tf.layers.output import LayerOutput
from returnn.tf.layers.packed import PackedFrames
from returnn.tf.layers.params import Param, same
from returnn.tf.layers.reuse import ReuseParams


# RETURNN's axis descriptions that pick an axis by its position among others (refused from behavior version 7)
_ORDER_DEPENDENT = re.compile(r"(s|spatial|d|dyn|dynamic|except_batch|static):-?\d+$")

class RunContext:
    """Per-call information for layers: training or not, and the seed for stateless dropout.

    ``seed`` is an int64 tensor of shape (2,) that changes every step; layers derive their own
    seeds from it with :meth:`layer_seed` so dropout masks are reproducible given the step.
    """

    def __init__(self, train: bool, seed: Optional[tf.Tensor] = None, batch_size: Optional[tf.Tensor] = None,
                 step: Optional[tf.Tensor] = None):
        self.train = train
        self.seed = seed if seed is not None else tf.constant([0, 0], dtype=tf.int64)
        # inside a rec loop: the step index (RETURNN's ":i"), for layers that need the position
        self.step = step
        # the batch size of this call (set by the network from its data; inside a beam search B * beam)
        self.batch_size = batch_size
        # inside a rec loop: RETURNN's prev end flag (B,) bool of the hypotheses as the step's layers see them
        self.prev_end: Optional[tf.Tensor] = None

    def with_batch_size(self, batch_size: tf.Tensor) -> "RunContext":
        return RunContext(self.train, self.seed, batch_size, self.step)

    @property
    def global_step(self) -> tf.Tensor:
        """The global training step (int64 scalar; 0 outside training steps)."""
        return self.seed[1]

    def layer_seed(self, layer_name: str, salt: int = 0) -> tf.Tensor:
        h = (zlib.crc32(layer_name.encode("utf8")) + salt * 7919) % (2 ** 31)
        return self.seed + tf.constant([0, h], dtype=tf.int64)


class Layer(tf.Module):
    """Base layer; see the module docstring. ``options`` here are accepted by every layer."""

    layer_class = ""
    # Options whose value names another layer: the network builds that layer first and appends its
    # template/value to ``sources`` (after the ``from`` sources, in this order, when given).
    ref_options: Tuple[str, ...] = ()
    default_from: Tuple[str, ...] = ("data",)  # sources when the config gives no "from"
    # opts -> another class that builds this layer (e.g. combine with kind "eval"), or None
    class_selector = None
    # RETURNN's output template of this class is its only source's (``Data.get_common_data`` of one
    # source, as eval, combine, compare, squeeze): the output keeps the source's data name, which the
    # batch_norm option's parameter names hold (param_version 0)
    keeps_source_data_name = False
    # Names of extra outputs readable as "NAME/sub" (the layer then has ``sub_template(sub)`` and sets
    # them in its output's ``sub_outputs``), e.g. forced_align's "scores"
    sub_output_names: Tuple[str, ...] = ()

    @classmethod
    def has_sub_output(cls, opts: Mapping[str, Any], sub: str) -> bool:
        """Whether a layer of this class with ``opts`` offers ``"NAME/sub"``."""
        return sub in cls.sub_output_names
    # True: the layer updates state in training steps, so it runs there even when no loss needs it
    updates_in_training = False
    # True: the output carries no beam even where a source does (split_dims of the batch axis takes it out)
    removes_beam = False
    # RETURNN's variable scope inside the layer's own for all its parameters (rec layers: "rec/")
    param_subscope = ""
    # axis options RETURNN reads with allow_int=False: an int there is refused at every behavior version
    no_int_axes: Tuple[str, ...] = ()
    options = BASE_OPTIONS + output_hooks.OPTIONS

    def __init_subclass__(cls, **kwargs):
        """Every layer class's ``__init__`` ends with :meth:`post_init` (once, after the outermost
        ``__init__`` of a class hierarchy returns), wherever the layer is built."""
        super().__init_subclass__(**kwargs)
        for entry in _PARAM_ENTRY_POINTS:  # what a rec loop calls besides __call__: reads the step's noisy params
            method = cls.__dict__.get(entry)
            if method is not None and not getattr(method, "_with_param_view", False):
                setattr(cls, entry, _with_param_view(method))
        init = cls.__dict__.get("__init__")
        if init is None or getattr(init, "_with_post_init", False):
            return

        @functools.wraps(init)
        def __init__(self, *args, **kw):
            outer = not getattr(self, "_in_init", False)
            object.__setattr__(self, "_in_init", True)
            try:
                init(self, *args, **kw)
            finally:
                if outer:
                    object.__setattr__(self, "_in_init", False)
            if outer:
                self.post_init()
        __init__._with_post_init = True
        cls.__init__ = __init__

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name=_tf_name(name))
        self.layer_name = name
        self.desc = "layer %r (%s)" % (name, self.layer_class)
        self.known_options = declared_options(type(self))
        check_unknown(self.desc, opts, self.known_options)
        if self.layer_class in FAILS_IN_TODAYS_RETURNN:
            from returnn.tf.layers.norm import behavior_version
            if behavior_version() >= 1:  # docs/compat.md "Old config forms"
                raise NetworkError("%s: refused with a behavior_version: today's RETURNN fails on every use of this "
                                   "layer class (%s); older RETURNN built it (taken without a behavior_version)"
                                   % (self.desc, FAILS_IN_TODAYS_RETURNN[self.layer_class]))
        if opts.get("in_dim") is not None and self.known_options["in_dim"] is Layer.options_by_name["in_dim"]:
            check_in_dim(self.desc, opts["in_dim"], sources)
        # read-only view: tf.Module would wrap a plain dict (and nested ones) in its tracking types,
        # which then show up in error messages instead of the user's dicts and lists
        self.opts = types.MappingProxyType(opts)
        self.sources = list(sources)
        self.dropout = rate(self.desc, "dropout", opts.get("dropout"))
        self.l2 = non_negative(self.desc, "L2", opts.get("L2"))
        self.trainable = bool(opts.get("trainable", True))
        self.spatial_smoothing = non_negative(self.desc, "spatial_smoothing", opts.get("spatial_smoothing"))
        self.darc1 = non_negative(self.desc, "darc1", opts.get("darc1"))
        from returnn.tf.updater_opts import check_layer_updater_opts
        self.updater_opts = check_layer_updater_opts(self.desc, opts.get("updater_opts"))
        # RETURNN's param_variational_noise / param_dropout (returnn/tf/layers/param_noise.py): None when off
        self.param_noise = param_noise.layer_settings(self.desc, opts)
        if self.dropout and opts.get("dropout_axis") is not None and sources and not sources[0].sparse:
            from returnn.tf.layers.helpers import dropout_axes
            dropout_axes(self, sources[0])  # checked on the input now (RETURNN: only with dropout), used in training
        self.post_bn = None  # RETURNN's batch_norm option: set by post_init
        output_hooks.check(self.desc, opts)
        output_hooks.configure(self)
        self.source_data_names: Optional[List[Optional[str]]] = None  # set by the network (returnn_data_name)
        self._rng = np.random.RandomState((zlib.crc32(name.encode("utf8")) + int(seed) * 1000003) % (2 ** 32))
        self._new_out_dim: Optional[Dim] = None
        # the variables this layer made, by RETURNN's name in the layer's scope (without param_subscope);
        # held outside tf.Module's tracking (the variables are tracked as the attributes that hold them)
        self._own = _ParamTable()
        spec = opts.get("reuse_params")
        self._reuse = ReuseParams(self.desc, spec) if spec else None
        name_scope = opts.get("name_scope")
        if name_scope is not None and (not isinstance(name_scope, str) or (name_scope.endswith("/") and name_scope != "/")):
            raise NetworkError("%s: 'name_scope' must be a scope name without a trailing '/', got %r" % (self.desc, name_scope))
        self.output: Data = Data(name, dims=())

    # ---- helpers for subclasses
    def opt(self, key: str) -> Any:
        """The option's value, or its declared default."""
        return self.opts.get(key, self.known_options[key].default)

    def require_n_out(self) -> int:
        """``n_out``, or the size of ``out_dim``."""
        return self.out_feature_dim().dimension

    def out_feature_dim(self) -> Dim:
        """The output feature Dim: ``out_dim``, else a new one of size ``n_out`` (one is needed)."""
        out_dim, n_out = self.opts.get("out_dim"), self.opts.get("n_out")
        if out_dim is not None:
            if not isinstance(out_dim, Dim) or out_dim.dimension is None:
                raise NetworkError("%s: 'out_dim' must be a static Dim, got %r" % (self.desc, out_dim))
            if n_out is not None and positive_int(self.desc, "n_out", n_out) != out_dim.dimension:
                raise NetworkError("%s: n_out %r does not match out_dim %r" % (self.desc, n_out, out_dim))
            return out_dim
        if n_out is None:
            raise NetworkError("%s: needs 'n_out' or 'out_dim'" % self.desc)
        if self._new_out_dim is None:
            from returnn.tf.layers.helpers import new_feature_dim
            self._new_out_dim = new_feature_dim(self.layer_name, positive_int(self.desc, "n_out", n_out))
        return self._new_out_dim

    def check_n_out(self, dim: Optional[int]) -> None:
        """An explicit ``n_out`` must agree with the output dim the layer computes."""
        n_out = self.opts.get("n_out")
        if n_out is not None and positive_int(self.desc, "n_out", n_out) != dim:
            raise NetworkError("%s: n_out %r does not match the output dim %r" % (self.desc, n_out, dim))

    def _check_axis_rules(self, description: Any, key: str) -> None:
        """RETURNN's behavior-version rules for axis options: no ints from version 5, nothing that
        depends on the axis order (``s:0``, ``dyn:1``, ``static:0``, ``except_batch:0``) from 7."""
        from returnn.tf.layers.norm import behavior_version
        for item in description if isinstance(description, (list, tuple)) else [description]:
            if isinstance(item, int) and not isinstance(item, bool) and key in self.no_int_axes:
                raise NetworkError("%s: option %r: axis %r as an int is refused, as RETURNN does for this option "
                                   "(give it as a str or Dim)" % (self.desc, key, item))
            if isinstance(item, int) and not isinstance(item, bool) and behavior_version() >= 5:
                raise NetworkError("%s: option %r: axis %r as an int is not allowed from behavior version 5 (RETURNN: "
                                   "give it as a str or Dim)" % (self.desc, key, item))
            if isinstance(item, str) and _ORDER_DEPENDENT.match(item.lower()) and behavior_version() >= 7:
                raise NetworkError("%s: option %r: axis %r depends on the order of the axes, not allowed from behavior "
                                   "version 7 (RETURNN)" % (self.desc, key, item))

    def axis(self, data: Data, description: Any, key: str) -> int:
        """One axis of ``data`` for the option ``key``; errors name the layer."""
        self._check_axis_rules(description, key)
        try:
            return data.get_axis_from_description(description)
        except AxisError as exc:
            raise NetworkError("%s: option %r: %s" % (self.desc, key, exc)) from None

    def axes(self, data: Data, description: Any, key: str) -> List[int]:
        self._check_axis_rules(description, key)
        try:
            return data.get_axes_from_description(description)
        except AxisError as exc:
            raise NetworkError("%s: option %r: %s" % (self.desc, key, exc)) from None

    def weight(self, name: str, shape: Sequence[int], init: Any = "glorot_uniform",
               init_option: Optional[str] = None) -> tf.Variable:
        """A variable initialised from this layer's seeded RNG by ``init`` (a RETURNN init spec, see
        :mod:`returnn.tf.layers.initializers`; the option ``init_option`` overrides it when set).
        ``name`` is RETURNN's name of the parameter in the layer's scope (``"W"``, ``"b"``)."""
        if init_option is not None and self.opts.get(init_option) is not None:
            init = self.opts[init_option]
        try:
            value = initial_value(init, shape, self._rng)
        except ValueError as exc:
            raise NetworkError("%s: option %r: %s" % (self.desc, init_option or "init", exc)) from None
        return self.variable(name, value)

    def variable(self, name: str, value: Any, trainable: Optional[bool] = None) -> tf.Variable:
        """A new parameter of this layer with initial ``value`` and RETURNN's ``name`` in the layer's
        scope (statistics such as batch-norm means pass ``trainable=False``)."""
        if name in self.own_params or name in self._own.shared:
            raise NetworkError("%s: internal error: parameter %r made twice" % (self.desc, name))

        def make(**_kwargs) -> tf.Variable:  # also the getter of reuse_params custom functions
            if name not in self.own_params:
                self.own_params[name] = param_noise.ParamVariable(
                    value, name=name.replace("/", "_"), trainable=self.trainable if trainable is None else trainable)
                self.own_params[name]._returnn_owner = self
                if self.updater_opts:  # read by the optimizer and the train step (returnn/tf/updater_opts.py)
                    from returnn.tf.updater_opts import ATTR
                    setattr(self.own_params[name], ATTR, self.updater_opts)
            return self.own_params[name]
        if self._reuse is not None:
            shared = self._reuse.lookup(self, name, np.shape(value), make)
            if shared is not None and shared is not self.own_params.get(name):
                self._own.shared[name] = shared
                return shared
        return make()

    def returnn_params(self) -> List[Param]:
        """The parameters this layer made, as RETURNN names (in the layer's scope, e.g. ``"W"``,
        ``"rec/W_re"``) and lays them out (:mod:`returnn.tf.layers.params`); by default each
        variable as it is. Layers whose layout differs from RETURNN's override this."""
        return [same(self.param_subscope + key, var) for key, var in self.own_params.items()]

    @property
    def own_params(self) -> Dict[str, tf.Variable]:
        """The variables this layer made, by RETURNN's name in the layer's scope (without
        ``param_subscope``), in the order made."""
        return self._own.by_name

    @property
    def params(self) -> Dict[str, tf.Variable]:
        """RETURNN's ``layer.params``: the layer's variables by name, its own and those it shares
        (``reuse_params``), as config code reads them (e.g. in a ``reuse_params`` custom function)."""
        out = dict(self.own_params)
        out.update((k, v) for k, v in self._own.shared.items() if isinstance(v, tf.Variable))
        return out

    def l2_variables(self) -> List[tf.Variable]:
        """The parameters the ``L2`` option applies to: all trainable ones of the layer, biases and
        scales included (RETURNN's ``L2 * sum(p ** 2)`` over the layer's params)."""
        return list(self.trainable_variables)

    def dropout_active(self, ctx: RunContext) -> bool:
        """Whether the input dropout applies in this call: in training, or always with ``dropout_on_forward``."""
        return bool(self.dropout) and (ctx.train or bool(self.opts.get("dropout_on_forward")))

    def dropout_seed(self, ctx: RunContext, salt: int = 0) -> tf.Tensor:
        """The dropout mask's seed: the training step's (reproducible), else a fresh one per call
        (``dropout_on_forward`` outside training, where RETURNN draws a new mask each run)."""
        if ctx.train:
            return ctx.layer_seed(self.layer_name, salt)
        return tf.random.uniform([2], maxval=2 ** 62, dtype=tf.int64)

    def apply_dropout(self, x: LayerOutput, ctx: RunContext, salt: int = 0) -> LayerOutput:
        """The layer's input dropout on one dense value (training only, unless ``dropout_on_forward``)."""
        from returnn.tf.layers.helpers import dropout, dropout_scale, noise_broadcast_axes
        if not self.dropout_active(ctx) or x.data.sparse:
            return x
        seed, axes = self.dropout_seed(ctx, salt), noise_broadcast_axes(self, x.data)
        if x.packed is None:
            out = x.with_tensor(dropout(x.tensor, self.dropout, seed, axes))
        else:  # the same mask on the padded tensor and on its packed rows (only one of them is computed)
            rows = x.packed
            shape = [1 if a in axes else (rows.outer[a] if a < 2 else x.data.dims[a].dimension) for a in range(3)]
            scale = dropout_scale(tf.cast(tf.stack(shape), tf.int32), self.dropout, seed, x.tensor.dtype)
            scale.set_shape([1 if a in axes else None for a in range(3)])
            out = x.with_tensor(x.tensor * scale, packed=rows.like(rows.values * rows.flat_mask(scale)))
        out.computed_padding = x.computed_padding
        return out

    def make_output(self, tensor: tf.Tensor, sources: Sequence[LayerOutput] = (),
                    sizes: Optional[Mapping[Dim, tf.Tensor]] = None, logits: Optional[tf.Tensor] = None,
                    packed: Optional[PackedFrames] = None) -> LayerOutput:
        """``tensor`` as this layer's output: sizes of dims kept from ``sources``, plus ``sizes``
        of the dims the layer made."""
        merged: Dict[Dim, tf.Tensor] = {}
        for src in sources:
            merged.update(src.sizes)
        merged.update(sizes or {})
        out = LayerOutput(tensor, self.output, merged, logits, packed)
        out.computed_padding = True  # what the layer computes on its padded frames, as RETURNN (not masked)
        return out

    def post_init(self) -> None:
        """What RETURNN's base layer adds once the output template is known (runs at the end of the
        layer's construction, see ``__init_subclass__``): the ``batch_norm`` option's normalisation
        of the output, and the checks of ``out_shape``, ``out_type`` and the constraint options."""
        spec = self.opts.get("batch_norm")
        if spec:
            from returnn.tf.layers.norm import BatchNorm
            if spec is not True and not isinstance(spec, Mapping):
                raise NetworkError("%s: 'batch_norm' must be True or a dict of batch_norm options, got %r"
                                   % (self.desc, spec))
            self.post_bn = BatchNorm(self, self.output, {} if spec is True else dict(spec))
        if self.opts.get("out_type") is not None and self.known_options["out_type"] is Layer.options_by_name["out_type"]:
            self._check_out_type(self.opts["out_type"])
        if self.opts.get("n_out") is not None and "n_out" in self.known_options:
            self.check_n_out(self.output.dim)  # RETURNN's LayerBase asserts it for every layer
        if self.opts.get("out_shape") is not None:
            self._verify_out_shape(self.opts["out_shape"])
        if self.spatial_smoothing:
            from returnn.tf.constraints import smoothing_grid
            smoothing_grid(self.desc, self.output.dim)
        if self.param_noise is not None:
            param_noise.check_variables(self)
        activation = self.opt("activation") if "activation" in self.known_options else None
        if self.darc1 and activation not in (None, "identity", "linear", "softmax", "log_softmax"):
            raise NetworkError("%s: 'darc1' with activation %r is not supported (RETURNN takes the values before "
                               "the activation)" % (self.desc, activation))

    def _verify_out_shape(self, out_shape: Any) -> None:
        """RETURNN's ``out_shape``: the output's dims, as a set (batch included), the implicit ones too
        (:func:`returnn.tensor.marked_dim.out_shape_problems`)."""
        from returnn.tensor.marked_dim import MarkedDim, out_shape_problems
        if isinstance(out_shape, Mapping) and not out_shape:
            out_shape = set()
        if not isinstance(out_shape, (set, frozenset, list, tuple)) or not all(
                isinstance(d, (Dim, MarkedDim)) for d in out_shape):
            raise NetworkError("%s: 'out_shape' must be a set of Dims (or RETURNN's marked dims, "
                               "returnn.tensor.marked_dim), got %r" % (self.desc, out_shape))
        # RETURNN (LayerBase.transform_config_dict): a rec sub-layer moved out of the loop may have the loop's
        # time axis too (an OptionalDim; RETURNN checks its template in the loop first, where it has not)
        from returnn.tf.layers.helpers import moved_out_loop_dims
        problems = out_shape_problems(self.output, out_shape, moved_out_loop_dims())
        if problems:
            raise NetworkError("%s: the output %s does not have the dims of 'out_shape' (%s)"
                               % (self.desc, self.output.short_repr(), "; ".join(problems)))

    def _check_out_type(self, out_type: Any) -> None:
        """RETURNN's ``out_type`` on a layer that computes its own output: what it states must hold."""
        if not isinstance(out_type, Mapping):
            raise NetworkError("%s: 'out_type' must be a dict here (a function only for eval layers), got %r"
                               % (self.desc, out_type))
        out = self.output
        known = {"dim": out.dim, "sparse": out.sparse, "dtype": out.dtype,
                 "shape": tuple(d.dimension for i, d in enumerate(out.dims) if i != out.batch_dim_axis)}
        layout = ("batch_dim_axis", "time_dim_axis", "feature_dim_axis")  # order only: layers align by dim tags
        unknown = sorted(k for k in out_type if k not in known and k not in layout)
        if unknown:
            raise NetworkError("%s: 'out_type' key(s) %s are not supported here (dim, shape, sparse, dtype)"
                               % (self.desc, ", ".join(map(repr, unknown))))
        for key, want in out_type.items():
            if key in known and key != "shape" and want != known[key]:
                raise NetworkError("%s: 'out_type' says %s %r, but the layer's output has %r (%s)"
                                   % (self.desc, key, want, known[key], out.short_repr()))
        if "shape" in out_type and sorted(map(str, out_type["shape"])) != sorted(map(str, known["shape"])):
            raise NetworkError("%s: 'out_type' says shape %r, but the layer's output is %s"
                               % (self.desc, tuple(out_type["shape"]), out.short_repr()))

    def returnn_data_name(self) -> str:
        """The name of RETURNN's output data of this layer (``<layer>_output``, or its only source's for
        :attr:`keeps_source_data_name`); ``source_data_names`` is set by the network that built it."""
        names = self.source_data_names
        if self.keeps_source_data_name and names and len(names) == 1 and names[0]:
            return names[0]
        return "%s_output" % self.layer_name.rsplit("/", 1)[-1]

    def all_returnn_params(self) -> List[Param]:
        """:meth:`returnn_params` plus those of the ``batch_norm`` option's normalisation."""
        if self.post_bn is None:
            return self.returnn_params()
        bn_vars = {id(v) for v in self.post_bn.variables}
        return [p for p in self.returnn_params() if not any(id(v) in bn_vars for v in p.variables)] + \
            self.post_bn.returnn_params()

    # ---- to implement
    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        raise NotImplementedError

    def __call__(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        beam = None
        if any(getattr(s, "beam", None) is not None for s in sources):  # a search in training (beam_values.py)
            from returnn.tf.layers import beam_values
            beam = beam_values.common_beam(self.desc, sources)
            if beam is not None:
                sources = beam_values.tiled(sources, beam)
        with param_noise.step_scope(ctx.train, ctx.seed), param_noise.layer_view(self):
            out = self.forward(sources, ctx)
            if self.post_bn is not None:
                read = out if out.computed_padding else out.with_identity(out.as_read())  # RETURNN normalises its
                out = out.with_normalised(self.post_bn.apply(read, ctx))  # padded frames too, as it holds them
            out = output_hooks.apply(self, out, sources, ctx)
        if beam is not None and out.beam is None and not self.removes_beam:
            from returnn.tf.layers.beam_values import with_beam
            with_beam(out, beam)
        return out


class _ParamTable:
    """A plain holder of a dict (tf.Module would track a dict attribute as an object of its own)."""

    def __init__(self):
        self.by_name: Dict[str, tf.Variable] = {}
        self.shared: Dict[str, Any] = {}  # reuse_params: another layer's variables, or ComputedParams
        # weight noise (param_noise.py): variables of other layers read as own, and what this layer makes noisy
        self.noise_extra: List[Tuple[str, tf.Variable, Any]] = []
        self.noise_entries: Optional[List[Tuple[str, tf.Variable, Any]]] = None


# Layer methods a rec loop calls besides __call__ (they read the layer's parameters, noisy in training)
_PARAM_ENTRY_POINTS = ("step", "initial_state", "prev_initial_output")


def _with_param_view(method):
    @functools.wraps(method)
    def wrapped(self, *args, **kwargs):
        with param_noise.layer_view(self):
            return method(self, *args, **kwargs)
    wrapped._with_param_view = True
    return wrapped


def _tf_name(name: str) -> str:
    # tf.Module names are Python identifiers: "extra.search:x", "a-b" -> "extra_search_x", "a_b"
    clean = "".join(c if (c.isascii() and c.isalnum()) or c == "_" else "_" for c in name)
    if not clean or not clean[0].isalpha():
        clean = "l_" + clean
    return clean


Layer.options_by_name = {o.name: o for o in Layer.options}
LAYER_CLASSES: Dict[str, Type[Layer]] = {}


def register_layer(cls: Type[Layer]) -> Type[Layer]:
    """Class decorator: makes ``cls`` available as ``{"class": cls.layer_class}`` (and under the
    names in ``cls.aliases``, e.g. ``hidden`` for ``linear``)."""
    for name in (cls.layer_class,) + tuple(cls.__dict__.get("aliases", ())):  # own aliases, not inherited
        LAYER_CLASSES[name] = cls
    return cls


# RETURNN layer classes refused here, with the reason: most depend on software outside TensorFlow;
# those in NOT_YET are RETURNN native ops not reimplemented with TensorFlow ops yet.
NOT_HERE = {
    "fast_bw": "it needs RASR (Sprint) to build the alignment automata; train with a 'ctc' loss or with "
               "alignments dumped to HDF (tools/hdf_dump.py) as frame-wise targets instead",
    "kenlm": "it needs the KenLM native library; use a neural LM layer, or rescore n-best lists outside",
    "mask_based_gevbeamforming": "it needs the pb_bss beamforming package",
    "mask_based_mvdrbeamforming": "it needs the pb_bss beamforming package",
    "parametric_wiener_filter": "it needs i6's tfSi6Proc package (its TfParametricWienerFilter), which is not public",
}
NOT_YET: tuple = ()
# layer classes of older RETURNN versions that today's RETURNN no longer has (nor this engine)
REMOVED_FROM_RETURNN = {"neural_transducer": "RETURNN removed it in Sep 2021 (ac3a9e2b0, its demo-tf-neural-"
                                             "transducer fails there too); define the transducer with rec layers"}
# layer classes older RETURNN built that today's RETURNN (1.20261022, TF 2) fails on whatever the options:
# refused with a behavior_version, built without one (docs/compat.md "Old config forms")
FAILS_IN_TODAYS_RETURNN = {
    "alternating_real_to_complex": "its strided slices end at a dynamic shape: the static feature dim is lost",
    "complex_to_alternating_real": "its output keeps the complex dtype of the input over a float32 value",
    "batch_median_pooling": "its output template reads the placeholder of a template",
    "tile_features": "its output template indexes a (T, F) shape at 2",
    "fill_unused": "it calls tf.expand_dims with 'dim', which TF 2 removed",
    "swap_time_feature": "its output template sets the dim of a Tensor to None",
    "flatten_time": "its output template sets the dim of a Tensor to None",
    "batch_softmax": "its tf.where takes a (B*T,) mask against (B*T, F) values, which TensorFlow 2 broadcasts "
                     "as rows",
    "remove": "its template's sanity check finds the new axis without sizes ('dynamic dim ... undefined'), with or "
              "without out_dim",
}
# Losses likewise: RETURNN's full-sum losses computed by RASR.
LOSSES_NOT_HERE = {"fast_bw": NOT_HERE["fast_bw"],
                   "sprint": "it is computed by RASR (Sprint); train with 'ce' on alignments dumped to HDF "
                             "(tools/hdf_dump.py) or with a 'ctc' loss instead",
                   "via_layer": "its value and error signal are another layer's own loss, which in RETURNN only "
                                "the fast_bw layer (RASR automata) has; " + NOT_HERE["fast_bw"]}


def get_layer_class(name: str, layer_name: str, opts: Optional[Mapping[str, Any]] = None) -> Type[Layer]:
    """Registry lookup; an unknown class is an error naming the layer and listing the known ones.
    With ``opts``, the class's ``class_selector`` may pick another class for those options."""
    from returnn.tf import layers as _all  # noqa: F401  (imports register the classes)
    if name not in LAYER_CLASSES:
        if name == "fast_bw" and opts is not None and opts.get("align_target", "sprint") != "sprint":
            raise NetworkError("layer %r: layer class 'fast_bw' with align_target %r is not available here: RETURNN's "
                               "native Baum-Welch op over its own automata is not built here (no RASR is needed for "
                               "them); train with a 'ctc' loss instead" % (layer_name, opts.get("align_target")))
        if name in NOT_HERE or name in REMOVED_FROM_RETURNN:
            raise NetworkError("layer %r: layer class %r is not available here: %s"
                               % (layer_name, name, NOT_HERE.get(name) or REMOVED_FROM_RETURNN[name]))
        raise NetworkError("layer %r: unknown layer class %r (known: %s)" % (layer_name, name, known_list(LAYER_CLASSES)))
    cls = LAYER_CLASSES[name]
    loss = opts.get("loss") if opts is not None else None
    if isinstance(loss, str) and loss in LOSSES_NOT_HERE:  # before its options (sprint_opts) are checked
        raise NetworkError("layer %r: loss %r is not available here: %s" % (layer_name, loss, LOSSES_NOT_HERE[loss]))
    if opts is not None and cls.class_selector is not None:
        cls = cls.class_selector(opts) or cls
    return cls


def __getattr__(name: str) -> Any:
    """RETURNN's API for loss classes defined in configs (``Loss``), from returnn/tf/config_loss.py
    (imported on first use: it needs the engine's losses, which need this package)."""
    if name in ('Loss',):
        from returnn.tf import config_loss
        return getattr(config_loss, name)
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
