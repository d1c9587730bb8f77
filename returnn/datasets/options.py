"""Typed dataset options: a value of the wrong type is one DataError naming the dataset and the
option (``dataset train (HDFDataset): option 'partition_epoch' must be an integer, got 'abc'``)."""
from __future__ import annotations

import numbers
from typing import Any, Optional

from returnn.errors import DataError
from returnn.util.basic import parse_size


def int_option(owner: str, key: str, value: Any, minimum: Optional[int] = None) -> int:
    """``value`` as an int (integral floats and digit strings too), at least ``minimum``."""
    result: Optional[int] = None
    if isinstance(value, bool):
        result = None
    elif isinstance(value, numbers.Integral):
        result = int(value)
    elif isinstance(value, numbers.Real) and float(value).is_integer():
        result = int(value)
    elif isinstance(value, str):
        try:
            result = int(value.strip())
        except ValueError:
            result = None
    if result is None:
        raise DataError("%s: option %r must be an integer, got %r" % (owner, key, value))
    if minimum is not None and result < minimum:
        raise DataError("%s: option %r must be >= %i, got %r" % (owner, key, minimum, value))
    return result


def optional_int_option(owner: str, key: str, value: Any, minimum: Optional[int] = None) -> Optional[int]:
    """Like :func:`int_option`, but None stays None."""
    return None if value is None else int_option(owner, key, value, minimum)


def str_option(owner: str, key: str, value: Any) -> str:
    """``value`` must be a string."""
    if not isinstance(value, str):
        raise DataError("%s: option %r must be a string, got %r" % (owner, key, value))
    return value


def size_option(owner: str, key: str, value: Any) -> int:
    """A RETURNN size (``0``, ``"512M"``, ``"10G"``, ``-1``) in bytes."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, str)):
        raise DataError("%s: option %r must be a size like 0, '512M' or '10G', got %r" % (owner, key, value))
    try:
        return parse_size(value)
    except (ValueError, OverflowError):
        raise DataError("%s: option %r must be a size like 0, '512M' or '10G', got %r" % (owner, key, value))
