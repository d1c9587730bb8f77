"""compare, switch and stack lay their sources out as RETURNN's templates do (``Data.get_common_data``; switch of
[true, false, condition] in that order; stack's new axis where RETURNN adds a spatial one, its special axes by
RETURNN's ``copy_add_dim_by_tag``), as the real RETURNN 1.20261022 gave them for these sources
(benchmarks/returnn_fuzz_common_layout.py --layer compare|switch|stack, seed 9: before, DIFFER 9, 28 and 68)."""
import pytest

from returnn.errors import NetworkError
from returnn.tensor import Data
from returnn.tensor.dim import building_network
from returnn.tf.layers.control import CompareLayer, SwitchLayer
from returnn.tf.layers.split_stack import StackLayer
from returnn.util.basic import BehaviorVersion
from test_combine_layout_returnn import _pool


def _build(kind, bv, sources):
    BehaviorVersion.set(bv)
    try:
        p = _pool()
        datas = [Data("s%i" % i, dims=[p[n] for n in ds], dtype="bool" if kind == "switch" and i == len(sources) - 1
                      else "float32") for i, ds in enumerate(sources)]
        with building_network():
            if kind == "compare":
                return CompareLayer("c", {"kind": "less"}, datas).output
            if kind == "stack":
                return StackLayer("c", {}, datas).output
            opts = {"condition": "cond", "true_from": "t", "false_from": "f" if len(datas) > 2 else 0.0}
            return SwitchLayer("c", opts, [datas[-1], datas[0]] + datas[1:-1]).output
    finally:
        BehaviorVersion.set(None)


@pytest.mark.parametrize("kind, bv, sources, want", [
    ("compare", 0, [["a3", "B"], ["time", "B", "u"]], (["time", "B", "u", "a3"], 3, 0)),  # before: feature u
    ("compare", 0, [["u", "B"], ["a3", "s", "a1"]], (["B", "a3", "s", "u"], 2, 3)),
    ("switch", 10, [["B", "a3", "time"], ["B", "f"]], (["B", "a3", "time"], 1, 2)),  # before: the condition's f
    ("switch", 0, [["s", "a3f", "B", "u"], ["B", "g"]], (["s", "a3f", "B", "u"], 1, 3)),
    ("switch", 12, [["B"], ["g", "B"], ["B", "s"]], (["g", "B"], 0, None)),
    ("stack", 0, [["B"], ["B", "a3f", "time"]], (["B", "a3f", "time", "c:stack"], 3, 2)),  # before: feature a3f
    ("stack", 16, [["B"], ["B"], ["s", "B"]], (["c:stack", "s", "B"], 1, None)),  # before: [B, s, stack]
    ("stack", 0, [["f", "u", "a3f", "B"], ["a3f", "time", "B"], ["u", "time", "B", "g"]],
     (["f", "u", "time", "c:stack", "a3f", "B"], 4, 1)),
])
def test_layout_as_returnn(kind, bv, sources, want):
    out = _build(kind, bv, sources)
    assert (["B" if d.is_batch_dim() else d.description for d in out.dims], out.feature_dim_axis,
            out.time_dim_axis) == want


@pytest.mark.parametrize("bv, sources, match", [
    (0, [["B", "a1"], ["B", "f", "g"]], "tf.stack then fails"),  # a size-1 axis is not repeated
    (16, [["f"], ["a3", "s", "g"]], "All inputs .* require broadcasting"),  # before: built
])
def test_stack_refused_where_returnn_fails(bv, sources, match):
    with pytest.raises(NetworkError, match=match):
        _build("stack", bv, sources)


def test_copy_add_dim_by_tag_as_returnn():
    """Config code's Data.copy_add_dim_by_tag is RETURNN's (1.20261022: 420 cases of 8 layouts, 5 new dims, every
    axis, with and without unbroadcast agree): without unbroadcast a size-1 stand-in dim; the special axes by
    RETURNN's rules (here before: the dim itself, and the feature axis kept on its dim)."""
    from returnn.tensor import Dim, batch_dim
    T, F = Dim(None, kind=Dim.Types.Spatial, description="time"), Dim(3, kind=Dim.Types.Feature, description="f")
    new = Dim(2, kind=Dim.Types.Spatial, description="new")
    x = Data("x", dims=[batch_dim, T, F])
    y = x.copy_add_dim_by_tag(new, axis=1)
    assert [d.description for d in y.dims[1:]] == ["new_dummy_dim1", "time", "f"] and y.dims[1].dimension == 1
    z = x.copy_add_dim_by_tag(new, unbroadcast=True, axis=3)
    assert z.dims[3] is new and (z.feature_dim_axis, z.time_dim_axis) == (3, 1)  # the new static axis is last
    assert x.copy_add_dim_by_tag(new, True, 3).dims == z.dims  # RETURNN's positional form
    e = Data("x", dims=[batch_dim, T, F], feature_dim_axis=2).copy_add_dim_by_tag(new, unbroadcast=True, axis=3)
    assert e.feature_dim_axis == 2  # an explicit feature axis follows its dim


def test_get_common_data_allow_broadcast_all_sources_as_returnn():
    from returnn.tensor import Dim, batch_dim
    T, U = Dim(None, description="t"), Dim(None, description="u")
    a, b = Data("a", dims=[batch_dim, T]), Data("b", dims=[batch_dim, U])
    assert Data.get_common_data([a, b]).dims == (batch_dim, T, U)  # behavior_version 0: allowed
    assert Data.get_common_data([a, b], allow_broadcast_all_sources=True).dims == (batch_dim, T, U)
    with pytest.raises(ValueError, match="All inputs .* require broadcasting"):
        Data.get_common_data([a, b], allow_broadcast_all_sources=False)
    BehaviorVersion.set(4)
    try:
        with pytest.raises(ValueError, match="All inputs"):
            Data.get_common_data([a, b])
    finally:
        BehaviorVersion.set(None)


@pytest.mark.parametrize("dims, kw, axis, want", [
    (["B", "f"], {}, 1, (["B", "unknown_time", "f"], 2, 1)),
    (["B", "f"], {"feature_dim_axis": None}, 2, (["B", "f", "unknown_time"], 1, 2)),  # before: no feature axis
    (["f"], {}, -1, (["f", "unknown_time"], 0, 1)),
])
def test_copy_template_adding_time_dim_as_returnn(dims, kw, axis, want):
    """RETURNN 1.20261022's results (its explicit feature axis None is not kept; an axis past the end fails)."""
    p = _pool()
    out = Data("x", dims=[p[n] for n in dims], **kw).copy_template_adding_time_dim(time_dim_axis=axis)
    assert (["B" if d.is_batch_dim() else d.description for d in out.dims], out.feature_dim_axis,
            out.time_dim_axis) == want
    with pytest.raises(ValueError, match="no position"):
        Data("x", dims=[p["f"]]).copy_template_adding_time_dim(time_dim_axis=2)  # before: built, time axis wrong


def test_copy_template_new_dim_tags_keep_special_axes_as_returnn():
    """RETURNN keeps only the explicitly set special axes (as positions); the others by the default rules on the
    new dims (here before: the resolved axes kept as positions, e.g. time on the batch axis: refused)."""
    p = _pool()
    x = Data("x", dims=[p["B"], p["time"], p["f"]])
    y = x.copy_template_new_dim_tags([p["time"], p["B"], p["f"]], keep_special_axes=True)
    assert (y.feature_dim_axis, y.time_dim_axis, y.batch_dim_axis) == (2, 0, 1)
    z = x.copy_template_new_dim_tags([p["B"], p["f"], p["time"]], keep_special_axes=True)
    assert (z.feature_dim_axis, z.time_dim_axis) == (1, 2)


def _run(cls, bv, sources, opts):
    """This engine's layer ``cls`` with ``opts`` (a callable of the dims pool) on zero values of ``sources``."""
    import tensorflow as tf
    from returnn.tf.layers.output import LayerOutput
    BehaviorVersion.set(bv)
    try:
        p = _pool()
        datas = [Data("s%i" % i, dims=[p[n] for n in ds]) for i, ds in enumerate(sources)]
        with building_network():
            layer = cls("c", opts(p), datas)
            values = [LayerOutput(tf.zeros([2 if d.is_batch_dim() else d.dimension or 4 for d in x.dims]), x,
                                  {d: tf.fill([2], 4) for d in x.dims if d.is_dynamic()}) for x in datas]
            return layer.forward(values, None)
    finally:
        BehaviorVersion.set(None)


def _eval(bv, sources, code, out=None):
    """The eval layer of ``code`` (``out``: the names of its ``out_type``'s dims)."""
    from returnn.tf.layers.eval_layer import EvalLayer
    return _run(EvalLayer, bv, sources, lambda p: {"eval": code, "out_type": {"dims": [p[n] for n in out]}}
                if out else {"eval": code})


@pytest.mark.parametrize("bv, sources, match", [
    (0, [["time", "f", "B"], ["a1", "time", "g"]], "cannot bring source 1"),  # RETURNN: cannot match the axes
    (0, [["B"], ["a1", "B"], ["f", "B"]], "the output .* has size 1 at axis 0 .*Mismatching shape"),
    (0, [["u", "B"], ["f", "B", "g"], ["u", "f", "B", "time"]], "cannot bring source 1"),
])
def test_eval_auto_convert_refused_where_returnn_fails(bv, sources, match):
    """RETURNN's source(i) brings the source into its template (get_common_data, copy_compatible_to) and fails
    where that template takes no such source (benchmarks/returnn_fuzz_common_layout.py --layer eval, seed 1:
    21 LAX before, built here in this engine's own layout); with auto_convert=False the source is read as it is."""
    code = " + ".join("source(%i)" % i for i in range(len(sources)))
    with pytest.raises(NetworkError, match=match):
        _eval(bv, sources, code)
    with pytest.raises(NetworkError, match="eval returned (a tensor of rank|shape)"):  # (read, then its result checked)
        _eval(bv, sources, "[%s][0]" % ", ".join("source(%i, auto_convert=False)" % i for i in range(len(sources))))


@pytest.mark.parametrize("bv, sources, out, want", [
    (0, [["a3", "B", "a3f", "a1"], ["time", "f", "B", "a3"]], ["a3f", "B", "a1", "time", "a3"], (4, 3)),
    (0, [["s", "B"], ["f", "a3", "B"], ["B"]], ["a3", "B", "f"], (2, None)),
    (10, [["f", "time", "B"], ["a3", "s", "B"]], ["time", "B", "f", "s"], (3, 0)),  # RETURNN's common: 3 axes
])
def test_eval_out_type_dims_sources_as_returnn(bv, sources, out, want):
    """With out_type dims, RETURNN's source(i) brings each source into that template by copy_compatible_to (its
    loose matching: a static axis onto another of that size), and decides whether all sources need broadcasting
    on its get_common_data (benchmarks/returnn_fuzz_common_layout.py --layer eval_out, seed 1: 63 GAP before,
    'eval returned a tensor of rank 4' or 'every source needs broadcasting'; RETURNN 1.20261022 built them)."""
    res = _eval(bv, sources, " + ".join("source(%i)" % i for i in range(len(sources))), out)
    assert [d.description if not d.is_batch_dim() else "B" for d in res.data.dims] == out
    assert (res.data.feature_dim_axis, res.data.time_dim_axis) == want
    assert res.tensor.shape.rank == len(out)


def _concat(bv, sources):
    """The copy layer of several sources (their feature concatenation)."""
    from returnn.tf.layers.basic import CopyLayer
    return _run(CopyLayer, bv, sources, lambda p: {})


@pytest.mark.parametrize("bv, sources, match", [
    (0, [["time", "s", "B"], ["B", "g"]], "cannot be brought into its template"),  # s is s0's feature axis
    (10, [["a1", "B", "g"], ["s"]], r"tf.concat fails: the sources have sizes \[1, 3\]"),
    (12, [["time", "a3", "B"], ["B", "time", "s", "a1"]], "Mismatching shape"),
    (12, [["a3f"], ["B", "a1"], ["B", "s"]], "All inputs .* require broadcasting"),
    # s1's size-1 feature axis goes on the time axis (before bv 11): RETURNN's tf.concat fails when run (size 1
    # against T frames); built here before
    (0, [["B", "time", "a3", "f"], ["B", "a1"]], "tf.concat fails when run"),
    (0, [["B", "time", "a3f", "f"], ["f", "B", "a1"]], "tf.concat fails when run"),
])
def test_concat_refused_where_returnn_fails(bv, sources, match):
    """RETURNN's concat_sources (every layer's input of several sources) fails on these at build time (RETURNN
    1.20261022: benchmarks/returnn_fuzz_common_layout.py --layer concat, seeds 1-2: 33 and 25 LAX before)."""
    with pytest.raises(NetworkError, match="concatenation of its sources fails.*" + match):
        _concat(bv, sources)


def test_concat_as_returnn_builds():
    out = _concat(12, [["time", "f", "B"], ["B", "time", "g"]])
    assert [d.description for d in out.data.dims if not d.is_batch_dim()][:1] == ["time"]
    assert out.data.dim == 6 and out.tensor.shape[-1] == 6


@pytest.mark.parametrize("bv, sources", [
    (12, [["B", "f", "a3f"], ["a1", "B", "s", "a3f"]]),
    (10, [["B", "s", "a3f"], ["time", "a3f", "B", "g"]]),
])
def test_concat_builds_where_returnn_does(bv, sources):
    """RETURNN builds these concatenations (returnn_fuzz_common_layout.py --layer concat, seeds 1-2: 9 GAP before,
    refused here for an extra feature-kind axis)."""
    out = _concat(bv, sources)
    assert out.tensor.shape.rank == out.data.batch_ndim


def test_concat_takes_the_axis_returnn_puts_on_the_feature_axis():
    """RETURNN concatenates the axis its copy_compatible_to puts on the template's feature axis: here source 1's
    'a3f' (feature-kind), not its feature axis 's' (returnn_fuzz_common_layout.py --layer concat seed 1 #136)."""
    import numpy as np
    import tensorflow as tf
    from returnn.tf.layers.basic import CopyLayer
    from returnn.tf.layers.output import LayerOutput
    BehaviorVersion.set(16)
    try:
        p = _pool()
        s0 = Data("s0", dims=[p[n] for n in ["s", "u", "B", "g"]])
        s1 = Data("s1", dims=[p[n] for n in ["u", "a3f", "B", "s"]])
        v1 = np.arange(4 * 3 * 2 * 3, dtype="float32").reshape([4, 3, 2, 3])
        with building_network():
            layer = CopyLayer("c", {}, [s0, s1])
            out = layer.forward([LayerOutput(tf.zeros([3, 4, 2, 3]), s0, {p["u"]: tf.fill([2], 4)}),
                                 LayerOutput(tf.constant(v1), s1, {p["u"]: tf.fill([2], 4)})], None)
    finally:
        BehaviorVersion.set(None)
    names = ["B" if d.is_batch_dim() else d.description for d in out.data.dims]
    assert names[:3] == ["s", "u", "B"] and out.data.feature_dim_axis == 3
    # source 1's part: its (u, a3f, B, s) values as (s, u, B, a3f)
    np.testing.assert_array_equal(out.tensor.numpy()[..., 3:], v1.transpose([3, 0, 2, 1]))
    np.testing.assert_array_equal(out.tensor.numpy()[..., :3], 0)


@pytest.mark.parametrize("bv, sources, axes, broadcast, want", [
    (12, [["B", "s"], ["B", "f"]], ["s", "f"], False, (["B", "s+f"], 1, None)),  # before: a fresh dim 'c:concat'
    (10, [["B", "s"], ["u", "f", "a3f", "B"]], ["s", "a3f"], True, (["u", "f", "s+a3f", "B"], 2, 0)),
    (12, [["B", "f"], ["B", "a3", "a3f"]], ["f", "a3"], True, (["B", "f+a3", "a3f"], 2, None)),
    (12, [["a3", "B"], ["s", "B", "u", "a3"]], ["a3", "a3"], True, (["s", "B", "u", "2*a3"], 3, 2)),
    (0, [["B", "f"], ["B", "time", "f", "g"]], ["f", "time"], True, (["B", "f+time", "f", "g"], 3, 1)),
])
def test_concat_layer_template_as_returnn(bv, sources, axes, broadcast, want):
    """The concat layer's output is RETURNN's template: get_common_data of the sources with their concat axes
    replaced by the summed dim (RETURNN's dim math, static too), its order and special axes (RETURNN 1.20261022:
    returnn_fuzz_common_layout.py --layer concat_layer seed 1, 118 DIFFER before; e.g. a linear after the last
    one projects 'g' in RETURNN, here it took 'f+time')."""
    from returnn.tf.layers.concat import ConcatLayer
    out = _run(ConcatLayer, bv, sources, lambda p: {"from": [("s%i" % i, p[a]) for i, a in enumerate(axes)],
                                                    "allow_broadcast": broadcast})
    assert (["B" if d.is_batch_dim() else d.description for d in out.data.dims], out.data.feature_dim_axis,
            out.data.time_dim_axis) == want
    assert out.tensor.shape.rank == len(want[0])


def test_concat_of_sources_with_only_a_feature_axis():
    """Two values of only a feature axis (e.g. two variables without batch axis, ``copy`` of both): RETURNN
    concatenates them; here the broadcast shape of no common axes was a float tensor and ConcatV2 failed
    (returnn_fuzz_common_layout.py --layer concat seed 5 #229)."""
    out = _concat(0, [["a3f"], ["f"]])
    assert out.tensor.shape.as_list() == [6] and out.data.dim == 6
