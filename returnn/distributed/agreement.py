"""Ranks that must compute the same thing check that they do, at start-up.

Data-parallel training is only right when every rank builds the same network and trains it the
same way: a rank with another activation (same shapes) would train to the end silently, one with
other shapes fail deep inside a broadcast. So the ranks compare, before anything is trained:

* when the backend is up (:meth:`DistributedContext.from_config`): the config keys that change what
  is computed (:func:`compared_config_items`; every declared key except those in :data:`NOT_COMPARED`,
  each with its reason);
* when the network is built (the engine, also after each per-epoch rebuild): the net dict as built
  (each layer's options, sub-layers of rec units and subnetworks by ``rec/sub``), the data
  description (``extern_data`` or what the datasets give) and every parameter's name and shape
  (:func:`network_items`).

One host collective compares a 48-bit digest of everything; only when the digests differ, rank 0's
table goes to all ranks, each finds its first difference, and the lowest rank with one composes the
line every rank raises (:class:`RanksDisagree`, exit code 2 on every rank, printed once by rank 0)::

    ranks disagree on what they compute: rank 1 of 2 (host n1) has layer 'hidden' option 'activation'
    = 'relu', rank 0 has 'tanh' (...)

Nothing here waits for a rank that does not come: the callers meet first (a stalled rank is
named by the rendezvous), and the comparison itself is a fixed number of collectives.
"""
from __future__ import annotations

import hashlib
import json
import numbers
import socket
import types
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from returnn.errors import ConfigError

NOT_COMPARED: Dict[str, str] = {}
"""Declared config keys that may differ between ranks, with the reason."""


def _not_compared(names: str, reason: str) -> None:
    for name in names.split():
        NOT_COMPARED[name] = reason


_not_compared("model load import_model_train_epoch1 preload_from_files start_epoch load_ignore_missing_vars "
              "learning_rate_file save_interval cleanup_old_models",
              "read or written by rank 0 only (checkpoints, learning-rate file); the others get its state by "
              "broadcast")
_not_compared("log log_verbosity progress_interval tf_log_dir tf_log_step_interval output_file search_output_file "
              "search_output_file_format horovod_timeline", "where and how much a rank reports or writes")
_not_compared("train dev eval eval_datasets search_data cache_size",
              "datasets: a rank may read its own files (its shard), so their options are compared without "
              "file names, caching, sequence counts and seeds (dataset_items); what they hold is compared as the data description of "
              "the built network")
_not_compared("tf_session_opts tf_intra_op_threads tf_inter_op_threads tf_deterministic prefetch_batches "
              "horovod_cycle_time horovod_fusion_threshold horovod_autotune",
              "speed of this process only (threads, prefetching, Horovod's tuning)")
_not_compared("network get_network pretrain pretrain_repetitions pretrain_construction_algo "
              "pretrain_copy_output_layer pretrain_greedy hidden_size hidden_type hidden_name activation dropout "
              "L2_reg loss bidirectional forward_weights_init bias_init",
              "compared as the net dict the network is built from (per layer and option)")

_MAX_DEPTH = 12
_SHOWN = 60  # characters of a value in the message


def canonical(value: Any, depth: int = 0) -> str:
    """A text for ``value`` that is equal on two ranks exactly when the values are: dicts sorted,
    numbers by ``repr``, functions by name and code (bytecode, constants, defaults, closure values),
    numpy arrays by shape, dtype and a digest of their bytes, data templates and dims by ``repr``."""
    if depth > _MAX_DEPTH:
        return "..."
    d = depth + 1
    if value is None or isinstance(value, (bool, str, bytes)):
        return repr(value)
    if isinstance(value, numbers.Integral):
        return repr(int(value))
    if isinstance(value, numbers.Real):
        return repr(float(value))
    if isinstance(value, dict):
        items = sorted(((canonical(k, d), canonical(v, d)) for k, v in value.items()))
        return "{%s}" % ", ".join("%s: %s" % kv for kv in items)
    if isinstance(value, (list, tuple)):
        inner = ", ".join(canonical(v, d) for v in value)
        return ("[%s]" if isinstance(value, list) else "(%s,)" if len(value) == 1 else "(%s)") % inner
    if isinstance(value, (set, frozenset)):
        return "{%s}" % ", ".join(sorted(canonical(v, d) for v in value))
    if isinstance(value, np.ndarray):
        return "array(%s, %s, %s)" % (value.shape, value.dtype,
                                      hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()[:16])
    if isinstance(value, (types.FunctionType, types.MethodType)):
        return _function_text(value, d)
    if type(value).__name__ == "NumbersDict" and hasattr(value, "dict"):
        return "NumbersDict(%s, %s)" % (canonical(value.dict, d), canonical(getattr(value, "value", None), d))
    if hasattr(value, "short_repr"):  # Data templates, Dims: their repr holds no ids
        return repr(value)
    if isinstance(value, type):
        return "<class %s.%s>" % (value.__module__, value.__qualname__)
    return "<%s.%s>" % (type(value).__module__, type(value).__qualname__)


def _function_text(fn: Any, depth: int) -> str:
    func = getattr(fn, "__func__", fn)
    code = getattr(func, "__code__", None)
    name = "%s.%s" % (getattr(func, "__module__", "?"), getattr(func, "__qualname__", "?"))
    if code is None:
        return "<function %s>" % name
    cells = [c.cell_contents for c in (func.__closure__ or ()) if _has_contents(c)]
    digest = hashlib.sha256("|".join([code.co_code.hex(), canonical(_consts(code), depth), repr(code.co_names),
                                      canonical(func.__defaults__, depth),
                                      canonical(cells, depth)]).encode("utf-8")).hexdigest()[:16]
    return "<function %s %s>" % (name, digest)


def _has_contents(cell: Any) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def _consts(code: types.CodeType) -> List[Any]:
    """The constants of ``code``, nested code objects by their own bytecode and constants."""
    out: List[Any] = []
    for const in code.co_consts:
        out.append((const.co_code.hex(), _consts(const)) if isinstance(const, types.CodeType) else const)
    return out


# ---- what is compared
def compared_config_items(config: Any) -> Dict[str, str]:
    """``{"config key 'x'": canonical value}`` of every declared key not in :data:`NOT_COMPARED`,
    with its effective value (an unset key is its declared default, so unset and default agree)."""
    from returnn.config_keys.registry import KEYS
    out: Dict[str, str] = {}
    for name in sorted(KEYS):
        if name in NOT_COMPARED:
            continue
        value = config.typed_dict[name] if name in config.typed_dict else KEYS[name].default
        out["config key %r" % name] = canonical(value)
    out.update(dataset_items(config))
    return out


# ---- datasets: what they are, without the files they read (a rank may read its own shard)
_DATASET_KEYS = ("train", "dev", "eval", "search_data")
_SPEED_OPTIONS = ("cache_size", "use_cache_manager")
# how much data a rank's own shard holds, and the seed it is drawn with: may differ like the files
_SHARD_OPTIONS = ("num_seqs", "estimated_num_seqs", "fixed_random_seed", "random_seed", "seed")


def _file_option(name: str) -> bool:
    """Whether dataset option ``name`` names files (``files``, ``seq_list_file``, ``path``, ...)."""
    name = str(name)
    return name in ("files", "file", "filename", "path", "prefix", "postfix") or \
        name.endswith(("_file", "_files", "_path", "_dir", "_prefix", "_filename"))


def _file_value(value: Any) -> bool:
    """Whether ``value`` is a file name (or a list of them): a path with a '/' or a data file's suffix."""
    if isinstance(value, (list, tuple)) and value:
        return all(_file_value(v) for v in value)
    if not isinstance(value, str) or not value:
        return False
    from returnn.config import data_suffix
    return "/" in value or data_suffix(value) is not None


def _is_dataset_spec(value: Any) -> bool:
    return isinstance(value, dict) and "class" in value


def _dataset_items(spec: Any, prefix: str, out: Dict[str, str], depth: int = 0) -> None:
    """Items of a dataset dict: every option except file names, caching, sequence counts and seeds (a
    rank may read its own files, its shard); sub-datasets (MetaDataset parts, ConcatDataset's list, a wrapped dataset)
    option by option."""
    if depth > 4 or not isinstance(spec, dict):
        return  # a file list string, a function: what it holds is compared as the data description
    for name in sorted(spec, key=str):
        value = spec[name]
        if _file_option(name) or name in _SPEED_OPTIONS or name in _SHARD_OPTIONS or _file_value(value):
            continue
        if _is_dataset_spec(value):
            _dataset_items(value, "%s part %r" % (prefix, name), out, depth + 1)
        elif isinstance(value, dict) and value and all(_is_dataset_spec(v) for v in value.values()):
            for sub in sorted(value, key=str):
                _dataset_items(value[sub], "%s part %r" % (prefix, sub), out, depth + 1)
        elif isinstance(value, (list, tuple)) and value and all(_is_dataset_spec(v) for v in value):
            for i, sub in enumerate(value):
                _dataset_items(sub, "%s part %i" % (prefix, i), out, depth + 1)
        else:
            out["%s option %r" % (prefix, name)] = canonical(value)


def dataset_items(config: Any) -> Dict[str, str]:
    """``{"dataset 'train' option 'partition_epoch'": canonical value}`` of the config's datasets:
    their class and options (ordering, partitioning, data maps, dims, ...) must agree, so every
    rank cuts its epoch the same way (batch i goes to rank i mod N); the files, sequence counts and
    seeds may differ (a rank's own shard)."""
    out: Dict[str, str] = {}
    for key in _DATASET_KEYS:
        _dataset_items(config.typed_dict.get(key), "dataset %r" % key, out)
    extra = config.typed_dict.get("eval_datasets")
    if isinstance(extra, dict):
        for name in sorted(extra, key=str):
            _dataset_items(extra[name], "dataset %r" % name, out)
    return out


def _layer_items(layers: Dict[str, Any], prefix: str, out: Dict[str, str]) -> None:
    for name in sorted(layers, key=str):
        opts = layers[name]
        full = prefix + str(name)
        if not isinstance(opts, dict):
            out["network entry %r" % full] = canonical(opts)
            continue
        out["layer %r" % full] = "present"
        for key in sorted(opts, key=str):
            value = opts[key]
            if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()) \
                    and key in ("unit", "subnetwork", "true_layer", "false_layer"):
                _layer_items(value, full + "/", out)
            else:
                out["layer %r option %r" % (full, key)] = canonical(value)


def network_items(net_dict: Dict[str, Any], data: Dict[str, Any], params: Dict[str, Tuple[int, ...]]) -> Dict[str, str]:
    """The network as built: each layer's options (``#`` entries too), the data description and every
    parameter's shape."""
    out: Dict[str, str] = {}
    for key in sorted(data):
        out["data %r" % key] = repr(data[key])
    _layer_items(net_dict, "", out)
    for name, shape in params.items():
        out["parameter %r" % name] = "shape %s" % (tuple(int(s) for s in shape),)
    return out


# ---- the comparison
class RanksDisagree(ConfigError):
    """Raised on every rank at the same point: the ranks would compute different things. Rank 0
    reports it (``report_here``); no rank aborts the others (they all stop by themselves)."""

    on_every_rank = True

    def __init__(self, message: str, report_here: bool):
        super().__init__(message)
        self.report_here = report_here


def _digest(text: str) -> float:
    return float(int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:6], "big"))


def _to_floats(data: bytes, length: int) -> np.ndarray:
    """``data`` padded to ``length`` bytes, 6 bytes per float64 (exact: < 2**48)."""
    raw = data.ljust(length, b"\0")
    return np.array([float(int.from_bytes(raw[i:i + 6], "big")) for i in range(0, length, 6)], dtype=np.float64)


def _from_floats(values: np.ndarray) -> bytes:
    return b"".join(int(v).to_bytes(6, "big") for v in values).rstrip(b"\0")


def _share(backend: Any, data: Optional[bytes], owner: int) -> bytes:
    """``data`` of rank ``owner`` on every rank (two host allreduces; every rank calls it)."""
    own = data if backend.rank == owner else b""
    length = int(backend.allreduce_host(np.array([float(len(own))]), "max")[0])
    length = max(6, -(-length // 6) * 6)
    values = _to_floats(own, length) if backend.rank == owner else np.zeros(length // 6)
    return _from_floats(backend.allreduce_host(values, "sum"))


def _shown(text: str, other: str = "") -> str:
    """``text`` for the message: at most about ``_SHOWN`` characters, from a little before where it
    starts to differ from ``other`` (long values that differ at the end stay telling)."""
    start = next((i for i, (a, b) in enumerate(zip(text, other)) if a != b), min(len(text), len(other)))
    if len(text) > _SHOWN and start > 20:
        text = "..." + text[start - 15:]
    return text if len(text) <= _SHOWN else text[:_SHOWN - 3] + "..."


def first_difference(mine: Dict[str, str], theirs: Dict[str, str]) -> Optional[Tuple[str, Optional[str], Optional[str]]]:
    """(item, my value or None, rank 0's value or None) of the first item that differs, in the order
    of ``mine`` then ``theirs`` (config keys and data come before layers and parameters)."""
    for name, value in mine.items():
        if theirs.get(name) != value:
            return name, value, theirs.get(name)
    for name, value in theirs.items():
        if name not in mine:
            return name, None, value
    return None


def _difference_text(rank: int, size: int, diff: Tuple[str, Optional[str], Optional[str]]) -> str:
    name, mine, chief = diff
    who = "rank %i of %i (host %s)" % (rank, size, socket.gethostname())
    if mine is None:
        return "%s lacks %s, which rank 0 has" % (who, name)
    if chief is None:
        return "%s has %s = %s, which rank 0 lacks" % (who, name, _shown(mine))
    return "%s has %s = %s, rank 0 has %s" % (who, name, _shown(mine, chief), _shown(chief, mine))


def check_same_on_all_ranks(backend: Any, items: Dict[str, str], what: str) -> None:
    """Every rank calls this at the same point with its ``items`` (name -> canonical text). Returns
    when they agree; else raises :class:`RanksDisagree` on every rank, naming the lowest rank that
    differs from rank 0 and what differs. ``what`` names the comparison in the message."""
    if backend.size <= 1:
        return
    text = json.dumps(list(items.items()))
    digest = _digest(text)
    low_high = backend.allreduce_host(np.array([digest, -digest]), "min")
    if low_high[0] == -low_high[1]:
        return
    chief = dict(json.loads(_share(backend, text.encode("utf-8") if backend.rank == 0 else None, 0)))
    diff = first_difference(items, chief) if backend.rank != 0 else None
    first = int(backend.allreduce_host(np.array([float(backend.rank if diff else backend.size)]), "min")[0])
    if first >= backend.size:  # digests differ but no item does (a digest collision cannot be ruled out)
        return
    line = _difference_text(backend.rank, backend.size, diff).encode("utf-8") if backend.rank == first else None
    detail = _share(backend, line, first).decode("utf-8", "replace")
    raise RanksDisagree("ranks disagree on %s: %s (every rank must run the same config and network; "
                        "docs/running.md, 'Ranks that disagree')" % (what, detail), report_here=backend.rank == 0)
