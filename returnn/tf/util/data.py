"""``returnn.tf.util.data`` as configs import it: RETURNN's data model names, from :mod:`returnn.tensor`.

``DimensionTag`` is the old name of ``Dim`` (``DimensionTag(kind=DimensionTag.Types.Spatial,
description="time")`` works as before).
"""
from returnn.tensor import (Data, Dim, DimensionTag, DimTypes, FeatureDim, SpatialDim, Tensor,  # noqa: F401
                            batch_dim, single_step_dim)
