"""Training data that changes under a running job (issue 28): an HDF file truncated, replaced or
rewritten in place, a text corpus, numpy dumps, a MetaDataset's part. A change is found at every
(sub-)epoch start, after every HDF read, and after each epoch before anything is saved: one line
naming the file, exit 2, and no checkpoint (nor learning-rate file entry) of an epoch that may have
read changed data. With two ranks under real mpirun, a change only one rank sees stops both before
rank 0 saves.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import List, Optional

import h5py
import numpy as np
import pytest

from helpers import MPIRUN_AS_ROOT, PYTHON, REPO, assert_one_line_error, child_env, describe, run_rnn, write_config
from returnn.datasets import init_dataset
from returnn.errors import DataError
from returnn.learning_rate_control import read_learning_rate_file

N, DIM, CLASSES = 40, 3, 4


def write_hdf(path: Path, seed: int = 0, n: int = N, tags: Optional[List[str]] = None) -> str:
    """A RETURNN-layout file: dense 'data' (DIM) and sparse 'classes', lengths 5..10."""
    rng = np.random.RandomState(seed)
    lens = np.random.RandomState(1).randint(5, 11, size=n)  # the same lengths for every seed: same file size
    with h5py.File(path, "w") as f:
        f["inputs"] = rng.randn(int(lens.sum()), DIM).astype(np.float32)
        f["targets/data/classes"] = rng.randint(0, CLASSES, size=int(lens.sum())).astype(np.int32)
        f.require_group("targets/size").attrs["classes"] = [CLASSES, 1]
        f.require_group("targets/labels")
        f["seqLengths"] = np.stack([lens, lens], axis=1).astype(np.int32)
        f["seqTags"] = np.array([t.encode() for t in (tags or ["seq-%i" % i for i in range(n)])])
    return str(path)


def truncate(path: str) -> None:
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)


def replace(path: str) -> None:
    """``mv other path``: another file under the same name."""
    other = write_hdf(Path(path + ".other"), seed=5)
    os.replace(other, path)


def rewrite(path: str) -> None:
    """``cp other path``: the same inode, new contents of the same size."""
    other = write_hdf(Path(path + ".other"), seed=5)
    assert os.path.getsize(other) == os.path.getsize(path)
    shutil.copyfile(other, path)


def rewrite_keeping_time(path: str) -> None:
    """``cp other path`` and the modification time set back (``touch -d``, ``cp -p``): only the
    status change time, which no user can set, shows it."""
    st = os.stat(path)
    rewrite(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def chmod(path: str) -> None:
    """Permissions taken away (a reader running as root would still read it)."""
    os.chmod(path, 0)


CHANGES = {"truncate": truncate, "replace": replace, "rewrite": rewrite, "rewrite-time-kept": rewrite_keeping_time,
           "chmod": chmod}
WORDS = {"truncate": "truncated", "replace": "replaced by another file", "rewrite": "modified in place",
         "rewrite-time-kept": "changed with its modification time kept", "chmod": "permissions changed (mode "}


# ---- datasets: the check itself and read errors
def _hdf(tmp_path, cache_size=0):
    path = write_hdf(tmp_path / "train.hdf")
    return path, init_dataset({"class": "HDFDataset", "files": [path], "cache_size": cache_size}, name="train")


@pytest.mark.parametrize("change", sorted(CHANGES))
@pytest.mark.parametrize("cache_size", [0, -1], ids=["streaming", "in-memory"])
def test_changed_hdf_file_is_named(tmp_path, change, cache_size):
    path, ds = _hdf(tmp_path, cache_size)
    ds.init_seq_order(1)
    ds.get_seqs([0, 1])
    ds.check_files_unchanged()  # unchanged: nothing to say
    CHANGES[change](path)
    with pytest.raises(DataError) as info:
        ds.check_files_unchanged()
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith("dataset train (HDFDataset): data file %s changed while the job runs: %s"
                                               % (path, WORDS[change])), msg
    assert "nothing trained on it is saved" in msg


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_read_after_a_change_is_an_error_naming_the_change_not_corruption(tmp_path, change):
    path, ds = _hdf(tmp_path)
    ds.init_seq_order(1)
    ds.get_seqs([0])
    CHANGES[change](path)
    with pytest.raises(DataError) as info:
        ds.get_seqs(list(range(5, N)))
    assert "data file %s changed while the job runs: %s" % (path, WORDS[change]) in str(info.value)
    assert "corrupt" not in str(info.value)


def _lm(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("ab ba\nabba\nbaab a\n")
    (tmp_path / "vocab.txt").write_text("a\nb\n \n[END]\n")
    ds = init_dataset({"class": "LmDataset", "corpus_file": str(corpus), "orth_symbols_file": str(tmp_path / "vocab.txt")},
                      name="train")
    return str(corpus), ds, lambda: corpus.write_text("ab ba\nabba\nbaab b\n")  # same size, new text


def _numpy_dump(tmp_path):
    for i in range(3):
        np.savetxt(tmp_path / ("dump%i.data.txt" % i), np.ones((4, 2)))
        np.savetxt(tmp_path / ("dump%i.targets.txt" % i), np.zeros(4), fmt="%i")
    ds = init_dataset({"class": "NumpyDumpDataset", "prefix": str(tmp_path / "dump"), "postfix": ".txt",
                       "num_inputs": 2, "num_outputs": 3}, name="train")
    path = tmp_path / "dump2.targets.txt"
    return str(path), ds, lambda: path.write_text("1\n1\n")


def _meta_part(tmp_path):
    feat = write_hdf(tmp_path / "feat.hdf")
    align = write_hdf(tmp_path / "align.hdf", seed=3)
    ds = init_dataset({"class": "MetaDataset", "datasets": {"feat": {"class": "HDFDataset", "files": [feat]},
                                                            "align": {"class": "HDFDataset", "files": [align]}},
                       "data_map": {"data": ("feat", "data"), "classes": ("align", "classes")}}, name="train")
    return align, ds, lambda: truncate(align)


def _seq_list(tmp_path):
    feat = write_hdf(tmp_path / "feat.hdf")
    seq_list = tmp_path / "list.txt"
    seq_list.write_text("seq-3\nseq-1\n")
    ds = init_dataset({"class": "MetaDataset", "datasets": {"feat": {"class": "HDFDataset", "files": [feat]}},
                       "data_map": {"data": ("feat", "data")}, "seq_list_file": str(seq_list)}, name="train")
    return str(seq_list), ds, lambda: seq_list.write_text("seq-1\nseq-3\n")


@pytest.mark.parametrize("make", [_lm, _numpy_dump, _meta_part, _seq_list], ids=["lm-corpus", "numpy-dump",
                                                                                   "meta-part", "meta-seq-list"])
def test_other_file_datasets_name_a_changed_file(tmp_path, make):
    path, ds, change = make(tmp_path)
    ds.init_seq_order(1)
    ds.get_seqs([0])
    ds.check_files_unchanged()
    assert path in ds.data_files()
    change()
    with pytest.raises(DataError) as info:
        ds.check_files_unchanged()
    assert "data file %s changed while the job runs" % path in str(info.value)


# ---- training runs: nothing read from a changed file is saved
CONFIG = '''#!rnn.py
import os
_FILE = %(file)r


def _change():
    """Changes the data file once, as another job would."""
    marker = _FILE + ".changed"
    if not os.path.exists(marker):
        open(marker, "w").close()
        %(change)s


def _order(epoch, **_):
    """The train data's order; at the start of epoch 2 (after the engine's start-of-epoch check),
    the data file changes."""
    if epoch == %(epoch)i:
        _change()
    return "random"


task = "train"
train = {"class": "HDFDataset", "files": [_FILE], "seq_ordering": _order, "cache_size": %(cache_size)r}
dev = {"class": "HDFDataset", "files": [%(dev)r]}
num_inputs = %(dim)i
num_outputs = {"classes": [%(classes)i, 1]}
network = {"hidden": {"class": "linear", "activation": "tanh", "n_out": 8, "from": "data"},
           "output": {"class": "softmax", "loss": "ce", "from": "hidden"}}
batch_size = 40
max_seqs = 4
learning_rate = 0.01
num_epochs = 3
tf_session_opts = {"intra_op_parallelism_threads": 1, "inter_op_parallelism_threads": 1}
'''

CHANGE_CODE = {
    "truncate": "open(_FILE, 'r+b').truncate(os.path.getsize(_FILE) // 2)",
    "chmod": "os.chmod(_FILE, 0)",
    "rewrite-time-kept": "st = os.stat(_FILE); import shutil; shutil.copyfile(_FILE + '.other', _FILE); "
                         "os.utime(_FILE, ns=(st.st_atime_ns, st.st_mtime_ns))",
    "rewrite": "import shutil; shutil.copyfile(_FILE + '.other', _FILE)",
    "replace": "os.replace(_FILE + '.other', _FILE)",
}


def _config(tmp_path: Path, data: str, change: str, cache_size, epoch: int = 2) -> Path:
    write_hdf(Path(data + ".other"), seed=5)
    dev = write_hdf(tmp_path / "dev.hdf", seed=9, n=8)
    text = CONFIG % {"file": data, "change": CHANGE_CODE[change], "cache_size": cache_size, "dev": dev,
                     "dim": DIM, "classes": CLASSES, "epoch": epoch}
    return write_config(tmp_path / "train.config", text)


def _args(config: Path, tmp_path: Path) -> List[str]:
    return [str(config), "++model", str(tmp_path / "model"), "++learning_rate_file", str(tmp_path / "lr.data"),
            "++log", str(tmp_path / "train.log")]


def _assert_epoch_1_only(tmp_path: Path) -> None:
    assert (tmp_path / "model.001.index").exists()
    assert not list(tmp_path.glob("model.002*")) and not list(tmp_path.glob("model.interrupted*"))
    scores = read_learning_rate_file(str(tmp_path / "lr.data"))
    assert scores[1].error and not (2 in scores and scores[2].error), scores


@pytest.mark.parametrize("change, cache_size", [("truncate", 0), ("replace", 0), ("rewrite", -1), ("chmod", 0),
                                                ("rewrite-time-kept", -1)],
                         ids=["truncated-while-read", "replaced-while-read", "rewritten-after-loading",
                              "chmod-while-read", "rewritten-time-kept-after-loading"])
def test_training_never_saves_an_epoch_that_read_a_changed_file(tmp_path, change, cache_size):
    """Streaming reads see the change at the next read; data loaded into memory at start is
    compared after the epoch, before its learning-rate entry and checkpoint are written."""
    data = write_hdf(tmp_path / "train.hdf")
    proc = run_rnn(_args(_config(tmp_path, data, change, cache_size), tmp_path), timeout=300)
    line = assert_one_line_error(proc, "data file %s changed while the job runs: %s" % (data, WORDS[change]))
    if cache_size == -1:
        assert "(noticed after epoch 2, before its checkpoint)" in line
    _assert_epoch_1_only(tmp_path)


def test_change_between_epochs_is_found_at_the_next_epoch_start(tmp_path):
    """The file changes after epoch 1 was saved, when the network of epoch 2 is made
    (``get_network``): epoch 2 does not start."""
    data = write_hdf(tmp_path / "train.hdf")
    config = _config(tmp_path, data, "truncate", 0, epoch=0)
    text = config.read_text().replace("network = {", "_network = {") + (
        "\n\ndef get_network(epoch, **_):\n    if epoch == 2:\n        _change()\n    return _network\n")
    config.write_text(text)
    proc = run_rnn(_args(config, tmp_path), timeout=300)
    line = assert_one_line_error(proc, "data file %s changed while the job runs: truncated" % data)
    assert "(noticed at the start of epoch 2)" in line
    _assert_epoch_1_only(tmp_path)


MPI_CONFIG_TAIL = '''
_rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
_FILE = %(file)r %% _rank  # every rank its own copy: only rank 1's changes
train["files"] = [_FILE]
use_horovod = True
'''


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs OpenMPI's mpirun")
@pytest.mark.parametrize("cache_size", [0, -1], ids=["streaming", "in-memory"])
def test_change_seen_by_one_rank_stops_both_before_rank_0_saves(tmp_path, cache_size):
    files = [write_hdf(tmp_path / ("train-rank%i.hdf" % r)) for r in range(2)]
    config = _config(tmp_path, files[1], "rewrite" if cache_size else "truncate", cache_size)
    Path(files[0] + ".changed").write_text("")  # rank 0's file stays as it is
    config.write_text(config.read_text() + MPI_CONFIG_TAIL % {"file": str(tmp_path / "train-rank%i.hdf")})
    cmd = ["mpirun", "-np", "2", "--oversubscribe", "--bind-to", "none", "--mca", "btl", "tcp,self", PYTHON,
           str(REPO / "rnn.py")] + _args(config, tmp_path) + ["++distributed_backend", "mpi",
                                                               "++horovod_stall_timeout", "60"]
    proc = subprocess.run(cmd, cwd=str(REPO), env=child_env(MPIRUN_AS_ROOT), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 2, describe(proc)
    assert "data file %s changed while the job runs" % files[1] in proc.stderr, describe(proc)
    assert "Traceback" not in proc.stderr + proc.stdout
    assert os.path.exists(files[1] + ".changed") and not os.path.exists(files[0] + ".other")
    _assert_epoch_1_only(tmp_path)


# ---- non-finite data: named when the step's loss is not finite; dev scores kept as RETURNN does
NAN_CONFIG = '''#!rnn.py
task = "train"
train = {"class": "HDFDataset", "files": [%(train)r]}
dev = {"class": "HDFDataset", "files": [%(dev)r]}
num_inputs = %(dim)i
num_outputs = {"classes": [%(classes)i, 1]}
network = {"hidden": {"class": "linear", "activation": "tanh", "n_out": 8, "from": "data"},
           "output": {"class": "softmax", "loss": "ce", "from": "hidden"}}
batch_size = 40
max_seqs = 4
learning_rate = 0.01
learning_rate_control = "newbob"
num_epochs = 3
cleanup_old_models = {"keep_last_n": 1, "keep_best_n": 1, "keep": []}
tf_session_opts = {"intra_op_parallelism_threads": 1, "inter_op_parallelism_threads": 1}
'''


def _with_nan(path: Path, seq: int, frame: int, n: int = N, seed: int = 0) -> str:
    write_hdf(path, seed=seed, n=n)
    with h5py.File(path, "r+") as f:
        start = int(f["seqLengths"][:seq, 0].sum())
        f["inputs"][start + frame, 1] = np.nan
    return str(path)


def test_nan_in_training_data_names_file_and_sequence(tmp_path):
    train = _with_nan(tmp_path / "train.hdf", seq=7, frame=2)
    dev = write_hdf(tmp_path / "dev.hdf", seed=9, n=8)
    config = write_config(tmp_path / "nan.config", NAN_CONFIG % {"train": train, "dev": dev, "dim": DIM,
                                                                 "classes": CLASSES})
    proc = run_rnn(_args(config, tmp_path), timeout=300)
    assert_one_line_error(proc, "Model seems broken, got inf or nan score. Cause: non-finite input data: dataset "
                                "train (HDFDataset): sequence 'seq-7' (#7 of file %s): key 'data' holds nan (first at "
                                "frame 2)" % train)
    assert not list(tmp_path.glob("model.00*"))



def test_inf_in_data_that_breaks_the_parameters_a_step_before_the_loss_is_named(tmp_path):
    """inf through tanh: the loss of its step is finite (tanh(inf) = 1) but the gradient is nan
    (0 * inf), so the loss is not finite only from the next step on, whose batch is finite. The
    sequence is found among the epoch's earlier batches (before: exit 1 without a cause)."""
    train = str(tmp_path / "train.hdf")
    write_hdf(Path(train))
    with h5py.File(train, "r+") as f:
        start = int(f["seqLengths"][:11, 0].sum())
        f["inputs"][start + 3, 0] = np.inf
    dev = write_hdf(tmp_path / "dev.hdf", seed=9, n=8)
    config = write_config(tmp_path / "inf.config", NAN_CONFIG % {"train": train, "dev": dev, "dim": DIM,
                                                                 "classes": CLASSES})
    proc = run_rnn(_args(config, tmp_path), timeout=300)
    assert_one_line_error(proc, "Cause: non-finite input data: dataset train (HDFDataset): sequence 'seq-11' (#11 of "
                                "file %s): key 'data' holds inf (first at frame 3) (in an earlier step of this epoch "
                                "whose loss was still finite" % train)
    assert not list(tmp_path.glob("model.00*"))

def test_model_that_diverges_on_finite_data_is_exit_1_without_a_data_cause(tmp_path):
    train = write_hdf(tmp_path / "train.hdf")
    dev = write_hdf(tmp_path / "dev.hdf", seed=9, n=8)
    text = NAN_CONFIG % {"train": train, "dev": dev, "dim": DIM, "classes": CLASSES}
    text = text.replace('"from": "data"}', '"from": "huge"},\n           "huge": {"class": "eval", "from": "data", '
                                           '"eval": "source(0) * 1e30 * 1e30"}')
    config = write_config(tmp_path / "div.config", text)
    proc = run_rnn(_args(config, tmp_path), timeout=300)
    assert proc.returncode == 1, describe(proc)
    assert "Model seems broken, got inf or nan score." in proc.stderr and "Cause" not in proc.stderr, describe(proc)


def test_nan_dev_score_is_named_kept_never_lowers_the_rate_nor_wins_cleanup(tmp_path):
    train = write_hdf(tmp_path / "train.hdf")
    dev = _with_nan(tmp_path / "dev.hdf", seq=5, frame=0, n=8, seed=9)
    config = write_config(tmp_path / "nan.config", NAN_CONFIG % {"train": train, "dev": dev, "dim": DIM,
                                                                 "classes": CLASSES})
    proc = run_rnn(_args(config, tmp_path), timeout=300)
    assert proc.returncode == 0, describe(proc)
    warnings = [line for line in proc.stdout.splitlines() if line.startswith("WARNING: epoch ")]
    assert len(warnings) == 3, describe(proc)
    assert ("WARNING: epoch 1 dev: score nan (not finite); the score is kept, as RETURNN does. Cause: non-finite input "
            "data: dataset dev (HDFDataset): sequence 'seq-5' (#5 of file %s): key 'data' holds nan (first at frame "
            "0)" % dev) in warnings[0], warnings
    log = (tmp_path / "train.log").read_text()
    assert "learning-rate control: epoch 1 has non-finite scores (dev_score nan" in log
    epochs = read_learning_rate_file(str(tmp_path / "lr.data"))
    assert [epochs[e].learning_rate for e in (1, 2, 3)] == [0.01] * 3
    assert all(np.isnan(epochs[e].error["dev_score"]) for e in (1, 2, 3))
    assert (tmp_path / "model.003.index").exists()


@pytest.mark.parametrize("kind", ["newbob", "newbob_abs", "newbob_multi_epoch"])
@pytest.mark.parametrize("scores", [(1.0, float("nan")), (float("nan"), 1.0), (1.0, float("inf"))],
                         ids=["new-nan", "old-nan", "new-inf"])
def test_nonfinite_scores_in_the_learning_rate_control_as_returnn(kind, scores):
    """RETURNN's formulas: a comparison with nan is false (no decay); newbob_abs's difference to an
    inf score is inf, which is above the threshold (decay), the relative change to inf is nan."""
    from returnn.learning_rate_control import LearningRateControl
    control = LearningRateControl(kind=kind, default_learning_rate=1.0, multi_num_epochs=2, multi_update_interval=1)
    for epoch, score in enumerate(scores, 1):
        control.get_learning_rate_for_epoch(epoch)
        control.set_epoch_error(epoch, {"dev_score": score})
    decays = kind == "newbob_abs" and scores[1] == float("inf")
    assert control.get_learning_rate_for_epoch(3) == (0.5 if decays else 1.0)


def test_cleanup_ranks_nonfinite_scores_worst():
    from returnn.tf.model_cleanup import epochs_to_keep
    scores = {1: float("nan"), 2: 0.9, 3: 0.1, 4: float("-inf"), 5: 0.6, 6: 0.7}
    kept = epochs_to_keep(list(scores), {e: {"dev_score": v} for e, v in scores.items()}, keep_last_n=1,
                          keep_best_n=2, keep=[])
    assert kept == {3, 5, 6}


FORWARD = '''#!rnn.py
import os, shutil
_FILE = %(file)r


def _order(epoch, **_):
    if not os.path.exists(_FILE + ".changed"):  # the data file is rewritten once the forward pass starts
        open(_FILE + ".changed", "w").close()
        shutil.copyfile(_FILE + ".other", _FILE)
    return "default"


task = "forward"
eval = {"class": "HDFDataset", "files": [_FILE], "cache_size": -1, "seq_ordering": _order}
num_inputs = %(dim)i
num_outputs = {"classes": [%(classes)i, 1]}
network = {"output": {"class": "softmax", "from": "data", "n_out": %(classes)i, "is_output_layer": True}}
allow_random_model_init = True
forward_batch_size = 1000
'''


def test_forward_writes_nothing_computed_from_a_changed_file(tmp_path):
    data = write_hdf(tmp_path / "eval.hdf")
    write_hdf(Path(data + ".other"), seed=5)
    config = write_config(tmp_path / "fwd.config", FORWARD % {"file": data, "dim": DIM, "classes": CLASSES})
    out = tmp_path / "out.hdf"
    proc = run_rnn([config, "++model", tmp_path / "model", "++output_file", out], timeout=300)
    assert_one_line_error(proc, "data file %s changed while the job runs: modified in place" % data)
    assert not out.exists() and not list(tmp_path.glob(".out.hdf.tmp-*"))
