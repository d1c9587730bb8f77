"""Helpers for layer/loss tests: templates and values with a fresh (B, T, F) layout."""
from __future__ import annotations

from typing import Optional

import numpy as np
import tensorflow as tf

from returnn.tensor import Data, Dim, FeatureDim, SpatialDim, batch_dim
from returnn.tf.layers import LayerOutput


# The time axis of templates made here unless a test gives its own: several sources of one layer
# share it (two different dynamic axes are two axes, as in RETURNN).
TIME = SpatialDim("time")


def spec(dim: int, sparse: bool = False, has_time: bool = True, time: Optional[Dim] = None,
         name: str = "in") -> Data:
    """A fresh template ``(B, T, dim)`` (``(B, T)`` sparse; without T when not ``has_time``); T is
    :data:`TIME` unless ``time`` is given."""
    dims = [batch_dim]
    if has_time:
        dims.append(time or TIME)
    if sparse:
        return Data(name, dims=dims, sparse_dim=FeatureDim("classes:%s" % name, dim))
    return Data(name, dims=dims + [FeatureDim("feature:%s" % name, dim)])


def value(tensor, lens, data: Data, logits=None) -> LayerOutput:
    """``tensor`` as a value of ``data``; ``lens`` are the sizes of its time axis."""
    tensor = tf.convert_to_tensor(tensor)
    sizes = {} if lens is None else {data.time_dim: tf.constant(np.asarray(lens), tf.int32)
                                      if not isinstance(lens, tf.Tensor) else lens}
    return LayerOutput(tensor, data, sizes, logits=None if logits is None else tf.convert_to_tensor(logits))


def lo(x, lens, dim: Optional[int] = None, sparse: bool = False, has_time: bool = True) -> LayerOutput:
    """A numpy batch as a value of a fresh template."""
    dim = dim if dim is not None else x.shape[-1]
    return value(x, lens, spec(dim, sparse, has_time and lens is not None))


def rebind(x: LayerOutput, data: Data) -> LayerOutput:
    """``x`` as a value of the equally shaped template ``data`` (dynamic sizes mapped by position)."""
    old = [x.data.dims[a] for a in x.data.get_dynamic_axes()]
    new = [data.dims[a] for a in data.get_dynamic_axes()]
    assert len(old) == len(new), (x.data, data)
    return LayerOutput(x.tensor, data, {n: x.sizes[o] for o, n in zip(old, new)}, x.logits)


def sig(data: Data):
    """(dim, sparse, has_time, ndim): what the old OutputSpec compared."""
    return data.dim, data.sparse, data.have_time_axis(), data.batch_ndim


def make_layer(cls: str, opts: dict, sources, name: str = "lay", seed: int = 5):
    """A layer of class ``cls`` built on the templates ``sources``."""
    from returnn.tf.layers import get_layer_class
    return get_layer_class(cls, name, opts)(name, dict(opts), list(sources), seed=seed)


def run_layer(layer, values, train: bool = False):
    from returnn.tf.layers import RunContext
    return layer(values, RunContext(train, tf.constant([1, 2], tf.int64)))


def btf(dim: int, lens, t: Optional[int] = None, seed: int = 0, time: Optional[Dim] = None, garbage: float = 1e4):
    """A (B, T, dim) template, a value of it whose padded frames hold ``garbage``, and the clean
    numpy array."""
    time = time or SpatialDim("time")
    data = Data("in", dims=[batch_dim, time, FeatureDim("feat%i" % dim, dim)])
    lens = np.asarray(lens, np.int32)
    x = np.random.RandomState(seed).randn(len(lens), t or int(lens.max()), dim).astype(np.float32)
    dirty = x.copy()
    for b, n in enumerate(lens):
        dirty[b, n:] = garbage
    return data, LayerOutput(tf.constant(dirty), data, {time: tf.constant(lens)}), x
