"""RETURNN's dim-math tree of shifted axes (returnn/tf/layers/dim_shift.py): the descriptions and sizes RETURNN
1.20261022 printed and computed for these chains (its layer templates in make_goldens runs)."""
import numpy as np
import pytest

from returnn.tensor import Dim
from returnn.tf.layers.dim_shift import description, shifted_dim, shifted_sizes

CUT3 = [("sub_left", 1), ("sub_right", 1)]  # a valid conv/window of size 3
CUT4 = [("sub_left", 1), ("sub_right", 2)]


@pytest.mark.parametrize("ops, desc, sizes", [
    (CUT3, "(-1+time)+-1", [3, 0, 0, 0]),
    (CUT3 + [("add_left", 2)], "(1+time)+-1", [5, 1, 2, 0]),  # a fold's int window_left 2
    (CUT4 + [("add_left", 1), ("add_right", 1)], "time+-1", [4, 0, 1, 0]),
    (CUT4 + [("add_left", 3)], "(2+time)+-2", [5, 1, 2, 0]),
    ([("add_right", 2), ("sub_left", 3), ("sub_right", 1)], "-3+(time+1)", [3, 0, 0, 0]),  # postfix 2, slice 3:-1
    ([("add_right", 2), ("sub_left", 1), ("sub_right", 1), ("add_left", 0), ("add_right", 2)], "-1+(time+3)",
     [7, 3, 4, 2]),
    (CUT3 + [("add_right", 1), ("add_left", 1), ("add_right", 1)], "time+1", [6, 2, 3, 1]),
    ([("sub_left", 2)], "-2+time", [3, 0, 0, 0]),
    ([("sub_left", 2), ("add_right", 1)], "(-2+time)+1", [4, 1, 1, 1]),
])
def test_dim_math_tree_as_returnn(ops, desc, sizes):
    time = Dim(None, description="time")
    dim = shifted_dim(time, ops)
    assert description(dim._shift_of[1], time) == dim.description == desc
    lens = np.array([5, 1, 2, 0], np.int32)
    np.testing.assert_array_equal(shifted_sizes(dim, {time: lens}).numpy(), sizes)


def test_shifts_that_cancel_are_the_axis_and_one_tree_is_one_dim():
    time = Dim(None, description="time")
    cut = shifted_dim(time, CUT3)
    assert shifted_dim(cut, [("add_left", 1), ("add_right", 1)]) is time
    assert shifted_dim(time, [("sub_left", 1), ("sub_right", 1)]) is cut  # a crop of one frame each side: one axis
    assert shifted_dim(time, [("sub_left", 2)]) is not cut
    assert shifted_dim(time, [("add_right", 2), ("sub_right", 2)]) is time  # (time+2)-2 is time
