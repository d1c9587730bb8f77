"""Random numbers as layer outputs: RETURNN's ``random``, ``rand_int`` and ``random_state_init``.

``random``: ``shape`` (Dims or ints; an int is a new static axis ``NAME:dimI``; a dynamic Dim, or dim math of
one such as ``time * 2``, from a source that has it: ``shape_deps``), ``distribution``
``uniform`` (``minval``/``maxval``, or ``bound`` for [-b, b), or ``mean``/``stddev``), ``normal`` or
``truncated_normal`` (``mean``, ``stddev``; cut at 2 stddev), parameters as numbers or names of
scalar layers. ``rand_int``: integers in ``[minval, maxval)``.

The random stream is TensorFlow's stateless one (Philox), reproducible given the run's seed:

- default (RETURNN: a stateful generator whose state variable advances every step): new numbers in
  every step from the step's seed (:meth:`RunContext.layer_seed`), this layer's name and its state
  variable ``random_generator/StateVar`` (int64 (3,), RETURNN's parameter: kept, non-trainable and
  in checkpoints, initialised from ``seed`` as RETURNN does, but never advanced: the step's seed
  gives the advance);
- ``static`` True: numbers that depend only on ``seed`` (or the layer's construction seed), the
  same in every step, as RETURNN's;
- ``explicit_state`` (a layer holding a Philox state, e.g. ``random_state_init`` or an int64
  ``variable`` it initialises): RETURNN's numbers exactly, as TensorFlow's ``Generator`` draws them
  from that state (counter: its first two entries, key: the third); ``auto_update_state`` True (the
  state a ``variable`` layer): every draw also advances that variable by the number of values drawn
  (TensorFlow's ``rng_read_and_skip``), so the next draw (next step, next loop frame) differs.

What differs from RETURNN without an explicit state: the numbers themselves (RETURNN's generator
draws from its own state counter, here the step's seed selects the stream); algorithms other than
Philox (refused). In a rec loop, as RETURNN: with an ``end`` layer in the unit it stays in the loop
(a draw per step), else it is moved out of the loop (when nothing in the loop feeds it) with the
loop's axis first in ``shape``: one draw of all frames (time-major), frames read per step.
``random_state_init``: RETURNN's ``create_rng_state(seed, philox)`` (int64 (3,)); ``seed`` None
takes seeds from the layer's construction seed (RETURNN: the network's random generator).
"""
from __future__ import annotations

import math
import zlib
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf
from tensorflow.python.ops import gen_stateful_random_ops, gen_stateless_random_ops_v2

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim, DimTypes
from returnn.tf.layers import reuse
from returnn.tf.layers.helpers import moved_out_loop_dims
from returnn.tf.layers.rnn_cell import is_step_template
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.options import Option, one_of

ALGORITHMS = (None, "philox", "PHILOX", 1)
_DIST_REFS = ("mean", "stddev", "bound", "minval", "maxval")


def _rng_state(seed: Any) -> np.ndarray:
    """TensorFlow's Philox state for ``seed`` (RETURNN's ``create_rng_state(seed, alg=philox)``)."""
    from tensorflow.python.ops import stateful_random_ops
    return np.asarray(stateful_random_ops.create_rng_state(seed, alg=1), np.int64)


def _as_list(value: Any) -> List[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


class RefsLayer(Layer):
    """Layers whose layer-valued options (``ref_options``, strings or lists of strings) are sources
    after ``from``: the same list in networks and in rec units."""

    default_from = ()

    @classmethod
    def outer_sources(cls, name: str, opts: Mapping[str, Any], default_target: str = "classes",
                      search: bool = False) -> List[str]:
        out = _as_list(opts.get("from", list(cls.default_from)))
        for key in cls.ref_options:
            out += [v for v in _as_list(opts.get(key)) if isinstance(v, str)]
        return out

    def _split_refs(self, opts: Mapping[str, Any], sources: Sequence[Data]) -> Dict[str, Any]:
        """Option name -> the index (or indices, for a list) of the source it names: the sources end
        with the referenced layers in the order of :meth:`outer_sources` (the network may pass
        ``from`` differently, so they are counted from the end)."""
        counts = [(key, [v for v in _as_list(opts.get(key)) if isinstance(v, str)]) for key in self.ref_options]
        i = len(sources) - sum(len(v) for _, v in counts)
        refs: Dict[str, Any] = {}
        for key, values in counts:
            refs[key] = list(range(i, i + len(values))) if isinstance(opts.get(key), (list, tuple)) else \
                (i if values else None)
            i += len(values)
        return refs


def _shape_dims(layer: Layer, shape: Any, last_is_feature: bool) -> List[Dim]:
    if not isinstance(shape, (list, tuple)):
        raise NetworkError("%s: 'shape' must be a list of Dims or ints, got %r" % (layer.desc, shape))
    dims = []
    for i, d in enumerate(shape):
        if isinstance(d, Dim):
            dims.append(d)
        elif isinstance(d, int) and not isinstance(d, bool) and d >= 0:
            kind = DimTypes.Feature if last_is_feature and i == len(shape) - 1 else DimTypes.Spatial
            dims.append(Dim(d, kind=kind, description="%s:dim%i" % (layer.layer_name, i)))
        else:
            raise NetworkError("%s: 'shape' entries must be Dims or ints >= 0, got %r" % (layer.desc, d))
    return dims


def _shape_value(layer: Layer, dims: Sequence[Dim], sources: Sequence[LayerOutput], ctx: RunContext) -> List[Any]:
    """The run-time shape: batch from the run, dynamic dims from the sources that have them."""
    out = []
    for d in dims:
        if d.is_batch_dim():
            if ctx.batch_size is None:
                raise NetworkError("%s: a batch axis needs the batch size (run it inside a network)" % layer.desc)
            out.append(ctx.batch_size)
        elif d.dimension is not None:
            out.append(d.dimension)
        else:
            for src in sources:
                if any(d == s for s in src.data.dims):
                    out.append(tf.shape(src.tensor)[[i for i, s in enumerate(src.data.dims) if s == d][0]])
                    break
            else:  # dim math of the sources' axes (e.g. time * 2): RETURNN's get_dim_value, the longest
                sizes = tf.convert_to_tensor(_math_sizes([d], sources)[d])
                out.append(tf.reduce_max(sizes) if sizes.shape.rank else sizes)
    return out


def _math_sizes(dims: Sequence[Dim], sources: Sequence[LayerOutput]) -> Dict[Dim, Any]:
    """Sizes of the dims of ``dims`` that no source has, computed by their dim math from the sources'."""
    from returnn.tensor.dim_math import dyn_size_of

    def sizes_of(x: Dim) -> Any:
        return next(src.sizes[s] for src in sources for s in src.data.dims if s == x and s in src.sizes)
    return {d: dyn_size_of(d, sizes_of) for d in dims if d.is_dynamic() and not d.is_batch_dim()
            and getattr(d, "derived_from_op", None) is not None
            and not any(d == s for src in sources for s in src.data.dims)}


def _check_dynamic(layer: Layer, dims: Sequence[Dim], sources: Sequence[Data], where: str) -> None:
    from returnn.tensor.dim_math import dynamic_leaves
    for d in dims:
        have = [s for src in sources for s in src.dims]
        leaves = dynamic_leaves(d) if getattr(d, "derived_from_op", None) is not None else [d]
        if d.is_dynamic() and not d.is_batch_dim() and not any(d == s for s in have) and \
                not (leaves and all(any(x == s for s in have) for x in leaves)):
            raise NetworkError("%s: the dynamic axis %r of 'shape' needs a layer that has it in %s (its sizes come from "
                               "there; a Dim holds no sizes here)" % (layer.desc, d.description, where))


def _seed_pair(value: Any) -> tf.Tensor:
    """A fixed (2,) int64 stateless seed from an option's seed value."""
    h = zlib.crc32(repr(value).encode("utf8"))
    return tf.constant([h, h ^ 0x5DEECE66], tf.int64)


@register_layer
class RandomLayer(RefsLayer):
    """See the module docstring."""

    layer_class = "random"
    stays_in_loop_with_end = True  # (RETURNN collocates it with a loop's "end" layer, else moves it out)
    ref_options = _DIST_REFS + ("explicit_state", "shape_deps")
    options = (
        Option("shape", None, "list of Dims or ints"),
        Option("distribution", None, "'uniform', 'normal' or 'truncated_normal'"),
        Option("mean", None, "number or scalar layer"),
        Option("stddev", None, "number or scalar layer"),
        Option("bound", None, "uniform in [-bound, bound) (number or scalar layer)"),
        Option("minval", None, "uniform: lower bound (number or scalar layer)"),
        Option("maxval", None, "uniform: upper bound, exclusive (number or scalar layer)"),
        Option("dtype", "float32", "dtype of the numbers"),
        Option("sparse_dim", None, "Dim: the output is sparse (class indices)"),
        Option("feature_dim", None, "Dim of the output's feature axis"),
        Option("seed", None, "int or list of ints: initial state / static key (default: the layer's seed)"),
        Option("algorithm", None, "random algorithm: Philox only here", only=ALGORITHMS),
        Option("explicit_state", None, "layer holding a Philox state (int64 (3,)): the numbers depend on it only"),
        Option("auto_update_state", None, "True: every draw advances the explicit state (a variable layer)",
               only=(None, False, True)),
        Option("static", None, "True: the same numbers in every step, from the seed only"),
        Option("shape_deps", (), "layers that have the dynamic axes of 'shape'"),
        Option("stop_grad", False, "no gradient to layer-valued distribution parameters"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42, **_outer: Any):
        super().__init__(name, opts, sources, seed)
        self.refs = self._split_refs(opts, sources)
        self.dist = one_of(self.desc, "distribution", self.opt("distribution"), ("uniform", "normal", "truncated_normal"))
        self.dims = _shape_dims(self, self.opt("shape"), False)
        loop_dims = [] if is_step_template(sources) else moved_out_loop_dims()
        self.loop_dim = loop_dims[0] if loop_dims and loop_dims[0] not in self.dims else None
        _check_dynamic(self, self.dims, sources, "'shape_deps'")
        if self.loop_dim is not None:  # moved out of a rec loop: a draw per frame (RETURNN's), loop axis first
            self.dims = [self.loop_dim] + self.dims
        for key in _DIST_REFS:
            value = self.opt(key)
            if isinstance(value, str) and sources[self.refs[key]].batch_ndim != 0:
                raise NetworkError("%s: %r must be a scalar layer, got %s" % (self.desc, key,
                                                                               sources[self.refs[key]].short_repr()))
            if value is not None and not isinstance(value, (str, int, float)):
                raise NetworkError("%s: %r must be a number or a layer name, got %r" % (self.desc, key, value))
        self._check_distribution()
        state = self.opt("explicit_state")
        self.static = bool(self.opt("static"))
        if state is not None:
            if not isinstance(state, str) or self.static or self.opt("seed") is not None:
                raise NetworkError("%s: explicit_state must name a layer, without static or seed" % self.desc)
            st = sources[self.refs["explicit_state"]]
            if st.dtype != "int64" or [d.dimension for d in st.dims] != [3]:
                raise NetworkError("%s: explicit_state must be a Philox state, int64 (3,), got %s"
                                   % (self.desc, st.short_repr()))
            self.state_var = _state_variable(self, state) if self.opt("auto_update_state") else None
        elif self.opt("auto_update_state") is (not self.static):
            raise NetworkError("%s: auto_update_state %s %s" % (self.desc, self.opt("auto_update_state"), (
                "and static True exclude each other" if self.static else
                "needs an explicit_state (without one and not static, the state always advances)")))
        elif not self.static:
            init_seed = self.opt("seed")
            if init_seed is None:
                init_seed = self._rng.randint(2 ** 31, size=[32]).astype(np.uint32)
            self.state_var = self.variable("random_generator/StateVar", _rng_state(init_seed), trainable=False)
        self.static_seed = _seed_pair(self.opt("seed") if self.opt("seed") is not None else
                                      (name, int(self._rng.randint(2 ** 31))))
        sparse_dim, feature_dim = self.opt("sparse_dim"), self.opt("feature_dim")
        feat_axis = None
        if feature_dim is not None:
            matches = [i for i, d in enumerate(self.dims) if d == feature_dim]
            if not matches:
                raise NetworkError("%s: feature_dim %r is not in 'shape'" % (self.desc, feature_dim))
            feat_axis = matches[0]
        self.output = Data(name, dims=self.dims, dtype=str(self.opt("dtype")), sparse_dim=sparse_dim,
                           **({"feature_dim_axis": feat_axis} if feat_axis is not None else {}))

    def _check_distribution(self) -> None:
        given = {k for k in _DIST_REFS if self.opt(k) is not None}
        if self.dist == "uniform":
            ok = given <= {"minval", "maxval"} and "maxval" in given if given & {"minval", "maxval"} else \
                (given == {"bound"} or (given and given <= {"mean", "stddev"} and "stddev" in given))
        elif self.dist == "normal":
            ok = given <= {"mean", "stddev"}
        else:
            ok = given <= {"mean", "stddev", "minval", "maxval"}
            for key, sign in (("minval", -1), ("maxval", 1)):
                if key in given:
                    mean, std = self.opt("mean") or 0, self.opt("stddev") if self.opt("stddev") is not None else 1
                    if not all(isinstance(v, (int, float)) for v in (self.opt(key), mean, std)) or \
                            not math.isclose(self.opt(key), mean + sign * 2 * std):
                        raise NetworkError("%s: truncated_normal supports only %s = mean %s 2 * stddev (RETURNN's)"
                                           % (self.desc, key, "-" if sign < 0 else "+"))
        if not ok:
            raise NetworkError("%s: distribution %r with %s is not valid (uniform: minval/maxval, bound, or mean/"
                               "stddev; normal: mean/stddev)" % (self.desc, self.dist, sorted(given) or "nothing"))

    def _param(self, key: str, sources: List[LayerOutput], default: Any) -> Any:
        value = self.opt(key)
        if value is None:
            return default
        if isinstance(value, str):
            t = tf.cast(sources[self.refs[key]].tensor, tf.as_dtype(self.output.dtype) if self.output.dtype.startswith(
                "float") else tf.float32)
            return tf.stop_gradient(t) if self.opt("stop_grad") else t
        return value

    def _seed(self, sources: List[LayerOutput], ctx: RunContext) -> tf.Tensor:
        if self.static:
            return self.static_seed
        st = tf.convert_to_tensor(self.state_var)
        return ctx.layer_seed(self.layer_name) + tf.stack([st[2], st[0]])

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        loop_sizes = {}
        if self.loop_dim is not None:  # the rec loop running it before the loop gives its axis' sizes
            dim, n_time, seq_len = getattr(ctx, "moved_out_time", None) or (None, None, None)
            if dim != self.loop_dim:
                raise NetworkError("%s: internal error: moved out of a loop over %r, run for %r"
                                   % (self.desc, self.loop_dim, dim))
            loop_sizes = {self.loop_dim: seq_len}
            shape = [n_time] + _shape_value(self, self.dims[1:], sources, ctx)
        else:
            shape = _shape_value(self, self.dims, sources, ctx)
        loop_sizes.update(_math_sizes(self.dims, sources))
        shape_t = tf.stack([tf.cast(s, tf.int32) for s in shape]) if shape else tf.constant([], tf.int32)
        dtype = tf.as_dtype(self.output.dtype)
        mean, std = self._param("mean", sources, 0.0), self._param("stddev", sources, 1.0)
        if self.opt("explicit_state") is not None:
            return self.make_output(self._from_state(sources, shape_t, dtype, mean, std), sources, loop_sizes)
        seed = self._seed(sources, ctx)
        if self.dist == "uniform":
            lo, hi = self._bounds(sources, mean, std)
            if dtype.is_integer:
                y = tf.random.stateless_uniform(shape_t, seed, minval=tf.cast(lo, dtype), maxval=tf.cast(hi, dtype),
                                                dtype=dtype)
            else:
                u = tf.random.stateless_uniform(shape_t, seed, dtype=dtype)
                y = tf.cast(lo, dtype) + u * (tf.cast(hi, dtype) - tf.cast(lo, dtype))
        elif self.dist == "normal":
            y = tf.cast(mean, dtype) + tf.cast(std, dtype) * tf.random.stateless_normal(shape_t, seed, dtype=dtype)
        else:
            y = tf.cast(mean, dtype) + tf.cast(std, dtype) * tf.random.stateless_truncated_normal(shape_t, seed,
                                                                                                 dtype=dtype)
        return self.make_output(y, sources, loop_sizes)

    def _from_state(self, sources: List[LayerOutput], shape_t: tf.Tensor, dtype: tf.DType, mean: Any, std: Any
                    ) -> tf.Tensor:
        """RETURNN's draw from its explicit state: TensorFlow's ``Generator`` on that state (read and
        advanced by the number of values when ``auto_update_state``)."""
        if self.state_var is not None:
            state = gen_stateful_random_ops.rng_read_and_skip(
                self.state_var.handle, alg=tf.constant(1, tf.int32), delta=tf.cast(tf.reduce_prod(shape_t), tf.uint64))
        else:
            state = tf.cast(sources[self.refs["explicit_state"]].tensor, tf.int64)
        key, counter = tf.bitcast(state[2:3], tf.uint64), tf.bitcast(state[:2], tf.uint64)
        kw = dict(shape=shape_t, key=key, counter=counter, alg=1)
        if self.dist == "uniform":
            lo, hi = self._bounds(sources, mean, std)
            lo, hi = tf.cast(lo, dtype), tf.cast(hi, dtype)
            if dtype.is_integer:
                return gen_stateless_random_ops_v2.stateless_random_uniform_int_v2(minval=lo, maxval=hi, **kw)
            return gen_stateless_random_ops_v2.stateless_random_uniform_v2(dtype=dtype, **kw) * (hi - lo) + lo
        op = gen_stateless_random_ops_v2.stateless_random_normal_v2 if self.dist == "normal" else \
            gen_stateless_random_ops_v2.stateless_truncated_normal_v2
        return op(dtype=dtype, **kw) * tf.cast(std, dtype) + tf.cast(mean, dtype)

    def _bounds(self, sources: List[LayerOutput], mean: Any, std: Any) -> Tuple[Any, Any]:
        """uniform's [lo, hi) from minval/maxval, bound or mean/stddev."""
        if self.opt("maxval") is not None:
            return self._param("minval", sources, 0), self._param("maxval", sources, None)
        if self.opt("bound") is not None:
            b = self._param("bound", sources, None)
            return -b, b
        half = math.sqrt(3.0) * std
        return mean - half, mean + half


def _state_variable(layer: Layer, name: str) -> tf.Variable:
    """The int64 variable of the ``variable`` layer ``name`` (RETURNN's ``auto_update_state``)."""
    get = reuse.outer_resolver()
    target = None
    if get is not None:
        try:
            target = get(name)
        except KeyError:
            pass
    var = getattr(target, "var", None) if getattr(target, "layer_class", None) == "variable" else None
    if not isinstance(var, tf.Variable) or target.output.batch_dim_axis is not None or \
            target.output.time_dim_axis is not None:
        raise NetworkError("%s: auto_update_state needs explicit_state to be a variable layer (int64 (3,)) that "
                           "it can advance, got %r" % (layer.desc, name))
    return var


@register_layer
class RandIntLayer(RefsLayer):
    """See the module docstring."""

    layer_class = "rand_int"
    stays_in_loop = True
    ref_options = ("minval", "maxval")
    options = (
        Option("shape", None, "list of Dims or ints (the last int axis is a feature axis)"),
        Option("maxval", None, "upper bound, exclusive (int or scalar layer)"),
        Option("minval", 0, "lower bound (int or scalar layer)"),
        Option("dtype", "int32", "dtype of the numbers"),
        Option("sparse_dim", None, "Dim: the output is sparse (class indices)"),
        Option("seed", None, "int: part of the stream's key"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42, **_outer: Any):
        super().__init__(name, opts, sources, seed)
        self.refs = self._split_refs(opts, sources)
        self.dims = _shape_dims(self, self.opt("shape"), True)
        _check_dynamic(self, self.dims, sources, "'from' (here: RETURNN's rand_int reads no sources)")
        for key in ("minval", "maxval"):
            value = self.opt(key)
            if isinstance(value, str):
                if sources[self.refs[key]].batch_ndim != 0:
                    raise NetworkError("%s: %r must be a scalar layer" % (self.desc, key))
            elif isinstance(value, bool) or not isinstance(value, (int, float)):
                raise NetworkError("%s: %r must be a number or a layer name, got %r" % (self.desc, key, value))
        self.key = _seed_pair((name, self.opt("seed")))
        self.output = Data(name, dims=self.dims, dtype=str(self.opt("dtype")), sparse_dim=self.opt("sparse_dim"))

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        shape = _shape_value(self, self.dims, sources, ctx)
        shape_t = tf.stack([tf.cast(s, tf.int32) for s in shape]) if shape else tf.constant([], tf.int32)
        dtype = tf.as_dtype(self.output.dtype)
        bounds = []
        for key in ("minval", "maxval"):
            value = self.opt(key)
            bounds.append(tf.cast(sources[self.refs[key]].tensor if isinstance(value, str) else value, dtype))
        seed = ctx.layer_seed(self.layer_name) + self.key
        if dtype.is_integer:
            y = tf.random.stateless_uniform(shape_t, seed, minval=bounds[0], maxval=bounds[1], dtype=dtype)
        else:
            y = bounds[0] + tf.random.stateless_uniform(shape_t, seed, dtype=dtype) * (bounds[1] - bounds[0])
        return self.make_output(y, sources)


@register_layer
class RandomStateInitLayer(Layer):
    """See the module docstring."""

    layer_class = "random_state_init"
    default_from = ()
    options = (
        Option("algorithm", None, "random algorithm: Philox only here", only=ALGORITHMS),
        Option("seed", None, "int or list of ints (default: from the layer's construction seed)"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        init = self.opt("seed")
        if init is None:
            init = self._rng.randint(2 ** 31, size=[3])
        self.state = _rng_state(init)
        out_dim = self.opts.get("out_dim")
        if out_dim is not None and (not isinstance(out_dim, Dim) or out_dim.dimension != 3):
            raise NetworkError("%s: out_dim must be a Dim of size 3 (the Philox state), got %r" % (self.desc, out_dim))
        dim = out_dim or Dim(3, kind=DimTypes.Feature, description="random_PHILOX_state")
        self.output = Data(name, dims=[dim], dtype="int64")

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        return self.make_output(tf.constant(self.state, tf.int64), sources)
