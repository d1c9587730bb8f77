"""Sanity check of a distributed set-up (MPI + Horovod), to run first on a new cluster.

Run it under the same launcher as the training, e.g.::

    mpirun -np 4 -H node1:2,node2:2 python3 tools/check-distributed.py

Every rank reports host, pid, its rank/size/local rank/local size as seen by MPI (mpi4py) and by
Horovod, Horovod's build flags, the visible GPUs and a timed allreduce (MPI and Horovod) whose
result is verified. Rank 0 prints a per-rank table and a final ``OK`` or ``PROBLEM`` line; the exit
status is non-zero when something is off. Horovod collectives are only entered after all ranks
agreed (via MPI) that Horovod imported and initialised, so a rank without Horovod cannot hang the
others; a watchdog aborts a rank that is stuck in one stage for longer than ``--timeout``.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import socket
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

def _load_sibling(name: str):
    """A module of this package by its path relative to this file (this file is also loaded by path, by
    tools/), e.g. ``check_net`` or ``../util/watchdog``."""
    spec = importlib.util.spec_from_file_location("returnn_check_" + os.path.basename(name),
                                                  os.path.join(os.path.dirname(os.path.abspath(__file__)), name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check_net = _load_sibling("check_net")
launcher_env = _load_sibling("../util/launcher_env").launcher_env  # the one launcher table

Info = Dict[str, Any]


def say(text: str) -> None:
    """``text`` and its newline to stdout in one write, flushed: mpirun forwards the ranks' output per
    write, so whole lines of different ranks (and nodes) never run into each other (``print`` under
    ``python -u`` writes the newline separately)."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def pin_threads() -> None:
    """One intra-op and one inter-op thread for TF and OpenMP (set before TF is imported)."""
    for var in ("OMP_NUM_THREADS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS"):
        os.environ[var] = "1"
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


class Watchdog(_load_sibling("../util/watchdog").Watchdog):
    """The engine's stall watchdog, per stage: aborts this process (exit 3) when one stage takes
    longer than ``timeout`` seconds (0 = never)."""

    def __init__(self, rank_hint: str, timeout: float):
        super().__init__(timeout, on_stall=self._abort, timeout_name="--timeout")
        self.rank_hint = rank_hint

    def _abort(self, message: str) -> None:  # noqa: ARG002
        sys.stderr.write("PROBLEM: %s stuck in stage %r for %.0fs (another rank failed or the network is blocked);"
                         " aborting\n" % (self.rank_hint, self.current_stage, self.timeout))
        sys.stderr.flush()
        os._exit(3)


def _time_allreduce(fn, repeats: int) -> Tuple[bool, List[float]]:
    """Runs ``fn`` (returns True when the result is right) once to warm up, then ``repeats`` times timed."""
    ok = bool(fn())
    times = []
    for _ in range(max(1, repeats)):
        start = time.perf_counter()
        ok = bool(fn()) and ok
        times.append(time.perf_counter() - start)
    return ok, times


def _mb_per_s(size_mb: float, times: Sequence[float]) -> float:
    """Throughput from the median time."""
    median = sorted(times)[len(times) // 2]
    return size_mb / median if median > 0 else float("inf")


def collect_mpi(comm, MPI, size_mb: float, repeats: int) -> Info:
    """MPI view of this rank plus a verified, timed MPI allreduce."""
    import numpy as np

    local = comm.Split_type(MPI.COMM_TYPE_SHARED)
    size, rank = comm.Get_size(), comm.Get_rank()
    env_size, env_rank, env_var = launcher_env()
    info: Info = {
        "host": socket.gethostname(), "pid": os.getpid(), "python": "%i.%i.%i" % sys.version_info[:3],
        "mpi_rank": rank, "mpi_size": size, "mpi_local_rank": local.Get_rank(), "mpi_local_size": local.Get_size(),
        "mpi_library": MPI.Get_library_version().strip("\0 \n").splitlines()[0],
        "mpi_thread_multiple": MPI.Query_thread() == MPI.THREAD_MULTIPLE,
        "launcher_var": env_var, "launcher_size": env_size, "launcher_rank": env_rank,
        "errors": [],
    }
    local.Free()
    count = max(1, int(size_mb * (1 << 20) / 4))
    send = np.full(count, rank + 1, dtype=np.float32)
    recv = np.empty_like(send)
    expected = size * (size + 1) / 2

    def run() -> bool:
        comm.Allreduce(send, recv, op=MPI.SUM)
        return bool(np.all(recv == expected))

    ok, times = _time_allreduce(run, repeats)
    info["mpi_allreduce_ok"] = ok
    info["mpi_allreduce_mbps"] = _mb_per_s(size_mb, times)
    return info


def import_frameworks(info: Info) -> Any:
    """Imports TensorFlow (1 thread) and Horovod; records versions and GPUs. Returns the hvd module or None."""
    try:
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
        info["tf_version"] = tf.__version__
        info["gpus"] = [d.name for d in tf.config.list_physical_devices("GPU")]
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        info["errors"].append("TensorFlow import failed: %s" % _one_line(exc))
        info["gpus"] = []
        return None
    try:
        import horovod
        import horovod.tensorflow as hvd
    except Exception as exc:  # noqa: BLE001
        info["hvd_error"] = _one_line(exc)
        return None
    info["hvd_version"] = getattr(horovod, "__version__", "?")
    info["hvd_built"] = {"mpi": bool(hvd.mpi_built()), "gloo": bool(hvd.gloo_built()),
                         "nccl": bool(hvd.nccl_built())}
    return hvd


def collect_horovod(hvd, info: Info, size_mb: float, repeats: int) -> None:
    """Horovod's view of this rank, a verified broadcast and a verified, timed Horovod allreduce."""
    import numpy as np
    import tensorflow as tf

    info.update({"hvd_rank": hvd.rank(), "hvd_size": hvd.size(), "hvd_local_rank": hvd.local_rank(),
                 "hvd_local_size": hvd.local_size()})
    info["hvd_built"]["mpi_enabled"] = bool(hvd.mpi_enabled())
    info["hvd_built"]["gloo_enabled"] = bool(hvd.gloo_enabled())
    got = hvd.broadcast(tf.constant([hvd.rank() + 100], dtype=tf.int32), root_rank=0, name="check_bcast")
    info["hvd_broadcast_ok"] = int(got.numpy()[0]) == 100
    size = hvd.size()
    count = max(1, int(size_mb * (1 << 20) / 4))
    tensor = tf.fill([count], tf.constant(float(hvd.rank() + 1), tf.float32))
    expected = size * (size + 1) / 2
    calls = [0]

    def run() -> bool:
        calls[0] += 1
        out = hvd.allreduce(tensor, op=hvd.Sum, name="check_allreduce_%i" % calls[0]).numpy()
        return out.shape == (count,) and bool(np.all(out == expected))

    ok, times = _time_allreduce(run, repeats)
    info["hvd_allreduce_ok"] = ok
    info["hvd_allreduce_mbps"] = _mb_per_s(size_mb, times)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return "%s: %s" % (type(exc).__name__, text[0] if text else "")


def rank_line(info: Info) -> str:
    """One-line summary of a rank."""
    parts = ["[rank %s/%s] host=%s pid=%s" % (info.get("mpi_rank"), info.get("mpi_size"), info["host"], info["pid"]),
             "mpi local=%s/%s" % (info.get("mpi_local_rank"), info.get("mpi_local_size"))]
    if "hvd_rank" in info:
        parts.append("hvd=%s/%s local=%s/%s" % (info["hvd_rank"], info["hvd_size"], info["hvd_local_rank"],
                                                info["hvd_local_size"]))
    else:
        parts.append("hvd=%s" % ("missing (%s)" % info["hvd_error"] if "hvd_error" in info else "not run"))
    parts.append("gpus=%i" % len(info.get("gpus", [])))
    if info.get("p2p_mbps") is not None:
        parts.append("to other hosts via %s %.1f MB/s" % (info.get("iface"), info["p2p_mbps"]))
    if "hvd_allreduce_mbps" in info:
        parts.append("hvd allreduce %.1f MB/s %s" % (info["hvd_allreduce_mbps"],
                                                     "ok" if info["hvd_allreduce_ok"] else "WRONG"))
    return " ".join(parts)


def _agree(info: Info) -> Optional[bool]:
    if "hvd_rank" not in info:
        return None
    return all(info["mpi_" + k] == info["hvd_" + k] for k in ("rank", "size", "local_rank", "local_size"))


def analyze(infos: List[Info], expect_size: Optional[int] = None,
            require_gpu: bool = False) -> Tuple[List[str], List[str]]:
    """Problems (make the check fail) and warnings found in the gathered per-rank infos."""
    problems: List[str] = []
    warnings: List[str] = []
    for info in infos:
        who = "rank %s on %s" % (info.get("mpi_rank"), info["host"])
        problems += ["%s: %s" % (who, err) for err in info.get("errors", [])]
        size = info.get("mpi_size")
        if expect_size is not None and size != expect_size:
            problems.append("%s: MPI size is %s, expected %i (--expect-size)" % (who, size, expect_size))
        elif expect_size is None and info.get("launcher_size") not in (None, size):
            problems.append("%s: MPI size is %s but %s=%s: the processes did not start as one MPI job (not launched"
                            " by mpirun/srun, or mpi4py/Horovod linked against another MPI"
                            " than the launcher: compare mpi library %r with `mpirun --version`)"
                            % (who, size, info["launcher_var"], info["launcher_size"], info.get("mpi_library")))
        if info.get("launcher_rank") not in (None, info.get("mpi_rank")) and info.get("launcher_size") == size:
            problems.append("%s: MPI rank %s differs from the launcher's rank %s (%s)"
                            % (who, info.get("mpi_rank"), info["launcher_rank"], info["launcher_var"]))
        if info.get("mpi_allreduce_ok") is False:
            problems.append("%s: MPI allreduce gave a wrong result" % who)
        if "hvd_error" in info:
            problems.append("%s: Horovod missing: %s" % (who, info["hvd_error"]))
        if _agree(info) is False:
            problems.append("%s: MPI and Horovod disagree: mpi rank/size/local %s/%s/%s/%s, horovod %s/%s/%s/%s" % (
                (who,) + tuple(info[p + k] for p in ("mpi_", "hvd_") for k in ("rank", "size", "local_rank",
                                                                              "local_size"))))
        if info.get("hvd_allreduce_ok") is False:
            problems.append("%s: Horovod allreduce gave a wrong result" % who)
        if info.get("hvd_broadcast_ok") is False:
            problems.append("%s: Horovod broadcast gave a wrong result" % who)
        if require_gpu and not info.get("gpus"):
            problems.append("%s: no GPU visible to TensorFlow (--require-gpu)" % who)
    if infos and not problems and all("hvd_rank" not in i for i in infos):
        problems.append("Horovod was not run on any rank")
    ranks = sorted(i.get("mpi_rank") for i in infos)
    if len(set(ranks)) != len(ranks):
        problems.append("duplicate MPI ranks %s (processes did not join one MPI job)" % ranks)
    per_host: Dict[str, List[Info]] = {}
    for info in infos:
        per_host.setdefault(info["host"], []).append(info)
    for host, group in sorted(per_host.items()):
        gpus = len(group[0].get("gpus", []))
        if gpus and len(group) > gpus:
            warnings.append("%s: %i ranks share %i GPU(s)" % (host, len(group), gpus))
        if gpus and not group[0].get("hvd_built", {}).get("nccl", True):
            warnings.append("%s: GPUs present but Horovod was built without NCCL" % host)
        if any(i.get("mpi_local_size") != len(group) for i in group):
            warnings.append("%s: %i ranks on this host name but MPI local size %s"
                            % (host, len(group), sorted({i.get("mpi_local_size") for i in group})))
    warnings += check_net.interface_warnings(infos)
    for key in ("python", "tf_version", "hvd_version", "mpi_library"):
        values = sorted({str(i.get(key)) for i in infos if i.get(key) is not None})
        if len(values) > 1:
            warnings.append("ranks differ in %s: %s" % (key, ", ".join(values)))
    return problems, warnings


def format_table(infos: List[Info]) -> str:
    """Per-rank table."""
    headers = ["rank", "host", "pid", "mpi r/n", "mpi local", "hvd r/n", "hvd local", "agree", "gpus",
               "iface", "p2p MB/s", "mpi MB/s", "hvd MB/s", "result"]
    rows = []
    for info in sorted(infos, key=lambda i: (i.get("mpi_rank") is None, i.get("mpi_rank"))):
        has_hvd = "hvd_rank" in info
        agree = _agree(info)
        results = [info.get(k) for k in ("mpi_allreduce_ok", "hvd_allreduce_ok", "hvd_broadcast_ok")]
        rows.append([
            str(info.get("mpi_rank")), info["host"], str(info["pid"]),
            "%s/%s" % (info.get("mpi_rank"), info.get("mpi_size")),
            "%s/%s" % (info.get("mpi_local_rank"), info.get("mpi_local_size")),
            "%s/%s" % (info["hvd_rank"], info["hvd_size"]) if has_hvd else "-",
            "%s/%s" % (info["hvd_local_rank"], info["hvd_local_size"]) if has_hvd else "-",
            {True: "yes", False: "NO", None: "-"}[agree],
            str(len(info.get("gpus", []))), str(info.get("iface", "-")),
            "%.1f" % info["p2p_mbps"] if info.get("p2p_mbps") is not None else "-",
            "%.1f" % info["mpi_allreduce_mbps"] if "mpi_allreduce_mbps" in info else "-",
            "%.1f" % info["hvd_allreduce_mbps"] if "hvd_allreduce_mbps" in info else "-",
            "WRONG" if False in results else ("ok" if has_hvd else "no horovod"),
        ])
    widths = [max(len(r[c]) for r in rows + [headers]) for c in range(len(headers))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in [headers] + rows]
    return "\n".join(lines)


def _summary(infos: List[Info], size_mb: float) -> List[str]:
    first = infos[0]
    lines = ["MPI library: %s (thread multiple: %s)" % (first.get("mpi_library"), first.get("mpi_thread_multiple")),
             "TensorFlow %s, Horovod %s, Python %s" % (first.get("tf_version", "-"), first.get("hvd_version", "-"),
                                                        first.get("python"))]
    built = next((i["hvd_built"] for i in infos if "hvd_built" in i), None)
    if built:
        lines.append("Horovod: " + " ".join("%s=%s" % (k, v) for k, v in built.items()))
    gpus = sorted({g for i in infos for g in i.get("gpus", [])})
    lines.append("GPUs (rank 0): %s" % (", ".join(first.get("gpus", [])) or "none"))
    if gpus and len(gpus) > len(first.get("gpus", [])):
        lines.append("GPUs (all ranks): %s" % ", ".join(gpus))
    lines.append("allreduce payload: %.2f MB float32 per rank" % size_mb)
    return lines


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """Command line of the check."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size-mb", type=float, default=4.0, help="allreduce payload per rank in MB (default 4)")
    p.add_argument("--repeats", type=int, default=5, help="timed allreduce repetitions (default 5)")
    p.add_argument("--expect-size", type=int, default=None,
                   help="number of ranks expected (default: from the launcher's environment)")
    p.add_argument("--require-gpu", action="store_true", help="fail when a rank sees no GPU")
    p.add_argument("--reach-timeout", type=float, default=30.0,
                   help="seconds a rank waits for data from a rank on another host before it reports it"
                        " unreachable (default 30)")
    p.add_argument("--timeout", type=float, default=300.0,
                   help="abort a rank stuck in one stage for this many seconds (0 = never; default 300)")
    # `rnn.py --check-distributed [options]` hands over its own command line.
    p.add_argument("--check-distributed", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs the check on this rank; returns the exit status (0 = OK)."""
    args = parse_args(argv)
    pin_threads()
    env_size, env_rank, _ = launcher_env()
    watchdog = Watchdog("rank %s" % (env_rank if env_rank is not None else "?"), args.timeout)
    watchdog.stage("mpi init")
    try:
        from mpi4py import MPI
    except Exception as exc:  # noqa: BLE001
        watchdog.stop()
        say("PROBLEM: rank %s on %s: cannot import mpi4py (%s); the check needs it"
            % (env_rank, socket.gethostname(), _one_line(exc)))
        return 1
    comm = MPI.COMM_WORLD
    watchdog.rank_hint = "rank %i on %s" % (comm.Get_rank(), socket.gethostname())
    watchdog.stage("first contact with the other ranks")
    net, unreachable = check_net.check_peers(comm, args.reach_timeout)
    if unreachable:  # collectives would hang: report here, the launcher ends the other ranks
        say("\n".join(unreachable))
        os._exit(3)
    watchdog.stage("mpi allreduce")
    info = collect_mpi(comm, MPI, args.size_mb, args.repeats)
    info.update(net)
    watchdog.stage("import")
    hvd = import_frameworks(info)
    watchdog.stage("agree on horovod import")
    all_imported = comm.allreduce(hvd is not None, op=MPI.LAND)
    if all_imported:
        watchdog.stage("horovod init")
        init_ok = True
        try:
            hvd.init()
        except Exception as exc:  # noqa: BLE001
            info["errors"].append("hvd.init() failed: %s" % _one_line(exc))
            init_ok = False
        if info["mpi_thread_multiple"]:
            watchdog.stage("agree on horovod init")
            init_ok = comm.allreduce(init_ok, op=MPI.LAND)
        if init_ok:
            watchdog.stage("horovod collectives")
            try:
                collect_horovod(hvd, info, args.size_mb, args.repeats)
            except Exception as exc:  # noqa: BLE001
                info["errors"].append("Horovod test failed: %s" % _one_line(exc))
            hvd.shutdown()
    say(rank_line(info))
    watchdog.stage("gather")
    infos = comm.gather(info, root=0)
    status = 0
    if comm.Get_rank() == 0:
        problems, warnings = analyze(infos, args.expect_size, args.require_gpu)
        say("\n".join(["", format_table(infos), ""] + _summary(infos, args.size_mb)))
        for text in warnings:
            say("WARNING: " + text)
        hosts = len({i["host"] for i in infos})
        if problems:
            say("\n".join("PROBLEM: " + text for text in problems))
            say("PROBLEM: %i issue(s) found (%i rank(s) on %i host(s))" % (len(problems), len(infos), hosts))
            status = 1
        else:
            speed = min(i.get("hvd_allreduce_mbps", 0.0) for i in infos)
            say("OK: %i rank(s) on %i host(s); MPI and Horovod agree; allreduce correct, slowest rank %.1f MB/s"
                  % (len(infos), hosts, speed))
        sys.stdout.flush()
    status = comm.bcast(status, root=0)
    watchdog.stop()
    if env_size is not None and env_size != comm.Get_size():
        status = 1  # a singleton among many: every process reports for itself
    return status


if __name__ == "__main__":
    sys.exit(main())
