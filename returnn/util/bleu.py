"""Sentence BLEU as RETURNN computes it (``returnn.util.basic.compute_bleu``, from Tensor2Tensor):
clipped n-gram precisions up to ``max_order``, an n-gram order without any match smoothed to
``1 / (2 ** k * possible)`` (k counting such orders), the geometric mean of the precisions that are
not 0, times the brevity penalty ``exp(1 - ref_len / hyp_len)`` when the translation is shorter
(0 for an empty one). Pure Python; the ``bleu`` loss runs it on each hypothesis.
"""
from __future__ import annotations

import math
from collections import Counter
from typing import Hashable, List, Sequence

import numpy as np


def ngram_counts(tokens: Sequence[Hashable], max_order: int) -> Counter:
    """How often each n-gram (as a tuple), n = 1 .. max_order, occurs in ``tokens``."""
    counts: Counter = Counter()
    for n in range(1, max_order + 1):
        counts.update(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))
    return counts


def compute_bleu(reference_corpus: List[Sequence[Hashable]], translation_corpus: List[Sequence[Hashable]],
                 max_order: int = 4, use_bp: bool = True) -> np.float32:
    """BLEU of the translations against their references (one reference each), over the corpus."""
    matches, possible = [0] * max_order, [0] * max_order
    ref_len = hyp_len = 0
    for ref, hyp in zip(reference_corpus, translation_corpus):
        ref_len, hyp_len = ref_len + len(ref), hyp_len + len(hyp)
        ref_counts, hyp_counts = ngram_counts(ref, max_order), ngram_counts(hyp, max_order)
        for gram, count in hyp_counts.items():
            possible[len(gram) - 1] += count
            matches[len(gram) - 1] += min(count, ref_counts.get(gram, 0))
    precisions, smooth = [], 1.0
    for hit, total in zip(matches, possible):
        if total == 0:
            precisions.append(0.0)
        elif hit:
            precisions.append(hit / total)
        else:
            smooth *= 2
            precisions.append(1.0 / (smooth * total))
    geo_mean = 0.0
    if max(precisions) > 0:
        geo_mean = math.exp(sum(math.log(p) for p in precisions if p) / max_order)
    penalty = 1.0
    if use_bp and ref_len:
        ratio = hyp_len / ref_len
        penalty = 0.0 if ratio < 1e-30 else (math.exp(1 - 1.0 / ratio) if ratio < 1.0 else 1.0)
    return np.float32(geo_mean * penalty)


def sentence_bleu(hyps: np.ndarray, hyp_lens: np.ndarray, refs: np.ndarray, ref_lens: np.ndarray) -> np.ndarray:
    """BLEU of each hypothesis row (its first ``hyp_lens`` labels) against its reference row, float32 (N,)."""
    return np.array([compute_bleu([list(refs[i, :ref_lens[i]])], [list(hyps[i, :hyp_lens[i]])])
                     for i in range(len(hyps))], np.float32)
