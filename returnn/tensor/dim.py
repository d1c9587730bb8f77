"""Dimension tags (RETURNN's ``Dim``, formerly ``DimensionTag``).

A :class:`Dim` names one axis: its kind (batch, spatial, feature or unspecified), a description
and a static size (``dimension``), or ``None`` for a dynamic axis whose per-sequence sizes are
known only at run time (they travel with the tensor, see ``returnn.tf.layers.output``).

Equality is identity, extended by :meth:`Dim.declare_same_as` (both sides then share one base),
and every batch dim equals every other batch dim. A Dim holds no tensors, so one Dim is valid in
all traced step functions.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator, List, Optional, Tuple


class DimTypes:
    """The kinds of axes (RETURNN's ``Dim.Types``)."""

    Unspecified = None
    Batch = "batch"
    Spatial = "spatial"
    Feature = "feature"
    Time = Spatial  # RETURNN's old name (DimensionTag.Types.Time): a spatial axis
    Types = (Batch, Spatial, Feature)


# > 0 while a network builds its layers: the dims made then are the engine's (RETURNN's layers make theirs
# auto_generated); a Dim made outside (a config's, extern data's dim_tags) without auto_generated is the user's
_BUILDING = [0]


@contextlib.contextmanager
def building_network() -> Iterator[None]:
    """Dims made inside are not the user's (:attr:`Dim.user_made`)."""
    _BUILDING[0] += 1
    try:
        yield
    finally:
        _BUILDING[0] -= 1


# RETURNN Dim options that change nothing here (batch info, search beams, matching priorities, ...)
_RETURNN_NOOP_OPTS = ("batch", "control_flow_ctx", "src_data", "src_axis", "generic", "special",
                      "undefined", "dyn_size", "dyn_size_ext", "capacity", "bounded_by", "is_batch_dim",
                      "derived_from_op")


class Dim:
    """One named axis. ``dimension`` is the static size, or None when the size varies per sequence.

    ``derived_from`` points at the dim this one was computed from (e.g. a conv's output time from
    its input time); it is informative only and does not make the two equal.
    """

    Types = DimTypes

    def __init__(self, dimension: Optional[int] = None, name: Optional[str] = None, *,
                 kind: Optional[str] = DimTypes.Unspecified, description: Optional[str] = None,
                 derived_from: Optional["Dim"] = None, auto_generated: bool = False,
                 derived_from_tag: Optional["Dim"] = None, vocab: Any = None, match_priority: int = 0,
                 **returnn_opts: Any):
        if dimension is not None and (isinstance(dimension, bool) or not isinstance(dimension, int)
                                      or dimension < 0):
            raise ValueError("Dim dimension must be None or an int >= 0, got %r" % (dimension,))
        unknown = sorted(set(returnn_opts) - set(_RETURNN_NOOP_OPTS))
        if unknown:
            raise TypeError("Dim: option(s) %s are not supported here (accepted: dimension, name, kind, description, "
                            "derived_from_tag, vocab, match_priority, %s)" % (", ".join(unknown), ", ".join(_RETURNN_NOOP_OPTS)))
        self.dimension = dimension
        self.kind = kind
        self.description = description or name or ("unnamed:%s" % (kind or "dim"))
        self.derived_from = derived_from if derived_from is not None else derived_from_tag
        self.auto_generated = auto_generated
        # made by the user (not auto_generated, not by a layer): RETURNN's simple dim equality (behavior_version
        # >= 16) never matches it with another dim of the same size (layers/helpers.py)
        self.user_made = not auto_generated and not _BUILDING[0]
        self.vocab = vocab
        # RETURNN: of the axes a Dim matches, the one of the highest match_priority is meant (a square weight
        # [in.copy(match_priority=1), in]: ``in`` names the first axis); see returnn.tensor.axes.resolve_axes
        self.match_priority = match_priority
        self.same_as: Optional[Dim] = None
        self.derived_from_op: Optional[Tuple[str, List[Any]]] = None  # dim math: (kind, [inputs]), see dim_math
        # RETURNN computed this dim's sizes without tying the size tensor to its tag (split_dims' padded
        # remainder): the first shift_axis with adjust_size_info that reads them ties them to its own output
        # dim unshifted (its adjusted sizes then count as the same dim's and are dropped); that layer's name
        self.untied_sizes = False
        self.sizes_tied_by: Optional[str] = None

    @property
    def name(self) -> str:
        """RETURNN's short name: the description here."""
        return self.description

    @property
    def size(self) -> Optional[int]:
        """RETURNN's newer name of :attr:`dimension`."""
        return self.dimension

    @property
    def derived_from_tag(self) -> Optional["Dim"]:
        return self.derived_from

    # ---- identity
    def get_same_base(self) -> "Dim":
        """The dim this one was declared the same as (transitively), else itself."""
        base = self
        while base.same_as is not None:
            base = base.same_as
        return base

    def declare_same_as(self, other: "Dim") -> None:
        """From now on ``self == other``. Static sizes must agree."""
        base, other_base = self.get_same_base(), other.get_same_base()
        if base is other_base:
            return
        if base.dimension != other_base.dimension:
            raise ValueError("cannot declare %r same as %r: sizes differ" % (self, other))
        base.same_as = other_base

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Dim):
            return False
        if self.kind == other.kind == DimTypes.Batch:
            return True
        return self.get_same_base() is other.get_same_base()

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        # Equal dims have equal static sizes (declare_same_as checks), so this is stable.
        return hash(("Dim", self.dimension))

    # ---- kind and size
    def is_batch_dim(self) -> bool:
        return self.kind == DimTypes.Batch

    def is_spatial_dim(self) -> bool:
        return self.kind == DimTypes.Spatial

    def is_feature_dim(self) -> bool:
        return self.kind == DimTypes.Feature

    def is_static(self) -> bool:
        return self.dimension is not None

    def is_dynamic(self) -> bool:
        """True for a non-batch axis whose size varies per sequence."""
        return self.dimension is None and not self.is_batch_dim()

    def copy(self, same_as_self: bool = True, description: Optional[str] = None, kind: Optional[str] = None,
             match_priority: Optional[int] = None) -> "Dim":
        """RETURNN's ``Dim.copy``: a new Dim of the same size, the same as this one (equal to it) unless
        ``same_as_self`` is False (then it needs a ``description``); ``match_priority`` its own."""
        if not same_as_self and description is None:
            raise ValueError("%s: a copy not same_as_self needs a new description (as RETURNN)" % self.short_repr())
        new = Dim(self.dimension, kind=self.kind if kind is None else kind,
                  description=description or self.description, derived_from=self.derived_from,
                  auto_generated=self.auto_generated,
                  match_priority=self.match_priority if match_priority is None else match_priority)
        new.user_made = self.user_made
        if same_as_self:
            new.same_as = self.get_same_base()
        return new

    def short_repr(self) -> str:
        """``B``, ``T?`` style: description and size, for messages."""
        if self.is_batch_dim():
            return "B"
        size = "?" if self.dimension is None else str(self.dimension)
        return "%s(%s)" % (self.description, size)

    def __repr__(self) -> str:
        return "Dim{%s}" % self.short_repr()

    # ---- dim math (returnn.tensor.dim_math): RETURNN's derived dims
    def __add__(self, other):
        from returnn.tensor.dim_math import bin_op
        return bin_op("add", self, other)

    def __radd__(self, other):
        from returnn.tensor.dim_math import bin_op
        return bin_op("add", other, self)

    def __sub__(self, other):
        from returnn.tensor.dim_math import bin_op
        return bin_op("sub", self, other)

    def __rsub__(self, other):
        from returnn.tensor.dim_math import bin_op
        return bin_op("sub", other, self)

    def __mul__(self, other):
        from returnn.tensor.dim_math import bin_op
        return bin_op("mul", self, other)

    def __rmul__(self, other):
        from returnn.tensor.dim_math import bin_op
        return bin_op("mul", other, self)

    def __floordiv__(self, other):
        from returnn.tensor.dim_math import bin_op
        return bin_op("floordiv", self, other)

    def __truediv__(self, other):
        from returnn.tensor.dim_math import bin_op
        return bin_op("truediv", self, other)

    def __neg__(self):
        return -1 * self

    add_right, add_left = __add__, __radd__
    sub_right = __sub__

    def sub_left(self, other):
        """RETURNN: ``(-other) + self``, ``other`` taken from the left (``(c + x).sub_left(c)`` is ``x``)."""
        from returnn.tensor import dim_match
        from returnn.tensor.dim_math import bin_op
        op = dim_match.op_of(self)  # RETURNN: (a + b).sub_left(a) is b
        if op and op[0] == "add" and len(op[1]) == 2 and dim_match._same(op[1][0], other):
            rest = op[1][1]
            return dim_match.constant(rest, spatial=False) if isinstance(rest, int) else rest
        if isinstance(other, int) and self.dimension is None:
            from returnn.tensor.dim_tree import shifted_dim
            return shifted_dim(self, [("sub_left", other)])
        return bin_op("add", -other, self)

    mul_right, mul_left = __mul__, __rmul__
    div_right = __truediv__

    def div_left(self, other):
        """``self / other``, ``other`` the left factor of ``self`` (RETURNN: ``key_dim_total.div_left(num_heads)``
        is the dim per head)."""
        from returnn.tensor.dim_math import bin_op
        return bin_op("truediv_left", self, other)

    def ceildiv_right(self, other):
        """``ceil(self / other)`` (e.g. frames after striding by ``other`` with padding)."""
        from returnn.tensor.dim_math import bin_op
        return bin_op("ceildiv", self, other)

    def ceildiv_left(self, other):
        """``ceil(self / other)``, ``other`` the left factor."""
        from returnn.tensor.dim_math import bin_op
        return bin_op("ceildiv_left", self, other)

    def is_dim_known(self) -> bool:
        return True

    def is_same_size_tensor(self, x: Any) -> bool:
        return False

    # ---- RETURNN's comparison API for config code (returnn.tensor.dim_compare)
    special = False  # RETURNN's special dims (never axes) do not exist here
    undefined = False  # every dim is defined when config code sees it

    def is_equal(self, other: Any, **opts: Any) -> bool:
        """RETURNN's ``Dim.is_equal(other, allow_same_spatial_dim=..., ...)`` (looser than ``==``)."""
        from returnn.tensor.dim_compare import is_equal
        return is_equal(self, other, **opts)

    def get_same_derived_base(self, same_dim: bool = False) -> "Dim":
        from returnn.tensor.dim_compare import same_derived_base
        return same_derived_base(self, same_dim)

    def get_derived_bases_set(self) -> set:
        from returnn.tensor.dim_compare import derived_bases_set
        return derived_bases_set(self)

    def is_dynamic_seq_length(self) -> bool:
        return self.is_dynamic()

    def can_be_used_as_dim(self) -> bool:
        return True

    def need_masking(self) -> bool:
        """A dynamic axis has padded frames to mask."""
        return self.is_dynamic()

    def is_constant_static_dim(self) -> bool:
        """RETURNN: a static dim made from an int by dim math (``time - time``, see dim_match.constant)."""
        return bool(getattr(self, "_constant", False))

    def get_dim_value(self) -> int:
        """The static size (RETURNN also gives a dynamic one's maximum as a tensor; here that is the value's
        shape: ``tf.shape(x.placeholder)[axis]``)."""
        if self.dimension is None:
            raise ValueError("%s: get_dim_value of a dynamic dim has no number here; take tf.shape of the value"
                             % self.short_repr())
        return self.dimension

    @classmethod
    def get_existing_tag_from_collection(cls, other: "Dim", tags: Any, is_equal_opts: Any = None) -> Optional["Dim"]:
        from returnn.tensor.dim_compare import existing_tag_from_collection
        return existing_tag_from_collection(other, list(tags), is_equal_opts)

    @classmethod
    def get_all_dimension_tags(cls, data_list: Any, is_equal_opts: Any = None, unique_separate_axes: bool = True):
        from returnn.tensor.dim_compare import all_dimension_tags
        return all_dimension_tags(data_list, is_equal_opts, unique_separate_axes)

    @classmethod
    def get_uniq_collection(cls, tags: Any, is_equal_opts: Any = None) -> List["Dim"]:
        from returnn.tensor.dim_compare import uniq_collection
        return uniq_collection(tags, is_equal_opts)


batch_dim = Dim(None, kind=DimTypes.Batch, description="batch")
single_step_dim = Dim(1, kind=DimTypes.Spatial, description="single-step")
"""RETURNN's marker of one step of a loop (``axis=single_step_dim``)."""

DimensionTag = Dim
"""RETURNN's old name of :class:`Dim` (``DimensionTag(kind=DimensionTag.Types.Spatial, description="time")``)."""


def SpatialDim(description: str, dimension: Optional[int] = None, **kwargs) -> Dim:  # noqa: N802 (RETURNN name)
    """A spatial dim (dynamic by default), as RETURNN's ``SpatialDim``."""
    return Dim(dimension, kind=DimTypes.Spatial, description=description, **kwargs)


def FeatureDim(description: str, dimension: Optional[int], **kwargs) -> Dim:  # noqa: N802 (RETURNN name)
    """A feature dim, as RETURNN's ``FeatureDim``."""
    return Dim(dimension, kind=DimTypes.Feature, description=description, **kwargs)
