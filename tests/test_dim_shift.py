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


@pytest.mark.parametrize("ops, desc, sizes", [
    (CUT3 + [("ceildiv", 2)], "\u2308((-1+time)+-1)/2\u2309", [2, 0, 0, 0]),  # a valid strided conv (RETURNN)
    ([("ceildiv", 2)], "\u2308time/2\u2309", [3, 1, 1, 0]),
    ([("mul", 2), ("mul", 3)], "time*6", [30, 6, 12, 0]),  # (x*a)*b is x*(a*b)
    ([("ceildiv", 2), ("ceildiv", 2)], "\u2308time/4\u2309", [2, 1, 1, 0]),
    ([("ceildiv", 2), ("mul", 2)], "(\u2308time/2\u2309)*2", [6, 2, 2, 0]),
    ([("add_left", 2), ("add_right", 2), ("mul", 2)], "((2+time)+2)*2", [18, 10, 12, 8]),
])
def test_strides_and_upsamplings_as_returnn(ops, desc, sizes):
    time = Dim(None, description="time")
    dim = shifted_dim(time, ops)
    assert dim.description == desc
    lens = np.array([5, 1, 2, 0], np.int32)
    np.testing.assert_array_equal(shifted_sizes(dim, {time: lens}).numpy(), sizes)


def test_a_stride_after_an_upsampling_by_it_is_the_axis_before():
    time = Dim(None, description="time")
    strided = shifted_dim(time, CUT3 + [("ceildiv", 2)])
    assert shifted_dim(strided, [("mul", 2), ("ceildiv", 2)]) is strided
    assert shifted_dim(time, [("mul", 2), ("ceildiv", 2)]) is time
    assert shifted_dim(strided, [("ceildiv", 2), ("mul", 2)]) is not strided  # ceildiv(x, 2) * 2 is no x
    conv = Dim(None, description="l0:conv:s0")  # a conv's own dim, declared the same as its dim math
    conv.declare_same_as(shifted_dim(time, [("ceildiv", 2)]))
    assert shifted_dim(conv, [("mul", 2), ("ceildiv", 2)]) == conv


def test_derived_root_stops_at_a_dim_declared_the_same_as_another():
    """RETURNN's get_same_derived_base(same_dim=True): a same_as link is followed but not taken as the root."""
    def derived_root(dim):
        return dim.get_same_derived_base(same_dim=True)
    time = Dim(None, description="time")
    up = shifted_dim(time, [("mul", 2)])
    assert derived_root(up) is time
    conv = Dim(None, description="l1:conv:s0")
    conv.declare_same_as(shifted_dim(up, [("ceildiv", 2)]))  # the conv cancels the upsampling: same as time
    assert conv == time and derived_root(conv) is conv
    padded = shifted_dim(conv, [("add_left", 2), ("add_right", 2)])
    assert derived_root(padded) is conv


@pytest.mark.parametrize("expr, desc", [  # what RETURNN 1.20261022 gives for a config's dim math (its descriptions)
    ("T - 1", "time+-1"), ("T.sub_left(1)", "-1+time"), ("T.sub_right(1)", "time+-1"), ("1 + T", "1+time"),
    ("T * 2", "time*2"), ("T // 2", "time//2"), ("T.ceildiv_right(2)", "\u2308time/2\u2309"), ("(T + 2) + (-2)", "<T>"),
    ("(T + 2) - 2", "<T>"), ("(T * 2).ceildiv_right(2)", "<T>"), ("(T * 2) // 2", "<T>"), ("(1 + T) + 1", "(1+time)+1"),
    ("T.sub_left(1).sub_right(1)", "(-1+time)+-1"), ("(T - 1) + 1", "<T>"),
    ("(T.sub_left(1).sub_right(1)).ceildiv_right(2)", "\u2308((-1+time)+-1)/2\u2309"),
    ("T.ceildiv_right(2).ceildiv_right(3)", "\u2308time/6\u2309"), ("F * 2", "f*2"), ("F + 1", "f+1"),
    ("1 + ((T - 1) + T)", "1+((time+-1)+time)"),  # returnn_common's rel_shift pad (here '1+(time+-1+time)' before)
])
def test_config_dim_math_as_returnn(expr, desc):
    """A config's dim math of a dynamic dim with an int is the layers' dim-math tree: RETURNN's simplifications and
    descriptions, and the same Dim as a layer's equal computation (here ``time - 1`` was ``time-1`` and
    ``sub_left(1)`` was ``1 - time``)."""
    T, F = Dim(None, description="time"), Dim(3, description="f")  # noqa: N806
    dim = eval(expr)
    assert (dim.description if dim is not T else "<T>") == desc
    if dim.dimension is None and dim is not T:
        assert shifted_dim(T, []) is T
        from returnn.tensor.dim_math import dyn_size_of
        lens = np.array([5, 1, 0], np.int32)
        want = {"time+-1": [4, 0, 0], "-1+time": [4, 0, 0], "(-1+time)+-1": [3, 0, 0], "1+time": [6, 2, 1],
                "time*2": [10, 2, 0], "time//2": [2, 0, 0]}.get(desc)
        if want is not None:
            np.testing.assert_array_equal(dyn_size_of(dim, lambda d: lens), want)


def test_config_dim_math_is_the_layers_dim():
    T = Dim(None, description="time")  # noqa: N806
    assert T.sub_left(1).sub_right(1) is shifted_dim(T, CUT3)  # a valid conv of 3's axis
    assert T * 2 is shifted_dim(T, [("mul", 2)])  # a resize by 2


DIM_DIM_MATH = [  # what RETURNN 1.20261022 gives for dim math over two dims: (expression, description, size)
    ("T + T", "2*time", None), ("T - T", "unnamed_spatial_dim_0", 0), ("(T + T) + T", "3*time", None),
    ("T + (T + T)", "3*time", None), ("2 * T + T", "3*time", None), ("T * 2 + T", "time*2+time", None),
    ("(1 + T) + T", "1+2*time", None), ("(T + 1) + T", "(time+1)+time", None), ("T - U", "time+(-1*u)", None),
    ("(T + U) - U", "<T>", None), ("(T - U) + U", "<T>", None), ("-(2 * T)", "-2*time", None), ("2 * T - T", "<T>", None),
    ("2 * T - 2 * T", "unnamed_spatial_dim_0", 0), ("T - F", "time+(-1*f)", None), ("F - F", "unnamed_spatial_dim_0", 0),
    ("F + F", "2*f", 6), ("(U + T) + T", "u+2*time", None), ("3 * (2 * T)", "6*time", None),
    ("F * 2 - F", "f*2+(-1*f)", 3), ("T - T + 1", "unnamed_spatial_dim_1", 1), ("((T + U) + T)", "(time+u)+time", None),
]


@pytest.mark.parametrize("expr, desc, size", DIM_DIM_MATH)
def test_dim_dim_math_as_returnn(expr, desc, size):
    """Dim math over two dims finds RETURNN's matching terms (here ``T + T`` was ``time+time``, ``T - T`` a dynamic
    ``time-time``, ``(T + U) - U`` a new axis), and the sizes are the arithmetic's."""
    T, U, F = Dim(None, description="time"), Dim(None, description="u"), Dim(3, description="f")  # noqa: N806
    dim = eval(expr)
    assert (dim.description if dim is not T else "<T>") == desc
    assert dim.dimension == size
    if dim.dimension is None and dim is not T:
        from returnn.tensor.dim_math import dyn_size_of
        lens = {T: np.array([5, 1, 0]), U: np.array([2, 3, 0])}
        t, u = lens[T], lens[U]
        want = eval(expr.replace("T", "t").replace("U", "u").replace("F", "3"))
        np.testing.assert_array_equal(dyn_size_of(dim, lambda d: lens[d]), want)


SUB_LEFT = [  # what RETURNN 1.20261022 gives for sub_left: (expression, description or the dim it is, size)
    ("(T + U).sub_left(T)", "<U>", None), ("(T + U).sub_left(U)", "(-1*u)+(time+u)", None),
    ("(3 + T).sub_left(3)", "<T>", None), ("(T + 3).sub_left(T)", "unnamed_dim_3", 3),
    ("(F + G).sub_left(F)", "<G>", 3), ("(F + G).sub_left(G)", "(-1*g)+(f+g)", 5), ("T.sub_left(2)", "-2+time", None),
    ("(T + U + F).sub_left(T)", "(-1*time)+((time+u)+f)", None), ("(T + T).sub_left(T)", "<T>", None),
    ("F.sub_left(G)", "(-1*g)+f", 2), ("(G + F).sub_left(G)", "<F>", 5),
]


@pytest.mark.parametrize("expr, desc, size", SUB_LEFT)
def test_sub_left_as_returnn(expr, desc, size):
    """``(a + b).sub_left(a)`` is ``b`` (here it was ``(-1*a)+(a+b)``, a new axis), an int ``b`` a constant dim."""
    T, U = Dim(None, description="time"), Dim(None, description="u")  # noqa: N806
    F, G = Dim(5, description="f"), Dim(3, description="g")  # noqa: N806
    dim = eval(expr)
    named = {id(T): "<T>", id(U): "<U>", id(F): "<F>", id(G): "<G>"}
    assert named.get(id(dim), dim.description) == desc
    assert dim.dimension == size


def test_dim_dim_math_is_one_dim():
    T = Dim(None, description="time")  # noqa: N806
    assert T + T is 2 * T and (T + T) + T is 3 * T
    assert (T - 1) + T is (T - 1) + T
    assert (T - T).is_constant_static_dim() and not T.is_constant_static_dim()
