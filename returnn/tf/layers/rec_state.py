"""RETURNN's ``initial_state`` of recurrent units (``rec`` with a cell unit, ``rnn_cell``).

A unit's state is one vector per sequence (GRU, RNN, RHN: key ``"var"``) or two (LSTMs: ``"c"``,
``"h"``, RETURNN's ``LSTMStateTuple``). ``initial_state`` gives each:

- ``None``, ``0``, ``False``, ``"zeros"``: zeros; ``1``, ``True``, ``"ones"``: ones;
- ``"var"``: a trainable vector (zeros at first) shared by all sequences: RETURNN's parameter
  ``initial_<key>`` (``initial_c``, ``initial_h``, ``initial_var``) in the layer's scope
  (``<layer>/rec/initial_c`` for a unit over whole sequences, ``<rec>/rec/<sub>/initial_c`` for a
  cell inside a rec loop);
- ``"keep_over_epoch"``: the state each sequence of the previous training step ended with (of the
  same epoch; the first step of an epoch starts at zeros). Kept per batch entry in a variable that
  checkpoints do not store (RETURNN's ``keep_state_<key>``). When the batch size changes, entries
  up to the smaller size keep their state and new entries start at zeros. Only training steps carry
  it (an evaluation or forward step starts at zeros and leaves it), where RETURNN also carries it
  over the batches of an evaluation;
- a layer name: that layer's ``(batch, n_out)`` value (the layer is built first); a recurrent
  layer over a sequence gives its last hidden state (RETURNN's ``get_last_hidden_state(key="*")``:
  an LSTM's ``c`` and ``h`` concatenated);
- for an LSTM, a dict ``{"c": ..., "h": ...}`` or a list ``[c, h]`` of the above per key (a single
  layer for both is refused, as RETURNN does: say which state it is).

``keep_over_epoch_no_init`` and ``placeholder`` (graphs for use outside RETURNN) are refused.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data
from returnn.tf.layers.output import LayerOutput
from returnn.tf.layers.params import Param, same

KEYWORDS = ("zeros", "ones", "var", "keep_over_epoch")
REFUSED = {"keep_over_epoch_no_init": "a graph for use outside RETURNN", "placeholder": "a graph for use outside "
           "RETURNN (the state fed from outside)"}
LSTM_KEYS = ("c", "h")
SINGLE_KEYS = ("var",)


def state_layer_refs(spec: Any) -> List[str]:
    """The layer names an ``initial_state`` value reads, in a fixed order (dict values in key order)."""
    if isinstance(spec, str):
        return [] if spec in KEYWORDS or spec in REFUSED else [spec]
    if isinstance(spec, Mapping):
        return [r for k in sorted(spec, key=str) for r in state_layer_refs(spec[k])]
    if isinstance(spec, (list, tuple)):
        return [r for v in spec for r in state_layer_refs(v)]
    return []


def is_zero(spec: Any) -> bool:
    """Whether ``initial_state`` is all zeros (RETURNN then lets the unit start as without it)."""
    if isinstance(spec, Mapping):
        return all(is_zero(v) for v in spec.values())
    if isinstance(spec, (list, tuple)):
        return all(is_zero(v) for v in spec)
    return spec is None or spec == "zeros" or (not isinstance(spec, str) and spec == 0)


class InitialState:
    """The ``initial_state`` of one unit (see the module docstring).

    ``keys``: the state's keys (:data:`LSTM_KEYS` or :data:`SINGLE_KEYS`); ``size``: the state
    vectors' size; ``prefix``: the variables' RETURNN scope within the layer (``"rec/"`` or ``""``);
    ``sources``: the templates of :func:`state_layer_refs` (appended to the layer's sources)."""

    def __init__(self, layer, spec: Any, keys: Sequence[str], size: int, prefix: str,
                 sources: Sequence[Data] = (), where: str = "initial_state"):
        self.layer = layer
        self.keys = tuple(keys)
        self.size = int(size)
        self.prefix = prefix
        self.where = "%s: option %r" % (layer.desc, where)
        self.refs = state_layer_refs(spec)
        if len(sources) != len(self.refs):
            raise NetworkError("%s: internal error: %i state sources for %i layer references" % (
                self.where, len(sources), len(self.refs)))
        self.zero = is_zero(spec)
        self.entries: Dict[str, Tuple[str, Any]] = {}
        per_key = self._per_key(spec)
        ref_index = 0
        for key in self.keys:
            value = per_key[key]
            if isinstance(value, str) and value in REFUSED:
                raise NetworkError("%s: %r is not supported (%s)" % (self.where, value, REFUSED[value]))
            if value is None or value == "zeros" or (not isinstance(value, str) and value == 0):
                self.entries[key] = ("zeros", None)
            elif value == "ones" or (not isinstance(value, str) and value == 1):
                self.entries[key] = ("ones", None)
            elif value == "var":
                var = layer.variable(prefix + "initial_" + key, np.zeros([self.size], np.float32))
                self.entries[key] = ("var", var)
            elif value == "keep_over_epoch":  # transient state: no parameter, not tracked by the layer
                self.entries[key] = ("keep", tf.Variable(tf.zeros([0, self.size]), trainable=False,
                                                         shape=tf.TensorShape([None, self.size]),
                                                         name="keep_state_" + key))
            elif isinstance(value, str):
                self._check_source(value, sources[ref_index])
                self.entries[key] = ("layer", ref_index)
                ref_index += 1
            else:
                raise NetworkError("%s: invalid value %r%s (zeros, ones, var, keep_over_epoch, 0, 1 or a layer name)"
                                   % (self.where, value, "" if len(self.keys) == 1 else " for state %r" % key))
        self.keep_epoch = self.keep_rows = None
        if any(kind == "keep" for kind, _ in self.entries.values()):
            self.keep_epoch = tf.Variable(tf.constant(-1, tf.int64), trainable=False, name="keep_state_epoch")
            # the kept batch size, apart: grappler computes the shape of a variable's read from the variable
            # itself, unordered with this step's assignment of it
            self.keep_rows = tf.Variable(tf.constant(0, tf.int32), trainable=False, name="keep_state_rows")

    def _per_key(self, spec: Any) -> Dict[str, Any]:
        if isinstance(spec, Mapping):
            if len(self.keys) == 1 or set(spec) != set(self.keys):
                raise NetworkError("%s: a dict must give the states %s exactly, got %s"
                                   % (self.where, list(self.keys) if len(self.keys) > 1 else "(one state here: no "
                                      "dict)", sorted(spec, key=str)))
            return dict(spec)
        if isinstance(spec, (list, tuple)):
            if len(spec) != len(self.keys) or len(self.keys) == 1:
                raise NetworkError("%s: a list must give the states %s in this order, got %r"
                                   % (self.where, list(self.keys), spec))
            return dict(zip(self.keys, spec))
        if len(self.keys) > 1 and isinstance(spec, str) and spec not in KEYWORDS and spec not in REFUSED:
            raise NetworkError("%s: one layer %r for the states %s: give each state its value, e.g. %r (RETURNN "
                               "refuses it too)" % (self.where, spec, list(self.keys),
                                                    {k: spec for k in self.keys}))
        return {k: spec for k in self.keys}

    def _check_source(self, name: str, data: Data) -> None:
        dims = [d for i, d in enumerate(data.dims) if i != data.batch_dim_axis]
        if data.batch_dim_axis is not None and data.time_dim_axis is not None and len(dims) == 2:
            return  # a recurrent layer's last hidden state (checked when it runs)
        if data.batch_dim_axis is None or data.sparse or len(dims) != 1 or dims[0].dimension != self.size:
            raise NetworkError("%s: layer %r must be (batch, %i) or a recurrent layer, got %s"
                               % (self.where, name, self.size, data.short_repr()))

    @property
    def keeps(self) -> bool:
        """Whether some state is carried over training steps (``keep_over_epoch``)."""
        return self.keep_epoch is not None

    def initial(self, batch: tf.Tensor, values: Sequence[LayerOutput] = (), train: bool = False,
                epoch: Optional[tf.Tensor] = None) -> Dict[str, tf.Tensor]:
        """Each state's ``(batch, size)`` value at the start (``values``: those of :attr:`refs`;
        ``epoch``: the training step's epoch, for ``keep_over_epoch``)."""
        out = {}
        for key in self.keys:
            kind, arg = self.entries[key]
            if kind == "zeros":
                out[key] = tf.zeros(tf.stack([batch, self.size]))
            elif kind == "ones":
                out[key] = tf.ones(tf.stack([batch, self.size]))
            elif kind == "var":
                out[key] = tf.tile(tf.convert_to_tensor(arg)[None, :], tf.stack([batch, 1]))
            elif kind == "layer":
                out[key] = self._layer_state(values[arg], key)
            else:
                out[key] = self._kept(arg, batch, train, epoch)
        return out

    def _layer_state(self, v: LayerOutput, key: str) -> tf.Tensor:
        """A layer's value as one state ``(batch, size)``; of a recurrent layer over a sequence, its
        whole last hidden state (RETURNN's key "*")."""
        if v.data.time_dim_axis is not None:
            if v.last_state is None:
                raise NetworkError("%s: layer %r has a time axis and no hidden state (give a (batch, %i) layer, "
                                   "e.g. get_last_hidden_state)" % (self.where, v.data.name, self.size))
            parts = [tf.cast(p, tf.float32) for p in v.last_state()]
            x = tf.concat(parts, -1) if len(parts) > 1 else parts[0]
            if x.shape[-1] is not None and x.shape[-1] != self.size:
                raise NetworkError("%s: the last hidden state of %r has size %i, state %r needs %i"
                                   % (self.where, v.data.name, x.shape[-1], key, self.size))
            return tf.ensure_shape(x, [None, self.size])
        x = tf.cast(v.tensor, tf.float32)
        if v.data.batch_dim_axis != 0:
            x = tf.transpose(x, [v.data.batch_dim_axis] + [a for a in range(2) if a != v.data.batch_dim_axis])
        return tf.ensure_shape(x, [None, self.size])

    def _kept(self, var: tf.Variable, batch: tf.Tensor, train: bool, epoch: Optional[tf.Tensor]) -> tf.Tensor:
        zeros = tf.zeros(tf.stack([batch, self.size]))
        if not train or epoch is None:
            return zeros
        stored = tf.stop_gradient(var.read_value())
        rows = tf.minimum(self.keep_rows.read_value(), batch)
        kept = tf.pad(stored[:rows], tf.stack([tf.stack([0, batch - rows]), [0, 0]]))
        same_epoch = tf.equal(self.keep_epoch.read_value(), tf.cast(epoch, tf.int64))
        return tf.ensure_shape(tf.where(same_epoch, kept, zeros), [None, self.size])

    def keep(self, final: Mapping[str, tf.Tensor], train: bool, epoch: Optional[tf.Tensor]) -> None:
        """Stores the final states of a training step for the next (``keep_over_epoch`` only)."""
        if not self.keeps or not train or epoch is None:
            return
        for key in self.keys:
            kind, var = self.entries[key]
            if kind == "keep":
                var.assign(tf.stop_gradient(final[key]))
                rows = tf.shape(final[key])[0]
        self.keep_rows.assign(rows)
        self.keep_epoch.assign(tf.cast(epoch, tf.int64))

    def params(self) -> List[Param]:
        """The trainable state variables (``var``) under RETURNN's names. (``keep_over_epoch``'s
        variables are transient: no parameters, never saved, as RETURNN's.)"""
        own = self.layer.own_params  # (a variable shared by reuse_params is named by the layer that made it)
        return [same(self.prefix + "initial_" + key, self.entries[key][1]) for key in self.keys
                if self.entries[key][0] == "var" and own.get(self.prefix + "initial_" + key) is self.entries[key][1]]

    def trainable(self) -> List[tf.Variable]:
        """The ``var`` variables (the layer holds them in an attribute: tf.Module tracks them there)."""
        return [self.entries[key][1] for key in self.keys if self.entries[key][0] == "var"]


# ---- RETURNN's ``state`` option (LayerBase): the rec state a layer continues from, given by layers
def _plain(spec: Any) -> Any:
    """``spec`` with a namedtuple such as LSTMStateTuple(c, h) as a list."""
    if isinstance(spec, Mapping):
        return {k: _plain(v) for k, v in spec.items()}
    if isinstance(spec, (list, tuple)):
        return [_plain(v) for v in spec]
    return spec


def explicit_state_refs(spec: Any) -> List[str]:
    """The layer names of a ``state`` option, in :func:`state_layer_refs`'s order."""
    return [] if spec is None else state_layer_refs(_plain(spec))


def check_state_layers(where: str, spec: Any, keys: Sequence[str]) -> None:
    """A ``state`` option names a layer in every part (RETURNN looks up each part as a layer)."""
    if isinstance(spec, Mapping):
        for v in spec.values():
            check_state_layers(where, v, keys)
    elif isinstance(spec, (list, tuple)):
        for v in spec:
            check_state_layers(where, v, keys)
    elif not isinstance(spec, str) or spec in KEYWORDS or spec in REFUSED:
        raise NetworkError("%s: RETURNN's state is a structure of layer names like the unit's state (%s), got %r"
                           % (where, ", ".join(keys), spec))


class ExplicitState:
    """RETURNN's ``state`` option of a recurrent unit: the state a step continues from is given by
    layers (``{"c": "prev:s_c", "h": "prev:s_h"}``, ``LSTMStateTuple("prev:s_c", "prev:s_h")``, one
    name for a one-vector state). RETURNN fails on a None part (it looks up every part as a layer)."""

    def __init__(self, layer, spec: Any, keys: Sequence[str], size: int, sources: Sequence[Data]):
        check_state_layers("%s: option 'state'" % layer.desc, spec, keys)
        self.parsed = InitialState(layer, _plain(spec), keys, size, "", sources, where="state")
        self.refs = self.parsed.refs

    def values(self, batch: tf.Tensor, values: Sequence[LayerOutput]) -> Dict[str, tf.Tensor]:
        """The state by key: the given layers' values (``values``: those of :attr:`refs`)."""
        return self.parsed.initial(batch, values)
