"""HDFDataset reads every layout variant of RETURNN's HDF format (files built by hand with h5py)."""
from __future__ import annotations

import os
import threading
from typing import Any, Dict, List, Optional, Sequence

import h5py
import numpy as np
import pytest

from returnn.datasets import init_dataset
from returnn.errors import DataError


def write_hdf(path: str, lengths: Sequence[Sequence[int]], tags: Sequence[Any], inputs: Optional[np.ndarray] = None,
              targets: Optional[Dict[str, np.ndarray]] = None, sizes: Optional[Dict[str, Any]] = None,
              target_labels: Optional[Dict[str, List[str]]] = None, tag_dtype: Any = "vlen",
              input_patt_size: Optional[int] = None, labels: Optional[List[str]] = None) -> str:
    """Writes one file in RETURNN's layout with plain h5py."""
    with h5py.File(path, "w") as f:
        f.create_dataset("seqLengths", data=np.asarray(lengths, dtype=np.int32))
        if tag_dtype == "vlen":
            f.create_dataset("seqTags", data=np.array(list(tags), dtype=object), dtype=h5py.string_dtype("utf-8"))
        else:
            f.create_dataset("seqTags", data=np.array(list(tags), dtype=tag_dtype))
        if inputs is not None:
            f.create_dataset("inputs", data=inputs)
        if input_patt_size is not None:
            f.attrs["inputPattSize"] = input_patt_size
        if labels is not None:
            f.create_dataset("labels", data=np.array([s.encode("utf8") for s in labels]))
        if targets is not None:
            f.create_group("targets/data")
            f.create_group("targets/size")
            f.create_group("targets/labels")
            for key, arr in targets.items():
                f["targets/data"].create_dataset(key, data=arr)
            for key, size in (sizes or {}).items():
                f["targets/size"].attrs[key] = size
            for key, names in (target_labels or {}).items():
                f["targets/labels"].create_dataset(key, data=np.array([s.encode("utf8") for s in names]))
    return path


def open_ds(files: Any, **opts: Any):
    ds = init_dataset(dict({"class": "HDFDataset", "files": files}, **opts))
    ds.init_seq_order(1)
    return ds


def split(arr: np.ndarray, lens: Sequence[int]) -> List[np.ndarray]:
    return np.split(arr, np.cumsum(lens)[:-1])


def all_seqs(ds) -> List[Dict[str, np.ndarray]]:
    return ds.get_seqs(list(range(ds.num_seqs)))


@pytest.fixture
def dense_file(tmp_path):
    rng = np.random.RandomState(0)
    lens = [3, 5, 1, 4]
    feats = rng.randn(sum(lens), 6).astype(np.float32)
    classes = rng.randint(0, 4, size=sum(lens)).astype(np.int32)
    path = write_hdf(str(tmp_path / "dense.hdf"), [[n, n] for n in lens], ["a", "b", "c", "d"], inputs=feats,
                     targets={"classes": classes}, sizes={"classes": np.array([4, 1], dtype=np.int64)},
                     target_labels={"classes": ["w", "x", "y", "z"]}, input_patt_size=6)
    return path, lens, feats, classes


def test_dense_inputs_sparse_classes(dense_file):
    path, lens, feats, classes = dense_file
    ds = open_ds([path])
    assert ds.get_data_keys() == ["data", "classes"]
    assert ds.num_outputs == {"data": [6, 2], "classes": [4, 1]}
    assert not ds.is_data_sparse("data") and ds.is_data_sparse("classes")
    assert ds.get_data_dtype("data") == "float32" and ds.get_data_dtype("classes") == "int32"
    assert ds.data_infos()["classes"].labels == ["w", "x", "y", "z"]
    assert ds.data_infos()["data"].labels is None
    seqs = all_seqs(ds)
    for seq, f, c in zip(seqs, split(feats, lens), split(classes, lens)):
        np.testing.assert_array_equal(seq["data"], f)
        np.testing.assert_array_equal(seq["classes"], c)
        assert seq["data"].dtype == np.float32 and seq["classes"].dtype == np.int32
    assert [ds.get_tag(i) for i in range(4)] == ["a", "b", "c", "d"]
    np.testing.assert_array_equal(ds.seq_lengths_in_order(), [[n, n] for n in lens])
    assert ds.get_seq_length(1) == {"data": 5, "classes": 5}


def test_sparse_inputs_and_scalar_size_attr(tmp_path):
    lens = [2, 3]
    data = np.array([0, 7, 1, 2, 3], dtype=np.int32)
    classes = np.array([1, 0, 2, 2, 0], dtype=np.int32)
    path = write_hdf(str(tmp_path / "sparse.hdf"), [[n, n] for n in lens], ["s0", "s1"], inputs=data,
                     targets={"classes": classes}, sizes={"classes": 3}, input_patt_size=8,
                     labels=["l%i" % i for i in range(8)])
    ds = open_ds(path)
    assert ds.num_outputs == {"data": [8, 1], "classes": [3, 1]}
    assert ds.is_data_sparse("data") and ds.get_data_shape("data") == ()
    assert ds.data_infos()["data"].labels == ["l%i" % i for i in range(8)]
    seqs = all_seqs(ds)
    np.testing.assert_array_equal(seqs[1]["data"], [1, 2, 3])
    np.testing.assert_array_equal(seqs[0]["classes"], [1, 0])


def test_several_target_keys_with_own_lengths(tmp_path):
    # 2 sequences: inputs 4 and 3 frames; 'classes' 2 and 1 labels; 'orth' 5 and 0; dense 'feat' float16.
    inputs = np.arange(7 * 2, dtype=np.float32).reshape(7, 2)
    classes = np.array([5, 6, 7], dtype=np.int32)
    orth = np.array([1, 2, 3, 4, 5], dtype=np.int32)
    feat = np.arange(7 * 3, dtype=np.float16).reshape(7, 3)
    lengths = [[4, 2, 4, 5], [3, 1, 3, 0]]  # columns: inputs, classes, feat, orth (sorted)
    path = write_hdf(str(tmp_path / "multi.hdf"), lengths, ["x", "y"], inputs=inputs,
                     targets={"orth": orth, "classes": classes, "feat": feat},
                     sizes={"classes": np.array([10, 1]), "orth": np.array([6, 1]), "feat": np.array([3, 2])})
    ds = open_ds(path)
    assert ds.get_data_keys() == ["data", "classes", "feat", "orth"]
    assert ds.num_outputs == {"data": [2, 2], "classes": [10, 1], "feat": [3, 2], "orth": [6, 1]}
    # float16 in the file is read as float32 (what the compiled step takes).
    assert ds.get_data_dtype("feat") == "float32" and not ds.is_data_sparse("feat")
    np.testing.assert_array_equal(ds._corpus_seq_lengths(), [[4, 2, 4, 5], [3, 1, 3, 0]])
    a, b = all_seqs(ds)
    np.testing.assert_array_equal(a["classes"], [5, 6])
    np.testing.assert_array_equal(b["classes"], [7])
    np.testing.assert_array_equal(a["orth"], [1, 2, 3, 4, 5])
    assert b["orth"].shape == (0,) and b["orth"].dtype == np.int32
    np.testing.assert_array_equal(b["feat"], feat[4:7].astype(np.float32))
    assert b["feat"].dtype == np.float32
    np.testing.assert_array_equal(b["data"], inputs[4:7])
    assert ds.get_seq_length(0) == {"data": 4, "classes": 2, "feat": 4, "orth": 5}


def test_fixed_length_tags_with_nul_padding(tmp_path):
    raw = ["short".encode(), "ünïcode".encode("utf8"), b"cut\x00garbage", b"x"]
    path = write_hdf(str(tmp_path / "tags.hdf"), [[1, 1]] * 4, raw, inputs=np.zeros((4, 2), np.float32),
                     tag_dtype="S16")
    with h5py.File(path, "r") as f:
        assert f["seqTags"].dtype == np.dtype("S16")
    ds = open_ds(path)
    assert [ds.get_tag(i) for i in range(4)] == ["short", "ünïcode", "cut", "x"]


def test_variable_length_unicode_tags(tmp_path):
    tags = ["corpus/ß/1", "日本語/2", "emoji-🎉"]
    path = write_hdf(str(tmp_path / "vtags.hdf"), [[1, 1]] * 3, tags, inputs=np.zeros((3, 1), np.float32))
    ds = open_ds(path)
    assert [ds.get_tag(i) for i in range(3)] == tags
    assert ds.get_all_tags() == tags


def test_no_targets_inputs_only(tmp_path):
    inputs = np.arange(10, dtype=np.float32).reshape(5, 2)
    path = write_hdf(str(tmp_path / "inputs_only.hdf"), [[2, 2], [3, 3]], ["a", "b"], inputs=inputs)
    ds = open_ds(path)
    # The dummy 'classes' column of seqLengths has no data behind it: not a data key.
    assert ds.get_data_keys() == ["data"]
    assert ds.num_outputs == {"data": [2, 2]}
    np.testing.assert_array_equal(ds._corpus_seq_lengths(), [[2], [3]])
    np.testing.assert_array_equal(all_seqs(ds)[1]["data"], inputs[2:])


def test_targets_only_file(tmp_path):
    classes = np.array([1, 2, 3], dtype=np.int32)
    path = write_hdf(str(tmp_path / "targets_only.hdf"), [[2, 2], [1, 1]], ["a", "b"],
                     targets={"classes": classes}, sizes={"classes": np.array([4, 1])})
    ds = open_ds(path)
    assert ds.get_data_keys() == ["classes"]
    np.testing.assert_array_equal(all_seqs(ds)[1]["classes"], [3])


def make_pair(tmp_path, dim2: int = 3):
    a = write_hdf(str(tmp_path / "part1.hdf"), [[2, 2], [1, 1]], ["p1-0", "p1-1"],
                  inputs=np.arange(9, dtype=np.float32).reshape(3, 3), targets={"classes": np.array([0, 1, 2], np.int32)},
                  sizes={"classes": np.array([5, 1])})
    b = write_hdf(str(tmp_path / "part2.hdf"), [[3, 3], [2, 2], [1, 1]], ["p2-0", "p2-1", "p2-2"],
                  inputs=np.arange(6 * dim2, dtype=np.float32).reshape(6, dim2) + 100,
                  targets={"classes": np.array([4, 4, 4, 3, 3, 1], np.int32)}, sizes={"classes": np.array([5, 1])})
    return a, b


@pytest.mark.parametrize("as_string", [False, True])
def test_several_files_concatenated(tmp_path, as_string):
    a, b = make_pair(tmp_path)
    ds = open_ds(",".join([a, b]) if as_string else [a, b])
    assert ds.num_seqs == 5
    assert [ds.get_tag(i) for i in range(5)] == ["p1-0", "p1-1", "p2-0", "p2-1", "p2-2"]
    seqs = all_seqs(ds)
    np.testing.assert_array_equal(seqs[1]["data"], [[6, 7, 8]])
    np.testing.assert_array_equal(seqs[2]["data"], np.arange(9, dtype=np.float32).reshape(3, 3) + 100)
    np.testing.assert_array_equal(seqs[4]["classes"], [1])
    # A run crossing the file boundary is still split correctly.
    np.testing.assert_array_equal(ds.get_seqs([1, 2])[1]["classes"], [4, 4, 4])


def test_sorted_ordering_and_partition_epoch(tmp_path):
    a, b = make_pair(tmp_path)
    ds = open_ds([a, b], seq_ordering="sorted")
    lens = [ds.get_seq_length(i)["data"] for i in range(ds.num_seqs)]
    assert lens == sorted(lens) and sorted(lens) == [1, 1, 2, 2, 3]
    ds = init_dataset({"class": "HDFDataset", "files": [a, b], "partition_epoch": 2})
    seen = []
    for epoch in (1, 2):
        ds.init_seq_order(epoch)
        assert 0 < ds.num_seqs < 5
        seen += [ds.get_tag(i) for i in range(ds.num_seqs)]
    assert sorted(seen) == ["p1-0", "p1-1", "p2-0", "p2-1", "p2-2"]


def test_dims_disagree_names_file(tmp_path):
    a, b = make_pair(tmp_path, dim2=4)
    with pytest.raises(DataError, match="part2.hdf"):
        open_ds([a, b])


@pytest.mark.parametrize("cache_size", [0, "0", "200", "1K", -1])
def test_cache_modes_identical(dense_file, cache_size):
    path, lens, feats, classes = dense_file
    ref = open_ds(path, cache_size=0)
    ds = open_ds(path, cache_size=cache_size, seq_ordering="random:3")
    ref.init_seq_order(1)
    for _ in range(3):  # repeated reads exercise cache hits and evictions
        for i in range(ds.num_seqs):
            got = ds.get_seqs([i, (i + 1) % ds.num_seqs])[0]
            want = ref.get_seqs([ds.corpus_index(i)])[0]
            for key in ("data", "classes"):
                np.testing.assert_array_equal(got[key], want[key])
                assert got[key].dtype == want[key].dtype
    if cache_size == "200":
        assert ds._lru_bytes <= 200
    # Returned arrays are the caller's: changing them does not change the dataset.
    seq = ds.get_seqs([0])[0]
    seq["data"][:] = 12345
    assert not np.any(ds.get_seqs([0])[0]["data"] == 12345)


def test_global_cache_size_reaches_dataset(dense_file):
    ds = init_dataset({"class": "HDFDataset", "files": [dense_file[0]]}, defaults={"cache_size": "10G"})
    assert ds.cache_size == 10 * 1024 ** 3
    ds = init_dataset({"class": "HDFDataset", "files": [dense_file[0]], "cache_size": "0"},
                      defaults={"cache_size": "10G"})
    assert ds.cache_size == 0


def test_contiguous_sequences_read_with_one_slice_per_key(dense_file):
    path = dense_file[0]
    ds = open_ds(path)
    calls = []

    class CountingReads:
        def __init__(self, dset):
            self.dset = dset

        def __getitem__(self, item):
            calls.append(item)
            return self.dset[item]

    f = ds._files[0]
    for col in f.columns:
        col.ds = CountingReads(col.ds)
    seqs = ds.get_seqs([0, 1, 2, 3])
    assert len(calls) == 2  # one read for /inputs, one for /targets/data/classes
    assert len(seqs) == 4 and [len(s["data"]) for s in seqs] == [3, 5, 1, 4]
    calls.clear()
    ds.get_seqs([3, 0, 1])  # two runs: {0, 1} and {3}
    assert len(calls) == 4


def test_uncompressed_file_opened_without_chunk_cache(dense_file):
    ds = open_ds(dense_file[0])
    assert ds._files[0].h5.id.get_access_plist().get_cache()[2] == 0


def test_tags_are_read_lazily(dense_file):
    ds = open_ds(dense_file[0])
    assert all(f._tags is None for f in ds._files)
    assert ds.get_tag(2) == "c"
    assert ds._files[0]._tags is not None


def test_read_from_background_thread(dense_file):
    path, lens, feats, classes = dense_file
    ds = open_ds(path)
    result = {}

    def worker():
        result["seqs"] = all_seqs(ds)

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    np.testing.assert_array_equal(result["seqs"][3]["data"], split(feats, lens)[3])


def test_close_releases_handles(dense_file):
    ds = open_ds(dense_file[0])
    handle = ds._files[0].h5
    ds.close()
    assert not handle.id.valid
    with pytest.raises(DataError):
        ds.get_seqs([0])


# ---- errors name the file


def test_missing_file(tmp_path):
    path = str(tmp_path / "missing.hdf")
    with pytest.raises(DataError, match="missing.hdf"):
        open_ds([path])


def test_not_an_hdf_file(tmp_path):
    path = tmp_path / "text.hdf"
    path.write_text("hello, I am not HDF\n" * 100)
    with pytest.raises(DataError, match="text.hdf.*not an HDF5 file"):
        open_ds([str(path)])


def test_truncated_file(tmp_path):
    # Make a bigger file so the cut falls well inside the data.
    path = write_hdf(str(tmp_path / "big.hdf"), [[1000, 1000]] * 20, ["t%i" % i for i in range(20)],
                     inputs=np.random.RandomState(1).randn(20000, 8).astype(np.float32),
                     targets={"classes": np.zeros(20000, np.int32)}, sizes={"classes": np.array([2, 1])})
    data = open(path, "rb").read()
    cut = str(tmp_path / "truncated.hdf")
    with open(cut, "wb") as f:
        f.write(data[:len(data) // 2])
    with pytest.raises(DataError, match="truncated.hdf"):
        ds = open_ds([cut])
        all_seqs(ds)


def test_missing_seq_lengths(tmp_path):
    path = str(tmp_path / "nolengths.hdf")
    with h5py.File(path, "w") as f:
        f.create_dataset("inputs", data=np.zeros((3, 2), np.float32))
        f.create_dataset("seqTags", data=np.array([b"a"]))
    with pytest.raises(DataError, match="nolengths.hdf.*seqLengths"):
        open_ds([path])


def test_lengths_beyond_data_is_error(tmp_path):
    path = write_hdf(str(tmp_path / "short.hdf"), [[2, 2], [5, 5]], ["a", "b"], inputs=np.zeros((4, 2), np.float32))
    with pytest.raises(DataError, match="short.hdf"):
        open_ds([path])


def test_no_files_is_error():
    with pytest.raises(DataError, match="files"):
        init_dataset({"class": "HDFDataset", "files": []})


def test_compressed_chunked_file(tmp_path):
    """Filtered (gzip + shuffle) chunked datasets read the same in every cache mode."""
    rng = np.random.RandomState(5)
    lens = rng.randint(1, 30, size=(50,))
    feats = rng.randn(int(lens.sum()), 3).astype(np.float32)
    classes = rng.randint(0, 7, size=int(lens.sum())).astype(np.int32)
    path = str(tmp_path / "gzip.hdf")
    with h5py.File(path, "w") as f:
        f["seqLengths"] = np.stack([lens, lens], axis=1).astype(np.int32)
        f["seqTags"] = np.array([b"g%i" % i for i in range(50)])
        f.create_dataset("inputs", data=feats, chunks=(64, 3), compression="gzip", shuffle=True)
        f.create_dataset("targets/data/classes", data=classes, chunks=(64,), compression="gzip")
        f.create_group("targets/labels")
        f.create_group("targets/size")
        f["targets/size"].attrs["classes"] = np.array([7, 1])
    for cache_size in (0, "1K", -1):
        ds = open_ds(path, cache_size=cache_size, seq_ordering="random:1")
        seqs = all_seqs(ds)
        for i, seq in enumerate(seqs):
            j = ds.corpus_index(i)
            np.testing.assert_array_equal(seq["data"], split(feats, lens)[j])
            np.testing.assert_array_equal(seq["classes"], split(classes, lens)[j])
        assert ds.num_outputs == {"data": [3, 2], "classes": [7, 1]}
        assert ds._files[0].h5.id.get_access_plist().get_cache()[2] > 0  # compressed: chunk cache kept
