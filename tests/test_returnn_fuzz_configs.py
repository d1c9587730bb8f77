"""benchmarks/returnn_fuzz_configs.py (the config mode of the differential check): the description of
the extern data both engines must agree on, and the inputs drawn from it."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import returnn_fuzz_configs as fc  # noqa: E402
from returnn.config import Config  # noqa: E402
from returnn.extern_data import extern_data_from_config  # noqa: E402
from returnn.tensor import SpatialDim  # noqa: E402


def test_description_shares_dynamic_dims_by_identity():
    time = SpatialDim("time")
    extern = extern_data_from_config(Config({"extern_data": {
        "data": {"dim": 4, "same_dim_tags_as": {"t": time}},
        "align": {"dim": 5, "sparse": True, "same_dim_tags_as": {"t": time}},
        "classes": {"dim": 3, "sparse": True}}}))
    desc = fc.describe_extern(extern)
    assert desc["data"]["dims"] == ["B", "T0", 4]  # data first: its time dim is T0
    assert desc["align"]["dims"] == ["B", "T0"] and desc["classes"]["dims"] == ["B", "T1"]
    assert desc["classes"]["sparse"] and desc["classes"]["dim"] == 3 and desc["data"]["dtype"] == "float32"


def test_inputs_lengths_and_zero_padding():
    desc = {"data": {"dims": ["B", "T0", 4], "time_axis": 1, "feature_axis": 2, "sparse": False, "dim": 4,
                     "dtype": "float32"},
            "targets": {"dims": ["B", "T1"], "time_axis": 1, "feature_axis": None, "sparse": True, "dim": 9,
                        "dtype": "int32"},
            "align": {"dims": ["B", "T2"], "time_axis": 1, "feature_axis": None, "sparse": True, "dim": 9,
                      "dtype": "int32"}}
    case = {"name": "c", "env": {"PROBE_SEQ2SEQ": "1", "PROBE_LENGTHS": '{"align": "/6"}'}}
    arrays, lens = fc.draw_inputs(case, desc)
    assert lens == {"T0": [23, 15, 9], "T1": [7, 5, 3], "T2": [4, 3, 2]}  # input, seq2seq targets, input / 6
    assert arrays["data"].shape == (3, 23, 4) and arrays["targets"].shape == (3, 7)
    assert not arrays["data"][1, 15:].any() and arrays["data"][1, :15].any()  # zero padding (a dataset's)
    assert arrays["targets"].dtype == np.int32 and arrays["targets"].max() < 9
    again, _ = fc.draw_inputs(case, desc)
    np.testing.assert_array_equal(again["data"], arrays["data"])  # the same in both engines' processes
