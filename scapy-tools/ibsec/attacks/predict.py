"""QPN, R_Key, starting-PSN and address prediction (ReDMArk, USENIX Security 2021).

ReDMArk showed that RNICs hand out QP numbers in sequence, R_Keys and region addresses with a fixed stride,
so an attacker who watched a few connections to a host guesses the next one's within a handful of tries,
and needs no sniffing of the victim's own connection to inject into it. This tool does that guessing from
observed traffic: per target host it lists, in the order they first appear, the destination QPNs of RC
requests, the starting PSN of each such QP, and the R_Keys and virtual addresses of RDMA WRITEs. For each
it predicts the next values as ReDMArk does (the last value plus the commonest stride, then twice the
stride, ...: ``--window`` guesses), and scores the guessing on the trace itself: walking the sequence, how
often the value that came next was among the guesses made from the values before it.

Our agents draw every one of these at random (docs/security.md), so the success rate is about
``window / 2^bits``: nothing. Frames come from a capture file (``--pcap``) or the link (``--sniff``).
"""

from __future__ import annotations

import argparse
import ipaddress
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from scapy.utils import PcapReader

from ibsec.rocev2 import View, parse

from .common import MAX_COUNT, RawSocket, checked, report, run

REQUESTS = ("RC_SEND_ONLY", "RC_SEND_FIRST", "RC_RDMA_WRITE_ONLY", "RC_RDMA_WRITE_FIRST")
WRITES = ("RC_RDMA_WRITE_ONLY", "RC_RDMA_WRITE_FIRST")
BITS = {"qpn": 24, "psn": 24, "rkey": 32, "va": 64}
MAX_WINDOW = 1 << 16


@dataclass
class Sequences:
    """What one target host showed: each field's distinct values in the order they first appeared."""

    values: dict[str, list[int]] = field(default_factory=lambda: {name: [] for name in BITS})

    def add(self, name: str, value: int) -> None:
        if value not in self.values[name]:
            self.values[name].append(value)


def observe(views: Iterable[View], dst_gid: str | None = None) -> dict[str, Sequences]:
    """Per destination GID (text), the QPNs, starting PSNs, R_Keys and VAs its RC requests showed."""
    hosts: dict[str, Sequences] = {}
    for view in views:
        if view.opcode_name not in REQUESTS:
            continue
        dst = str(ipaddress.IPv6Address(view.dst_gid))
        if dst_gid is not None and dst != dst_gid:
            continue
        seen = hosts.setdefault(dst, Sequences())
        if view.dqpn not in seen.values["qpn"]:
            seen.add("qpn", view.dqpn)
            seen.add("psn", view.psn)  # the first request of a QP carries its starting PSN
        if view.opcode_name in WRITES and view.reth is not None:
            seen.add("rkey", view.reth[1])
            seen.add("va", view.reth[0])
    return hosts


def stride(history: list[int], bits: int) -> int:
    """The commonest difference between consecutive values (modulo 2^bits); 1 before there are two."""
    deltas = Counter((b - a) % (1 << bits) for a, b in zip(history, history[1:], strict=False))
    return deltas.most_common(1)[0][0] if deltas else 1


def guesses(history: list[int], window: int, bits: int) -> list[int]:
    """ReDMArk's guesses for the value after ``history``: last + k * stride for k = 1 .. window."""
    if not history:
        return []
    step = stride(history, bits) or 1
    return [(history[-1] + k * step) % (1 << bits) for k in range(1, window + 1)]


def score(history: list[int], window: int, bits: int) -> tuple[int, int]:
    """(hits, tries) of guessing each value from the ones before it, from the third value on."""
    tries = max(len(history) - 2, 0)
    hits = sum(history[i] in guesses(history[:i], window, bits) for i in range(2, len(history)))
    return hits, tries


def summary(hosts: dict[str, Sequences], window: int) -> list[dict[str, Any]]:
    """One JSON-ready line per target: per field, what was seen, the hit rate, and the next guesses."""
    lines = []
    for dst, seen in hosts.items():
        line: dict[str, Any] = {"attack": "predict", "target": dst, "window": window}
        for name, bits in BITS.items():
            history = seen.values[name]
            hits, tries = score(history, window, bits)
            line[name] = {
                "observed": len(history),
                "hits": hits,
                "tries": tries,
                "success_rate": hits / tries if tries else 0.0,
                "next": [hex(v) for v in guesses(history, min(window, 4), bits)],
            }
        lines.append(line)
    return lines


def from_pcap(path: str, count: int) -> Iterator[View]:
    """The RoCEv2 frames of a capture file (at most ``count``), as header views."""
    with PcapReader(path) as packets:
        for i, packet in enumerate(packets):
            if i >= count:
                return
            view = _parsed(bytes(packet))
            if view is not None:
                yield view


def _parsed(frame: bytes) -> View | None:
    try:
        return parse(frame)
    except ValueError:
        return None


def from_link(iface: str, seconds: float, count: int) -> Iterator[View]:
    """RoCEv2 frames seen on ``iface`` within ``seconds`` (at most ``count``)."""
    sock = RawSocket(iface)
    try:
        for i, (_, view) in enumerate(sock.sniff(seconds)):
            if i >= count:
                return
            yield view
    finally:
        sock.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--pcap", help="read frames from this capture file")
    source.add_argument("--iface", help="sniff frames on this interface (for --duration seconds)")
    p.add_argument("--dst-gid", help="only connections to this host")
    p.add_argument("--window", type=int, default=16, help=f"guesses per value (<= {MAX_WINDOW})")
    p.add_argument("--count", type=int, default=100_000, help=f"frames to read at most (<= {MAX_COUNT})")
    p.add_argument("--duration", type=float, default=10.0, help="seconds to sniff at most")
    p.set_defaults(rate=0.0)
    args = checked(p.parse_args(argv))
    if not 0 < args.window <= MAX_WINDOW:
        raise SystemExit(f"--window must be 1..{MAX_WINDOW}")
    dst = str(ipaddress.IPv6Address(args.dst_gid)) if args.dst_gid else None
    if args.pcap:
        views = from_pcap(args.pcap, args.count)
    else:
        views = from_link(args.iface, args.duration, args.count)
    lines = summary(observe(views, dst), args.window)
    for line in lines:
        report(line)
    return 0 if lines else 1


if __name__ == "__main__":
    run(main)
