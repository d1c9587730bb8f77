#!/usr/bin/env python3
"""Prints the sequences of a dataset, or per-key statistics.

Usage: tools/dump-dataset.py CONFIG_OR_DATASET [--epoch E] [--startseq N] [--endseq M] [--stats]

CONFIG_OR_DATASET is a config file (its ``train`` dataset), a ``{...}`` dict literal, or a
comma-separated list of HDF files. ``--endseq`` is inclusive; -1 means the last sequence (default:
9 when printing sequences, -1 with ``--stats``). Errors are printed as one line, exit code 2.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Dict, List, Optional, TextIO

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from returnn.util.environment import ensure_packages  # noqa: E402

ensure_packages(("numpy", "h5py"), "tools/dump-dataset.py")

import numpy as np  # noqa: E402

from returnn.errors import ReturnnError  # noqa: E402


def format_values(arr: np.ndarray, max_values: int) -> str:
    """The first ``max_values`` entries of ``arr`` (flattened), with '...' if there are more."""
    flat = arr.reshape(-1)
    shown = " ".join(("%.4g" % v) if arr.dtype.kind == "f" else str(v) for v in flat[:max_values].tolist())
    return "[%s%s]" % (shown, " ..." if flat.size > max_values else "")


def print_seqs(dataset, start: int, end: int, max_values: int, out: TextIO) -> None:
    """One block per sequence: tag, then per key its shape, dtype and first values."""
    keys = dataset.get_data_keys()
    for begin in range(start, end + 1, 64):
        idx = list(range(begin, min(end, begin + 63) + 1))
        for i, seq in zip(idx, dataset.get_seqs(idx)):
            print("seq %i/%i tag=%r" % (i, dataset.num_seqs, dataset.get_tag(i)), file=out)
            for key in keys:
                arr = np.asarray(seq[key])
                print("  %s: shape %s %s %s" % (key, arr.shape, arr.dtype, format_values(arr, max_values)), file=out)


class KeyStats:
    """Streaming statistics of one data key."""

    def __init__(self, key: str, dim: int, sparse: bool):
        self.key, self.dim, self.sparse = key, dim, sparse
        self.seqs = 0
        self.frames = 0
        self.min_len: Optional[int] = None
        self.max_len = 0
        self.sum: Optional[np.ndarray] = None
        self.sum_sq: Optional[np.ndarray] = None
        self.hist = np.zeros((max(dim, 0),), dtype=np.int64)

    def add(self, arr: np.ndarray) -> None:
        """Adds one sequence."""
        n = int(arr.shape[0])
        self.seqs += 1
        self.frames += n
        self.min_len = n if self.min_len is None else min(self.min_len, n)
        self.max_len = max(self.max_len, n)
        if self.sparse:
            if n:
                counts = np.bincount(arr.astype(np.int64).reshape(-1), minlength=len(self.hist))
                if len(counts) > len(self.hist):
                    self.hist = np.concatenate([self.hist, np.zeros(len(counts) - len(self.hist), np.int64)])
                self.hist[:len(counts)] += counts
        else:
            flat = arr.reshape(n, -1).astype(np.float64)
            if self.sum is None:
                self.sum, self.sum_sq = np.zeros(flat.shape[1]), np.zeros(flat.shape[1])
            self.sum += flat.sum(axis=0)
            self.sum_sq += (flat * flat).sum(axis=0)

    def lines(self) -> List[str]:
        """Human-readable summary lines."""
        out = ["%s: %i seqs, %i frames, length min %s max %i mean %.2f"
               % (self.key, self.seqs, self.frames, self.min_len, self.max_len, self.frames / max(self.seqs, 1))]
        if self.sparse:
            seen = int(np.count_nonzero(self.hist))
            top = np.argsort(-self.hist, kind="stable")[:5]
            out.append("  sparse, dim %i: %i distinct classes seen; most frequent: %s"
                       % (self.dim, seen, ", ".join("%i (%i)" % (c, self.hist[c]) for c in top if self.hist[c])))
        elif self.sum is not None and self.frames:
            mean = self.sum / self.frames
            std = np.sqrt(np.maximum(self.sum_sq / self.frames - mean * mean, 0.0))
            total_mean = self.sum.sum() / (self.frames * len(self.sum))
            total_std = np.sqrt(max(self.sum_sq.sum() / (self.frames * len(self.sum)) - total_mean ** 2, 0.0))
            out.append("  dense, dim %i: mean %.6g std %.6g (over all features)" % (self.dim, total_mean, total_std))
            out.append("  per-feature mean %s" % format_values(mean, 8))
            out.append("  per-feature std  %s" % format_values(std, 8))
        return out


def print_stats(dataset, start: int, end: int, out: TextIO) -> Dict[str, KeyStats]:
    """Reads sequences ``start .. end`` and prints statistics per key."""
    keys = dataset.get_data_keys()
    stats = {k: KeyStats(k, dataset.get_data_dim(k), dataset.is_data_sparse(k)) for k in keys}
    for begin in range(start, end + 1, 64):
        idx = list(range(begin, min(end, begin + 63) + 1))
        for seq in dataset.get_seqs(idx):
            for key in keys:
                stats[key].add(np.asarray(seq[key]))
    print("dataset %s, epoch %s: sequences %i..%i of %i" % (dataset.name, dataset.epoch, start, end, dataset.num_seqs),
          file=out)
    for key in keys:
        for line in stats[key].lines():
            print(line, file=out)
    return stats


def main(argv: Optional[List[str]] = None) -> int:
    """Command-line entry point; returns the exit code."""
    parser = argparse.ArgumentParser(description="Print the sequences of a dataset or statistics.")
    parser.add_argument("dataset", help="config file, {...} dataset dict, or comma-separated HDF files")
    parser.add_argument("--dataset", dest="which", default="train",
                        help="with a config: which dataset (train, dev, eval, or a name in eval_datasets)")
    parser.add_argument("--epoch", type=int, default=1)
    parser.add_argument("--startseq", type=int, default=0)
    parser.add_argument("--endseq", type=int, default=None, help="last sequence, inclusive; -1 = all")
    parser.add_argument("--stats", action="store_true", help="print per-key statistics instead of sequences")
    parser.add_argument("--max_values", type=int, default=10, help="values shown per key")
    args = parser.parse_args(argv)
    from returnn.datasets.from_cli import dataset_from_cli_arg
    try:
        dataset, _ = dataset_from_cli_arg(args.dataset, args.which)
        try:
            dataset.init_seq_order(args.epoch)
            end_seq = args.endseq if args.endseq is not None else (-1 if args.stats else 9)
            end = dataset.num_seqs - 1 if end_seq < 0 else min(end_seq, dataset.num_seqs - 1)
            start = max(0, args.startseq)
            if args.stats:
                print_stats(dataset, start, end, sys.stdout)
            else:
                print_seqs(dataset, start, end, args.max_values, sys.stdout)
        finally:
            dataset.close()
    except ReturnnError as exc:
        print("dump-dataset: error: %s" % exc, file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:  # Ctrl-C: a read-only tool, nothing to clean up; one line, no traceback
        print("dump-dataset: interrupted (SIGINT)", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
