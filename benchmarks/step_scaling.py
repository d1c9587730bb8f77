#!/usr/bin/env python3
"""How the compiled train step's cost grows: step time against batch size (frames, fixed sequence
length) and against sequence length (fixed number of sequences), for a config (default: the LSTM
config of vs_returnn.py).

Usage: python benchmarks/step_scaling.py [--config benchmarks/configs/lstm.config] [--repeats 5]

Batches are synthetic (random features and labels, all sequences full length), fed straight to
the step. Prints per shape: median step time, time per 1000 frames, and the step's trace count;
cost should grow about linearly in frames and the trace count must stay 1 (no retracing).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from typing import Dict, List, Tuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def synthetic_batch(network, keys: List[str], batch: int, time_len: int, rng: np.random.RandomState) -> Dict:
    import tensorflow as tf
    out = {}
    for key in keys:
        spec = network.extern_data[key]
        if spec.sparse:
            value = rng.randint(0, spec.dim, size=(batch, time_len)).astype(spec.dtype)
        else:
            value = rng.randn(batch, time_len, spec.dim).astype(spec.dtype)
        out[key] = tf.constant(value)
        out[key + ":seq_len"] = tf.constant(np.full([batch], time_len, np.int32))
    return out


def time_step(steps, batch: Dict, repeats: int) -> float:
    import tensorflow as tf
    flags = tf.zeros([3], tf.float32)
    steps.train_step(batch, tf.constant([1, 0], tf.int64), flags).numpy()  # warm-up (memory pools)
    times = []
    for i in range(repeats):
        t0 = time.perf_counter()
        steps.train_step(batch, tf.constant([1, i + 1], tf.int64), flags).numpy()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default=os.path.join(REPO, "benchmarks", "configs", "lstm.config"))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seq-len", type=int, default=125, help="sequence length of the batch-size sweep")
    parser.add_argument("--num-seqs", type=int, default=20, help="sequences per batch of the length sweep")
    args = parser.parse_args()

    from returnn.config import load_config_from_args
    from returnn.__main__ import _configure_tensorflow
    config = load_config_from_args([args.config, "++log_verbosity", "2", "++tf_log_dir", "None"])
    config.set("model", os.path.join(tempfile.mkdtemp(prefix="step-scaling-"), "model"))
    _configure_tensorflow(config)
    from returnn.distributed.context import DistributedContext
    from returnn.log import log
    from returnn.tf.network import TFNetwork
    from returnn.extern_data import extern_data_from_config
    from returnn.tf.optimizers import create_optimizer
    from returnn.tf.steps import StepFunctions

    log.initialize([], 2)
    network = TFNetwork(config.typed_value("network"), extern_data_from_config(config, None))
    steps = StepFunctions(network, create_optimizer(config, network.trainable_variables),
                          DistributedContext.from_config(config))
    t0 = time.perf_counter()
    steps.train_step.get_concrete_function()
    print("config %s; trace %.2f s" % (os.path.relpath(args.config, REPO), time.perf_counter() - t0))
    rng = np.random.RandomState(0)
    sweeps: List[Tuple[str, List[Tuple[int, int]]]] = [
        ("batch size (T=%i)" % args.seq_len, [(b, args.seq_len) for b in (5, 10, 20, 40, 80)]),
        ("sequence length (B=%i)" % args.num_seqs, [(args.num_seqs, t) for t in (25, 50, 100, 200, 400)])]
    for title, shapes in sweeps:
        print("\nstep time against %s" % title)
        print("%6s %6s %8s %10s %12s %7s" % ("B", "T", "frames", "step ms", "ms/1k frames", "traces"))
        for batch_size, time_len in shapes:
            batch = synthetic_batch(network, steps.train_keys, batch_size, time_len, rng)
            sec = time_step(steps, batch, args.repeats)
            frames = batch_size * time_len
            print("%6i %6i %8i %10.1f %12.2f %7i" % (batch_size, time_len, frames, 1e3 * sec, 1e6 * sec / frames,
                                                     steps.train_step.experimental_get_tracing_count()))


if __name__ == "__main__":
    main()
