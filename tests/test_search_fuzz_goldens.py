"""Searched decoders from the differential check (benchmarks/returnn_fuzz_search.py) against the real
RETURNN: each ``tests/data/returnn_search_goldens/<case>.npz`` is a make_goldens.py ``search`` case
(RETURNN's search flag; its decided labels, their lengths and the decide's beam score), made with
``benchmarks/returnn_fuzz.py --kind search --keep DIR`` and copied here. The network is searched
here with RETURNN's parameters and inputs; labels, lengths and score must match (1e-4).

- ``fuzzsearch_6_22`` (beam 1), ``fuzzsearch_6_45`` (beam 3, attention): a loop over the encoder's
  frames; the sequences shorter than the batch's longest take one more step at their length, on
  their padded encoder frame, whose score counts (RETURNN's TensorArray of the padded tensor; stored
  with zero padding: the encoder's frame there is tanh of its bias). The search read that frame as
  zeros.
- ``fuzzsearch_batchless_36_67`` (beam 4, attention): draw 36/67 with a batch-less counter (``prev:i`` plus a
  constant) among the scores' inputs: no batch axis, so no beam; the reordering of the hypotheses leaves it.
"""
import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "benchmarks"))
import returnn_fuzz_search  # noqa: E402

GOLDEN_DIR = HERE / "data" / "returnn_search_goldens"
FILES = sorted(GOLDEN_DIR.glob("*.npz"))


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_search_as_returnn(path):
    verdict, detail = returnn_fuzz_search.verdict({"name": path.stem}, os.fspath(GOLDEN_DIR), None)
    assert verdict == "AGREE", detail


def test_search_goldens_present():
    assert FILES, "expected search goldens in %s" % GOLDEN_DIR
