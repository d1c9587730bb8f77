"""Ranks that disagree (issue 28): under real ``mpirun -np 2`` (MPMD: each rank its own command
line), rank 1 gets a different ``++key``. The job ends before training with one line naming rank 1
and what differs, exit code 2 on every rank, no hang, nothing trained. Same-shape differences (an
activation) would otherwise train silently; other shapes failed deep inside a broadcast."""
from __future__ import annotations

import os
import re
import subprocess
import textwrap

import numpy as np
import pytest

from helpers import BACKENDS, MPIRUN_AS_ROOT, PYTHON, REPO, child_env

CONFIG = textwrap.dedent("""\
    #!rnn.py
    task = "train"
    train = {"class": "DummyDataset", "input_dim": 5, "output_dim": 3, "num_seqs": 40, "seq_len": 10}
    batch_size = 50
    max_seqs = 5
    network = {
        "hidden": {"class": "linear", "activation": "tanh", "n_out": 8, "from": "data"},
        "output": {"class": "softmax", "loss": "ce", "from": "hidden"},
    }
    optimizer = {"class": "adam"}
    learning_rate = 0.01
    num_epochs = 1
    tf_session_opts = {"intra_op_parallelism_threads": 1, "inter_op_parallelism_threads": 1}
    """)
NET = ('{"hidden": {"class": "linear", "activation": %r, "n_out": %i, "from": "data"}, '
       '"output": {"class": "softmax", "loss": "ce", "from": "hidden"}}')


def mpirun_mpmd(tmp_path, backend: str, rank1_args, timeout: float = 300) -> subprocess.CompletedProcess:
    """``mpirun -np 1 rnn.py CONFIG ARGS : -np 1 rnn.py CONFIG ARGS RANK1_ARGS``."""
    config = tmp_path / "same.config"
    config.write_text(CONFIG)
    common = [PYTHON, os.path.join(REPO, "rnn.py"), str(config), "++use_horovod", "1", "++distributed_backend",
              backend, "++model", str(tmp_path / "model"), "++learning_rate_file", str(tmp_path / "lr.data"),
              "++log", str(tmp_path / "train.log"), "++horovod_stall_timeout", "60"]
    cmd = (["mpirun", "--oversubscribe", "--bind-to", "none", "--mca", "btl", "tcp,self", "-np", "1"] + common
           + [":", "-np", "1"] + common + list(rank1_args))
    return subprocess.run(cmd, cwd=str(REPO), env=child_env(MPIRUN_AS_ROOT), capture_output=True, text=True,
                          timeout=timeout)


CASES = [
    ("learning_rate", ["++learning_rate", "0.02"],
     r"ERROR: ranks disagree on the config: rank 1 of 2 \(host \S+\) has config key 'learning_rate' = 0\.02, rank 0 "
     r"has 0\.01 \(every rank must run the same config and network; .*\)"),
    ("activation", ["++network", NET % ("relu", 8)],
     r"ERROR: ranks disagree on the network of epoch 1: rank 1 of 2 \(host \S+\) has layer 'hidden' option "
     r"'activation' = 'relu', rank 0 has 'tanh' \(.*\)"),
    ("shape", ["++network", NET % ("tanh", 16)],
     r"ERROR: ranks disagree on the network of epoch 1: rank 1 of 2 \(host \S+\) has layer 'hidden' option "
     r"'n_out' = 16, rank 0 has 8 \(.*\)"),
    ("data", ["++extern_data", "{'data': {'dim': 6}, 'classes': {'dim': 3, 'sparse': True}}"],
     r"ERROR: ranks disagree on the config: rank 1 of 2 \(host \S+\) has config key 'extern_data' = "
     r"\{'classes': \{'dim': 3, 'sparse': True\}, 'data': \{'dim': 6\}\}, rank 0 has None \(.*\)"),
    # datasets are compared without their files (a rank may read its own shard): the rest must agree, or
    # the ranks would cut different epochs into batches (batch i goes to rank i mod N)
    ("dataset-dims", ["++train", "{'class': 'DummyDataset', 'input_dim': 6, 'output_dim': 3, 'num_seqs': 40, "
                                 "'seq_len': 10}"],
     r"ERROR: ranks disagree on the config: rank 1 of 2 \(host \S+\) has dataset 'train' option 'input_dim' = 6, "
     r"rank 0 has 5 \(.*\)"),
    ("dataset-partition", ["++train", "{'class': 'DummyDataset', 'input_dim': 5, 'output_dim': 3, 'num_seqs': 40, "
                                      "'seq_len': 10, 'partition_epoch': 2}"],
     r"ERROR: ranks disagree on the config: rank 1 of 2 \(host \S+\) has dataset 'train' option 'partition_epoch' "
     r"= 2, which rank 0 lacks \(.*\)"),
    ("dataset-class", ["++train", "{'class': 'RandomDataset', 'input_dim': 5, 'output_dim': 3, 'num_seqs': 40, "
                                  "'seq_len': 10}"],
     r"ERROR: ranks disagree on the config: rank 1 of 2 \(host \S+\) has dataset 'train' option 'class' = "
     r"'RandomDataset', rank 0 has 'DummyDataset' \(.*\)"),
]


def _params():
    """Every case with mpi4py; the activation case with Horovod too (where installed)."""
    out = [pytest.param("mpi", name, id="mpi-" + name) for name, _, _ in CASES]
    for b in BACKENDS:
        if getattr(b, "values", None) and b.values[0] == "horovod":
            out.append(pytest.param("horovod", "activation", marks=b.marks, id="horovod-activation"))
    return out


@pytest.mark.parametrize("backend,case", _params())
def test_rank_with_another_key_ends_the_job_in_one_line(tmp_path, backend, case):
    args, pattern = next((a, p) for name, a, p in CASES if name == case)
    proc = mpirun_mpmd(tmp_path, backend, args)
    out = proc.stdout + proc.stderr
    errors = [line for line in out.splitlines() if "ERROR" in line]
    assert proc.returncode == 2, out
    assert len(errors) == 1 and re.fullmatch(pattern, errors[0].strip()), out
    assert "Traceback" not in out
    assert not (tmp_path / "model.001.index").exists()
    assert "start epoch 1" not in out
    if "the network" in pattern:  # after log set-up: each rank's log file has the line too
        for log in (tmp_path / "train.log", tmp_path / "train.horovod-1-2.log"):
            assert errors[0].strip() in log.read_text(), log


def test_ranks_that_agree_train_as_before(tmp_path):
    """Equal command lines (a rank's own data files are allowed: datasets are compared without their files)."""
    proc = mpirun_mpmd(tmp_path, "mpi", [])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "model.001.index").exists()


def test_not_compared_keys_are_declared_and_canonical_values_are_exact():
    from returnn.config import Config
    from returnn.config_keys.registry import KEYS
    from returnn.distributed.agreement import NOT_COMPARED, canonical, compared_config_items, first_difference
    assert set(NOT_COMPARED) <= set(KEYS), sorted(set(NOT_COMPARED) - set(KEYS))
    assert canonical({"b": 1, "a": [1.0, (2,)]}) == canonical({"a": [1.0, (2,)], "b": 1})
    assert canonical(0.1) != canonical(0.1 + 1e-16) and canonical(True) != canonical(1)
    assert canonical(lambda x: x + 1) != canonical(lambda x: x + 2)
    assert canonical(np.arange(3)) != canonical(np.arange(3) + 1)
    items = compared_config_items(Config({"learning_rate": 0.5, "log": "mine.log", "train": {"class": "X"}}))
    assert items["config key 'learning_rate'"] == "0.5"
    assert "config key 'log'" not in items and "config key 'train'" not in items
    # an unset key equals its declared default: the ranks agree
    assert compared_config_items(Config({}))["config key 'num_epochs'"] == \
        compared_config_items(Config({"num_epochs": KEYS["num_epochs"].default}))["config key 'num_epochs'"]
    assert first_difference({"a": "1", "b": "2"}, {"a": "1", "b": "3"}) == ("b", "2", "3")
    assert first_difference({"a": "1"}, {"a": "1", "c": "x"}) == ("c", None, "x")


def test_datasets_are_compared_without_their_files():
    """A rank may read its own files (its shard): file names, file lists and caching are not compared,
    the dataset's class and every other option are, sub-datasets option by option."""
    from returnn.config import Config
    from returnn.distributed.agreement import dataset_items

    def items(rank):
        return dataset_items(Config({
            "train": {"class": "MetaDataset", "seq_list_file": "/data/list.%i.txt" % rank, "cache_size": rank,
                      "datasets": {"feat": {"class": "HDFDataset", "files": ["/data/feat.%i.hdf" % rank],
                                            "partition_epoch": 2},
                                   "gen": {"class": "DummyDataset", "num_seqs": 10 + rank, "fixed_random_seed": rank}},
                      "data_map": {"data": ("feat", "data")}},
            "dev": "dev.%i.hdf" % rank,
            "eval_datasets": {"extra": {"class": "HDFDataset", "files": "x%i.hdf" % rank, "seq_ordering": "sorted"}}}))
    assert items(0) == items(1)
    assert items(0) == {"dataset 'train' option 'class'": "'MetaDataset'",
                        "dataset 'train' part 'feat' option 'class'": "'HDFDataset'",
                        "dataset 'train' part 'feat' option 'partition_epoch'": "2",
                        "dataset 'train' part 'gen' option 'class'": "'DummyDataset'",
                        "dataset 'train' option 'data_map'": "{'data': ('feat', 'data')}",
                        "dataset 'extra' option 'class'": "'HDFDataset'",
                        "dataset 'extra' option 'seq_ordering'": "'sorted'"}
