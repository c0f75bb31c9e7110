"""Frames from one port, built fast: Scapy builds the headers once per opcode, each packet patches them.

Per packet the destination (MAC, GID), UDP source port, P_Key, QPN, PSN, the DETH/RETH/AETH fields and
the payload go into a copy of the opcode's template (:func:`ibsec.rocev2.write_headers`), then
:func:`ibsec.transport.seal` finishes the frame in the connection's mode (mode 0: lengths and ICRC, no
crypto call). That keeps Scapy's per-packet cost (hundreds of microseconds) off the data path while every
header still comes from the real layers. The agent, the attack tools, the SM and the tests build with it.
"""

from __future__ import annotations

import functools
import ipaddress
from dataclasses import dataclass

from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from ibsec import addressing, layers, opcodes, rocev2, transport

UDP_SPORT_BASE = 0xC000  # RoCEv2 source ports carry flow entropy; we use 0xC000 | QPN's low 14 bits
BROADCAST = b"\xff" * 6


@dataclass(frozen=True)
class _Template:
    headers: bytes  # Ethernet .. last extension header, mode 0; addresses and fields get patched
    ext: dict[opcodes.Ext, int]  # offset of each extension header


class Builder:
    """Builds frames from this port: Scapy once per opcode, byte patches per packet (destination MAC and
    GID, UDP source port, P_Key, QPN, PSN, extension headers), so a new peer costs no Scapy build."""

    def __init__(self, mac: bytes, gid: bytes) -> None:
        self.mac = mac
        self.gid = gid
        self._templates: dict[str, _Template] = {}

    def _template(self, opcode: str) -> _Template:
        template = self._templates.get(opcode)
        if template is None:
            template = self._templates[opcode] = self._build_template(opcode)
        return template

    def _build_template(self, opcode: str) -> _Template:
        op = opcodes.BY_NAME[opcode]
        packet = (
            Ether(src=self.mac.hex(":"), dst=BROADCAST.hex(":"))
            / IPv6(src=_text(self.gid), dst="::", hlim=64)
            / UDP(sport=UDP_SPORT_BASE, dport=rocev2.ROCEV2_PORT, chksum=0)
            / layers.BTH(opcode=op.code, icrc=0)
        )
        for ext in op.headers:
            packet = packet / layers.EXT_LAYERS[ext]()
        return _Template(bytes(packet)[: -rocev2.ICRC_LEN], rocev2.ext_offsets(op, rocev2.BTH_AT))

    def plain(
        self,
        dst_gid: bytes | str,
        opcode: str,
        pkey: int,
        dqpn: int,
        psn: int,
        payload: bytes,
        *,
        ackreq: bool = False,
        src_qp: int = 0,
        deth: tuple[int, int] | None = None,
        reth: tuple[int, int, int] | None = None,
        aeth: tuple[int, int] | None = None,
        dst_mac: bytes | None = None,
    ) -> bytes:
        """A mode-0 frame with final lengths and an empty ICRC slot: the input of ``transport.seal``.

        ``dst_mac``: where the peer's frames came from; only a tool naming a host by GID leaves it to
        :func:`mac_of`.
        """
        gid = gid_bytes(dst_gid)
        template = self._template(opcode)
        frame = bytearray(template.headers)
        frame[rocev2.DST_MAC_AT] = dst_mac or mac_of(gid)
        frame[rocev2.DST_GID_AT] = gid
        frame[rocev2.UDP_SPORT_AT] = (UDP_SPORT_BASE | (src_qp & 0x3FFF)).to_bytes(2, "big")
        pad = -len(payload) % 4
        rocev2.write_headers(frame, rocev2.BTH_AT, template.ext, pad=pad, pkey=pkey, dqpn=dqpn, psn=psn,
                             ackreq=ackreq, deth=deth, reth=reth, aeth=aeth)
        frame += payload
        frame += bytes(pad + rocev2.ICRC_LEN)
        rocev2.set_lengths(frame, rocev2.ETHER_LEN)
        return bytes(frame)

    def mad_frame(
        self, dst_gid: bytes | str, pkey: int, payload: bytes, dst_mac: bytes | None = None
    ) -> bytes:
        """A mode-0 UD SEND to QP1 carrying ``payload`` (a 256-byte MAD, with its auth trailer if any)."""
        frame = self.plain(
            dst_gid,
            "UD_SEND_ONLY",
            pkey,
            layers.GSI_QPN,
            0,
            payload,
            src_qp=layers.GSI_QPN,
            deth=(layers.GSI_QKEY, layers.GSI_QPN),
            dst_mac=dst_mac,
        )
        return transport.seal(frame, None, transport.Sender(transport.Mode.NONE))


def mac_of(gid: bytes | str) -> bytes:
    """The MAC a host named by ``gid`` is first tried at: the one its GUID was derived from (RoCE's
    convention, modified EUI-64), or broadcast if the GUID is not MAC-derived.

    For the first frame to a host a user names (a connect, a tool's target, the SM's configured GID); the
    agent answers a frame at the MAC it came from, never at one computed from a GID a frame claims.
    """
    guid = int.from_bytes(gid_bytes(gid)[8:], "big")
    try:
        return bytes.fromhex(addressing.guid_to_mac(guid).replace(":", ""))
    except ValueError:
        return BROADCAST


@functools.lru_cache(maxsize=4096)
def gid_bytes(gid: bytes | str) -> bytes:
    """A GID as its 16 bytes (cached: the data path names peers by text GID)."""
    return gid if isinstance(gid, bytes) else ipaddress.IPv6Address(gid).packed


def _text(gid: bytes) -> str:
    return str(ipaddress.IPv6Address(gid))
