"""The progress bar and the time-left estimate, shared by training output and the data tools."""
from __future__ import annotations


def remaining_seconds(elapsed: float, fraction: float) -> float:
    """Expected time left when ``fraction`` (0..1) of the work took ``elapsed`` seconds, assuming
    the rest goes at the same pace (0 before anything is done)."""
    return elapsed / fraction - elapsed if fraction > 0 else 0.0


def bar(fraction: float, width: int = 30) -> str:
    """``[#########.....]``: ``fraction`` (clipped to 0..1) of ``width`` cells filled."""
    filled = int(round(width * min(1.0, max(0.0, fraction))))
    return "[%s%s]" % ("#" * filled, "." * (width - filled))
