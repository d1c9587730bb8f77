"""Access to a rec layer's sub-layers, from inside or outside its unit (RETURNN semantics):

- ``rec_unstack`` (inside a unit): its input (usually ``base:...``) read frame by frame along the
  loop's time axis. It does not depend on the loop, so it is computed over the whole sequence
  (moved out, as in RETURNN) and the loop reads its frames. ``axis`` (default: the loop's time
  axis) must be the loop's time axis; with ``declare_rec_time`` a rec layer without ``from`` and
  without target takes its loop (time axis and lengths) from this axis.
- ``get_rec_accumulated`` (outside): the whole sequence of sub-layer ``sub_layer`` of the rec layer
  in ``from`` (the same as ``"REC/SUB"``).
- ``rec_last_output`` (outside): the last frame (at each sequence's length - 1) of sub-layer
  ``sub_layer_name`` of the rec layer ``rec_layer``; a sequence of length 0 gets the sub-layer's
  initial output. As in RETURNN, the sub-layer must set ``need_last: True``.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim
from returnn.tf.layers import helpers, reuse
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.helpers import check_sources
from returnn.tf.layers.options import Option


@register_layer
class RecUnstackLayer(Layer):
    """See the module docstring."""

    layer_class = "rec_unstack"
    no_int_axes = ("axis",)  # RETURNN: allow_int=False
    options = (
        Option("axis", None, "the axis to unstack (default: the loop's time axis); it must be the loop's"),
        Option("declare_rec_time", False, "a rec layer without 'from' and target loops over this axis"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources, 1, 1)
        data = sources[0]
        loop = helpers._LOOP_AXES[-1] if helpers._LOOP_AXES else None  # set while a unit builds moved-out layers
        if loop is None:
            raise NetworkError("%s: must be used inside a rec layer's unit (and is computed outside its loop: "
                               "it cannot run step by step, e.g. with optimize_move_layers_out False)" % self.desc)
        axis = self.opt("axis")
        dim = loop if axis is None else data.dims[self.axis(data, axis, "axis")]
        if not any(d == loop for d in data.dims) or dim != loop:
            raise NetworkError("%s: the axis %r of %s is not the rec loop's time axis %r%s" % (
                self.desc, axis if axis is not None else "T", data.short_repr(), loop,
                "" if axis is None else " (declare_rec_time: only in a rec layer without 'from' and target)"))
        self.output = data.copy(name)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        return self.make_output(sources[0].tensor, sources)


@register_layer
class GetRecAccumulatedOutputLayer(Layer):
    """See the module docstring."""

    layer_class = "get_rec_accumulated"
    options = (Option("sub_layer", None, "the sub-layer of the rec layer in 'from'"),)

    @classmethod
    def outer_sources(cls, name: str, opts: Mapping[str, Any], default_target: str = "classes",
                      search: bool = False) -> List[str]:
        src, sub = opts.get("from"), opts.get("sub_layer")
        if isinstance(src, (list, tuple)) and len(src) == 1:
            src = src[0]
        if not isinstance(src, str) or not isinstance(sub, str):
            raise NetworkError("layer %r (get_rec_accumulated): needs one rec layer in 'from' and 'sub_layer' (a name), "
                               "got %r, %r" % (name, src, sub))
        return ["%s/%s" % (src, sub)]

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42, **_network_kwargs):
        super().__init__(name, {k: v for k, v in opts.items() if k != "from"}, sources, seed)
        check_sources(self, sources, 1, 1)
        self.output = sources[0].copy(name)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        return self.make_output(sources[0].tensor, sources)


@register_layer
class RecLastOutputLayer(Layer):
    """See the module docstring."""

    layer_class = "rec_last_output"
    default_from = ()
    options = (
        Option("rec_layer", None, "the rec layer (with a dict unit)"),
        Option("sub_layer_name", None, "its sub-layer"),
    )

    @classmethod
    def outer_sources(cls, name: str, opts: Mapping[str, Any], default_target: str = "classes",
                      search: bool = False) -> List[str]:
        rec, sub = opts.get("rec_layer"), opts.get("sub_layer_name")
        if not isinstance(rec, str) or not isinstance(sub, str):
            raise NetworkError("layer %r (rec_last_output): needs 'rec_layer' and 'sub_layer_name' (names), got %r, %r"
                               % (name, rec, sub))
        return ["%s/%s" % (rec, sub), rec]

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42, **_network_kwargs):
        super().__init__(name, {k: v for k, v in opts.items() if k != "from"}, sources, seed)
        check_sources(self, sources, 2, 2)
        self._check_need_last()
        whole = sources[0]
        time = [i for i, d in enumerate(whole.dims) if d == sources[1].time_dim] if sources[1].time_dim else []
        if not time or whole.batch_dim_axis is None:
            raise NetworkError("%s: %r/%r has no batch and loop time axis (%s)" % (
                self.desc, self.opt("rec_layer"), self.opt("sub_layer_name"), whole.short_repr()))
        self.ax = time[0]
        self.time = whole.dims[self.ax]
        self.output = whole.copy_template_excluding_axis(self.ax).copy(name)

    def _check_need_last(self) -> None:
        """RETURNN keeps a sub-layer's last frame only when it sets ``need_last`` (else a KeyError)."""
        resolve = reuse.outer_resolver()
        try:
            rec = resolve(self.opt("rec_layer")) if resolve is not None else None
        except KeyError:
            return
        unit = getattr(rec, "opts", {}).get("unit")
        sub = unit.get(self.opt("sub_layer_name")) if isinstance(unit, Mapping) else None
        if isinstance(sub, Mapping) and not sub.get("need_last"):
            raise NetworkError("%s: sub-layer %r of %r needs 'need_last': True (RETURNN keeps its last frame only then)"
                               % (self.desc, self.opt("sub_layer_name"), self.opt("rec_layer")))

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        whole, rec = sources
        data = whole.data
        b = data.batch_dim_axis
        frame = [i for i in range(data.batch_ndim) if i != self.ax]  # the output's axes, in order
        current = [b] + [i for i in frame if i != b]  # the order below: batch first
        tensor = tf.transpose(whole.tensor, [b, self.ax] + current[1:])  # (B, T, ...)
        n_batch = tf.shape(tensor)[0]
        lens = whole.sizes.get(self.time) if self.time.is_dynamic() else None
        lens = tf.broadcast_to(tf.shape(tensor)[1] if lens is None else lens, [n_batch])
        # an empty sequence's last frame: a zero frame appended (also when all are empty, T = 0)
        zero = tf.zeros(tf.concat([[n_batch, 1], tf.shape(tensor)[2:]], 0), tensor.dtype)
        pos = tf.where(lens > 0, lens - 1, tf.shape(tensor)[1])
        last = tf.gather(tf.concat([tensor, zero], 1), pos, axis=1, batch_dims=1)  # (B, ...)
        initial = getattr(rec, "initial_output", None)  # the rec value's initial outputs of its sub-layers
        if initial is not None:
            init = tf.cast(initial(self.opt("sub_layer_name")), last.dtype)  # in the frame's order
            init = tf.transpose(init, [frame.index(i) for i in current])
            empty = tf.reshape(lens <= 0, [-1] + [1] * (len(last.shape) - 1))
            frames = last
            # a loop of no frames at all: its stacked frames may lack the sub-layer's other axes' extents too
            no_frames = tf.concat([[n_batch], tf.shape(init)[1:]], 0) if len(init.shape) == len(last.shape) else None
            last = tf.cond(tf.shape(tensor)[1] > 0 if no_frames is not None else tf.constant(True),
                           lambda: tf.where(empty, tf.broadcast_to(init, tf.shape(frames)), frames),
                           lambda: tf.broadcast_to(init, no_frames if no_frames is not None else tf.shape(frames)))
        back = [current.index(i) for i in frame]
        return self.make_output(tf.transpose(last, back) if back != sorted(back) else last, [whole])


def loop_from_unit(desc: str, unit: Mapping[str, Any], outer: Mapping[str, Data], axis: Any):
    """The loop of a rec layer without ``from`` and target: ``(time dim, outer value name)``, from
    the rec layer's ``axis`` (a Dim of an outer value) or from a ``rec_unstack`` sub-layer with
    ``declare_rec_time`` (its axis of its ``base:`` input); None when neither is there."""
    if isinstance(axis, Dim):
        for name, tmpl in outer.items():
            if any(d == axis for d in tmpl.dims):
                return axis, name
        raise NetworkError("%s: no input of the unit has the loop axis %r" % (desc, axis))
    if axis is not None:
        raise NetworkError("%s: 'axis' %r without 'from': give a Dim of an input of the unit" % (desc, axis))
    for sub, opts in unit.items():
        if not isinstance(opts, Mapping) or opts.get("class") != "rec_unstack" or not opts.get("declare_rec_time"):
            continue
        src = opts.get("from")
        src = src[0] if isinstance(src, (list, tuple)) and len(src) == 1 else src
        if not isinstance(src, str) or not src.startswith("base:") or src[len("base:"):] not in outer:
            raise NetworkError("%s, sub-layer %r: declare_rec_time needs a 'base:' input, got %r" % (desc, sub, src))
        tmpl = outer[src[len("base:"):]]
        sub_axis = opts.get("axis", "T")
        try:
            dim = tmpl.get_dim_tag_from_description(sub_axis if sub_axis is not None else "T")
        except ValueError as exc:
            raise NetworkError("%s, sub-layer %r: option 'axis': %s" % (desc, sub, exc)) from None
        return dim, src[len("base:"):]
    return None
