"""Model files moving between the real RETURNN and this engine, both ways, end to end.

The real RETURNN (PyPI ``returnn``, TF backend) runs from its own virtualenv (``RETURNN_VENV``,
default ``<repo>/.bench-venv-returnn``) in a directory outside the repository, with
``DISABLE_CUDA=1``; without it these tests skip, saying why. Both engines run the same config
files on the same HDF data (written here), so their numbers are comparable:

- a BLSTM model RETURNN trained 2 epochs continues here at epoch 3 (its parameters, global step
  and learning-rate file: the newbob decay decided at epoch 3 from RETURNN's scores), with an
  epoch-3 score next to RETURNN's own continuation (both restart Adam) and far from a fresh model;
- eval/forward here of RETURNN's checkpoint give RETURNN's numbers;
- a model trained here continues in RETURNN at epoch 3 (it loads our ``model.002``), and
  RETURNN's eval (``load``) and forward of our checkpoint give our numbers;
- an attention encoder-decoder (rec sub-network) from RETURNN continues here; eval and beam search
  here give RETURNN's scores and hypotheses;
- ``import_model_train_epoch1``, ``preload_from_files`` (also with ``prefix``) and ``load`` take
  RETURNN checkpoints; RETURNN's ``model.pretrain.NNN`` resumes here;
- networks with many parametric layer families: RETURNN loads our checkpoint and we load its one
  (``tests/returnn_checkpoints/returnn_units.py``): same names, same values, same outputs.

Run alone: ``pytest tests/test_returnn_checkpoints.py`` (or ``-m returnn_interop``); ~2-3 minutes.
"""
from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import numpy as np
import pytest

from helpers import REPO, child_env, describe, run_rnn
from returnn_interop import (  # noqa: F401  (need_returnn: the module's autouse fixture)
    RETURNN_PYTHON, TIMEOUT, checkpoint_values, need_returnn, our_network, rename_layers)

pytestmark = pytest.mark.returnn_interop

def run_returnn(workdir: Path, *args, expect_ok: bool = True) -> subprocess.CompletedProcess:
    """``python -m returnn ARGS`` of the RETURNN venv in ``workdir`` (outside the repository)."""
    from returnn import __version__ as ours
    proc = subprocess.run([str(RETURNN_PYTHON), "-m", "returnn"] + [str(a) for a in args], cwd=str(workdir),
                          env=child_env({"DISABLE_CUDA": "1"}), capture_output=True, text=True, timeout=TIMEOUT)
    banner = re.search(r"^RETURNN starting up, version (\S+),", proc.stdout, re.M)
    assert banner and banner.group(1) != ours, "not the real RETURNN:\n" + describe(proc)
    if expect_ok:
        assert proc.returncode == 0, describe(proc)
    return proc


def run_ours(*args) -> subprocess.CompletedProcess:
    proc = run_rnn([str(a) for a in args], timeout=TIMEOUT)
    assert proc.returncode == 0, describe(proc)
    return proc


def has_line(text: str, line: str) -> bool:
    return any(ln.strip() == line for ln in text.splitlines())


def said(text: str, message: str) -> bool:
    """Whether RETURNN's output has ``message``, also when its data-loading thread wrote lines into
    the middle of it (the words in order, at most a few lines apart)."""
    words = [re.escape(w) for w in message.split()]
    return message in text or re.search(r"[\s\S]{0,400}?".join(words), text) is not None


# ---------------------------------------------------------------- data and configs

def write_hdf(path: Path, seqs, in_dim: int, sparse_input: bool, num_classes: int) -> None:
    """RETURNN's HDF layout, written with h5py alone (engine_run_cases.write_hdf): ``data`` (dense frames
    or class indices) and sparse ``classes`` (labels ``c0``, ``c1``, ...)."""
    sys.path.insert(0, str(REPO / "tests" / "returnn_goldens"))
    from engine_run_cases import write_hdf as write_returnn_hdf
    dtype = "int32" if sparse_input else "float32"
    write_returnn_hdf(str(path), [(np.asarray(x).astype(dtype), y) for x, y in seqs], in_dim, num_classes)


def parity_seqs(n: int, seed: int):
    """One-hot symbols 0..8; class: whether symbol 0 has been seen an odd number of times."""
    rng = np.random.RandomState(seed)
    out = []
    for _ in range(n):
        sym = rng.randint(0, 9, size=rng.randint(5, 30))
        out.append((np.eye(9, dtype="float32")[sym], (np.cumsum(sym == 0) % 2).astype("int32")))
    return out


def base_convert_seqs(n: int, seed: int):
    """Octal digits -> the binary digits of the number, then end-of-sequence label 2."""
    rng = np.random.RandomState(seed)
    out = []
    for _ in range(n):
        digits = rng.randint(0, 8, size=rng.randint(2, 6))
        bits = [int(b) for b in bin(int("".join(str(d) for d in digits), 8))[2:]]
        out.append((digits.astype("int32"), np.array(bits + [2], "int32")))
    return out


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Dict[str, Path]:
    d = tmp_path_factory.mktemp("data")
    files = {"lstm_train": (parity_seqs(200, 1), 9, False, 2), "lstm_dev": (parity_seqs(50, 2), 9, False, 2),
             "att_train": (base_convert_seqs(300, 3), 8, True, 3), "att_dev": (base_convert_seqs(50, 4), 8, True, 3)}
    for name, (seqs, dim, sparse, classes) in files.items():
        write_hdf(d / (name + ".hdf"), seqs, dim, sparse, classes)
    return {name: d / (name + ".hdf") for name in files}


COMMON = """#!rnn.py
use_tensorflow = True
task = "train"
train = {"class": "HDFDataset", "files": [%(train)r]}
dev = {"class": "HDFDataset", "files": [%(dev)r]}
optimizer = {"class": "adam"}
learning_rate = 0.01
learning_rate_control = "newbob_multi_epoch"
newbob_multi_num_epochs = 1
newbob_relative_error_threshold = -0.99  # every improvement counts as too small: the rate halves at epoch 3
newbob_learning_rate_decay = 0.5
# RETURNN's default HDF cache is 70%% of the memory available at its start; partly cached, its
# CachedDataset fed empty sequences (all-zero features, labels -1): read the files directly
cache_size = "0"
model = %(model)r
learning_rate_file = %(lr_file)r
num_epochs = 2
log_verbosity = 4
"""
BLSTM = """
extern_data = {"data": {"dim": 9}, "classes": {"dim": 2, "sparse": True}}
batch_size = 300
max_seqs = 20
network = {
    "fw0": {"class": "rec", "unit": "NativeLstm2", "n_out": 12, "from": ["data"]},
    "bw0": {"class": "rec", "unit": "NativeLstm2", "n_out": 12, "from": ["data"], "direction": -1},
    "output": {"class": "softmax", "loss": "ce", "from": ["fw0", "bw0"]},
}
"""
PRETRAIN = """
extern_data = {"data": {"dim": 9}, "classes": {"dim": 2, "sparse": True}}
batch_size = 300
max_seqs = 20
network = {
    "fw0": {"class": "rec", "unit": "NativeLstm2", "n_out": 12, "from": ["data"]},
    "fw1": {"class": "rec", "unit": "NativeLstm2", "n_out": 12, "from": ["fw0"]},
    "output": {"class": "softmax", "loss": "ce", "from": ["fw1"]},
}
pretrain = "default"
"""
ATTENTION = """
extern_data = {"data": {"dim": 8, "sparse": True}, "classes": {"dim": 3, "sparse": True}}
batch_size = 300
max_seqs = 30
network = {
    "input_embed": {"class": "linear", "activation": None, "from": "data", "n_out": 12},
    "enc_fw": {"class": "rec", "unit": "nativelstm2", "from": "input_embed", "n_out": 12, "direction": 1},
    "enc_bw": {"class": "rec", "unit": "nativelstm2", "from": "input_embed", "n_out": 12, "direction": -1},
    "encoder": {"class": "copy", "from": ["enc_fw", "enc_bw"]},
    "enc_ctx": {"class": "linear", "activation": "tanh", "from": "encoder", "n_out": 12},
    "output": {"class": "rec", "from": [], "max_seq_len": 20, "target": "classes", "unit": {
        "output_embed": {"class": "linear", "activation": None, "from": "output", "n_out": 6},
        "s": {"class": "rec", "unit": "nativelstm2", "from": ["prev:c", "prev:output_embed"], "n_out": 12},
        "c_in": {"class": "linear", "activation": "tanh", "from": ["s", "prev:output_embed"], "n_out": 12},
        "c": {"class": "dot_attention", "from": "c_in", "base": "base:encoder", "base_ctx": "base:enc_ctx"},
        "prob": {"class": "softmax", "from": ["s", "c"], "target": "classes", "loss": "ce"},
        "output": {"class": "choice", "from": "prob", "target": "classes", "beam_size": 3},
        "end": {"class": "compare", "from": "output", "value": 2}}},
}
"""


def write_config(directory: Path, data: Dict[str, Path], kind: str, body: str, extra: str = "") -> Path:
    """``directory/<kind>.config``: model ``directory/model``, learning-rate file ``directory/lr.txt``."""
    directory.mkdir(parents=True, exist_ok=True)
    text = COMMON % dict(train=str(data[kind + "_train"]), dev=str(data[kind + "_dev"]), model=str(directory / "model"),
                         lr_file=str(directory / "lr.txt")) + body + extra
    path = directory / (kind + ".config")
    path.write_text(text)
    return path


def forward_extra(data: Dict[str, Path], kind: str) -> str:
    """Config lines for task forward (both engines forward the ``eval`` dataset)."""
    return "eval = {\"class\": \"HDFDataset\", \"files\": [%r]}\nforward_batch_size = 400\n" % str(data[kind + "_dev"])


def copy_model_dir(src: Path, dst: Path, kind: str, data: Dict[str, Path], body: str) -> Path:
    """A copy of a model directory (checkpoints, learning-rate file) with a config pointing at it."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.config"))
    return write_config(dst, data, kind, body)


def lr_file(path: Path):
    from returnn.learning_rate_file import read_learning_rate_file
    return read_learning_rate_file(str(path))


def score_line(stdout: str, epoch: int, name: str = "dev") -> float:
    """The score of ``epoch <epoch> <name>: score X error Y`` of our task eval."""
    m = re.search(r"^epoch %i %s: score (\S+) error" % (epoch, name), stdout, re.M)
    assert m, stdout[-3000:]
    return float(m.group(1))


def read_forward_hdf(path: Path) -> Dict[str, np.ndarray]:
    """Forward output file -> {sequence tag: frames}."""
    import h5py
    with h5py.File(path, "r") as f:
        tags = [t.decode("utf8") if isinstance(t, bytes) else str(t) for t in f["seqTags"][()]]
        lens = f["seqLengths"][()][:, 0]
        values = f["inputs"][()]
    starts = np.concatenate([[0], np.cumsum(lens)])
    return {tag: values[starts[i]:starts[i + 1]] for i, tag in enumerate(tags)}


def assert_same_forward(ours: Path, theirs: Path, atol: float = 1e-5) -> None:
    a, b = read_forward_hdf(ours), read_forward_hdf(theirs)
    assert sorted(a) == sorted(b) and len(a) == 50
    for tag in a:
        assert a[tag].shape == b[tag].shape, tag
        np.testing.assert_allclose(a[tag], b[tag], atol=atol, rtol=0, err_msg=tag)


def assert_same_parameters(ours: Path, theirs: Path) -> List[str]:
    """The network parameters of checkpoint ``theirs`` (RETURNN's) are in ``ours``, bit for bit."""
    a, b = checkpoint_values(ours), checkpoint_values(theirs)
    params = [n for n in b if n != "global_step"]
    assert params
    for name in params:
        assert name in a, name
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    return params


def continued_epoch_checks(ours_dir: Path, returnn_dir: Path, stdout: str) -> None:
    """Our epoch 3 after RETURNN's 2 epochs: resumed there, rate and scores as RETURNN's own epoch 3."""
    ckpt = checkpoint_values(returnn_dir / "model.002")
    step = int(ckpt["global_step"])
    assert has_line(stdout, "loaded checkpoint %s/model.002 (after epoch 2, global step %i)" % (ours_dir, step)), stdout
    assert has_line(stdout, "start training at epoch 3") and "start epoch 1 " not in stdout, stdout
    assert has_line(stdout, "start epoch 3 with learning rate 0.005 ..."), stdout  # newbob from RETURNN's file
    ours, theirs = lr_file(ours_dir / "lr.txt"), lr_file(returnn_dir / "lr.txt")
    for epoch in (1, 2):  # RETURNN's entries kept, with their meta data
        assert ours[epoch].error == theirs[epoch].error and ours[epoch].meta == theirs[epoch].meta
    assert ours[3].learning_rate == theirs[3].learning_rate == 0.005
    ours3, theirs3 = ours[3].error["train_score"], theirs[3].error["train_score"]
    fresh, trained = theirs[1].error["train_score"], theirs[2].error["train_score"]
    # our epoch 3 is RETURNN's epoch 3 (both restart Adam from the same parameters), not a fresh start
    assert abs(ours3 - theirs3) < 0.2 * abs(fresh - theirs3), (ours3, theirs3, trained, fresh)
    assert int(checkpoint_values(ours_dir / "model.003")["global_step"]) > step


# ---------------------------------------------------------------- a model trained by RETURNN

@pytest.fixture(scope="module")
def returnn_blstm(tmp_path_factory, data) -> Path:
    """A directory with RETURNN's 2-epoch BLSTM model (never changed: tests copy it)."""
    d = tmp_path_factory.mktemp("returnn_blstm")
    proc = run_returnn(d, write_config(d, data, "lstm", BLSTM))
    assert (d / "model.002.index").exists(), describe(proc)
    return d


def test_returnn_model_continues_here_at_epoch_3(tmp_path, data, returnn_blstm):
    ours_cfg = copy_model_dir(returnn_blstm, tmp_path / "ours", "lstm", data, BLSTM)
    theirs_cfg = copy_model_dir(returnn_blstm, tmp_path / "returnn", "lstm", data, BLSTM)
    proc = run_ours(ours_cfg, "++num_epochs", 3)
    returnn = run_returnn(tmp_path / "returnn", theirs_cfg, "++num_epochs", 3)
    assert said(returnn.stdout, "loading weights from %s/model.002" % (tmp_path / "returnn")), describe(returnn)
    continued_epoch_checks(tmp_path / "ours", tmp_path / "returnn", proc.stdout)


def test_eval_and_forward_here_of_a_returnn_model(tmp_path, data, returnn_blstm):
    cfg = write_config(tmp_path, data, "lstm", BLSTM, forward_extra(data, "lstm"))
    ckpt = returnn_blstm / "model.002"
    proc = run_ours(cfg, "++task", "eval", "++load", ckpt)
    assert abs(score_line(proc.stdout, 2) - lr_file(returnn_blstm / "lr.txt")[2].error["dev_score"]) < 1e-5
    run_ours(cfg, "++task", "forward", "++load", ckpt, "++output_file", tmp_path / "ours.hdf")
    run_returnn(tmp_path, cfg, "++task", "forward", "++load", ckpt, "++output_file", tmp_path / "returnn.hdf")
    assert_same_forward(tmp_path / "ours.hdf", tmp_path / "returnn.hdf")


def test_import_model_train_epoch1_and_preload_from_a_returnn_checkpoint(tmp_path, data, returnn_blstm):
    """With learning rate 0, the epoch-1 checkpoint holds exactly what was taken from RETURNN's."""
    ckpt = returnn_blstm / "model.002"
    dev_score = lr_file(returnn_blstm / "lr.txt")[2].error["dev_score"]
    frozen = "\nlearning_rate = 0.0\nlearning_rate_control = \"constant\"\nnum_epochs = 1\n"
    preload = "preload_from_files = {\"base\": {\"filename\": %r, \"init_for_train\": True}}\n" % str(ckpt)
    for name, extra in (("import", "import_model_train_epoch1 = %r\n" % str(ckpt)), ("preload", preload)):
        proc = run_ours(write_config(tmp_path / name, data, "lstm", BLSTM, frozen + extra))
        assert has_line(proc.stdout, "start training at epoch 1"), proc.stdout
        assert len(assert_same_parameters(tmp_path / name / "model.001", ckpt)) == 8
        m = re.search(r"^epoch 1 score: .* dev: score (\S+) error", proc.stdout, re.M)
        assert m and abs(float(m.group(1)) - dev_score) < 1e-5, (proc.stdout[-2000:], dev_score)
    global_steps = [int(checkpoint_values(p)["global_step"]) for p in (ckpt, tmp_path / "import" / "model.001")]
    assert global_steps[1] > global_steps[0]  # as RETURNN: the imported model's global step continues


def test_preload_prefix_takes_renamed_layers_from_a_returnn_checkpoint(data, returnn_blstm):
    """RETURNN's ``prefix``: the parameters whose name contains it, from the file's names without it."""
    from returnn.tf.preload import preload_from_files
    from returnn.tf.returnn_params import returnn_param_values
    with our_network(rename_layers(BLSTM, {"fw0": "pre_fw0", "bw0": "pre_bw0"}), {}) as net:
        spec = {"a": {"filename": str(returnn_blstm / "model.002"), "prefix": "pre_"}}
        assert preload_from_files(spec, net, starting_training=False) == 6
        values, stored = returnn_param_values(net), checkpoint_values(returnn_blstm / "model.002")
    for name in ("fw0/rec/W", "fw0/rec/W_re", "fw0/rec/b", "bw0/rec/W", "bw0/rec/W_re", "bw0/rec/b"):
        np.testing.assert_array_equal(values["pre_" + name], stored[name])
    assert not np.array_equal(values["output/W"], stored["output/W"])  # not under the prefix: not loaded


def test_returnn_pretrain_checkpoint_resumes_here(tmp_path, data):
    """RETURNN names pretrain epochs' checkpoints ``model.pretrain.NNN``; training resumes from them
    with the pretrain network of that epoch, then grows it."""
    d = tmp_path / "m"
    cfg = write_config(d, data, "lstm", PRETRAIN)
    returnn = run_returnn(d, cfg, "++num_epochs", 1)
    assert (d / "model.pretrain.001.index").exists(), describe(returnn)
    proc = run_ours(cfg)
    assert has_line(proc.stdout, "start training at epoch 2"), proc.stdout
    assert "loaded checkpoint %s/model.pretrain.001 (after epoch 1" % d in proc.stdout, proc.stdout
    assert re.search(r"^network for epoch 2: layers fw0, fw1, output; parameters copied: \d+", proc.stdout, re.M)
    assert (d / "model.pretrain.002.index").exists()  # epoch 2 is pretrain's last: RETURNN's name


# ---------------------------------------------------------------- a model trained here, continued by RETURNN

def test_model_trained_here_continues_in_returnn_and_gives_the_same_numbers(tmp_path, data):
    cfg = write_config(tmp_path / "ours", data, "lstm", BLSTM)
    run_ours(cfg)
    pristine = tmp_path / "pristine"
    copy_model_dir(tmp_path / "ours", pristine, "lstm", data, BLSTM)
    ours_lr = lr_file(pristine / "lr.txt")
    step = int(checkpoint_values(pristine / "model.002")["global_step"])
    # RETURNN continues our model directory at epoch 3
    proc = run_returnn(tmp_path / "ours", cfg, "++num_epochs", 3)
    assert said(proc.stdout, "loading weights from %s/model.002" % (tmp_path / "ours")), describe(proc)
    assert said(proc.stdout, "start training at epoch 3"), describe(proc)
    assert "_engine/epoch" not in checkpoint_values(tmp_path / "ours" / "model.003")  # RETURNN's own file
    theirs = lr_file(tmp_path / "ours" / "lr.txt")
    assert theirs[3].learning_rate == 0.005  # from our learning-rate file's scores: newbob halved the rate
    assert theirs[3].meta.get("global_train_step") == step  # RETURNN took our global step
    assert theirs[2].error == ours_lr[2].error
    # RETURNN's eval (load = our checkpoint: it wants <prefix>.meta) and forward give our numbers
    out = tmp_path / "eval.txt"
    fwd_cfg = write_config(tmp_path / "fwd", data, "lstm", BLSTM, forward_extra(data, "lstm"))
    run_returnn(tmp_path / "fwd", fwd_cfg, "++task", "eval", "++load", pristine / "model.002",
                "++eval_output_file", out)
    scores = ast.literal_eval(out.read_text())["dev"]
    assert abs(scores["score"]["cost:output"] - ours_lr[2].error["dev_score"]) < 1e-5, (scores, ours_lr[2].error)
    assert abs(scores["error"]["error:output"] - ours_lr[2].error["dev_error"]) < 1e-5
    run_returnn(tmp_path / "fwd", fwd_cfg, "++task", "forward", "++load", pristine / "model.002",
                "++output_file", tmp_path / "returnn.hdf")
    run_ours(fwd_cfg, "++task", "forward", "++load", pristine / "model.002", "++output_file", tmp_path / "ours.hdf")
    assert_same_forward(tmp_path / "ours.hdf", tmp_path / "returnn.hdf")


# ---------------------------------------------------------------- an attention encoder-decoder from RETURNN

@pytest.fixture(scope="module")
def returnn_attention(tmp_path_factory, data) -> Path:
    d = tmp_path_factory.mktemp("returnn_attention")
    proc = run_returnn(d, write_config(d, data, "att", ATTENTION))
    assert (d / "model.002.index").exists(), describe(proc)
    return d


def test_returnn_attention_model_continues_here(tmp_path, data, returnn_attention):
    ours_cfg = copy_model_dir(returnn_attention, tmp_path / "ours", "att", data, ATTENTION)
    theirs_cfg = copy_model_dir(returnn_attention, tmp_path / "returnn", "att", data, ATTENTION)
    proc = run_ours(ours_cfg, "++num_epochs", 3)
    run_returnn(tmp_path / "returnn", theirs_cfg, "++num_epochs", 3)
    continued_epoch_checks(tmp_path / "ours", tmp_path / "returnn", proc.stdout)


def test_eval_and_search_here_of_a_returnn_attention_model(tmp_path, data, returnn_attention):
    cfg = write_config(tmp_path, data, "att", ATTENTION)
    ckpt = returnn_attention / "model.002"
    proc = run_ours(cfg, "++task", "eval", "++load", ckpt)
    assert abs(score_line(proc.stdout, 2) - lr_file(returnn_attention / "lr.txt")[2].error["dev_score"]) < 1e-5
    common = ["++task", "search", "++load", ckpt, "++search_data", "dev", "++search_output_file_format", "py"]
    run_ours(cfg, *common, "++search_output_file", tmp_path / "ours.py")
    run_returnn(tmp_path, cfg, *common, "++search_output_file", tmp_path / "returnn.py")
    # the output layer still has the beam: both write {tag: [(score, hypothesis), ...]} (RETURNN's format)
    ours = ast.literal_eval((tmp_path / "ours.py").read_text())
    theirs = ast.literal_eval((tmp_path / "returnn.py").read_text())
    assert sorted(ours) == sorted(theirs) and len(ours) == 50
    clear = 0
    for tag, beam in theirs.items():
        beam, mine = sorted(beam, reverse=True), sorted(ours[tag], reverse=True)
        assert len(mine) == len(beam) and abs(mine[0][0] - beam[0][0]) < 1e-4, (tag, mine, beam)
        if len(beam) > 1 and beam[0][0] - beam[1][0] < 1e-4:
            continue  # a near tie: the engines' last digits may decide it either way
        clear += 1
        assert mine[0][1] == beam[0][1], (tag, mine, beam)
    assert clear >= 40


def test_preload_prefix_inside_a_rec_unit(data, returnn_attention):
    """RETURNN's ``prefix`` matches anywhere in the name: ``output/rec/pre_s/...`` <- ``output/rec/s/...``."""
    from returnn.tf.preload import preload_from_files
    from returnn.tf.returnn_params import returnn_param_values
    body = ATTENTION.replace('"s": {', '"pre_s": {').replace('["s", ', '["pre_s", ')
    assert body.count('"pre_s"') == 3
    with our_network(body, {}) as net:
        spec = {"a": {"filename": str(returnn_attention / "model.002"), "prefix": "pre_"}}
        assert preload_from_files(spec, net, starting_training=False) == 3
        values, stored = returnn_param_values(net), checkpoint_values(returnn_attention / "model.002")
    for name in ("W", "W_re", "b"):
        np.testing.assert_array_equal(values["output/rec/pre_s/rec/" + name], stored["output/rec/s/rec/" + name])
