"""``{"class": "subnetwork", "from": ..., "subnetwork": {layers}}``: a layer dict inside a layer.

The sub-network is flattened into the enclosing dict before the network is built: its layer
``x`` becomes ``NAME/x`` (so ``"NAME/x"`` from outside reads it, as in RETURNN), inside it
``"data"`` is the subnetwork's input (its ``from``; several sources are concatenated first),
``"data:KEY"`` is still the extern data, ``"base:x"`` is layer ``x`` of the enclosing dict, and
``NAME`` itself is a copy of ``NAME/output`` that keeps the subnetwork layer's own options
(``loss``, ``target``, ``is_output_layer``, ...). Sub-networks nest, and in a rec unit they are
flattened the same way (``prev:x`` inside is ``prev:NAME/x``).

``masked_computation`` layers are flattened here too (:func:`_expand_masked`), and ``unmask``
inside a rec unit becomes a copy.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Dict, List, Optional

from returnn.errors import NetworkError
from returnn.tensor import Dim
from returnn.tf.layers.params import EngineScope, is_own_name_scope, moved_by_subnetwork
from returnn.tf.net_dict import FROM_DEFAULT, from_entries

# options of the subnetwork layer itself (the rest go to the copy of its output)
# (n_out stays with the copy of the output: RETURNN's LayerBase asserts it equals the output's dim)
_OWN_OPTIONS = ("class", "subnetwork", "from", "sources", "concat_sources", "load_on_init", "out_dim")


def _source_list(name: str, value: Any, pairs: bool = False) -> List[Any]:
    """The entries of a ``from`` value: names (and with ``pairs``, ``(layer, axis)`` pairs too)."""
    entries = from_entries(value)
    if all(isinstance(v, str) or (pairs and isinstance(v, (list, tuple)) and len(v) == 2 and isinstance(v[0], str))
           for v in entries):
        return entries
    raise NetworkError("layer %r: 'from' must be a name or a list of names, got %r" % (name, value))


def _map_ref(ref: str, prefix: str, data_name: Optional[str], where: str = "?",
             inputs: Optional[Dict[str, str]] = None) -> str:
    """``inputs``: with ``concat_sources`` False, ``data:0``, ``data:1``, ... and ``data:<source>``
    name the subnetwork's sources (RETURNN's SubnetworkLayer)."""
    if ref == "data":
        if data_name is None:
            raise NetworkError("layer %r reads 'data' but its subnetwork has no 'from'" % where)
        return data_name
    if ref.startswith("data:"):
        if inputs and ref[len("data:"):] in inputs:
            return inputs[ref[len("data:"):]]
        return ref
    if ref.startswith("base:"):
        return ref[len("base:"):]
    if ref.startswith("prev:"):  # inside a rec unit: the previous step of a layer of this subnetwork
        return "prev:" + prefix + ref[len("prev:"):]
    return prefix + ref


def map_layer_refs(where: str, opts: Dict[str, Any], fn: Callable[[str], str]) -> Dict[str, Any]:
    """A layer dict with every layer reference mapped by ``fn`` (name -> name): ``from`` entries
    (names and ``(layer, axis)`` pairs; ``sources``, RETURNN's old name, becomes ``from``), the
    class's reference options, ``masked_from``, ``initial_state``, ``reuse_params``, ``extra_deps``
    and a rec unit's ``base:`` references."""
    from returnn.tf import layers as _registered  # noqa: F401  (fills LAYER_CLASSES)
    from returnn.tf.layers.base import LAYER_CLASSES
    new = dict(opts)
    cls = LAYER_CLASSES.get(new.get("class"))
    default = list(getattr(cls, "default_from", ["data"]))
    if "from" not in new and "sources" not in new:
        new[FROM_DEFAULT] = True
    new["from"] = [(fn(e[0]), e[1]) if isinstance(e, (list, tuple)) else fn(e)
                   for e in _source_list(where, new.pop("sources", new.get("from", default)), pairs=True)
                   if e != "none"]
    for key in tuple(getattr(cls, "ref_options", ())) + (MASKED_BY, "masked_from"):
        if isinstance(new.get(key), str):
            new[key] = fn(new[key])
        elif isinstance(new.get(key), (list, tuple)) and all(isinstance(v, str) for v in new[key]):
            new[key] = [fn(v) for v in new[key]]  # (a list of layers: shape_deps)
    if isinstance(new.get("initial_state"), (str, dict, list, tuple)):
        from returnn.tf.layers.rec_state import state_layer_refs
        new["initial_state"] = _map_nested(new["initial_state"], lambda v: fn(v) if state_layer_refs(v) else v)
    if new.get("reuse_params"):
        new["reuse_params"] = _map_reuse(new["reuse_params"], fn)
    if new.get("extra_deps"):
        new["extra_deps"] = [fn(d) for d in from_entries(new["extra_deps"])]
    if new.get("class") == "rec" and isinstance(new.get("unit"), dict):
        new["unit"] = _map_unit_base_refs(new["unit"], fn)
    if new.get("class") == "rec_last_output" and isinstance(new.get("rec_layer"), str):
        new["rec_layer"] = fn(new["rec_layer"])
    if new.get("class") == "cond":  # its condition and branches name layers of the network around it
        for key in ("condition", "true_layer", "false_layer"):
            branch = new.get(key)
            if isinstance(branch, str):
                new[key] = fn(branch)
            elif isinstance(branch, dict):  # a layer dict of that network; a sub-network's layers reach it by base:
                new[key] = map_layer_refs(where, branch, fn)
                if branch.get("class") == "subnetwork" and isinstance(branch.get("subnetwork"), dict):
                    new[key]["subnetwork"] = _map_unit_base_refs(branch["subnetwork"], fn)
    return new


def _map_reuse(spec: Any, fn: Callable[[str], str]) -> Any:
    """A ``reuse_params`` value with its layer names mapped by ``fn``."""
    if isinstance(spec, str):
        return fn(spec)
    if not isinstance(spec, dict):
        return spec
    out = dict(spec)
    for key in ("reuse_layer", "layer_output"):
        if isinstance(out.get(key), str):
            out[key] = fn(out[key])
    if isinstance(out.get("map"), dict):
        out["map"] = {k: _map_reuse(v, fn) for k, v in out["map"].items()}
    return out


def _map_unit_base_refs(unit: Dict[str, Any], map_outer: Callable[[str], str], depth: int = 1) -> Dict[str, Any]:
    """A rec unit inside a flattened subnetwork: its references to the network around the rec layer
    (``depth`` times ``base:``; ``base:base:x`` leaves that network too) as the flattened network
    names them (``map_outer`` maps a name of that network). Nested subnetworks and rec units in the
    unit count one ``base:`` more."""
    from returnn.tf.layers.rec_net.deps import layer_ref_options

    def ref(r: Any) -> Any:
        if not isinstance(r, str) or not r.startswith("base:" * depth):
            return r
        return "base:" * depth + map_outer(r[len("base:" * depth):])

    out: Dict[str, Any] = {}
    for name, layer in unit.items():
        if not isinstance(layer, dict):
            out[name] = layer
            continue
        new = dict(layer)
        if "from" in new:
            new["from"] = [(ref(e[0]), e[1]) if isinstance(e, (list, tuple)) else ref(e)
                           for e in from_entries(new["from"])]
        for key in layer_ref_options(new.get("class")) + ["initial_output", "masked_from"]:
            if isinstance(new.get(key), str):
                new[key] = ref(new[key])
            elif isinstance(new.get(key), (list, tuple)) and all(isinstance(v, str) for v in new[key]):
                new[key] = [ref(v) for v in new[key]]
        if isinstance(new.get("initial_state"), (str, dict, list, tuple)):
            new["initial_state"] = _map_nested(new["initial_state"], ref)
        if new.get("class") == "subnetwork" and isinstance(new.get("subnetwork"), dict):
            new["subnetwork"] = _map_unit_base_refs(new["subnetwork"], map_outer, depth + 1)
        if new.get("class") == "rec" and isinstance(new.get("unit"), dict):  # (e.g. a loop in a cond branch)
            new["unit"] = _map_unit_base_refs(new["unit"], map_outer, depth + 1)
        if new.get("class") == "masked_computation" and isinstance(new.get("unit"), dict):
            new["unit"] = _map_unit_base_refs({"_": new["unit"]}, map_outer, depth)["_"]
        out[name] = new
    return out


def _map_nested(spec: Any, fn: Callable[[Any], Any]) -> Any:
    if isinstance(spec, dict):
        return {k: _map_nested(v, fn) for k, v in spec.items()}
    if isinstance(spec, (list, tuple)):
        return [_map_nested(v, fn) for v in spec]
    return fn(spec)


# Private option of the layers a masked_computation becomes inside a rec unit: the mask (a layer
# reference) under which their outputs and states advance; where it is False they keep the previous
# step's (see returnn.tf.layers.rec_net.loop).
MASKED_BY = "_masked_by"
_EXPANDED_CLASSES = ("subnetwork", "masked_computation", "unmask")
# options of masked_computation itself (the rest go to the copy of its unit's output)
_MASKED_OWN_OPTIONS = ("class", "mask", "unit", "masked_from", "in_spatial_dim", "out_spatial_dim", "from", "sources")


def expand_subnetworks(net_dict: Dict[str, Any], in_rec_unit: bool = False) -> Dict[str, Any]:
    """``net_dict`` with every subnetwork and masked_computation layer flattened (see the module
    docstring and :func:`_expand_masked`); a dict without them is returned unchanged.
    ``in_rec_unit``: ``net_dict`` is the unit of a rec layer (one step)."""
    if not any(isinstance(o, dict) and o.get("class") in _EXPANDED_CLASSES for o in net_dict.values()):
        return net_dict
    out: Dict[str, Any] = {}
    # masked_computation layers of a rec unit with masked_from: computed over that packed sequence
    packed_in_unit = {name for name, opts in net_dict.items() if in_rec_unit and isinstance(opts, dict)
                      and opts.get("class") == "masked_computation" and opts.get("masked_from") is not None}
    for name, opts in net_dict.items():
        cls_name = opts.get("class") if isinstance(opts, dict) else None
        if cls_name == "masked_computation":
            out.update(_expand_masked(name, opts, in_rec_unit, in_rec_unit and _reads_prev(net_dict, name)))
            continue
        if cls_name == "unmask" and not in_rec_unit and not opts.get("skip_initial") and any(
                isinstance(net_dict.get(src), dict) and net_dict[src].get("class") == "masked_computation"
                for src in from_entries(opts.get("from", "data"))):
            # RETURNN's unmask asks its source for the initial output of the rec layer around it: outside a rec
            # loop there is none (AttributeError on None.cell, for a masked_computation source at every version;
            # skip_initial, of the RETURNN fork the segmental transducer configs were written for, has no initial)
            # refused when built (RETURNN builds only the layers something needs: an unused one is no error)
            out[name] = dict(opts, **{"class": "_unmask_outside_loop"})
            continue
        if cls_name == "unmask" and in_rec_unit:
            if set(from_entries(opts.get("from", "data"))) & packed_in_unit:  # picks the packed frame per step
                out[name] = dict(opts, **{"class": "_unmask_in_unit"})
                continue
            # otherwise the loop already kept the last masked value (RETURNN still resolves its mask as a layer:
            # a name of the unit that is no layer fails there)
            mask = opts.get("mask")
            if isinstance(mask, str) and ":" not in mask and "/" not in mask and mask not in net_dict:
                raise NetworkError("layer %r (unmask): mask %r is no layer of the rec unit (RETURNN: LayerNotFound)"
                                   % (name, mask))
            own = {k: v for k, v in opts.items() if k not in ("class", "mask", "skip_initial")}
            if isinstance(mask, str):  # resolved as any reference (data:KEY, prev:NAME, base:NAME), value unused
                own["extra_deps"] = from_entries(own.get("extra_deps") or []) + [mask]
            out[name] = dict(own, **{"class": "copy"})
            continue
        if cls_name != "subnetwork":
            out[name] = opts
            continue
        inner = opts.get("subnetwork")
        if not isinstance(inner, dict) or "output" not in inner:
            raise NetworkError("layer %r (subnetwork): 'subnetwork' must be a layer dict with an 'output' layer"
                               % name)
        prefix = name + "/"
        sources = [s for s in _source_list(name, opts.get("from", opts.get("sources", "data"))) if s != "none"]
        data_name: Optional[str] = None  # no sources: nothing may read "data"
        inputs: Optional[Dict[str, str]] = None
        if opts.get("concat_sources", True) is False and sources:  # data:i / data:<source>, "data" the first
            data_name = sources[0]
            inputs = {str(i): src for i, src in enumerate(sources)}
            inputs.update({src: src for src in sources})
            inputs.setdefault("data", sources[0])
        elif len(sources) == 1:
            data_name = sources[0]
        elif sources:
            data_name = prefix + "data"
            out[data_name] = {"class": "copy", "from": sources}
        for inner_name, inner_opts in expand_subnetworks(inner, in_rec_unit).items():
            if not isinstance(inner_opts, dict):
                raise NetworkError("layer %r: expected a dict with 'class'" % (prefix + inner_name))
            where = prefix + inner_name
            if opts.get("name_scope") is not None:  # the subnetwork's scope: its layers' parameters move along
                inner_opts = dict(inner_opts, name_scope=moved_by_subnetwork(
                    name, opts["name_scope"], inner_name, inner_opts.get("name_scope")))
            out[where] = map_layer_refs(where, inner_opts, functools.partial(
                _map_ref, prefix=prefix, data_name=data_name, where=where, inputs=inputs))
        own = {k: v for k, v in opts.items() if k not in _OWN_OPTIONS}
        out[name] = dict(own, **{"class": "copy", "from": [prefix + "output"]})
    return out if in_rec_unit else _rec_last_output_to_rec(out)


def _rec_last_output_to_rec(net: Dict[str, Any]) -> Dict[str, Any]:
    """RETURNN's rec_last_output takes its ``rec_layer`` through a subnetwork (its ``output``) and
    copies of one source to the rec layer they show: here the flattened names, followed likewise."""
    for name, opts in list(net.items()):
        if not isinstance(opts, dict) or opts.get("class") != "rec_last_output":
            continue
        rec, seen = opts.get("rec_layer"), set()
        while isinstance(rec, str) and rec not in seen and isinstance(net.get(rec), dict) and \
                net[rec].get("class") == "copy" and len(from_entries(net[rec].get("from", []))) == 1:
            seen.add(rec)
            src = from_entries(net[rec]["from"])[0]
            if not isinstance(src, str) or ":" in src:
                break
            rec = src
        if rec != opts.get("rec_layer") and isinstance(net.get(rec), dict) and net[rec].get("class") == "rec":
            net[name] = dict(opts, rec_layer=rec)
    return net


def refuse_load_on_init(desc: Any, where: str) -> None:
    """A subnetwork with ``load_on_init`` in ``desc`` (a layer dict) where this engine does not
    apply it (cond branches, masked_computation units): one line, never silently skipped."""
    if not isinstance(desc, dict):
        return
    if desc.get("class") == "subnetwork" and desc.get("load_on_init"):
        raise NetworkError("%s: a subnetwork with 'load_on_init' is not supported here (only at the top level, in "
                           "subnetworks and in rec units)" % where)
    for value in desc.values():  # nested layer dicts (a subnetwork's, a rec unit's) at any depth
        refuse_load_on_init(value, where)


def _reads_prev(value: Any, name: str) -> bool:
    """Whether ``prev:NAME`` occurs anywhere in ``value`` (a unit's layer dicts)."""
    if isinstance(value, str):
        return value == "prev:" + name
    if isinstance(value, dict):
        return any(_reads_prev(v, name) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_reads_prev(v, name) for v in value)
    return False


def _expand_masked(name: str, opts: Dict[str, Any], in_rec_unit: bool, prev_read: bool = False) -> Dict[str, Any]:
    """RETURNN's ``masked_computation`` (``mask``, ``unit``, ``from``, ``masked_from``) as plain layers.

    The unit becomes a subnetwork ``NAME/...`` (a unit that is no subnetwork is its ``output``),
    and ``NAME`` a copy of its output. Outside a rec loop the subnetwork reads the input packed to
    the masked frames (``NAME/_packed``, see :mod:`returnn.tf.layers.masked`; or ``masked_from``,
    already packed), so its output has the packed time axis (``unmask`` restores the original).
    Inside a rec unit every resulting layer carries :data:`MASKED_BY`: where the mask is False, it
    keeps its previous output and state; with ``masked_from`` (e.g. ``base:x``, the frames the mask
    keeps, already packed: transducer decoders) the unit runs once over that sequence instead, and an
    ``unmask`` of it takes its frame per step (``_unmask_in_unit``, :mod:`returnn.tf.layers.rec_net.unmask`).
    ``masked_from`` may stand without ``mask`` (RETURNN: the unit then runs on it as it is; in a rec unit
    it is computed outside the loop anyway). The unit's other references (a plain unit's names but
    ``data``, a subnetwork unit's ``base:`` names) are layers of the network around it, as RETURNN
    resolves them: outside a loop packed to the same masked frames (``NAME/_packed_N``; a layer without
    the masked axis as it is), in a loop the step's layers. Without ``from`` the unit's ``data`` is the
    network's ``data``, packed too.
    """
    where = "layer %r (masked_computation)" % name
    mask, unit = opts.get("mask"), opts.get("unit")
    if not isinstance(mask, str) and not (mask is None and opts.get("masked_from")):
        raise NetworkError("%s: 'mask' must name a bool layer, got %r" % (where, mask))
    if not isinstance(unit, dict) or "class" not in unit:
        raise NetworkError("%s: 'unit' must be a layer dict with 'class', got %r" % (where, unit))
    refuse_load_on_init(unit, where)
    # RETURNN asserts it in get_rec_initial_output, called only for a layer whose prev: the unit reads (the
    # published RNA/RNN-T decoders of 2021 set it on a masked_computation nothing reads as prev:)
    if prev_read and opts.get("masked_from") is None and opts.get("initial_output") is not None:
        raise NetworkError("%s: 'initial_output' is refused where the rec unit reads prev:%s, as RETURNN asserts (its "
                           "initial output is configured via the unit)" % (where, name))
    sources = [e for e in _source_list(name, opts.get("from", opts.get("sources", []))) if e != "none"]
    masked_from = opts.get("masked_from")
    out: Dict[str, Any] = {}
    step_wise = in_rec_unit  # in a rec unit: per step, keeping outputs and states where the mask is False
    if masked_from is not None:  # the already packed sequence (in a rec unit: computed once, outside the loop)
        if not isinstance(masked_from, str):
            raise NetworkError("%s: 'masked_from' must name a layer, got %r" % (where, masked_from))
        sources = [masked_from]
        step_wise = False
    elif not in_rec_unit:
        if opts.get("in_spatial_dim") is not None and not isinstance(opts["in_spatial_dim"], Dim):
            # RETURNN looks the option up among the input's dim tags: a name is never found, it packs nothing
            raise NetworkError("%s: 'in_spatial_dim' outside a rec loop must be a Dim, got %r (RETURNN asserts)"
                               % (where, opts["in_spatial_dim"]))
        # one packed time axis for the input and every other layer of the network the unit reads
        time = opts.get("out_spatial_dim") or Dim(None, kind=Dim.Types.Spatial, description="%s:masked-time" % name)
        pack = {"class": "_masked_pack", "mask": mask, "out_spatial_dim": time}
        if opts.get("in_spatial_dim") is not None:
            pack["in_spatial_dim"] = opts["in_spatial_dim"]
        packed: Dict[str, str] = {}

        def outer(ref: str) -> str:  # RETURNN: the unit's other references, packed where they have that axis
            if ref not in packed:
                packed[ref] = "%s/_packed_%d" % (name, len(packed))
                out[packed[ref]] = dict(pack, **{"from": [ref], "keep_without_axis": True})
            return "base:" + packed[ref]
        if sources or "data" in _unit_refs(unit):  # no 'from': the unit's "data" is the network's, packed too
            out[name + "/_packed"] = dict(pack, **{"from": sources or ["data"]})
            sources = [name + "/_packed"]
        unit = _map_unit_outer_refs(unit, outer)
    else:
        unit = _map_unit_outer_refs(unit, lambda ref: "base:" + ref)  # per step: the layers of the loop
    if unit["class"] == "subnetwork" and unit.get("from", "data") in ("data", ["data"]):
        inner = dict(unit["subnetwork"]) if isinstance(unit.get("subnetwork"), dict) else unit.get("subnetwork")
        unit_own = {k: v for k, v in unit.items() if k not in ("class", "from", "subnetwork")}
    else:  # the unit is the masked layer itself: RETURNN names its parameters in NAME's scope
        # (RETURNN's unit takes the masked layer's name_scope: its own when it has one, else a stand-in)
        stand_in = "" if is_own_name_scope(opts.get("name_scope")) else EngineScope("")
        inner, unit_own = {"output": dict(unit, name_scope=unit.get("name_scope", stand_in))}, {}
    own = {k: v for k, v in opts.items() if k not in _MASKED_OWN_OPTIONS}
    if masked_from is None:  # RETURNN never uses it: the masked layer starts from its unit's initial output
        own.pop("initial_output", None)  # (nothing made for it, not even initial_output 'var''s parameter)
    sub = {**unit_own, **own, "class": "subnetwork", "from": sources, "subnetwork": inner}
    for key, value in expand_subnetworks({name: sub}, in_rec_unit).items():
        out[key] = dict(value, **{MASKED_BY: mask}) if step_wise else value
    return out


def _unit_refs(unit: Dict[str, Any]) -> List[str]:
    """The layer names a masked_computation unit reads (a subnetwork unit: its ``from``)."""
    if unit.get("class") == "subnetwork":
        return [e for e in _source_list("unit", unit.get("from", "data")) if e != "none"]
    from returnn.tf.net_sources import layer_sources
    return layer_sources("unit", unit)


def _map_unit_outer_refs(unit: Dict[str, Any], outer: Callable[[str], str]) -> Dict[str, Any]:
    """A masked_computation unit whose references to the network around it (RETURNN resolves them
    there: a plain unit's names other than ``data`` (``base:`` ones too), a subnetwork unit's ``base:`` names) are
    mapped by ``outer`` (to a ``base:`` name)."""
    if unit.get("class") == "subnetwork":
        inner = unit.get("subnetwork")
        if not isinstance(inner, dict):
            return unit
        fn = (lambda r: outer(r[len("base:"):]) if r.startswith("base:") and not r.startswith("base:base:") else r)
        return dict(unit, subnetwork={k: map_layer_refs(k, v, fn) if isinstance(v, dict) and v.get("class") != "rec"
                                      else v for k, v in inner.items()})
    # (a plain unit's base:X: RETURNN's get_layer of the masked layer's network takes it from the one around)
    return map_layer_refs("unit", unit, lambda r: r if r == "data" else outer(r))
