"""RoCEv2 frames as bytes: where the headers are, the masked headers, and the ICRC (DESIGN section 3).

The invariant CRC covers, in order: 8 bytes of ones standing for the LRH that RoCEv2 does not carry; the
IPv6 header (the GRH) with traffic class, flow label and hop limit as ones and, for destinations in
fe80::/10 or fec0::/10, the 38 MF bits as zeros; the UDP header with its checksum as ones; the BTH with
byte 4 (FECN, BECN, reserved) as ones; then everything after the BTH up to the ICRC. The CRC is the
IEEE CRC-32 (``zlib.crc32``) and travels least significant byte first, as ``scapy.contrib.roce`` and the
Linux rxe driver write it.

The same masked header bytes, cut at the end of the transport headers H, are the GCM associated data of
the secure transport modes, so both live here.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

from ibsec import opcodes
from ibsec.addressing import LINK_LOCAL_PREFIX, MF_MASK, PREFIX_BITS, SITE_LOCAL_PREFIX

ETHER_LEN = 14
VLAN_LEN = 4
ETHERTYPE_IPV6 = 0x86DD
ETHERTYPE_VLAN = (0x8100, 0x88A8)
IPV6_LEN = 40
UDP_LEN = 8
ROCEV2_PORT = 4791
ICRC_LEN = 4
LRH_ONES = b"\xff" * 8
"""What stands for the LRH that RoCEv2 frames do not carry."""


class WireError(ValueError):
    """Base of every error about a frame's bytes; messages name fields and offsets, never key bytes."""


class Malformed(WireError):
    """The frame is not a well-formed RoCEv2-over-IPv6 frame (or its length fields disagree with it)."""


@dataclass(frozen=True)
class RoceFrame:
    """Offsets of the headers inside a RoCEv2 frame (Ethernet [/ VLAN] / IPv6 / UDP 4791 / BTH ...)."""

    data: bytes
    ip: int
    """Offset of the IPv6 header."""
    udp: int = field(init=False)
    """Offset of the UDP header."""
    bth: int = field(init=False)
    """Offset of the BTH."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "udp", self.ip + IPV6_LEN)
        object.__setattr__(self, "bth", self.ip + IPV6_LEN + UDP_LEN)

    @property
    def opcode(self) -> opcodes.Opcode:
        """The BTH opcode's table entry; :class:`Malformed` for reserved or unsupported codes."""
        try:
            return opcodes.lookup(self.data[self.bth])
        except opcodes.UnknownOpcode as err:
            raise Malformed(str(err)) from None

    @property
    def headers_end(self) -> int:
        """Offset just past H (the BTH and the extension headers its opcode calls for)."""
        opcode = self.opcode
        end = self.bth + _HEADER_LENGTHS[opcode.code]
        if end > len(self.data) - ICRC_LEN:
            raise Malformed(f"{opcode.name} needs {opcode.header_length} header bytes: too short")
        return end

    @property
    def psn(self) -> int:
        """The 24-bit PSN on the wire."""
        return int.from_bytes(self.data[self.bth + 9:self.bth + 12], "big")

    @property
    def pad_count(self) -> int:
        """BTH PadCnt: pad bytes at the end of the payload."""
        return (self.data[self.bth + 1] >> 4) & 0x3


_HEADER_LENGTHS = {code: opcode.header_length for code, opcode in opcodes.OPCODES.items()}
"""Bytes of H per opcode, summed once (properties look them up per packet)."""


def locate(frame: bytes) -> RoceFrame:
    """Find the headers of a RoCEv2 frame and check its IPv6 and UDP lengths against its size.

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
    found = RoceFrame(frame, offset + 2)
    if len(frame) < found.bth + opcodes.BTH_LEN + ICRC_LEN:
        raise Malformed(f"frame of {len(frame)} bytes is too short for IPv6/UDP/BTH/ICRC")
    first, ip_length, next_header, port, udp_length = _IPV6_UDP_FIELDS.unpack_from(frame, found.ip)
    if first >> 4 != 6:
        raise Malformed(f"IP version {first >> 4} is not 6")
    if next_header != 17:
        raise Malformed(f"IPv6 next header {next_header} is not UDP")
    if port != ROCEV2_PORT:
        raise Malformed(f"UDP destination port {port} is not RoCEv2 ({ROCEV2_PORT})")
    payload_len = len(frame) - found.udp
    if ip_length != payload_len or udp_length != payload_len:
        raise Malformed(f"IPv6 payload length {ip_length} / UDP length {udp_length} disagree with the "
                        f"{payload_len} bytes after IPv6")
    return found


_IPV6_UDP_FIELDS = struct.Struct("!B3xHB35xHH")
"""IPv6 version byte, payload length, next header; UDP destination port and length."""


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


def masked(frame: RoceFrame, end: int) -> bytes:
    """The ICRC's view of ``frame.data[ip:end]``, preceded by the LRH's 8 bytes of ones.

    ``end`` = :attr:`RoceFrame.headers_end` gives the masked headers (the GCM associated data);
    ``end`` = the ICRC's offset gives everything the ICRC covers.
    """
    return masked_bytes(frame.data, frame.ip, end)


def masked_bytes(data: bytes | bytearray, ip: int, end: int) -> bytes:
    """:func:`masked` for a frame given as its bytes and the IPv6 header's offset in them (so a sender can
    mask a frame it is still building). ``end`` must lie past BTH byte 4.

    Every variant bit lies in the first :data:`_VARIANT_SPAN` bytes from the IPv6 header on, so those are
    masked as one integer and the rest is copied as it is.
    """
    head = int.from_bytes(data[ip:ip + _VARIANT_SPAN], "big") | _VARIANT_ONES
    if (data[ip + _DST] << 8 | data[ip + _DST + 1]) >> (16 - PREFIX_BITS) in _MARKABLE_PREFIXES:
        head &= _MF_AS_ZEROS
    return LRH_ONES + head.to_bytes(_VARIANT_SPAN, "big") + data[ip + _VARIANT_SPAN:end]


def _variant_ones() -> int:
    """Traffic class, flow label, hop limit, UDP checksum and BTH byte 4 as ones, over the variant span."""
    ones = bytearray(_VARIANT_SPAN)
    ones[0] = 0x0F  # traffic class (high nibble) ...
    ones[1:4] = b"\xff\xff\xff"  # ... rest of traffic class and flow label
    ones[7] = 0xFF  # hop limit
    ones[IPV6_LEN + 6:IPV6_LEN + 8] = b"\xff\xff"  # UDP checksum
    ones[IPV6_LEN + UDP_LEN + 4] = 0xFF  # BTH byte 4: FECN, BECN, reserved
    return int.from_bytes(ones, "big")


_VARIANT_SPAN = IPV6_LEN + UDP_LEN + 5
"""IPv6, UDP and BTH bytes 0-4: where every bit the ICRC masks lies."""
_VARIANT_ONES = _variant_ones()
_DST = 24
"""Offset of the destination address in the IPv6 header."""
_MF_AS_ZEROS = ~(MF_MASK << 8 * (_VARIANT_SPAN - _DST - 16))
_MARKABLE_PREFIXES = frozenset({SITE_LOCAL_PREFIX, LINK_LOCAL_PREFIX})
"""Destinations whose MF bits are variant (``addressing.is_markable``), by their top 10 bits."""


def compute(frame: RoceFrame, masked_headers: bytes | None = None) -> bytes:
    """The 4 ICRC bytes (wire order) for everything before the frame's last 4 bytes.

    ``masked_headers``, if given, is ``masked(frame, end)`` for some ``end`` (e.g. the GCM associated data
    already computed): the CRC continues from it instead of masking the headers again.
    """
    return compute_bytes(frame.data, frame.ip, masked_headers)


def compute_bytes(data: bytes | bytearray, ip: int, masked_headers: bytes | None = None) -> bytes:
    """:func:`compute` for a frame given as its bytes and the IPv6 header's offset in them."""
    if masked_headers is None:  # only the headers up to the BTH have variant bits
        masked_headers = masked_bytes(data, ip, ip + IPV6_LEN + UDP_LEN + opcodes.BTH_LEN)
    end = ip + len(masked_headers) - len(LRH_ONES)
    crc = zlib.crc32(memoryview(data)[end:len(data) - ICRC_LEN], zlib.crc32(masked_headers))
    return crc.to_bytes(4, "little")


def verify(frame: bytes) -> bool:
    """True if the frame's last 4 bytes are its ICRC."""
    found = locate(frame)
    return frame[-ICRC_LEN:] == compute(found)


def with_icrc(frame: bytes) -> bytes:
    """``frame`` with its last 4 bytes replaced by the ICRC (e.g. after a switch or a test changed it)."""
    return frame[:-ICRC_LEN] + compute(locate(frame))


def _u16(data: bytes, offset: int) -> int:
    if offset + 2 > len(data):
        raise Malformed(f"frame of {len(data)} bytes ends before offset {offset + 2}")
    return int(struct.unpack_from("!H", data, offset)[0])
