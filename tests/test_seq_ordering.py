"""seq_ordering (returnn/datasets/ordering.py) gives RETURNN's orders.

``data/returnn_seq_orders.json`` holds the orders RETURNN itself computed (the PyPI package,
``Dataset(seq_ordering=..., fixed_random_seed=..., random_seed_offset=...).get_seq_order_for_epoch``)
for 13 sequences of lengths ``LENGTHS``: every ordering kind, with and without bin counts and
``nth``, for epochs 1-3, a seed offset and a fixed seed. Keys: ``ordering|epoch|fixed_seed|offset``.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from returnn.datasets.base import Dataset
from returnn.datasets.ordering import compute_seq_order, seed_for_epoch
from returnn.errors import DataError

LENGTHS = np.array([5, 3, 9, 3, 7, 1, 8, 3, 6, 2, 9, 4, 5])
with open(os.path.join(os.path.dirname(__file__), "data", "returnn_seq_orders.json")) as _f:
    RETURNN_ORDERS = json.load(_f)


@pytest.mark.parametrize("key", sorted(RETURNN_ORDERS))
def test_order_equals_returnns(key):
    ordering, epoch, fixed, offset = key.split("|")
    fixed_seed = None if fixed == "None" else int(fixed)
    order = compute_seq_order(ordering, len(LENGTHS), lambda: LENGTHS,
                              lambda nth: seed_for_epoch(int(epoch), fixed_seed, int(offset), nth))
    assert order.tolist() == RETURNN_ORDERS[key]


class _Lengths(Dataset):
    """Sequences of given lengths (only what ordering needs)."""

    def __init__(self, lengths, **kwargs):
        self.lengths = list(lengths)
        super().__init__(**kwargs)

    def _corpus_num_seqs(self) -> int:
        return len(self.lengths)

    def _corpus_seq_lengths(self):
        return np.array(self.lengths)


def _order(ds, epoch):
    ds.init_seq_order(epoch)
    return [ds.corpus_index(i) for i in range(ds.num_seqs)]


def test_dataset_orders_like_returnn_with_offset_and_fixed_seed():
    """The dataset options reach the ordering as RETURNN's do (fixed seed: the offset is ignored)."""
    ds = _Lengths(LENGTHS, seq_ordering="laplace:.5:2", random_seed_offset=5)
    assert _order(ds, 2) == RETURNN_ORDERS["laplace:.5:2|2|None|5"]
    ds = _Lengths(LENGTHS, seq_ordering="sort_bin_shuffle_x2:.3:2", fixed_random_seed=7, random_seed_offset=5)
    assert _order(ds, 2) == RETURNN_ORDERS["sort_bin_shuffle_x2:.3:2|2|7|5"]


def test_nth_keeps_the_order_for_nth_epochs():
    ds = _Lengths(LENGTHS, seq_ordering="random:2")
    assert _order(ds, 1) == _order(ds, 2) != _order(ds, 3) == _order(ds, 4)


def test_seq_ordering_function_of_the_epoch():
    """A config's function gets the (sub-)epoch and returns the ordering string of that epoch."""
    seen = []

    def ordering(epoch, **_kwargs):
        seen.append(epoch)
        return "sorted" if epoch == 1 else "sorted_reverse"

    ds = _Lengths(LENGTHS, seq_ordering=ordering, partition_epoch=2)
    first, second = _order(ds, 1), _order(ds, 4)
    assert seen == [1, 4]
    assert [LENGTHS[i] for i in first] == sorted(LENGTHS)[:7]
    assert [LENGTHS[i] for i in second] == sorted(LENGTHS, reverse=True)[7:]
    with pytest.raises(DataError, match="must return a string"):
        _order(_Lengths(LENGTHS, seq_ordering=lambda epoch: 3), 1)


@pytest.mark.parametrize("ordering", ["laplace:0", "laplace:.x", "random:0", "random:a", "sorted:2",
                                      "default_every_n", "sort_bin_shuffle:3:2:1", "shuffled"])
def test_unreadable_ordering_is_an_error_naming_the_dataset(ordering):
    with pytest.raises(DataError, match="lens-data.*seq_ordering"):
        _Lengths(LENGTHS, seq_ordering=ordering, name="lens-data")


class _Tagged(_Lengths):
    def __init__(self, lengths, tags, **kwargs):
        self.tags = list(tags)
        super().__init__(lengths, **kwargs)

    def _corpus_tag(self, corpus_index: int) -> str:
        return self.tags[corpus_index]


def test_repeat_epoch_reads_the_order_n_times():
    once = _order(_Lengths(LENGTHS, seq_ordering="laplace:3"), 2)
    assert _order(_Lengths(LENGTHS, seq_ordering="laplace:3", repeat_epoch=3), 2) == once * 3
    with pytest.raises(DataError, match="repeat_epoch and partition_epoch"):
        _Lengths(LENGTHS, repeat_epoch=2, partition_epoch=2)
    with pytest.raises(DataError, match="repeat_epoch"):
        _Lengths(LENGTHS, repeat_epoch=-1)


def test_unique_seq_tags_keeps_the_first_sequence_of_each_tag():
    """As RETURNN: applied to the epoch's whole order, before partitioning."""
    tags = ["a", "b", "a", "c", "b", "d"]
    lengths = [1, 2, 3, 4, 5, 6]
    assert _order(_Tagged(lengths, tags, seq_ordering="sorted_reverse"), 1) == [5, 4, 3, 2, 1, 0]
    assert _order(_Tagged(lengths, tags, seq_ordering="sorted_reverse", unique_seq_tags=True), 1) == [5, 4, 3, 2]
    parts = _Tagged(lengths, tags, unique_seq_tags=True, partition_epoch=2)
    assert _order(parts, 1) + _order(parts, 2) == [0, 1, 3, 5]
    with pytest.raises(DataError, match="unique_seq_tags"):
        _Tagged(lengths, tags, unique_seq_tags="yes")


def test_dev_and_eval_datasets_are_ordered_by_length_unless_their_dict_says_otherwise():
    """RETURNN's eval defaults (least padding when scoring); train, explicit orders and non-dict specs are left
    alone. A ConcatDataset without an order is refused: RETURNN gives it 'sorted' too and fails
    (NotImplementedError: seq_ordering sorted; returnn_fuzz --kind batches: 37 LAX in seeds 13-20)."""
    from returnn.datasets import eval_dataset_spec
    hdf = {"class": "HDFDataset", "files": ["dev.hdf"]}
    assert eval_dataset_spec(hdf) == dict(hdf, seq_ordering="sorted") and "seq_ordering" not in hdf
    assert eval_dataset_spec(dict(hdf, seq_ordering="default"))["seq_ordering"] == "default"
    concat = {"class": "ConcatDataset", "datasets": [hdf, hdf]}
    with pytest.raises(DataError, match="dataset dev \\(ConcatDataset\\).*'seq_ordering': 'default'"):
        eval_dataset_spec(concat, "dev")
    assert eval_dataset_spec(dict(concat, seq_ordering="default")) == dict(concat, seq_ordering="default")
    assert eval_dataset_spec("hdf:dev.hdf") == "hdf:dev.hdf"


def test_engine_scores_dev_in_length_order(tmp_path):
    from returnn.config import Config
    from returnn.distributed.context import DistributedContext
    from returnn.tf.engine import Engine
    config = Config({
        "task": "train", "train": {"class": "Task12AXDataset", "num_seqs": 6},
        "dev": {"class": "Task12AXDataset", "num_seqs": 8, "fixed_random_seed": 1},
        "eval_datasets": {"devtrain": {"class": "Task12AXDataset", "num_seqs": 5, "seq_ordering": "reverse"}},
        "num_inputs": 9, "num_outputs": 2, "model": str(tmp_path / "model"),
        "network": {"output": {"class": "softmax", "loss": "ce", "from": "data"}}})
    engine = Engine(config, DistributedContext.from_config(config))
    assert engine.datasets["train"].seq_ordering == "default"
    assert engine.datasets["devtrain"].seq_ordering == "reverse"
    dev = engine.datasets["dev"]
    dev.init_seq_order(1)
    lengths = dev.seq_lengths_in_order()[:, 0].tolist()
    assert dev.seq_ordering == "sorted" and lengths == sorted(lengths) and len(set(lengths)) > 1


def _tagged_dataset(path=None, **kwargs):
    from returnn.datasets.generating import StaticDataset
    seqs = [{"data": np.zeros((int(n), 1), np.float32), "classes": np.zeros(int(n), np.int32)} for n in LENGTHS]
    return StaticDataset(seqs, output_dim=2, tags=["t%i" % i for i in range(len(LENGTHS))],
                         seq_order_seq_lens_file=path, **kwargs)


def _corpus_order(ds, epoch=1):
    ds.init_seq_order(epoch)
    return [ds.corpus_index(i) for i in range(ds.num_seqs)]


@pytest.mark.parametrize("gz", [False, True])
def test_seq_order_seq_lens_file_gives_the_lengths_to_sort_by(tmp_path, gz):
    import gzip
    fake = {"t%i" % i: float(-i) for i in range(len(LENGTHS))}  # sorted by these: reverse corpus order
    text = repr(fake).encode("utf8")
    path = tmp_path / ("lens.txt.gz" if gz else "lens.txt")
    path.write_bytes(gzip.compress(text) if gz else text)
    assert _corpus_order(_tagged_dataset(str(path), seq_ordering="sorted")) == list(range(len(LENGTHS)))[::-1]
    assert _corpus_order(_tagged_dataset(None, seq_ordering="sorted")) == \
        np.argsort(LENGTHS, kind="stable").tolist()
    laplace = _tagged_dataset(str(path), seq_ordering="laplace:3")
    from returnn.datasets.ordering import compute_seq_order
    expected = compute_seq_order("laplace:3", len(LENGTHS), lambda: np.array([-i for i in range(len(LENGTHS))]),
                                 lambda nth: seed_for_epoch(1, None, 0, nth))
    assert _corpus_order(laplace) == expected.tolist()


@pytest.mark.parametrize("content,needle", [
    ("{'t0': 3}", "no length for sequence 't1'"),
    ("[1, 2]", "must hold a dict"),
    ("{%s}" % ", ".join("'t%i': 'long'" % i for i in range(13)), "must be a number"),
    ("__import__('os').system('touch /tmp/pwned_lens')", "not a Python literal"),
])
def test_seq_order_seq_lens_file_bad_content_is_one_data_error(tmp_path, content, needle):
    path = tmp_path / "lens.txt"
    path.write_text(content)
    with pytest.raises(DataError, match=needle):
        _tagged_dataset(str(path), seq_ordering="sorted").init_seq_order(1)
    assert not os.path.exists("/tmp/pwned_lens")
