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

from typing import Any, Dict, List, Optional

from returnn.errors import NetworkError

# options of the subnetwork layer itself (the rest go to the copy of its output)
_OWN_OPTIONS = ("class", "subnetwork", "from", "sources", "concat_sources", "load_on_init", "n_out", "out_dim")


def _source_list(name: str, value: Any) -> List[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return list(value)
    raise NetworkError("layer %r: 'from' must be a name or a list of names, got %r" % (name, value))


def _map_ref(ref: str, prefix: str, data_name: Optional[str], where: str = "?") -> str:
    if ref == "data":
        if data_name is None:
            raise NetworkError("layer %r reads 'data' but its subnetwork has no 'from'" % where)
        return data_name
    if ref.startswith("data:"):
        return ref
    if ref.startswith("base:"):
        return ref[len("base:"):]
    if ref.startswith("prev:"):  # inside a rec unit: the previous step of a layer of this subnetwork
        return "prev:" + prefix + ref[len("prev:"):]
    return prefix + ref


def _map_reuse(spec: Any, prefix: str, data_name: Optional[str], where: str) -> Any:
    """A ``reuse_params`` value with its layer names as the flattened network names them."""
    if isinstance(spec, str):
        return _map_ref(spec, prefix, data_name, where)
    if not isinstance(spec, dict):
        return spec
    out = dict(spec)
    if isinstance(out.get("reuse_layer"), str):
        out["reuse_layer"] = _map_ref(out["reuse_layer"], prefix, data_name, where)
    if isinstance(out.get("map"), dict):
        out["map"] = {k: _map_reuse(v, prefix, data_name, where) for k, v in out["map"].items()}
    return out


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
    from returnn.tf import layers as _registered  # noqa: F401  (fills LAYER_CLASSES)
    from returnn.tf.layers.base import LAYER_CLASSES
    out: Dict[str, Any] = {}
    for name, opts in net_dict.items():
        cls_name = opts.get("class") if isinstance(opts, dict) else None
        if cls_name == "masked_computation":
            out.update(_expand_masked(name, opts, in_rec_unit))
            continue
        if cls_name == "unmask" and in_rec_unit:  # the loop already kept the last masked value
            own = {k: v for k, v in opts.items() if k not in ("class", "mask", "skip_initial")}
            out[name] = dict(own, **{"class": "copy"})
            continue
        if cls_name != "subnetwork":
            out[name] = opts
            continue
        if opts.get("load_on_init"):
            raise NetworkError("layer %r (subnetwork): 'load_on_init' (parameters from %r) is not supported; load them "
                               "with preload_from_files (with 'prefix' %r)" % (name, opts["load_on_init"], name + "/"))
        inner = opts.get("subnetwork")
        if not isinstance(inner, dict) or "output" not in inner:
            raise NetworkError("layer %r (subnetwork): 'subnetwork' must be a layer dict with an 'output' layer"
                               % name)
        prefix = name + "/"
        sources = _source_list(name, opts.get("from", opts.get("sources", "data")))
        data_name: Optional[str] = None  # no sources: nothing may read "data"
        if len(sources) == 1:
            data_name = sources[0]
        elif sources:
            data_name = prefix + "data"
            out[data_name] = {"class": "copy", "from": sources}
        for inner_name, inner_opts in expand_subnetworks(inner, in_rec_unit).items():
            if not isinstance(inner_opts, dict):
                raise NetworkError("layer %r: expected a dict with 'class'" % (prefix + inner_name))
            new = dict(inner_opts)
            cls = LAYER_CLASSES.get(new.get("class"))
            default = list(getattr(cls, "default_from", ["data"]))
            where = prefix + inner_name
            new["from"] = [_map_ref(r, prefix, data_name, where)
                           for r in _source_list(where, new.pop("sources", new.get("from", default)))]
            for key in tuple(getattr(cls, "ref_options", ())) + (MASKED_BY,):
                if isinstance(new.get(key), str):
                    new[key] = _map_ref(new[key], prefix, data_name, where)
            if new.get("reuse_params"):
                new["reuse_params"] = _map_reuse(new["reuse_params"], prefix, data_name, where)
            out[where] = new
        own = {k: v for k, v in opts.items() if k not in _OWN_OPTIONS}
        out[name] = dict(own, **{"class": "copy", "from": [prefix + "output"]})
    return out


def _expand_masked(name: str, opts: Dict[str, Any], in_rec_unit: bool) -> Dict[str, Any]:
    """RETURNN's ``masked_computation`` (``mask``, ``unit``, ``from``, ``masked_from``) as plain layers.

    The unit becomes a subnetwork ``NAME/...`` (a unit that is no subnetwork is its ``output``),
    and ``NAME`` a copy of its output. Outside a rec loop the subnetwork reads the input packed to
    the masked frames (``NAME/_packed``, see :mod:`returnn.tf.layers.masked`; or ``masked_from``,
    already packed), so its output has the packed time axis (``unmask`` restores the original).
    Inside a rec unit every resulting layer carries :data:`MASKED_BY`: where the mask is False, it
    keeps its previous output and state. Outside loops ``masked_from`` may stand without ``mask``.
    """
    where = "layer %r (masked_computation)" % name
    mask, unit = opts.get("mask"), opts.get("unit")
    if not isinstance(mask, str) and not (mask is None and opts.get("masked_from") and not in_rec_unit):
        raise NetworkError("%s: 'mask' must name a bool layer, got %r" % (where, mask))
    if not isinstance(unit, dict) or "class" not in unit:
        raise NetworkError("%s: 'unit' must be a layer dict with 'class', got %r" % (where, unit))
    sources = _source_list(name, opts.get("from", opts.get("sources", [])))
    masked_from = opts.get("masked_from")
    out: Dict[str, Any] = {}
    if masked_from is not None:
        if in_rec_unit or not isinstance(masked_from, str):
            raise NetworkError("%s: 'masked_from' must name a layer outside rec loops, got %r" % (where, masked_from))
        sources = [masked_from]
    elif sources and not in_rec_unit:
        pack = {"class": "_masked_pack", "from": sources, "mask": mask}
        for key in ("in_spatial_dim", "out_spatial_dim"):
            if opts.get(key) is not None:
                pack[key] = opts[key]
        out[name + "/_packed"] = pack
        sources = [name + "/_packed"]
    if unit["class"] == "subnetwork" and unit.get("from", "data") in ("data", ["data"]):
        inner = dict(unit["subnetwork"]) if isinstance(unit.get("subnetwork"), dict) else unit.get("subnetwork")
        unit_own = {k: v for k, v in unit.items() if k not in ("class", "from", "subnetwork")}
    else:  # the unit is the masked layer itself: RETURNN names its parameters in NAME's scope
        inner, unit_own = {"output": dict(unit, name_scope=unit.get("name_scope", ""))}, {}
    own = {k: v for k, v in opts.items() if k not in _MASKED_OWN_OPTIONS}
    sub = {**unit_own, **own, "class": "subnetwork", "from": sources, "subnetwork": inner}
    for key, value in expand_subnetworks({name: sub}, in_rec_unit).items():
        out[key] = dict(value, **{MASKED_BY: mask}) if in_rec_unit else value
    return out
