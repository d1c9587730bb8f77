"""Dependency analysis of a rec sub-network (``unit`` dict).

A reference in a sub-layer's ``from`` (or another layer-valued option) is one of:

- ``NAME``: the sub-layer NAME of the same step,
- ``prev:NAME``: NAME's output of the previous step (``initial_output`` at step 0),
- ``base:NAME``: the layer NAME of the outer network (fixed over steps),
- ``data`` / ``data:KEY``: the current input frame (``data:source``) or an extern data key,
- ``:i``: the step index.

A sub-layer must run inside the step loop when it lies on a dependency cycle (which always goes
through a ``prev:`` edge), reads the step index ``:i``, is forced into the loop by the caller (the
choices and ``end`` in search), belongs to a ``masked_computation`` (it keeps its previous output
where the mask is False), or reads (same-step or ``prev:``) a layer that runs in the loop.
All others are computed once over the whole sequence ("move out of loop"), which gives the same
numbers per step. With teacher forcing, a ``choice`` with a target is the target itself: its
``from`` is no dependency, which breaks the usual output -> embedding -> state -> output cycle.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from returnn.errors import NetworkError, known_list
from returnn.tf.net_dict import from_entries, needed_layers, source_name
from returnn.tf.net_sources import ref_option_value
from returnn.tf.subnetwork import MASKED_BY

# Options whose string values name layers (besides "from"), declared once here.
LAYER_REF_OPTS = ("base", "base_ctx", "weights", "keys", "values", "condition", "true_from", "false_from",
                  "explicit_search_source", "explicit_search_sources", "size_base", "position", "mask", MASKED_BY)
# Classes whose value in training is their target (teacher forcing), not a function of their "from".
TARGET_CHOICE_CLASSES = frozenset(("choice",))
# Classes (not implemented here) whose "from" defaults to nothing; implemented ones say it themselves.
NO_DEFAULT_FROM_CLASSES = frozenset(("generic_attention", "constant", "range", "random", "rand_int", "switch",
                                     "train_flag", "global_train_step"))
# A rec unit's "X/sub" (a sub-output of unit layer X, e.g. split's "split/0"): a layer of its own that
# runs where X runs (returnn.tf.layers.rec_net.layer.SubOutputLayer)
SUB_OUTPUT_CLASS = "_sub_output"
INITIAL_OUTPUT_KEYWORDS = frozenset(("zeros", "ones", "var", "keep_over_epoch", "apply(0)"))


@dataclass(frozen=True)
class Ref:
    """One parsed layer reference: ``kind`` in 'self', 'prev', 'base', 'data', 'step'; ``name``."""

    kind: str
    name: str

    @classmethod
    def parse(cls, ref: str) -> "Ref":
        """Parses a reference string as written in a sub-layer's ``from``."""
        if ref == ":i":
            return cls("step", ":i")
        if ref == "data" or ref.startswith("data:"):
            return cls("data", ref.partition(":")[2] or "source")
        for kind in ("prev", "base"):
            if ref.startswith(kind + ":"):
                return cls(kind, ref[len(kind) + 1:])
        return cls("self", ref)


def _as_list(value: Any) -> List[Any]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def _default_from(class_name: Any) -> List[str]:
    """The sources of a sub-layer without ``from``: its class's ``default_from`` (the registry is
    the one place that says it), else ``data`` (``data:source`` in a unit)."""
    from returnn.tf import layers as _registered  # noqa: F401  (fills the registry)
    from returnn.tf.layers.base import LAYER_CLASSES
    if class_name in NO_DEFAULT_FROM_CLASSES:
        return []
    cls = LAYER_CLASSES.get(class_name)
    return list(cls.default_from) if cls is not None else ["data"]


def _stays_in_loop(opts: Mapping[str, Any], has_end: bool = False) -> bool:
    """Whether this layer never runs over the whole sequence (moved out of the loop): its class
    says so (``stays_in_loop``, e.g. ``cum_concat``; ``stays_in_loop_with_end`` when the unit has an
    ``end`` layer: ``random``, which RETURNN collocates with it), or its state starts from its
    ``initial_output`` (``state_from_initial_output``: a cumsum with an initial_output; a reverse one is moved out
    where it can be, as RETURNN, which then adds the initial output to the whole sum)."""
    from returnn.tf.layers.base import LAYER_CLASSES
    cls = LAYER_CLASSES.get(opts.get("class"))
    return bool(getattr(cls, "stays_in_loop", False)) or (has_end and getattr(cls, "stays_in_loop_with_end", False)) or (
        bool(getattr(cls, "state_from_initial_output", False)) and opts.get("initial_output") is not None
        and not opts.get("reverse"))


def _state_from_initial_output(opts: Mapping[str, Any]) -> bool:
    """Whether only its initial_output keeps this layer in the loop (see :func:`_stays_in_loop`)."""
    from returnn.tf.layers.base import LAYER_CLASSES
    cls = LAYER_CLASSES.get(opts.get("class"))
    return not getattr(cls, "stays_in_loop", False) and not getattr(cls, "stays_in_loop_with_end", False) and bool(
        getattr(cls, "state_from_initial_output", False))


def _ref_options(class_name: Any) -> List[str]:
    """Options whose string values name layers: the class's own ``ref_options`` (the registry
    says it) plus the names of :data:`LAYER_REF_OPTS` for classes not implemented here."""
    from returnn.tf.layers.base import LAYER_CLASSES
    cls = LAYER_CLASSES.get(class_name)
    own = list(getattr(cls, "ref_options", ())) if cls is not None else []
    return own + [o for o in LAYER_REF_OPTS if o not in own]


def layer_ref_options(class_name: Any) -> List[str]:
    """The options of a sub-layer of class ``class_name`` whose string values name layers."""
    return _ref_options(class_name)


def layer_refs(name: str, layer: Mapping[str, Any], rec_name: str = "?") -> List[Ref]:
    """All references of the sub-layer ``name`` (``from``, layer-valued options, a unit's ``state``)."""
    if not isinstance(layer, Mapping):
        raise NetworkError("rec layer %r, sub-layer %r: expected a dict, got %r" % (rec_name, name, layer))
    raw: List[Any] = [source_name(e) for e in from_entries(layer.get("from", _default_from(layer.get("class"))))
                      if e != "none"]
    for opt in _ref_options(layer.get("class")):
        value = layer.get(opt)
        raw.extend(ref_option_value(v) for v in (value.values() if isinstance(value, Mapping) else _as_list(value))
                   if isinstance(v, str))
    # RETURNN's extra_deps (copy family, reshape): layers built and run with this one, values unused
    raw.extend(v for v in _as_list(layer.get("extra_deps")) if isinstance(v, str))
    if layer.get("class") in ("rec", "rnn_cell") and layer.get("state") is not None:  # read at each step
        from returnn.tf.layers.rec_state import explicit_state_refs
        raw.extend(explicit_state_refs(layer["state"]))
    refs = []
    for r in raw:
        if not isinstance(r, str):
            raise NetworkError("rec layer %r, sub-layer %r: 'from' entries must be layer names, got %r"
                               % (rec_name, name, r))
        refs.append(Ref.parse(r))
    return refs


def initial_output_ref(layer: Mapping[str, Any]) -> Optional[Ref]:
    """The layer named by ``initial_output`` (a string that is no keyword), else None."""
    init = layer.get("initial_output")
    if isinstance(init, str) and init not in INITIAL_OUTPUT_KEYWORDS:
        ref = Ref.parse(init)
        return ref if ref.kind in ("self", "base", "data") else Ref("self", init)
    return None


def initial_refs(layer: Mapping[str, Any]) -> List[Ref]:
    """The layers read once before the loop: ``initial_output``'s and ``initial_state``'s (of
    recurrent units; see :mod:`returnn.tf.layers.rec_state`)."""
    from returnn.tf.layers.rec_state import state_layer_refs
    out = [r for r in (initial_output_ref(layer),) if r is not None]
    if layer.get("class") in ("rec", "rnn_cell") and isinstance(layer.get("unit", "lstm"), str):
        out += [Ref.parse(r) for r in state_layer_refs(layer.get("initial_state"))]
    return out


@dataclass
class UnitPlan:
    """The analysed unit: in-loop layers in step order, out-of-loop layers in dependency order."""

    in_loop: List[str]
    out_of_loop: List[str]
    after_loop: List[str]  # read the loop's layers but nothing in the loop reads them: run on the stacked outputs
    prev_used: Set[str]  # layers whose previous-step output is read (carried over steps)
    base_used: Set[str]
    deps: Dict[str, List[Ref]]


def _toposort(names: Sequence[str], deps: Mapping[str, List[Ref]], rec_name: str) -> List[str]:
    """Same-step dependency order; a cycle without ``prev:`` is a NetworkError naming its layers."""
    order: List[str] = []
    state: Dict[str, int] = {}  # 1 visiting, 2 done

    def visit(n: str, path: Tuple[str, ...]) -> None:
        if state.get(n) == 2:
            return
        if state.get(n) == 1:
            cycle = path[path.index(n):] + (n,)
            raise NetworkError("rec layer %r: sub-layer %r is in a cycle without 'prev:' (%s)"
                               % (rec_name, n, " -> ".join(cycle)))
        state[n] = 1
        for r in deps[n]:
            if r.kind == "self":
                visit(r.name, path + (n,))
        state[n] = 2
        order.append(n)

    for n in names:
        visit(n, ())
    return order


def _on_cycle(names: Sequence[str], edges: Mapping[str, Set[str]]) -> Set[str]:
    """The names on a dependency cycle (a self-loop counts), by strongly connected components."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    result: Set[str] = set()

    def connect(v: str) -> None:  # Tarjan's algorithm; units are small, recursion depth is fine
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in edges[v]:
                result.update(comp)

    for n in names:
        if n not in index:
            connect(n)
    return result


def analyse_unit(unit: Mapping[str, Any], rec_name: str, base_layers: Sequence[str] = (),
                 has_source: bool = True, step_only: Sequence[str] = (), teacher_forcing: bool = False) -> UnitPlan:
    """Checks ``unit`` and splits it into per-step and whole-sequence layers.

    ``base_layers``: names of the outer network (for ``base:`` checks; empty skips the check).
    ``has_source``: whether the rec layer has a source (``data:source`` is valid).
    ``step_only``: extra layer names that must stay in the loop (e.g. ``end`` and choices in search).
    ``teacher_forcing``: choices with a target are their target (training, evaluation).
    """
    if not isinstance(unit, Mapping) or not unit:
        raise NetworkError("rec layer %r: 'unit' must be a non-empty dict of layers" % rec_name)
    if "output" not in unit:
        raise NetworkError("rec layer %r: unit has no 'output' layer (layers: %s)" % (rec_name, known_list(unit)))
    names = list(unit)
    deps: Dict[str, List[Ref]] = {}
    for n in names:
        # a teacher-forced choice is its target: RETURNN does not build what its 'from' names
        refs = [] if fed_target(unit[n], not teacher_forcing) else layer_refs(n, unit[n], rec_name)
        refs = refs + initial_refs(unit[n])
        for r in refs:
            where = "rec layer %r, sub-layer %r" % (rec_name, n)
            if r.kind in ("self", "prev") and r.name not in unit:
                raise NetworkError("%s: unknown layer %r%s (unit layers: %s)"
                                   % (where, r.name, " in 'prev:'" if r.kind == "prev" else "", known_list(unit)))
            if r.kind == "base" and base_layers and r.name not in base_layers:
                raise NetworkError("%s: unknown outer layer 'base:%s' (known: %s)"
                                   % (where, r.name, known_list(base_layers)))
            if r.kind == "data" and r.name == "source" and not has_source:
                raise NetworkError("%s: 'data:source' but the rec layer has no 'from'" % where)
        deps[n] = refs
    # initial_output and initial_state references are read once before the loop, not per step: no same-step edge.
    step_deps = {n: layer_refs(n, unit[n], rec_name) for n in names}
    step_deps = {n: ([] if fed_target(unit[n], not teacher_forcing) else refs) for n, refs in step_deps.items()}
    order = _toposort(names, step_deps, rec_name)
    prev_used = {r.name for n in names for r in step_deps[n] if r.kind == "prev"}
    edges = {n: {r.name for r in step_deps[n] if r.kind in ("self", "prev")} for n in names}
    in_loop: Set[str] = _on_cycle(names, edges) | set(step_only)
    masked = {n for n in names if unit[n].get(MASKED_BY)}  # a masked_computation's layers keep their
    in_loop |= masked  # previous output and state where the mask is False: they run step by step
    prev_used |= masked
    in_loop |= {n for n in names if _stays_in_loop(unit[n], "end" in unit)}
    core = set(in_loop)  # what must run step by step: cycles, forced layers and what they read in the loop
    # readers of ':i' are not moved before the loop (RETURNN's input_can_move_out); after it (nothing in the
    # loop reads them) they run over the stacked frames, ':i' there the range of the loop's frames; those
    # that also read a base: layer (a gather of the encoder frame at :i) stay in the loop (one frame per step)
    step_readers = {n for n in names if any(r.kind == "step" for r in step_deps[n])}
    core |= {n for n in step_readers if any(r.kind == "base" for r in step_deps[n])}
    in_loop |= step_readers | core
    changed = True
    while changed:  # closure: a layer reading an in-loop layer (same step or prev:) is in the loop
        changed = False
        for n in names:
            if n not in in_loop and edges[n] & in_loop:
                in_loop.add(n)
                changed = True
    # a sub-output of a layer in the loop runs in it too (the loop's stacked values carry no sub-outputs)
    core |= {n for n in in_loop if unit[n].get("class") == SUB_OUTPUT_CLASS and edges[n] & core}
    todo = list(core)
    while todo:
        n = todo.pop()
        for m in edges[n] & in_loop:
            if m not in core:
                core.add(m)
                todo.append(m)
    return UnitPlan(in_loop=[n for n in order if n in core], out_of_loop=[n for n in order if n not in in_loop],
                    after_loop=[n for n in order if n in in_loop and n not in core],
                    prev_used=prev_used, base_used={r.name for rs in deps.values() for r in rs if r.kind == "base"},
                    deps=deps)


def check_cur_and_prev_moved_out(plan: UnitPlan, unit: Mapping[str, Any], desc: str, moves_out: bool = True) -> None:
    """RETURNN's loop reads a layer moved out before it either per frame or as ``prev:``, not both
    ("currently cannot use both cur + prev frame", its get_input_moved_out): refused here too. RETURNN also
    moves out a running sum with an initial_output that reads nothing of the loop (kept in it here: the same
    values), unless ``optimize_move_layers_out`` is False (``moves_out``); its initial_output 'var' fails there."""
    read = {(r.kind, r.name) for n in plan.in_loop for r in layer_refs(n, unit[n]) if r.kind in ("self", "prev")}
    sums = [n for n in plan.in_loop if _stays_in_loop(unit[n]) and _state_from_initial_output(unit[n])
            and not unit[n].get(MASKED_BY) and all(r.kind in ("base", "data") for r in layer_refs(n, unit[n]))]
    sums = sums if moves_out else []
    for n in sums + (_moved_after_loop(plan, unit) if moves_out else []):
        if _state_from_initial_output(unit[n]) and unit[n].get("initial_output") == "var":  # RETURNN's var needs a shape without the moved-out time axis
            raise NetworkError("%s: sub-layer %r (%s): RETURNN moves it out of the loop (it reads nothing of the loop, "
                               "or nothing in the loop reads it), where its initial_output 'var' fails (its variable "
                               "asserts a fully static shape)"
                               % (desc, n, unit[n].get("class")))
    both = [n for n in list(plan.out_of_loop) + sums if ("self", n) in read and ("prev", n) in read]
    if both:
        raise NetworkError("%s: the loop reads %r (computed before the loop) both as %r and as 'prev:%s'; RETURNN "
                           "refuses that (currently cannot use both cur + prev frame)" % (desc, both[0], both[0], both[0]))


def _moved_after_loop(plan: UnitPlan, unit: Mapping[str, Any]) -> List[str]:
    """The layers RETURNN moves after the loop (its output_can_move_out, repeated): no layer left in the loop
    reads them (per frame or as prev:), they read no prev: of themselves, and are no choice or 'end'."""
    refs = {n: {(r.kind, r.name) for r in layer_refs(n, unit[n])} for n in plan.in_loop}
    left, moved, changed = set(plan.in_loop), [], True
    while changed:
        changed = False
        for n in [m for m in plan.in_loop if m in left]:
            if n == "end" or unit[n].get("class") in TARGET_CHOICE_CLASSES or ("prev", n) in refs[n]:
                continue
            if not any((k, n) in refs[m] for m in left if m != n for k in ("self", "prev")):
                left.discard(n)
                moved.append(n)
                changed = True
    return moved


def outer_key(ref: Ref) -> Optional[str]:
    """The outer-network name a reference reads as a whole (``base:X`` -> X, ``data:KEY`` ->
    ``data:KEY``), None for the loop's own values (its layers, ``data:source``, ``:i``)."""
    if ref.kind == "base":
        return ref.name
    if ref.kind == "data" and ref.name != "source":
        return "data:" + ref.name
    return None


def frame_and_whole_readers(plan: UnitPlan, loop_time_outer: Set[str]) -> List[str]:
    """The layers planned outside the loop that read an outer value over the loop's own time axis
    as a whole (``base:enc`` whose frames the loop runs over) together with a per-frame value of
    the loop (``data:source``, ``:i``, a layer depending on them or on ``prev:``). In the loop such
    a layer sees all frames of the outer value beside one frame of the other; over the whole
    sequence both share one time axis. RETURNN computes them over the whole sequence where that
    builds, else in the loop (the rec layer tries: RecSubnetLayer._build_outside_loop)."""
    per_frame = set(with_readers(plan, [name for name, refs in plan.deps.items() if any(
        r.kind in ("prev", "step") or (r.kind == "data" and r.name == "source") for r in refs)]))
    return [name for name, refs in plan.deps.items()
            if name in per_frame and name not in plan.in_loop and any(outer_key(r) in loop_time_outer for r in refs)]


def with_readers(plan: UnitPlan, names: Sequence[str]) -> List[str]:
    """``names`` and the layers reading them (same step or ``prev:``), transitively, in unit order."""
    found = set(names)
    changed = bool(found)
    while changed:
        changed = False
        for name, refs in plan.deps.items():
            if name not in found and any(r.kind in ("self", "prev") and r.name in found for r in refs):
                found.add(name)
                changed = True
    return [n for n in plan.deps if n in found]


def read_by(plan: UnitPlan, name: str) -> List[str]:
    """``name`` and the unit's layers it reads (same step or ``prev:``), transitively, in unit order."""
    found, todo = {name}, [name]
    while todo:
        for r in plan.deps.get(todo.pop(), []):
            if r.kind in ("self", "prev") and r.name not in found:
                found.add(r.name)
                todo.append(r.name)
    return [n for n in plan.deps if n in found]


def needed_unit(unit: Mapping[str, Any], rec_name: str, search: bool = False, extra_roots: Sequence[str] = (),
                net_search: Optional[bool] = None) -> Dict[str, Any]:
    """The sub-layers of ``unit`` RETURNN builds (:func:`returnn.tf.net_dict.needed_layers`:
    ``output``, layers with a loss or ``is_output_layer``, ``end`` in search, and what they read,
    ``prev:`` and ``initial_output`` included; a choice with a target that does not search reads only its
    target unless it adds its scores to the beam: :func:`choice_reads_scores`), in the unit's order.
    ``search``: whether the loop searches; ``net_search``: the network's flag (default ``search``)."""
    net_search = search if net_search is None else net_search

    def refs_of(name: str) -> List[str]:
        layer = unit[name]
        # a choice fed its target: RETURNN builds what its 'from' names only where it adds their scores
        teacher_forced = isinstance(layer, Mapping) and is_target_choice(layer) and \
            not choice_reads_scores(layer, net_search)
        refs = layer_refs(name, layer, rec_name) if isinstance(layer, Mapping) and not teacher_forced else []
        init = initial_refs(unit[name]) if isinstance(unit[name], Mapping) else []
        return [r.name for r in refs + init + loss_target_refs(layer) if r.kind in ("self", "prev")]
    if "output" not in unit:
        return dict(unit)  # analyse_unit names the missing output
    return {n: unit[n] for n in needed_layers(unit, refs_of, in_rec_unit=True, search=search, extra_roots=extra_roots)}


def loss_target_refs(layer: Any) -> List[Ref]:
    """A loss target ``layer:X`` of a sub-layer (RETURNN builds X for the loss: OCD's soft targets)."""
    target = layer.get("target") if isinstance(layer, Mapping) and layer.get("loss") else None
    return [Ref.parse(target[len("layer:"):])] if isinstance(target, str) and target.startswith("layer:") else []


def is_target_choice(layer: Mapping[str, Any]) -> bool:
    """Whether the sub-layer is a choice whose value under teacher forcing is its target."""
    return layer.get("class") in TARGET_CHOICE_CLASSES and bool(layer.get("target"))


def fed_target(opts: Mapping[str, Any], searching: bool) -> bool:
    """Whether the sub-layer's value is its target in a loop that searches (``searching``) or not:
    a choice with a target under teacher forcing, and in search one with ``search: False``; not a
    choice with ``scheduled_sampling`` (it samples from its ``from``: :func:`samples_in_training`)."""
    return isinstance(opts, Mapping) and is_target_choice(opts) and (not searching or opts.get("search") is False) \
        and not opts.get("scheduled_sampling")


def samples_in_training(opts: Mapping[str, Any], searching: bool) -> bool:
    """A choice with ``scheduled_sampling`` where it does not search: RETURNN samples its label from
    the scores of its ``from`` (its target mixed in by ``gold_mixin_prob``), in training and evaluation."""
    return isinstance(opts, Mapping) and is_target_choice(opts) and bool(opts.get("scheduled_sampling")) and (
        not searching or opts.get("search") is False)


def choice_searches(opts: Mapping[str, Any], net_search: bool) -> bool:
    """Whether a choice searches: its ``search`` option, else the network's flag (RETURNN's rule)."""
    return bool(net_search if opts.get("search") is None else opts.get("search"))


def choice_adds_scores(opts: Mapping[str, Any], net_search: bool) -> bool:
    """RETURNN's ``add_to_beam_scores`` of a choice: the option, else whether it searches or the network does."""
    adds = opts.get("add_to_beam_scores")
    return bool(choice_searches(opts, net_search) or net_search) if adds is None else bool(adds)


def choice_reads_scores(opts: Mapping[str, Any], net_search: bool) -> bool:
    """Whether a choice reads its ``from`` (RETURNN's ``ChoiceLayer.transform_config_dict`` drops it otherwise):
    where it searches, adds its scores to the beam (:func:`choice_adds_scores`) or samples from them
    (``scheduled_sampling``)."""
    return choice_searches(opts, net_search) or choice_adds_scores(opts, net_search) or \
        bool(opts.get("scheduled_sampling"))
