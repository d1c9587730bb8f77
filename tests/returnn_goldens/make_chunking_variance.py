"""Writes tests/data/returnn_chunking_variance.json with the real RETURNN (its venv, from /tmp,
DISABLE_CUDA=1): the chunks its TF engine trains on with ``chunking_variance`` (``StaticDataset``,
``init_seq_order(epoch)``, ``generate_batches(recurrent_net=True, used_data_keys={data, classes})``
as ``Engine.init_train_from_config`` calls it): ``[corpus index, start, end]`` per chunk, in order.
The cases (lengths, variance, chunking, options, epochs) are those of the existing file; cases with
``max_seq_length`` show that a chunk left out draws no number for RETURNN's seq_drop test.

    cd /tmp && DISABLE_CUDA=1 /work/main/.bench-venv-returnn/bin/python \\
        /work/main/tests/returnn_goldens/make_chunking_variance.py /work/main/tests/data/returnn_chunking_variance.json

With ``--key-chunking FILE`` it recomputes the cases with a variance of tests/data/returnn_key_chunking.json
(``data`` at twice the rate of ``classes``, random order; entries [corpus index, data start, data end,
classes start, classes end]) the same way.
"""
import json
import sys

import numpy as np


def chunks(case):
    from returnn.datasets.generating import StaticDataset
    seqs = [{"data": np.zeros((n, 2), np.float32), "classes": np.zeros(n, np.int32)} for n in case["lengths"]]
    ds = StaticDataset(seqs, output_dim={"data": (2, 2), "classes": (3, 1)}, chunking=tuple(case["chunking"]),
                       chunking_variance=case["variance"], min_chunk_size=case["min_chunk_size"],
                       partition_epoch=case["partition_epoch"], **case["options"])
    ds.init_seq_order(epoch=case["epoch"])
    gen = ds.generate_batches(recurrent_net=True, batch_size=10 ** 6, max_seqs=-1,
                              max_seq_length=case.get("max_seq_length") or sys.maxsize,
                              used_data_keys={"data", "classes"})
    out = []
    while gen.has_more():
        (batch,) = gen.peek_next_n(1)
        gen.advance(1)
        out += [[int(ds.get_corpus_seq_idx(p.seq_idx)), int(p.seq_start_frame["data"]), int(p.seq_end_frame["data"])]
                for p in batch.seqs]
    return out


def key_chunks(case):
    from returnn.datasets.generating import StaticDataset
    seqs = [{"data": np.arange(a * 2, dtype=np.float32).reshape(a, 2), "classes": np.arange(b, dtype=np.int32)}
            for a, b in case["pairs"]]
    chunking = case["chunking"]
    chunking = chunking[0] if len(chunking) == 1 else tuple(chunking) if isinstance(chunking, list) else chunking
    ds = StaticDataset(seqs, output_dim={"data": (2, 2), "classes": (3, 1)}, seq_ordering="random",
                       chunking=chunking, chunking_variance=case["variance"], min_chunk_size=case["min_chunk_size"])
    ds.init_seq_order(epoch=case["epoch"])
    gen = ds.generate_batches(recurrent_net=True, batch_size=10 ** 6, max_seqs=-1, used_data_keys={"data", "classes"})
    out = []
    while gen.has_more():
        (batch,) = gen.peek_next_n(1)
        gen.advance(1)
        out += [[int(ds.get_corpus_seq_idx(p.seq_idx)), int(p.seq_start_frame["data"]), int(p.seq_end_frame["data"]),
                 int(p.seq_start_frame["classes"]), int(p.seq_end_frame["classes"])] for p in batch.seqs]
    return out


def main():
    if sys.argv[1] == "--key-chunking":
        with open(sys.argv[2]) as f:
            golden = json.load(f)
        for case in golden["chunks"]:
            if case["variance"]:
                case["chunks"] = key_chunks(case)
        with open(sys.argv[2], "w") as f:
            json.dump(golden, f, indent=0)
        return
    path = sys.argv[1]
    with open(path) as f:
        cases = json.load(f)
    base = [c for c in cases if not c.get("max_seq_length")]
    extra = [dict(c, max_seq_length=15) for c in base[:2]]
    for case in base + extra:
        case["chunks"] = chunks(case)
    with open(path, "w") as f:
        json.dump(base + extra, f)


if __name__ == "__main__":
    main()
