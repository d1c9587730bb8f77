#!/usr/bin/env python3
"""The non-training tasks (forward, search, eval) of this engine against the real RETURNN, from the
same RETURNN-trained checkpoint, output file by output file.

Usage: python benchmarks/vs_returnn_tasks.py [--only VARIANT ...] [--keep DIR] [--returnn-venv PATH]

Per model case of ``tests/returnn_goldens/engine_run_cases.py`` (a FF net, an LSTM, the encoder-decoder
``encdec``) RETURNN trains first (its venv, outside the repository, ``DISABLE_CUDA=1``); then each task
variant (:data:`VARIANTS`: config lines appended to the training config) runs in both engines, each in
its own copy of the training directory (checkpoints, learning-rate file), so both read RETURNN's
parameters. Compared: whether each run failed (both failing AGREE), every file the variant names
(HDF files: datasets, attributes; Python-literal text files: values with float tolerance
:data:`TOL`; other text files byte for byte) and the learning-rate file. Prints AGREE/DIFFER per
variant; ``--keep`` keeps the directories (and writes RETURNN's outputs as goldens with ``--goldens``).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "returnn_goldens"))
import engine_run_cases as cases  # noqa: E402

TOL = 1e-5
GOLDEN_DIR = os.path.join(REPO, "tests", "data", "returnn_tasks")
MODELS = {"ff": "ff_newbob", "lstm": "lstm_seq_drop", "encdec": "encdec"}
EVAL = 'eval = {"class": "HDFDataset", "files": [dev["files"][0]]}\n'
FWD = 'task = "forward"\nload_epoch = %(last)i\n' + EVAL
# RETURNN's search asserts a max_seq_len where the loop has no length; 'decision' takes the beam's best
MAXLEN = ('network["output"]["max_seq_len"] = 20\n'
          'network["decision"] = {"class": "decide", "from": "output", "is_output_layer": True}\n')
# the search data: ctc_dev with the decoder's labels (classes0: classes + EOS 3, named), which RETURNN
# needs to write hypotheses
SEARCH_EVAL = 'eval = {"class": "HDFDataset", "files": [dev["files"][0].replace("ctc_dev", "search_eval")]}\n'
SEARCH = ('task = "search"\nload_epoch = %(last)i\nsearch_output_file = "hyps"\nsearch_output_layer = "decision"\n'
          + SEARCH_EVAL + MAXLEN)
EVAL_TASK = 'task = "eval"\nload_epoch = %(last)i\n'

# name -> (model key, config lines, files to compare (in the run directory), files to create before)
VARIANTS: Dict[str, Tuple[str, str, Tuple[str, ...], Tuple[str, ...]]] = {
    "ff_fwd": ("ff", FWD + 'output_file = "out.hdf"\nforward_batch_size = 60\n', ("out.hdf",), ()),
    "ff_fwd_max_seqs": ("ff", FWD + 'output_file = "out.hdf"\nforward_batch_size = 20\nmax_seqs = 2\n',
                        ("out.hdf",), ()),
    "ff_fwd_no_fbs": ("ff", FWD + 'output_file = "out.hdf"\n', ("out.hdf",), ()),
    "ff_fwd_default_name": ("ff", FWD + 'forward_batch_size = 60\n', ("dump-fwd-epoch-3.hdf",), ()),
    "ff_fwd_exists": ("ff", FWD + 'output_file = "out.hdf"\nforward_batch_size = 60\n', ("out.hdf",), ("out.hdf",)),
    "ff_fwd_override": ("ff", FWD + 'output_file = "out.hdf"\nforward_batch_size = 60\n'
                        'forward_override_hdf_output = True\n', ("out.hdf",), ("out.hdf",)),
    "ff_fwd_layer": ("ff", FWD + 'output_file = "out.hdf"\nforward_batch_size = 60\nforward_output_layer = "hidden"\n',
                     ("out.hdf",), ()),
    "ff_fwd_load": ("ff", 'task = "forward"\nload = "model.002"\n' + EVAL +
                    'output_file = "out.hdf"\nforward_batch_size = 60\n', ("out.hdf",), ()),
    "ff_fwd_no_eval": ("ff", 'task = "forward"\nload_epoch = 3\noutput_file = "out.hdf"\nforward_batch_size = 60\n',
                       ("out.hdf",), ()),
    "ff_eval": ("ff", EVAL_TASK, ("lr.data",), ()),
    "ff_eval_epoch2": ("ff", 'task = "eval"\nload_epoch = 2\n', ("lr.data",), ()),
    "ff_eval_load": ("ff", 'task = "eval"\nload = "model.003"\n', ("lr.data",), ()),
    "ff_eval_output_file": ("ff", EVAL_TASK + EVAL + 'eval_output_file = "eval.txt"\n', ("eval.txt", "lr.data"), ()),
    "ff_eval_per_seq_txt": ("ff", EVAL_TASK + 'eval_output_file_per_seq = "per_seq.txt"\nloss_name = "output"\n'
                            'output_per_seq_format = ["seq_tag", "seq_len", "score", "error"]\n',
                            ("per_seq.txt",), ()),
    "ff_eval_per_seq_py": ("ff", EVAL_TASK + 'eval_output_file_per_seq = "per_seq.py"\nloss_name = "output"\n'
                           'output_per_seq_format = ["seq_tag", "score", "pos_score"]\n'
                           'output_per_seq_file_format = "py"\n', ("per_seq.py",), ()),
    # RETURNN's eval_model keeps the tags of the last batch only (KeyError above): one batch of all
    "ff_eval_per_seq_one_batch": ("ff", EVAL_TASK + 'eval_output_file_per_seq = "per_seq.txt"\nloss_name = "output"\n'
                                  'batch_size = 10000\nmax_seqs = 100\n', ("per_seq.txt",), ()),
    "ff_eval_per_seq_no_loss": ("ff", EVAL_TASK + 'eval_output_file_per_seq = "per_seq.txt"\n', ("per_seq.txt",), ()),
    "lstm_fwd": ("lstm", FWD + 'output_file = "out.hdf"\nforward_batch_size = 30\nmax_seqs = 3\n', ("out.hdf",), ()),
    "lstm_fwd_layer": ("lstm", FWD + 'output_file = "out.hdf"\nforward_batch_size = 60\n'
                       'forward_output_layer = "lstm"\n', ("out.hdf",), ()),
    "lstm_eval": ("lstm", EVAL_TASK + EVAL + 'eval_output_file = "eval.txt"\n', ("eval.txt", "lr.data"), ()),
    "search_txt": ("encdec", SEARCH, ("hyps",), ()),
    "search_py": ("encdec", SEARCH + 'search_output_file_format = "py"\n', ("hyps",), ()),
    "search_no_eval": ("encdec", SEARCH + 'search_do_eval = False\nsearch_output_file_format = "py"\n', ("hyps",), ()),
    "search_beam_txt": ("encdec", SEARCH + 'search_output_layer = "output"\n', ("hyps",), ()),
    "search_beam_py": ("encdec", SEARCH + 'search_output_layer = "output"\nsearch_output_file_format = "py"\n',
                       ("hyps",), ()),
    "search_list2": ("encdec", SEARCH + 'search_output_file_format = "py"\nsearch_output_layer = ["decision", "output"]\n',
                     ("hyps",), ()),
    "search_list": ("encdec", SEARCH + 'search_output_file_format = "py"\nsearch_output_layer = ["decision"]\n',
                    ("hyps",), ()),
    "search_list_txt": ("encdec", SEARCH + 'search_output_layer = ["decision"]\n', ("hyps",), ()),
    "search_plain_data": ("encdec", SEARCH.replace(SEARCH_EVAL, EVAL), ("hyps",), ()),  # decision: classes' labels
    "search_no_labels": ("encdec", SEARCH.replace(SEARCH_EVAL, EVAL) + 'network["decision"]["target"] = "classes0"\n',
                         ("hyps",), ()),
    "search_no_max_len": ("encdec", SEARCH.replace('network["output"]["max_seq_len"] = 20\n', ""), ("hyps",), ()),
    "search_dev": ("encdec", SEARCH.replace(SEARCH_EVAL, 'dev = ' + SEARCH_EVAL[len("eval = "):])
                   + 'search_data = "dev"\n', ("hyps",), ()),
    "search_no_data": ("encdec", SEARCH.replace(SEARCH_EVAL, ""), ("hyps",), ()),
    # a dense search output layer (the encoder's frames): numpy's text of each array (txt: str, py: repr)
    "search_dense_txt": ("encdec", SEARCH + 'search_output_layer = "enc"\n', ("hyps",), ()),
    "search_dense_py": ("encdec", SEARCH + 'search_output_layer = "enc"\nsearch_output_file_format = "py"\n',
                        ("hyps",), ()),
    "search_gz": ("encdec", SEARCH.replace('"hyps"', '"hyps.gz"') + 'search_output_file_format = "py"\n',
                  ("hyps.gz",), ()),
    "search_data_dict": ("encdec", SEARCH.replace(SEARCH_EVAL, "") + 'search_data = ' + SEARCH_EVAL[len("eval = "):],
                         ("hyps",), ()),
}


# variants RETURNN runs and this engine refuses in one line
REFUSED_HERE: set = set()


def write_search_data(directory: str) -> None:
    """``search_eval.hdf``: the ctc_dev sequences with ``classes0`` (their labels, then EOS 3) named
    ``c0 c1 c2 EOS``."""
    import h5py
    num, seed, framewise = cases.DATA_FILES["ctc_dev"]
    seqs = cases.make_seqs(num, seed, framewise)
    path = os.path.join(directory, "search_eval.hdf")
    cases.write_hdf(path, seqs)
    with h5py.File(path, "a") as f:
        f["targets/data"].create_dataset("classes0", data=np.concatenate([np.append(y, 3) for _, y in seqs]))
        f["targets/size"].attrs["classes0"] = np.array([4, 1], "int64")
        f["targets/labels"].create_dataset("classes0", data=np.array([b"c0", b"c1", b"c2", b"EOS"]))
        lens = np.array([[len(x), len(y), len(y) + 1] for x, y in seqs], "int32")
        del f["seqLengths"]
        f.create_dataset("seqLengths", data=lens)


def read_hdf(path: str) -> Dict[str, Any]:
    """Every dataset (array) and attribute of an HDF file, by path."""
    import h5py
    out: Dict[str, Any] = {}
    with h5py.File(path, "r") as f:
        def visit(name: str, obj) -> None:
            for key, value in obj.attrs.items():
                out["%s@%s" % (name, key)] = np.asarray(value)
            if isinstance(obj, h5py.Dataset):
                out[name] = np.asarray(obj[()])
        for key, value in f.attrs.items():
            out["@" + key] = np.asarray(value)
        f.visititems(visit)
    return out


def same_value(a: Any, b: Any) -> bool:
    """Nested values equal, floats within :data:`TOL`."""
    if isinstance(a, dict) and isinstance(b, dict):
        return sorted(a) == sorted(b) and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):  # an array is written as one (not as a list)
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
            return False
        if a.shape != b.shape or a.dtype.kind != b.dtype.kind:
            return False
        return bool(np.allclose(a, b, rtol=TOL, atol=TOL)) if a.dtype.kind in "fc" else bool(np.array_equal(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and abs(a - b) <= TOL * (1 + abs(b))
    return a == b


def literal(text: str) -> Any:
    """A Python literal file (RETURNN's better_repr: also ``array(...)``, ``EpochData(...)``), else None."""
    env = {"array": np.array, "float32": np.float32, "float64": np.float64, "int32": np.int32, "nan": float("nan"),
           "inf": float("inf"), "EpochData": lambda learningRate, error: {"lr": learningRate, "error": error}}
    try:
        return eval(text, env)  # noqa: S307 - files both engines wrote here
    except Exception:  # noqa: BLE001
        return None


_NUMBER = re.compile(r"-?\d+\.?\d*(?:e[-+]?\d+)?")


def same_numbers_text(a: str, b: str) -> bool:
    """Texts equal but for their numbers (numpy's printing of arrays: a last digit may differ), which
    agree within :data:`TOL`; the spacing numpy pads numbers with may differ with their widths."""
    sa, sb = _NUMBER.sub("#", a), _NUMBER.sub("#", b)
    if re.sub(r"\s+", "", sa) != re.sub(r"\s+", "", sb):
        return False
    na, nb = [float(x) for x in _NUMBER.findall(a)], [float(x) for x in _NUMBER.findall(b)]
    return len(na) == len(nb) and bool(np.allclose(na, nb, rtol=TOL, atol=TOL))


def _text(path: str) -> Optional[str]:
    """A file's text; a ``.gz`` file's uncompressed text (None when it is not gzip)."""
    if path.endswith(".gz"):
        import gzip
        try:
            with gzip.open(path, "rt") as f:
                return f.read()
        except OSError:
            return None
    with open(path) as f:
        return f.read()


def compare_file(ref: str, ours: str) -> Optional[str]:
    """None when the two files agree, else what differs."""
    if not os.path.exists(ref) or not os.path.exists(ours):
        return None if os.path.exists(ref) == os.path.exists(ours) else \
            "file only in %s" % ("RETURNN" if os.path.exists(ref) else "ours")
    if ref.endswith(".hdf"):
        a, b = read_hdf(ref), read_hdf(ours)
        if sorted(a) != sorted(b):
            return "HDF entries: RETURNN %s, ours %s" % (sorted(a), sorted(b))
        bad = [k for k in a if not same_value(a[k], b[k])]
        return "HDF entries differ: %s" % bad if bad else None
    ta, tb = _text(ref), _text(ours)
    if ta is None or tb is None:
        return "not gzip: %s" % ("RETURNN's" if ta is None else "ours")
    if ta == tb:
        return None
    va, vb = literal(ta), literal(tb)
    if va is not None and vb is not None:
        if os.path.basename(ref) == "lr.data":  # wall times differ
            for v in list(va.values()) + list(vb.values()):
                v["error"] = {k: x for k, x in v["error"].items() if k != ":meta:epoch_wall_time"}
        if same_value(va, vb):
            return None
    la, lb = ta.splitlines(), tb.splitlines()  # txt search output: one literal (or text) a line
    if len(la) == len(lb) and all(x == y or (literal(x) is not None and same_value(literal(x), literal(y)))
                                  for x, y in zip(la, lb)):
        return None
    if same_numbers_text(ta, tb):  # numpy's printed arrays (dense search output): the numbers within TOL
        return None
    return "text differs:\n--- RETURNN\n%s\n--- ours\n%s" % (ta[:600], tb[:600])


def store_model(model: str, workdir: str) -> None:
    """RETURNN's checkpoints (no .meta: this engine reads .index + data) and learning-rate file of ``model``."""
    dest = os.path.join(GOLDEN_DIR, "models", model)
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(dest)
    for fn in sorted(os.listdir(workdir)):
        if fn == "lr.data" or (fn.startswith("model.") and not fn.endswith(".meta") and not fn.startswith("model.000")):
            shutil.copy(os.path.join(workdir, fn), dest)


def store_outputs(name: str, workdir: str, returncode: int, log_text: str) -> None:
    """RETURNN's output files of variant ``name`` and whether it failed (index.json)."""
    dest = os.path.join(GOLDEN_DIR, name)
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(dest)
    files = [fn for fn in VARIANTS[name][2] if os.path.exists(os.path.join(workdir, fn)) and not returncode]
    for fn in files:
        shutil.copy(os.path.join(workdir, fn), dest)
    index = os.path.join(GOLDEN_DIR, "index.json")
    data = json.load(open(index)) if os.path.exists(index) else {}
    banner = [ln for ln in log_text.splitlines() if ln.startswith("RETURNN starting up")]
    plain = re.sub(r"\x1b\[[0-9;]*m", "", log_text)
    error = [ln for ln in plain.splitlines() if "Error" in ln and "Traceback" not in ln][-1:]
    data[name] = {"returncode": returncode, "files": files, "version": banner[0].split(",")[1].strip() if banner
                  else None, "error": error[0][-300:] if returncode and error else None}
    with open(index, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)


def run(cmd: List[str], workdir: str, env: Dict[str, str]) -> Tuple[int, str]:
    proc = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=900)
    return proc.returncode, proc.stdout + proc.stderr


def task_config(model: str, data: Dict[str, str], workdir: str, lines: str) -> str:
    """The model case's training config, its model and learning-rate file in ``workdir``, then ``lines``."""
    case = MODELS[model]
    prefix, train_opts, body = cases.CASES[case]
    text = cases.COMMON % {"train": data[prefix + "train"], "dev": data[prefix + "dev"], "train_opts": train_opts,
                           "in_dim": cases.IN_DIM, "classes": cases.NUM_CLASSES,
                           "model": os.path.join(workdir, "model"), "lr_file": os.path.join(workdir, "lr.data")}
    text += body + lines % {"last": cases.num_epochs(case)}
    path = os.path.join(workdir, "task.config")
    with open(path, "w") as f:
        f.write(text)
    return path


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--keep", help="directory to keep the runs in")
    parser.add_argument("--returnn-venv", default=os.path.join(REPO, ".bench-venv-returnn"))
    parser.add_argument("--goldens", action="store_true", help="store RETURNN's checkpoints and outputs in " + GOLDEN_DIR)
    args = parser.parse_args(argv)
    returnn_python = os.path.join(args.returnn_venv, "bin", "python")
    root = args.keep or tempfile.mkdtemp(prefix="vs_returnn_tasks_")
    os.makedirs(root, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(DISABLE_CUDA="1", TF_CPP_MIN_LOG_LEVEL="2")
    counts: Dict[str, int] = {}
    summary = {}
    try:
        data = cases.write_data(root)
        write_search_data(root)
        trained = {}
        for model in sorted({VARIANTS[v][0] for v in args.only}):
            workdir = os.path.join(root, "train_" + model)
            if not os.path.exists(os.path.join(workdir, "lr.data")):
                os.makedirs(workdir, exist_ok=True)
                cases.run_training([returnn_python, "-m", "returnn"], MODELS[model], data, workdir, env)
            trained[model] = workdir
            if args.goldens:
                store_model(model, workdir)
        for name in args.only:
            model, lines, files, pre = VARIANTS[name]
            outcome = {}
            for engine, cmd in (("returnn", [returnn_python, "-m", "returnn"]),
                                ("ours", [sys.executable, os.path.join(REPO, "rnn.py")])):
                workdir = os.path.join(root, name, engine)
                shutil.rmtree(workdir, ignore_errors=True)
                shutil.copytree(trained[model], workdir)
                for p in pre:
                    with open(os.path.join(workdir, p), "w") as f:
                        f.write("existing\n")
                config = task_config(model, data, workdir, lines)
                outcome[engine] = run(cmd + [config], workdir, env)
                with open(os.path.join(workdir, "run.log"), "w") as f:
                    f.write(outcome[engine][1])
            (rc_ref, log_ref), (rc_ours, log_ours) = outcome["returnn"], outcome["ours"]
            if args.goldens:
                store_outputs(name, os.path.join(root, name, "returnn"), rc_ref, log_ref)
            problems = []
            if (rc_ref == 0) != (rc_ours == 0):
                tail = (log_ref if rc_ref else log_ours).strip().splitlines()[-3:]
                problems.append("exit RETURNN %i, ours %i: %s" % (rc_ref, rc_ours, " | ".join(tail)))
            elif rc_ref == 0:
                for fn in files:
                    diff = compare_file(os.path.join(root, name, "returnn", fn), os.path.join(root, name, "ours", fn))
                    if diff:
                        problems.append("%s: %s" % (fn, diff))
            elif rc_ours != 2:
                problems.append("both fail, ours with exit %i (not a one-line refusal)" % rc_ours)
            verdict = "AGREE" if not problems else "DIFFER"
            if rc_ref and rc_ours and not problems:
                verdict = "AGREE (both fail)"
            counts[verdict] = counts.get(verdict, 0) + 1
            summary[name] = {"verdict": verdict, "problems": problems}
            print("== %s: %s" % (name, verdict))
            for line in problems:
                print("  ! " + line)
            if rc_ref and rc_ours:
                print("  RETURNN: %s\n  ours: %s" % (log_ref.strip().splitlines()[-1][:300],
                                                    log_ours.strip().splitlines()[-1][:300]))
            sys.stdout.flush()
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            with open(os.path.join(root, "summary.json"), "w") as f:
                json.dump(summary, f, indent=1)
    print(", ".join("%s %i" % kv for kv in sorted(counts.items())))
    return 0 if set(counts) <= {"AGREE", "AGREE (both fail)"} else 1


if __name__ == "__main__":
    sys.exit(main())
