"""Simulated cluster nodes on one machine: network namespaces joined by a virtual switch.

Each :class:`Node` is a network namespace with loopback, one link ``mnet0`` (an address in a
private test subnet, plugged into a bridge that lives in its own "switch" namespace) and, when
asked, a decoy interface ``dock0`` that has the same address on every node, like ``docker0`` on
real machines (one end of a veth pair whose other end stays in the node: it looks like a route to
the other nodes but leads back to the node itself). Commands run "on" a node through ``ip netns exec`` (which also bind-mounts
``/etc/netns/<ns>/hosts``, so the node names resolve there and nowhere else) and a new UTS
namespace whose hostname is the node's name. Nothing is added to the machine's own namespace:
all traffic stays between the test namespaces and their loopbacks.

``tests/netns_agent.sh`` is the launch agent (Open MPI's ``plm_rsh_agent``, in place of ssh) that
runs a command on a node by name, using the node table :meth:`Cluster.write_node_table` writes.

Names carry the creating process's pid, so parallel runs do not collide, and namespaces left by a
process that no longer exists (a test run killed with SIGKILL) are removed at the next creation.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

PREFIX = "rnntest"
SUBNET = "10.77.0"  # the nodes' link (private; exists only inside the test namespaces)
DECOY_ADDRESS = "10.78.0.1"  # the decoy's address, the same on every node (private, namespace-local)
LINK = "mnet0"
DECOY = "dock0"
AGENT = Path(__file__).resolve().parent / "netns_agent.sh"
NODE_TABLE_VAR = "RNN_NETNS_NODES"  # the agent reads the node table from this file
_counter = [0]


class NetnsUnavailable(RuntimeError):
    """Network namespaces cannot be created here (not root, no ``ip``, no kernel support)."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["ip"] + list(args), capture_output=True, text=True, timeout=30)
    if check and proc.returncode != 0:
        raise RuntimeError("ip %s: %s" % (" ".join(args), proc.stderr.strip()))
    return proc


def unavailable_reason() -> Optional[str]:
    """Why nodes cannot be simulated here, or None when they can."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "unshare", "hostname"):
        if shutil.which(tool) is None:
            return "'%s' is not installed (apt-get install iproute2 util-linux hostname)" % tool
    probe = "%s-%i-probe" % (PREFIX, os.getpid())
    proc = _ip("netns", "add", probe, check=False)
    if proc.returncode != 0:
        return "cannot create a network namespace: %s" % proc.stderr.strip()
    try:
        veth = _ip("-n", probe, "link", "add", "a0", "type", "veth", "peer", "name", "b0", check=False)
        if veth.returncode != 0:
            return "cannot create a veth pair: %s" % veth.stderr.strip()
        uts = subprocess.run(["ip", "netns", "exec", probe, "unshare", "--uts", "hostname", "probe"],
                             capture_output=True, text=True, timeout=30)
        if uts.returncode != 0:
            return "cannot enter a namespace with its own hostname: %s" % uts.stderr.strip()
    finally:
        _ip("netns", "del", probe, check=False)
    return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_netns_processes(netns: str) -> None:
    """SIGKILLs every process inside ``netns`` (what powering a node off would do)."""
    for _ in range(3):
        out = _ip("netns", "pids", netns, check=False).stdout.split()
        if not out:
            return
        for pid in out:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        time.sleep(0.2)


def _remove_netns(netns: str) -> None:
    _kill_netns_processes(netns)
    _ip("netns", "del", netns, check=False)
    shutil.rmtree("/etc/netns/%s" % netns, ignore_errors=True)


def remove_stale() -> None:
    """Removes namespaces of earlier runs whose creating process is gone."""
    for line in _ip("netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        parts = name.split("-")
        if len(parts) >= 3 and parts[0] == PREFIX and parts[1].isdigit() and not _pid_alive(int(parts[1])):
            _remove_netns(name)


class Node:
    """One simulated machine: a network namespace and a hostname."""

    def __init__(self, hostname: str, netns: str, address: str, decoy_address: Optional[str]):
        self.hostname = hostname
        self.netns = netns
        self.address = address
        self.decoy_address = decoy_address

    def argv(self, cmd: Sequence[str]) -> List[str]:
        """``cmd`` run on this node (its network, its /etc/hosts, its hostname)."""
        return ["ip", "netns", "exec", self.netns, "unshare", "--uts", "sh", "-c",
                'hostname "$0" && exec "$@"', self.hostname] + [str(c) for c in cmd]

    def run(self, cmd: Sequence[str], timeout: float = 60, **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run(self.argv(cmd), capture_output=True, text=True, timeout=timeout, **kwargs)

    def popen(self, cmd: Sequence[str], **kwargs) -> subprocess.Popen:
        return subprocess.Popen(self.argv(cmd), **kwargs)

    def set_link(self, up: bool) -> None:
        """Plugs the node's link in or out (the address stays; packets stop flowing)."""
        _ip("-n", self.netns, "link", "set", LINK, "up" if up else "down")

    def link_bytes(self, iface: str = LINK) -> int:
        """Bytes sent plus received on ``iface`` so far."""
        out = _ip("-n", self.netns, "-s", "-j", "link", "show", iface).stdout
        stats = json.loads(out)[0]["stats64"]
        return int(stats["rx"]["bytes"]) + int(stats["tx"]["bytes"])

    def pids(self) -> List[int]:
        return [int(p) for p in _ip("netns", "pids", self.netns, check=False).stdout.split()]

    def kill_all(self) -> None:
        _kill_netns_processes(self.netns)


class Cluster:
    """``size`` nodes named ``nodeA``, ``nodeB``, ... on one switch; removed by :meth:`destroy`."""

    def __init__(self, size: int = 2, decoy: bool = True, workdir: Optional[Path] = None):
        _counter[0] += 1
        self.tag = "%s-%i-%i" % (PREFIX, os.getpid(), _counter[0])
        self.switch = self.tag + "-sw"
        self.nodes: List[Node] = []
        self.workdir = Path(workdir) if workdir else None
        self._created: List[str] = []
        remove_stale()
        try:
            self._create(size, decoy)
        except BaseException:
            self.destroy()
            raise

    def _add_netns(self, name: str) -> None:
        _ip("netns", "add", name)
        self._created.append(name)
        _ip("-n", name, "link", "set", "lo", "up")

    def _create(self, size: int, decoy: bool) -> None:
        self._add_netns(self.switch)
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")
        for i in range(size):
            hostname = "node" + chr(ord("A") + i)
            node = Node(hostname, "%s-%s" % (self.tag, hostname), "%s.%i" % (SUBNET, i + 1),
                        DECOY_ADDRESS if decoy else None)
            self._add_netns(node.netns)
            port = "port%i" % i
            _ip("-n", self.switch, "link", "add", port, "type", "veth", "peer", "name", LINK, "netns", node.netns)
            _ip("-n", self.switch, "link", "set", port, "master", "br0", "up")
            _ip("-n", node.netns, "addr", "add", node.address + "/24", "dev", LINK)
            _ip("-n", node.netns, "link", "set", LINK, "up")
            if decoy:
                _ip("-n", node.netns, "link", "add", DECOY, "type", "veth", "peer", "name", DECOY + "p")
                _ip("-n", node.netns, "addr", "add", DECOY_ADDRESS + "/24", "dev", DECOY)
                _ip("-n", node.netns, "link", "set", DECOY + "p", "up")
                _ip("-n", node.netns, "link", "set", DECOY, "up")
            self.nodes.append(node)
        hosts = "127.0.0.1 localhost\n" + "".join("%s %s\n" % (n.address, n.hostname) for n in self.nodes)
        for node in self.nodes:
            etc = Path("/etc/netns") / node.netns
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "hosts").write_text(hosts)

    def __getitem__(self, hostname: str) -> Node:
        for node in self.nodes:
            if node.hostname == hostname:
                return node
        raise KeyError(hostname)

    def write_node_table(self, path: Path) -> Path:
        """The agent's table (``hostname netns`` per line); returns ``path``."""
        path = Path(path)
        path.write_text("".join("%s %s\n" % (n.hostname, n.netns) for n in self.nodes))
        return path

    def launch_env(self, table: Path) -> Dict[str, str]:
        """Environment that makes mpirun start remote daemons through the namespace agent."""
        return {NODE_TABLE_VAR: str(table), "OMPI_MCA_plm_rsh_agent": str(AGENT)}

    def destroy(self) -> None:
        """Kills every process on the nodes and removes the namespaces (safe to call twice)."""
        for name in reversed(self._created):
            _remove_netns(name)
        self._created = []

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc) -> None:
        self.destroy()
