"""LSTM recurrence kernels behind one interface, chosen per device.

Every kernel computes the same function (see :mod:`returnn.tf.layers.rec` for the LSTM
definition)::

    kernel(x_proj, seq_len, w_re, forget_bias, time_major=False, initial=None) -> y

* ``x_proj``: (B, T, 4H) input projection incl. bias, gate order (input, cell-candidate, forget, output);
  (T, B, 4H) with ``time_major=True``
* ``seq_len``: (B,) int32 lengths; ``w_re``: (H, 4H) recurrent weights
* ``initial``: the state ``(h0, c0)`` (B, H) each sequence starts from; None: zeros (the fast path
  all kernels keep as it was)
* ``y``: (B, T, H) outputs ((T, B, H) with ``time_major``), exactly 0 on padded frames (t >= seq_len).

:func:`lstm_sequence` is what layers call: it adds TensorFlow's LSTM peepholes (the reference loop)
and each sequence's final state (for ``keep_over_epoch`` and ``get_last_hidden_state``).

The recursion runs time-major. A caller that can produce ``x_proj`` time-major cheaply (by
transposing the smaller input before projecting it, as the ``rec`` layer does) passes
``time_major=True`` and saves the transposes of the 4H-wide tensors forward and backward.

Frames past a sequence's end cannot influence its real frames (the state only flows forward in
time and padded outputs are zeroed, so their gradient is zero), hence a kernel may compute them
freely instead of masking the state every step.

Kernels:

* ``"loop"``: ``tf.while_loop`` with per-step state masking, differentiated by autodiff (the
  reference implementation).
* ``"fused"``: a while loop that stores the activated gates and cell states, and a hand-written
  backward loop of a few ops per step (all factors that do not depend on the recursion are
  computed in bulk before it; the per-step matmul uses the recurrent weights transposed once before
  the loop, measured 15 % faster per step than a ``transpose_b`` matmul); the recurrent weight gradient is
  one large matmul after that loop instead of one accumulation per step. The default on CPU (and, untested, on GPU).

A GPU kernel (e.g. cuDNN with sequence lengths) can be added by registering it in :data:`KERNELS`
and returning it from :func:`default_kernel_name` for that device type.
"""
from __future__ import annotations

from typing import Callable, Dict, Optional, Tuple

import tensorflow as tf

from returnn.tf.util.tensor_array import stacked

LstmKernel = Callable[..., tf.Tensor]


def _time_major_mask(seq_len: tf.Tensor, n_time: tf.Tensor) -> tf.Tensor:
    """(T, B) bool: True on real frames."""
    return tf.transpose(tf.sequence_mask(seq_len, maxlen=n_time))


def _mask_outputs_tm(y: tf.Tensor, seq_len: tf.Tensor) -> tf.Tensor:
    """Time-major ``y`` (T, B, H) with padded frames set to 0."""
    mask = _time_major_mask(seq_len, tf.shape(y)[0])[:, :, None]
    return tf.where(mask, y, tf.zeros_like(y))


def _swap_bt(x: tf.Tensor) -> tf.Tensor:
    return tf.transpose(x, [1, 0, 2])


Peepholes = Optional[Tuple[tf.Tensor, tf.Tensor, tf.Tensor]]  # (w_i_diag, w_f_diag, w_o_diag), each (H,)
State = Optional[Tuple[tf.Tensor, tf.Tensor]]  # (h, c), each (B, H)


def lstm_step(z: tf.Tensor, c: tf.Tensor, forget_bias: float, peepholes: Peepholes = None,
              cell_clip: Optional[float] = None) -> Tuple[tf.Tensor, tf.Tensor]:
    """One LSTM step from the gate pre-activations ``z = x W + h W_re + bias`` (B, 4H) and the cell
    state ``c`` (B, H): returns the new ``(h, c)``. ``peepholes`` (TensorFlow's LSTMCell
    ``use_peepholes``): the input and forget gates also see ``w * c_prev``, the output gate ``w * c_new``.
    ``cell_clip`` (LSTMCell's): ``c_new`` clipped to [-cell_clip, cell_clip] before the output reads it."""
    i, g, f, o = tf.split(z, 4, axis=-1)
    if peepholes is None:
        c_new = tf.sigmoid(f + forget_bias) * c + tf.sigmoid(i) * tf.tanh(g)
        if cell_clip is not None:
            c_new = tf.clip_by_value(c_new, -cell_clip, cell_clip)
        return tf.sigmoid(o) * tf.tanh(c_new), c_new
    w_i, w_f, w_o = peepholes
    c_new = tf.sigmoid(f + forget_bias + w_f * c) * c + tf.sigmoid(i + w_i * c) * tf.tanh(g)
    if cell_clip is not None:
        c_new = tf.clip_by_value(c_new, -cell_clip, cell_clip)
    return tf.sigmoid(o + w_o * c_new) * tf.tanh(c_new), c_new


def loop_lstm(x_proj: tf.Tensor, seq_len: tf.Tensor, w_re: tf.Tensor, forget_bias: float,
              time_major: bool = False, initial: State = None) -> tf.Tensor:
    """Reference kernel: per-step masking, autodiff through the while loop."""
    return loop_lstm_with_state(x_proj, seq_len, w_re, forget_bias, time_major, initial)[0]


def loop_lstm_with_state(x_proj: tf.Tensor, seq_len: tf.Tensor, w_re: tf.Tensor, forget_bias: float,
                         time_major: bool = False, initial: State = None, peepholes: Peepholes = None,
                         cell_clip: Optional[float] = None) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """The reference kernel's outputs and each sequence's final state ``(h, c)`` (B, H): the state
    after its last real frame (it is held over padded frames; ``initial`` for an empty sequence)."""
    n_hidden = w_re.shape[0]
    x_tm = x_proj if time_major else _swap_bt(x_proj)
    batch = tf.shape(x_tm)[1]
    n_time = tf.shape(x_tm)[0]
    xs = tf.TensorArray(x_proj.dtype, size=n_time, element_shape=tf.TensorShape([None, 4 * n_hidden]))
    xs = xs.unstack(x_tm)
    masks = tf.TensorArray(tf.bool, size=n_time, element_shape=tf.TensorShape([None]))
    masks = masks.unstack(_time_major_mask(seq_len, n_time))
    out = tf.TensorArray(x_proj.dtype, size=n_time, element_shape=tf.TensorShape([None, n_hidden]))
    zeros = tf.zeros([batch, n_hidden], dtype=x_proj.dtype)
    h0, c0 = initial if initial is not None else (zeros, zeros)

    def body(t, h, c, out_ta):
        h_new, c_new = lstm_step(xs.read(t) + tf.matmul(h, w_re), c, forget_bias, peepholes, cell_clip)
        m = masks.read(t)[:, None]
        out_ta = out_ta.write(t, tf.where(m, h_new, tf.zeros_like(h_new)))
        return t + 1, tf.where(m, h_new, h), tf.where(m, c_new, c), out_ta

    _, h, c, out = tf.while_loop(lambda t, *_: t < n_time, body, [tf.constant(0), h0, c0, out])
    y = stacked(out, [0, batch, n_hidden])  # (T, B, H), also for T = 0 (all sequences empty)
    y = y if time_major else _swap_bt(y)
    return tf.ensure_shape(y, [None, None, n_hidden]), h, c


def final_state_fn(x_proj: tf.Tensor, seq_len: tf.Tensor, w_re: tf.Tensor, forget_bias: float,
                   time_major: bool = False, initial: State = None, peepholes: Peepholes = None,
                   cell_clip: Optional[float] = None) -> Callable[[], Tuple[tf.Tensor, tf.Tensor]]:
    """For ``get_last_hidden_state``: a function giving each sequence's final ``(c, h)`` (RETURNN's
    LSTM state order), computed again by the reference kernel only when a layer asks for it
    (autodiff through it gives the right gradients)."""
    def final_c_h() -> Tuple[tf.Tensor, tf.Tensor]:
        _, h, c = loop_lstm_with_state(x_proj, seq_len, w_re, forget_bias, time_major, initial, peepholes, cell_clip)
        return c, h
    return final_c_h


def _shift_in_zero(seq: tf.Tensor) -> tf.Tensor:
    """(T, B, D) -> the same sequence delayed by one frame, frame 0 zero."""
    return tf.concat([tf.zeros_like(seq[:1]), seq[:-1]], axis=0)


def _shift_in(seq: tf.Tensor, first: Optional[tf.Tensor]) -> tf.Tensor:
    """(T, B, D) -> the same sequence delayed by one frame, frame 0 ``first`` (B, D) (None: zeros)."""
    if first is None:
        return _shift_in_zero(seq)
    return tf.concat([first[None], seq[:-1]], axis=0)


def _fused_forward(x_proj: tf.Tensor, w_re: tf.Tensor, forget_bias: float, h0: Optional[tf.Tensor] = None,
                   c0: Optional[tf.Tensor] = None) -> Tuple[tf.Tensor, tf.Tensor]:
    """Forward over time-major ``x_proj`` (T, B, 4H) without masking from the state ``(h0, c0)``
    (None: zeros): returns the activated gates (T, B, 4H) in gate order (i, g, f, o) and the cell
    states (T, B, H)."""
    n_hidden = w_re.shape[0]
    n_time = tf.shape(x_proj)[0]
    a_ta = tf.TensorArray(x_proj.dtype, size=n_time, element_shape=tf.TensorShape([None, 4 * n_hidden]))
    c_ta = tf.TensorArray(x_proj.dtype, size=n_time, element_shape=tf.TensorShape([None, n_hidden]))
    zeros = tf.zeros([tf.shape(x_proj)[1], n_hidden], dtype=x_proj.dtype)
    h_init = zeros if h0 is None else h0
    c_init = zeros if c0 is None else c0

    def body(t, h, c, a_ta, c_ta):
        i, g, f, o = tf.split(x_proj[t] + tf.matmul(h, w_re), 4, axis=1)
        i, g, f, o = tf.sigmoid(i), tf.tanh(g), tf.sigmoid(f + forget_bias), tf.sigmoid(o)
        c = f * c + i * g
        h = o * tf.tanh(c)
        return t + 1, h, c, a_ta.write(t, tf.concat([i, g, f, o], axis=1)), c_ta.write(t, c)

    _, _, _, a_ta, c_ta = tf.while_loop(lambda t, *_: t < n_time, body,
                                        [tf.constant(0), h_init, c_init, a_ta, c_ta])
    batch = tf.shape(x_proj)[1]
    return stacked(a_ta, [0, batch, 4 * n_hidden]), stacked(c_ta, [0, batch, n_hidden])


def _fused_backward(dy: tf.Tensor, gates: tf.Tensor, cells: tf.Tensor, tanh_cells: tf.Tensor, outputs: tf.Tensor,
                    w_re: tf.Tensor, h0: Optional[tf.Tensor] = None, c0: Optional[tf.Tensor] = None,
                    dcells: Optional[tf.Tensor] = None) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
    """Gradients (d x_proj, d w_re, d h0, d c0), all time-major; ``h0``, ``c0``: the initial state
    (None: zeros); ``dcells``: the gradient of the cell states when they are an output too."""
    n_hidden = w_re.shape[0]
    n_time = tf.shape(dy)[0]
    w_re_t = tf.transpose(w_re)
    i, g, f, o = tf.split(gates, 4, axis=-1)
    # All per-frame factors that do not depend on the backward recursion, computed in bulk:
    # dc_t = dc_{t+1} * f_{t+1} + dh_t * o_t * (1 - tanh(c_t)^2);
    # dz_t = [dc, dc, dc, dh]_t * [g i', i g', c_{t-1} f', tanh(c_t) o']_t  (' = activation derivative).
    dc_from_dh = o * (1.0 - tf.square(tanh_cells))
    dz_factor = tf.concat([g * i * (1.0 - i), i * (1.0 - tf.square(g)), _shift_in(cells, c0) * f * (1.0 - f),
                           tanh_cells * o * (1.0 - o)], axis=-1)
    dz_ta = tf.TensorArray(dy.dtype, size=n_time, element_shape=tf.TensorShape([None, 4 * n_hidden]))
    zeros = tf.zeros([tf.shape(dy)[1], n_hidden], dtype=dy.dtype)

    def body(t, dh_next, dc_next, dz_ta):
        dh = dy[t] + dh_next
        dc = dc_next + dh * dc_from_dh[t]
        if dcells is not None:
            dc += dcells[t]
        dz = tf.concat([dc, dc, dc, dh], axis=1) * dz_factor[t]
        return t - 1, tf.matmul(dz, w_re_t), dc * f[t], dz_ta.write(t, dz)

    _, dh0, dc0, dz_ta = tf.while_loop(lambda t, *_: t >= 0, body, [n_time - 1, zeros, zeros, dz_ta])
    dz = stacked(dz_ta, [0, tf.shape(dy)[1], 4 * n_hidden])
    h_prev = tf.reshape(_shift_in(outputs, h0), [-1, n_hidden])
    d_w_re = tf.matmul(h_prev, tf.reshape(dz, [-1, 4 * n_hidden]), transpose_a=True)
    return dz, d_w_re, dh0, dc0


def _fused_core(forget_bias: float):
    """The differentiable core for one forget bias: (T, B, 4H) input projections and recurrent
    weights -> (T, B, H) outputs (unmasked)."""

    @tf.custom_gradient
    def core(x_proj: tf.Tensor, w_re: tf.Tensor):
        gates, cells = _fused_forward(x_proj, w_re, forget_bias)
        tanh_cells = tf.tanh(cells)
        outputs = gates[:, :, 3 * w_re.shape[0]:] * tanh_cells

        def grad(dy):
            return _fused_backward(dy, gates, cells, tanh_cells, outputs, w_re)[:2]

        return outputs, grad

    return core


def _fused_core_with_state(forget_bias: float):
    """Like :func:`_fused_core` from an initial state ``(h0, c0)``, with the cell states (T, B, H)
    as a second output (for each sequence's final state); differentiable in all four inputs."""

    @tf.custom_gradient
    def core(x_proj: tf.Tensor, w_re: tf.Tensor, h0: tf.Tensor, c0: tf.Tensor):
        gates, cells = _fused_forward(x_proj, w_re, forget_bias, h0, c0)
        tanh_cells = tf.tanh(cells)
        outputs = gates[:, :, 3 * w_re.shape[0]:] * tanh_cells

        def grad(dy, dcells=None):
            return _fused_backward(dy, gates, cells, tanh_cells, outputs, w_re, h0, c0, dcells)

        return (outputs, cells), grad

    return core


def fused_lstm(x_proj: tf.Tensor, seq_len: tf.Tensor, w_re: tf.Tensor, forget_bias: float,
               time_major: bool = False, initial: State = None) -> tf.Tensor:
    """Fused gate math and a hand-written backward pass (see module docstring)."""
    w_re = tf.convert_to_tensor(w_re)
    x_tm = x_proj if time_major else _swap_bt(x_proj)
    if initial is None:
        y = _fused_core(float(forget_bias))(x_tm, w_re)
    else:
        y = _fused_core_with_state(float(forget_bias))(x_tm, w_re, initial[0], initial[1])[0]
    y = _mask_outputs_tm(y, seq_len)
    return tf.ensure_shape(y if time_major else _swap_bt(y), [None, None, w_re.shape[0]])


KERNELS: Dict[str, LstmKernel] = {"loop": loop_lstm, "fused": fused_lstm}


def default_kernel_name(device_type: str = "CPU") -> str:
    """The kernel measured fastest for ``device_type`` ("CPU"; "GPU" has no kernel of its own yet)."""
    return "fused"


def get_kernel(name: Optional[str] = None) -> LstmKernel:
    """The kernel ``name``, or the default for the first visible device type."""
    if name is None:
        name = default_kernel_name("GPU" if tf.config.list_logical_devices("GPU") else "CPU")
    return KERNELS[name]


def _final_of(seq_tm: tf.Tensor, first: tf.Tensor, seq_len: tf.Tensor) -> tf.Tensor:
    """Frame ``seq_len - 1`` of each sequence of time-major ``seq_tm`` (T, B, H); ``first`` (B, H)
    for an empty sequence."""
    with_first = tf.concat([first[None], seq_tm], axis=0)
    return tf.gather_nd(with_first, tf.stack([seq_len, tf.range(tf.shape(seq_len)[0])], axis=1))


def lstm_sequence(x_tm: tf.Tensor, seq_len: tf.Tensor, w_re: tf.Tensor, forget_bias: float, initial: State = None,
                  peepholes: Peepholes = None, final: bool = False, cell_clip: Optional[float] = None
                  ) -> Tuple[tf.Tensor, State]:
    """The LSTM over time-major input projections ``x_tm`` (T, B, 4H): outputs (T, B, H), 0 on
    padded frames, and with ``final`` each sequence's final state ``(h, c)`` (else None).

    Zero initial state, no peepholes, no final state: the device's kernel as it is. An initial
    state: the fused kernel from it (its cell states give the final state by one gather).
    Peepholes or a ``cell_clip``: the reference loop (autodiff)."""
    if initial is None and peepholes is None and cell_clip is None and not final:
        return get_kernel()(x_tm, seq_len, w_re, forget_bias, time_major=True), None
    if peepholes is not None or cell_clip is not None or get_kernel() is loop_lstm:
        y, h, c = loop_lstm_with_state(x_tm, seq_len, w_re, forget_bias, True, initial, peepholes, cell_clip)
        return y, ((h, c) if final else None)
    w_re = tf.convert_to_tensor(w_re)
    if initial is None:
        zeros = tf.zeros([tf.shape(x_tm)[1], w_re.shape[0]], x_tm.dtype)
        initial = (zeros, zeros)
    out, cells = _fused_core_with_state(float(forget_bias))(x_tm, w_re, initial[0], initial[1])
    y = tf.ensure_shape(_mask_outputs_tm(out, seq_len), [None, None, w_re.shape[0]])
    if not final:
        return y, None
    return y, (_final_of(out, initial[0], seq_len), _final_of(cells, initial[1], seq_len))
