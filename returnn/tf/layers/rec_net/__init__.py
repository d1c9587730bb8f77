"""Machinery of ``rec`` layers whose ``unit`` is a layer dict (a sub-network run once per step).

- :mod:`.deps`: references between sub-layers (``prev:``, ``base:``, ``data:``, ``:i``), checks of
  the unit dict, and the split into layers run per step vs. once over the whole sequence.
"""
