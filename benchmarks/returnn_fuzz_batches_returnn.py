"""The real RETURNN's side of ``returnn_fuzz --kind batches`` (run with RETURNN's venv, from /tmp,
``DISABLE_CUDA=1``): for each case of ``--cases-json`` it writes the case's HDF files with RETURNN's
``SimpleHDFWriter`` (a third key ``aux`` when the case's lengths have three entries), loads the train
dataset as RETURNN's ``__main__.load_data`` does (the config's ``chunking``, ``batching``, ``window``,
``context_window``, ... copied into the dataset's options), and
runs RETURNN's TF engine's epoch loop for the case's epochs: ``init_seq_order(epoch)`` (a changed order
drops the cached batch list), ``generate_batches`` with the options as ``Engine.init_train_from_config``
reads them, the batches of an unchanged order reused (``BatchSetGenerator.reset``); a case with
``purpose`` dev or eval loads that dataset with RETURNN's eval defaults and cuts it as ``Engine.eval_model``. Writes
``{case: {"epochs": {epoch: [[[tag, {key: [start, end]}], ...] per batch]}}}`` or ``{case: {"error": line}}``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import traceback

import numpy as np

KEYS = ("data", "classes")


def write_hdf(path: str, seqs, tag_prefix: str) -> None:
    """One HDF file in RETURNN's format: dense 2-dim ``data``, sparse ``classes`` (dim 5), own lengths."""
    from returnn.datasets.hdf import SimpleHDFWriter
    if os.path.exists(path):
        return
    aux = len(seqs[0]) > 2  # a third key the network does not use (RETURNN's used_data_keys leave it out)
    writer = SimpleHDFWriter(path, dim=2, ndim=2, extra_type=dict(
        {"classes": (5, 1, "int32")}, **({"aux": (3, 1, "int32")} if aux else {})))
    for i, lengths in enumerate(seqs):
        n_data, n_classes = lengths[:2]
        inputs = np.arange(n_data * 2, dtype="float32").reshape(1, n_data, 2) + i
        extra = {"classes": (np.arange(n_classes, dtype="int32") % 5).reshape(1, n_classes)}
        if aux:
            extra["aux"] = np.zeros((1, lengths[2]), dtype="int32")
        writer.insert_batch(inputs, [n_data], ["%s-%i" % (tag_prefix, i)], extra=extra)
    writer.close()


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from returnn_fuzz_batches import tuple_data_maps  # noqa: E402  (stdlib imports only: fine in RETURNN's venv)


def run_case(case, out_dir: str):
    """The case's batches per epoch in RETURNN's engine."""
    import returnn.__main__ as rnn
    from returnn.config import Config
    from returnn.datasets.basic import Dataset
    from returnn.util.basic import NumbersDict
    for i, seqs in enumerate(case["files"]):
        write_hdf(os.path.join(out_dir, "%s_%i.hdf" % (case["name"], i)), seqs, "f%i" % i)
    config = Config()
    config.update(tuple_data_maps(json.loads(json.dumps(case["config"]).replace("@DIR@", out_dir))))
    for key, value in list(config.typed_dict.items()):
        if isinstance(value, list) and key == "chunking":  # JSON has no tuples: (size, step)
            config.typed_dict[key] = tuple(value)
        if isinstance(value, list) and key == "context_window":
            config.typed_dict[key] = tuple(value)
    rnn.config = config
    name = case.get("purpose", "train")  # train, or a dev/eval set as the engine scores it
    defaults = Dataset.get_default_kwargs_train(config=config) if name == "train" else \
        Dataset.get_default_kwargs_eval(config=config)
    dataset, _ = rnn.load_data(config, rnn.get_cache_byte_sizes()[0], name, **defaults)
    # Engine.init_train_from_config
    batch_size = config.typed_value("batch_size", 1)
    shuffle_batches = config.bool("shuffle_batches", False)
    max_seqs = config.int("max_seqs", -1)
    seq_drop = config.float("seq_drop", 0.0)
    seq_drop_freq = config.float("seq_drop_freq", 10)
    max_seq_length = config.typed_value("max_seq_length", None) or config.float("max_seq_length", 0)
    min_seq_length = config.typed_value("min_seq_length", None) or config.float("min_seq_length", 0)
    if not max_seq_length:
        max_seq_length = sys.maxsize
    if isinstance(max_seq_length, dict):
        max_seq_length = NumbersDict(max_seq_length)
    assert isinstance(max_seq_length, (int, float, NumbersDict))
    if not min_seq_length:
        min_seq_length = 0
    if isinstance(min_seq_length, dict):
        min_seq_length = NumbersDict(min_seq_length)
    max_pad_size = config.typed_value("max_pad_size", None)
    cached = None
    out = {}
    for epoch in case["epochs"]:  # Engine.train's loop
        if epoch % seq_drop_freq == 0 and seq_drop > 0.0:
            cached = None
        if dataset.init_seq_order(epoch=epoch):
            cached = None
        if (cached is None or not dataset.batch_set_generator_cache_whole_epoch()) and name != "train":
            cached = dataset.generate_batches(  # Engine.eval_model
                recurrent_net=case["recurrent"], batch_size=batch_size, max_seqs=max_seqs,
                max_seq_length=(max_seq_length if name == "dev" else sys.maxsize), used_data_keys=set(KEYS))
        elif cached is None or not dataset.batch_set_generator_cache_whole_epoch():
            cached = dataset.generate_batches(
                recurrent_net=case["recurrent"], batch_size=batch_size, max_seqs=max_seqs,
                max_seq_length=max_seq_length, min_seq_length=min_seq_length, max_pad_size=max_pad_size,
                seq_drop=seq_drop, shuffle_batches=shuffle_batches, used_data_keys=set(KEYS))
        else:
            cached.reset()
        batches = []
        while cached.has_more():
            (batch,) = cached.peek_next_n(1)
            cached.advance(1)
            entries = []
            for part in batch.seqs:
                dataset.load_seqs(part.seq_idx, part.seq_idx + 1)
                entries.append([str(dataset.get_tag(part.seq_idx)),
                                {k: [int(part.seq_start_frame[k]), int(part.seq_end_frame[k])] for k in KEYS}])
            batches.append(entries)
        out[str(epoch)] = batches
    return {"epochs": out}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases-json", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    import returnn.util.basic  # noqa: F401 - RETURNN's global setup (better_exchook) before datasets
    from returnn.log import log
    log.initialize(verbosity=[0])
    with open(args.cases_json) as f:
        cases = json.load(f)
    results = {}
    for case in cases:
        try:
            results[case["name"]] = run_case(case, args.out)
        except Exception as exc:  # noqa: BLE001 - RETURNN's refusal is a verdict
            line = (str(exc).strip().splitlines() or [""])[0][:240]
            results[case["name"]] = {"error": "%s: %s" % (type(exc).__name__, line),
                                     "trace": traceback.format_exc()[-1500:]}
    with open(os.path.join(args.out, "returnn_batches.json"), "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
