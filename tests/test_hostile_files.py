"""Hostile data files: every file type the engine reads besides the config is data and is never
executed (docs/security.md). Each file here tries to run ``touch PWNED``; the reader must end in
a one-line DataError naming the file (or read the text as plain data), and PWNED must not exist.

File types: vocabularies (``orth_symbols_map_file``, TranslationDataset's ``*.vocab.*``, pickles),
sequence lists (``seq_list_filter_file``, ``seq_list_file``), ``seq_len_file``,
``orth_replace_map_file`` (JSON), Bliss XML corpora (external entities, entity expansion), HDF
strings, the learning-rate file and a checkpoint's stored run state.
"""
from __future__ import annotations

import pickle
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

from returnn.errors import DataError


class _Payload:
    """Unpickling this runs ``os.system(command)``."""

    def __init__(self, command: str):
        self.command = command

    def __reduce__(self):
        import os
        return os.system, (self.command,)


@pytest.fixture
def pwn(tmp_path):
    """(marker path, a Python expression that creates it) ; asserts afterwards it was not created."""
    marker = tmp_path / "PWNED"
    yield marker, "__import__('os').system('touch %s')" % marker
    assert not marker.exists(), "a data file ran code"


def _lm(tmp_path: Path, **kwargs):
    from returnn.datasets.lm import LmDataset
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a b\nb a\n")
    return LmDataset(corpus_file=str(corpus), name="lm", **kwargs)


@pytest.mark.parametrize("text", [
    '{"a": 0, "b": %(code)s}',
    '{"a": 0, "b": 1} if %(code)s else {}',
    '{"a": 0, "b": (lambda: %(code)s)()}',
    "{" * 100000 + "}" * 100000,
], ids=["call", "conditional", "lambda", "deep_nesting"])
def test_vocab_dict_literal_with_code_is_refused(tmp_path, pwn, text):
    marker, code = pwn
    vocab = tmp_path / "vocab.txt"
    vocab.write_text(text % {"code": code} if "%(code)s" in text else text)
    with pytest.raises(DataError, match=str(vocab)):
        _lm(tmp_path, orth_symbols_map_file=str(vocab))


def test_pickled_vocab_is_refused_without_unpickling(tmp_path, pwn):
    from returnn.datasets.lm import TranslationDataset
    marker, _ = pwn
    for side in ("source", "target"):
        (tmp_path / ("%s.train" % side)).write_text("a b\n")
        (tmp_path / ("%s.vocab.pkl" % side)).write_bytes(pickle.dumps(_Payload("touch %s" % marker)))
    with pytest.raises(DataError, match=r"source\.vocab\.pkl is a pickle file; this engine never unpickles"):
        TranslationDataset(path=str(tmp_path), file_postfix="train", name="translation")


@pytest.mark.parametrize("text", ["[%(code)s]", "['seq-0'] + [%(code)s]", "{'train': [%(code)s]}"])
def test_seq_list_literal_with_code_is_refused(tmp_path, pwn, text):
    from returnn.datasets.generating import Task12AXDataset
    marker, code = pwn
    seq_list = tmp_path / "seqs.txt"
    seq_list.write_text(text % {"code": code})
    with pytest.raises(DataError, match=str(seq_list)):
        Task12AXDataset(num_seqs=4, seq_list_filter_file=str(seq_list), name="train")


def test_seq_list_lines_are_tags_not_code(tmp_path, pwn):
    """A plain-text list is lines of tags: code in it is a tag that matches nothing."""
    from returnn.datasets.generating import Task12AXDataset
    marker, code = pwn
    seq_list = tmp_path / "seqs.txt"
    seq_list.write_text(code + "\n")
    dataset = Task12AXDataset(num_seqs=4, seq_list_filter_file=str(seq_list), name="train")
    with pytest.raises(DataError, match="no sequence left after seq_list_filter_file"):
        dataset.init_seq_order(1)


def _concat(tmp_path: Path, seq_len_text: str):
    from returnn.datasets.concat import ConcatSeqsDataset
    from returnn.datasets.generating import Task12AXDataset
    tags = Task12AXDataset(num_seqs=4, name="probe").corpus_tags()
    (tmp_path / "concat.txt").write_text("%s;%s\n%s\n" % (tags[0], tags[1], tags[2]))
    (tmp_path / "lens.txt").write_text(seq_len_text.replace("TAG", tags[0]))
    return ConcatSeqsDataset(dataset={"class": "Task12AXDataset", "num_seqs": 4},
                             seq_list_file=str(tmp_path / "concat.txt"), seq_len_file=str(tmp_path / "lens.txt"),
                             name="concat")


@pytest.mark.parametrize("text", ["{'TAG': %(code)s}", "{'TAG': [1, 2]}", "{'TAG': 'x'}"],
                         ids=["code", "list_length", "text_length"])
def test_seq_len_file_with_code_or_wrong_values_is_one_line(tmp_path, pwn, text):
    marker, code = pwn
    with pytest.raises(DataError, match="lens.txt"):
        _concat(tmp_path, text % {"code": code} if "%(code)s" in text else text)


@pytest.mark.parametrize("text", ["{'a': %(code)s}", '{"a": ["b", 1]}', '{"a": 3}'],
                         ids=["python_code", "list_value", "number_value"])
def test_orth_replace_map_file_is_json_with_string_values(tmp_path, pwn, text):
    marker, code = pwn
    symbols = tmp_path / "symbols.txt"
    symbols.write_text("a\nb\n[END]\n[UNKNOWN]\n")
    replace = tmp_path / "replace.json"
    replace.write_text(text % {"code": code} if "%(code)s" in text else text)
    with pytest.raises(DataError, match=str(replace)):
        _lm(tmp_path, orth_symbols_file=str(symbols), orth_replace_map_file=str(replace))


LAUGHS = ('<?xml version="1.0"?>\n<!DOCTYPE corpus [\n <!ENTITY a "%s">\n' % ("a" * 64)
          + "".join(' <!ENTITY %s "%s">\n' % (chr(98 + i), ("&%s;" % chr(97 + i)) * 20) for i in range(7))
          + ']>\n<corpus name="x"><recording><segment name="1"><orth>&h;</orth></segment></recording></corpus>\n')
XXE = ('<?xml version="1.0"?>\n<!DOCTYPE corpus [ <!ENTITY x SYSTEM "file://%s"> ]>\n'
       '<corpus name="x"><recording><segment name="1"><orth>a &x;</orth></segment></recording></corpus>\n')


@pytest.mark.parametrize("kind", ["entity_expansion", "external_entity"])
def test_hostile_bliss_corpus_is_refused_quickly(tmp_path, kind):
    from returnn.datasets.text_files import read_bliss_orths
    secret = tmp_path / "secret.txt"
    secret.write_text("the secret\n")
    corpus = tmp_path / "corpus.xml"
    corpus.write_text(LAUGHS if kind == "entity_expansion" else XXE % secret)
    t0 = time.monotonic()
    with pytest.raises(DataError, match="bad Bliss XML") as info:
        list(read_bliss_orths(str(corpus), "lm"))
    assert time.monotonic() - t0 < 10
    assert "secret" not in str(info.value) or str(secret) in str(info.value)


def test_hdf_strings_are_data(tmp_path, pwn):
    """Tags and labels in an HDF file are strings: code in them is just text."""
    from returnn.datasets.hdf import HDFDataset
    marker, code = pwn
    path = tmp_path / "x.hdf"
    with h5py.File(path, "w") as f:
        f.attrs["inputPattSize"] = 2
        f.create_dataset("inputs", data=np.zeros((3, 2), dtype="float32"))
        f.create_dataset("seqLengths", data=np.array([[3, 3]], dtype="int32"))
        f.create_dataset("seqTags", data=np.array([code.encode()]))
        targets = f.create_group("targets")
        targets.create_group("data").create_dataset("classes", data=np.zeros(3, dtype="int32"))
        targets.create_group("size").attrs["classes"] = np.array([2, 1], dtype="int64")
        targets.create_group("labels").create_dataset("classes", data=np.array([code.encode(), b"b"]))
    dataset = HDFDataset(files=[str(path)], name="train")
    dataset.init_seq_order(1)
    assert dataset.get_tag(0) == code


def test_learning_rate_file_with_code_is_refused(tmp_path, pwn):
    from returnn.learning_rate_file import read_learning_rate_file
    marker, code = pwn
    path = tmp_path / "lr.data"
    path.write_text("{1: EpochData(learningRate=%s, error={})}\n" % code)
    with pytest.raises(DataError, match=str(path)):
        read_learning_rate_file(str(path))


def test_checkpoint_run_state_is_json_not_code(tmp_path, pwn):
    import tensorflow as tf
    from returnn.tf.checkpoint import CheckpointManager
    marker, code = pwn
    from returnn.tf import checkpoint_format as fmt
    manager = CheckpointManager(str(tmp_path / "model"))
    prefix = manager.save(1, {"note": code})
    values = manager.values(1, 0, {"note": code})
    values[fmt.RUN_STATE_KEY] = code  # as if the stored JSON were replaced by code
    fmt.write_named(prefix, values)
    assert manager.restore(prefix) == 1
    with pytest.raises(DataError, match="stored run state is not a JSON object"):
        manager.run_state(prefix)
