"""Differential check of sequence orders and batches against the real RETURNN (:mod:`returnn_fuzz`,
``--kind batches``): which sequences go in which batch, in which order, chunked how, decide the steps
per epoch and the scores a training run prints. Each case, drawn from (seed, index), is

- a train dataset: an ``HDFDataset`` over one or two small HDF files (written by RETURNN's
  ``SimpleHDFWriter``: dense ``data`` and sparse ``classes`` with random lengths, 0 and 1 included;
  ``classes`` as long as ``data``, half as long, or of its own length), sometimes wrapped in a
  ``MetaDataset`` (one or two sub-datasets), a ``ConcatDataset`` or a ``CombinedDataset`` (its orders;
  not ``sampling_sizes``, which this engine does not take and RETURNN fails on over HDFDatasets:
  'integer modulo by zero');
- its options: ``seq_ordering`` (or the config's ``batching``), ``partition_epoch``, ``repeat_epoch``,
  ``fixed_random_seed``, ``random_seed_offset``, ``seq_list_filter_file``, ``seq_order_seq_lens_file``,
  ``context_window``, ``window``;
- sometimes a third key ``aux`` of its own length that the network does not use (RETURNN's
  ``used_data_keys``: data and classes);
- the dataset as ``train``, or (a third of the cases) as ``dev`` or ``eval`` scored each epoch (RETURNN's
  eval defaults: sorted, not chunked unless ``chunk_eval`` or ``on_size_limit = "chunk"``);
- the config's batching: ``batch_size`` (int or per key), ``max_seqs``, ``max_seq_length`` (int,
  negative, per key), ``chunking`` ("N:M", N, per-key dicts, a (size, step) pair of dicts),
  ``min_chunk_size``, ``chunking_variance``, rarely ``shuffle_batches``, ``min_seq_length``,
  ``max_pad_size``; a recurrent network or not (RETURNN packs the frames of a frame-wise network).

For epochs 1..3 (or 1..5) both engines list per batch its entries (sequence tag, and the [start, end) frames
of ``data`` and ``classes``; context frames included). RETURNN's side
(:mod:`returnn_fuzz_batches_returnn`) runs its TF engine's epoch loop; this engine's side builds the
datasets as ``Engine._init_datasets`` does and cuts them with ``BatchOptions.epoch_slices`` (the train
loop's call). Verdicts as the other kinds: AGREE, DIFFER, GAP, LAX, CRASH, BOTH-FAIL.
"""
from __future__ import annotations

import json
import os
import random
import sys
import tempfile
from collections import Counter
from types import SimpleNamespace
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from returnn_side import run_returnn_script

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
RETURNN_SIDE = os.path.join(HERE, "returnn_fuzz_batches_returnn.py")
KEYS = ("data", "classes")
ORDERINGS = ["default", "sorted", "sorted_reverse", "random", "random:3", "laplace:3", "laplace:.4",
             "sort_bin_shuffle:.3", "sort_bin_shuffle:2", "sort_bin_shuffle_x2:.4", "reverse", "default_every_n:2",
             "laplace:.3:2", "random_sample"]


def _length(rng: random.Random) -> int:
    return rng.choice([0, 1, rng.randint(2, 6), rng.randint(2, 14), rng.randint(5, 30)])


def _files(rng: random.Random) -> Tuple[List[List[List[int]]], str]:
    """Per file the sequences' [data length, classes length]; and how classes relate to data."""
    mode = rng.choice(["same", "same", "half", "own"])
    files = []
    for _ in range(rng.choice([1, 1, 2])):
        seqs = []
        for _ in range(rng.randint(3, 14)):
            n = _length(rng)
            n += n % 2 if mode == "half" else 0  # (even: the per-key chunk counts match, as RETURNN asserts)
            seqs.append([n, n if mode == "same" else (n // 2 if mode == "half" else _length(rng))])
        files.append(seqs)
    return files, mode


def _pick(rng: random.Random, out: Dict[str, Any], key: str, p: float, *values: Any) -> None:
    if rng.random() < p:
        out[key] = rng.choice(values)


def _chunking(rng: random.Random, mode: str) -> Any:
    size, step = rng.choice([(1, 1), (2, 1), (3, 2), (5, 5), (6, 3), (10, 5), (4, 8)])
    if mode == "half" and rng.random() < 0.8:  # per key, classes at half the rate
        if rng.random() < 0.5:
            return [{"data": 2 * size, "classes": size}, {"data": 2 * step, "classes": step}]
        return {"data": 2 * size, "classes": size}
    return rng.choice(["%i:%i" % (size, step), "%i" % size, size, [{"data": size, "classes": size},
                                                                   {"data": step, "classes": step}]])


def draw(seed: int, index: int) -> Dict[str, Any]:
    """One case: {name, family, files, config, recurrent, epochs}; ``@DIR@`` in the config stands for the
    directory of the HDF files."""
    rng = random.Random("batches/%i/%i" % (seed, index))
    name = "fuzzbatch_%i_%i" % (seed, index)
    files, mode = _files(rng)
    more_rng = random.Random("batches-more/%i/%i" % (seed, index))  # (added later: the draws above stay)
    if more_rng.random() < 0.15:  # a bigger first file: the orderings' bins hold several sequences
        for _ in range(more_rng.randint(30, 60)):
            n = _length(more_rng)
            n += n % 2 if mode == "half" else 0
            files[0].append([n, n if mode == "same" else (n // 2 if mode == "half" else _length(more_rng))])
    epochs = [1, 2, 3, 4, 5] if more_rng.random() < 0.3 else [1, 2, 3]
    paths = ["@DIR@/%s_%i.hdf" % (name, i) for i in range(len(files))]
    hdf: Dict[str, Any] = {"class": "HDFDataset", "files": paths}
    opts: Dict[str, Any] = {}
    ordering = rng.choice(ORDERINGS)
    _pick(rng, opts, "partition_epoch", 0.3, 2, 3)
    if "partition_epoch" not in opts:  # (both refuse the two together)
        _pick(rng, opts, "repeat_epoch", 0.08, 2)
    _pick(rng, opts, "fixed_random_seed", 0.15, 1, 42)
    _pick(rng, opts, "random_seed_offset", 0.15, 1, 7)
    config: Dict[str, Any] = {}
    if rng.random() < 0.8:
        opts["seq_ordering"] = ordering
    else:
        config["batching"] = ordering
    family = [ordering, mode]
    if rng.random() < 0.1:  # every second tag of the first file
        tags = ["f0-%i" % i for i in range(0, len(files[0]), 2)]
        config["_seq_list"] = tags
        opts["seq_list_filter_file"] = "@DIR@/%s.seqs" % name
    lens_rng = random.Random("batches-lens-file/%i/%i" % (seed, index))
    if lens_rng.random() < 0.1:  # lengths to order by from a file (RETURNN's seq_order_seq_lens_file)
        config["_seq_lens"] = {"f%i-%i" % (i, j): lens_rng.randint(0, 30)
                               for i, seqs in enumerate(files) for j in range(len(seqs))}
        opts["seq_order_seq_lens_file"] = "@DIR@/%s.lens" % name
        family.append("lensfile")
    wrap = rng.choice(["hdf"] * 6 + ["meta", "concat"])
    wrap_rng = random.Random("batches-wrap2/%i/%i" % (seed, index))  # (wrappers added later: the draws above stay)
    if wrap == "hdf" and wrap_rng.random() < 0.3:
        wrap = wrap_rng.choice(["meta2", "combined"])
    if wrap == "meta2":  # data and classes from two datasets over the same files (the same tags)
        spec: Dict[str, Any] = {
            "class": "MetaDataset", "datasets": {"a": dict(hdf, **opts), "b": dict(hdf)},
            "data_map": {"data": ["a", "data"], "classes": ["b", "classes"]}, "seq_order_control_dataset": "a"}
    elif wrap == "combined":  # the files as two datasets, one after the other or interleaved (RETURNN's orders)
        spec = {"class": "CombinedDataset",
                "datasets": {"a": dict(hdf, files=paths[:1]), "b": dict(hdf, files=paths[-1:])},
                "data_map": [["a", "data", "data"], ["a", "classes", "classes"], ["b", "data", "data"],
                             ["b", "classes", "classes"]],
                "seq_ordering": wrap_rng.choice(["default", "random_dataset", "sorted", "laplace:.4", "random"])}
        spec.update({k: v for k, v in opts.items() if k not in ("seq_ordering", "seq_list_filter_file")})
    elif wrap == "meta":
        spec: Dict[str, Any] = {"class": "MetaDataset", "datasets": {"a": dict(hdf, **opts)},
                                "data_map": {"data": ["a", "data"], "classes": ["a", "classes"]},
                                "seq_order_control_dataset": "a"}
    elif wrap == "concat":
        spec = {"class": "ConcatDataset", "datasets": [dict(hdf, files=[p], **opts) for p in paths]}
    else:
        spec = dict(hdf, **opts)
    if wrap in ("meta", "meta2") and wrap_rng.random() < 0.3:  # the MetaDataset's own partition_epoch
        spec["partition_epoch"] = wrap_rng.choice([2, 3])
    family.append(wrap)
    config["train"] = spec
    config["cache_size"] = "0"  # RETURNN's HDFDataset refuses partition_epoch with its cache (and see docs/compat.md)
    config["batch_size"] = rng.choice([1, 3, 8, 20, 40, 100, 1000, {"data": 30, "classes": 12}, {"data": 60}])
    _pick(rng, config, "max_seqs", 0.6, 1, 2, 3, 5, 100)
    _pick(rng, config, "max_seq_length", 0.3, 5, 12, -4, {"data": 10}, {"classes": 3}, {"data": 20, "classes": 8})
    if rng.random() < (0.15 if mode == "own" else 0.45):  # (RETURNN refuses to chunk keys of other lengths)
        config["chunking"] = _chunking(rng, mode)
        _pick(rng, config, "min_chunk_size", 0.35, 1, 2, 3, {"data": 2, "classes": 1})
        _pick(rng, config, "chunking_variance", 0.12, 0.3)
        family.append("chunk")
    _pick(rng, config, "context_window", 0.06, 3, 4, {"data": 3})
    _pick(rng, config, "window", 0.05, 3)
    extra: Dict[str, Any] = {}  # RETURNN's rarer training options
    _pick(rng, extra, "shuffle_batches", 0.04, True)
    _pick(rng, extra, "min_seq_length", 0.04, 2, {"data": 3})
    _pick(rng, extra, "max_pad_size", 0.04, 5, 20)
    config.update(extra)
    if random.Random("batches-aux/%i/%i" % (seed, index)).random() < 0.2:  # a key the net does not use
        aux_rng = random.Random("batches-aux-lengths/%i/%i" % (seed, index))
        files = [[lengths + [_length(aux_rng)] for lengths in seqs] for seqs in files]
        family.append("aux")
    # frame-wise nets (RETURNN packs frames): aligned keys (an unused 'aux' too), one frame budget and no
    # context_window (RETURNN would give each key other frames of a sequence in the same batch: docs/compat.md)
    recurrent = rng.random() < 0.85 or mode != "same" or isinstance(config["batch_size"], dict) \
        or "context_window" in config or "aux" in family
    if not recurrent:
        family.append("framewise")
    purpose = random.Random("batches-purpose/%i/%i" % (seed, index)).choice(["train"] * 4 + ["dev", "eval"])
    if purpose != "train":  # a dev/eval set as the engine scores it
        config[purpose] = config.pop("train")
        family.append(purpose)
        eval_rng = random.Random("batches-chunk-eval/%i/%i" % (seed, index))
        if eval_rng.random() < 0.3:
            config["chunk_eval"] = True
        elif eval_rng.random() < 0.2:  # dev/eval sequences cut into chunks of batch_size frames
            config["on_size_limit"] = "chunk"
    return {"name": name, "family": "/".join(family), "files": files, "config": config, "recurrent": recurrent,
            "epochs": epochs, "purpose": purpose}


def _resolved(case: Dict[str, Any], out_dir: str) -> Dict[str, Any]:
    """The case's config with the HDF directory filled in and JSON lists back as tuples where needed."""
    config = tuple_data_maps(json.loads(json.dumps(case["config"]).replace("@DIR@", out_dir)))
    config.pop("_seq_list", None)
    config.pop("_seq_lens", None)
    for key in ("chunking", "context_window"):
        if isinstance(config.get(key), list):
            config[key] = tuple(config[key])
    return config


def tuple_data_maps(value: Any) -> Any:
    """A CombinedDataset's data_map back from JSON ([[dataset, key, out key], ...]) to RETURNN's form
    {(dataset, key): out key} (returnn_fuzz_batches_returnn.py imports it in RETURNN's venv)."""
    if isinstance(value, dict):
        out = {k: tuple_data_maps(v) for k, v in value.items()}
        if out.get("class") == "CombinedDataset" and isinstance(out.get("data_map"), list):
            out["data_map"] = {(ds, key): target for ds, key, target in out["data_map"]}
        return out
    if isinstance(value, list):
        return [tuple_data_maps(v) for v in value]
    return value


def run_returnn(cases: List[Dict[str, Any]], out_dir: str, python: str) -> Dict[str, Any]:
    """RETURNN's batches (or error) per case (see :mod:`returnn_fuzz_batches_returnn`)."""
    for c in cases:
        if "_seq_list" in c["config"]:
            with open(os.path.join(out_dir, "%s.seqs" % c["name"]), "w") as f:
                f.write("\n".join(c["config"]["_seq_list"]) + "\n")
        if "_seq_lens" in c["config"]:
            with open(os.path.join(out_dir, "%s.lens" % c["name"]), "w") as f:
                f.write(repr(c["config"]["_seq_lens"]))
    sent = [dict(c, config={k: v for k, v in c["config"].items() if k not in ("_seq_list", "_seq_lens")})
            for c in cases]
    path = os.path.join(out_dir, "batch_cases.json")
    with open(path, "w") as f:
        json.dump(sent, f)
    proc = run_returnn_script(python, [RETURNN_SIDE, "--cases-json", path, "--out", out_dir])
    result = os.path.join(out_dir, "returnn_batches.json")
    if proc.returncode or not os.path.exists(result):
        sys.exit("returnn_fuzz_batches: RETURNN's run failed; its stderr ends:\n%s" % proc.stderr[-3000:])
    with open(result) as f:
        return json.load(f)


def ours(case: Dict[str, Any], out_dir: str) -> Dict[str, List]:
    """This engine's batches per epoch, as its train loop cuts them."""
    from returnn.config import Config
    from returnn.config_keys.values import check_values
    from returnn.datasets.batching import BatchOptions
    from returnn.tf.engine import Engine
    config = Config(_resolved(case, out_dir))
    check_values(config.typed_dict)
    engine = SimpleNamespace(config=config, dist=SimpleNamespace(dataset_seed_offset=lambda: 0))
    purpose = case.get("purpose", "train")
    dataset = Engine._init_datasets(engine)[purpose]
    batching = BatchOptions.from_config(config)
    batching.pack_frames = not case["recurrent"]
    batching.used_keys = list(KEYS)  # what the engine sets for a network reading data and classes
    out: Dict[str, List] = {}
    for epoch in case["epochs"]:
        batches = []
        cut = batching if purpose == "train" else batching.for_eval(purpose)  # (the engine's scoring call)
        for batch in cut.epoch_slices(dataset, epoch, "train" if purpose == "train" else "eval", packed=True):
            context = batch.context or {}
            entries = []
            for j, seq_idx in enumerate(batch.seq_idxs.tolist()):
                lengths = dataset.get_seq_length(seq_idx)
                frames = {}
                for key in KEYS:
                    starts, ends = batch.ranges_of(key)
                    start, end = int(starts[j]), int(ends[j])
                    if end < 0:
                        start, end = 0, int(lengths[key])
                    before, after = context.get(key, (0, 0))
                    frames[key] = [start - before, end + after]
                entries.append([str(dataset.get_tag(seq_idx)), frames])
            batches.append(entries)
        out[str(epoch)] = batches
    return out


def _first_diff(mine: Dict[str, List], gold: Dict[str, List]) -> str:
    for epoch in sorted(gold, key=int):
        a, b = mine.get(epoch, []), gold[epoch]
        if len(a) != len(b):
            return "epoch %s: %i batches, RETURNN %i (first: ours %s, RETURNN %s)" % (
                epoch, len(a), len(b), _short(a[:1]), _short(b[:1]))
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return "epoch %s batch %i: ours %s, RETURNN %s" % (epoch, i, _short(x), _short(y))
    return ""


def _short(entries: Any) -> str:
    text = json.dumps(entries).replace('"', "")
    return text if len(text) < 160 else text[:157] + "..."


def verdict(case: Dict[str, Any], out_dir: str, gold: Dict[str, Any]) -> Tuple[str, str]:
    """(verdict, detail) of one case."""
    from returnn.errors import ReturnnError
    returnn_error = gold.get("error")
    try:
        mine = ours(case, out_dir)
    except Exception as exc:  # noqa: BLE001 - our refusal or crash is the finding
        line = "%s: %s" % (type(exc).__name__, (str(exc).strip().splitlines() or [""])[0][:200])
        if returnn_error is not None:
            return "BOTH-FAIL", line + " | RETURNN: " + returnn_error
        return ("GAP" if isinstance(exc, ReturnnError) else "CRASH"), line
    if returnn_error is not None:
        return "LAX", "RETURNN: " + returnn_error
    diff = _first_diff(mine, gold["epochs"])
    return ("DIFFER", diff) if diff else ("AGREE", "")


def run(seed: int, start: int, n: int, python: str, keep: Optional[str], show: List[str],
        only: Optional[List[str]] = None) -> Counter:
    """Draws, runs both engines, prints the cases to show and the counts."""
    cases = [draw(seed, i) for i in range(start, start + n)]
    if only:
        cases = [c for c in cases if any(s in c["name"] for s in only)]
    out_dir = keep or tempfile.mkdtemp(prefix="returnn_fuzz_batches_")
    os.makedirs(out_dir, exist_ok=True)
    gold = run_returnn(cases, out_dir, python)
    counts: Counter = Counter()
    for c in cases:
        kind, detail = verdict(c, out_dir, gold[c["name"]])
        counts[kind] += 1
        if kind in show:
            print("%-9s %s %s\n          config %s | %s" % (
                kind, c["name"], c["family"], json.dumps({k: v for k, v in c["config"].items() if k != "train"}),
                detail), flush=True)
    print("\n%i cases (seed %i, %i..%i): %s" % (len(cases), seed, start, start + n - 1,
                                                ", ".join("%s %i" % kv for kv in sorted(counts.items()))))
    if not keep:
        import shutil
        shutil.rmtree(out_dir, ignore_errors=True)
    return counts
