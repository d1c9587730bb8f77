"""``rnn_cell``: one recurrent cell (LSTM, GRU or plain RNN) that runs step by step inside a rec
loop or over a whole sequence outside it.

In a rec unit, a layer is built with per-step source templates (no time axis) when it runs in the
loop: then it is a cell with a state carried from step to step (:meth:`initial_state`,
:meth:`step`). When it was moved out of the loop, or used in a normal network, its sources have a
time axis and it runs over the whole sequence; both give the same numbers.

Cells (``unit``, case-insensitive), following RETURNN's choice of implementation on TensorFlow 2:

- LSTM (gate order input, cell-candidate, forget, output; see :mod:`returnn.tf.layers.rec`):
  ``LSTMBlock``, ``LSTMBlockFused``, ``BasicLSTM``, ``StandardLSTM``, ``LSTMCell`` run as TensorFlow's
  LSTM cell (``forget_bias`` 1.0); ``NativeLSTM``, ``NativeLSTM2``, ``LSTM``, ``LSTMP``,
  ``VanillaLSTM`` as RETURNN's native LSTM (``forget_bias`` 0).
- GRU (``GRU``, ``GRUBlock``, ``GRUCell``, ``CudnnGRU``): TensorFlow's GRU cell,
  ``r, u = sigmoid([x, h] W_g + b_g)`` (``b_g`` starts at 1), ``c = tanh([x, r * h] W_c + b_c)``,
  ``h' = u * h + (1 - u) * c``.
- ``BasicRNN`` / ``RNN``: ``h' = tanh(x W + h W_re + b)``.
- ``ZoneoutLSTM`` (``unit_opts``: ``zoneout_factor_cell``, ``zoneout_factor_output``,
  ``use_zoneout_output``): TensorFlow's LSTM cell whose c and h keep their previous value with that
  probability in training (in evaluation: the expected mix); the output is the zoned-out h from
  ``behavior_version`` 17 on, before it the LSTM's own h (RETURNN's choice).
- ``LayerNormVariantsLSTM``: :mod:`returnn.tf.layers.lstm_layernorm` one step at a time (in a loop,
  its dropout masks are drawn per step).
- ``RHN`` (RETURNN's recurrent highway network, ``unit_opts`` ``depth`` (5), ``transform_bias`` (0),
  ``dropout``): ``x W + b`` once per frame (b starts at [0, transform_bias]), then per depth ``i``
  ``[h, t] = s W_i (+ that at i = 0)``, ``s += sigmoid(t) * (tanh(h) - s)``; the output is s.
  ``dropout`` (training, over whole sequences) scales s before each ``W_i`` by one mask per sequence
  and unit, fixed over the frames (RETURNN's); parameters ``W``, ``b``, ``rhn_cell/depth_i/W``.

``initial_state`` takes RETURNN's forms (:mod:`returnn.tf.layers.rec_state`): its ``var`` parameters
are ``initial_c``/``initial_h`` (LSTMs) or ``initial_var`` in the layer's scope inside a rec loop,
``rec/initial_*`` over whole sequences (RETURNN's two code paths; a cell moved out of a loop whose
``prev:`` is read also gets the loop's ``initial_*`` for that first ``prev:`` value, as RETURNN
does); ``keep_over_epoch`` only for a ``rec`` layer over whole sequences (an ``rnn_cell`` there: RETURNN asserts; in
a loop: not supported here). The units that RETURNN runs as TensorFlow's
``LSTMCell`` take its ``use_peepholes`` (parameters ``rec/lstm_cell/w_{i,f,o}_diag``) and ``cell_clip``. Padded frames
(t >= length) keep the state and output 0.

The input and recurrent weights start from ``weights_init`` (RETURNN's ``"xavier"``: RETURNN keeps
them in one kernel [W; W_re] initialised as one matrix), unless ``forward_weights_init`` /
``recurrent_weights_init`` (this engine's) are set. A ``rec`` layer whose unit is not one of the
LSTMs of :mod:`returnn.tf.layers.rec` (``gru``, ``basicrnn``, ``zoneoutlstm``, ...) runs as the same
cell (:class:`returnn.tf.layers.rec_step.RecStepLayer`), over a whole sequence (``direction`` 1 or -1) or one step in a loop.
"""
from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from returnn.errors import NetworkError, known_list
from returnn.tensor import Data
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.output import lengths_along
from returnn.tf.layers.helpers import dropout_scale, dropout_sources, feature_plan, plan_output, project_sources
from returnn.tf.layers.merged_batch import MergedAxes
from returnn.tf.layers.options import Option, positive_int, rate
from returnn.tf.layers.params import Param, same
from returnn.tf.layers.rec_params import (
    NATIVE_UNIT_OPTS, check_native_unit_opts, check_state_cell_unit_opts, unit_layout, unit_params,
)
from returnn.tf.layers.rec_state import (LSTM_KEYS, SINGLE_KEYS, ExplicitState, InitialState, explicit_state_refs,
                                         is_zero, state_layer_refs)
from returnn.tf.lstm_kernels import final_state_fn, get_kernel, lstm_sequence, lstm_step
from returnn.tf.util.tensor_array import stacked

# unit name (lower case) -> (cell kind, default forget bias)
CELL_UNITS: Dict[str, Tuple[str, float]] = {
    "lstmblock": ("lstm", 1.0), "lstmblockfused": ("lstm", 1.0), "basiclstm": ("lstm", 1.0),
    "standardlstm": ("lstm", 1.0), "lstmcell": ("lstm", 1.0), "lstmblockcell": ("lstm", 1.0),
    "nativelstm": ("lstm", 0.0), "nativelstm2": ("lstm", 0.0), "lstm": ("lstm", 0.0), "lstmp": ("lstm", 0.0),
    "cudnnlstm": ("lstm", 1.0), "vanillalstm": ("lstm", 0.0),
    "gru": ("gru", 0.0), "grublock": ("gru", 0.0), "grucell": ("gru", 0.0), "cudnngru": ("gru", 0.0),
    "basicrnn": ("rnn", 0.0), "rnn": ("rnn", 0.0), "rnncell": ("rnn", 0.0), "basicrnncell": ("rnn", 0.0),
    "zoneoutlstm": ("zoneout", 1.0), "layernormvariantslstm": ("lnlstm", 0.0), "rhn": ("rhn", 0.0),
}
ZONEOUT_OPTS = ("zoneout_factor_cell", "zoneout_factor_output", "use_zoneout_output")
RHN_OPTS = ("depth", "transform_bias", "dropout", "dropout_seed")  # dropout_seed: our masks come from the step seed
STATE_KEYS = {"lstm": LSTM_KEYS, "zoneout": LSTM_KEYS, "lnlstm": LSTM_KEYS}  # others: one state (SINGLE_KEYS)


_LOOP_STEP: List[bool] = []  # while a rec unit builds a sub-layer: whether it runs step by step in the loop


@contextlib.contextmanager
def building_loop_step(in_step: bool) -> Iterator[None]:
    """While a rec unit builds a sub-layer: ``in_step`` says whether it runs in the loop (one frame)."""
    _LOOP_STEP.append(in_step)
    try:
        yield
    finally:
        _LOOP_STEP.pop()


def is_step_template(sources: Sequence[Data]) -> bool:
    """Whether the sources are per-step values of a rec loop: the rec unit building the layer says
    so (:func:`building_loop_step`); elsewhere a layer runs over whole sequences (also with a static
    time axis)."""
    del sources  # (the templates alone cannot tell a static time axis from another axis of one frame)
    return bool(_LOOP_STEP) and _LOOP_STEP[-1]


@register_layer
class RnnCellLayer(Layer):
    """``{"class": "rnn_cell", "unit": "LSTMBlock", "n_out": H, "from": [...]}``; see module doc."""

    layer_class = "rnn_cell"
    units = CELL_UNITS
    param_subscope = "rec/"
    in_rnn_cell = True  # RETURNN's parameter layout of an rnn_cell layer (a rec layer in a loop: False)
    options = (
        Option("unit", None, "cell name: %s" % ", ".join(CELL_UNITS)),
        Option("unit_opts", None, "dict, e.g. {'forget_bias': 0.0}"),
        Option("initial_state", None, "the state it starts from: zeros, ones, var, keep_over_epoch (a rec layer over "
                                      "whole sequences; refused on rnn_cell), a layer, or {'c': .., 'h': ..} (see "
                                      "returnn.tf.layers.rec_state)"),
        Option("forward_weights_init", None, "init of the input weights (default: weights_init)"),
        Option("recurrent_weights_init", None, "init of the recurrent weights (default: weights_init)"),
        Option("bias_init", 0.0, "init of the bias"),
        Option("weights_init", "xavier", "init of the input and recurrent weights (RETURNN's rnn_cell option)"),
        Option("max_seq_len", None, "not an option of RETURNN's rnn_cell", only=(None,)),
        Option("unroll", False, "not an option of RETURNN's rnn_cell", only=(False,)),
        Option("direction", 1, "1 only (a cell runs forward in time)"),
        Option("state", None, "RETURNN's explicit state, in a rec loop: the state a step continues from, given by "
                              "layers ({'c': 'prev:s_c', 'h': 'prev:s_h'}, LSTMStateTuple(c, h), one name for a "
                              "one-vector state)"),
    )
    directions = (1,)  # over a whole sequence
    merges_extra_axes = False  # RETURNN's rec layer merges axes besides (batch, time, feature) into the batch
    initial_state_refs = True  # the network appends the layers initial_state names to the sources

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        if self.layer_class == "rnn_cell" and self.opt("initial_output") is not None:  # (in a loop: the rec's check)
            raise NetworkError("%s: 'initial_output' on an rnn_cell is refused, as RETURNN asserts (set "
                               "initial_state instead)" % self.desc)
        unit = self.opt("unit")
        if not isinstance(unit, str) or unit.lower() not in self.units:
            raise NetworkError("%s: unknown unit %r (known: %s)" % (self.desc, unit, known_list(self.units)))
        self.unit = unit.lower()
        self.kind, default_bias = self.units[unit.lower()]
        unit_opts = dict(self.opt("unit_opts") or {})
        # TensorFlow's LSTM cell and RETURNN's native LSTM take a forget bias; the GRU, RNN and zoneout cells do not
        known = {"forget_bias"} if self.kind == "lstm" else set(ZONEOUT_OPTS) if self.kind == "zoneout" else \
            set(RHN_OPTS) if self.kind == "rhn" else set()
        if self.kind == "lstm" and unit_layout(self.unit, self.in_rnn_cell) == "lstm_cell":
            known |= {"use_peepholes", "cell_clip"}  # TensorFlow's LSTMCell
        if self.kind == "lstm" and not self.in_rnn_cell:  # a rec layer's LSTM in a loop: its unit_opts there
            known |= {"rec_weight_dropout"} & set(NATIVE_UNIT_OPTS.get(self.unit, ()))
            check_native_unit_opts(self.desc, self.unit, unit_opts)
            check_state_cell_unit_opts(self.desc, self.unit, unit_opts)
        # RETURNN's NativeLstm2 in a loop: W_re dropped out at each call, i.e. a new mask per step (training)
        self.rec_weight_dropout = rate(self.desc, "rec_weight_dropout", unit_opts.get("rec_weight_dropout"))
        unknown = set(unit_opts) - known
        if unknown and self.kind != "lnlstm":  # the layer-norm LSTM checks its own unit_opts
            raise NetworkError("%s: unknown unit_opts %s (known: %s)" % (self.desc, known_list(unknown), known_list(known)))
        self.forget_bias = float(unit_opts.get("forget_bias", default_bias))
        self.zoneout = (rate(self.desc, "zoneout_factor_cell", unit_opts.get("zoneout_factor_cell")),
                        rate(self.desc, "zoneout_factor_output", unit_opts.get("zoneout_factor_output")))
        use_out = unit_opts.get("use_zoneout_output")
        if use_out is None:
            from returnn.tf.layers.norm import behavior_version
            use_out = behavior_version() >= 17
        self.zoneout_output = bool(use_out)  # the output is the zoned-out h (else the LSTM's own)
        self.n_explicit = n_explicit = len(explicit_state_refs(self.opt("state")))  # (RETURNN's 'state': last)
        explicit_sources = list(sources[len(sources) - n_explicit:]) if n_explicit else []
        sources = list(sources[:len(sources) - n_explicit])
        n_state = len(state_layer_refs(self.opt("initial_state")))
        self.state_sources = list(sources[len(sources) - n_state:])
        sources = list(sources[:len(sources) - n_state])
        self.step_mode = is_step_template(sources)
        self.direction = self.opt("direction")
        if self.direction not in (self.directions if not self.step_mode else (1,)):
            raise NetworkError("%s: direction must be %s%s, got %r" % (
                self.desc, " or ".join(map(str, self.directions)), " in a loop step" if self.step_mode else "",
                self.direction))
        self.merged = MergedAxes(self.desc, sources if self.merges_extra_axes and not self.step_mode else [])
        if self.merged.extra:  # RETURNN's rec layer merges other axes into the batch (merged_batch.py)
            if not is_zero(self.opt("initial_state")):
                raise NetworkError("%s: initial_state with an input of more axes than (batch, time, feature) (%s, merged "
                                   "into the batch) is not supported" % (self.desc, self.merged.extra))
            sources = self.merged.templates
        self.plan = feature_plan(self, sources)
        n_in, n = sum(self.plan.in_dims), self.require_n_out()
        self.n_hidden = n
        self.ln_cell = None
        w_init = self.opt("weights_init") or "xavier"
        if self.kind == "lnlstm":
            from returnn.tf.layers.lstm_layernorm import LayerNormLstm
            self.ln_cell = LayerNormLstm(self, n_in, n, unit_opts)
            self.W, self.W_re, self.bias = self.ln_cell.W, self.ln_cell.W_re, None
        elif self.kind in ("lstm", "zoneout"):
            self.W = self.weight("W", [n_in, 4 * n], w_init, init_option="forward_weights_init")
            self.W_re = self.weight("W_re", [n, 4 * n], w_init, init_option="recurrent_weights_init")
            self.bias = self.weight("b", [4 * n], 0.0, init_option="bias_init")
        elif self.kind == "gru":  # as TensorFlow's GRU cell keeps them: gates (reset, update) and candidate
            self.W_gates = self.weight("W_gates", [n_in, 2 * n], w_init, init_option="forward_weights_init")
            self.W_candidate = self.weight("W_candidate", [n_in, n], w_init, init_option="forward_weights_init")
            self.W_re_gates = self.weight("W_re_gates", [n, 2 * n], w_init, init_option="recurrent_weights_init")
            self.W_re_candidate = self.weight("W_re_candidate", [n, n], w_init, init_option="recurrent_weights_init")
            self.b_gates = self.weight("b_gates", [2 * n], 1.0)
            self.b_candidate = self.weight("b_candidate", [n], 0.0, init_option="bias_init")
            self.W = self.W_re = self.bias = None
        elif self.kind == "rhn":  # RETURNN's RHNCell: W, b (transform half at transform_bias), depth_i/W
            depth = positive_int(self.desc, "unit_opts depth", unit_opts.get("depth", 5))
            self.rhn_dropout = rate(self.desc, "unit_opts dropout", unit_opts.get("dropout"))
            if self.rhn_dropout and self.step_mode:
                raise NetworkError("%s: RHN dropout inside a rec loop is not supported here (only over a whole "
                                   "sequence)" % self.desc)
            transform_bias = float(unit_opts.get("transform_bias") or 0.0)
            self.W = self.weight("W", [n_in, 2 * n], w_init, init_option="forward_weights_init")
            if self.opts.get("bias_init") is not None:
                self.bias = self.weight("b", [2 * n], 0.0, init_option="bias_init")
            else:
                self.bias = self.variable("b", np.array([0.0] * n + [transform_bias] * n, np.float32))
            self.W_depth = [self.weight("rhn_cell/depth_%i/W" % i, [n, 2 * n], w_init,
                                        init_option="recurrent_weights_init") for i in range(depth)]
            self.W_re = None
            self._rhn_mask = None  # training over a sequence: the dropout mask of this call (B, H)
        else:
            self.W = self.weight("W", [n_in, n], w_init, init_option="forward_weights_init")
            self.W_re = self.weight("W_re", [n, n], w_init, init_option="recurrent_weights_init")
            self.bias = self.weight("b", [n], 0.0, init_option="bias_init")
        self.peepholes = None
        if unit_opts.get("use_peepholes"):  # TensorFlow's LSTMCell: zeros at first (its initializer: RETURNN's xavier)
            self.peepholes = tuple(self.weight("rec/lstm_cell/w_%s_diag" % g, [n], "xavier") for g in "ifo")
        self.cell_clip = cell_clip_opt(self.desc, unit_opts.get("cell_clip"))  # TensorFlow's LSTMCell: c clipped
        self.state_keys = STATE_KEYS.get(self.kind, SINGLE_KEYS)
        self.explicit = None
        if self.opt("state") is not None:
            if not self.step_mode:
                raise NetworkError("%s: 'state' (RETURNN's explicit state of a step) is supported in a rec loop only, "
                                   "here the cell runs over a sequence" % self.desc)
            self.explicit = ExplicitState(self, self.opt("state"), self.state_keys, n, explicit_sources)
        self.state = None  # the initial state of its own recurrence
        self.prev_state = None  # a cell moved out of a rec loop: the first prev: value (RETURNN's loop state)
        if not is_zero(self.opt("initial_state")):
            self.state = InitialState(self, self.opt("initial_state"), self.state_keys, n,
                                      "" if self.step_mode else "rec/", self.state_sources)
            if self.state.keeps and self.step_mode:
                raise NetworkError("%s: initial_state 'keep_over_epoch' inside a rec loop is not supported here "
                                   "(a rec layer of that unit keeps its state over whole sequences)" % self.desc)
            if self.state.keeps and self.layer_class == "rnn_cell":  # RETURNN's RnnCellLayer passes no rec layer for
                # the kept state there (asserts); its rec layer does
                raise NetworkError("%s: initial_state 'keep_over_epoch' of an rnn_cell over whole sequences (also one "
                                   "moved out of a loop) is refused, as RETURNN asserts; a rec layer of that unit "
                                   "keeps its state" % self.desc)
            self.state_vars = self.state.trainable()  # tracked by tf.Module here
            self.updates_in_training = self.state.keeps
            if self.step_mode:
                self.prev_state = self.state
        if not self.step_mode:
            dims = self.plan.dims
            if len(dims) != 2 or not any(d.is_batch_dim() for d in dims):
                raise NetworkError("%s: input must be (batch, time, feature) or one step (batch, feature), got %s"
                                   % (self.desc, [s.short_repr() for s in sources]))
            if dims[1].is_batch_dim():  # time-major sources (RETURNN reads them time-major): the same cell over
                self.plan = self.plan._replace(dims=dims[::-1], maps=[[1 - p for p in m] for m in self.plan.maps])
        elif len(self.plan.dims) != 1:
            raise NetworkError("%s: one step must be (batch, feature), got %s"
                               % (self.desc, [s.short_repr() for s in sources]))
        self.output = plan_output(name, self.plan, self.out_feature_dim())
        if self.merged.extra:
            self.output = self.merged.output_template(self.output, name)

    def returnn_params(self) -> List[Param]:
        out = unit_params(self, self.unit, self.in_rnn_cell)
        if self.peepholes is not None:
            out += [same("rec/lstm_cell/w_%s_diag" % g, w) for g, w in zip("ifo", self.peepholes)
                    if "rec/lstm_cell/w_%s_diag" % g in self.own_params]  # (else shared by reuse_params)
        for state in dict.fromkeys(s for s in (self.state, self.prev_state) if s is not None):
            out += state.params()
        return out

    def make_prev_state(self) -> None:
        """Called by a rec unit that moved this cell out of its loop and reads ``prev:`` of it: the
        first ``prev:`` value comes from the loop's initial state (RETURNN's variables ``initial_*``
        in the layer's scope, apart from the ``rec/initial_*`` the cell's own recurrence starts from)."""
        if self.state is not None and self.prev_state is None:
            self.prev_state = InitialState(self, self.opt("initial_state"), self.state_keys, self.n_hidden, "",
                                           self.state_sources)
            self.prev_state_vars = self.prev_state.trainable()

    def prev_initial_output(self, batch: tf.Tensor, values: Sequence[LayerOutput] = ()) -> Optional[tf.Tensor]:
        """The value of ``prev:`` at the first step when the initial state is not zero (RETURNN:
        the state's ``h``, or the one state), else None (the rec layer's ``initial_output`` rules)."""
        if self.prev_state is None:
            return None
        state = self.prev_state.initial(batch, values)
        return state["h" if "h" in state else self.state_keys[0]]

    def _state_tuple(self, state: Mapping[str, tf.Tensor]) -> Tuple[tf.Tensor, ...]:
        """A state dict by key as the cell's state tuple: (h, c) for LSTMs, else (s,)."""
        return (state["h"], state["c"]) if self.state_keys == LSTM_KEYS else (state[self.state_keys[0]],)

    # ---- the cell
    def _input_weights(self) -> tf.Tensor:
        """The input weights of all gates (n_in, k*H)."""
        if self.kind == "gru":
            return tf.concat([self.W_gates, self.W_candidate], axis=1)
        return self.W

    def _input_proj(self, sources: List[LayerOutput], ctx: RunContext) -> tf.Tensor:
        sources = dropout_sources(self, sources, ctx)
        x = project_sources(self.plan, sources, self._input_weights())
        if self.ln_cell is not None:
            return self.ln_cell.prepare(x)
        return x + self.bias if self.kind != "gru" else x

    def _cell(self, x: tf.Tensor, state: Tuple[tf.Tensor, ...], seed: Any = None
              ) -> Tuple[tf.Tensor, Tuple[tf.Tensor, ...]]:
        """One step from the input projection ``x`` (B, k*H); returns the output and the new state
        (``seed``: the step's seed in training, for zoneout)."""
        n = self.n_hidden
        if self.ln_cell is not None:
            h, c = self.ln_cell.step(x, state[0], state[1], self.ln_cell.masks(tf.shape(x)[0], seed))
            return h, (h, c)
        if self.kind in ("lstm", "zoneout"):
            w_re = self.W_re
            if self.rec_weight_dropout and seed is not None:
                w_re = w_re * dropout_scale(tf.shape(w_re), self.rec_weight_dropout, seed + [0, 97], w_re.dtype)
            h, c = lstm_step(x + tf.matmul(state[0], w_re), state[1], self.forget_bias, self.peepholes, self.cell_clip)
            if self.kind == "lstm":
                return h, (h, c)
            zc, zh = self.zoneout
            new_c, new_h = self._zone(c, state[1], zc, seed, 0), self._zone(h, state[0], zh, seed, 1)
            return (new_h if self.zoneout_output else h), (new_h, new_c)
        if self.kind == "gru":
            (h,) = state
            gates = tf.sigmoid(x[:, :2 * n] + tf.matmul(h, self.W_re_gates) + self.b_gates)
            r, u = gates[:, :n], gates[:, n:]
            c = tf.tanh(x[:, 2 * n:] + tf.matmul(r * h, self.W_re_candidate) + self.b_candidate)
            h = u * h + (1.0 - u) * c
            return h, (h,)
        if self.kind == "rhn":
            (s,) = state
            for i, w in enumerate(self.W_depth):
                z = tf.matmul(s if self._rhn_mask is None else s * self._rhn_mask, w)
                if i == 0:
                    z = z + x
                s = s + tf.sigmoid(z[:, n:]) * (tf.tanh(z[:, :n]) - s)
            return s, (s,)
        h = tf.tanh(x + tf.matmul(state[0], self.W_re))
        return h, (h,)

    @staticmethod
    def _zone(new: tf.Tensor, old: tf.Tensor, factor: float, seed: Any, salt: int) -> tf.Tensor:
        """Zoneout: in training each unit keeps its old value with probability ``factor``; in
        evaluation the expectation ``factor * old + (1 - factor) * new``."""
        if not factor:
            return new
        if seed is None:
            return factor * old + (1.0 - factor) * new
        keep_new = tf.random.stateless_uniform(tf.shape(new), seed + [0, 7 + salt]) >= factor
        return tf.where(keep_new, new, old)

    def initial_state(self, batch: tf.Tensor, n_time: Any = None, values: Sequence[LayerOutput] = (),
                      ctx: Optional[RunContext] = None) -> Tuple[tf.Tensor, ...]:
        """The state ``batch`` sequences start from (``n_time``: the loop length, unused here;
        ``values``: those of the layers ``initial_state`` names, in :attr:`state_refs` order)."""
        if self.state is None:
            zeros = tf.zeros(tf.stack([batch, self.n_hidden]))
            return (zeros, zeros) if self.state_keys == LSTM_KEYS else (zeros,)
        train = ctx is not None and ctx.train
        return self._state_tuple(self.state.initial(batch, values, train, ctx.seed[0] if train else None))

    @property
    def state_refs(self) -> List[str]:
        """The layer names ``initial_state`` reads (appended to the sources)."""
        return list(self.state.refs) if self.state is not None else []

    def _own_sources(self, sources: List[LayerOutput]) -> Tuple[List[LayerOutput], List[LayerOutput]]:
        """(the sources of the cell's input, the values of the layers initial_state names)."""
        sources = sources[:len(sources) - self.n_explicit]  # (those of 'state', last)
        n = len(self.state_sources)
        return list(sources[:len(sources) - n]), list(sources[len(sources) - n:])

    def step(self, sources: List[LayerOutput], state: Tuple[tf.Tensor, ...], ctx: RunContext, t: Any = None
             ) -> Tuple[LayerOutput, Tuple[tf.Tensor, ...]]:
        """One step inside a rec loop: sources are (B, F) values."""
        if self.explicit is not None:  # RETURNN's 'state': the given layers replace the carried state
            values = sources[len(sources) - self.n_explicit:]
            state = self._state_tuple(self.explicit.values(tf.shape(state[0])[0], values))
        sources = self._own_sources(sources)[0]
        seed = ctx.layer_seed(self.layer_name) if ctx.train else None
        y, state = self._cell(self._input_proj(sources, ctx), state, seed)
        out = self.make_output(y, sources)
        out.last_state = lambda: self.state_tensors(state)
        return out, state

    def state_tensors(self, state: Tuple[tf.Tensor, ...]) -> Tuple[tf.Tensor, ...]:
        """The loop state as get_last_hidden_state gives it: (c, h) for an LSTM (RETURNN's LSTM
        state tuple order), else (h,)."""
        return (state[1], state[0]) if self.kind in ("lstm", "zoneout", "lnlstm") else tuple(state)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        if self.step_mode:
            raise NetworkError("%s: a cell on single steps runs only inside a rec loop" % self.desc)
        sources, state_values = self._own_sources(sources)
        if self.merged.extra:  # other axes merged into the batch (RETURNN's rec layer; merged_batch.py)
            merged = [self.merged.merge(s, i) for i, s in enumerate(sources)]
            y, _ = self._over_time(merged, state_values, ctx)
            return self.make_output(self.merged.split(y, sources[0]), sources)
        y, last = self._over_time(sources, state_values, ctx)
        out = self.make_output(y, sources)
        out.last_state = last
        return out

    def _over_time(self, sources: List[LayerOutput], state_values: List[LayerOutput], ctx: RunContext
                   ) -> Tuple[tf.Tensor, Any]:
        """The cell over (B, T, F) sources: the (B, T, H) output and a function giving its last state."""
        seq_len = lengths_along(sources, self.output.dims[1])
        backward = self.direction == -1  # each sequence reversed within its length, and the output back

        def rev(t: tf.Tensor, time_axis: int) -> tf.Tensor:
            return tf.reverse_sequence(t, seq_len, seq_axis=time_axis, batch_axis=1 - time_axis) if backward else t

        seed = ctx.layer_seed(self.layer_name) if ctx.train else None
        epoch = ctx.seed[0] if ctx.train else None
        batch = tf.shape(sources[0].tensor)[sources[0].data.batch_dim_axis]
        initial = self.initial_state(batch, None, state_values, ctx) if self.state is not None else None
        if self.ln_cell is not None:  # over the sequence: the layer-norm LSTM's own loop (the same step)
            if initial is not None:
                raise NetworkError("%s: initial_state with unit %r over whole sequences is not supported here (in a "
                                   "rec loop it is)" % (self.desc, self.unit))
            x = rev(project_sources(self.plan, dropout_sources(self, sources, ctx), self.W), 1)
            return rev(self.ln_cell.run(x, seq_len, seed)[0], 1), None
        if self.kind == "lstm":  # time-major recursion, as the rec layer runs it
            x = project_sources(self.plan, dropout_sources(self, sources, ctx), self.W, order=[1, 0]) + self.bias
            x = rev(x, 0)
            if initial is None and self.peepholes is None and self.cell_clip is None:
                y = get_kernel()(x, seq_len, self.W_re, self.forget_bias, time_major=True)
                last = final_state_fn(x, seq_len, self.W_re, self.forget_bias, time_major=True)
            else:
                y, final = lstm_sequence(x, seq_len, self.W_re, self.forget_bias, initial, self.peepholes, final=True,
                                         cell_clip=self.cell_clip)
                self._keep(final, ctx.train, epoch)
                last = lambda: self.state_tensors(final)  # noqa: E731
            return tf.transpose(rev(y, 0), [1, 0, 2]), last
        x = rev(self._input_proj(sources, ctx), 1)
        if self.kind == "rhn" and self.rhn_dropout and seed is not None:  # one mask per sequence and unit
            self._rhn_mask = dropout_scale(tf.stack([tf.shape(x)[0], self.n_hidden]), self.rhn_dropout, seed + [0, 31])
        y, state = run_over_time(self, x, seq_len, seed, initial)
        self._rhn_mask = None
        self._keep(state, ctx.train, epoch)
        return rev(y, 1), lambda: self.state_tensors(state)

    def _keep(self, state: Tuple[tf.Tensor, ...], train: bool, epoch: Any) -> None:
        """``keep_over_epoch``: the final state tuple of a training step, kept for the next."""
        if self.state is not None and self.state.keeps:
            keys = ("h", "c") if self.state_keys == LSTM_KEYS else self.state_keys
            self.state.keep(dict(zip(keys, state)), train, epoch)


def run_over_time(cell: RnnCellLayer, x: tf.Tensor, seq_len: tf.Tensor, seed: Any = None,
                  initial: Optional[Tuple[tf.Tensor, ...]] = None) -> Tuple[tf.Tensor, Tuple[tf.Tensor, ...]]:
    """``cell`` over (B, T, k*H) input projections: (B, T, H) outputs, 0 on padded frames, and the
    final state (held over padded frames); ``seed``: training (a seed of its own per step);
    ``initial``: the state tuple it starts from (default zeros)."""
    n_time = tf.shape(x)[1]
    xs = tf.TensorArray(x.dtype, size=n_time).unstack(tf.transpose(x, [1, 0, 2]))
    out = tf.TensorArray(x.dtype, size=n_time, element_shape=tf.TensorShape([None, cell.n_hidden]))

    def body(t, state, out_ta):
        step_seed = None if seed is None else seed + tf.stack([(tf.cast(t, tf.int64) + 1) * 1000003, 0])
        y, new_state = cell._cell(xs.read(t), state, step_seed)
        m = (t < seq_len)[:, None]
        state = tuple(tf.where(m, n, o) for n, o in zip(new_state, state))
        return t + 1, state, out_ta.write(t, tf.where(m, y, tf.zeros_like(y)))

    _, state, out = tf.while_loop(lambda t, *_: t < n_time, body,
                                  [tf.constant(0), cell.initial_state(tf.shape(x)[0]) if initial is None else initial,
                                   out])
    y = stacked(out, [0, tf.shape(x)[0], cell.n_hidden])  # also when no step ran (all sequences empty)
    return tf.ensure_shape(tf.transpose(y, [1, 0, 2]), [None, None, cell.n_hidden]), state


def cell_clip_opt(desc: str, value: Any) -> Optional[float]:
    """TensorFlow's LSTMCell ``cell_clip``: None or a positive number."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise NetworkError("%s: unit_opts cell_clip must be a positive number, got %r" % (desc, value))
    return float(value)
