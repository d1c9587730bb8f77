"""Loss targets that are layers of the same rec unit (RETURNN's ``"target": "layer:X"`` on a sub-layer
with a loss, e.g. optimal completion distillation's soft targets from an ``eval`` over
``optimal_completions``).

RETURNN builds X when the loss layer is built (X before it), takes the loss layer's output dim from
X's (when it has no ``n_out``), and computes the loss against X's frames stacked over the loop (in a
search in training over all hypotheses of the beam, as the loss layer's). Here: X is built first
(:func:`first`), its dim fills the loss layer's ``out_dim`` (:func:`n_out_from_unit_target`), the
network reads the target as ``REC/X`` (:func:`network_target_key`), and a search exports X with the
loss layer (:func:`exported_targets`).
"""
from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional

from returnn.tf.layers.rec_net.deps import Ref, loss_target_refs


def unit_target(opts: Mapping[str, Any]) -> Optional[str]:
    """The sub-layer of the same unit a loss target names (``layer:X``), else None."""
    refs = loss_target_refs(opts)
    return refs[0].name if refs and refs[0].kind == "self" else None


def outer_names(opts: Mapping[str, Any]) -> List[str]:
    """The outer-network names a loss target ``layer:base:X`` / ``layer:data:KEY`` reads."""
    out = []
    for ref in loss_target_refs(opts):
        if ref.kind == "base":
            out.append(ref.name)
        elif ref.kind == "data" and ref.name != "source":
            out.append("data:" + ref.name)
    return out


def first(opts: Mapping[str, Any]) -> List[str]:
    """The sub-layers to build before this one (its unit loss target)."""
    name = unit_target(opts)
    return [name] if name else []


def n_out_from_unit_target(opts: Dict[str, Any], layers: Mapping[str, Any], class_name: str) -> bool:
    """For a softmax/linear sub-layer without ``n_out``/``out_dim`` whose loss target is a built
    sub-layer: sets ``out_dim`` to that layer's feature (or class) dim in ``opts``; True if done."""
    name = unit_target(opts)
    if name is None or name not in layers or class_name not in ("softmax", "linear"):
        return False
    if opts.get("n_out") is not None or opts.get("out_dim") is not None:
        return False
    data = layers[name].output
    dim = data.sparse_dim if data.sparse_dim is not None else data.feature_dim
    if dim is None or dim.dimension is None:
        return False
    opts["out_dim"] = dim
    return True


def network_target_key(rec_name: str, opts: Mapping[str, Any]) -> Optional[str]:
    """The key under which the network finds the unit target of a sub-layer's loss: ``layer:REC/X``."""
    name = unit_target(opts)
    return "layer:%s/%s" % (rec_name, name) if name else None


def exported_targets(unit: Mapping[str, Any], exported: Iterable[str]) -> List[str]:
    """The unit loss targets of the ``exported`` sub-layers, not exported themselves."""
    have = set(exported)
    out: List[str] = []
    for n in exported:
        target = unit_target(unit.get(n) or {})
        if target and target not in have and target not in out:
            out.append(target)
    return out


__all__ = ["Ref", "unit_target", "outer_names", "first", "n_out_from_unit_target", "network_target_key", "exported_targets"]
