"""RETURNN's extra nets: ``"extra.NAME:layer"`` (``TFNetwork.construct_extra_net``).

An extra net is an overlay over the main network with other flags: ``extra.search:...`` (any
prefix containing ``.search``) builds its layers for beam search, others (``extra.2:...``) as the
main network. Referring to ``"extra.P:x"`` builds layer ``x`` again in extra net ``P``, from the
dict ``"extra.P:x"`` when the net dict has one, else from ``x``'s own dict. Its references go to
the main network, except to layers listed as ``"extra.P:y"`` in the net dict (and, for a layer of a
flattened subnetwork, to its siblings: the subnetwork is rebuilt as a whole). Parameters are shared
by name: ``x`` in an extra net names its parameters as ``x`` does (``x/W``), and whichever of the
two is built first makes them, the other uses them (RETURNN's variable scopes with reuse).

Here the extra layers are plain layers of the flattened dict, named ``"extra.P:x"`` (so
``"extra.P:x"`` and ``"extra.P:x/sub"`` read them), carrying :data:`EXTRA_OF` (``x``) and
:data:`SEARCH` (the extra net's search flag); :func:`shared_param_opts` gives a layer the options
that share parameters by scope. Losses of layers built for search are not computed.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from returnn.tf.net_dict import EXTRA_OF, SEARCH, owner

EXTRA_PREFIX = re.compile(r"^(extra(?:\.[A-Za-z0-9_.()]+)?):(.+)$")


def split_extra(name: Any) -> Tuple[Optional[str], Any]:
    """``"extra.search:x"`` -> ``("extra.search", "x")``; other names -> ``(None, name)``."""
    m = EXTRA_PREFIX.match(name) if isinstance(name, str) else None
    return (m.group(1), m.group(2)) if m else (None, name)


def expand_extra_nets(net_dict: Dict[str, Any], refs_of: Callable[[str, Dict[str, Any]], Iterable[str]],
                      map_refs: Callable[[str, Dict[str, Any], Callable[[str], str]], Dict[str, Any]],
                      deps_in_extra: Iterable[str] = ()) -> Dict[str, Any]:
    """``net_dict`` (flattened) with a layer ``"extra.P:x"`` for each extra layer that is listed or
    referenced (see the module docstring). ``refs_of(name, opts)``: the names a layer reads;
    ``map_refs(name, opts, fn)``: the dict with its references mapped by ``fn``. ``deps_in_extra``:
    extra layers (``"extra.P:x"``) built with everything they read in their extra net too (RETURNN's
    ``construct_extra_net(dep_layers_in_extra=True)``, the config's ``search_train_network_layers``)."""
    listed = [n for n in net_dict if split_extra(n)[0]]
    todo: List[Tuple[str, bool]] = [(n, False) for n in listed] + [
        (r, False) for n, o in net_dict.items() if isinstance(o, dict) for r in refs_of(n, o) if split_extra(r)[0]]
    todo += [(n, True) for n in deps_in_extra]
    if not todo:
        return net_dict
    out = dict(net_dict)
    done = set()
    while todo:
        name, all_in_extra = todo.pop()
        prefix, rest = split_extra(name)
        if prefix is None or (name, all_in_extra) in done or (name, True) in done:
            continue
        done.add((name, all_in_extra))
        if name not in net_dict and rest not in net_dict:  # "extra.P:rec/sub": the layer "extra.P:rec"
            parent = _existing_parent(rest, net_dict)
            if parent is not None:
                todo.append(("%s:%s" % (prefix, parent), all_in_extra))
            continue  # an unknown layer: the network names it
        explicit = name in net_dict
        opts = net_dict[name] if explicit else net_dict[rest]
        if not isinstance(opts, dict):
            continue
        group = None if explicit else (owner(rest, net_dict) or rest)  # a subnetwork is rebuilt as a whole

        def ref(r: str, prefix=prefix, group=group, all_in_extra=all_in_extra) -> str:
            if not isinstance(r, str) or r == "data" or r.startswith("data:") or split_extra(r)[0]:
                if split_extra(r)[0]:
                    todo.append((r, False))
                return r
            extra = "%s:%s" % (prefix, r)
            if all_in_extra or extra in net_dict or (group is not None and (r == group or r.startswith(group + "/"))):
                todo.append((extra, all_in_extra))
                return extra
            return r

        new = map_refs(name, opts, ref)
        new[EXTRA_OF] = rest
        new[SEARCH] = ".search" in prefix
        out[name] = new
    return out


def search_train_roots(net_dict: Dict[str, Any], names: Iterable[str]) -> List[str]:
    """RETURNN's ``search_train_network_layers``: the layers ``names`` of ``net_dict`` (flattened)
    as ``"extra.search:x"`` (a name with an extra prefix stays as it is); unknown names are an error."""
    from returnn.errors import NetworkError
    out = []
    for name in names:
        if not isinstance(name, str):
            raise NetworkError("config key 'search_train_network_layers': expected layer names, got %r" % (name,))
        prefix, rest = split_extra(name)
        if name not in net_dict and rest not in net_dict:
            raise NetworkError("config key 'search_train_network_layers': no layer %r in the network" % name)
        out.append(name if prefix else "extra.search:" + name)
    return out


def loss_labels(names: Iterable[str]) -> Dict[str, str]:
    """RETURNN's names of losses (scores ``score_<name>``): a loss of an extra net's layer
    ``"extra.P:x"`` is ``x`` unless another loss is named ``x`` too, then ``"extra.P:x"``."""
    names = list(names)
    base = [split_extra(n)[1] for n in names]
    return {n: b if base.count(b) == 1 else n for n, b in zip(names, base)}


def _existing_parent(name: str, net_dict: Dict[str, Any]) -> Optional[str]:
    parts = name.split("/")
    for i in range(len(parts) - 1, 0, -1):
        if "/".join(parts[:i]) in net_dict:
            return "/".join(parts[:i])
    return None


def sharing_layers(net_dict: Dict[str, Any], built: Iterable[str]) -> List[str]:
    """The built layers that share parameters by name: each built extra layer and its main one."""
    built = set(built)
    out = []
    for name in built:
        main = net_dict[name].get(EXTRA_OF) if isinstance(net_dict.get(name), dict) else None
        if main is not None:
            out.append(name)
            if main in built:
                out.append(main)
    return sorted(set(out))


class ParamsByScope:
    """The variables made by the layers that share parameters by name, by (scope, name)."""

    def __init__(self):
        # (scope, name) -> {name of the layer that made it: variable}, in the order they were made
        self.vars: Dict[Tuple[str, str], Dict[str, Any]] = {}

    def custom(self, scope: str, owner: Optional[str] = None) -> Callable[..., Any]:
        """A ``reuse_params`` ``custom`` function: the variable ``name`` of ``scope`` when another layer
        made it already (same shape), else a new one of the layer, noted (a layer built again, as a
        rec unit does while it settles its templates, replaces its own, also one of another shape). ``owner`` tells layers of one
        name apart (the two branches of a cond); default: the layer's name."""
        def get(base_layer=None, reuse_layer=None, name=None, shape=None, getter=None, **_kwargs):
            made = self.vars.setdefault((scope, name), {})
            me = owner or base_layer.layer_name
            for maker, var in made.items():  # another layer's of this shape (not one of an earlier, wrong guess)
                if maker != me and tuple(var.shape) == tuple(shape):
                    return var
            var = made[me] = getter(name=name, shape=shape)
            return var
        return get


def _shared_layers(layers: Dict[str, Any], scope: str, params: ParamsByScope) -> Dict[str, Any]:
    """The layer dicts of a rec unit or a subnetwork at ``scope`` sharing their parameters by name, each in
    ``scope/<layer>`` (unless it has its own reuse_params or an absolute name_scope), nested subnetworks too."""
    from returnn.tf.layers.params import layer_scope
    out = {}
    for name, opts in layers.items():
        if isinstance(opts, dict) and not opts.get("reuse_params"):
            rel, absolute = layer_scope(name, opts.get("name_scope"))
            inner = rel if absolute else "%s/%s" % (scope, rel)
            opts = dict(opts, reuse_params={"custom": params.custom(inner)})
            if opts.get("class") == "subnetwork" and isinstance(opts.get("subnetwork"), dict):
                opts["subnetwork"] = _shared_layers(opts["subnetwork"], inner, params)
        out[name] = opts
    return out


def shared_param_opts(opts: Dict[str, Any], scope: str, params: ParamsByScope, own_scope: bool = False) -> Dict[str, Any]:
    """``opts`` of a layer that shares its parameters by name, at the absolute RETURNN ``scope``:
    ``name_scope`` fixed to it (an :class:`EngineScope` standing in unless ``own_scope``: the layer's own
    name_scope gave it), ``reuse_params`` a :meth:`ParamsByScope.custom` (unless it has its own); a rec
    unit's sub-layers likewise in ``scope/rec/<sub>``."""
    from returnn.tf.layers.params import EngineScope
    new = dict(opts, name_scope=("/" + scope) if own_scope else EngineScope("/" + scope))
    if not new.get("reuse_params"):
        new["reuse_params"] = {"custom": params.custom(scope)}
    unit = new.get("unit")
    if new.get("class") == "rec" and isinstance(unit, dict):
        # RETURNN: a rec layer with a name_scope has no rec/ subscope
        new["unit"] = _shared_layers(unit, scope if own_scope else scope + "/rec", params)
    return new
