"""RoCEv2 frames as bytes: the one module that knows where every header and field is (DESIGN sections 2-3).

A frame is Ethernet [/ VLAN] / IPv6 (the GRH) / UDP 4791 / BTH / extension headers / payload / ICRC.
:func:`locate` finds the headers and checks the length fields (what the ICRC and the transport need);
:func:`parse` also reads the fields a receiver decides on into a :class:`View` (addresses, MF, P_Key, QPN,
PSN, security mode, pad count, the DETH/RETH/AETH fields, the payload's place). A :class:`View` is a
located frame, so the receiver hands it on to :func:`ibsec.transport.open_frame` and the frame is located
once per receive. :func:`write_headers` patches the same fields into a frame being built (the template
builder of :mod:`ibsec.builder`), and the ``*_AT`` slices name the fields of an untagged frame for code that
rewrites them in place (a switch's MF, a forged source GID).

Received frames are taken apart here by offsets, not by Scapy: a dissection costs hundreds of
microseconds, a :class:`View` a few.
"""

from __future__ import annotations

import struct

from ibsec import addressing, opcodes

ETHER_LEN = 14
VLAN_LEN = 4
ETHERTYPE_IPV6 = 0x86DD
ETHERTYPE_VLAN = (0x8100, 0x88A8)
IPV6_LEN = 40
UDP_LEN = 8
ROCEV2_PORT = 4791
ICRC_LEN = 4
STH_LEN = 16
"""The secure transport header of modes 2-4 (one 16-byte tag)."""
BTH_MODE_BYTE = 8
"""BTH byte 8: AckReq(1) Resv7(7), whose top three bits carry the security mode."""
MODE_SHIFT = 4
"""The security mode: the top three of BTH byte 8's seven reserved bits."""
IP_SRC, IP_DST = 8, 24
"""Offsets of the source and destination GIDs inside the IPv6 header."""
UDP_NEXT_HEADER = 17

# Fields of an untagged frame (what the agent, the attack tools and the tests build), as slices.
DST_MAC_AT = slice(0, 6)
SRC_MAC_AT = slice(6, 12)
ETHERTYPE_AT = slice(12, 14)
_IP = ETHER_LEN
SRC_GID_AT = slice(_IP + IP_SRC, _IP + IP_SRC + 16)
DST_GID_AT = slice(_IP + IP_DST, _IP + IP_DST + 16)
_UDP = _IP + IPV6_LEN
UDP_SPORT_AT = slice(_UDP, _UDP + 2)
UDP_DPORT_AT = slice(_UDP + 2, _UDP + 4)
UDP_CHECKSUM_AT = slice(_UDP + 6, _UDP + 8)
BTH_AT = _UDP + UDP_LEN
"""Offset of the BTH in an untagged frame."""
PKEY_AT = slice(BTH_AT + 2, BTH_AT + 4)
PSN_AT = slice(BTH_AT + 9, BTH_AT + 12)
MAD_AT = BTH_AT + opcodes.BTH_LEN + opcodes.Ext.DETH.length
"""Where the MAD starts in an untagged UD SEND to QP1 (BTH, DETH, then the MAD)."""

_ROCEV2_PORT_BYTES = ROCEV2_PORT.to_bytes(2, "big")
_ETHERTYPE_IPV6_BYTES = ETHERTYPE_IPV6.to_bytes(2, "big")


class WireError(ValueError):
    """Base of every error about a frame's bytes; messages name fields and offsets, never key bytes."""


class Malformed(WireError):
    """The frame is not a well-formed RoCEv2-over-IPv6 frame (or its length fields disagree with it)."""


class FrameError(Malformed):
    """A frame that is RoCEv2 (IPv6, UDP 4791) but whose headers are broken: a receiver counts it as
    malformed, where a frame that is no RoCEv2 at all is only ignored."""


class RoceFrame:
    """Offsets of the headers inside a RoCEv2 frame whose lengths :func:`locate` checked.

    The opcode and the end of H are looked up on first use: a frame that is only checksummed (a switch's
    output in a test, say) may carry an opcode this library does not know.
    """

    __slots__ = ("data", "ip", "udp", "bth", "_opcode", "_end")

    def __init__(self, data: bytes, ip: int) -> None:
        self.data = data
        self.ip = ip
        """Offset of the IPv6 header."""
        self.udp = ip + IPV6_LEN
        """Offset of the UDP header."""
        self.bth = ip + IPV6_LEN + UDP_LEN
        """Offset of the BTH."""
        self._opcode: opcodes.Opcode | None = None
        self._end = 0

    @property
    def opcode(self) -> opcodes.Opcode:
        """The BTH opcode's table entry; :class:`Malformed` for reserved or unsupported codes."""
        if self._opcode is None:
            try:
                self._opcode = opcodes.lookup(self.data[self.bth])
            except opcodes.UnknownOpcode as err:
                raise Malformed(str(err)) from None
        return self._opcode

    @property
    def headers_end(self) -> int:
        """Offset just past H (the BTH and the extension headers its opcode calls for)."""
        if not self._end:
            opcode = self.opcode
            end = self.bth + _HEADER_LENGTHS[opcode.code]
            if end > len(self.data) - ICRC_LEN:
                raise Malformed(f"{opcode.name} needs {opcode.header_length} header bytes: too short")
            self._end = end
        return self._end

    @property
    def psn(self) -> int:
        """The 24-bit PSN on the wire."""
        return int.from_bytes(self.data[self.bth + 9:self.bth + 12], "big")

    @property
    def pad_count(self) -> int:
        """BTH PadCnt: pad bytes at the end of the payload."""
        return (self.data[self.bth + 1] >> 4) & 0x3

    @property
    def mode_byte(self) -> int:
        """BTH byte 8: AckReq, the security mode, the reserved bits below it."""
        return self.data[self.bth + BTH_MODE_BYTE]

    @property
    def src_gid(self) -> bytes:
        """The GRH's source GID."""
        return self.data[self.ip + IP_SRC:self.ip + IP_SRC + 16]

    @property
    def dst_gid(self) -> bytes:
        """The GRH's destination GID, MF as received."""
        return self.data[self.ip + IP_DST:self.ip + IP_DST + 16]

    @property
    def dqpn(self) -> int:
        """The BTH destination QP."""
        return int.from_bytes(self.data[self.bth + 5:self.bth + 8], "big")

    def ext_offset(self, ext: opcodes.Ext) -> int:
        """Offset of extension header ``ext`` (which the opcode must call for)."""
        return self.bth + _EXT_OFFSETS[self.opcode.code][ext]


_HEADER_LENGTHS = {code: opcode.header_length for code, opcode in opcodes.OPCODES.items()}
"""Bytes of H per opcode, summed once (looked up per packet)."""
_EXT_OFFSETS = {code: {ext: opcodes.BTH_LEN + sum(e.length for e in op.headers[:index])
                        for index, ext in enumerate(op.headers)}
                 for code, op in opcodes.OPCODES.items()}
"""Offset of each extension header from the BTH, per opcode."""


def _checked_ip(frame: bytes) -> int:
    """The IPv6 header's offset in a RoCEv2 frame whose IPv6 and UDP lengths match its size.

    Accepts up to two VLAN tags; refuses IPv6 extension headers (RoCEv2 uses none) and frames whose
    length fields disagree with the bytes, so nothing downstream works on a half-parsed frame.
    """
    offset = ETHER_LEN - 2
    ethertype = _u16(frame, offset)
    for _ in range(2):
        if ethertype not in ETHERTYPE_VLAN:
            break
        offset += VLAN_LEN
        ethertype = _u16(frame, offset)
    if ethertype != ETHERTYPE_IPV6:
        raise Malformed(f"ethertype {ethertype:#06x} is not IPv6")
    ip = offset + 2
    if len(frame) < ip + IPV6_LEN + UDP_LEN + opcodes.BTH_LEN + ICRC_LEN:
        raise Malformed(f"frame of {len(frame)} bytes is too short for IPv6/UDP/BTH/ICRC")
    first, ip_length, next_header, port, udp_length = _IPV6_UDP_FIELDS.unpack_from(frame, ip)
    if first >> 4 != 6:
        raise Malformed(f"IP version {first >> 4} is not 6")
    if next_header != UDP_NEXT_HEADER:
        raise Malformed(f"IPv6 next header {next_header} is not UDP")
    if port != ROCEV2_PORT:
        raise Malformed(f"UDP destination port {port} is not RoCEv2 ({ROCEV2_PORT})")
    payload_len = len(frame) - ip - IPV6_LEN
    if ip_length != payload_len or udp_length != payload_len:
        raise Malformed(f"IPv6 payload length {ip_length} / UDP length {udp_length} disagree with the "
                        f"{payload_len} bytes after IPv6")
    return ip


_IPV6_UDP_FIELDS = struct.Struct("!B3xHB35xHH")
"""IPv6 version byte, payload length, next header; UDP destination port and length."""


def locate(frame: bytes) -> RoceFrame:
    """Find the headers of a RoCEv2 frame; :class:`Malformed` if it is none or its lengths disagree."""
    return RoceFrame(frame, _checked_ip(frame))


class View(RoceFrame):
    """A received frame located and read: what a receiver decides on before it opens the payload."""

    __slots__ = ("opcode_name", "service", "src_mac", "pkey", "mode", "ackreq", "deth", "reth", "aeth",
                 "payload_length", "_dst_gid", "_dqpn", "_psn")

    def __init__(self, data: bytes, ip: int) -> None:
        super().__init__(data, ip)
        bth = self.bth
        op = self.opcode
        end = self.headers_end
        offsets = _EXT_OFFSETS[op.code]
        byte8 = data[bth + BTH_MODE_BYTE]
        self.opcode_name = op.name
        self.service = op.service.name
        self.src_mac = data[6:12]
        self._dst_gid = data[ip + IP_DST:ip + IP_DST + 16]
        self.pkey: int = _U16.unpack_from(data, bth + 2)[0]
        self._dqpn = int.from_bytes(data[bth + 5:bth + 8], "big")
        self._psn = int.from_bytes(data[bth + 9:bth + 12], "big")
        self.mode = (byte8 >> MODE_SHIFT) & 0x7
        self.ackreq = bool(byte8 & 0x80)
        self.deth: tuple[int, int] | None = None
        """(Q_Key, source QP)"""
        self.reth: tuple[int, int, int] | None = None
        """(virtual address, R_Key, DMA length)"""
        self.aeth: tuple[int, int] | None = None
        """(syndrome, MSN)"""
        if offsets:
            at = offsets.get(opcodes.Ext.DETH)
            if at is not None:
                qkey, src = _DETH.unpack_from(data, bth + at)
                self.deth = (qkey, src & 0xFFFFFF)
            at = offsets.get(opcodes.Ext.RETH)
            if at is not None:
                self.reth = _RETH.unpack_from(data, bth + at)
            at = offsets.get(opcodes.Ext.AETH)
            if at is not None:
                word = _U32.unpack_from(data, bth + at)[0]
                self.aeth = (word >> 24, word & 0xFFFFFF)
        # the ICRC, or in mode 1 the 4-byte tag in its place; modes 2-4 add the STH. Reserved modes 5-7
        # are left to the receiver, which drops them as a mode it does not use.
        trailer = ICRC_LEN + (STH_LEN if self.mode in (2, 3, 4) else 0)
        self.payload_length = len(data) - end - trailer - self.pad_count
        """Bytes of payload the opcode carries, without pad, STH and tag."""
        if self.payload_length < 0:
            raise FrameError(f"{op.name}: {len(data)} bytes cannot hold mode {self.mode} trailer and padding")

    @property
    def dst_gid(self) -> bytes:
        return self._dst_gid

    @property
    def dqpn(self) -> int:
        return self._dqpn

    @property
    def psn(self) -> int:
        return self._psn

    @property
    def mf(self) -> int:
        """The marking field of the destination GID as received."""
        return addressing.mf_get(self._dst_gid)

    @property
    def payload_offset(self) -> int:
        """Where the payload (in modes 2-4 after the STH) starts."""
        return self.headers_end + (STH_LEN if self.mode in (2, 3, 4) else 0)

    @property
    def payload(self) -> bytes:
        """The payload as it travels (ciphertext in modes 1 and 2), without pad, STH and tag."""
        start = self.payload_offset
        return self.data[start:start + self.payload_length]


_U16 = struct.Struct("!H")
_U32 = struct.Struct("!I")
_DETH = struct.Struct("!II")
_RETH = struct.Struct("!QII")


def parse(frame: bytes) -> View | None:
    """The :class:`View` of an untagged RoCEv2 frame; None for anything that is not RoCEv2 (to be ignored,
    not counted). Raises :class:`FrameError` for a RoCEv2 frame whose headers are broken."""
    if frame[12:14] != _ETHERTYPE_IPV6_BYTES:
        return None
    try:
        return View(frame, _checked_ip(frame))
    except FrameError:
        raise
    except Malformed as exc:
        if is_rocev2(frame):
            raise FrameError(str(exc)) from None
        return None


def is_rocev2(frame: bytes) -> bool:
    """An untagged IPv6 frame with a UDP header to port 4791, whatever its lengths and the rest say."""
    return (len(frame) >= BTH_AT and frame[ETHERTYPE_AT] == _ETHERTYPE_IPV6_BYTES
            and frame[_IP + 6] == UDP_NEXT_HEADER and to_rocev2_port(frame))


def to_rocev2_port(frame: bytes) -> bool:
    """The bytes where an untagged frame's UDP destination port lies say 4791: how a capture picks out
    RoCEv2 frames without checking anything else."""
    return frame[UDP_DPORT_AT] == _ROCEV2_PORT_BYTES


def set_lengths(frame: bytearray, ip: int, payload_len: int | None = None) -> None:
    """Make the IPv6 payload length and the UDP length count every byte after the IPv6 header.

    ``payload_len`` gives that count for a frame still being built (its headers only, say).
    """
    if payload_len is None:
        payload_len = len(frame) - ip - IPV6_LEN
    if payload_len > 0xFFFF:
        raise Malformed(f"{payload_len} bytes after IPv6 do not fit a 16-bit length")
    struct.pack_into("!H", frame, ip + 4, payload_len)
    struct.pack_into("!H", frame, ip + IPV6_LEN + 4, payload_len)


def ext_offsets(opcode: opcodes.Opcode, bth: int) -> dict[opcodes.Ext, int]:
    """Offset of each extension header ``opcode`` calls for, in a frame whose BTH is at ``bth``."""
    return {ext: bth + at for ext, at in _EXT_OFFSETS[opcode.code].items()}


def write_headers(
    frame: bytearray,
    bth: int,
    ext: dict[opcodes.Ext, int],
    *,
    pad: int,
    pkey: int,
    dqpn: int,
    psn: int,
    ackreq: bool = False,
    deth: tuple[int, int] | None = None,
    reth: tuple[int, int, int] | None = None,
    aeth: tuple[int, int] | None = None,
) -> None:
    """Patch the BTH (PadCnt, P_Key, destination QP, AckReq with mode 0, PSN) and the DETH, RETH and AETH
    fields given into a frame being built; ``ext`` is :func:`ext_offsets` of its opcode."""
    frame[bth + 1] = (frame[bth + 1] & 0xCF) | (pad << 4)
    frame[bth + 2:bth + 4] = pkey.to_bytes(2, "big")
    frame[bth + 5:bth + 8] = (dqpn & 0xFFFFFF).to_bytes(3, "big")
    frame[bth + BTH_MODE_BYTE] = 0x80 if ackreq else 0
    frame[bth + 9:bth + 12] = (psn & 0xFFFFFF).to_bytes(3, "big")
    if deth is not None:
        _DETH.pack_into(frame, ext[opcodes.Ext.DETH], deth[0], deth[1] & 0xFFFFFF)
    if reth is not None:
        _RETH.pack_into(frame, ext[opcodes.Ext.RETH], *reth)
    if aeth is not None:
        _U32.pack_into(frame, ext[opcodes.Ext.AETH], (aeth[0] << 24) | aeth[1])


def _u16(data: bytes, offset: int) -> int:
    if offset + 2 > len(data):
        raise Malformed(f"frame of {len(data)} bytes ends before offset {offset + 2}")
    return int(_U16.unpack_from(data, offset)[0])
