"""Writes tests/data/returnn_batch_cases.json: cases of ``returnn_fuzz --kind batches`` (by seed_index) with
the batches the real RETURNN's engine loop cut for them (benchmarks/returnn_fuzz_batches_returnn.py), for
tests/test_returnn_batch_cases.py. Run with the project's venv (it draws the cases; RETURNN runs in its own)::

    .venv/bin/python tests/returnn_goldens/make_batch_cases.py OUT.json 12_15 12_99 ...
"""
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "benchmarks"))
import returnn_fuzz_batches  # noqa: E402


def main() -> None:
    out_path, names = sys.argv[1], sys.argv[2:]
    cases = [returnn_fuzz_batches.draw(*map(int, name.split("_"))) for name in names]
    work = tempfile.mkdtemp(prefix="batch_cases_")
    gold = returnn_fuzz_batches.run_returnn(cases, work, os.path.join(REPO, ".bench-venv-returnn", "bin", "python"))
    out = []
    for case in cases:
        result = gold[case["name"]]
        if "epochs" not in result:
            sys.exit("%s: RETURNN failed: %s" % (case["name"], result.get("error")))
        out.append(dict(case, returnn=result["epochs"]))
    with open(out_path, "w") as f:
        json.dump(out, f)
    for name in os.listdir(work):
        os.remove(os.path.join(work, name))
    os.rmdir(work)


if __name__ == "__main__":
    main()
