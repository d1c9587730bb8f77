"""Seeded fuzz test of the HDF reader: damaged files end in a clean read or one ReturnnError line,
never a traceback, a hang or a crash of the interpreter.

Cases (each a file written here from valid RETURNN-layout files): random truncation, random byte
flips (half of them in the first 4 KB where HDF5 keeps most metadata), and random dtype / shape /
kind changes of each dataset and attribute. The reads run in a worker subprocess
(``tests/hdf_fuzz_worker.py``); a case that crashes or hangs the worker is recorded and the worker
restarts after it. The figures (cases, outcomes, seconds) are printed.
"""
from __future__ import annotations

import collections
import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import h5py
import numpy as np

REPO = Path(__file__).resolve().parents[1]
_VENV_PY = REPO / ".venv" / "bin" / "python"
PYTHON = str(_VENV_PY) if _VENV_PY.exists() else sys.executable
SEED = 10  # this seed includes a file that crashes libhdf5 and one that makes it loop forever
NUM_TRUNCATE, NUM_FLIP, NUM_CHANGE = 150, 200, 200
CHECK_TIMEOUT = 3  # RETURNN_HDF_CHECK_TIMEOUT: a file whose check takes longer counts as hanging libhdf5
CASE_TIMEOUT = 30.0  # seconds without a result from the worker = a hang the reader did not catch

DATASETS = ["seqLengths", "seqTags", "inputs", "labels", "targets/data/classes", "targets/data/orth",
            "targets/labels/classes"]
ATTRS = [("", "inputPattSize"), ("targets/size", "classes"), ("targets/size", "orth")]


def write_valid(path: Path, rng: np.random.RandomState, compressed: bool) -> None:
    """A valid file: dense float32 inputs (dim 4), sparse 'classes' (dim 5, same lengths) and 'orth'
    (dim 7, own lengths), labels, variable-length or fixed-length tags."""
    n = 12
    lens = rng.randint(1, 9, size=n)
    orth_lens = rng.randint(0, 4, size=n)
    total, total_orth = int(lens.sum()), int(orth_lens.sum())
    opts = {"compression": "gzip", "shuffle": True, "chunks": True} if compressed else {}
    with h5py.File(path, "w") as f:
        f.attrs["inputPattSize"] = 4
        f.create_dataset("seqLengths", data=np.stack([lens, lens, orth_lens], 1).astype(np.int32))
        tags = ["utt-%i" % i for i in range(n)]
        if compressed:
            f.create_dataset("seqTags", data=np.array([t.encode() for t in tags]))
        else:
            f.create_dataset("seqTags", data=np.array(tags, dtype=object), dtype=h5py.string_dtype("utf-8"))
        f.create_dataset("inputs", data=rng.randn(total, 4).astype(np.float32), **opts)
        f.create_dataset("labels", data=np.array([b"f%i" % i for i in range(4)]))
        f.create_dataset("targets/data/classes", data=rng.randint(0, 5, size=total).astype(np.int32), **opts)
        f.create_dataset("targets/data/orth", data=rng.randint(0, 7, size=total_orth).astype(np.int32))
        f.create_group("targets/size")
        f["targets/size"].attrs["classes"] = np.array([5, 1], dtype=np.int64)
        f["targets/size"].attrs["orth"] = np.array([7, 1], dtype=np.int64)
        f.create_dataset("targets/labels/classes", data=np.array([b"c%i" % i for i in range(5)]))
        f.create_dataset("targets/labels/orth", data=np.array([b"o%i" % i for i in range(7)]))


def _array_changes() -> List[Tuple[str, Callable[[np.ndarray, np.random.RandomState], object]]]:
    """Ways to change one dataset's content: other dtypes, shapes, values, or a group instead."""
    def astype(dtype: str):
        return lambda a, r: a.astype(dtype) if a.dtype.kind not in "SO" else np.arange(len(a)).astype(dtype)

    return [
        ("int8", astype("int8")), ("uint8", astype("uint8")), ("int16", astype("int16")),
        ("int64", astype("int64")), ("uint64", astype("uint64")), ("float16", astype("float16")),
        ("float64", astype("float64")), ("bool", astype("bool")), ("complex64", astype("complex64")),
        ("bytes", lambda a, r: np.array([b"x%i" % i for i in range(max(1, len(a)))])),
        ("ravel", lambda a, r: a.reshape(-1)),
        ("add_axis", lambda a, r: a[:, None] if a.ndim else a),
        ("add_two_axes", lambda a, r: a.reshape(a.shape + (1, 1)) if a.dtype.kind not in "O" else a[:, None]),
        ("half_rows", lambda a, r: a[:len(a) // 2]),
        ("double_rows", lambda a, r: np.concatenate([a, a]) if a.ndim else a),
        ("empty", lambda a, r: a[:0]),
        ("scalar", lambda a, r: a.reshape(-1)[0] if a.size else np.int32(0)),
        ("transpose", lambda a, r: a.T.copy() if a.ndim > 1 else a),
        ("negate", lambda a, r: -a if a.dtype.kind in "if" else a),
        ("huge_values", lambda a, r: (np.full(a.shape, 2 ** 40, dtype=np.int64) if a.dtype.kind in "iu"
                                      else np.full(a.shape, 1e30, dtype=np.float64) if a.dtype.kind == "f" else a)),
        ("random_ints", lambda a, r: r.randint(-3, 12, size=a.shape).astype(np.int32)),
        ("nan", lambda a, r: np.full(a.shape, np.nan, dtype=np.float32) if a.ndim else np.float32(np.nan)),
        ("group", lambda a, r: "GROUP"),
        ("delete", lambda a, r: "DELETE"),
    ]


ATTR_VALUES = [("str", "abc"), ("neg", -3), ("zero", 0), ("huge", 2 ** 40), ("float", 2.5),
               ("empty_list", np.zeros((0,), np.int64)), ("pair_neg", np.array([-1, 1])), ("bytes", b"\xff\xfe"),
               ("nan", float("nan"))]


def change_dataset(src: Path, dst: Path, name: str, change: Callable, rng: np.random.RandomState) -> None:
    """Copies ``src`` to ``dst`` with dataset ``name`` replaced by ``change(old array)``."""
    dst.write_bytes(src.read_bytes())
    with h5py.File(dst, "r+") as f:
        old = f[name][...]
        new = change(old, rng)
        del f[name]
        if isinstance(new, str) and new == "GROUP":
            f.create_group(name)
        elif isinstance(new, str) and new == "DELETE":
            pass
        else:
            f[name] = new


def change_attr(src: Path, dst: Path, where: str, attr: str, value: object) -> None:
    dst.write_bytes(src.read_bytes())
    with h5py.File(dst, "r+") as f:
        (f[where] if where else f).attrs[attr] = value


def make_cases(tmp: Path) -> List[Tuple[str, str, str]]:
    """(file, cache_size, description) of every case, deterministic for SEED."""
    rng = np.random.RandomState(SEED)
    bases = []
    for i, compressed in enumerate((False, True)):
        path = tmp / ("valid%i.hdf" % i)
        write_valid(path, rng, compressed)
        bases.append(path)
    cache_modes = ["0", "-1", "1M"]
    cases: List[Tuple[str, str, str]] = [(str(b), "0", "valid") for b in bases]
    for i in range(NUM_TRUNCATE):
        base = bases[i % 2]
        raw = base.read_bytes()
        cut = int(rng.randint(0, len(raw)))
        path = tmp / ("trunc%i.hdf" % i)
        path.write_bytes(raw[:cut])
        cases.append((str(path), cache_modes[i % 3], "truncate %s at %i" % (base.name, cut)))
    for i in range(NUM_FLIP):
        base = bases[i % 2]
        raw = bytearray(base.read_bytes())
        limit = min(4096, len(raw)) if i % 2 else len(raw)
        where = rng.randint(0, limit, size=rng.randint(1, 9))
        for pos in where:
            raw[pos] ^= int(rng.randint(1, 256))
        path = tmp / ("flip%i.hdf" % i)
        path.write_bytes(bytes(raw))
        cases.append((str(path), cache_modes[i % 3], "flip %s at %s" % (base.name, where.tolist())))
    changes = _array_changes()
    for i in range(NUM_CHANGE):
        base = bases[i % 2]
        path = tmp / ("change%i.hdf" % i)
        if i % 5 == 4:
            where, attr = ATTRS[rng.randint(len(ATTRS))]
            label, value = ATTR_VALUES[rng.randint(len(ATTR_VALUES))]
            change_attr(base, path, where, attr, value)
            what = "attr %s/%s = %s" % (where, attr, label)
        else:
            name = DATASETS[rng.randint(len(DATASETS))]
            label, change = changes[rng.randint(len(changes))]
            change_dataset(base, path, name, change, rng)
            what = "%s: %s" % (name, label)
        cases.append((str(path), cache_modes[i % 3], "%s of %s" % (what, base.name)))
    return cases


def run_worker(list_file: Path, num_cases: int) -> Dict[int, Tuple[str, str]]:
    """Runs the worker over all cases; restarts it after a crash or hang. Returns
    case index -> (outcome, detail) with outcome OK / ERR / BAD / CRASH / HANG."""
    results: Dict[int, Tuple[str, str]] = {}
    start = 0
    while start < num_cases:
        env = dict(os.environ, RETURNN_HDF_CHECK_TIMEOUT=str(CHECK_TIMEOUT))
        proc = subprocess.Popen([PYTHON, str(REPO / "tests" / "hdf_fuzz_worker.py"), str(list_file), str(start)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(REPO), env=env)
        lines: "queue.Queue[Optional[str]]" = queue.Queue()
        reader = threading.Thread(target=lambda: [lines.put(ln) for ln in proc.stdout] + [lines.put(None)],
                                  daemon=True)
        reader.start()
        current: Optional[int] = None
        while True:
            try:
                line = lines.get(timeout=CASE_TIMEOUT)
            except queue.Empty:
                proc.kill()
                results[current if current is not None else start] = ("HANG", "no result after %.0f s" % CASE_TIMEOUT)
                current = None
                break
            if line is None:
                break
            kind, idx, *rest = line.rstrip("\n").split(" ", 2)
            if kind == "BEGIN":
                current = int(idx)
            else:
                results[int(idx)] = (kind, json.loads(rest[0]) if rest else "")
                current = None
        stderr = proc.communicate()[1]
        if current is not None:
            results[current] = ("CRASH", "exit code %s: %s" % (proc.returncode, stderr[-500:]))
        done = [i for i in results if i >= start]
        start = (max(done) + 1) if done else num_cases
    return results


def test_damaged_hdf_files_end_in_clean_read_or_one_line_error(tmp_path):
    t0 = time.monotonic()
    cases = make_cases(tmp_path)
    list_file = tmp_path / "cases.txt"
    list_file.write_text("".join("%s %s\n" % (path, cache) for path, cache, _ in cases))
    results = run_worker(list_file, len(cases))
    elapsed = time.monotonic() - t0
    counts = collections.Counter(kind for kind, _ in results.values())
    print("\nHDF fuzz: %i cases in %.1f s: %s" % (len(cases), elapsed, dict(counts)))
    assert len(cases) >= 500
    assert results[0][0] == "OK" and results[1][0] == "OK", (results[0], results[1])
    failures = []
    for i, (path, cache, what) in enumerate(cases):
        kind, detail = results.get(i, ("MISSING", ""))
        if kind == "ERR" and ("\n" in detail or not detail.strip()):
            kind = "MULTILINE"
        if kind not in ("OK", "ERR"):
            failures.append("case %i (%s, cache_size %s): %s\n%s" % (i, what, cache, kind, detail))
    assert not failures, "%i failing cases:\n%s" % (len(failures), "\n".join(failures[:10]))
    # Each damage kind produced errors, i.e. the cases reach the reader's checks.
    assert counts["ERR"] > 100 and counts["OK"] > 10, counts
