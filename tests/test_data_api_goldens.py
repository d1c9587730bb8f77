"""RETURNN's Data/Tensor and Dim API as config code calls it, against RETURNN (tests/data/returnn_data_api.json, from
tests/returnn_goldens/make_data_api_goldens.py): the cases of benchmarks/returnn_fuzz_data_api.py seeds 6 to 8 that
RETURNN runs without an error give the same result at every step here (layout copies such as copy_swap_axes,
copy_split_feature_dim, copy_as_batch_spatial_major, copy_add_spatial_dim; axis lookups; get_common_data,
find_matching_dim_map, copy_compatible_to; Dim.is_equal with its options, Dim.get_all_dimension_tags)."""
import collections
import json
import pathlib
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
import returnn_fuzz_data_api as fuzz  # noqa: E402

CASES = json.loads((REPO / "tests" / "data" / "returnn_data_api.json").read_text())


def test_goldens_cover_the_new_methods():
    counts = collections.Counter(call[1] if call[0] in ("other", "property") else call[0]
                                 for c in CASES for call in c["calls"])
    for kind in ("copy_swap_axes", "copy_split_feature_dim", "copy_as_batch_spatial_major", "copy_with_feature_last",
                 "copy_as_time_batch_major", "copy_template_dense", "get_bc_shape", "get_axes_by_tag_name",
                 "dims_is_equal", "is_equal_with", "common_with", "matching_map_with", "all_dims_with",
                 "compatible_to", "compatible_to_common", "compatible_to_swapped", "compatible_to_dims"):
        assert counts[kind] >= 3, (kind, counts[kind])


@pytest.fixture(scope="module")
def ours(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("data_api")
    (tmp / "cases.json").write_text(json.dumps(CASES))
    fuzz.run_cases(str(tmp / "cases.json"), str(tmp / "out.json"))
    return json.loads((tmp / "out.json").read_text())


@pytest.mark.parametrize("chunk", range(8))
def test_same_results_as_returnn(ours, chunk):
    bad = []
    for case in CASES[chunk::8]:
        got = ours[case["name"]]
        if "error" in got or got["steps"] != case["returnn"]:
            bad.append("%s %s %s\n  here    %s\n  RETURNN %s" % (
                case["name"], json.dumps(case["template"]), json.dumps(case["calls"]),
                json.dumps(got)[:400], json.dumps(case["returnn"])[:400]))
    assert not bad, "\n".join(bad[:5]) + "\n(%i cases differ)" % len(bad)
