"""A rec layer's ``unit`` dict before anything is built: which sub-layers RETURNN builds
(:func:`unit_layers`: subnetworks flattened, search-only layers, sub-outputs ``X/sub`` as layers of
their own, :class:`SubOutputLayer`), whether its loop searches, and its targets."""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from returnn.tensor import Data
from returnn.tf.layers.base import Layer, LayerOutput, RunContext
from returnn.tf.layers.options import Option
from returnn.tf.layers.rec_net import deps
from returnn.tf.layers.rec_net.deps import choice_searches, initial_refs, is_target_choice, layer_refs, needed_unit
from returnn.tf.net_dict import without_search_task_losses
from returnn.tf.subnetwork import expand_subnetworks

SUB_OUTPUT_CLASS = deps.SUB_OUTPUT_CLASS


def opts_class(opts: Mapping[str, Any]) -> Any:
    return opts.get("class") if isinstance(opts, Mapping) else None


def as_list(value: Any) -> List[Any]:
    """None -> [], a list/tuple -> a list, else [value]."""
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def unit_layers(unit: Mapping[str, Any], rec_name: str, search: bool = False, extra_roots: Sequence[str] = ()
                ) -> Dict[str, Any]:
    """The sub-layers of a rec unit that are built: subnetworks flattened (``only_on_search`` and
    ``only_on_eval`` do not count in a rec unit, as in RETURNN's rec cell), sub-outputs read as ``X/sub`` (``split/0``, also ``prev:split/0``) as
    layers of their own (:data:`SUB_OUTPUT_CLASS`), and only what RETURNN builds (:func:`deps.needed_unit`;
    ``extra_roots``: also these, e.g. ``end`` of a loop that it ends)."""
    flat = without_search_task_losses(expand_subnetworks(dict(unit), in_rec_unit=True), search)
    return needed_unit(with_sub_output_layers(flat, rec_name), rec_name, loop_searches(flat, search), extra_roots,
                       net_search=search)


def loop_searches(unit: Mapping[str, Any], net_search: bool) -> bool:
    """Whether the loop of a unit searches: a choice of it searches (its ``search`` option, else the
    network's flag); without choices the network's flag."""
    choices = [o for o in unit.values() if opts_class(o) == "choice"]
    return any(choice_searches(o, net_search) for o in choices) if choices else net_search


def with_sub_output_layers(unit: Dict[str, Any], rec_name: str) -> Dict[str, Any]:
    """``unit`` plus a layer ``X/sub`` of class :data:`SUB_OUTPUT_CLASS` for each reference to a
    sub-output ``sub`` of a unit layer ``X`` (whose class offers it, e.g. split's parts)."""
    from returnn.tf.layers.base import LAYER_CLASSES
    extra: Dict[str, Any] = {}
    for name, opts in unit.items():
        if not isinstance(opts, Mapping):
            continue
        for r in layer_refs(name, opts, rec_name) + initial_refs(opts):
            if r.kind not in ("self", "prev") or r.name in unit or r.name in extra or "/" not in r.name:
                continue
            parent, sub = r.name.rsplit("/", 1)
            parent_opts = unit.get(parent)
            cls = LAYER_CLASSES.get(parent_opts.get("class")) if isinstance(parent_opts, Mapping) else None
            if cls is not None and cls.has_sub_output(parent_opts, sub):
                extra[r.name] = {"class": SUB_OUTPUT_CLASS, "from": parent, "sub": sub}
    return dict(unit, **extra) if extra else unit


class SubOutputLayer(Layer):
    """A rec unit's ``X/sub``: the sub-output ``sub`` of the unit layer ``X`` (its only source) as a
    layer of the unit, so that it runs where ``X`` runs and ``prev:X/sub`` is carried like any output."""

    layer_class = SUB_OUTPUT_CLASS
    options = (Option("sub", None, "the sub-output's name"), Option("parent", None, "the built layer X"))

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        self.sub = str(self.opt("sub"))
        self.output = self.opt("parent").sub_template(self.sub).copy(name)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        value = sources[0].sub_outputs[self.sub]
        return LayerOutput(value.tensor, self.output, value.sizes, value.logits)


def rec_targets(opts: Mapping[str, Any], rec_name: str = "?", search: bool = False,
                size_target: bool = True) -> List[str]:
    """The rec layer's own target, then its choices' targets (first gives the loop length).
    ``size_target=False``: without the ``size_target``, which RETURNN reads only for a loop without a
    source (the length) or when the network evaluates (the undefined dims, network.py)."""
    out = [t for t in as_list(opts.get("target")) + (as_list(opts.get("size_target")) if size_target else [])
           if isinstance(t, str)]
    for sub in unit_layers(opts["unit"], rec_name, search).values():
        if isinstance(sub, Mapping) and is_target_choice(sub):
            out += [t for t in as_list(sub["target"]) if isinstance(t, str)]
    return list(dict.fromkeys(out))


def length_targets(opts: Mapping[str, Any], rec_name: str = "?", search: bool = False) -> List[str]:
    """:func:`rec_targets` that give a loop without source its length: the rec layer's own ``target`` only
    where RETURNN's train_flag is not False (the train and eval tasks; its LayerBase._post_init_output takes
    the target's dims then), not in the forward and search tasks, where the ``end`` sub-layer ends the loop."""
    from returnn.tf.net_dict import EVAL_NET, SEARCH_TASK, TRAIN_NET
    if TRAIN_NET.get() or (EVAL_NET.get() and not SEARCH_TASK.get()):
        return rec_targets(opts, rec_name, search)
    return rec_targets(dict(opts, target=None), rec_name, search)


def source_loop_key(opts: Mapping[str, Any], unit: Mapping[str, Any], search: bool = False,
                    rec_name: str = "?") -> Optional[str]:
    """The data key whose time axis a rec loop over a source runs along instead of the source's: RETURNN's
    RecLayer.transform_source_and_axis takes the source's time axis unless the unit has an ``end`` sub-layer;
    then the ``size_target``, else the rec layer's own ``target`` where the network evaluates (train and eval
    tasks), else a choice's target (the labels fed in), else a new axis the ``end`` sub-layer ends (not
    supported here: one line)."""
    from returnn.errors import NetworkError
    if search or not isinstance(unit, Mapping) or "end" not in unit or opts.get("axis") is not None:
        return None
    size_target = as_list(opts.get("size_target"))
    keys = [t for t in size_target[:1] + length_targets(opts, rec_name, search)
            if isinstance(t, str) and t not in ("none", "")]
    if keys:
        return keys[0]
    raise NetworkError("rec layer %r: a loop over a source whose unit has an 'end' sub-layer runs until 'end' "
                       "(RETURNN: a new time axis, needs max_seq_len), not along the source: not supported (give "
                       "'size_target', or no 'end')" % rec_name)
