"""Recurrent layer ``rec``: one fast LSTM implementation behind all of RETURNN's LSTM unit names.

LSTM definition (per frame ``t``, ``z = x_t W + h_{t-1} W_re + bias``, split into four blocks of
size ``n_out`` in the gate order **(input, cell-candidate, forget, output)**)::

    i, g, f, o = split(z)
    c_t = sigmoid(f + forget_bias) * c_{t-1} + sigmoid(i) * tanh(g)
    h_t = sigmoid(o) * tanh(c_t)

``forget_bias`` is a constant (not a variable), settable by ``"unit_opts": {"forget_bias": ...}``
(RETURNN's native units take only 0);
its default is RETURNN's per unit: 0 for the native/fused units (``lstm``, ``nativelstm(2)``,
``lstmp``, ``cudnnlstm``, ``lstmblock(fused)``, which RETURNN runs as NativeLSTM on TF 2, and its
``vanillalstm`` cell), 1.0 for
``standardlstm`` and ``basiclstm`` (TensorFlow's cells). ``initial_state``: RETURNN's forms (zeros,
ones, a trainable ``var``, ``keep_over_epoch``, layers, ``{"c": .., "h": ..}``; see
:mod:`returnn.tf.layers.rec_state`); its ``var`` parameters are ``rec/initial_c`` and
``rec/initial_h``. ``standardlstm`` takes TensorFlow's ``use_peepholes`` (``unit_opts``; parameters
``rec/lstm_cell/w_i_diag``, ``w_f_diag``, ``w_o_diag``): the input and forget gates also see
``w * c_{t-1}``, the output gate ``w * c_t``; and its ``cell_clip`` (``c_t`` clipped to +-cell_clip). ``layernormvariantslstm`` is RETURNN's
layer-normalized LSTM (see :mod:`returnn.tf.layers.lstm_layernorm`).

The input projection ``x W`` is one big matmul over all frames (sparse inputs are an embedding
lookup); the recurrence is a kernel of :mod:`returnn.tf.lstm_kernels` (chosen per device; works
with unknown T). Padded frames (t >= seq_len) never influence real frames; their output is 0.
``direction: -1`` runs over each sequence reversed within its own length.

Other cell units (``gru``, ``basicrnn``, ``zoneoutlstm``, ...: RETURNN runs TensorFlow's cells) and
LSTM units inside a rec loop run as :class:`returnn.tf.layers.rec_step.RecStepLayer`; a dict unit is a
sub-network (:class:`returnn.tf.layers.rec_net.layer.RecSubnetLayer`).
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

import tensorflow as tf

from returnn.errors import NetworkError, known_list
from returnn.tensor import Data, Dim, DimTypes
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.output import lengths_along
from returnn.tf.layers.helpers import dropout, dropout_sources, feature_plan, plan_output, project_sources
from returnn.tf.layers.lstm_layernorm import LayerNormLstm
from returnn.tf.layers.merged_batch import MergedAxes
from returnn.tf.layers.options import Option, rate
from returnn.tf.layers.params import Param, same
from returnn.tf.layers.rec_params import check_native_unit_opts, check_state_cell_unit_opts, unit_params
from returnn.tf.layers.rec_state import (LSTM_KEYS, SINGLE_KEYS, InitialState, check_state_layers,
                                         explicit_state_refs, is_zero, state_layer_refs)
from returnn.tf.layers.rec_step import (
    INPUT_PROJECTION, LOOP_AXIS, SUBNET_ONLY_OPTIONS, check_input_projection, check_loop_axis, check_unrolled_length,
    unrolled_max_len,
)
from returnn.tf.layers.rnn_cell import cell_clip_opt, is_step_template
from returnn.tf.lstm_kernels import final_state_fn, get_kernel, lstm_sequence

# unit name -> default forget bias (RETURNN's: native kernels 0, TensorFlow's LSTM cells 1)
FORGET_BIAS = {"lstm": 0.0, "nativelstm": 0.0, "nativelstm2": 0.0, "nativelstmlowmem": 0.0, "lstmp": 0.0,
               "cudnnlstm": 0.0, "lstmblock": 0.0, "lstmblockfused": 0.0, "standardlstm": 1.0, "basiclstm": 1.0,
               "vanillalstm": 0.0}
LAYER_NORM_UNIT = "layernormvariantslstm"
LSTM_UNITS = tuple(FORGET_BIAS) + (LAYER_NORM_UNIT,)
UNIT_OPTS = ("forget_bias", "rec_weight_dropout")
# RETURNN's unit names that cannot run here, and why (docs/compat.md's unit table shows them)
_BLOCKSPARSE = ("RETURNN runs it with OpenAI's blocksparse package (GPU kernels, not on PyPI for TF 2): "
                "use lstm or nativelstm2")
UNITS_NOT_HERE = {
    "blocksparselstm": _BLOCKSPARSE, "blocksparsemultiplicativemultisteplstm": _BLOCKSPARSE,
    "twodnativelstm": "the 2-D LSTM cell of the twod_lstm layer: use {'class': 'twod_lstm'} (RETURNN's rec layer "
                      "cannot run it as a unit either: its cell needs a 'pooling' argument)",
}
PEEPHOLE_UNITS = ("standardlstm",)  # TensorFlow's LSTMCell: unit_opts use_peepholes
TF_CELL_UNITS = ("basiclstm", "standardlstm", "vanillalstm", LAYER_NORM_UNIT)  # RETURNN runs them as TF cells (unroll)
# RETURNN's NativeLstm (v1) refuses an initial state ("broken support"); its low-memory LSTM's state is c
# alone (one state, h starts at zeros: LOWMEM)
LOWMEM = "nativelstmlowmem"
NO_INITIAL_STATE_UNITS = {"nativelstm": "RETURNN's NativeLstm (v1) refuses it (broken support): use nativelstm2"}


@register_layer
class RecLayer(Layer):
    """``{"class": "rec", "unit": "nativelstm2", "n_out": H, "direction": 1 or -1}`` over the time
    axis of ``(B, T, F)`` or ``(T, B, F)`` sources (sources without time axis broadcast over it);
    the output is ``(B, T, H)``; other axes of the input are merged into the batch (RETURNN's rule,
    :mod:`returnn.tf.layers.merged_batch`): ``(B, T, S, F)`` gives ``(B, T, S, H)``. An input without time
    axis (outside a rec loop) is one step from the initial state (RETURNN's single_step_dim): ``(B, F)``
    gives ``(B, H)``."""

    layer_class = "rec"
    param_subscope = "rec/"
    initial_state_refs = True  # the network appends the layers initial_state names to the sources
    options = (
        Option("unit", "lstm", "LSTM implementation name (all run the same LSTM): %s; other cells: "
                               "rnn_cell's" % ", ".join(LSTM_UNITS)),
        Option("direction", 1, "1: forward in time, -1: backward"),
        Option("unit_opts", None, "dict, e.g. {'forget_bias': 1.0}"),
        Option("unroll", False, "RETURNN: unroll the loop (its TensorFlow cells only)",
               noop="an implementation detail of RETURNN's loop: an unrolled loop computes the same outputs, and "
                    "RETURNN's LSTM kernels ignore it"),
        Option("max_seq_len", None, "with unroll of RETURNN's TensorFlow cells (%s): the longest input (checked)"
               % ", ".join(TF_CELL_UNITS)),
        Option("max_seq_len_via", None, "RETURNN: max_seq_len from a layer; its cell units assert none (unroll aside)",
               only=(None,)),
        Option("forward_weights_init", "glorot_uniform", "init of the input weights W (RETURNN init spec)"),
        Option("recurrent_weights_init", "glorot_uniform", "init of the recurrent weights W_re"),
        Option("bias_init", 0.0, "init of the bias"),
        Option("sampling", 1, "Theano-era RETURNN: subsampling of the recurrence; only 1 (none)"),
        Option("initial_state", None, "the state each sequence starts from: zeros, ones, var, keep_over_epoch, a "
                                      "layer, or {'c': .., 'h': ..} (see returnn.tf.layers.rec_state)"),
        Option("in_dim", None, "Dim: the input's feature axis (RETURNN: made the feature axis; here it must be it)"),
        Option("state", None, "RETURNN's explicit state: one step (an input without time axis) continues from the "
                              "state these layers give ({'c': .., 'h': ..}), not from initial_state"),
    ) + SUBNET_ONLY_OPTIONS + (INPUT_PROJECTION, LOOP_AXIS)

    @staticmethod
    def class_selector(opts: Mapping[str, Any]):
        """A dict ``unit`` is a sub-network: :class:`returnn.tf.layers.rec_net.layer.RecSubnetLayer`; a
        cell unit that is no LSTM here (``gru``, ``basicrnn``, ...) runs as that cell:
        :class:`returnn.tf.layers.rec_step.RecStepLayer`."""
        unit = opts.get("unit", "lstm")
        if isinstance(unit, Mapping):
            from returnn.tf.layers.rec_net.layer import RecSubnetLayer
            return RecSubnetLayer
        if isinstance(unit, str) and unit.lower() not in LSTM_UNITS:
            from returnn.tf.layers.rec_step import RecStepLayer, rec_cell_units
            if unit.lower() in rec_cell_units():
                return RecStepLayer
        return None

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        unit = self.opt("unit")
        if not isinstance(unit, str) or unit.lower() not in LSTM_UNITS:
            if isinstance(unit, str) and unit.lower() in UNITS_NOT_HERE:
                raise NetworkError("%s: unit %r is not available here: %s" % (self.desc, unit,
                                                                               UNITS_NOT_HERE[unit.lower()]))
            from returnn.tf.layers.rec_step import rec_cell_units
            raise NetworkError("%s: unknown unit %r (known: %s)" % (self.desc, unit,
                                                                    known_list(set(LSTM_UNITS) | set(rec_cell_units()))))
        self.unit = unit.lower()
        from returnn.tf.layers.rec_params import check_sparse_input
        check_sparse_input(self.desc, self.unit, sources)
        self.direction = self.opt("direction")
        if self.direction not in (1, -1):
            raise NetworkError("%s: direction must be 1 or -1, got %r" % (self.desc, self.direction))
        unit_opts = dict(self.opt("unit_opts") or {})
        check_native_unit_opts(self.desc, self.unit, unit_opts)  # RETURNN's native LSTMs: forget_bias 0, ...
        n_init = len(state_layer_refs(self.opt("initial_state")))
        n_all = n_init + len(explicit_state_refs(self.opt("state")))
        appended = list(sources[len(sources) - n_all:])  # initial_state's layers, then state's
        state_spec, state_sources = self.opt("initial_state"), appended[:n_init]
        if self.opt("state") is not None:  # (RETURNN: the one step's previous state; initial_state unused)
            check_state_layers("%s: option 'state'" % self.desc, self.opt("state"),
                               SINGLE_KEYS if self.unit == LOWMEM else LSTM_KEYS)
            state_spec, state_sources = self.opt("state"), appended[n_init:]
        self.n_state_sources = n_all  # (initial_state's and state's layers, appended to the sources)
        if state_spec is not None:
            check_state_cell_unit_opts(self.desc, self.unit, unit_opts)
        known_unit_opts = (("forget_bias",) if self.unit in TF_CELL_UNITS else UNIT_OPTS) + (
            ("use_peepholes", "cell_clip") if self.unit in PEEPHOLE_UNITS else ())
        unknown = set(unit_opts) - set(known_unit_opts)
        if unknown and self.unit != LAYER_NORM_UNIT:
            raise NetworkError("%s: unknown unit_opts %s (known: %s)"
                               % (self.desc, known_list(unknown), known_list(known_unit_opts)))
        self.forget_bias = float(unit_opts.get("forget_bias", FORGET_BIAS.get(self.unit, 0.0)))
        # RETURNN's NativeLSTM2 option: dropout on the recurrent weights W_re, one mask per training step
        self.rec_weight_dropout = rate(self.desc, "rec_weight_dropout", unit_opts.get("rec_weight_dropout"))
        check_input_projection(self.desc, self.unit, self.opt("input_projection"))
        self.state_sources = state_sources
        sources = list(sources[:len(sources) - n_all])
        check_loop_axis(self, sources, self.opt("axis"))
        in_dim = self.opt("in_dim")
        if in_dim is not None and (len(sources) != 1 or sources[0].feature_dim != in_dim):
            raise NetworkError("%s: 'in_dim' %r must be the feature axis of the one input here, got %s"
                               % (self.desc, in_dim, [s.short_repr() for s in sources]))
        if self.unit in NO_INITIAL_STATE_UNITS and not is_zero(state_spec) or (
                self.unit == "nativelstm" and state_spec is not None):  # RETURNN: zeros too
            raise NetworkError("%s: initial_state %r with unit %r: %s" % (
                self.desc, state_spec, self.unit, NO_INITIAL_STATE_UNITS[self.unit]))
        self.max_len = unrolled_max_len(self, self.opt("max_seq_len"),
                                        bool(self.opt("unroll")) and self.unit in TF_CELL_UNITS)
        if self.opt("sampling") != 1:
            raise NetworkError("%s: 'sampling' %r is not supported (only 1)" % (self.desc, self.opt("sampling")))
        # RETURNN: an input without time axis outside a loop is one step (its single_step_dim): run as a sequence
        # of one frame (an axis of sizes 1 after the batch axis), which the output drops
        self.one_step = None
        if all(s.time_dim is None for s in sources) and not is_step_template(sources):
            if self.unit in TF_CELL_UNITS + ("vanillalstm", LAYER_NORM_UNIT):
                raise NetworkError("%s: unit %r on an input without time axis %s is refused: RETURNN runs it as a "
                                   "TensorFlow cell, which then expects a rec loop (and fails); its native units "
                                   "(lstm, nativelstm2, ...) run one step" % (self.desc, self.unit,
                                                                             [s.short_repr() for s in sources]))
            if any(s.batch_dim_axis is None for s in sources):
                raise NetworkError("%s: an input without time axis needs a batch axis, got %s"
                                   % (self.desc, [s.short_repr() for s in sources]))
            self.one_step = Dim(None, kind=DimTypes.Spatial, description="%s:single-step" % name)
            sources = [s.copy_insert_dim(self.one_step, axis=s.batch_dim_axis + 1).copy(
                time_dim_axis=s.batch_dim_axis + 1) for s in sources]
        elif self.opt("state") is not None:
            raise NetworkError("%s: 'state' is RETURNN's state of one step (its single_step_dim): the input must have "
                               "no time axis, got %s" % (self.desc, [s.short_repr() for s in sources]))
        self.merged = MergedAxes(self.desc, sources)  # RETURNN: axes besides batch, time, feature merged into batch
        if self.merged.extra:
            if not _same_for_every_row(state_spec):  # zeros, ones: any batch, also the merged one
                raise NetworkError("%s: initial_state var, from a layer or kept over the epoch with an input of more "
                                   "axes than (batch, time, feature) (%s, merged into the batch) is not supported"
                                   % (self.desc, self.merged.extra))
            sources = self.merged.templates
        self.plan = feature_plan(self, sources)
        dims = self.plan.dims
        self.time_major = len(dims) == 2 and dims[1].is_batch_dim()  # (T, B, F) input (output: batch-major)
        if len(dims) != 2 or not any(d.is_batch_dim() for d in dims):
            raise NetworkError("%s: input must be (batch, time, feature), got %s"
                               % (self.desc, [s.short_repr() for s in sources]))
        n_out = self.require_n_out()
        self.cell = None
        if self.unit == LAYER_NORM_UNIT:
            self.cell = LayerNormLstm(self, sum(self.plan.in_dims), n_out, unit_opts)
        else:
            self.W = self.weight("W", [sum(self.plan.in_dims), 4 * n_out], init_option="forward_weights_init")
            self.W_re = self.weight("W_re", [n_out, 4 * n_out], init_option="recurrent_weights_init")
            self.bias = self.weight("b", [4 * n_out], 0.0, init_option="bias_init")
        self.peepholes = None
        if unit_opts.get("use_peepholes"):  # TensorFlow's LSTMCell: zeros at first (its initializer: RETURNN's xavier)
            self.peepholes = tuple(self.weight("rec/lstm_cell/w_%s_diag" % g, [n_out], "xavier") for g in "ifo")
        self.cell_clip = cell_clip_opt(self.desc, unit_opts.get("cell_clip"))  # TensorFlow's LSTMCell: c clipped
        self.state = None
        self.prev_state = None  # moved out of a rec loop that reads prev: of it (see make_prev_state)
        if not is_zero(state_spec):
            self.state = InitialState(self, state_spec, SINGLE_KEYS if self.unit == LOWMEM else LSTM_KEYS,
                                      n_out, "rec/", state_sources)
            self.state_vars = self.state.trainable()  # tracked by tf.Module here
        self.updates_in_training = self.state is not None and self.state.keeps
        self.output = plan_output(name, self.plan, self.out_feature_dim())
        if self.time_major:
            self.output = self.output.copy_transpose([1, 0, 2])
        if self.merged.extra:
            self.output = self.merged.output_template(self.output, name)
        self.seq_output = self.output
        if self.one_step is not None:
            self.output = self.output.copy_template_excluding_axis(self.output.dims.index(self.one_step))

    def returnn_params(self) -> List[Param]:
        out = unit_params(self, self.unit)
        if self.peepholes is not None:
            out += [same("rec/lstm_cell/w_%s_diag" % g, w) for g, w in zip("ifo", self.peepholes)
                    if "rec/lstm_cell/w_%s_diag" % g in self.own_params]  # (else shared by reuse_params)
        for state in (self.state, self.prev_state):
            out += state.params() if state is not None else []
        return out

    @property
    def state_refs(self) -> List[str]:
        """The layer names ``initial_state`` reads (appended to the sources)."""
        return list(self.state.refs) if self.state is not None else []

    def make_prev_state(self) -> None:
        """Called by a rec unit that runs this layer over the whole sequence and reads ``prev:`` of
        it: the first ``prev:`` value comes from RETURNN's loop state, variables ``initial_c`` and
        ``initial_h`` in the layer's scope (besides the ``rec/initial_*`` its own recurrence starts from)."""
        if self.state is not None and self.prev_state is None:
            self.prev_state = InitialState(self, self.opt("initial_state"), LSTM_KEYS, self.output.dim, "",
                                           self.state_sources)
            self.prev_state_vars = self.prev_state.trainable()

    def prev_initial_output(self, batch: tf.Tensor, values: Sequence[LayerOutput] = ()) -> Optional[tf.Tensor]:
        """The first ``prev:`` value in a rec unit: the initial state's ``h`` (None: zero state)."""
        return None if self.prev_state is None else self.prev_state.initial(batch, values)["h"]

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        if self.one_step is None:
            return self._forward_seq(sources, ctx)
        stepped = []
        for i, src in enumerate(sources):
            if i < len(sources) - self.n_state_sources:
                axis = src.data.batch_dim_axis + 1
                ones = tf.ones(tf.shape(src.tensor)[src.data.batch_dim_axis:src.data.batch_dim_axis + 1], tf.int32)
                src = LayerOutput(tf.expand_dims(src.tensor, axis), self.sources[i].copy_insert_dim(
                    self.one_step, axis=axis).copy(time_dim_axis=axis), {**src.sizes, self.one_step: ones})
            stepped.append(src)
        outer, self.output = self.output, self.seq_output
        try:
            seq = self._forward_seq(stepped, ctx)
        finally:
            self.output = outer
        out = LayerOutput(tf.squeeze(seq.tensor, self.seq_output.dims.index(self.one_step)), self.output,
                          {d: v for d, v in seq.sizes.items() if d is not self.one_step})
        out.computed_padding, out.last_state = True, seq.last_state
        return out

    def _forward_seq(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        n_state = len(self.state.refs) if self.state is not None else 0
        state_values = sources[len(sources) - n_state:]  # (initial_state's or state's layers: the last ones)
        sources = sources[:len(sources) - self.n_state_sources]
        sources = dropout_sources(self, check_unrolled_length(self, sources, self.max_len), ctx)
        given = sources
        if self.merged.extra:
            sources = [self.merged.merge(s, i) for i, s in enumerate(sources)]
        seq_len = lengths_along(sources, self.output.dims[1])
        if self.cell is not None:  # batch-major recursion
            x = project_sources(self.plan, sources, self.cell.W)
            if self.time_major:
                x = tf.transpose(x, [1, 0, 2])
            if self.direction == -1:
                x = tf.reverse_sequence(x, seq_len, seq_axis=1, batch_axis=0)
            initial = None
            if self.state is not None:
                init = self.state.initial(tf.shape(x)[0], state_values, ctx.train, ctx.seed[0])
                initial = (init["h"], init["c"])
            y, final = self.cell.run(x, seq_len, ctx.layer_seed(self.layer_name) if ctx.train else None, initial)
            if self.state is not None:
                self.state.keep({"h": final[1], "c": final[0]}, ctx.train, ctx.seed[0])
            if self.direction == -1:
                y = tf.reverse_sequence(y, seq_len, seq_axis=1, batch_axis=0)
        else:
            # time-major recursion: the (narrower) input is transposed before its projection
            x = project_sources(self.plan, sources, self.W, order=None if self.time_major else [1, 0]) + self.bias
            if self.direction == -1:
                x = tf.reverse_sequence(x, seq_len, seq_axis=0, batch_axis=1)
            w_re = self.W_re
            if self.rec_weight_dropout and ctx.train:
                w_re = dropout(w_re, self.rec_weight_dropout, ctx.layer_seed(self.layer_name, salt=97))
            initial, final = None, None
            if self.state is not None:
                init = self.state.initial(tf.shape(x)[1], state_values, ctx.train, ctx.seed[0])
                initial = (tf.zeros_like(init["var"]), init["var"]) if self.unit == LOWMEM else (init["h"], init["c"])
            if initial is None and self.peepholes is None and self.cell_clip is None:  # the kernel as it is
                y = get_kernel()(x, seq_len, w_re, self.forget_bias, time_major=True)
            else:
                y, final = lstm_sequence(x, seq_len, w_re, self.forget_bias, initial, self.peepholes, final=True,
                                         cell_clip=self.cell_clip)
                if self.state is not None:
                    self.state.keep({"var": final[1]} if self.unit == LOWMEM else {"h": final[0], "c": final[1]},
                                    ctx.train, ctx.seed[0])
            if self.direction == -1:
                y = tf.reverse_sequence(y, seq_len, seq_axis=0, batch_axis=1)
            y = tf.transpose(y, [1, 0, 2])
        if self.merged.extra:
            return self.make_output(self.merged.split(y, given[0]), given)
        out = self.make_output(y, sources)
        if self.cell is None:
            if final is None:
                out.last_state = final_state_fn(x, seq_len, w_re, self.forget_bias, time_major=True)
            else:
                out.last_state = lambda: (final[1], final[0])
            if self.unit in ("nativelstm", LOWMEM):  # RETURNN's NativeLstm (v1) and low-memory
                # LSTM give only the cell state c as their final state
                c_h = out.last_state
                out.last_state = lambda: c_h()[:1]
        else:  # the layer-norm LSTM's (c, h)
            out.last_state = lambda: final
        return out


def __getattr__(name: str) -> Any:
    """RETURNN's layer class names of its ``rec`` module (``RecLayer``, ``ChoiceLayer``, ...) as the
    engine's layer classes (returnn/tf/layers/catalog.py), for annotations and ``isinstance``."""
    if name.endswith("Layer"):
        from returnn.tf.layers.catalog import layer_class_by_returnn_name
        cls = layer_class_by_returnn_name(name)
        if cls is not None:
            return cls
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


def _same_for_every_row(spec: Any) -> bool:
    """Whether the initial state ``spec`` is the same constant for every batch entry (zeros, ones; RETURNN's
    ``var`` over merged axes has one vector per position of those axes)."""
    values = list(spec.values()) if isinstance(spec, Mapping) else \
        list(spec) if isinstance(spec, (list, tuple)) else [spec]
    return all(v is None or (isinstance(v, str) and v in ("zeros", "ones"))
               or (isinstance(v, (int, float)) and not isinstance(v, bool) and v in (0, 1)) for v in values)
