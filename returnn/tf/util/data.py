"""``returnn.tf.util.data`` as configs import it: RETURNN's data model names, from :mod:`returnn.tensor`.

``DimensionTag`` is the old name of ``Dim`` (``DimensionTag(kind=DimensionTag.Types.Spatial,
description="time")`` works as before).
"""
from returnn.tensor import Data, Dim, DimTypes, FeatureDim, SpatialDim, Tensor, batch_dim  # noqa: F401

DimensionTag = Dim
