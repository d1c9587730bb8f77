"""RETURNN's parameter names and layouts of the recurrent units (``rec`` and ``rnn_cell`` layers).

Every unit here keeps its input weights ``W`` (n_in, k*H), recurrent weights ``W_re`` (H, k*H) and
bias ``b`` (k*H) apart, LSTM gates in the order (input, cell-in, forget, output). RETURNN names
them by the implementation it runs for the unit name, under the layer's ``rec/`` scope:

- its native LSTM (``nativelstm2``, ``lstm``, ``lstmp``, ``nativelstm``; on a CPU also ``cudnnlstm``
  and ``lstmblock(fused)`` in a ``rec`` layer; its ``vanillalstm`` cell, the same LSTM): ``W``,
  ``W_re``, ``b``, gates (cell-in, input, forget, output); ``nativelstmlowmem``: ``W`` = [W; W_re] and ``b``;
- TensorFlow's cells (``standardlstm``, and in ``rnn_cell`` the LSTM block names): ``lstm_cell/kernel``
  = [W; W_re] and ``lstm_cell/bias``, gates as ours; ``basiclstm``: ``basic_lstm_cell/...``;
  ``gru``: ``gru_cell/gates/{kernel,bias}`` (reset and update gate) and
  ``gru_cell/candidate/{kernel,bias}``; ``basicrnn``: ``basic_rnn_cell/{kernel,bias}``;
- ``layernormvariantslstm``: ``W_ff``, ``W_re``, ``b_ff``, ``gamma_*``, ``beta_*`` as they are
  (``with_concat``: ``W_ff_re`` = [W_ff; W_re], ``b_ff_re``);
- ``rhn`` (RETURNN's RHNCell): ``W``, ``b``, ``rhn_cell/depth_i/W`` as they are.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence

from returnn.errors import NetworkError
from returnn.tf.layers.params import Param, native_lstm_gates, same, stacked_rows

# unit name (lower case) -> RETURNN's parameter layout in a ``rec`` layer
REC_LAYOUT: Dict[str, str] = {
    "lstm": "native", "nativelstm": "native", "nativelstm2": "native", "lstmp": "native", "cudnnlstm": "native",
    "lstmblock": "native", "lstmblockfused": "native", "nativelstmlowmem": "native_lowmem", "vanillalstm": "native",
    "standardlstm": "lstm_cell", "lstmcell": "lstm_cell", "lstmblockcell": "lstm_cell",
    "basiclstm": "basic_lstm_cell", "zoneoutlstm": "lstm_cell",
    "gru": "gru_cell", "grublock": "gru_cell", "grucell": "gru_cell", "cudnngru": "gru_cell",
    "basicrnn": "basic_rnn_cell", "rnn": "basic_rnn_cell", "rnncell": "basic_rnn_cell",
    "basicrnncell": "basic_rnn_cell", "layernormvariantslstm": "layer_norm_lstm", "rhn": "as_is",
}
# ... in an ``rnn_cell`` layer (RETURNN picks a cell, never a sequence kernel, for the LSTM block names)
CELL_LAYOUT: Dict[str, str] = dict(REC_LAYOUT, lstmblock="lstm_cell", lstmblockfused="lstm_cell",
                                   cudnnlstm="lstm_cell")


def unit_layout(unit: str, in_rnn_cell: bool = False) -> str:
    """RETURNN's parameter layout of ``unit`` in a ``rec`` layer (or an ``rnn_cell`` layer)."""
    return (CELL_LAYOUT if in_rnn_cell else REC_LAYOUT).get(unit.lower(), "native")


def unit_params(layer, unit: str, in_rnn_cell: bool = False) -> List[Param]:
    """The RETURNN parameters of ``layer`` (a rec/rnn_cell layer with ``own_params`` ``W``,
    ``W_re``, ``b`` or the unit's own) for ``unit``."""
    layout = unit_layout(unit, in_rnn_cell)
    p = layer.own_params

    def own(*keys: str) -> bool:
        """Whether the layer made these variables (not all shared by reuse_params: then the layer
        that made them names them); a RETURNN parameter made of shared and own parts is an error."""
        have = [k in p for k in keys]
        if any(have) and not all(have):
            raise NetworkError("%s: RETURNN's parameter of %s is partly shared by reuse_params (%s) and partly own"
                               % (layer.desc, "+".join(keys), ", ".join(k for k in keys if k not in p)))
        return all(have)

    if layout == "native":
        return [native_lstm_gates("rec/" + key, p[key]) for key in ("W", "W_re", "b") if own(key)]
    if layout == "native_lowmem":
        return ([stacked_rows("rec/W", [p["W"], p["W_re"]], swap_gates=True)] if own("W", "W_re") else []) + \
            ([native_lstm_gates("rec/b", p["b"])] if own("b") else [])
    if layout in ("lstm_cell", "basic_lstm_cell", "basic_rnn_cell"):
        return ([stacked_rows("rec/%s/kernel" % layout, [p["W"], p["W_re"]])] if own("W", "W_re") else []) + \
            ([same("rec/%s/bias" % layout, p["b"])] if own("b") else [])
    if layout == "gru_cell":
        out = []
        for part in ("gates", "candidate"):
            if own("W_" + part, "W_re_" + part):
                out.append(stacked_rows("rec/gru_cell/%s/kernel" % part, [p["W_" + part], p["W_re_" + part]]))
            if own("b_" + part):
                out.append(same("rec/gru_cell/%s/bias" % part, p["b_" + part]))
        return out
    cell = getattr(layer, "cell", None) or getattr(layer, "ln_cell", None)  # layer_norm_lstm
    if cell is not None and cell.o["with_concat"]:
        return [stacked_rows("rec/W_ff_re", [p["W_ff"], p["W_re"]])] + \
            [same("rec/" + key, var) for key, var in p.items()
             if key not in ("W_ff", "W_re") and not key.startswith(("rec/", "initial_"))]
    # as they are, but what the layer names itself (initial states, peepholes: keys with their own scope)
    return [same("rec/" + key, var) for key, var in p.items() if not key.startswith(("rec/", "initial_"))]


# RETURNN's unit_opts of a ``rec`` layer's native LSTM units (the class it runs on a CPU with TF 2):
# NativeLstm2 takes rec_weight_dropout, NativeLstm (v1) none, both a forget_bias of 0 only (asserted,
# "should be done via right param init"); its low-memory LSTM and vanillalstm cell take no options
NATIVE_UNIT_OPTS: Dict[str, tuple] = {
    **{u: ("forget_bias", "rec_weight_dropout") for u in
       ("lstm", "nativelstm2", "lstmp", "lstmblock", "lstmblockfused", "cudnnlstm")},
    "nativelstm": ("forget_bias",), "nativelstmlowmem": (), "vanillalstm": ()}


# RETURNN sizes a unit's state with its cell (get_hidden_state_size: _get_cell, cell only) for an initial_state
# and in a loop: on TF 2 LSTMBlock(Fused) (and cudnnlstm on CPU) are TensorFlow's LSTMCell there, built with
# the unit_opts, so a keyword of the native LSTM only (rec_weight_dropout) fails
STATE_CELL_TF_LSTM = ("lstmblock", "lstmblockfused", "cudnnlstm")


def check_state_cell_unit_opts(desc: str, unit: str, unit_opts: Dict) -> None:
    """Refuses ``unit_opts`` TensorFlow's LSTMCell lacks where RETURNN builds it for the state size."""
    if unit in STATE_CELL_TF_LSTM and "rec_weight_dropout" in unit_opts:
        raise NetworkError("%s: unit %r with an initial state or in a loop: RETURNN builds TensorFlow's LSTMCell for "
                           "its state, which takes no unit_opts 'rec_weight_dropout'" % (desc, unit))


def check_native_unit_opts(desc: str, unit: str, unit_opts: Dict) -> None:
    """Refuses ``unit_opts`` RETURNN's class for native ``unit`` refuses (see NATIVE_UNIT_OPTS)."""
    known = NATIVE_UNIT_OPTS.get(unit)
    if known is None:
        return
    unknown = sorted(set(unit_opts) - set(known))
    if unknown:
        raise NetworkError("%s: unit %r takes no unit_opts %s in RETURNN (known: %s)" % (desc, unit, unknown, list(known)))
    if float(unit_opts.get("forget_bias", 0.0)) != 0.0:
        raise NetworkError("%s: unit %r: RETURNN's native LSTM takes forget_bias 0 only (use bias_init, or unit "
                           "standardlstm)" % (desc, unit))


# units whose whole-sequence run in RETURNN (TF 2, CPU) is a native op with its own input projection, which embeds
# sparse inputs; the TensorFlow cells (and nativelstmlowmem) assert a dense input
SPARSE_INPUT_UNITS = ("lstm", "lstmp", "nativelstm", "nativelstm2", "lstmblock", "lstmblockfused", "cudnnlstm")


def check_sparse_input(desc: str, unit: str, sources: Sequence[Any]) -> None:
    """RETURNN's refusal of sparse inputs to a whole-sequence rec layer whose unit is no native LSTM."""
    if unit not in SPARSE_INPUT_UNITS and any(getattr(s, "sparse", False) for s in sources):
        raise NetworkError("%s: unit %r takes no sparse input (RETURNN asserts a dense one: only the native LSTM units "
                           "%s embed class indices); put a linear layer before it" % (desc, unit,
                                                                                      ", ".join(SPARSE_INPUT_UNITS)))
