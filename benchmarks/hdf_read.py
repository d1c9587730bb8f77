#!/usr/bin/env python3
"""Benchmark: HDFDataset streaming reads (cache_size=0) against a plain h5py loop.

Creates once (cached under ``--dir``) a synthetic file: ``--num_seqs`` sequences (default 200k)
of 40-dim float32 features in ``/inputs`` and sparse int32 ``classes`` (about 2.1 GB by default),
written with :class:`SimpleHDFWriter` (resizable, chunked datasets, as RETURNN's writer makes them)
or, with ``--layout contiguous``, with :func:`dump_dataset_to_hdf` (fixed-size datasets).

Then it prints: time to open the dataset (index only), sequences/s and MB/s reading one epoch
in random order through ``get_seqs`` in groups of ``--batch_seqs`` epoch indices (as the engine
reads), the same for a plain h5py loop over the same slices, their ratio, and the peak RSS growth.
Targets: ratio >= 0.8, RSS growth < 200 MB, open < 2 s.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from typing import Dict, List

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402


def proc_status_kb(field: str) -> int:
    """A ``kB`` field of /proc/self/status (VmRSS, VmHWM), or 0 where unavailable."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def reset_peak_rss() -> bool:
    """Resets VmHWM to the current RSS (Linux >= 4.0); False if not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def bench_path(args: argparse.Namespace) -> str:
    return os.path.join(args.dir, "hdf-bench-%s-n%i-d%i-t%i.hdf" % (args.layout, args.num_seqs, args.dim, args.mean_len))


def seq_lengths(num_seqs: int, mean_len: int, seed: int = 0) -> np.ndarray:
    """Sequence lengths uniform in [mean_len/2, 3*mean_len/2]."""
    rng = np.random.RandomState(seed)
    return rng.randint(max(1, mean_len // 2), mean_len + mean_len // 2 + 1, size=(num_seqs,))


def generate(args: argparse.Namespace, path: str) -> None:
    """Writes the synthetic file (run in a child process so the parent's peak RSS stays clean)."""
    from returnn.datasets.hdf import SimpleHDFWriter, dump_dataset_to_hdf
    lens = seq_lengths(args.num_seqs, args.mean_len)
    rng = np.random.default_rng(1)
    start = time.monotonic()
    if args.layout == "contiguous":
        from returnn.datasets.base import DataInfo, Dataset

        class Synthetic(Dataset):
            """Generates sequence i deterministically from i."""

            def data_infos(self) -> Dict[str, DataInfo]:
                return {"data": DataInfo(args.dim, False, "float32"), "classes": DataInfo(500, True, "int32")}

            def _corpus_num_seqs(self) -> int:
                return len(lens)

            def _corpus_seq_lengths(self) -> np.ndarray:
                return np.stack([lens, lens], axis=1)

            def _corpus_load(self, idx: List[int]) -> List[Dict[str, np.ndarray]]:
                return [{"data": rng.standard_normal((lens[i], args.dim), dtype=np.float32),
                         "classes": rng.integers(0, 500, size=(lens[i],), dtype=np.int32)} for i in idx]

        dump_dataset_to_hdf(Synthetic(), path)
    else:
        writer = SimpleHDFWriter(path, dim=args.dim, extra_type={"classes": (500, 1, "int32")})
        for b in range(0, len(lens), 1000):
            blens = lens[b:b + 1000]
            t_max = int(blens.max())
            feats = rng.standard_normal((len(blens), t_max, args.dim), dtype=np.float32)
            classes = rng.integers(0, 500, size=(len(blens), t_max), dtype=np.int32)
            writer.insert_batch(feats, blens, ["bench/%i" % i for i in range(b, b + len(blens))],
                                extra={"classes": classes})
        writer.close()
    print("created %s (%.2f GB) in %.1f s" % (path, os.path.getsize(path) / 1e9, time.monotonic() - start))


def warm_page_cache(path: str) -> None:
    """Reads the file once so both readers start from the same (cached) state."""
    with open(path, "rb", buffering=0) as f:
        while f.read(64 << 20):
            pass


def epoch_batches(order_len: int, batch_seqs: int) -> List[List[int]]:
    return [list(range(i, min(i + batch_seqs, order_len))) for i in range(0, order_len, batch_seqs)]


def bench_dataset(path: str, batch_seqs: int) -> Dict[str, float]:
    """Opens the dataset (timed) and reads one random-order epoch via get_seqs."""
    from returnn.datasets import init_dataset
    base_rss = proc_status_kb("VmRSS")
    reset_peak_rss()
    t0 = time.monotonic()
    ds = init_dataset({"class": "HDFDataset", "files": [path], "cache_size": "0", "seq_ordering": "random"})
    t_open = time.monotonic() - t0
    t0 = time.monotonic()
    ds.init_seq_order(1)
    t_order = time.monotonic() - t0
    nbytes = 0
    t0, c0 = time.monotonic(), time.process_time()
    for batch in epoch_batches(ds.num_seqs, batch_seqs):
        for seq in ds.get_seqs(batch):
            nbytes += seq["data"].nbytes + seq["classes"].nbytes
    t_read, c_read = time.monotonic() - t0, time.process_time() - c0
    order = ds.seq_order.copy()
    peak = proc_status_kb("VmHWM")
    ds.close()
    return {"open": t_open, "order": t_order, "read": t_read, "cpu": c_read, "bytes": nbytes, "seqs": len(order),
            "rss_growth_mb": (peak - base_rss) / 1024.0, "order_arr": order}


def bench_plain(path: str, order: np.ndarray, batch_seqs: int, **h5_options: int) -> Dict[str, float]:
    """The limit: plain h5py slicing of the same sequences in the same batches."""
    import h5py
    with h5py.File(path, "r", **h5_options) as f:
        lengths = f["seqLengths"][...].astype(np.int64)
        offsets = [np.concatenate([[0], np.cumsum(lengths[:, c])]).tolist() for c in (0, 1)]
        inputs, classes = f["inputs"], f["targets/data/classes"]
        nbytes = 0
        t0, c0 = time.monotonic(), time.process_time()
        for batch in epoch_batches(len(order), batch_seqs):
            for i in sorted(int(order[j]) for j in batch):
                a = inputs[offsets[0][i]:offsets[0][i + 1]]
                b = classes[offsets[1][i]:offsets[1][i + 1]]
                nbytes += a.nbytes + b.nbytes
        t_read, c_read = time.monotonic() - t0, time.process_time() - c0
    return {"read": t_read, "cpu": c_read, "bytes": nbytes, "seqs": len(order)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num_seqs", type=int, default=200000)
    parser.add_argument("--dim", type=int, default=40)
    parser.add_argument("--mean_len", type=int, default=64, help="mean frames per sequence")
    parser.add_argument("--batch_seqs", type=int, default=32, help="epoch indices per get_seqs call")
    parser.add_argument("--layout", choices=("chunked", "contiguous"), default="chunked")
    parser.add_argument("--dir", default="/tmp/returnn-hdf-bench")
    parser.add_argument("--repeat", type=int, default=2, help="interleaved repetitions; the best is shown")
    parser.add_argument("--_generate", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    path = bench_path(args)
    if args._generate:
        generate(args, path)
        return 0
    if not os.path.exists(path):
        subprocess.run([sys.executable, os.path.abspath(__file__), "--_generate"] + sys.argv[1:], check=True)
    print("file: %s, %.2f GB, %i sequences, layout %s" % (path, os.path.getsize(path) / 1e9, args.num_seqs,
                                                          args.layout))
    warm_page_cache(path)
    import h5py  # noqa: F401  (import cost is not part of the measurement)
    import returnn.datasets.hdf  # noqa: F401
    # Interleaved, best of --repeat: the machine may be shared, so single timings are noisy.
    runs: Dict[str, List[Dict[str, float]]] = {"ds": [], "plain": [], "plain0": []}
    for _ in range(args.repeat):
        runs["ds"].append(bench_dataset(path, args.batch_seqs))
        order = runs["ds"][0]["order_arr"]
        runs["plain"].append(bench_plain(path, order, args.batch_seqs))
        runs["plain0"].append(bench_plain(path, order, args.batch_seqs, rdcc_nbytes=0))
    ds, plain, plain0 = (min(runs[k], key=lambda r: r["read"]) for k in ("ds", "plain", "plain0"))
    cpu = {k: min(r["cpu"] for r in runs[k]) for k in runs}
    ds["open"] = min(r["open"] for r in runs["ds"])
    ds["rss_growth_mb"] = max(r["rss_growth_mb"] for r in runs["ds"])
    assert ds["bytes"] == plain["bytes"] == plain0["bytes"], "dataset and plain loop read different amounts"
    mb = ds["bytes"] / 1e6
    ds_rate, plain_rate = ds["seqs"] / ds["read"], plain["seqs"] / plain["read"]
    print("open dataset (index only): %.3f s   (init_seq_order random: %.3f s)" % (ds["open"], ds["order"]))
    print("HDFDataset cache_size=0:  %9.0f seqs/s  %8.1f MB/s  (%.1f s for %i seqs, %.0f MB)"
          % (ds_rate, mb / ds["read"], ds["read"], ds["seqs"], mb))
    print("plain h5py loop:          %9.0f seqs/s  %8.1f MB/s  (%.1f s)" % (plain_rate, mb / plain["read"],
                                                                         plain["read"]))
    plain0_rate = plain0["seqs"] / plain0["read"]
    print("plain h5py, no chunk cache: %7.0f seqs/s  %8.1f MB/s  (%.1f s; h5py.File(rdcc_nbytes=0), as HDFDataset "
          "opens unfiltered files)" % (plain0_rate, mb / plain0["read"], plain0["read"]))
    print("ratio dataset / plain:    %.2fx  (target >= 0.8x); vs plain without chunk cache: %.2fx"
          % (ds_rate / plain_rate, ds_rate / plain0_rate))
    print("CPU time per epoch (robust when the machine is busy): dataset %.1f s, plain %.1f s, plain without "
          "chunk cache %.1f s -> ratios %.2fx / %.2fx" % (cpu["ds"], cpu["plain"], cpu["plain0"],
                                                          cpu["plain"] / cpu["ds"], cpu["plain0"] / cpu["ds"]))
    print("peak RSS growth:          %.1f MB  (target < 200 MB)" % ds["rss_growth_mb"])
    print("open time target < 2 s:   %s" % ("ok" if ds["open"] < 2.0 else "MISSED"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
