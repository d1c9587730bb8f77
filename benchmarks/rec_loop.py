#!/usr/bin/env python3
"""Rec sub-network speed: train steps per second of a small attention encoder-decoder, the share
of the step spent in the decoder's step loop, and the time of a beam search batch.

Usage: python benchmarks/rec_loop.py [--config benchmarks/configs/attention.config] [--steps 20]

The loop share is measured by running the same compiled train step again with the decoder's
in-loop layers replaced by zeros of the same shapes (everything else, including the moved-out
layers, the encoder and the losses, unchanged): share = 1 - stubbed / full.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _median_time(fn, batches, repeat: int = 1) -> float:
    import numpy as np
    times = []
    for _ in range(repeat):
        for b in batches:
            t0 = time.perf_counter()
            fn(b)
            times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="benchmarks/configs/attention.config")
    parser.add_argument("--steps", type=int, default=20, help="measured train steps")
    args = parser.parse_args()

    from returnn.config import load_config_from_args
    from returnn.__main__ import _configure_tensorflow
    config = load_config_from_args([args.config, "++log_verbosity", "2", "++tf_log_dir", "None"])
    _configure_tensorflow(config)
    import tensorflow as tf
    from returnn.datasets.batching import make_batch_arrays
    from returnn.distributed.context import DistributedContext
    from returnn.log import log
    from returnn.tf.engine import Engine
    from returnn.tf.layers.rec_net import loop as loop_module
    from returnn.tf.layers.rec_net import frames
    from returnn.tf.steps import StepFunctions

    log.initialize([], 2)
    config.set("model", os.path.join(tempfile.mkdtemp(prefix="rec-loop-"), "model"))
    engine = Engine(config, DistributedContext.from_config(config))
    dataset, slices, _ = engine._epoch_batches(1)
    keys = engine.steps.train_keys
    batches = [{k: tf.constant(v) for k, v in make_batch_arrays(dataset, sl, keys).items()}
               for sl in slices[:args.steps]]
    flags = tf.zeros([3], tf.float32)
    seed = tf.constant([1, 1], tf.int64)
    step = lambda b: engine.steps.train_step(b, seed, flags).numpy()  # noqa: E731
    step(batches[0])
    full = _median_time(step, batches)
    frames_per_step = sum(int(b["data:seq_len"].numpy().sum()) for b in batches) / len(batches)

    def stub_loop(self):
        """The in-loop layers as zeros of their stacked shapes (no loop)."""
        out = {}
        for n in self.rec.plan.in_loop:
            data = frames.stacked_template(self.rec.layers[n].output, self.rec.time_dim)
            shape = [self.batch if d.is_batch_dim() else (self.n_time if d == self.rec.time_dim else
                     (d.dimension if d.dimension is not None else self.extents[d])) for d in data.dims]
            zeros = tf.zeros(tf.stack(shape), tf.as_dtype(data.dtype))
            out[n] = frames.LayerOutput(zeros, data, self.sizes)
        return out

    original = loop_module.UnitRun.run_loop
    loop_module.UnitRun.run_loop = stub_loop
    try:
        stub_steps = StepFunctions(engine.network, engine.optimizer, engine.dist)
        stub = lambda b: stub_steps.train_step(b, seed, flags).numpy()  # noqa: E731
        stub(batches[0])
        stubbed = _median_time(stub, batches)
    finally:
        loop_module.UnitRun.run_loop = original
    in_loop = engine.network.layers["output"].plan.in_loop
    print("config %s: %i train steps, %.0f input frames per step" % (args.config, len(batches), frames_per_step))
    print("decoder layers in the loop: %s" % ", ".join(in_loop))
    print("train step: %.1f ms median (%.2f steps/s); with the loop stubbed: %.1f ms; loop share %.0f%%"
          % (1000 * full, 1 / full, 1000 * stubbed, 100 * (1 - stubbed / full)))

    engine.search_mode, engine.net_dict = True, None
    engine._use_network_of_epoch(1)
    search_batches = [{k: v for k, v in b.items() if k in engine.steps.forward_keys or k.split(":")[0] in
                       engine.steps.forward_keys} for b in batches]
    search = lambda b: engine.steps.forward_step(b)[0].numpy()  # noqa: E731
    search(search_batches[0])
    beam = engine.network.layers["output"].unit[engine.network.layers["output"].search_choice].get("beam_size")
    print("beam search (beam %s): %.1f ms per batch median" % (beam, 1000 * _median_time(search, search_batches)))


if __name__ == "__main__":
    main()
