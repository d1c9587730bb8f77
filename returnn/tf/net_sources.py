"""The sources of the layers of a net dict and the order to build them in: what ``from`` (and
the layer-valued options) name, ``data:KEY`` references, ``rec/sub`` sub-layer references, and a
dependency order with one-line errors for unknown sources and cycles (used by
:class:`returnn.tf.network.TFNetwork`)."""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Tuple

from returnn.errors import NetworkError
from returnn.tf.layers.base import LAYER_CLASSES
from returnn.tf.layers.rec_state import explicit_state_refs, state_layer_refs
from returnn.tf.net_dict import AXIS_PAIR_FROM_CLASSES, FROM_DEFAULT, from_entries, source_name

# RETURNN's layer classes whose transform_config_dict fills in "from" itself (their inputs are options, or
# none): only these may leave "from" out from behavior_version 1 on (check_from_given)
FROM_OPTIONAL_CLASSES = frozenset((
    ":i", "choice", "choice_get_beam_scores", "choice_get_src_beams", "constant", "ctc_loss", "decide_keep_beam",
    "edit_distance", "generic_attention", "global_train_step", "gradient", "image_summary", "masked_computation",
    "parametric_wiener_filter", "positional_encoding", "rand_int", "random", "random_state_init", "range",
    "rec_last_output", "search_sorted", "signal_masking", "source", "sparse_softmax_cross_entropy_with_logits",
    "subnetwork", "switch", "train_flag", "variable", "variable_assign", "variable_read"))


def check_from_given(layer_name: str, opts: Mapping[str, Any]) -> None:
    """RETURNN (behavior_version >= 1): a layer built without "from" is refused, unless its class fills
    it in (:data:`FROM_OPTIONAL_CLASSES`); before that version "data" is its source."""
    if not opts.get(FROM_DEFAULT) and ("from" in opts or "sources" in opts):
        return
    if opts.get("class") in FROM_OPTIONAL_CLASSES:
        return
    from returnn.util.basic import BehaviorVersion
    if BehaviorVersion.get() >= 1:
        raise NetworkError('layer %r: missing "from" (RETURNN requires it from behavior_version 1 on; "from": [] '
                           'for no sources)' % layer_name)


def parse_source(name: str) -> Tuple[str, str]:
    """'data' -> ('data', 'data'); 'data:classes' -> ('data', 'classes'); 'fw0' -> ('layer', 'fw0')."""
    if name == "data":
        return "data", "data"
    if name.startswith("data:"):
        return "data", name[len("data:"):]
    return "layer", name


def ref_option_value(value: str) -> str:
    """The layer a reference option names: RETURNN's ``layer:X`` (a ``target`` read as a layer) is X."""
    return value[len("layer:"):] if value.startswith("layer:") else value


def layer_sources(name: str, opts: Dict[str, Any], default_target: str = "classes", search: bool = False) -> List[str]:
    """The ``from`` list of a layer (``source`` layers read ``data_key``), followed by the layers
    named in its reference options (e.g. ``size_base``; see ``Layer.ref_options``). A class with
    ``outer_sources`` (a rec sub-network) lists its own."""
    if opts.get("class") == "source":
        return ["data:" + opts.get("data_key", "data")]
    cls = LAYER_CLASSES.get(opts.get("class"))
    if cls is not None and cls.class_selector is not None:
        cls = cls.class_selector(opts) or cls
    if hasattr(cls, "outer_sources"):
        return cls.outer_sources(name, opts, default_target, search)
    src = opts.get("from", list(getattr(cls, "default_from", ["data"])))
    if not isinstance(src, (str, list, tuple)):
        raise NetworkError("layer %r: 'from' must be a name or a list of names, got %r" % (name, src))
    entries = from_entries(src)
    if any(isinstance(e, (list, tuple)) for e in entries) and opts.get("class") not in AXIS_PAIR_FROM_CLASSES:
        raise NetworkError("layer %r: 'from' entries (layer, axis) are for %s layers only (RETURNN's rule), got %r"
                           % (name, " and ".join(sorted(AXIS_PAIR_FROM_CLASSES)), src))
    src = [source_name(e) for e in entries if e != "none"]  # RETURNN: "none" is no source
    for e in src:
        if not isinstance(e, str):
            raise NetworkError("layer %r: 'from' must be a name or a list of names, got %r" % (name, opts.get("from")))
    refs = [ref_option_value(opts[k]) for k in getattr(cls, "ref_options", ()) if isinstance(opts.get(k), str)]
    if getattr(cls, "initial_state_refs", False):  # recurrent units: the layers initial_state and state name
        refs += state_layer_refs(opts.get("initial_state")) + explicit_state_refs(opts.get("state"))
    return list(src) + refs


def topological_order(deps: Dict[str, List[str]], data_keys, net_dict: Mapping[str, Any]) -> List[str]:
    """Layer names so that every layer comes after its dependencies (``deps``: layer -> its
    source names; ``"rec/sub"`` counts as the rec sub-network ``rec`` of ``net_dict``)."""
    order: List[str] = []
    state: Dict[str, int] = {}  # 1 = visiting, 2 = done

    def visit(name: str, path: List[str]) -> None:
        if state.get(name) == 2:
            return
        if state.get(name) == 1:
            cycle = path[path.index(name):] + [name]
            raise NetworkError("dependency cycle between layers: %s" % " -> ".join(cycle))
        state[name] = 1
        for src in deps[name]:
            kind, ref = parse_source(src)
            if kind == "data":
                if ref not in data_keys:
                    raise NetworkError("layer %r: 'from' names unknown data key %r (known: %s)"
                                       % (name, ref, ", ".join(sorted(data_keys))))
                continue
            ref = base_layer_name(ref, net_dict)
            if ref not in deps:
                raise NetworkError("layer %r: 'from' names unknown layer %r" % (name, ref))
            visit(ref, path + [name])
        state[name] = 2
        order.append(name)

    for layer_name in deps:
        visit(layer_name, [])
    return order


def base_layer_name(ref: str, layers) -> str:
    """``"rec/sub"`` -> ``"rec"`` when ``ref`` is no layer itself but ``rec`` is a layer with
    sub-layers (a rec sub-network, or a class listing ``sub_output_names`` such as forced_align's
    ``scores``; ``layers`` maps names to their dicts or built layers)."""
    if ref not in layers and "/" in ref:
        parts = ref.split("/")
        for cut in range(len(parts) - 1, 0, -1):  # a flattened sub-network's layer ("sub/split/0"): the longest parent
            parent, sub = "/".join(parts[:cut]), "/".join(parts[cut:])
            layer = layers.get(parent)
            if isinstance(layer, Mapping):
                cls = LAYER_CLASSES.get(layer.get("class"))
                if isinstance(layer.get("unit"), Mapping) or (cls is not None and cls.has_sub_output(layer, sub)):
                    return parent
            elif hasattr(layer, "sub_template"):
                return parent
    return ref


# RETURNN's initial_output keywords; any other string names a layer (LayerBase.transform_config_dict: get_layer)
INITIAL_OUTPUT_KEYWORDS = frozenset(("zeros", "ones", "var", "keep_over_epoch", "keep_over_epoch_no_init", "apply(0)"))


def check_initial_output_refs(net_dict: Mapping[str, Any], data_keys) -> None:
    """RETURNN's LayerNotFound / DataNotFound for a layer of the net (not of a rec unit) whose ``initial_output``
    names no layer or data key: it resolves it with get_layer also where nothing reads it (since 2019; older
    RETURNN ignored it there, kept without a behavior_version as the caller decides)."""
    for name, opts in net_dict.items():
        ref = opts.get("initial_output") if isinstance(opts, Mapping) else None
        if not isinstance(ref, str) or not ref or ref in INITIAL_OUTPUT_KEYWORDS:
            continue
        scope = name.split("/")[:-1]  # a flattened subnetwork's layer: its name relative to that subnetwork
        while ref.startswith("base:") and scope:
            ref, scope = ref[len("base:"):], scope[:-1]
        kind, key = parse_source(ref)
        key = "/".join(scope + [key]) if kind != "data" else key
        if kind == "data" and key not in data_keys:
            raise NetworkError("layer %r: 'initial_output' names unknown data key %r (known: %s)"
                               % (name, key, ", ".join(sorted(data_keys))))
        if kind != "data" and base_layer_name(key, net_dict) not in net_dict:
            raise NetworkError("layer %r: 'initial_output' %r names no layer of its network (RETURNN looks it up "
                               "as a layer: LayerNotFound)" % (name, opts["initial_output"]))
