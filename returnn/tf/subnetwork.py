"""``{"class": "subnetwork", "from": ..., "subnetwork": {layers}}``: a layer dict inside a layer.

The sub-network is flattened into the enclosing dict before the network is built: its layer
``x`` becomes ``NAME/x`` (so ``"NAME/x"`` from outside reads it, as in RETURNN), inside it
``"data"`` is the subnetwork's input (its ``from``; several sources are concatenated first),
``"data:KEY"`` is still the extern data, ``"base:x"`` is layer ``x`` of the enclosing dict, and
``NAME`` itself is a copy of ``NAME/output`` that keeps the subnetwork layer's own options
(``loss``, ``target``, ``is_output_layer``, ...). Sub-networks nest, and in a rec unit they are
flattened the same way (``prev:x`` inside is ``prev:NAME/x``).
"""
from __future__ import annotations

from typing import Any, Dict, List

from returnn.errors import NetworkError

# options of the subnetwork layer itself (the rest go to the copy of its output)
_OWN_OPTIONS = ("class", "subnetwork", "from", "sources", "concat_sources", "load_on_init", "n_out", "out_dim")


def _source_list(name: str, value: Any) -> List[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return list(value)
    raise NetworkError("layer %r: 'from' must be a name or a list of names, got %r" % (name, value))


def _map_ref(ref: str, prefix: str, data_name: str) -> str:
    if ref == "data":
        return data_name
    if ref.startswith("data:"):
        return ref
    if ref.startswith("base:"):
        return ref[len("base:"):]
    if ref.startswith("prev:"):  # inside a rec unit: the previous step of a layer of this subnetwork
        return "prev:" + prefix + ref[len("prev:"):]
    return prefix + ref


def expand_subnetworks(net_dict: Dict[str, Any]) -> Dict[str, Any]:
    """``net_dict`` with every subnetwork layer flattened (see the module docstring); a dict
    without subnetworks is returned unchanged."""
    if not any(isinstance(o, dict) and o.get("class") == "subnetwork" for o in net_dict.values()):
        return net_dict
    from returnn.tf import layers as _registered  # noqa: F401  (fills LAYER_CLASSES)
    from returnn.tf.layers.base import LAYER_CLASSES
    out: Dict[str, Any] = {}
    for name, opts in net_dict.items():
        if not (isinstance(opts, dict) and opts.get("class") == "subnetwork"):
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
        if len(sources) == 1:
            data_name = sources[0]
        else:
            data_name = prefix + "data"
            out[data_name] = {"class": "copy", "from": sources}
        for inner_name, inner_opts in expand_subnetworks(inner).items():
            if not isinstance(inner_opts, dict):
                raise NetworkError("layer %r: expected a dict with 'class'" % (prefix + inner_name))
            new = dict(inner_opts)
            cls = LAYER_CLASSES.get(new.get("class"))
            default = list(getattr(cls, "default_from", ["data"]))
            new["from"] = [_map_ref(r, prefix, data_name)
                           for r in _source_list(prefix + inner_name, new.pop("sources", new.get("from", default)))]
            for key in getattr(cls, "ref_options", ()):
                if isinstance(new.get(key), str):
                    new[key] = _map_ref(new[key], prefix, data_name)
            out[prefix + inner_name] = new
        own = {k: v for k, v in opts.items() if k not in _OWN_OPTIONS}
        out[name] = dict(own, **{"class": "copy", "from": [prefix + "output"]})
    return out
