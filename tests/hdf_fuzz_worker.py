"""Reads HDF files with HDFDataset and reports, per file, how the read ended (for test_hdf_fuzz).

Usage: ``python tests/hdf_fuzz_worker.py LIST_FILE START``: LIST_FILE holds one ``path cache_size``
per line; cases from index START on are read. Per case it prints ``BEGIN i`` before the read and
then one of ``OK i``, ``ERR i <one-line message>`` (a ReturnnError) or ``BAD i <json traceback>``
(anything else), flushed at once, so the parent sees which case a crash or hang happened in.
"""
from __future__ import annotations

import json
import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from returnn.datasets.hdf import HDFDataset  # noqa: E402
from returnn.errors import ReturnnError  # noqa: E402


def read_everything(path: str, cache_size: str) -> None:
    """What training does with a file: open, order, read all sequences (in batches and one by
    one) and all tags, twice over two epochs."""
    ds = HDFDataset(files=[path], cache_size=cache_size, seq_ordering="sorted", partition_epoch=2)
    try:
        for epoch in (1, 2):
            ds.init_seq_order(epoch)
            n = ds.num_seqs
            ds.get_seqs(list(range(n)))
            for i in range(n):
                ds.get_seqs([i])
                ds.get_tag(i)
            ds.num_outputs  # noqa: B018 - reads the data description
    finally:
        ds.close()


def main() -> None:
    list_file, start = sys.argv[1], int(sys.argv[2])
    with open(list_file) as f:
        cases = [line.rsplit(" ", 1) for line in f.read().splitlines() if line.strip()]
    out = sys.stdout
    for i in range(start, len(cases)):
        path, cache_size = cases[i]
        out.write("BEGIN %i\n" % i)
        out.flush()
        try:
            read_everything(path, cache_size)
            out.write("OK %i\n" % i)
        except ReturnnError as exc:
            out.write("ERR %i %s\n" % (i, json.dumps(str(exc))))
        except BaseException:  # noqa: BLE001 - reported to the parent as a failure
            out.write("BAD %i %s\n" % (i, json.dumps(traceback.format_exc())))
        out.flush()


if __name__ == "__main__":
    main()
