"""The order in which a rec layer builds its sub-layers: which sub-layer reads which (``from`` and the reference
options as the layer class takes them; a teacher-forced or sampling choice reads its target), the layers moved
out of the loop ordered by their references, then the loop's; each layer after the ones whose parameters it
reuses."""
from __future__ import annotations

from typing import List, Sequence, Tuple

from returnn.tf.layers import reuse
from returnn.tf.layers.rec_net import layer_targets
from returnn.tf.layers.rec_net.deps import Ref, fed_target, samples_in_training
from returnn.tf.layers.rec_net.unit_dict import as_list


class BuildOrder:
    """Mixin of :class:`~returnn.tf.layers.rec_net.layer.RecSubnetLayer` (its ``unit``, ``plan``, ``search``)."""

    def _build_order(self) -> List[str]:
        """Moved-out layers ordered by all their references (no cycles there), then the loop's."""
        return self._reused_first(self._ordered(self.plan.out_of_loop)) + self._reused_first(self.plan.in_loop)

    def _reused_first(self, names: Sequence[str]) -> List[str]:
        """``names`` with each layer after the sub-layers whose parameters it reuses (``reuse_params``)."""
        order: List[str] = []
        subset = set(names)

        def visit(n: str, path: Tuple[str, ...]) -> None:
            if n in order or n in path:
                return
            # what it reads in the same step, the layers whose parameters it reuses, its unit loss target
            firsts = [r.name for r in map(Ref.parse, self.sub_source_names(n)) if r.kind == "self"]
            firsts += list(reuse.referenced_layers(self.unit[n].get("reuse_params"))) + layer_targets.first(self.unit[n])
            for target in firsts:
                if target in subset:
                    visit(target, path + (n,))
            order.append(n)
        for n in names:
            visit(n, ())
        return order

    def _ordered(self, names: Sequence[str]) -> List[str]:
        """``names`` (acyclic among themselves) ordered by their same-step and ``prev:`` references."""
        order: List[str] = []
        subset = set(names)
        visiting = set()

        def visit(n: str) -> None:
            if n in order or n in visiting:
                return
            visiting.add(n)
            for r in map(Ref.parse, self.sub_source_names(n)):  # a teacher-forced choice reads its target only
                if r.kind in ("self", "prev") and r.name in subset and r.name != n:
                    visit(r.name)
            order.append(n)

        for n in names:
            visit(n)
        return order

    def sub_source_names(self, sub: str) -> List[str]:
        """The sources of sub-layer ``sub`` as the layer class takes them (``from``, then its
        reference options); a teacher-forced choice reads its target."""
        from returnn.tf.network import layer_sources
        opts = self.unit[sub]
        if fed_target(opts, self.search):
            return ["data:" + t for t in as_list(opts["target"])]
        if samples_in_training(opts, self.search):  # its target, then the scores it samples from (choice.py)
            return ["data:" + t for t in as_list(opts["target"])] + layer_sources(sub, opts)
        if self.search and opts.get("class") == "choice":  # its explicit_search_sources (choice.py) after 'from'
            from returnn.tf.layers.choice import explicit_search_names
            return layer_sources(sub, opts) + explicit_search_names("%s/%s" % (self.desc, sub), opts)
        return layer_sources(sub, opts)
