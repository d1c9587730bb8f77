"""Files that do harm (issue 28): the engine never writes through a symbolic link (or into a file
with other hard links), and only a file that is a config by its form is run as Python code
(docs/security.md, "Which files are run, which are written").

Every case plants a real link or data file in a real directory and runs the real code (rnn.py and
the tools as subprocesses); the victim file must keep its content, the marker ``PWNED`` must not
appear."""
from __future__ import annotations

import gzip
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from helpers import PYTHON, REPO, TINY_12AX, assert_one_line_error, child_env, describe, run_rnn, train_args, \
    write_config
from returnn.config import Config, config_form
from returnn.errors import ConfigError
from returnn.util.run_lock import ModelLock
from returnn.util.safe_files import UnsafePathError, atomic_write_bytes, create_fresh, open_append

VICTIM_TEXT = "precious: must never be overwritten\n"


@pytest.fixture
def victim(tmp_path):
    """A file outside the experiment directory that a planted link points to; checked unchanged."""
    path = tmp_path / "elsewhere" / "victim.txt"
    path.parent.mkdir()
    path.write_text(VICTIM_TEXT)
    yield path
    assert path.read_text() == VICTIM_TEXT, "a file was written through a planted link"


@pytest.fixture
def pwn(tmp_path):
    """(marker path, Python code that creates it); asserts afterwards that nothing ran it."""
    marker = tmp_path / "PWNED"
    yield marker, "open(%r, 'w').write('x')\n" % str(marker)
    assert not marker.exists(), "a data file was run as code"


def run_tool(tool: str, *args) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, os.path.join(REPO, "tools", tool)] + [str(a) for a in args], cwd=str(REPO),
                          env=child_env({"OMP_NUM_THREADS": "1"}), capture_output=True, text=True, timeout=300)


# ---------------------------------------------------------------- writing: links and hard links

@pytest.mark.parametrize("use_flock", [True, False])
def test_lock_file_planted_as_symlink_is_refused_and_target_untouched(tmp_path, victim, use_flock):
    model = tmp_path / "exp" / "model"
    model.parent.mkdir()
    os.symlink(victim, str(model) + ".lock")
    with pytest.raises(ConfigError, match=r"lock file .*model\.lock is a symbolic link \(to .*victim\.txt\).*"
                                          r"never writes through symbolic links"):
        ModelLock(str(model), use_flock=use_flock).acquire()
    os.symlink(tmp_path / "missing", str(model.parent / "dangling") + ".lock")  # a dangling link too
    with pytest.raises(ConfigError, match="is a symbolic link"):
        ModelLock(str(model.parent / "dangling"), use_flock=use_flock).acquire()
    assert not (tmp_path / "missing").exists()


@pytest.mark.parametrize("use_flock", [True, False])
def test_lock_file_hard_linked_to_another_file_is_refused(tmp_path, victim, use_flock):
    model = tmp_path / "model"
    os.link(victim, str(model) + ".lock")
    with pytest.raises(ConfigError, match="has 2 hard links"):
        ModelLock(str(model), use_flock=use_flock).acquire()


def test_lock_file_fifo_is_refused_without_blocking(tmp_path):
    model = tmp_path / "model"
    os.mkfifo(str(model) + ".lock")
    with pytest.raises(ConfigError, match="is not a regular file"):
        ModelLock(str(model)).acquire()


def test_training_with_planted_lock_link_is_one_line_and_writes_nothing(tmp_path, victim):
    config = write_config(tmp_path / "tiny.config", TINY_12AX)
    os.symlink(victim, str(tmp_path / "model.lock"))
    proc = run_rnn(train_args(config, tmp_path), timeout=300)
    assert_one_line_error(proc, "config key 'model': lock file %s is a symbolic link" % (tmp_path / "model.lock"))
    assert not (tmp_path / "model.001.index").exists()


def test_temp_names_planted_as_links_are_replaced_not_followed(tmp_path, victim):
    """The learning-rate file's ``<file>.tmp-<pid>``, a search output's temporary file, and
    ``atomic_write_bytes`` in general: a link at the temporary name is removed, a new file created."""
    from returnn.learning_rate_control import LearningRateControl
    from returnn.tf.search_task import write_hypotheses
    lr_file = tmp_path / "lr.data"
    os.symlink(victim, "%s.tmp-%i" % (lr_file, os.getpid()))
    control = LearningRateControl(default_learning_rate=0.5, filename=str(lr_file))
    control.get_learning_rate_for_epoch(1)
    control.save()
    assert "learningRate=0.5" in lr_file.read_text() and not lr_file.is_symlink()
    out = tmp_path / "hyps.txt"
    os.symlink(victim, "%s.tmp-%i" % (out, os.getpid()))
    write_hypotheses(str(out), [("seq-0", "a b")], "txt")
    assert out.read_text() == "a b\n"  # RETURNN's txt: the hypothesis alone
    assert not os.path.lexists("%s.tmp-%i" % (out, os.getpid()))


def test_final_name_that_is_a_link_is_replaced_not_written_through(tmp_path, victim):
    out = tmp_path / "lr.data"
    os.symlink(victim, out)
    atomic_write_bytes(str(out), b"{}\n")
    assert not out.is_symlink() and out.read_bytes() == b"{}\n"


def test_checkpoint_temp_prefix_planted_as_link_is_not_followed(tmp_path, victim):
    """A checkpoint is written in a new private directory ``<model>.NNN.tmp-<pid>``: a link planted
    at that name (to a directory or a file) is removed, the checkpoint written and complete."""
    from returnn.tf.checkpoint import CheckpointManager, is_complete
    victim_dir = tmp_path / "elsewhere" / "dir"
    victim_dir.mkdir()
    model = tmp_path / "model"
    os.symlink(victim_dir, "%s.001.tmp-%i" % (model, os.getpid()))
    os.symlink(victim, "%s.002.tmp-%i" % (model, os.getpid()))
    manager = CheckpointManager(str(model))
    for epoch in (1, 2):
        prefix = manager.save(epoch)
        assert is_complete(prefix)
    assert list(victim_dir.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir() if ".tmp-" in p.name) == []


def test_log_file_planted_as_link_is_one_line_error(tmp_path, victim):
    config = write_config(tmp_path / "tiny.config", TINY_12AX)
    log = tmp_path / "train.log"
    os.symlink(victim, log)
    proc = run_rnn([str(config), "++model", str(tmp_path / "model"), "++log", str(log)], timeout=300)
    assert_one_line_error(proc, "config key 'log': cannot write log file", "is a symbolic link")
    with pytest.raises(UnsafePathError, match="has 2 hard links"):
        hard = tmp_path / "hard.log"
        os.link(victim, hard)
        open_append(str(hard))


def test_create_fresh_never_opens_an_existing_name(tmp_path, victim):
    tmp = tmp_path / "x.tmp-1"
    os.symlink(victim, tmp)
    fd = create_fresh(str(tmp))
    os.write(fd, b"new")
    os.close(fd)
    assert tmp.read_bytes() == b"new" and not tmp.is_symlink()


def test_plot_tool_output_link_is_replaced(tmp_path, victim):
    from returnn.learning_rate_control import LearningRateControl
    lr_file = tmp_path / "lr.data"
    control = LearningRateControl(default_learning_rate=0.5, filename=str(lr_file))
    control.set_epoch_error(1, {"train_score": 1.0})
    control.save()
    out = tmp_path / "lr.png"
    os.symlink(victim, out)
    proc = run_tool("plot-learning-curves.py", lr_file, "-o", out)
    assert proc.returncode == 0, describe(proc)
    assert not out.is_symlink() and out.read_bytes()[:4] == b"\x89PNG"



# ---------------------------------------------------------------- a directory reached through another user's link
OTHER_UID = 65534  # nobody


@pytest.fixture
def planted_dir(tmp_path):
    """``shared/exp`` -> ``victim/``: a directory link planted by another user in a shared directory.
    Returns the link; nothing may appear in (or change in) the victim directory."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("planting a link owned by another user needs root (lchown)")
    victim_dir = tmp_path / "victim"
    victim_dir.mkdir()
    (victim_dir / "log").write_text(VICTIM_TEXT)
    (tmp_path / "shared").mkdir()
    link = tmp_path / "shared" / "exp"
    os.symlink(victim_dir, link)
    os.lchown(link, OTHER_UID, OTHER_UID)
    yield link
    assert sorted(p.name for p in victim_dir.iterdir()) == ["log"], "a file was written through another user's link"
    assert (victim_dir / "log").read_text() == VICTIM_TEXT


def _refusal(link) -> str:
    return "path component %s is a symbolic link (to %s) owned by another user" % (link, os.readlink(link))


@pytest.mark.parametrize("key", ["model", "log", "learning_rate_file", "tf_log_dir", "model-below"])
def test_directory_through_another_users_link_is_refused(tmp_path, planted_dir, key):
    """Each output of a training reached through the link (also deeper below it) is one line
    before anything is written; the same link owned by the user (or root) is followed as before."""
    config = write_config(tmp_path / "tiny.config", TINY_12AX)
    args = {"model": tmp_path / "model", "learning_rate_file": tmp_path / "lr.data", "log": tmp_path / "train.log",
            "tf_log_dir": tmp_path / "tf-log"}
    target = {"model": planted_dir / "model", "log": planted_dir / "log", "learning_rate_file": planted_dir / "lr.data",
              "tf_log_dir": planted_dir, "model-below": planted_dir / "a" / "b" / "model"}[key]
    args[key.split("-")[0]] = target
    proc = run_rnn([config] + [a for k, v in args.items() for a in ("++" + k, str(v))], timeout=300)
    assert_one_line_error(proc, "config key '%s'" % key.split("-")[0], _refusal(planted_dir),
                          "the engine never writes through another user's link")


def test_outputs_of_forward_and_tools_through_another_users_link_are_refused(tmp_path, planted_dir):
    import h5py
    data = tmp_path / "in.hdf"
    with h5py.File(data, "w") as f:
        f["inputs"] = np.zeros((3, 2), np.float32)
        f["seqLengths"] = np.array([[3]], np.int32)
        f["seqTags"] = np.array([b"s"])
    proc = run_tool("hdf_dump.py", data, planted_dir / "out.hdf")
    assert proc.returncode == 2 and _refusal(planted_dir) in proc.stderr, describe(proc)
    config = write_config(tmp_path / "fwd.config", "#!rnn.py\ntask = 'forward'\neval = {'class': 'HDFDataset', "
                          "'files': [%r]}\nnum_inputs = 2\nnum_outputs = 3\nallow_random_model_init = True\n"
                          "network = {'output': {'class': 'softmax', 'from': 'data', 'n_out': 3}}\n" % str(data))
    proc = run_rnn([config, "++model", tmp_path / "model", "++output_file", planted_dir / "out.hdf"], timeout=300)
    assert_one_line_error(proc, "config key 'output_file'", _refusal(planted_dir))
    from returnn.util.safe_files import atomic_write_bytes
    with pytest.raises(UnsafePathError, match="owned by another user"):
        atomic_write_bytes(str(planted_dir / "lr.png"), b"x")  # search outputs, plots, the learning-rate file


def test_own_and_roots_directory_links_are_followed(tmp_path):
    from returnn.util.safe_files import foreign_link
    real = tmp_path / "real"
    real.mkdir()
    os.symlink(real, tmp_path / "mine")
    os.symlink("mine/../real", tmp_path / "relative")
    assert foreign_link(str(tmp_path / "mine" / "sub" / "dir")) is None
    assert foreign_link(str(tmp_path / "relative")) is None


# ---------------------------------------------------------------- running: only configs by their form

@pytest.mark.parametrize("name,first_line,form", [
    ("a.config", "#!rnn.py\n", "python"), ("a.py", "", "python"), ("a", "#!/usr/bin/env returnn\n", "python"),
    ("a.config", "", "python"), ("a.json", "", None), ("a", "", "lines"), ("a.txt", "", None), ("a.txt", "#!rnn.py\n", None),
    ("a.hdf", "#!rnn.py\n", None), ("a.gz", "", None), ("seqs.lst", "", None), ("lr.data", "#!rnn.py\n", None),
    ("model.001.data-00000-of-00001", "", None), ("a.py.tmp-123", "#!x\n", None),
    ("corpus.txt.1", "#!rnn.py\n", None), ("train.hdf.bak", "#!rnn.py\n", None), ("dev.gz.part2", "", None),
    ("exp.lst.config", "#!rnn.py\n", "python"), ("base.v2", "#!rnn.py\n", "python"),
])
def test_config_form_rule(name, first_line, form):
    content = first_line + "x = 3\n"
    if form is None:
        with pytest.raises(ConfigError, match="is a data file by its name"):
            config_form(name, content)
    else:
        assert config_form(name, content) == form
    assert config_form("a.json", '{"x": 3}') == "json" and config_form("a.txt", '{"x": 3}') == "json"
    with pytest.raises(ConfigError, match="binary data"):
        config_form("a.config", "#!rnn.py\n\0")


def test_python_without_config_form_is_not_run(tmp_path, pwn):
    marker, code = pwn
    path = tmp_path / "settings"  # no '#!' line, no .config/.py name: RETURNN's line format
    path.write_text("import os\n" + code)
    with pytest.raises(ConfigError, match=r"settings:2: expected 'key value' .* a Python config needs a '#!' first "
                                          r"line \(e\.g\. '#!rnn\.py'\) or a \.config/\.py name"):
        Config().load_file(str(path))


@pytest.mark.parametrize("name", ["corpus.txt", "feats.hdf", "notes.json", "seqs.lst", "corpus.txt.1", "train.hdf.bak"])
def test_rnn_refuses_data_files_as_configs(tmp_path, pwn, name):
    marker, code = pwn
    path = tmp_path / name
    path.write_text("#!rnn.py\n" + code)
    proc = run_rnn([str(path), "++model", str(tmp_path / "model")], timeout=300)
    assert_one_line_error(proc, "%s is a data file by its name" % path)


def _python_data_files(tmp_path: Path, code: str):
    """Data files holding Python code that would create the marker if run."""
    text = tmp_path / "corpus.txt"
    text.write_text("#!rnn.py\n" + code)
    gz = tmp_path / "corpus.txt.gz"
    with gzip.open(gz, "wt") as f:
        f.write("#!rnn.py\n" + code)
    plain_gz = tmp_path / "code.gz"
    plain_gz.write_text("#!rnn.py\n" + code)  # text in a file named .gz
    shard = tmp_path / "corpus.txt.1"
    shard.write_text("#!rnn.py\n" + code)  # a data file's suffix followed by more (a shard, a copy)
    return [text, gz, plain_gz, shard]


@pytest.mark.parametrize("tool", ["dump-dataset.py", "hdf_dump.py"])
def test_tools_never_run_a_data_file_given_as_dataset(tmp_path, pwn, tool):
    marker, code = pwn
    for path in _python_data_files(tmp_path, code):
        args = [path] + ([tmp_path / "out.hdf"] if tool == "hdf_dump.py" else [])
        proc = run_tool(tool, *args)
        lines = [l for l in proc.stderr.splitlines() if l.strip()]
        assert proc.returncode == 2 and len(lines) == 1, describe(proc)
        assert "%s is neither a config nor an HDF file" % path in lines[0], describe(proc)
        assert not (tmp_path / "out.hdf").exists()


def test_tools_still_read_configs_hdf_files_and_dicts(tmp_path):
    from returnn.datasets.hdf import SimpleHDFWriter
    hdf = tmp_path / "data.hdf"
    writer = SimpleHDFWriter(str(hdf), dim=2)
    writer.insert_batch(np.zeros((2, 3, 2), np.float32), {0: np.array([3, 2])}, ["a", "b"])
    writer.close()
    config = tmp_path / "d.config"
    config.write_text("train = {'class': 'HDFDataset', 'files': [%r]}\n" % str(hdf))  # .config without '#!'
    for arg in (hdf, config, "{'class': 'Task12AXDataset', 'num_seqs': 2}"):
        proc = run_tool("dump-dataset.py", arg)
        assert proc.returncode == 0 and "seq 0/" in proc.stdout, describe(proc)
