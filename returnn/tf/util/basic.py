"""TensorFlow helpers RETURNN configs call (old module name ``TFUtil``), with RETURNN's semantics.

These are the functions published configs use in their own code (SpecAugment-style masking in
eval layers, custom losses, vocab lookups): ``where_bc``, ``nd_indices``, ``tile_transposed``,
``get_shape``/``get_shape_dim``, ``expand_dims_unbroadcast``, ``safe_log``/``safe_exp``,
``dropout``, ``flatten_with_seq_len_mask``, ... They work eagerly and inside ``tf.function``.
"""
from __future__ import annotations

import functools
import operator
import re
from typing import List, Optional, Sequence, Union

import numpy as np
import tensorflow as tf

from returnn.tf.util.data import Data, DimensionTag  # noqa: E402,F401 (configs: from TFUtil import Data)

Dim = Union[int, tf.Tensor]  # a static or dynamic size


def tf_version_tuple() -> tuple:
    """``tf.__version__`` as ints, e.g. (2, 15, 1)."""
    return tuple(int(s) for s in re.sub(r"-rc[0-9]+|-dev[0-9]*|rc[0-9]+", "", tf.__version__).split(".")[:3])


def is_gpu_available() -> bool:
    """Whether TensorFlow sees a GPU."""
    return bool(tf.config.list_physical_devices("GPU"))


# ---- shapes
def get_shape_dim(x: tf.Tensor, axis: int, name: str = "shape_dim") -> Dim:
    """``x.shape[axis]``: the static int when known, else the dynamic scalar."""
    static = x.shape
    if static.rank is not None and static[axis] is not None:
        return int(static[axis])
    return tf.shape(x, name=name)[axis]


def get_shape(x: tf.Tensor) -> List[Dim]:
    """The shape of ``x``, each dim a static int when known, else a dynamic scalar."""
    if x.shape.rank is None:
        raise ValueError("get_shape: rank of %r is unknown" % (x,))
    dynamic = None if x.shape.is_fully_defined() else tf.shape(x)
    return [int(d) if d is not None else dynamic[i] for i, d in enumerate(x.shape.as_list())]


def get_ndim(x: tf.Tensor) -> Dim:
    """Rank of ``x``: static when known."""
    return x.shape.rank if x.shape.rank is not None else tf.rank(x)


def _runtime_equal(x: tf.Tensor, a: Dim, b: Dim, message: str) -> tf.Tensor:
    with tf.control_dependencies([tf.debugging.assert_equal(a, b, message=message)]):
        return tf.identity(x)


def check_input_dim(x: tf.Tensor, axis: int, dim: Dim) -> tf.Tensor:
    """``x``, checked that ``x.shape[axis] == dim`` (statically when possible, else at run time)."""
    static = x.shape[axis] if x.shape.rank is not None else None
    if static is not None and isinstance(dim, int):
        if static != dim:
            raise ValueError("check_input_dim: shape[%i] is %i, expected %i" % (axis, static, dim))
        return x
    return _runtime_equal(x, tf.shape(x)[axis], dim, "check_input_dim: shape[%i] != dim" % axis)


def check_dim_equal(x: tf.Tensor, x_axis: int, y: tf.Tensor, y_axis: int) -> tf.Tensor:
    """``x``, checked that ``x.shape[x_axis] == y.shape[y_axis]``."""
    a, b = get_shape_dim(x, x_axis), get_shape_dim(y, y_axis)
    if isinstance(a, int) and isinstance(b, int):
        if a != b:
            raise ValueError("check_dim_equal: %i != %i" % (a, b))
        return x
    return _runtime_equal(x, a, b, "check_dim_equal: x.shape[%i] != y.shape[%i]" % (x_axis, y_axis))


def check_shape_equal(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
    """``x``, checked that its shape equals the shape of ``y``."""
    if x.shape.rank is not None and y.shape.rank is not None:
        if x.shape.rank != y.shape.rank or not x.shape.is_compatible_with(y.shape):
            raise ValueError("check_shape_equal: %s vs %s" % (x.shape, y.shape))
        if x.shape.is_fully_defined() and y.shape.is_fully_defined():
            return x
    return _runtime_equal(x, tf.shape(x), tf.shape(y), "check_shape_equal: shapes differ")


# ---- broadcasting and indexing
def expand_multiple_dims(x: tf.Tensor, axes: Sequence[int], name: str = "expand_multiple_dims") -> tf.Tensor:
    """Inserts a size-1 axis at each of ``axes`` (in sorted order)."""
    with tf.name_scope(name):
        for axis in sorted(axes):
            x = tf.expand_dims(x, axis)
        return x


def expand_dims_unbroadcast(x, axis: int, dim: Dim, name: str = "expand_dims_unbroadcast") -> tf.Tensor:
    """New axis ``axis`` of size ``dim`` (``x`` repeated along it): (a,b) with axis=0 -> (dim,a,b)."""
    with tf.name_scope(name):
        x = tf.expand_dims(tf.convert_to_tensor(x), axis)
        if isinstance(dim, int) and dim == 1:
            return x
        ndim = x.shape.rank
        axis = axis + ndim if axis < 0 else axis
        return tf.tile(x, [dim if i == axis else 1 for i in range(ndim)])


def tile_transposed(x: tf.Tensor, axis: int, multiples: Dim) -> tf.Tensor:
    """Repeats each entry along ``axis`` ``multiples`` times in place: [a,b] -> [a,a,b,b] (where
    ``tf.tile`` gives [a,b,a,b])."""
    with tf.name_scope("tile_transposed"):
        shape = get_shape(x)
        y = expand_dims_unbroadcast(x, axis + 1, multiples)
        return tf.reshape(y, shape[:axis] + [shape[axis] * multiples] + shape[axis + 1:])


def where_bc(condition, x, y, allow_broadcast_all_sources=None, name: str = "where_bc") -> tf.Tensor:
    """``tf.where`` with broadcasting of size-1 axes (and scalars); an operand of lower rank gets
    size-1 axes appended at the end, as RETURNN's ``where_bc`` does."""
    with tf.name_scope(name):
        condition, x, y = tf.convert_to_tensor(condition), tf.convert_to_tensor(x), tf.convert_to_tensor(y)
        if x.dtype != y.dtype:  # a scalar next to a tensor takes the tensor's dtype
            if y.shape.rank == 0:
                y = tf.cast(y, x.dtype)
            elif x.shape.rank == 0:
                x = tf.cast(x, y.dtype)
        ndim = max(t.shape.rank for t in (condition, x, y))
        condition, x, y = [t if t.shape.rank in (0, ndim) else expand_multiple_dims(t, [-1] * (ndim - t.shape.rank))
                           for t in (condition, x, y)]
        return tf.where(condition, x, y)


def nd_indices(indices: tf.Tensor, batch_axis: int = 0, indices_batch_major: Optional[bool] = None) -> tf.Tensor:
    """Indices for ``tf.gather_nd``: shape ``indices.shape + [2]``, each entry (batch_idx, index)
    (or (index, batch_idx) when not ``indices_batch_major``; default: batch_axis == 0)."""
    if indices_batch_major is None:
        indices_batch_major = batch_axis == 0
    with tf.name_scope("nd_indices"):
        batch_idx = tf.cast(tf.range(tf.shape(indices)[batch_axis]), indices.dtype)
        for axis in range(indices.shape.rank):
            if axis != batch_axis:
                batch_idx = expand_dims_unbroadcast(batch_idx, axis, tf.shape(indices)[axis])
        pair = [batch_idx, indices] if indices_batch_major else [indices, batch_idx]
        return tf.stack(pair, axis=-1)


def sequence_mask(lengths: tf.Tensor, name: Optional[str] = None, **kwargs) -> tf.Tensor:
    """(batch, time) bool mask of the frames within ``lengths``."""
    return tf.sequence_mask(lengths, name=name, **kwargs)


def sequence_mask_time_major(lengths: tf.Tensor, **kwargs) -> tf.Tensor:
    """(time, batch) bool mask of the frames within ``lengths``."""
    return tf.transpose(tf.sequence_mask(lengths, **kwargs), (1, 0))


def flatten_with_seq_len_mask(x: tf.Tensor, seq_lens: tf.Tensor, batch_dim_axis: Optional[int] = None,
                              time_dim_axis: Optional[int] = None, time_major: Optional[bool] = None) -> tf.Tensor:
    """The real (non-padded) frames of ``x`` in batch-major order: shape (sum(seq_lens), ...rest)."""
    if time_major is not None:
        batch_dim_axis, time_dim_axis = (1, 0) if time_major else (0, 1)
    if batch_dim_axis is None or time_dim_axis is None or batch_dim_axis == time_dim_axis:
        raise ValueError("flatten_with_seq_len_mask: give time_major or distinct batch_dim_axis/time_dim_axis")
    with tf.name_scope("flatten_with_seq_len_mask"):
        if (batch_dim_axis, time_dim_axis) != (0, 1):
            front = [batch_dim_axis, time_dim_axis]
            x = tf.transpose(x, front + [i for i in range(x.shape.rank) if i not in front])
        mask = tf.sequence_mask(seq_lens, maxlen=tf.shape(x)[1])
        return tf.boolean_mask(x, mask)


# ---- arithmetic
def _maximum_with_identity_grad(x: tf.Tensor, floor: float) -> tf.Tensor:
    """``max(x, floor)`` exactly, whose gradient goes to ``x`` everywhere (the clipped part does
    not cut it; RETURNN's maximum_with_identity_grad). A ``x + stop_gradient(max - x)`` form
    would round to 0 for x < 0."""
    return _max_identity_grad(x, tf.cast(floor, x.dtype))


@tf.custom_gradient
def _max_identity_grad(x: tf.Tensor, floor: tf.Tensor):
    def grad(dy):
        return dy, tf.zeros_like(floor)
    return tf.maximum(x, floor), grad


def _input_of(x: tf.Tensor, op_type: str) -> Optional[tf.Tensor]:
    """The input of ``x``'s op when that op is ``op_type`` (graph mode only)."""
    if tf.executing_eagerly() or not hasattr(x, "op"):
        return None
    return x.op.inputs[0] if x.op.type == op_type else None


def safe_log(x, eps: float = 1e-20, use_fake_grad: bool = True) -> tf.Tensor:
    """``log(max(x, eps))`` without inf/nan gradients; log of a softmax / sigmoid / exp output is
    computed from its input (log_softmax etc.), as RETURNN does."""
    with tf.name_scope("safe_log"):
        x = tf.convert_to_tensor(x)
        for op_type, replacement in (("Exp", tf.identity), ("Softmax", tf.nn.log_softmax),
                                     ("Sigmoid", tf.math.log_sigmoid)):
            inner = _input_of(x, op_type)
            if inner is not None:
                return replacement(inner)
        x = _maximum_with_identity_grad(x, eps) if use_fake_grad else tf.maximum(x, eps)
        return tf.math.log(x)


def safe_exp(x, eps: float = 1e-20) -> tf.Tensor:
    """``exp(x)`` with ``x`` clipped to [log(eps), log(1/eps)] (never inf, never exactly 0), the
    gradient passing through the clipping."""
    with tf.name_scope("safe_exp"):
        x = tf.convert_to_tensor(x)
        for op_type, replacement in (("Log", tf.identity), ("LogSoftmax", tf.nn.softmax),
                                     ("LogSigmoid", tf.sigmoid)):
            inner = _input_of(x, op_type)
            if inner is not None:
                return replacement(inner)
        lo, hi = float(np.log(eps)), float(np.log(1.0 / eps))
        return tf.exp(x + tf.stop_gradient(tf.clip_by_value(x, lo, hi) - x))


def dropout(x, keep_prob, noise_shape=None, seed: Optional[int] = None, name: Optional[str] = None,
            cond_on_train: bool = False, apply_correction_factor: bool = True, grad_checkpointing: bool = False):
    """Dropout with RETURNN's argument ``keep_prob``; ``noise_shape`` entries 1 broadcast the mask
    over that axis, None means the full dim. ``cond_on_train`` is not supported here (the caller
    knows whether it trains: eval layers get ``self.network.train_flag``)."""
    if cond_on_train:
        raise NotImplementedError("TFUtil.dropout(cond_on_train=True): apply dropout only in training code")
    with tf.name_scope(name or "dropout"):
        x = tf.convert_to_tensor(x)
        if isinstance(keep_prob, (int, float)):
            if not 0 < keep_prob <= 1:
                raise ValueError("dropout: keep_prob must be in (0, 1], got %g" % keep_prob)
            if keep_prob == 1:
                return x
        if noise_shape is None:
            noise_shape = get_shape(x)
        elif isinstance(noise_shape, (list, tuple)):
            noise_shape = [d if d is not None else get_shape_dim(x, i) for i, d in enumerate(noise_shape)]
        keep = tf.floor(keep_prob + tf.random.uniform(noise_shape, seed=seed, dtype=x.dtype))  # 1 with p=keep_prob
        if apply_correction_factor:
            keep = keep / keep_prob
        return x * keep


def dot(a: tf.Tensor, b: tf.Tensor, transpose_b: bool = False) -> tf.Tensor:
    """Contracts the last axis of ``a`` with the first axis of ``b`` (last axis with ``transpose_b``)."""
    with tf.name_scope("dot"):
        if a.shape.rank == 0 or b.shape.rank == 0:
            return a * b
        axes = [[a.shape.rank - 1], [b.shape.rank - 1 if transpose_b else 0]]
        return tf.tensordot(a, b, axes=axes)


def optional_add(*args):
    """Sum of the arguments that are not None (None if all are)."""
    values = [v for v in args if v is not None]
    return functools.reduce(operator.add, values) if values else None


def optional_mul(*args):
    """Product of the arguments that are not None (None if all are)."""
    values = [v for v in args if v is not None]
    return functools.reduce(operator.mul, values) if values else None


def to_int32_64(x: tf.Tensor) -> tf.Tensor:
    """Small integer dtypes -> int32; int32/int64 unchanged."""
    return x if x.dtype in (tf.int32, tf.int64) else tf.cast(x, tf.int32)


def to_float32(x: tf.Tensor) -> tf.Tensor:
    """``x`` as float32."""
    return x if x.dtype == tf.float32 else tf.cast(x, tf.float32)


def matrix_triangular(shape, dtype=tf.float32, lower: bool = False, upper: bool = False) -> tf.Tensor:
    """Ones on and below (``lower``) or on and above (``upper``) the diagonal, zeros elsewhere."""
    if lower == upper:
        raise ValueError("matrix_triangular: give exactly one of lower, upper")
    return tf.linalg.band_part(tf.ones(shape, dtype=dtype), -1 if lower else 0, -1 if upper else 0)


def get_initializer(s, seed: Optional[int] = None, eval_local_ns=None, dtype=tf.float32):
    """RETURNN's: the initializer of an init spec as layers take it (a number, a name such as
    ``"glorot_uniform"``, ``"variance_scaling_initializer(scale=2.0)"``, a dict with ``class``; see
    :mod:`returnn.tf.layers.initializers`), as TF's ``get_variable`` calls one: ``(shape, dtype=None,
    partition_info=None)``, its draws from ``seed``. ``eval_local_ns`` adds names to RETURNN's eval of a
    string spec; here a spec naming something else than initializers and ``math`` is an error."""
    from returnn.tf.layers.initializers import get_init
    if eval_local_ns and isinstance(s, str) and any(k in s for k in eval_local_ns):
        raise ValueError("get_initializer(%r): names of eval_local_ns (%s) in an init string are not supported here"
                         % (s, ", ".join(sorted(eval_local_ns))))
    init, rng = get_init(s), np.random.RandomState(seed)

    def initializer(shape, dtype=dtype, partition_info=None, **_kwargs) -> tf.Tensor:
        shape = [int(d) for d in shape]
        return tf.constant(np.asarray(init(shape, rng), np.float32).reshape(shape), dtype=tf.as_dtype(dtype or tf.float32))

    return initializer


def get_shared_vocab(vocab_strings: Sequence[str]) -> tf.Tensor:
    """The vocabulary as a string tensor (shape (len,)), placed on the CPU."""
    with tf.device("/cpu:0"):
        return tf.constant(list(vocab_strings), dtype=tf.string)


# more of RETURNN's TFUtil functions that config code calls (eval strings, custom layers)
from returnn.tf.util.eval_helpers import (batch_gather, check_input_ndim, get_range, identity, l1_normalized,  # noqa: E402,F401
                                          layer_norm, lin_exp, lin_exp_normed, move_axis, pad_zeros_in_axis,
                                          py_print, reversed, simplify_add, simplify_sub, slice_pad_zeros,
                                          softmax_cross_entropy_over_size, swapaxes)

# RETURNN's compilers of a config's own native code and TF ops (returnn/tf/util/op_compiler.py)
from returnn.tf.util.op_compiler import NativeCodeCompiler, OpCodeCompiler  # noqa: E402,F401

# linear alignments of transducer configs (returnn/tf/util/alignment.py)
from returnn.tf.util.alignment import get_linear_alignment_out_to_in_indices, get_rnnt_linear_aligned_output  # noqa: E402,F401

# random warping of configs' data augmentation (returnn/tf/util/image_warp.py)
from returnn.tf.util.image_warp import (create_random_warp_flow_2d, dense_image_warp, gaussian_blur_2d,  # noqa: E402,F401
                                        gaussian_kernel_2d, interpolate_bilinear)
