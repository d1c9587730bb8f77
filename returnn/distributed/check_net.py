"""The network part of the cluster check (``check.py``): which interfaces MPI may use, which one
carried the traffic, and whether every rank can exchange data with the ranks on other hosts.

Standard library only (numpy for the buffers), loaded by ``check.py`` next to it. Interfaces and
byte counters come from ``/sys/class/net`` of the host (or network namespace) the rank runs in.
"""
from __future__ import annotations

import os
import time
from typing import Dict, List, Optional, Sequence, Tuple

SYS_NET = "/sys/class/net"
# Open MPI's TCP transport takes these from -mca (passed to the ranks as OMPI_MCA_*).
IF_INCLUDE_VARS = ("OMPI_MCA_btl_tcp_if_include", "OMPI_MCA_oob_tcp_if_include")
_NAME_BYTES = 64  # host names exchanged at first contact


def ipv4_address(name: str) -> Optional[str]:
    """The IPv4 address of interface ``name``, or None (Linux ioctl SIOCGIFADDR)."""
    import fcntl
    import socket
    import struct

    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            packed = fcntl.ioctl(sock.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))
    except OSError:
        return None
    return socket.inet_ntoa(packed[20:24])


def interfaces() -> List[str]:
    """Interfaces that are up and have an IPv4 address, loopback excluded."""
    try:
        names = sorted(os.listdir(SYS_NET))
    except OSError:
        return []
    out = []
    for name in names:
        if name == "lo":
            continue
        try:
            with open(os.path.join(SYS_NET, name, "operstate")) as f:
                state = f.read().strip()
            with open(os.path.join(SYS_NET, name, "flags")) as f:
                up = int(f.read().strip(), 16) & 1
        except (OSError, ValueError):
            continue
        if up and state in ("up", "unknown") and ipv4_address(name):
            out.append(name)
    return out


def byte_counters() -> Dict[str, int]:
    """Bytes received plus sent so far, per interface (loopback included)."""
    out = {}
    try:
        names = os.listdir(SYS_NET)
    except OSError:
        return out
    for name in names:
        total = 0
        try:
            for direction in ("rx_bytes", "tx_bytes"):
                with open(os.path.join(SYS_NET, name, "statistics", direction)) as f:
                    total += int(f.read().strip())
        except (OSError, ValueError):
            continue
        out[name] = total
    return out


def busiest(before: Dict[str, int], after: Dict[str, int], min_bytes: int) -> Tuple[str, int]:
    """The interface that carried the most bytes between two readings (``("-", 0)`` below ``min_bytes``)."""
    deltas = {name: after[name] - before.get(name, after[name]) for name in after if name != "lo"}
    if not deltas:
        return "-", 0
    name = max(sorted(deltas), key=lambda n: deltas[n])
    return (name, deltas[name]) if deltas[name] >= min_bytes else ("-", deltas[name])


def if_include() -> Optional[str]:
    """What Open MPI was told to use (``-mca btl_tcp_if_include``), or None."""
    for var in IF_INCLUDE_VARS:
        if os.environ.get(var):
            return os.environ[var]
    return None


def remote_peers(hosts: Sequence[str], rank: int) -> List[int]:
    """Ranks on other hosts than ``rank``."""
    return [r for r, host in enumerate(hosts) if host != hosts[rank]]


def exchange_with_peers(comm, peers: Sequence[int], send, timeout: float) -> Dict[int, Optional[Tuple[float, object]]]:
    """Sends the numpy array ``send`` to every peer and receives one of the same shape from each, all at
    once; returns per peer (seconds it took, received array), or None when it did not complete within
    ``timeout`` seconds. Never blocks longer: only non-blocking calls, polled."""
    import numpy as np
    from mpi4py import MPI

    recvs = {peer: np.empty_like(send) for peer in peers}
    requests = {peer: [comm.Isend(send, dest=peer, tag=77), comm.Irecv(recvs[peer], source=peer, tag=77)]
                for peer in peers}
    start = time.monotonic()
    done: Dict[int, Optional[Tuple[float, object]]] = {peer: None for peer in peers}
    pending = set(peers)
    while pending and time.monotonic() - start < timeout:
        for peer in sorted(pending):
            if MPI.Request.Testall(requests[peer]):
                done[peer] = (time.monotonic() - start, recvs[peer])
                pending.discard(peer)
        time.sleep(0.001)
    return done


def _hint(candidates: Sequence[str]) -> str:
    told = if_include()
    if told:
        return "MPI is told to use %s (btl_tcp_if_include): does it connect the nodes?" % told
    return ("MPI may use any of %s here: name the one that connects the nodes with MPI_IFACE "
            "(-mca btl_tcp_if_include)" % (", ".join(candidates) or "no interface"))


def unreachable_line(rank: int, host: str, peers: str, timeout: float, candidates: Sequence[str]) -> str:
    """The PROBLEM line for the peers (described by ``peers``) this rank could not exchange data with."""
    return ("PROBLEM: rank %i on %s cannot exchange data with %s (no answer within %.0f s): node or network down, "
            "a firewall, or the wrong interface; %s" % (rank, host, peers, timeout, _hint(candidates)))


def _encode(text: str):
    import numpy as np

    out = np.zeros(_NAME_BYTES, dtype=np.uint8)
    raw = text.encode("utf-8", "replace")[:_NAME_BYTES]
    out[:len(raw)] = list(raw)
    return out


def _decode(array) -> str:
    return bytes(int(c) for c in array if c).decode("utf-8", "replace")


def check_peers(comm, timeout: float, size_mb: float = 1.0) -> Tuple[dict, List[str]]:
    """First contact (host names, exchanged with every rank), then a timed exchange of ``size_mb``
    with one rank on every other host (the one with the same index on its host, so pairs match up),
    and the busiest interface meanwhile. Returns this rank's facts and PROBLEM lines; no stage
    waits longer than ``timeout``."""
    import socket

    import numpy as np

    rank, size = comm.Get_rank(), comm.Get_size()
    me, candidates = socket.gethostname(), interfaces()
    contact = exchange_with_peers(comm, [r for r in range(size) if r != rank], _encode(me), timeout)
    silent = [r for r, got in contact.items() if got is None]
    if silent:
        who = "rank%s %s" % ("s" if len(silent) > 1 else "", ",".join(map(str, silent)))
        return {}, [unreachable_line(rank, me, who, timeout, candidates)]
    hosts = [me if r == rank else _decode(contact[r][1]) for r in range(size)]
    index = [sum(1 for q in range(r) if hosts[q] == hosts[r]) for r in range(size)]
    peers = [r for r in remote_peers(hosts, rank) if index[r] == index[rank]]
    before = byte_counters()
    took = exchange_with_peers(comm, peers, np.full(max(1, int(size_mb * (1 << 18))), rank, np.float32), timeout)
    iface, _ = busiest(before, byte_counters(), min_bytes=int(size_mb * (1 << 20)))
    problems = [unreachable_line(rank, me, "rank %i on %s" % (p, hosts[p]), timeout, candidates)
                for p, got in took.items() if got is None]
    problems += ["PROBLEM: rank %i on %s received wrong data from rank %i on %s" % (rank, me, p, hosts[p])
                 for p, got in took.items() if got is not None and not np.all(got[1] == p)]
    times = [got[0] for got in took.values() if got is not None]
    facts = {"ifaces": candidates, "if_include": if_include(), "iface": iface if peers else "-",
             "p2p_mbps": size_mb / max(times) if times and max(times) > 0 else None}
    return facts, problems


def interface_warnings(infos: Sequence[dict]) -> List[str]:
    """Hosts where MPI was free to pick among several interfaces in a job that spans hosts."""
    if len({i.get("host") for i in infos}) < 2:
        return []
    out, seen = [], set()
    for info in infos:
        ifaces = info.get("ifaces") or []
        if info.get("host") in seen or info.get("if_include") or len(ifaces) < 2:
            continue
        seen.add(info.get("host"))
        out.append("%s: MPI may use any of %s (no btl_tcp_if_include); if the job hangs or is slow, name the "
                   "interface that connects the nodes with MPI_IFACE" % (info["host"], ", ".join(ifaces)))
    return out
