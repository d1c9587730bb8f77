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
