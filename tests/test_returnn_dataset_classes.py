"""RETURNN's dataset classes by name: each exists here or is refused in one line saying why (never
"unknown dataset class"), and the ones added for configs behave as RETURNN's: the dummy datasets
with per-key lengths (data from real RETURNN, ``data/returnn_dummy_datasets.json``), VariableDataset,
MultiProcDataset (the inner dataset itself), MapDatasetWrapper, NumpyDumpDataset."""
from __future__ import annotations

import gzip
import json
import os

import numpy as np
import pytest

from returnn.datasets import init_dataset
from returnn.datasets.map import FromListDataset, MapDatasetBase
from returnn.errors import DataError

# Every Dataset subclass in the modules RETURNN's get_dataset_class searches (returnn/datasets/*.py)
RETURNN_CLASSES = """OggZipDataset CachedDataset CachedDataset2 SingleStreamPipeDataset DistributeFilesDataset
    GeneratingDataset Task12AXDataset TaskEpisodicCopyDataset TaskXmlModelingDataset TaskVariableAssignmentDataset
    TaskNumberBaseConvertDataset DummyDataset DummyDatasetMultipleSequenceLength DummyDatasetMultipleDataKeys
    DummyGenericDataset StaticDataset CopyTaskDataset TimitDataset NltkTimitDataset BlissDataset LibriSpeechCorpus
    Enwik8Corpus HDFDataset NextGenHDFDataset SiameseHDFDataset HuggingFaceDataset LmDataset TranslationDataset
    TranslationFactorsDataset ConfusionNetworkDataset MapDatasetWrapper MetaDataset ClusteringDataset ConcatDataset
    CombinedDataset ConcatSeqsDataset ChunkShuffleDataset VariableDataset MultiEpochDataset AnythingDataset
    MultiProcDataset NumpyDumpDataset PostprocessingDataset RawWavDataset SprintDatasetBase ExternSprintDataset
    SprintDataset SprintCacheDataset StereoDataset StereoHdfDataset DatasetWithTimeContext TextDictDataset
    Dataset""".split()

with open(os.path.join(os.path.dirname(__file__), "data", "returnn_dummy_datasets.json")) as _f:
    DUMMY = json.load(_f)


@pytest.mark.parametrize("name", RETURNN_CLASSES)
def test_every_returnn_dataset_class_is_known(name):
    try:
        init_dataset({"class": name}, name="train")
    except DataError as exc:
        assert "unknown dataset class" not in str(exc), str(exc)
        assert "\n" not in str(exc)
    except Exception as exc:  # pragma: no cover
        pytest.fail("%s: %s: %s" % (name, type(exc).__name__, exc))


def rows(ds, keys):
    ds.init_seq_order(1)
    return [{k: ds.get_data(i, k).tolist() for k in keys} for i in range(ds.num_seqs)]


def test_dummy_datasets_as_returnn():
    ds = init_dataset({"class": "DummyDatasetMultipleSequenceLength", "input_dim": 3, "output_dim": 5,
                       "num_seqs": 3, "seq_len": {"data": 4, "classes": 6}})
    np.testing.assert_allclose(np.array([r["data"] for r in rows(ds, ["data"])]),
                               np.array([r["data"] for r in DUMMY["msl"]]), rtol=1e-6)
    assert [r["classes"] for r in rows(ds, ["classes"])] == [r["classes"] for r in DUMMY["msl"]]
    ds = init_dataset({"class": "DummyDatasetMultipleDataKeys", "num_seqs": 2, "input_max_value": 4,
                       "output_dim": {"data": [2, 2], "classes": [7, 1], "aux": [3, 2]},
                       "seq_len": {"data": 3, "classes": 2, "aux": 2}, "data_keys": ["data", "classes", "aux"]})
    got = rows(ds, ["data", "classes", "aux"])
    for mine, theirs in zip(got, DUMMY["mdk"]):
        assert mine["classes"] == theirs["classes"]
        np.testing.assert_allclose(mine["data"], theirs["data"], rtol=1e-6)
        np.testing.assert_allclose(mine["aux"], theirs["aux"], rtol=1e-6)


def static(n):
    return {"class": "StaticDataset", "data": [{"data": np.full((i + 1, 2), n, np.float32),
                                                "classes": np.zeros(i + 1, np.int32)} for i in range(3)],
            "output_dim": 2}


def test_variable_dataset_per_epoch():
    calls = []

    def get_dataset(epoch, **_kwargs):
        calls.append(epoch)
        return static(epoch // 2)

    ds = init_dataset({"class": "VariableDataset", "get_dataset": get_dataset})
    ds.init_seq_order(2)
    first = ds.inner
    assert ds.get_data(0, "data")[0, 0] == 1 and ds.num_seqs == 3
    ds.init_seq_order(3)
    assert ds.inner is first  # the same dict: the same dataset
    ds.init_seq_order(4)
    assert ds.get_data(0, "data")[0, 0] == 2 and ds.inner is not first


def test_multi_proc_dataset_is_the_inner_dataset():
    ds = init_dataset({"class": "MultiProcDataset", "dataset": static(7), "num_workers": 4, "buffer_size": 10,
                       "partition_epoch": 3}, name="train")
    assert type(ds).__name__ == "StaticDataset" and ds.partition_epoch == 3
    ds.init_seq_order(1)
    assert ds.num_seqs == 1


class Squares(MapDatasetBase):
    def __init__(self):
        super().__init__(data_types={"data": {"dim": 1}, "classes": {"dim": 10, "sparse": True}})

    def __len__(self):
        return 4

    def __getitem__(self, i):
        return {"data": np.full((i + 1, 1), i * i), "classes": np.arange(i + 1) % 10}

    def get_seq_len(self, i):
        return i + 1


def test_map_dataset_wrapper():
    ds = init_dataset({"class": "MapDatasetWrapper", "map_dataset": Squares, "seq_ordering": "sorted_reverse"})
    ds.init_seq_order(1)
    assert [ds.get_seq_length(i)["data"] for i in range(4)] == [4, 3, 2, 1]
    assert ds.get_data(0, "data").dtype == np.float32 and ds.get_data(0, "data")[0, 0] == 9 and ds.get_tag(0) == "seq-3"
    assert ds.is_data_sparse("classes") and ds.get_data_dim("classes") == 10
    listed = FromListDataset([{"data": np.ones((2, 1))}], data_types={"data": {"dim": 1}})
    ds = init_dataset({"class": "MapDatasetWrapper", "map_dataset": listed})
    ds.init_seq_order(1)
    assert ds.num_seqs == 1


def test_numpy_dump_dataset(tmp_path):
    for i, n in enumerate([3, 1]):
        with gzip.open(str(tmp_path / ("d%i.data.txt.gz" % i)), "wt") as f:
            np.savetxt(f, np.arange(n * 2).reshape(n, 2))
        with gzip.open(str(tmp_path / ("d%i.targets.txt.gz" % i)), "wt") as f:
            np.savetxt(f, np.arange(n))
    ds = init_dataset({"class": "NumpyDumpDataset", "prefix": str(tmp_path / "d"), "num_inputs": 2, "num_outputs": 3,
                       "seq_ordering": "sorted"})
    ds.init_seq_order(1)
    assert ds.num_seqs == 2 and ds.get_data(0, "data").shape == (3, 2) and ds.get_data(1, "classes").tolist() == [0]
    with pytest.raises(DataError, match="missing"):
        init_dataset({"class": "NumpyDumpDataset", "prefix": str(tmp_path / "d"), "num_inputs": 2, "num_outputs": 3,
                      "end_seq": 5})


def test_timit_phone_tables_as_returnn():
    """The TIMIT demo imports TimitDataset for its label map (data from real RETURNN); building the
    dataset is refused in one line."""
    from returnn.datasets.generating import TimitDataset
    with open(os.path.join(os.path.dirname(__file__), "data", "returnn_timit_phones.json")) as f:
        ref = json.load(f)
    assert {str(k): v for k, v in TimitDataset.get_label_map().items()} == ref["map"]
    assert {str(k): v for k, v in TimitDataset.get_label_map(61, 48).items()} == ref["map48"]
    assert TimitDataset.get_labels(39) == ref["labels39"]
    with pytest.raises(DataError, match="TimitDataset is not available here: it decodes audio"):
        init_dataset({"class": "TimitDataset", "timit_dir": "/x"}, name="train")
