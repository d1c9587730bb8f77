"""More of RETURNN's TFUtil functions that config code calls (eval strings get every public name of
TFUtil, see returnn/tf/layers/eval_layer.py; custom layer classes import them): printing from the
step (``py_print``), axis helpers, normalisations, padding/slicing, a cross entropy over a dynamic
axis. Each behaves as RETURNN's function of the same name."""
from __future__ import annotations

import builtins
import sys
from typing import Any, Optional, Sequence

import numpy as np
import tensorflow as tf


def py_print(pass_through_value: Any, print_args: Sequence[Any], message: Optional[str] = None,
             summarize: Optional[int] = None, first_n: Optional[int] = None, name: str = "py_print",
             file: Any = None) -> tf.Tensor:
    """``pass_through_value``, printing ``print_args`` to Python's stdout (or ``file``) when it is
    computed: ``message`` first, tensors as numpy prints them with ``summarize`` edge items (default 3),
    strings in brackets; ``first_n`` > 0 prints only from the ``first_n``-th call on (RETURNN's)."""
    summarize = 3 if summarize is None else summarize
    first_n = -1 if first_n is None else first_n
    count = [0]
    fmt = dict(formatter={"int": str, "object": bytes.decode}, edgeitems=summarize, threshold=summarize)

    def _print(*args: Any) -> bool:
        count[0] += 1
        if 0 < first_n and first_n > count[0]:
            return False
        text, newline = message or "", False
        for arg in args:
            if isinstance(arg, bytes):
                part = "[%s]" % arg.decode("utf8")
            elif isinstance(arg, np.ndarray):
                part = "[]" if arg.size == 0 else np.array2string(arg, **fmt)
            else:
                part = "[%r]" % (arg,)
            if "\n" in part:
                newline = True
                text += "\n" + part
            else:
                if newline:
                    newline = False
                    text += "\n"
                text += part
        try:
            builtins.print(text, file=file or sys.stdout)
        except BrokenPipeError:
            return False
        return True

    with tf.name_scope(name):
        op = tf.numpy_function(_print, list(print_args), tf.bool, name=name)
        with tf.control_dependencies([op]):
            return tf.identity(pass_through_value)


def identity(x: Any) -> Any:
    return x


def move_axis(x: tf.Tensor, old_axis: int, new_axis: int, name: str = "move_axis") -> tf.Tensor:
    """``x`` with axis ``old_axis`` moved to ``new_axis`` (negative counted from the end)."""
    with tf.name_scope(name):
        ndim = x.shape.ndims
        old_axis, new_axis = old_axis % ndim, new_axis % ndim
        perm = [i for i in range(ndim) if i != old_axis]
        perm.insert(new_axis, old_axis)
        return tf.transpose(x, perm)


def swapaxes(x: tf.Tensor, axis1: int, axis2: int) -> tf.Tensor:
    with tf.name_scope("swapaxes"):
        ndim = x.shape.ndims
        perm = list(range(ndim))
        perm[axis1 % ndim], perm[axis2 % ndim] = perm[axis2 % ndim], perm[axis1 % ndim]
        return tf.transpose(x, perm)


def reversed(x: tf.Tensor) -> tf.Tensor:  # noqa: A001 (RETURNN's name)
    """``x[::-1]`` (the first axis reversed)."""
    return x[::-1]


def check_input_ndim(x: tf.Tensor, ndim: int) -> tf.Tensor:
    """``x``, checked to have rank ``ndim``."""
    if x.shape.ndims is not None:
        if x.shape.ndims != ndim:
            raise ValueError("check_input_ndim: rank %i, expected %i" % (x.shape.ndims, ndim))
        return x
    with tf.control_dependencies([tf.debugging.assert_rank(x, ndim)]):
        return tf.identity(x)


def simplify_add(a: Any, b: Any) -> Any:
    return a + b


def simplify_sub(a: Any, b: Any) -> Any:
    return a - b


def l1_normalized(x: tf.Tensor, axis: int = -1, eps: Optional[float] = 1e-20, use_logsumexp: bool = False,
                  is_not_negative: bool = False) -> tf.Tensor:
    """``|x| / sum(|x|)`` along ``axis`` (entries at least ``eps``, with the identity gradient there)."""
    from returnn.tf.util.basic import _maximum_with_identity_grad
    with tf.name_scope("l1_normalized"):
        if not is_not_negative:
            x = tf.abs(x)
        if eps is not None:
            x = _maximum_with_identity_grad(x, eps)
        if use_logsumexp:
            total = tf.exp(tf.reduce_logsumexp(tf.math.log(x), axis=axis, keepdims=True))
        else:
            total = tf.reduce_sum(x, axis=axis, keepdims=True)
        return x * tf.math.reciprocal(total)


def lin_exp(x: tf.Tensor, use_safe_exp: bool = True) -> tf.Tensor:
    """``x + 1`` for x >= 0, else ``exp(x)``."""
    from returnn.tf.util.basic import safe_exp
    neg = safe_exp(tf.minimum(x, 0)) if use_safe_exp else tf.exp(tf.minimum(x, 0))
    return tf.where(tf.greater_equal(x, 0), x + 1, neg)


def lin_exp_normed(x: tf.Tensor, axis: int = -1, eps: float = 1e-10) -> tf.Tensor:
    return l1_normalized(lin_exp(x), axis=axis, eps=eps, is_not_negative=True)


def layer_norm(x: tf.Tensor, gain: Any, bias: Any, axis: int, epsilon: float = 1e-6) -> tf.Tensor:
    """``(x - mean) / sqrt(var + epsilon) * gain + bias`` over ``axis``."""
    with tf.name_scope("layer_norm"):
        mean, var = tf.nn.moments(x, axes=[axis], keepdims=True)
        return (x - mean) * tf.math.rsqrt(var + epsilon) * gain + bias


def pad_zeros_in_axis(x: tf.Tensor, before: Any = 0, after: Any = 0, axis: int = 0) -> tf.Tensor:
    paddings = [[0, 0] for _ in range(x.shape.ndims)]
    paddings[axis] = [before, after]
    return tf.pad(x, paddings)


def slice_pad_zeros(x: tf.Tensor, begin: Any, end: Any, axis: int = 0) -> tf.Tensor:
    """``x[begin:end]`` along ``axis``, with zeros where the range leaves ``x`` (length end - begin)."""
    with tf.name_scope("slice_pad_zeros"):
        begin, end = tf.convert_to_tensor(begin), tf.convert_to_tensor(end)
        left = tf.maximum(-tf.minimum(begin, end), 0)
        x = pad_zeros_in_axis(x, before=left, axis=axis)
        begin, end = begin + left, end + left
        right = tf.maximum(tf.maximum(begin, end) - tf.shape(x)[axis], 0)
        x = pad_zeros_in_axis(x, after=right, axis=axis)
        index = [slice(None)] * x.shape.ndims
        index[axis] = slice(begin, end)
        return x[tuple(index)]


def get_range(start: Any, stop: Any = None) -> tf.Tensor:
    """``tf.range(start)`` or ``tf.range(start, stop)``."""
    return tf.range(start) if stop is None else tf.range(start, stop)


def batch_gather(x: tf.Tensor, indices: tf.Tensor, keepdims: bool = False) -> tf.Tensor:
    """``x[b, indices[b]]`` for every batch entry b (x (B, N, ...), indices (B,))."""
    out = tf.gather(x, indices, batch_dims=1)
    return tf.expand_dims(out, 1) if keepdims else out


def softmax_cross_entropy_over_size(logits: Any, labels: Any, stable_gradient: bool = True) -> tf.Tensor:
    """RETURNN's: the cross entropy between ``labels`` (probabilities) and the softmax of ``logits``
    over their last dynamic axis (logits outside its sizes masked); both are Data with values
    (``source(i, as_data=True)``); the result has that axis removed."""
    axis = logits.get_dynamic_axes()[-1]
    seq_len = logits.get_dynamic_size(axis)
    x = logits.placeholder
    y = labels.copy_transpose([labels.get_axis_from_description(d) for d in logits.dims]).placeholder \
        if labels.dims != logits.dims else labels.placeholder
    mask = tf.sequence_mask(seq_len, maxlen=tf.shape(x)[axis])  # (B, T)
    b = logits.batch_dim_axis
    if b > axis:
        mask = tf.transpose(mask)
    for i in range(logits.batch_ndim):
        if i not in (b, axis):
            mask = tf.expand_dims(mask, i)
    mask = tf.broadcast_to(mask, tf.shape(x))
    x = tf.where(mask, x, tf.cast(float("-inf"), x.dtype))
    log_probs = tf.nn.log_softmax(x, axis=axis)
    return -tf.reduce_sum(tf.where(mask, y * log_probs, tf.zeros_like(x)), axis=axis)
