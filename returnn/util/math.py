"""RETURNN's ``returnn.util.math`` as configs use it: schedules for ``dynamic_learning_rate`` and friends
(:class:`PiecewiseLinear`, :class:`StepFunction`) and two integer helpers."""
from __future__ import annotations

import bisect
from typing import Any, Dict, Optional, Union

import numpy as np

Number = Union[int, float]


def ceil_div(a: int, b: int) -> int:
    """``a / b`` rounded up (integers)."""
    return -(-a // b)


def next_power_of_two(n: int) -> int:
    """The smallest power of two that is at least ``n`` (1 for ``n`` <= 1)."""
    return 2 ** int(n - 1).bit_length()


class _Schedule:
    """A function of one number, given as a dict ``{x: y}``; called with it positionally, or as the keyword
    ``kw_name`` (other keywords an error unless ``ignore_other_kwargs``), as RETURNN's."""

    def __init__(self, values: Dict[Number, Any], *, kw_name: Optional[str] = None, ignore_other_kwargs: bool = False):
        if not values:
            raise ValueError("%s: no values given" % type(self).__name__)
        self.values = dict(values)
        self.keys = sorted(self.values)
        self.kw_name = kw_name
        self.ignore_other_kwargs = ignore_other_kwargs

    def __repr__(self) -> str:
        extra = "".join(", %s=%r" % kv for kv in (("kw_name", self.kw_name),
                                                   ("ignore_other_kwargs", self.ignore_other_kwargs)) if kv[1])
        return "%s(%r%s)" % (type(self).__name__, self.values, extra)

    def __getstate__(self) -> Dict[str, Any]:
        state: Dict[str, Any] = {"values": self.values}
        if self.kw_name is not None:
            state["kw_name"] = self.kw_name
        if self.ignore_other_kwargs:
            state["ignore_other_kwargs"] = True
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__init__(**state)

    def _argument(self, args: tuple, kwargs: Dict[str, Any]) -> Number:
        if self.kw_name:
            if args:
                raise TypeError("%r: takes no positional arguments, got %r" % (self, args))
            x = kwargs.pop(self.kw_name, None)
        elif len(args) != 1:
            raise TypeError("%r: takes one positional argument, got %r" % (self, args))
        else:
            x = args[0]
        if kwargs and not self.ignore_other_kwargs:
            raise TypeError("%r: unexpected keyword arguments %r" % (self, kwargs))
        if x is None:
            raise TypeError("%r: no argument given" % (self,))
        return x


class PiecewiseLinear(_Schedule):
    """Linear between the given points, constant beyond the first and the last (``numpy.interp``)."""

    def __call__(self, *args: Number, **kwargs: Any) -> Number:
        x = self._argument(args, kwargs)
        return np.interp(x, np.array(self.keys), np.array([self.values[k] for k in self.keys]))


class StepFunction(_Schedule):
    """The value of the nearest given point (on a tie, the lower one); the values can be anything."""

    def __call__(self, *args: Number, **kwargs: Any) -> Any:
        x = self._argument(args, kwargs)
        i = bisect.bisect_left(self.keys, x)  # keys[i] is the smallest key >= x
        if i >= len(self.keys) or (i > 0 and x - self.keys[i - 1] <= self.keys[i] - x):
            i -= 1
        return self.values[self.keys[i]]
