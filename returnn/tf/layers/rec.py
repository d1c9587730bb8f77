"""Recurrent layer ``rec``: one fast LSTM implementation behind all of RETURNN's LSTM unit names.

LSTM definition (per frame ``t``, ``z = x_t W + h_{t-1} W_re + bias``, split into four blocks of
size ``n_out`` in the gate order **(input, cell-candidate, forget, output)**)::

    i, g, f, o = split(z)
    c_t = sigmoid(f + forget_bias) * c_{t-1} + sigmoid(i) * tanh(g)
    h_t = sigmoid(o) * tanh(c_t)

``forget_bias`` is a constant (not a variable), settable by ``"unit_opts": {"forget_bias": ...}``;
its default is RETURNN's per unit: 0 for the native/fused units (``lstm``, ``nativelstm(2)``,
``lstmp``, ``cudnnlstm``, ``lstmblock(fused)``, which RETURNN runs as NativeLSTM on TF 2, and its
``vanillalstm`` cell), 1.0 for
``standardlstm`` and ``basiclstm`` (TensorFlow's cells). The initial state is zero.
``layernormvariantslstm`` is RETURNN's layer-normalized LSTM (see
:mod:`returnn.tf.layers.lstm_layernorm`).

The input projection ``x W`` is one big matmul over all frames (sparse inputs are an embedding
lookup); the recurrence is a kernel of :mod:`returnn.tf.lstm_kernels` (chosen per device; works
with unknown T). Padded frames (t >= seq_len) never influence real frames; their output is 0.
``direction: -1`` runs over each sequence reversed within its own length.

Other cell units (``gru``, ``basicrnn``, ``zoneoutlstm``, ...: RETURNN runs TensorFlow's cells) and
LSTM units inside a rec loop run as :class:`returnn.tf.layers.rnn_cell.RecStepLayer`; a dict unit is a
sub-network (:class:`returnn.tf.layers.rec_net.layer.RecSubnetLayer`).
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence

import tensorflow as tf

from returnn.errors import NetworkError, known_list
from returnn.tensor import Data
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.helpers import dropout, dropout_sources, feature_plan, plan_output, project_sources
from returnn.tf.layers.lstm_layernorm import LayerNormLstm
from returnn.tf.layers.options import Option, rate
from returnn.tf.layers.params import Param
from returnn.tf.layers.rec_params import unit_params
from returnn.tf.lstm_kernels import final_state_fn, get_kernel

# unit name -> default forget bias (RETURNN's: native kernels 0, TensorFlow's LSTM cells 1)
FORGET_BIAS = {"lstm": 0.0, "nativelstm": 0.0, "nativelstm2": 0.0, "nativelstmlowmem": 0.0, "lstmp": 0.0,
               "cudnnlstm": 0.0, "lstmblock": 0.0, "lstmblockfused": 0.0, "standardlstm": 1.0, "basiclstm": 1.0,
               "vanillalstm": 0.0}
LAYER_NORM_UNIT = "layernormvariantslstm"
LSTM_UNITS = tuple(FORGET_BIAS) + (LAYER_NORM_UNIT,)
UNIT_OPTS = ("forget_bias", "rec_weight_dropout")


@register_layer
class RecLayer(Layer):
    """``{"class": "rec", "unit": "nativelstm2", "n_out": H, "direction": 1 or -1}`` over the time
    axis of ``(B, T, F)`` or ``(T, B, F)`` sources (sources without time axis broadcast over it);
    the output is ``(B, T, H)``."""

    layer_class = "rec"
    param_subscope = "rec/"
    options = (
        Option("unit", "lstm", "LSTM implementation name (all run the same LSTM): %s; other cells: "
                               "rnn_cell's" % ", ".join(LSTM_UNITS)),
        Option("direction", 1, "1: forward in time, -1: backward"),
        Option("unit_opts", None, "dict, e.g. {'forget_bias': 1.0}"),
        Option("unroll", False, "RETURNN: unroll the loop (its TensorFlow cells only)",
               noop="an implementation detail of RETURNN's loop: an unrolled loop computes the same outputs, and "
                    "RETURNN's LSTM kernels ignore it"),
        Option("max_seq_len", None, "RETURNN allows it only with unroll on its TensorFlow cells (rec of a cell unit)",
               only=(None,)),
        Option("forward_weights_init", "glorot_uniform", "init of the input weights W (RETURNN init spec)"),
        Option("recurrent_weights_init", "glorot_uniform", "init of the recurrent weights W_re"),
        Option("bias_init", 0.0, "init of the bias"),
        Option("sampling", 1, "Theano-era RETURNN: subsampling of the recurrence; only 1 (none)"),
        Option("initial_state", None, "only a zero initial state (None, 0, 'zeros')"),
    )

    @staticmethod
    def class_selector(opts: Mapping[str, Any]):
        """A dict ``unit`` is a sub-network: :class:`returnn.tf.layers.rec_net.layer.RecSubnetLayer`; a
        cell unit that is no LSTM here (``gru``, ``basicrnn``, ...) runs as that cell:
        :class:`returnn.tf.layers.rnn_cell.RecStepLayer`."""
        unit = opts.get("unit", "lstm")
        if isinstance(unit, Mapping):
            from returnn.tf.layers.rec_net.layer import RecSubnetLayer
            return RecSubnetLayer
        if isinstance(unit, str) and unit.lower() not in LSTM_UNITS:
            from returnn.tf.layers.rnn_cell import RecStepLayer, rec_cell_units
            if unit.lower() in rec_cell_units():
                return RecStepLayer
        return None

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        unit = self.opt("unit")
        if not isinstance(unit, str) or unit.lower() not in LSTM_UNITS:
            raise NetworkError("%s: unknown unit %r (known: %s)" % (self.desc, unit, known_list(LSTM_UNITS)))
        self.unit = unit.lower()
        self.direction = self.opt("direction")
        if self.direction not in (1, -1):
            raise NetworkError("%s: direction must be 1 or -1, got %r" % (self.desc, self.direction))
        unit_opts = dict(self.opt("unit_opts") or {})
        unknown = set(unit_opts) - set(UNIT_OPTS)
        if unknown and self.unit != LAYER_NORM_UNIT:
            raise NetworkError("%s: unknown unit_opts %s (known: %s)"
                               % (self.desc, known_list(unknown), known_list(UNIT_OPTS)))
        self.forget_bias = float(unit_opts.get("forget_bias", FORGET_BIAS.get(self.unit, 0.0)))
        # RETURNN's NativeLSTM2 option: dropout on the recurrent weights W_re, one mask per training step
        self.rec_weight_dropout = rate(self.desc, "rec_weight_dropout", unit_opts.get("rec_weight_dropout"))
        if self.opt("initial_state") not in (None, 0, 0.0, "zeros"):
            raise NetworkError("%s: initial_state %r is not supported (only zeros%s)" % (
                self.desc, self.opt("initial_state"), "; carrying the state over batches ('keep_over_epoch') "
                "is not implemented" if self.opt("initial_state") == "keep_over_epoch" else ""))
        if self.opt("sampling") != 1:
            raise NetworkError("%s: 'sampling' %r is not supported (only 1)" % (self.desc, self.opt("sampling")))
        self.plan = feature_plan(self, sources)
        dims = self.plan.dims
        self.time_major = len(dims) == 2 and dims[1].is_batch_dim()  # (T, B, F) input (output: batch-major)
        if len(dims) != 2 or not any(d.is_batch_dim() for d in dims) or not any(d.is_dynamic() for d in dims):
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
        self.output = plan_output(name, self.plan, self.out_feature_dim())
        if self.time_major:
            self.output = self.output.copy_transpose([1, 0, 2])

    def returnn_params(self) -> List[Param]:
        return unit_params(self, self.unit)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        sources = dropout_sources(self, sources, ctx)
        seq_len = {d: size for s in sources for d, size in s.sizes.items()}[self.output.dims[1]]
        if self.cell is not None:  # batch-major recursion
            x = project_sources(self.plan, sources, self.cell.W)
            if self.time_major:
                x = tf.transpose(x, [1, 0, 2])
            if self.direction == -1:
                x = tf.reverse_sequence(x, seq_len, seq_axis=1, batch_axis=0)
            y = self.cell.run(x, seq_len, ctx.layer_seed(self.layer_name) if ctx.train else None)
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
            y = get_kernel()(x, seq_len, w_re, self.forget_bias, time_major=True)
            if self.direction == -1:
                y = tf.reverse_sequence(y, seq_len, seq_axis=0, batch_axis=1)
            y = tf.transpose(y, [1, 0, 2])
        out = self.make_output(y, sources)
        if self.cell is None:
            out.last_state = final_state_fn(x, seq_len, w_re, self.forget_bias, time_major=True)
        return out
