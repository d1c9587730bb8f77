#!/usr/bin/env python3
"""Plots a learning-rate file: train/dev scores, train/dev errors and the learning rate per epoch.

    tools/plot-learning-curves.py LEARNING_RATE_FILE [-o out.png] [--title TEXT]

Headless (matplotlib's Agg backend). The default output is the input path with ``.png`` instead of
its extension (``newbob.data`` -> ``newbob.png``), next to the input file. Any format matplotlib
knows is chosen by the output's extension (``.pdf``, ``.svg``).
"""
from __future__ import annotations

import argparse
import io
import math
import os
import sys
from typing import Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from returnn.util.environment import ensure_packages  # noqa: E402

ensure_packages(("matplotlib",), "tools/plot-learning-curves.py")

from returnn.errors import ConfigError, ReturnnError, RuntimeFailure  # noqa: E402
from returnn.learning_rate_file import EpochData, read_learning_rate_file  # noqa: E402
from returnn.util.safe_files import atomic_write_bytes  # noqa: E402

Curve = List[Tuple[int, float]]


def default_output(path: str) -> str:
    """``dir/newbob.data`` -> ``dir/newbob.png``."""
    base = os.path.splitext(path)[0]
    return (base if base else path) + ".png"


def _key_order(key: str) -> Tuple[int, str]:
    """train first, then dev, then the rest (devtrain, eval, ...), alphabetically within."""
    if key.startswith("train"):
        return 0, key
    if key.startswith("dev_") or key == "dev":
        return 1, key
    return 2, key


def collect_curves(epochs: Dict[int, EpochData]) -> Tuple[Curve, Dict[str, Curve], Dict[str, Curve]]:
    """(learning rate per epoch, score curves, error curves); non-finite values are left out."""
    lrs: Curve = []
    scores: Dict[str, Curve] = {}
    errors: Dict[str, Curve] = {}
    for epoch in sorted(epochs):
        data = epochs[epoch]
        if math.isfinite(data.learning_rate):
            lrs.append((epoch, data.learning_rate))
        for key, value in data.error.items():
            if not math.isfinite(float(value)):
                continue
            target = errors if "error" in key else scores
            target.setdefault(key, []).append((epoch, float(value)))
    order = lambda d: {k: d[k] for k in sorted(d, key=_key_order)}  # noqa: E731
    return lrs, order(scores), order(errors)


def best_epochs(curves: Dict[str, Curve]) -> List[str]:
    """'key: best value at epoch N' for each dev curve (lower is better)."""
    lines = []
    for key, curve in curves.items():
        if key.startswith("dev") and curve:
            epoch, value = min(curve, key=lambda p: (p[1], p[0]))
            lines.append("best %s: %.6g at epoch %i" % (key, value, epoch))
    return lines


def plot(path: str, out: str, title: Optional[str] = None) -> Tuple[int, Dict[str, Curve], Dict[str, Curve]]:
    """Reads the learning-rate file ``path`` and writes the figure ``out``.

    Returns (number of epochs, score curves, error curves) for the summary."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    epochs = read_learning_rate_file(path)
    if not epochs:
        raise ConfigError("%s: no epochs in the learning-rate file" % path)
    lrs, scores, errors = collect_curves(epochs)
    panels = [("score", scores)] + ([("error", errors)] if errors else []) + [("learning rate", None)]
    fig, axes = plt.subplots(len(panels), 1, sharex=True, figsize=(8, 2.8 * len(panels)), squeeze=False)
    for ax, (label, curves) in zip(axes[:, 0], panels):
        if curves is None:
            xs, ys = zip(*lrs) if lrs else ((), ())
            ax.plot(xs, ys, marker=".", color="tab:green", label="learning rate")
            if ys and min(ys) > 0:
                ax.set_yscale("log")
        else:
            for key, curve in curves.items():
                xs, ys = zip(*curve)
                ax.plot(xs, ys, marker=".", linestyle="-" if key.startswith("train") else "--", label=key)
            if not curves:
                ax.text(0.5, 0.5, "no scores yet", ha="center", va="center", transform=ax.transAxes)
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="small", loc="best")
    bottom = axes[-1, 0]
    bottom.set_xlabel("epoch")
    bottom.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes[0, 0].set_title(title if title is not None else os.path.basename(path))
    fig.tight_layout()
    image = io.BytesIO()
    fig.savefig(image, dpi=100, format=os.path.splitext(out)[1][1:].lower() or "png")
    plt.close(fig)
    from returnn.util.output_guard import remove_stale_temp_files
    remove_stale_temp_files(out)  # <out>.tmp-<pid> of a killed run of this tool
    try:
        atomic_write_bytes(out, image.getvalue())  # via a new temporary file: never through a symbolic link
    except OSError as exc:
        from returnn.errors import output_write_error
        from returnn.util.safe_files import UnsafePathError
        if isinstance(exc, UnsafePathError):
            raise
        raise output_write_error(out, exc, "output file") from None  # a full disk: naming the file, exit 1
    return len(epochs), scores, errors


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Command line; returns the exit status (2 for an unreadable input)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("file", help="learning-rate file (learning_rate_file of the config)")
    p.add_argument("-o", "--output", help="output image (default: input path with .png)")
    p.add_argument("--title", help="figure title (default: the file name)")
    args = p.parse_args(argv)
    out = args.output or default_output(args.file)
    try:
        num_epochs, scores, errors = plot(args.file, out, args.title)
    except (ReturnnError, RuntimeFailure, OSError) as exc:
        print("error: %s" % exc, file=sys.stderr)
        return int(getattr(exc, "exit_code", 2))  # a write that failed (full disk): 1, bad input: 2
    print("wrote %s (%i epochs, %i score and %i error curves)" % (out, num_epochs, len(scores), len(errors)))
    for line in best_epochs(scores) + best_epochs(errors):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
