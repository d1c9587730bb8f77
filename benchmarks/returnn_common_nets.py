#!/usr/bin/env python3
"""Modern RETURNN net dicts as rwth-i6/returnn_common generates them (``Dim`` objects everywhere, ``out_dim``,
``axis`` as a ``Dim``, ``dim_tags`` in ``extern_data``, ``rec``/``cond``/``masked_computation`` sub-nets,
``name_scope``, ``variable``, ``dot`` with ``reduce``, conformer nets, ...) compared with the real RETURNN
by value through the config mode of the differential check (:mod:`returnn_fuzz_configs`).

``--dump DIR`` runs returnn_common's own test modules (``tests/test_nn_*.py`` of a snapshot of the
repository) in RETURNN's venv with the snapshot on ``PYTHONPATH``. Each serialized config returnn_common
makes there (``ReturnnConfigSerializer.get_complete_py_code_str``: the ``Dim`` definitions as code,
``extern_data``, ``network``, ``behavior_version``) is written as a config file
``DIR/sites/<module>__<test>__<i>.config``, and beside it a case ``DIR/<same>.json`` with a
``config_mode`` entry (its directory, ``argv`` the config file, the snapshot on ``PYTHONPATH``: a few
configs import returnn_common's functions for their ``eval`` layers), the form
``benchmarks/returnn_fuzz.py --kind configs`` reads. The tests' own training runs
(``returnn_helpers.dummy_run_net``) are skipped (the comparison builds each net in RETURNN anyway);
their value runs (``dummy_run_net_single_custom``) run as written. A test that fails in RETURNN is
listed with its first error line; the configs it made before failing are kept.

The snapshot: ``git --git-dir=/work/.mirror/rwth-i6+returnn_common/repo archive HEAD | tar -x -C
RC/returnn_common`` (``--dump`` makes it when missing). Its ``nn`` follows RETURNN of 2023 and fails to
build most modules with today's RETURNN (``ControlFlowContext`` arguments, dim math): ``--gen-path`` puts
an older RETURNN package first on the path for the generation only (e.g. 1.20230810 from PyPI:
``pip download --no-deps returnn==1.20230810.14513``, unpacked, its ``returnn/`` in that directory); the
comparison runs ``--returnn-python``'s own RETURNN. ``tests/_setup_test_env`` is replaced by a stub (only
RETURNN's log), and ``nn.gating`` splits ``2 * out`` into ``out`` halves (see :func:`_gating_halves`).

Usage::

    .venv/bin/python benchmarks/returnn_common_nets.py --dump DIR --gen-path OLD [--rc RC] [--modules conformer ...]
    .venv/bin/python benchmarks/returnn_fuzz.py --kind configs --cases-dir DIR [--only SUBSTR ...]
    .venv/bin/python benchmarks/returnn_common_nets.py --dump DIR --compare   # both steps
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import types
from typing import Any, Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
MIRROR = "/work/.mirror/rwth-i6+returnn_common/repo"
RETURNN_PYTHON = os.path.join(REPO, ".bench-venv-returnn", "bin", "python")
MODULES = ("conformer", "attention", "conv", "loop", "cond", "array", "generated_layers", "rec", "normalization",
           "masked_computation", "math", "container", "base", "const", "encoder", "transformer", "utils", "loss",
           "rand", "asr_specaugment")
# RETURNN builds a deep net (a conformer) by recursion: returnn_common's tests raise the limits first
DEEP_NETS = ("import resource, sys\n"
             "try:\n    resource.setrlimit(resource.RLIMIT_STACK, (2 ** 29, -1))\n"
             "except (ValueError, OSError):\n    pass\n"
             "sys.setrecursionlimit(10 ** 5)\n\n")


# ---- RETURNN's side (its venv, returnn_common on sys.path)
def _stub_test_env() -> None:
    """What returnn_common's ``tests/_setup_test_env`` does that the tests need (RETURNN's log),
    without its test-runner hooks (which want ``__main__`` to be a test module)."""
    stub = types.ModuleType("returnn_common.tests._setup_test_env")
    sys.modules[stub.__name__] = stub
    from returnn.log import log
    log.initialize(verbosity=[0])


def _gating_halves() -> None:
    """returnn_common's ``nn.gating`` splits ``axis`` into ``[axis // 2, axis // 2]``, written for the
    RETURNN whose dim math gave back ``out`` for ``(2 * out) // 2`` (its conformer's conv block then
    takes ``out`` as ``in_dim``); RETURNN since 2023-08 keeps ``2*out//2`` a dim of its own, so the
    conformer fails to build there. The halves are ``out`` itself when ``axis`` is ``2 * out``."""
    import importlib
    nn = importlib.import_module("returnn_common.nn")  # (the module; ``from returnn_common import nn``: a lazy proxy)
    from returnn_common.nn import math_
    original = math_.gating

    def gating(x: Any, *, axis: Any = None, gate_func: Any = math_.sigmoid, act_func: Any = math_.identity) -> Any:
        axis = x.feature_dim if axis is None else axis
        op = getattr(axis, "derived_from_op", None)
        if op is not None and op.kind == "mul" and len(op.inputs) == 2 and op.inputs[0].dimension == 2 \
                and op.inputs[0].is_static():
            a, b = nn.split(x, axis=axis, out_dims=[op.inputs[1], op.inputs[1]])
            return act_func(a) * gate_func(b)
        return original(x, axis=axis, gate_func=gate_func, act_func=act_func)

    math_.gating = nn.gating = gating


def dump_side(rc_root: str, out_dir: str, modules: List[str]) -> Dict[str, Any]:
    """Runs the test functions of ``modules`` (names without ``test_nn_``/``test_``), writes each
    serialized config and its case; returns {test: error line or None, "#written": [case names]}."""
    import importlib
    import traceback
    sys.path.insert(0, rc_root)
    _stub_test_env()
    _gating_halves()
    from returnn_common.nn import naming
    from returnn_common.tests import returnn_helpers
    captured: List[str] = []
    make_code = naming.ReturnnConfigSerializer.get_complete_py_code_str

    def capturing(self: Any, root_module: Any) -> str:
        code = make_code(self, root_module)
        captured.append(code)
        return code

    def no_training(config: Dict[str, Any], **_kwargs: Any) -> None:
        """(returnn_helpers.dummy_run_net: an Engine's training on a dummy dataset, skipped)"""

    def via_serialized(config_code: str):
        """returnn_helpers.config_net_dict_via_serialized without its ``scope.pop`` of names the code
        of returnn_common's newer naming no longer defines (``FeatureDim``: a KeyError)."""
        scope: Dict[str, Any] = {}
        exec(compile(config_code, "<config_net_dict_via_serialized>", "exec"), scope, scope)
        for name in ("__builtins__", "Dim", "batch_dim", "FeatureDim", "SpatialDim"):
            scope.pop(name, None)
        return scope, scope["network"]

    naming.ReturnnConfigSerializer.get_complete_py_code_str = capturing
    returnn_helpers.dummy_run_net = no_training
    returnn_helpers.config_net_dict_via_serialized = via_serialized
    sites = os.path.join(out_dir, "sites")
    os.makedirs(sites, exist_ok=True)
    result: Dict[str, Any] = {"#written": []}
    for short in modules:
        mod_name = "test_" + short if short.startswith("asr") else "test_nn_" + short
        try:
            mod = importlib.import_module("returnn_common.tests." + mod_name)
        except Exception as exc:  # noqa: BLE001 - a module RETURNN cannot import is a finding
            result[mod_name] = "import: %s: %s" % (type(exc).__name__, str(exc).splitlines()[0][:200])
            continue
        for attr, func in (("dummy_run_net", no_training), ("config_net_dict_via_serialized", via_serialized)):
            if getattr(mod, attr, None) is not None:
                setattr(mod, attr, func)
        for name in sorted(n for n in vars(mod) if n.startswith("test_") and callable(getattr(mod, n))):
            captured.clear()
            error = None
            try:
                getattr(mod, name)()
            except BaseException as exc:  # noqa: BLE001
                lines = str(exc).strip().splitlines() or [""]
                error = "%s: %s" % (type(exc).__name__, lines[0][:200])
                traceback.print_exc(limit=3)
            result["%s.%s" % (mod_name, name)] = error
            for i, code in enumerate(dict.fromkeys(captured)):  # the same code once
                case = "%s__%s__%i" % (short, name[len("test_"):], i)
                config = os.path.join(sites, case + ".config")
                with open(config, "w") as f:
                    f.write("#!rnn.py\n# returnn_common %s.%s\n" % (mod_name, name) + DEEP_NETS + code)
                with open(os.path.join(out_dir, case + ".json"), "w") as f:
                    json.dump({"config_mode": {"dir": sites, "argv": [config], "env": {"PYTHONPATH": rc_root}},
                               "skip": "" if error is None else "test failed in RETURNN: " + error}, f, indent=1)
                result["#written"].append(case)
    return result


# ---- the driver (this engine's venv)
def prepare_snapshot(rc: str) -> None:
    """A work tree of returnn_common's newest stored snapshot at ``rc/returnn_common``."""
    target = os.path.join(rc, "returnn_common")
    if not os.path.exists(os.path.join(target, "__init__.py")):
        os.makedirs(target, exist_ok=True)
        archive = subprocess.run(["git", "--git-dir=" + MIRROR, "archive", "HEAD"], check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", target], input=archive.stdout, check=True)


def dump(out_dir: str, rc: str, modules: List[str], returnn_python: str, timeout: float, gen_path: str = ""
         ) -> Dict[str, Any]:
    """Runs :func:`dump_side` per module in RETURNN's venv (a process each, from /tmp; ``gen_path``
    first on its module path: another RETURNN to generate with); prints the tests failing in RETURNN and
    the number of configs written; returns the merged result."""
    prepare_snapshot(rc)
    out_dir = os.path.abspath(out_dir)
    os.makedirs(os.path.join(out_dir, "sites"), exist_ok=True)
    merged: Dict[str, Any] = {"#written": []}
    env = dict(os.environ, DISABLE_CUDA="1", TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=os.pathsep.join([p for p in (gen_path, rc, HERE) if p]))
    for short in modules:
        res_path = os.path.join(out_dir, "sites", "dump_%s.json" % short)  # (not a case)
        cmd = [returnn_python, os.path.abspath(__file__), "--side-dump", rc, out_dir, short, res_path]
        try:
            proc = subprocess.run(cmd, cwd="/tmp", env=env, capture_output=True, text=True, timeout=timeout)
            tail = proc.stderr
        except subprocess.TimeoutExpired:
            tail = "timeout after %is" % timeout
        if not os.path.exists(res_path):
            lines = [line for line in tail.splitlines() if line.strip()]
            merged["test_nn_" + short] = "process died: " + (lines[-1][:200] if lines else "")
            print("%-22s process died: %s" % (short, lines[-1][:160] if lines else ""), flush=True)
            continue
        with open(res_path) as f:
            res = json.load(f)
        os.remove(res_path)
        failed = {k: v for k, v in res.items() if not k.startswith("#") and v}
        print("%-22s %3i tests, %3i configs, %2i failing in RETURNN" % (
            short, len(res) - 1, len(res["#written"]), len(failed)), flush=True)
        for test, error in sorted(failed.items()):
            print("    FAILS %s: %s" % (test, error), flush=True)
        merged["#written"] += res.pop("#written")
        merged.update(res)
    print("%i configs written to %s" % (len(merged["#written"]), out_dir), flush=True)
    return merged


def main() -> None:
    if len(sys.argv) == 6 and sys.argv[1] == "--side-dump":
        rc, out_dir, short, res_path = sys.argv[2:6]
        res = dump_side(rc, out_dir, [short])
        with open(res_path, "w") as f:
            json.dump(res, f)
        os._exit(0)  # noqa: SLF001 (TensorFlow's threads)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dump", required=True, metavar="DIR", help="where the configs and cases go")
    parser.add_argument("--rc", default="/tmp/returnn_common_snapshot",
                        help="directory holding (or to hold) the snapshot as returnn_common/")
    parser.add_argument("--modules", nargs="*", default=list(MODULES),
                        help="test modules (test_nn_<name>.py; asr_*: test_asr_*.py)")
    parser.add_argument("--returnn-python", default=RETURNN_PYTHON)
    parser.add_argument("--gen-path", default="",
                        help="a directory holding an older RETURNN package (returnn/) to generate the configs with: "
                             "returnn_common's nn follows RETURNN of 2023 (e.g. 1.20230810 from PyPI, unpacked); the "
                             "comparison runs the --returnn-python's own RETURNN")
    parser.add_argument("--timeout", type=float, default=1800.0, help="per test module")
    parser.add_argument("--compare", action="store_true", help="then compare each config (returnn_fuzz_configs)")
    parser.add_argument("--only", nargs="*", help="with --compare: cases whose name holds one of these")
    args = parser.parse_args()
    bad = [m for m in args.modules if not re.fullmatch(r"\w+", m)]
    if bad:
        sys.exit("bad module names: %s" % bad)
    dump(args.dump, args.rc, args.modules, args.returnn_python, args.timeout, args.gen_path)
    if args.compare:
        sys.path.insert(0, HERE)
        import returnn_fuzz_configs
        returnn_fuzz_configs.run(args.dump, args.returnn_python, None, ["DIFFER", "GAP", "CRASH", "LAX"],
                                 only=args.only)


if __name__ == "__main__":
    main()
