"""Runs golden cases of ``tests/data/returnn_gradients.json`` (``multi-*``) through this engine's
training update (``returnn/tf/gradients.py``) on each rank of an mpirun job: each rank its part of
the embedding occurrences (``rank_ids``). Rank R writes ``OUT.rankR.json``: ``{case: [x0, x1, E]}``
after the golden's steps.

Usage: mpirun -np 2 python tests/gradients_probe.py BACKEND OUT CASE [CASE ...]  (BACKEND: horovod, mpi)
"""
from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)


def main() -> None:
    backend_name, out, names = sys.argv[1], sys.argv[2], sys.argv[3:]
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    from returnn.distributed.context import DistributedContext, create_backend
    from test_gradients import GOLDENS, run_update
    dist = DistributedContext(create_backend(backend_name, {}, 120.0), stall_timeout=0)
    results = {}
    for name in names:
        case = GOLDENS["cases"][name]
        rank = dist.rank
        results[name] = run_update(case, dist, ids=case["rank_ids"][rank], dense_scale=case["rank_dense_scale"],
                                   emb_scale=case["rank_emb_scale"], occurrences=_occurrences(case, rank))
    with open("%s.rank%i.json" % (out, dist.rank), "w") as f:
        json.dump(results, f)
    dist.backend.barrier()
    dist.shutdown()


def _occurrences(case, rank: int) -> slice:
    """The rows of C and T (one per occurrence) of this rank's part of the ids."""
    first = len(case["rank_ids"][0][0])  # the same count every step
    return slice(0, first) if rank == 0 else slice(first, first + len(case["rank_ids"][1][0]))


if __name__ == "__main__":
    main()
