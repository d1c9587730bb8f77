"""LmDataset and TranslationDataset: files written here, read back with exact index values, tags,
ordering and partition_epoch; vocabularies are text or literals, never pickles."""
from __future__ import annotations

import gzip
import pickle

import numpy as np
import pytest

from returnn.datasets import init_dataset
from returnn.datasets.base import compute_seq_order, partition_bounds
from returnn.datasets.lm import orthography_symbols, parse_orthography
from returnn.errors import DataError

LINES = ["hello world", "", "the cat", "hello [NOISE] cat", "  world   the  "]
WORDS = ["[END]", "[UNKNOWN]", "[START]", "hello", "world", "the", "cat", "[NOISE]"]


def all_seqs(ds, epoch=1):
    ds.init_seq_order(epoch)
    return [ds.get_tag(i) for i in range(ds.num_seqs)], ds.get_seqs(list(range(ds.num_seqs)))


def test_orthography_parsing_like_returnn():
    assert orthography_symbols("hi [noise] x") == ["h", "i", " ", "[NOISE]", " ", "x"]
    assert orthography_symbols("hi [noise] x", word_based=True) == ["hi", "[NOISE]", "x"]
    assert parse_orthography(" a (b)  c ") == ["a", " ", "b", " ", "c", "[END]"]
    assert parse_orthography("a b", word_based=True, prefix=["<s>"], postfix=[]) == ["<s>", "a", "b"]


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("vocab_format", ["lines", "map_lines", "literal"])
def test_lm_word_based(tmp_path, gz, vocab_format):
    corpus = tmp_path / ("corpus.txt.gz" if gz else "corpus.txt")
    data = ("\n".join(LINES) + "\n").encode()
    corpus.write_bytes(gzip.compress(data) if gz else data)
    if vocab_format == "lines":
        vocab = tmp_path / "vocab.txt"
        vocab.write_text("\n".join(WORDS) + "\n")
        opt = {"orth_symbols_file": str(vocab)}
    elif vocab_format == "map_lines":
        vocab = tmp_path / "vocab.map"
        vocab.write_text("".join("%s %i\n" % (w, i) for i, w in enumerate(WORDS)))
        opt = {"orth_symbols_map_file": str(vocab)}
    else:
        vocab = tmp_path / "vocab.py"
        vocab.write_text(repr({w: i for i, w in enumerate(WORDS)}))
        opt = {"orth_symbols_map_file": str(vocab)}
    ds = init_dataset(dict({"class": "LmDataset", "corpus_file": str(corpus), "word_based": True,
                            "add_delayed_seq_data": True}, **opt))
    assert ds.get_data_keys() == ["data", "delayed"]
    assert ds.num_outputs == {"data": [8, 1], "delayed": [8, 1]}
    assert ds.data_infos()["data"].labels == WORDS
    tags, seqs = all_seqs(ds)
    assert tags == ["line-0", "line-1", "line-2", "line-3"]  # the empty line is skipped
    want = [[3, 4, 0], [5, 6, 0], [3, 7, 6, 0], [4, 5, 0]]
    for seq, w in zip(seqs, want):
        assert seq["data"].dtype == np.int32
        np.testing.assert_array_equal(seq["data"], w)
        np.testing.assert_array_equal(seq["delayed"], [2] + w[:-1])


def test_lm_chars_unknown_and_ordering(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("ab a\nbbb\nxa\nab\n")
    symbols = tmp_path / "chars.txt"
    symbols.write_text("\n".join(["[END]", "[UNKNOWN]", " ", "a", "b"]) + "\n")
    base = {"class": "LmDataset", "corpus_file": str(corpus), "orth_symbols_file": str(symbols)}
    with pytest.raises(DataError, match=r"c.txt: sequence line-2: symbol 'x' is not in the vocabulary"):
        init_dataset(base)
    ds = init_dataset(dict(base, auto_replace_unknown_symbol=True, seq_ordering="sorted", partition_epoch=2))
    lens = np.array([5, 4, 3, 3])
    order = compute_seq_order("sorted", 4, lambda: lens, 1)
    values = {"line-0": [3, 4, 2, 3, 0], "line-1": [4, 4, 4, 0], "line-2": [1, 3, 0], "line-3": [3, 4, 0]}
    seen = []
    for epoch in (1, 2):
        tags, seqs = all_seqs(ds, epoch)
        start, end = partition_bounds(4, 2, epoch - 1)
        assert tags == ["line-%i" % i for i in order[start:end]]
        for tag, seq in zip(tags, seqs):
            np.testing.assert_array_equal(seq["data"], values[tag])
        seen += tags
    assert sorted(seen) == sorted(values)
    skipping = init_dataset(dict(base, error_on_invalid_seq=False, seq_end_symbol=None))
    tags, seqs = all_seqs(skipping)
    assert tags == ["line-0", "line-1", "line-3"]
    np.testing.assert_array_equal(seqs[1]["data"], [4, 4, 4])


def test_lm_orth_vocab_and_errors(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("a b zz\n")
    vocab = tmp_path / "v.txt"
    vocab.write_text("{'a': 0, 'b': 1, 'UNK': 2, '</s>': 3}")
    ds = init_dataset({"class": "LmDataset", "corpus_file": str(corpus),
                       "orth_vocab": {"vocab_file": str(vocab), "seq_postfix": [3]}})
    np.testing.assert_array_equal(all_seqs(ds)[1][0]["data"], [0, 1, 2, 3])
    with pytest.raises(DataError, match="exactly one of orth_symbols_file"):
        init_dataset({"class": "LmDataset", "corpus_file": str(corpus)})
    with pytest.raises(DataError, match="phone_info"):
        init_dataset({"class": "LmDataset", "corpus_file": str(corpus), "orth_symbols_file": str(vocab),
                      "phone_info": {"lexicon_file": "x"}})
    pkl = tmp_path / "v.pkl"
    pkl.write_bytes(pickle.dumps({"a": 0}))
    with pytest.raises(DataError, match="v.pkl is a pickle file; this engine never unpickles"):
        init_dataset({"class": "LmDataset", "corpus_file": str(corpus), "orth_symbols_map_file": str(pkl)})


def write_translation(d, vocab_ext="txt"):
    (d / "source.train").write_text("a b\nb c a\nc\n")
    (d / "target.train.gz").write_bytes(gzip.compress("x\ny y\nz x\n".encode()))
    src = {"a": 0, "b": 1, "c": 2, "<UNK>": 3, "</S>": 4}
    tgt = {"x": 0, "y": 1, "z": 2, "</S>": 3}
    (d / ("source.vocab." + vocab_ext)).write_text(repr(src))
    (d / ("target.vocab." + vocab_ext)).write_text("".join("%s %i\n" % kv for kv in tgt.items()))


@pytest.mark.parametrize("vocab_ext", ["txt", "pkl"])
def test_translation_dataset(tmp_path, vocab_ext):
    write_translation(tmp_path, vocab_ext)
    ds = init_dataset({"class": "TranslationDataset", "path": str(tmp_path), "file_postfix": "train",
                       "source_postfix": " </S>", "target_postfix": " </S>", "seq_ordering": "reverse"})
    assert ds.num_outputs == {"data": [5, 1], "classes": [4, 1]}
    assert ds.data_infos()["classes"].labels == ["x", "y", "z", "</S>"]
    tags, seqs = all_seqs(ds)
    assert tags == ["line-2", "line-1", "line-0"]
    np.testing.assert_array_equal(seqs[0]["data"], [2, 4])
    np.testing.assert_array_equal(seqs[1]["data"], [1, 2, 0, 4])
    np.testing.assert_array_equal(seqs[1]["classes"], [1, 1, 3])
    np.testing.assert_array_equal(seqs[2]["classes"], [0, 3])


def test_translation_errors(tmp_path):
    write_translation(tmp_path)
    (tmp_path / "source.dev").write_text("a q\n")
    (tmp_path / "target.dev").write_text("x\n")
    with pytest.raises(DataError, match=r"source.dev line 1: word 'q' is not in the vocabulary"):
        init_dataset({"class": "TranslationDataset", "path": str(tmp_path), "file_postfix": "dev"})
    ds = init_dataset({"class": "TranslationDataset", "path": str(tmp_path), "file_postfix": "dev",
                       "unknown_label": {"data": "<UNK>", "classes": None}})
    np.testing.assert_array_equal(all_seqs(ds)[1][0]["data"], [0, 3])
    (tmp_path / "source.vocab.txt").unlink()
    (tmp_path / "source.vocab.pkl").write_bytes(pickle.dumps({"a": 0, "<UNK>": 1}))
    with pytest.raises(DataError, match="source.vocab.pkl is a pickle file"):
        init_dataset({"class": "TranslationDataset", "path": str(tmp_path), "file_postfix": "train"})
    # The conversion the message gives writes source.vocab.txt, which is looked up first.
    (tmp_path / "source.vocab.txt").write_text(repr(pickle.loads((tmp_path / "source.vocab.pkl").read_bytes())))
    ds = init_dataset({"class": "TranslationDataset", "path": str(tmp_path), "file_postfix": "dev",
                       "unknown_label": "<UNK>", "source_only": True})
    assert ds.num_outputs == {"data": [2, 1]}
    np.testing.assert_array_equal(all_seqs(ds)[1][0]["data"], [0, 1])
    with pytest.raises(DataError, match="data file not found"):
        init_dataset({"class": "TranslationDataset", "path": str(tmp_path), "file_postfix": "test"})


SOURCE_TEXT = "This is some example text.\nIt is used to test the translation dataset.\nWe will write it into a file.\n"
TARGET_TEXT = ("Das ist ein Beispieltext.\nEr wird zum Testen des TranslationDatasets benutzt.\n"
               "Wir werden ihn in eine temporäre Datei schreiben.\n")


@pytest.mark.parametrize("postfix", ["", " </S>"])
def test_translation_reconstructs_sentences_like_returnn_test(tmp_path, postfix):
    """RETURNN's tests/test_TranslationDataset.py, with the vocabularies as dict literals."""
    (tmp_path / "source.test.gz").write_bytes(gzip.compress(SOURCE_TEXT.encode("utf8")))
    (tmp_path / "target.test").write_bytes(TARGET_TEXT.encode("utf8"))
    with_unk = TARGET_TEXT.replace("TranslationDatasets", "<UNK>")
    vocabs = {}
    for prefix, text in (("source", SOURCE_TEXT), ("target", with_unk)):
        words = sorted(set((text + postfix).split()))
        vocabs[prefix] = {w: i for i, w in enumerate(words)}
        (tmp_path / ("%s.vocab.txt" % prefix)).write_text(repr(vocabs[prefix]), encoding="utf8")
    ds = init_dataset({"class": "TranslationDataset", "path": str(tmp_path), "file_postfix": "test",
                       "source_postfix": postfix, "target_postfix": postfix, "unknown_label": {"classes": "<UNK>"}})
    tags, seqs = all_seqs(ds)
    assert tags == ["line-0", "line-1", "line-2"]
    inverse = {k: {i: w for w, i in v.items()} for k, v in vocabs.items()}
    for i, seq in enumerate(seqs):
        assert " ".join(inverse["source"][j] for j in seq["data"]) == SOURCE_TEXT.splitlines()[i] + postfix
        assert " ".join(inverse["target"][j] for j in seq["classes"]) == with_unk.splitlines()[i] + postfix


# RETURNN's tests/test_Dataset.py (test_LmDataset_*), same files and expected indices.
HELLO = "Hello world\nNext line\n"


def _char_symbols(tmp_path, text):
    syms, seen = ["[END]"], set()
    for c in text:
        if c not in seen and c != "\n":
            syms.append(c)
            seen.add(c)
    path = tmp_path / "chars.syms"
    path.write_text("\n".join(syms) + "\n")
    return str(path)


def test_returnn_lm_char_based_and_multiple_gzipped(tmp_path):
    (tmp_path / "a.txt.gz").write_bytes(gzip.compress(HELLO.encode()))
    (tmp_path / "b.txt.gz").write_bytes(gzip.compress(b"Next world\n"))
    (tmp_path / "c.txt").write_text("Hello line\n")
    syms = _char_symbols(tmp_path, HELLO)
    ds = init_dataset({"class": "LmDataset", "corpus_file": [str(tmp_path / n) for n in ("a.txt.gz", "b.txt.gz",
                                                                                       "c.txt")],
                       "orth_symbols_file": syms})
    _, seqs = all_seqs(ds)
    assert [s["data"].tolist() for s in seqs] == [[1, 2, 3, 3, 4, 5, 6, 4, 7, 3, 8, 0],
                                                  [9, 2, 10, 11, 5, 3, 12, 13, 2, 0],
                                                  [9, 2, 10, 11, 5, 6, 4, 7, 3, 8, 0],
                                                  [1, 2, 3, 3, 4, 5, 3, 12, 13, 2, 0]]


def test_returnn_lm_word_vocab_and_utf8_sorted(tmp_path):
    corpus = tmp_path / "t.txt"
    corpus.write_text(HELLO)
    syms = tmp_path / "w.syms"
    syms.write_text("[END]\nHello\nworld\nNext\nline\n")
    ds = init_dataset({"class": "LmDataset", "corpus_file": str(corpus), "word_based": True,
                       "orth_symbols_file": str(syms)})
    assert [s["data"].tolist() for s in all_seqs(ds)[1]] == [[1, 2, 0], [3, 4, 0]]
    vocab = tmp_path / "v.syms"
    vocab.write_text(repr({"[END]": 0, "Hello": 1, "world": 2, "Next": 3, "line": 4}) + "\n")
    ds = init_dataset({"class": "LmDataset", "corpus_file": str(corpus),
                       "orth_vocab": {"vocab_file": str(vocab), "unknown_label": None}})
    assert [s["data"].tolist() for s in all_seqs(ds)[1]] == [[1, 2], [3, 4]]
    corpus.write_text("Hello world\nNext line\nShorty\nLonger than all the others\n")
    ds = init_dataset({"class": "LmDataset", "corpus_file": str(corpus), "orth_vocab": {"class": "Utf8ByteTargets"},
                       "seq_ordering": "sorted"})
    assert ds.num_outputs["data"] == [256, 1]
    texts = [bytes(s["data"].tolist()).decode() for s in all_seqs(ds)[1]]
    assert texts == ["Shorty", "Next line", "Hello world", "Longer than all the others"]


def test_lm_reads_bliss_xml_corpus(tmp_path):
    xml = ('<?xml version="1.0" encoding="utf8"?>\n<corpus name="c"><recording name="r">'
           '<segment name="1"><orth> Hello\n  world </orth></segment>'
           '<segment name="2"><orth>Next line</orth></segment></recording></corpus>\n')
    (tmp_path / "c.xml.gz").write_bytes(gzip.compress(xml.encode()))
    syms = tmp_path / "w.syms"
    syms.write_text("[END]\nHello\nworld\nNext\nline\n")
    ds = init_dataset({"class": "LmDataset", "corpus_file": str(tmp_path / "c.xml.gz"), "word_based": True,
                       "orth_symbols_file": str(syms)})
    tags, seqs = all_seqs(ds)
    assert tags == ["line-0", "line-1"] and [s["data"].tolist() for s in seqs] == [[1, 2, 0], [3, 4, 0]]
    (tmp_path / "bad.xml").write_text("<?xml version='1.0'?><corpus><segment>")
    with pytest.raises(DataError, match="bad.xml: bad Bliss XML"):
        init_dataset({"class": "LmDataset", "corpus_file": str(tmp_path / "bad.xml"), "orth_symbols_file": str(syms)})


def test_lexicon_of_a_bliss_file(tmp_path):
    """RETURNN's Lexicon (``from LmDataset import Lexicon``): phoneme inventory and lemmas of a
    gzipped Bliss lexicon; a broken file is one DataError naming it."""
    import gzip
    from returnn.datasets.lm import Lexicon
    from returnn.errors import DataError
    xml = """<?xml version="1.0" encoding="utf8"?>
<lexicon>
  <phoneme-inventory>
    <phoneme><symbol>aa</symbol></phoneme>
    <phoneme><symbol>[SILENCE]</symbol><variation>none</variation></phoneme>
  </phoneme-inventory>
  <lemma special="silence"><orth>[SILENCE]</orth><phon>[SILENCE]</phon></lemma>
  <lemma><orth>ah</orth><orth>AH</orth><phon score="1.5">aa</phon><phon>aa aa</phon></lemma>
</lexicon>"""
    path = tmp_path / "lex.xml.gz"
    with gzip.open(path, "wt", encoding="utf8") as f:
        f.write(xml)
    lex = Lexicon(str(path))
    assert lex.phoneme_list == ["aa", "[SILENCE]"]
    assert lex.phonemes["[SILENCE]"] == {"index": 1, "symbol": "[SILENCE]", "variation": "none"}
    assert lex.lemmas["AH"] == {"orth": "AH", "phons": [{"phon": "aa", "score": 1.5}, {"phon": "aa aa", "score": 0.0}]}
    assert set(lex.lemmas) == {"[SILENCE]", "ah", "AH"}
    bad = tmp_path / "bad.xml"
    bad.write_text("<lexicon><lemma>")
    with pytest.raises(DataError, match="lexicon .*bad.xml"):
        Lexicon(str(bad))
