"""What every attack tool shares: bounded loops, a raw socket on the attacker's interface, sniffing.

Every tool stops at ``--count`` frames or ``--duration`` seconds, whichever comes first, and both have hard
upper bounds, so no invocation can run away. Tools print one JSON summary line on stdout (and, for the
sniffing ones, one JSON line per frame learnt) so scenarios and tests can read them.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from ibsec import addressing
from ibsec.rawport import RawPort
from ibsec.rocev2 import View, parse

MAX_COUNT = 10_000_000
MAX_DURATION = 3600.0


def parser(description: str) -> argparse.ArgumentParser:
    """An argument parser with the options every tool has: interface, count, duration, rate.

    Tools spoof GIDs (what InfiniBand forwards and checks by), never the Ethernet source: frames leave
    with the attacker interface's own MAC, as they would leave a compromised host's NIC.
    """
    p = argparse.ArgumentParser(
        description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("--iface", required=True, help="the attacker's interface (raw socket)")
    p.add_argument("--count", type=int, default=100, help=f"frames to send at most (<= {MAX_COUNT})")
    p.add_argument("--duration", type=float, default=10.0, help=f"seconds at most (<= {MAX_DURATION:.0f})")
    p.add_argument("--rate", type=float, default=0.0, help="frames per second (0: as fast as possible)")
    return p


def checked(args: argparse.Namespace) -> argparse.Namespace:
    """Refuse counts and durations beyond the hard bounds."""
    if not 0 < args.count <= MAX_COUNT:
        raise SystemExit(f"--count must be 1..{MAX_COUNT}")
    if not 0 < args.duration <= MAX_DURATION:
        raise SystemExit(f"--duration must be in (0, {MAX_DURATION:.0f}]")
    if args.rate < 0:
        raise SystemExit("--rate must be >= 0")
    return args


def int0(text: str) -> int:
    """An integer in any base Python accepts (0x..., 0b..., decimal)."""
    return int(text, 0)


def gid_text(gid: str) -> str:
    return str(ipaddress.IPv6Address(gid))


class RawSocket(RawPort):
    """The raw port of the attacker's interface: inject frames, sniff what passes."""

    @property
    def gid(self) -> str:
        """The attacker's own (real) GID under our conventions."""
        return addressing.make_gid(1, addressing.mac_to_guid(self.mac.hex(":")))

    def sniff(self, duration: float, keep_outgoing: bool = True) -> Iterator[tuple[bytes, View]]:
        """RoCEv2 frames seen within ``duration`` seconds, with their header views."""
        deadline = time.monotonic() + duration
        while (left := deadline - time.monotonic()) > 0:
            frame = self.recv(min(left, self.poll_interval), outgoing=keep_outgoing)
            if frame is None:
                continue
            try:
                view = parse(frame)
            except ValueError:
                continue
            if view is not None:
                yield frame, view


def blast(sock: RawSocket, make: Callable[[int], bytes], args: argparse.Namespace) -> dict[str, Any]:
    """Send ``make(i)`` for i = 0, 1, ... until count or duration, paced to ``--rate``; a summary."""
    start = time.monotonic()
    sent = 0
    interval = 1.0 / args.rate if args.rate else 0.0
    while sent < args.count and (now := time.monotonic()) - start < args.duration:
        if interval and now < start + sent * interval:
            time.sleep(min(start + sent * interval - now, 0.05))
            continue
        sock.send(make(sent))
        sent += 1
    elapsed = time.monotonic() - start
    return {"sent": sent, "seconds": round(elapsed, 3), "rate": round(sent / elapsed, 1) if elapsed else 0.0}


def report(message: dict[str, Any]) -> None:
    """One JSON line on stdout."""
    print(json.dumps(message), flush=True)


def run(main: Callable[[list[str] | None], int]) -> None:
    """Entry point helper: exit with main's status."""
    sys.exit(main(None))
