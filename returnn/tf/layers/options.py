"""Layer options, declared once: name, default, one line of doc.

A layer class lists its own options in ``options``; :func:`declared_options` collects them over
the class hierarchy (base class first). Unknown options, help texts and docs are derived from
these declarations. Value checks shared by many layers live here too, each raising a one-line
:class:`NetworkError` naming the layer.

No option is accepted and ignored (tests/test_option_audit.py checks it). Each declared option
either has its RETURNN effect (the layer's code reads it), or is declared with

- ``only=(v, ...)``: only these values are accepted (RETURNN's default, or values that give the
  same result here); any other value is refused in one line by :func:`check_unknown`, which the
  base layer calls before anything else; or
- ``noop="why"``: it is read nowhere *because* the result is the same here whatever its value
  (e.g. a device placement, or a speed-only switch of RETURNN's); the reason says why.
"""
from __future__ import annotations

import difflib
from typing import Any, Dict, NamedTuple, Optional, Sequence, Tuple

from returnn.errors import NetworkError


class Option(NamedTuple):
    """One layer option: ``name``, its ``default`` and a one-line ``doc``; ``only``: the values
    accepted (others are refused); ``noop``: why the option changes nothing here (then no code
    reads it)."""

    name: str
    default: Any
    doc: str
    only: Optional[Tuple[Any, ...]] = None
    noop: Optional[str] = None

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` is allowed by ``only`` (always, without ``only``)."""
        return self.only is None or any(_same_value(value, v) for v in self.only)


def _same_value(a: Any, b: Any) -> bool:
    """Equality of option values without bool/number confusion (True is not 1 here)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    try:
        return bool(a == b)
    except Exception:  # e.g. arrays: no single truth value
        return False


def declared_options(cls: type) -> Dict[str, Option]:
    """All options of a layer class, base classes first."""
    out: Dict[str, Option] = {}
    for klass in reversed(cls.__mro__):
        for opt in klass.__dict__.get("options", ()):
            out[opt.name] = opt
    return out


def check_unknown(layer_desc: str, opts: Dict[str, Any], known: Dict[str, Option]) -> None:
    """Error for options not in ``known``, with close matches suggested; then for values an option
    with ``only`` does not accept (one line naming the layer, the option and the accepted values)."""
    unknown = sorted(set(opts) - set(known))
    if not unknown:
        for name, value in opts.items():
            if not known[name].accepts(value):
                raise NetworkError(refusal(layer_desc, known[name], value))
        return
    hints = []
    for name in unknown:
        close = difflib.get_close_matches(name, list(known), n=1)
        hints.append("%r%s" % (name, " (did you mean %r?)" % close[0] if close else ""))
    raise NetworkError("%s: unknown option(s) %s" % (layer_desc, ", ".join(hints)))


def refusal(layer_desc: str, opt: Option, value: Any) -> str:
    """The one line refusing ``value`` for ``opt`` (an option with ``only``)."""
    return "%s: option %r = %r is not supported here (only %s): %s" % (
        layer_desc, opt.name, value, " or ".join(map(repr, opt.only or ())), opt.doc)


def options_help(cls: type) -> str:
    """One line per option: ``name (default): doc`` (and the accepted values, or why it changes nothing)."""
    def line(o: Option) -> str:
        extra = (" [only %s]" % ", ".join(map(repr, o.only)) if o.only is not None else "") + \
            (" [no effect here: %s]" % o.noop if o.noop else "")
        return "%s (default %r): %s%s" % (o.name, o.default, o.doc, extra)
    return "\n".join(line(o) for o in declared_options(cls).values())


def positive_int(layer_desc: str, key: str, value: Any, limit: int = 2 ** 31 - 1) -> int:
    """An int in ``1..limit`` (no bools, no floats)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
        raise NetworkError("%s: %r must be an int in 1..%i, got %r" % (layer_desc, key, limit, value))
    return value


def optional_positive_int(layer_desc: str, key: str, value: Any) -> Optional[int]:
    return None if value is None else positive_int(layer_desc, key, value)


def rate(layer_desc: str, key: str, value: Any) -> float:
    """A probability in ``[0, 1)`` (e.g. dropout); None counts as 0."""
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) < 1.0:
        raise NetworkError("%s: %r must be a number in [0, 1), got %r" % (layer_desc, key, value))
    return float(value)


def non_negative(layer_desc: str, key: str, value: Any) -> float:
    """A number >= 0; None counts as 0."""
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not float(value) >= 0.0:
        raise NetworkError("%s: %r must be a number >= 0, got %r" % (layer_desc, key, value))
    return float(value)


def one_of(layer_desc: str, key: str, value: Any, choices) -> Any:
    if value not in choices:
        raise NetworkError("%s: %r must be one of %s, got %r" % (layer_desc, key, ", ".join(map(repr, choices)), value))
    return value


def constant_fits(layer_desc: str, key: str, value: Any, dtype: str) -> None:
    """RETURNN puts a Python number option into a tensor of the data's dtype (``tf.constant(value,
    dtype)``, ``value + x``): TensorFlow refuses a float for integer or bool data, even 0.0."""
    if isinstance(value, float) and (dtype.startswith(("int", "uint")) or dtype == "bool"):
        raise NetworkError("%s: %r %r is a float but the data is %s (RETURNN: TensorFlow cannot convert it; give an "
                           "int)" % (layer_desc, key, value, dtype))


def check_in_dim(desc: str, in_dim: Any, sources: Sequence[Any]) -> None:
    """RETURNN's LayerBase ``in_dim``: the input's feature dim (RETURNN makes another axis the feature axis; here
    that is one line)."""
    if not sources or not any(d is not None and d == in_dim for d in (sources[0].feature_dim, sources[0].sparse_dim)):
        raise NetworkError("%s: 'in_dim' %r must be the feature dim of the input here, got %s"
                           % (desc, in_dim, [s.short_repr() for s in sources[:1]]))
