"""``edit_distance_table`` and ``optimal_completions``: RETURNN's EditDistanceTableLayer and
OptimalCompletionsLayer (optimal completion distillation), with TensorFlow ops
(returnn/tf/util/edit_distance_rows.py) in place of RETURNN's native ones.

Both run inside a rec loop only, one step at a time, and read the reference through ``target``
(``"layer:base:data:KEY"``: the whole reference sequence (B, T_b), with its lengths).

- ``edit_distance_table`` (from the chosen label of the step, sparse (B,)): its state and output is
  the row (B, T_b + 1) of edit distances of the labels so far against every prefix of the reference;
  at step 0 it starts from ``range(T_b + 1)`` (so does ``prev:`` of it, RETURNN's initial output).
  A hypothesis whose previous step ended (RETURNN's prev end flag: in search ``prev:end``, else the step
  after the loop's length ``t >= len + 1``, ``t >= len`` with ``include_eos``) keeps its row. With
  ``blank_idx``, the blank label keeps the row too and the position counts only the other labels
  (its state ``source_len``). The output's axis is the reference's time dim + 1; its sizes are
  ``b_len + 1``; entries after ``b_len`` repeat the entry at ``b_len`` (as RETURNN's op writes them).
- ``optimal_completions`` (from ``prev:`` of the table): (B, V) int32, per label the least edit distance
  any completion of the prefix extended by it can reach (the row's minimum), V the reference's classes
  (at least ``blank_idx + 1``). The OCD config turns it into soft targets with an ``eval`` softmax.

``debug`` prints the rows per step (tf.print, to standard error; RETURNN's text differs).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.options import Option
from returnn.tf.layers.rnn_cell import is_step_template
from returnn.tf.util.edit_distance_rows import initial_row, next_edit_distance_row, optimal_completion_distances


def _target_ref(layer: Layer) -> str:
    """The reference the ``target`` option names (``layer:REF``; REF read as a source)."""
    target = layer.opt("target")
    if not isinstance(target, str) or not target.startswith("layer:"):
        raise NetworkError("%s: 'target' must name the whole reference sequence as 'layer:base:data:KEY' (RETURNN "
                           "reads it with its time axis, which a data key inside the loop has not), got %r"
                           % (layer.desc, target))
    return target[len("layer:"):]


def _source_and_reference(layer: Layer, sources: Sequence[Data]) -> Tuple[Data, Data]:
    """Checks the ``target`` option and the sources: the layer's one source, then the reference."""
    _target_ref(layer)
    if len(sources) != 2:
        raise NetworkError("%s: expects exactly one source (RETURNN asserts it), got %i" % (layer.desc, len(sources) - 1))
    return sources[0], sources[1]


def _check_reference(layer: Layer, data: Data) -> Dim:
    """The reference template: int32 sparse (B, T_b); returns its time dim."""
    time_axes = [i for i, d in enumerate(data.dims) if not d.is_batch_dim()]
    if not data.sparse or data.dtype != "int32" or data.batch_dim_axis is None or len(time_axes) != 1 \
            or not data.dims[time_axes[0]].is_dynamic():
        raise NetworkError("%s: target %r must be sparse int32 labels (batch, time) with their lengths (RETURNN "
                           "asserts it), got %s" % (layer.desc, layer.opt("target"), data.short_repr()))
    return data.dims[time_axes[0]]


def _classes(layer: Layer, data: Data) -> int:
    """The number of labels: the reference's classes, at least ``blank_idx + 1``."""
    n = data.sparse_dim.dimension if data.sparse_dim is not None else data.dim
    blank = layer.opt("blank_idx")
    if blank is not None:
        if not isinstance(blank, int) or isinstance(blank, bool) or blank < 0:
            raise NetworkError("%s: blank_idx must be a label index (int >= 0), got %r" % (layer.desc, blank))
        n = max(n, blank + 1)
    return n


def _reference(value: LayerOutput) -> Tuple[tf.Tensor, tf.Tensor]:
    """The reference labels (B, T_b) and lengths (B,)."""
    data = value.data
    time_axis = [i for i, d in enumerate(data.dims) if not d.is_batch_dim()][0]
    labels = value.tensor if data.batch_dim_axis == 0 else tf.transpose(value.tensor, [1, 0])
    return tf.cast(labels, tf.int32), tf.cast(value.size(time_axis), tf.int32)


def _prev_end(layer: Layer, ctx: RunContext) -> tf.Tensor:
    ended = getattr(ctx, "prev_end", None)
    if ended is None:
        raise NetworkError("%s: runs only inside a rec loop that knows when its sequences end" % layer.desc)
    return tf.reshape(tf.cast(ended, tf.bool), [-1])


@register_layer
class EditDistanceTableLayer(Layer):
    """See the module docstring."""

    layer_class = "edit_distance_table"
    stays_in_loop = True  # a row per step, carried as loop state (RETURNN: recurrent)
    ref_options = ("target",)  # 'layer:REF': the reference, appended to the sources
    options = (
        Option("axis", None, "RETURNN: only the loop's single step (a whole sequence is refused, as RETURNN)"),
        Option("debug", False, "prints the rows per step (tf.print)"),
        Option("blank_idx", None, "a label that keeps the row (not counted as a position)"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        src, ref = _source_and_reference(self, sources)
        axis = self.opt("axis")
        if axis is not None and not (isinstance(axis, Dim) and "single" in axis.description.lower()):
            raise NetworkError("%s: axis %r: operating on a whole sequence is not supported (RETURNN neither); keep the "
                               "layer inside the rec loop" % (self.desc, axis))
        if not is_step_template(sources) or src.batch_ndim != 1:
            raise NetworkError("%s: runs inside a rec loop on the step's label (batch,), got %s (RETURNN: operating on a "
                               "whole sequence is not supported)" % (self.desc, src.short_repr()))
        in_dim = _check_reference(self, ref)
        n = _classes(self, ref)
        if not src.sparse or src.dtype != "int32" or (src.sparse_dim.dimension if src.sparse_dim else src.dim) != n:
            raise NetworkError("%s: source must be int32 labels of the reference's %i classes (RETURNN asserts it), got %s"
                               % (self.desc, n, src.short_repr()))
        if self.opt("n_out") is not None:
            raise NetworkError("%s: n_out is not an option of this layer (its dim is the reference's length + 1)" % self.desc)
        self.blank_idx = self.opt("blank_idx")
        self.row_dim = in_dim + 1
        out_dim = self.opt("out_dim")
        if out_dim is not None:
            if not isinstance(out_dim, Dim):
                raise NetworkError("%s: out_dim must be a Dim, got %r" % (self.desc, out_dim))
            self.row_dim.declare_same_as(out_dim)
        self.step_mode = True
        self.state_refs = [_target_ref(self)]
        self.prev_state = True  # prev: of it at step 0 is the start row (prev_initial_output)
        self.output = Data(name, dims=(src.dims[0], self.row_dim), dtype="int32", feature_dim_axis=None)

    @classmethod
    def assumed_output(cls, name: str, opts: Dict[str, Any], sources: Sequence[Data]) -> Optional[Data]:
        """The one-frame template (batch, reference time + 1) from the sources' assumed templates (its
        source label's assumed classes may still be wrong: the rec unit checks the built layer)."""
        if len(sources) != 2 or sources[0].batch_dim_axis is None:
            return None
        ref = sources[1]
        time_dims = [d for d in ref.dims if not d.is_batch_dim()]
        if len(time_dims) != 1 or not time_dims[0].is_dynamic():
            return None
        return Data(name, dims=(sources[0].dims[sources[0].batch_dim_axis], time_dims[0] + 1), dtype="int32",
                    feature_dim_axis=None)

    def initial_state(self, batch: tf.Tensor, n_time: Any = None, values: Sequence[LayerOutput] = (),
                      ctx: Optional[RunContext] = None):
        """The start row ``range(T_b + 1)`` (and with ``blank_idx`` the labels counted so far: 0)."""
        labels, _ = _reference(values[0])
        row = initial_row(batch, tf.shape(labels)[1])
        return row if self.blank_idx is None else (row, tf.zeros(tf.stack([batch]), tf.int32))

    def prev_initial_output(self, batch: tf.Tensor, values: Sequence[LayerOutput]) -> tf.Tensor:
        """``prev:`` of the layer at step 0: the start row (RETURNN's get_rec_initial_output)."""
        labels, _ = _reference(values[0])
        return initial_row(batch, tf.shape(labels)[1])

    def step(self, sources: List[LayerOutput], state, ctx: RunContext, t: tf.Tensor):
        src, ref = sources
        labels, lengths = _reference(ref)
        ended = _prev_end(self, ctx)
        label = tf.cast(tf.reshape(src.tensor, [-1]), tf.int32)
        if self.blank_idx is None:
            last, position = state, t
        else:
            last, position = state
            ended = tf.logical_or(ended, tf.equal(label, self.blank_idx))
        row = next_edit_distance_row(last, label, position, ended, labels, lengths)
        if self.opt("debug"):
            row = _debug_print(self, row, ["a_n", position, "a_ended", ended, "a", label, "b", labels, "b_len", lengths,
                                           "last_row", last, "next_row", row])
        new_state = row if self.blank_idx is None else (row, position + tf.where(ended, 0, 1))
        return self.make_output(row, [src], {self.row_dim: lengths + 1}), new_state

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        raise NetworkError("%s: runs only inside a rec layer's unit (RETURNN: operating on a whole sequence is not "
                           "supported)" % self.desc)


@register_layer
class OptimalCompletionsLayer(Layer):
    """See the module docstring."""

    layer_class = "optimal_completions"
    stays_in_loop = True  # reads the step and the prev end flag (RETURNN: recurrent)
    ref_options = ("target",)
    options = (
        Option("debug", False, "prints the best labels per step (tf.print)"),
        Option("blank_idx", None, "a label that keeps the row (its source_len comes from the edit_distance_table)"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        src, ref = _source_and_reference(self, sources)
        _check_reference(self, ref)
        if not is_step_template(sources) or src.dtype != "int32" or src.batch_ndim != 2 or src.batch_dim_axis != 0 \
                or src.sparse:
            raise NetworkError("%s: source must be an edit_distance_table row (batch, T_b + 1) int32 inside a rec loop "
                               "(RETURNN asserts it), got %s" % (self.desc, src.short_repr()))
        self.n_labels = _classes(self, ref)
        n_out = self.opt("n_out")
        if n_out is not None and n_out != self.n_labels:
            raise NetworkError("%s: n_out %r differs from the reference's %i classes" % (self.desc, n_out, self.n_labels))
        self.blank_idx = self.opt("blank_idx")
        self.step_mode = True
        classes = ref.sparse_dim
        feat = classes if classes is not None and classes.dimension == self.n_labels else \
            Dim(self.n_labels, kind=Dim.Types.Feature, description="%s:classes" % name)
        self.output = Data(name, dims=(src.dims[0], feat), dtype="int32")

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        src, ref = sources
        if ctx.step is None:
            raise NetworkError("%s: runs only inside a rec layer's unit" % self.desc)
        labels, lengths = _reference(ref)
        ended = _prev_end(self, ctx)
        position = ctx.step
        if self.blank_idx is not None:
            position = src.rec_state[1] if isinstance(getattr(src, "rec_state", None), tuple) else None
            if position is None:  # RETURNN: expects it from the edit_distance_table's rec vars
                raise NetworkError("%s: with blank_idx the source must be prev: of an edit_distance_table with the same "
                                   "blank_idx (its count of non-blank labels)" % self.desc)
        out = optimal_completion_distances(src.tensor, self.n_labels, position, ended, labels, lengths, self.blank_idx)
        if self.opt("debug"):
            top_values, top_indices = tf.math.top_k(-out, k=min(5, self.n_labels))
            out = _debug_print(self, out, ["a_n", position, "a_ended", ended, "a best", top_indices, -top_values,
                                           "b", labels, "b_len", lengths, "last_row", src.tensor])
        return self.make_output(out, [src])


def _debug_print(layer: Layer, value: tf.Tensor, items: List[Any]) -> tf.Tensor:
    """RETURNN's ``debug`` option: the items printed when ``value`` is computed."""
    with tf.control_dependencies([tf.print(layer.desc, *items, summarize=-1)]):
        return tf.identity(value)
