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
