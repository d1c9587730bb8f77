"""The draws of returnn_fuzz --kind batches (benchmarks/returnn_fuzz_batches.py), without RETURNN: the same
case from the same (seed, index), files and options as described, and the CombinedDataset data_map back
from JSON; this engine's side runs on one drawn case."""
from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
import returnn_fuzz_batches as fuzz  # noqa: E402


def test_draws_repeat_and_have_the_described_parts():
    cases = [fuzz.draw(7, i) for i in range(60)]
    assert cases == [fuzz.draw(7, i) for i in range(60)]
    for c in cases:
        assert c["purpose"] in ("train", "dev", "eval") and c["purpose"] in c["config"]
        assert c["epochs"] in ([1, 2, 3], [1, 2, 3, 4, 5])
        assert all(len(seq) in (2, 3) for seqs in c["files"] for seq in seqs)
        assert "@DIR@" in json.dumps(c["config"])
    classes = {c["config"][c["purpose"]]["class"] for c in cases}
    assert classes == {"HDFDataset", "MetaDataset", "ConcatDataset", "CombinedDataset"}


def test_combined_data_map_from_json():
    spec = {"train": {"class": "CombinedDataset", "data_map": [["a", "data", "data"], ["b", "classes", "classes"]]}}
    assert fuzz.tuple_data_maps(spec)["train"]["data_map"] == {("a", "data"): "data", ("b", "classes"): "classes"}


def test_this_engines_side_on_a_drawn_case(tmp_path):
    """A plain HDFDataset case: batches per epoch as (tag, frames of data and classes)."""
    from test_returnn_batch_cases import write_files
    case = next(c for c in (fuzz.draw(1, i) for i in range(100))
                if c["config"].get("train", {}).get("class") == "HDFDataset" and c["recurrent"])
    case = dict(case, config={k: v for k, v in case["config"].items() if k != "_seq_lens"})
    case["config"]["train"] = {k: v for k, v in case["config"]["train"].items() if k != "seq_order_seq_lens_file"}
    write_files(case, str(tmp_path))
    got = fuzz.ours(case, str(tmp_path))
    assert sorted(got) == [str(e) for e in case["epochs"]]
    for batches in got.values():
        for batch in batches:
            for tag, frames in batch:
                assert tag.startswith("f") and set(frames) == {"data", "classes"}
