#!/usr/bin/env python3
"""Config mode of the differential check (:mod:`returnn_fuzz`, ``--kind configs``): published configs
whose network is not JSON (``Dim`` objects, functions in the net dict or ``extern_data``, or a
``get_network(epoch, ...)`` instead of ``network``) compared with the real RETURNN by value.

``benchmarks/published_configs.py --dump-nets DIR`` leaves, for each such config, its prepared site in
``DIR.sites`` (the published config after the probe's site preparation: neighbours, substitute
vocabularies, ``import_`` packages, guarded top-level statements) and in its case file
(``DIR/<config>.json``) a ``config_mode`` entry: the directory, the command line (``CONFIG ++key value
...``) and the environment (``PYTHONPATH`` of the neighbours, ``PROBE_*``). Each engine then runs in a
process of its own per case, in that directory:

- it loads the config with its own config loader (RETURNN: ``returnn.__main__.init_config``, which
  also sets the behavior version; this engine: ``load_config_from_args``) with ``++task train``, sets
  the config's dropout/zoneout/weight-noise keys to 0 and points its dataset functions at dummy
  datasets (config code calls them while making the net: :mod:`published_configs_synth`);
- takes the net dict of ``get_network(epoch=1)``, else of pretrain after its last step (RETURNN's
  ``get_final_network_json``: ``WrapEpochValue`` resolved), else ``network``, with the rates set to 0 (:func:`returnn_fuzz_testnets.without_noise`) and its
  ``#config`` applied to the config;
- builds it for training (RETURNN as its engine does: ``TFNetwork(config=...)``,
  ``construct_from_dict``, ``search_train_network_layers`` as an extra net), with the extern data of
  the config. Each side describes its extern data (per key: axes as ``B``, static sizes or ``T<i>``
  for the i-th distinct dynamic dim, time/feature axis, sparse, dim, dtype); the descriptions must be
  the same (else DIFFER). The inputs are drawn from RETURNN's description (lengths per dynamic dim:
  23/15/9 frames for the input, shorter for seq2seq targets, the case's ``PROBE_LENGTHS``), zero
  padded as RETURNN's datasets pad;
- RETURNN's parameters (``get_saveable_params_list``) get random values scaled by 2/sqrt(fan-in) (the
  published kind's rule), this engine takes them by RETURNN's names (names and shapes must match);
- layer ``output`` (without one: the last output or loss layer) is compared on its real positions (1e-5). A net whose RETURNN output differs
  between two runs of the same feed draws random numbers in training (SpecAugment): such a case is
  built and compared in evaluation mode (``train_flag`` False) instead, noted as ``[eval]``; so is a net
  whose run in training fails in RETURNN (config code written for TensorFlow 1's semantics, e.g. its
  SpecAugment's ``tf.where`` of rows, which this engine's config view keeps), noted with the error.

RETURNN's ``Dim`` takes the dimension as optional, as before 2023 (configs of that time call
``DimensionTag(kind=..., description=...)``; this engine accepts that API deliberately), and config code
finds TensorFlow 1's names there (``tf.random_uniform``: :mod:`returnn.tf.compat` gives them here). The top-level
statements a config's guard caught (``probe: statement at line N failed``) must be the
same on both sides: one failing only here may change the net silently (GAP; only in RETURNN: LAX).
Verdicts as :mod:`returnn_fuzz`; ``NOT-COMPARABLE`` when there is nothing to compare (no layer to
compare, extern data without a batch axis).

Usage::

    .venv/bin/python benchmarks/published_configs.py --dump-nets DIR
    .venv/bin/python benchmarks/returnn_fuzz.py --kind configs --cases-dir DIR [--only SUBSTR ...] [--keep OUT]
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import zlib
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from returnn_side import run_returnn_script

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
GOLDENS = os.path.join(REPO, "tests", "returnn_goldens")
B = 3
IN_LENS = (23, 15, 9)
ATOL = RTOL = float(os.environ.get("FUZZ_CONFIG_TOL", "1e-5"))  # another tolerance (investigations)
LAYER = os.environ.get("FUZZ_CONFIG_LAYER")  # another layer to compare (investigations)


def compared(net_dict: Dict[str, Any]) -> Optional[str]:
    """The layer compared: ``FUZZ_CONFIG_LAYER``, else ``output``, else the last output or loss layer."""
    from returnn_fuzz_testnets import compared_layer
    return LAYER or compared_layer({k: v for k, v in net_dict.items() if not k.startswith("#")})
GUARD_LINE = re.compile(r"^probe: statement at line \d+ failed: .*$", re.M)
_NOISE_KEY = re.compile(r"(dropout|zoneout_factor_\w+|param_variational_noise)$")


# ---- cases
def config_cases(cases_dir: str) -> Tuple[List[Dict[str, Any]], int]:
    """(the cases of ``cases_dir`` that carry a ``config_mode``, how many JSON cases were left out)."""
    cases, other = [], 0
    for fn in sorted(os.listdir(cases_dir)):
        if not fn.endswith(".json"):
            continue
        with open(os.path.join(cases_dir, fn)) as f:
            dumped = json.load(f)
        if "config_mode" not in dumped:
            other += 1
            continue
        mode = dumped["config_mode"]
        cases.append(dict(name="config_%03d_%s" % (len(cases), re.sub(r"\W", "_", fn[:-5])[-60:]), notes=fn,
                          reason=dumped.get("skip", ""), dir=mode["dir"], argv=mode["argv"], env=mode["env"]))
    return cases, other


# ---- shared by both sides (each in its own venv; no engine imports at module level)
@contextlib.contextmanager
def captured_guard_lines(sink: List[str]):
    """Collects the guard's ``probe: statement ... failed`` lines printed while the block runs."""
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            yield
    finally:
        text = buf.getvalue()
        sink.extend(sorted(set(GUARD_LINE.findall(text))))
        sys.stdout.write(text[-2000:] if len(text) > 2000 else text)


def enter_site(case: Dict[str, Any]) -> None:
    """The working directory, module path and environment the probe ran the config with."""
    os.chdir(case["dir"])
    env = {k: v for k, v in case["env"].items() if k != "PROBE_DUMP_NET"}
    paths = [p for p in env.pop("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ.update(env)
    sys.path[:0] = paths


def prepare_config(config: Any) -> None:
    """Noise rates 0, dataset functions giving dummy datasets (config code calls them for its net)."""
    for key, value in list(config.typed_dict.items()):
        if isinstance(key, str) and _NOISE_KEY.search(key) and isinstance(value, (int, float)) \
                and not isinstance(value, bool):
            config.typed_dict[key] = 0.0
    sys.path.insert(0, HERE)
    from published_configs_synth import _dataset_functions
    dummy = {"class": "StaticDataset", "data": [], "output_dim": {}}
    config.typed_dict.update(_dataset_functions(config, dummy, dummy))


def net_dict_of(config: Any) -> Dict[str, Any]:
    """The net dict of epoch 1 (``get_network(epoch=1)``, else pretrain's final net, else ``network``)
    without noise; its ``#config`` is applied to ``config``."""
    sys.path.insert(0, HERE)
    import returnn.pretrain  # noqa: F401 (each side's own)
    from returnn_fuzz_testnets import without_noise
    get_network = config.typed_value("get_network", None)
    pretrain = sys.modules["returnn.pretrain"].pretrain_from_config(config) if not callable(get_network) else None
    if callable(get_network):
        net = get_network(epoch=1)
    elif pretrain is not None:  # as RETURNN's engine after pretraining (WrapEpochValue resolved)
        net = pretrain.get_final_network_json()
    else:
        net = config.typed_value("network", None)
    if net is None and "returnn.config" in sys.modules and hasattr(sys.modules["returnn.config"],
                                                                    "network_json_from_config"):
        net = sys.modules["returnn.config"].network_json_from_config(config)  # RETURNN's old keys (hidden_size)
    if not isinstance(net, dict):
        raise TypeError("the config gives no net dict (%s)" % type(net).__name__)
    net = without_noise(net)
    for key, value in (net.get("#config") or {}).items():
        config.typed_dict[key] = value
    return net


def describe_extern(datas: Dict[str, Any]) -> Dict[str, Any]:
    """The JSON-able description of the extern data (see the module doc); dynamic dims numbered by
    first appearance (``data`` first, then the keys sorted), shared dims by identity of their base."""
    dyn: List[Any] = []
    out: Dict[str, Any] = {}
    for key in sorted(datas, key=lambda k: (k != "data", k)):
        data = datas[key]
        dims: List[Any] = []
        for i, tag in enumerate(data.dim_tags):
            if i == data.batch_dim_axis:
                dims.append("B")
            elif tag.dimension is not None:
                dims.append(int(tag.dimension))
            else:
                base = tag.get_same_base()
                if not any(o is base for o in dyn):
                    dyn.append(base)
                dims.append("T%i" % next(j for j, o in enumerate(dyn) if o is base))
        out[key] = {"dims": dims, "time_axis": data.time_dim_axis, "feature_axis": data.feature_dim_axis,
                    "sparse": bool(data.sparse), "dim": data.dim, "dtype": str(data.dtype)}
    return out


def array_axes(desc: Dict[str, Any]) -> List[int]:
    """The axes (declared indices) of a key's batch array: batch, the time (else first dynamic) axis,
    the others as declared (this engine's batch format; RETURNN is fed the transpose)."""
    dims = desc["dims"]
    if "B" not in dims:
        return list(range(len(dims)))
    b = dims.index("B")
    dyn = [i for i, d in enumerate(dims) if isinstance(d, str) and d != "B"]
    t = desc["time_axis"] if desc["time_axis"] is not None else (dyn[0] if dyn else None)
    return [b] + ([t] if t is not None else []) + [i for i in range(len(dims)) if i not in (b, t)]


def draw_inputs(case: Dict[str, Any], desc: Dict[str, Dict[str, Any]]) -> Tuple[Dict[str, np.ndarray],
                                                                               Dict[str, List[int]]]:
    """({key: batch array (zero padded)}, {dynamic dim "T<i>": lengths}) from the description."""
    env = case["env"]
    fixed = json.loads(env.get("PROBE_LENGTHS") or "{}")
    first = int(env["PROBE_LEN"]) if env.get("PROBE_LEN") else IN_LENS[0]
    in_lens = [int(round(first * f / IN_LENS[0])) for f in IN_LENS]
    seq2seq = env.get("PROBE_SEQ2SEQ", "1") == "1"
    lens: Dict[str, List[int]] = {}
    for key, d in desc.items():
        for dim in d["dims"]:
            if not (isinstance(dim, str) and dim != "B") or dim in lens:
                continue
            spec = fixed.get(key)
            if isinstance(spec, str) and spec.startswith("/"):
                lens[dim] = [-(-n // int(spec[1:])) for n in in_lens]
            elif isinstance(spec, int):
                lens[dim] = [spec] * B
            elif not lens or not (d["sparse"] and seq2seq):
                lens[dim] = list(in_lens)
            else:
                lens[dim] = [max(2, n // 3) for n in in_lens]
    arrays = {}
    for key, d in desc.items():
        rng = np.random.RandomState(zlib.crc32(("%s/in:%s" % (case["name"], key)).encode()) & 0x7FFFFFFF)
        shape = [B if dim == "B" else (max(lens[dim]) if isinstance(dim, str) else dim)
                 for dim in (d["dims"][i] for i in array_axes(d))]
        if d["sparse"] and d["dim"] is None:  # positions (e.g. into encoder frames), non-decreasing
            x = np.sort(rng.randint(0, max(1, in_lens[-1] // 6), size=shape), axis=-1).astype(np.int32)
        elif d["sparse"] or "int" in d["dtype"]:
            x = rng.randint(0, max(1, d["dim"] or 2), size=shape).astype(np.int32)
        elif d["dtype"] == "bool":
            x = rng.randint(0, 2, size=shape).astype(bool)
        else:
            x = rng.normal(size=shape).astype(np.float32)
        for pos, axis in enumerate(array_axes(d)):
            dim = d["dims"][axis]
            if isinstance(dim, str) and dim != "B" and "B" in d["dims"]:
                mask = np.arange(shape[pos])[None, :] < np.array(lens[dim])[:, None]  # (B, n)
                bshape = [1] * x.ndim
                bshape[0], bshape[pos] = B, shape[pos]
                x = np.where(mask.reshape(bshape), x, np.zeros_like(x))
        arrays[key] = x
    return arrays, lens


def _first_line(exc: BaseException) -> str:  # TensorFlow's graph errors: the failing op's message
    lines = str(exc).strip().splitlines() or [""]
    nodes = [i for i, line in enumerate(lines) if line.lstrip().startswith("[[{{node")]
    line = lines[nodes[0] - 1] if nodes and nodes[0] else lines[0]
    return "%s: %s" % (type(exc).__name__, line.strip()[:240])


# ---- this engine's side
def run_our_side(case: Dict[str, Any], npz_path: Optional[str], returnn: Dict[str, Any]) -> Tuple[str, str]:
    """(verdict, detail) of the case: this engine builds it from the config (and compares with
    RETURNN's npz when RETURNN built it)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.path.insert(0, REPO)
    sys.path.insert(0, os.path.join(REPO, "tests"))
    from returnn_fuzz import failure_verdict
    returnn_error = returnn.get("error")
    meta = arrays = None
    if npz_path and os.path.exists(npz_path):
        with np.load(npz_path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        meta = json.loads(str(arrays.pop("meta")))
    enter_site(case)
    guarded: List[str] = []
    try:
        with captured_guard_lines(guarded):
            from returnn.config import load_config_from_args
            config = load_config_from_args(list(case["argv"]) + ["++task", "train"])
            prepare_config(config)
            net_dict = net_dict_of(config)
        if returnn_error is None and guarded != returnn.get("guarded", []):
            ours_only = sorted(set(guarded) - set(returnn.get("guarded", [])))
            return ("GAP" if ours_only else "LAX"), "guarded config statements differ: here %s | RETURNN %s" % (
                guarded, returnn.get("guarded"))
        from returnn.extern_data import extern_data_from_config
        extern = extern_data_from_config(config)
        if returnn_error is None and describe_extern(extern) != returnn["extern"]:
            return "DIFFER", "extern data: here %s | RETURNN %s" % (describe_extern(extern), returnn["extern"])
        if returnn.get("not_comparable"):
            return "NOT-COMPARABLE", returnn["not_comparable"]
        train = meta is None or meta["mode"] == "train"
        value, sizes, roles, net = _our_output(case, config, net_dict, extern, train, meta, arrays)
    except AssertionError as exc:
        return "DIFFER", _first_line(exc)
    except Exception as exc:  # noqa: BLE001 - a failure of ours is the finding
        return failure_verdict(exc, returnn_error)
    if returnn_error is not None:
        return "LAX", "RETURNN: " + returnn_error
    return _compare(value, sizes, roles, meta, arrays)


def _our_output(case: Dict[str, Any], config: Any, net_dict: Dict[str, Any], extern: Dict[str, Any], train: bool,
                meta: Optional[Dict[str, Any]], arrays: Optional[Dict[str, np.ndarray]]):
    """Builds the net here; with RETURNN's npz: sets its parameters, runs it on its inputs."""
    import tensorflow as tf
    from returnn.extern_data import size_key
    from returnn.tf.layers import RunContext
    from returnn.tf.network import TFNetwork
    from returnn.tf.network_schedule import split_net_dict
    from returnn.tf.returnn_params import returnn_param_shapes, set_returnn_param_values
    from test_returnn_goldens import in_returnn_order
    layers, extra = split_net_dict(net_dict)
    search_train = extra.get("#config", {}).get("search_train_network_layers",
                                                config.typed_value("search_train_network_layers", None))
    search_train = [search_train] if isinstance(search_train, str) else list(search_train or [])
    net = TFNetwork(layers, extern, default_target=config.value("target", "classes"), eval_flag=True,
                    train_flag=train, search_train_layers=search_train if train else ())
    if meta is None:  # RETURNN failed: building (and running on zeros) is enough for LAX
        batch = {}
        desc = describe_extern(extern)
        ins, lens = draw_inputs(case, desc)
        for key, d in desc.items():
            batch[key] = tf.cast(ins[key], extern[key].dtype)
            for axis, dim in enumerate(d["dims"]):
                if isinstance(dim, str) and dim != "B":
                    batch[size_key(key, extern[key], axis)] = tf.constant(lens[dim], tf.int32)
        name = compared(net_dict)
        net.forward(batch, RunContext(train), only=[name] if name in net.layers else None)
        return None, None, None, net
    shapes = {k: list(v) for k, v in returnn_param_shapes(net).items()}
    assert sorted(shapes) == sorted(meta["params"]), "parameter names differ from RETURNN's: missing %s, extra %s" % (
        sorted(set(meta["params"]) - set(shapes))[:8], sorted(set(shapes) - set(meta["params"]))[:8])
    assert shapes == meta["param_shapes"], "parameter shapes differ from RETURNN's: %s" % {
        k: (shapes[k], meta["param_shapes"][k]) for k in shapes if shapes[k] != meta["param_shapes"][k]}
    set_returnn_param_values(net, {name: arrays["param:" + name] for name in meta["params"]})
    batch = {}
    for key, d in meta["extern"].items():
        batch[key] = tf.cast(arrays["in:" + key], extern[key].dtype)
        for axis, dim in enumerate(d["dims"]):
            if isinstance(dim, str) and dim != "B":
                batch[size_key(key, extern[key], axis)] = tf.constant(meta["lens"][dim], tf.int32)
    name = meta["layer"]
    out = net.forward(batch, RunContext(train), only=[name])[name]
    value, sizes, roles = in_returnn_order(out, meta["out_dims"])
    return value, sizes, roles, net


def _compare(value: np.ndarray, sizes: Dict[int, Any], roles: str, meta: Dict[str, Any],
             arrays: Dict[str, np.ndarray]) -> Tuple[str, str]:
    gold = arrays["out"]
    mode = "" if meta["mode"] == "train" else " [eval]"
    where = "RETURNN out %s %s, ours %s %s%s" % (meta["out_dims"], gold.shape, roles, value.shape, mode)
    if value.ndim != gold.ndim:
        return "DIFFER", where
    gold_sizes = {int(k[len("out_size:"):]): v for k, v in arrays.items() if k.startswith("out_size:")}
    for axis, size in gold_sizes.items():
        ours = sizes.get(axis)
        if ours is None or np.shape(ours) != np.shape(size) or not np.array_equal(ours, size):
            return "DIFFER", "%s: sizes of axis %i: RETURNN %s, ours %s" % (
                where, axis, size.tolist(), None if ours is None else np.asarray(ours).tolist())
        n = int(np.max(size, initial=0))
        value, gold = value.take(range(n), axis=axis), gold.take(range(n), axis=axis)
    if value.shape != gold.shape:
        return "DIFFER", where
    from test_returnn_goldens import real_mask
    batchless = "B" not in str(meta["out_dims"]).split(",")  # a dynamic axis' real extent there: its longest size
    mask = real_mask(gold.shape, {a: s for a, s in gold_sizes.items() if not (batchless and np.ndim(s))})
    ours, gold = value[mask], gold[mask]
    if gold.dtype.kind in "iub":
        same = bool(np.all(ours == gold))
    else:
        same = np.allclose(ours, gold, rtol=RTOL, atol=ATOL, equal_nan=True)
    if same:
        return "AGREE", where if mode else ""
    diff = np.abs(ours.astype(np.float64) - gold.astype(np.float64))
    return "DIFFER", "%s: max |diff| %.3g (max |RETURNN| %.3g), %i of %i values off" % (
        where, np.nanmax(diff, initial=0.0), np.nanmax(np.abs(gold), initial=0.0),
        int(np.sum(~np.isclose(ours, gold, rtol=RTOL, atol=ATOL, equal_nan=True))), gold.size)


# ---- the driver (this engine's venv)
def _side(python: str, side: str, case_path: str, out_path: str, timeout: float, mode: str = "train"
          ) -> Dict[str, Any]:
    """Runs one side in a process of its own; its result record (``error``: its first error line)."""
    res_path = out_path + ".%s.json" % side
    if os.path.exists(res_path):
        os.remove(res_path)
    try:
        proc = run_returnn_script(python, [os.path.abspath(__file__), "--side", side, case_path, out_path, mode],
                                  timeout=timeout)
        tail = proc.stderr
    except subprocess.TimeoutExpired:
        return {"error": "timeout after %is" % timeout}
    if os.path.exists(res_path):
        with open(res_path) as f:
            return json.load(f)
    lines = [line for line in tail.splitlines() if line.strip()]
    return {"error": "process died: " + (lines[-1][:240] if lines else "no output")}


def run(cases_dir: str, returnn_python: str, keep: Optional[str], show: List[str], only: Optional[List[str]] = None,
        timeout: float = 1800.0) -> Dict[str, int]:
    """Compares each config case of ``cases_dir`` (one RETURNN process at a time); prints the
    findings and the counts, returns the counts."""
    import tempfile
    cases, other = config_cases(cases_dir)
    if only:
        cases = [c for c in cases if any(s in c["name"] or s in c["notes"] for s in only)]
    print("configs: %i config-mode cases (%i JSON cases left to --kind published)" % (len(cases), other), flush=True)
    out_dir = keep or tempfile.mkdtemp(prefix="returnn_fuzz_configs_")
    os.makedirs(out_dir, exist_ok=True)
    counts: Dict[str, int] = {}
    for c in cases:
        case_path = os.path.join(out_dir, c["name"] + ".case.json")
        with open(case_path, "w") as f:
            json.dump(c, f)
        npz = os.path.join(out_dir, c["name"] + ".npz")
        if os.path.exists(npz):
            os.remove(npz)
        returnn = _side(returnn_python, "returnn", case_path, npz, timeout)
        if returnn.get("random"):  # random numbers in training (SpecAugment): compared in evaluation mode
            train_error = returnn.get("train_error")
            returnn = _side(returnn_python, "returnn", case_path, npz, timeout, "eval")
            returnn["train_error"] = train_error
        with open(npz + ".returnn.json", "w") as f:
            json.dump(returnn, f)
        ours = _side(os.path.join(REPO, ".venv", "bin", "python"), "ours", case_path, npz, timeout)
        kind, detail = ours.get("verdict", "CRASH"), ours.get("detail", ours.get("error", ""))
        if returnn.get("train_error"):
            detail += " [eval: RETURNN's run in training failed: %s]" % returnn["train_error"][:150]
        counts[kind] = counts.get(kind, 0) + 1
        if kind in show or kind == "NOT-COMPARABLE":
            print("%-9s %s (%s)\n          %s" % (kind, c["name"], c["reason"][:60], detail), flush=True)
        else:
            print("%-9s %s %s" % (kind, c["name"], detail), flush=True)
        if not keep:  # (RETURNN's parameters of an LM are GBs)
            for path in (npz, npz + ".returnn.json", npz + ".ours.json", case_path):
                if os.path.exists(path):
                    os.remove(path)
    if not keep:
        shutil.rmtree(out_dir, ignore_errors=True)
    print("\n%i config cases: %s" % (len(cases), ", ".join("%s %i" % kv for kv in sorted(counts.items()))))
    return counts


def _side_main(side: str, case_path: str, out_path: str, mode: str) -> int:
    with open(case_path) as f:
        case = json.load(f)
    res_path = out_path + ".%s.json" % side
    if side == "returnn":
        try:
            from returnn_fuzz_configs_returnn import run_returnn_side
            record = run_returnn_side(case, out_path, mode)
        except BaseException as exc:  # noqa: BLE001 - RETURNN's failure is a result
            import traceback
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            record = {"error": "%s [at %s:%i]" % (_first_line(exc), os.path.basename(frame.filename), frame.lineno)}
            traceback.print_exc()
    else:
        with open(out_path + ".returnn.json") as f:
            returnn = json.load(f)
        verdict, detail = run_our_side(case, out_path if "error" not in returnn else None, returnn)
        record = {"verdict": verdict, "detail": detail}
    with open(res_path, "w") as f:
        json.dump(record, f)
    os._exit(0)  # config code may leave threads behind


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "--side":
        _side_main(*sys.argv[2:6])
    sys.exit("usage: benchmarks/returnn_fuzz.py --kind configs --cases-dir DIR (see the module doc)")
