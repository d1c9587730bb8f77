"""RETURNN's rule for the first ``prev:`` value of sparse data (``LayerBase.get_rec_initial_output``,
since 2017): a rec sub-layer with sparse output (class indices) whose previous output the loop
needs must set ``initial_output`` (there is no natural "zeros" label); RETURNN raises otherwise.

Its previous output is needed where another layer (or the layer itself) reads ``prev:NAME``; for a
``choice`` only where another layer reads it (RETURNN's own prev dependency of a choice takes any
value); for the unit of a ``masked_computation`` in the loop always (it keeps its last output where
the mask is False: RETURNN takes its initial output from the unit); for a layer with ``need_last`` in the
loop (not a choice: RETURNN counts its previous output as needed, to keep the last frame of each sequence).
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from returnn.errors import NetworkError
from returnn.tf.layers.rec_net.deps import layer_refs
from returnn.tf.subnetwork import MASKED_BY


def check_sparse_initial_outputs(desc: str, unit: Mapping[str, Any], layers: Mapping[str, Any],
                                 in_loop: Iterable[str]) -> None:
    """One line for the first sparse sub-layer whose previous output is needed without ``initial_output``."""
    in_loop = set(in_loop)
    readers = {}
    for name, opts in unit.items():
        if isinstance(opts, Mapping):
            for ref in layer_refs(name, opts, desc):
                if ref.kind == "prev":
                    readers.setdefault(ref.name, set()).add(name)
    for name in sorted(unit):
        opts, layer = unit[name], layers.get(name)
        if not isinstance(opts, Mapping) or layer is None or not layer.output.sparse or name == "end" \
                or opts.get("initial_output") is not None:
            continue
        others = readers.get(name, set()) - ({name} if opts.get("class") == "choice" else set())
        masked_unit = name in in_loop and opts.get(MASKED_BY) is not None and name.endswith("/output")
        need_last = name in in_loop and bool(opts.get("need_last")) and opts.get("class") != "choice"
        if others or masked_unit or need_last:
            raise NetworkError("%s, sub-layer %r: its output is sparse (%s) and %s, which needs an 'initial_output' "
                               "(e.g. 0): RETURNN asks for it ('You must explicitly provide an initial output value "
                               "for sparse data')" % (desc, name, layer.output.short_repr(),
                                                      "its previous output is read" if others else
                                                      "the masked computation keeps its previous output"
                                                      if masked_unit else "need_last keeps its last frame in the loop"))
