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
- ``fuzzsearch_37_87`` (a teacher-forced choice, ``search: False``, with ``add_to_beam_scores: False``): the
  loop runs over the given classes; ``fuzzsearch_fed_choice_no_scores``: draw 36/67 with a second choice fed
  the classes that way beside the searching one: its scores' layer is not built (RETURNN drops its ``from``),
  nothing is added to the hypotheses, and the search runs as long as the classes (RETURNN reads them with the
  beam, which gives its loop, over its target's time dim, those lengths; 'end' does not end it). The option
  was unknown here; without it RETURNN fails on such nets (returnn_fuzz_search.RETURNN_BUG).
- ``fuzzsearch_keep_beams_36_65`` (beam 3, attention, length normalization): draw 36/65 with the choice's
  ``keep_beams``: after the first step each hypothesis continues with its best label (RETURNN's beam_search with
  keep_beams); refused here before.
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


def test_teacher_forced_search_classified_as_returnn_bug():
    """A choice with search False and add_to_beam_scores not False, no other choice searching: RETURNN's
    template asserts a beam (returnn_fuzz_search.RETURNN_BUG); with add_to_beam_scores False it builds."""
    teacher = returnn_fuzz_search.draw(37, 30)
    assert teacher["network"]["output"]["unit"]["output"]["search"] is False
    assert returnn_fuzz_search.returnn_bug(teacher) == returnn_fuzz_search.RETURNN_BUG
    assert returnn_fuzz_search.returnn_bug(returnn_fuzz_search.draw(37, 87)) is None  # add_to_beam_scores False
    assert returnn_fuzz_search.returnn_bug(returnn_fuzz_search.draw(37, 0)) is None  # a searching choice
