"""Cases of ``returnn_fuzz --kind batches`` that showed a difference, with the batches RETURNN's engine loop
cut for epochs 1-3 (``data/returnn_batch_cases.json``, from tests/returnn_goldens/make_batch_cases.py; entries
[tag, data start, data end, classes start, classes end]), cut here as the engine does
(``returnn_fuzz_batches.ours``, on HDF files written by this engine's SimpleHDFWriter):

- CombinedDataset ``random_dataset`` (RETURNN shuffles with Python's generator), with ``partition_epoch``;
  its length orderings by each sub-dataset's own length (RETURNN's get_estimated_seq_length: 'data');
- an ``eval`` set with ``max_seq_length`` (RETURNN filters only 'dev');
- chunking with a key the network does not read (RETURNN's used_data_keys).
"""
from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

from returnn.datasets.hdf_write import SimpleHDFWriter

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
from returnn_fuzz_batches import ours  # noqa: E402

with open(os.path.join(os.path.dirname(__file__), "data", "returnn_batch_cases.json")) as _f:
    CASES = json.load(_f)


def write_files(case, directory: str) -> None:
    """The harness's HDF files (returnn_fuzz_batches_returnn.write_hdf) and sequence list."""
    for i, seqs in enumerate(case["files"]):
        aux = len(seqs[0]) > 2
        extra_type = dict({"classes": (5, 1, "int32")}, **({"aux": (3, 1, "int32")} if aux else {}))
        writer = SimpleHDFWriter(os.path.join(directory, "%s_%i.hdf" % (case["name"], i)), dim=2, ndim=2,
                                 extra_type=extra_type)
        for j, lengths in enumerate(seqs):
            inputs = np.arange(lengths[0] * 2, dtype="float32").reshape(1, lengths[0], 2) + j
            extra = {"classes": (np.arange(lengths[1], dtype="int32") % 5).reshape(1, lengths[1])}
            if aux:
                extra["aux"] = np.zeros((1, lengths[2]), dtype="int32")
            writer.insert_batch(inputs, [lengths[0]], ["f%i-%i" % (i, j)], extra=extra)
        writer.close()
    if "_seq_list" in case["config"]:
        with open(os.path.join(directory, "%s.seqs" % case["name"]), "w") as f:
            f.write("\n".join(case["config"]["_seq_list"]) + "\n")


@pytest.mark.parametrize("case", CASES, ids=lambda c: "%s-%s" % (c["name"], c["family"]))
def test_batches_as_returnn(case, tmp_path):
    write_files(case, str(tmp_path))
    got = ours(case, str(tmp_path))
    for epoch, batches in case["returnn"].items():
        assert [[[t, fr["data"][0], fr["data"][1], fr["classes"][0], fr["classes"][1]] for t, fr in b]
                for b in got[epoch]] == batches, "epoch %s" % epoch
