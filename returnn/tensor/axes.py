"""RETURNN's axis descriptions, resolved against a :class:`~returnn.tensor.data.Data`.

Axes are counted with the batch axis. Accepted (strings case-insensitive):

=====================================  ==================================================
``"B"``, ``"batch"``                   the batch axis
``"T"``, ``"time"`` / ``"T?"``         the time axis / the time axis if there is one
``"F"``, ``"feature"``                 the feature axis (none on sparse data)
``"spatial"`` / ``"s:N"``              all spatial axes / the N-th (negative from the end)
``"spatial_except_time"``              spatial axes without the time axis
``"dyn"`` / ``"dyn:N"``                dynamic axes / the N-th
``"static"`` / ``"static:N"``          static axes (batch excluded) / the N-th
``"dim:N"``                            the unique axis of static size N
``"except_time"``, ``"except_batch"``  all axes but batch (and time); ``"except_batch:N"``
``"*"``                                all axes
``"stag:NAME"``                        the unique spatial axis whose dim description contains NAME
``"stag-single:I:NAME"``               the I-th of several such axes; ``"tag:NAME"`` any kind
``"BT"``, ``"TF"``, ...                letters of b, t, f combined
a :class:`Dim`                         the axis with an equal dim
an int                                 that axis (negative from the end)
a list of the above                    their union, in order
=====================================  ==================================================
"""
from __future__ import annotations

import re
from typing import Any, List

from returnn.tensor.dim import Dim


class AxisError(ValueError):
    """An axis description that does not fit the data (layers turn it into a NetworkError)."""


def resolve_axis(data, axis: Any) -> int:
    """Exactly one axis for ``axis``, else :class:`AxisError`."""
    axes = resolve_axes(data, axis)
    if len(axes) != 1:
        what = "not found" if not axes else "not unique (matches %i axes)" % len(axes)
        raise AxisError("axis %r %s in %s" % (_desc(axis), what, data.short_repr()))
    return axes[0]


def resolve_axes(data, axes: Any) -> List[int]:
    """All axes for ``axes`` (possibly none), in order, without repeats."""
    if axes is None or (isinstance(axes, str) and axes == ""):
        return []
    if isinstance(axes, Dim):  # RETURNN: of several equal axes, those of the highest match_priority
        found = [i for i, d in enumerate(data.dims) if d == axes]
        top = max((data.dims[i].match_priority for i in found), default=0)
        return [i for i in found if data.dims[i].match_priority == top]
    if isinstance(axes, bool):
        raise AxisError("invalid axis %r" % axes)
    if isinstance(axes, int):
        return [_int_axis(data, axes)]
    if isinstance(axes, str):
        return _string_axes(data, axes)
    if isinstance(axes, (list, tuple)):
        out: List[int] = []
        for item in axes:
            for a in resolve_axes(data, item):
                if a not in out:
                    out.append(a)
        return out
    raise AxisError("invalid axis %r (expected a name like 'T', a Dim, an int or a list)" % (axes,))


def _desc(axis: Any) -> Any:
    return axis.short_repr() if isinstance(axis, Dim) else axis


def _int_axis(data, axis: int) -> int:
    n = data.batch_ndim
    if not -n <= axis < n:
        raise AxisError("axis %i out of range for %s" % (axis, data.short_repr()))
    return axis % n


def _pick(data, name: str, axes: List[int], index: int) -> List[int]:
    if not -len(axes) <= index < len(axes):
        raise AxisError("axis %r: only %i such axes in %s" % (name, len(axes), data.short_repr()))
    return [axes[index]]


_LAYER_SCOPES = re.compile(r"[^\s:/]+/")


def _tag_axes(data, name: str, spatial_only: bool) -> List[int]:
    """Axes whose dim description contains ``name`` (RETURNN's get_axes_by_tag_name; a conv's dim
    also by its dim math, the description of its same base, as RETURNN). A description
    also counts without the layer path (``sliced-time:output/segments0`` as RETURNN's
    ``sliced-time:segments0``: RETURNN names dims by a layer's name inside its rec unit or subnetwork)."""
    spatial = data.get_spatial_batch_axes()
    name = name.lower()

    def names(d) -> List[str]:
        descs = [d.description.lower(), d.get_same_base().description.lower()]
        return descs + [_LAYER_SCOPES.sub("", x) for x in descs]
    return [i for i, d in enumerate(data.dims)
            if any(name in x for x in names(d)) and (not spatial_only or i in spatial or d.is_spatial_dim())]


def _string_axes(data, text: str) -> List[int]:
    key = text.lower()
    special = {
        "b": data.batch_dim_axis, "batch": data.batch_dim_axis,
        "t": data.time_dim_axis, "time": data.time_dim_axis,
        "f": data.feature_dim_axis, "feature": data.feature_dim_axis, "non_spatial": data.feature_dim_axis,
    }
    if key in special:
        if special[key] is None and key in ("f", "feature", "non_spatial"):
            return []  # RETURNN: the feature axes, none on sparse data (an option naming one axis refuses that)
        if special[key] is None:
            raise AxisError("axis %r: %s has no %s axis" % (text, data.short_repr(), key))
        return [special[key]]
    if key == "t?":
        return [] if data.time_dim_axis is None else [data.time_dim_axis]
    not_batch = [i for i in range(data.batch_ndim) if i != data.batch_dim_axis]
    groups = {
        "spatial": data.get_spatial_batch_axes(), "s": data.get_spatial_batch_axes(),
        "dyn": data.get_dynamic_axes(), "d": data.get_dynamic_axes(), "dynamic": data.get_dynamic_axes(),
        "static": [i for i in data.get_static_axes() if i != data.batch_dim_axis],
        "except_batch": not_batch,
        "except_time": [i for i in not_batch if i != data.time_dim_axis],
        "spatial_except_time": [i for i in data.get_spatial_batch_axes() if i != data.time_dim_axis],
        "*": list(range(data.batch_ndim)),
    }
    if key in groups and key not in ("s", "d"):
        return groups[key]
    match = re.match(r"^(s|spatial|d|dyn|dynamic|static|except_batch):(-?\d+)$", key)
    if match:
        return _pick(data, text, groups[match.group(1)], int(match.group(2)))
    match = re.match(r"^dim:(\d+)$", key)
    if match:
        size = int(match.group(1))
        found = [i for i, d in enumerate(data.dims) if d.dimension == size and not d.is_batch_dim()]
        if len(found) != 1:
            raise AxisError("axis %r: %s axes of size %i in %s" % (text, "no" if not found else "several", size,
                                                                   data.short_repr()))
        return found
    for prefix, spatial_only in (("stag:", True), ("tag:", False)):
        if key.startswith(prefix):
            found = _tag_axes(data, text[len(prefix):], spatial_only)
            if len(found) != 1:
                raise AxisError("axis %r: %s dim tag named %r in %s" % (
                    text, "no" if not found else "more than one", text[len(prefix):], data.short_repr()))
            return found
    match = re.match(r"^stag-single:(-?\d+):(.*)$", text, re.IGNORECASE)
    if match:
        return _pick(data, text, _tag_axes(data, match.group(2), True), int(match.group(1)))
    if key and all(c in "btf" for c in key):
        return resolve_axes(data, list(key))
    raise AxisError("unknown axis description %r (e.g. 'T', 'F', 'B', 'spatial', 's:0', 'stag:NAME', 'dim:N')"
                    % text)
