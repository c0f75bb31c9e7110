"""Test vocabulary: provisioning agents with keys, a stand-in SM, sniffing and injecting on the link."""

from __future__ import annotations

import ipaddress
import json
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ibsec import keys, layers, mad_auth
from ibsec.agent.frames import View, parse
from scapy.layers.l2 import Ether

from .fabric import Agent, Fabric, Host

SECURE_PKEY = 0x8001  # partition whose members hold P_SK; its default security mode is 2
OTHER_PKEY = 0x8002


@dataclass
class Provisioned:
    """The keys the tests gave the hosts (the stand-in SM knows them all, as the real SM would)."""

    ca_keys: dict[int, keys.Key]  # host index -> CA_SK
    p_sk: keys.Key
    key_files: dict[int, Path]
    pkey_file: Path


def provision(fabric: Fabric, members: list[Host], partition_mode: int = 0) -> Provisioned:
    """Key files (0600) and one P_Key table file for ``members``, as the SM would provision them."""
    guids = {h.index: int(ipaddress.IPv6Address(h.gid)) & ((1 << 64) - 1) for h in members}
    ca_keys = {i: keys.Key.generate(keys.KeyType.CA_SK, (g,)) for i, g in guids.items()}
    p_sk = keys.Key.generate(keys.KeyType.P_SK, (SECURE_PKEY,))
    pairs = [
        keys.Key.generate(keys.KeyType.CA_SK_IJ, (min(a, b), max(a, b)))
        for a in guids.values()
        for b in guids.values()
        if a < b
    ]
    key_files = {}
    for host in members:
        path = fabric.run_dir / f"h{host.index}.keys"
        mine = [k for k in pairs if guids[host.index] in k.owner]
        keys.write_key_file(path, [ca_keys[host.index], p_sk, *mine])
        key_files[host.index] = path
    pkey_file = fabric.run_dir / "pkeys.json"
    pkey_file.write_text(
        json.dumps(
            {
                "partitions": [
                    {"pkey": "0xffff", "mode": 0},
                    {"pkey": hex(SECURE_PKEY), "mode": partition_mode, "scope": "partition"},
                ]
            }
        )
    )
    return Provisioned(ca_keys, p_sk, key_files, pkey_file)


def start_agents(
    fabric: Fabric, hosts: list[Host], prov: Provisioned, sm: Host | None, *extra: str
) -> list[Agent]:
    sm_args = ["--sm-gid", sm.gid] if sm is not None else []
    return [
        fabric.start_agent(
            h, "--keys", str(prov.key_files[h.index]), "--pkeys", str(prov.pkey_file), *sm_args, *extra
        )
        for h in hosts
    ]


class Tap:
    """A raw socket on a host's interface: what an attacker on that cable sees and can inject."""

    def __init__(self, host: Host) -> None:
        self.sock = host.raw_socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        self.sock.settimeout(0.1)

    def frames(self, duration: float) -> list[tuple[bytes, View]]:
        """Every RoCEv2 frame seen within ``duration`` seconds."""
        out: list[tuple[bytes, View]] = []
        deadline = time.monotonic() + duration
        while time.monotonic() < deadline:
            try:
                frame = self.sock.recv(65536)
            except TimeoutError:
                continue
            view = parse(frame)
            if view is not None:
                out.append((frame, view))
        return out

    def send(self, frame: bytes) -> None:
        self.sock.send(frame)

    def close(self) -> None:
        self.sock.close()


@dataclass
class Trap:
    """One trap the stand-in SM received, and whether its authentication trailer verified."""

    notice: Any
    sender: str
    authentic: bool


@dataclass
class StandInSM:
    """Listens on the SM host's interface for MADs to the SM GID and checks them like the SM does."""

    host: Host
    ca_keys_by_gid: dict[str, keys.Key]
    tap: Tap = field(init=False)

    def __post_init__(self) -> None:
        self.tap = Tap(self.host)

    def traps(self, duration: float) -> list[Trap]:
        """Traps received within ``duration`` seconds (forged ones included, marked not authentic)."""
        found = []
        for frame, view in self.tap.frames(duration):
            if view.dqpn != layers.GSI_QPN or ipaddress.IPv6Address(view.dst_gid) != ipaddress.IPv6Address(
                self.host.gid
            ):
                continue
            packet = Ether(frame)
            notice = packet.getlayer(layers.Notice)
            if notice is None:
                continue
            sender = str(ipaddress.IPv6Address(view.src_gid))
            key = self.ca_keys_by_gid.get(sender)
            try:
                authentic = key is not None and mad_auth.verify_packet(key.material, packet) is not None
            except mad_auth.MadAuthError:
                authentic = False
            found.append(Trap(notice, sender, authentic))
        return found


def attack(fabric: Fabric, host: Host, tool: str, *args: str, timeout: float = 60.0) -> list[dict[str, Any]]:
    """Run ``python -m ibsec.attacks.<tool>`` in ``host``'s namespace; its JSON lines."""
    done = fabric.run(
        host, [sys.executable, "-m", f"ibsec.attacks.{tool}", "--iface", host.iface, *args], timeout=timeout
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def wait_for(predicate: Any, timeout: float = 5.0) -> bool:
    """Poll ``predicate`` until it is true or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return bool(predicate())


def rc_pair(
    a: Agent, b: Agent, mode: int, scope: str = "partition", pkey: int = SECURE_PKEY
) -> tuple[int, int]:
    """Connect an RC QP from ``a`` to ``b``; (a's QPN, b's QPN)."""
    qp = a.call("connect", remote_gid=b.host.gid, service="RC", pkey=pkey, mode=mode, scope=scope)
    return qp["qpn"], qp["remote_qpn"]
