"""The synthetic tasks of RETURNN's demos: targets follow the task rules (hand-checked examples and
a rule check over generated data), shapes and dims, epoch-dependent lengths."""
from __future__ import annotations

import numpy as np
import pytest

from returnn.datasets import init_dataset
from returnn.datasets.generating import TaskXmlModelingDataset as ImportedLikeReturnn
from returnn.datasets.tasks import TaskEpisodicCopyDataset, TaskXmlModelingDataset
from returnn.errors import DataError


def test_xml_targets_predict_closing_tags():
    text = " <ab><c></c></ab>"
    # after " " and ">" an open "<" is expected; inside a closing tag the name and ">" are known.
    assert TaskXmlModelingDataset.targets(text) == "<   <  < c>< ab><"
    assert ImportedLikeReturnn is TaskXmlModelingDataset


def test_episodic_copy_targets_recall_after_delimiter():
    # the delimiter itself still outputs blank; then the memory, then "." when it is empty.
    assert TaskEpisodicCopyDataset.targets("12   ....") == "      12."


@pytest.mark.parametrize("cls", ["TaskXmlModelingDataset", "TaskEpisodicCopyDataset"])
def test_one_hot_tasks_data_and_rule(cls):
    ds = init_dataset({"class": cls, "num_seqs": 30})
    ds.init_seq_order(1)
    dim = len(type(ds).CLASSES)
    assert ds.num_outputs == {"data": [dim, 2], "classes": [dim, 1]}
    for seq in ds.get_seqs(list(range(30))):
        assert seq["data"].shape[1] == dim and np.all(seq["data"].sum(axis=1) == 1)
        text = "".join(type(ds).CLASSES[i] for i in seq["data"].argmax(axis=1))
        want = [type(ds).CLASSES.index(c) for c in type(ds).targets(text)]
        np.testing.assert_array_equal(seq["classes"], want)


def test_number_base_convert():
    ds = init_dataset({"class": "TaskNumberBaseConvertDataset", "num_seqs": 40, "input_base": 8, "output_base": 3})
    ds.init_seq_order(1)
    assert ds.num_outputs == {"data": [8, 1], "classes": [3, 1]}
    for seq in ds.get_seqs(list(range(40))):
        assert 1 <= len(seq["data"]) <= 8
        value = int("".join(map(str, seq["data"])), 8)
        assert int("".join(map(str, seq["classes"])), 3) == value
        assert len(seq["classes"]) == 1 or seq["classes"][0] != 0


def test_copy_task_lengths_grow_with_epoch():
    ds = init_dataset({"class": "CopyTaskDataset", "nsymbols": 5, "num_seqs": 50, "minlen": 1,
                       "maxlen_epoch_factor": 3, "fixed_random_seed": 1})
    for epoch in (1, 4):
        ds.init_seq_order(epoch)
        seqs = ds.get_seqs(list(range(50)))
        lens = [len(s["data"]) for s in seqs]
        assert min(lens) >= 1 and max(lens) <= 3 * epoch and max(lens) > 3 * (epoch - 1)
        assert all(np.array_equal(s["data"], s["classes"]) and s["data"].max() < 5 for s in seqs)
    with pytest.raises(DataError, match="need 0 < minlen <= maxlen"):
        init_dataset({"class": "CopyTaskDataset", "nsymbols": 5, "minlen": 3, "maxlen": 2})
