"""RETURNN's ``size_target`` (and ``target``) on any layer: the output dims a layer leaves undefined
(an eval ``out_type`` given by shape) take the dims of the size_target data when the network
evaluates (all tasks but forward), else of the target data in a training network, then the
sources' (RETURNN's ``LayerBase._post_init_output``); the values' padding follows those sizes."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from helpers import outputs
from returnn.errors import NetworkError
from returnn.tensor import Data
from returnn.tf.layers import RunContext
from returnn.tf.network import TFNetwork

# the labels of "classes", passed through an eval that also reads the encoder (every source must be used)
PICK = ("source(0, auto_convert=False) + 0 * tf.cast(tf.reduce_sum(source(1, auto_convert=False)), 'int32')")
OUT_TYPE = {"shape": (None,), "sparse": True, "dim": 4, "dtype": "int32"}


def _extern():
    return {"data": Data("data", shape=(None, 3)), "classes": Data("classes", shape=(None,), sparse=True, dim=4)}


def _net(extra: dict, from_=("data:classes", "enc"), **flags) -> TFNetwork:
    layer = dict({"class": "eval", "from": list(from_), "eval": PICK if from_[0] == "data:classes" else
                  PICK.replace("source(0", "SRC1").replace("source(1", "source(0").replace("SRC1", "source(1"),
                  "out_type": OUT_TYPE}, **extra)
    return TFNetwork(outputs({"enc": {"class": "linear", "n_out": 2, "from": "data"}, "t": layer}), _extern(),
                     **flags)


def _time(net: TFNetwork):
    out = net.layers["t"].output
    return out.dims[out.time_dim_axis]


@pytest.mark.parametrize("from_", [("data:classes", "enc"), ("enc", "data:classes")])
def test_size_target_gives_the_undefined_time_axis_in_every_task_but_forward(from_):
    extern = _extern()
    classes_time, data_time = extern["classes"].dims[1], extern["data"].dims[1]
    for flags in ({}, {"train_flag": False}, {"train_flag": False, "search": True}):
        net = _net({"size_target": "classes"}, from_, **flags)
        assert _time(net) == net.extern_data["classes"].dims[1]
    # the forward network (RETURNN's eval_flag False) ignores size_target: the first source's axis
    net = _net({"size_target": "classes"}, from_, eval_flag=False, train_flag=False)
    want = "classes" if from_[0] == "data:classes" else "data"
    assert _time(net) == net.extern_data[want].dims[1]
    assert classes_time != data_time


def test_target_gives_it_in_training_networks_only():
    net = _net({"target": "classes"}, ("enc", "data:classes"))
    assert _time(net) == net.extern_data["classes"].dims[1]
    net = _net({"target": "classes"}, ("enc", "data:classes"), train_flag=False)
    assert _time(net) == net.extern_data["data"].dims[1]


def test_values_are_padded_by_the_size_target_lengths():
    net = _net({"size_target": "classes"}, ("enc", "data:classes"))
    labels = np.array([[1, 2, 3], [3, 1, 0]], dtype=np.int32)
    feed = {"data": tf.random.normal([2, 5, 3]), "data:seq_len": tf.constant([5, 4]),
            "classes": tf.constant(labels), "classes:seq_len": tf.constant([3, 2])}
    y = net.forward(feed, RunContext(False))["t"]
    np.testing.assert_array_equal(y.seq_len.numpy(), [3, 2])
    np.testing.assert_array_equal(y.tensor.numpy(), labels)
    # a length-0 sequence
    feed.update({"classes": tf.zeros([2, 0], tf.int32), "classes:seq_len": tf.constant([0, 0])})
    y = net.forward(feed, RunContext(False))["t"]
    assert y.tensor.shape == (2, 0) and list(y.seq_len.numpy()) == [0, 0]


def test_a_size_target_that_is_no_data_key_is_one_line():
    with pytest.raises(NetworkError, match=r"layer 't': 'size_target' 'clases' is not a data key"):
        _net({"size_target": "clases"})


def test_layers_that_define_their_dims_keep_them():
    """A linear layer's output dims are its input's; size_target changes nothing there (as in RETURNN,
    where only undefined dims are filled)."""
    extern = _extern()
    with_opt = TFNetwork(outputs({"o": {"class": "linear", "n_out": 4, "from": "data", "size_target": "classes"}}),
                         extern)
    assert with_opt.layers["o"].output.dims[1] == extern["data"].dims[1]
