"""Build-time checks of a rec layer's loop (:class:`returnn.tf.layers.rec_net.layer.RecSubnetLayer`)
that RETURNN makes too: each refuses in one line naming the layer."""
from __future__ import annotations

from typing import TYPE_CHECKING, Set

from returnn.errors import NetworkError

if TYPE_CHECKING:
    from returnn.tf.layers.rec_net.layer import RecSubnetLayer


def check_loop_axis_dynamic(self: "RecSubnetLayer") -> None:
    """A loop over its source's time axis needs a dynamic one: over a static axis (e.g. of fixed-length
    extern data) RETURNN's loop length, the source's full lengths, has no dim tag and it asserts
    (``fixed_seq_len ... without dim tag``). The plain recurrent units (LSTM, GRU, ...) run over it."""
    if self.time_dim.dimension is not None:
        raise NetworkError("%s: a loop over the static axis %r of its source is refused (RETURNN asserts: the loop's "
                           "length has no dim tag); give the data a dynamic time axis" % (self.desc,
                                                                                           self.time_dim.description))


def check_output_per_step_time(self: "RecSubnetLayer") -> None:
    """RETURNN builds every sub-layer's template per step first, with ``base:`` layers whole (never
    cut into frames). A layer computed from ``base:`` layers alone (no frame of the loop) has the
    same template per step as over the whole sequence, with the loop's time axis where a ``base:``
    layer has it: RETURNN refuses it as "output" (its per-step template has that axis:
    _check_output_template_shape), and a layer in the loop reading it gets all its frames in the
    template but one frame per step when it runs (moved out of the loop: fails). Here such a layer
    runs before the loop and the loop reads it per frame: refused as RETURNN, in one line."""
    outer_only: Set[str] = set()
    changed = True
    while changed:
        changed = False
        for sub in set(self.unit) - self.in_loop - outer_only:
            refs = self.plan.deps[sub]
            if refs and self.unit[sub].get("class") != "rec_unstack" and all(
                    r.kind == "base" or (r.kind == "self" and r.name in outer_only) for r in refs):
                outer_only.add(sub)
                changed = True
    whole = {sub for sub in outer_only if sub in self.layers and self.time_dim in self.layers[sub].output.dims}
    read = [(n, r.name) for n in self.plan.in_loop for r in self.plan.deps[n]
            if r.kind in ("self", "prev") and r.name in whole]
    if "output" in whole or read:
        sub = "output" if "output" in whole else read[0][1]
        raise NetworkError("%s: sub-layer %r reads only base: layers and has the loop's time axis %r: RETURNN's "
                           "template of it per step has all those frames, so %s; refused (reduce or attend over "
                           "that axis first)" % (self.desc, sub, self.time_dim.description,
                                                 "the output per step has them" if sub == "output" else
                                                 "the loop (%r) cannot read it per frame" % read[0][0]))
