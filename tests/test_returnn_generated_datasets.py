"""RETURNN's generated task datasets give RETURNN's sequences here: the same draws from the same
generator, seeded per sequence with (the epoch's seed, the sequence index) as RETURNN's
``GeneratingDataset.get_corpus_seq`` does. Goldens from the real RETURNN:
``tests/returnn_goldens/make_generating_dataset_goldens.py``."""
from __future__ import annotations

import json

import numpy as np
import pytest

from helpers import REPO
from returnn.datasets import init_dataset

GOLDEN = json.loads((REPO / "tests" / "data" / "returnn_generated_datasets.json").read_text())


@pytest.mark.parametrize("case", sorted(GOLDEN))
def test_same_sequences_as_returnn(case):
    ref = GOLDEN[case]
    ds = init_dataset(dict(ref["opts"]))
    ds.init_seq_order(ref["epoch"])
    assert ds.num_seqs == len(ref["seqs"])
    for i, want in enumerate(ref["seqs"]):
        data, classes = ds.get_data(i, "data"), ds.get_data(i, "classes")
        assert (data.ndim == 2) == want["one_hot"], "data one-hot in RETURNN: %s" % want["one_hot"]
        if data.ndim == 2:
            assert data.dtype == np.float32 and (data.sum(-1) == 1).all()
            data = data.argmax(-1)
        assert data.tolist() == want["data"], "%s seq %i: data" % (case, i)
        assert classes.tolist() == want["classes"], "%s seq %i: classes" % (case, i)
