"""Goldens of RETURNN's Data/Tensor and Dim API as config code calls it (benchmarks/returnn_fuzz_data_api.py's
cases of seeds 6 to 8: templates from the old keywords, chains of copy_* / axis lookups / properties, RETURNN's
further methods (copy_swap_axes, copy_split_feature_dim, copy_as_batch_spatial_major, get_common_data,
find_matching_dim_map, copy_compatible_to, Dim.is_equal, Dim.get_all_dimension_tags, ...)), for tests/test_data_api_goldens.py: the
cases RETURNN runs without an error, with its result per step. Run with RETURNN's venv from outside this repo::

    cd /tmp && DISABLE_CUDA=1 /work/main/.bench-venv-returnn/bin/python \\
        /work/main/tests/returnn_goldens/make_data_api_goldens.py

Writes tests/data/returnn_data_api.json."""
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "benchmarks"))
import returnn_fuzz_data_api as fuzz  # noqa: E402

OUT = os.path.join(os.path.dirname(HERE), "data", "returnn_data_api.json")
SEEDS = (6, 7, 8)


def main():
    cases = [case for seed in SEEDS for case in fuzz.draw(seed, 500)]
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "cases.json"), "w") as f:
            json.dump(cases, f)
        fuzz.run_cases(os.path.join(tmp, "cases.json"), os.path.join(tmp, "out.json"))
        with open(os.path.join(tmp, "out.json")) as f:
            results = json.load(f)
    kept = [dict(case, returnn=results[case["name"]]["steps"]) for case in cases if "error" not in results[case["name"]]]
    with open(OUT, "w") as f:
        json.dump(kept, f, separators=(",", ":"))
    print("wrote %s (%i cases)" % (OUT, len(kept)))


if __name__ == "__main__":
    main()
