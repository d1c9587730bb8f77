"""The one-frame templates a rec unit assumes for ``prev:x`` before ``x`` is built (a mixin of the rec
layer, returnn/tf/layers/rec_net/layer.py): from ``out_type`` or ``n_out`` (as (batch, feature), or in a
second attempt following the sources' axes), a ``generic_attention``'s base without the attended axis,
the template of a ``base:`` layer given as its
``initial_output`` (as RETURNN), a parameter-free shape-changing layer (dot, merge_dims, ...) built on its sources' assumed templates,
else the first source's template; without batch axis for a sub-layer that reads nothing with one (RETURNN's
``prev:`` templates start batch-less: a counter's loop output is (T, F)). The rec layer checks every assumption
against the built layer."""
from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Sequence, Set, Tuple

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim
from returnn.tf.layers.base import get_layer_class
from returnn.tf.layers.rec_net.deps import Ref, initial_refs
from returnn.tf.layers.rnn_cell import building_loop_step
from returnn.tf.net_dict import has_axis_pairs
from returnn.tf.subnetwork import MASKED_BY

# classes whose output keeps the source's axes and sets the feature dim to n_out (see _frame_wise_guess)
FRAME_WISE_N_OUT = frozenset(("linear", "combine", "activation", "copy", "softmax", "dropout", "layer_norm"))
# parameter-free classes that change the shape (or its axes' roles: reinterpret_data's set_axes, which makes the
# frames the feature axis a choice picks from): 'prev:' of one is assumed as built on its sources' templates
SHAPE_GUESS_CLASSES = frozenset(("dot", "merge_dims", "split_dims", "reduce", "squeeze", "expand_dims", "gather",
                                 "gather_nd", "compare", "edit_distance_table", "reinterpret_data"))  # compare: bool, not its source's labels
# of these, the option naming the index layer: assumed one index per sequence (B,) when its own shape is in a
# cycle through the layer (hard attention: prev:att = gather_nd of the encoder at the chosen position)
INDEX_OPTIONS = {"gather": "position", "gather_nd": "position"}


def _out_type_template(name: str, out_type: Any) -> Optional[Data]:
    """The one-frame template a sub-layer's ``out_type`` dict states (``dim``, ``shape``, ``sparse``,
    ``dtype``), when it states a static one: ``(B, dim)``, ``(B,)`` sparse (``dim`` None: of an
    unknown number of classes), or ``(B,) + shape``; None otherwise (no out_type, or a dynamic axis
    whose Dim only the built layer knows)."""
    if not isinstance(out_type, Mapping) or not ({"dim", "shape", "sparse"} & set(out_type)):
        return None
    from returnn.tensor.dim import batch_dim
    from returnn.tf.layers.helpers import new_feature_dim
    sparse, dim, shape = bool(out_type.get("sparse")), out_type.get("dim"), out_type.get("shape")
    if shape is None:
        shape = () if sparse or dim is None else (dim,)
    shape = tuple(shape)
    if any(d is None for d in shape):
        return None
    dims = [batch_dim] + [new_feature_dim(name, int(d)) if i == len(shape) - 1 and not sparse
                          else Dim(int(d), kind=Dim.Types.Spatial, description="%s:static:%i" % (name, i))
                          for i, d in enumerate(shape)]
    sparse_dim = None  # sparse with "dim": None: class indices of an unknown number of classes
    if sparse:
        sparse_dim = Dim(None if dim is None else int(dim), kind=Dim.Types.Feature, description="%s:sparse-dim" % name)
    dtype = out_type.get("dtype") or ("int32" if sparse else "float32")
    return Data(name.rsplit("/", 1)[-1], dims=dims, dtype=dtype, sparse_dim=sparse_dim)


class AssumedTemplates:
    """The rec layer's assumptions of ``prev:`` templates (see the module doc); it provides ``unit``,
    ``layers``, ``layer_name``, ``seed``, ``search``, ``_guessed``, ``_follow_axes``,
    ``sub_source_names`` and ``_template``."""

    def _guess(self, sub: str, where: str, seen: Tuple[str, ...] = ()) -> Optional[Data]:
        """The one-frame template assumed for ``prev:sub`` before ``sub`` is built (None inside
        the recursion when it cannot be told)."""
        if sub in self._guessed:
            return self._guessed[sub]
        opts = self.unit[sub]
        n_out = opts.get("n_out")
        if isinstance(opts.get("out_dim"), Dim):
            n_out = opts["out_dim"].dimension
        src_names = self.sub_source_names(sub)
        if opts.get("class") == "switch":  # RETURNN: the values' template, the condition broadcast over it
            values = [opts[k] for k in ("true_from", "false_from") if isinstance(opts.get(k), str)]
            src_names = values + [s for s in src_names if s not in values]
        from_out_type = _out_type_template(self.layer_name + "/" + sub, opts.get("out_type"))
        if (from_out_type is None and self._follow_axes and opts.get("class") == "generic_attention"
                and isinstance(opts.get("base"), str)):
            from_out_type = self._attention_guess(sub, opts["base"], where)
        initial = opts.get("initial_output")
        if from_out_type is None and isinstance(initial, str) and initial.startswith("base:"):
            from_out_type = self._template(initial, True, where).copy(sub)  # RETURNN: that layer's template
        if from_out_type is not None:
            guess = from_out_type
        elif n_out is not None and opts.get("class") != "choice":
            from returnn.tensor.dim import batch_dim
            from returnn.tf.layers.helpers import new_feature_dim
            feat = new_feature_dim(self.layer_name + "/" + sub, int(n_out))
            guess = None
            if self._follow_axes and opts.get("class") in FRAME_WISE_N_OUT:  # its sources' other axes
                guess = self._frame_wise_guess(sub, src_names, feat, where, seen)
            if guess is None:
                guess = Data(sub, dims=(batch_dim, feat))
        else:
            guess = self._shape_guess(sub, opts, src_names, where, seen)
            for src in ([] if guess is not None else src_names):  # the first source whose shape is known
                ref = Ref.parse(src)
                if ref.kind in ("self", "prev") and ref.name not in self.layers:
                    if ref.name in seen or ref.name == sub:
                        continue
                    guess = self._guess(ref.name, where, seen + (sub,))
                    if guess is None:
                        continue
                else:
                    guess = self._template(src, True, where)
                break
            if guess is None and seen:
                return None
            if guess is not None and self.search and opts.get("class") == "choice" and not guess.sparse \
                    and opts.get("input_type") != "regression":
                dims = [d for i, d in enumerate(guess.dims) if i != guess.feature_dim_axis]
                guess = Data(sub, dims=dims, sparse_dim=guess.feature_dim)  # labels of the scores
            if guess is None:
                raise NetworkError("%s: cannot tell the shape of 'prev:%s' before it is computed; give it 'n_out'"
                                   % (where, sub))
            guess = guess.copy(sub)
        if guess.batch_dim_axis is not None and sub in self.batchless_subs():
            guess = guess.copy_template_excluding_axis(guess.batch_dim_axis).copy(sub)
        self._guessed[sub] = guess
        return guess

    def batchless_subs(self) -> Set[str]:
        """The sub-layers that read nothing with a batch axis, through any chain of same-step or ``prev:``
        references (no ``data:``, no ``base:`` layer with a batch axis, no such ``initial_output``): RETURNN
        starts every ``prev:`` template without a batch axis and only its sources add one, so these stay
        without it (a counter over ``prev:`` and constants: its output (T, F)). In a search too: such a layer has
        no beam either (the beam rides on the batch axis), so the choice's reordering leaves it as it is; the
        choices themselves carry the batch (their target's, or their scores' with the beam)."""
        cached = getattr(self, "_batchless_cache", None)
        if cached is None:
            choices = self._choice_subs() if self.search else set()
            self._batchless_cache = set(self.unit) - self._reaching(choices, self._ref_has_batch)
        return self._batchless_cache

    def beam_free_subs(self) -> Set[str]:
        """In a search, the sub-layers that read no choice, through any chain of same-step or ``prev:``
        references: RETURNN gives them no search choices, so their frames have no beam (a counter with a
        constant ``with_batch_dim``: batch B, not B * K). Here they run on the beam's rows like all others,
        each hypothesis with the same values; the search gives one of them per sequence. A reference to what
        is not a sub-layer of the unit (a sub-layer of a sub-network) counts as reading a choice."""
        choices = self._choice_subs()
        return set(self.unit) - self._reaching(choices, lambda ref, carriers: ref.kind in ("self", "prev") and (
            ref.name in carriers or ref.name not in self.unit))

    def _choice_subs(self) -> Set[str]:
        return {n for n, o in self.unit.items() if isinstance(o, Mapping) and o.get("class") == "choice"}

    def _reaching(self, carriers: Set[str], carries: Callable[[Ref, Set[str]], bool]) -> Set[str]:
        """``carriers`` and every sub-layer that reads one of them (``carries(ref, carriers)``) through its
        sources, its initial output or state, or its mask, to a fixpoint."""
        carriers = set(carriers)
        changed = True
        while changed:
            changed = False
            for sub in self.unit:
                if sub in carriers:
                    continue
                refs = [Ref.parse(s) for s in self.sub_source_names(sub)] + initial_refs(self.unit[sub])
                if self.unit[sub].get(MASKED_BY):
                    refs.append(Ref.parse(self.unit[sub][MASKED_BY]))
                if any(carries(r, carriers) for r in refs):
                    carriers.add(sub)
                    changed = True
        return carriers

    def _ref_has_batch(self, ref: Ref, carriers: Set[str]) -> bool:
        """Whether what ``ref`` names has a batch axis (sub-layers: whether they are in ``carriers``)."""
        if ref.kind == "step":
            return False
        if ref.kind in ("self", "prev"):
            return ref.name in carriers or ref.name not in self.unit
        if ref.kind == "base":
            data = self.outer.get(ref.name)
        elif ref.name == "source":
            data = self.source_template
        else:
            data = self.outer.get("data:" + ref.name)
        return data is None or data.batch_dim_axis is not None

    def _shape_guess(self, sub: str, opts: Mapping[str, Any], src_names: Sequence[str], where: str,
                     seen: Tuple[str, ...]) -> Optional[Data]:
        """The assumed template of a :data:`SHAPE_GUESS_CLASSES` layer (a dot reducing an attention axis, a
        merge_dims of its heads): the layer built on its sources' (assumed) one-frame templates; None when
        they cannot be told without a cycle or it does not build on them."""
        if opts.get("class") not in SHAPE_GUESS_CLASSES:
            return None
        templates = []
        index = opts.get(INDEX_OPTIONS.get(opts.get("class")))
        for src in src_names:
            ref = Ref.parse(src)
            if ref.kind in ("self", "prev") and ref.name not in self.layers:
                if ref.name in seen or ref.name == sub:
                    return None
                data = self._guess(ref.name, where, seen + (sub,))
                if src == index and (data is None or not (data.sparse or data.dtype.startswith("int"))):
                    from returnn.tensor.dim import batch_dim
                    data = Data(ref.name, dims=[batch_dim], dtype="int32")
            else:
                try:
                    data = self._template(src, True, where)
                except NetworkError:
                    return None
            if data is None:
                return None
            templates.append(data)
        from returnn.tf.layers.rec_net.layer import REC_ONLY_SUB_OPTIONS
        layer_opts = {k: v for k, v in opts.items()
                      if (k != "from" or has_axis_pairs(v)) and k not in REC_ONLY_SUB_OPTIONS}
        try:
            cls = get_layer_class(opts["class"], sub, layer_opts)
            if hasattr(cls, "assumed_output"):  # the class tells its template from the sources' without building
                return cls.assumed_output(sub, layer_opts, templates)
            with building_loop_step(True):
                layer = cls("%s/%s" % (self.layer_name, sub), layer_opts, templates, seed=self.seed)
        except NetworkError:
            return None
        return layer.output.copy(sub)

    def _attention_guess(self, sub: str, base: str, where: str) -> Optional[Data]:
        """The assumed template of a ``generic_attention``: its base without the attended (time) axis."""
        try:
            data = self._template(base, True, where)
        except NetworkError:
            return None
        if data.time_dim_axis is None:
            return None
        return data.copy_template_excluding_axis(data.time_dim_axis).copy(sub)

    def _frame_wise_guess(self, sub: str, src_names: Sequence[str], feat: Dim, where: str,
                          seen: Tuple[str, ...]) -> Optional[Data]:
        """The assumed template of a frame-wise layer with ``n_out``: the axes of its source with the
        most axes (known without a cycle), the feature axis replaced by ``feat``."""
        best: Optional[Data] = None
        for src in src_names:
            ref = Ref.parse(src)
            if ref.kind in ("self", "prev") and ref.name not in self.layers:
                if ref.name in seen or ref.name == sub:
                    continue
                data = self._guess(ref.name, where, seen + (sub,))
            else:
                try:
                    data = self._template(src, True, where)
                except NetworkError:
                    data = None
            if data is not None and (best is None or data.batch_ndim - data.sparse > best.batch_ndim - best.sparse):
                best = data
        if best is None:
            return None
        dims = [d for i, d in enumerate(best.dims) if best.sparse or i != best.feature_dim_axis]
        return Data(sub, dims=dims + [feat])
