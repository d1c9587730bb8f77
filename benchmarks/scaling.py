#!/usr/bin/env python3
"""Data-parallel scaling on this machine: steps/s and frames/s for np=1 and np=2 (one TF thread
per rank, TCP between ranks), for ``horovod_reduce_type = "grad"`` and for ``"param"`` with sync
step 100, and the speed-up np=2 over np=1.

Usage: python benchmarks/scaling.py [--steps 400] [--n_out 128] [--backend horovod|mpi]
       [--cycle_time 5]
It launches itself under mpirun once per setting (``--worker``); rank 0 prints one JSON line.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def worker(args) -> None:
    from returnn.config import Config
    from returnn.__main__ import _configure_tensorflow
    import numpy as np
    size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
    seq_len, seqs_per_batch = 100, 10
    # Enough sequences for `steps` steps per rank in one measured (sub-)epoch.
    num_seqs = args.steps * seqs_per_batch * size
    config = Config({
        "train": {"class": "DummyDataset", "input_dim": 40, "output_dim": 20, "num_seqs": num_seqs * 5,
                  "seq_len": seq_len, "partition_epoch": 5, "fixed_random_seed": 1},
        "network": {"fw0": {"class": "rec", "unit": "nativelstm2", "n_out": args.n_out},
                    "output": {"class": "softmax", "loss": "ce", "from": "fw0"}},
        "optimizer": {"class": "adam"}, "learning_rate": 1e-3, "batch_size": seq_len * seqs_per_batch,
        "max_seqs": seqs_per_batch, "model": "/tmp/returnn-bench-scaling/model", "tf_log_dir": None,
        "use_horovod": size > 1, "distributed_backend": args.backend, "horovod_reduce_type": args.reduce,
        "horovod_param_sync_step": 100, "horovod_cycle_time": args.cycle_time,
        "tf_session_opts": {"intra_op_parallelism_threads": 1, "inter_op_parallelism_threads": 1}})
    _configure_tensorflow(config)
    from returnn.distributed.context import DistributedContext
    from returnn.log import log
    from returnn.tf.engine import Engine
    dist = DistributedContext.from_config(config)
    log.initialize([], 1, dist.rank, dist.size)
    engine = Engine(config, dist)
    engine.steps.trace()
    dist.backend.broadcast_variables(engine.network.variables)
    heartbeat = lambda: None  # noqa: E731
    engine._train_epoch(1, heartbeat)  # warm-up (first execution)
    _, timer, steps = engine._train_epoch(2, heartbeat)
    frames = np.array([float(steps * seq_len * seqs_per_batch)])
    total_frames = float(dist.backend.allreduce_host(frames, "sum")[0])
    elapsed = float(dist.backend.allreduce_host(np.array([timer.elapsed]), "max")[0])
    if dist.rank == 0:
        print("RESULT " + json.dumps({"np": size, "steps": steps, "elapsed": elapsed, "frames": total_frames,
                                      "computing": timer.computing_fraction, "sync": timer.sync / timer.elapsed}))
    dist.shutdown()


def run_setting(np_: int, reduce: str, args) -> dict:
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = ["mpirun", "-np", str(np_), "--oversubscribe", "--bind-to", "none", "--mca", "btl", "tcp,self",
           sys.executable, os.path.abspath(__file__), "--worker", "--reduce", reduce, "--steps", str(args.steps),
           "--n_out", str(args.n_out), "--backend", args.backend]
    if args.cycle_time is not None:
        cmd += ["--cycle_time", str(args.cycle_time)]
    out = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise RuntimeError("setting np=%i %s failed:\n%s%s" % (np_, reduce, out.stdout[-3000:], out.stderr[-3000:]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--reduce", default="grad")
    parser.add_argument("--steps", type=int, default=300, help="measured steps per rank")
    parser.add_argument("--n_out", type=int, default=128, help="LSTM units")
    parser.add_argument("--backend", default="horovod", choices=["horovod", "mpi"])
    parser.add_argument("--cycle_time", type=float, default=None,
                        help="HOROVOD_CYCLE_TIME in ms (default: the engine's, 2 ms)")
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    print("LSTM %i units over 40-dim features, 10 seqs x 100 frames per step, %i steps per rank, backend %s%s"
          % (args.n_out, args.steps, args.backend,
             ", HOROVOD_CYCLE_TIME %s ms" % (args.cycle_time or "2 (default)") if args.backend == "horovod" else ""))
    print("%-24s %4s %8s %10s %12s %10s %9s" % ("setting", "np", "steps/s", "frames/s", "computing", "sync", "speed-up"))
    for reduce in ("grad", "param"):
        base = None
        for np_ in (1, 2):
            t0 = time.time()
            r = run_setting(np_, reduce, args)
            fps = r["frames"] / r["elapsed"]
            base = base or fps
            label = "grad" if reduce == "grad" else "param, sync step 100"
            print("%-24s %4i %8.1f %10.0f %11.1f%% %9.1f%% %8.2fx   (run %.0f s)" % (
                label, np_, r["steps"] / r["elapsed"], fps, 100 * r["computing"], 100 * r["sync"], fps / base,
                time.time() - t0))


if __name__ == "__main__":
    main()
