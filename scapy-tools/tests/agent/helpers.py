"""Test vocabulary: a stand-in SM, sniffing and injecting on the link, running attack tools, waiting."""

from __future__ import annotations

import ipaddress
import json
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ibsec import keys, layers, mad_auth
from ibsec.polling import poll_until
from ibsec.rocev2 import View, parse
from scapy.layers.l2 import Ether

from labs.agent_lab import AgentLab, Host

EFFECT_TIMEOUT = 30.0  # seconds to wait for an effect that should come in milliseconds (a loaded machine)
SETTLE = 1.0  # seconds to keep listening after the expected frames, for any that should not come
STOP_MARGIN = 1.0  # seconds a bounded loop may run past its duration: its last wake-up on a loaded machine


class Tap:
    """A raw socket on a host's interface: what an attacker on that cable sees and can inject."""

    def __init__(self, host: Host) -> None:
        self.sock = host.raw_socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        self.sock.settimeout(0.1)

    def frames(self, duration: float, until: Callable[[View], bool] | None = None
               ) -> list[tuple[bytes, View]]:
        """Every RoCEv2 frame seen within ``duration`` seconds, up to the first that ``until`` accepts."""
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
                if until is not None and until(view):
                    break
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

    def traps(self, keep: Callable[[Trap], bool] = lambda trap: True, at_least: int = 1) -> list[Trap]:
        """The traps ``keep`` selects (forged ones included, marked not authentic): listening until
        ``at_least`` came (or EFFECT_TIMEOUT passed), then SETTLE seconds more, so a test that expects
        one also sees a second that should not have come."""
        found: list[Trap] = []
        deadline = time.monotonic() + EFFECT_TIMEOUT
        while len(found) < at_least and time.monotonic() < deadline:
            found += [t for t in self._received(0.1) if keep(t)]
        return found + [t for t in self._received(SETTLE) if keep(t)]

    def _received(self, duration: float) -> list[Trap]:
        """Traps received within ``duration`` seconds."""
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


def attack(fabric: AgentLab, host: Host, tool: str, *args: str, timeout: float = 60.0
           ) -> list[dict[str, Any]]:
    """Run ``python -m ibsec.attacks.<tool>`` in ``host``'s namespace; its JSON lines."""
    done = fabric.run(
        host, [sys.executable, "-m", f"ibsec.attacks.{tool}", "--iface", host.iface, *args], timeout=timeout
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def wait_for(predicate: Any, timeout: float = EFFECT_TIMEOUT) -> bool:
    """Poll ``predicate`` until it is true or ``timeout`` passes."""
    return poll_until(predicate, timeout) is not None
