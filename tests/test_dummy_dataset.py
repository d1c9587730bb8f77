"""A config naming ``DummyDataset`` trains on RETURNN's data (issue 28): RETURNN's deterministic ramp,
compared with data from real RETURNN (``data/returnn_dummy_dataset.json``, made by
``returnn_goldens/make_dummy_dataset_golden.py``); one implementation with the other dummy datasets;
this engine's random data is ``RandomDataset``."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from returnn.datasets import init_dataset
from returnn.datasets.dummy import DummyDataset, _RampDataset
from returnn.datasets.generating import DummyDataset as DummyFromGenerating, RandomDataset
from returnn.errors import DataError

with open(os.path.join(os.path.dirname(__file__), "data", "returnn_dummy_dataset.json")) as _f:
    GOLDEN = json.load(_f)


@pytest.mark.parametrize("case", sorted(GOLDEN))
def test_dummy_dataset_is_returnns_ramp(case):
    golden = GOLDEN[case]
    ds = init_dataset(dict(golden["opts"], **{"class": "DummyDataset"}), name="train")
    ds.init_seq_order(golden["epoch"])
    assert ds.num_seqs == len(golden["seqs"])
    for i, seq in enumerate(golden["seqs"]):
        assert ds.get_tag(i) == seq["tag"]
        np.testing.assert_allclose(ds.get_data(i, "data"), np.array(seq["data"], np.float32).reshape(
            ds.get_data(i, "data").shape), rtol=0, atol=0)
        assert ds.get_data(i, "classes").tolist() == seq["classes"]
    assert ds.num_outputs == {"data": [golden["opts"]["input_dim"], 2], "classes": [golden["opts"]["output_dim"], 1]}


def test_one_ramp_implementation_importable_as_in_returnn():
    assert DummyFromGenerating is DummyDataset and issubclass(DummyDataset, _RampDataset)
    ds = DummyDataset(input_dim=2, output_dim={"classes": [4, 1]}, num_seqs=2)  # RETURNN's dict form of output_dim
    ds.init_seq_order(1)
    assert ds.get_data(1, "classes").tolist() == [(1 + 4) % 4, (1 + 5) % 4] and ds.get_data(1, "data").shape == (2, 2)
    # every epoch holds the same data, as in RETURNN (the ramp does not depend on seeds)
    again = DummyDataset(input_dim=2, output_dim=4, num_seqs=2, fixed_random_seed=7)
    again.init_seq_order(5)
    assert again.get_data(1, "data").tolist() == ds.get_data(1, "data").tolist()


@pytest.mark.parametrize("opts, message", [
    ({"input_dim": 2, "output_dim": 3, "num_seqs": 2, "seq_len": (2, 5)}, "is RandomDataset"),
    ({"input_dim": 2, "output_dim": 3, "num_seqs": 2, "input_sparse": True}, "is RandomDataset"),
    ({"input_dim": 2, "output_dim": 3}, "missing 1 required positional argument: 'num_seqs'"),
    ({"input_dim": "x", "output_dim": 3, "num_seqs": 2}, "option 'input_dim' must be an integer"),
    ({"input_dim": 2, "output_dim": 0, "num_seqs": 2}, "option 'output_dim'"),
    ({"input_dim": 2, "output_dim": 3, "num_seqs": 2, "seq_len": -1}, "option 'seq_len'"),
])
def test_options_of_another_engine_are_one_line(opts, message):
    with pytest.raises(DataError, match=r"^dataset train \(DummyDataset\): .*" + message.replace("(", r"\(")
                       .replace(")", r"\)")):
        init_dataset(dict(opts, **{"class": "DummyDataset"}), name="train")


def test_random_dataset_is_this_engines_random_data():
    ds = init_dataset({"class": "RandomDataset", "input_dim": 5, "output_dim": 2, "num_seqs": 30, "seq_len": (2, 9),
                       "input_sparse": True})
    assert isinstance(ds, RandomDataset) and ds.num_outputs == {"data": [5, 1], "classes": [2, 1]}
    ds.init_seq_order(1)
    lens = [len(ds.get_data(i, "data")) for i in range(ds.num_seqs)]
    assert min(lens) >= 2 and max(lens) <= 9 and len(set(lens)) > 1
    dense = RandomDataset(input_dim=3, output_dim=2, num_seqs=4, seq_len=5)
    dense.init_seq_order(1)
    values = np.concatenate([dense.get_data(i, "data") for i in range(4)])
    assert values.dtype == np.float32 and np.all(np.abs(values) <= 1.0) and len(np.unique(values)) > 50
