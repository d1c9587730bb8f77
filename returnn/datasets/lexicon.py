"""RETURNN's ``Lexicon``: a Bliss lexicon file (XML, optionally gzipped) as Python dicts.

Configs import it as ``from LmDataset import Lexicon`` or ``from returnn.datasets.lm import
Lexicon`` to map words to phoneme sequences::

    lex = Lexicon("lexicon.xml.gz")
    lex.phoneme_list            # ["aa", "ae", ...] in file order
    lex.phonemes["aa"]          # {"index": 0, "symbol": "aa", "variation": "context"}
    lex.lemmas["hello"]         # {"orth": "hello", "phons": [{"phon": "hh ax l ow", "score": 0.0}]}

The file is parsed as data (XML elements ``phoneme`` with ``symbol``/``variation`` and ``lemma``
with ``orth``/``phon``); a file that is not such a lexicon is one ``DataError`` naming it.
"""
from __future__ import annotations

import gzip
from typing import Any, Dict, List
from xml.etree import ElementTree

from returnn.errors import DataError


class Lexicon:
    """Words -> pronunciations, and the phoneme inventory, of one Bliss lexicon file."""

    def __init__(self, filename: str):
        self.filename = filename
        self.phoneme_list: List[str] = []
        self.phonemes: Dict[str, Dict[str, Any]] = {}
        self.lemmas: Dict[str, Dict[str, Any]] = {}
        try:
            with open(filename, "rb") as raw:
                stream = gzip.GzipFile(fileobj=raw) if filename.endswith(".gz") else raw
                self._parse(stream)
        except (OSError, EOFError, ElementTree.ParseError) as exc:
            raise DataError("lexicon %s: cannot read it: %s" % (filename, exc)) from None

    def _parse(self, stream) -> None:
        for _, elem in ElementTree.iterparse(stream, events=("end",)):
            if elem.tag == "phoneme":
                self._add_phoneme(elem)
                elem.clear()
            elif elem.tag == "lemma":
                self._add_lemma(elem)
                elem.clear()

    def _add_phoneme(self, elem: ElementTree.Element) -> None:
        symbol = (elem.findtext("symbol") or "").strip()
        variation = (elem.findtext("variation") or "context").strip()
        if not symbol or symbol in self.phonemes or variation not in ("context", "none"):
            raise DataError("lexicon %s: bad or repeated phoneme %r (variation %r)" % (self.filename, symbol, variation))
        self.phoneme_list.append(symbol)
        self.phonemes[symbol] = {"index": len(self.phonemes), "symbol": symbol, "variation": variation}

    def _add_lemma(self, elem: ElementTree.Element) -> None:
        phons = []
        for p in elem.findall("phon"):
            try:
                score = float(p.attrib.get("score", 0))
            except ValueError:
                raise DataError("lexicon %s: phon score %r is no number" % (self.filename, p.attrib["score"])) from None
            phons.append({"phon": (p.text or "").strip(), "score": score})
        for orth_elem in elem.findall("orth"):
            orth = (orth_elem.text or "").strip()
            lemma = {"orth": orth, "phons": phons}
            old = self.lemmas.get(orth)
            if old is not None and old != lemma:
                raise DataError("lexicon %s: orth %r has two different lemmas" % (self.filename, orth))
            self.lemmas[orth] = lemma
