"""The override half of benchmarks/published_configs.py: loaded as the second config file after a
published config, it replaces the config's datasets with random data matching its extern data and
makes the run tiny (one epoch, a few short sequences, CPU, files in the working directory). The
config's own dataset functions (``get_*dataset*``) give the random data too, for the datasets a
network construction sets through ``#config``.

The probe's override config calls :func:`overrides` with the config loaded so far; the returned
keys become config keys. Environment (set by the probe): ``PROBE_TASK`` (train or search),
``PROBE_SEQ2SEQ`` (1: targets shorter than the input, as for attention/CTC/transducer; 0: frame-wise,
as long as the input), ``PROBE_NUM_SEQS``, ``PROBE_LEN``, ``PROBE_LENGTHS`` (JSON {key: length}: data
keys of a fixed length, e.g. one speaker label per sequence, or ``"/N"``: the input length divided by N,
rounded up, e.g. alignment targets of an encoder that reduces time by N; the list entry's ``lengths``).
"""
from __future__ import annotations

import json
import os
import re
import sys
from typing import Any, Dict, List, Optional

import numpy as np

DATASET_KEYS = ("train", "dev", "eval", "eval_datasets", "search_data", "forward_data")


def _lengths(n: int, base: int, rng: np.random.RandomState) -> List[int]:
    return [max(1, base - int(rng.randint(0, max(1, base // 4)))) for _ in range(n)]


def _seqs(specs: Dict[str, Any], n: int, in_len: int, seq2seq: bool, seed: int) -> List[Dict[str, np.ndarray]]:
    """n sequences of random data for the data templates ``specs`` (key -> Data)."""
    rng = np.random.RandomState(seed)
    fixed = dict(json.loads(os.environ.get("PROBE_LENGTHS", "{}")))
    in_lens = _lengths(n, in_len, rng)
    out_lens = _lengths(n, max(2, in_len // 12), rng) if seq2seq else in_lens
    seqs = []
    for i in range(n):
        seq = {}
        for key, data in specs.items():
            if not data.have_batch_axis() or (data.time_dim_axis is None and not data.get_dynamic_axes()):
                t = 1
            elif key in fixed:  # an int, or "/N": the input length divided by N, rounded up (a time reduction)
                spec = fixed[key]
                t = -(-in_lens[i] // int(spec[1:])) if isinstance(spec, str) else int(spec)
            else:
                t = in_lens[i] if key == "data" or not data.sparse else out_lens[i]
            if data.sparse and data.dim is None:  # indices without a class dim: positions (e.g. an alignment into
                # the encoder frames), non-decreasing below a sixth of the input (a typical time reduction)
                seq[key] = np.sort(rng.randint(0, max(1, in_lens[i] // 6), size=(t,))).astype(np.int32)
            elif data.sparse:
                seq[key] = rng.randint(0, max(1, data.dim), size=(t,)).astype(np.int32)
            else:
                shape = [d.dimension for i, d in enumerate(data.dims) if i != data.batch_dim_axis]
                feat = [s for s in shape if s is not None]
                dim = int(np.prod(feat)) if feat else 1
                seq[key] = rng.uniform(-1.0, 1.0, size=(t, dim)).astype(data.dtype if "float" in data.dtype
                                                                         else "float32")
        seqs.append(seq)
    return seqs


def _resize_vocabularies(specs: Dict[str, Any]) -> None:
    """The probe's substitute vocabularies (``PROBE_SUBST``) rewritten with the target's dim."""
    subst = json.loads(os.environ.get("PROBE_SUBST", "{}"))
    sparse = [d for k, d in sorted(specs.items(), key=lambda kv: kv[0] != "classes") if d.sparse and d.dim]
    if not subst or not sparse:
        return
    from published_configs_site import write_substitute
    for path, kind in subst.items():
        if kind == "vocab":
            write_substitute(path, kind, int(sparse[0].dim))


DATASET_FUNC = re.compile(r"^get_\w*dataset\w*$")


class _RandomData(dict):
    """The random data's dataset dict; a key it lacks comes from the config's own dataset dict (config
    code reading e.g. ``get_dataset("train")["bpe"]`` for a vocabulary gets the config's, whose files
    exist only at its site: a FILE failure, not a KeyError of the probe)."""

    def __init__(self, data: Dict[str, Any], original: Any):
        super().__init__(data)
        self._original = original

    def __missing__(self, key: str) -> Any:
        return self._original()[key]
EVAL_NAMES = re.compile(r"dev|cv|eval|test|hub5|rt03|search", re.I)


def _dataset_functions(config: Any, train: Dict[str, Any], dev: Dict[str, Any]) -> Dict[str, Any]:
    """The config's dataset functions (``get_sprint_dataset``, ``get_dataset``, ...) replaced, also in
    the module namespace of its other functions, by ones that give the random data (dev for the
    arguments naming an evaluation set): configs call them again when they build the network
    (pretrain ``#config`` datasets of the latent-monotonic-attention configs)."""
    out = {}
    for key, value in list(config.typed_dict.items()):
        if not (callable(value) and DATASET_FUNC.match(key) and hasattr(value, "__globals__")):
            continue

        def random_data(*args: Any, _orig: Any = value, **kwargs: Any) -> Dict[str, Any]:
            named = " ".join(str(a) for a in list(args) + list(kwargs.values()) if isinstance(a, str))
            return _RandomData(dev if EVAL_NAMES.search(named) else train, lambda: _orig(*args, **kwargs))

        value.__globals__[key] = random_data
        out[key] = random_data
    return out


_NOT_NET_KEYS = re.compile(r"^(use_horovod|horovod_.*|log.*|model|learning_rate_file|tf_log_dir|device|task|"
                           r"train|dev|eval|search_data|num_epochs|load.*|import_model.*|preload_from_files)$")


def _config_functions_called(value: Any) -> Optional[str]:
    """The first eval string of the net that calls a function of the config (``get_config().typed_value(...)``,
    ``network._config.typed_dict[...]``),
    other than the SpecAugment that returnn_fuzz_testnets compares as its evaluation-mode identity; None if none."""
    from returnn_fuzz_testnets import _SPECAUG_EVAL
    if isinstance(value, dict):
        code = value.get("eval") if value.get("class") == "eval" else None
        if isinstance(code, str) and re.search(r"get_config\(\)|\._config\b", code) and not _SPECAUG_EVAL.match(code):
            return code[:80]
        return next((found for found in map(_config_functions_called, value.values()) if found), None)
    if isinstance(value, (list, tuple)):
        return next((found for found in map(_config_functions_called, value) if found), None)
    return None


def dump_net(config: Any, specs: Dict[str, Any], path: str) -> None:
    """``PROBE_DUMP_NET``: the config's network dict, its data (shape, dim, sparse, dtype per key) and
    its plain config values as a JSON case of ``returnn_fuzz.py --kind published`` (or the reason it
    cannot be one), written to ``path``; the run then ends (nothing is trained)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from returnn_fuzz_testnets import tuples_kept
    net = config.typed_value("network")
    out: Dict[str, Any] = {}
    if not isinstance(net, dict):
        out["skip"] = "no network dict (get_network or a network made per epoch)"
    else:
        extern = {key: {"shape": list(d.shape), "dim": d.dim, "sparse": d.sparse, "dtype": d.dtype}
                  for key, d in specs.items()}
        plain = {k: v for k, v in config.typed_dict.items() if not k.startswith("_") and not _NOT_NET_KEYS.match(k)
                 and isinstance(v, (bool, int, float, str)) and k != "network"}
        try:
            out = json.loads(json.dumps({"network": tuples_kept(net), "extern": extern, "config": plain,
                                         "lengths": json.loads(os.environ.get("PROBE_LENGTHS", "{}"))}))
        except (TypeError, ValueError) as exc:
            out = {"skip": "not JSON: %s" % exc}
        called = _config_functions_called(net) if "skip" not in out else None
        if called:  # the dump cannot hold the function: compared as a config
            out = {"skip": "calls config functions: %s" % called}
    if "skip" in out:  # returnn_fuzz_configs.py compares it as a config: where and how the probe ran it
        env = {k: v for k, v in os.environ.items() if k.startswith(("PROBE_", "RETURNN_PKG"))}
        env["PYTHONPATH"] = os.pathsep.join(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                            if p and os.path.abspath(p) != os.path.dirname(os.path.dirname(
                                                os.path.abspath(__file__))))
        out["config_mode"] = {"dir": os.getcwd(), "argv": [a for a in sys.argv[1:] if a != "override.config"],
                              "env": env}
    with open(path, "w") as f:
        json.dump(out, f)
    os._exit(0)


def overrides(config: Any) -> Dict[str, Any]:
    """The config keys that make ``config`` (loaded so far) a tiny run on random data."""
    from returnn.extern_data import extern_data_from_config
    specs = extern_data_from_config(config)
    if os.environ.get("PROBE_DUMP_NET"):
        dump_net(config, specs, os.environ["PROBE_DUMP_NET"])
    n = int(os.environ.get("PROBE_NUM_SEQS", "6"))
    length = int(os.environ.get("PROBE_LEN", "64"))
    seq2seq = os.environ.get("PROBE_SEQ2SEQ", "1") == "1"
    output_dim = {k: [d.dim, 1 if d.sparse else 2] for k, d in specs.items() if d.dim}
    _resize_vocabularies(specs)
    train = {"class": "StaticDataset", "data": _seqs(specs, n, length, seq2seq, 1), "output_dim": output_dim}
    dev = {"class": "StaticDataset", "data": _seqs(specs, 2, length, seq2seq, 2), "output_dim": output_dim}
    out: Dict[str, Any] = {k: None for k in DATASET_KEYS}
    out.update({
        "train": train, "dev": dev, "task": os.environ.get("PROBE_TASK", "train"),
        "num_epochs": 1, "batch_size": 100000, "max_seqs": n,
        "model": os.path.abspath("model/network"), "learning_rate_file": os.path.abspath("newbob.data"),
        "log": None, "tf_log_dir": None, "device": "cpu", "use_horovod": False,
        "save_interval": 1, "cleanup_old_models": False,
    })
    out.update(_dataset_functions(config, train, dev))
    if out["task"] == "search":
        out.update({"search_data": dev, "search_output_file": os.path.abspath("search.txt"), "load_epoch": 1,
                    "train": None})
    return out
