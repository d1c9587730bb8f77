"""Byte-pair encoding of words with a merge-codes file, as RETURNN's ``BytePairEncoding`` vocabulary segments
text on the fly (the subword-nmt scheme, Sennrich et al. 2016): each word's characters are merged pair by pair,
the pair listed first in the codes file first, the word's end marked (``</w>``: on its own symbol in codes of
version 0.1, on the last character from version 0.2, the ``#version:`` header line); every piece but a word's
last gets the ``@@`` separator. With the vocabulary's labels, a piece that is not a label (with its separator
where it has one) is split back along its merge, recursively, as far as the codes allow.

RETURNN's quirks kept: a one-character word is taken as it is (no merge, no vocabulary check); a word starting
with ``$`` (longer than that) and the ``{...}`` tokens after it are kept whole."""
from __future__ import annotations

import re
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from returnn.datasets.text_files import read_text

SEPARATOR = "@@"
END = "</w>"


class BpeCodes:
    """The merges of a codes file: pair -> rank (the first listing of a pair counts), and the concatenation
    of a pair -> the pair (for splitting back)."""

    def __init__(self, path: str, what: str = "bpe_file"):
        lines = read_text(path, what).splitlines()
        first = lines[0] if lines else ""
        if first.startswith("#version:"):
            self.version = tuple(int(x) for x in re.sub(r"(\.0+)*$", "", first.split()[-1]).split("."))
        else:
            self.version = (0, 1)
        if self.version not in ((0, 1), (0, 2)):
            raise ValueError("%s: BPE codes version %s is not supported (0.1, 0.2)" % (path, first.split()[-1]))
        self.rank: Dict[Tuple[str, ...], int] = {}
        for i, line in enumerate(lines):
            self.rank.setdefault(tuple(line.split()), i)
        self.split_of: Dict[str, Tuple[str, ...]] = {}
        for pair in self.rank:  # in file order: the first pair making a string wins
            if len(pair) >= 2:
                self.split_of.setdefault(pair[0] + pair[1], pair)


class BpeEncoder:
    """Segments sentences with :class:`BpeCodes`, checked against ``labels`` when given."""

    def __init__(self, codes: BpeCodes, labels: Optional[Sequence[str]] = None):
        self.codes = codes
        self.labels = set(labels) if labels else None
        self._cache: Dict[str, Tuple[str, ...]] = {}

    def encode_word(self, orig: str) -> Tuple[str, ...]:
        """The pieces of one word (without separators)."""
        if orig in self._cache:
            return self._cache[orig]
        word = tuple(orig) + (END,) if self.codes.version == (0, 1) else tuple(orig[:-1]) + (orig[-1] + END,)
        if len(word) < 2:
            return (orig,)  # RETURNN returns the word itself, unchecked
        rank = self.codes.rank
        while len(word) > 1:
            pairs = {(a, b) for a, b in zip(word, word[1:])}
            best = min(pairs, key=lambda p: rank.get(p, float("inf")))
            if best not in rank:
                break
            merged: List[str] = []
            i = 0
            while i < len(word):
                if i < len(word) - 1 and word[i] == best[0] and word[i + 1] == best[1]:
                    merged.append(best[0] + best[1])
                    i += 2
                else:
                    merged.append(word[i])
                    i += 1
            word = tuple(merged)
        if word[-1] == END:
            word = word[:-1]
        elif word[-1].endswith(END):
            word = word[:-1] + (word[-1].replace(END, ""),)
        if self.labels is not None:
            word = tuple(self._in_vocab(word))
        self._cache[orig] = word
        return word

    def _in_vocab(self, pieces: Tuple[str, ...]) -> Iterator[str]:
        for piece in pieces[:-1]:
            yield from ([piece] if piece + SEPARATOR in self.labels else self._split(piece, final=False))
        last = pieces[-1]
        yield from ([last] if last in self.labels else self._split(last, final=True))

    def _split(self, piece: str, final: bool) -> Iterator[str]:
        """``piece`` split back along its merge until its parts are labels or cannot be split."""
        pair = self.codes.split_of.get(piece + END if final else piece)
        if pair is None or len(pair) != 2:  # RETURNN: no merge made it, or a line of other than two symbols
            yield piece
            return
        left, right = pair[0], pair[1][:-len(END)] if final else pair[1]
        yield from ([left] if left + SEPARATOR in self.labels else self._split(left, final=False))
        known = right in self.labels if final else right + SEPARATOR in self.labels
        yield from ([right] if known else self._split(right, final))

    def segment_sentence(self, sentence: str) -> List[str]:
        """The pieces of the whitespace-separated words, ``@@`` after all but each word's last."""
        out: List[str] = []
        category = skipping = False
        for word in sentence.split():
            if word[0] == "$" and len(word) > 1:
                category = True
                out.append(word)
            elif category and word[0] == "{":
                skipping = True
                out.append(word)
            elif skipping and word[0] != "}":
                out.append(word)
            else:
                category = skipping = False
                pieces = self.encode_word(word)
                out.extend(p + SEPARATOR for p in pieces[:-1])
                out.append(pieces[-1])
        return out
