"""Bad input gets ONE clear line: ``rnn.py`` exits with code 2, stderr holds exactly one non-empty
line (``ERROR: ...``) naming the file, config key or layer, and no traceback; with
``++log_verbosity 6`` the traceback is shown as well.

Each case runs ``rnn.py`` twice (default verbosity and 5), both at once, each with a timeout.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import h5py
import numpy as np
import pytest

from helpers import PYTHON, REPO, child_env

TIMEOUT = 180

BASE_CONFIG = '''#!rnn.py
task = "train"
train = {"class": "Task12AXDataset", "num_seqs": 20}
num_inputs = 9
num_outputs = 2
batch_size = 500
max_seqs = 5
network = {
    "hidden": {"class": "linear", "activation": "tanh", "n_out": 8, "from": "data"},
    "output": {"class": "softmax", "loss": "ce", "from": "hidden"},
}
learning_rate = 0.01
num_epochs = 1
tf_session_opts = {"intra_op_parallelism_threads": 1, "inter_op_parallelism_threads": 1}
'''

SYNTAX_ERROR_CONFIG = '''#!rnn.py
task = "train"
network = {"output": {"class": "softmax", "loss": "ce",
num_epochs = 1
'''

NO_NETWORK_CONFIG = BASE_CONFIG.split("network = {")[0] + "num_epochs = 1\n"


def _write_hdf(path: Path, with_seq_lengths: bool = True) -> None:
    """A small RETURNN-layout HDF file: dense 'data' (dim 4), sparse 'classes' (dim 3)."""
    rng = np.random.RandomState(0)
    lengths = rng.randint(5, 15, size=40)
    total = int(lengths.sum())
    with h5py.File(path, "w") as f:
        f.attrs["inputPattSize"] = 4
        f.create_dataset("inputs", data=rng.randn(total, 4).astype("float32"))
        if with_seq_lengths:
            f.create_dataset("seqLengths", data=np.stack([lengths, lengths], 1).astype("int32"))
        f.create_dataset("seqTags", data=np.array([b"seq-%i" % i for i in range(len(lengths))]))
        targets = f.create_group("targets")
        targets.create_group("data").create_dataset("classes", data=rng.randint(0, 3, size=total).astype("int32"))
        targets.create_group("size").attrs["classes"] = np.array([3, 1], dtype="int64")
        targets.create_group("labels")


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Dict[str, Path]:
    """Config and data files of all cases."""
    d = tmp_path_factory.mktemp("bad_input")
    out = {"dir": d, "base": d / "base.config", "syntax": d / "syntax_error.config",
           "no_network": d / "no_network.config", "good_hdf": d / "good.hdf", "not_hdf": d / "not_hdf.hdf",
           "truncated_hdf": d / "truncated.hdf", "no_seqlengths_hdf": d / "no_seqlengths.hdf",
           "regular_file": d / "a_regular_file"}
    out["base"].write_text(BASE_CONFIG)
    out["syntax"].write_text(SYNTAX_ERROR_CONFIG)
    out["no_network"].write_text(NO_NETWORK_CONFIG)
    _write_hdf(out["good_hdf"])
    out["not_hdf"].write_text("seq-0 1 2 3\nseq-1 4 5 6\n")
    raw = out["good_hdf"].read_bytes()
    out["truncated_hdf"].write_bytes(raw[:len(raw) // 2])
    _write_hdf(out["no_seqlengths_hdf"], with_seq_lengths=False)
    out["regular_file"].write_text("not a directory\n")
    # The uncut file really is readable, so the truncation is what the error is about.
    from returnn.datasets.hdf import HDFDataset
    dataset = HDFDataset(files=[str(out["good_hdf"])])
    assert dataset.num_corpus_seqs == 40
    dataset.close()
    return out


def _case_args(case: str, f: Dict[str, Path]) -> Tuple[List[str], List[str]]:
    """(rnn.py arguments, substrings the error line must contain)."""
    d, base = f["dir"], str(f["base"])
    model = ["++model", str(d / ("model-" + case) / "model")]
    if case == "config_syntax_error":
        return [str(f["syntax"])], [str(f["syntax"]) + ":3:", "syntax error"]
    if case == "config_file_missing":
        missing = str(d / "no_such.config")
        return [missing], ["config file not found", missing]
    if case == "unknown_layer_class":
        net = "{'output': {'class': 'no_such_layer', 'from': 'data'}}"
        return [base, "++network", net] + model, ["layer 'output'", "unknown layer class 'no_such_layer'"]
    if case == "from_unknown_layer":
        net = "{'output': {'class': 'softmax', 'loss': 'ce', 'from': 'hiden'}}"
        return [base, "++network", net] + model, ["layer 'output'", "unknown layer 'hiden'"]
    if case == "dependency_cycle":
        net = ("{'a': {'class': 'linear', 'n_out': 4, 'from': 'b'}, 'b': {'class': 'linear', 'n_out': 4, 'from': 'a'},"
               " 'output': {'class': 'softmax', 'loss': 'ce', 'from': 'a'}}")
        return [base, "++network", net] + model, ["dependency cycle", "a -> b -> a"]
    if case == "missing_network":
        return [str(f["no_network"])] + model, ["'network'"]
    if case == "unknown_dataset_class":
        return [base, "++train", "{'class': 'NoSuchDataset'}"] + model, ["unknown dataset class 'NoSuchDataset'"]
    if case == "hdf_missing":
        missing = str(d / "missing.hdf")
        return [base, "++train", missing] + model, ["file not found", missing]
    if case == "hdf_not_hdf":
        return [base, "++train", str(f["not_hdf"])] + model, [str(f["not_hdf"]), "not an HDF5 file"]
    if case == "hdf_truncated":
        return [base, "++train", str(f["truncated_hdf"])] + model, [str(f["truncated_hdf"]), "truncated"]
    if case == "hdf_missing_seqlengths":
        return [base, "++train", str(f["no_seqlengths_hdf"])] + model, [str(f["no_seqlengths_hdf"]), "'seqLengths'"]
    if case == "input_dim_mismatch":
        return [base, "++num_inputs", "7"] + model, ["input dim", "num_inputs", "7", "9", "train"]
    if case == "non_integer_num_epochs":
        return [base, "++num_epochs", "2.5"] + model, ["'num_epochs'", "2.5"]
    if case == "unknown_horovod_reduce_type":
        return [base, "++horovod_reduce_type", "sum"] + model, ["'horovod_reduce_type'", "'sum'"]
    if case == "model_dir_not_creatable":
        blocked = f["regular_file"] / "sub" / "model"
        return [base, "++model", str(blocked)], ["'model'", str(f["regular_file"]), "not a directory"]
    if case == "learning_rate_file_dir_not_creatable":
        blocked = f["regular_file"] / "lr.data"
        return [base, "++learning_rate_file", str(blocked)] + model, ["'learning_rate_file'", str(f["regular_file"])]
    if case == "log_file_not_writable":
        blocked = f["regular_file"] / "train.log"
        return [base, "++log", str(blocked)] + model, ["'log'", str(blocked)]
    raise AssertionError(case)


CASES = ["config_syntax_error", "config_file_missing", "unknown_layer_class", "from_unknown_layer",
         "dependency_cycle", "missing_network", "unknown_dataset_class", "hdf_missing", "hdf_not_hdf",
         "hdf_truncated", "hdf_missing_seqlengths", "input_dim_mismatch", "non_integer_num_epochs",
         "unknown_horovod_reduce_type", "model_dir_not_creatable", "learning_rate_file_dir_not_creatable",
         "log_file_not_writable"]


def _run_both(args: Sequence[str], verbose_args: Sequence[str]
              ) -> Tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    """Runs ``rnn.py ARGS`` and ``rnn.py VERBOSE_ARGS ++log_verbosity 6`` side by side (their own
    model paths, so the model lock of one run never stops the other)."""
    env = child_env()
    del env["TF_CPP_MIN_LOG_LEVEL"]  # the CLI's own defaults are under test
    cmds = [[PYTHON, str(REPO / "rnn.py")] + list(args), [PYTHON, str(REPO / "rnn.py")] + list(verbose_args) +
            ["++log_verbosity", "6"]]
    procs = [subprocess.Popen(cmd, cwd=str(REPO), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for cmd in cmds]
    results = []
    for cmd, proc in zip(cmds, procs):
        try:
            out, err = proc.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
                p.communicate()
            pytest.fail("rnn.py did not end within %i s: %s" % (TIMEOUT, cmd))
        results.append(subprocess.CompletedProcess(cmd, proc.returncode, out, err))
    return results[0], results[1]


@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_one_line_exit_2(files, case):
    args, expected = _case_args(case, files)
    own_model = "%smodel-%s%s" % (os.sep, case, os.sep)
    plain, verbose = _run_both(args, [a.replace(own_model, "%smodel-%s-verbose%s" % (os.sep, case, os.sep))
                                      for a in args])
    shown = "exit code %s\n--- stdout\n%s\n--- stderr\n%s" % (plain.returncode, plain.stdout[-2000:],
                                                               plain.stderr[-3000:])
    assert plain.returncode == 2, shown
    lines = [line for line in plain.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, shown
    line = lines[0]
    assert line.startswith("ERROR: "), shown
    for text in expected:
        assert text in line, "%r not in %r" % (text, line)
    assert "Traceback" not in plain.stderr + plain.stdout
    # log_verbosity 6: same exit code and line, with the traceback before it.
    assert verbose.returncode == 2, verbose.stderr[-3000:]
    assert "Traceback (most recent call last)" in verbose.stderr, verbose.stderr[-3000:]
    assert [ln for ln in verbose.stderr.splitlines() if ln.strip()][-1] == line
