"""RETURNN's concatenation of several sources on their feature axes (its ``concat_sources``, the input of every
layer with several sources), checked as RETURNN builds it: the template is ``Data.get_common_data`` of the sources
(``ignore_feature_dim``) with the summed feature dim on its feature axis, each source is brought into it by
``copy_compatible_to(unbroadcast=True, except_feature=True)``, then ``tf.concat`` on the feature axis, and the value
must have the template's static shape. Where any step fails in RETURNN when the network is built, the layer is
refused here in one line (:func:`check_returnn_concat`); ``helpers.feature_plan`` then takes the template's axes
and maps (its own feature axis last: RETURNN's values up to the axis order).
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from returnn.errors import NetworkError, first_line
from returnn.tensor import Data, Dim
from returnn.tensor.not_specified import NotSpecified
from returnn.tf.layers.common_layout import moved_out_loop_dims, returnn_map


def check_returnn_concat(layer, sources: Sequence[Data]) -> Tuple[Data, List[Optional[List[int]]]]:
    """Refused in one line where RETURNN's ``concat_sources`` of the dense ``sources`` (two or more) fails; else
    RETURNN's template and, per source, where its ``copy_compatible_to`` puts each of its axes there (None where
    this engine does not find that map)."""
    allow = True if moved_out_loop_dims() else NotSpecified
    try:
        common = Data.get_common_data(list(sources), ignore_feature_dim=True, allow_broadcast_all_sources=allow)
    except Exception as exc:  # noqa: BLE001  (RETURNN's error, in one line)
        _refuse(layer, "its common template fails: %s" % first_line(exc))
    if common.feature_dim_axis is None:
        _refuse(layer, "its common template %s has no feature axis to concatenate on" % common.short_repr())
    total = 0
    for s in sources:
        if s.feature_dim_axis is not None:
            total = None if total is None or s.dim is None else total + s.dim
    if total == 0:
        _refuse(layer, "no source has a feature axis")
    feature = Dim(total, kind=Dim.Types.Feature, description="%s:concat" % layer.layer_name, auto_generated=True)
    out = common.copy_template_replace_dim_tag(common.feature_dim_axis, feature)
    shapes: List[List[Optional[int]]] = []
    maps: List[Optional[List[int]]] = []
    for i, s in enumerate(sources):
        try:
            mine = s.copy_compatible_to(out, unbroadcast=True, except_feature=True, check_dtype=False)
        except Exception as exc:  # noqa: BLE001
            _refuse(layer, "source %i %s cannot be brought into its template %s: %s"
                    % (i, s.short_repr(), out.short_repr(), first_line(exc)))
        shapes.append([None if d.is_batch_dim() else d.dimension for d in mine.dims])
        try:
            maps.append(returnn_map(out, s))
        except Exception:  # noqa: BLE001  (then this engine's own layout)
            maps.append(None)
    axis = out.feature_dim_axis
    result: List[Optional[int]] = []
    for a in range(out.batch_ndim):
        sizes = [shape[a] for shape in shapes]
        if a == axis:
            result.append(None if any(x is None for x in sizes) else sum(sizes))
            continue
        known = sorted({x for x in sizes if x is not None})
        if known == [1] and any(x is None for x in sizes):
            _refuse(layer, "a source's axis of size 1 and another's dynamic axis are both on the axis %r of its "
                           "template %s: tf.concat fails when run (unless every sequence is 1 frame)"
                    % (out.dims[a].description, out.short_repr()))
        if len(known) > 1:
            _refuse(layer, "tf.concat fails: the sources have sizes %s on axis %i %r of its template %s"
                    % (known, a, out.dims[a].description, out.short_repr()))
        result.append(known[0] if known else None)
    want = [None if d.is_batch_dim() else d.dimension for d in out.dims]
    if any(x is not None and w is not None and x != w for x, w in zip(result, want)):
        _refuse(layer, "the concatenation has shape %s, its template %s another ('Mismatching shape')"
                % (result, out.short_repr()))
    return out, maps


def _refuse(layer, why: str) -> None:
    raise NetworkError("%s: RETURNN's concatenation of its sources fails (concat_sources): %s" % (layer.desc, why))
