"""Goldens of RETURNN's TranslationDataset and LmDataset over random corpora (benchmarks/returnn_fuzz_text_datasets.py's cases: symbol
files, symbol maps, word vocabularies, BPE with random merges, CharacterTargets, orderings by line size,
partitions), for tests/test_returnn_text_datasets.py: the cases of seeds 2 and 3 that RETURNN reads without an
error, with its sequences of epochs 1 and 2. Run with RETURNN's venv from outside this repo::

    cd /tmp && DISABLE_CUDA=1 /work/main/.bench-venv-returnn/bin/python \\
        /work/main/tests/returnn_goldens/make_text_dataset_goldens.py

Writes tests/data/returnn_text_datasets.json."""
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "benchmarks"))
import returnn_fuzz_text_datasets as fuzz  # noqa: E402

OUT = os.path.join(os.path.dirname(HERE), "data", "returnn_text_datasets.json")


def main():
    cases = [fuzz.draw_case(seed, i) for seed in (2, 3) for i in range(120)]
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "cases.json"), "w") as f:
            json.dump(cases, f)
        fuzz.run_cases(os.path.join(tmp, "cases.json"), os.path.join(tmp, "out.json"), os.path.join(tmp, "work"))
        with open(os.path.join(tmp, "out.json")) as f:
            results = json.load(f)
    kept = [dict(case, returnn=results[case["name"]]) for case in cases if "error" not in results[case["name"]]]
    with open(OUT, "w") as f:
        json.dump(kept, f)
    print("wrote %s (%i cases)" % (OUT, len(kept)))


if __name__ == "__main__":
    main()
