"""The ``rec`` layer whose ``unit`` is a dict of layers: a small network run once per step.

Building (see :mod:`.deps` for the in-loop / moved-out split): moved-out sub-layers are built on
whole-sequence templates (with the loop's time axis), in-loop ones on one-frame templates. A
``prev:X`` of an in-loop layer not built yet is assumed (:mod:`.assumed`: X's declared ``n_out``,
a shape-changing layer built on its sources' assumptions, or its first source); after X is built
the assumption is checked.

The loop's time axis is the rec layer's source's time axis, else its target's (teacher forcing).
Sub-layer ``X`` is readable from outside as ``"rec_name/X"`` (whole sequence); sub-layer losses
are losses of the network (see :meth:`sub_layer_dicts`).
"""
from __future__ import annotations

import contextlib
import re
import types

import numpy as np
import tensorflow as tf
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from returnn.errors import NetworkError, known_list
from returnn.tensor import Data, Dim
from returnn.tf.layers.base import LAYER_CLASSES, Layer, LayerOutput, RunContext, get_layer_class
from returnn.tf.layers.helpers import concat_output
from returnn.tf.layers.options import Option
from returnn.tf.layers import param_noise, reuse
from returnn.tf.layers.helpers import loop_axis
from returnn.tf.layers.rec_net import deps, frames
from returnn.tf.layers.rec_net import layer_targets
from returnn.tf.layers.rec_net.assumed import AssumedTemplates
from returnn.tf.layers.rec_net.build_order import BuildOrder
from returnn.tf.layers.rec_net import unmask as _unmask  # noqa: F401  (registers _unmask_in_unit)
from returnn.tf.layers.rec_net.deps import (
    Ref, analyse_unit, check_cur_and_prev_moved_out, choice_searches, fed_target, frame_and_whole_readers,
    initial_refs, layer_refs, read_by, with_readers,
)
from returnn.tf.layers.rec_net.sparse_initial import check_sparse_initial_outputs
from returnn.tf.layers.rec_step import cell_class_for
from returnn.tf.layers.rnn_cell import building_loop_step
from returnn.tf.layers.rec_net.checks import check_loop_axis_dynamic, check_output_per_step_time
from returnn.tf.net_dict import FROM_DEFAULT, TRAIN_NET, has_axis_pairs, search_length_key
from returnn.tf.target_names import build_with_n_out
from returnn.tf.net_sources import check_from_given
from returnn.tf.subnetwork import MASKED_BY
from returnn.tf.layers.rec_net.unit_dict import (  # noqa: F401  (unit_layers, rec_targets: read from here too)
    SubOutputLayer, as_list, length_targets, loop_searches, opts_class, rec_targets, source_loop_key, unit_layers,
)

# Options of sub-layers that only the rec layer reads.
REC_ONLY_SUB_OPTIONS = ("initial_output", "initial_state_from", "is_output_layer", "need_last", "rec_previous_layer",
                        MASKED_BY, FROM_DEFAULT)


MAX_TEMPLATE_ROUNDS = 4
SUB_OUTPUT_CLASS = deps.SUB_OUTPUT_CLASS


def _shape_key(data: Data) -> Tuple[Any, ...]:
    """What must agree between an assumed and a real template: sizes, dtype, sparse dim size."""
    return (tuple(d.dimension if not d.is_batch_dim() else "B" for d in data.dims), data.dtype,
            None if data.sparse_dim is None else data.sparse_dim.dimension)


class RecSubnetLayer(BuildOrder, AssumedTemplates, Layer):
    """``{"class": "rec", "unit": {...}, "from": [...], "target": ...}``; see the module doc."""

    layer_class = "rec"
    param_subscope = "rec/"  # RETURNN's rec layer scope: its batch_norm option's parameters in <rec>/rec/
    keep_beams = False  # search: give all hypotheses with their beam (set by a network outside the search task)
    decide_length_norm = False  # search task: a decide with length_normalization reads it (set by the network)
    options = (
        Option("unit", None, "dict of sub-layers"),
        Option("max_seq_len", None, "search, or a loop ended by its 'end' sub-layer: the most steps (number or "
                                    "expression); a loop of known length ignores it"),
        Option("max_seq_len_via", None, "like max_seq_len, from a layer of the network: its scalar value (RETURNN: "
                                        "not with max_seq_len; the layer must be a scalar)"),
        Option("include_eos", False, "search, or a loop ended by 'end': the frame where 'end' is True counts in the "
                                     "output length"),
        Option("size_target", None, "data key that gives the loop length (instead of 'target')"),
        Option("optimize_move_layers_out", True, "False: every sub-layer runs step by step in the loop"),
        Option("debug", None, "RETURNN: extra debug outputs of the loop's layers (None: config debug_rec_layer)",
               noop="debug outputs only; the loop computes the same"),
        Option("input_projection", True, "RETURNN: its native LSTM kernels' option",
               noop="RETURNN reads it only for a native LSTM unit, never for a sub-network"),
        *(Option(key, None, "RETURNN: the weights' initializer of a cell unit",
                 noop="RETURNN reads it only for a cell unit, never for a sub-network")
          for key in ("forward_weights_init", "recurrent_weights_init", "bias_init")),
        Option("cheating", False, "RETURNN: unused on the rec layer (a choice option now)",
               noop="RETURNN ignores it here with a warning; cheating is set on the choice layer"),
        Option("unroll", False, "RETURNN: unroll the loop",
               noop="RETURNN reads it only for its TensorFlow cells, never for a sub-network unit"),
        Option("back_prop", True, "False: no gradient through the loop (RETURNN's while_loop option): its in-loop "
                                  "layers' values (in search all it gives) carry none; layers moved out of it do"),
        Option("direction", 1, "1, None or -1 (RETURNN asserts one of them)",
               noop="RETURNN's sub-network loop runs forward whatever it is: it reverses only cell units"),
        Option("axis", None, "the axis to loop over: only the source's time axis here"),
        Option("unit_opts", None, "not used with a sub-network", only=(None, {})),
        Option("use_global_rec_step_offset", False, "RETURNN: ':i' plus a scalar fed from outside (a placeholder "
                                                    "its engine never feeds): refused where a sub-layer reads ':i'"),
    )

    @classmethod
    def outer_sources(cls, name: str, opts: Mapping[str, Any], default_target: str, search: bool = False
                      ) -> List[str]:
        """The outer-network names this layer reads: its ``from``, then ``base:`` layers and data
        keys of the unit (``data:KEY``; choice and loss targets unless in search)."""
        unit = opts.get("unit")
        if not isinstance(unit, Mapping):
            raise NetworkError("rec layer %r: 'unit' must be a dict of layers" % name)
        # RETURNN's template construction always builds 'end' (rec.py): what it reads is read here too, also
        # where nothing else in the loop reads it
        unit = unit_layers(unit, name, search, extra_roots=("end",) if "end" in unit else ())
        search = loop_searches(unit, search)
        extra: List[str] = []
        for sub, sub_opts in unit.items():
            refs = layer_refs(sub, sub_opts, name)
            for r in refs + initial_refs(sub_opts):
                if r.kind == "base":
                    extra.append(r.name)
                elif r.kind == "data" and r.name != "source":
                    extra.append("data:" + r.name)
            if sub_opts.get("loss") and sub_opts.get("loss") not in ("as_is",) and not search:
                target = sub_opts.get("target") or default_target
                if isinstance(target, str) and target.startswith("layer:"):  # a layer (OCD's soft targets)
                    extra += layer_targets.outer_names(sub_opts)
                else:
                    extra.append("data:" + target)
        if not search:
            has_source = any(f != "none" for f in as_list(opts.get("from", ["data"])))
            extra += ["data:" + t for t in rec_targets(opts, name, size_target=not has_source)]
            if has_source and source_loop_key(opts, opts["unit"], search, name):
                extra.append("data:" + source_loop_key(opts, opts["unit"], search, name))
        else:  # the choices that are their target in search too (search: False), and the references of cheating
            from returnn.tf.layers.rec_net.search_scores import cheating_targets
            extra += ["data:" + t for sub in unit.values() if isinstance(sub, Mapping) and fed_target(sub, True)
                      for t in as_list(sub["target"]) if isinstance(t, str)]
            extra += ["data:" + t for t in cheating_targets(unit)]
            if search_length_key(opts):  # a search in training: as long as the rec layer's target
                extra.append("data:" + search_length_key(opts))
        if isinstance(opts.get("max_seq_len"), str):  # e.g. "max_len_from('base:encoder') * 2"
            extra += [m.group(2) if m.group(1) == "base:" else "data:" + m.group(2)
                      for m in re.finditer(r"['\"](base:|data:)([^'\"]+)['\"]", opts["max_seq_len"])]
        if opts.get("max_seq_len_via"):  # RETURNN: a layer of the network the rec layer is in
            extra.append(opts["max_seq_len_via"])
        return as_list(opts.get("from", ["data"])) + list(dict.fromkeys(extra))

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42, *,
                 outer_names: Sequence[str] = (), default_target: str = "classes", infer_n_out=None,
                 target_template: Optional[Callable[[str], Optional[Data]]] = None, search: bool = False):
        super().__init__(name, opts, sources, seed)
        if self.opt("direction") not in (1, -1, None):
            raise NetworkError("%s: direction must be 1, -1 or None, got %r" % (self.desc, self.opt("direction")))
        # read-only proxies: tf.Module would wrap plain dicts in tracking types that are no Mappings
        def read_only(unit: Mapping[str, Any]) -> Mapping[str, Mapping[str, Any]]:
            return types.MappingProxyType({k: types.MappingProxyType(dict(v)) if isinstance(v, Mapping) else v
                                           for k, v in unit.items()})

        self.unit = read_only(unit_layers(self.opt("unit"), name, search))
        if self.opt("use_global_rec_step_offset") and any(r.kind == "step" for sub, o in self.unit.items()
                                                          if isinstance(o, Mapping) for r in layer_refs(sub, o, name)):
            raise NetworkError("%s: use_global_rec_step_offset with a sub-layer reading ':i' (RETURNN adds a placeholder "
                               "fed from outside) is not supported" % self.desc)
        self.n_from = len(as_list(opts.get("from", ["data"])))
        self.outer_names = list(outer_names)
        self.outer = types.MappingProxyType(dict(zip(self.outer_names[self.n_from:], sources[self.n_from:])))
        self.seed = seed
        self.net_search = search  # the network's flag (a choice fed its target adds its score in search: search.py)
        step_only = [] if self.opt("optimize_move_layers_out") else list(self.unit)
        self.search_choice: Optional[str] = None
        choices = [n for n, o in self.unit.items() if isinstance(o, Mapping) and o.get("class") == "choice"]
        searching = [n for n in choices if choice_searches(self.unit[n], search)]
        if choices:  # RETURNN: each choice searches by its 'search' option, else by the network's flag
            search = bool(searching)
        if search and not choices and self.n_from:  # nothing to choose (e.g. an LM over its input): a plain loop
            search = False
        self.search = search
        for c in choices if not search else ():  # RETURNN: "no target given, must do search"
            if not self.unit[c].get("target") and self.unit[c].get("search") is not True:
                raise NetworkError("%s, sub-layer %r: a choice without 'target' needs search (the labels in training)"
                                   % (self.desc, c))
        from returnn.tf.layers.rec_net.loop import check_max_seq_len_via, new_loop_axis
        self.has_max_len = check_max_seq_len_via(self)
        # RETURNN's loop without a length (no source, target, axis of an input, declare_rec_time): its 'end'
        # sub-layer ends each sequence, at most max_seq_len steps (loop.py); a new 'axis' Dim is then its time axis
        self.ends = not search and not self.n_from and "end" in self.opt("unit") and \
            new_loop_axis(self.opt("axis"), self.outer) and \
            not length_targets(opts, name, search) and not _declares_rec_time(self.unit)
        if self.ends:
            self.unit = read_only(unit_layers(self.opt("unit"), name, search, extra_roots=("end",)))
            if not self.has_max_len:
                raise NetworkError("%s: a loop ended by its 'end' sub-layer needs max_seq_len (RETURNN asserts it)"
                                   % self.desc)
            step_only.append("end")
        if search and "end" in self.unit and self.opt("axis") is None and not self.opt("size_target") \
                and not self.has_max_len:  # RETURNN's loop then has no length: "specify max_seq_len"
            raise NetworkError("%s: a search ended by its 'end' sub-layer needs max_seq_len (RETURNN asserts it)"
                               % self.desc)
        if search:
            if not searching:
                raise NetworkError("%s: search needs a searching 'choice' sub-layer, got none" % self.desc)
            step_only += choices + (["end"] if "end" in self.unit else [])
        self.plan = analyse_unit(self.unit, name, has_source=self.n_from > 0, teacher_forcing=not search,
                                 step_only=step_only)
        if search and self.plan.after_loop:  # in search they run in the loop: their frames follow the hypotheses
            self.plan = analyse_unit(self.unit, name, has_source=self.n_from > 0, teacher_forcing=False,
                                     step_only=step_only + list(self.plan.after_loop))
        # several searching choices (a factored decoder's outputs): each extends the beam in step order (search.py);
        # the last one's labels are the loop's
        in_order = [n for n in self.plan.in_loop if n in searching] if search else []
        self.earlier_choices = in_order[:-1]
        if search:
            self.search_choice = in_order[-1]
        self.source_template: Optional[Data] = None
        if self.n_from:
            self.source_template, self._source_plan = concat_output(self, list(sources[:self.n_from]))
            if self.source_template.time_dim is None:
                raise NetworkError("%s: the source has no time axis (%s)" % (self.desc, self.source_template.short_repr()))
            self.time_dim = self.source_template.time_dim
            self.length_key: Optional[str] = source_loop_key(opts, self.opt("unit"), search, name)
            if self.length_key is not None:  # the loop as long as that data, reading the source's frames per step
                tmpl = self.outer["data:" + self.length_key]
                if tmpl.time_dim is None:
                    raise NetworkError("%s: %r has no time axis" % (self.desc, self.length_key))
                self.time_dim = tmpl.time_dim
                self.source_in_template = self.source_template
                self.source_template = self.source_template.copy_template_replace_dim_tag(
                    self.source_template.time_dim_axis, self.time_dim)
            if self.length_key is None:
                check_loop_axis_dynamic(self)
            if self.opt("axis") is not None and \
                    self.axis(self.source_template, self.opt("axis"), "axis") != self.source_template.time_dim_axis:
                raise NetworkError("%s: 'axis' %r: only the source's time axis is supported as the loop axis"
                                   % (self.desc, self.opt("axis")))
        elif self.ends:
            self.time_dim = self.opt("axis") or Dim(None, kind=Dim.Types.Spatial, description="%s:dyn-time" % name)
            self.length_key = None
        elif self.opt("axis") is not None or (not search and not length_targets(opts, name, search)):
            from returnn.tf.layers.rec_access import loop_from_unit  # rec_unstack's declare_rec_time, axis Dim
            found = loop_from_unit(self.desc, self.unit, self.outer, self.opt("axis"))
            if found is None:
                raise NetworkError("%s: without 'from', the loop length comes from a 'target' (none given)" % self.desc)
            self.time_dim, self.length_source = found
            self.length_key = None
        elif search and search_length_key(opts):  # RETURNN: outside the search task, the target's length
            self.length_key = search_length_key(opts)
            tmpl = self.outer["data:" + self.length_key]
            if tmpl.time_dim is None:
                raise NetworkError("%s: target %r has no time axis" % (self.desc, self.length_key))
            self.time_dim = tmpl.time_dim
        elif search:
            self.length_key = None
            self.time_dim = Dim(None, kind=Dim.Types.Spatial, description="%s:search-time" % name)
        else:
            targets = length_targets(opts, name, search)
            if not targets:
                raise NetworkError("%s: without 'from', the loop length comes from a 'target' (none given)" % self.desc)
            self.length_key = targets[0]
            tmpl = self.outer["data:" + self.length_key]
            if tmpl.time_dim is None:
                raise NetworkError("%s: target %r has no time axis" % (self.desc, self.length_key))
            self.time_dim = tmpl.time_dim
        self._infer_n_out = infer_n_out
        self._target_template = target_template  # the network's templates of targets (also those not read in search)
        self._outer_layer = reuse.outer_resolver()  # reuse_params of sub-layers may name base:x
        forced: List[str] = []
        while True:
            self._build_loop(name, search, step_only)
            self.after_order = self._ordered(self.plan.after_loop)
            sub = ""
            try:
                for sub in self.after_order:  # on the stacked outputs of the loop
                    self._build(sub)
                break
            except NetworkError:
                # as RETURNN: an attention energy of a query computed after the loop over the encoder frames
                # (the loop's time axis) that does not build over the whole sequence runs in the loop
                loop_time_outer = {k for k, tmpl in self.outer.items() if self.time_dim in tmpl.dims}
                candidates = set(frame_and_whole_readers(self.plan, loop_time_outer))
                suspects = [n for n in read_by(self.plan, sub) if n in candidates and n not in forced]
                if not suspects:
                    raise
                forced += suspects
                step_only = step_only + with_readers(self.plan, suspects)
                self.plan = analyse_unit(self.unit, name, has_source=self.n_from > 0, teacher_forcing=not search,
                                         step_only=step_only)
        if TRAIN_NET.get() or search:  # (else RETURNN builds no loss layers of the unit: often the only readers)
            check_sparse_initial_outputs(self.desc, self.unit, self.layers, self.in_loop)
        for sub in self.unit:  # read as prev: at step 0, or the start of a running sum (cumsum)
            if self.unit[sub].get("initial_output") == "var" and (
                    sub in self.plan.prev_used or getattr(self.layers.get(sub), "state_from_initial_output", False)):
                self._make_initial_output_var(sub)
        for sub in self.plan.prev_used:  # a cell outside the loop whose prev: is read: the loop's initial state
            if sub not in self.in_loop and hasattr(self.layers[sub], "make_prev_state"):
                self.layers[sub].make_prev_state()
        for sub, sub_opts in self.unit.items():
            for r in initial_refs(sub_opts):
                if r.kind == "self" and r.name in self.in_loop:
                    raise NetworkError("%s, sub-layer %r: its initial output or state reads %r, which runs in the loop "
                                       "(only layers outside it, base: layers or data)" % (self.desc, sub, r.name))
        check_cur_and_prev_moved_out(self.plan, self.unit, self.desc, bool(self.opt("optimize_move_layers_out")))
        _unmask.check_step_masks(self.desc, self.unit, self.layers, self.plan.in_loop)
        check_output_per_step_time(self)
        # (where 'end' ends the loop: RETURNN's searched loop of a training net takes its target's length and
        # builds an 'end' of another shape)
        end = self.layers.get("end") if (self.ends or (search and not TRAIN_NET.get())) else None
        if end is not None and any(not d.is_batch_dim() for d in end.output.dims):
            raise NetworkError("%s: its 'end' sub-layer must give one flag per sequence (or one for all), got %s "
                               "(RETURNN asserts the shape ())" % (self.desc, end.output.short_repr()))
        if "output" not in self.in_loop and self.time_dim not in self.layers["output"].output.dims:
            raise NetworkError("%s: the output computed over the whole sequence has no loop time axis %r (%s); "
                               "RETURNN refuses that" % (self.desc, self.time_dim.description,
                                                         self.layers["output"].output.short_repr()))
        out_dims = list(self.layers["output"].output.dims)
        if ("output" in self.in_loop and self.time_dim in out_dims) or out_dims.count(self.time_dim) > 1:
            raise NetworkError("%s: the output per step has the loop's own time axis %r (e.g. all frames of a base: "
                               "layer over the loop's time); RETURNN refuses that (reduce or attend over it first)"
                               % (self.desc, self.time_dim.description))
        self.output = self.sub_template("output")

    # ---- building
    def _build_outside_loop(self, name: str, search: bool, step_only: List[str]) -> None:
        """Builds the layers planned outside the loop. As RETURNN: a layer reading both a per-frame
        value and an outer value over the loop's own time axis (see frame_and_whole_readers) is
        computed over the whole sequence where that builds (e.g. energies of a per-frame query with
        the encoder frames paired by that shared axis); where it fails there (or a layer after it
        does), it runs in the loop (all encoder frames per step), with what reads it."""
        loop_time_outer = {k for k, tmpl in self.outer.items() if self.time_dim in tmpl.dims}
        candidates = set(frame_and_whole_readers(self.plan, loop_time_outer))
        base_step_only = step_only + list(self.plan.after_loop if search else ())
        forced: List[str] = []
        while True:
            self.in_loop = set(self.plan.in_loop)
            self.layers, self.sub_sources, self._guessed = {}, {}, {}
            sub = ""
            try:
                for sub in self._build_order():
                    if sub not in self.in_loop:
                        self._build(sub)
                return
            except NetworkError:
                suspects = [n for n in read_by(self.plan, sub) if n in candidates and n not in forced]
                if not suspects or step_only == list(self.unit):
                    raise
                forced += suspects
                self.plan = analyse_unit(self.unit, name, has_source=self.n_from > 0, teacher_forcing=not search,
                                         step_only=base_step_only + with_readers(self.plan, forced))

    def _build_loop(self, name: str, search: bool, step_only: List[str]) -> None:
        """The layers outside the loop and in it (see _build_outside_loop, _settle_loop)."""
        self._build_outside_loop(name, search, step_only)
        self._follow_axes = False
        try:
            self._settle_loop()
        except NetworkError as first:
            if not self._guessed:
                raise
            # a layer failed on an assumed (batch, feature) template: once more with assumptions that
            # follow the sources' axes (attention weights over base: frames, see _frame_wise_guess)
            self._follow_axes, self._guessed = True, {}
            for sub in self.in_loop:
                self.layers.pop(sub, None)
            try:
                self._settle_loop()
            except NetworkError:
                raise first from None

    def _settle_loop(self) -> None:
        """Builds the in-loop layers: a 'prev:X' read before X is built is first assumed (see
        _guess); when X turns out different, all in-loop layers are built again with X's real
        template (same seeds: same initial values), until the assumptions hold."""
        for _ in range(MAX_TEMPLATE_ROUNDS):
            for sub in self._reused_first(self.plan.in_loop):
                self._build(sub)
            wrong = {sub: self.layers[sub].output for sub, guess in self._guessed.items()
                     if _shape_key(self.layers[sub].output) != _shape_key(guess)}
            if not wrong:
                return
            self._guessed.update({sub: data.copy(sub) for sub, data in wrong.items()})
        sub, real = next(iter(wrong.items()))
        raise NetworkError("%s, sub-layer %r: cannot settle the shape of 'prev:%s' (last %s); give it 'n_out'"
                           % (self.desc, sub, sub, real.short_repr()))

    def _get_reused_layer(self, name: str) -> Layer:
        """A layer that a sub-layer's ``reuse_params`` names: a sub-layer built before, or ``base:x``."""
        if name.startswith("base:"):
            if self._outer_layer is None:
                raise KeyError(name)
            return self._outer_layer(name[len("base:"):])
        return self.layers[name]

    def _template(self, ref_str: str, in_loop: bool, where: str) -> Data:
        ref = Ref.parse(ref_str)
        if ref.kind == "step":  # after the loop: the frames' indices (RETURNN's ':i' moved out)
            return Data(":i", dims=() if in_loop else (self.time_dim,), dtype="int32")
        if ref.kind == "data":
            if ref.name == "source":  # moved out of a loop along another axis: the source along its own (RETURNN)
                data = self.source_template if in_loop or self.length_key is None else self.source_in_template
            else:
                data = self.data_template(ref.name)
            return frames.step_template(data, self.time_dim, is_data=True) if in_loop else data
        if ref.kind == "base":
            return self.outer[ref.name]
        if ref.name in self.layers:
            data = self.layers[ref.name].output
        elif ref.kind == "prev" and ref.name in self.in_loop:
            data = self._guess(ref.name, where)
        else:
            raise NetworkError("%s: sub-layer %r is read before it is built" % (where, ref.name))
        if in_loop and ref.name not in self.in_loop:
            data = frames.step_template(data, self.time_dim)
        elif not in_loop and ref.name in self.in_loop:
            data = frames.stacked_template(data, self.time_dim)
        return data

    def data_template(self, key: str) -> Data:
        """``data:KEY`` inside the unit: its time axis is the loop's."""
        return frames.on_loop_time(self.outer["data:" + key], self.time_dim)

    def _build(self, sub: str) -> None:
        where = "%s, sub-layer %r" % (self.desc, sub)
        opts = dict(self.unit[sub])
        if "class" not in opts:
            raise NetworkError("%s: expected a dict with 'class'" % where)
        in_loop = sub in self.in_loop
        src_names = self.sub_source_names(sub)
        templates = [self._template(s, in_loop, where) for s in src_names]
        layer_opts = {k: v for k, v in opts.items()
                      if (k != "from" or has_axis_pairs(v)) and k not in REC_ONLY_SUB_OPTIONS}
        if not in_loop and "initial_output" in opts and getattr(
                LAYER_CLASSES.get(opts["class"]), "state_from_initial_output", False):
            layer_opts["initial_output"] = opts["initial_output"]  # (a moved-out cumsum adds it to the whole sum)
        n_out_fallback = None
        if not layer_targets.n_out_from_unit_target(layer_opts, self.layers, opts["class"]) and \
                self._infer_n_out is not None:
            n_out_fallback = self._infer_n_out(sub, layer_opts)
        full_name = "%s/%s" % (self.layer_name, sub)
        if opts["class"] == SUB_OUTPUT_CLASS:  # X/sub: X's sub-output (X is built: it is its only source)
            layer_opts = {"sub": opts["sub"], "parent": self.layers[opts["from"]]}
            self.layers[sub] = SubOutputLayer(full_name, layer_opts, templates, seed=self.seed)
            if not in_loop and opts["from"] in self.in_loop:
                raise NetworkError("%s: internal error: %r runs after the loop, its layer in it" % (where, sub))
            self.sub_sources[sub] = src_names
            return
        cls = get_layer_class(opts["class"], full_name, layer_opts)
        check_from_given(full_name, opts)
        in_step = in_loop and sub not in self.plan.after_loop
        with building_loop_step(in_step):
            if in_loop and opts["class"] == "rec" and isinstance(opts.get("unit", "lstm"), str):
                cls = cell_class_for(layer_opts, templates) or cls
        loop = contextlib.nullcontext() if in_step else loop_axis(self.time_dim)
        with reuse.resolving(self._get_reused_layer), loop, building_loop_step(in_step):
            self.layers[sub] = build_with_n_out(lambda o: cls(full_name, o, templates, seed=self.seed), layer_opts,
                                                n_out_fallback, in_rec_unit=True)
        if hasattr(self.layers[sub], "take_target_templates") and self._target_template is not None:
            self.layers[sub].take_target_templates(self._target_template)  # a searching choice (choice.py)
        if getattr(self.layers[sub], "state", None) is not None and opts.get("initial_output") not in (None, 0):
            raise NetworkError("%s: 'initial_output' %r with a non-zero 'initial_state': set initial_state only (its "
                               "output comes from it; RETURNN's rule)" % (where, opts["initial_output"]))
        if opts["class"] == "rnn_cell" and opts.get("initial_output") is not None:  # RnnCellLayer asserts None
            raise NetworkError("%s: 'initial_output' %r on an rnn_cell is refused, as RETURNN asserts (set "
                               "initial_state instead)" % (where, opts["initial_output"]))
        if in_loop and hasattr(self.layers[sub], "step") and self.layers[sub].post_bn is not None:
            raise NetworkError("%s: option 'batch_norm' on a sub-layer with a state inside the loop is not supported"
                               % where)
        self.sub_sources[sub] = src_names

    def _make_initial_output_var(self, sub: str) -> None:
        """RETURNN's ``initial_output: "var"``: a trainable (feature,) vector, zeros at first, named
        ``init_<sub>_var`` in the sub-layer's scope; the sub-layer's one-frame output must be (B, F) or (F,)."""
        layer = self.layers[sub]
        step = layer.output if sub in self.in_loop else frames.step_template(layer.output, self.time_dim)
        static = [d.dimension for d in step.dims if not d.is_batch_dim()]
        if step.sparse or None in static or int(np.prod(static)) != (step.dim or 0):  # RETURNN's asserts
            raise NetworkError("%s, sub-layer %r: initial_output 'var' needs a dense ([batch,] feature) output, got %s"
                               % (self.desc, sub, step.short_repr()))
        name = "init_%s_var" % sub.rsplit("/", 1)[-1]
        layer.initial_output_var = layer.variable(name, np.zeros([step.dim], np.dtype(step.dtype)))
        param_noise.noise_by(layer.initial_output_var, self, "%s/%s" % (sub, name))  # RETURNN: made in the rec's scope
        if not any(v is layer.initial_output_var for p in layer.all_returnn_params() for v in p.variables):
            raise NetworkError("%s, sub-layer %r: initial_output 'var' on a %r layer is not supported here (its "
                               "parameter would have no RETURNN name)" % (self.desc, sub, opts_class(self.unit[sub])))

    # ---- templates seen from outside
    def sub_template(self, sub: str) -> Data:
        """The whole-sequence template of sub-layer ``sub``."""
        if sub not in self.layers:
            raise NetworkError("%s: no sub-layer %r (known: %s)" % (self.desc, sub, known_list(self.layers)))
        data = self.layers[sub].output
        if sub in self.in_loop:
            data = frames.stacked_template(data, self.time_dim)
        return data.copy("%s/%s" % (self.layer_name, sub))

    def sub_layer_dicts(self) -> Dict[str, Dict[str, Any]]:
        """Sub-layer name -> its dict (for the network's loss collection)."""
        return {k: dict(v) for k, v in self.unit.items()}

    def l2_variables(self):
        return []  # sub-layers' own L2 is collected by the network through sub_layers()

    def sub_layers(self) -> Dict[str, Layer]:
        return dict(self.layers)

    # ---- running
    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        no_grad = self.opt("back_prop") is False  # RETURNN's while_loop(back_prop=False): no gradient through the loop
        if self.search:
            from returnn.tf.layers.rec_net.search import BeamSearchRun
            from returnn.tf.layers.beam_values import Beam
            run = BeamSearchRun(self, sources, ctx)
            out = run.run()
            beam, exported = getattr(run, "beam", None), dict(run.exported)
            if no_grad:  # everything the search gives comes out of its loop
                out = out.with_tensor(tf.stop_gradient(out.tensor))
                exported = {n: v.with_tensor(tf.stop_gradient(v.tensor), logits=None if v.logits is None else
                                             tf.stop_gradient(v.logits)) for n, v in exported.items()}
                beam = beam and Beam(beam.k, tf.stop_gradient(beam.scores), beam.owner)
            result = LayerOutput(out.tensor, self.output, out.sizes)
            result.sub_outputs = dict(exported, output=result)
            for name, value in result.sub_outputs.items():  # the beam-free sub-layers' values have none (search.py)
                value.beam = None if name in run.beam_free else beam
            return result
        from returnn.tf.layers.rec_net.loop import run_unit
        return run_unit(self, sources, ctx, back_prop=not no_grad)


def _declares_rec_time(unit: Mapping[str, Any]) -> bool:
    """A ``rec_unstack`` sub-layer with ``declare_rec_time`` gives the loop its length (rec_access.py)."""
    return any(isinstance(o, Mapping) and o.get("class") == "rec_unstack" and o.get("declare_rec_time")
               for o in unit.values())
