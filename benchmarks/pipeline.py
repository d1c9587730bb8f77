#!/usr/bin/env python3
"""Input pipeline: does data loading keep the compiled step busy?

Builds (once) an HDF file of 40-dim features with sparse targets, then trains a model small enough
that data loading matters (one linear layer, or one LSTM with --model lstm) from it with
``cache_size = 0``, with prefetching on and off. Prints per setting: computing time, data wait per
step, step time per step; and the batches/s the producer makes alone.

Usage: python benchmarks/pipeline.py [--num_seqs 4000] [--model linear|lstm] [--epochs 2]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

NETWORKS = {
    "linear": {"hidden": {"class": "linear", "activation": "relu", "n_out": 128},
               "output": {"class": "softmax", "loss": "ce", "from": "hidden"}},
    "lstm": {"fw0": {"class": "rec", "unit": "nativelstm2", "n_out": 32},
             "output": {"class": "softmax", "loss": "ce", "from": "fw0"}},
}


def make_file(path: str, num_seqs: int) -> None:
    from returnn.datasets import init_dataset
    from returnn.datasets.hdf import dump_dataset_to_hdf
    dataset = init_dataset({"class": "RandomDataset", "input_dim": 40, "output_dim": 20, "num_seqs": num_seqs,
                            "seq_len": (50, 300), "fixed_random_seed": 1})
    dump_dataset_to_hdf(dataset, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--num_seqs", type=int, default=4000)
    parser.add_argument("--model", choices=sorted(NETWORKS), default="linear")
    parser.add_argument("--epochs", type=int, default=2, help="measured epochs per setting (after a warm-up)")
    parser.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "returnn-bench-pipeline"))
    args = parser.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    path = os.path.join(args.dir, "feat40.%i.hdf" % args.num_seqs)
    if not os.path.exists(path):
        print("making %s ..." % path)
        make_file(path, args.num_seqs)

    from returnn.config import Config
    from returnn.__main__ import _configure_tensorflow
    from returnn.datasets.batching import generate_batches
    from returnn.datasets.prefetch import producer_only_rate
    from returnn.distributed.context import DistributedContext
    from returnn.log import log
    from returnn.tf.engine import Engine

    config = Config({
        "train": {"class": "HDFDataset", "files": [path], "seq_ordering": "random"}, "cache_size": "0",
        "network": NETWORKS[args.model], "optimizer": {"class": "adam"}, "learning_rate": 1e-3,
        "batch_size": 8000, "max_seqs": 40, "model": os.path.join(args.dir, "model"), "tf_log_dir": None,
        "tf_session_opts": {"intra_op_parallelism_threads": 1, "inter_op_parallelism_threads": 1}})
    _configure_tensorflow(config)
    log.initialize([], 2)
    engine = Engine(config, DistributedContext.from_config(config))
    engine.steps.trace()
    dataset = engine.datasets["train"]
    heartbeat = lambda: None  # noqa: E731
    engine._train_epoch(1, heartbeat)  # warm-up
    print("model %s, %s: %i sequences, 40-dim features, cache_size 0" % (args.model, path, args.num_seqs))
    print("%-12s %6s %9s %10s %14s %14s" % ("prefetch", "steps", "epoch s", "computing", "data wait/step",
                                             "step time/step"))
    epoch = 2
    for prefetch in (8, 0):
        engine.batching.prefetch = prefetch
        for _ in range(args.epochs):
            _, timer, steps = engine._train_epoch(epoch, heartbeat)
            epoch += 1
            print("%-12s %6i %9.2f %9.1f%% %11.2f ms %11.2f ms" % (
                "on (%i)" % prefetch if prefetch else "off", steps, timer.elapsed, 100 * timer.computing_fraction,
                1000 * timer.data_wait / steps, 1000 * timer.step / steps))
    dataset.init_seq_order(epoch)
    slices = generate_batches(dataset, engine.batching.batch_size, engine.batching.max_seqs)
    rate = producer_only_rate(dataset, slices, engine.steps.train_keys)
    frames = int(sum(dataset.seq_lengths_in_order()[:, 0]))
    print("producer alone: %.1f batches/s (%.0f frames/s) over %i batches" % (rate, rate * frames / len(slices), len(slices)))


if __name__ == "__main__":
    main()
