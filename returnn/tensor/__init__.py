"""The data model: named axes (:class:`Dim`) and tensor descriptions (:class:`Data`).

Pure Python (no TensorFlow): ``dim.py`` (dim tags), ``data.py`` (templates), ``axes.py`` (axis
descriptions such as ``"T"``, ``"s:0"``, ``"stag:NAME"``). The run-time value of a layer is
``returnn.tf.layers.output.LayerOutput``. ``Tensor`` is RETURNN's newer name for ``Data``.
"""
from returnn.tensor.axes import AxisError, resolve_axes, resolve_axis  # noqa: F401
from returnn.tensor.data import Data, NotSpecified  # noqa: F401
from returnn.tensor.dim import (Dim, DimensionTag, DimTypes, FeatureDim, SpatialDim, batch_dim,  # noqa: F401
                                single_step_dim)

Tensor = Data
