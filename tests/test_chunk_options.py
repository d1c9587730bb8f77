"""Chunking options as RETURNN reads them: ``chunking_variance`` (RETURNN's own chunks as golden
data), a dataset dict's ``chunking`` / ``min_chunk_size`` / ``chunking_variance`` over the
config's, dev/eval chunking (``chunk_eval``, ``on_size_limit``, frame-wise ``"1"``), a dataset's
own ``window``, and the dataset options refused in one line.

``data/returnn_chunking_variance.json`` holds the chunks RETURNN itself trains on
(tests/returnn_goldens/make_chunking_variance.py: ``StaticDataset(..., chunking=(size, step),
chunking_variance=v, min_chunk_size=m)``, then ``init_seq_order(epoch)`` and ``generate_batches`` as
its TF engine calls it, which draws a number for its seq_drop test per kept chunk from the generator
the chunk scales come from), as ``[corpus index, start, end]`` per chunk, for seeds from the epoch, a
fixed seed, a seed offset, ``partition_epoch`` and ``max_seq_length``.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from returnn.config import Config
from returnn.datasets import init_dataset
from returnn.datasets.batching import BatchOptions, eval_chunking, generate_batches
from returnn.datasets.chunking import ChunkOptions, chunk_options
from returnn.datasets.generating import StaticDataset
from returnn.errors import ConfigError, DataError

with open(os.path.join(os.path.dirname(__file__), "data", "returnn_chunking_variance.json")) as _f:
    RETURNN_CHUNKS = json.load(_f)


def make_dataset(lengths, **kwargs):
    seqs = [{"data": np.zeros((n, 2), np.float32), "classes": np.zeros(n, np.int32)} for n in lengths]
    return StaticDataset(seqs, output_dim=3, **kwargs)


def chunks_of(batches, ds):
    return [[ds.corpus_index(i), s, e] for b in batches for i, s, e in b.entries()]


@pytest.mark.parametrize("case", RETURNN_CHUNKS, ids=lambda c: "v%s-e%i-p%i-m%s-%s" % (
    c["variance"], c["epoch"], c["partition_epoch"], c.get("max_seq_length", 0), "-".join("%s%s" % kv for kv in c["options"].items()) or "seed"))
def test_chunking_variance_cuts_returnns_chunks(case):
    ds = make_dataset(case["lengths"], partition_epoch=case["partition_epoch"], **case["options"])
    ds.init_seq_order(case["epoch"])
    batches = generate_batches(ds, 10 ** 6, -1, "%i:%i" % tuple(case["chunking"]),
                               max_seq_length=case.get("max_seq_length", 0),
                               min_chunk_size=case["min_chunk_size"], chunking_variance=case["variance"])
    assert chunks_of(batches, ds) == case["chunks"]


def test_chunking_variance_draws_per_sequence_and_is_repeatable():
    ds = make_dataset([100] * 20)
    ds.init_seq_order(1)
    first = chunks_of(generate_batches(ds, 10 ** 6, -1, "20:20", chunking_variance=0.8), ds)
    sizes = {e - s for _, s, e in first}
    assert len(sizes) > 3 and max(sizes) <= 20 and min(sizes) >= 1  # scaled down, differently per sequence
    ds.init_seq_order(1)
    assert chunks_of(generate_batches(ds, 10 ** 6, -1, "20:20", chunking_variance=0.8), ds) == first
    ds.init_seq_order(2)
    assert chunks_of(generate_batches(ds, 10 ** 6, -1, "20:20", chunking_variance=0.8), ds) != first


def test_chunk_options_parse_and_refuse():
    assert chunk_options("20:10", {"data": 3}, 0.25) == ChunkOptions(20, 10, 3, 0.25)
    assert chunk_options("0", 5, 0.5) is None
    assert ChunkOptions(250, 100).ranges(250) == [(0, 250), (100, 250), (200, 250)]
    with pytest.raises(ConfigError, match="config key 'chunking_variance'"):
        chunk_options("20:10", 0, -0.5)
    with pytest.raises(ConfigError, match="dataset x: option 'chunking'"):
        chunk_options("ten", owner="dataset x: option")


def options(**config):
    return BatchOptions.from_config(Config(dict({"batch_size": 10 ** 6}, **config)))


def entry_ranges(opts, ds, purpose):
    return [(s, e) for b in opts.epoch_slices(ds, 1, purpose) for _, s, e in b.entries()]


def test_dataset_dict_chunking_wins_over_the_config():
    opts = options(chunking="10:10", min_chunk_size=0)
    assert entry_ranges(opts, make_dataset([25]), "train") == [(0, 10), (10, 20), (20, 25)]
    own = make_dataset([25], chunking="20:20")
    assert entry_ranges(opts, own, "train") == [(0, 20), (20, 25)]
    own_min = make_dataset([25], min_chunk_size=6)  # the config's chunking, the dataset's min_chunk_size
    assert entry_ranges(opts, own_min, "train") == [(0, 10), (10, 20)]
    unset = make_dataset([25], chunking=None)  # None in a dataset dict: the config's value (RETURNN)
    assert entry_ranges(opts, unset, "train") == [(0, 10), (10, 20), (20, 25)]
    off = make_dataset([25], chunking="0")
    assert entry_ranges(opts, off, "train") == [(0, -1)]
    assert entry_ranges(opts, own, "forward") == [(0, -1)]  # forwarding keeps whole sequences


def test_eval_datasets_are_chunked_only_when_asked():
    ds = make_dataset([25])
    assert entry_ranges(options(chunking="10:10"), ds, "eval") == [(0, -1)]
    assert entry_ranges(options(chunking="10:10", chunk_eval=True), ds, "eval") == [(0, 10), (10, 20), (20, 25)]
    assert entry_ranges(options(chunking="10:10"), make_dataset([25], chunking="20:20"), "eval") == [(0, 20), (20, 25)]
    assert eval_chunking(Config({"on_size_limit": "chunk", "batch_size": 12})) == 12
    assert eval_chunking(Config({"chunking": "1"})) == "1"
    assert eval_chunking(Config({"chunking": "10:5"})) is None


def test_unknown_chunking_in_a_dataset_dict_is_one_line_naming_it():
    with pytest.raises(ConfigError, match=r"dataset train \(StaticDataset\): option 'chunking'"):
        make_dataset([5], name="train", chunking="a:b")
    with pytest.raises(ConfigError, match="option 'chunking_variance'"):
        make_dataset([5], chunking_variance="lots")


@pytest.mark.parametrize("option,value,needle", [
    ("context_window", 5, "context_window"), ("shuffle_frames_of_nseqs", 10, "shuffle_frames_of_nseqs"),
    ("window", 3, "window")])
def test_unsupported_dataset_options_are_refused(option, value, needle):
    with pytest.raises(DataError, match=needle):
        make_dataset([5], **{option: value})


def test_no_op_values_of_those_options_are_accepted():
    make_dataset([5], context_window=None, shuffle_frames_of_nseqs=0, window=1)  # RETURNN's eval defaults write these


def test_a_datasets_own_window_wins(tmp_path):
    from returnn.distributed.context import DistributedContext
    from returnn.tf.engine import Engine
    data = {"class": "DummyDataset", "input_dim": 3, "output_dim": 4, "num_seqs": 4, "seq_len": 6}
    config = Config({"train": dict(data, window=3), "dev": dict(data, window=None), "eval": dict(data, window=3),
                     "window": 5, "num_epochs": 1,
                     "network": {"output": {"class": "softmax", "loss": "ce", "from": "data"}},
                     "model": str(tmp_path / "model")})
    with pytest.raises(DataError, match="dev"):  # None: the config's window (5), which dev then has alone
        Engine(config, DistributedContext.from_config(config))
    config.set("dev", dict(data, window=3))
    engine = Engine(config, DistributedContext.from_config(config))
    assert {name: ds.get_data_dim("data") for name, ds in engine.datasets.items()} == {"train": 9, "dev": 9, "eval": 9}


@pytest.mark.parametrize("where", ["config", "own"])
def test_window_on_a_meta_or_combined_dataset_is_refused(tmp_path, where):
    """RETURNN's MetaDataset and CombinedDataset assert window == 1 (the config's window is copied into the train
    dataset's options): RETURNN fails, this engine windowed (LAX in returnn_fuzz --kind batches, fuzzbatch_8_62)."""
    from returnn.distributed.context import DistributedContext
    from returnn.errors import ConfigError
    from returnn.tf.engine import Engine
    data = {"class": "DummyDataset", "input_dim": 3, "output_dim": 4, "num_seqs": 4, "seq_len": 6}
    meta = {"class": "MetaDataset", "datasets": {"a": data}, "data_map": {"data": ("a", "data"), "classes": ("a", "classes")},
            "seq_order_control_dataset": "a"}
    config = Config({"train": dict(meta, window=3) if where == "own" else meta, "num_epochs": 1,
                     "network": {"output": {"class": "softmax", "loss": "ce", "from": "data"}},
                     "model": str(tmp_path / "model")})
    if where == "config":
        config.set("window", 3)
    with pytest.raises(ConfigError, match="MetaDataset.*window == 1") as exc:
        Engine(config, DistributedContext.from_config(config))
    assert "\n" not in str(exc.value)
    config.set("window", 1)
    config.set("train", meta)
    assert Engine(config, DistributedContext.from_config(config)).datasets["train"].get_data_dim("data") == 3


def test_engine_cuts_train_and_dev_batches_by_these_rules(tmp_path):
    from returnn.distributed.context import DistributedContext
    from returnn.tf.engine import Engine
    from returnn.tf.evaluation import evaluate_dataset
    data = {"class": "DummyDataset", "input_dim": 3, "output_dim": 4, "num_seqs": 3, "seq_len": 20}
    config = Config({"train": dict(data, chunking="8:8"), "dev": data, "chunking": "5:5", "chunk_eval": True,
                     "batch_size": 1000, "num_epochs": 1, "model": str(tmp_path / "model"),
                     "network": {"output": {"class": "rec", "unit": "lstm", "n_out": 4, "from": "data", "loss": "ce"}}})
    engine = Engine(config, DistributedContext.from_config(config))
    _, slices, _ = engine._epoch_batches(1)
    assert sorted({(s, e) for b in slices for _, s, e in b.entries()}) == [(0, 8), (8, 16), (16, 20)]
    dev = engine.batching.epoch_slices(engine.datasets["dev"], 1, "eval")
    assert sorted({(s, e) for b in dev for _, s, e in b.entries()}) == [(0, 5), (5, 10), (10, 15), (15, 20)]
    scores = evaluate_dataset(engine.steps, engine.datasets["dev"], 1, engine.batching.for_eval(), engine.dist,
                              lambda: None)
    assert np.isfinite(scores["score"])


@pytest.mark.parametrize("config", [
    {"chunk_eval": True, "chunking": ({"data": 10, "classes": 10}, {"data": 5, "classes": 5})},
    {"chunk_eval": True, "chunking": {"data": 10, "classes": 5}},
    {"on_size_limit": "chunk", "batch_size": {"data": 30, "classes": 12}},
])
def test_dev_chunking_forms_returnn_fails_on_are_refused(config):
    """RETURNN's dev/eval defaults read chunk_eval's chunking / on_size_limit's batch_size as a string and parse
    'size:step' or a number: with a per-key or (size, step) form it fails ("invalid literal for int() with
    base 10: \\"{'data'\\"", RETURNN 1.20261022; returnn_fuzz --kind batches fuzzbatch_2_2, LAX). One line here."""
    with pytest.raises(ConfigError, match="dev/eval chunking") as exc:
        BatchOptions.from_config(Config(dict({"batch_size": 100}, **config)))
    assert "\n" not in str(exc.value)
    assert BatchOptions.from_config(Config({"batch_size": 100, "chunk_eval": True, "chunking": "10:5"})).eval_chunking \
        == "10:5"
