"""LmDataset against RETURNN's (tests/data/returnn_text_datasets.json, from
tests/returnn_goldens/make_text_dataset_goldens.py): random corpora read through symbol files, symbol maps,
word vocabularies, BPE vocabularies with random merges (the words split on the fly) and CharacterTargets, with
end, unknown and delayed symbols, ordered by the lines' sizes or randomly, partitioned; every sequence of epochs
1 and 2 (tags and values) and the labels must be RETURNN's."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
import returnn_fuzz_text_datasets as fuzz  # noqa: E402

CASES = json.loads((REPO / "tests" / "data" / "returnn_text_datasets.json").read_text())


def test_goldens_cover_the_vocabulary_kinds():
    kinds = {json.dumps(c["dataset"].get("orth_vocab", {}).get("class", c["dataset"]["class"])) for c in CASES}
    assert {'"BytePairEncoding"', '"CharacterTargets"', '"TranslationDataset"', '"LmDataset"'} <= kinds
    assert len(CASES) >= 60


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_same_sequences_as_returnn(case, tmp_path):
    with open(tmp_path / "cases.json", "w") as f:
        json.dump([case], f)
    fuzz.run_cases(str(tmp_path / "cases.json"), str(tmp_path / "out.json"), str(tmp_path / "work"))
    ours = json.loads((tmp_path / "out.json").read_text())[case["name"]]
    assert "error" not in ours, ours["error"]
    assert ours["epochs"] == case["returnn"]["epochs"]
    assert ours["labels"] == case["returnn"]["labels"]
