"""RETURNN's engine keeps an HDFDataset's batch list while the dataset's order stays the same
(``BatchSetGenerator`` with ``cache_whole_epoch``; ``init_seq_order`` returns False): with
``chunking_variance`` the chunks of later epochs are those of the first, and ``shuffle_batches``
shuffles the kept list from its second epoch on. ``data/returnn_batch_reuse.json`` holds RETURNN's
batches for epochs 1-3 (``benchmarks/returnn_fuzz_batches_returnn.py --cases-json`` on the cases in the
file; ``@DIR@`` is the HDF files' directory): a default order with ``chunking_variance``, a random order
(cut anew every epoch) and a sorted order with ``shuffle_batches``. Entries: [tag, data start, data end].
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from returnn.config import Config
from returnn.datasets import init_dataset
from returnn.datasets.batching import BatchOptions
from returnn.datasets.hdf_write import SimpleHDFWriter

with open(os.path.join(os.path.dirname(__file__), "data", "returnn_batch_reuse.json")) as _f:
    CASES = json.load(_f)


def write_hdf(path: str, seqs) -> None:
    """The harness's files (returnn_fuzz_batches_returnn.write_hdf) with this engine's writer."""
    writer = SimpleHDFWriter(path, dim=2, ndim=2, extra_type={"classes": (5, 1, "int32")})
    for i, (n_data, n_classes) in enumerate(seqs):
        inputs = np.arange(n_data * 2, dtype="float32").reshape(1, n_data, 2) + i
        classes = (np.arange(n_classes, dtype="int32") % 5).reshape(1, n_classes)
        writer.insert_batch(inputs, [n_data], ["f0-%i" % i], extra={"classes": classes})
    writer.close()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["name"])
def test_batch_list_kept_while_the_order_stays(case, tmp_path):
    write_hdf(str(tmp_path / ("%s_0.hdf" % case["name"])), case["files"][0])
    config = Config(json.loads(json.dumps(case["config"]).replace("@DIR@", str(tmp_path))))
    dataset = init_dataset(config.typed_value("train"), name="train")
    opts = BatchOptions.from_config(config)
    for epoch in case["epochs"]:
        got = [[[dataset.get_tag(i), s, e if e >= 0 else int(dataset.get_seq_length(i)["data"])]
                for i, s, e in batch.entries()] for batch in opts.epoch_slices(dataset, epoch, "train")]
        assert got == case["returnn"][str(epoch)], "epoch %i" % epoch
