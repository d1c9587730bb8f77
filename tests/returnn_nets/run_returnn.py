#!/usr/bin/env python3
"""Builds the literal net dicts of RETURNN's TF tests (see extract.py) in the real RETURNN and
writes what it built to tests/data/returnn_test_nets.json.

Usage (the RETURNN venv, from a directory outside this repository):
    cd /tmp && DISABLE_CUDA=1 /work/main/.bench-venv-returnn/bin/python \\
        /work/main/tests/returnn_nets/run_returnn.py [--src /tmp/rsrc] [--out FILE] [--only ID ...]

Per net: RETURNN's ``TFNetwork(config=..., train_flag=True)`` + ``construct_from_dict`` in a fresh
graph; when that fails and the test builds with ``search_flag=True``, the search build
(``train_flag=False, search_flag=True``) is tried and recorded as mode ``search``. Recorded: built
or the error's one-line reason, the saveable parameters (name without ``:0``, shape; global_step
left out) and ``get_num_params()``.

Behavior version: every net is built twice. Key ``returnn``: as RETURNN's tests run, with the latest
behavior version as minimum (tests/_setup_test_env.py), i.e. the ``behavior_version`` the test's
config states, else RETURNN's latest; the value is stored per net (``behavior_version``; this engine
reads it from the global config). Key ``returnn_bv0``: behavior version 0, what a config without
``behavior_version`` gets (layer defaults differ, e.g. conv ``with_bias``, batch_norm).

Nets are built by worker processes (several nets each, in order); a worker that dies or hangs
(``--timeout`` per net) is recorded for that net and a new worker continues with the next one.
Output is deterministic: nets in extraction order, JSON keys sorted, memory addresses masked.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DEFAULT_OUT = os.path.join(REPO, "tests", "data", "returnn_test_nets.json")
sys.path.insert(0, HERE)
import extract  # noqa: E402  (standard library only)


def _refuse_own_package() -> None:
    """This script measures the real RETURNN; this repository's package must not stand in for it."""
    os.chdir(tempfile.gettempdir())
    if "" in sys.path:
        sys.path.remove("")
    try:
        import returnn
    except ImportError:
        sys.exit("run_returnn.py: no 'returnn' package in %s (use the RETURNN venv, e.g. %s)"
                 % (sys.executable, os.path.join(REPO, ".bench-venv-returnn", "bin", "python")))
    path = os.path.realpath(os.path.dirname(returnn.__file__))
    if path == os.path.realpath(os.path.join(REPO, "returnn")):
        sys.exit("run_returnn.py: 'import returnn' gives this repository's package (%s), not RETURNN; "
                 "run it with the RETURNN venv from a directory outside the repository" % path)


def one_line(exc: BaseException) -> str:
    """``Type: message`` of an exception on one line, addresses masked, at most 300 characters."""
    text = "%s: %s" % (type(exc).__name__, " ".join(str(exc).split()))
    text = re.sub(r"0x[0-9a-fA-F]+", "0x…", text)
    return text if len(text) <= 300 else text[:297] + "..."


def _make_dims(value: Any, cache: Dict[str, Any]) -> Any:
    """Dim markers (extract.dim_marker) -> RETURNN Dim objects, one per marker name."""
    from returnn.tf.util.data import Dim, batch_dim, SpatialDim, FeatureDim
    if extract.is_dim_marker(value):
        if value["kind"] == "batch":
            return batch_dim
        name = value[extract.DIM_MARKER_KEY]
        if name not in cache:
            if value["kind"] == "spatial":
                cache[name] = SpatialDim(value["description"], value["dimension"])
            elif value["kind"] == "feature":
                cache[name] = FeatureDim(value["description"], value["dimension"])
            else:
                cache[name] = Dim(value["dimension"], name=value["description"])
        return cache[name]
    if isinstance(value, dict):
        return {k: _make_dims(v, cache) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_make_dims(v, cache) for v in value)
    return value


def build_one(entry: Dict[str, Any], behavior_version: int) -> Dict[str, Any]:
    """Build one net in RETURNN; the ``returnn`` record of the JSON."""
    import tensorflow as tf
    from returnn.config import Config
    from returnn.tf.network import TFNetwork
    from returnn.util.basic import BehaviorVersion

    net = ast.literal_eval(entry["net"])
    extern = _make_dims(ast.literal_eval(entry["extern"]), {})
    config_opts = dict(ast.literal_eval(entry["config"]))
    config_opts.pop("behavior_version", None)  # set below, for both engines the same
    config_opts.update(extern)
    modes = ["train"]
    if "search_flag=True" in entry["flags"]:
        modes.append("search")
    first_error = None
    for mode in modes:
        BehaviorVersion._reset()
        BehaviorVersion.set(behavior_version)
        config = Config(dict(config_opts))
        try:
            with tf.compat.v1.Graph().as_default():
                network = TFNetwork(config=config, train_flag=(mode == "train"), search_flag=(mode == "search"))
                network.construct_from_dict(net)
                params = []
                for p in network.get_saveable_params_list():
                    name = getattr(p, "name", None) or repr(p)
                    name = name[:-2] if name.endswith(":0") else name
                    if name == "global_step":
                        continue
                    shape = p.get_shape().as_list() if hasattr(p, "get_shape") else None
                    params.append([name, shape])
                num = network.get_num_params()
            return {"built": True, "mode": mode, "error": None, "params": sorted(params), "num_params": int(num),
                    "train_error": None if mode == "train" else first_error, "search_error": None}
        except Exception as exc:  # noqa: BLE001 (any failure is a result)
            first_error = first_error or one_line(exc)
            if mode == "train" and len(modes) > 1:
                continue
            return {"built": False, "mode": "train", "error": first_error, "params": None, "num_params": None,
                    "train_error": None, "search_error": one_line(exc) if mode == "search" else None}
    raise AssertionError("unreachable")


def worker(entries_file: str, start: int, results_file: str, behavior_override: Optional[int]) -> None:
    """Build entries[start:] one after another, one JSON line per net appended to results_file."""
    os.environ["DISABLE_CUDA"] = "1"
    _refuse_own_package()
    import tensorflow as tf
    tf.compat.v1.disable_eager_execution()
    from returnn.log import log
    log.initialize(verbosity=[0])
    with open(entries_file) as f:
        entries = json.load(f)
    for i in range(start, len(entries)):
        bv = behavior_override if behavior_override is not None else entries[i]["behavior_version"]
        result = build_one(entries[i], bv)
        with open(results_file, "a") as f:
            f.write(json.dumps({"index": i, "result": result}, sort_keys=True) + "\n")


def _entries(src: str, latest: int, only: Optional[List[str]]) -> List[Dict[str, Any]]:
    nets, _ = extract.extract(src)
    out = []
    for n in nets:
        if only and n["id"] not in only:
            continue
        bv = n["config"].get("behavior_version")
        out.append({
            "id": n["id"], "file": n["file"], "function": n["function"], "line": n["line"], "usage": n["usage"],
            "also_in": n["also_in"], "net": repr(n["net"]), "extern": repr(n["extern"]),
            "extern_origin": n["extern_origin"], "extern_notes": n["extern_notes"], "config": repr(n["config"]),
            "flags": n["flags"],
            "behavior_version": bv if isinstance(bv, int) else latest,
            "behavior_version_origin": "test config" if isinstance(bv, int) else "RETURNN's tests (latest)",
        })
    return out


# The RETURNN builds recorded per net: key -> behavior version (None: the net's own, see above)
RUNS = (("returnn", None), ("returnn_bv0", 0))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", default=extract.DEFAULT_SRC, help="RETURNN source with tests/ (default %(default)s)")
    parser.add_argument("--out", default=DEFAULT_OUT, help="JSON to write (default %(default)s)")
    parser.add_argument("--only", nargs="*", help="only these net ids (for debugging; the JSON then holds only them)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds one net may take (default %(default)s)")
    parser.add_argument("--worker", nargs=4, metavar=("ENTRIES", "START", "RESULTS", "BV"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        bv = None if args.worker[3] == "-" else int(args.worker[3])
        worker(args.worker[0], int(args.worker[1]), args.worker[2], bv)
        return 0
    _refuse_own_package()
    import returnn
    from returnn.util.basic import BehaviorVersion
    latest = BehaviorVersion._latest_behavior_version
    entries = _entries(args.src, latest, args.only)
    tmp = tempfile.mkdtemp(prefix="returnn_test_nets.")
    entries_file = os.path.join(tmp, "entries.json")
    with open(entries_file, "w") as f:
        json.dump(entries, f)
    for key, bv in RUNS:
        results = _run_pass(entries_file, len(entries), tmp, key, bv, args.timeout)
        for i, e in enumerate(entries):
            e[key] = results[i]
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    doc = {
        "about": ("Literal network dicts of RETURNN's TF tests (tests/returnn_nets/extract.py) and what the real "
                  "RETURNN builds of them (tests/returnn_nets/run_returnn.py): 'returnn' with the net's "
                  "'behavior_version' (as RETURNN's tests run), 'returnn_bv0' with behavior version 0 (a config "
                  "without behavior_version). 'net', 'extern' and 'config' are Python reprs (read with "
                  "ast.literal_eval); dicts with key '$dim' in 'extern' are dim tags (one Dim per name within a net)."),
        "returnn_version": returnn.__version__,
        "tensorflow_version": tf.__version__,
        "latest_behavior_version": latest,
        "default_extern_data": repr(extract.DEFAULT_EXTERN_DATA),
        "nets": entries,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    for key, bv in RUNS:
        built = [e for e in entries if e[key]["built"]]
        print("%s (behavior version %s): %d nets, RETURNN builds %d (%d in search mode)"
              % (key, "as the tests" if bv is None else bv, len(entries), len(built),
                 sum(1 for e in built if e[key]["mode"] == "search")))
    print("wrote %s (worker logs: %s)" % (args.out, tmp))
    return 0


def _run_pass(entries_file: str, n: int, tmp: str, key: str, bv: Optional[int], timeout: float
              ) -> Dict[int, Dict[str, Any]]:
    """All nets built by worker processes with behavior version ``bv``: index -> result."""
    results_file = os.path.join(tmp, key + ".jsonl")
    log_path = os.path.join(tmp, key + ".log")
    env = dict(os.environ, DISABLE_CUDA="1", TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("PYTHONPATH", None)
    results: Dict[int, Dict[str, Any]] = {}
    start, t0 = 0, time.time()
    while start < n:
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", entries_file, str(start), results_file,
               "-" if bv is None else str(bv)]
        with open(log_path, "a") as log_file:
            proc = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT, cwd=tmp, env=env)
            last_count, last_change = -1, time.time()
            while proc.poll() is None:
                time.sleep(0.5)
                count = _read_results(results_file, results)
                if count != last_count:
                    last_count, last_change = count, time.time()
                    print("\r%s: %d/%d nets built in RETURNN (%.0f s)" % (key, len(results), n, time.time() - t0),
                          end="", file=sys.stderr, flush=True)
                elif time.time() - last_change > timeout:
                    proc.kill()
                    proc.wait()
            _read_results(results_file, results)
        nxt = max(results) + 1 if results else 0
        if nxt < n:  # the worker ended (or hung) on entry nxt
            results[nxt] = {"built": False, "mode": "train", "params": None, "num_params": None, "train_error": None,
                            "search_error": None,
                            "error": "worker process ended on this net (exit code %s, or no result in %g s)"
                                     % (proc.returncode, timeout)}
            with open(results_file, "a") as f:
                f.write(json.dumps({"index": nxt, "result": results[nxt]}, sort_keys=True) + "\n")
            nxt += 1
        start = nxt
    print(file=sys.stderr)
    return results


def _read_results(path: str, results: Dict[int, Dict[str, Any]]) -> int:
    if not os.path.exists(path):
        return 0
    with open(path) as f:
        lines = f.read().splitlines()
    for line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # a line being written
        results[rec["index"]] = rec["result"]
    return len(lines)


if __name__ == "__main__":
    sys.exit(main())
