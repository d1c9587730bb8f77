"""slice, pad, window, time_chunking/time_unchunking against numpy, per sequence (padded
frames hold garbage in the inputs and are checked in the outputs)."""
from functools import partial

import numpy as np
import pytest
import tensorflow as tf

from data_utils import btf as make_btf, make_layer as make, run_layer as run
from returnn.errors import NetworkError

LENS = np.array([7, 4, 1], np.int32)
btf = partial(make_btf, lens=LENS, t=7)


@pytest.mark.parametrize("start,end,step", [(0, 3, 1), (0, 5, 3), (1, 9, 2)])
def test_slice_time_with_a_non_negative_end_is_static(start, end, step):
    """RETURNN: a static axis of ceil((end - start) / step) frames of the padded tensor (golden
    fuzz_slice_end_static_on_time_broadcast); beyond the batch's longest sequence, zero frames."""
    data, val, x = btf(3)
    layer = make("slice", {"axis": "T", "slice_start": start, "slice_end": end, "slice_step": step}, [data])
    out = run(layer, [val])
    size = -(-(end - start) // step)
    assert layer.output.dims[1].dimension == size and layer.output.dims[1].derived_from is None
    ref = (x * (np.arange(x.shape[1])[None, :, None] < LENS[:, None, None]))[:, start:end:step]  # zero padding
    np.testing.assert_array_equal(out.tensor.numpy()[:, :ref.shape[1]], ref)
    assert out.tensor.shape[1] == size and not out.tensor.numpy()[:, ref.shape[1]:].any()


@pytest.mark.parametrize("start,end,step", [(1, None, 1), (2, -1, 1), (1, None, 2), (6, None, 1)])
def test_slice_time_per_sequence(start, end, step):
    data, val, x = btf(3)
    layer = make("slice", {"axis": "T", "slice_start": start, "slice_end": end, "slice_step": step}, [data])
    out = run(layer, [val])
    assert layer.output.time_dim_axis == 1 and layer.output.time_dim != data.time_dim
    for b, n in enumerate(LENS):
        ref = x[b, :n][start:end:step]
        assert out.seq_len.numpy()[b] == len(ref)
        np.testing.assert_array_equal(out.tensor.numpy()[b, :len(ref)], ref)


def test_slice_feature_static():
    data, val, x = btf(5)
    layer = make("slice", {"axis": "F", "slice_start": 1, "slice_end": 4}, [data])
    out = run(layer, [val])
    assert layer.output.dim == 3 and out.seq_len is val.seq_len
    np.testing.assert_array_equal(out.tensor.numpy()[0], x[0, :, 1:4])
    with pytest.raises(NetworkError, match="'lay'.*slice_start"):
        make("slice", {"axis": "F", "slice_start": -1}, [data])


@pytest.mark.parametrize("start,end,step", [(None, None, -1), (None, None, -2), (None, None, -3), (1, None, 2)])
def test_slice_negative_step_on_a_static_axis(start, end, step):
    """RETURNN slices x[start:end:step]; its declared size (dim arithmetic) must be the real one."""
    data, val, x = btf(5)
    layer = make("slice", {"axis": "F", "slice_start": start, "slice_end": end, "slice_step": step}, [data])
    out = run(layer, [val])
    ref = x[:, :, start:end:step]
    assert layer.output.dim == ref.shape[-1]
    for b, n in enumerate(LENS):
        np.testing.assert_array_equal(out.tensor.numpy()[b, :n], ref[b, :n])


def test_slice_sizes_returnn_declares_wrongly_are_refused():
    data, _, _ = btf(5)
    with pytest.raises(NetworkError, match=r"x\[None:-1:-1\] .* has 0 entries, RETURNN's slice declares 4"):
        make("slice", {"axis": "F", "slice_end": -1, "slice_step": -1}, [data])
    with pytest.raises(NetworkError, match=r"x\[4:None:-2\] .* has 3 entries, RETURNN's slice declares 1"):
        make("slice", {"axis": "F", "slice_start": 4, "slice_step": -2}, [data])
    with pytest.raises(NetworkError, match=r"has 5 entries, RETURNN's slice declares 7"):
        make("slice", {"axis": "F", "slice_end": 7}, [data])
    with pytest.raises(NetworkError, match="negative slice_step with slice_end 1 on the dynamic axis .* declares "
                                           "the size -2"):
        make("slice", {"axis": "T", "slice_start": 3, "slice_end": 1, "slice_step": -1}, [data])


@pytest.mark.parametrize("start,step", [(None, -1), (3, -1), (5, -2), (6, -3)])
def test_slice_negative_step_on_a_dynamic_axis_reverses_the_padded_tensor(start, step):
    """RETURNN: x[start::step] of the padded tensor, sizes by its dim math ceil((length - start) / |step|), so shorter
    sequences start with padding, read as RETURNN reads it (data's zero frames; goldens fuzz_slice_negative_step_dynamic_*; returnn_fuzz rec seed 93 #61)."""
    data, val, x = btf(3)
    out = run(make("slice", {"axis": "T", "slice_start": start, "slice_step": step}, [data]), [val])
    ref = (x * (np.arange(x.shape[1])[None, :, None] < LENS[:, None, None]))[:, start::step]  # zero padding
    lens = np.maximum(-(-(LENS - (start or 0)) // -step), 0)
    np.testing.assert_array_equal(out.seq_len.numpy(), lens)
    for b, n in enumerate(lens):
        np.testing.assert_array_equal(out.tensor.numpy()[b, :n], ref[b, :n])


@pytest.mark.parametrize("start,end,step", [(1, None, -2), (5, -1, -1)])
def test_slice_negative_step_sizes_beyond_the_reversed_frames_stop_the_step(start, end, step):
    """RETURNN's sizes may exceed the reversed slice's frames (x[1::-2] of 7 frames: 1 frame, sizes 3, 2, 0;
    x[5:-1:-1]: none, sizes 1, 0, 0): the step stops with one line, not reading beyond."""
    data, val, _ = btf(3)
    layer = make("slice", {"axis": "T", "slice_start": start, "slice_end": end, "slice_step": step}, [data])
    with pytest.raises(tf.errors.InvalidArgumentError, match="reversed slice of the padded tensor has"):
        run(layer, [val])


def test_pad_time_goes_after_each_sequence_and_feature():
    data, val, x = btf(3)
    layer = make("pad", {"axes": "T", "padding": (2, 1), "value": -1.0, "handle_dynamic_dims": True}, [data])
    out = run(layer, [val])
    np.testing.assert_array_equal(out.seq_len.numpy(), LENS + 3)
    for b, n in enumerate(LENS):
        ref = np.concatenate([-np.ones([2, 3]), x[b, :n], -np.ones([1, 3])])
        np.testing.assert_array_equal(out.tensor.numpy()[b, :n + 3], ref)
    feat = make("pad", {"axes": "F", "padding": 1}, [data], name="pf")
    assert feat.output.dim == 5
    np.testing.assert_array_equal(run(feat, [val]).tensor.numpy()[0, :7], np.pad(x[0], [(0, 0), (1, 1)]))
    with pytest.raises(NetworkError, match="'lay'.*mode 'reflect' with right padding of a dynamic axis"):
        make("pad", {"axes": "T", "padding": 1, "mode": "reflect", "handle_dynamic_dims": True}, [data])
    with pytest.raises(NetworkError, match="'lay'.*'padding'"):
        make("pad", {"axes": "T", "padding": [1, 2, 3]}, [data])
    with pytest.raises(NetworkError, match="'replication' pads one axis only"):
        make("pad", {"axes": ["T", "F"], "padding": 1, "mode": "replication"}, [data])


@pytest.mark.parametrize("mode", ["constant", "reflect", "symmetric", "replication"])
def test_pad_without_handle_dynamic_dims_pads_the_tensor_as_returnn_before_version_21(mode):
    """RETURNN's default before behavior version 21: tf.pad of the padded tensor (replication:
    its first and last frame repeated), so a shorter sequence's new frames are its padded frames."""
    data, val, x = btf(3)
    layer = make("pad", {"axes": "T", "padding": (2, 1), "value": -1.0, "mode": mode}, [data])
    out = run(layer, [val])
    np.testing.assert_array_equal(out.seq_len.numpy(), LENS + 3)
    x = val.tensor.numpy()  # padded frames as they are (garbage here)
    if mode == "replication":
        ref = np.concatenate([x[:, :1], x[:, :1], x, x[:, -1:]], axis=1)
    else:
        ref = np.pad(x, [(0, 0), (2, 1), (0, 0)], mode=mode, **({"constant_values": -1.0} if mode == "constant" else {}))
    for b, n in enumerate(LENS):
        np.testing.assert_array_equal(out.tensor.numpy()[b, :n + 3], ref[b, :n + 3])


def np_window(seq, size, left, stride, valid):
    n = len(seq)
    padded = np.concatenate([np.zeros([left, seq.shape[1]]), seq, np.zeros([size, seq.shape[1]])]) if not valid \
        else np.concatenate([seq, np.zeros([size, seq.shape[1]])])
    count = -(-n // stride) if not valid else max(n - size, -1) // stride + 1
    return np.array([padded[i * stride:i * stride + size] for i in range(count)]).reshape(count, size, seq.shape[1])


@pytest.mark.parametrize("size,left,stride,padding", [(3, None, 1, "same"), (4, None, 1, "same"), (3, 2, 1, "same"),
                                                      (2, None, 2, "same"), (3, None, 1, "valid"), (2, None, 3, "valid")])
def test_window_per_sequence_reads_padded_frames_as_returnn(size, left, stride, padding):
    data, val, x = btf(3)
    opts = {"window_size": size, "stride": stride, "padding": padding}
    if left is not None:
        opts["window_left"] = left
    layer = make("window", opts, [data])
    out = run(layer, [val])
    assert layer.output.dims[2].dimension == size and layer.output.feature_dim_axis == 3
    default_left = size - 1 - size // 2
    dirty = val.tensor.numpy()  # as RETURNN: a shorter sequence's windows read its padded frames as they are
    for b, n in enumerate(LENS):
        count = len(np_window(x[b, :n], size, default_left if left is None else left, stride, padding == "valid"))
        ref = np_window(dirty[b], size, default_left if left is None else left, stride, padding == "valid")[:count]
        assert out.seq_len.numpy()[b] == count
        np.testing.assert_allclose(out.tensor.numpy()[b, :count], ref)


@pytest.mark.parametrize("size,step", [(3, 2), (4, 4), (2, 1), (8, 3)])
def test_time_chunking_and_unchunking(size, step):
    data, val, x = btf(3)
    chunk = make("time_chunking", {"chunk_size": size, "chunk_step": step}, [data], name="chunk")
    out = run(chunk, [val])
    n = max(-(-(7 - size) // step), 0) + 1
    assert out.tensor.shape == (size, 3 * n, 3)  # time-major, as RETURNN's
    for b, length in enumerate(LENS):
        for i in range(n):
            real = x[b, :length][i * step:i * step + size]
            assert out.seq_len.numpy()[b * n + i] == len(real)
            np.testing.assert_array_equal(out.tensor.numpy()[:len(real), b * n + i], real)
    lin = make("linear", {"n_out": 2, "activation": "tanh"}, [chunk.output], name="lin")
    hidden = run(lin, [out])
    unchunk = make("time_unchunking", {"chunking_layer": "chunk"}, [lin.output, chunk.output], name="un")
    back = run(unchunk, [hidden, out])
    assert unchunk.output.time_dim == data.time_dim and back.seq_len is val.seq_len
    ref = np.tanh(x @ lin.W.numpy() + lin.bias.numpy())  # framewise: every chunk copy is equal
    assert unchunk.output.time_dim_axis == 0 and unchunk.output.batch_dim_axis == 1
    for b, length in enumerate(LENS):
        np.testing.assert_allclose(back.tensor.numpy()[:length, b], ref[b, :length], atol=1e-5)
    with pytest.raises(NetworkError, match="'un'.*chunking_layer"):
        make("time_unchunking", {}, [data], name="un")


def _tiled_window_reference(x: np.ndarray, w: int) -> np.ndarray:
    """RETURNN's windowed_nd (valid, stride 1) over axis 0 of ``x`` in numpy: tile ``w`` times, append ``w`` zero
    frames, reshape into ``w`` rows of ``n + 1`` frames, keep ``[:n - w + 1]`` (a negative count from the end)."""
    n, rest = x.shape[0], x.shape[1:]
    flat = np.concatenate([np.tile(x, (w,) + (1,) * len(rest)), np.zeros((w,) + rest, x.dtype)])
    rows = flat.reshape((w, n + 1) + rest)
    return np.moveaxis(rows, 0, 1)[:n - w + 1]


@pytest.mark.parametrize("n, w", [(1, 3), (2, 5), (3, 6), (0, 4), (4, 3), (5, 5), (2, 3)])
def test_valid_window_frames_as_returnn_on_a_batch_shorter_than_the_window(n, w):
    """A batch of fewer than w - 1 frames: RETURNN's valid window keeps 2n - w + 2 frames (returnn_fuzz mutate
    seed 250 #35: a shift_axis read one of them; no frame before)."""
    from returnn.tf.layers.window_frames import valid_frames
    x = np.arange(1, 1 + 2 * n * 3, dtype=np.float32).reshape((2, n, 3))
    ours = valid_frames(tf.constant(x), w, 1).numpy()
    ref = np.stack([_tiled_window_reference(x[b], w) for b in range(2)])
    np.testing.assert_array_equal(ours, ref)
