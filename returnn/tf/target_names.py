"""What a layer's ``target`` names, as RETURNN resolves it (``LayerBase.transform_config_dict``).

RETURNN first tries the target as a *layer* (``get_layer(target)``), and only when no layer has that
name as a data key: so ``"target": "lin"`` where ``lin`` is a layer of the same network (or of the
same rec unit) means that layer's output, as ``"layer:lin"`` does, and a layer of that name wins
over a data key of the same name. Outside search, the data key must then exist (RETURNN raises
DataNotFound), also on layers without a loss; older RETURNN ignored the target of a layer without a
loss, so configs without a ``behavior_version`` keep that (docs/compat.md, "Old config forms").

Also the target keys a layer names (:func:`layer_target_keys`) and the target its output dim is inferred from
(:func:`infer_target`, :func:`build_with_n_out`: RETURNN's ``n_out`` from the target).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional

from returnn.errors import NetworkError


def _renamed(target: Any, names: Iterable[str], own: str) -> Any:
    if isinstance(target, list):
        return [_renamed(t, names, own) for t in target]
    if isinstance(target, str) and not target.startswith("layer:") and target != own and target in names \
            and target != "data" and not target.startswith("data:"):
        return "layer:" + target
    return target


def layer_named_targets(net_dict: Dict[str, Any]) -> Dict[str, Any]:
    """``net_dict`` with every ``target`` that names a layer of its network (or of its rec unit) as
    ``layer:NAME`` (the dicts that change are copied)."""
    out: Dict[str, Any] = {}
    for name, opts in net_dict.items():
        if isinstance(opts, Mapping):
            new = dict(opts)
            if "target" in new:
                new["target"] = _renamed(new["target"], net_dict, name)
            if isinstance(new.get("unit"), Mapping):
                new["unit"] = layer_named_targets(dict(new["unit"]))
            opts = new if new != opts else opts
        out[name] = opts
    return out


def check_target_keys(net_dict: Mapping[str, Any], known: Iterable[str], search: bool) -> None:
    """RETURNN's DataNotFound for a top-level layer whose ``target`` is neither a layer nor a data key
    (outside search; from behavior_version 1, see the module docstring)."""
    from returnn.tf.layers.norm import behavior_version
    if search or behavior_version() < 1:
        return
    from returnn.tf.layers.rec_net.unit_dict import unit_layers
    known = set(known)
    for name, opts in _with_unit_layers(net_dict, unit_layers, search):
        targets = opts.get("target") if isinstance(opts, Mapping) else None
        for target in targets if isinstance(targets, list) else [targets]:
            if isinstance(target, str) and target not in known and not target.startswith("layer:") \
                    and target not in ("none", ""):
                raise NetworkError("layer %r: target %r is not a data key (known: %s); RETURNN raises DataNotFound"
                                   % (name, target, ", ".join(sorted(known))))


# RETURNN's layer classes whose output template always goes through LayerBase.get_out_data_from_opts (there
# _post_init_output reads size_target): the class's own or by super() (1.20261022)
_SIZE_TARGET_READERS = frozenset((
    "linear", "softmax", "forward", "hidden", "complex_to_alternating_real", "signal_masking",
    "first_t_frames_noise_estimator", "combine", "eval", "compare"))


def reads_size_target(opts: Mapping[str, Any]) -> bool:
    """Whether RETURNN reads the ``size_target`` of a layer of these options: its _post_init_output for the classes
    of _SIZE_TARGET_READERS (copy and cast only with out_type or n_out); any other class ignores it."""
    cls = opts.get("class")
    return cls in _SIZE_TARGET_READERS or (cls in ("copy", "cast") and bool(
        opts.get("out_type") or opts.get("n_out") is not None))


def check_size_target_keys(net_dict: Mapping[str, Any], known: Iterable[str], search: bool, eval_flag: bool) -> None:
    """RETURNN's "target %r unknown" (LayerBase._static_get_target_value asserts) for a rec unit's sub-layer whose
    ``size_target`` is no data key, in a network that evaluates (its _post_init_output reads the size_target only then,
    and only for the classes whose template goes through LayerBase's: _SIZE_TARGET_READERS, copy and cast with
    out_type or n_out; a top-level layer's is checked where its dims are filled, network._leading_data)."""
    if not eval_flag:
        return
    from returnn.tf.layers.rec_net.unit_dict import unit_layers
    known = set(known)
    for name, opts in _with_unit_layers(net_dict, unit_layers, search):
        size_target = opts.get("size_target") if isinstance(opts, Mapping) and "/" in name and \
            reads_size_target(opts) else None
        if isinstance(size_target, str) and size_target not in known and not size_target.startswith("layer:") \
                and size_target not in ("none", ""):
            raise NetworkError("layer %r: size_target %r is not a data key (known: %s); RETURNN asserts 'target "
                               "unknown'" % (name, size_target, ", ".join(sorted(known))))


def _with_unit_layers(net_dict: Mapping[str, Any], unit_layers: Any, search: bool) -> Iterable[Any]:
    """(name, opts) of the layers of ``net_dict`` and of the sub-layers of its rec units that RETURNN
    makes a template of (``rec/sub``): RETURNN's rec sub-network looks a sub-layer's target up in the data too
    (``network.get_extern_data``) outside search; its templates start at ``end`` too, also where the loop does
    not search (it then ends by its target's length and never builds ``end``)."""
    for name, opts in net_dict.items():
        yield name, opts
        unit = opts.get("unit") if isinstance(opts, Mapping) else None
        if isinstance(unit, Mapping) and "output" in unit:
            for sub, sub_opts in unit_layers(unit, name, search, ("end",) if "end" in unit else ()).items():
                yield "%s/%s" % (name, sub), sub_opts


def layer_target_keys(opts: Mapping[str, Any], default_target: str) -> List[str]:
    """Target keys a layer (and the sub-layers of a rec unit) name."""
    out = [opts.get("target") or (default_target if opts.get("loss") else None)]
    unit = opts.get("unit")
    if isinstance(unit, Mapping):
        out += [layer_target_keys(sub, default_target) for sub in unit.values() if isinstance(sub, Mapping)]
    flat: List[str] = []
    for t in out:
        flat += t if isinstance(t, list) else [t]
    return [t for t in flat if isinstance(t, str)]


def infer_target(opts: Mapping[str, Any], default_target: str, name: str = "?") -> Optional[str]:
    """The target a layer's output dim is inferred from (RETURNN): its ``target`` (the first of a
    list), else the default target when its loss needs one and it sets no ``target`` (RETURNN: ``"target": None``
    given is no target); None otherwise."""
    target = opts.get("target")
    if isinstance(target, (list, tuple)):
        target = target[0] if target else None
    if target:
        return target if isinstance(target, str) else None
    if "target" in opts:
        return None
    loss = opts.get("loss")
    if isinstance(loss, str) and loss:
        from returnn.tf.losses import get_loss_class  # (the losses import the layers, which import this module)
        cls = get_loss_class(loss, name)  # an unknown loss: one line naming it (before n_out is missed)
        return default_target if cls.need_target else None
    return None


# classes whose output dim RETURNN does not assert against the n_out a target gives (build_with_n_out): they
# take n_out for themselves (merge_dims, get_last_hidden_state, rec), refuse another size themselves (choice),
# relabel the copy's dim (CopyLayer's get_out_data_from_opts: _RELABELLING) or give a dummy (framewise_statistics:
# outputs 0 here, docs/compat.md; RETURNN's asserts, its dim being None)
_RELABELLING = frozenset({"batch_norm", "cast", "copy", "dropout", "scaled_grad"})
_TARGET_N_OUT_UNCHECKED = frozenset({"merge_dims", "get_last_hidden_state", "rec", "choice",
                                     "framewise_statistics"}) | _RELABELLING


def build_with_n_out(build: Callable[[Dict[str, Any]], "Layer"], opts: Dict[str, Any],
                     fallback: Optional[Dict[str, Any]], in_rec_unit: bool = False) -> "Layer":  # noqa: F821
    """``build(opts)``; when that fails for want of ``n_out`` and the target gives one
    (``fallback``, see ``TFNetwork._infer_n_out``), ``build`` with it. ``in_rec_unit``: a rec unit's sub-layer,
    where RETURNN's relabelled template (of the target's dim) meets the value: its rec cell asserts they match
    (the loop's output, its accumulated and previous frames)."""
    if not fallback:
        return build(opts)
    try:
        layer = build(opts)
    except NetworkError as exc:
        if "needs 'n_out'" not in str(exc) and "needs n_out" not in str(exc):
            raise
        return build(dict(opts, **fallback))
    # RETURNN passes the target's dim as n_out to every layer class but linear/softmax, and its LayerBase
    # asserts the output's dim equals it; not checked here: what keeps n_out for itself, what refuses another
    # size itself, and what RETURNN's CopyLayer family relabels (the values stay those of the copy)
    unchecked = _TARGET_N_OUT_UNCHECKED - (_RELABELLING if in_rec_unit else frozenset())
    if opts.get("class") not in unchecked and layer.output.dim != fallback["n_out"]:
        raise NetworkError("%s: its target's dim %r (RETURNN's n_out from the target) does not match the output dim "
                           "%r (RETURNN asserts): set n_out or out_dim" % (layer.desc, fallback["n_out"],
                                                                          layer.output.dim))
    return layer
