"""The combine layer's output axes are the Dims RETURNN's template has (``Data.get_common_data`` of the sources,
each brought in by ``copy_compatible_to``), as the real RETURNN 1.20261022 gave them for these sources at
behavior_version 0 (benchmarks/returnn_fuzz_common_layout.py finds such cases): of two static axes of one size
that it takes for one, the later source's Dim; a source's size-1 feature axis beside an axis of the other
sources' feature size broadcasts. Where RETURNN's template keeps an engine-made size-1 axis that a larger one of a
source broadcasts into, RETURNN then fails on the value's shape: refused alike."""
import pytest

from returnn.tensor import Data, Dim, batch_dim
from returnn.tf.layers.basic import CombineLayer
from returnn.tf.layers.control import CompareLayer
from returnn.tf.layers.eval_layer import EvalLayer
from returnn.util.basic import BehaviorVersion


def _pool():
    sp, ft = Dim.Types.Spatial, Dim.Types.Feature
    return {"time": Dim(None, kind=sp, description="time"), "u": Dim(None, kind=sp, description="u"),
            "f": Dim(3, kind=ft, description="f"), "g": Dim(3, kind=ft, description="g"),
            "s": Dim(3, kind=sp, description="s"), "a1": Dim(1, kind=sp, description="a1", auto_generated=True),
            "a3": Dim(3, kind=sp, description="a3", auto_generated=True),
            "a3f": Dim(3, kind=ft, description="a3f", auto_generated=True), "B": batch_dim}


@pytest.mark.parametrize("sources, want", [
    # RETURNN's (dims, feature axis, time axis); here before: a3 (10), s (24), f (50, 368), f and a3f (64)
    ([["f"], ["time", "a3"], ["B"]], (["B", "time", "f"], 2, 1)),
    ([["B"], ["B", "s", "a3f"], ["B", "s", "time", "a3"]], (["B", "a3f", "time", "a3"], 3, 2)),
    ([["a3f", "B"], ["f", "g", "B"]], (["a3f", "g", "B"], 1, None)),
    ([["a3f", "B"], ["a3", "B", "f"]], (["a3f", "B", "f"], 2, None)),
    # here before: refused as two axes of one source on one (the size-1 feature axis took f a second time)
    ([["B", "f", "s"], ["s", "a1", "B"], ["f", "B", "a1"]], (["B", "f", "s"], 2, None)),
])
def test_combine_axes_as_returnn(sources, want):
    BehaviorVersion.set(0)
    try:
        p = _pool()
        out = CombineLayer("c", {"kind": "add"}, [Data("s%i" % i, dims=[p[n] for n in ds])
                                                  for i, ds in enumerate(sources)]).output
        got = (["B" if d.is_batch_dim() else d.description for d in out.dims], out.feature_dim_axis,
               out.time_dim_axis)
        assert got == want
        names = {id(d): n for n, d in p.items()}
        assert all(id(d) in names for d in out.dims)  # the sources' own Dim objects
    finally:
        BehaviorVersion.set(None)


@pytest.mark.parametrize("cls, opts", [(CompareLayer, {"kind": "equal"}), (EvalLayer, {"eval": "source(0)"})])
def test_compare_and_eval_axes_as_returnn(cls, opts):
    """compare and eval (RETURNN: a CombineLayer) take RETURNN's template too (here before: a3)."""
    BehaviorVersion.set(0)
    try:
        p = _pool()
        out = cls("c", opts, [Data("s%i" % i, dims=[p[n] for n in ds])
                              for i, ds in enumerate([["f"], ["time", "a3"], ["B"]])]).output
        assert [("B" if d.is_batch_dim() else d.description) for d in out.dims] == ["B", "time", "f"]
    finally:
        BehaviorVersion.set(None)


@pytest.mark.parametrize("sources", [[["a1", "B"], ["a3f", "B"]], [["B", "a1", "f"], ["B", "time", "f"]]])
def test_size1_axis_a_larger_one_broadcasts_into_refused(sources):
    """RETURNN (before behavior_version 11) keeps the first largest source's engine-made size-1 axis in its template
    where another source's axis of size 3 (or a time axis: a reduce with keep_dims minus its input, chain seed 388
    #66) broadcasts into it, then fails: 'Mismatching shape'. Here it was built (with the larger axis)."""
    from returnn.errors import NetworkError
    BehaviorVersion.set(0)
    try:
        p = _pool()
        with pytest.raises(NetworkError, match="keeps the size-1 axis 'a1'"):
            CombineLayer("c", {"kind": "add"}, [Data("s%i" % i, dims=[p[n] for n in ds])
                                                for i, ds in enumerate(sources)])
    finally:
        BehaviorVersion.set(None)


# RETURNN 1.20261022's (dims, feature axis, time axis) and where each source's axes go (its copy_compatible_to), for
# sources this engine laid out otherwise: before, an extra size-1 axis (common layout seed 6 #151), or refused
# (seed 2 #180, #207, seed 3 #234)
ADOPTED = [
    (0, [["a3f", "B", "a3", "a1"], ["a1", "B", "u"]], (["a3f", "B", "a3", "u"], 2, 3), [[0, 1, 2, 3], [0, 1, 3]]),
    (10, [["B", "a3f", "s", "a1"], ["B", "a1", "u"]], (["B", "a3f", "s", "u"], 2, 3), [[0, 1, 2, 3], [0, 1, 3]]),
    (16, [["B", "f", "a3"], ["a3", "a3f", "B"]], (["B", "f", "a3f"], 2, None), [[0, 1, 2], [2, 1, 0]]),
    (0, [["a3", "u", "g"], ["a3f", "a1", "s"]], (["a3", "u", "g"], 2, 1), [[0, 1, 2], [0, 1, 2]]),
]


@pytest.mark.parametrize("bv, sources, want, maps", ADOPTED)
def test_combine_takes_returnns_template_where_it_maps_the_sources_otherwise(bv, sources, want, maps):
    import numpy as np
    import tensorflow as tf
    from data_utils import run_layer
    from returnn.tensor.dim import building_network
    from returnn.tf.layers import LayerOutput
    BehaviorVersion.set(bv)
    try:
        p = _pool()
        datas = [Data("s%i" % i, dims=[p[n] for n in ds]) for i, ds in enumerate(sources)]
        with building_network():
            layer = CombineLayer("c", {"kind": "add"}, datas)
        out = layer.output
        got = (["B" if d.is_batch_dim() else d.description for d in out.dims], out.feature_dim_axis,
               out.time_dim_axis)
        assert got == want
        # the sum broadcasts each source's axes where RETURNN's copy_compatible_to puts them
        sizes = {"B": 2, "time": 4, "u": 5}
        rng = np.random.RandomState(0)
        xs = [rng.randn(*[sizes.get(n, p[n].dimension) for n in ds]).astype(np.float32) for ds in sources]
        values = [LayerOutput(tf.constant(x), d, {p[n]: tf.constant([sizes[n]] * 2) for n in ds if n in ("time", "u")})
                  for x, d, ds in zip(xs, datas, sources)]
        y = run_layer(layer, values).tensor.numpy()
        want_value = 0
        for x, m in zip(xs, maps):
            shape = [1] * len(want[0])
            for a, t in enumerate(m):
                shape[t] = x.shape[a]
            want_value = want_value + np.transpose(x, np.argsort(m)).reshape(shape)
        np.testing.assert_allclose(y, want_value, rtol=1e-6)
    finally:
        BehaviorVersion.set(None)


@pytest.mark.parametrize("bv, sources", [
    (10, [["a1", "B", "s", "a3"], ["a1", "u", "B"], ["u", "B"]]), (0, [["a1", "g", "u"], ["g", "a3", "f", "B"]]),
    (0, [["s", "a1", "u"], ["g"], ["g", "time", "s"]]), (10, [["time", "B", "g", "u"], ["a1", "a3", "B", "time"]]),
])
def test_combine_refused_where_returnn_cannot_map_a_source(bv, sources):
    """RETURNN's copy_compatible_to fails to map a source into the template (common layout seeds 1, 4, 3, 6): here
    it was built."""
    from returnn.errors import NetworkError
    from returnn.tensor.dim import building_network
    BehaviorVersion.set(bv)
    try:
        p = _pool()
        with building_network(), pytest.raises(NetworkError, match="RETURNN (cannot bring source . .* into its common|then fails to map)"):
            CombineLayer("c", {"kind": "add"}, [Data("s%i" % i, dims=[p[n] for n in ds])
                                                for i, ds in enumerate(sources)])
    finally:
        BehaviorVersion.set(None)


@pytest.mark.parametrize("bv, sources, want, maps", ADOPTED[:2])
def test_eval_takes_returnns_template_too(bv, sources, want, maps):
    """eval (RETURNN: a CombineLayer, the same template): here before an extra size-1 axis or refused."""
    from returnn.tensor.dim import building_network
    BehaviorVersion.set(bv)
    try:
        p = _pool()
        with building_network():
            out = EvalLayer("c", {"eval": "source(0) + source(1)"},
                            [Data("s%i" % i, dims=[p[n] for n in ds]) for i, ds in enumerate(sources)]).output
        assert (["B" if d.is_batch_dim() else d.description for d in out.dims], out.feature_dim_axis,
                out.time_dim_axis) == want
    finally:
        BehaviorVersion.set(None)


def test_combine_refused_where_returnn_maps_a_feature_axis_onto_one_of_another_size():
    """RETURNN's copy_compatible_to takes any two feature dims for one (ignore_feature_dim): a variable of shape
    [3, 3] beside (B, T, 5) data maps its feature axis onto the data's, and the sum fails ('Dimensions must be
    equal'; RETURNN 1.20261022, checked); with a size-1 feature axis it broadcasts."""
    from returnn.errors import NetworkError
    from returnn.tensor.dim import building_network
    BehaviorVersion.set(12)
    try:
        t, f5 = Dim(None, description="time"), Dim(5, kind=Dim.Types.Feature, description="f5")
        data = Data("data", dims=[batch_dim, t, f5])
        var = [Dim(3, description="v0", auto_generated=True),
               Dim(3, kind=Dim.Types.Feature, description="v1", auto_generated=True)]
        with building_network(), pytest.raises(NetworkError, match="'v1' .*'f5'|'v0'.*'v1'.*size 3"):
            CombineLayer("c", {"kind": "add", "allow_broadcast_all_sources": True}, [data, Data("v", dims=var)])
    finally:
        BehaviorVersion.set(None)
