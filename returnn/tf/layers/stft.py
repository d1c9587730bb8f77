"""Short-time Fourier transforms and fixed spectral maps: RETURNN's ``stft``, ``istft``,
``multichannel_stft_layer``, ``multichannel_multiresolution_stft_layer``, ``mel_filterbank``, ``dct``.

``stft``: real samples ``(B, T[, 1])`` (``in_spatial_dims`` picks the sample axis; other axes are
carried along as more batch axes) -> ``(B, T', fft_size // 2 + 1)`` complex64 with
``tf.signal.stft`` (periodic Hann window, no end padding): ``T' = (T - frame_size) // frame_shift + 1``
per sequence (RETURNN's valid convolution). ``istft``: the inverse (``tf.signal.inverse_stft`` with
``inverse_stft_window_fn(frame_shift)``), ``(B, T', F)`` -> ``(B, (T' - 1) * frame_shift + frame_size, 1)``.
As RETURNN's: without ``use_time_mask`` the transforms run on the padded input as it is (frames past
a sequence's end hold the transform of whatever padding is there, and an ``istft`` overlaps them into
the last real samples); ``use_time_mask`` zeroes padded input positions first.

``multichannel_stft_layer`` / ``multichannel_multiresolution_stft_layer``: per channel of
``(B, T, C)`` samples an STFT with ``window`` (``hanning``: periodic Hann, ``blackman``: the
symmetric Blackman window, ``None``/``ones``), ``pad_last_frame`` (TensorFlow's ``pad_end``), the
features ``[res_0-ch_0, ..., res_0-ch_C, res_1-ch_0, ...]``; resolutions other than the first are
padded at the end with 1e-7 (by ``frame_size - frame_sizes[0]`` samples) or cut to its frame count.
Frames: ``(T - frame_sizes[0]) // frame_shift + 1`` (``pad_last_frame``: ``(T - frame_sizes[0] - 1)
// frame_shift + 2``) per sequence, as RETURNN.

``mel_filterbank``: ``(B, T, fft_size // 2 + 1)`` times RETURNN's triangular Mel matrix (Huang & Acero
eq. 6.141) -> ``(B, T, nr_of_filters)``. ``dct``: ``tf.signal.dct`` over the feature axis.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim, DimTypes
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.helpers import concat_inputs, concat_output, check_dense
from returnn.tf.layers.options import Option, one_of, positive_int

def _stft(signal: tf.Tensor, size: int, shift: int, fft: int, pad_end: bool = False, **kwargs) -> tf.Tensor:
    """``tf.signal.stft`` over the last axis of ``signal`` (N, ..., T); an input without any frame (T = 0
    when every sequence of the batch is empty, or shorter than a frame) gives (..., 0, bins) instead of
    TensorFlow's error about its FFT input."""
    n_frames = _frames(tf.shape(signal)[-1], size, shift, pad_end)
    empty = tf.concat([tf.shape(signal)[:-1], [0, fft // 2 + 1]], 0)
    return tf.cond(tf.logical_and(n_frames > 0, tf.size(signal) > 0),
                   lambda: tf.signal.stft(signal, frame_length=size, frame_step=shift, fft_length=fft,
                                          pad_end=pad_end, **kwargs),
                   lambda: tf.zeros(empty, tf.complex64))


def _frames(n: Any, size: int, shift: int, pad_end: bool = False) -> Any:
    """Frame count of ``n`` samples (int or int tensor)."""
    if pad_end:
        return (n - size - 1) // shift + 2
    if isinstance(n, int):
        return max(n - size, -shift) // shift + 1
    return tf.maximum(n - size, -shift) // shift + 1


class _SampleAxisLayer(Layer):
    """stft / istft: one spatial axis transformed, other non-feature axes kept as batch-like axes."""

    options = (
        Option("frame_shift", None, "frame shift in samples"),
        Option("frame_size", None, "frame size in samples"),
        Option("fft_size", None, "FFT size (default: frame_size)"),
        Option("in_spatial_dims", None, "[the axis to transform] (default: the time axis)"),
        Option("out_spatial_dims", None, "[Dim of the new axis]"),
        Option("use_time_mask", False, "padded input positions set to 0 first"),
    )

    def _setup(self, name: str, sources: Sequence[Data]) -> Data:
        check_dense(self, sources)
        self.in_data, self.plan = concat_output(self, sources)
        data = self.in_data
        self.shift = positive_int(self.desc, "frame_shift", self.opt("frame_shift"))
        self.size = positive_int(self.desc, "frame_size", self.opt("frame_size"))
        self.fft = positive_int(self.desc, "fft_size", self.opt("fft_size") or self.size)
        spatial = self.opt("in_spatial_dims")
        if spatial is not None:
            if not isinstance(spatial, (list, tuple)) or len(spatial) != 1:
                raise NetworkError("%s: 'in_spatial_dims' must list one axis, got %r" % (self.desc, spatial))
            self.ax = self.axis(data, spatial[0], "in_spatial_dims")
        elif data.time_dim_axis is not None:
            self.ax = data.time_dim_axis
        else:
            raise NetworkError("%s: the input %s has no time axis" % (self.desc, data.short_repr()))
        if data.batch_dim_axis is None:
            raise NetworkError("%s: the input needs a batch axis, got %s" % (self.desc, data.short_repr()))
        out_spatial = self.opt("out_spatial_dims")
        if out_spatial is not None and (not isinstance(out_spatial, (list, tuple)) or len(out_spatial) != 1
                                        or not isinstance(out_spatial[0], Dim)):
            raise NetworkError("%s: 'out_spatial_dims' must be [Dim], got %r" % (self.desc, out_spatial))
        return data

    def _new_axis(self, in_dim: Dim, length) -> Dim:
        """The output dim of the transformed axis (static when the input's is)."""
        given = self.opt("out_spatial_dims")
        if given is not None:
            return given[0]
        if in_dim.is_static():
            return Dim(length(in_dim.dimension), kind=DimTypes.Spatial, description="%s:frames" % self.layer_name)
        return Dim(None, kind=DimTypes.Spatial, description="%s:frames" % self.layer_name, derived_from=in_dim)


@register_layer
class StftLayer(_SampleAxisLayer):
    """See the module docstring."""

    layer_class = "stft"
    options = (Option("out_dim", None, "Dim of the frequency axis (fft_size // 2 + 1)"),)

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        data = self._setup(name, sources)
        feat = data.feature_dim_axis
        if feat is not None and feat != self.ax and data.dims[feat].dimension != 1:
            raise NetworkError("%s: only one channel (feature dim 1) is supported, got %s" % (self.desc, data.short_repr()))
        self.feat = feat if feat != self.ax else None
        self.others = [a for a in range(data.batch_ndim) if a not in (self.ax, self.feat)]
        in_dim = data.dims[self.ax]
        self.t_dim = self._new_axis(in_dim, lambda n: _frames(n, self.size, self.shift))
        n_bins = self.fft // 2 + 1
        out_dim = self.opt("out_dim") or Dim(n_bins, kind=DimTypes.Feature, description="%s:stft" % name)
        if out_dim.dimension != n_bins:
            raise NetworkError("%s: out_dim %r must have size fft_size // 2 + 1 = %i" % (self.desc, out_dim, n_bins))
        dims = [data.dims[a] for a in self.others] + [self.t_dim, out_dim]
        self.output = Data(name, dims=dims, dtype="complex64", time_dim_axis=len(self.others),
                           feature_dim_axis=len(dims) - 1)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = concat_inputs(self, self.in_data, self.plan, sources, ctx)
        value = x.masked(0.0) if self.opt("use_time_mask") else x.tensor
        value = tf.transpose(value, self.others + [self.ax] + ([self.feat] if self.feat is not None else []))
        if self.feat is not None:
            value = value[..., 0]
        shape = tf.shape(value)
        flat = tf.reshape(value, [-1, shape[-1]])
        y = _stft(tf.cast(flat, tf.float32), self.size, self.shift, self.fft)
        y = tf.reshape(y, tf.concat([shape[:-1], tf.shape(y)[1:]], 0))
        sizes = {}
        in_dim = self.in_data.dims[self.ax]
        if self.t_dim.is_dynamic():
            sizes[self.t_dim] = _frames(x.sizes[in_dim], self.size, self.shift)
        return self.make_output(y, [x], sizes)


@register_layer
class IstftLayer(_SampleAxisLayer):
    """See the module docstring."""

    layer_class = "istft"
    options = (Option("out_dim", None, "Dim of the (size 1) output feature axis"),)

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        data = self._setup(name, sources)
        if data.feature_dim_axis is None or data.dim != self.fft // 2 + 1 or data.feature_dim_axis == self.ax:
            raise NetworkError("%s: the input must have fft_size // 2 + 1 = %i frequency bins as feature axis, got %s"
                               % (self.desc, self.fft // 2 + 1, data.short_repr()))
        self.others = [a for a in range(data.batch_ndim) if a not in (self.ax, data.feature_dim_axis)]
        in_dim = data.dims[self.ax]
        self.t_dim = self._new_axis(in_dim, lambda n: max(n - 1, 0) * self.shift + self.size)
        out_dim = self.opt("out_dim") or Dim(1, kind=DimTypes.Feature, description="%s:istft" % name)
        if out_dim.dimension != 1:
            raise NetworkError("%s: out_dim %r must have size 1" % (self.desc, out_dim))
        dims = [data.dims[a] for a in self.others] + [self.t_dim, out_dim]
        self.output = Data(name, dims=dims, dtype="float32", time_dim_axis=len(self.others),
                           feature_dim_axis=len(dims) - 1)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = concat_inputs(self, self.in_data, self.plan, sources, ctx)
        value = x.masked(0) if self.opt("use_time_mask") else x.tensor
        value = tf.transpose(value, self.others + [self.ax, self.in_data.feature_dim_axis])
        shape = tf.shape(value)
        flat = tf.reshape(value, tf.concat([[-1], shape[-2:]], 0))
        y = tf.signal.inverse_stft(tf.cast(flat, tf.complex64), frame_length=self.size, frame_step=self.shift,
                                   fft_length=self.fft, window_fn=tf.signal.inverse_stft_window_fn(self.shift))
        y = tf.reshape(y, tf.concat([shape[:-2], tf.shape(y)[1:], [1]], 0))
        sizes = {}
        if self.t_dim.is_dynamic():
            n = x.sizes[self.in_data.dims[self.ax]]
            sizes[self.t_dim] = n * self.shift + max(self.size - self.shift, 0)  # RETURNN's (transposed conv)
        return self.make_output(y, [x], sizes)


def _window(kind: Any, size: int) -> Optional[np.ndarray]:
    """The analysis window (None: TensorFlow's periodic Hann window)."""
    if kind == "hanning":
        return None
    if kind == "blackman":
        return np.blackman(size).astype(np.float32)  # = scipy.signal.windows.blackman (symmetric)
    return np.ones([size], np.float32)  # "None" / "ones"


@register_layer
class MultiChannelMultiResolutionStftLayer(Layer):
    """See the module docstring."""

    layer_class = "multichannel_multiresolution_stft_layer"
    options = (
        Option("frame_shift", None, "frame shift in samples (all resolutions)"),
        Option("frame_sizes", None, "frame size per resolution (the first is the reference for the frame count)"),
        Option("fft_sizes", None, "FFT size per resolution"),
        Option("window", "hanning", "'hanning', 'blackman', 'None' or 'ones'"),
        Option("use_rfft", True, "True: real input, fft_size // 2 + 1 bins (False: not supported by RETURNN's "
                                 "layer either: it outputs nothing then)", only=(True,)),
        Option("nr_of_channels", 1, "channels of the input (its feature axis)"),
        Option("pad_last_frame", False, "pad the last frame with zeros (TensorFlow's pad_end) instead of dropping it"),
    )

    def _resolutions(self) -> List[tuple]:
        return list(zip(self.opt("fft_sizes"), self.opt("frame_sizes")))

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_dense(self, sources)
        self.in_data, self.plan = concat_output(self, sources)
        data = self.in_data
        self.shift = positive_int(self.desc, "frame_shift", self.opt("frame_shift"))
        res = self._resolutions()
        if not res or not all(isinstance(v, int) and v > 0 for r in res for v in r):
            raise NetworkError("%s: frame and FFT sizes must be positive ints, got %r" % (self.desc, res))
        one_of(self.desc, "window", self.opt("window"), ("hanning", "blackman", "None", "ones"))
        self.channels = positive_int(self.desc, "nr_of_channels", self.opt("nr_of_channels"))
        if data.batch_ndim != 3 or data.time_dim_axis is None or data.dim != self.channels:
            raise NetworkError("%s: the input must be (batch, time, nr_of_channels=%i) samples, got %s"
                               % (self.desc, self.channels, data.short_repr()))
        n_out = sum((fft // 2 + 1) * self.channels for fft, _ in res)
        self.check_n_out(n_out)
        self.t_dim = Dim(None, kind=DimTypes.Spatial, description="%s:frames" % name, derived_from=data.time_dim)
        feat = self.out_feature_dim() if self.opts.get("out_dim") is not None else \
            Dim(n_out, kind=DimTypes.Feature, description="%s:stft" % name)
        self.output = Data(name, dims=[data.dims[data.batch_dim_axis], self.t_dim, feat], dtype="complex64",
                           time_dim_axis=1, feature_dim_axis=2)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = concat_inputs(self, self.in_data, self.plan, sources, ctx).copy_as_batch_time_feature()
        signal = tf.cast(x.masked(0.0), tf.float32)
        pad_end = bool(self.opt("pad_last_frame"))
        res = self._resolutions()
        ref = res[0][1]
        parts = []
        for fft, size in res:
            sig = signal
            if size > ref:
                extra = tf.ones([tf.shape(sig)[0], size - ref, tf.shape(sig)[2]]) * 1e-7
                sig = tf.concat([sig, extra], axis=1)
            window = _window(self.opt("window"), size)
            fn = None if window is None else (lambda n, dtype, w=window: tf.constant(w, dtype))
            y = _stft(tf.transpose(sig, [0, 2, 1]), size, self.shift, fft, pad_end,
                      **({} if fn is None else {"window_fn": fn}))
            y = tf.transpose(y, [0, 2, 1, 3])  # (B, T', C, F)
            y = tf.reshape(y, [tf.shape(y)[0], tf.shape(y)[1], self.channels * (fft // 2 + 1)])
            if parts:
                y = y[:, :tf.shape(parts[0])[1]]
            parts.append(y)
        sizes = {self.t_dim: _frames(x.seq_len, ref, self.shift, pad_end)}
        out = self.make_output(tf.concat(parts, axis=2), [x], sizes)
        return out.with_tensor(out.masked(0))


@register_layer
class MultiChannelStftLayer(MultiChannelMultiResolutionStftLayer):
    """One resolution of :class:`MultiChannelMultiResolutionStftLayer` (``frame_size``, ``fft_size``)."""

    layer_class = "multichannel_stft_layer"
    options = (
        Option("frame_size", None, "frame size in samples"),
        Option("fft_size", None, "FFT size"),
        Option("frame_sizes", None, "set by frame_size here", only=(None,)),
        Option("fft_sizes", None, "set by fft_size here", only=(None,)),
    )

    def _resolutions(self) -> List[tuple]:
        return [(self.opt("fft_size"), self.opt("frame_size"))]


def mel_matrix(f_min: float, f_max: float, sampling_rate: float, fft_size: int, n_filters: int) -> np.ndarray:
    """RETURNN's Mel filter matrix ``(fft_size // 2 + 1, n_filters)``."""
    def mel(f):
        return 1125.0 * np.log(1 + float(f) / 700)

    def inv_mel(m):
        return 700.0 * (np.exp(float(m) / 1125) - 1)

    centres = np.array([(float(fft_size) / sampling_rate) * inv_mel(mel(f_min) + i * ((mel(f_max) - mel(f_min))
                                                                                      / (n_filters + 1)))
                        for i in range(n_filters + 2)], np.float32)
    out = np.zeros([fft_size // 2 + 1, n_filters])
    for i in range(out.shape[0]):
        for j in range(1, n_filters + 1):
            if centres[j - 1] < i < centres[j + 1]:
                if i < centres[j]:
                    out[i, j - 1] = (i - centres[j - 1]) / (centres[j] - centres[j - 1])
                else:
                    out[i, j - 1] = (centres[j + 1] - i) / (centres[j + 1] - centres[j])
    return out.astype(np.float32)


@register_layer
class MelFilterbankLayer(Layer):
    """See the module docstring."""

    layer_class = "mel_filterbank"
    options = (
        Option("sampling_rate", 16000, "sampling rate of the signal"),
        Option("fft_size", 1024, "FFT size of the spectrum (its input has fft_size // 2 + 1 bins)"),
        Option("nr_of_filters", 80, "Mel filters (output features)"),
        Option("f_min", None, "lowest frequency (default 0)"),
        Option("f_max", None, "highest frequency (default sampling_rate / 2)"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_dense(self, sources)
        self.in_data, self.plan = concat_output(self, sources)
        n = positive_int(self.desc, "nr_of_filters", self.opt("nr_of_filters"))
        self.check_n_out(n)
        fft = positive_int(self.desc, "fft_size", self.opt("fft_size"))
        if self.in_data.dim != fft // 2 + 1:
            raise NetworkError("%s: the input must have fft_size // 2 + 1 = %i features, got %s"
                               % (self.desc, fft // 2 + 1, self.in_data.short_repr()))
        rate = float(self.opt("sampling_rate"))
        self.matrix = mel_matrix(self.opt("f_min") or 0, self.opt("f_max") or rate / 2.0, rate, fft, n)
        feat = Dim(n, kind=DimTypes.Feature, description="%s:mel" % name)
        data = self.in_data
        dims = [d for i, d in enumerate(data.dims) if i != data.feature_dim_axis] + [feat]
        self.output = Data(name, dims=dims, feature_dim_axis=len(dims) - 1)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = concat_inputs(self, self.in_data, self.plan, sources, ctx)
        ax = self.in_data.feature_dim_axis
        value = tf.transpose(x.tensor, [a for a in range(self.in_data.batch_ndim) if a != ax] + [ax])
        y = tf.tensordot(value, tf.constant(self.matrix, value.dtype), [[len(value.shape) - 1], [0]])
        return self.make_output(y, [x])


@register_layer
class DctLayer(Layer):
    """See the module docstring."""

    layer_class = "dct"
    options = (
        Option("type", 2, "DCT type 1, 2, 3 or 4"),
        Option("n", None, "transform length (only None, as RETURNN)", only=(None,)),
        Option("norm", None, "None or 'ortho'"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_dense(self, sources)
        self.in_data, self.plan = concat_output(self, sources)
        one_of(self.desc, "type", self.opt("type"), (1, 2, 3, 4))
        one_of(self.desc, "norm", self.opt("norm"), (None, "ortho"))
        if self.in_data.feature_dim_axis is None:
            raise NetworkError("%s: the input needs a feature axis, got %s" % (self.desc, self.in_data.short_repr()))
        dynamic = [i for i, d in enumerate(self.in_data.dims) if d.is_dynamic()]
        if dynamic != [self.in_data.time_dim_axis]:  # RETURNN asserts its sizes are the time axis' only
            raise NetworkError("%s: the input's only dynamic axis must be its time axis (RETURNN asserts it), got %s"
                               % (self.desc, self.in_data.short_repr()))
        self.output = self.in_data.copy(name)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = concat_inputs(self, self.in_data, self.plan, sources, ctx)
        ax, n = self.in_data.feature_dim_axis, self.in_data.batch_ndim
        perm = [a for a in range(n) if a != ax] + [ax]
        xt = tf.transpose(x.tensor, perm)
        y = tf.cond(tf.size(xt) > 0, lambda: tf.signal.dct(xt, type=self.opt("type"), norm=self.opt("norm")),
                    lambda: tf.zeros_like(xt))  # TF's FFT fails on an empty batch (all sequences empty)
        return self.make_output(tf.transpose(y, np.argsort(perm).tolist()), [x])
