"""Sequence tags are keys (issue 28): they are read from HDF files losslessly (bytes that are not
UTF-8 stay distinct, as surrogate escapes, and are written back as the same bytes), and where
sequences are matched by tag (MetaDataset parts and sequence lists, ConcatSeqsDataset) a tag met
twice is one line naming the file and the tag, never a dropped or mispaired sequence."""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import List

import h5py
import numpy as np
import pytest

from helpers import PYTHON, REPO, assert_one_line_error, child_env, run_rnn, write_config
from returnn.datasets import init_dataset
from returnn.datasets.hdf_file import encode_hdf_string
from returnn.datasets.hdf_write import SimpleHDFWriter
from returnn.errors import DataError


def write_hdf(path: Path, tags: List[bytes], values: List[float], key: str = "inputs") -> str:
    """One frame per sequence: sequence i holds ``values[i]`` (dense 'data', or sparse 'classes')."""
    n = len(tags)
    with h5py.File(path, "w") as f:
        if key == "inputs":
            f["inputs"] = np.array(values, np.float32).reshape(n, 1)
        else:
            f["targets/data/classes"] = np.array(values, np.int32)
            f.require_group("targets/size").attrs["classes"] = [10, 1]
            f.require_group("targets/labels")
        f["seqLengths"] = np.ones((n, 2), np.int32)
        f["seqTags"] = np.array(tags)
    return str(path)


def meta(feat: str, align: str, **opts):
    return init_dataset(dict({"class": "MetaDataset",
                              "datasets": {"feat": {"class": "HDFDataset", "files": [feat]},
                                           "align": {"class": "HDFDataset", "files": [align]}},
                              "data_map": {"data": ("feat", "data"), "classes": ("align", "classes")}}, **opts),
                        name="train")


# tags that decoded to the same text before ("\ufffd" for any byte that is not UTF-8)
NOT_UTF8 = [b"utt-\xff", b"utt-\xfe", b"utt-\xc3", b"utt-ok"]


def test_hdf_tags_that_are_not_utf8_stay_distinct_and_round_trip(tmp_path):
    ds = init_dataset({"class": "HDFDataset", "files": [write_hdf(tmp_path / "a.hdf", NOT_UTF8, [0, 1, 2, 3])]},
                      name="train")
    tags = ds.get_all_tags()
    assert len(set(tags)) == 4 and tags[3] == "utt-ok"
    assert [encode_hdf_string(t) for t in tags] == NOT_UTF8


def test_meta_dataset_pairs_tags_that_differ_only_in_non_utf8_bytes(tmp_path):
    """The alignment file holds the same tags in reverse order: each feature frame i must meet its
    own class i (before, all of them met the class of one sequence)."""
    feat = write_hdf(tmp_path / "feat.hdf", NOT_UTF8, [0, 1, 2, 3])
    align = write_hdf(tmp_path / "align.hdf", NOT_UTF8[::-1], [3, 2, 1, 0], key="classes")
    ds = meta(feat, align)
    ds.init_seq_order(1)
    seqs = ds.get_seqs(list(range(4)))
    assert [int(s["data"][0, 0]) for s in seqs] == [int(s["classes"][0]) for s in seqs] == [0, 1, 2, 3]


@pytest.mark.parametrize("part", ["feat", "align"])
def test_duplicate_tag_in_a_part_is_one_line_naming_file_and_tag(tmp_path, part):
    tags = [b"a", b"b", b"c", b"b"]
    files = {"feat": write_hdf(tmp_path / "feat.hdf", [b"a", b"b", b"c", b"d"], [0, 1, 2, 3]),
             "align": write_hdf(tmp_path / "align.hdf", [b"a", b"b", b"c", b"d"], [0, 1, 2, 3], key="classes")}
    files[part] = write_hdf(tmp_path / (part + "-dup.hdf"), tags, [0, 1, 2, 3],
                            key="inputs" if part == "feat" else "classes")
    with pytest.raises(DataError) as info:
        meta(files["feat"], files["align"])
    msg = str(info.value)
    assert "\n" not in msg
    assert ("dataset train_%s (HDFDataset): sequence tag 'b' occurs twice (#1 of file %s and #3 of file %s)"
            % (part, files[part], files[part])) in msg, msg


def test_duplicate_tag_in_seq_list_file_is_named(tmp_path):
    feat = write_hdf(tmp_path / "feat.hdf", [b"a", b"b", b"c"], [0, 1, 2])
    align = write_hdf(tmp_path / "align.hdf", [b"a", b"b", b"c"], [0, 1, 2], key="classes")
    seq_list = tmp_path / "list.txt"
    seq_list.write_text("a\nc\na\n")
    with pytest.raises(DataError) as info:
        meta(feat, align, seq_list_file=str(seq_list))
    assert "seq_list_file %s: sequence tag 'a' occurs twice (entry 1 and entry 3)" % seq_list in str(info.value)


def test_seq_list_file_with_raw_bytes_matches_hdf_tags(tmp_path):
    feat = write_hdf(tmp_path / "feat.hdf", NOT_UTF8, [0, 1, 2, 3])
    align = write_hdf(tmp_path / "align.hdf", NOT_UTF8[::-1], [3, 2, 1, 0], key="classes")
    seq_list = tmp_path / "list.txt"
    seq_list.write_bytes(b"\n".join([NOT_UTF8[2], NOT_UTF8[0]]) + b"\n")
    ds = meta(feat, align, seq_list_file=str(seq_list))
    ds.init_seq_order(1)
    assert [encode_hdf_string(ds.get_tag(i)) for i in range(ds.num_seqs)] == [NOT_UTF8[2], NOT_UTF8[0]]
    assert [int(s["classes"][0]) for s in ds.get_seqs([0, 1])] == [2, 0]


def test_concat_seqs_dataset_refuses_duplicate_sub_tags(tmp_path):
    sub = write_hdf(tmp_path / "sub.hdf", [b"a", b"b", b"a"], [0, 1, 2])
    (tmp_path / "list.txt").write_text("a;b\n")
    with pytest.raises(DataError) as info:
        init_dataset({"class": "ConcatSeqsDataset", "seq_list_file": str(tmp_path / "list.txt"),
                      "dataset": {"class": "HDFDataset", "files": [sub]}}, name="train")
    assert "sequence tag 'a' occurs twice (#0 of file %s and #2 of file %s)" % (sub, sub) in str(info.value)


def test_writer_keeps_tag_bytes_and_refuses_nul(tmp_path):
    out = tmp_path / "out.hdf"
    src = init_dataset({"class": "HDFDataset", "files": [write_hdf(tmp_path / "a.hdf", NOT_UTF8, [0, 1, 2, 3])]},
                       name="src")
    with SimpleHDFWriter(str(out), dim=1) as writer:
        writer.insert_batch(np.zeros((4, 1, 1), np.float32), [1] * 4, src.get_all_tags())
    with h5py.File(out, "r") as f:
        assert [bytes(t) for t in f["seqTags"][...]] == NOT_UTF8
    writer = SimpleHDFWriter(str(tmp_path / "nul.hdf"), dim=1)
    with pytest.raises(DataError, match="holds a NUL byte"):
        writer.insert_batch(np.zeros((1, 1, 1), np.float32), [1], ["a\0b"])
    writer.abort()


def test_hdf_dump_tool_keeps_tag_bytes(tmp_path):
    src = write_hdf(tmp_path / "a.hdf", NOT_UTF8, [0, 1, 2, 3])
    out = tmp_path / "dump.hdf"
    proc = subprocess.run([PYTHON, "tools/hdf_dump.py", src, str(out)], cwd=str(REPO), env=child_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    with h5py.File(out, "r") as f:
        assert [bytes(t) for t in f["seqTags"][...]] == NOT_UTF8



# files that map tags to values: a tag twice is two values for one sequence (Python's dict would keep the last)
def _lens_file(tmp_path, feat, align):
    path = tmp_path / "lens.txt"
    path.write_text("{'a': 1,\n 'b': 2,\n 'c': 3,\n 'a': 40}\n")
    return ("seq_order_seq_lens_file: %s:4: sequence tag 'a' occurs twice (also at line 1)" % path,
            lambda: init_dataset({"class": "HDFDataset", "files": [feat], "seq_order_seq_lens_file": str(path),
                                  "seq_ordering": "sorted"}, name="train").init_seq_order(1))


def _concat_len_file(tmp_path, feat, align):
    (tmp_path / "list.txt").write_text("a;b\nc\n")
    path = tmp_path / "lens.txt"
    path.write_text("{'a': 1, 'b': 1, 'c': 1, 'c': 7}")
    return ("seq_len_file: %s:1: sequence tag 'c' occurs twice (also at line 1)" % path,
            lambda: init_dataset({"class": "ConcatSeqsDataset", "dataset": {"class": "HDFDataset", "files": [feat]},
                                  "seq_list_file": str(tmp_path / "list.txt"), "seq_len_file": str(path)},
                                 name="train"))


def _concat_list_line_twice(tmp_path, feat, align):
    path = tmp_path / "list.txt"
    path.write_text("a;b\nc\na;b\n")
    return ("seq_list_file %s: sequence tag 'a;b' occurs twice (entry 1 and entry 3)" % path,
            lambda: init_dataset({"class": "ConcatSeqsDataset", "dataset": {"class": "HDFDataset", "files": [feat]},
                                  "seq_list_file": str(path)}, name="train"))


def _meta_list_dict_key_twice(tmp_path, feat, align):
    path = tmp_path / "list.txt"
    path.write_text("{'feat': ['a', 'b'],\n 'align': ['a', 'b'],\n 'align': ['b', 'a']}")
    return ("%s:3: dataset key 'align' occurs twice (also at line 2)" % path,
            lambda: meta(feat, align, seq_list_file=str(path)))


def _nul_cut_tags_in_a_part(tmp_path, feat, align):
    path = write_hdf(tmp_path / "nul.hdf", [b"a", b"b\x00x", b"b\x00y"], [0, 1, 2], key="classes")
    return ("sequence tag 'b' occurs twice (#1 of file %s and #2 of file %s)" % (path, path),
            lambda: meta(feat, path))


@pytest.mark.parametrize("make", [_lens_file, _concat_len_file, _concat_list_line_twice, _meta_list_dict_key_twice,
                                  _nul_cut_tags_in_a_part],
                         ids=["seq_order_seq_lens_file", "concat-seq_len_file", "concat-seq_list_file",
                              "meta-seq_list_file-dict", "hdf-tags-equal-after-nul"])
def test_tag_twice_in_a_file_that_maps_tags_is_named(tmp_path, make):
    feat = write_hdf(tmp_path / "feat.hdf", [b"a", b"b", b"c"], [0, 1, 2])
    align = write_hdf(tmp_path / "align.hdf", [b"a", b"b", b"c"], [0, 1, 2], key="classes")
    expected, action = make(tmp_path, feat, align)
    with pytest.raises(DataError) as info:
        action()
    msg = str(info.value)
    assert "\n" not in msg and expected in msg, msg


def test_seq_list_lines_end_at_newline_only(tmp_path):
    """A tag holding U+0085 or U+2028 (str.splitlines would cut it in two) is one tag."""
    tags = ["a", "b\x85c", "d\u2028e"]
    feat = write_hdf(tmp_path / "feat.hdf", [t.encode() for t in tags], [0, 1, 2])
    align = write_hdf(tmp_path / "align.hdf", [t.encode() for t in tags[::-1]], [2, 1, 0], key="classes")
    seq_list = tmp_path / "list.txt"
    seq_list.write_text("\n".join(tags[1:]) + "\n", encoding="utf8")
    ds = meta(feat, align, seq_list_file=str(seq_list))
    ds.init_seq_order(1)
    assert ds.num_seqs == 2 and [int(s["classes"][0]) for s in ds.get_seqs([0, 1])] == [1, 2]


TRAIN = '''#!rnn.py
train = {"class": "MetaDataset",
         "datasets": {"feat": {"class": "HDFDataset", "files": [%(feat)r]},
                      "align": {"class": "HDFDataset", "files": [%(align)r]}},
         "data_map": {"data": ("feat", "data"), "classes": ("align", "classes")}}
num_inputs = 1
num_outputs = {"classes": [10, 1]}
network = {"output": {"class": "softmax", "loss": "ce", "from": "data"}}
learning_rate = 0.01
num_epochs = 1
'''


def test_training_on_a_part_with_duplicate_tags_is_one_line(tmp_path):
    feat = write_hdf(tmp_path / "feat.hdf", [b"a", b"b", b"c"], [0, 1, 2])
    align = write_hdf(tmp_path / "align.hdf", [b"a", b"b", b"b"], [0, 1, 2], key="classes")
    config = write_config(tmp_path / "t.config", TRAIN % {"feat": feat, "align": align})
    proc = run_rnn([config, "++model", tmp_path / "model"], timeout=300)
    assert_one_line_error(proc, "sequence tag 'b' occurs twice (#1 of file %s and #2 of file %s)" % (align, align))


def test_search_py_output_refuses_duplicate_tags_before_decoding(tmp_path):
    """The 'py' search output is a dict by tag: a tag twice would drop a hypothesis, so it is one line
    before any decoding."""
    from test_output_files import SEARCH
    dev = ('dev = {"class": "StaticDataset", "output_dim": {"data": 8, "classes": 2}, "tags": ["a", "b", "a"], '
           '"data": [{"data": np.array([1, 2, 3], "int32"), "classes": np.array([0, 1], "int32")}] * 3}\n')
    text = SEARCH.replace('dev = {"class": "TaskNumberBaseConvertDataset", "num_seqs": 4, "fixed_random_seed": 42}\n',
                          "import numpy as np\n" + dev)
    config = write_config(tmp_path / "s.config", text)
    out = tmp_path / "hyps.py"
    proc = run_rnn([config, "++task", "search", "++model", tmp_path / "model", "++search_output_file", out,
                    "++search_data", "dev"])
    assert_one_line_error(proc, "dataset dev (StaticDataset): search_output_file %s is a dict by sequence tag: "
                                "sequence tag 'a' occurs twice (sequence #0 and sequence #2)" % out)
    assert not out.exists()
    # 'txt' has no tags (RETURNN's: one hypothesis a line); the output's target classes0 has no labels to write
    # it with: RETURNN cannot either
    proc = run_rnn([config, "++task", "search", "++model", tmp_path / "model", "++search_output_file", out,
                    "++search_output_file_format", "txt", "++search_data", "dev"])
    assert_one_line_error(proc, "search_output_file: no labels for the sparse output of layer 'output' (target "
                                "'classes0')")
