"""RETURNN's ``NotSpecified``: the default of an option that tells "not given" apart from None."""
from typing import Any


class _NotSpecified:
    def __repr__(self) -> str:
        return "NotSpecified"


NotSpecified: Any = _NotSpecified()
