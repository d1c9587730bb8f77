"""Layer ``eval`` (and ``combine`` with ``kind: "eval"``): a config expression over the sources.

``{"class": "eval", "from": [...], "eval": "source(0) * 0.5 + source(1)"}``. The expression is
config code (trusted, like the config itself); it runs when the step is traced, with these names
(RETURNN's eval locals):

- ``source(i, auto_convert=True, enforce_batch_major=False, as_data=False, as_layer=False)``: the
  tensor of source ``i``; ``auto_convert`` lays it out like the output (axes moved, size-1 axes for
  the ones it lacks, so sources broadcast; a source with more axes than the output, or a batch axis
  the output lacks, is an error, as RETURNN's ``copy_compatible_to``); ``as_data`` gives a :class:`DataValue` (the template
  with ``placeholder`` and ``get_sequence_lengths()``); ``as_layer`` a :class:`SourceView`;
- ``self``: the layer (``self.network``, ``self.sources``, ``self.output``, ``self.name``); in a search
  in training ``self.sources[i].search_choices.beam_scores`` of a ``decide`` source (RETURNN sets
  ``search_choices`` only on the layers that choose) and ``get_search_choices()`` of any beamed one;
- ``tf`` (TensorFlow with its TF1 names, as config code sees it), the functions of TFUtil
  (returnn/tf/util/basic.py with eval_helpers.py: ``py_print``, ``where_bc``, ``safe_log``,
  ``softmax_cross_entropy_over_size``, ...), and ``eval_locals``; ``self.network.get_rec_step_index()``
  inside a rec loop. ``eval`` may also be a callable, called with these names as keyword arguments.

Every source must be used (as in RETURNN). The output template is the union of the sources' dims
(the source with most axes gives dtype and feature/sparse dim) unless ``out_type`` says otherwise:
a dict with ``dtype``, ``dim``, ``sparse``, ``dims``, or a callable returning a :class:`Data`.
"""
from __future__ import annotations

import types
from typing import Any, Callable, Dict, List, Optional, Sequence

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim
from returnn.tf.activations import get_activation
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.basic import CombineLayer
from returnn.tf.layers.beam_values import beam_of
from returnn.tf.layers.norm import behavior_version
from returnn.tf.layers.common_layout import (check_broadcast, check_stated_broadcast, common_dims, layer_layout,
                                            mapped_onto, returnn_common_order, unconvertible_sources)
from returnn.tf.layers.helpers import last_axis_bias, new_feature_dim
from returnn.tf.layers.options import Option
from returnn.tf.layers.output import align_tensor
from returnn.tf.layers.undefined_dims import fill_dynamic, leading_data


class DataValue:
    """A :class:`Data` template together with its tensor in this step (RETURNN's ``Data`` with a
    ``placeholder``); other attributes are those of the template."""

    def __init__(self, value: LayerOutput):
        self._value = value
        self.placeholder = value.tensor
        # the rest of RETURNN's Data API (returnn/tensor/data_compat.py), on the template with this value
        self._full = value.data.with_value(value.tensor, value.sizes)

    def __getattr__(self, item: str) -> Any:
        return getattr(self._full, item)

    @property
    def size_placeholder(self) -> Dict[int, tf.Tensor]:
        """Sizes per dynamic axis, counted without the batch axis (RETURNN's convention)."""
        data, out = self._value.data, {}
        for axis in data.get_dynamic_axes():
            sizes = self._value.size(axis)
            if sizes is not None:
                out[axis - (1 if data.batch_dim_axis is not None and axis > data.batch_dim_axis else 0)] = sizes
        return out

    def get_sequence_lengths(self) -> tf.Tensor:
        """Sizes of the time axis, shape ``(B,)``."""
        sizes = self._value.seq_len
        if sizes is None:
            raise ValueError("%s has no dynamic time axis" % self._value.data.short_repr())
        return sizes

    def get_sequence_mask_broadcast(self, axis: Any = None) -> tf.Tensor:
        """Bool mask of ``axis`` (default: time) broadcastable against :attr:`placeholder`."""
        return self._value.broadcast_mask(axis)

    def copy_as_batch_major(self) -> "DataValue":
        data = self._value.data
        if data.batch_dim_axis in (None, 0):
            return self
        perm = [data.batch_dim_axis] + [a for a in range(data.batch_ndim) if a != data.batch_dim_axis]
        return DataValue(self._value.copy_transpose(perm))

    def copy_as_batch_time_feature(self) -> "DataValue":
        return DataValue(self._value.copy_as_batch_time_feature())

    def __repr__(self) -> str:
        return "DataValue(%s)" % self._value.data.short_repr()


class SearchChoicesView:
    """RETURNN's ``SearchChoices`` of a search in training as eval code reads it: ``beam_size`` and
    ``beam_scores`` ``(B, beam_size)`` (the hypotheses' accumulated scores; after a ``decide`` the
    chosen one's, ``(B, 1)``)."""

    def __init__(self, beam: Any):
        self.beam_size = beam.k
        self.beam_scores = tf.reshape(beam.scores, [-1, beam.k])

    def __repr__(self) -> str:
        return "<search choices, beam %i>" % self.beam_size


class SourceView:
    """A source as eval code sees a layer: ``name``, ``output``, and RETURNN's ``search_choices``
    (set on a ``decide`` layer's own value only, as RETURNN sets it on the layers that choose; None
    elsewhere) and ``get_search_choices()`` (the beam any value of a search carries, else None)."""

    def __init__(self, name: str, output: Any, beam: Any = None):
        self.name = name
        self.output = output
        self._beam = beam
        self.search_choices = SearchChoicesView(beam) if beam is not None and beam.decided else None

    def get_search_choices(self) -> Optional[SearchChoicesView]:
        return SearchChoicesView(self._beam) if self._beam is not None else None

    def __repr__(self) -> str:
        return "<layer %r>" % self.name


class NetworkView:
    """What eval code reaches through ``self.network``: the config, the train flag and step."""

    def __init__(self, ctx: Optional[RunContext]):
        self._ctx = ctx

    @property
    def train_flag(self) -> tf.Tensor:
        return tf.constant(bool(self._ctx and self._ctx.train))

    @property
    def global_train_step(self) -> tf.Tensor:
        return self._ctx.global_step if self._ctx is not None else tf.constant(0, tf.int64)

    def get_global_train_step(self) -> tf.Tensor:
        return self.global_train_step

    def get_config(self):
        from returnn.config import get_global_config
        return get_global_config()

    @property
    def _config(self):
        """RETURNN's ``TFNetwork._config`` (the config), which eval strings read directly
        (``self.network._config.typed_dict[...]`` in the 2019 local-attention configs)."""
        return self.get_config()

    def cond_on_train(self, fn_train: Callable[[], Any], fn_eval: Callable[[], Any]) -> Any:
        """``fn_train()`` in training steps, else ``fn_eval()`` (the flag is known when tracing)."""
        return fn_train() if self._ctx is not None and self._ctx.train else fn_eval()

    def is_inside_rec_layer(self, inside_loop: bool = True) -> bool:
        return self._ctx is not None and self._ctx.step is not None

    def get_rec_step_index(self) -> tf.Tensor:
        """The step of the rec loop the layer is in (RETURNN's ``:i``)."""
        if self._ctx is None or self._ctx.step is None:
            raise NetworkError("self.network.get_rec_step_index(): the layer is not inside a rec loop")
        return self._ctx.step


class _EvalSelf:
    """``self`` in eval code."""

    def __init__(self, layer: "EvalLayer", sources: List[SourceView], ctx: Optional[RunContext]):
        self.name = layer.layer_name
        self.network = NetworkView(ctx)
        self.sources = sources
        self.output = layer.output

    def __repr__(self) -> str:
        return "<layer %r (eval)>" % self.name


def tf_util_names() -> Dict[str, Any]:
    """The public functions of TFUtil, as RETURNN puts them into eval's names, with the modules that
    RETURNN's TFUtil imports at its top (eval strings use ``tf_compat.v1``, ``numpy``, ``os``)."""
    import contextlib
    import os
    import sys
    import typing

    import numpy

    from returnn.tf import compat as tf_compat
    from returnn.tf.util import basic as tf_util
    names: Dict[str, Any] = {"tf_compat": tf_compat, "numpy": numpy, "os": os, "sys": sys, "contextlib": contextlib,
                             "typing": typing}
    names.update((k, v) for k, v in vars(tf_util).items() if not k.startswith("_"))
    return names


@register_layer
class EvalLayer(Layer):
    """See the module docstring."""

    layer_class = "eval"
    keeps_source_data_name = True  # RETURNN's get_common_data of one source
    options = (
        Option("eval", None, "expression (config code) over source(i), or a callable"),
        Option("eval_locals", None, "extra names for the expression"),
        Option("kind", "eval", "'eval' (for combine with kind eval; RETURNN's eval takes no other kind)", only=("eval",)),
        Option("out_type", None, "output template: dict (dtype, dim, sparse, dims) or callable returning Data"),
        Option("activation", None, "activation applied to the result"),
        Option("with_bias", False, "add a trainable bias on the feature axis"),
        Option("allow_broadcast_all_sources", None, "True: sources may all need broadcasting; False: refused; None: "
                                                    "refused from behavior_version 4 unless out_shape (RETURNN's)"),
        Option("eval_for_output_loss", False, "RETURNN's option; only False is supported"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        if opts.get("class") == "eval" and "kind" in opts:  # RETURNN's EvalLayer passes kind="eval" to CombineLayer
            raise NetworkError("%s: takes no 'kind' (RETURNN: 'got multiple values for keyword argument kind'; "
                               "a combine with kind 'eval' is the eval layer)" % self.desc)
        expr = self.opt("eval")
        if isinstance(expr, str):
            try:
                self.code: Any = compile(expr, "<layer %r eval>" % name, "eval")
            except SyntaxError as exc:
                raise NetworkError("%s: option 'eval': syntax error: %s" % (self.desc, exc.msg)) from None
        elif callable(expr):
            self.code = expr
        else:
            raise NetworkError("%s: option 'eval' must be a string or a callable, got %r" % (self.desc, expr))
        if self.opt("eval_for_output_loss"):
            raise NetworkError("%s: option 'eval_for_output_loss' is not supported" % self.desc)
        locals_ = self.opt("eval_locals") or {}
        if not isinstance(locals_, dict):
            raise NetworkError("%s: option 'eval_locals' must be a dict" % self.desc)
        self.eval_locals = dict(locals_)
        # auto_convert layout: the union of the sources' dims, the source with most axes first
        base = max(sources, key=lambda s: s.batch_ndim) if sources else None
        layout, maps = common_dims(([base.dims] if base else []) + [s.dims for s in sources])
        self.theirs: Optional[Data] = None  # RETURNN's template where it lays the sources out otherwise
        if base is not None:  # new axes where RETURNN's get_common_data puts them, its Dims (or its template)
            layout, maps = returnn_common_order(base, layout, maps)
            layout, own, self.theirs = layer_layout(self, sources, layout, maps[1:], strict=False)
            maps = maps[:1] + own
        # sources RETURNN's source(i) cannot bring into its template (it fails where the code reads one)
        self.unconvertible: Dict[int, str] = (unconvertible_sources(self, sources) if base is not None
                                              and self.theirs is None and self.opt("out_type") is None else {})
        out_type = self.opt("out_type")
        if isinstance(out_type, dict) and {"dims", "dim_tags", "shape"} & set(out_type):
            check_stated_broadcast(self, sources, layout)
        elif not callable(out_type):
            check_broadcast(self, [s.dims for s in sources], layout, maps[1:])
        self.layout, self.maps, self.n = layout, maps[1:], len(layout)
        self.output, self.same_layout = self._output_template(name, list(sources), base, layout, maps[:1])
        if isinstance(out_type, dict) and {"dims", "dim_tags", "shape"} & set(out_type):
            # RETURNN's source(i) is the source made compatible with the output template (copy_compatible_to): its
            # axes where that puts them, size-1 axes for the others (e.g. (B,) -> (B, 1) for a (B, F) out)
            self.maps, self.n, self.unconvertible = mapped_onto(self, sources, self.output)
        self.activation = get_activation(self.opt("activation"), name)
        self.bias = last_axis_bias(self, self.output) if self.opt("with_bias") else None

    def _output_template(self, name: str, sources: List[Data], base: Optional[Data], layout: List[Dim],
                         base_map: List[List[int]]):
        """The output template, and whether its axes are those of the layout."""
        out_type = self.opt("out_type")
        if callable(out_type):
            views = [SourceView(s.name, s) for s in sources]
            try:
                out = out_type(sources=views, name=name, network=NetworkView(None), **self.eval_locals)
            except Exception as exc:  # noqa: BLE001  (config code)
                raise NetworkError("%s: option 'out_type' failed: %s: %s" % (self.desc, type(exc).__name__, exc)) \
                    from None
            if not isinstance(out, Data):
                raise NetworkError("%s: option 'out_type' must return a Data, got %r" % (self.desc, out))
            return out.copy(name), False
        if self.theirs is not None:  # RETURNN's template (it lays the sources out otherwise)
            out = Data(name, dims=layout, dtype=base.dtype, sparse_dim=base.sparse_dim,
                       time_dim_axis=self.theirs._time_dim_axis, feature_dim_axis=self.theirs._feature_dim_axis)
        elif base is not None:
            m = base_map[0]
            out = Data(name, dims=layout, dtype=base.dtype, sparse_dim=base.sparse_dim,
                       time_dim_axis=None if base.time_dim_axis is None else m[base.time_dim_axis],
                       feature_dim_axis=None if base.feature_dim_axis is None else m[base.feature_dim_axis])
        else:
            out = Data(name, dims=(), dtype="float32")
        if out_type is None:
            return out, True
        if not isinstance(out_type, dict):
            raise NetworkError("%s: option 'out_type' must be a dict or a callable, got %r" % (self.desc, out_type))
        out = self._apply_out_type(out, out_type)
        return out, out.batch_ndim == self.n and not ({"dims", "dim_tags", "shape"} & set(out_type))

    def _apply_out_type(self, out: Data, out_type: Dict[str, Any]) -> Data:
        unknown = sorted(set(out_type) - {"dtype", "dim", "sparse", "dims", "dim_tags", "shape",
                                          "batch_dim_axis", "time_dim_axis", "feature_dim_axis"})
        if unknown:
            raise NetworkError("%s: option 'out_type': unsupported keys %s" % (self.desc, unknown))
        if out_type.get("sparse") and "dim" not in out_type and self.opts.get("n_out") is None and \
                behavior_version() >= 1:
            # RETURNN's CombineLayer drops the sources' sparse dim for an out_type with 'sparse' and makes
            # Data(sparse=True) without a dim: 'need dim (num classes) if sparse'. The RETURNN of 2021 built it
            # (merboldt's published transducer configs, no behavior_version: position 't'), which configs
            # without a behavior_version keep (indices of unknown range, below)
            raise NetworkError("%s: option 'out_type': 'sparse' needs 'dim' (None: indices of unknown range) or "
                               "n_out, as RETURNN ('need dim (num classes) if sparse')" % self.desc)
        if "dims" in out_type or "dim_tags" in out_type or "shape" in out_type:
            kwargs = {k: v for k, v in out_type.items() if k != "dims"}
            try:
                new = Data(self.layer_name, dims=out_type.get("dims"), **kwargs)
            except (TypeError, ValueError) as exc:
                raise NetworkError("%s: option 'out_type': %s" % (self.desc, exc)) from None
            if "shape" in out_type and "dims" not in out_type and "dim_tags" not in out_type:
                new = _dims_from_sources(new, out, [d.dims for d in leading_data(self.layer_name)],
                                         [s.dims for s in self.sources])
            return new
        sparse = bool(out_type.get("sparse", out.sparse))
        dim = out_type.get("dim", out.dim if sparse == out.sparse else None)
        dtype = out_type.get("dtype", out.dtype if sparse == out.sparse else None)
        if sparse:  # 'dim' None: indices of unknown range (RETURNN: a sparse dim of size None)
            sparse_dim = out.sparse_dim if out.sparse and dim == out.dim else new_feature_dim(self.layer_name, dim)
            return out.copy(sparse_dim=sparse_dim, dtype=dtype or "int32", feature_dim_axis=None)
        if out.sparse:
            # sparse -> dense: with 'dim', the values get a new feature axis (e.g. tf.one_hot)
            out = out.copy(sparse_dim=None, dtype=dtype or "float32")
            if dim is not None:
                return out.copy_insert_dim(new_feature_dim(self.layer_name, dim), out.batch_ndim) \
                    .copy_with_feature_axis_at(out.batch_ndim)
        if dim is not None and dim != out.dim:
            axis = out.feature_dim_axis
            if axis is None:
                raise NetworkError("%s: option 'out_type': dim %r given, but the output has no feature axis"
                                   % (self.desc, dim))
            out = out.copy_template_replace_dim_tag(axis, new_feature_dim(self.layer_name, dim))
        return out.copy(dtype=dtype or out.dtype)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        beams = [beam_of(s) for s in sources]
        sources = [self.apply_dropout(s, ctx, i) for i, s in enumerate(sources)]
        used: set = set()
        views = [SourceView(self.opts_source_name(i), DataValue(s), beams[i]) for i, s in enumerate(sources)]

        def source(i: int, auto_convert: bool = True, enforce_batch_major: bool = False, as_data: bool = False,
                   as_layer: bool = False) -> Any:
            if not 0 <= i < len(sources):
                raise IndexError("source(%i): the layer has %i source(s)" % (i, len(sources)))
            used.add(i)
            if as_layer:
                return views[i]
            value = sources[i]
            if auto_convert:
                self._check_convertible(i, value.data)
                value = self._converted(i, value)
            if enforce_batch_major and value.data.batch_dim_axis not in (None, 0):
                value = DataValue(value).copy_as_batch_major()._value
            return DataValue(value) if as_data else value.tensor

        names: Dict[str, Any] = {}
        is_code = isinstance(self.code, types.CodeType)
        if is_code:
            from returnn.tf.compat import tf_with_v1_names
            names.update(tf_util_names())
            names["tf"] = tf_with_v1_names()
        names.update({"source": source, "self": _EvalSelf(self, views, ctx)})
        names.update(self.eval_locals)
        try:
            if is_code:
                from returnn.config_env import config_builtins
                names["__builtins__"] = config_builtins()
                result = eval(self.code, names)  # noqa: S307  (config code: trusted by design)
            else:
                result = self.code(**names)
            result = tf.convert_to_tensor(result)
        except NetworkError:
            raise
        except Exception as exc:  # noqa: BLE001  (config code; one line naming the layer)
            raise NetworkError("%s: eval failed: %s: %s" % (self.desc, type(exc).__name__, _first_line(exc))) \
                from None
        unused = sorted(set(range(len(sources))) - used)
        if unused:
            raise NetworkError("%s: eval does not use source(s) %s (from %s)"
                               % (self.desc, unused, [self.opts_source_name(i) for i in unused]))
        return self._finish(result, sources, ctx)

    def opts_source_name(self, i: int) -> str:
        return self.sources[i].name if i < len(self.sources) else str(i)

    def _check_convertible(self, i: int, src: Data) -> None:
        """RETURNN's ``source(i)`` makes the source compatible with the output (``copy_compatible_to``),
        which fails when the source has a batch axis and the output none, or more axes than the output, or where
        RETURNN's template (its get_common_data) differs from this engine's layout and takes no such source."""
        out = self.output
        why = None
        if src.batch_dim_axis is not None and out.batch_dim_axis is None:
            why = "has a batch axis, the output %s has none" % out.short_repr()
        elif src.batch_ndim > out.batch_ndim:
            why = "has more axes than the output %s" % out.short_repr()
        if why:
            raise NetworkError("%s: source(%i) %s %s (RETURNN's auto_convert fails too; source(%i, "
                               "auto_convert=False) gives it unchanged)" % (self.desc, i, src.short_repr(), why, i))
        if i in self.unconvertible:
            raise NetworkError("%s (read by source(%i) with auto_convert; source(%i, auto_convert=False) gives it "
                               "unchanged)" % (self.unconvertible[i], i, i))

    def _converted(self, i: int, value: LayerOutput) -> LayerOutput:
        """Source ``i`` in the layout: its axes at their layout positions, size-1 axes for the
        layout axes it lacks (so sources broadcast against each other)."""
        if self.maps[i] == list(range(self.n)):
            return value
        tensor = align_tensor(value.tensor, self.maps[i], self.n)
        dims = [Dim(1, description="%s:broadcast" % self.layer_name) for _ in range(self.n)]
        for axis, pos in enumerate(self.maps[i]):
            dims[pos] = value.data.dims[axis]
        src = value.data
        data = Data(src.name, dims=dims, dtype=src.dtype, sparse_dim=src.sparse_dim,
                    time_dim_axis=None if src.time_dim_axis is None else self.maps[i][src.time_dim_axis],
                    feature_dim_axis=None if src.feature_dim_axis is None else self.maps[i][src.feature_dim_axis])
        return LayerOutput(tensor, data, value.sizes, None)

    def _finish(self, result: tf.Tensor, sources: List[LayerOutput], ctx: Optional[RunContext] = None) -> LayerOutput:
        want = self.output.batch_ndim
        if result.shape.rank is not None and result.shape.rank != want:
            raise NetworkError("%s: eval returned a tensor of rank %i, the output %s has rank %i (set 'out_type')"
                               % (self.desc, result.shape.rank, self.output.short_repr(), want))
        if result.shape.rank is not None:  # RETURNN's raw_tensor setter: a static axis must have its size
            for pos, (dim, size) in enumerate(zip(self.output.dims, result.shape.as_list())):
                if size is not None and not dim.is_batch_dim() and dim.dimension is not None and size != dim.dimension:
                    raise NetworkError("%s: eval returned shape %s, the output %s has size %i at axis %i (RETURNN: "
                                       "'Mismatching shape'; set 'out_type')" % (
                                           self.desc, result.shape.as_list(), self.output.short_repr(),
                                           dim.dimension, pos))
        b = self.output.batch_dim_axis
        real_batch = tf.get_static_value(ctx.batch_size) if ctx is not None and ctx.batch_size is not None else None
        if b is not None and result.shape.rank is not None and result.shape[b] == 1 and real_batch != 1 and \
                sources and not any(s.data.batch_dim_axis is not None for s in sources):
            # no source has a batch axis: source(i) gives size 1 there, and RETURNN keeps that as a batch of 1
            raise NetworkError("%s: eval returned shape %s, size 1 at the batch axis of the output %s, as no source "
                               "has a batch axis (RETURNN would go on with a batch of 1): broadcast it in the eval "
                               "or declare no batch axis in 'out_type'" % (
                                   self.desc, result.shape.as_list(), self.output.short_repr()))
        if self.same_layout and sources:
            result = _broadcast_to_layout(result, sources, self.maps)
        if result.dtype.name != self.output.dtype:
            result = tf.cast(result, self.output.dtype)
        if self.bias is not None:
            result = result + self.bias
        # lengths the eval code gave a dim of its out_type (RETURNN's self.output.set_dynamic_size / size_placeholder)
        made = self.output.__dict__.pop("_dyn_sizes", None) or None
        return self.make_output(self.activation(result), sources, sizes=made)


def _broadcast_to_layout(result: tf.Tensor, sources: List[LayerOutput], maps: List[List[int]]) -> tf.Tensor:
    """Axes of static size 1 in the result (e.g. an expression over a source that lacks an axis)
    broadcast to the layout's size there, taken from a source that has that axis."""
    target, changed = [], False
    for pos, static in enumerate(result.shape.as_list()):
        size = None
        if static == 1:
            for s, m in zip(sources, maps):
                if pos in m and s.tensor.shape[m.index(pos)] != 1:
                    size, changed = tf.shape(s.tensor)[m.index(pos)], True
                    break
        target.append(size if size is not None else tf.shape(result)[pos])
    return tf.broadcast_to(result, tf.stack(target)) if changed else result


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else repr(exc)


def _select_combine_class(opts: Dict[str, Any]) -> Optional[type]:
    """``combine`` with ``kind: "eval"`` is the eval layer."""
    return EvalLayer if opts.get("kind") == "eval" else None


CombineLayer.class_selector = staticmethod(_select_combine_class)


def _dims_from_sources(new: Data, computed: Data, lead: List[Sequence[Dim]], sources: List[Sequence[Dim]]) -> Data:
    """An old-style ``out_type`` shape creates fresh dims; like RETURNN, its dynamic axes take the
    dims of ``lead`` (the ``size_target`` / ``target`` data, see :mod:`.undefined_dims`), then of
    the sources, in order; without ``lead``, when all sizes agree with the computed layout, its axes
    are kept."""
    def pattern(dims: Sequence[Dim]) -> List[Any]:
        return [None if (d.is_dynamic() and not d.is_batch_dim()) else ("B" if d.is_batch_dim() else d.dimension)
                for d in dims]
    same = pattern(new.dims) == pattern(computed.dims)
    if same and not lead:
        return computed.copy(new.name, dtype=new.dtype, sparse_dim=new.sparse_dim)
    positions = [i for i, d in enumerate(new.dims) if d.is_dynamic() and not d.is_batch_dim()]
    if same:  # the computed static axes, the dynamic ones filled afresh
        new = new.copy(dims=[new.dims[i] if i in positions else d for i, d in enumerate(computed.dims)])
    return fill_dynamic(new, positions, list(lead) + list(sources))
