"""Runs ``rnn.py``'s real code path in one rank under mpirun and records what happened.

Usage (under mpirun): ``python tests/mpi_probe.py OUT_PREFIX CONFIG [++key value ...]``, or with
``MPI_PROBE_OUT=OUT_PREFIX`` in the environment ``python tests/mpi_probe.py CONFIG ...`` (rnn.py's
command line, for launch scripts that put the config first).
Wraps (does not replace) the engine's compiled train step, parameter sync and checkpoint write,
and the batch maker, to record after every step: a hash of the network parameters, the applied
learning rate, the sequence tags of each batch, and which rank wrote checkpoints. Each rank writes
``OUT_PREFIX.rank<R>.json``; the exit code is the engine's.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import returnn.datasets.prefetch as prefetch_mod  # noqa: E402
import returnn.tf.checkpoint as checkpoint_mod  # noqa: E402
import returnn.tf.engine as engine_mod  # noqa: E402
from returnn.__main__ import main  # noqa: E402

EVENTS = {"steps": [], "syncs": [], "lr": [], "train_tags": [], "checkpoint_writes": [], "rank": None}


def _param_hash(network) -> str:
    h = hashlib.sha1()
    for var in sorted(network.trainable_variables, key=lambda v: v.name):
        h.update(var.numpy().tobytes())
    return h.hexdigest()


def _install() -> None:
    orig_init = engine_mod.Engine.__init__

    def init(self, config, dist):
        orig_init(self, config, dist)
        EVENTS["rank"] = dist.rank
        steps, network, optimizer = self.steps, self.network, self.optimizer
        train_step, sync_params = steps.train_step, steps.sync_params

        def traced_train_step(*args):
            out = train_step(*args)
            out.numpy()
            EVENTS["steps"].append(_param_hash(network))
            EVENTS["lr"].append(float(optimizer.learning_rate.numpy()))
            return out

        def traced_sync(*args):
            out = sync_params(*args)
            out.numpy()
            EVENTS["syncs"].append([len(EVENTS["steps"]), _param_hash(network)])
            return out

        traced_train_step.get_concrete_function = train_step.get_concrete_function
        traced_sync.get_concrete_function = sync_params.get_concrete_function
        steps.train_step, steps.sync_params = traced_train_step, traced_sync
        train = self.datasets.get("train")
        orig_make = prefetch_mod.make_batch_arrays

        def make_batch(dataset, sl, keys):
            if dataset is train:
                EVENTS["train_tags"].append([dataset.get_tag(int(i)) for i in sl.seq_idxs])
            return orig_make(dataset, sl, keys)

        prefetch_mod.make_batch_arrays = make_batch

    engine_mod.Engine.__init__ = init
    orig_write = checkpoint_mod.CheckpointManager._write

    def write(self, final, *args, **kwargs):  # whatever CheckpointManager._write takes after the path
        EVENTS["checkpoint_writes"].append(os.path.basename(final))
        return orig_write(self, final, *args, **kwargs)

    checkpoint_mod.CheckpointManager._write = write


if __name__ == "__main__":
    out_prefix = os.environ.get("MPI_PROBE_OUT") or sys.argv.pop(1)
    _install()
    code = 1
    try:
        code = main(sys.argv[1:])
    finally:
        rank = EVENTS["rank"] if EVENTS["rank"] is not None else int(os.environ.get("OMPI_COMM_WORLD_RANK", 0))
        with open("%s.rank%i.json" % (out_prefix, rank), "w") as f:
            json.dump(EVENTS, f)
    sys.exit(code)
