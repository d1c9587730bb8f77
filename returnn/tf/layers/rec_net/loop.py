"""Running a rec sub-network: the moved-out layers once over whole sequences, then the in-loop
layers in one ``tf.while_loop`` over the loop's time axis, their per-step outputs stacked.

Loop state: the step ``t``, the previous-step outputs read by ``prev:``, the state of cells
(``rnn_cell``, LSTM ``rec`` sub-layers) and one TensorArray per in-loop layer. With teacher
forcing every step runs for every sequence; frames past a sequence's end are computed but never
reach its real frames (they only flow forward in time), and the losses ignore them.
"""
from __future__ import annotations

import copy

from typing import Any, Dict, List, Mapping, Optional

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim
from returnn.tensor.dim_math import dyn_size_of
from returnn.tf.layers.basic import LOGIT_ACTIVATIONS
from returnn.tf.layers.base import LayerOutput, RunContext
from returnn.tf.layers.helpers import concat_inputs
from returnn.tf.layers.rec_net import frames
from returnn.tf.layers.rec_net.deps import Ref, initial_output_ref
from returnn.tf.subnetwork import MASKED_BY
from returnn.tf.util.tensor_array import stacked, stacked_padded

STEP_SEED_STRIDE = 1000003  # per-step offset of the dropout seed inside the loop


def step_context(ctx: RunContext, t: tf.Tensor, batch_size: Optional[tf.Tensor] = None) -> RunContext:
    """``ctx`` with a seed of its own for step ``t`` (dropout masks differ per step); the global
    step (``seed[1]``) is unchanged. ``batch_size``: the loop's (B * beam in search)."""
    offset = tf.stack([(tf.cast(t, tf.int64) + 1) * STEP_SEED_STRIDE, tf.constant(0, tf.int64)])
    return RunContext(ctx.train, ctx.seed + offset, batch_size if batch_size is not None else ctx.batch_size, t)


def check_max_seq_len_via(rec: Any) -> bool:
    """Whether the rec layer ``rec`` gives a most steps (``max_seq_len`` or ``max_seq_len_via``). RETURNN asserts
    ``max_seq_len_via`` is not given with ``max_seq_len`` and is a scalar layer (its value is the most steps)."""
    via = rec.opt("max_seq_len_via")
    if via is None:
        return rec.opt("max_seq_len") is not None
    if rec.opt("max_seq_len") is not None:
        raise NetworkError("%s: max_seq_len_via and max_seq_len are exclusive (RETURNN asserts)" % rec.desc)
    if not isinstance(via, str) or via not in rec.outer:
        raise NetworkError("%s: max_seq_len_via must name a layer, got %r" % (rec.desc, via))
    data = rec.outer[via]
    if data.batch_ndim != 0 or data.dtype != "int32":  # RETURNN: "not scalar"; tf.less(step, it) wants int32
        raise NetworkError("%s: max_seq_len_via %r must be a scalar int32, got %s"
                           % (rec.desc, via, data.short_repr()))
    return True


def new_loop_axis(axis: Any, outer: Mapping[str, Data]) -> bool:
    """No ``axis`` given, or a dynamic Dim no input of the loop has (RETURNN: the time axis of a loop that its
    'end' sub-layer ends, its sizes those the loop gives)."""
    return axis is None or (isinstance(axis, Dim) and axis.dimension is None
                            and not any(axis in tmpl.dims for tmpl in outer.values()))


def has_state(layer) -> bool:
    return bool(getattr(layer, "step_mode", False)) and hasattr(layer, "initial_state")


def with_derived_sizes(sizes: Dict[Dim, tf.Tensor], data: Data) -> Dict[Dim, tf.Tensor]:
    """``sizes`` plus those of ``data``'s dynamic dims computed from them by dim math (an
    edit_distance_table row: the reference's time + 1)."""
    missing = [d for d in data.dims if d.is_dynamic() and d not in sizes and getattr(d, "derived_from_op", None)]
    if not missing:
        return sizes
    out = dict(sizes)
    for d in missing:
        try:
            out[d] = dyn_size_of(d, lambda x: sizes[x])
        except KeyError:
            pass
    return out


def has_logits(layer) -> bool:
    return getattr(layer, "activation_name", None) in LOGIT_ACTIVATIONS


def _where_rows(mask: tf.Tensor, new: tf.Tensor, old: tf.Tensor) -> tf.Tensor:
    """Per batch row (axis 0): ``new`` where ``mask`` (B,) holds, else ``old``."""
    if not len(new.shape):
        return new
    return tf.where(tf.reshape(mask, [-1] + [1] * (len(new.shape) - 1)), new, old)


def keep_shape(new: tf.Tensor, old: tf.Tensor) -> tf.Tensor:
    """``new`` with the static shape of the loop variable ``old`` (a layer may lose static sizes,
    e.g. a reshape; the loop needs them to stay)."""
    return tf.ensure_shape(new, _invariant(old))


def _invariant(x: tf.Tensor) -> tf.TensorShape:
    """The shape a loop variable keeps over steps: the batch axis (first) and unknown sizes free."""
    dims = x.shape.as_list()
    return tf.TensorShape([None if i == 0 else d for i, d in enumerate(dims)])


def _source_along(src: LayerOutput, template: Data, length: LayerOutput, dim: Dim) -> LayerOutput:
    """The source of a loop that runs along ``length``'s time axis ``dim`` (RETURNN's rec loop over a unit with
    an 'end' sub-layer and a size_target / target): its frames per step, cut to the loop's extent (a loop longer
    than the source reads zeros here; RETURNN's TensorArray read fails there)."""
    ax = src.data.time_dim_axis
    n = tf.shape(length.tensor)[frames.time_axis_of(length.data, dim, is_data=True)]
    have = tf.shape(src.tensor)[ax]
    tensor = tf.gather(src.tensor, tf.range(tf.minimum(n, have)), axis=ax)
    paddings = [[0, 0]] * src.data.batch_ndim
    paddings[ax] = [0, tf.maximum(n - have, 0)]
    tensor = tf.pad(tensor, paddings)
    sizes = {d: s for d, s in src.sizes.items() if d is not src.data.dims[ax]}
    sizes[dim] = length.size(frames.time_axis_of(length.data, dim, is_data=True))
    out = LayerOutput(tensor, template, sizes)
    out.computed_padding = src.computed_padding
    return out


class UnitRun:
    """One call of a rec sub-network on a batch."""

    raw_frames = False  # the frames of whole sequences read with their padded positions as they are (frames.py)

    def __init__(self, rec, sources: List[LayerOutput], ctx: RunContext):
        self.rec = rec
        self.ctx = ctx
        self.outer = dict(zip(rec.outer_names[rec.n_from:], sources[rec.n_from:]))
        self.source: Optional[LayerOutput] = None
        # the source along its own time axis where the loop runs along another one: RETURNN's data:source
        # for the layers moved out of the loop (the loop's steps read self.source, cut to the loop's axis)
        self.source_whole: Optional[LayerOutput] = None
        if rec.n_from:
            srcs = sources[:rec.n_from]
            template = rec.source_template if rec.length_key is None else rec.source_in_template
            if rec._source_plan is None:
                self.source = srcs[0].with_tensor(srcs[0].tensor, template)
                # its padded frames as the layer before computed them: RETURNN's loop reads them past an end
                self.source.computed_padding = srcs[0].computed_padding
            else:
                self.source = concat_inputs(rec, template, rec._source_plan, srcs, RunContext(False))
            length_value = self.source
            if rec.length_key is not None:  # (layer.py: a unit with 'end') the loop as long as that data
                length_value = self.outer["data:" + rec.length_key]
                self.source_whole = self.source
                self.source = _source_along(self.source, rec.source_template, length_value, rec.time_dim)
        else:
            key = getattr(rec, "length_source", None) or ("data:" + rec.length_key if rec.length_key else None)
            length_value = self.outer[key] if key else None  # a target's, or an input's (rec_unstack, axis)
        self.seq_len: Optional[tf.Tensor] = None  # the loop's lengths (search without source: found in the loop)
        self.n_time: Optional[tf.Tensor] = None
        if length_value is not None:
            axis = frames.time_axis_of(length_value.data, rec.time_dim, is_data=True)
            self.seq_len = length_value.size(axis)
            self.n_time = tf.shape(length_value.tensor)[axis]
        self.full: Dict[str, LayerOutput] = {}
        self._readers: Dict[str, frames.FrameReader] = {}
        self._set_known()

    def _set_known(self) -> None:
        """Batch size, extents and sizes of the dims of all outer values (again after a beam expansion)."""
        known = dict(self.outer)
        if self.source is not None:
            known["data:source"] = self.source
        if self.source_whole is not None:
            known["data:source (whole)"] = self.source_whole
        batched = [v for v in known.values() if v.data.batch_dim_axis is not None]
        if batched:
            self.batch = tf.shape(batched[0].tensor)[batched[0].data.batch_dim_axis]
        elif self.ctx.batch_size is not None:
            self.batch = self.ctx.batch_size * getattr(self, "k", 1)
        else:
            raise NetworkError("%s: no input with a batch axis (give the rec layer a source or a base: layer)"
                               % self.rec.desc)
        self.extents = frames.dim_extents(known)
        self.sizes: Dict[Dim, tf.Tensor] = {}
        for v in known.values():
            self.sizes.update(v.sizes)
        if self.seq_len is not None:
            self.sizes[self.rec.time_dim] = self.seq_len

    # ---- whole sequences
    def value(self, ref_str: str) -> LayerOutput:
        """A reference outside the loop: data, base layers, moved-out layers, their prev:."""
        ref = Ref.parse(ref_str)
        if ref.kind == "data":
            if ref.name == "source":
                return self.source if self.source_whole is None else self.source_whole
            return frames.value_on_loop_time(self.outer["data:" + ref.name], self.rec.data_template(ref.name))
        if ref.kind == "base":
            return self.outer[ref.name]
        if ref.kind == "self":
            return self.full[ref.name]
        if ref.kind == "prev":
            return self._shifted(ref.name)
        n_time = self.n_time if self.n_time is not None else \
            tf.reduce_max(tf.concat([tf.reshape(self.seq_len, [-1]), [0]], 0))
        return LayerOutput(tf.range(n_time), Data(":i", dims=(self.rec.time_dim,), dtype="int32"),
                           {self.rec.time_dim: self.seq_len})  # ':i' after the loop: the frames' indices

    def _shifted(self, name: str) -> LayerOutput:
        key = "prev:" + name
        if key not in self.full:
            value = self.full[name]
            axis = frames.time_axis_of(value.data, self.rec.time_dim)
            if axis is None:
                self.full[key] = value
            else:  # RETURNN shifts the whole padded sequence: its frame at a sequence's length is the last real
                # one, past that the layer's frames as it computed them (extern data's as zero frames)
                init = self.initial(name, value.data.copy_template_excluding_axis(axis))
                known_fill = value.packed is not None and value.packed.fill is not None
                src = value if known_fill or self.raw_frames else value.with_tensor(value.as_read())
                self.full[key] = frames.shift_right(src, axis, init)
                self.full[key].computed_padding = value.computed_padding
        return self.full[key]

    def state_values(self, layer) -> List[LayerOutput]:
        """The values of the layers a cell's ``initial_state`` names (read once, before the loop)."""
        return [self.value(r) for r in getattr(layer, "state_refs", ())]

    def initial_state(self, name: str, n_time: Optional[tf.Tensor] = None) -> Any:
        """The state the cell ``name`` starts the loop from (``n_time``: the loop length, default the
        sequences' longest)."""
        layer = self.rec.layers[name]
        n_time = self.n_time if n_time is None else n_time
        if getattr(layer, "state_from_initial_output", False):  # a running sum from its initial_output
            return self.initial(name, layer.output)
        if getattr(layer, "state_refs", None) is None:  # no initial_state option (self-attention's own state)
            return layer.initial_state(self.batch, n_time)
        return layer.initial_state(self.batch, n_time, self.state_values(layer), self.ctx)

    def initial(self, name: str, template: Data) -> tf.Tensor:
        """``prev:name`` at step 0, shaped like ``template``."""
        opts = self.rec.unit[name]
        layer = self.rec.layers[name]
        if getattr(layer, "prev_state", None) is not None:  # a cell with a non-zero initial state: its output
            return tf.cast(layer.prev_initial_output(self.batch, self.state_values(layer)), tf.as_dtype(template.dtype))
        where = "%s, sub-layer %r" % (self.rec.desc, name)
        spec = opts.get("initial_output")
        if isinstance(spec, str) and spec == "var":  # RETURNN's trainable initial output (B, F)
            var = tf.cast(layer.initial_output_var, tf.as_dtype(template.dtype))
            shape = [1 if d.is_batch_dim() else d.dimension for d in template.dims]
            return tf.tile(tf.reshape(var, shape), [self.batch if d.is_batch_dim() else 1 for d in template.dims])
        if isinstance(spec, str) and spec == "apply(0)":
            return self._applied_to_zeros(name, template)
        ref = initial_output_ref(opts)
        layer_value = self.value(ref.kind + ":" + ref.name if ref.kind != "self" else ref.name) if ref else None
        return frames.initial_value(spec, template, self.batch, self.extents, where, layer_value)

    def _applied_to_zeros(self, name: str, template: Data) -> tf.Tensor:
        """RETURNN's ``initial_output: "apply(0)"``: the layer applied to zeros of its sources'
        shapes (dynamic axes of extent 1), as ``template`` (its frame 0 when it runs outside the loop)."""
        layer = self.rec.layers[name]
        if getattr(layer, "step_mode", False) and getattr(layer, "state_from_initial_output", False):
            return tf.zeros(tf.stack([self.batch if d.is_batch_dim() else d.dimension for d in template.dims]),
                            tf.as_dtype(template.dtype))  # a running sum over zeros from zero
        srcs = []
        for tmpl in layer.sources:
            shape = [self.batch if d.is_batch_dim() else (d.dimension if d.dimension is not None else 1)
                     for d in tmpl.dims]
            sizes = {d: tf.ones(tf.stack([self.batch]), tf.int32) for d in tmpl.dims
                     if d.is_dynamic() and not d.is_batch_dim()}
            srcs.append(LayerOutput(tf.zeros(tf.stack(shape), tf.as_dtype(tmpl.dtype)), tmpl, sizes))
        out = layer(srcs, self.ctx)
        axis = frames.time_axis_of(out.data, self.rec.time_dim)
        value = out.tensor if axis is None else tf.gather(out.tensor, 0, axis=axis)
        return tf.cast(value, tf.as_dtype(template.dtype))

    def run_moved_out(self) -> None:
        ctx = copy.copy(self.ctx)  # a layer that adds the loop's axis itself (random) reads its sizes here
        if self.seq_len is not None:  # (a search loop has no frames before it)
            n_time = self.n_time if self.n_time is not None else tf.reduce_max(tf.concat([self.seq_len, [0]], 0))
            ctx.moved_out_time = (self.rec.time_dim, n_time, self.seq_len)
        for sub in self.rec._build_order():
            if sub in self.rec.in_loop:
                continue
            srcs = [self.value(s) for s in self.rec.sub_sources[sub]]
            self.full[sub] = self.rec.layers[sub](srcs, ctx)

    # ---- the loop
    def _frame(self, key: str, value: LayerOutput, t: Optional[tf.Tensor], is_data: bool = False
               ) -> Optional[LayerOutput]:
        if key not in self._readers:
            raw = self.raw_frames or key.startswith("prev:") or self._embeds_data(key)
            self._readers[key] = frames.FrameReader(value, self.rec.time_dim, is_data, raw=raw)
        return None if t is None else self._readers[key].frame(t)

    def _embeds_data(self, key: str) -> bool:
        """Whether moved-out layer ``key`` is a linear map of sparse data (an embedding): its padded
        frames embed the padded class index (finite; 0 as datasets pad), which RETURNN's loop reads
        past a sequence's end as they are."""
        layer, srcs = self.rec.layers.get(key), self.rec.sub_sources.get(key, ())
        return getattr(layer, "layer_class", None) == "linear" and bool(srcs) and all(
            Ref.parse(s).kind == "data" and self.value(s).data.sparse for s in srcs)

    def prepare_frames(self) -> None:
        """Creates the frame readers of everything the in-loop layers read from whole sequences
        (their transposes must happen once, before the loop, not in every step)."""
        for n in self.rec.plan.in_loop:
            for ref_str in self.rec.sub_sources[n]:
                ref = Ref.parse(ref_str)
                if ref.kind == "data":
                    self._frame(ref_str if ref.name != "source" else "data:source", self.value(ref_str), None, True)
                elif ref.kind in ("self", "prev") and ref.name not in self.rec.in_loop:
                    self._frame(ref_str, self.value(ref_str), None)

    def prev_end_flag(self, t: tf.Tensor) -> Optional[tf.Tensor]:
        """RETURNN's prev end flag of step ``t`` with known lengths (no search): past the step after the
        last frame (``t >= len + 1``; with ``include_eos`` ``t >= len``); (B,) bool."""
        if self.seq_len is None:
            return None
        return t >= self.seq_len + (0 if self.rec.opt("include_eos") else 1)

    def max_len(self) -> tf.Tensor:
        """``max_seq_len`` of the rec layer: an int, or an expression with ``max_len_from("base:x")``;
        default: 10 times the longest input of the batch (at least 10 steps)."""
        if self.n_time is not None:
            return self.n_time
        spec = self.rec.opt("max_seq_len")
        if self.rec.opt("max_seq_len_via") is not None:  # a scalar layer's value (checked: check_max_seq_len_via)
            return tf.cast(self.value("base:" + self.rec.opt("max_seq_len_via")).tensor, tf.int32)

        def max_len_from(ref: str) -> tf.Tensor:
            value = self.value(ref if ref.startswith(("base:", "data:")) else "base:" + ref)
            size = value.seq_len if value.seq_len is not None else tf.shape(value.tensor)[value.data.time_dim_axis]
            return tf.reduce_max(size)

        if spec is None:
            extents = [tf.cast(e, tf.int32) for e in self.extents.values()]
            return tf.maximum(10 * tf.reduce_max(tf.stack(extents)), 10) if extents else tf.constant(100)
        if isinstance(spec, str):
            try:
                value = eval(spec, {"__builtins__": {}}, {"max_len_from": max_len_from, "tf": tf})  # config code
            except Exception as exc:  # noqa: BLE001 - one line naming the option
                raise NetworkError("%s: max_seq_len %r: %s" % (self.rec.desc, spec, exc)) from None
            return tf.cast(value, tf.int32)
        return tf.constant(int(spec), tf.int32)

    def _prev_template(self, name: str) -> Data:
        return self.rec._guessed.get(name, self.rec.layers[name].output)

    def step_value(self, ref_str: str, t: tf.Tensor, prev: Mapping[str, tf.Tensor],
                   vals: Mapping[str, LayerOutput], state: Optional[Mapping[str, Any]] = None) -> LayerOutput:
        ref = Ref.parse(ref_str)
        if ref.kind == "step":
            return LayerOutput(t, Data(":i", dims=(), dtype="int32"))
        if ref.kind == "data":
            whole = self.source if ref.name == "source" else self.value(ref_str)
            return self._frame(ref_str if ref.name != "source" else "data:source", whole, t, True)
        if ref.kind == "base":
            return self.outer[ref.name]
        if ref.name in self.rec.in_loop:
            if ref.kind == "self":
                return vals[ref.name]
            tmpl = self._prev_template(ref.name)
            value = LayerOutput(prev[ref.name], tmpl, with_derived_sizes(self.sizes, tmpl))
            if state is not None and ref.name in state and hasattr(self.rec.layers[ref.name], "state_tensors"):
                # prev: of a cell: its state entering this step (for get_last_hidden_state)
                cell, cell_state = self.rec.layers[ref.name], state[ref.name]
                value.last_state = lambda: cell.state_tensors(cell_state)
            if state is not None and ref.name in state:  # the state entering this step (optimal_completions)
                value.rec_state = state[ref.name]
            return value
        return self._frame(ref_str, self.value(ref_str), t)

    def step_layer(self, n: str, t: tf.Tensor, prev: Mapping[str, tf.Tensor], state: Mapping[str, Any],
                   vals: Mapping[str, LayerOutput], new_state: Dict[str, Any], ctx: RunContext) -> LayerOutput:
        """In-loop layer ``n`` at step ``t`` (a cell's new state goes to ``new_state``)."""
        layer = self.rec.layers[n]
        srcs = [self.step_value(s, t, prev, vals, state) for s in self.rec.sub_sources[n]]
        mask_ref = self.rec.unit[n].get(MASKED_BY)
        if mask_ref:
            mask = tf.reshape(tf.cast(self.step_value(mask_ref, t, prev, vals, state).tensor, tf.bool), [-1])
            # labels where the mask is False are never used; they may lie outside the classes (an RNA blank
            # before a 'set_sparse_dim' without it), where an embedding fails on CPU: label 0 there instead
            srcs = [s.with_tensor(_where_rows(mask, s.tensor, tf.zeros_like(s.tensor)))
                    if s.data.sparse and s.data.batch_dim_axis == 0 else s for s in srcs]
        if n in state:
            out, new_state[n] = layer.step(srcs, state[n], ctx, t)
        else:
            out = layer(srcs, ctx)
        if mask_ref:  # a masked_computation's layer: where the mask is False, it keeps its last output and state
            out = out.with_tensor(_where_rows(mask, out.tensor, tf.cast(prev[n], out.tensor.dtype)))
            if n in state:
                new_state[n] = tf.nest.map_structure(lambda a, b: _where_rows(mask, a, b), new_state[n], state[n])
        return out

    def keep_last(self, names: List[str]) -> List[str]:
        """RETURNN's need_last in the loop: the layers whose frames after the sequence's (or hypothesis') end
        repeat its last frame (see :meth:`_kept_last`)."""
        return [n for n in names if self.rec.unit[n].get("need_last") and self.rec.unit[n].get("class") != "choice"]

    def _kept_last(self, out: LayerOutput, prev: tf.Tensor, t: tf.Tensor, ended: Optional[tf.Tensor]) -> LayerOutput:
        """RETURNN's need_last: the previous output where the sequence has ended at step ``t`` (``ended``: the
        loop's end flag, RETURNN's 'end' or with include_eos 'prev:end'; with known lengths ``t >= len``, with
        include_eos ``t >= len - 1``)."""
        if ended is None:
            if self.seq_len is None:
                return out
            ended = t >= self.seq_len - (1 if self.rec.opt("include_eos") else 0)
        if out.data.batch_dim_axis != 0:  # (a layer without batch axis in the loop: one value for all)
            return out
        return out.with_tensor(_where_rows(tf.logical_not(ended), out.tensor, tf.cast(prev, out.tensor.dtype)))

    def run_loop(self) -> Dict[str, LayerOutput]:
        rec = self.rec
        names = rec.plan.in_loop
        self.prepare_frames()
        keep_last = self.keep_last(names)
        prev_names = [n for n in names if n in rec.plan.prev_used or n in keep_last]
        prev0 = {n: self.initial(n, self._prev_template(n)) for n in prev_names}
        state0 = {n: self.initial_state(n) for n in names if has_state(rec.layers[n])}
        ends = getattr(rec, "ends", False)  # ended by its 'end' sub-layer (no known length)
        limit = self.max_len() if ends else self.n_time

        step_dims = self._step_dims(names)  # dynamic dims made in the loop: their sizes per step are stacked too

        def array(dtype, n: str = "") -> tf.TensorArray:  # frames of step dims are read twice (stacked_padded)
            return tf.TensorArray(dtype, size=0 if ends else self.n_time, dynamic_size=ends, infer_shape=False,
                                  clear_after_read=n not in step_dims)

        tas = {n: array(tf.as_dtype(rec.layers[n].output.dtype), n) for n in names}
        logit_tas = {n: array(tf.float32, n) for n in names if has_logits(rec.layers[n])}
        tas.update({_size_key(n, d): array(tf.int32) for n, dims in step_dims.items() for d in dims})
        # RETURNN's end flag (ORed over the steps) and each sequence's length so far: a step counts unless it
        # is the one of the end (or, with include_eos, after it)
        fin0 = (tf.zeros([self.batch], tf.bool), tf.zeros([self.batch], tf.int32)) if ends else ()
        include_eos = bool(rec.opt("include_eos"))

        size_ranks: Dict[str, int] = {}  # of the per-step sizes of step_dims (seen when the body is traced)

        def body(t, prev, state, tas, logit_tas, fin):
            ctx = step_context(self.ctx, t, self.batch)
            ctx.prev_end = fin[0] if ends else self.prev_end_flag(t)
            vals: Dict[str, LayerOutput] = {}
            new_state = {}
            tas, logit_tas = dict(tas), dict(logit_tas)
            for n in names:
                out = vals[n] = self.step_layer(n, t, prev, state, vals, new_state, ctx)
                if ends and n == "end":  # RETURNN: ORed with prev:end (an end without batch axis: for all)
                    flag = tf.cast(out.tensor, tf.bool)
                    if flag.shape.rank == 0:
                        flag = tf.logical_or(tf.reduce_any(fin[0]), flag)
                        ended = tf.fill([self.batch], flag)
                    else:
                        flag = tf.logical_or(tf.reshape(fin[0], tf.shape(flag)), flag)
                        ended = tf.reshape(flag, [-1])
                    out = vals[n] = out.with_tensor(flag)
                    fin = (ended, fin[1] + tf.where(fin[0] if include_eos else ended, 0, 1))
                if n in keep_last:  # written below, once the step's end flag is known
                    continue
                tas[n] = tas[n].write(t, out.tensor)
                for d in step_dims.get(n, ()):
                    size_ranks[_size_key(n, d)] = len(out.sizes[d].shape)
                    tas[_size_key(n, d)] = tas[_size_key(n, d)].write(t, out.sizes[d])
                if n in logit_tas:
                    logit_tas[n] = logit_tas[n].write(t, out.logits)
            for n in keep_last:
                vals[n] = self._kept_last(vals[n], prev[n], t, ctx.prev_end if include_eos else fin[0] if ends else None)
                tas[n] = tas[n].write(t, vals[n].tensor)
            new_prev = {n: keep_shape(tf.cast(vals[n].tensor, prev[n].dtype), prev[n]) for n in prev}
            new_state = {n: tf.nest.map_structure(keep_shape, new_state[n], state[n]) for n in state}
            return t + 1, new_prev, new_state, tas, logit_tas, fin

        def cond(t, *args):
            if not ends:
                return t < limit
            return tf.logical_and(t < limit, tf.reduce_any(tf.logical_not(args[-1][0])))

        loop_vars = (tf.constant(0), prev0, state0, tas, logit_tas, fin0)
        invariants = (tf.TensorShape([]), tf.nest.map_structure(_invariant, prev0),
                      tf.nest.map_structure(_invariant, state0),
                      {n: tf.TensorShape(None) for n in tas}, {n: tf.TensorShape(None) for n in logit_tas},
                      tf.nest.map_structure(_invariant, fin0))
        _, _, state_f, tas, logit_tas, fin = tf.while_loop(cond, body, loop_vars, shape_invariants=invariants)
        for n, final in state_f.items():  # states carried to the next training step (keep_over_epoch)
            if hasattr(rec.layers[n], "keep_final_state"):
                rec.layers[n].keep_final_state(final, self.ctx)
        n_keep = None
        if ends:  # the loop's lengths; its frames up to the longest (RETURNN stacks up to there)
            self.seq_len = fin[1]
            n_keep = tf.reduce_max(tf.concat([self.seq_len, [0]], 0))
            if rec.layers["end"].output.batch_dim_axis is None:  # RETURNN: one length (a scalar) for all sequences
                self.seq_len = n_keep
            self.sizes[rec.time_dim] = self.seq_len
        out = {}
        for n in names:  # stacked also when no step ran (T = 0: every sequence of the batch empty)
            empty = [0] + frames.frame_shape(rec.layers[n].output, self.batch)
            stack = stacked_padded if n in step_dims else stacked  # frames of another size each step
            logits = stack(logit_tas[n], empty) if n in logit_tas else None
            sizes = dict(self.sizes)
            for d in step_dims.get(n, ()):
                key = _size_key(n, d)
                sizes[d] = frames.stacked_sizes(stacked(tas[key], [0] + [self.batch] * size_ranks.get(key, 0))[:n_keep],
                                                d, rec.time_dim)
            out[n] = frames.stack_steps(stack(tas[n], empty)[:n_keep], rec.layers[n].output, rec.time_dim, sizes,
                                        None if logits is None else logits[:n_keep])
        return out

    def _step_dims(self, names: List[str]) -> Dict[str, List[Dim]]:
        """Per in-loop layer, the dynamic dims of its frames whose sizes come from the step (e.g.
        cum_concat's frames so far): not known outside the loop."""
        out = {}
        for n in names:
            dims = [d for d in self.rec.layers[n].output.dims if d.is_dynamic() and d not in self.sizes]
            if dims:
                out[n] = dims
        return out


def run_unit(rec, sources: List[LayerOutput], ctx: RunContext, back_prop: bool = True) -> LayerOutput:
    """The rec layer's value; ``sub_outputs`` on it holds every sub-layer's whole sequence. Without
    ``back_prop`` the in-loop layers' values carry no gradient (RETURNN's while_loop option)."""
    run = UnitRun(rec, sources, ctx)
    run.run_moved_out()
    values = {n: v for n, v in run.full.items() if not n.startswith("prev:")}
    if rec.plan.in_loop:
        stacked = run.run_loop()
        if not back_prop:
            stacked = {n: v.with_tensor(tf.stop_gradient(v.tensor), logits=None if v.logits is None else
                                        tf.stop_gradient(v.logits)) for n, v in stacked.items()}
        for v in stacked.values():  # the steps past a sequence's end are computed (RETURNN's loop stacks them
            v.computed_padding = True  # unmasked), also for the layers after the loop that read them
        values.update(stacked)
        run.full.update(stacked)
    for sub in rec.after_order:  # layers that only read the loop's outputs: once over the stacked sequences
        run.full[sub] = values[sub] = rec.layers[sub]([run.value(s) for s in rec.sub_sources[sub]], run.ctx)
    subs = {n: LayerOutput(v.tensor, rec.sub_template(n), v.sizes, v.logits) for n, v in values.items()}
    for n, v in values.items():  # a sampled loss of a layer computed over the whole sequence reads its input
        subs[n].sampling_inputs = v.sampling_inputs
        # the loop's steps past a sequence's end are computed (RETURNN's loop stacks them unmasked)
        subs[n].computed_padding = v.computed_padding or n in rec.plan.in_loop
    main = subs["output"]
    result = LayerOutput(main.tensor, rec.output, main.sizes, main.logits)
    result.computed_padding = main.computed_padding
    result.sub_outputs = subs
    # a sub-layer's value before the first frame (rec_last_output of a sequence of length 0)
    result.initial_output = lambda n: run.initial(n, frames.step_template(rec.layers[n].output, rec.time_dim))
    return result


def _size_key(name: str, dim: Dim) -> str:
    """Key of the TensorArray of the per-step sizes of ``dim`` of in-loop layer ``name``."""
    return "%s:size:%s" % (name, dim.description)
