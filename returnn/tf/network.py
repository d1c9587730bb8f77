"""Builds a network from RETURNN's layer dict.

``network = {name: {"class": ..., "from": ..., ...}}``. ``"from"`` is a name or a list, default
``"data"``; ``"data:KEY"`` selects a data key. Layers are ordered by their dependencies; unknown
sources and cycles are errors naming the layer. Variables are created here, eagerly.
"""
from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.extern_data import ExternData, batch_array_axes, check_batch_deliverable, size_key  # noqa: F401
from returnn.tensor import Data
from returnn.tensor.dim import building_network
from returnn.tf.layers import param_noise, reuse, undefined_dims
from returnn.tf.layers.base import Layer, RunContext, get_layer_class
from returnn.tf.layers.norm import behavior_version
from returnn.tf.layers.output import LayerOutput
from returnn.tf.config_loss import config_loss_class, expected_dim
from returnn.tf.losses import Loss, LossValues, get_loss_class
from returnn.tf.net_dict import has_axis_pairs, needed_layers
from returnn.tf.layers.beam_values import tile_like
from returnn.tf.extra_nets import (EXTRA_OF, ParamsByScope, expand_extra_nets, search_train_roots, shared_param_opts,
                                    sharing_layers)
from returnn.tf.layers.params import is_own_name_scope, layer_scope
from returnn.tf.net_dict import EVAL_NET, EXTRA_NET_OPTIONS, SEARCH, SEARCH_TASK, TRAIN_NET
from returnn.tf.layers.rec_net import layer_targets
from returnn.tf.returnn_params import check_rec_params_in_root_scope
from returnn.tf.target_names import build_with_n_out, check_size_target_keys, check_target_keys, infer_target, \
    layer_named_targets, layer_target_keys, reads_size_target
from returnn.tf.net_sources import base_layer_name, check_from_given, check_initial_output_refs, layer_sources, \
    parse_source, topological_order  # noqa: F401
from returnn.tf.preload import load_on_init_entries
from returnn.tf.subnetwork import expand_subnetworks, map_layer_refs


def extern_value(data: Data, tensor: tf.Tensor, sizes: Mapping[int, tf.Tensor]) -> LayerOutput:
    """A padded batch array of ``data`` (axes as :func:`returnn.extern_data.batch_array_axes` lists
    them: ``(B, T, ...)``; data without a time axis come as ``(B, 1, ...)``) as a value in the layout
    ``data`` declares; ``sizes``: {axis of data: (B,) sizes} of its dynamic axes."""
    order = batch_array_axes(data)
    if data.have_batch_axis() and order[1] is None:  # no frame axis: drop the length-1 axis
        tensor, order = tensor[:, 0], [order[0]] + order[2:]
    perm = [order.index(i) for i in range(data.batch_ndim)]
    if perm != sorted(perm):
        tensor = tf.transpose(tensor, perm)
    return LayerOutput(tensor, data, {data.dims[axis]: size for axis, size in sizes.items()})


@dataclass
class LossInfo:
    """A layer's loss: the loss object, its target data key and scale."""

    layer: str
    loss: Loss
    target: Optional[str]  # None for losses without target (as_is)
    scale: float
    only_on_eval: bool = False  # RETURNN's only_on_eval: computed in evaluation, not in training steps


# Layer classes that compute each frame on its own (RETURNN's non-"recurrent" layers). A network of
# only these gets RETURNN's packed-frames batching; any other layer keeps whole sequences per row.
FRAME_WISE_LAYERS = frozenset({"linear", "softmax", "copy", "dropout", "activation", "combine", "source", "layer_norm"})


class CannotHandleUndefinedSourcesException(NetworkError):
    """RETURNN's: a config layer class raises it in ``get_out_data_from_opts`` when all its sources are
    ``undefined``; here no source is (templates are built from known ones), so it ends the build as an error."""

    def __init__(self, layer_name: str, layer_desc: Any = None, extended_info_str: str = ""):
        super().__init__("layer %r cannot handle undefined sources %s" % (layer_name, extended_info_str))
        self.layer_name, self.layer_desc = layer_name, layer_desc


class TFNetwork(tf.Module):
    """The layers of a net dict, built in dependency order, plus their losses."""

    def __init__(self, net_dict: Dict[str, Dict[str, Any]], extern_data: Dict[str, Data], seed: int = 42,
                 default_target: str = "classes", search: bool = False, eval_flag: bool = True,
                 extra_roots: Sequence[str] = (), train_flag: bool = True, search_train_layers: Sequence[str] = ()):
        super().__init__(name="network")
        # what the rec layers of this network do in search (net_dict.py): lose their units' losses (search task),
        # search as long as their target (training)
        eval_flag = bool(eval_flag) or bool(train_flag)  # (RETURNN: a training network evaluates)
        tokens = SEARCH_TASK.set(bool(search)), TRAIN_NET.set(bool(train_flag)), EVAL_NET.set(eval_flag)
        try:
            with building_network():
                self._build(net_dict, extern_data, seed, default_target, search, eval_flag, extra_roots, train_flag,
                            search_train_layers)
        finally:
            SEARCH_TASK.reset(tokens[0])
            TRAIN_NET.reset(tokens[1])
            EVAL_NET.reset(tokens[2])

    def _build(self, net_dict: Dict[str, Dict[str, Any]], extern_data: Dict[str, Data], seed: int,
               default_target: str, search: bool, eval_flag: bool, extra_roots: Sequence[str], train_flag: bool,
               search_train_layers: Sequence[str]) -> None:
        # RETURNN's flags: eval_flag (tasks but forward), train_flag (not False: a training network)
        self.eval_flag, self.train_flag = eval_flag, train_flag
        self.default_target = default_target  # the config's 'target': loss target of layers without one
        if not isinstance(net_dict, dict) or not net_dict:
            raise NetworkError("config key 'network': expected a non-empty dict of layers")
        # subnetworks' load_on_init: (parameter scope, value), applied where parameters are initialised
        self.load_on_init = types.MappingProxyType(dict(load_on_init_entries(  # (not tf.Module-tracked)
            {k: v for k, v in net_dict.items() if not k.startswith("extra.")})))
        net_dict = expand_subnetworks(net_dict)
        for name, opts in net_dict.items():
            if not isinstance(opts, dict) or "class" not in opts:
                raise NetworkError("layer %r: expected a dict with 'class'" % name)
        net_dict = layer_named_targets(net_dict)  # RETURNN tries a target as a layer first (target_names.py)
        # RETURNN's search_train_network_layers: built again for search, with all they read (in training only)
        searched = search_train_roots(net_dict, search_train_layers if train_flag else ())
        net_dict = expand_extra_nets(net_dict, lambda n, o: layer_sources(n, o, default_target, search),
                                     map_layer_refs, searched)
        extra_roots = list(extra_roots) + searched
        extern = dict(extern_data)  # plus the keys layers register, below
        self.extern_data = types.MappingProxyType(extern)  # read-only view, not tf.Module-tracked
        # data keys registered by layers ("register_as_extern_data"): key -> layer name
        self.data_layers: Dict[str, str] = {
            opts["register_as_extern_data"]: name for name, opts in net_dict.items()
            if isinstance(opts.get("register_as_extern_data"), str)}
        for opts in net_dict.values():  # RETURNN's "target": "layer:NAME": the output of layer NAME
            for t in layer_target_keys(opts, default_target):
                if t.startswith("layer:") and t[len("layer:"):] in net_dict:
                    self.data_layers[t] = t[len("layer:"):]
        check_target_keys(net_dict, list(extern) + list(self.data_layers), search)
        check_size_target_keys(net_dict, list(extern) + list(self.data_layers), search, eval_flag)
        if behavior_version() >= 1:
            check_initial_output_refs(net_dict, list(extern) + list(self.data_layers))
        self.net_dict = types.MappingProxyType(net_dict)  # not tf.Module-tracked: errors show the user's dicts
        self.search = search  # built for beam search: rec sub-networks choose their labels
        self.raw_sources = {name: layer_sources(name, opts, default_target, self.search_of(name))
                            for name, opts in net_dict.items()}
        self.sources: Dict[str, List[str]] = {
            name: [self._registered(s) for s in srcs] for name, srcs in self.raw_sources.items()}
        deps = {name: list(srcs) for name, srcs in self.sources.items()}
        # RETURNN's extra_deps (copy, dropout): layers built and run with this one, their values unused
        self.extra_deps: Dict[str, List[str]] = {
            name: [opts["extra_deps"]] if isinstance(opts["extra_deps"], str) else list(opts["extra_deps"])
            for name, opts in net_dict.items() if opts.get("extra_deps")}
        for name, opts in net_dict.items():  # a registered target key: that layer's template is built first
            deps[name] += [self.data_layers[t] for t in layer_target_keys(opts, default_target) if t in self.data_layers]
            deps[name] += self.extra_deps.get(name, [])
            for ref in reuse.referenced_layers(opts.get("reuse_params")):  # layers whose parameters it shares
                if base_layer_name(ref, net_dict) in net_dict:  # (RETURNN: an unknown one fails when a parameter
                    deps[name].append(ref)                    # asks for it; a layer without any never does)
        # RETURNN's rule: only output, loss, is_output_layer and data-registering layers and what they need
        self.needed = needed_layers(net_dict, lambda n: self._layer_refs(deps[n], net_dict), search=search,
                                    extra_roots=extra_roots)
        deps = {name: deps[name] for name in self.needed}
        self.order = topological_order(deps, set(self.extern_data) | set(self.data_layers), net_dict)
        # extra nets (extra.NAME:x): x there and here share their parameters by name, made by whichever comes first
        self._params_by_scope = ParamsByScope()
        sharing = set(sharing_layers(net_dict, self.needed))
        self.layers: Dict[str, Layer] = {}
        self.losses: List[LossInfo] = []
        for name in self.order:
            opts = dict(net_dict[name])
            srcs = self.sources[name]
            cls = get_layer_class(opts["class"], name, opts)
            check_from_given(name, opts)
            layer_search = self.search_of(name)
            if name in sharing:
                main = opts.get(EXTRA_OF, name)
                main_scope = opts.get("name_scope", (net_dict.get(main) or {}).get("name_scope"))
                scope = layer_scope(main, main_scope)[0]
                opts = shared_param_opts(opts, scope, self._params_by_scope, own_scope=is_own_name_scope(main_scope))
            # "from" stays with the layer only when it holds (layer, axis) pairs: the layer reads the axes
            layer_opts = {k: v for k, v in opts.items()
                          if (k != "from" or has_axis_pairs(v)) and k not in EXTRA_NET_OPTIONS}
            n_out_fallback = self._infer_n_out(name, layer_opts)
            templates = [self.template_of(s) for s in srcs]
            with reuse.resolving(self._built_layer, self.sources), undefined_dims.leading(name, self._leading_data(name, opts, templates)):
                if hasattr(cls, "outer_sources"):  # it reads its own 'from' (to tell it from the rest)
                    layer = build_with_n_out(lambda o: cls(
                        name, dict(o, **{"from": opts.get("from", ["data"])}), templates, seed=seed,
                        outer_names=self.raw_sources[name], default_target=default_target,
                        infer_n_out=self._infer_n_out, target_template=self._target_template, search=layer_search),
                        layer_opts, n_out_fallback)
                else:
                    layer = build_with_n_out(lambda o: cls(name, o, templates, seed=seed), layer_opts, n_out_fallback)
            self.layers[name] = layer
            layer.source_data_names = [self._data_name(s) for s in srcs]
            if hasattr(layer, "keep_beams"):  # a search outside the search task gives all hypotheses (beam_values.py)
                layer.keep_beams = not search
            if search and opts.get("class") == "decide" and opts.get("length_normalization"):
                for src in srcs:  # the search task's rec layer picks its best as that decide would (RETURNN's)
                    if hasattr(self.layers.get(src), "decide_length_norm"):
                        self.layers[src].decide_length_norm = True
            if isinstance(opts.get("register_as_extern_data"), str):
                extern.setdefault(opts["register_as_extern_data"], layer.output)
            if "layer:" + name in self.data_layers:
                extern.setdefault("layer:" + name, layer.output)
            self._add_loss(name, opts)
            subs = layer.sub_layer_dicts() if hasattr(layer, "sub_layer_dicts") else {}
            for sub, sub_opts in subs.items():
                _check_loop_loss_batch(name, sub, sub_opts, layer, self.eval_flag)
                key = layer_targets.network_target_key(name, sub_opts)
                if key and sub_opts.get("loss") and not self.search:  # "layer:X" of the unit: REC/X (layer_targets.py)
                    self.data_layers[key] = key[len("layer:"):]
                    extern.setdefault(key, layer.sub_template(layer_targets.unit_target(sub_opts)))
                    sub_opts = dict(sub_opts, target=key)
                self._add_loss("%s/%s" % (name, sub), sub_opts, top=False)
        self.output_layer_name = self._find_output_layer()
        check_rec_params_in_root_scope(self)

    def _data_name(self, source: str) -> Optional[str]:
        """The name of RETURNN's output data of ``source`` (a built layer's, or the data key), None if unknown."""
        if source in self.layers:
            return self.layers[source].returnn_data_name()
        key = source.split(":", 1)[-1]
        return key if key in self.extern_data else None

    def search_of(self, name: str) -> bool:
        """Whether layer ``name`` is built for search: the network's flag, or its extra net's."""
        opts = self.net_dict.get(name) if hasattr(self, "net_dict") else None
        return bool(opts.get(SEARCH, self.search)) if isinstance(opts, Mapping) else self.search

    def _built_layer(self, name: str) -> Layer:
        """A layer built before (``reuse_params`` of the one being built names it; ``rec/sub`` a
        rec unit's sub-layer); KeyError if none."""
        if name not in self.layers and "/" in name:
            rec, sub = name.split("/", 1)
            return getattr(self.layers[rec], "sub_layers", dict)()[sub]
        return self.layers[name]

    @staticmethod
    def _layer_refs(sources: List[str], net_dict: Mapping[str, Any]) -> List[str]:
        """The layer names among ``from``-style ``sources`` (``"rec/sub"`` as ``"rec"``)."""
        return [base_layer_name(ref, net_dict) for kind, ref in map(parse_source, sources) if kind == "layer"]

    def _registered(self, src: str) -> str:
        """``data:KEY`` of a key registered by a layer -> that layer's name."""
        kind, ref = parse_source(src)
        return self.data_layers[ref] if kind == "data" and ref in self.data_layers else src

    def _add_loss(self, name: str, opts: Dict[str, Any], top: bool = True) -> None:
        # RETURNN (LayerBase.transform_config_dict) asserts that a layer without a loss sets neither option
        # (checked for the layers of the net: a rec unit's sub-layer may be one RETURNN never builds); until
        # October 2018 it had no such check and they did nothing, which configs without a behavior_version
        # (RETURNN's published 2018 setups: a rec decoder's loss_scale) keep
        given = [k for k in ("loss_scale", "loss_opts") if opts.get(k) is not None]
        if top and not opts.get("loss") and given and behavior_version() >= 1 and not (
                opts.get("loss_only_on_non_search") and self.search_of(name)):
            raise NetworkError("layer %r: %s without a loss (RETURNN asserts: loss not defined, do not set %s)"
                               % (name, " and ".join(given), given[0]))
        # the search task computes no losses; a layer searching in training has its loss (unless RETURNN's
        # loss_only_on_non_search), computed over all hypotheses of the beam (beam_values.py)
        if not opts.get("loss") or self.search or (
                opts.get("loss_only_on_non_search") and self.search_of(name.split("/", 1)[0])):
            return
        loss_cls = get_loss_class(opts["loss"], name)
        target = (opts.get("target") or self.default_target) if loss_cls.need_target else None
        if target is not None and target not in self.extern_data:
            raise NetworkError("layer %r: target %r is not a data key (known: %s)"
                               % (name, target, ", ".join(sorted(self.extern_data))))
        loss = loss_cls(name, dict(opts.get("loss_opts") or {}), target)
        if hasattr(loss, "bind_layer"):  # losses that read the layer (its parameters, its input)
            loss.bind_layer(self._built_layer(name))
        if opts.get("loss_scale", 1.0) != 1.0:  # RETURNN: the loss's scale (equal when both are given)
            if "scale" in (opts.get("loss_opts") or {}) and opts["loss_opts"]["scale"] != opts["loss_scale"]:
                raise NetworkError("layer %r: loss_scale and loss_opts scale differ (RETURNN asserts)" % name)
            loss.scale = float(opts["loss_scale"])
        self.losses.append(LossInfo(name, loss, target, 1.0,
                                    bool(opts.get("only_on_eval"))))

    def check_losses(self) -> None:
        """RETURNN's checks of each loss against its target (its ``Loss._check_init``: axes, time
        axis, the output dim the target needs), made where RETURNN makes them: when the losses are
        set up for training or evaluation (tasks train and eval, before any step), not when the
        network is built; a net whose loss does not fit its target builds (forward, search)."""
        for info in self.losses:
            info.loss.check_templates(self.template_of(info.layer),
                                      None if info.target is None else self.extern_data[info.target], info.target)

    @property
    def recurrent(self) -> bool:
        """Whether some layer mixes frames over time (RETURNN's ``network.recurrent``)."""
        return any(type(layer).layer_class not in FRAME_WISE_LAYERS
                   # an own dropout noise shape may share the mask along time: per sequence, not per packed row
                   or (layer.dropout and layer.opts.get("dropout_noise_shape"))
                   for layer in self.layers.values())

    def _infer_n_out(self, name: str, opts: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        """RETURNN's rule (``LayerBase.transform_config_dict``): a layer of any class without
        ``n_out`` / ``out_dim`` that names a ``target`` (or has a loss that needs one: the default
        target) takes the target's feature or class dim (+1 blank for ctc). Linear and softmax get it
        here as their ``out_dim`` (the target's own Dim; ctc: ``n_out``); for other classes it is
        returned as ``{"n_out": dim}``, to use only where the layer needs an ``n_out``
        (:func:`build_with_n_out`: RETURNN's other layers keep the dim they compute)."""
        if opts.get("n_out") is not None or opts.get("out_dim") is not None:
            return None
        target = infer_target(opts, self.default_target, name)
        if target is None:
            return None
        data = self._target_template(target)
        if data is None:
            if opts["class"] in ("softmax", "linear") and ":" not in target:
                raise NetworkError("layer %r: its target %r is no data key (known: %s) and it sets no 'n_out' to use "
                                   "instead" % (name, target, ", ".join(sorted(self.extern_data))))
            return None
        dim = data.sparse_dim if data.sparse_dim is not None else data.feature_dim
        if dim is None or dim.dimension is None:
            return None
        n_out = dim.dimension + 1 if opts.get("loss") == "ctc" else dim.dimension
        custom = config_loss_class(opts.get("loss"))
        if custom is not None:  # RETURNN: the loss class's get_auto_output_layer_dim
            n_out = expected_dim(custom.user_class, dim.dimension) or dim.dimension
        if opts["class"] in ("softmax", "linear"):
            if n_out == dim.dimension:
                opts["out_dim"] = dim
            else:
                opts["n_out"] = n_out
            return None
        return {"n_out": n_out}

    def _leading_data(self, name: str, opts: Mapping[str, Any], templates: Sequence[Data] = ()) -> List[Data]:
        """The data whose dims fill the layer's undefined output dims before its sources' (RETURNN:
        ``size_target`` when the network evaluates, else ``target`` in a training network)."""
        size_target = opts.get("size_target")  # (a rec layer reads it itself: the loop's length, only when its
        # sources have no time axis or its unit ends by an 'end' layer: RETURNN's RecLayer._get_output_time_dim)
        rec_reads = opts.get("class") == "rec" and (
            not any(t.time_dim_axis is not None for t in templates)
            or (isinstance(opts.get("unit"), Mapping) and "end" in opts["unit"]))
        if size_target and self.eval_flag and (reads_size_target(opts) or rec_reads):
            if not isinstance(size_target, str) or self._target_template(size_target) is None:
                raise NetworkError("layer %r: 'size_target' %r is not a data key (known: %s)"
                                   % (name, size_target, ", ".join(sorted(self.extern_data))))
            return [self._target_template(size_target)]
        target = infer_target(opts, self.default_target, name) if self.train_flag else None
        data = self._target_template(target) if target else None
        return [data] if data is not None else []

    def _target_template(self, target: str) -> Optional[Data]:
        """The template of a ``target``: a data key (registered ones included), ``layer:NAME``, or
        None when it is not known (yet)."""
        if target in self.extern_data:
            return self.extern_data[target]
        if target.startswith("layer:") and target[len("layer:"):] in getattr(self, "layers", {}):
            return self.layers[target[len("layer:"):]].output
        return None

    def template_of(self, source: str) -> Data:
        """The :class:`Data` template of a ``from`` entry."""
        kind, ref = parse_source(source)
        if kind == "data":
            return self.extern_data[ref]
        rec = base_layer_name(ref, self.layers)
        if ref not in self.layers and rec in self.layers:  # ("sub/split/0" of a flattened sub-network: "sub/split")
            return self.layers[rec].sub_template(ref[len(rec) + 1:])
        return self.layers[ref].output

    def _find_output_layer(self) -> Optional[str]:
        """RETURNN's default output layer: ``output``, else the (last) ``is_output_layer`` layer,
        else the last layer with a loss; None when nothing is built (RETURNN builds only output,
        loss and is_output_layer layers and what they need: a net without them has no layers)."""
        if "output" in self.layers:
            return "output"
        marked = [n for n in self.order if self.net_dict[n].get("is_output_layer")]
        if marked:
            return marked[-1]
        return [n for n in self.order if self.net_dict[n].get("loss")][-1] if self.losses else None

    def require_output_layer(self, task: str) -> str:
        """The output layer; a NetworkError naming ``task`` when the network has none."""
        if self.output_layer_name is None:
            raise NetworkError("task %r: the network has no output layer: no layer 'output', none with 'is_output_layer' "
                               "or a 'loss' (RETURNN builds only those and what they need)" % task)
        return self.output_layer_name

    @property
    def dump_layers(self) -> List[str]:
        """The ``hdf_dump`` layers (written in the forward and eval tasks)."""
        return [n for n in self.order if type(self.layers[n]).layer_class == "hdf_dump"]

    def required_data_keys(self, with_targets: bool, layers: Optional[List[str]] = None) -> List[str]:
        """Data keys the layers read (plus loss targets when ``with_targets``), 'data' first.
        Without targets (forward, search) only the layers that ``layers`` (default: the output
        layer) need count."""
        keys = set()
        if not with_targets and not layers and self.output_layer_name is None:
            return []
        # the layers built (RETURNN's rule), not every entry of the dict: an unused layer's data key is not fed
        layers = self.order if with_targets else self._needed_layers(layers or [self.output_layer_name])
        for name in layers:
            for s in self.sources[name]:
                kind, ref = parse_source(s)
                if kind == "data":
                    keys.add(ref)
        if with_targets:
            keys.update(info.target for info in self.losses if info.target and info.target not in self.data_layers)
        return sorted(keys, key=lambda k: (k != "data", k))

    def forward(self, batch: Dict[str, tf.Tensor], ctx: RunContext,
                only: Optional[List[str]] = None) -> Dict[str, LayerOutput]:
        """Runs the layers (all, or those needed for ``only``) on a batch dict
        ``{key: tensor, key + ":seq_len": lengths}``."""
        if only and ctx.train:  # layers that update state in training run even off the loss path
            only = list(only) + [n for n, layer in self.layers.items() if layer.updates_in_training]
        needed = self._needed_layers(only) if only else set(self.order)
        if ctx.batch_size is None:
            arrays = [v for k, v in sorted(batch.items()) if not k.endswith(":seq_len") and ":size:" not in k
                      and (k not in self.extern_data or self.extern_data[k].have_batch_axis())]
            if arrays:
                ctx = ctx.with_batch_size(tf.shape(arrays[0])[0])
        outputs: Dict[str, LayerOutput] = {}
        with param_noise.step_scope(ctx.train, ctx.seed):  # weight noise: one draw per step (param_noise.py)
            for name in self.order:
                if name not in needed:
                    continue
                srcs = [self._resolve(s, batch, outputs) for s in self.sources[name]]
                outputs[name] = out = self.layers[name](srcs, ctx)
                for sub, value in out.sub_outputs.items():
                    outputs["%s/%s" % (name, sub)] = value
        return outputs

    # Plain Python on Python objects: kept out of autograph (newest TF's autograph cache has called
    # one of these converted helpers in place of the other inside the compiled step).
    @tf.autograph.experimental.do_not_convert
    def _needed_layers(self, names: List[str]) -> set:
        needed, todo = set(), [base_layer_name(n, self.layers) for n in names]
        todo += [base_layer_name(self.data_layers[info.target], self.layers) for info in self.losses
                 if info.target in self.data_layers and info.layer in names]  # (a unit's target: REC/X)
        while todo:
            name = todo.pop()
            if name in needed:
                continue
            needed.add(name)
            todo.extend(base_layer_name(ref, self.layers)
                        for kind, ref in map(parse_source, self.sources[name]) if kind == "layer")
            todo.extend(base_layer_name(ref, self.layers)  # (extra_deps may name data keys: 'base:data:data')
                        for kind, ref in map(parse_source, self.extra_deps.get(name, ())) if kind == "layer")
        return needed

    @tf.autograph.experimental.do_not_convert
    def _resolve(self, source: str, batch: Dict[str, tf.Tensor], outputs: Dict[str, LayerOutput]) -> LayerOutput:
        kind, ref = parse_source(source)
        if kind == "data":
            return self.data_output(batch, ref)
        return outputs[ref]

    def data_output(self, batch: Dict[str, tf.Tensor], key: str) -> LayerOutput:
        """A data key of the batch as a value in the layout its template declares. The batch holds
        it batch-major (``(B, T, ...)``, see :func:`returnn.extern_data.batch_array_axes`) with the
        lengths ``key:seq_len``; sizes of other dynamic axes as ``key:size:AXIS`` (direct feeds only)."""
        data = self.extern_data[key]
        sizes = {}
        for axis in data.get_dynamic_axes():
            name = size_key(key, data, axis)
            if name not in batch:
                raise NetworkError("data key %r (%s): the batch has no sizes %r of its dynamic axis %i"
                                   % (key, data.short_repr(), name, axis))
            sizes[axis] = batch[name]
        return extern_value(data, batch[key], sizes)

    def batch_spec(self, key: str) -> tf.TensorSpec:
        """TensorSpec of the padded array of data ``key`` in a batch from a dataset: ``(B, T, ...)``
        (:func:`returnn.extern_data.batch_array_axes`); a one-line error for data a dataset cannot
        deliver (no batch axis, several dynamic axes)."""
        data = self.extern_data[key]
        check_batch_deliverable(key, data)
        shape = [None if i is None else data.batch_shape[i] for i in batch_array_axes(data)]
        if shape[1] is None and batch_array_axes(data)[1] is None:
            shape[1] = 1
        return tf.TensorSpec([None] + shape[1:], data.dtype, name=key.replace(":", "_"))

    def output_as_frames(self, out: LayerOutput) -> Tuple[tf.Tensor, tf.Tensor]:
        """An output as ``(B, T, D)`` (``(B, T)`` when sparse) frames and ``(B,)`` lengths, as the
        HDF writer takes them; outputs without a time axis are one frame long."""
        out = out.copy_as_batch_time_feature()
        data = out.data
        tensor = out.tensor
        extra = data.batch_ndim - 1 - data.have_time_axis() - (data.feature_dim_axis is not None)
        if data.batch_dim_axis != 0 or extra:
            raise NetworkError("layer %r: output %s must be (batch, time, feature) to be written"
                               % (data.name, data.short_repr()))
        if not data.have_time_axis():
            tensor = tensor[:, None]
        if data.feature_dim_axis is None and not data.sparse:
            tensor = tensor[..., None]
        seq_len = out.seq_len if out.seq_len is not None else tf.ones([tf.shape(tensor)[0]], tf.int32)
        return tensor, seq_len

    def compute_losses(self, outputs: Dict[str, LayerOutput], batch: Dict[str, tf.Tensor],
                       names: Optional[Sequence[str]] = None, train: bool = False) -> Dict[str, LossValues]:
        """Loss values per loss layer (of the layers ``names``, default all); ``train``: of a
        training step (RETURNN computes some errors otherwise in evaluation)."""
        return {info.layer: info.loss.compute(outputs[info.layer], tile_like(
            self._target(batch, outputs, info.target), outputs[info.layer]), train)
                for info in self.losses if names is None or info.layer in names}

    def _target(self, batch: Dict[str, tf.Tensor], outputs: Dict[str, LayerOutput], key: Optional[str]
                ) -> Optional[LayerOutput]:
        if key is None:
            return None
        if key in self.data_layers:
            return outputs[self.data_layers[key]]
        return self.data_output(batch, key)

    @property
    def has_constraints(self) -> bool:
        """Whether some layer adds a term to the training objective besides losses (``L2``, ...)."""
        layers = list(self.layers.values())
        for layer in self.layers.values():
            layers += list(getattr(layer, "sub_layers", dict)().values())
        return any(layer.l2 and layer.l2_variables() for layer in layers) or bool(self.output_constraint_layers)

    @property
    def output_constraint_layers(self) -> List[str]:
        """Layers whose ``spatial_smoothing`` or ``darc1`` adds a term of their output to the objective."""
        return [n for n in self.order if self.layers[n].spatial_smoothing or self.layers[n].darc1]

    def constraints(self, outputs: Dict[str, LayerOutput], with_l2: bool = True) -> tf.Tensor:
        """The training objective's terms besides the losses (RETURNN's constraints): ``L2`` of the
        parameters (unless not ``with_l2``: ``decouple_constraints``) and ``spatial_smoothing`` /
        ``darc1`` of the outputs in ``outputs``."""
        from returnn.tf.constraints import darc1, spatial_smoothing_energy
        total = self.l2_loss() if with_l2 else tf.constant(0.0)
        for name in self.output_constraint_layers:
            layer = self.layers[name]
            if layer.spatial_smoothing:
                total += layer.spatial_smoothing * spatial_smoothing_energy(layer.desc, outputs[name])
            if layer.darc1:
                total += layer.darc1 * darc1(outputs[name])
        return total

    def l2_of_variables(self) -> Dict[int, float]:
        """``id(parameter) -> L2`` of the layer it belongs to, for layers that set ``L2``
        (``decouple_constraints``: RETURNN marks each parameter with its layer's L2)."""
        layers = list(self.layers.values())
        for layer in self.layers.values():
            layers += list(getattr(layer, "sub_layers", dict)().values())
        return {id(v): float(layer.l2) for layer in layers if layer.l2 for v in layer.l2_variables()}

    def l2_loss(self) -> tf.Tensor:
        """Sum of ``L2 * sum(w**2)`` over layers that set ``L2``."""
        layers = list(self.layers.values())
        for layer in self.layers.values():
            layers += list(getattr(layer, "sub_layers", dict)().values())
        terms = [layer.l2 * tf.add_n([tf.reduce_sum(tf.square(v)) for v in layer.l2_variables()])
                 for layer in layers if layer.l2 and layer.l2_variables()]
        return tf.add_n(terms) if terms else tf.constant(0.0)


def _check_loop_loss_batch(name: str, sub: str, opts: Mapping[str, Any], layer: Layer, eval_flag: bool) -> None:
    """RETURNN computes the loss of a rec unit's sub-layer in the loop per frame over the batch (its loop loss asserts a
    value with a batch axis; a per-frame value without one it takes as the batch): a loss on a sub-layer in the loop
    without batch axis (reading only ``prev:`` of itself, constants, ``:i``) is refused when the network evaluates."""
    in_loop = getattr(layer, "in_loop", ())
    if not (eval_flag and opts.get("loss") and sub in in_loop):
        return
    data = layer.sub_layers()[sub].output
    if data.batch_dim_axis is None:
        raise NetworkError("layer '%s/%s': a loss on a sub-layer in the loop without batch axis (%s) is refused (RETURNN "
                           "computes loop losses per batch entry: its loop loss asserts or takes another axis as the "
                           "batch)" % (name, sub, data.short_repr()))
