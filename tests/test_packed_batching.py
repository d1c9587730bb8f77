"""RETURNN's packed-frames batching for networks whose layers all work frame by frame."""
import numpy as np
import pytest

from helpers import outputs
from returnn.datasets.generating import StaticDataset
from returnn.tensor import Data
from returnn.datasets.batching import BatchOptions
from returnn.tf.network import TFNetwork

EXTERN = {"data": Data("data", shape=(None, 3)), "classes": Data("classes", dim=4, sparse=True)}
FF = {"h": {"class": "hidden", "n_out": 5, "activation": "relu"},
      "d": {"class": "dropout", "dropout": 0.1, "from": "h"},
      "output": {"class": "softmax", "loss": "ce", "from": ["d", "h"]}}


@pytest.mark.parametrize("extra,recurrent", [
    ({}, False),
    ({"n": {"class": "layer_norm", "from": "h"}}, False),
    ({"r": {"class": "rec", "unit": "lstm", "n_out": 2, "from": "h"}}, True),
    ({"c": {"class": "conv", "filter_size": (3,), "n_out": 2, "padding": "same", "from": "h"}}, True),
    ({"p": {"class": "positional_encoding", "add_to_input": True, "from": "h"}}, True),
])
def test_network_is_recurrent_when_a_layer_mixes_frames(extra, recurrent):
    assert TFNetwork(outputs(dict(FF, **extra)), EXTERN).recurrent is recurrent


def test_batch_options_pack_only_when_asked_and_allowed():
    lengths = [4, 9, 2, 7]
    ds = StaticDataset([{"data": np.ones((n, 3), np.float32), "classes": np.zeros(n, np.int32)} for n in lengths],
                       output_dim=4)
    opts = BatchOptions(batch_size=10, max_seqs=-1, chunking=None, max_seq_length=0, prefetch=0)
    padded = opts.epoch_slices(ds, 1, "train", packed=True)
    assert not any(b.packed for b in padded)
    opts.pack_frames = True
    packed = opts.epoch_slices(ds, 1, "train", packed=True)
    assert all(b.packed for b in packed)
    assert [int(np.sum(b.ends - b.starts)) for b in packed] == [10, 10, 2]
    assert not any(b.packed for b in opts.epoch_slices(ds, 1, "forward", packed=False))  # forwarding


def test_packed_max_seqs_counts_the_span_of_sequence_indices():
    """RETURNN's Batch.get_num_seqs is last index - first index + 1: a sequence without frames between two
    others counts (returnn_fuzz --kind batches, fuzzbatch_1_12). Lengths 1, 0, 1, 5 with max_seqs 2: RETURNN
    ends the first batch after the third sequence (span 3 > 2); this engine packed 0, 2 and 3 together."""
    from returnn.datasets.batching import generate_packed_batches
    ds = StaticDataset([{"data": np.ones((n, 3), np.float32)} for n in [1, 0, 1, 5]], output_dim=4)
    ds.init_seq_order(1)
    batches = generate_packed_batches(ds, 40, max_seqs=2)
    assert [b.entries() for b in batches] == [[(0, 0, 1), (2, 0, 1)], [(3, 0, 5)]]
