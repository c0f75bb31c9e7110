"""Frames on the agent's fast path: a header view for receiving, templates patched per packet for sending.

Receiving: :func:`parse` finds the headers with the wire library (``ibsec.icrc.locate``, the opcode table)
and reads the few fields the adapter decides on; the payload is only touched by the transport's open.
Sending: Scapy builds the headers once per opcode and the result is cached; per packet the destination
(MAC, GID), UDP source port, P_Key, QPN, PSN, the DETH/RETH/AETH fields and the payload are patched in, then
``ibsec.transport.seal`` finishes the frame in the connection's mode (mode 0: lengths and ICRC, no crypto
call). That keeps Scapy's per-packet cost (hundreds of microseconds) off the data path while every header
still comes from the real layers.
"""

from __future__ import annotations

import functools
import ipaddress
import struct
from dataclasses import dataclass

from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from ibsec import addressing, icrc, layers, opcodes, transport

from .qp import Security

MODES = frozenset(int(m) for m in transport.Mode)
MODE_SHIFT = 4  # security mode: the top three of BTH byte 8's seven reserved bits
UDP_SPORT_BASE = 0xC000  # RoCEv2 source ports carry flow entropy; we use 0xC000 | QPN's low 14 bits
ACK_SYNDROME = 0x00  # AETH syndrome of a positive ACK
BROADCAST = b"\xff" * 6
SERVICES = {"RC": opcodes.Service.RC, "UD": opcodes.Service.UD}


class FrameError(ValueError):
    """A frame the agent cannot take apart (counted as malformed)."""


@dataclass(frozen=True)
class View:
    """What the adapter reads from a received frame before it decides what to do with it."""

    data: bytes
    located: icrc.RoceFrame
    opcode_name: str
    service: str
    src_mac: bytes
    src_gid: bytes
    dst_gid: bytes
    pkey: int
    dqpn: int
    psn: int
    mode: int
    ackreq: bool
    deth: tuple[int, int] | None  # (Q_Key, source QP)
    reth: tuple[int, int, int] | None  # (virtual address, R_Key, DMA length)
    aeth: tuple[int, int] | None  # (syndrome, MSN)
    payload_length: int  # bytes of payload the opcode carries, without pad, STH and tag

    @property
    def mf(self) -> int:
        """The marking field of the destination GID as received."""
        return addressing.mf_get(self.dst_gid)


def parse(frame: bytes) -> View | None:
    """The header view of a RoCEv2 frame; None for anything that is not RoCEv2 (ignored, not counted).

    Raises :class:`FrameError` for a RoCEv2 frame whose headers are broken.
    """
    if len(frame) < 14 or frame[12:14] != b"\x86\xdd":
        return None
    try:
        located = icrc.locate(frame)
        op = located.opcode
        end = located.headers_end
    except icrc.Malformed as exc:
        if len(frame) >= 62 and frame[20] == 17 and frame[56:58] == b"\x12\xb7":
            raise FrameError(str(exc)) from None
        return None
    bth = located.bth
    byte8 = frame[bth + 8]
    mode = (byte8 >> MODE_SHIFT) & 0x7
    fields: dict[opcodes.Ext, int] = {}
    offset = bth + opcodes.BTH_LEN
    for ext in op.headers:
        fields[ext] = offset
        offset += ext.length
    deth = reth = aeth = None
    if opcodes.Ext.DETH in fields:
        qkey, src = struct.unpack_from("!II", frame, fields[opcodes.Ext.DETH])
        deth = (qkey, src & 0xFFFFFF)
    if opcodes.Ext.RETH in fields:
        reth = struct.unpack_from("!QII", frame, fields[opcodes.Ext.RETH])
    if opcodes.Ext.AETH in fields:
        word = struct.unpack_from("!I", frame, fields[opcodes.Ext.AETH])[0]
        aeth = (word >> 24, word & 0xFFFFFF)
    # the ICRC, or in mode 1 the 4-byte tag in its place; modes 2-4 add the STH. Reserved modes 5-7
    # are left to the adapter, which drops them as a mode the QP does not use (``bad_mode``).
    trailer = icrc.ICRC_LEN + (transport.STH_LEN if mode in (2, 3, 4) else 0)
    payload_length = len(frame) - end - trailer - located.pad_count
    if payload_length < 0:
        raise FrameError(f"{op.name}: {len(frame)} bytes cannot hold mode {mode} trailer and padding")
    ip = located.ip
    return View(
        frame,
        located,
        op.name,
        op.service.name,
        frame[6:12],
        frame[ip + 8 : ip + 24],
        frame[ip + 24 : ip + 40],
        struct.unpack_from("!H", frame, bth + 2)[0],
        int.from_bytes(frame[bth + 5 : bth + 8], "big"),
        located.psn,
        mode,
        bool(byte8 & 0x80),
        deth,
        reth,
        aeth,
        payload_length,
    )


@dataclass(frozen=True)
class _Template:
    headers: bytes  # Ethernet .. last extension header, mode 0; addresses and fields get patched
    bth: int  # offset of the BTH
    ext: dict[opcodes.Ext, int]  # offset of each extension header


DST_MAC = slice(0, 6)
DST_GID = slice(icrc.ETHER_LEN + 24, icrc.ETHER_LEN + 40)
UDP_SPORT = slice(icrc.ETHER_LEN + icrc.IPV6_LEN, icrc.ETHER_LEN + icrc.IPV6_LEN + 2)


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
            / UDP(sport=UDP_SPORT_BASE, dport=icrc.ROCEV2_PORT, chksum=0)
            / layers.BTH(opcode=op.code, icrc=0)
        )
        for ext in op.headers:
            packet = packet / layers.EXT_LAYERS[ext]()
        raw = bytes(packet)[: -icrc.ICRC_LEN]
        bth = icrc.ETHER_LEN + icrc.IPV6_LEN + icrc.UDP_LEN
        offsets, offset = {}, bth + opcodes.BTH_LEN
        for ext in op.headers:
            offsets[ext] = offset
            offset += ext.length
        return _Template(raw, bth, offsets)

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
        frame[DST_MAC] = dst_mac or mac_of(gid)
        frame[DST_GID] = gid
        frame[UDP_SPORT] = (UDP_SPORT_BASE | (src_qp & 0x3FFF)).to_bytes(2, "big")
        pad = -len(payload) % 4
        bth = template.bth
        frame[bth + 1] = (frame[bth + 1] & 0xCF) | (pad << 4)
        frame[bth + 2 : bth + 4] = pkey.to_bytes(2, "big")
        frame[bth + 5 : bth + 8] = (dqpn & 0xFFFFFF).to_bytes(3, "big")
        frame[bth + 8] = 0x80 if ackreq else 0
        frame[bth + 9 : bth + 12] = (psn & 0xFFFFFF).to_bytes(3, "big")
        if deth is not None:
            struct.pack_into("!II", frame, template.ext[opcodes.Ext.DETH], deth[0], deth[1] & 0xFFFFFF)
        if reth is not None:
            struct.pack_into("!QII", frame, template.ext[opcodes.Ext.RETH], *reth)
        if aeth is not None:
            struct.pack_into("!I", frame, template.ext[opcodes.Ext.AETH], (aeth[0] << 24) | aeth[1])
        frame += payload
        frame += bytes(pad + icrc.ICRC_LEN)
        icrc.set_lengths(frame, icrc.ETHER_LEN)
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


def seal(frame: bytes, security: Security, key: bytes | None) -> bytes:
    """Seal a :meth:`Builder.plain` frame in the connection's mode under ``key`` (None in mode 0)."""
    assert security.sender is not None
    return transport.seal(frame, key, security.sender)


def new_security(
    mode: int,
    key: bytes | None,
    cache_id: tuple[int, int] | None,
    service: str,
    tx_n0: bytes,
    rx_n0: bytes,
    initiator: bool,
    local_psn: int,
    remote_psn: int,
) -> Security:
    """The transport state of a new connection: our direction bit is 0 if we initiated it.

    Requests from the peer start at its PSN; the responses (ACKs) we receive carry our own PSNs.
    """
    tx_direction = 0 if initiator else 1
    tmode = transport.Mode(mode)
    svc = SERVICES[service]
    return Security(
        mode,
        key if mode else None,
        cache_id if mode else None,
        sender=transport.Sender(tmode, tx_n0, tx_direction),
        requests=transport.Receiver(tmode, svc, rx_n0, 1 - tx_direction, remote_psn),
        responses=transport.Receiver(tmode, svc, rx_n0, 1 - tx_direction, local_psn),
    )


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
