"""The sequences of RETURNN's generated task datasets (``Task12AXDataset``, ``TaskEpisodicCopyDataset``,
``TaskXmlModelingDataset``, ``TaskNumberBaseConvertDataset``, ``CopyTaskDataset``) from the real
RETURNN, for ``tests/test_returnn_generated_datasets.py``: per case the options, the epoch and every
sequence of the epoch in RETURNN's order (``data`` as class indices: the argmax of one-hot rows,
``classes``, and whether ``data`` was one-hot).

Regenerate (from a directory outside the repository)::

    cd /tmp && DISABLE_CUDA=1 /work/main/.bench-venv-returnn/bin/python \\
        /work/main/tests/returnn_goldens/make_generating_dataset_goldens.py

Writes ``tests/data/returnn_generated_datasets.json``.
"""
from __future__ import annotations

import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(os.path.dirname(HERE), "data", "returnn_generated_datasets.json")
CASES = [
    ("12ax_epoch1", {"class": "Task12AXDataset", "num_seqs": 4}, 1),
    ("12ax_epoch2", {"class": "Task12AXDataset", "num_seqs": 3}, 2),
    ("12ax_fixed_seed", {"class": "Task12AXDataset", "num_seqs": 3, "fixed_random_seed": 1}, 5),
    ("12ax_partition", {"class": "Task12AXDataset", "num_seqs": 4, "partition_epoch": 2}, 4),
    ("episodic_copy", {"class": "TaskEpisodicCopyDataset", "num_seqs": 3}, 1),
    ("xml_modeling", {"class": "TaskXmlModelingDataset", "num_seqs": 3}, 2),
    ("base_convert", {"class": "TaskNumberBaseConvertDataset", "num_seqs": 5, "fixed_random_seed": 42}, 1),
    ("base_convert_opts", {"class": "TaskNumberBaseConvertDataset", "num_seqs": 4, "input_base": 2,
                           "output_base": 8, "min_input_seq_len": 6, "max_input_seq_len": 9}, 3),
    ("copy_task", {"class": "CopyTaskDataset", "num_seqs": 4, "nsymbols": 5, "minlen": 2, "maxlen": 6}, 2),
]


def main() -> None:
    from returnn.datasets import init_dataset
    out = {}
    for name, opts, epoch in CASES:
        ds = init_dataset(dict(opts))
        ds.init_seq_order(epoch=epoch)
        ds.load_seqs(0, ds.num_seqs)
        seqs = []
        for i in range(ds.num_seqs):
            data = ds.get_data(i, "data")
            seqs.append({"data": (data.argmax(-1) if data.ndim == 2 else data).tolist(), "one_hot": data.ndim == 2,
                         "classes": ds.get_data(i, "classes").tolist()})
        out[name] = {"opts": opts, "epoch": epoch, "seqs": seqs}
    with open(OUT, "w") as f:
        json.dump(out, f, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
