"""Outputs never over inputs, and checked before the work (issue 28): forward's ``output_file``,
``search_output_file``, hdf_dump layers' files, the learning-rate file, the log and the model
prefix are compared with the run's inputs (config, data files, checkpoints) by device and inode
(the same path, a symbolic or hard link); a directory or a read-only place is named at start-up.
Each is one line naming the key and the file, exit 2, and the input is untouched."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import h5py
import numpy as np
import pytest

from helpers import PYTHON, REPO, assert_one_line_error, child_env, describe, run_rnn, write_config

FORWARD = '''#!rnn.py
task = "forward"
eval = {"class": "HDFDataset", "files": [%(data)r]}
num_inputs = 3
num_outputs = {"classes": [4, 1]}
network = {"output": {"class": "softmax", "from": "data", "n_out": 4, "is_output_layer": True}%(dump)s}
allow_random_model_init = True
model = %(model)r
forward_batch_size = 1000
'''


def write_hdf(path: Path, n: int = 6) -> str:
    rng = np.random.RandomState(0)
    lens = rng.randint(2, 6, size=n)
    with h5py.File(path, "w") as f:
        f["inputs"] = rng.randn(int(lens.sum()), 3).astype(np.float32)
        f["targets/data/classes"] = rng.randint(0, 4, size=int(lens.sum())).astype(np.int32)
        f.require_group("targets/size").attrs["classes"] = [4, 1]
        f["seqLengths"] = np.stack([lens, lens], axis=1).astype(np.int32)
        f["seqTags"] = np.array([b"seq-%i" % i for i in range(n)])
    return str(path)


def digest(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.fixture
def setup(tmp_path):
    data = write_hdf(tmp_path / "eval.hdf")
    config = write_config(tmp_path / "fwd.config", FORWARD % {"data": data, "model": str(tmp_path / "m" / "model"),
                                                              "dump": ""})
    return {"data": data, "config": config, "dir": tmp_path, "before": {p: digest(p) for p in (data, config)}}


def _untouched(setup) -> None:
    assert {p: digest(p) for p in setup["before"]} == setup["before"]
    assert not list(setup["dir"].glob("*.tmp-*")) and not list(setup["dir"].glob(".*.tmp-*"))


@pytest.mark.parametrize("how", ["same-path", "symlink", "hardlink", "relative-path"])
def test_forward_output_over_its_input_data_is_refused(setup, how):
    data = Path(setup["data"])
    target = {"same-path": data, "symlink": setup["dir"] / "link.hdf", "hardlink": setup["dir"] / "hard.hdf",
              "relative-path": Path(os.path.relpath(data, REPO))}[how]
    if how == "symlink":
        target.symlink_to(data)
    if how == "hardlink":
        os.link(data, target)
    proc = run_rnn([setup["config"], "++output_file", target])
    assert_one_line_error(proc, "config key 'output_file' names %s, which is a data file of dataset eval (HDFDataset): "
                                "forward would replace it" % target)
    assert "forwarded" not in proc.stdout
    _untouched(setup)


def test_forward_output_over_the_config_is_refused(setup):
    proc = run_rnn([setup["config"], "++output_file", setup["config"]])
    assert_one_line_error(proc, "config key 'output_file' names %s, which is the config file" % setup["config"])
    _untouched(setup)


def test_forward_output_that_is_a_directory_is_named_before_the_pass(setup):
    target = setup["dir"] / "out.hdf"
    target.mkdir()
    proc = run_rnn([setup["config"], "++output_file", target])
    assert_one_line_error(proc, "config key 'output_file': %s is a directory, not a file" % target)



@pytest.mark.parametrize("kind", ["fifo", "device", "trailing-slash"])
def test_forward_output_that_is_no_regular_file_is_refused(setup, kind):
    """A FIFO or a device at the output's name would be replaced by the rename that finishes the
    output (as root, output_file = /dev/null replaced the device node); 'out/' names a directory."""
    import stat
    target = setup["dir"] / ("out.%s" % kind)
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "device":
        if os.geteuid() != 0:
            pytest.skip("mknod needs root")
        os.mknod(target, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a /dev/null of our own
    arg = str(target) + ("/" if kind == "trailing-slash" else "")
    proc = run_rnn([setup["config"], "++output_file", arg])
    expected = {"fifo": "is a FIFO, not a regular file: forward would replace it",
                "device": "is a device, not a regular file: forward would replace it",
                "trailing-slash": "is a directory, not a file"}[kind]
    assert_one_line_error(proc, "config key 'output_file': %s %s" % (arg, expected))
    if kind != "trailing-slash":
        assert not stat.S_ISREG(os.lstat(target).st_mode)
    _untouched(setup)


@pytest.mark.parametrize("over", ["log", "module"])
def test_forward_output_over_its_log_or_an_imported_module_is_refused(setup, over):
    """The log is an output of every task (not only training); a Python module the config imports
    is an input like the config itself."""
    module = setup["dir"] / "mylib.py"
    module.write_text("X = 1\n")
    setup["config"].write_text(setup["config"].read_text() + "import sys\nsys.path.insert(0, %r)\nimport mylib\n"
                               % str(setup["dir"]))
    setup["before"] = {p: digest(p) for p in (setup["data"], setup["config"], module)}
    log = setup["dir"] / "fwd.log"
    target = log if over == "log" else module
    proc = run_rnn([setup["config"], "++log", log, "++output_file", target])
    if over == "log":
        assert_one_line_error(proc, "config key 'log' and config key 'output_file' name the same file %s" % log)
        assert log.read_bytes()[:4] != b"\x89HDF"
    else:
        assert_one_line_error(proc, "config key 'output_file' names %s, which is the Python module mylib the run "
                                    "imported: forward would replace it" % module)
    _untouched(setup)


def test_tools_never_replace_a_fifo_or_device(tmp_path):
    os.mkfifo(tmp_path / "out.fifo")
    data = write_hdf(tmp_path / "a.hdf")
    proc = subprocess.run([PYTHON, "tools/hdf_dump.py", data, str(tmp_path / "out.fifo")], cwd=str(REPO),
                          env=child_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "out.fifo is a FIFO, not a regular file" in proc.stderr, describe(proc)
    from returnn.util.safe_files import UnsafePathError, atomic_write_bytes
    with pytest.raises(UnsafePathError, match="is a FIFO, not a regular file"):
        atomic_write_bytes(str(tmp_path / "out.fifo"), b"x")  # learning-rate file, search output, plots
    assert (tmp_path / "out.fifo").is_fifo()


def _can_mount() -> bool:
    return os.geteuid() == 0 and shutil.which("mount") is not None


@pytest.mark.skipif(not _can_mount(), reason="needs root to mount a read-only file system")
def test_forward_output_on_a_read_only_file_system_is_named_before_the_pass(setup):
    ro = setup["dir"] / "ro"
    ro.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(ro)]).returncode != 0:
        pytest.skip("mount -t tmpfs failed (no CAP_SYS_ADMIN in this container)")
    try:
        proc = run_rnn([setup["config"], "++output_file", ro / "out.hdf"])
    finally:
        subprocess.run(["umount", str(ro)])
    line = assert_one_line_error(proc, "config key 'output_file': directory %s is not writable: Read-only file system"
                                       % ro)
    assert "forwarded" not in proc.stdout, line


def test_hdf_dump_layer_over_the_input_and_over_output_file_are_refused(setup):
    dump = ', "dump": {"class": "hdf_dump", "from": "output", "filename": %r, "is_output_layer": True}'
    config = write_config(setup["dir"] / "dump.config", FORWARD % {
        "data": setup["data"], "model": str(setup["dir"] / "m" / "model"), "dump": dump % setup["data"]})
    proc = run_rnn([config])
    assert_one_line_error(proc, "layer 'dump' (hdf_dump) names %s, which is a data file of dataset eval" % setup["data"])
    out = setup["dir"] / "out.hdf"
    config.write_text(FORWARD % {"data": setup["data"], "model": str(setup["dir"] / "m" / "model"),
                                 "dump": dump % str(out)})
    proc = run_rnn([config, "++output_file", out])
    assert_one_line_error(proc, "config key 'output_file' and layer 'dump' (hdf_dump) name the same file %s" % out)
    _untouched(setup)


def test_forward_without_forward_batch_size_is_refused_as_in_returnn(setup):
    """RETURNN's TF task forward raises 'forward_batch_size not set' (it never falls back to batch_size or
    eval_batch_size): one line here, nothing written."""
    out = setup["dir"] / "out.hdf"
    proc = run_rnn([setup["config"], "++output_file", out, "++forward_batch_size", "0", "++eval_batch_size", "7"])
    assert_one_line_error(proc, "task 'forward' needs forward_batch_size")
    assert not out.exists()
    _untouched(setup)


def test_forward_still_writes_a_new_output(setup):
    out = setup["dir"] / "out.hdf"
    proc = run_rnn([setup["config"], "++output_file", out])
    assert proc.returncode == 0, describe(proc)
    with h5py.File(out, "r") as f:
        assert len(f["seqTags"]) == 6
    # an existing output file stops the task, as RETURNN's forward_to_hdf asserts (nothing written)...
    proc = run_rnn([setup["config"], "++output_file", out])
    assert_one_line_error(proc, "config key 'output_file': %s exists; set forward_override_hdf_output = True" % out)
    # ... unless forward_override_hdf_output (RETURNN deletes it first)
    proc = run_rnn([setup["config"], "++output_file", out, "++forward_override_hdf_output", "True"])
    assert proc.returncode == 0, describe(proc)


TRAIN = '''#!rnn.py
train = {"class": "HDFDataset", "files": [%(data)r]}
num_inputs = 3
num_outputs = {"classes": [4, 1]}
network = {"output": {"class": "softmax", "loss": "ce", "from": "data"}}
learning_rate = 0.01
num_epochs = 1
'''


@pytest.mark.parametrize("key", ["learning_rate_file", "log"])
@pytest.mark.parametrize("over", ["config", "data"])
def test_training_outputs_over_inputs_are_refused(tmp_path, key, over):
    data = write_hdf(tmp_path / "train.hdf")
    config = write_config(tmp_path / "t.config", TRAIN % {"data": data})
    before = {p: digest(p) for p in (data, config)}
    target = {"config": config, "data": data}[over]
    args = {"model": tmp_path / "model", "learning_rate_file": tmp_path / "lr.data", "log": tmp_path / "t.log"}
    args[key] = target
    proc = run_rnn([config] + [a for k, v in args.items() for a in ("++" + k, v)])
    what = "the config file" if over == "config" else "a file named in dataset 'train' of the config"
    assert_one_line_error(proc, "config key %r names %s, which is %s" % (key, target, what))
    assert {p: digest(p) for p in before} == before
    assert not list(tmp_path.glob("model.00*"))


def test_model_prefix_that_would_overwrite_an_input_is_refused(tmp_path):
    data = write_hdf(tmp_path / "x.001.index")  # a data file that looks like the checkpoint of model 'x'
    config = write_config(tmp_path / "t.config", TRAIN % {"data": data})
    proc = run_rnn([config, "++model", tmp_path / "x", "++learning_rate_file", tmp_path / "lr.data"])
    assert_one_line_error(proc, "config key 'model' (%s) makes the training write %s, which is a file named in "
                                "dataset 'train'" % (tmp_path / "x", data))


SEARCH = '''#!rnn.py
dev = {"class": "TaskNumberBaseConvertDataset", "num_seqs": 4, "fixed_random_seed": 42}
extern_data = {"data": {"sparse": True, "dim": 8}, "classes": {"sparse": True, "dim": 2}}
network = {
    "input_embed": {"class": "linear", "activation": None, "from": "data", "n_out": 8},
    "input_last": {"class": "reduce", "mode": "mean", "axes": "T", "from": "input_embed"},
    "output": {"class": "rec", "from": [], "max_seq_len": 5, "unit": {
        "output_embed": {"class": "linear", "activation": None, "from": "output", "n_out": 4},
        "prob": {"class": "softmax", "from": ["prev:output_embed", "base:input_last"], "target": "classes0",
                 "loss": "ce"},
        "output": {"class": "choice", "from": "prob", "target": "classes0", "beam_size": 2},
        "end": {"class": "compare", "from": "output", "value": 2}}, "target": "classes0"},
    "target_with_eos_": {"class": "reinterpret_data", "from": "data:classes", "increase_sparse_dim": 1},
    "target_with_eos": {"class": "postfix_in_time", "postfix": 2, "from": "target_with_eos_",
                        "register_as_extern_data": "classes0"},
}
allow_random_model_init = True
search_output_file_format = "py"
'''


def test_search_output_over_the_config_is_refused(tmp_path):
    config = write_config(tmp_path / "s.config", SEARCH)
    before = digest(config)
    proc = run_rnn([config, "++task", "search", "++model", tmp_path / "model", "++search_output_file", config,
                    "++search_data", "dev"])
    assert_one_line_error(proc, "config key 'search_output_file' names %s, which is the config file" % config)
    assert digest(config) == before


def test_hdf_dump_tool_refuses_to_write_over_its_input(tmp_path):
    data = write_hdf(tmp_path / "a.hdf")
    before = digest(data)
    proc = subprocess.run([PYTHON, "tools/hdf_dump.py", data, data], cwd=str(REPO), env=child_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "hdf_dump: error: the output %s is a data file of dataset train (HDFDataset)" % data in proc.stderr
    assert digest(data) == before
