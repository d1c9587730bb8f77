#!/usr/bin/env python3
"""Per layer family: how far this engine's outputs are from real RETURNN's on the golden cases
(tests/data/returnn_goldens/*.npz, written by tests/returnn_goldens/make_goldens.py with the same
parameters and inputs). Prints the number of cases and the largest absolute and relative
difference on real positions per family, and the largest overall; a case that fails its checks
(names, shapes, sizes) is listed with the reason.

Usage: python benchmarks/returnn_goldens_report.py
"""
from __future__ import annotations

import os
import sys
from typing import Dict, List, Tuple

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "tests"))


def main() -> int:
    from test_returnn_goldens import FILES, real_outputs
    families: Dict[str, List[Tuple[str, float, float]]] = {}
    failed = []
    for path in FILES:
        try:
            meta, ours, gold, _ = real_outputs(path)
        except Exception as exc:  # noqa: BLE001 - reported per case
            failed.append((path.stem, "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0][:150])))
            continue
        wide = np.complex128 if np.iscomplexobj(gold) else np.float64  # complex outputs (stft): |complex difference|
        diff = np.abs(ours.astype(wide) - gold.astype(wide))
        rel = diff / np.maximum(np.abs(gold.astype(wide)), 1e-6)
        families.setdefault(meta["family"], []).append(
            (path.stem, float(diff.max(initial=0.0)), float(rel.max(initial=0.0))))
    print("%-24s %5s  %-12s %-12s  %s" % ("family", "cases", "max |diff|", "max rel", "worst case"))
    overall = (0.0, "")
    for family, cases in sorted(families.items()):
        worst = max(cases, key=lambda c: c[1])
        print("%-24s %5i  %-12.3g %-12.3g  %s" % (family, len(cases), worst[1], max(c[2] for c in cases), worst[0]))
        overall = max(overall, (worst[1], worst[0]))
    print("\n%i families, %i cases compared; largest absolute difference %.3g (%s)"
          % (len(families), sum(map(len, families.values())), overall[0], overall[1]))
    for name, reason in failed:
        print("FAILED %s: %s" % (name, reason))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
