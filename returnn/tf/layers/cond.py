"""``cond``: RETURNN's CondLayer: one of two layers computed, chosen by a scalar bool (``tf.cond``).

``{"class": "cond", "condition": C, "true_layer": T, "false_layer": F}``: ``C`` is a layer name or a
layer dict whose output is a scalar bool (no batch axis); ``T`` and ``F`` are layer dicts (or names).
Only the chosen branch runs in a step. As in RETURNN, a dict is built as a layer named like this
one (its parameters live in this layer's scope: a ``subnetwork`` branch's ``lin`` has ``cond/lin/W``),
its ``from`` and ``base:`` names are layers of the network around, and a subnetwork inside it is
flattened as everywhere (:mod:`returnn.tf.subnetwork`). The output template is the true branch's;
the false branch's value is put in its axis order (axes matched by dim tag, else by kind and size,
dynamic ones in order), and the sizes of dynamic axes are the taken branch's. Layers present in
both branches (``subnetwork`` layers such as ``is_output_layer`` ones) are readable as ``NAME/x``.
Branch layers cannot have losses here.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim
from returnn.tf.layers import reuse
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, get_layer_class, register_layer
from returnn.tf.layers.options import Option
from returnn.tf.net_sources import base_layer_name

BRANCH_KEYS = ("condition", "true_layer", "false_layer")
_SHARING: List[Any] = []  # the ParamsByScope of the conds whose branches are being built (nested conds share it)


def _flat_branch(name: str, key: str, desc: Any) -> Dict[str, Dict[str, Any]]:
    """A branch dict as the flattened layers it becomes (``name``: the branch itself, ``name/x``:
    its subnetwork's layers), only those RETURNN builds."""
    from returnn.tf.net_dict import needed_layers
    from returnn.tf.network import layer_sources, parse_source
    from returnn.tf.subnetwork import expand_subnetworks, refuse_load_on_init
    if not isinstance(desc, Mapping) or "class" not in desc:
        raise NetworkError("layer %r (cond): %r must be a layer name or a layer dict with 'class', got %r"
                           % (name, key, desc))
    refuse_load_on_init(dict(desc), "layer %r (cond) %r" % (name, key))
    flat = expand_subnetworks({name: dict(desc)})

    def refs(n: str) -> List[str]:
        return [base_layer_name(ref, flat) for kind, ref in map(parse_source, layer_sources(n, flat[n]))
                if kind == "layer"]
    keep = needed_layers(flat, refs, extra_roots=[name])
    return {n: flat[n] for n in flat if n in keep}


def _branches(name: str, opts: Mapping[str, Any]) -> Dict[str, Any]:
    """Per branch key: a layer name (str) or its flattened layers."""
    out = {}
    for key in BRANCH_KEYS:
        desc = opts.get(key)
        if desc is None:
            raise NetworkError("layer %r (cond): needs %r" % (name, key))
        out[key] = desc if isinstance(desc, str) else _flat_branch(name, key, desc)
    return out


def _made_vars(layer: Layer) -> List[tf.Variable]:
    """The variables ``layer`` made itself (not those it shares with the other branch's layer)."""
    shared = {id(v) for v in layer._own.shared.values()}
    return [v for v in layer.variables if id(v) not in shared]


def _as_list(value: Any) -> List[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def match_dims(want: Sequence[Dim], have: Sequence[Dim]) -> Optional[List[int]]:
    """For each dim of ``want``, the axis of ``have`` that holds it (by tag, else same kind and
    static size, else the next dynamic one); None when the two do not correspond."""
    if len(want) != len(have):
        return None
    out: List[Optional[int]] = [None] * len(want)
    used = set()
    for rule in (lambda w, h: w == h,
                 lambda w, h: w.dimension is not None and w.dimension == h.dimension and w.kind == h.kind,
                 lambda w, h: w.dimension is not None and w.dimension == h.dimension,
                 lambda w, h: w.dimension is None and h.dimension is None and not w.is_batch_dim()
                 and not h.is_batch_dim()):
        for i, w in enumerate(want):
            if out[i] is not None:
                continue
            for j, h in enumerate(have):
                if j not in used and rule(w, h):
                    out[i] = j
                    used.add(j)
                    break
    return None if any(o is None for o in out) else out  # type: ignore[return-value]


class _Branch(tf.Module):
    """The layers of one branch dict, built in dependency order on the templates of the outer layers."""

    def __init__(self, cond: "CondLayer", key: str, flat: Mapping[str, Mapping[str, Any]],
                 outer: Mapping[str, Data], seed: int, kw: Mapping[str, Any]):
        super().__init__(name=key)
        from returnn.tf.net_dict import FROM_DEFAULT
        from returnn.tf.net_sources import check_from_given, layer_sources
        self.key = key
        self.root = cond.layer_name
        self.sources = {n: layer_sources(n, o, kw.get("default_target", "classes")) for n, o in flat.items()}
        self.order = self._order(flat, cond.desc)
        self.layers: Dict[str, Layer] = {}
        outer_get = reuse.outer_resolver()

        def get_layer(n: str) -> Layer:
            if n in self.layers:
                return self.layers[n]
            if outer_get is None:
                raise KeyError(n)
            return outer_get(n)
        for n in self.order:
            opts = dict(flat[n])
            if opts.get("loss"):
                raise NetworkError("%s: %s layer %r has a loss (losses inside cond branches are not supported)"
                                   % (cond.desc, key, n))
            cls = get_layer_class(opts["class"], n, opts)
            check_from_given(n, opts)
            if not opts.get("reuse_params"):  # RETURNN (AUTO_REUSE): both branches' layers of one scope share
                owner = "%x:%s" % (id(cond), key)
                opts["reuse_params"] = {"custom": cond.params_by_scope.custom(self._scope(n, opts), owner)}
            layer_opts = {k: v for k, v in opts.items() if k not in ("from", FROM_DEFAULT)}
            if kw.get("infer_n_out") is not None:
                kw["infer_n_out"](n, layer_opts)
            templates = [self._template(s, outer) for s in self.sources[n]]
            with reuse.resolving(get_layer):
                if hasattr(cls, "outer_sources"):
                    layer = cls(n, dict(layer_opts, **{"from": opts.get("from", ["data"])}), templates, seed=seed,
                                outer_names=self.sources[n], **kw)
                else:
                    layer = cls(n, layer_opts, templates, seed=seed)
            self.layers[n] = layer

    def _scope(self, n: str, opts: Mapping[str, Any]) -> str:
        """The RETURNN scope of branch layer ``n``: its name_scope if absolute, else in the cond's scope."""
        from returnn.tf.layers.params import layer_scope
        rel = "" if n == self.root else n[len(self.root) + 1:]
        scope, absolute = layer_scope(rel, opts.get("name_scope")) if rel else ("", False)
        return scope if absolute else "/".join(p for p in (self.root, scope) if p)

    def _order(self, flat: Mapping[str, Any], where: str) -> List[str]:
        order: List[str] = []
        state: Dict[str, int] = {}

        def visit(n: str) -> None:
            if state.get(n) == 2:
                return
            if state.get(n) == 1:
                raise NetworkError("%s: dependency cycle in %s at %r" % (where, self.key, n))
            state[n] = 1
            for s in self.sources[n]:
                if base_layer_name(s, flat) in flat:
                    visit(base_layer_name(s, flat))
            state[n] = 2
            order.append(n)
        for n in flat:
            visit(n)
        return order

    def _template(self, s: str, outer: Mapping[str, Data]) -> Data:
        """The template of source ``s``: a branch layer's, its sub-output's ('x/split/0'), else the outer one."""
        if s in self.layers or s in outer:
            return self.layers[s].output if s in self.layers else outer[s]
        base = base_layer_name(s, self.layers)
        return self.layers[base].sub_template(s[len(base) + 1:])

    @property
    def output(self) -> Data:
        return self.layers[self.root].output

    def run(self, outer: Mapping[str, LayerOutput], ctx: RunContext) -> Dict[str, LayerOutput]:
        values: Dict[str, LayerOutput] = {}
        for n in self.order:
            srcs = [values[s] if s in values else outer[s] for s in self.sources[n]]
            values[n] = out = self.layers[n](srcs, ctx)
            for sub, value in out.sub_outputs.items():
                values["%s/%s" % (n, sub)] = value
        return values


@register_layer
class CondLayer(Layer):
    """See the module docstring."""

    layer_class = "cond"
    default_from = ()
    sub_param_scope = ""  # branch layers' parameters: directly in this layer's scope (RETURNN's)
    options = (
        Option("condition", None, "scalar bool: a layer name, or a layer dict (built in this layer's scope)"),
        Option("true_layer", None, "layer dict (or name) computed when the condition holds"),
        Option("false_layer", None, "layer dict (or name) computed otherwise"),
    )

    @classmethod
    def outer_sources(cls, name: str, opts: Mapping[str, Any], default_target: str = "classes",
                      search: bool = False) -> List[str]:
        """``from``, then every name the branches read outside themselves (layers and data keys)."""
        from returnn.tf.network import layer_sources
        out = _as_list(opts.get("from", []))
        for key, branch in _branches(name, opts).items():
            if isinstance(branch, str):
                out.append(branch)
                continue
            for n, o in branch.items():  # (a branch layer's sub-output 'x/split/0': of the branch)
                out += [s for s in layer_sources(n, o, default_target, search) if base_layer_name(s, branch) not in branch]
        return list(dict.fromkeys(out))

    @classmethod
    def has_sub_output(cls, opts: Mapping[str, Any], sub: str) -> bool:
        """``NAME/x`` for a layer ``x`` of both the true and the false branch."""
        name = "?"
        try:
            branches = _branches(name, opts)
        except NetworkError:
            return False
        names = [set(b) for k, b in branches.items() if k != "condition" and not isinstance(b, str)]
        return len(names) == 2 and "%s/%s" % (name, sub) in names[0] & names[1]

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42,
                 outer_names: Sequence[str] = (), **kw: Any):
        super().__init__(name, opts, sources, seed)
        if len(outer_names) != len(sources):  # built without the network's outer names: take them again
            outer_names = self.outer_sources(name, opts, kw.get("default_target", "classes"), kw.get("search", False))
        self.outer_names = list(outer_names)
        outer = dict(zip(self.outer_names, sources))
        self.branches: Dict[str, _Branch] = {}
        self.refs: Dict[str, str] = {}
        from returnn.tf.extra_nets import ParamsByScope
        # parameters of one scope in both branches (and in conds nested in them): the same variables
        self.params_by_scope = _SHARING[-1] if _SHARING else ParamsByScope()
        _SHARING.append(self.params_by_scope)
        try:
            for key, branch in _branches(name, opts).items():
                if isinstance(branch, str):
                    self.refs[key] = branch
                else:
                    self.branches[key] = _Branch(self, key, branch, outer, seed, kw)
        finally:
            _SHARING.pop()
        cond = self._template("condition", outer)
        if cond.batch_ndim != 0 or cond.dtype != "bool":
            raise NetworkError("%s: the condition must be a scalar bool (no batch axis), got %s"
                               % (self.desc, cond.short_repr()))
        true, false = self._template("true_layer", outer), self._template("false_layer", outer)
        self.false_axes = match_dims(true.dims, false.dims)
        if self.false_axes is None or false.dtype != true.dtype:
            raise NetworkError("%s: true_layer %s and false_layer %s do not have the same shape"
                               % (self.desc, true.short_repr(), false.short_repr()))
        self.output = true.copy(name)
        self.extra: Dict[str, Tuple[Data, List[int]]] = {}
        if "true_layer" in self.branches and "false_layer" in self.branches:
            t_layers, f_layers = self.branches["true_layer"].layers, self.branches["false_layer"].layers
            for n in t_layers:
                if n.startswith(name + "/") and n in f_layers:
                    axes = match_dims(t_layers[n].output.dims, f_layers[n].output.dims)
                    if axes is not None:
                        self.extra[n[len(name) + 1:]] = (t_layers[n].output.copy(n), axes)

    def _template(self, key: str, outer: Mapping[str, Data]) -> Data:
        return self.branches[key].output if key in self.branches else outer[self.refs[key]]

    # ---- sub-layers: outputs NAME/x, parameters in this layer's scope
    def sub_template(self, sub: str) -> Data:
        if sub not in self.extra:
            raise NetworkError("%s: no sub-layer %r in both branches (known: %s)"
                               % (self.desc, sub, ", ".join(sorted(self.extra)) or "none"))
        return self.extra[sub][0]

    def sub_layers(self) -> Dict[str, Layer]:
        """The branches' layers by their name in this layer's scope (``""``: a branch itself)."""
        out: Dict[str, Layer] = {}
        for key, branch in self.branches.items():
            for n, layer in branch.layers.items():
                rel = "" if n == self.layer_name else n[len(self.layer_name) + 1:]
                if rel in out and _made_vars(out[rel]) and _made_vars(layer):  # shared: made by the first only
                    raise NetworkError("%s: %s and another branch both make parameters in scope %r"
                                       % (self.desc, key, rel or self.layer_name))
                if rel not in out or _made_vars(layer):
                    out[rel] = layer
        return out

    @property
    def params(self) -> Dict[str, tf.Variable]:
        """RETURNN's ``layer.params``: the branches' variables by name in this layer's scope (``lin/W``)."""
        from returnn.tf.layers.params import layer_scope
        out = dict(super().params)
        for rel, layer in self.sub_layers().items():
            scope = layer_scope(rel, layer.opts.get("name_scope"))[0] if rel else ""
            for key, var in layer.params.items():
                out["/".join(p for p in (scope, key) if p)] = var
        return out

    def l2_variables(self):
        return []  # the branch layers' own L2 is collected by the network through sub_layers()

    # ---- running
    def _value(self, key: str, outer: Mapping[str, LayerOutput], ctx: RunContext) -> Tuple[LayerOutput, Dict]:
        if key in self.refs:
            return outer[self.refs[key]], {}
        values = self.branches[key].run(outer, ctx)
        return values[self.layer_name], values

    def _returned(self, value: LayerOutput, template: Data, axes: List[int]) -> Tuple[tf.Tensor, List[tf.Tensor]]:
        """``value`` in ``template``'s axis order, with the sizes of its dynamic axes."""
        x = value.tensor if axes == list(range(len(axes))) else tf.transpose(value.tensor, axes)
        sizes = [value.sizes[value.data.dims[a]] for d, a in zip(template.dims, axes) if d.is_dynamic()]
        return x, sizes

    def _branch_fn(self, key: str, outer: Mapping[str, LayerOutput], ctx: RunContext):
        def fn():
            value, values = self._value(key, outer, ctx)
            axes = list(range(value.data.batch_ndim)) if key == "true_layer" else self.false_axes
            main = self._returned(value, self.output, axes)
            extra = {}
            for sub, (tmpl, sub_axes) in self.extra.items():
                v = values["%s/%s" % (self.layer_name, sub)]
                extra[sub] = self._returned(v, tmpl, list(range(v.data.batch_ndim)) if key == "true_layer" else sub_axes)
            return main, extra
        return fn

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        outer = dict(zip(self.outer_names, sources))
        pred, _ = self._value("condition", outer, ctx)
        (x, sizes), extra = tf.cond(tf.cast(pred.tensor, tf.bool), self._branch_fn("true_layer", outer, ctx),
                                    self._branch_fn("false_layer", outer, ctx))
        out = self._with_sizes(x, self.output, sizes, sources)
        out.sub_outputs = {sub: self._with_sizes(v, self.extra[sub][0], s, sources) for sub, (v, s) in extra.items()}
        return out

    def _with_sizes(self, x: tf.Tensor, template: Data, sizes: List[tf.Tensor], sources: List[LayerOutput]
                    ) -> LayerOutput:
        merged: Dict[Dim, tf.Tensor] = {}
        for src in sources:
            merged.update(src.sizes)
        merged.update(zip([d for d in template.dims if d.is_dynamic()], sizes))
        return LayerOutput(x, template, merged)
