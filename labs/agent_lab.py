"""A small lab for the host agent: hosts in network namespaces joined by veths (no switch), agents as
subprocesses, keys provisioned as the SM would. Used by the agent's tests and its benchmark.

Two hosts share one veth pair; three or more hang off a Linux bridge in a namespace of its own, which
stands in for the cable, not for a P4 switch. Every name carries the process id and a counter, so
parallel and repeated runs never collide, and :meth:`AgentLab.close` stops every process by pid and deletes
every namespace (which deletes its veths) whatever happened meanwhile. Needs root (``ip netns``).
"""

from __future__ import annotations

import contextlib
import ctypes
import ipaddress
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ibsec import addressing, keys
from ibsec.control import ControlClient
from ibsec.polling import poll_until

SUBNET = 0x0001
SECURE_PKEY = 0x8001  # the lab's partition whose members hold P_SK
CLONE_NEWNET = 0x40000000
MTU = 9000
NO_BRIDGE_NETFILTER = [f"net.bridge.bridge-nf-call-{t}=0" for t in ("iptables", "ip6tables", "arptables")]
LAB_RETRANSMISSION = ("--retries", "200")
"""A lab agent's QP retransmits for 200 ACK timeouts (10 s at the daemon's 50 ms) before it fails: the
daemon's 7 are gone in one scheduling hiccup of a loaded machine. Arguments given later override it."""
_serial = itertools.count()


def sh(*args: str) -> str:
    """Run a command, fail loudly with its stderr."""
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def in_netns(ns: str, make: Callable[[], Any]) -> Any:
    """Call ``make`` in a thread that entered namespace ``ns``: sockets it creates stay in ``ns``."""
    result: list[Any] = []
    errors: list[BaseException] = []

    def enter_and_make() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(f"/run/netns/{ns}", os.O_RDONLY)
        try:
            if libc.setns(fd, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), f"setns {ns}")
            result.append(make())
        except BaseException as exc:
            errors.append(exc)
        finally:
            os.close(fd)

    thread = threading.Thread(target=enter_and_make)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return result[0]


@dataclass
class Host:
    """One host: its namespace, interface and the addresses our conventions give host ``index``."""

    index: int
    ns: str
    iface: str

    @property
    def mac(self) -> str:
        return addressing.host_mac(self.index)

    @property
    def gid(self) -> str:
        return addressing.host_gid(self.index, SUBNET)

    @property
    def lid(self) -> int:
        return addressing.host_lid(self.index)

    def raw_socket(self) -> socket.socket:
        """An AF_PACKET socket on this host's interface (sniff or inject as an attacker on the link)."""

        def make() -> socket.socket:
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
            sock.bind((self.iface, 0))
            return sock

        sock: socket.socket = in_netns(self.ns, make)
        return sock


@dataclass
class Agent:
    """A running agent process and where to reach it."""

    host: Host
    process: subprocess.Popen[bytes]
    control_path: Path
    log_path: Path

    def client(self, timeout: float = 30.0) -> ControlClient:
        return ControlClient(self.control_path, timeout=timeout)

    def call(self, cmd: str, **args: Any) -> Any:
        with self.client() as client:
            return client.call(cmd, **args)

    def counters(self) -> dict[str, dict[str, int]]:
        result: dict[str, dict[str, int]] = self.call("counters")
        return result


@dataclass
class AgentLab:
    """Hosts, their agents and every other process a test starts; :meth:`close` removes all of it.

    A lab, not a fabric: no switch joins its hosts (topologies.fabrics.Fabric is a fabric's description)."""

    run_dir: Path
    hosts: list[Host] = field(default_factory=list)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)

    @classmethod
    def create(cls, run_dir: Path, n_hosts: int) -> AgentLab:
        fabric = cls(run_dir)
        try:
            fabric._build(n_hosts)
        except BaseException:
            fabric.close()
            raise
        return fabric

    def _build(self, n_hosts: int) -> None:
        tag = f"{os.getpid() % 100000:05d}{next(_serial) % 100:02d}"
        for i in range(n_hosts):
            self.hosts.append(Host(i, self._namespace(f"ibsec-{tag}-h{i}"), f"i{tag}h{i}"))
        if n_hosts == 2:
            a, b = self.hosts
            sh("ip", "link", "add", a.iface, "netns", a.ns, "type", "veth", "peer", b.iface, "netns", b.ns)
        else:
            bridge = self._namespace(f"ibsec-{tag}-br")
            # a cable, not a firewall: where br_netfilter is loaded, it would drop IPv6 frames whose length
            # fields disagree with their size (the fuzz suite sends such frames on purpose)
            subprocess.run(["ip", "netns", "exec", bridge, "sysctl", "-qw", *NO_BRIDGE_NETFILTER],
                           capture_output=True)
            sh("ip", "-n", bridge, "link", "add", "br0", "type", "bridge")
            sh("ip", "-n", bridge, "link", "set", "br0", "up")
            for host in self.hosts:
                port = f"i{tag}b{host.index}"
                sh(
                    "ip",
                    "link",
                    "add",
                    host.iface,
                    "netns",
                    host.ns,
                    "type",
                    "veth",
                    "peer",
                    port,
                    "netns",
                    bridge,
                )
                sh("ip", "-n", bridge, "link", "set", port, "mtu", str(MTU), "master", "br0", "up")
        for host in self.hosts:
            sh("ip", "netns", "exec", host.ns, "sysctl", "-qw", f"net.ipv6.conf.{host.iface}.disable_ipv6=1")
            sh("ip", "-n", host.ns, "link", "set", host.iface, "address", host.mac, "mtu", str(MTU), "up")

    def _namespace(self, name: str) -> str:
        sh("ip", "netns", "add", name)
        self.namespaces.append(name)
        return name

    def spawn(self, host: Host, argv: list[str], log_name: str) -> subprocess.Popen[bytes]:
        """Start ``argv`` inside ``host``'s namespace; its output goes to ``log_name`` in the run dir."""
        with open(self.run_dir / log_name, "wb") as out:
            process = subprocess.Popen(
                ["ip", "netns", "exec", host.ns, *argv], stdout=out, stderr=subprocess.STDOUT
            )
        self.processes.append(process)
        return process

    def run(self, host: Host, argv: list[str], timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        """Run a short command (an attack tool) in ``host``'s namespace and return its output."""
        return subprocess.run(
            ["ip", "netns", "exec", host.ns, *argv], capture_output=True, text=True, timeout=timeout
        )

    def start_agent(self, host: Host, *extra: str) -> Agent:
        """Start ``ibsec-agent`` on ``host`` and wait until its control socket answers."""
        name = f"h{host.index}"
        control = self.run_dir / f"{name}.sock"
        log_path = self.run_dir / "logs" / f"{name}.log"
        argv = [
            sys.executable,
            "-m",
            "ibsec.agent.daemon",
            "--name",
            name,
            "--iface",
            host.iface,
            "--subnet",
            str(SUBNET),
            "--lid",
            str(host.lid),
            "--run-dir",
            str(self.run_dir),
            *LAB_RETRANSMISSION,
            *extra,
        ]
        process = self.spawn(host, argv, f"{name}.out")
        agent = Agent(host, process, control, log_path)

        def answers() -> bool:
            if process.poll() is not None:
                raise RuntimeError(
                    f"agent {name} exited with {process.returncode}: "
                    f"{(self.run_dir / f'{name}.out').read_text()}"
                )
            with contextlib.suppress(OSError):
                agent.call("ping")
                return True
            return False

        if poll_until(answers, 120):  # imports (Scapy) take seconds, more on a loaded machine
            return agent
        raise TimeoutError(f"agent {name} did not answer on {control}")

    def close(self) -> None:
        """Stop every process (SIGTERM, then SIGKILL) by pid and delete every namespace."""
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for ns in reversed(self.namespaces):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self.namespaces.clear()


@dataclass
class Provisioned:
    """The keys given to the hosts (a stand-in SM knows them all, as the real SM would)."""

    ca_keys: dict[int, keys.Key]  # host index -> CA_SK
    p_sk: keys.Key
    key_files: dict[int, Path]
    pkey_file: Path


def provision(fabric: AgentLab, members: list[Host], partition_mode: int = 0) -> Provisioned:
    """Key files (0600) and one P_Key table file for ``members``, as the SM would provision them."""
    guids = {h.index: int(ipaddress.IPv6Address(h.gid)) & ((1 << 64) - 1) for h in members}
    ca_keys = {i: keys.Key.generate(keys.KeyType.CA_SK, (g,)) for i, g in guids.items()}
    p_sk = keys.Key.generate(keys.KeyType.P_SK, (SECURE_PKEY,))
    pairs = [
        keys.Key.generate(keys.KeyType.CA_SK_IJ, (a, b))
        for a in guids.values()
        for b in guids.values()
        if a < b
    ]
    key_files = {}
    for host in members:
        path = fabric.run_dir / f"h{host.index}.keys"
        keys.write_key_file(
            path, [ca_keys[host.index], p_sk, *(k for k in pairs if guids[host.index] in k.owner)]
        )
        key_files[host.index] = path
    pkey_file = fabric.run_dir / "pkeys.json"
    partitions = [
        {"pkey": "0xffff", "mode": 0},
        {"pkey": hex(SECURE_PKEY), "mode": partition_mode, "scope": "partition"},
    ]
    pkey_file.write_text(json.dumps({"partitions": partitions}))
    return Provisioned(ca_keys, p_sk, key_files, pkey_file)


def start_agents(
    fabric: AgentLab, hosts: list[Host], prov: Provisioned, sm: Host | None, *extra: str
) -> list[Agent]:
    """An agent on each of ``hosts`` with its keys and the P_Key table (and the SM's GID, if any)."""
    sm_args = ["--sm-gid", sm.gid] if sm is not None else []
    return [
        fabric.start_agent(
            h, "--keys", str(prov.key_files[h.index]), "--pkeys", str(prov.pkey_file), *sm_args, *extra
        )
        for h in hosts
    ]


def rc_pair(
    a: Agent, b: Agent, mode: int, scope: str = "partition", pkey: int = SECURE_PKEY, pd: int | None = None
) -> tuple[int, int]:
    """Connect an RC QP from ``a`` (in protection domain ``pd``, if given) to ``b``: (a's QPN, b's QPN)."""
    owner = {} if pd is None else {"pd": pd}
    qp = a.call("connect", remote_gid=b.host.gid, service="RC", pkey=pkey, mode=mode, scope=scope, **owner)
    return qp["qpn"], qp["remote_qpn"]
