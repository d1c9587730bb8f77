"""RETURNN's ``DummyDataset`` data (a deterministic ramp) from the real RETURNN, for
``tests/test_dummy_dataset.py``: per case the options, the epoch, and every sequence of the epoch
(tag, ``data``, ``classes``) in RETURNN's order (default, reverse, random, partition_epoch).

Regenerate (RETURNN's source at /tmp/rsrc/returnn, or ``--returnn DIR`` holding the ``returnn``
package; needs only numpy), from a directory outside the repository::

    cd /tmp && /work/main/.venv/bin/python /work/main/tests/returnn_goldens/make_dummy_dataset_golden.py

Writes ``tests/data/returnn_dummy_dataset.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(os.path.dirname(HERE), "data", "returnn_dummy_dataset.json")
CASES = [
    ("default", dict(input_dim=3, output_dim=5, num_seqs=4), 1),
    ("options", dict(input_dim=2, output_dim=3, num_seqs=5, seq_len=4, input_max_value=5, input_shift=1.0,
                     input_scale=0.5), 1),
    ("reverse", dict(input_dim=2, output_dim=3, num_seqs=3, seq_len=4, input_max_value=5, seq_ordering="reverse"), 2),
    ("random", dict(input_dim=2, output_dim=7, num_seqs=6, seq_len=3, seq_ordering="random"), 3),
    ("partition", dict(input_dim=1, output_dim=4, num_seqs=6, seq_len=1, partition_epoch=2), 2),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--returnn", default="/tmp/rsrc", help="directory holding RETURNN's 'returnn' package")
    parser.add_argument("--out", default=OUT)
    args = parser.parse_args()
    sys.path.insert(0, args.returnn)
    from returnn.datasets.generating import DummyDataset
    out = {}
    for name, opts, epoch in CASES:
        ds = DummyDataset(**opts)
        ds.init_seq_order(epoch)
        ds.load_seqs(0, ds.num_seqs)
        out[name] = {"opts": opts, "epoch": epoch,
                     "seqs": [{"tag": ds.get_tag(i), "data": ds.get_data(i, "data").tolist(),
                               "classes": ds.get_data(i, "classes").tolist()} for i in range(ds.num_seqs)]}
    with open(args.out, "w") as f:
        json.dump(out, f, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
