"""Outputs that cannot be written (``model``, ``learning_rate_file``, ``log``, ``tf_log_dir``) on a
read-only file system, or below a regular file: one line naming the key, exit 2, at start-up
(before the first epoch is trained), never a warning after hours of training.

The read-only file system is a real one: a read-only bind mount in a private user and mount
namespace (``unshare -rm``), where even root gets ``EROFS``.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from helpers import PYTHON, REPO, child_env, nonempty_lines
from test_bad_input import BASE_CONFIG as CONFIG



def _can_mount_read_only() -> bool:
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-rm", "sh", "-c", "mount --bind /tmp /tmp && mount -o remount,bind,ro /tmp"],
                          capture_output=True, timeout=30).returncode == 0


def _run(args, read_only: Path = None) -> subprocess.CompletedProcess:
    cmd = [PYTHON, "rnn.py"] + [str(a) for a in args]
    if read_only is not None:
        script = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'
        cmd = ["unshare", "-rm", "sh", "-c", script, str(read_only)] + cmd
    return subprocess.run(cmd, cwd=str(REPO), env=child_env(), capture_output=True, text=True, timeout=300)


def _outputs(tmp_path: Path, key: str, target: Path):
    """Command line args with every output in ``tmp_path/rw`` except ``key``, which goes to ``target``."""
    rw = tmp_path / "rw"
    rw.mkdir(exist_ok=True)
    paths = {"model": rw / "model", "learning_rate_file": rw / "lr.data", "log": rw / "train.log",
             "tf_log_dir": rw / "tf-log"}
    paths[key] = target
    config = tmp_path / "x.config"
    config.write_text(CONFIG)
    args = [config]
    for name, path in paths.items():
        args += ["++" + name, path]
    return args, paths


def _assert_one_line_at_startup(proc: subprocess.CompletedProcess, key: str, paths) -> None:
    text = "exit %i\n--- stdout\n%s\n--- stderr\n%s" % (proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:])
    assert proc.returncode == 2, text
    lines = nonempty_lines(proc.stderr)
    assert len(lines) == 1 and lines[0].startswith("ERROR: config key %r" % key), text
    assert "Traceback" not in proc.stderr
    assert "start epoch" not in proc.stdout, "the error came only after training started\n" + text
    assert not list(paths["model"].parent.glob("model.0*")), "a checkpoint was written"


KEYS = ["model", "learning_rate_file", "log", "tf_log_dir"]


@pytest.mark.skipif(not _can_mount_read_only(), reason="needs unshare -rm (user + mount namespaces)")
@pytest.mark.parametrize("key", KEYS)
def test_output_on_read_only_file_system_is_one_line_at_startup(tmp_path, key):
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "tf-log").mkdir()  # an existing directory on the read-only mount
    target = ro / ("tf-log" if key == "tf_log_dir" else "out")
    args, paths = _outputs(tmp_path, key, target)
    proc = _run(args, read_only=ro)
    _assert_one_line_at_startup(proc, key, paths)
    assert str(target.parent) in proc.stderr or str(target) in proc.stderr


@pytest.mark.parametrize("key", KEYS)
def test_output_below_a_regular_file_is_one_line_at_startup(tmp_path, key):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory\n")
    args, paths = _outputs(tmp_path, key, blocker / "sub" / "out")
    proc = _run(args)
    _assert_one_line_at_startup(proc, key, paths)
    assert str(blocker) in proc.stderr


def test_default_tf_log_dir_next_to_model_is_checked(tmp_path):
    """Without ``tf_log_dir``, summaries go to ``tf-log`` next to the model: a regular file there is
    named at start-up as well."""
    args, paths = _outputs(tmp_path, "tf_log_dir", tmp_path / "unused")
    i = args.index("++tf_log_dir")
    del args[i:i + 2]
    (paths["model"].parent / "tf-log").write_text("a file where the directory should be\n")
    proc = _run(args)
    _assert_one_line_at_startup(proc, "tf_log_dir", paths)
