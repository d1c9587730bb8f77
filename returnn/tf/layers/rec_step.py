"""The ``rec`` layer run as a cell (:class:`RecStepLayer`: a cell unit in a rec loop, or a unit other than the
native LSTMs over whole sequences) and the options and build checks RETURNN's rec layer has for cell units
(shared with the whole-sequence rec layer of :mod:`returnn.tf.layers.rec`)."""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data
from returnn.tf.layers.base import Layer, LayerOutput, RunContext
from returnn.tf.layers.options import Option, positive_int
from returnn.tf.layers.rec_params import NATIVE_UNIT_OPTS
from returnn.tf.layers.rnn_cell import CELL_UNITS, RnnCellLayer, is_step_template

# RETURNN's RecLayer options that only a sub-network unit reads (its loop, end and search); with a cell unit it
# ignores them (``cheating`` with a warning): declared once for both cell-unit rec classes here
SUBNET_ONLY_OPTIONS = tuple(
    Option(key, default, "RETURNN: a sub-network unit's option (%s)" % what,
           noop="RETURNN reads it only for a sub-network unit; with a cell unit it computes the same")
    for key, default, what in (("optimize_move_layers_out", None, "layers moved out of the loop"),
                               ("include_eos", False, "the end frame in the length"),
                               ("cheating", False, "unused, a choice option now"),
                               ("back_prop", None, "the loop's gradient"),
                               ("use_global_rec_step_offset", False, "the step counter's offset"),
                               ("debug", None, "extra debug outputs of the loop's layers")))
# RETURNN's input_projection: only its native LSTM kernels read it (False: the input is the gates' pre-activations)
INPUT_PROJECTION = Option("input_projection", True, "RETURNN: False feeds the input to its native LSTM kernels as "
                          "the gates' pre-activations (refused for those here); its TensorFlow cells ignore it")
LOOP_AXIS = Option("axis", None, "the axis to run over (RETURNN's rec option): only the input's time axis here")


def check_loop_axis(layer, sources: Sequence[Data], axis: Any) -> None:
    """RETURNN's rec ``axis``: accepted where it is the input's time axis, else refused in one line."""
    if axis is None:
        return
    data = sources[0] if sources else None
    if data is None or data.time_dim_axis is None or layer.axis(data, axis, "axis") != data.time_dim_axis:
        raise NetworkError("%s: 'axis' %r: only the input's time axis is supported as the loop axis" % (layer.desc, axis))


def check_input_projection(desc: str, unit: str, input_projection: Any) -> None:
    """input_projection False with one of RETURNN's native LSTM units: refused (see INPUT_PROJECTION)."""
    if not input_projection and unit in NATIVE_UNIT_OPTS:
        raise NetworkError("%s: input_projection False (the input as the gates' pre-activations of RETURNN's native "
                           "LSTM kernel) is not supported" % desc)


class RecStepLayer(RnnCellLayer):
    """A ``rec`` layer run as a cell: an LSTM unit inside a rec loop (the same LSTM as the
    whole-sequence ``rec`` layer: same unit names, same forget bias defaults), or any other cell unit
    (``gru``, ``basicrnn``, ``zoneoutlstm``, ...) in a loop or over a whole sequence (RETURNN runs
    TensorFlow's cells there; ``direction`` -1 over each sequence reversed)."""

    layer_class = "rec"
    in_rnn_cell = False
    directions = (1, -1)
    merges_extra_axes = True
    options = (
        Option("unit", "lstm", "cell name (see the module docstring)"),
        Option("forward_weights_init", "glorot_uniform", "init of the input weights"),
        Option("recurrent_weights_init", "glorot_uniform", "init of the recurrent weights"),
        Option("weights_init", None, "not an option of RETURNN's rec layer (rnn_cell's)", only=(None,)),
        Option("direction", 1, "1: forward in time, -1: backward (over a whole sequence)"),
        Option("unroll", False, "RETURNN: unroll the loop over time",
               noop="an implementation detail of RETURNN's loop: an unrolled loop computes the same outputs"),
        Option("max_seq_len", None, "RETURNN: the unrolled loop's length (with unroll; T must not exceed it)"),
        Option("sampling", 1, "Theano-era RETURNN: subsampling of the recurrence", only=(1,)),
    ) + SUBNET_ONLY_OPTIONS + (INPUT_PROJECTION, LOOP_AXIS)

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        self.units = rec_cell_units()
        super().__init__(name, opts, sources, seed)
        check_input_projection(self.desc, self.unit, self.opt("input_projection"))
        if not self.step_mode:
            check_loop_axis(self, sources, self.opt("axis"))
            from returnn.tf.layers.rec_params import check_sparse_input
            check_sparse_input(self.desc, self.unit, sources)
        if self.step_mode and self.unit == "nativelstm":  # its loop state is an initial state to RETURNN
            raise NetworkError("%s: unit 'nativelstm' in a rec loop: RETURNN's NativeLstm (v1) refuses the loop's state as "
                               "initial_state (broken support): use nativelstm2" % self.desc)
        self.max_len = unrolled_max_len(self, self.opt("max_seq_len"), self.opt("unroll") and not self.step_mode)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        return super().forward(check_unrolled_length(self, sources, self.max_len), ctx)


def unrolled_max_len(layer: Layer, max_len: Any, unrolled: bool) -> Optional[int]:
    """A rec layer's ``max_seq_len`` (RETURNN: only with ``unroll`` of its TensorFlow cells over a
    whole sequence; ``unrolled`` says whether that is the case), else None."""
    if max_len is not None and not unrolled:
        raise NetworkError("%s: 'max_seq_len' %r needs 'unroll' of a TensorFlow cell over a whole sequence (RETURNN's "
                           "rule)" % (layer.desc, max_len))
    if unrolled and max_len is None:  # RETURNN: "specify max_seq_len for unroll"
        raise NetworkError("%s: 'unroll' of a TensorFlow cell needs 'max_seq_len' (RETURNN asserts)" % layer.desc)
    return None if max_len is None else positive_int(layer.desc, "max_seq_len", max_len)


def check_unrolled_length(layer: Layer, sources: List[LayerOutput], max_len: Optional[int]) -> List[LayerOutput]:
    """RETURNN's unrolled loop: the input must fit into ``max_len`` frames (checked in the step)."""
    if max_len is None:
        return sources
    check = tf.debugging.assert_less_equal(tf.shape(sources[0].tensor)[sources[0].data.time_dim_axis], max_len,
                                           message="%s: required for unroll: max_seq_len >= seq_len" % layer.desc)
    with tf.control_dependencies([check]):
        return [s.with_tensor(tf.identity(s.tensor)) for s in sources]


def rec_cell_units() -> Dict[str, Tuple[str, float]]:
    """Unit name -> (cell kind, default forget bias) in a ``rec`` layer: its LSTM units with the rec
    layer's defaults (:data:`returnn.tf.layers.rec.FORGET_BIAS`), the other cells as rnn_cell has them."""
    from returnn.tf.layers.rec import FORGET_BIAS
    units = dict(CELL_UNITS)
    units.update({u: ("lstm", b) for u, b in FORGET_BIAS.items()})
    return units


def cell_class_for(opts: Mapping[str, Any], sources: Sequence[Data]):
    """The class that runs a ``rec`` sub-layer with a string unit on per-step sources."""
    return RecStepLayer if is_step_template(sources) else None
