"""Eavesdropping (seed 000 type I): print what a sniffer on the link learns from RoCEv2 frames.

Per frame one JSON line: the IBA keys every header carries in the clear (P_Key, Q_Key, R_Key, VA, QPN,
PSN), the security mode, and the payload when it is readable (modes 0, 3 and 4 send it in the clear;
modes 1 and 2 encrypt it). From CM MADs it prints what the handshake exposes: in mode 0 nothing is
protected, otherwise only a wrapped session key that is useless without the CAs' pairwise key. A final
summary line counts clear payloads and the distinct keys seen.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from scapy.layers.l2 import Ether

from ibsec import layers
from ibsec.names import Mode
from ibsec.rocev2 import View

from .common import RawSocket, checked, parser, report, run

CLEAR_PAYLOAD_MODES = frozenset(m for m in Mode if not m.encrypts)


def learn(frame: bytes, view: View) -> dict[str, Any]:
    """What one frame tells a sniffer."""
    info: dict[str, Any] = {
        "opcode": view.opcode_name,
        "mode": view.mode,
        "pkey": f"{view.pkey:#06x}",
        "src_gid": str(ipaddress.IPv6Address(view.src_gid)),
        "dst_gid": str(ipaddress.IPv6Address(view.dst_gid)),
        "dqpn": view.dqpn,
        "psn": view.psn,
    }
    if view.deth:
        info.update(qkey=f"{view.deth[0]:#010x}", src_qp=view.deth[1])
    if view.reth:
        info.update(va=f"{view.reth[0]:#x}", rkey=f"{view.reth[1]:#010x}", length=view.reth[2])
    if view.dqpn == layers.GSI_QPN:
        info.update(_mad(frame))
    elif view.mode in CLEAR_PAYLOAD_MODES and view.payload_length:
        info["payload"] = view.payload.decode("latin-1")
    return info


def _mad(frame: bytes) -> dict[str, Any]:
    mad = Ether(frame).getlayer(layers.MAD)
    if mad is None:
        return {}
    info: dict[str, Any] = {"mad": mad.payload.name}
    private = getattr(mad.payload, "private_data", None)
    if isinstance(private, layers.IbsecPrivateData):
        info["cm_secmode"] = private.secmode
        info["wrapped_session_key"] = any(bytes(private.wrapped_key))
    return info


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0])
    args = checked(p.parse_args(argv))
    sock = RawSocket(args.iface)
    seen = 0
    clear = 0
    keys_seen: dict[str, set[str]] = {"pkey": set(), "qkey": set(), "rkey": set()}
    for frame, view in sock.sniff(args.duration):
        info = learn(frame, view)
        report(info)
        seen += 1
        clear += "payload" in info
        for name, values in keys_seen.items():
            if name in info:
                values.add(info[name])
        if seen >= args.count:
            break
    report(
        {
            "attack": "eavesdrop",
            "frames": seen,
            "clear_payloads": clear,
            **{f"{name}s": sorted(values) for name, values in keys_seen.items()},
        }
    )
    sock.close()
    return 0


if __name__ == "__main__":
    run(main)
