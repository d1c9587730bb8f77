"""Writes tests/data/returnn_batch_limits.json with the real RETURNN (its venv, from /tmp, DISABLE_CUDA=1):
the batches its TF engine cuts with ``min_seq_length`` and ``max_pad_size`` (``StaticDataset`` with
``data`` and ``classes`` of the given lengths, default order, ``init_seq_order(1)``, ``generate_batches``
as ``Engine.init_train_from_config`` calls it), optionally chunked: per batch its entries
``[seq index, data start, data end]``.

    cd /tmp && DISABLE_CUDA=1 /work/main/.bench-venv-returnn/bin/python \\
        /work/main/tests/returnn_goldens/make_batch_limits.py /work/main/tests/data/returnn_batch_limits.json
"""
import json
import sys

import numpy as np

LENGTHS = [[5, 5], [1, 1], [9, 9], [0, 0], [3, 3], [12, 12], [2, 2], [7, 7], [4, 4], [6, 2]]
CASES = [
    {"min_seq_length": 3},
    {"min_seq_length": {"classes": 4}},
    {"max_pad_size": 4},
    {"max_pad_size": 0},
    {"max_pad_size": {"data": 3}},
    {"max_pad_size": 5, "min_seq_length": 2, "max_seqs": 3},
    {"max_pad_size": 2, "chunking": "4:2", "lengths": [[5, 5], [9, 9], [3, 3], [12, 12]]},
    {"min_seq_length": 3, "chunking": "4:3", "chunking_variance": 0.5, "lengths": [[5, 5], [9, 9], [3, 3], [12, 12]]},
]


def batches(case):
    from returnn.datasets.generating import StaticDataset
    lengths = case.get("lengths", LENGTHS)
    seqs = [{"data": np.zeros((a, 2), np.float32), "classes": np.zeros(b, np.int32)} for a, b in lengths]
    kwargs = {k: case[k] for k in ("chunking", "chunking_variance") if k in case}
    ds = StaticDataset(seqs, output_dim={"data": (2, 2), "classes": (3, 1)}, **kwargs)
    ds.init_seq_order(epoch=1)
    gen = ds.generate_batches(recurrent_net=True, batch_size=case.get("batch_size", 40),
                              max_seqs=case.get("max_seqs", -1), max_seq_length=sys.maxsize,
                              min_seq_length=case.get("min_seq_length", 0), max_pad_size=case.get("max_pad_size"),
                              used_data_keys={"data", "classes"})
    out = []
    while gen.has_more():
        (batch,) = gen.peek_next_n(1)
        gen.advance(1)
        out.append([[int(p.seq_idx), int(p.seq_start_frame["data"]), int(p.seq_end_frame["data"])] for p in batch.seqs])
    return out


def main():
    out = [dict(case, lengths=case.get("lengths", LENGTHS), batches=batches(case)) for case in CASES]
    with open(sys.argv[1], "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
