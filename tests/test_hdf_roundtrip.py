"""dataset -> tools/hdf_dump.py -> HDFDataset is lossless; SimpleHDFWriter round trip; the written
files follow the layout of HDF_FORMAT.md when read with plain h5py (independent of our reader)."""
from __future__ import annotations

import os
import subprocess
from typing import List, Optional

import h5py
import numpy as np
import pytest

from returnn.datasets import init_dataset
from returnn.datasets.hdf import SimpleHDFWriter, dump_dataset_to_hdf
from helpers import PYTHON, REPO



def run_tool(*args: str, tool: str = "hdf_dump.py") -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, os.path.join("tools", tool)] + list(args), cwd=REPO, capture_output=True,
                          text=True, timeout=300)


def dump(spec: str, out: str, *extra: str) -> None:
    proc = run_tool(spec, out, *extra)
    assert proc.returncode == 0, proc.stderr
    assert "wrote" in proc.stdout


def assert_same(src, hdf_path: str, epoch: int = 1, start: int = 0, end: Optional[int] = None,
                check_labels: bool = True) -> None:
    """Sequences start..end of ``src`` in ``epoch`` equal the HDF file's sequences, bit for bit
    (after the reader's conversion: sparse int32, dense float32)."""
    src.init_seq_order(epoch)
    end = src.num_seqs - 1 if end is None else end
    got = init_dataset({"class": "HDFDataset", "files": [hdf_path]})
    got.init_seq_order(1)
    assert got.num_seqs == end - start + 1
    assert got.get_data_keys() == src.get_data_keys()
    assert got.num_outputs == src.num_outputs
    read_dtype = {key: "int32" if src.is_data_sparse(key) else "float32" for key in src.get_data_keys()}
    for key in src.get_data_keys():
        assert got.get_data_dtype(key) == read_dtype[key]
        assert got.is_data_sparse(key) == src.is_data_sparse(key)
        if check_labels and src.data_infos()[key].labels:
            assert got.data_infos()[key].labels == src.data_infos()[key].labels
    np.testing.assert_array_equal(got.seq_lengths_in_order(), src.seq_lengths_in_order()[start:end + 1])
    want_seqs = src.get_seqs(list(range(start, end + 1)))
    got_seqs = got.get_seqs(list(range(got.num_seqs)))
    for j, (w, g) in enumerate(zip(want_seqs, got_seqs)):
        assert got.get_tag(j) == src.get_tag(start + j)
        for key in src.get_data_keys():
            want = np.ascontiguousarray(w[key].astype(read_dtype[key]))
            assert g[key].dtype == want.dtype and g[key].shape == want.shape
            assert g[key].tobytes() == want.tobytes()
    got.close()


def check_layout(path: str, keys: List[str], dims: dict, ndims: dict, num_seqs: int) -> None:
    """Layout facts of HDF_FORMAT.md, checked with plain h5py only."""
    with h5py.File(path, "r") as f:
        lengths = f["seqLengths"]
        assert lengths.ndim == 2 and lengths.dtype == np.int32 and lengths.shape[0] == num_seqs
        targets = sorted(k for k in keys if k != "data")
        assert lengths.shape[1] == 1 + max(1, len(targets))
        assert f["seqTags"].shape == (num_seqs,)
        if "data" in keys:
            assert int(f.attrs["inputPattSize"]) == dims["data"]
            assert f["inputs"].shape[0] == int(lengths[:, 0].sum())
            assert f["inputs"].ndim == ndims["data"]
        for col, key in enumerate(targets, start=1):
            assert "labels" in f["targets"]  # the group must exist whenever /targets exists
            size = np.asarray(f["targets/size"].attrs[key])
            assert size.tolist() == [dims[key], ndims[key]]
            ds = f["targets/data"][key]
            assert ds.shape[0] == int(lengths[:, col].sum())
            assert ds.ndim == ndims[key]
            assert key in f["targets/labels"]


def test_dense_dummy_roundtrip(tmp_path):
    spec = "{'class': 'RandomDataset', 'input_dim': 7, 'output_dim': 5, 'num_seqs': 40, 'seq_len': (3, 12)}"
    out = str(tmp_path / "dense.hdf")
    dump(spec, out)
    src = init_dataset(spec)
    assert_same(src, out)
    check_layout(out, ["data", "classes"], {"data": 7, "classes": 5}, {"data": 2, "classes": 1}, 40)
    with h5py.File(out, "r") as f:
        labels = [x.decode() for x in f["targets/labels/classes"][...]]
        assert labels == ["classes-class-%i" % i for i in range(5)]
        assert f["inputs"].dtype == np.float32
    assert not [n for n in os.listdir(tmp_path) if n != "dense.hdf"]  # no temporary files left


def test_12ax_roundtrip(tmp_path):
    """RETURNN's 12AX: dense one-hot inputs, sparse classes, label names of both."""
    spec = "{'class': 'Task12AXDataset', 'num_seqs': 30}"
    out = str(tmp_path / "12ax.hdf")
    dump(spec, out)
    assert_same(init_dataset(spec), out)
    check_layout(out, ["data", "classes"], {"data": 9, "classes": 2}, {"data": 2, "classes": 1}, 30)
    with h5py.File(out, "r") as f:
        assert f["inputs"].ndim == 2 and f["inputs"].dtype == np.float32
        assert [x.decode() for x in f["targets/labels/classes"][...]] == ["L", "R"]
        assert [x.decode() for x in f["labels"][...]] == list("123ABCXYZ")


STATIC_CONFIG = '''
import numpy as np
from returnn.datasets.base import register_dataset
from returnn.datasets.generating import StaticDataset

@register_dataset
class LabeledStaticDataset(StaticDataset):
    """StaticDataset with label names for 'classes'."""
    def __init__(self, class_labels=None, **kwargs):
        super().__init__(**kwargs)
        self._infos["classes"].labels = class_labels

_rng = np.random.RandomState(42)
_seqs = []
for _i, _t in enumerate([5, 1, 7, 3, 4, 9]):
    _seqs.append({"data": _rng.randn(_t, 3),  # float64 stays float64 in the file
                  "classes": _rng.randint(0, 4, size=(_t // 2 + 1,)).astype("int32"),
                  "orth": _rng.randint(0, 6, size=((_i * 3) % 5,)).astype("int32"),
                  "align": _rng.randn(_t + 2, 2).astype("float16")})
cache_size = "0"
train = {"class": "LabeledStaticDataset", "data": _seqs, "output_dim": {"classes": 4, "orth": 6},
         "class_labels": ["ä", "ß", "日本", "x y"],
         "tags": ["utt/ä/%i" % _i for _i in range(3)] + ["日本語-%i" % _i for _i in range(3)]}
'''


def load_static(config_path: str):
    from returnn.datasets.from_cli import dataset_from_cli_arg
    return dataset_from_cli_arg(config_path)[0]


def test_static_multi_key_unicode_roundtrip_from_config(tmp_path):
    config = tmp_path / "static.config"
    config.write_text(STATIC_CONFIG)
    out = str(tmp_path / "static.hdf")
    dump(str(config), out)
    src = load_static(str(config))
    assert src.get_data_keys() == ["data", "align", "classes", "orth"]
    src.init_seq_order(1)
    lengths = src.seq_lengths_in_order()
    assert np.any(lengths[:, 0] != lengths[:, 2]) and np.any(lengths[:, 3] == 0)  # unequal per-key lengths
    assert_same(src, out)
    got = init_dataset(out)
    assert got.data_infos()["classes"].labels == ["ä", "ß", "日本", "x y"]
    assert got.get_data_dtype("data") == "float32" and got.get_data_dtype("align") == "float32"  # converted on read
    check_layout(out, src.get_data_keys(), {"data": 3, "align": 2, "classes": 4, "orth": 6},
                 {"data": 2, "align": 2, "classes": 1, "orth": 1}, 6)
    with h5py.File(out, "r") as f:  # columns: inputs, then target keys sorted
        assert f["inputs"].dtype == np.float64 and f["targets/data/align"].dtype == np.float16  # written as given
        np.testing.assert_array_equal(f["seqLengths"][...], lengths[:, [0, 1, 2, 3]])


def test_start_end_seq_and_epoch_order(tmp_path):
    spec = ("{'class': 'RandomDataset', 'input_dim': 3, 'output_dim': 4, 'num_seqs': 30, 'seq_len': (1, 9),"
            " 'seq_ordering': 'random'}")
    out = str(tmp_path / "part.hdf")
    dump(spec, out, "--start_seq", "5", "--end_seq", "12", "--epoch", "3")
    assert_same(init_dataset(spec), out, epoch=3, start=5, end=12)


def test_dump_from_hdf_files(tmp_path):
    spec = "{'class': 'Task12AXDataset', 'num_seqs': 12}"
    a, b = str(tmp_path / "a.hdf"), str(tmp_path / "b.hdf")
    src = init_dataset(spec)
    dump_dataset_to_hdf(src, a, end_seq=5)
    dump_dataset_to_hdf(src, b, start_seq=6)
    out = str(tmp_path / "joined.hdf")
    dump(a + "," + b, out)
    assert_same(src, out)


def test_tool_errors_are_one_line_exit_2(tmp_path):
    proc = run_tool(str(tmp_path / "nothere.hdf"), str(tmp_path / "out.hdf"))
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "nothere.hdf" in lines[0]
    assert not os.path.exists(tmp_path / "out.hdf")


def test_dump_dataset_tool(tmp_path):
    out = str(tmp_path / "12ax.hdf")
    dump_dataset_to_hdf(init_dataset("{'class': 'Task12AXDataset', 'num_seqs': 5}"), out)
    proc = run_tool(out, "--stats", tool="dump-dataset.py")
    assert proc.returncode == 0, proc.stderr
    assert "classes: 5 seqs" in proc.stdout and "sparse, dim 2" in proc.stdout
    proc = run_tool(out, "--endseq", "1", tool="dump-dataset.py")
    assert proc.returncode == 0 and "seq 1/5 tag='seq-1'" in proc.stdout and "seq 2/5" not in proc.stdout


def test_simple_writer_dense_with_extra(tmp_path):
    path = str(tmp_path / "simple.hdf")
    rng = np.random.RandomState(3)
    writer = SimpleHDFWriter(path, dim=4, extra_type={"classes": (6, 1, "int32"), "align": (2, 2, "float32")})
    batches = []
    for b in range(3):
        lens = rng.randint(1, 8, size=(3,))
        cls_lens = (lens + 1) // 2
        inputs = rng.randn(3, lens.max(), 4).astype(np.float32)
        classes = rng.randint(0, 6, size=(3, cls_lens.max())).astype(np.int32)
        align = rng.randn(3, lens.max(), 2).astype(np.float32)
        tags = ["b%i/s%i-ü" % (b, i) for i in range(3)]
        writer.insert_batch(inputs, {0: lens, "classes": cls_lens}, tags, extra={"classes": classes, "align": align})
        batches.append((inputs, lens, classes, cls_lens, align, tags))
        assert not os.path.exists(path)  # nothing under the final name before close()
    writer.close()
    assert os.path.exists(path) and os.listdir(tmp_path) == ["simple.hdf"]
    ds = init_dataset(path)
    ds.init_seq_order(1)
    assert ds.num_outputs == {"data": [4, 2], "align": [2, 2], "classes": [6, 1]}
    i = 0
    for inputs, lens, classes, cls_lens, align, tags in batches:
        for b in range(3):
            seq = ds.get_seqs([i])[0]
            np.testing.assert_array_equal(seq["data"], inputs[b, :lens[b]])
            np.testing.assert_array_equal(seq["classes"], classes[b, :cls_lens[b]])
            np.testing.assert_array_equal(seq["align"], align[b, :lens[b]])
            assert ds.get_tag(i) == tags[b]
            i += 1
    assert ds.num_seqs == i
    check_layout(path, ["data", "align", "classes"], {"data": 4, "align": 2, "classes": 6},
                 {"data": 2, "align": 2, "classes": 1}, 9)


def test_simple_writer_sparse_without_extra(tmp_path):
    path = str(tmp_path / "sparse.hdf")
    writer = SimpleHDFWriter(path, dim=10, ndim=1, labels=["c%i" % i for i in range(10)])
    writer.insert_batch(np.array([[1, 2, 3], [4, 5, 0]], dtype=np.int32), [3, 2], ["x", "y"])
    writer.insert_batch(np.array([[9]], dtype=np.int32), [1], [b"z"])
    assert not os.path.exists(path)
    writer.close()
    with h5py.File(path, "r") as f:  # plain h5py: inputs-only file has the 2 seqLengths columns
        assert f["seqLengths"].shape == (3, 2) and f["seqLengths"].dtype == np.int32
        assert int(f.attrs["inputPattSize"]) == 10 and "targets" not in f
        assert f["inputs"].shape == (6,) and f["inputs"].dtype == np.int32
    ds = init_dataset(path)
    ds.init_seq_order(1)
    assert ds.num_outputs == {"data": [10, 1]}
    assert ds.data_infos()["data"].labels == ["c%i" % i for i in range(10)]
    seqs = ds.get_seqs([0, 1, 2])
    np.testing.assert_array_equal(seqs[1]["data"], [4, 5])
    np.testing.assert_array_equal(seqs[2]["data"], [9])
    assert [ds.get_tag(i) for i in range(3)] == ["x", "y", "z"]


def test_simple_writer_abort_leaves_nothing(tmp_path):
    path = str(tmp_path / "aborted.hdf")
    with pytest.raises(RuntimeError):
        with SimpleHDFWriter(path, dim=2) as writer:
            writer.insert_batch(np.zeros((1, 2, 2), np.float32), [2], ["a"])
            raise RuntimeError("crash")
    assert os.listdir(tmp_path) == []


def test_tool_unwritable_output_exit_2(tmp_path):
    out = str(tmp_path / "no" / "such" / "dir" / "out.hdf")
    proc = run_tool("{'class': 'Task12AXDataset', 'num_seqs': 3}", out)
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and "seqs/s" not in ln]
    assert len(lines) == 1 and "out.hdf" in lines[0]


def test_progress_printer_plain_and_terminal():
    import io
    from returnn.datasets.from_cli import ProgressPrinter
    buf = io.StringIO()
    printer = ProgressPrinter("hdf_dump", stream=buf, interval=0.0, is_tty=False)
    printer(5, 10)
    printer(10, 10)
    lines = buf.getvalue().splitlines()
    assert len(lines) == 2 and "5/10 seqs" in lines[0] and "seqs/s" in lines[0] and "ETA" in lines[0]
    buf = io.StringIO()
    printer = ProgressPrinter("hdf_dump", stream=buf, is_tty=True)
    printer(3, 10)
    printer.finish()
    text = buf.getvalue()
    assert text.startswith("\rhdf_dump [#########") and "3/10 seqs" in text and text.endswith("\n")


def test_progress_bar_and_time_left_are_one_formula():
    from returnn.util.progress import bar, remaining_seconds
    assert bar(0.5, 10) == "[#####.....]" and bar(1.5, 4) == "[####]" and bar(-1, 2) == "[..]"
    assert remaining_seconds(30.0, 0.25) == 90.0 and remaining_seconds(5.0, 0.0) == 0.0
