#!/usr/bin/env python3
"""Engine overhead: the wall time of a training epoch run by the engine, over the time of a bare
loop calling the same compiled step on the same batches already held in memory as tensors.

Usage: python benchmarks/engine_overhead.py [--config demos/demo-tf-lstm.12ax.config] [--epochs 3]
Prints per measured epoch: engine wall time, its computing time, bare loop time, the ratio
(target: at most 1.05x, issue 14), and where the difference is: the engine's time in the step calls
over the bare loop's ("steps/bare": the steps slowed by the prefetch thread's work beside them),
its time waiting for batches, and the rest of its loop ("other": queue, scores, progress).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def bare_loop(engine, epoch: int) -> float:
    """Seconds of a plain loop calling the engine's compiled train step on ``epoch``'s batches,
    made into tensors before the clock starts."""
    import tensorflow as tf
    from returnn.datasets.batching import make_batch_arrays
    dataset, slices, _ = engine._epoch_batches(epoch)
    keys = engine.steps.train_keys
    batches = [engine.steps.to_tensors(make_batch_arrays(dataset, sl, keys)) for sl in slices]
    flags = tf.zeros([3], tf.float32)
    seeds = [tf.constant([epoch, i], tf.int64) for i in range(len(batches))]
    t0 = time.perf_counter()
    for batch, seed in zip(batches, seeds):
        engine.steps.train_step(batch, seed, flags).numpy()
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="demos/demo-tf-lstm.12ax.config")
    parser.add_argument("--epochs", type=int, default=6, help="measured epochs (after one warm-up epoch)")
    args = parser.parse_args()

    from returnn.config import load_config_from_args
    from returnn.__main__ import _configure_tensorflow
    config = load_config_from_args([args.config, "++log_verbosity", "2", "++tf_log_dir", "None"])
    _configure_tensorflow(config)
    import numpy as np
    import tensorflow as tf
    from returnn.distributed.context import DistributedContext
    from returnn.log import log
    from returnn.tf.engine import Engine

    log.initialize([], 2)
    workdir = tempfile.mkdtemp(prefix="engine-overhead-")
    config.set("model", os.path.join(workdir, "model"))
    engine = Engine(config, DistributedContext.from_config(config))
    t0 = time.perf_counter()
    engine.steps.trace()
    print("trace time: %.2f s (one-time, excluded below)" % (time.perf_counter() - t0))
    heartbeat = lambda: None  # noqa: E731
    engine._train_epoch(1, heartbeat)  # warm-up: first execution of the graph
    print("%-6s %10s %10s %10s %8s %9s %8s %8s" % ("epoch", "engine s", "computing", "bare s", "ratio", "steps/bare",
                                                 "wait s", "other s"))
    ratios, engine_times, bare_times = [], [], []
    for epoch in range(2, 2 + args.epochs):
        # who goes first alternates, so neither side always runs on a warmer (or noisier) machine
        if epoch % 2:
            bare = bare_loop(engine, epoch)
        _, timer, steps = engine._train_epoch(epoch, heartbeat)
        if not epoch % 2:
            bare = bare_loop(engine, epoch)
        ratio = timer.elapsed / bare
        ratios.append(ratio)
        engine_times.append(timer.elapsed)
        bare_times.append(bare)
        other = timer.elapsed - timer.step - timer.data_wait
        print("%-6i %10.3f %9.1f%% %10.3f %7.3fx %9.3f %8.4f %8.4f"
              % (epoch, timer.elapsed, 100 * timer.computing_fraction, bare, ratio, timer.step / bare, timer.data_wait,
                 other))
    print("steps per epoch: %i; overhead ratio: median %.3fx, best-of %.3fx (min engine / min bare; "
          "target <= 1.05x)" % (steps, float(np.median(ratios)), min(engine_times) / min(bare_times)))


if __name__ == "__main__":
    main()
