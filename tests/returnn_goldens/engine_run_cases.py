"""Whole training runs, the same in the real RETURNN and in this engine: the HDF data the configs
(``engine_run_configs.py``) read (RETURNN's HDF layout, written with numpy + h5py, byte-for-byte the
same each time), the config files, running and comparing them. Shared by ``make_engine_run_goldens.py``
(RETURNN's venv), ``tests/test_returnn_engine_runs.py`` (this engine against the stored goldens) and
``benchmarks/vs_returnn_numbers.py`` (both side by side).

Importable from both virtualenvs: numpy and h5py only, TensorFlow only where named.

A case is a config body (Python text, ``%(train)s`` etc. filled in by :func:`config_text`). Every
run starts from RETURNN's initial parameters: RETURNN writes them with ``save_epoch1_initial_model``
(``<model>.000``); this engine reads them through ``import_model_train_epoch1``.
"""
from __future__ import annotations

import os
import re
import subprocess
from typing import Dict, List, Sequence, Tuple

import numpy as np

from engine_run_configs import CASES, CTC, FF, LSTM  # noqa: F401  (the configs; re-exported)
from engine_run_configs_keys import CASES as _KEY_CASES  # noqa: E402

CASES.update(_KEY_CASES)

RTOL = 1e-4  # scores and learning rates
ATOL = 1e-4  # final parameters
# the meta entries RETURNN adds to the learning-rate file that must agree (of the others, its wall time,
# only that they are there)
META_KEYS = (":meta:epoch_num_train_steps", ":meta:global_train_step", ":meta:effective_learning_rate")
IN_DIM = 5
NUM_CLASSES = 3
GOLDEN_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "returnn_engine_runs")

# file name -> (number of sequences, seed, framewise labels (else label sequences for CTC))
DATA_FILES = {"train": (40, 1, True), "dev": (12, 2, True), "ctc_train": (30, 3, False), "ctc_dev": (10, 4, False)}

COMMON = """#!rnn.py
use_tensorflow = True
task = "train"
train = {"class": "HDFDataset", "files": [%(train)r]%(train_opts)s}
dev = {"class": "HDFDataset", "files": [%(dev)r]}
# RETURNN's default HDF cache is 70%% of the memory at its start; read the files directly
cache_size = "0"
extern_data = {"data": {"dim": %(in_dim)i}, "classes": {"dim": %(classes)i, "sparse": True}}
model = %(model)r
learning_rate_file = %(lr_file)r
log_verbosity = 4
"""


def make_seqs(num: int, seed: int, framewise: bool) -> List[Tuple[np.ndarray, np.ndarray]]:
    """(features (T, IN_DIM) float32, labels int32): framewise, the class of a fixed linear map of the
    frame; else (CTC) the label sequence of that framewise sequence with repeats merged."""
    rng = np.random.RandomState(seed)
    proj = np.random.RandomState(0).normal(size=(IN_DIM, NUM_CLASSES)).astype("float32")
    out = []
    for _ in range(num):
        length = rng.randint(3, 13)
        x = rng.normal(size=(length, IN_DIM)).astype("float32")
        y = np.argmax(x @ proj, axis=-1).astype("int32")
        if not framewise:
            y = np.array([c for i, c in enumerate(y) if i == 0 or c != y[i - 1]], "int32")
        out.append((x, y))
    return out


def write_hdf(path: str, seqs: List[Tuple[np.ndarray, np.ndarray]], in_dim: int = IN_DIM,
              num_classes: int = NUM_CLASSES) -> None:
    """RETURNN's HDF layout (docs/hdf-format.md), written with h5py alone (so also in RETURNN's venv):
    ``inputs`` (dense frames or class indices, as the arrays are), ``seqLengths``, ``seqTags`` and sparse
    ``classes`` (labels ``c0``, ``c1``, ...); tests/test_returnn_checkpoints.py writes its files with it too."""
    import h5py
    with h5py.File(path, "w") as f:
        f.create_dataset("inputs", data=np.concatenate([x for x, _ in seqs]))
        f.attrs["inputPattSize"] = in_dim
        f.attrs["numSeqs"] = len(seqs)
        f.create_dataset("seqLengths", data=np.array([[len(x), len(y)] for x, y in seqs], "int32"))
        f.create_dataset("seqTags", data=np.array([b"seq-%i" % i for i in range(len(seqs))]))
        targets = f.create_group("targets")
        targets.create_group("data").create_dataset("classes", data=np.concatenate([y for _, y in seqs]))
        targets.create_group("size").attrs["classes"] = np.array([num_classes, 1], "int64")
        targets.create_group("labels").create_dataset("classes", data=np.array([b"c%i" % i
                                                                                 for i in range(num_classes)]))


def write_data(directory: str) -> Dict[str, str]:
    """All HDF files of :data:`DATA_FILES` in ``directory``: name -> path."""
    paths = {}
    for name, (num, seed, framewise) in DATA_FILES.items():
        paths[name] = os.path.join(directory, name + ".hdf")
        write_hdf(paths[name], make_seqs(num, seed, framewise))
    return paths


def config_text(case: str, data: Dict[str, str], workdir: str, initial_model: str = "") -> str:
    """The config file of ``case``, reading ``data`` (:func:`write_data`), writing into ``workdir``;
    it starts from the checkpoint ``initial_model`` (``import_model_train_epoch1``) if given, and
    writes its initial parameters to ``<model>.000`` (``save_epoch1_initial_model``)."""
    prefix, train_opts, body = CASES[case]
    start = "save_epoch1_initial_model = True\n"
    if initial_model:
        start += "import_model_train_epoch1 = %r\n" % initial_model
    return COMMON % {"train": data[prefix + "train"], "dev": data[prefix + "dev"], "train_opts": train_opts,
                     "in_dim": IN_DIM, "classes": NUM_CLASSES, "model": os.path.join(workdir, "model"),
                     "lr_file": os.path.join(workdir, "lr.data")} + start + body


def num_epochs(case: str) -> int:
    """``num_epochs`` of ``case``'s config."""
    return int(re.search(r"^num_epochs = (\d+)$", CASES[case][2], re.M).group(1))


def read_lr_file(path: str) -> Dict[int, dict]:
    """The learning-rate file (RETURNN's format): epoch -> {"learning_rate": ..., "error": {key: value}}."""
    def epoch_data(learningRate, error):  # noqa: N803 - RETURNN's keyword names
        return {"learning_rate": learningRate, "error": error}
    with open(path) as f:
        return eval(f.read(), {"EpochData": epoch_data, "nan": float("nan"), "inf": float("inf")})  # noqa: S307


def steps_per_epoch(log_text: str) -> Dict[int, int]:
    """epoch -> number of steps, from the ``train epoch N, finished after S steps`` log lines."""
    return {int(m.group(1)): int(m.group(2))
            for m in re.finditer(r"train epoch (\d+), finished after (\d+) steps", log_text)}


def read_params(prefix: str) -> Dict[str, np.ndarray]:
    """The network parameters of a checkpoint (RETURNN's names; no optimizer slots, no global step,
    nothing of this engine's ``_engine/`` state)."""
    import tensorflow as tf
    reader = tf.train.load_checkpoint(prefix)
    slot = re.compile(r"/(Adam|AdamW|Nadam|Momentum|RMSProp|Adagrad|AdagradDA|Adadelta|Ftrl|ProximalAdagrad"
                      r"|CustomAdamOptimizer|GradVarianceScaledOptimizer|NeuralOptimizer1)(_\d+)?$"
                      r"|/var_accum_grad$|(^|/)(beta[12]_power|global_step)$")
    return {name: reader.get_tensor(name) for name in sorted(reader.get_variable_to_shape_map())
            if not name.startswith("_") and not slot.search(name) and "accum_grad" not in name}


def run_training(cmd: Sequence[str], case: str, data: Dict[str, str], workdir: str, env: Dict[str, str],
                 initial_model: str = "", timeout: float = 1800) -> dict:
    """Trains ``case`` with ``cmd + [config]`` (``python -m returnn`` or this engine's ``rnn.py``) in
    ``workdir``: {"steps_per_epoch", "lr_file" (epoch keys as str), "init" (``<model>.000``),
    "final" (parameters), "version" (from RETURNN's banner), "log"}. Raises when the run fails."""
    config = write_config(case, data, workdir, initial_model)
    proc = subprocess.run(list(cmd) + [config], cwd=workdir, env=env, capture_output=True, text=True,
                          timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError("%s failed on %s (exit %i):\n%s\n%s" % (" ".join(cmd), case, proc.returncode,
                                                                   proc.stdout[-4000:], proc.stderr[-4000:]))
    return collect(case, workdir, proc.stdout)


def write_config(case: str, data: Dict[str, str], workdir: str, initial_model: str = "") -> str:
    """Writes ``case``'s config file into ``workdir`` (:func:`config_text`); its path."""
    config = os.path.join(workdir, "train.config")
    with open(config, "w") as f:
        f.write(config_text(case, data, workdir, initial_model=initial_model))
    return config


def collect(case: str, workdir: str, log_text: str) -> dict:
    """What a finished run of ``case`` in ``workdir`` left (see :func:`run_training`)."""
    banner = re.search(r"^RETURNN starting up, version (\S+),", log_text, re.M)
    init = os.path.join(workdir, "model.000")
    if not os.path.exists(init + ".index"):  # RETURNN's name when epoch 1 is a pretrain epoch
        init = os.path.join(workdir, "model.pretrain.000")
    return {"steps_per_epoch": {str(k): v for k, v in sorted(steps_per_epoch(log_text).items())},
            "lr_file": {str(k): v for k, v in sorted(read_lr_file(os.path.join(workdir, "lr.data")).items())},
            "checkpoints": checkpoint_names(workdir), "init": read_params(init),
            "final": read_params(os.path.join(workdir, "model.%03i" % num_epochs(case))),
            "version": banner.group(1) if banner else None, "log": log_text}


def checkpoint_names(workdir: str) -> List[str]:
    """The checkpoints a run left in ``workdir`` (``model.003``, ``model.pretrain.000``, ...), sorted."""
    return sorted(name[:-len(".index")] for name in os.listdir(workdir)
                  if name.startswith("model.") and name.endswith(".index"))


def compare(ref: dict, ours: dict) -> Tuple[List[str], float]:
    """How ``ours`` differs from ``ref`` (RETURNN's; both as :func:`run_training` returns them): the
    problems found (empty: the same numbers) and the max |parameter difference|."""
    problems = []
    if ours["steps_per_epoch"] != ref["steps_per_epoch"]:
        problems.append("steps per epoch: ours %s, RETURNN %s" % (ours["steps_per_epoch"], ref["steps_per_epoch"]))
    if "checkpoints" in ref and ours["checkpoints"] != ref["checkpoints"]:  # (goldens recorded since pretrain_grow)
        problems.append("checkpoint names: ours %s, RETURNN %s" % (ours["checkpoints"], ref["checkpoints"]))
    if sorted(ours["lr_file"]) != sorted(ref["lr_file"]):
        problems.append("epochs in the learning-rate file: ours %s, RETURNN %s" % (sorted(ours["lr_file"]),
                                                                                 sorted(ref["lr_file"])))
    for epoch, want in sorted(ref["lr_file"].items()):
        got = ours["lr_file"].get(epoch)
        if got is None:
            continue
        if not np.isclose(got["learning_rate"], want["learning_rate"], rtol=RTOL, atol=0):
            problems.append("epoch %s learning rate: ours %r, RETURNN %r" % (epoch, got["learning_rate"],
                                                                             want["learning_rate"]))
        for key, value in sorted(want["error"].items()):
            if key not in got["error"]:
                problems.append("epoch %s: no %s (RETURNN %r)" % (epoch, key, value))
            elif key.startswith(":meta:") and key not in META_KEYS:  # there, but not reproducible
                continue
            elif not np.isclose(got["error"][key], value, rtol=RTOL, atol=0):
                problems.append("epoch %s %s: ours %r, RETURNN %r" % (epoch, key, got["error"][key], value))
        extra = sorted(set(got["error"]) - set(want["error"]))
        if extra:
            problems.append("epoch %s: keys RETURNN does not write: %s" % (epoch, extra))
    for name in sorted(set(ours["init"]) & set(ref["init"])):  # save_epoch1_initial_model: what training started from
        if not np.array_equal(ours["init"][name], ref["init"][name]):
            problems.append("initial parameter %s (<model>.000) differs from RETURNN's" % name)
    if sorted(ours["final"]) != sorted(ref["final"]):
        problems.append("parameter names: ours %s, RETURNN %s" % (sorted(ours["final"]), sorted(ref["final"])))
    max_diff = 0.0
    for name in sorted(set(ours["final"]) & set(ref["final"])):
        diff = float(np.max(np.abs(ours["final"][name] - ref["final"][name])))
        max_diff = max(max_diff, diff)
        if diff > ATOL:
            problems.append("final parameter %s: max |ours - RETURNN| = %.3g" % (name, diff))
    return problems, max_diff


def write_initial_model(prefix: str, params: Dict[str, np.ndarray]) -> None:
    """RETURNN's ``model.000`` again, for this engine's ``import_model_train_epoch1``: the parameters
    under RETURNN's names, global step 0 (needs this repository's ``returnn`` package)."""
    from returnn.tf.checkpoint_format import write_meta, write_named
    write_named(prefix, dict(params, global_step=np.int64(0)))
    write_meta(prefix)


def run_ours(cmd: Sequence[str], case: str, data: Dict[str, str], workdir: str, env: Dict[str, str],
             init: Dict[str, np.ndarray], timeout: float = 600) -> dict:
    """:func:`run_training` of this engine (``cmd``: its ``python rnn.py``) from the parameters ``init``."""
    prefix = os.path.join(workdir, "returnn_init.000")
    write_initial_model(prefix, init)
    return run_training(cmd, case, data, workdir, env, initial_model=prefix, timeout=timeout)


def run_ours_in_one_process(python: str, names: Sequence[str], data: Dict[str, str], root: str,
                            env: Dict[str, str], inits: Dict[str, Dict[str, np.ndarray]],
                            timeout: float = 900) -> Dict[str, dict]:
    """This engine's runs of the cases ``names`` (each in ``root/<case>``, from ``inits[case]``), one
    after the other in one process (this module as a script: ``rnn.py``'s ``main`` per config), which
    saves TensorFlow's start-up per case. Per case :func:`collect`'s result, or {"error": text}."""
    configs = []
    for case in names:
        workdir = os.path.join(root, case)
        os.makedirs(workdir, exist_ok=True)
        prefix = os.path.join(workdir, "returnn_init.000")
        write_initial_model(prefix, inits[case])
        configs.append(write_config(case, data, workdir, initial_model=prefix))
    proc = subprocess.run([python, os.path.abspath(__file__)] + configs, cwd=root, env=env, capture_output=True,
                          text=True, timeout=timeout)
    out = {}
    for case, config in zip(names, configs):
        m = re.search(r"^=== RUN %s\n(.*?)^=== EXIT %s (\d+)$" % (re.escape(config), re.escape(config)),
                      proc.stdout, re.M | re.S)
        if not m or m.group(2) != "0":
            out[case] = {"error": "exit %s:\n%s\n%s" % (m.group(2) if m else proc.returncode,
                                                       (m.group(1) if m else proc.stdout)[-3000:], proc.stderr[-3000:])}
        else:
            out[case] = collect(case, os.path.dirname(config), m.group(1))
    return out


def _main_many(configs: Sequence[str]) -> int:
    """``rnn.py CONFIG`` for each config, in this process, each run's output between markers."""
    import sys
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    from returnn.__main__ import main
    for config in configs:
        print("=== RUN %s" % config, flush=True)
        code = main([config])
        sys.stdout.flush()
        print("\n=== EXIT %s %s" % (config, code), flush=True)
    return 0


if __name__ == "__main__":
    import sys
    sys.exit(_main_many(sys.argv[1:]))
