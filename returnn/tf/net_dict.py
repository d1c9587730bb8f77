"""Pure analysis of a (flattened) net dict: which layers RETURNN builds.

RETURNN constructs only what is needed: in a network, the layer ``output``, every layer with a
``loss`` or ``is_output_layer``, the layers that register data (``register_as_extern_data``), and
what they depend on; in a subnetwork that is built, the same rule among its own layers (here
``NAME/x`` after flattening, :mod:`returnn.tf.subnetwork`); in a rec unit, ``output``, layers
with a loss or ``is_output_layer``, and ``end`` when searching. A layer nothing needs gets no
parameters, no L2, no computation. ``only_on_search`` layers are no roots outside networks built for
search, ``only_on_eval`` layers none in the forward task (a layer that reads one builds it); in a rec unit
neither flag counts (RETURNN's rec cell takes its roots without looking at them).

No TensorFlow here: the network (:mod:`returnn.tf.network`) and rec units
(:mod:`returnn.tf.layers.rec_net`) both use it.
"""
from __future__ import annotations

import contextvars
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Set


# Classes whose "from" entries may be (layer, axis) pairs (RETURNN's concat); the layer reads the axes
# from its own opts["from"], the network gives it the templates/values of the layers in order.
AXIS_PAIR_FROM_CLASSES = frozenset(("concat",))


def source_name(entry: Any) -> Any:
    """The layer name of one ``from`` entry: the entry itself, or the first of a ``(layer, axis)`` pair."""
    if isinstance(entry, (tuple, list)) and len(entry) == 2 and isinstance(entry[0], str):
        return entry[0]
    return entry


def has_axis_pairs(value: Any) -> bool:
    """Whether a ``from`` value holds ``(layer, axis)`` pairs."""
    return isinstance(value, (list, tuple)) and any(isinstance(v, (list, tuple)) for v in value)


def from_entries(value: Any) -> List[Any]:
    """A ``from`` value as a list of entries (RETURNN: a string is one name, a list or tuple lists
    the entries: names or ``(layer, axis)`` pairs)."""
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


# Private options of the layers of RETURNN's extra nets (returnn.tf.extra_nets): the main network's name
# of the layer, and whether its extra net is built for search (a layer's own search flag)
EXTRA_OF, SEARCH = "_extra_of", "_search"
# A flattened layer (subnetwork, masked_computation unit) whose dict had no "from": its "from" is the default
# (returnn.tf.net_sources.check_from_given tells whether RETURNN accepts that)
FROM_DEFAULT = "_from_default"
EXTRA_NET_OPTIONS = (EXTRA_OF, SEARCH, FROM_DEFAULT)
# Whether the network being built is the search task's (set while a TFNetwork builds): only there rec units lose
# their layers' losses (below); a search in a training network (extra.search) computes them, as RETURNN does
SEARCH_TASK: contextvars.ContextVar = contextvars.ContextVar("search_task", default=True)
# Whether the network being built trains (RETURNN's train_flag): a search there runs as long as the rec layer's target
TRAIN_NET: contextvars.ContextVar = contextvars.ContextVar("train_net", default=False)
# Whether the network being built evaluates (RETURNN's eval_flag: every task but forward): only then do rec units
# and subnetworks build their layers with a loss for the loss's sake (RETURNN: "only collect losses if we need them")
EVAL_NET: contextvars.ContextVar = contextvars.ContextVar("eval_net", default=True)


def search_length_key(opts: Mapping[str, Any]) -> Optional[str]:
    """The data key whose lengths a searching rec layer takes as its own (RETURNN: the rec layer's undefined
    time dim is its ``size_target``'s, else in a training network its ``target``'s; the search then runs that
    many steps, ``end`` does not end it). In the search task: its ``target``'s where a choice of its unit that
    does not search is fed that target (RETURNN reads it with the beam, which gives the rec layer's time dim,
    its target's, sizes in the search); None otherwise."""
    target = opts.get("target")
    target = target[0] if isinstance(target, (list, tuple)) and target else target
    if SEARCH_TASK.get():
        return target if isinstance(target, str) and _fed_in_search(opts.get("unit"), target) else None
    size_target = opts.get("size_target")
    if isinstance(size_target, str):
        return size_target
    return target if TRAIN_NET.get() and isinstance(target, str) else None


def _fed_in_search(unit: Any, key: str) -> bool:
    """Whether a choice of ``unit`` (a rec layer's dict) with ``search: False`` is fed the data ``key``."""
    from returnn.tf.layers.rec_net.deps import fed_target
    if not isinstance(unit, Mapping):
        return False
    return any(isinstance(o, Mapping) and fed_target(o, True) and key in from_entries(o.get("target"))
               for o in unit.values())


def without_search_task_losses(unit: Dict[str, Any], search: bool) -> Dict[str, Any]:
    """A rec unit's layers as built: in the search task's network without their losses (RETURNN neither computes
    them nor builds a layer for its loss alone there: a transducer's full-sum loss layer in the unit is skipped in
    decoding). Its ``only_on_search``/``only_on_eval`` layers stay: RETURNN's rec cell does not look at the flags
    (at top level they are no roots, :func:`is_root`, and a layer that reads one builds it)."""
    def no_loss(opts: Any) -> Any:
        if not (SEARCH_TASK.get() and isinstance(opts, Mapping) and opts.get(SEARCH, search) and opts.get("loss")):
            return opts
        return {k: v for k, v in opts.items() if k not in ("loss", "loss_scale", "loss_opts")}
    if all(no_loss(v) is v for v in unit.values()):
        return unit
    return {k: no_loss(v) for k, v in unit.items()}


def is_root(local_name: str, opts: Any, in_rec_unit: bool = False, search: bool = False, nested: bool = False) -> bool:
    """Whether RETURNN builds layer ``local_name`` (its name in its own network) for its own sake
    (``nested``: in a rec unit or subnetwork, where a loss counts only in a network that evaluates)."""
    if not isinstance(opts, Mapping):
        return False
    # RETURNN skips them as roots only (ignore_layer, construct_from_dict's: not in a rec unit, whose cell takes
    # its roots itself); a layer that reads one builds it (get_layer)
    if (nested or not in_rec_unit) and ((opts.get("only_on_search") and not opts.get(SEARCH, search))
                            or (opts.get("only_on_eval") and not EVAL_NET.get())):
        return False
    if local_name == "output" or opts.get("is_output_layer"):
        return True
    if opts.get("loss"):
        return not (nested or in_rec_unit) or EVAL_NET.get()
    if in_rec_unit:  # RETURNN's rec cell also builds the layers with need_last (read by rec_last_output)
        return (search and local_name == "end") or bool(opts.get("need_last"))
    return bool(opts.get("register_as_extern_data"))


def owner(name: str, net_dict: Mapping[str, Any]) -> Optional[str]:
    """The flattened subnetwork ``name`` belongs to (``"sub/x"`` -> ``"sub"``), or None at top level."""
    parts = name.split("/")
    for i in range(len(parts) - 1, 0, -1):
        prefix = "/".join(parts[:i])
        if prefix in net_dict:
            return prefix
    return None


def needed_layers(net_dict: Mapping[str, Any], refs_of: Callable[[str], Iterable[str]], in_rec_unit: bool = False,
                  search: bool = False, extra_roots: Iterable[str] = ()) -> List[str]:
    """The layers of ``net_dict`` RETURNN builds, in dict order. ``refs_of(name)``: the names of
    ``net_dict`` that layer reads (other names are ignored here; building reports them)."""
    members: Dict[Optional[str], List[str]] = {}
    for name in net_dict:
        members.setdefault(owner(name, net_dict), []).append(name)

    def local(name: str, parent: Optional[str]) -> str:
        return name if parent is None else name[len(parent) + 1:]

    def roots(parent: Optional[str]) -> List[str]:
        return [n for n in members.get(parent, ()) if is_root(local(n, parent), net_dict[n], in_rec_unit, search,
                                                              nested=parent is not None)]

    needed: Set[str] = set()
    opened: Set[Optional[str]] = {None}
    todo = roots(None) + [n for n in extra_roots if n in net_dict]
    while todo:
        name = todo.pop()
        if name in needed:
            continue
        needed.add(name)
        todo.extend(r for r in refs_of(name) if r in net_dict and r not in needed)
        # a subnetwork that is built builds its own roots; so does every subnetwork around it
        parent = name if name in members else owner(name, net_dict)
        while parent is not None and parent not in opened:
            opened.add(parent)
            todo.extend(roots(parent))
            todo.append(parent)
            parent = owner(parent, net_dict)
    return [n for n in net_dict if n in needed]
