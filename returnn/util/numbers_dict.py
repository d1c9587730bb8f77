"""``NumbersDict``: numbers per data key with an optional broadcast value (RETURNN's semantics).

``NumbersDict({"data": 3, "classes": 2}) + 1`` adds 1 to each; a key missing on one side counts
as 0 in sums and 1 in products; ``d["other"]`` falls back to the broadcast value. Configs use it
for per-key ``max_seq_length`` and batch sizes.
"""
from __future__ import annotations

import operator
from typing import Any, Callable, Dict, Iterable, List, Optional


class NumbersDict:
    """Per-key numbers plus an optional broadcast ``value``."""

    def __init__(self, auto_convert: Any = None, numbers_dict: Optional[Dict[str, Any]] = None,
                 broadcast_value: Any = None):
        if isinstance(auto_convert, NumbersDict):
            numbers_dict, broadcast_value = auto_convert.dict, auto_convert.value
        elif isinstance(auto_convert, dict):
            numbers_dict = auto_convert
        elif auto_convert is not None:
            broadcast_value = auto_convert
        self.dict: Dict[str, Any] = dict(numbers_dict or {})
        self.value = broadcast_value

    @classmethod
    def constant_like(cls, number: Any, other: "NumbersDict") -> "NumbersDict":
        """``number`` for every key of ``other`` (and as broadcast value if ``other`` has one)."""
        return cls(numbers_dict={k: number for k in other.dict},
                   broadcast_value=number if other.value is not None else None)

    def copy(self) -> "NumbersDict":
        return NumbersDict(self)

    # ---- dict access
    def __getitem__(self, key: str) -> Any:
        if self.value is not None:
            return self.dict.get(key, self.value)
        return self.dict[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.dict[key] = value

    def __delitem__(self, key: str) -> None:
        del self.dict[key]

    def __contains__(self, key: str) -> bool:
        return key in self.dict

    def get(self, key: str, default: Any = None) -> Any:
        return self.dict.get(key, self.value if self.value is not None else default)

    def keys(self) -> Iterable[str]:
        return self.dict.keys()

    def items(self):
        return self.dict.items()

    def values(self) -> List[Any]:
        """The per-key values, then the broadcast value if set."""
        return list(self.dict.values()) + ([self.value] if self.value is not None else [])

    def has_values(self) -> bool:
        return bool(self.dict) or self.value is not None

    # ---- arithmetic
    @classmethod
    def _bin_op(cls, a: Any, b: Any, op: Callable[[Any, Any], Any], zero: Any) -> "NumbersDict":
        if not isinstance(a, NumbersDict):
            a = cls.constant_like(a, b) if isinstance(b, NumbersDict) else cls(a)
        if not isinstance(b, NumbersDict):
            b = cls.constant_like(b, a)

        def scalar(x: Any, y: Any) -> Any:
            if x is None and y is None:
                return None
            return op(zero if x is None else x, zero if y is None else y)

        keys = list(a.dict) + [k for k in b.dict if k not in a.dict]
        return cls(numbers_dict={k: scalar(a.get(k), b.get(k)) for k in keys},
                   broadcast_value=scalar(a.value, b.value))

    def __add__(self, other):
        return self._bin_op(self, other, operator.add, 0)

    __radd__ = __add__

    def __sub__(self, other):
        return self._bin_op(self, other, operator.sub, 0)

    def __rsub__(self, other):
        return self._bin_op(other, self, operator.sub, 0)

    def __mul__(self, other):
        return self._bin_op(self, other, operator.mul, 1)

    __rmul__ = __mul__

    def __truediv__(self, other):
        return self._bin_op(self, other, operator.truediv, 1)

    def __floordiv__(self, other):
        return self._bin_op(self, other, operator.floordiv, 1)

    def __neg__(self):
        return NumbersDict(numbers_dict={k: -v for k, v in self.dict.items()},
                           broadcast_value=-self.value if self.value is not None else None)

    def __bool__(self) -> bool:
        return any(self.values())

    @staticmethod
    def _other(other, like: "NumbersDict") -> "NumbersDict":
        """``other`` as a NumbersDict: a dict per key, a number for every key of ``like``."""
        if isinstance(other, NumbersDict):
            return other
        return NumbersDict(other) if isinstance(other, dict) else NumbersDict.constant_like(other, like)

    def __eq__(self, other) -> bool:
        other = self._other(other, self)
        keys = set(self.dict) | set(other.dict)
        if any(self.get(k) != other.get(k) for k in keys):
            return False
        return self.value == other.value or self.value is None or other.value is None

    def _any_compare(self, other, cmp: Callable[[Any, Any], bool]) -> bool:
        other = self._other(other, self)
        pairs = [(self.get(k), other.get(k)) for k in set(self.dict) | set(other.dict)] + [(self.value, other.value)]
        return any(a is not None and b is not None and cmp(a, b) for a, b in pairs)

    def any_compare(self, other, cmp: Callable[[Any, Any], bool]) -> bool:
        """Whether ``cmp`` holds for any key both sides have."""
        return self._any_compare(other, cmp)

    def __gt__(self, other) -> bool:
        return self._any_compare(other, operator.gt)

    def __ge__(self, other) -> bool:
        return self._any_compare(other, operator.ge)

    def __lt__(self, other) -> bool:
        return self._any_compare(other, operator.lt)

    def __le__(self, other) -> bool:
        return self._any_compare(other, operator.le)

    __hash__ = None  # mutable

    @classmethod
    def max(cls, items: List[Any]) -> "NumbersDict":
        """Element-wise maximum."""
        result = cls(items[0])
        for item in items[1:]:
            result = cls._bin_op(result, item, lambda x, y: y if x is None else x if y is None else max(x, y), None)
        return result

    @classmethod
    def min(cls, items: List[Any]) -> "NumbersDict":
        """Element-wise minimum."""
        result = cls(items[0])
        for item in items[1:]:
            result = cls._bin_op(result, item, lambda x, y: y if x is None else x if y is None else min(x, y), None)
        return result

    def max_value(self) -> Any:
        return max(self.values())

    def min_value(self) -> Any:
        return min(self.values())

    def __repr__(self) -> str:
        if self.value is None:
            return "NumbersDict(%r)" % self.dict
        if not self.dict:
            return "NumbersDict(%r)" % self.value
        return "NumbersDict(numbers_dict=%r, broadcast_value=%r)" % (self.dict, self.value)
