"""HDF inputs of other dtypes are converted on read; bad HDF files and bad dataset options are one
line naming the file / key (exit code 2 from ``rnn.py``)."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import textwrap
import threading
from pathlib import Path
from typing import Any, Dict, Optional

import h5py
import numpy as np
import pytest

from helpers import PYTHON, REPO, describe, nonempty_lines, run_rnn, train_args, write_config
from returnn.datasets import init_dataset
from returnn.datasets.hdf_check import check_hdf_file
from returnn.errors import DataError

LENS = [3, 5, 2, 4]


def write_file(path: Path, inputs: np.ndarray, classes: np.ndarray, classes_dim: int = 3,
               input_dim: Optional[int] = None) -> str:
    """RETURNN layout: ``inputs``, ``targets/data/classes`` (both with LENS frames per sequence)."""
    with h5py.File(path, "w") as f:
        f.create_dataset("seqLengths", data=np.array([[n, n] for n in LENS], dtype=np.int32))
        f.create_dataset("seqTags", data=np.array([b"utt-%i" % i for i in range(len(LENS))]))
        f.create_dataset("inputs", data=inputs)
        if input_dim is not None:
            f.attrs["inputPattSize"] = input_dim
        f.create_dataset("targets/data/classes", data=classes)
        f.create_group("targets/size").attrs["classes"] = np.array([classes_dim, 1])
        f.create_group("targets/labels")
    return str(path)


def read_all(path: str, **opts: Any):
    ds = init_dataset(dict({"class": "HDFDataset", "files": [path]}, **opts))
    ds.init_seq_order(1)
    return ds, ds.get_seqs(list(range(ds.num_seqs)))


TOTAL = sum(LENS)
RNG = np.random.RandomState(3)
FEATS = RNG.randn(TOTAL, 4)
CLASSES = RNG.randint(0, 3, size=TOTAL)


@pytest.mark.parametrize("cache_size", ["0", "-1", "1M"])
@pytest.mark.parametrize("in_dtype,cls_dtype", [("float64", "int64"), ("float16", "uint8"), ("int64", "int16"),
                                                ("int32", "bool")])
def test_any_int_is_sparse_int32_any_float_dense_float32(tmp_path, in_dtype, cls_dtype, cache_size):
    feats = (FEATS * 3).astype(in_dtype)
    classes = (CLASSES > 0) if cls_dtype == "bool" else CLASSES.astype(cls_dtype)
    path = write_file(tmp_path / "x.hdf", feats, classes)
    ds, seqs = read_all(path, cache_size=cache_size)
    assert ds.get_data_dtype("data") == "float32" and not ds.is_data_sparse("data")
    assert ds.get_data_dtype("classes") == "int32" and ds.is_data_sparse("classes")
    assert ds.num_outputs == {"data": [4, 2], "classes": [3, 1]}
    offsets = np.cumsum([0] + LENS)
    for i, seq in enumerate(seqs):
        assert seq["data"].dtype == np.float32 and seq["classes"].dtype == np.int32
        np.testing.assert_array_equal(seq["data"], feats[offsets[i]:offsets[i + 1]].astype(np.float32))
        np.testing.assert_array_equal(seq["classes"], classes[offsets[i]:offsets[i + 1]].astype(np.int32))


def test_one_dim_float_frames_get_a_feature_axis(tmp_path):
    path = write_file(tmp_path / "x.hdf", FEATS[:, 0].astype(np.float64), CLASSES.astype(np.int32))
    ds, seqs = read_all(path)
    assert ds.num_outputs["data"] == [1, 2] and ds.get_data_shape("data") == (1,)
    assert seqs[1]["data"].shape == (5, 1) and seqs[1]["data"].dtype == np.float32
    np.testing.assert_array_equal(seqs[1]["data"][:, 0], FEATS[3:8, 0].astype(np.float32))


@pytest.mark.parametrize("bad", [3, -1, 2 ** 40])
@pytest.mark.parametrize("cache_size", ["0", "-1"])
def test_class_index_out_of_range_names_file_key_and_sequence(tmp_path, bad, cache_size):
    classes = CLASSES.astype(np.int64)
    classes[3 + 5 + 1] = bad  # sequence 2 ("utt-2"), second frame
    path = write_file(tmp_path / "bad.hdf", FEATS.astype(np.float32), classes)
    with pytest.raises(DataError) as info:
        read_all(path, cache_size=cache_size)
    msg = str(info.value)
    assert "\n" not in msg
    for text in (path, "'classes'", "'utt-2'", "class index %i outside [0, 3)" % bad):
        assert text in msg, msg


def test_sparse_input_out_of_range(tmp_path):
    data = RNG.randint(0, 5, size=TOTAL)
    data[0] = 5
    path = write_file(tmp_path / "sparse_in.hdf", data.astype(np.int32), CLASSES.astype(np.int32), input_dim=5)
    with pytest.raises(DataError, match=r"sparse_in.hdf: key 'data', sequence 'utt-0' .*class index 5 outside \[0, 5\)"):
        read_all(path)


@pytest.mark.parametrize("name", ["inputs", "targets/data/classes", "seqLengths"])
def test_group_instead_of_dataset_is_one_line(tmp_path, name):
    path = write_file(tmp_path / "g.hdf", FEATS.astype(np.float32), CLASSES.astype(np.int32))
    with h5py.File(path, "r+") as f:
        del f[name]
        f.create_group(name)
    with pytest.raises(DataError, match=r"g.hdf: '/%s' is a group, expected a dataset" % name):
        read_all(path)


def test_unreadable_file_is_not_called_not_an_hdf_file():
    """A file without read permission: 'cannot read ...: Permission denied'. Runs as user nobody
    when the tests run as root (root reads any file)."""
    tmp = tempfile.mkdtemp(prefix="hdf-perm-", dir="/tmp")
    try:
        os.chmod(tmp, 0o755)
        path = write_file(Path(tmp) / "secret.hdf", FEATS.astype(np.float32), CLASSES.astype(np.int32))
        os.chmod(path, 0)
        code = textwrap.dedent("""
            import os, sys
            sys.path.insert(0, %r)
            from returnn.datasets import _load_registry, init_dataset
            from returnn.errors import DataError
            _load_registry()  # imports all modules while /root (the Python install) is readable
            if os.getuid() == 0:
                os.setgid(65534)
                os.setuid(65534)
            try:
                init_dataset({"class": "HDFDataset", "files": [%r]})
            except DataError as exc:
                print(exc)
        """) % (str(REPO), path)
        proc = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=300,
                              env=dict(os.environ, RETURNN_HDF_CHECK_TIMEOUT="30"))
        line = proc.stdout.strip()
        assert proc.returncode == 0, proc.stderr
        assert line == "HDFDataset: cannot read %s: Permission denied" % path, line
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _helper_pid() -> int:
    """The pid of the file-check helper process (started by a first check)."""
    from returnn.datasets import hdf_check
    assert hdf_check._helper is not None and hdf_check._helper.poll() is None
    return hdf_check._helper.pid


def test_check_that_hangs_or_crashes_becomes_one_line(tmp_path, monkeypatch):
    """The helper process stands for libhdf5 stuck in a file (SIGSTOP: no answer) or crashing in it
    (SIGSEGV during the check): each is one line naming the file, and the next check gets a new
    helper. (tests/test_hdf_fuzz.py has real files that make libhdf5 crash and loop.)"""
    good = write_file(tmp_path / "good.hdf", FEATS.astype(np.float32), CLASSES.astype(np.int32))
    monkeypatch.setenv("RETURNN_HDF_CHECK_TIMEOUT", "2")
    check_hdf_file(good)
    pid = _helper_pid()
    os.kill(pid, signal.SIGSTOP)
    with pytest.raises(DataError, match=r"good.hdf: reading the file's structure did not finish within 2 s"):
        check_hdf_file(good)
    check_hdf_file(good)  # a new helper
    pid = _helper_pid()
    os.kill(pid, signal.SIGSTOP)
    timer = threading.Timer(0.5, lambda: (os.kill(pid, signal.SIGSEGV), os.kill(pid, signal.SIGCONT)))
    timer.start()
    with pytest.raises(DataError, match=r"good.hdf: the HDF5 library crashed reading this file \(signal SIGSEGV"):
        check_hdf_file(good)
    timer.join()
    check_hdf_file(good)


@pytest.mark.parametrize("opts,key", [
    ({"partition_epoch": "abc"}, "partition_epoch"), ({"partition_epoch": -1}, "partition_epoch"),
    ({"cache_size": "abc"}, "cache_size"), ({"cache_size": [1]}, "cache_size"),
    ({"fixed_random_seed": "x"}, "fixed_random_seed"), ({"seq_ordering": 3}, "seq_ordering"),
    ({"seq_ordering": "random:x"}, "seq_ordering"), ({"seq_ordering": "laplace:abc"}, "seq_ordering"),
    ({"files": 5}, "files"), ({"random_seed_offset": 1.5}, "random_seed_offset"),
])
def test_hdf_options_of_wrong_type(tmp_path, opts, key):
    path = write_file(tmp_path / "x.hdf", FEATS.astype(np.float32), CLASSES.astype(np.int32))
    spec: Dict[str, Any] = dict({"class": "HDFDataset", "files": [path]}, **opts)
    with pytest.raises(DataError) as info:
        init_dataset(spec, name="train")
    assert "dataset train (HDFDataset)" in str(info.value) and key in str(info.value)


@pytest.mark.parametrize("spec,key", [
    ({"class": "Task12AXDataset", "num_seqs": "abc"}, "'num_seqs'"),
    ({"class": "Task12AXDataset", "num_seqs": -2}, "'num_seqs'"),
    ({"class": "RandomDataset", "input_dim": "x", "output_dim": 3}, "'input_dim'"),
    ({"class": "RandomDataset", "input_dim": 2, "output_dim": 3, "seq_len": "long"}, "'seq_len'"),
    ({"class": "DummyDataset", "input_dim": "x", "output_dim": 3, "num_seqs": 2}, "'input_dim'"),
    ({"class": "DummyDataset", "input_dim": 2, "output_dim": 3, "num_seqs": 2, "seq_len": "long"}, "'seq_len'"),
])
def test_generating_options_of_wrong_type(spec, key):
    with pytest.raises(DataError, match=key):
        init_dataset(spec, name="train")


TRAIN_CONFIG = '''#!rnn.py
task = "train"
train = {"class": "HDFDataset", "files": [%r]}
network = {"output": {"class": "softmax", "loss": "ce", "from": "data"}}
batch_size = 100
max_seqs = 4
learning_rate = 0.01
num_epochs = 1
tf_session_opts = {"intra_op_parallelism_threads": 1, "inter_op_parallelism_threads": 1}
'''


def test_rnn_trains_on_int64_dense_inputs_and_int64_targets(tmp_path):
    """Before conversion on read, these dtypes failed in the first step with a long TF error."""
    path = write_file(tmp_path / "int64.hdf", (FEATS * 10).astype(np.int64), CLASSES.astype(np.int64))
    config = write_config(tmp_path / "train.config", TRAIN_CONFIG % path)
    proc = run_rnn(train_args(config, tmp_path))
    assert proc.returncode == 0, describe(proc)
    assert "Finished training in epoch 1." in proc.stdout


@pytest.mark.parametrize("case", ["out_of_range", "cache_size_abc"])
def test_rnn_bad_hdf_input_is_one_line_exit_2(tmp_path, case):
    classes = CLASSES.astype(np.int64)
    extra = []
    if case == "out_of_range":
        classes[-1] = 7
        expected = ["key 'classes'", "sequence 'utt-3'", "class index 7 outside [0, 3)"]
    else:
        extra = ["++cache_size", "abc"]
        expected = ["dataset train (HDFDataset)", "option 'cache_size'", "'abc'"]
    path = write_file(tmp_path / "bad.hdf", FEATS.astype(np.float32), classes)
    config = write_config(tmp_path / "train.config", TRAIN_CONFIG % path)
    proc = run_rnn(train_args(config, tmp_path, *extra))
    assert proc.returncode == 2, describe(proc)
    lines = nonempty_lines(proc.stderr)
    assert len(lines) == 1 and lines[0].startswith("ERROR: "), describe(proc)
    for text in expected:
        assert text in lines[0], lines[0]
    assert "Traceback" not in proc.stdout + proc.stderr


def test_fifo_is_not_a_regular_file(tmp_path):
    """A named pipe would block a reader forever: refused before anything opens it."""
    fifo = str(tmp_path / "pipe.hdf")
    os.mkfifo(fifo)
    with pytest.raises(DataError, match="pipe.hdf is not a regular file"):
        init_dataset({"class": "HDFDataset", "files": [fifo]})
